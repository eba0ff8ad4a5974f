"""Anakin's pure half: the states, the rollout (``lax.scan`` over the batched step), the per-device update, one
device's initial state, and the entries trained together in one program (a sweep's settings with every seed; a
population's lanes, :mod:`podracer.core.population`). Pure functions of arrays: placing the initial state on the
devices, and the host loop, are :mod:`podracer.run.anakin`'s."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from podracer.core import axes
from podracer.core.agents.base import Agent, act_mask, split_start_state
from podracer.core.envs import wrappers
from podracer.core.envs.base import Environment, State, check_action_mask
from podracer.core.learner import init_learner_state, make_learner_step
from podracer.core.types import LearnerState, Metrics, TimeStep, Trajectory


class RolloutState(NamedTuple):
    """The acting side of one device, carried from rollout to rollout (leading axis B = envs)."""

    env_state: State  # [B, ...] state of the wrapped environments
    timestep: TimeStep  # [B, ...] the time step the environments are at
    # int32 [B] (float32 [B, size] if continuous): the action chosen at ``timestep``, executed first next rollout
    action: chex.Array
    extras: chex.ArrayTree  # [B, ...] actor outputs at ``timestep``
    key: chex.PRNGKey  # the actor's key
    core: chex.ArrayTree = ()  # [B, ...] recurrent agents: the core state after ``timestep`` (``()`` otherwise)
    # float32 [B]: the episode's discounted return up to ``timestep`` (agents with return_discount; ``()`` otherwise)
    discounted_return: chex.ArrayTree = ()


class AnakinState(NamedTuple):
    """Everything one device carries between updates."""

    learner: LearnerState
    rollout: RolloutState
    # a population's lanes (podracer.core.population.PopulationState); () otherwise
    population: chex.ArrayTree = ()


@runtime_checkable
class Entries(Protocol):
    """Entries trained together in one Anakin program, vmapped on every device: a sweep's settings with every seed
    (:class:`Sweep`) or a population's lanes (:class:`~podracer.core.population.Population`). What the host loop
    and the composition root ask of either."""

    points: tuple[dict[str, float], ...]  # each entry's (starting) values by name
    build: Callable[[dict], tuple[Agent, optax.GradientTransformation]]  # one entry's agent and optimizer

    @property
    def names(self) -> list[str]: ...  # the names the values go by

    def values(self, num_seeds: int) -> dict[str, chex.Array]: ...  # each value along the entries, [E]

    def expand(self, key: chex.PRNGKey) -> tuple[chex.PRNGKey, dict[str, chex.Array]]: ...  # keys [E], values [E]

    # every entry's key [E] and learner [E, ...], traced into one program (the run places them on the devices)
    def learners(self, env: Environment, key, num_envs_per_device: int, rollout_length: int) -> tuple: ...

    def finish(self, state: AnakinState, values: dict[str, chex.Array]) -> AnakinState: ...  # an entry's state, done

    def update(self, env: Environment, rollout_length: int, values: dict[str, chex.Array], **kwargs) -> Callable: ...

    # what a log record adds after a host call, from the first device's population part on the host ({}: a sweep)
    def summary(self, lanes) -> dict: ...


class Sweep(NamedTuple):
    """Hyper-parameter settings trained together with every seed, vmapped in one program.

    ``build(values) -> (agent, optimizer)`` makes one setting's agent and optimizer from
    ``values`` (name -> number, or traced scalar inside the program); ``points`` are the
    settings. With seed keys ``[S]``, entry ``p * S + s`` of the run's seed axis trains
    setting ``p`` with seed ``s``, as a run of that setting alone with that seed's key would.
    """

    points: tuple[dict[str, float], ...]
    build: Callable[[dict], tuple[Agent, optax.GradientTransformation]]

    def expand(self, key: chex.PRNGKey) -> tuple[chex.PRNGKey, dict[str, chex.Array]]:
        """Keys ``[P x S]`` (every seed's key, once per setting) and each swept value ``[P x S]`` along them."""
        keys = key[None] if jnp.ndim(key) == 0 else key
        return jnp.concatenate([keys] * len(self.points)), self.values(len(keys))

    def values(self, num_seeds: int) -> dict[str, chex.Array]:
        """Each swept value ``[P x S]`` along :meth:`expand`'s keys, for ``num_seeds`` seeds (no computation)."""
        return {
            name: jnp.asarray(np.repeat([point[name] for point in self.points], num_seeds)) for name in self.points[0]
        }

    @property
    def names(self) -> list[str]:
        return list(self.points[0])

    def summary(self, lanes) -> dict:
        """Nothing beyond the entries' metrics: a sweep's settings stay what :attr:`points` says."""
        del lanes
        return {}

    def learners(self, env: Environment, key, num_envs_per_device: int, rollout_length: int):
        """Every entry's key ``[P x S]`` and learner, each made with its setting's concrete values (see
        :func:`stack_learners`; every setting in one program)."""
        seeds = 1 if jnp.ndim(key) == 0 else len(key)
        keys, parts = self.expand(key)[0], []
        for i, point in enumerate(self.points):
            agent, optimizer = self.build(point)
            make = functools.partial(
                init_learner, env, agent, optimizer, num_envs=num_envs_per_device, rollout_length=rollout_length
            )
            parts.append((make, keys[i * seeds : (i + 1) * seeds]))
        return keys, stack_learners(parts)

    def finish(self, state: AnakinState, values: dict[str, chex.Array]) -> AnakinState:
        """A setting's entry needs nothing beyond its acting state."""
        del values
        return state

    def update(self, env: Environment, rollout_length: int, values: dict[str, chex.Array], **kwargs):
        """The per-device update of every entry: :func:`make_update` of each entry's setting, vmapped."""

        def one(state, entry_values):
            return make_update(env, *self.build(entry_values), rollout_length=rollout_length, **kwargs)(state)

        return lambda state: jax.vmap(one)(state, values)


def make_rollout(env: Environment, agent: Agent, rollout_length: int, *, unroll: int = 1):
    """``rollout(params, rollout_state) -> (rollout_state, trajectory, episode_metrics)``.

    ``unroll``: environment steps written out in each iteration of the rollout's loop (``lax.scan``'s ``unroll``):
    fewer iterations, each with more work for XLA to fuse, at a longer compilation; the same steps computed.

    ``env`` is the unwrapped environment; the rollout steps its auto-resetting,
    statistics-keeping version. The trajectory is ``[rollout_length + 1, B]``; its last
    entry is the carried state's time step, from which the next rollout continues.
    Episode metrics (``episode_return``, ``episode_length``: sums over episodes that
    ended in this rollout; ``episodes``: their count) are per device.
    """
    if rollout_length < 1:
        raise ValueError(f"rollout_length must be >= 1, got {rollout_length}.")
    if unroll < 1:
        raise ValueError(f"--rollout-unroll must be >= 1, got {unroll}.")
    env = wrappers.wrap(env)
    step_envs = env.step_batch  # the batch's resets drawn only at steps where an episode starts
    gamma = agent.return_discount
    terminations_only = agent.return_restart == "termination"

    def rollout(params, state: RolloutState):
        def body(state: RolloutState, act_key):
            env_state, timestep = step_envs(state.env_state, state.action)
            # A time step after a ``last`` one starts an episode: recurrent agents reset there.
            action, extras, core = agent.act(
                params,
                timestep.observation,
                act_key,
                state.core,
                state.timestep.last,
                **act_mask(timestep.action_mask),
                **wrappers.plan_args(agent, env, env_state),
            )
            emitted = (state.timestep, state.action, split_start_state(state.extras)[0], state.discounted_return)
            returns = state.discounted_return
            if gamma is not None:  # a new episode's first time step (after a last one) starts from 0
                after_last = 0.0
                if terminations_only:  # ... unless a time limit ended the last one: it runs on, undiscounted
                    after_last = jnp.where(state.timestep.discount == 0, 0.0, returns)
                returns = jnp.where(state.timestep.last, after_last, gamma * returns) + timestep.reward
            last = timestep.last.astype(jnp.float32)
            episode = (
                last,
                env_state.stats.episode_return * last,
                env_state.stats.episode_length.astype(jnp.float32) * last,
            )
            return RolloutState(env_state, timestep, action, extras, state.key, core, returns), (emitted, episode)

        start = split_start_state(state.extras)[1]  # entry 0's start state, stored once
        # The rollout's keys in one random call (a loop of its own on XLA:CPU), not one call per step.
        keys = jax.random.split(state.key, rollout_length + 1)
        state, (emitted, episode) = jax.lax.scan(body, state._replace(key=keys[0]), keys[1:], unroll=unroll)
        final = (state.timestep, state.action, split_start_state(state.extras)[0], state.discounted_return)
        timestep, action, extras, discounted = jax.tree.map(
            lambda xs, x: jnp.concatenate([xs, x[None]]), emitted, final
        )
        episodes, returns, lengths = (jnp.sum(x) for x in episode)
        metrics = {"episodes": episodes, "episode_return": returns, "episode_length": lengths}
        return state, Trajectory(timestep, action, extras, start, None if gamma is None else discounted), metrics

    return rollout


def make_update(
    env: Environment,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    *,
    rollout_length: int,
    axis_names: Sequence[str] = (axes.DEVICE_AXIS,),
    unroll: bool = False,
    skip_nonfinite: bool = False,
    rollout_unroll: int = 1,
) -> Callable[[AnakinState], tuple[AnakinState, Metrics]]:
    """The per-device update: one rollout, then one learner step (grads averaged over ``axis_names``;
    ``skip_nonfinite``: an update whose loss, gradients or parameters are not finite is discarded, see
    :func:`~podracer.core.learner.make_learner_step`; ``rollout_unroll``: :func:`make_rollout`'s ``unroll``).

    Metrics are the same on every device: learner metrics averaged, and
    ``episode_return`` / ``episode_length`` the means over all episodes that ended on
    any device during the rollout (NaN when none did), ``episodes`` their count.
    """
    axis_names = tuple(axis_names)
    rollout = make_rollout(env, agent, rollout_length, unroll=rollout_unroll)
    learner_step = make_learner_step(
        agent, optimizer, axis_names=axis_names, unroll=unroll, skip_nonfinite=skip_nonfinite
    )

    def update(state: AnakinState) -> tuple[AnakinState, Metrics]:
        rollout_state, trajectory, episode = rollout(state.learner.params, state.rollout)
        learner_state, metrics = learner_step(state.learner, trajectory)
        episode = axes.psum_flat(episode, axis_names)
        count = episode["episodes"]
        safe = jnp.maximum(count, 1.0)
        metrics = {
            **metrics,
            "episodes": count,
            "episode_return": jnp.where(count > 0, episode["episode_return"] / safe, jnp.nan),
            "episode_length": jnp.where(count > 0, episode["episode_length"] / safe, jnp.nan),
        }
        return AnakinState(learner_state, rollout_state), metrics

    return update


def init_state(
    env: Environment,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    key: chex.PRNGKey,
    num_envs: int,
    *,
    actor_index: chex.Array | int = 0,
    rollout_length: int = 1,
    learner: LearnerState | None = None,
) -> AnakinState:
    """One device's initial state with ``num_envs`` environments.

    ``rollout_length`` shapes a replay agent's stored sequences (R2D2); pass the
    update's.

    Parameters come from ``key`` alone, so every device that gets the same ``key``
    starts from the same parameters; environments and actor keys also fold in
    ``actor_index`` (the device's index along the device axis), so devices differ there.
    ``learner``, when given, is :func:`init_learner` of the same arguments, computed once.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}.")
    env = wrappers.wrap(env)
    learner_key, actor_key = jax.random.split(key)
    actor_key = jax.random.fold_in(actor_key, actor_index)
    actor_key, reset_key, act_key = jax.random.split(actor_key, 3)
    env_state, timestep = jax.vmap(env.reset)(jax.random.split(reset_key, num_envs))
    check_action_mask(env.spec(), timestep, batch_axes=1)
    if learner is None:
        learner = init_learner_state(
            agent,
            optimizer,
            learner_key,
            timestep.observation,
            rollout_length=rollout_length,
            action_mask=timestep.action_mask,
        )
    first = jnp.ones((num_envs,), bool)
    action, extras, core = agent.act(
        learner.params,
        timestep.observation,
        act_key,
        agent.initial_state(num_envs),
        first,
        **act_mask(timestep.action_mask),
        **wrappers.plan_args(agent, env, env_state),
    )
    returns = () if agent.return_discount is None else jnp.zeros((num_envs,), jnp.float32)
    return AnakinState(learner, RolloutState(env_state, timestep, action, extras, actor_key, core, returns))


def over_seeds(fn, key):
    """``fn`` vmapped over a seed axis when ``key`` holds several keys (``[S]``), else ``fn``."""
    return jax.vmap(fn) if jnp.ndim(key) == 1 else fn


def stack_learners(parts):
    """The learners of ``parts``, ``(make_learner, keys)`` pairs (keys ``[S]``, or one key), traced into the caller's
    program and concatenated along the seed axis. The learner is the same on every device: made once, then copied;
    seed after seed (``lax.map``), because a vmap over seeds of the networks' orthogonal initializers (batched QR
    decompositions) hangs XLA:CPU at times (always inside a device map over 2 or 4 devices, now and then on one
    device)."""
    made = [make(keys) if jnp.ndim(keys) == 0 else jax.lax.map(make, keys) for make, keys in parts]
    return made[0] if len(made) == 1 else jax.tree.map(lambda *xs: jnp.concatenate(xs), *made)


def unsweepable(env: Environment, sweep: Sweep, state: AnakinState, rollout_length: int) -> list[str]:
    """The swept names whose values the update cannot take traced (they set shapes or loop counts), found by
    tracing one entry's update (no collectives) with each name alone traced; ``state`` as :func:`init` lays it out."""
    entry = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[2:], x.dtype), state)
    bad = []
    for name in sweep.points[0]:

        def trace(state, value, name=name):
            values = {**sweep.points[0], name: value}
            return make_update(env, *sweep.build(values), rollout_length=rollout_length, axis_names=())(state)

        try:
            value = jax.eval_shape(lambda name=name: jnp.asarray(sweep.points[0][name]))  # its shape: nothing run
            jax.eval_shape(trace, entry, value)
        except TypeError:  # jax.errors.ConcretizationTypeError and the like, or a Python op a tracer lacks
            bad.append(name)
    return bad


