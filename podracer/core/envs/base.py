"""Environment protocols.

:class:`Environment` is one JAX environment, functional and unbatched: the caller
vmaps it (Anakin). :class:`HostEnv` is a batch of host environments stepped in numpy
(Sebulba, envpool). Both speak :class:`~podracer.core.types.TimeStep`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import chex
import jax
import numpy as np

from podracer.core.types import Box, EnvSpec, EpisodeStats, TimeStep
from podracer.core.types import action_dtype, action_shape, example_action_mask, example_observation  # noqa: F401
from podracer.core.types import mask_shapes

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


class SearchModel(NamedTuple):
    """An environment's own rules move by move, for agents that plan with them (``--agent alphazero``); an
    environment offers one by a method ``search_model()`` (pgx's games do).

    ``root(state) -> embedding``: the search's embedding of one environment's state (its own, unwrapped state), at
    a time step where the agent is to move. ``step(embedding, action, key) -> (embedding, reward, discount,
    observation, legal_action_mask)``: one move (one game, unbatched): ``reward`` float32, the mover's;
    ``discount`` float32, 1 when the same player moves next, -1 when the other one does (a two-player zero-sum
    game, so values change sign), 0 once the game is over; the observation and the legal moves are those of the
    player to move next."""

    root: Callable[[Any], Any]
    step: Callable[[Any, chex.Array, chex.PRNGKey], tuple]


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


def to_box(box: Box, action):
    """An agent's continuous action (each entry meant for [-1, 1]; clipped there) rescaled to ``box``'s bounds.
    numpy in, numpy out; JAX arrays in, JAX arrays out."""
    xp = np if isinstance(action, np.ndarray) else jax.numpy
    low, high = xp.asarray(box.low, xp.float32), xp.asarray(box.high, xp.float32)
    return low + (xp.clip(action, -1.0, 1.0) + 1.0) * (0.5 * (high - low))


def actions_of(space, env: str) -> dict:
    """``EnvSpec`` fields for a gymnasium or gymnax action space (``Discrete``, a 1-D ``MultiDiscrete``, or a bounded
    1-D ``Box``, whose bounds may be scalars for every entry) of ``--env env``."""
    shape = tuple(getattr(space, "shape", None) or ())
    if hasattr(space, "n") and np.ndim(space.n) == 0 and shape == ():  # (gymnasium's MultiBinary has n and a shape)
        return {"num_actions": int(space.n)}
    if hasattr(space, "nvec") and np.ndim(space.nvec) == 1:
        return {"nvec": tuple(int(n) for n in space.nvec)}
    low, high = (
        np.broadcast_to(np.asarray(getattr(space, bound, np.nan), np.float64), shape) for bound in ("low", "high")
    )
    if low.ndim != 1 or not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(
            f"--env {env} has actions of {type(space).__name__} {getattr(space, 'shape', '')}; podracer takes "
            "discrete and multi-discrete actions and continuous vectors with finite bounds."
        )
    return {"box": Box(tuple(map(float, low)), tuple(map(float, high)))}


def require_package(suite: str, package: str) -> None:
    """Fails with one line naming the pip extra (the suite's name) when ``package`` is not installed."""
    import importlib.util

    if importlib.util.find_spec(package) is None:
        from podracer.core import install

        raise ValueError(f"{suite}: environments need {package}: {install.command(suite)}.")


def check_task(suite: str, name: str, known) -> None:
    """Fails with one line, suggesting close names, when a suite's ``known`` tasks do not include ``name``."""
    if name not in known:
        import difflib

        close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(f'{suite}:{c}' for c in close)}?" if close else ""
        raise ValueError(f"--env {suite}:{name}: unknown {suite} environment.{hint} (--env list shows them all)")


def host_dtype(dtype) -> np.dtype:
    """The dtype a host batch gives observations of ``dtype`` in: float64 (MuJoCo's) as float32, which is what
    JAX computes in; any other as it is."""
    return np.dtype(np.float32) if np.dtype(dtype) == np.float64 else np.dtype(dtype)


def batch_actions(spec: EnvSpec, action, num_envs: int) -> np.ndarray:
    """``num_envs`` actions as an agent gave them, checked: int32 ``[B]`` (``[B, len(nvec)]`` multi-discrete), or
    float32 ``[B, size]``."""
    action = np.asarray(action, action_dtype(spec))
    expected = (num_envs, *action_shape(spec))
    if action.shape != expected:
        raise ValueError(f"Expected actions of shape {expected}, got {action.shape}.")
    return action


def host_action(spec: EnvSpec, action, num_envs: int) -> np.ndarray:
    """``num_envs`` actions as a host batch takes them: :func:`batch_actions`, continuous ones rescaled to the box."""
    action = batch_actions(spec, action, num_envs)
    return to_box(spec.box, action) if spec.continuous else action


def uses_first_argument(fn, first, *rest) -> bool:
    """Whether ``fn(first, *rest)`` reads ``first`` (a key: whether a suite's step draws random numbers), from its
    traced program: True when any operation or output takes it. Found once per environment, at trace time."""
    jaxpr = jax.make_jaxpr(lambda a, *b: fn(a, *b))(first, *rest).jaxpr
    inputs = {id(v) for v in jaxpr.invars[: len(jax.tree.leaves(first))]}
    used = [v for eqn in jaxpr.eqns for v in eqn.invars] + list(jaxpr.outvars)
    return any(id(v) in inputs for v in used)


def first_timestep(observation: chex.ArrayTree, action_mask: chex.ArrayTree = None) -> TimeStep:
    """The time step that starts an episode (with its legal-action mask where the spec declares one)."""
    return TimeStep(
        observation=observation,
        reward=jax.numpy.zeros((), jax.numpy.float32),
        discount=jax.numpy.ones((), jax.numpy.float32),
        last=jax.numpy.zeros((), jax.numpy.bool_),
        action_mask=_bool_mask(action_mask),
    )


def step_timestep(
    observation: chex.ArrayTree, reward, terminated, truncated, action_mask: chex.ArrayTree = None
) -> TimeStep:
    """The time step a step arrives at: discount 0 where the episode terminated, 1 otherwise (a truncation keeps 1,
    so the learner bootstraps); ``last`` where it did either. The reward as float32; the legal-action mask (where
    the spec declares one) as bool."""
    return TimeStep(
        observation=observation,
        reward=jax.numpy.asarray(reward, jax.numpy.float32),
        discount=jax.numpy.where(terminated, 0.0, 1.0).astype(jax.numpy.float32),
        last=jax.numpy.logical_or(terminated, truncated),
        action_mask=_bool_mask(action_mask),
    )


def _bool_mask(mask):
    return None if mask is None else jax.tree.map(lambda m: jax.numpy.asarray(m, jax.numpy.bool_), mask)


def check_action_mask(spec: EnvSpec, timestep: TimeStep, batch_axes: int = 0) -> None:
    """A one-line error when a time step's mask does not match what ``spec`` declares (shapes after ``batch_axes``
    leading axes): a mask without ``EnvSpec.action_mask``, or the other way round, or the wrong shapes."""
    shapes, mask = mask_shapes(spec), timestep.action_mask
    if shapes is None and mask is None:
        return
    if shapes is None:
        raise ValueError(
            "The environment's time steps carry an action_mask but its spec does not declare one: "
            "set EnvSpec(action_mask=True)."
        )
    if mask is None:
        raise ValueError("The environment's spec declares action_mask=True but its time steps carry no action_mask.")
    got = (
        tuple(tuple(m.shape[batch_axes:]) for m in mask) if isinstance(mask, tuple) else tuple(mask.shape[batch_axes:])
    )
    if got != shapes:
        raise ValueError(f"The environment's action_mask has shape {got}; its action space needs {shapes}.")


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
