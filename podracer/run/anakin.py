"""Anakin's host side: the initial state of every device (:func:`init`, placed over the mesh), seeds, the whole-run
function ``make_train`` (jit and vmap it), many updates scanned per host call, and :func:`run`, the host loop over
every device of every process. The pure pieces it maps over the devices are :mod:`podracer.core.anakin`'s."""

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

from podracer.run import multihost, parallel
from podracer.run.plan import RunPlan
from podracer.core.agents.base import Agent
from podracer.core.anakin import AnakinState, Entries, init_learner, init_state, make_update, over_seeds, stack_learners
from podracer.core.envs.base import Environment
from podracer.run.nonfinite import NonfiniteWatch, PopulationDiverged
from podracer.core.stats import summarize, summarize_evaluation, summarize_seeds
from podracer.core.types import MAX_SEED, Metrics, Params


def init(
    env: Environment,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    key: chex.PRNGKey,
    num_envs_per_device: int,
    devices: Sequence[jax.Device] | None = None,
    *,
    rollout_length: int = 1,
    sweep: Entries | None = None,
) -> AnakinState:
    """Initial states for ``devices`` (default: all devices), stacked on a leading device axis.

    Made by :func:`~podracer.core.anakin.init_state` mapped over the devices
    (:func:`~podracer.run.parallel.device_map`), so each device's index along the device axis (global across
    processes) seeds its environments, and parameters are identical. ``key`` may be one key, or keys ``[S]`` of
    independent seeds (:func:`seed_keys`): then every leaf has a seed axis after the device axis, and each seed's state
    is the one a single run with its key would start from. With a ``sweep`` (a :class:`~podracer.core.anakin.Sweep`
    or a population's lanes), the seed axis holds every entry: every setting with every seed
    (:meth:`~podracer.core.anakin.Sweep.expand`), or every lane.
    """
    once = parallel.run_once_options(devices)
    if sweep is not None:

        def entries(key):  # (the program's name in JAX's compile log)
            return sweep.learners(env, key, num_envs_per_device, rollout_length)

        keys, learner = jax.jit(entries, compiler_options=once)(key)
        values = sweep.values(1 if jnp.ndim(key) == 0 else len(key))
        return init_entries(env, sweep, keys, learner, values, num_envs_per_device, devices, rollout_length)
    init_fn = functools.partial(
        init_state, env, agent, optimizer, num_envs=num_envs_per_device, rollout_length=rollout_length
    )
    make_learner = functools.partial(
        init_learner, env, agent, optimizer, num_envs=num_envs_per_device, rollout_length=rollout_length
    )

    def learners(key):  # (the program's name in JAX's compile log)
        return stack_learners([(make_learner, key)])

    learner = jax.jit(learners, compiler_options=once)(key)

    def per_device(k, learner):
        index = jax.lax.axis_index(parallel.DEVICE_AXIS)
        return over_seeds(lambda k, learner: init_fn(k, actor_index=index, learner=learner), k)(k, learner)

    return parallel.device_map(per_device, devices, name="initial_state", compiler_options=once)(
        parallel.replicate(key, devices), parallel.replicate(learner, devices)
    )


def init_entries(
    env: Environment, entries: Entries, keys, learner, values, num_envs_per_device: int, devices, rollout_length: int
) -> AnakinState:
    """Every entry's acting state on every device, ``[devices, entries, ...]``: :func:`~podracer.core.anakin.init_state`
    of each entry's key ``keys [E]``, learner ``learner [E, ...]`` and agent ``entries.build(values)`` (``values``:
    name -> ``[E]``, traced), vmapped over the entries, then completed by ``entries.finish`` (a population's lane)."""

    def per_device(keys, learner):
        index = jax.lax.axis_index(parallel.DEVICE_AXIS)

        def one(k, learner, entry_values):
            agent, optimizer = entries.build(entry_values)
            state = init_state(
                env,
                agent,
                optimizer,
                k,
                num_envs_per_device,
                actor_index=index,
                rollout_length=rollout_length,
                learner=learner,
            )
            return entries.finish(state, entry_values)

        return jax.vmap(one)(keys, learner, values)

    once = parallel.run_once_options(devices)
    return parallel.device_map(per_device, devices, name="initial_state", compiler_options=once)(
        parallel.replicate(keys, devices), parallel.replicate(learner, devices)
    )


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """Keys ``[num_seeds]`` of seeds ``seed ... seed + num_seeds - 1``: seed ``i`` trains as a run with
    ``jax.random.key(i)``."""
    if num_seeds < 1:
        raise ValueError(f"num_seeds must be >= 1, got {num_seeds}.")
    _check_seeds(seed, num_seeds)
    return _keys(np.arange(seed, seed + num_seeds))


