"""Catch (bsuite's rules) in JAX.

A ball starts in a random column of the top row of a ``rows x columns`` board and
falls one row per step; the paddle starts in the middle of the bottom row and moves
left, stays, or moves right (actions 0, 1, 2). When the ball reaches the bottom row
the episode ends with reward +1 if the paddle is under it and -1 otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.core.types import EnvSpec
from podracer.core.envs.base import first_timestep
from podracer.core.types import TimeStep


class CatchState(NamedTuple):
    ball_x: chex.Array  # int32 []: ball column
    ball_y: chex.Array  # int32 []: ball row, 0 at the top
    paddle_x: chex.Array  # int32 []: paddle column (the paddle sits on the bottom row)


class Catch:
    """bsuite Catch: 10 rows, 5 columns, 3 actions; observations are float32 ``[rows, columns]`` boards."""

    def __init__(self, rows: int = 10, columns: int = 5):
        if rows < 2 or columns < 1:
            raise ValueError(f"Catch needs rows >= 2 and columns >= 1, got {rows} x {columns}.")
        self.rows = rows
        self.columns = columns

    def spec(self) -> EnvSpec:
        return EnvSpec(jax.ShapeDtypeStruct((self.rows, self.columns), jnp.float32), num_actions=3)

    def _observe(self, state: CatchState) -> chex.Array:
        # Comparisons with iotas rather than scatters: one fused elementwise kernel on every backend.
        row = jnp.arange(self.rows)[:, None]
        column = jnp.arange(self.columns)[None, :]
        ball = (row == state.ball_y) & (column == state.ball_x)
        paddle = (row == self.rows - 1) & (column == state.paddle_x)
        return (ball | paddle).astype(jnp.float32)

    def reset(self, key: chex.PRNGKey) -> tuple[CatchState, TimeStep]:
        state = CatchState(
            ball_x=jax.random.randint(key, (), 0, self.columns, jnp.int32),
            ball_y=jnp.zeros((), jnp.int32),
            paddle_x=jnp.asarray(self.columns // 2, jnp.int32),
        )
        return state, first_timestep(self._observe(state))

    def step(self, state: CatchState, action: chex.Array) -> tuple[CatchState, TimeStep]:
        paddle_x = jnp.clip(state.paddle_x + action.astype(jnp.int32) - 1, 0, self.columns - 1)
        state = CatchState(ball_x=state.ball_x, ball_y=state.ball_y + 1, paddle_x=paddle_x)
        landed = state.ball_y == self.rows - 1
        caught = state.ball_x == state.paddle_x
        reward = jnp.where(landed, jnp.where(caught, 1.0, -1.0), 0.0).astype(jnp.float32)
        timestep = TimeStep(
            observation=self._observe(state),
            reward=reward,
            discount=jnp.where(landed, 0.0, 1.0).astype(jnp.float32),
            last=landed,
        )
        return state, timestep
