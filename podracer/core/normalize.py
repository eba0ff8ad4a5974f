"""Observation and reward normalisation (``--normalize-observations``, ``--normalize-rewards``), for any agent.

:func:`wrap` turns an agent into one whose parameters carry running statistics beside the agent's own
(:class:`NormalizedParams`): the mean and variance of the observations, and the variance of the discounted
return. Because they are part of the parameters, they travel wherever parameters go: to Sebulba's actors with
every parameter update, into checkpoints (restored exactly by ``--resume``), and into ``evaluate`` and
``preview``, which play the agent on observations normalised as in training.

- Acting normalises each floating-point observation leaf with the current statistics: ``(o - mean) /
  sqrt(var + eps)``, clipped to ``[-clip, clip]``.
- Each learner step first updates the statistics from the trajectory it received (:func:`update`): every
  device's and every process's batch, merged with one collective (each device's count, mean and sum of squared
  deviations from that mean, gathered in one flat ``all_gather``; Chan et al.'s parallel form of Welford's
  update merges them into the running moments). The loss then sees the trajectory normalised with the
  updated statistics, and rewards divided by the discounted return's running standard deviation (clipped to
  ``[-reward_clip, reward_clip]``), as brax's PPO does (the return accumulated by the feeders:
  :attr:`podracer.core.types.Trajectory.discounted_return`). With ``normalize_with="acting"`` the loss sees the
  trajectory normalised with the statistics before the update instead: those the actor acted with (in Anakin, and in
  Sebulba with ``--max-policy-lag 0``), as Stable-Baselines3's ``VecNormalize`` and gymnasium's wrappers (CleanRL's)
  store observations normalised as they were acted on, so that PPO's first ratio is 1.
- The discounted return restarts at every episode's end (``return_restart="episode"``: Stable-Baselines3's
  ``VecNormalize``), or only where an episode terminates (``"termination"``: gymnasium's ``NormalizeReward``,
  CleanRL's), running on across a time limit as if the next episode continued it.
- The statistics receive no gradient (``stop_gradient``): Adam leaves them exactly as they are. An optimizer
  that changes parameters without a gradient (weight decay) must mask ``NormalizedParams.statistics``.

Replay agents store trajectories normalised with the statistics at the time they arrive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from podracer.core.agents.base import Agent
from podracer.core.types import Trajectory

EPSILON = 1e-8
# The statistics the loss sees a trajectory normalised with: those updated with it, or those the actor acted with.
NORMALIZE_WITH = ("updated", "acting")
# Where the discounted return whose spread scales rewards restarts: every episode's end, or terminations only.
RETURN_RESTARTS = ("episode", "termination")


class RunningStatistics(NamedTuple):
    """Running mean and variance of samples of one shape."""

    count: chex.Array  # float32 []: samples merged so far
    mean: chex.Array  # float32 [shape]
    var: chex.Array  # float32 [shape]: the population variance (1. before any sample)


class Statistics(NamedTuple):
    """What a normalising agent keeps beside its parameters."""

    # a RunningStatistics per floating-point observation leaf (None for the others), or None
    observation: chex.ArrayTree
    discounted_return: RunningStatistics | None  # of the discounted return (scalar), or None without reward scaling


class NormalizedParams(NamedTuple):
    """The parameters of a normalising agent."""

    agent: chex.ArrayTree  # the wrapped agent's parameters
    statistics: Statistics


def init_statistics(shape: Sequence[int]) -> RunningStatistics:
    """No samples yet: mean 0, variance 1 (normalising is then the identity, up to clipping)."""
    return RunningStatistics(jnp.zeros((), jnp.float32), jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32))


def _floating(x) -> bool:
    return jnp.issubdtype(x.dtype if hasattr(x, "dtype") else jnp.asarray(x).dtype, jnp.floating)


def _stats_leaf(x) -> bool:
    """The leaves of :attr:`Statistics.observation`: a leaf's statistics, or None where it is not normalised."""
    return x is None or isinstance(x, RunningStatistics)


def _moments(x: chex.Array, batch_dims: int) -> list[chex.Array]:
    """``[n, mean, m2]`` of ``x``'s samples (its first ``batch_dims`` axes): their count, mean and sum of squared
    deviations from that mean, flattened."""
    axes = tuple(range(batch_dims))
    x = x.astype(jnp.float32)
    n = float(np.prod(x.shape[:batch_dims]))
    mean = jnp.mean(x, axes)
    return [jnp.full((1,), n, jnp.float32), mean.ravel(), jnp.sum((x - mean) ** 2, axes).ravel()]


