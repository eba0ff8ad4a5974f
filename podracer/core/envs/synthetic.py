"""Synthetic experience in JAX for throughput benchmarks of structured-observation policies.

Each observation is ``{"discrete": int32 [num_discrete] in [0, vocab_size), "continuous":
float32 [num_entities, num_features]}``, drawn fresh every step (continuous values are
normal with standard deviation ``scale``, so a policy's clipping matters). The reward
of a step is 1 when the action equals ``discrete[0] % num_actions`` of the observation
it answered, else 0, so a policy can learn and the learner's signal is not constant.
Episodes last ``episode_length`` steps. Shapes and vocabulary are arguments.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.core.types import EnvSpec
from podracer.core.envs.base import first_timestep
from podracer.core.types import TimeStep


class SyntheticState(NamedTuple):
    key: chex.PRNGKey
    observation: dict  # the current observation
    t: chex.Array  # int32 []: steps taken in this episode


class Synthetic:
    """Random structured observations; reward for answering ``discrete[0] % num_actions``."""

    def __init__(
        self,
        num_discrete: int = 8,
        vocab_size: int = 32,
        num_entities: int = 8,
        num_features: int = 16,
        num_actions: int = 8,
        episode_length: int = 32,
        scale: float = 3.0,
    ):
        for name, value in [
            ("num_discrete", num_discrete),
            ("vocab_size", vocab_size),
            ("num_entities", num_entities),
            ("num_features", num_features),
            ("num_actions", num_actions),
            ("episode_length", episode_length),
        ]:
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}.")
        self.num_discrete, self.vocab_size = num_discrete, vocab_size
        self.num_entities, self.num_features = num_entities, num_features
        self.num_actions, self.episode_length, self.scale = num_actions, episode_length, scale

    def spec(self) -> EnvSpec:
        observation = {
            "discrete": jax.ShapeDtypeStruct((self.num_discrete,), jnp.int32),
            "continuous": jax.ShapeDtypeStruct((self.num_entities, self.num_features), jnp.float32),
        }
        return EnvSpec(observation, self.num_actions, vocab_size=self.vocab_size)

    def _observe(self, key) -> dict:
        discrete_key, continuous_key = jax.random.split(key)
        return {
            "discrete": jax.random.randint(discrete_key, (self.num_discrete,), 0, self.vocab_size, jnp.int32),
            "continuous": self.scale * jax.random.normal(continuous_key, (self.num_entities, self.num_features)),
        }

    def reset(self, key: chex.PRNGKey) -> tuple[SyntheticState, TimeStep]:
        key, observe_key = jax.random.split(key)
        observation = self._observe(observe_key)
        return SyntheticState(key, observation, jnp.zeros((), jnp.int32)), first_timestep(observation)

    def step(self, state: SyntheticState, action: chex.Array) -> tuple[SyntheticState, TimeStep]:
        key, observe_key = jax.random.split(state.key)
        wanted = state.observation["discrete"][0] % self.num_actions
        reward = (action.astype(jnp.int32) == wanted).astype(jnp.float32)
        observation = self._observe(observe_key)
        t = state.t + 1
        last = t >= self.episode_length
        timestep = TimeStep(observation, reward, jnp.ones((), jnp.float32), last)  # time limit: truncation
        return SyntheticState(key, observation, t), timestep
