"""brax environments (``brax:NAME``) as podracer :class:`~podracer.core.envs.base.Environment` s.

The adapter steps brax's own environment (``brax.envs.get_environment``), without brax's
training wrappers: podracer's :class:`~podracer.core.envs.wrappers.AutoReset` starts the next
episode, and the adapter keeps the time limit itself. A step where brax reports ``done``
terminates (discount 0); a step that reaches ``episode_length`` without it is a truncation
(discount 1, so the learner bootstraps). Actions are continuous in ``[-1, 1]`` per actuator,
as brax's tasks take them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.core.envs.base import check_task, first_timestep, require_package, step_timestep
from podracer.core.types import Box, EnvSpec, TimeStep


class BraxState(NamedTuple):
    env_state: Any  # brax's State (pipeline state, observation, reward, done, info)
    t: chex.Array  # int32 []: steps taken in this episode


def require() -> None:
    """A one-line error naming the extra when brax is not installed."""
    require_package("brax", "brax")


def names() -> list[str]:
    """brax's registered environments."""
    require()
    from brax import envs

    return sorted(envs._envs)  # brax keeps its registry here; it has no public listing


def make(name: str, **kwargs) -> "BraxEnv":
    """``brax:NAME`` (:func:`podracer.envs.make` calls this)."""
    return BraxEnv(name, **kwargs)


class BraxEnv:
    """``brax.envs.get_environment(name, **kwargs)`` behind podracer's environment protocol, episodes cut at
    ``episode_length`` steps (brax's default for training, 1,000)."""

    suite = "brax"  # SUITE in the names messages give

    def __init__(self, name: str, *, episode_length: int = 1000, env=None, **kwargs):
        if episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {episode_length}.")
        if env is None:
            require()
            from brax import envs

            check_task("brax", name, envs._envs)
            env = envs.get_environment(name, **kwargs)
        self.name, self.env, self.episode_length = name, env, episode_length
        self._spec = None

    def spec(self) -> EnvSpec:
        if self._spec is None:  # traced, not run: brax's own observation_size runs a whole reset eagerly (seconds)
            observation = self._observe(jax.eval_shape(lambda: self.env.reset(jax.random.key(0))).obs)
            if not hasattr(observation, "shape") or len(observation.shape) != 1:
                raise ValueError(
                    f"{self.suite}:{self.name} has observations of {observation}; podracer takes vector observations."
                )
            box = Box((-1.0,) * self.env.action_size, (1.0,) * self.env.action_size)
            self._spec = EnvSpec(jax.ShapeDtypeStruct(observation.shape, jnp.float32), box=box)
        return self._spec

    def _observe(self, observation):
        """What the agent sees of the environment's ``obs``."""
        return observation

    def reset(self, key: chex.PRNGKey) -> tuple[BraxState, TimeStep]:
        env_state = self.env.reset(key)
        observation = jnp.asarray(self._observe(env_state.obs), jnp.float32)
        return BraxState(env_state, jnp.zeros((), jnp.int32)), first_timestep(observation)

    def step(self, state: BraxState, action: chex.Array) -> tuple[BraxState, TimeStep]:
        env_state = self.env.step(state.env_state, action)
        t = state.t + 1
        terminated = jnp.asarray(env_state.done) > 0
        truncated = jnp.logical_and(t >= self.episode_length, ~terminated)
        observation = jnp.asarray(self._observe(env_state.obs), jnp.float32)
        timestep = step_timestep(observation, env_state.reward, terminated, truncated)
        return BraxState(env_state, t), timestep
