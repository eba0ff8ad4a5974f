"""A JAX :class:`~podracer.core.envs.base.Environment` served as a :class:`~podracer.core.envs.base.HostEnv`.

So the JAX tasks (Catch, CartPole, the cue-memory task) also run through Sebulba's
actor threads (``python -m podracer.sebulba --env jax:memory``): the same agent on the
same task in both modes. The batch steps in one jitted call on ``device`` (default: the
first CPU device); observations come back as numpy arrays.
"""

from __future__ import annotations

import jax
import numpy as np

from podracer.run import parallel
from podracer.core.types import EnvSpec
from podracer.core.envs.base import Environment, batch_actions
from podracer.core.envs.wrappers import wrap
from podracer.core.types import TimeStep

PREFIX = "jax:"


class JaxHostEnv:
    """``num_envs`` copies of ``env`` (auto-resetting, with episode statistics), stepped as one batch."""

    def __init__(
        self, env: Environment, num_envs: int, seed: int = 0, device: jax.Device | None = None, name: str | None = None
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}.")
        self.num_envs = num_envs
        self.task_id = PREFIX + (name or type(env).__name__.lower())  # what envs.make takes, after the prefix
        self._spec = env.spec()
        self.opponent_name = getattr(env, "opponent_name", None)  # a two-player game's built-in opponent
        self._device = device or parallel.host_cpu_device()
        wrapped = wrap(env)
        keys = parallel.put_on(jax.random.split(jax.random.key(seed), num_envs), self._device)
        self._reset = jax.jit(jax.vmap(wrapped.reset))
        self._step = jax.jit(jax.vmap(wrapped.step))
        self._keys = keys
        self._state = None
        self._action = None
        self.stats = None

    def spec(self) -> EnvSpec:
        return self._spec

    def _host(self, timestep) -> TimeStep:
        self.stats = jax.device_get(self._state.stats)
        return jax.device_get(timestep)

    def reset(self) -> TimeStep:
        self._state, timestep = self._reset(self._keys)
        return self._host(timestep)

    def send(self, action: np.ndarray) -> None:
        action = batch_actions(self._spec, action, self.num_envs)  # the wrapped environment rescales continuous ones
        self._action = parallel.put_on(action, self._device)

    def recv(self) -> TimeStep:
        if self._action is None:
            raise RuntimeError("recv() without a send() before it.")
        self._state, timestep = self._step(self._state, self._action)
        self._action = None
        return self._host(timestep)

    def step(self, action: np.ndarray) -> TimeStep:
        self.send(action)
        return self.recv()

    def close(self) -> None:
        self._state = None
