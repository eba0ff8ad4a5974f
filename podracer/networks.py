"""Flax modules: torsos and heads that agents assemble."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


class NatureCNN(nn.Module):
    """The DQN torso (Mnih et al., 2015): three convolutions and a 512-unit layer."""

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(32, (8, 8), (4, 4), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, (4, 4), (2, 2), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, (3, 3), (1, 1), padding="VALID")(x))
        x = x.reshape(x.shape[0], -1)
        return nn.relu(nn.Dense(512)(x))


class ResidualBlock(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.channels, (3, 3))(nn.relu(x))
        y = nn.Conv(self.channels, (3, 3))(nn.relu(y))
        return x + y


class ImpalaResNet(nn.Module):
    """The IMPALA residual torso (Espeholt et al., 2018): 3 sections of conv, max-pool, 2 residual blocks."""

    channels: Sequence[int] = (16, 32, 32)
    hidden: int = 256

    @nn.compact
    def __call__(self, x):
        for channels in self.channels:
            x = nn.Conv(channels, (3, 3))(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = ResidualBlock(channels)(x)
            x = ResidualBlock(channels)(x)
        x = nn.relu(x).reshape(x.shape[0], -1)
        return nn.relu(nn.Dense(self.hidden)(x))


TORSOS = ("auto", "mlp", "impala", "nature")
TorsoName = Literal[TORSOS]  # the torso choices, for configs and the command lines


def choose_torso(torso: str, obs_rank: int) -> str:
    """``auto`` picks the IMPALA ResNet for images (rank 3) and an MLP for everything else."""
    if torso not in TORSOS:
        raise ValueError(f"Unknown torso {torso!r}; choose one of {', '.join(TORSOS)}.")
    if torso == "auto":
        return "impala" if obs_rank == 3 else "mlp"
    if torso != "mlp" and obs_rank != 3:
        raise ValueError(f"The {torso!r} torso needs image observations (rank 3), got rank {obs_rank}.")
    return torso


def to_nhwc(observation):
    """Stacked frames ``[..., C, H, W]`` (uint8, as envpool gives them) to float ``[N, H, W, C]`` in [0, 1]."""
    x = observation.reshape(-1, *observation.shape[-3:]).astype(jnp.float32) / 255.0
    return jnp.transpose(x, (0, 2, 3, 1))


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

    The last ``obs_rank`` axes of the input are one observation. ``torso`` is
    ``mlp`` (observations flattened), ``impala`` or ``nature`` (stacked frames
    ``[C, H, W]``, uint8); ``auto`` chooses from the observation's rank. Image torsos
    are always shared by both heads; an MLP is shared when ``shared_torso``, and
    otherwise :meth:`policy` (what actors call) skips the value network.
    """

    num_actions: int
    obs_rank: int
    hidden_sizes: Sequence[int] = (64, 64)
    shared_torso: bool = False
    activation: str = "tanh"
    torso: str = "auto"

    def setup(self):
        kind = choose_torso(self.torso, self.obs_rank)
        self._image = kind != "mlp"
        self._shared = self.shared_torso or self._image
        if kind == "impala":
            self.torso_net = ImpalaResNet()
        elif kind == "nature":
            self.torso_net = NatureCNN()
        elif self.shared_torso:
            self.torso_net = MLP(self.hidden_sizes, self.activation)
        else:
            self.policy_torso = MLP(self.hidden_sizes, self.activation)
            self.value_torso = MLP(self.hidden_sizes, self.activation)
        self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
        self.value_head = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))

    def _flatten(self, observation):
        # All batch axes become one: XLA:CPU runs 2-D matmuls (and their gradients)
        # markedly faster than the same work with extra batch axes.
        batch_shape = observation.shape[: observation.ndim - self.obs_rank]
        if self._image:
            return to_nhwc(observation), batch_shape
        features = math.prod(observation.shape[len(batch_shape) :])
        return jnp.reshape(observation, (-1, features)).astype(jnp.float32), batch_shape

    def __call__(self, observation):
        x, batch_shape = self._flatten(observation)
        if self._shared:
            h_pi = h_v = self.torso_net(x)
        else:
            h_pi, h_v = self.policy_torso(x), self.value_torso(x)
        logits = self.policy_head(h_pi).reshape(*batch_shape, self.num_actions)
        return logits, self.value_head(h_v).reshape(batch_shape)

    def policy(self, observation):
        """The logits alone."""
        x, batch_shape = self._flatten(observation)
        h_pi = self.torso_net(x) if self._shared else self.policy_torso(x)
        return self.policy_head(h_pi).reshape(*batch_shape, self.num_actions)


class QNetwork(nn.Module):
    """Action values from one observation (any leading batch axes): a torso and a linear head.

    ``torso`` as in :class:`ActorCritic` (MLPs use ReLU here, as value-based agents usually do).
    """

    num_actions: int
    obs_rank: int
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "relu"
    torso: str = "auto"

    @nn.compact
    def __call__(self, observation):
        kind = choose_torso(self.torso, self.obs_rank)
        batch_shape = observation.shape[: observation.ndim - self.obs_rank]
        if kind == "mlp":
            x = jnp.reshape(observation, (-1, math.prod(observation.shape[len(batch_shape):]))).astype(jnp.float32)
            x = MLP(self.hidden_sizes, self.activation)(x)
        else:
            x = (ImpalaResNet() if kind == "impala" else NatureCNN())(to_nhwc(observation))
        return nn.Dense(self.num_actions)(x).reshape(*batch_shape, self.num_actions)


