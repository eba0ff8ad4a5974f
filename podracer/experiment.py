"""The composition root: environment, agent, optimizer, logger and checkpoints built from a config.

The feeders (:mod:`podracer.anakin`, :mod:`podracer.sebulba`) know neither the agent
registry nor the config tree; the entry points (``examples/``, ``python -m
podracer.sebulba``, ``python -m podracer.evaluate``) parse a config and call this module.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Callable

import jax

from podracer import agents, anakin, checkpoint, envs, lifetime, parallel, play, preflight
from podracer import normalize as normalize_lib
from podracer import logging as logging_lib
from podracer import sweep as sweep_lib
from podracer.agents.base import Agent, hyperparameters, with_hyperparameters
from podracer.config import AnakinConfig, SebulbaConfig
from podracer.envs.base import HostEnv, example_action_mask, example_observation, observation_rank
from podracer.learner import init_learner_state, should_unroll
from podracer.logging import Logger, make_logger
from podracer.sebulba import learner as sebulba_learner
from podracer.runkit import AnakinCheckpoints, Progress, sebulba_checkpoints
from podracer.sebulba import assemble
from podracer.types import RunFacts


def make_agent(agent_config, spec, normalize: str | None = None, run: RunFacts | None = None) -> Agent:
    """The agent an agent config (``PPOConfig(...)``) describes, for environments of ``spec``, with its optimizer
    (``run``: the facts of the run it trains in, :class:`~podracer.types.RunFacts`); with ``normalize``
    (:func:`normalization`: "observations", "rewards" or "observations+rewards"), wrapped to learn and act on
    normalised observations and scaled rewards (:mod:`podracer.normalize`)."""
    agent = agents.make(agent_config, spec, run=run)
    if not normalize:
        return agent
    return normalize_lib.wrap(
        agent,
        observations="observations" in normalize,
        rewards="rewards" in normalize,
        discount=getattr(agent_config, "discount", 0.99),
    )


def normalization(config) -> str | None:
    """What ``--normalize-observations`` and ``--normalize-rewards`` ask for, as checkpoints record it (the
    ``normalize`` entry of their metadata): None, "observations", "rewards" or "observations+rewards"."""
    parts = [
        name
        for name, on in (("observations", config.normalize_observations), ("rewards", config.normalize_rewards))
        if on
    ]
    return "+".join(parts) or None


def check_normalizable(config, spec) -> None:
    """``--normalize-observations`` needs a floating-point observation to normalise."""
    if config.normalize_observations and not normalize_lib.has_floating_leaf(example_observation(spec)):
        raise ValueError(
            f"--normalize-observations: {config.env}'s observations have no floating-point entry to "
            "normalise (images and boards of integers are scaled by their torso); drop the flag."
        )


def agent_metadata(agent_config, run: RunFacts | None = None) -> dict:
    """What a checkpoint records of the agent, enough for :func:`agent_config_from` and :func:`run_facts_from` to
    rebuild it: its name, its hyper-parameters by flag name, and the facts of the run it trained in."""
    out = {"agent": agents.name_of(agent_config), "agent_hyperparameters": hyperparameters(agent_config)}
    return out if run is None else {**out, "run": run._asdict()}


def agent_config_from(metadata: dict):
    """The agent config a checkpoint's metadata (:func:`agent_metadata`) records; older checkpoints' records too
    (a nested ``optimizer`` entry, DQN's ``run_env_steps``)."""
    hyper = {}
    for name, value in metadata["agent_hyperparameters"].items():
        if isinstance(value, dict):  # a nested group, as dataclasses.asdict wrote it
            hyper.update(value)
        elif name != "run_env_steps":  # now a run fact (run_facts_from)
            hyper[name] = tuple(value) if isinstance(value, list) else value
    cls = agents.config_class(metadata["agent"])
    return with_hyperparameters(cls(), hyper)


def run_facts_from(metadata: dict) -> RunFacts | None:
    """The run facts a checkpoint's metadata records (None for checkpoints written before they were recorded, or
    the run's length alone where DQN's config kept it)."""
    if "run" in metadata:
        return RunFacts(**metadata["run"])
    steps = metadata.get("agent_hyperparameters", {}).get("run_env_steps")
    return (
        None if steps is None else RunFacts(num_updates=1, envs_per_learner=1, rollout_length=1, total_env_steps=steps)
    )


# ----------------------------------------------------------------------------------------- Anakin


def _newest_checkpoint(config):
    """What names the run's newest complete checkpoint when a stop's save does not finish (None: no directory)."""
    directory = config.checkpoint_dir
    return None if not directory else lambda: checkpoint.describe_newest(directory)


def anakin_run_facts(config: AnakinConfig, num_global_devices: int) -> RunFacts:
    """The facts an agent is told of an Anakin run over ``num_global_devices`` devices: each device learns from its
    own environments."""
    per_device = config.envs_per_device(num_global_devices)
    return RunFacts(
        num_updates=config.num_updates,
        envs_per_learner=per_device,
        rollout_length=config.rollout_length,
        total_env_steps=config.num_updates * config.rollout_length * per_device * num_global_devices,
    )


def train_anakin(config: AnakinConfig, stop: threading.Event | None = None) -> anakin.RunResult:
    """Runs ``config`` on every device of every process; only process 0 logs and writes checkpoints.

    A set ``stop`` ends the run after the host call in flight (with a checkpoint when
    ``config.checkpoint_dir`` is set). Call :func:`podracer.multihost.initialize` first in a
    multi-process run (the example's entry point does, from the config's multi-process fields).
    """
    lifetime.starting(_newest_checkpoint(config))
    env = envs.make(config.env)
    num_global = parallel.num_global_devices()
    run = anakin_run_facts(config, num_global)
    per_device = run.envs_per_learner
    check_normalizable(config, env.spec())
    agent = make_agent(config.agent, env.spec(), normalization(config), run)
    optimizer = agent.optimizer
    preflight.check_anakin_batch(agent, per_device, config.rollout_length)
    preflight.check_memory(
        preflight.anakin_memory(config, env, agent, optimizer, per_device),
        parallel.available_memory(),
        f"{per_device:,} envs per device (--num-envs-per-device, --num-envs), --rollout-length "
        f"{config.rollout_length}"
        + (f", --replay-capacity {config.agent.replay_capacity:,}" if hasattr(config.agent, "replay_capacity") else "")
        + (f", {config.num_seeds} seeds" if config.num_seeds > 1 else ""),
    )
    steps_per_update = config.rollout_length * per_device * num_global
    metadata = {
        "mode": "anakin",
        "env": config.env,
        "rollout_length": config.rollout_length,
        "seed": config.seed,
        "normalize": normalization(config),
        **agent_metadata(config.agent, run),
    }
    resume_step, main = None, parallel.is_main_process()
    if config.checkpoint_dir:  # checked before anything is compiled
        identity = {k: metadata[k] for k in ("mode", "env", "agent", "rollout_length", "normalize")}
        resume_step = checkpoint.prepare(config.checkpoint_dir, resume=config.resume, identity=identity)
        if main:
            checkpoint.mark_running(config.checkpoint_dir)
    try:
        return _train_anakin(
            config, env, agent, optimizer, per_device, steps_per_update, metadata, resume_step, stop, run
        )
    finally:
        if config.checkpoint_dir and main:
            checkpoint.mark_finished(config.checkpoint_dir)


def _anakin_evaluation(config: AnakinConfig, env, agent, sweep: anakin.Sweep | None = None):
    """:func:`podracer.play.periodic_evaluation` for ``--eval-every`` (None without it): per seed with
    ``--num-seeds``, per setting and seed with ``--sweep``."""
    if not config.eval_every:
        return None
    entries = None if sweep is None else (sweep.expand(anakin.seed_keys(config.seed, config.num_seeds))[1], sweep.build)
    return play.periodic_evaluation(env, agent, config.eval_episodes, config.seed, config.num_seeds, entries)


def _sebulba_evaluation(config: SebulbaConfig, make_env, agent):
    """:func:`podracer.play.periodic_host_evaluation` for ``--eval-every`` (None without it)."""
    if not config.eval_every:
        return None
    return play.periodic_host_evaluation(
        make_env, agent, config.eval_episodes, config.seed, config.target_return, saving=bool(config.checkpoint_dir)
    )


def _final_entries(config: AnakinConfig, metadata: dict) -> list[tuple[str, dict]]:
    """Where each seed (and setting) of a run of several is saved at its end, and its metadata."""
    out = []
    for point in config.sweep_points or ({},):
        agent = agent_metadata(with_hyperparameters(config.agent, point))
        for seed in range(config.seed, config.seed + config.num_seeds):
            where = os.path.join(sweep_lib.label(point), f"seed_{seed}") if point else f"seed_{seed}"
            out.append((where, {**metadata, **agent, "seed": seed}))
    return out


def make_sweep(config: AnakinConfig, spec, run: RunFacts | None = None) -> anakin.Sweep | None:
    """The :class:`~podracer.anakin.Sweep` of ``--sweep`` (None without one): each setting's agent and optimizer
    (``run``: the run's facts, where a decaying learning rate ends)."""
    if not config.sweep:
        return None

    def build(values):
        agent = make_agent(sweep_lib.with_values(config.agent, values), spec, normalization(config), run)
        return agent, agent.optimizer

    return anakin.Sweep(config.sweep_points, build)


def _train_anakin(
    config: AnakinConfig,
    env,
    agent,
    optimizer,
    per_device: int,
    steps_per_update: int,
    metadata: dict,
    resume_step: int | None,
    stop,
    run: RunFacts | None = None,
) -> anakin.RunResult:
    main, num_global = parallel.is_main_process(), parallel.num_global_devices()
    key = anakin.seed_keys(config.seed, config.num_seeds) if config.num_seeds > 1 else jax.random.key(config.seed)
    sweep = make_sweep(config, env.spec(), run)
    state = anakin.init(env, agent, optimizer, key, per_device, rollout_length=config.rollout_length, sweep=sweep)
    if sweep is not None and (bad := anakin.unsweepable(env, sweep, state, config.rollout_length)):
        raise ValueError(
            f"--sweep {', '.join(bad)}: sets shapes or loop counts of the compiled update, so its settings "
            "cannot share one program; sweep it over separate runs."
        )
    if resume_step is not None:
        local, resume_step = checkpoint.restore_newest_run_state(config.checkpoint_dir, state)
        state = parallel.shard(local)
        if config.log_dir and main:  # the resumed run writes the lines after its checkpoint again
            logging_lib.keep_records_until(
                os.path.join(config.log_dir, "metrics.jsonl"), resume_step * steps_per_update
            )
    if config.checkpoint_dir:  # before compiling: is there room for a checkpoint (run state, and the learner once)?
        per_save = checkpoint.local_bytes(state) + checkpoint.local_bytes(state.learner) // len(
            parallel.local_devices()
        )
        checkpoint.check_start_room(config.checkpoint_dir, per_save)
    saver = AnakinCheckpoints(config, metadata, steps_per_update, resume_step or 0, _final_entries(config, metadata))
    logger = make_logger(
        config.log_dir,
        is_main=main,
        total_env_steps=config.num_updates * steps_per_update,
        console_keys=(("episode_return_min",) if config.num_seeds > 1 or sweep else ())
        + (("eval_return", "eval_return_min") if config.eval_every else ()),
        wandb_project=config.wandb_project,
        wandb_config=dataclasses.asdict(config),
        process=parallel.process_index(),
    )
    logger.add_fields(preflight.opponent_field(env))
    if main:
        print(
            preflight.anakin_banner(config, num_global, per_device, resume_step, getattr(env, "opponent_name", None)),
            flush=True,
        )
    watch = Progress(config.num_updates * steps_per_update, (resume_step or 0) * steps_per_update, main)
    with logger, lifetime.Heartbeat(watch.status, enabled=main) as heartbeat:
        watch.heartbeat = heartbeat
        result = anakin.run(
            env,
            agent,
            optimizer,
            key=key,
            num_envs_per_device=per_device,
            rollout_length=config.rollout_length,
            num_updates=config.num_updates,
            updates_per_call=config.updates_per_call,
            log=watch.logging_to(logger),
            state=state,
            start_update=resume_step or 0,
            after_call=saver.after_call,
            stop=stop,
            progress=watch.event,
            evaluate=_anakin_evaluation(config, env, agent, sweep),
            eval_every=config.eval_every,
            target_return=config.target_return,
            sweep=sweep,
        )
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
        print(sweep_lib.report(result.history, sweep.points, config.log_dir), flush=True)
    return result


