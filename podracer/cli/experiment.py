"""The composition root: a run built from its config (environment, agent, logger, checkpoints) and trained.

The feeders (:mod:`podracer.anakin`, :mod:`podracer.sebulba`) know neither the agent registry nor the config
tree; the entry points (``podracer``, ``python -m podracer.sebulba``) parse a config and call this module. The
builders it shares with :mod:`podracer.cli.evaluate` live in :mod:`podracer.cli.build`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import jax

from podracer.core import agents
from podracer.core import anakin as anakin_core
from podracer.run import anakin as anakin_loop
from podracer.run import checkpoint, lifetime, parallel, play, preflight, runlock, startup
from podracer.run import logging as logging_lib
from podracer.core import pbt
from podracer.core import sweep as sweep_lib
from podracer.core.agents.base import Agent
from podracer.cli.build import (
    anakin_plan,
    check_applies,
    check_normalizable,
    final_entries,
    host_env_factory,
    make_env,
    make_sweep,
    newest_checkpoint,
    normalization,
    normalization_options,
    run_ended,
    run_logger,
    run_metadata,
    sebulba_plan,
)
from podracer.cli.config import AnakinConfig, SebulbaConfig
from podracer.core.envs.base import HostEnv, example_action_mask, example_observation, observation_rank
from podracer.core.learner import init_learner_state, should_unroll
from podracer.run.logging import Logger
from podracer.run.runkit import AnakinCheckpoints, Progress, check_unfinished, sebulba_checkpoints
from podracer.run.sebulba import assemble, learner_loop as sebulba_learner
from podracer.run.plan import RunPlan


# ----------------------------------------------------------------------------------------- Anakin


def train_anakin(config: AnakinConfig, stop: threading.Event | None = None) -> anakin_loop.RunResult:
    """Runs ``config`` on every device of every process; only process 0 logs and writes checkpoints.

    A set ``stop`` ends the run after the host call in flight (with a checkpoint when ``config.checkpoint_dir`` is
    set). Call :func:`podracer.run.multihost.initialize` first in a multi-process run (``podracer anakin`` does).
    """
    with runlock.hold(_written(config), enabled=parallel.is_main_process()):  # before anything is written there
        return _start_anakin(config, stop)


def _written(config) -> dict[str, str | None]:
    """The directories a run writes to, by flag: one run at a time in each (:mod:`podracer.run.runlock`)."""
    return {"--checkpoint-dir": config.checkpoint_dir, "--log-dir": config.log_dir}


def _start_anakin(config: AnakinConfig, stop) -> anakin_loop.RunResult:
    run_lifetime = lifetime.starting(newest_checkpoint(config), run_ended(config))
    env = make_env(config)
    plan = anakin_plan(config)
    per_device = plan.envs_per_batch
    check_normalizable(config, env.spec())
    check_applies(config, env.spec())
    agent = agents.make(
        config.agent,
        env.spec(),
        run=plan.facts,
        normalize=normalization(config),
        normalize_options=normalization_options(config),
    )
    preflight.check_anakin(config, env, agent, per_device)
    counts = {"--num-envs-per-device": per_device, "devices (--cpu-devices on a CPU)": parallel.num_global_devices()}
    counts["--num-processes"] = parallel.process_count()
    metadata = run_metadata(config, "anakin", config.env, plan.facts, counts)
    resume_step, main = None, parallel.is_main_process()
    if config.checkpoint_dir:  # checked before anything is compiled
        identity = metadata["resume_identity"]
        resume_step = checkpoint.prepare(
            config.checkpoint_dir,
            resume=config.resume,
            identity=identity,
            hyperparameters=metadata["agent_hyperparameters"],
            run={"opponent": metadata["opponent"]},
        )
        budget = "--num-updates" if config.total_env_steps is None else "--total-env-steps"
        check_unfinished(config.checkpoint_dir, config.resume, plan.num_updates, budget)
        if main:
            checkpoint.mark_running(config.checkpoint_dir)
    try:
        return _train_anakin(config, plan, env, agent, metadata, resume_step, stop, run_lifetime)
    finally:
        if config.checkpoint_dir and main:
            checkpoint.mark_finished(config.checkpoint_dir)


def _anakin_evaluation(config: AnakinConfig, env, agent, sweep: anakin_core.Entries | None = None):
    """:func:`podracer.run.play.periodic_evaluation` for ``--eval-every`` (None without it), per seed and setting."""
    if not config.eval_every:
        return None
    greedy, entries = config.eval_policy == "greedy", sweep and (sweep.values(config.num_seeds), sweep.build)
    return play.periodic_evaluation(env, agent, config.eval_episodes, config.seed, config.num_seeds, entries, greedy)


def _sebulba_evaluation(config: SebulbaConfig, make_env, agent):
    """:func:`podracer.run.play.periodic_host_evaluation` for ``--eval-every`` (None without it)."""
    if not config.eval_every:
        return None
    greedy, saving = config.eval_policy == "greedy", bool(config.checkpoint_dir)
    return play.periodic_host_evaluation(
        make_env, agent, config.eval_episodes, config.seed, config.target_return, saving, greedy
    )


def _train_anakin(
    config: AnakinConfig, plan: RunPlan, env, agent: Agent, metadata: dict, resume_step, stop, run_lifetime
):
    main, optimizer, per_device = parallel.is_main_process(), agent.optimizer, plan.envs_per_batch
    key = anakin_loop.run_key(config.seed, config.num_seeds)
    sweep = make_sweep(config, env.spec(), plan.facts)
    startup.mark("environment")

    def refused(bad):
        flag = "--pbt-search" if config.population else "--sweep"
        return ValueError(
            f"{flag} {', '.join(bad)}: sets shapes or loop counts of the compiled update, so its settings "
            "cannot share one program; sweep it over separate runs."
        )

    try:
        state = anakin_loop.init(
            env, agent, optimizer, key, per_device, rollout_length=config.rollout_length, sweep=sweep
        )
    except TypeError:  # the settings' states cannot be stacked: which names set their shapes?
        if sweep is None or not (bad := anakin_core.shape_setting(env, sweep, per_device, config.rollout_length)):
            raise
        raise refused(bad) from None
    if sweep is not None and (bad := anakin_core.unsweepable(env, sweep, state, config.rollout_length)):
        raise refused(bad)
    if resume_step is not None:
        local, resume_step = checkpoint.restore_newest_run_state(config.checkpoint_dir, state)
        state = parallel.shard(local)
        if config.log_dir and main:  # the resumed run writes the lines after its checkpoint again
            logging_lib.keep_records_until(os.path.join(config.log_dir, "metrics.jsonl"), plan.env_steps(resume_step))
    if config.checkpoint_dir:  # before compiling: is there room for a checkpoint (run state, and the learner once)?
        per_save = checkpoint.local_bytes(state) + checkpoint.local_bytes(state.learner) // len(
            parallel.local_devices()
        )
        checkpoint.check_start_room(config.checkpoint_dir, per_save)
    saver = AnakinCheckpoints(
        config, metadata, plan.env_steps_per_update, resume_step or 0, final_entries(config, metadata), run_lifetime
    )
    several = config.num_seeds > 1 or sweep is not None
    keys = ("episode_return_min",) if several else ()
    logger = run_logger(config, plan.env_steps(plan.num_updates), keys, resume_step is not None)
    logger.add_fields(preflight.opponent_field(env))
    if main:
        print(
            preflight.anakin_banner(config, plan, resume_step, getattr(env, "opponent_name", None)),
            flush=True,
        )
    watch = Progress(plan.env_steps(plan.num_updates), plan.env_steps(resume_step or 0), main)
    with logger, lifetime.Heartbeat(watch.status, enabled=main) as heartbeat:
        watch.heartbeat = heartbeat
        hooks = anakin_loop.Hooks(
            log=watch.logging_to(logger),
            after_call=saver.after_call,
            stop=stop,
            progress=watch.event,
            evaluate=_anakin_evaluation(config, env, agent, sweep),
        )
        result = anakin_loop.run(plan, sweep or agent, state, hooks, env=env, start_update=resume_step or 0)
    if main and result.history and result.history[-1].get("target_reached"):
        last = result.history[-1]
        print(
            f"podracer: evaluation return {last['eval_return']:.3f} >= --target-return {config.target_return:g} after "
            f"{last['env_steps']:,.0f} env steps: stopping"
            + (" (saving a checkpoint)" if config.checkpoint_dir else ""),
            flush=True,
        )
    saver.finish(result)
    if main and sweep is not None and result.history:
        if config.population:  # the best lane, its values, and with --log-dir its schedule
            print(pbt.report(result.history, sweep.names, config.log_dir)[0], flush=True)
        else:
            print(sweep_lib.report(result.history, sweep.points, config.log_dir, config.eval_policy), flush=True)
    return result


# ---------------------------------------------------------------------------------------- Sebulba


def train_sebulba(
    config: SebulbaConfig,
    *,
    make_env: Callable[[int, int], HostEnv] | None = None,
    stop: threading.Event | None = None,
    log: Callable[[dict[str, float]], None] | None = None,
) -> sebulba_learner.SebulbaResult:
    """Runs ``config`` until ``total_env_steps`` or ``stop`` is set.

    ``make_env(seed, num_envs)`` builds each environment group of each actor thread
    (default: :func:`host_env_factory`). Returns the learner state and one summary per log line.
    """
    with runlock.hold(_written(config), enabled=parallel.is_main_process()):
        return _start_sebulba(config, make_env, stop, log)


def _start_sebulba(config: SebulbaConfig, make_env, stop, log) -> sebulba_learner.SebulbaResult:
    run_lifetime = lifetime.starting(newest_checkpoint(config), run_ended(config))
    stop = stop or threading.Event()
    make_env = make_env or host_env_factory(config)
    actor_ids = config.actor_devices or (0,)
    num_actors = len(actor_ids) * config.actor_threads
    per_actor = config.envs_per_actor(num_actors * parallel.process_count())
    layout = parallel.resolve_layout(config.actor_devices, config.learner_devices, per_actor)
    first_actor = parallel.process_index() * num_actors  # actors are numbered across processes
    num_groups = config.groups(layout.actor_devices[0].platform, per_actor)
    group_size = per_actor // num_groups
    probe = make_env(config.seed, 1)  # the spec, for the memory estimate before the batches are made
    try:
        spec, env_name = probe.spec(), getattr(probe, "task_id", config.env)
    finally:
        probe.close()
    check_normalizable(config, spec)
    check_applies(config, spec)
    plan = sebulba_plan(config, per_actor, layout)
    counts = {"--num-envs-per-actor": per_actor, "--num-processes": parallel.process_count()}
    metadata = run_metadata(config, "sebulba", env_name, plan.facts, counts)
    # A checkpoint of another run is never called finished.
    check_unfinished(
        config.checkpoint_dir, config.resume, plan.num_updates, "--total-env-steps", metadata["resume_identity"]
    )
    # One agent: the memory estimate's and the run's.
    agent = agents.make(
        config.agent,
        spec,
        run=plan.facts,
        normalize=normalization(config),
        normalize_options=normalization_options(config),
    )
    preflight.check_sebulba(config, agent, spec, layout, num_actors, per_actor)
    # Actor i's group g gets seeds as if its batch were one envpool batch (envpool seeds env j with seed + j).
    groups = [
        [make_env(config.seed + 1000 * (first_actor + i) + g * group_size, group_size) for g in range(num_groups)]
        for i in range(num_actors)
    ]
    try:
        return _run_sebulba(
            config, agent, plan, metadata, layout, groups, first_actor, stop, log, make_env, run_lifetime
        )
    finally:
        for group in groups:
            for env in group:
                env.close()


def _run_sebulba(
    config,
    agent: Agent,
    plan: RunPlan,
    metadata: dict,
    layout,
    groups,
    first_actor: int,
    stop,
    log,
    make_env,
    run_lifetime,
):
    startup.mark("environment")
    spec, first_env = groups[0][0].spec(), groups[0][0]
    if isinstance(log, Logger):
        log.add_fields(preflight.opponent_field(first_env))
    frame_skip = 4 if getattr(first_env, "atari", False) else 1
    schedule = sebulba_learner.Schedule(
        plan.num_updates,
        plan.env_steps_per_update,
        config.log_every,
        config.checkpoint_every,
        config.checkpoint_every_seconds,
        frame_skip,
        plan.eval_every,
        plan.on_nonfinite,
    )
    learner_key, actor_key = jax.random.split(jax.random.key(config.seed))
    observation, mask = example_observation(spec), example_action_mask(spec)
    state = init_learner_state(
        agent, agent.optimizer, learner_key, observation, rollout_length=config.rollout_length, action_mask=mask
    )
    per_actor = plan.envs_per_batch
    state, updates, save = sebulba_checkpoints(config, metadata, state, plan.env_steps_per_update)
    unroll = should_unroll(observation_rank(spec), layout.learner_devices[0].platform)
    if parallel.is_main_process():
        print(
            preflight.sebulba_banner(
                config, metadata["env"], first_env, layout, per_actor, len(groups[0]), updates, unroll
            ),
            flush=True,
        )
    actors = assemble.Actors(
        groups, config.actor_threads, first_actor, actor_key, config.actor_timeout, config.max_policy_lag
    )
    try:
        return assemble.train(
            agent,
            parallel.replicate(state, layout.learner_devices),
            updates,
            schedule,
            layout,
            actors,
            rollout_length=config.rollout_length,
            queue_size=config.queue_size,
            stop=stop,
            unroll=unroll,
            save=save,
            log=log,
            evaluate=_sebulba_evaluation(config, make_env, agent),
            run_lifetime=run_lifetime,
        )
    finally:
        if config.checkpoint_dir and parallel.is_main_process():
            checkpoint.mark_finished(config.checkpoint_dir)


def run_sebulba(config: SebulbaConfig, stop: threading.Event | None = None) -> sebulba_learner.SebulbaResult:
    """The command line's Sebulba run: console progress and, with ``log_dir``, JSONL and TensorBoard."""
    with runlock.hold(_written(config), enabled=parallel.is_main_process()):  # before the logger opens its files
        resuming = config.resume != "no" and bool(checkpoint.steps(config.checkpoint_dir or ""))
        # one throughput figure on the console (sps); fps, frames/s, stays in metrics.jsonl
        keys = ("learner_wait_s", "actor_put_wait_s", "policy_lag")
        logger = run_logger(config, config.total_env_steps, keys, resuming)
        with logger:
            return train_sebulba(config, log=logger, stop=stop)
