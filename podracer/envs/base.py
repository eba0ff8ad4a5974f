"""Environment protocols.

:class:`Environment` is one JAX environment, functional and unbatched: the caller
vmaps it (Anakin). :class:`HostEnv` is a batch of host environments stepped in numpy
(Sebulba, envpool). Both speak :class:`~podracer.types.TimeStep`.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import chex
import jax
import numpy as np

from podracer.types import EnvSpec, EpisodeStats, TimeStep  # noqa: F401 (EnvSpec: re-exported)

State = Any


@runtime_checkable
class Environment(Protocol):
    """One environment in JAX. Pure functions of their arguments; vmap them for a batch."""

    def reset(self, key: chex.PRNGKey) -> tuple[State, TimeStep]:
        """Starts an episode: the first time step has reward 0, discount 1, last False."""

    def step(self, state: State, action: chex.Array) -> tuple[State, TimeStep]:
        """Advances one step. Stepping past a ``last`` time step is the wrappers' job."""

    def spec(self) -> EnvSpec:
        """Observation and action spaces."""


@runtime_checkable
class HostEnv(Protocol):
    """A batch of ``num_envs`` environments stepped on the host (numpy arrays, leading axis B)."""

    num_envs: int
    stats: EpisodeStats  # return and length so far of each environment's episode (raw rewards)

    def reset(self) -> TimeStep:
        """Starts every environment; returns their first time steps."""

    def send(self, action: np.ndarray) -> None:
        """Starts a step of every environment and returns at once (the environments step elsewhere)."""

    def recv(self) -> TimeStep:
        """Waits for the step :meth:`send` started; an environment after ``last`` starts a new episode."""

    def step(self, action: np.ndarray) -> TimeStep:
        """``send`` then ``recv``."""

    def spec(self) -> EnvSpec:
        """Observation and action spaces of one environment."""

    def close(self) -> None:
        """Releases the environments' threads and memory."""


def observation_rank(spec: EnvSpec) -> int:
    """Axes of one observation: 3 for stacked frames, 1 for vectors; structured (dict) observations count as 1."""
    return 1 if isinstance(spec.observation, dict) else len(spec.observation.shape)


def example_observation(spec: EnvSpec, batch: int = 1) -> chex.ArrayTree:
    """Zeros shaped like ``batch`` observations of ``spec`` (numpy, leading axis ``batch``)."""
    return jax.tree.map(lambda s: np.zeros((batch, *s.shape), s.dtype), spec.observation)


def first_timestep(observation: chex.ArrayTree) -> TimeStep:
    """The time step that starts an episode."""
    return TimeStep(
        observation=observation,
        reward=jax.numpy.zeros((), jax.numpy.float32),
        discount=jax.numpy.ones((), jax.numpy.float32),
        last=jax.numpy.zeros((), jax.numpy.bool_),
    )


class HostEpisodes:
    """Episode statistics of a host batch whose environments auto-reset on the step after ``last`` (envpool's and
    gymnasium's next-step rule: that step starts a new episode with reward 0, so it counts as step 0)."""

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        self.reset()

    def reset(self) -> EpisodeStats:
        self._return = np.zeros(self.num_envs, np.float32)
        self._length = np.zeros(self.num_envs, np.int32)
        self._last = np.zeros(self.num_envs, bool)
        return self.stats

    @property
    def stats(self) -> EpisodeStats:
        return EpisodeStats(self._return.copy(), self._length.copy())

    def update(self, reward: np.ndarray, last: np.ndarray) -> EpisodeStats:
        """Counts one step with raw ``reward`` that ended episodes where ``last``; returns the statistics after it."""
        new_episode = self._last
        self._return = np.where(new_episode, 0.0, self._return + reward).astype(np.float32)
        self._length = np.where(new_episode, 0, self._length + 1).astype(np.int32)
        self._last = np.asarray(last, bool)
        return self.stats