def run_key(seed: int, num_seeds: int = 1) -> jax.Array:
    """The key(s) of a run of ``num_seeds`` seeds from ``seed``: :func:`seed_keys` for several, ``jax.random.key(seed)``
    for one (each made by one compiled program)."""
    if num_seeds > 1:
        return seed_keys(seed, num_seeds)
    _check_seeds(seed, 1)
    return _key(seed)


def _check_seeds(seed: int, num_seeds: int) -> None:
    if not 0 <= seed <= MAX_SEED - num_seeds + 1:
        last = f" (and --num-seeds {num_seeds} after it)" if num_seeds > 1 else ""
        raise ValueError(f"--seed must be between 0 and {MAX_SEED - num_seeds + 1}{last}, got {seed}.")


_keys = jax.jit(jax.vmap(jax.random.key))  # one program for every seed's key
_key = jax.jit(jax.random.key)


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
    one program) and maps over devices: with :data:`~podracer.run.parallel.DEVICE_AXIS` in
    ``axis_names``, run it under :func:`~podracer.run.parallel.device_map` (or a ``pmap``) and each
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
        layout = []  # the metrics' tree and which leaves were stacked, found when the update is traced

        def body(state, _):
            state, metrics = update(state)
            leaves, treedef = jax.tree.flatten(metrics)
            same = [i for i, x in enumerate(leaves) if x.dtype == jnp.float32 and x.shape == leaves[0].shape]
            same = same if len(same) > 1 else []
            layout[:] = [treedef, same, len(leaves)]
            rest = [x for i, x in enumerate(leaves) if i not in same]
            return state, (jnp.stack([leaves[i] for i in same], axis=-1) if same else None, rest)

        state, (stacked, rest) = jax.lax.scan(body, state, None, length=num_updates)
        return state, _unstack(layout, stacked, rest)

    return multi_update


def _unstack(layout, stacked, rest):
    """The metrics tree, stacked over updates, from a scan's outputs: its float32 leaves of one shape as one array
    (``stacked``, entries on the last axis: XLA:CPU writes each output of a scan step by an operation of its own,
    and a DQN update has eleven scalars) and the other leaves (``rest``)."""
    treedef, same, count = layout
    others, where = iter(rest), {index: k for k, index in enumerate(same)}
    leaves = [stacked[..., where[i]] if i in where else next(others) for i in range(count)]
    return jax.tree.unflatten(treedef, leaves)


def _seeded_update(
    env, agent, optimizer, num_seeds: int | None, rollout_length: int, sweep, skip_nonfinite: bool, rollout_unroll=1
):
    """The per-device update of every seed (``num_seeds``; None: one run without a seed axis) and every setting of
    ``sweep``."""
    options = dict(skip_nonfinite=skip_nonfinite, rollout_unroll=rollout_unroll)
    if sweep is not None:
        return sweep.update(env, rollout_length, sweep.values(num_seeds or 1), **options)
    update = make_update(env, agent, optimizer, rollout_length=rollout_length, **options)
    return update if num_seeds is None else jax.vmap(update)


def _compile(update, updates_per_call: int, devices, state):
    """``updates_per_call`` updates mapped over ``devices``, compiled ahead of the first call for ``state``; several
    processes then wait for each other (:func:`podracer.run.multihost.all_arrive`) to enter the first collective
    together."""
    multi = make_multi_update(update, updates_per_call)
    compiled = parallel.device_map(multi, devices, name="update").lower(state).compile()
    multihost.all_arrive("the compiled update")
    return compiled


def _entries(state: AnakinState) -> int | None:
    """How many entries (seeds, or a sweep's settings x seeds) ``state`` trains together: the length of its seed
    axis, after the device axis (None: a single run, without one)."""
    key = state.rollout.key
    base = 0 if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else 1  # a typed key, or a raw uint32 pair
    return key.shape[1] if jnp.ndim(key) == 2 + base else None


def _calls(num_updates: int, updates_per_call: int, start_update: int) -> range:
    """The host calls still to run: those after ``start_update`` updates, of ``num_updates`` in all."""
    num_calls = parallel.check_divisible(
        num_updates, updates_per_call, "num_updates", "updates per call (--updates-per-call)"
    )
    first = parallel.check_divisible(start_update, updates_per_call, "the updates already done", "updates per call")
    return range(first, num_calls)


