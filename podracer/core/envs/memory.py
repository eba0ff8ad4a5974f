"""A cue-recall task in JAX that only an agent with memory can solve.

The first observation shows one of ``num_cues`` cues (one-hot); the next ``delay``
observations are blank; the last one raises a query flag. The action taken at the
query is the answer: reward +1 if it names the cue, -1 otherwise, and the episode
ends. Actions before the query change nothing, so nothing in the observations at the
query tells the cues apart: a feed-forward policy answers at chance (expected return
``2 / num_cues - 1``, -0.5 with 4 cues), an agent that remembers the cue scores +1.
(bsuite's memory-length task has the same shape.)
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.core.types import EnvSpec
from podracer.core.envs.base import first_timestep
from podracer.core.types import TimeStep


class CueMemoryState(NamedTuple):
    cue: chex.Array  # int32 []: the cue to recall
    t: chex.Array  # int32 []: observations seen so far minus one (0 at the cue)


class CueMemory:
    """Cue recall: observations float32 ``[num_cues + 2]`` (cue one-hot, a blank-step bit, the query bit);
    ``num_cues`` actions; episodes of ``delay + 2`` observations."""

    def __init__(self, num_cues: int = 4, delay: int = 4):
        if num_cues < 2 or delay < 0:
            raise ValueError(f"CueMemory needs num_cues >= 2 and delay >= 0, got {num_cues} and {delay}.")
        self.num_cues = num_cues
        self.delay = delay

    def spec(self) -> EnvSpec:
        return EnvSpec(jax.ShapeDtypeStruct((self.num_cues + 2,), jnp.float32), num_actions=self.num_cues)

    def _observe(self, state: CueMemoryState) -> chex.Array:
        cue = jax.nn.one_hot(state.cue, self.num_cues) * (state.t == 0)
        blank = (state.t > 0) & (state.t <= self.delay)
        query = state.t == self.delay + 1
        return jnp.concatenate([cue, jnp.stack([blank, query]).astype(jnp.float32)])

    def reset(self, key: chex.PRNGKey) -> tuple[CueMemoryState, TimeStep]:
        state = CueMemoryState(jax.random.randint(key, (), 0, self.num_cues, jnp.int32), jnp.zeros((), jnp.int32))
        return state, first_timestep(self._observe(state))

    def step(self, state: CueMemoryState, action: chex.Array) -> tuple[CueMemoryState, TimeStep]:
        answered = state.t == self.delay + 1
        correct = action.astype(jnp.int32) == state.cue
        reward = jnp.where(answered, jnp.where(correct, 1.0, -1.0), 0.0).astype(jnp.float32)
        state = CueMemoryState(state.cue, state.t + 1)
        timestep = TimeStep(
            observation=self._observe(state),
            reward=reward,
            discount=jnp.where(answered, 0.0, 1.0).astype(jnp.float32),
            last=answered,
        )
        return state, timestep