class StructuredTorso(nn.Module):
    """The torso of a policy over structured observations ``{"discrete": int [D], "continuous": float [E, F]}``.

    Discrete features go through a shared embedding (``vocab_size`` tokens of
    ``embed_dim``); continuous ones are clipped to ``[-clip, clip]``, and each of the
    ``E`` rows (entities) passes a dense layer, after which a max over the entities
    keeps the strongest response per feature (order-free pooling). The two groups are
    concatenated and pass ``hidden_sizes`` dense layers. Input ``[N, ...]`` per leaf.
    """

    vocab_size: int
    embed_dim: int = 16
    entity_dim: int = 64
    clip: float = 5.0
    hidden_sizes: Sequence[int] = (128,)

    @nn.compact
    def __call__(self, observation):
        discrete = observation["discrete"].astype(jnp.int32)
        continuous = clip_observation(observation["continuous"], self.clip)
        n = discrete.shape[0]
        embedded = nn.Embed(self.vocab_size, self.embed_dim)(discrete).reshape(n, -1)
        entities = nn.relu(nn.Dense(self.entity_dim)(continuous))  # [N, E, entity_dim]
        pooled = jnp.max(entities, axis=-2)
        x = jnp.concatenate([embedded, pooled], axis=-1)
        return MLP(self.hidden_sizes, "relu")(x)


def clip_observation(x, clip: float):
    """Continuous observations as float32 clipped to ``[-clip, clip]`` (NaN-free inputs stay finite)."""
    return jnp.clip(x.astype(jnp.float32), -clip, clip)


def reset_state(state, first):
    """``state`` (leaves ``[B, ...]``) with the rows where ``first`` (bool ``[B]``) is set zeroed: a fresh episode's."""
    return jax.tree.map(lambda s: jnp.where(first.reshape(-1, *([1] * (s.ndim - 1))), 0.0, s), state)


class _ResettingLSTM(nn.Module):
    """One LSTM step that first zeroes the state of every row where ``first`` is set."""

    size: int

    @nn.compact
    def __call__(self, state, inputs):
        x, first = inputs
        state = reset_state(state, first)
        state, y = nn.OptimizedLSTMCell(self.size, name="cell")(state, x)
        return state, y


_ScannedLSTM = nn.scan(_ResettingLSTM, variable_broadcast="params", split_rngs={"params": False}, in_axes=0, out_axes=0)


def lstm_initial_state(batch: int, size: int):
    """The LSTM state ``(c, h)`` of ``batch`` fresh episodes: zeros ``[batch, size]`` each."""
    return (jnp.zeros((batch, size), jnp.float32), jnp.zeros((batch, size), jnp.float32))


class RecurrentNetwork(nn.Module):
    """A torso per time step, an LSTM over time, and heads: the recurrent core of podracer's agents.

    :meth:`unroll` takes time-major ``[T, B, ...]`` observations, ``first`` flags
    ``[T, B]`` (the state is reset to zeros before a step whose flag is set: the first
    step of an episode) and the state ``(c, h)`` ``[B, core_size]`` before step 0. It
    returns the heads' outputs ``[T, B, ...]`` and the state after the last step.
    :meth:`__call__` is one step of the same network on ``[B, ...]``. The torso runs on
    all ``T x B`` observations at once, outside the time loop (so convolutions stay out
    of ``lax.scan``; see :func:`podracer.learner.should_unroll`); only the LSTM cell is
    scanned. ``heads`` is ``"actor_critic"`` (policy logits and a value) or ``"q"``
    (action values).
    """

    num_actions: int
    torso: nn.Module
    core_size: int = 128
    heads: str = "actor_critic"

    def setup(self):
        self.core = _ScannedLSTM(self.core_size)
        if self.heads == "actor_critic":
            self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
            self.value_head = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))
        elif self.heads == "q":
            self.q_head = nn.Dense(self.num_actions)
        else:
            raise ValueError(f"Unknown heads {self.heads!r}; choose actor_critic or q.")

    def unroll(self, observation, first, state):
        t_len, batch = first.shape
        flat = jax.tree.map(lambda x: x.reshape(t_len * batch, *x.shape[2:]), observation)
        features = self.torso(flat).reshape(t_len, batch, -1)
        state, outputs = self.core(state, (features, first))
        if self.heads == "q":
            return self.q_head(outputs), state
        logits = self.policy_head(outputs)
        return (logits, self.value_head(outputs)[..., 0]), state

    def __call__(self, observation, first, state):
        outputs, state = self.unroll(jax.tree.map(lambda x: x[None], observation), first[None], state)
        return jax.tree.map(lambda x: x[0], outputs), state


class ObservationTorso(nn.Module):
    """The torso :class:`ActorCritic` and :class:`QNetwork` use, as a module of its own (``[N, ...]`` in).

    ``kind``: ``mlp`` (observations flattened), ``impala`` or ``nature`` (stacked frames).
    """

    kind: str
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "relu"

    @nn.compact
    def __call__(self, observation):
        if self.kind == "mlp":
            x = jnp.reshape(observation, (observation.shape[0], -1)).astype(jnp.float32)
            return MLP(self.hidden_sizes, self.activation)(x)
        return (ImpalaResNet() if self.kind == "impala" else NatureCNN())(to_nhwc(observation))
