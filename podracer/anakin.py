"""Anakin: JAX environments and the learner in one compiled program per device.

The per-device update is a pure function ``update(state) -> (state, metrics)``: a
rollout (``lax.scan`` over ``vmap(env.step)``) followed by the shared learner step,
whose gradients are averaged over the device axis. Map it over devices yourself::

    update = anakin.make_update(env, agent, optimizer, rollout_length=16)
    p_update = parallel.device_map(update)   # jit of shard_map over a Mesh; or your own pmap
    state = anakin.init(env, agent, optimizer, jax.random.key(0), num_envs_per_device=64)
    state, metrics = p_update(state)

(a ``pmap`` over :data:`~podracer.parallel.DEVICE_AXIS` takes the same state), or let
:func:`run` map it over every device of every process and scan many updates per host call.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from podracer import parallel
from podracer import multihost
from podracer.agents.base import Agent, act_mask, greedy_action, split_start_state
from podracer.envs import wrappers
from podracer.envs.base import Environment, State, check_action_mask
from podracer.stats import interquartile_mean, summarize, summarize_evaluation, summarize_seeds  # noqa: F401 (re-exported)
from podracer.learner import init_learner_state, make_learner_step
from podracer.types import LearnerState, Metrics, Params, TimeStep, Trajectory


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
        values = {
            name: jnp.asarray(np.repeat([point[name] for point in self.points], len(keys))) for name in self.points[0]
        }
        return jnp.concatenate([keys] * len(self.points)), values

    def update(self, env: Environment, rollout_length: int, values: dict[str, chex.Array], **kwargs):
        """The per-device update of every entry: :func:`make_update` of each entry's setting, vmapped."""

        def one(state, entry_values):
            return make_update(env, *self.build(entry_values), rollout_length=rollout_length, **kwargs)(state)

        return lambda state: jax.vmap(one)(state, values)


def make_rollout(env: Environment, agent: Agent, rollout_length: int):
    """``rollout(params, rollout_state) -> (rollout_state, trajectory, episode_metrics)``.

    ``env`` is the unwrapped environment; the rollout steps its auto-resetting,
    statistics-keeping version. The trajectory is ``[rollout_length + 1, B]``; its last
    entry is the carried state's time step, from which the next rollout continues.
    Episode metrics (``episode_return``, ``episode_length``: sums over episodes that
    ended in this rollout; ``episodes``: their count) are per device.
    """
    if rollout_length < 1:
        raise ValueError(f"rollout_length must be >= 1, got {rollout_length}.")
    env = wrappers.wrap(env)
    step_envs = jax.vmap(env.step)
    gamma = agent.return_discount

    def rollout(params, state: RolloutState):
        def body(state: RolloutState, _):
            key, act_key = jax.random.split(state.key)
            env_state, timestep = step_envs(state.env_state, state.action)
            # A time step after a ``last`` one starts an episode: recurrent agents reset there.
            action, extras, core = agent.act(
                params, timestep.observation, act_key, state.core, state.timestep.last, **act_mask(timestep.action_mask)
            )
            emitted = (state.timestep, state.action, split_start_state(state.extras)[0], state.discounted_return)
            returns = state.discounted_return
            if gamma is not None:  # a new episode's first time step (after a last one) starts from 0
                returns = jnp.where(state.timestep.last, 0.0, gamma * returns) + timestep.reward
            last = timestep.last.astype(jnp.float32)
            episode = (
                last,
                env_state.stats.episode_return * last,
                env_state.stats.episode_length.astype(jnp.float32) * last,
            )
            return RolloutState(env_state, timestep, action, extras, key, core, returns), (emitted, episode)

        start = split_start_state(state.extras)[1]  # entry 0's start state, stored once
        state, (emitted, episode) = jax.lax.scan(body, state, None, length=rollout_length)
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
    axis_names: Sequence[str] = (parallel.DEVICE_AXIS,),
    unroll: bool = False,
) -> Callable[[AnakinState], tuple[AnakinState, Metrics]]:
    """The per-device update: one rollout, then one learner step (grads averaged over ``axis_names``).

    Metrics are the same on every device: learner metrics averaged, and
    ``episode_return`` / ``episode_length`` the means over all episodes that ended on
    any device during the rollout (NaN when none did), ``episodes`` their count.
    """
    axis_names = tuple(axis_names)
    rollout = make_rollout(env, agent, rollout_length)
    learner_step = make_learner_step(agent, optimizer, axis_names=axis_names, unroll=unroll)

    def update(state: AnakinState) -> tuple[AnakinState, Metrics]:
        rollout_state, trajectory, episode = rollout(state.learner.params, state.rollout)
        learner_state, metrics = learner_step(state.learner, trajectory)
        episode = parallel.psum_flat(episode, axis_names)
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
    )
    returns = () if agent.return_discount is None else jnp.zeros((num_envs,), jnp.float32)
    return AnakinState(learner, RolloutState(env_state, timestep, action, extras, actor_key, core, returns))