# ---------------------------------------------------------------------------------------- Sebulba


def host_env_factory(config: SebulbaConfig) -> Callable[[int, int], HostEnv]:
    """``make_env(seed, num_envs)`` for ``config.env``: envpool, gymnasium (``gymnasium:ID``), or a JAX environment
    stepped on the host (``jax:NAME``, ``SUITE:NAME``); see :func:`podracer.envs.make_host`."""

    def make_env(seed: int, num_envs: int) -> HostEnv:
        return envs.make_host(
            config.env, num_envs, seed, num_threads=config.envpool_threads, vectorization=config.gymnasium_vectorization
        )

    return make_env


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
    lifetime.starting(_newest_checkpoint(config))
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
        spec = probe.spec()
    finally:
        probe.close()
    check_normalizable(config, spec)
    run = sebulba_run_facts(config, per_actor, layout)
    agent = make_agent(config.agent, spec, normalization(config), run)  # once: the estimate's and the run's
    preflight.check_memory(
        preflight.sebulba_memory(config, agent, spec, layout, num_actors, per_actor),
        parallel.available_memory(),
        f"{per_actor:,} envs per actor thread (--num-envs-per-actor, --num-envs) x {num_actors} thread(s), "
        f"--rollout-length {config.rollout_length}, --queue-size {config.queue_size}"
        + (f", --replay-capacity {config.agent.replay_capacity:,}" if hasattr(config.agent, "replay_capacity") else ""),
    )
    # Actor i's group g gets seeds as if its batch were one envpool batch (envpool seeds env j with seed + j).
    groups = [
        [make_env(config.seed + 1000 * (first_actor + i) + g * group_size, group_size) for g in range(num_groups)]
        for i in range(num_actors)
    ]
    try:
        return _run_sebulba(config, agent, run, layout, groups, first_actor, stop, log, make_env)
    finally:
        for group in groups:
            for env in group:
                env.close()


