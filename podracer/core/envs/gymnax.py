"""gymnax environments (``gymnax:NAME``) as podracer :class:`~podracer.core.envs.base.Environment` s.

The adapter calls gymnax's non-resetting ``reset_env`` / ``step_env`` (podracer's own
:class:`~podracer.core.envs.wrappers.AutoReset` starts the next episode) and keeps termination
and truncation apart: a terminal step has discount 0, a step that hits the time limit
keeps discount 1 (the learner bootstraps from it). Both gymnax APIs are understood:

- gymnax >= 1.0: ``step_env`` returns ``terminated`` and the environment has
  ``is_truncated(state, params)`` (its public ``step`` returns six values);
- gymnax 0.0.x: ``step_env`` returns ``done``, which includes the time limit
  ``state.time >= params.max_steps_in_episode`` (its ``step`` returns five values).

The environment's key lives in the state, so stochastic environments stay pure functions
of their arguments.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from podracer.core.types import ImageLayout, image_layout
from podracer.core.envs.base import (
    actions_of,
    check_task,
    first_timestep,
    require_package,
    step_timestep,
    uses_first_argument,
)
from podracer.core.types import EnvSpec, TimeStep


class GymnaxState(NamedTuple):
    env_state: Any  # gymnax's own state
    key: chex.PRNGKey  # for the environment's own randomness


def require() -> None:
    """A one-line error naming the extra when gymnax is not installed."""
    require_package("gymnax", "gymnax")


def names() -> list[str]:
    """gymnax's registered environments."""
    return list(_gymnax().registered_envs)


# Packages gymnax imports for rendering alone (1.2 s of its 1.6 s import, scipy through seaborn): stand-ins that
LAZY_FOR_RENDERING = ("matplotlib.pyplot", "seaborn")  # import them on first use take their place meanwhile.


class _OnFirstUse(types.ModuleType):
    """Stands in for a module in ``sys.modules`` until an attribute of it is read: the module is imported then
    (taking its own place there) and answers. ``import`` statements see a module already there, and a run that
    renders nothing never imports it. (``importlib.util.LazyLoader`` would not do: ``import`` reads ``__spec__``,
    which loads the module.)"""

    def __init__(self, spec):
        super().__init__(spec.name)
        self.__spec__ = spec

    def __getattr__(self, attribute: str):
        name = self.__spec__.name
        if sys.modules.get(name) is self:
            del sys.modules[name]
        return getattr(importlib.import_module(name), attribute)


def _gymnax():
    """gymnax (a one-line error naming the extra when it is missing), imported with :data:`LAZY_FOR_RENDERING`
    standing in until something uses them."""
    require()
    if "gymnax" not in sys.modules:
        for name in LAZY_FOR_RENDERING:
            if name not in sys.modules and (spec := importlib.util.find_spec(name)) is not None:
                sys.modules[name] = _OnFirstUse(spec)
    import gymnax

    return gymnax


def make(name: str, **kwargs) -> "GymnaxEnv":
    """``gymnax:NAME`` (:func:`podracer.envs.make` calls this)."""
    return GymnaxEnv(name, **kwargs)


class GymnaxEnv:
    """``gymnax.make(name, **kwargs)`` behind podracer's environment protocol: discrete or continuous (box) actions;
    vector, grid and channels-last board observations (as float32; a board's layout and value range in the spec).
    ``env`` and ``params``: an environment with gymnax's functions (``reset_env``, ``step_env``, ``action_space``,
    ``observation_space``) and its parameters, used as they are."""

    suite = "gymnax"  # SUITE in the names messages give

    def __init__(self, name: str, *, env=None, params=None, **kwargs):
        if env is None:
            gymnax = _gymnax()
            check_task("gymnax", name, gymnax.registered_envs)
            env, default = gymnax.make(name, **kwargs)
            params = default if params is None else params
        self.name, self.env, self.params = name, env, params if params is not None else env.default_params
        self._spec = None  # made when first asked for: a config check makes the environment before JAX may start
        self._step_uses_key = None  # whether step_env draws random numbers (found at the first step's trace)

    def _make_spec(self) -> EnvSpec:
        actions = actions_of(self.env.action_space(self.params), f"{self.suite}:{self.name}")
        observation = jax.eval_shape(lambda: self.env.reset_env(jax.random.key(0), self.params)[0])
        image = None
        if len(observation.shape) == 3:  # gymnax's boards (MinAtar) are channels-last
            space = self.env.observation_space(self.params)
            low, high = float(np.min(space.low)), float(np.max(space.high))
            image = ImageLayout(channel_axis=-1, low=low, high=high)
        elif len(observation.shape) > 3:
            raise ValueError(
                f"{self.suite}:{self.name} has observations of shape {tuple(observation.shape)}; podracer takes "
                "vectors, grids (flattened) and rank-3 images."
            )
        spec = EnvSpec(jax.ShapeDtypeStruct(observation.shape, jnp.float32), image=image, **actions)
        image_layout(spec)  # an image without finite bounds is refused here, naming the environment's spec
        return spec

    def spec(self) -> EnvSpec:
        if self._spec is None:
            self._spec = self._make_spec()
        return self._spec

    def reset(self, key: chex.PRNGKey) -> tuple[GymnaxState, TimeStep]:
        key, reset_key = jax.random.split(key)
        observation, env_state = self.env.reset_env(reset_key, self.params)
        return GymnaxState(env_state, key), first_timestep(jnp.asarray(observation, jnp.float32))

    def step(self, state: GymnaxState, action: chex.Array) -> tuple[GymnaxState, TimeStep]:
        if self._step_uses_key is None:
            self._step_uses_key = uses_first_argument(
                self.env.step_env, state.key, state.env_state, action, self.params
            )
        # A deterministic step (classic control) takes the key as it is: splitting it would cost a random call per
        # environment and step (a loop of its own on XLA:CPU) for nothing.
        key, step_key = jax.random.split(state.key) if self._step_uses_key else (state.key, state.key)
        observation, env_state, reward, done, _ = self.env.step_env(step_key, state.env_state, action, self.params)
        terminated, truncated = self._episode_end(env_state, jnp.asarray(done, bool))
        timestep = step_timestep(jnp.asarray(observation, jnp.float32), reward, terminated, truncated)
        return GymnaxState(env_state, key), timestep

    def _episode_end(self, env_state, done: chex.Array) -> tuple[chex.Array, chex.Array]:
        """``(terminated, truncated)`` after a step that reported ``done`` and reached ``env_state``."""
        if hasattr(self.env, "is_truncated"):  # gymnax >= 1.0: step_env's flag is termination alone
            return done, jnp.logical_and(self.env.is_truncated(env_state, self.params), ~done)
        # gymnax 0.0.x: done includes the time limit
        truncated = env_state.time >= self.params.max_steps_in_episode
        return jnp.logical_and(done, ~truncated), truncated