def _combine(a, b):
    """Two sets of samples' ``(n, mean, m2)`` -> their union's (Chan, Golub and LeVeque's pairwise update)."""
    (n_a, mean_a, m2_a), (n_b, mean_b, m2_b) = a, b
    n = n_a + n_b
    share = jnp.where(n > 0, n_b / jnp.maximum(n, 1.0), 0.0)
    delta = mean_b - mean_a
    return n, mean_a + delta * share, m2_a + m2_b + delta**2 * n_a * share


def update(
    statistics: Statistics, observation, discounted_return, axis_names: Sequence[str] = (), batch_dims: int = 2
) -> Statistics:
    """``statistics`` merged with a batch: ``observation`` (leading ``batch_dims`` axes of samples) and
    ``discounted_return`` (samples of the return; ignored without return statistics).

    Every device along each of ``axis_names`` contributes its batch: each computes its batch's count, mean and
    sum of squared deviations (numerically stable, whatever the data's offset); one ``all_gather`` per axis of
    these, as one flat vector, brings every device's to every device; each combines them into the whole batch's
    moments and merges those into the running ones, so the result is the same everywhere and equals one
    device's update on the concatenated batches (up to rounding)."""
    obs_leaves, obs_def = jax.tree.flatten(statistics.observation, is_leaf=_stats_leaf)
    observations = obs_def.flatten_up_to(observation) if statistics.observation is not None else []
    kept = [(stats, x) for stats, x in zip(obs_leaves, observations) if stats is not None]
    if statistics.discounted_return is not None:
        kept.append((statistics.discounted_return, discounted_return))
    pieces = []
    for stats, x in kept:
        chex.assert_rank(x, batch_dims + stats.mean.ndim)  # batch_dims axes of samples, then one sample's shape
        chex.assert_shape(x, (*x.shape[:batch_dims], *stats.mean.shape))
        pieces += _moments(x, batch_dims)
    sizes = [p.size for p in pieces]
    rows = jnp.concatenate(pieces)[None]
    for axis in axis_names:
        rows = jax.lax.all_gather(rows, axis).reshape(-1, rows.shape[-1])
    merged = []
    for i, (stats, _) in enumerate(kept):
        at = sum(sizes[: 3 * i])
        n, mean, m2 = (
            rows[:, at : at + 1],
            rows[:, at + 1 : at + 1 + stats.mean.size],
            rows[:, at + 1 + stats.mean.size : at + 1 + 2 * stats.mean.size],
        )
        # Every device's batch as one: deviations taken from the combined mean, so no offset cancels.
        batch_n = jnp.sum(n)
        batch_mean = jnp.sum(n * mean, axis=0) / jnp.maximum(batch_n, 1.0)
        batch_m2 = jnp.sum(m2 + n * (mean - batch_mean) ** 2, axis=0)
        total = (stats.count, stats.mean.ravel(), stats.var.ravel() * stats.count)
        count, mean, m2 = _combine(total, (batch_n, batch_mean, batch_m2))
        var = jnp.where(count > 0, m2 / jnp.maximum(count, 1.0), stats.var.ravel())
        merged.append(RunningStatistics(count, mean.reshape(stats.mean.shape), var.reshape(stats.mean.shape)))
    merged = iter(merged)
    observation_stats = None
    if statistics.observation is not None:
        observation_stats = obs_def.unflatten([None if stats is None else next(merged) for stats in obs_leaves])
    return_stats = next(merged) if statistics.discounted_return is not None else None
    return Statistics(observation_stats, return_stats)


def normalize_observation(statistics: Statistics, observation, clip: float = 5.0):
    """``observation`` (any leading axes) with each floating-point leaf standardised by its statistics and
    clipped; other leaves (integers, images of bytes) as they are."""
    if statistics.observation is None:
        return observation

    def one(stats, x):
        if stats is None:
            return x
        return jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + EPSILON), -clip, clip).astype(x.dtype)

    return jax.tree.map(one, statistics.observation, observation, is_leaf=_stats_leaf)


def scale_reward(statistics: Statistics, reward: chex.Array, clip: float = 10.0) -> chex.Array:
    """``reward`` divided by the running standard deviation of the discounted return, clipped."""
    if statistics.discounted_return is None:
        return reward
    return jnp.clip(reward / jnp.sqrt(statistics.discounted_return.var + EPSILON), -clip, clip)