def init(
    env: Environment,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    key: chex.PRNGKey,
    num_envs_per_device: int,
    devices: Sequence[jax.Device] | None = None,
    *,
    rollout_length: int = 1,
    sweep: Sweep | None = None,
) -> AnakinState:
    """Initial states for ``devices`` (default: all devices), stacked on a leading device axis.

    Made by :func:`init_state` mapped over the devices (:func:`~podracer.parallel.device_map`),
    so each device's index along the device axis (global across processes) seeds its
    environments, and parameters are identical. ``key`` may be one key, or keys ``[S]`` of
    independent seeds (:func:`seed_keys`): then every leaf has a seed axis after the device
    axis, and each seed's state is the one a single run with its key would start from. With a
    ``sweep``, the seed axis holds every setting with every seed (:meth:`Sweep.expand`).
    """
    if sweep is not None:
        return _init_sweep(env, sweep, key, num_envs_per_device, devices, rollout_length)
    init_fn = functools.partial(
        init_state, env, agent, optimizer, num_envs=num_envs_per_device, rollout_length=rollout_length
    )
    # The learner is the same on every device: made once, then copied; seed by seed, because a vmap
    # over seeds of the networks' orthogonal initializers (batched QR decompositions) hangs XLA:CPU at
    # times (always inside a device map over 2 or 4 devices, now and then on one device).
    make_learner = jax.jit(
        functools.partial(
            init_learner, env, agent, optimizer, num_envs=num_envs_per_device, rollout_length=rollout_length
        )
    )
    if jnp.ndim(key) == 1:
        learner = jax.tree.map(lambda *xs: jnp.stack(xs), *[make_learner(k) for k in key])
    else:
        learner = make_learner(key)

    def per_device(k, learner):
        index = jax.lax.axis_index(parallel.DEVICE_AXIS)
        return _over_seeds(lambda k, learner: init_fn(k, actor_index=index, learner=learner), k)(k, learner)

    return parallel.device_map(per_device, devices)(
        parallel.replicate(key, devices), parallel.replicate(learner, devices)
    )


