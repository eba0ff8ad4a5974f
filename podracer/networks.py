"""Flax modules: torsos and heads that agents assemble."""

from __future__ import annotations

import math
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
    ``shared_torso`` puts both heads on one MLP; otherwise policy and value have their
    own, and :meth:`policy` (what actors call) skips the value network.
    """

    num_actions: int
    obs_rank: int
    hidden_sizes: Sequence[int] = (64, 64)
    shared_torso: bool = False
    activation: str = "tanh"

    def setup(self):
        if self.shared_torso:
            self.torso = MLP(self.hidden_sizes, self.activation)
        else:
            self.policy_torso = MLP(self.hidden_sizes, self.activation)
            self.value_torso = MLP(self.hidden_sizes, self.activation)
        self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
        self.value_head = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))

    def _flatten(self, observation):
        # All batch axes become one: XLA:CPU runs 2-D matmuls (and their gradients)
        # markedly faster than the same work with extra batch axes.
        batch_shape = observation.shape[: observation.ndim - self.obs_rank]
        return jnp.reshape(observation, (-1, math.prod(observation.shape[len(batch_shape) :]))).astype(jnp.float32), batch_shape

    def __call__(self, observation):
        x, batch_shape = self._flatten(observation)
        if self.shared_torso:
            h_pi = h_v = self.torso(x)
        else:
            h_pi, h_v = self.policy_torso(x), self.value_torso(x)
        logits = self.policy_head(h_pi).reshape(*batch_shape, self.num_actions)
        return logits, self.value_head(h_v).reshape(batch_shape)

    def policy(self, observation):
        """The logits alone."""
        x, batch_shape = self._flatten(observation)
        h_pi = self.torso(x) if self.shared_torso else self.policy_torso(x)
        return self.policy_head(h_pi).reshape(*batch_shape, self.num_actions)