def sebulba_run_facts(config: SebulbaConfig, per_actor: int, layout: parallel.Layout) -> RunFacts:
    """The facts an agent is told of a Sebulba run of ``per_actor`` environments per actor thread: every process
    feeds one trajectory per actor thread per update round, split over its learner devices."""
    steps_per_update = config.rollout_length * per_actor * parallel.process_count()
    num_updates = math.ceil(config.total_env_steps / steps_per_update)
    envs_per_learner = per_actor // len(parallel.local_devices(layout.learner_devices))
    return RunFacts(num_updates, envs_per_learner, config.rollout_length, config.total_env_steps)


def _run_sebulba(config, agent: Agent, run: RunFacts, layout, groups, first_actor: int, stop, log, make_env):
    spec, first_env = groups[0][0].spec(), groups[0][0]
    if isinstance(log, Logger):
        log.add_fields(preflight.opponent_field(first_env))
    per_actor = sum(env.num_envs for env in groups[0])
    steps_per_update = config.rollout_length * per_actor * parallel.process_count()  # as in sebulba_run_facts
    frame_skip = 4 if getattr(first_env, "atari", False) else 1
    schedule = sebulba_learner.Schedule(
        run.num_updates,
        steps_per_update,
        config.log_every,
        config.checkpoint_every,
        config.checkpoint_every_seconds,
        frame_skip,
        config.eval_every,
    )
    learner_key, actor_key = jax.random.split(jax.random.key(config.seed))
    observation, mask = example_observation(spec), example_action_mask(spec)
    state = init_learner_state(
        agent, agent.optimizer, learner_key, observation, rollout_length=config.rollout_length, action_mask=mask
    )
    metadata = {
        "mode": "sebulba",
        "env": getattr(first_env, "task_id", config.env),
        "seed": config.seed,
        "rollout_length": config.rollout_length,
        "normalize": normalization(config),
        **agent_metadata(config.agent, run),
    }
    state, updates, save = sebulba_checkpoints(config, metadata, state, steps_per_update)
    unroll = should_unroll(observation_rank(spec), layout.learner_devices[0].platform)
    if parallel.is_main_process():
        print(
            preflight.sebulba_banner(
                config, metadata["env"], first_env, layout, per_actor, len(groups[0]), updates, unroll
            ),
            flush=True,
        )
    actors = assemble.Actors(groups, config.actor_threads, first_actor, actor_key, config.actor_timeout)
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
        )
    finally:
        if config.checkpoint_dir and parallel.is_main_process():
            checkpoint.mark_finished(config.checkpoint_dir)


def run_sebulba(config: SebulbaConfig, stop: threading.Event | None = None) -> sebulba_learner.SebulbaResult:
    """The command line's Sebulba run: console progress and, with ``log_dir``, JSONL and TensorBoard."""
    logger = make_logger(
        config.log_dir,
        is_main=parallel.is_main_process(),
        total_env_steps=config.total_env_steps,
        console_keys=("fps", "learner_wait_s", "actor_put_wait_s", "policy_lag")
        + (("eval_return", "eval_return_min") if config.eval_every else ()),
        wandb_project=config.wandb_project,
        wandb_config=dataclasses.asdict(config),
        process=parallel.process_index(),
    )
    with logger:
        return train_sebulba(config, log=logger, stop=stop)
