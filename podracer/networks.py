"""Flax modules: torsos and heads that agents assemble."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax.numpy as jnp
import numpy as np


class MLP(nn.Module):
    """Fully-connected layers with orthogonal initialisation, activation after every layer."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x):
        act = getattr(nn, self.activation)
        for size in self.hidden_sizes:
            x = act(nn.Dense(size, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)))(x))
        return x


class ActorCritic(nn.Module):
    """Policy logits and a state value from one observation (any leading batch axes).

    The last ``obs_rank`` axes of the input are one observation; they are flattened.
    ``shared_torso`` puts both heads on one MLP; otherwise policy and value have their own.
    """

    num_actions: int
    obs_rank: int
    hidden_sizes: Sequence[int] = (64, 64)
    shared_torso: bool = False
    activation: str = "tanh"

    @nn.compact
    def __call__(self, observation):
        batch_shape = observation.shape[: observation.ndim - self.obs_rank]
        x = jnp.reshape(observation, (*batch_shape, -1)).astype(jnp.float32)
        policy_torso = MLP(self.hidden_sizes, self.activation, name="torso" if self.shared_torso else "policy_torso")
        h_pi = policy_torso(x)
        h_v = h_pi if self.shared_torso else MLP(self.hidden_sizes, self.activation, name="value_torso")(x)
        logits = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01), name="policy_head")(h_pi)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0), name="value_head")(h_v)
        return logits, jnp.squeeze(value, -1)