def _describer(sweep, seeds: int | None, lanes_before: Callable[[], dict]) -> Callable[[int], tuple[str, dict]]:
    """``describe(entry) -> (label, values)`` for :class:`~podracer.run.nonfinite.NonfiniteWatch`: entry ``e`` of a
    run's entries named as the user knows it (a population's lane with its values before the call, a sweep's setting and
    seed, a seed), with the searched values that its message names in place of the run's base flags."""
    from podracer.core.pbt import lane_label
    from podracer.core.sweep import label

    def describe(entry: int) -> tuple[str, dict]:
        if sweep is None:
            return f"seed entry {entry}", {}
        before = lanes_before()
        if f"pbt_{sweep.names[0]}_per_lane" in before:
            values = {n: float(before[f"pbt_{n}_per_lane"][entry]) for n in sweep.names}
            return f"lane {entry}: {lane_label(values)}", values
        point = sweep.points[entry // (seeds or 1)]
        return f"setting {label(point)}, seed entry {entry % (seeds or 1)}", dict(point)

    return describe


def _summary(metrics, summarize_call, env_steps: float, sps: float) -> tuple[dict, np.ndarray]:
    """A host call's summary, ``nonfinite_updates`` counting its updates (of every entry) that were not finite, and
    the learner's ``nonfinite`` codes of its updates."""
    codes = np.asarray(metrics.pop("nonfinite", 0.0))
    summary = {"env_steps": env_steps, "sps": sps, **summarize_call(metrics)}
    return {**summary, "nonfinite_updates": int((codes > 0).sum())}, codes


class RunResult(NamedTuple):
    state: AnakinState  # final state, stacked over devices (then over seeds, when several were trained)
    history: list[dict[str, float]]  # one summary per host call
    compile_seconds: float  # initialization and compilation of the update, before the first call
    env_steps_per_second: float  # median throughput of the host calls (all seeds together), compilation excluded
    # updates that were not finite, of those taken (entries counted apart): --on-nonfinite skip's or continue's
    nonfinite: tuple[int, int] = (0, 0)


class Hooks(NamedTuple):
    """What :func:`run` calls along the way (each optional)."""

    log: Callable[[dict[str, float]], None] | None = None  # one summary per host call
    after_call: Callable[[AnakinState, int], None] | None = None  # (state, updates done) after each call: checkpoints
    stop: threading.Event | None = None  # once set, the run ends after the call in flight
    progress: Callable[[str], None] | None = None  # "compiling", then "compiled in S s"
    evaluate: Callable[[Params], np.ndarray] | None = None  # params -> returns, every ``plan.eval_every`` updates


def run(
    plan: RunPlan,
    agent: Agent | Entries,
    state: AnakinState,
    hooks: Hooks | None = None,
    *,
    env: Environment,
    start_update: int = 0,
) -> RunResult:
    """Trains ``state`` by the ``plan``
    (:class:`~podracer.run.plan.RunPlan`, e.g. :func:`~podracer.run.plan.anakin_plan`) with the update mapped over
    ``plan.devices`` (default: all devices of all processes), ``plan.updates_per_call`` updates scanned per host call.

    ``agent`` is an :class:`~podracer.core.agents.base.Agent` (it learns with its own ``agent.optimizer``), or the
    :class:`Entries` of a sweep or a population; ``state`` is what :func:`init` made for it (with one key, or seed
    keys ``[S]`` (:func:`seed_keys`) of independent seeds trained together, vmapped on every device: summaries then
    hold means over seeds with the per-seed returns, :func:`summarize_seeds`). Every process of a multi-process run
    calls this with the same arguments; the device axis then spans all of their devices. ``log`` receives one
    summary per call with ``env_steps`` (global, per seed), ``sps`` (all seeds together) and the averaged metrics.

    To continue a run, pass its ``state`` and the updates it has done as ``start_update``: the remaining updates then
    run exactly as they would have. The ``hooks`` (:class:`Hooks`): ``after_call(state, updates)`` runs after every
    host call (checkpoints); a set ``stop`` ends the run after the call in flight; ``progress`` hears what the run is
    doing before its first summary (the update is compiled ahead of its first call, so no summary's env steps/s
    includes compilation); ``evaluate(params) -> returns`` (params as one device holds them, every entry's with
    several; :func:`make_evaluate`) runs every ``plan.eval_every`` updates and after the last call: summaries then
    carry ``eval_return`` (the mean) and its minimum and maximum, and the run stops once that mean reaches
    ``plan.target_return`` (``target_reached`` is 1 then).

    ``plan.on_nonfinite`` (:class:`~podracer.run.nonfinite.NonfiniteWatch`): ``stop`` raises
    :class:`~podracer.run.nonfinite.Diverged` after logging the call that holds the first update whose loss, gradients
    or parameters are not finite, before ``after_call`` (nothing non-finite is saved); ``skip`` discards such updates
    inside the program; ``continue`` trains on. Summaries count them in ``nonfinite_updates``.
    """
    if not isinstance(plan, RunPlan):
        raise TypeError(
            f"anakin.run takes a RunPlan first (anakin.anakin_plan(...)), got {type(plan).__name__}: "
            "run(plan, agent, state, hooks, env=env), the state made by anakin.init."
        )
    sweep = agent if isinstance(agent, Entries) else None
    if sweep is None and agent.optimizer is None:
        raise ValueError(
            "anakin.run: the agent has no optimizer; give it one: agent._replace(optimizer=optax.adam(3e-4))."
        )
    learner = (None, None) if sweep is not None else (agent, agent.optimizer)
    return _train(plan, env, *learner, sweep, state, start_update, hooks or Hooks())


def _train(plan: RunPlan, env, agent, optimizer, sweep, state, start_update: int, hooks: Hooks):
    """The host loop of :func:`run`."""
    entries = _entries(state)
    seeds = None if entries is None else entries // (len(sweep.points) if sweep is not None else 1)
    progress = hooks.progress or (lambda event: None)
    progress("compiling")
    compile_start = time.perf_counter()
    update = _seeded_update(
        env, agent, optimizer, seeds, plan.rollout_length, sweep, plan.on_nonfinite == "skip", plan.rollout_unroll
    )
    p_multi = _compile(update, plan.updates_per_call, plan.devices, state)
    compile_seconds = time.perf_counter() - compile_start
    progress(f"compiled in {compile_seconds:.1f} s")
    summarize_call = summarize if entries is None else summarize_seeds
    # a population's values before the call in flight, to name a lane that diverges: the state's at the start, then
    # each call's summary (which holds them), so that no call reads the state back for it
    lanes_before: dict = {} if sweep is None else sweep.summary(parallel.host_entry(state.population))
    describe = _describer(sweep, seeds, lambda: lanes_before)
    watch = NonfiniteWatch(plan.on_nonfinite, parallel.is_main_process(), describe)
    per_call = (entries or 1) * plan.env_steps(plan.updates_per_call)  # env steps of a host call, every entry's
    history, call_seconds = [], []
    for call in _calls(plan.num_updates, plan.updates_per_call, start_update):
        if hooks.stop is not None and parallel.any_process(hooks.stop.is_set()):
            break
        start = time.perf_counter()
        state, metrics = p_multi(state)
        metrics = parallel.host_entry(metrics)  # waits for the call
        call_seconds.append(time.perf_counter() - start)
        done = (call + 1) * plan.updates_per_call
        summary, codes = _summary(metrics, summarize_call, float(plan.env_steps(done)), per_call / call_seconds[-1])
        if sweep is not None:  # a population adds every lane's values and lineage
            summary.update(sweep.summary(parallel.host_entry(state.population)))
        # every --eval-every updates, and at the end: the closing figure is the evaluation of what is saved last
        if hooks.evaluate is not None and plan.eval_every and (done % plan.eval_every == 0 or done == plan.num_updates):
            returns = hooks.evaluate(parallel.host_entry(state.learner.params))
            summary.update(summarize_evaluation(returns, plan.target_return))
        history.append(summary)
        if hooks.log is not None:
            hooks.log(summary)
        watch.check(codes, done - plan.updates_per_call)  # stop: raises before anything non-finite is saved
        if sweep is not None and (lost := getattr(sweep, "all_diverged", lambda _: None)(summary)):
            raise PopulationDiverged(done, lost)  # no lane left to copy: nothing of this call is saved
        lanes_before = summary
        if hooks.after_call is not None:
            hooks.after_call(state, done)
        if summary.get("target_reached"):
            break

    steady = float(np.median(call_seconds)) if call_seconds else float("nan")
    return RunResult(state, history, compile_seconds, per_call / steady, (watch.count, watch.seen))
