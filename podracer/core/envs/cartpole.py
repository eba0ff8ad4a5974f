"""CartPole-v1 in JAX, matching envpool's ``CartPole-v1`` step for step.

Euler integration of the classic cart-pole (gym's constants); reward 1 on every step;
the episode terminates when the cart leaves [-2.4, 2.4] or the pole leaves +-12
degrees, and is truncated after ``max_episode_steps`` (500) steps. As in envpool, a
step that reaches the step limit counts as a truncation even if the pole also fell
on it. Observations are float32 ``[x, x_dot, theta, theta_dot]``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.core.types import EnvSpec
from podracer.core.envs.base import first_timestep
from podracer.core.types import TimeStep

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
HALF_LENGTH = 0.5
POLE_MASS_LENGTH = MASS_POLE * HALF_LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
INIT_RANGE = 0.05


class CartPoleState(NamedTuple):
    physics: chex.Array  # float32 [4]: x, x_dot, theta, theta_dot
    elapsed_steps: chex.Array  # int32 []: steps taken in this episode


class CartPole:
    """CartPole-v1: 2 actions (push left, push right), 500-step episodes at most."""

    def __init__(self, max_episode_steps: int = 500):
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}.")
        self.max_episode_steps = max_episode_steps

    def spec(self) -> EnvSpec:
        return EnvSpec(jax.ShapeDtypeStruct((4,), jnp.float32), num_actions=2)

    def reset(self, key: chex.PRNGKey) -> tuple[CartPoleState, TimeStep]:
        physics = jax.random.uniform(key, (4,), jnp.float32, -INIT_RANGE, INIT_RANGE)
        return CartPoleState(physics, jnp.zeros((), jnp.int32)), first_timestep(physics)

    def step(self, state: CartPoleState, action: chex.Array) -> tuple[CartPoleState, TimeStep]:
        x, x_dot, theta, theta_dot = state.physics
        force = jnp.where(action == 1, FORCE_MAG, -FORCE_MAG)
        cos, sin = jnp.cos(theta), jnp.sin(theta)
        temp = (force + POLE_MASS_LENGTH * theta_dot**2 * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos**2 / TOTAL_MASS))
        x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS
        physics = jnp.stack(
            [x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot, theta_dot + TAU * theta_acc]
        ).astype(jnp.float32)
        elapsed = state.elapsed_steps + 1
        fell = (jnp.abs(physics[0]) > X_THRESHOLD) | (jnp.abs(physics[2]) > THETA_THRESHOLD)
        truncated = elapsed >= self.max_episode_steps
        terminated = fell & ~truncated
        timestep = TimeStep(
            observation=physics,
            reward=jnp.ones((), jnp.float32),
            discount=jnp.where(terminated, 0.0, 1.0).astype(jnp.float32),
            last=terminated | truncated,
        )
        return CartPoleState(physics, elapsed), timestep
