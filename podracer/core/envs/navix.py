"""NAVIX grid worlds (``navix:NAME``) as podracer :class:`~podracer.core.envs.base.Environment` s.

NAVIX reimplements MiniGrid in JAX. A name is NAVIX's id (``navix:Navix-Empty-5x5-v0``) or its middle part
(``navix:Empty-5x5``). NAVIX keeps termination (reaching the goal, falling into lava) and truncation (its
``max_steps``, 100 by default; a keyword argument changes it) apart, as podracer does; its ``step`` would reset
after an episode's end, but podracer's :class:`~podracer.core.envs.wrappers.AutoReset` resets first, so the last
time step is the episode's own. The agent sees NAVIX's default symbolic observation, MiniGrid's
``[H, W, 3]`` (object, colour, state) codes, declared as a channels-last board so ``--torso auto`` gives it
the board torso; NAVIX has no legal-action masks (every action is always allowed).
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from podracer.core.envs.base import check_task, first_timestep, require_package, step_timestep
from podracer.core.types import EnvSpec, ImageLayout, TimeStep

TRUNCATION, TERMINATION = 1, 2  # navix.StepType


def require() -> None:
    """A one-line error naming the extra when navix is not installed."""
    require_package("navix", "navix")


def names() -> list[str]:
    """NAVIX's registered environments."""
    require()
    import navix

    return sorted(navix.registry())


def make(name: str, **kwargs) -> NavixEnv:
    """``navix:NAME`` (:func:`podracer.envs.make` calls this)."""
    return NavixEnv(name, **kwargs)


class NavixEnv:
    """``navix.make(name, **kwargs)`` behind podracer's environment protocol (``env``: a NAVIX environment, used as
    it is). The state is NAVIX's own ``Timestep``."""

    def __init__(self, name: str, *, env=None, **kwargs):
        require()
        if env is None:
            import navix

            known = navix.registry()
            full = name if name in known else f"Navix-{name}-v0"
            check_task("navix", full if full in known else name, known)
            env = navix.make(full, **kwargs)
            name = full
        self.name, self.env = name, env
        space = env.observation_space
        self._obs = jax.ShapeDtypeStruct(tuple(space.shape), jnp.float32)
        self._high = float(jnp.max(space.maximum))
        self._num_actions = int(env.action_space.maximum) + 1

    def spec(self) -> EnvSpec:
        image = ImageLayout(channel_axis=-1, low=0.0, high=self._high) if len(self._obs.shape) == 3 else None
        return EnvSpec(observation=self._obs, num_actions=self._num_actions, image=image)

    def reset(self, key: chex.PRNGKey) -> tuple[Any, TimeStep]:
        timestep = self.env.reset(key)
        return timestep, first_timestep(timestep.observation.astype(jnp.float32))

    def step(self, state: Any, action: chex.Array) -> tuple[Any, TimeStep]:
        timestep = self.env.step(state, action.astype(jnp.int32))
        return timestep, step_timestep(
            timestep.observation.astype(jnp.float32),
            timestep.reward,
            terminated=timestep.step_type == TERMINATION,
            truncated=timestep.step_type == TRUNCATION,
        )