def init(observation, *, observations: bool = True, rewards: bool = False, batch_dims: int = 1) -> Statistics:
    """Fresh statistics for ``observation`` (with ``batch_dims`` leading axes): one per floating-point leaf when
    ``observations``; the return's when ``rewards``."""
    observation_stats = None
    if observations:
        observation_stats = jax.tree.map(
            lambda x: init_statistics(jnp.shape(x)[batch_dims:]) if _floating(x) else None, observation
        )
    return Statistics(observation_stats, init_statistics(()) if rewards else None)


def has_floating_leaf(observation) -> bool:
    """Whether ``observation`` has a floating-point leaf that ``--normalize-observations`` would normalise."""
    return any(_floating(x) for x in jax.tree.leaves(observation))


def wrap(
    agent: Agent,
    *,
    observations: bool = True,
    rewards: bool = False,
    discount: float = 0.99,
    observation_clip: float = 5.0,
    reward_clip: float = 10.0,
    normalize_with: str = "updated",
    return_restart: str = "episode",
) -> Agent:
    """``agent`` acting and learning on normalised observations (``observations``) and scaled rewards
    (``rewards``); its parameters become :class:`NormalizedParams`. ``discount`` is the return's whose spread
    scales the rewards (the agent's own discount). The feeders accumulate that return
    (``Agent.return_discount``, restarted as ``return_restart`` says: ``Agent.return_restart``) and ship it with
    each trajectory. ``normalize_with``: the statistics the loss sees a trajectory normalised with, those updated
    with it ("updated") or those before (``"acting"``)."""
    if normalize_with not in NORMALIZE_WITH:
        raise ValueError(f"normalize_with: {normalize_with!r} is none of {NORMALIZE_WITH}.")
    if return_restart not in RETURN_RESTARTS:
        raise ValueError(f"return_restart: {return_restart!r} is none of {RETURN_RESTARTS}.")
    if not (observations or rewards):
        return agent

    def init_params(key, observation):
        return NormalizedParams(
            agent.init(key, observation), init(observation, observations=observations, rewards=rewards)
        )

    def act(params, observation, key, state, first, **kwargs):
        statistics = jax.lax.stop_gradient(params.statistics)
        return agent.act(
            params.agent, normalize_observation(statistics, observation, observation_clip), key, state, first, **kwargs
        )

    def normalized(statistics: Statistics, trajectory: Trajectory) -> Trajectory:
        timestep = trajectory.timestep
        timestep = timestep._replace(
            observation=normalize_observation(statistics, timestep.observation, observation_clip),
            reward=scale_reward(statistics, timestep.reward, reward_clip),
        )
        return trajectory._replace(timestep=timestep)

    def observe(params: NormalizedParams, trajectory: Trajectory, axis_names: Sequence[str] = ()):
        # Entry T is the next trajectory's entry 0: each sample is counted once.
        recent = jax.tree.map(lambda x: x[:-1], trajectory.timestep.observation)
        returns = None if trajectory.discounted_return is None else trajectory.discounted_return[:-1]
        if rewards and returns is None:
            raise ValueError(
                "--normalize-rewards: the trajectory carries no discounted_return; the feeder must "
                "accumulate it (Agent.return_discount)."
            )
        statistics = update(params.statistics, recent, returns, axis_names)
        shown = params.statistics if normalize_with == "acting" else statistics
        inner, trajectory = params.agent, normalized(shown, trajectory)
        if agent.observe is not None:  # the wrapped agent's own bookkeeping (DQN's schedule clock)
            inner, trajectory = agent.observe(inner, trajectory, axis_names)
        return NormalizedParams(inner, statistics), trajectory

    # The losses read the agent's own parameters only: the statistics get a zero gradient.
    loss = None if agent.loss is None else (lambda params, batch, key: agent.loss(params.agent, batch, key))
    prepare = None if agent.prepare is None else (lambda params, trajectory: agent.prepare(params.agent, trajectory))
    replay = agent.replay
    if replay is not None:
        spec_loss = replay.loss
        replay = replay._replace(
            loss=lambda params, target, items, weights, key: spec_loss(params.agent, target.agent, items, weights, key)
        )
    return agent._replace(
        init=init_params,
        act=act,
        loss=loss,
        prepare=prepare,
        replay=replay,
        observe=observe,
        return_discount=discount if rewards else None,
        return_restart=return_restart,
    )


__all__ = [
    "EPSILON",
    "NORMALIZE_WITH",
    "NormalizedParams",
    "RETURN_RESTARTS",
    "RunningStatistics",
    "Statistics",
    "has_floating_leaf",
    "init",
    "init_statistics",
    "normalize_observation",
    "scale_reward",
    "update",
    "wrap",
]
