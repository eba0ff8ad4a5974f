"""XLand-MiniGrid environments (``xminigrid:NAME``) as podracer :class:`~podracer.core.envs.base.Environment` s.

xminigrid's ``step`` does not reset (podracer's :class:`~podracer.core.envs.wrappers.AutoReset`
starts the next episode) and already keeps termination and truncation apart: a ``LAST``
step with discount 0 reached the goal; one with discount 1 hit ``max_steps``.

The agent sees xminigrid's egocentric view, ``[V, V, 2]`` integers per cell (tile kind,
colour), one-hot encoded as a channels-last 0/1 board ``[V, V, 13 + 12]``: ids are
categories, not magnitudes. ``--torso auto`` gives it the board torso. Keyword arguments
replace fields of the environment's parameters (``view_size``, ``max_steps``, ...). The
XLand tasks run with xminigrid's default (empty) ruleset; a benchmark's rulesets come from
``xminigrid.load_benchmark``, which downloads them: pass ``params`` with one set.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from podracer.core.envs.base import check_task, first_timestep, require_package, step_timestep
from podracer.core.types import EnvSpec, ImageLayout, TimeStep


def require() -> None:
    """A one-line error naming the extra when xminigrid is not installed."""
    require_package("xminigrid", "xminigrid")


def names() -> list[str]:
    """xminigrid's registered environments."""
    require()
    import xminigrid

    return list(xminigrid.registered_environments())


def make(name: str, **kwargs) -> "XMinigridEnv":
    """``xminigrid:NAME`` (:func:`podracer.envs.make` calls this)."""
    return XMinigridEnv(name, **kwargs)


class XMinigridEnv:
    """``xminigrid.make(name, **kwargs)`` behind podracer's environment protocol (``env`` and ``params``: an
    xminigrid environment and its parameters, used as they are). The state is xminigrid's own ``TimeStep``."""

    def __init__(self, name: str, *, env=None, params=None, **kwargs):
        require()
        from xminigrid.core.constants import NUM_COLORS, NUM_TILES

        if env is None:
            import xminigrid

            check_task("xminigrid", name, xminigrid.registered_environments())
            env, default = xminigrid.make(name, **kwargs)
            params = default if params is None else params
        self.name, self.env, self.params = name, env, params if params is not None else env.default_params()
        self._sizes = (NUM_TILES, NUM_COLORS)

    def spec(self) -> EnvSpec:
        view = int(self.params.view_size)
        observation = jax.ShapeDtypeStruct((view, view, sum(self._sizes)), jnp.float32)
        return EnvSpec(
            observation,
            num_actions=int(self.env.num_actions(self.params)),
            image=ImageLayout(channel_axis=-1, low=0.0, high=1.0),
        )

    def _observe(self, grid: chex.Array) -> chex.Array:
        """xminigrid's ``[V, V, 2]`` (tile, colour) ids as one-hot channels, float32 ``[V, V, tiles + colours]``."""
        tiles, colours = self._sizes
        return jnp.concatenate([jax.nn.one_hot(grid[..., 0], tiles), jax.nn.one_hot(grid[..., 1], colours)], axis=-1)

    def reset(self, key: chex.PRNGKey) -> tuple[Any, TimeStep]:
        timestep = self.env.reset(self.params, key)
        return timestep, first_timestep(self._observe(timestep.observation))

    def step(self, state: Any, action: chex.Array) -> tuple[Any, TimeStep]:
        timestep = self.env.step(self.params, state, action)
        last = timestep.step_type == 2  # xminigrid.types.StepType.LAST
        terminated = jnp.logical_and(last, timestep.discount == 0.0)
        return timestep, step_timestep(self._observe(timestep.observation), timestep.reward, terminated, last)
