"""Wrappers that turn one episodic JAX environment into an endless stream of time steps."""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.core.types import EnvSpec
from podracer.core.envs.base import Environment, SearchModel, State, to_box
from podracer.core.types import EpisodeStats, TimeStep


def _select(pred: chex.Array, on_true, on_false):
    """``on_true`` where ``pred`` holds, else ``on_false``, leaf by leaf; ``pred`` may be a batch ``[B]`` of leaves
    ``[B, ...]``."""

    def pick(a, b):
        return jnp.where(pred.reshape(pred.shape + (1,) * (jnp.ndim(a) - pred.ndim)), a, b)

    return jax.tree.map(pick, on_true, on_false)


class AutoResetState(NamedTuple):
    env_state: State  # the wrapped environment's state
    key: chex.PRNGKey  # for the next reset
    last: chex.Array  # bool []: the previous time step ended an episode


class AutoReset:
    """After a ``last`` time step, the next ``step`` starts a new episode (reward 0, discount 1).

    This is envpool's and dm_env's convention, so Anakin and Sebulba produce the same
    trajectories: the action given on the step after ``last`` is ignored.
    """

    def __init__(self, env: Environment):
        self.env = env

    def spec(self) -> EnvSpec:
        return self.env.spec()

    def reset(self, key: chex.PRNGKey) -> tuple[AutoResetState, TimeStep]:
        key, reset_key = jax.random.split(key)
        env_state, timestep = self.env.reset(reset_key)
        return AutoResetState(env_state, key, jnp.zeros((), jnp.bool_)), timestep

    def step(self, state: AutoResetState, action: chex.Array) -> tuple[AutoResetState, TimeStep]:
        key, reset_key = jax.random.split(state.key)
        stepped = self.env.step(state.env_state, action)
        restarted = self.env.reset(reset_key)
        env_state, timestep = _select(state.last, restarted, stepped)
        return AutoResetState(env_state, key, timestep.last), timestep

    def step_batch(self, state: AutoResetState, action: chex.Array) -> tuple[AutoResetState, TimeStep]:
        """:meth:`step` of a batch of environments (a leading axis on ``state`` and ``action``), drawing the new
        episodes only when one of the batch starts (a ``lax.cond``): steps in the middle of episodes skip the
        resets and their random calls (three per step with gymnax, each a loop of its own on XLA:CPU). The keys
        of the batch move on at those steps only, so the draws differ from :meth:`step`'s, not their law."""
        stepped = jax.vmap(self.env.step)(state.env_state, action)

        def restart(state: AutoResetState):
            keys = jax.vmap(jax.random.split)(state.key)  # [B, 2]: one random call for the batch
            key, reset_key = keys[:, 0], keys[:, 1]
            restarted = jax.vmap(self.env.reset)(reset_key)
            return _select(state.last, restarted, stepped), key

        (env_state, timestep), key = jax.lax.cond(
            jnp.any(state.last), restart, lambda state: (stepped, state.key), state
        )
        return AutoResetState(env_state, key, timestep.last), timestep


class EpisodeStatsState(NamedTuple):
    env_state: State  # the wrapped environment's state
    stats: EpisodeStats  # of the episode in progress (complete at a ``last`` step)
    last: chex.Array  # bool []: the previous time step ended an episode


class EpisodeStatistics:
    """Keeps the return and length of the current episode in its state.

    At a ``last`` time step, ``state.stats`` holds the finished episode's return and
    length; the step after it (the first of the next episode) counts from zero.
    """

    def __init__(self, env: Environment):
        self.env = env

    def spec(self) -> EnvSpec:
        return self.env.spec()

    def reset(self, key: chex.PRNGKey) -> tuple[EpisodeStatsState, TimeStep]:
        env_state, timestep = self.env.reset(key)
        stats = EpisodeStats(jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
        return EpisodeStatsState(env_state, stats, jnp.zeros((), jnp.bool_)), timestep

    def step(self, state: EpisodeStatsState, action: chex.Array) -> tuple[EpisodeStatsState, TimeStep]:
        return self._count(state, *self.env.step(state.env_state, action))

    def step_batch(self, state: EpisodeStatsState, action: chex.Array) -> tuple[EpisodeStatsState, TimeStep]:
        """:meth:`step` of a batch of environments, through the wrapped one's ``step_batch``
        (:meth:`AutoReset.step_batch`)."""
        return self._count(state, *self.env.step_batch(state.env_state, action))

    @staticmethod
    def _count(state: EpisodeStatsState, env_state, timestep: TimeStep) -> tuple[EpisodeStatsState, TimeStep]:
        new_episode = state.last
        stats = EpisodeStats(
            episode_return=jnp.where(new_episode, 0.0, state.stats.episode_return + timestep.reward),
            episode_length=jnp.where(new_episode, 0, state.stats.episode_length + 1).astype(jnp.int32),
        )
        return EpisodeStatsState(env_state, stats, timestep.last), timestep


class BoxActions:
    """Continuous actions as agents give them (each entry meant for [-1, 1]) clipped there and rescaled to the
    environment's bounds (:func:`~podracer.core.envs.base.to_box`)."""

    def __init__(self, env: Environment):
        self.env = env
        self.box = env.spec().box

    def spec(self) -> EnvSpec:
        return self.env.spec()

    def reset(self, key: chex.PRNGKey):
        return self.env.reset(key)

    def step(self, state, action: chex.Array):
        return self.env.step(state, to_box(self.box, action))


def wrap(env: Environment) -> EpisodeStatistics:
    """An endless, statistics-keeping version of ``env`` (continuous actions rescaled to its box): what Anakin steps."""
    return EpisodeStatistics(AutoReset(BoxActions(env) if env.spec().continuous else env))


def for_evaluation(env):
    """The environment an evaluation of an agent trained on ``env`` plays: its ``for_evaluation()`` where it has one
    (a self-play game plays against random legal moves there), else ``env``."""
    return env.for_evaluation() if callable(getattr(env, "for_evaluation", None)) else env


def inner(env):
    """The environment inside podracer's wrappers (:func:`wrap`), and a function from a wrapped state to its own."""
    layers = 0
    while isinstance(env, (EpisodeStatistics, AutoReset, BoxActions)):
        env, layers = env.env, layers + 1 - isinstance(env, BoxActions)  # BoxActions keeps the state as it is

    def unwrap(state):
        for _ in range(layers):
            state = state.env_state
        return state

    return env, unwrap


def search_model(env) -> tuple[SearchModel, callable]:
    """``(the environment's SearchModel, wrapped state -> its own state)`` for a planning agent; a one-line error
    when the environment has no model to plan with."""
    base, unwrap = inner(env)
    if not callable(getattr(base, "search_model", None)):
        raise ValueError(
            f"--agent alphazero plans with the environment's own rules, and {type(base).__name__} has no "
            "search_model(); use a pgx board game (--env pgx:tic_tac_toe, pgx:connect_four, pgx:othello)."
        )
    return base.search_model(), unwrap


def plan_args(agent, env, env_state) -> dict:
    """The keyword arguments that give a planning agent's ``act`` (``agent.plans``) the rules of ``env`` (podracer's
    wrapped environment) and the batch's own states (``env_state``: its wrapped states); ``{}`` for every other
    agent."""
    if not getattr(agent, "plans", False):
        return {}
    model, unwrap = search_model(env)
    return {"model": model, "env_state": unwrap(env_state)}
