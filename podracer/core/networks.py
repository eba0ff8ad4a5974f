"""Flax modules: torsos and heads that agents assemble."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from podracer.core.initializers import (  # noqa: F401 (agents read KERNEL_INITS here)
    KERNEL_INITS,
    make_bias_init,
    make_kernel_init,
    orthogonal,
)
from podracer.core.types import ImageLayout


def normed(x, layer_norm: bool):
    """``x`` through a LayerNorm when ``layer_norm`` (PQN's normalisation, before each activation), else as is; call
    it inside a module's compact method."""
    return nn.LayerNorm()(x) if layer_norm else x


class NatureCNN(nn.Module):
    """The DQN torso (Mnih et al., 2015): three convolutions and a 512-unit layer (``layer_norm``: each normalised
    before its ReLU)."""

    layer_norm: bool = False

    @nn.compact
    def __call__(self, x):
        for features, size, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(normed(nn.Conv(features, (size, size), (stride, stride), padding="VALID")(x), self.layer_norm))
        x = x.reshape(x.shape[0], -1)
        return nn.relu(normed(nn.Dense(512)(x), self.layer_norm))


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
    layer_norm: bool = False  # each section's output and the dense layer normalised before their ReLU

    @nn.compact
    def __call__(self, x):
        for channels in self.channels:
            x = nn.Conv(channels, (3, 3))(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = ResidualBlock(channels)(x)
            x = normed(ResidualBlock(channels)(x), self.layer_norm)
        x = nn.relu(x).reshape(x.shape[0], -1)
        return nn.relu(normed(nn.Dense(self.hidden)(x), self.layer_norm))


class BoardCNN(nn.Module):
    """A torso for small channels-last boards (MinAtar's 10 x 10 grids, grid worlds): one 3 x 3 convolution
    that keeps every cell (no striding or pooling, which would blur single cells), then a dense layer
    (the network of Young and Tian, 2019).

    The convolution is written as a matmul over 3 x 3 patches: Anakin scans whole updates, and
    XLA:CPU runs a convolution's gradient inside ``lax.scan`` tens of times slower than a
    matmul of the same size (jax-ml/jax issue 12868).
    """

    channels: int = 16
    hidden: int = 128
    layer_norm: bool = False  # the convolution's and the dense layer's outputs normalised before their ReLU

    @nn.compact
    def __call__(self, x):
        n, height, width, _ = x.shape
        if height < 3 or width < 3:
            raise ValueError(f"The board torso needs boards of at least 3 x 3 cells, got {height} x {width}.")
        patches = _patches(x)  # [N, H - 2, W - 2, 9 C]: the VALID convolution's inputs
        x = nn.Dense(self.channels)(patches.reshape(-1, patches.shape[-1])).reshape(n, -1, self.channels)
        x = nn.relu(normed(x, self.layer_norm)).reshape(n, -1)
        return nn.relu(normed(nn.Dense(self.hidden)(x), self.layer_norm))


def _patches(x, same: bool = False):
    """The 3 x 3 neighbourhood of every cell of ``x`` ``[N, H, W, C]`` as ``[N, H', W', 9 C]``: the inputs of a
    VALID convolution, or of a SAME one (zero padding, every cell kept) when ``same``."""
    if same:
        x = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    _, height, width, _ = x.shape
    return jnp.concatenate(
        [x[:, i : i + height - 2, j : j + width - 2, :] for i in range(3) for j in range(3)], axis=-1
    )


class CellLogits(nn.Module):
    """A policy's logits when every action is one cell of a channels-last board (``EnvSpec.cell_actions``,
    Minesweeper's squares): 3 x 3 convolutions that keep every cell (SAME padding), then one logit per cell,
    ``[N, H * W]`` in row-major order. Each cell's logit reads its own 5 x 5 neighbourhood with the same
    weights everywhere, which a dense head over the whole board would have to learn once per cell.

    Convolutions as matmuls over patches, as in :class:`BoardCNN`."""

    num_actions: int
    channels: int = 32
    layers: int = 2
    output_scale: float = 0.01  # the last layer's orthogonal initialisation: small for a policy's logits

    @nn.compact
    def __call__(self, x):
        n, height, width, _ = x.shape
        if height * width != self.num_actions:
            raise ValueError(
                f"Cell actions need one action per cell of the board: {self.num_actions} actions for "
                f"{height} x {width} cells."
            )
        for _ in range(self.layers):
            patches = _patches(x, same=True)
            x = nn.relu(nn.Dense(self.channels, kernel_init=orthogonal(np.sqrt(2.0)))(patches))
        return nn.Dense(1, kernel_init=orthogonal(self.output_scale))(x).reshape(n, height * width)


TORSOS = ("auto", "mlp", "impala", "nature", "board")
TorsoName = Literal[TORSOS]  # the torso choices, for configs and the command lines

CORES = ("none", "lstm")
CoreName = Literal[CORES]  # the core choices, for configs and the command lines


LOG_STD_INIT_LIMIT = 20.0  # |--log-std-init| at most: exp of it stays a usable float32 standard deviation


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The network settings every built-in agent config nests (``PPOConfig().network.hidden_sizes``), flat on the
    command line (``--hidden-sizes 64 64``) as the optimizer's are. An agent's ``network`` field
    (:func:`network_field`) gives its own defaults and the settings it lets a command line change; the others stay
    at the values the agent builds with (DQN's MLPs are ReLU ones, whatever a PPO run would use)."""

    hidden_sizes: tuple[int, ...] = (64, 64)  # hidden layer sizes of the MLPs
    activation: Literal["tanh", "relu"] = "tanh"  # the MLPs' activation
    # continuous actions: the Gaussian's standard deviation, one learned parameter for every state, a softplus head
    # of the state (at least 0.001), or generalized state-dependent exploration (sde: gSDE, Raffin et al. 2021)
    policy_std: Literal["parameter", "state", "sde"] = "parameter"
    # the initial log standard deviation of --policy-std parameter and sde (Stable-Baselines3's log_std_init)
    log_std_init: float = 0.0
    # --policy-std sde: each environment draws a new exploration matrix every this many steps of a rollout and at
    # its start; -1: at a rollout's start only (Stable-Baselines3's sde_sample_freq)
    sde_sample_freq: int = -1
    # continuous actions: the Gaussian's units, the unit box [-1, 1] that the environment wrappers rescale to the
    # action bounds (unit), or the environment's own, clipped to its bounds (env: gymnax-blines', PureJaxRL's and
    # CleanRL's Gaussian policies)
    policy_units: Literal["unit", "env"] = "unit"
    # the MLPs' and heads' kernels: orthogonal (gain sqrt(2) in hidden layers, 0.01 for the policy, 1 for the value),
    # or lecun (flax's Dense default, as codebases built on flax's defaults, such as gymnax-blines), or torch (PyTorch's
    # nn.Linear default, biases too: Stable-Baselines3's ortho_init=False); image torsos stay orthogonal
    kernel_init: Literal["orthogonal", "lecun", "torch"] = "orthogonal"
    layer_norm: bool = False  # LayerNorm before every activation of the torso (PQN's normalisation)
    shared_torso: bool = True  # one torso under the policy and the value
    torso: TorsoName = "auto"  # auto: impala (ResNet) for images, the board torso for small boards, mlp otherwise
    # lstm: an LSTM between torso and heads, its state carried across rollouts; minibatches are then of whole sequences
    # (--num-minibatches divides the environments)
    core: CoreName = "none"
    core_size: int = 128  # LSTM units

    def __post_init__(self):
        if isinstance(self.log_std_init, (int, float)) and not abs(self.log_std_init) <= LOG_STD_INIT_LIMIT:
            raise ValueError(
                f"--log-std-init must be finite and within [-{LOG_STD_INIT_LIMIT:g}, {LOG_STD_INIT_LIMIT:g}] (a "
                f"standard deviation of {math.exp(-LOG_STD_INIT_LIMIT):.0e} to {math.exp(LOG_STD_INIT_LIMIT):.0e}), "
                f"got {self.log_std_init:g}."
            )
        if any(size < 1 for size in self.hidden_sizes):
            raise ValueError(f"--hidden-sizes must all be >= 1, got {' '.join(map(str, self.hidden_sizes))}.")
        if isinstance(self.core_size, int) and self.core_size < 1:
            raise ValueError(f"--core-size must be >= 1, got {self.core_size}.")
        if isinstance(self.sde_sample_freq, int) and (self.sde_sample_freq == 0 or self.sde_sample_freq < -1):
            raise ValueError(f"--sde-sample-freq must be -1 or >= 1, got {self.sde_sample_freq}.")
        choices = (
            ("torso", "torso", TORSOS),
            ("policy_std", "choice", POLICY_STDS),
            ("policy_units", "choice", POLICY_UNITS),
            ("kernel_init", "initializer", KERNEL_INITS),
            ("core", "core", CORES),
            ("activation", "activation", ("tanh", "relu")),
        )
        for name, what, allowed in choices:
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"--{name.replace('_', '-')}: unknown {what} {getattr(self, name)!r}; choose one of "
                    f"{', '.join(allowed)}."
                )


def network_of(config) -> NetworkConfig:
    """The network settings of a :class:`NetworkConfig` itself, or of an agent config's nested ``network`` (a field
    ``network: NetworkConfig``, :func:`network_field`)."""
    if isinstance(config, NetworkConfig):
        return config
    nested = getattr(config, "network", None)
    if not isinstance(nested, NetworkConfig):
        raise TypeError(
            f"{type(config).__name__} holds no network settings: give it a field network: NetworkConfig "
            "(podracer.core.networks.network_field(flags, **defaults)), or pass a NetworkConfig."
        )
    return nested


# the network settings an actor-critic agent's command line changes (PPO's, A2C's)
ACTOR_CRITIC_FLAGS = (
    "hidden_sizes",
    "activation",
    "policy_std",
    "log_std_init",
    "sde_sample_freq",
    "policy_units",
    "kernel_init",
    "shared_torso",
    "torso",
    "core",
    "core_size",
)


def network_field(flags: Sequence[str], **defaults):
    """An agent config's ``network`` field: a :class:`NetworkConfig` with the agent's own ``defaults``, of which the
    settings named in ``flags`` are flags (and hyper-parameters); the others are fixed at these values, and a config
    that changes one is refused (:func:`check_fixed`)."""
    return dataclasses.field(default=NetworkConfig(**defaults), metadata={"flags": tuple(flags)})


def settable(field: dataclasses.Field, value) -> tuple[str, ...]:
    """The names of a nested settings group's fields that are flags and hyper-parameters: those its config field
    lists (:func:`network_field`), or every one."""
    return field.metadata.get("flags") or tuple(f.name for f in dataclasses.fields(value))


def check_fixed(config) -> None:
    """Each nested network settings group of ``config`` keeps the fields its agent does not let change at their
    defaults; one that changed is a one-line error naming the flag the agent lacks."""
    for field in dataclasses.fields(config):
        flags, value = field.metadata.get("flags"), getattr(config, field.name)
        if not flags or not dataclasses.is_dataclass(field.default):
            continue
        for inner in dataclasses.fields(value):
            if inner.name not in flags and getattr(value, inner.name) != getattr(field.default, inner.name):
                raise ValueError(
                    f"{type(config).__name__} has no --{inner.name.replace('_', '-')} (its network is fixed at "
                    f"{getattr(field.default, inner.name)!r}); it takes "
                    f"{', '.join('--' + name.replace('_', '-') for name in flags)}."
                )


# The layout of rank-3 observations when a module is given none: envpool's stacked Atari frames.
ATARI_FRAMES = ImageLayout(channel_axis=-3, low=0.0, high=255.0)
SMALL_BOARD_CELLS = 32 * 32  # auto: channels-last images of at most this many cells get the board torso


def choose_torso(torso: str, obs_rank: int, image: ImageLayout | None = None, shape: Sequence[int] = ()) -> str:
    """The torso for observations of rank ``obs_rank`` (``image``: their layout when rank 3; ``shape``: one
    observation's). ``auto`` picks the IMPALA ResNet for channels-first frames, the board torso for
    channels-last images of at most ``SMALL_BOARD_CELLS`` cells (the ResNet for larger ones), an MLP for vectors."""
    if torso not in TORSOS:
        raise ValueError(f"Unknown torso {torso!r}; choose one of {', '.join(TORSOS)}.")
    image = image or (ATARI_FRAMES if obs_rank == 3 else None)
    if torso == "auto":
        if image is None:
            return "mlp"
        small = len(shape) == 3 and math.prod(np.delete(np.asarray(shape), image.channel_axis)) <= SMALL_BOARD_CELLS
        return "board" if image.channel_axis == -1 and small else "impala"
    if torso != "mlp" and obs_rank != 3:
        raise ValueError(f"The {torso!r} torso needs image observations (rank 3), got rank {obs_rank}.")
    return torso


def to_nhwc(observation, image: ImageLayout | None = None):
    """Images (``image``'s layout, any leading axes; ``None``: stacked Atari frames) to float ``[N, H, W, C]`` with
    values in [0, 1]."""
    image = image or ATARI_FRAMES
    x = observation.reshape(-1, *observation.shape[-3:]).astype(jnp.float32)
    x = (x - image.low) / (image.high - image.low)
    return jnp.transpose(x, (0, 2, 3, 1)) if image.channel_axis == -3 else x


def image_torso(kind: str, layer_norm: bool = False) -> nn.Module:
    """The convolutional torso called ``kind`` (``layer_norm``: with LayerNorm before its activations)."""
    return {"impala": ImpalaResNet, "nature": NatureCNN, "board": BoardCNN}[kind](layer_norm=layer_norm)


POLICY_STDS = ("parameter", "state", "sde")  # how a Gaussian policy's standard deviation is made (PolicyHead.std)
POLICY_UNITS = ("unit", "env")  # a Gaussian policy's units (PolicyHead.bounds)
MIN_STD = 1e-3  # a state-dependent standard deviation's floor
SDE_EPSILON = 1e-6  # added to gSDE's variance (Stable-Baselines3's StateDependentNoiseDistribution.epsilon)


def sde_log_std(features, sigma):
    """gSDE's log standard deviations ``[..., actions]``: half the log of ``features^2 @ sigma^2 + 1e-6``
    (Stable-Baselines3's ``StateDependentNoiseDistribution`` variance, ``full_std``)."""
    return 0.5 * jnp.log(jnp.square(features) @ jnp.square(sigma) + SDE_EPSILON)


class PolicyHead(nn.Module):
    """The policy's outputs from features: logits ``[..., num_actions]`` for discrete actions; for multi-discrete
    ones (``num_actions`` a tuple ``nvec``) a tuple of logits, ``[..., nvec[i]]`` for entry ``i``, independent
    softmaxes given the features; for continuous ones (``action_size`` > 0) a Gaussian's ``{"mean": [...,
    action_size], "log_std": [..., action_size]}``, its log standard deviation (``std``) a learned parameter that
    does not depend on the state ("parameter"), or a head of its own ("state": softplus of a linear layer, plus
    0.001, as gymnax-blines' Gaussian policy), or gSDE's ("sde": generalized state-dependent exploration, Raffin et
    al. 2021, as Stable-Baselines3 writes it with ``full_std`` and without ``learn_features``): a learned matrix
    ``log_sigma [features, action_size]``, the variance of entry ``k`` ``sum_j h_j^2 exp(2 log_sigma_jk)`` plus
    1e-6 for the features ``h`` (held fixed: no gradient reaches the torso through it); given ``sde_noise`` (``eps
    [batch, features, action_size]``, standard normal) the outputs add the acting noise ``"noise" = h @ (sigma *
    eps)``, which an actor that keeps ``eps`` for several steps adds to the mean (:func:`podracer.core.agents.base.
    make_policy_fns`). The Gaussian is over [-1, 1], which the environment wrappers rescale to
    the action bounds; with ``bounds`` (the environment's ``(low, high)``) it is over the environment's own units and
    is returned mapped onto [-1, 1] (mean ``(m - centre) / half_range``, standard deviation ``s / half_range``), so
    that the policy acts in the environment's units, clipped to its bounds, as gymnax-blines', PureJaxRL's and
    CleanRL's do: the same ratios and entropy gradients as a Gaussian over those units. Kernels:
    :func:`~podracer.core.initializers.make_kernel_init`."""

    num_actions: int | tuple[int, ...]
    action_size: int = 0  # > 0: continuous actions of this many entries (num_actions is then unused)
    initial_log_std: float = 0.0
    std: str = "parameter"  # continuous actions: "parameter" or "state"
    kernel_init: str = "orthogonal"
    bounds: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # continuous actions: the Gaussian's units

    @nn.compact
    def __call__(self, h, sde_noise=None):
        kernel = make_kernel_init(self.kernel_init, 0.01)
        bias = make_bias_init(self.kernel_init, h.shape[-1])
        if isinstance(self.num_actions, tuple):
            logits = nn.Dense(sum(self.num_actions), kernel_init=kernel, bias_init=bias)(h)
            return tuple(jnp.split(logits, np.cumsum(self.num_actions)[:-1].tolist(), axis=-1))
        if self.action_size == 0:
            return nn.Dense(self.num_actions, kernel_init=kernel, bias_init=bias)(h)
        mean = nn.Dense(self.action_size, kernel_init=kernel, bias_init=bias)(h)
        noise = None
        if self.std == "state":
            scale = nn.Dense(self.action_size, kernel_init=kernel, bias_init=bias, name="scale")(h)
            log_std = jnp.log(jax.nn.softplus(scale) + MIN_STD)
        elif self.std == "sde":
            shape = (h.shape[-1], self.action_size)
            sigma = jnp.exp(self.param("log_std", nn.initializers.constant(self.initial_log_std), shape))
            features = jax.lax.stop_gradient(h)
            log_std = sde_log_std(features, sigma)
            if sde_noise is not None:
                noise = jnp.einsum("bj,bjk->bk", features, sigma * sde_noise)
        else:
            log_std = self.param("log_std", nn.initializers.constant(self.initial_log_std), (self.action_size,))
            log_std = jnp.broadcast_to(log_std, mean.shape)
        out = {"mean": mean, "log_std": log_std}
        if self.bounds is not None:
            low, high = (jnp.asarray(bound, jnp.float32) for bound in self.bounds)
            half = 0.5 * (high - low)
            out = {"mean": (mean - (low + half)) / half, "log_std": log_std - jnp.log(half)}
            noise = None if noise is None else noise / half
        return out if noise is None else {**out, "noise": noise}


class MLP(nn.Module):
    """Fully-connected layers (orthogonal kernels unless ``kernel_init`` says otherwise), activation after each."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    layer_norm: bool = False  # each layer's output normalised before its activation
    kernel_init: str = "orthogonal"  # podracer.core.initializers.make_kernel_init

    @nn.compact
    def __call__(self, x):
        act, kernel = getattr(nn, self.activation), make_kernel_init(self.kernel_init, np.sqrt(2.0))
        for size in self.hidden_sizes:
            bias = make_bias_init(self.kernel_init, x.shape[-1])
            x = act(normed(nn.Dense(size, kernel_init=kernel, bias_init=bias)(x), self.layer_norm))
        return x


class ActorCritic(nn.Module):
    """The policy's outputs and a state value from one observation (any leading batch axes).

    The last ``obs_rank`` axes of the input are one observation. ``torso`` is ``mlp``
    (observations flattened), ``impala``, ``nature`` or ``board`` (images laid out as
    ``image`` says; stacked ``[C, H, W]`` uint8 frames when ``None``); ``auto`` chooses from
    the observation (:func:`choose_torso`; ``obs_shape`` is one observation's shape). With
    ``cell_actions`` and an image torso the logits come from :class:`CellLogits`. Image
    torsos are always shared by both heads; an MLP is shared when ``shared_torso``, and
    otherwise :meth:`policy` (what actors call) skips the value network. The policy
    outputs are :class:`PolicyHead`'s: logits, or a Gaussian when ``action_size`` > 0.
    """

    num_actions: int | tuple[int, ...]  # a tuple: multi-discrete actions (:class:`PolicyHead`)
    obs_rank: int
    hidden_sizes: Sequence[int] = (64, 64)
    shared_torso: bool = False
    activation: str = "tanh"
    torso: str = "auto"
    image: ImageLayout | None = None
    obs_shape: Sequence[int] = ()
    action_size: int = 0
    cell_actions: bool = False  # the actions are the board's cells: logits from CellLogits (image torsos only)
    policy_std: str = "parameter"  # a Gaussian policy's standard deviation (PolicyHead.std)
    kernel_init: str = "orthogonal"  # the MLPs' and heads' kernels (initializers.make_kernel_init); images: orthogonal
    action_bounds: tuple | None = None  # a Gaussian policy over the environment's units (PolicyHead.bounds)
    log_std_init: float = 0.0  # PolicyHead.initial_log_std
    sde_sample_freq: int = -1  # policy_std "sde": steps between exploration matrices (make_policy_fns)

    def setup(self):
        kind = choose_torso(self.torso, self.obs_rank, self.image, self.obs_shape)
        self._image = kind != "mlp"
        self._cells = self.cell_actions and self._image
        self._shared = self.shared_torso or self._image
        if self._image:
            self.torso_net = image_torso(kind)
        elif self.shared_torso:
            self.torso_net = MLP(self.hidden_sizes, self.activation, kernel_init=self.kernel_init)
        else:
            self.policy_torso = MLP(self.hidden_sizes, self.activation, kernel_init=self.kernel_init)
            self.value_torso = MLP(self.hidden_sizes, self.activation, kernel_init=self.kernel_init)
        self.policy_head = (
            CellLogits(self.num_actions)
            if self._cells
            else PolicyHead(
                self.num_actions,
                self.action_size,
                initial_log_std=self.log_std_init,
                std=self.policy_std,
                kernel_init=self.kernel_init,
                bounds=self.action_bounds,
            )
        )
        fan_in = self.hidden_sizes[-1] if not self._image and self.hidden_sizes else 1
        bias = make_bias_init(self.kernel_init if not self._image else "orthogonal", fan_in)
        self.value_head = nn.Dense(1, kernel_init=make_kernel_init(self.kernel_init, 1.0), bias_init=bias)

    def _flatten(self, observation):
        # All batch axes become one: XLA:CPU runs 2-D matmuls (and their gradients)
        # markedly faster than the same work with extra batch axes.
        batch_shape = observation.shape[: observation.ndim - self.obs_rank]
        if self._image:
            return to_nhwc(observation, self.image), batch_shape
        features = math.prod(observation.shape[len(batch_shape) :])
        return jnp.reshape(observation, (-1, features)).astype(jnp.float32), batch_shape

    def _policy_outputs(self, h_pi, batch_shape, sde_noise=None):
        outputs = self.policy_head(h_pi) if sde_noise is None else self.policy_head(h_pi, sde_noise)
        return jax.tree.map(lambda x: x.reshape(*batch_shape, x.shape[-1]), outputs)

    def __call__(self, observation):
        x, batch_shape = self._flatten(observation)
        if self._shared:
            h_pi = h_v = self.torso_net(x)
        else:
            h_pi, h_v = self.policy_torso(x), self.value_torso(x)
        if self._cells:
            h_pi = x  # the cells' logits read the board itself
        return self._policy_outputs(h_pi, batch_shape), self.value_head(h_v).reshape(batch_shape)

    def policy(self, observation, sde_noise=None):
        """The policy outputs alone (with ``sde_noise``, ``[batch, features, action_size]``: gSDE's acting noise too,
        :class:`PolicyHead`)."""
        x, batch_shape = self._flatten(observation)
        if self._cells:
            return self._policy_outputs(x, batch_shape)
        h_pi = self.torso_net(x) if self._shared else self.policy_torso(x)
        return self._policy_outputs(h_pi, batch_shape, sde_noise)


class QNetwork(nn.Module):
    """Action values from one observation (any leading batch axes): a torso and a linear head, or
    :class:`CellLogits` when ``cell_actions``.

    ``torso``, ``image`` and ``obs_shape`` as in :class:`ActorCritic` (MLPs use ReLU here, as value-based agents
    usually do).
    """

    num_actions: int
    obs_rank: int
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "relu"
    torso: str = "auto"
    image: ImageLayout | None = None
    obs_shape: Sequence[int] = ()
    cell_actions: bool = False  # as in ActorCritic: one action value per cell from CellLogits (image torsos only)
    layer_norm: bool = False  # LayerNorm before every activation of the torso (PQN)

    @nn.compact
    def __call__(self, observation):
        kind = choose_torso(self.torso, self.obs_rank, self.image, self.obs_shape)
        batch_shape = observation.shape[: observation.ndim - self.obs_rank]
        if kind != "mlp" and self.cell_actions:
            q = CellLogits(self.num_actions, output_scale=1.0)(to_nhwc(observation, self.image))
            return q.reshape(*batch_shape, self.num_actions)
        if kind == "mlp":
            x = jnp.reshape(observation, (-1, math.prod(observation.shape[len(batch_shape) :]))).astype(jnp.float32)
            x = MLP(self.hidden_sizes, self.activation, self.layer_norm)(x)
        else:
            x = image_torso(kind, self.layer_norm)(to_nhwc(observation, self.image))
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
        continuous = jnp.clip(observation["continuous"].astype(jnp.float32), -self.clip, self.clip)
        n = discrete.shape[0]
        embedded = nn.Embed(self.vocab_size, self.embed_dim)(discrete).reshape(n, -1)
        entities = nn.relu(nn.Dense(self.entity_dim)(continuous))  # [N, E, entity_dim]
        pooled = jnp.max(entities, axis=-2)
        x = jnp.concatenate([embedded, pooled], axis=-1)
        return MLP(self.hidden_sizes, "relu")(x)


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
    of ``lax.scan``; see :func:`podracer.core.learner.should_unroll`); only the LSTM cell is
    scanned. ``heads`` is ``"actor_critic"`` (policy logits and a value) or ``"q"``
    (action values).
    """

    num_actions: int | tuple[int, ...]  # actor_critic heads: a tuple for multi-discrete actions (:class:`PolicyHead`)
    torso: nn.Module
    core_size: int = 128
    heads: str = "actor_critic"
    action_size: int = 0  # actor_critic heads: > 0 for continuous actions (:class:`PolicyHead`)
    policy_std: str = "parameter"  # a Gaussian policy's standard deviation (PolicyHead.std)
    kernel_init: str = "orthogonal"  # actor_critic heads' kernels (podracer.core.initializers.make_kernel_init)
    action_bounds: tuple | None = None  # a Gaussian policy over the environment's units (PolicyHead.bounds)
    log_std_init: float = 0.0  # PolicyHead.initial_log_std

    def setup(self):
        self.core = _ScannedLSTM(self.core_size)
        if self.heads == "actor_critic":
            self.policy_head = PolicyHead(
                self.num_actions,
                self.action_size,
                initial_log_std=self.log_std_init,
                std=self.policy_std,
                kernel_init=self.kernel_init,
                bounds=self.action_bounds,
            )
            bias = make_bias_init(self.kernel_init, self.core_size)
            self.value_head = nn.Dense(1, kernel_init=make_kernel_init(self.kernel_init, 1.0), bias_init=bias)
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

    ``kind``: ``mlp`` (observations flattened), ``impala``, ``nature`` or ``board`` (images laid out as ``image``
    says; stacked frames when ``None``).
    """

    kind: str
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "relu"
    image: ImageLayout | None = None
    layer_norm: bool = False  # LayerNorm before every activation
    kernel_init: str = "orthogonal"  # the MLP's kernels (podracer.core.initializers.make_kernel_init)

    @nn.compact
    def __call__(self, observation):
        if self.kind == "mlp":
            x = jnp.reshape(observation, (observation.shape[0], -1)).astype(jnp.float32)
            return MLP(self.hidden_sizes, self.activation, self.layer_norm, self.kernel_init)(x)
        return image_torso(self.kind, self.layer_norm)(to_nhwc(observation, self.image))
