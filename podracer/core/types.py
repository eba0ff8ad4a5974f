"""The data that flows between environments, actors and learners.

Every array is time-major where it has a time axis: ``[T, B, ...]``. A field's
comment gives its shape and dtype for one environment and one time step; the
containers add their leading axes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import chex
import jax
import numpy as np

Params = chex.ArrayTree
Metrics = dict[str, jax.Array]
MAX_SEED = 2**31 - 1  # seeds are int32 in the programs that make their keys (--seed, the last of --num-seeds)


class TimeStep(NamedTuple):
    """What an environment returns on arriving at an observation (dm_env convention).

    After a step with ``last`` set, the next step starts a new episode: it returns
    the new episode's first observation with reward 0 and discount 1, whatever the
    action was. The transition from a ``last`` step to that first step belongs to no
    episode and learners must not learn from it.
    """

    observation: chex.ArrayTree  # o_t, the environment's observation spec
    reward: chex.Array  # r_t, float32 []: reward received on arriving at o_t
    # float32 []: 0. when the episode terminated at o_t, 1. otherwise (truncation keeps 1.); -1. where a two-player
    # game in self-play (pgx, --opponent self) passes the turn at o_t: values change sign between the players
    discount: chex.Array
    last: chex.Array  # bool []: the episode ended at o_t (terminated or truncated)
    # Legal actions at o_t where the spec declares a mask (EnvSpec.action_mask), None otherwise: bool [num_actions],
    # or a tuple of bool [nvec[i]], one per multi-discrete entry. Acting, losses, greedy play and Q maxima respect it.
    action_mask: chex.ArrayTree = None


class Trajectory(NamedTuple):
    """``T + 1`` consecutive time steps of ``B`` environments, time-major ``[T + 1, B, ...]``.

    ``action[t]`` and ``extras[t]`` were produced by the actor at ``timestep[t]``. The
    last entry (index ``T``) is the first entry of the next trajectory: it supplies the
    bootstrap observation, and its action is executed at the start of the next rollout.
    ``actor_state`` is stored once: the state the actor acted on ``timestep[0]`` from (a
    recurrent agent's core state, after any reset there), from which a loss unrolls.
    """

    timestep: TimeStep  # [T + 1, B, ...]
    # int32 [T + 1, B] (int32 [T + 1, B, len(nvec)] multi-discrete, float32 [T + 1, B, size] continuous): a_t, taken at
    # o_t
    action: chex.Array
    extras: chex.ArrayTree  # [T + 1, B, ...]: actor outputs at o_t (e.g. behaviour logits)
    actor_state: chex.ArrayTree = ()  # [B, ...]: the actor state entry 0 started from; () for feed-forward agents
    # float32 [T + 1, B]: the discounted return of the episode so far, r_t + gamma r_(t-1) + ... (0. at an episode's
    # first time step), accumulated by the feeder for agents that set Agent.return_discount (reward scaling); else None
    discounted_return: chex.Array = None


class LearnerState(NamedTuple):
    """Everything the learner step changes."""

    params: Params  # the agent's parameters
    opt_state: Any  # optax state for ``params``
    key: chex.PRNGKey  # key for the learner's own randomness (minibatch shuffles, loss sampling)
    step: chex.Array  # int32 []: learner updates done so far
    extra: Any = None  # what else a learner keeps (replay agents: target network, replay memory, rate limiter)


class RunFacts(NamedTuple):
    """What an agent factory is told of the run it will train in (optimizer schedules and exploration decay over it)."""

    num_updates: int  # learner updates in the run
    envs_per_learner: int  # environments whose trajectories each learner device receives per update
    rollout_length: int  # environment steps per trajectory (a trajectory holds rollout_length + 1 time steps)
    total_env_steps: int  # environment steps of the whole run, every device and process together
    compute_dtype: str = "float32"  # the networks' matmuls and activations (podracer.core.precision)


class EpisodeStats(NamedTuple):
    """Running statistics of the current episode of one environment."""

    episode_return: chex.Array  # float32 []: sum of rewards so far (the full return at a last step)
    episode_length: chex.Array  # int32 []: steps so far (the full length at a last step)


class ImageLayout(NamedTuple):
    """How an image observation is laid out: where its channels are and what its values span."""

    channel_axis: int  # -3: channels first [C, H, W] (envpool's stacked Atari frames); -1: channels last [H, W, C]
    low: float = 0.0  # the smallest value a pixel or cell takes
    high: float = 255.0  # the largest; torsos rescale [low, high] to [0, 1]


class Box(NamedTuple):
    """Continuous actions: float32 vectors whose entry ``i`` lies in ``[low[i], high[i]]``."""

    low: tuple[float, ...]
    high: tuple[float, ...]

    @property
    def size(self) -> int:
        """Entries of one action."""
        return len(self.low)


class EnvSpec(NamedTuple):
    """What an agent needs to know about an environment.

    Observations: a vector (any shape without ``image``; torsos flatten it), an image
    (rank 3, with ``image`` saying its layout; uint8 frames without it are taken as
    envpool's channels-first Atari stacks), or a dict (structured features, with
    ``vocab_size``). Actions: discrete (``num_actions``), multi-discrete (``nvec``: several
    discrete choices made at once) or a continuous box (``box``). With ``action_mask`` every
    time step says which actions are legal (:attr:`TimeStep.action_mask`); no agent picks
    an illegal one.
    """

    observation: chex.ArrayTree  # one observation, without batch axes: a jax.ShapeDtypeStruct, or a dict of them
    num_actions: int = 0  # discrete actions 0 ... num_actions - 1 (0 when the actions are multi-discrete or continuous)
    vocab_size: int | None = None  # structured observations: values of the integer ("discrete") features
    image: ImageLayout | None = None  # rank-3 observations: their layout
    box: Box | None = None  # continuous actions: their bounds (num_actions is then 0)
    nvec: tuple[int, ...] | None = None  # multi-discrete actions: int32 [len(nvec)], entry i in 0 ... nvec[i] - 1
    action_mask: bool = False  # time steps carry TimeStep.action_mask (discrete and multi-discrete actions only)
    # discrete actions that name a cell of the channels-last board, row-major (H * W of them)
    cell_actions: bool = False

    @property
    def continuous(self) -> bool:
        """Whether actions are float vectors in :attr:`box` rather than integers."""
        return self.box is not None

    @property
    def action_kind(self) -> str:
        """``"discrete"``, ``"multi-discrete"`` or ``"continuous"``."""
        return "continuous" if self.box is not None else "multi-discrete" if self.nvec is not None else "discrete"


# ---------------------------------------------- what a spec says of its observations, actions and masks


def observation_rank(spec: EnvSpec) -> int:
    """Axes of one observation: 3 for images, 1 for vectors; structured (dict) observations count as 1."""
    return 1 if isinstance(spec.observation, dict) else len(spec.observation.shape)


def image_layout(spec: EnvSpec) -> ImageLayout | None:
    """The layout of ``spec``'s image observations (``None`` for vectors and dicts).

    Rank-3 observations need ``spec.image``, except uint8 ones without it, which are
    envpool's stacked Atari frames ``[C, H, W]``; anything else is refused rather than
    guessed at.
    """
    if isinstance(spec.observation, dict):
        return None
    shape, image = tuple(spec.observation.shape), spec.image
    if image is not None:
        if (
            len(shape) != 3
            or image.channel_axis not in (-1, -3)
            or not (np.isfinite(image.high - image.low) and image.high > image.low)
        ):
            raise ValueError(
                f"EnvSpec.image {image} does not fit observations of shape {shape}: images have rank 3, "
                "channel_axis -1 or -3, and finite bounds high > low."
            )
        return image
    if len(shape) != 3:
        return None
    if spec.observation.dtype == np.uint8:
        return ImageLayout(channel_axis=-3, low=0.0, high=255.0)
    raise ValueError(
        f"Observations of shape {shape} ({np.dtype(spec.observation.dtype).name}) have rank 3, but the "
        "environment spec does not say how: give EnvSpec(image=ImageLayout(channel_axis, low, high))."
    )


def action_shape(spec: EnvSpec) -> tuple[int, ...]:
    """The shape of one action: ``()`` for discrete actions, ``(len(nvec),)`` for multi-discrete ones, ``(size,)``
    for a continuous box."""
    if spec.continuous:
        return (spec.box.size,)
    return (len(spec.nvec),) if spec.nvec is not None else ()


def action_dtype(spec: EnvSpec):
    """int32 for discrete and multi-discrete actions, float32 for continuous ones."""
    return np.float32 if spec.continuous else np.int32


def example_observation(spec: EnvSpec, batch: int = 1) -> chex.ArrayTree:
    """Zeros shaped like ``batch`` observations of ``spec`` (numpy, leading axis ``batch``)."""
    return jax.tree.map(lambda s: np.zeros((batch, *s.shape), s.dtype), spec.observation)


def mask_shapes(spec: EnvSpec):
    """The shape of one time step's legal-action mask: ``(num_actions,)``, a tuple ``((nvec[0],), ...)`` for
    multi-discrete actions, or ``None`` when ``spec`` declares no mask."""
    if not spec.action_mask:
        return None
    if spec.continuous:
        raise ValueError("EnvSpec.action_mask is for discrete and multi-discrete actions; this spec's are continuous.")
    return tuple((n,) for n in spec.nvec) if spec.nvec is not None else (spec.num_actions,)


def example_action_mask(spec: EnvSpec, batch: int = 1):
    """Every action legal, shaped as ``batch`` time steps' masks of ``spec`` (numpy), or ``None`` without a mask."""
    shapes = mask_shapes(spec)
    if shapes is None:
        return None
    if isinstance(shapes[0], tuple):
        return tuple(np.ones((batch, *s), bool) for s in shapes)
    return np.ones((batch, *shapes), bool)