def _init_sweep(env: Environment, sweep: Sweep, key, num_envs_per_device: int, devices, rollout_length: int):
    """:func:`init` of a sweep: each entry's learner made with its setting's concrete values, seed by seed (see
    :func:`init`), then every entry's acting state with its setting's (traced) agent, vmapped."""
    keys, values = sweep.expand(key)
    learners = []
    for point in sweep.points:
        agent, optimizer = sweep.build(point)
        make_learner = jax.jit(
            functools.partial(
                init_learner, env, agent, optimizer, num_envs=num_envs_per_device, rollout_length=rollout_length
            )
        )
        learners += [make_learner(k) for k in keys[: len(keys) // len(sweep.points)]]
    learner = jax.tree.map(lambda *xs: jnp.stack(xs), *learners)

    def per_device(keys, learner):
        index = jax.lax.axis_index(parallel.DEVICE_AXIS)

        def one(k, learner, entry_values):
            agent, optimizer = sweep.build(entry_values)
            return init_state(
                env,
                agent,
                optimizer,
                k,
                num_envs_per_device,
                actor_index=index,
                rollout_length=rollout_length,
                learner=learner,
            )

        return jax.vmap(one)(keys, learner, values)

    return parallel.device_map(per_device, devices)(
        parallel.replicate(keys, devices), parallel.replicate(learner, devices)
    )


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
            jax.eval_shape(trace, entry, jnp.asarray(sweep.points[0][name]))
        except TypeError:  # jax.errors.ConcretizationTypeError and the like, or a Python op a tracer lacks
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


def random_action(spec, key: chex.PRNGKey, num_envs: int, action_mask=None) -> chex.Array:
    """Uniformly random actions for ``num_envs`` environments of ``spec``: legal ones where ``action_mask`` says
    which (bool ``[B, A]``, or a tuple of per-entry masks for multi-discrete actions); uniform in the box for
    continuous actions."""
    if spec.box is not None:
        low, high = jnp.asarray(spec.box.low, jnp.float32), jnp.asarray(spec.box.high, jnp.float32)
        return jax.random.uniform(key, (num_envs, spec.box.size), minval=low, maxval=high)
    if spec.nvec is not None:
        keys = jax.random.split(key, len(spec.nvec))
        masks = action_mask if action_mask is not None else [jnp.ones((num_envs, n), bool) for n in spec.nvec]
        return jnp.stack(
            [jax.random.categorical(k, jnp.where(m, 0.0, -jnp.inf)) for k, m in zip(keys, masks)], axis=-1
        ).astype(jnp.int32)
    mask = action_mask if action_mask is not None else jnp.ones((num_envs, spec.num_actions), bool)
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


def make_random_play(env: Environment, num_episodes: int, *, max_steps: int = 10_000):
    """``play(key) -> returns [num_episodes]``: one episode per environment of uniformly random (legal) actions
    (:func:`random_action`), all at once in one compiled loop, as :func:`make_evaluate` plays an agent; the
    baseline "random play" measured on the same environment object as a trained agent."""
    spec = env.spec()
    env = wrappers.wrap(env)

    def play(key):
        reset_key, act_key = jax.random.split(key)
        env_state, timestep = jax.vmap(env.reset)(jax.random.split(reset_key, num_episodes))
        zeros = jnp.zeros((num_episodes,), jnp.float32)
        carry = (env_state, timestep, zeros, jnp.zeros((num_episodes,), bool), act_key, 0)

        def running(carry):
            *_, done, _, t = carry
            return jnp.logical_and(t < max_steps, jnp.logical_not(jnp.all(done)))

        def body(carry):
            env_state, timestep, returns, done, key, t = carry
            key, step_key = jax.random.split(key)
            action = random_action(spec, step_key, num_episodes, timestep.action_mask)
            env_state, timestep = jax.vmap(env.step)(env_state, action)
            returns = returns + jnp.where(done, 0.0, timestep.reward)
            return env_state, timestep, returns, jnp.logical_or(done, timestep.last), key, t + 1

        return jax.lax.while_loop(running, body, carry)[2]

    return play


def make_evaluate(env: Environment, agent: Agent, num_episodes: int, *, max_steps: int = 10_000):
    """``evaluate(params, key) -> returns [num_episodes]``: greedy episodes of ``agent`` (the most likely action,
    or the highest-valued one), one per environment, all at once, in one compiled loop on the device.

    Each environment plays one episode from a reset with its own key split from ``key``; the loop ends
    when every episode has ended or after ``max_steps`` steps (an unfinished episode counts what it has).
    The same ``params`` and ``key`` give the same returns.
    """
    env = wrappers.wrap(env)

    def evaluate(params, key):
        reset_key, act_key = jax.random.split(key)
        env_state, timestep = jax.vmap(env.reset)(jax.random.split(reset_key, num_episodes))
        zeros = jnp.zeros((num_episodes,), jnp.float32)
        carry = (
            env_state,
            timestep,
            agent.initial_state(num_episodes),
            jnp.ones((num_episodes,), bool),
            zeros,
            jnp.zeros((num_episodes,), bool),
            act_key,
            0,
        )

        def running(carry):
            *_, done, _, t = carry
            return jnp.logical_and(t < max_steps, jnp.logical_not(jnp.all(done)))

        def body(carry):
            env_state, timestep, core, first, returns, done, key, t = carry
            key, step_key = jax.random.split(key)
            _, extras, core = agent.act(
                params, timestep.observation, step_key, core, first, **act_mask(timestep.action_mask)
            )
            first = timestep.last  # the next observation starts an episode where this one ended it
            env_state, timestep = jax.vmap(env.step)(env_state, greedy_action(extras))
            returns = returns + jnp.where(done, 0.0, timestep.reward)
            done = jnp.logical_or(done, timestep.last)
            return env_state, timestep, core, first, returns, done, key, t + 1

        return jax.lax.while_loop(running, body, carry)[4]

    return evaluate


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """Keys ``[num_seeds]`` of seeds ``seed ... seed + num_seeds - 1``: seed ``i`` trains as a run with
    ``jax.random.key(i)``."""
    if num_seeds < 1:
        raise ValueError(f"num_seeds must be >= 1, got {num_seeds}.")
    return jax.vmap(jax.random.key)(jnp.arange(seed, seed + num_seeds))


def _over_seeds(fn, key):
    """``fn`` vmapped over a seed axis when ``key`` holds several keys (``[S]``), else ``fn``."""
    return jax.vmap(fn) if jnp.ndim(key) == 1 else fn


def make_train(
    env: Environment,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    *,
    num_envs: int,
    rollout_length: int,
    num_updates: int,
    axis_names: Sequence[str] = (),
) -> Callable[[chex.PRNGKey], tuple[AnakinState, Metrics]]:
    """The whole training run as a pure function: ``train(key) -> (final state, metrics [num_updates])``.

    It jits, vmaps over keys (``jax.jit(jax.vmap(train))(seed_keys(0, 8))`` trains 8 seeds in
    one program) and maps over devices: with :data:`~podracer.parallel.DEVICE_AXIS` in
    ``axis_names``, run it under :func:`~podracer.parallel.device_map` (or a ``pmap``) and each
    device steps ``num_envs`` environments of its own while gradients average over devices.
    """
    axis_names = tuple(axis_names)
    update = make_update(env, agent, optimizer, rollout_length=rollout_length, axis_names=axis_names)
    multi_update = make_multi_update(update, num_updates)

    def train(key):
        index = jax.lax.axis_index(parallel.DEVICE_AXIS) if parallel.DEVICE_AXIS in axis_names else 0
        state = init_state(env, agent, optimizer, key, num_envs, actor_index=index, rollout_length=rollout_length)
        return multi_update(state)

    return train


def make_multi_update(update, num_updates: int):
    """``num_updates`` updates in one ``lax.scan``; metrics stacked ``[num_updates]``."""
    if num_updates < 1:
        raise ValueError(f"updates per call must be >= 1, got {num_updates}.")

    def multi_update(state):
        return jax.lax.scan(lambda s, _: update(s), state, None, length=num_updates)

    return multi_update


def _seeded_update(env, agent, optimizer, key, rollout_length: int, sweep: Sweep | None):
    """The per-device update of every seed of ``key`` (and every setting of ``sweep``)."""
    if sweep is not None:
        return sweep.update(env, rollout_length, sweep.expand(key)[1])
    return _over_seeds(make_update(env, agent, optimizer, rollout_length=rollout_length), key)


def _compile(update, updates_per_call: int, devices, state):
    """``updates_per_call`` updates mapped over ``devices``, compiled ahead of the first call for ``state``; several
    processes then wait for each other (:func:`podracer.multihost.all_arrive`) to enter the first collective
    together."""
    multi = make_multi_update(update, updates_per_call)
    compiled = parallel.device_map(multi, devices).lower(state).compile()
    multihost.all_arrive("the compiled update")
    return compiled


def _calls(num_updates: int, updates_per_call: int, start_update: int) -> range:
    """The host calls still to run: those after ``start_update`` updates, of ``num_updates`` in all."""
    num_calls = parallel.check_divisible(
        num_updates, updates_per_call, "num_updates", "updates per call (--updates-per-call)"
    )
    first = parallel.check_divisible(start_update, updates_per_call, "the updates already done", "updates per call")
    return range(first, num_calls)


class RunResult(NamedTuple):
    state: AnakinState  # final state, stacked over devices (then over seeds, when several were trained)
    history: list[dict[str, float]]  # one summary per host call
    compile_seconds: float  # initialization and compilation of the update, before the first call
    env_steps_per_second: float  # median throughput of the host calls (all seeds together), compilation excluded


def run(
    env: Environment,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    *,
    key: chex.PRNGKey,
    num_envs_per_device: int,
    rollout_length: int,
    num_updates: int,
    updates_per_call: int,
    devices: Sequence[jax.Device] | None = None,
    log: Callable[[dict[str, float]], None] | None = None,
    state: AnakinState | None = None,
    start_update: int = 0,
    after_call: Callable[[AnakinState, int], None] | None = None,
    stop: threading.Event | None = None,
    progress: Callable[[str], None] | None = None,
    evaluate: Callable[[Params], np.ndarray] | None = None,
    eval_every: int | None = None,
    target_return: float | None = None,
    sweep: Sweep | None = None,
) -> RunResult:
    """Trains with the update mapped over ``devices`` (default: all devices of all processes).

    Every process of a multi-process run calls this with the same arguments; the
    device axis then spans all of their devices. Each host call scans
    ``updates_per_call`` updates; ``log`` receives one summary per call with
    ``env_steps`` (global, per seed), ``sps`` (all seeds together) and the averaged metrics.

    ``key`` is one key, or keys ``[S]`` (:func:`seed_keys`) of independent seeds trained
    together, vmapped on every device: summaries then hold means over seeds with the
    per-seed returns (:func:`summarize_seeds`).

    To continue a run, pass its ``state`` (as :func:`init` lays it out) and the updates it
    has done as ``start_update``: the remaining updates then run exactly as they would have.
    ``after_call(state, updates)`` runs after every host call (checkpoints); a set ``stop``
    ends the run after the call in flight. ``progress`` hears what the run is doing before
    its first summary: ``"compiling"``, then ``"compiled in S s"`` (the update is compiled
    ahead of its first call, so no summary's env steps/s includes compilation).

    ``evaluate(params) -> returns`` (params as one device holds them; :func:`make_evaluate`) runs
    every ``eval_every`` updates: summaries then carry ``eval_return`` (the mean) and its minimum and
    maximum; the run stops once that mean reaches ``target_return`` (``target_reached`` is 1 then).

    A ``sweep`` trains each of its settings with every seed of ``key`` in the same program (``agent`` and
    ``optimizer`` are then unused): the per-seed entries of the summaries run setting by setting
    (:meth:`Sweep.expand`), and ``evaluate`` receives every entry's parameters.
    """
    seeded = jnp.ndim(key) == 1 or sweep is not None
    num_seeds = len(sweep.expand(key)[0]) if sweep is not None else len(key) if seeded else 1  # entries, with a sweep
    steps_per_update = rollout_length * num_envs_per_device * parallel.num_global_devices(devices)
    progress = progress or (lambda event: None)
    progress("compiling")
    compile_start = time.perf_counter()
    if state is None:
        state = init(
            env, agent, optimizer, key, num_envs_per_device, devices, rollout_length=rollout_length, sweep=sweep
        )
    update = _seeded_update(env, agent, optimizer, key, rollout_length, sweep)
    p_multi = _compile(update, updates_per_call, devices, state)
    compile_seconds = time.perf_counter() - compile_start
    progress(f"compiled in {compile_seconds:.1f} s")
    summarize_call = summarize_seeds if seeded else summarize
    history, call_seconds = [], []
    for call in _calls(num_updates, updates_per_call, start_update):
        if stop is not None and parallel.any_process(stop.is_set()):
            break
        start = time.perf_counter()
        state, metrics = p_multi(state)
        call_seconds.append(time.perf_counter() - start)
        done = (call + 1) * updates_per_call
        sps = num_seeds * updates_per_call * steps_per_update / call_seconds[-1]
        summary = {"env_steps": float(done * steps_per_update), "sps": sps}
        summary.update(summarize_call(jax.device_get(parallel.unreplicate(metrics))))
        if evaluate is not None and eval_every and done % eval_every == 0:
            summary.update(summarize_evaluation(evaluate(parallel.unreplicate(state.learner.params)), target_return))
        history.append(summary)
        if log is not None:
            log(summary)
        if after_call is not None:
            after_call(state, done)
        if summary.get("target_reached"):
            break

    steady = float(np.median(call_seconds)) if call_seconds else float("nan")
    return RunResult(state, history, compile_seconds, num_seeds * updates_per_call * steps_per_update / steady)