def shape_setting(env: Environment, sweep: Sweep, num_envs_per_device: int, rollout_length: int) -> list[str]:
    """The swept names whose settings give the learner state different shapes (a network's width, a categorical
    critic's atoms): each setting's state is made abstractly (``jax.eval_shape``, nothing run) with one name at a
    time moved from the first setting's value, and compared with the first setting's."""

    def shapes(point):
        agent, optimizer = sweep.build(point)
        make = functools.partial(
            init_learner, env, agent, optimizer, num_envs=num_envs_per_device, rollout_length=rollout_length
        )
        return jax.tree.map(lambda x: (x.shape, x.dtype), jax.eval_shape(make, jax.random.key(0)))

    first = sweep.points[0]
    base = shapes(first)
    bad = []
    for name in first:
        others = {point[name] for point in sweep.points[1:]} - {first[name]}
        if any(shapes({**first, name: value}) != base for value in sorted(others, key=str)):
            bad.append(name)
    return bad


def init_learner(
    env: Environment,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    key: chex.PRNGKey,
    *,
    num_envs: int,
    rollout_length: int = 1,
) -> LearnerState:
    """The learner part of :func:`init_state` with the same arguments (it depends on ``key`` alone)."""
    return init_state(env, agent, optimizer, key, num_envs, rollout_length=rollout_length).learner
