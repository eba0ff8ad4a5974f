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

from podracer import agents, anakin, checkpoint, disk, envs, lifetime, parallel, play
from podracer import normalize as normalize_lib
from podracer import logging as logging_lib
from podracer import sweep as sweep_lib
from podracer.agents.base import Agent, hyperparameters, with_hyperparameters
from podracer.config import AnakinConfig, SebulbaConfig
from podracer.envs.base import HostEnv, example_action_mask, example_observation, observation_rank
from podracer.learner import init_learner_state, should_unroll
from podracer.logging import Logger, make_logger
from podracer.sebulba import learner as sebulba_learner
from podracer.runkit import Cadence, Progress, StopSnapshot
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


def check_memory(needed: int, available: int | None, what: str) -> None:
    """A one-line ``ValueError`` before anything is allocated or compiled when ``needed`` bytes (podracer's
    estimate: the arrays a run keeps, and its rollouts) exceed ``available``; ``what`` names the flags that set it."""
    if available is not None and needed > available:
        raise ValueError(
            f"this run needs about {disk.size(needed)} of memory for its state and rollouts "
            f"({what}) and this process has {disk.size(available)} available; lower them."
        )


def _anakin_memory(config: AnakinConfig, env, agent, optimizer, per_device: int) -> int:
    """Bytes of this process's Anakin run: every local device's state (seeds and settings included) and two
    rollouts' worth of time steps (the trajectory and what its loss keeps), estimated from shapes alone."""
    state = jax.eval_shape(
        lambda key: anakin.init_state(env, agent, optimizer, key, per_device, rollout_length=config.rollout_length),
        jax.random.key(0),
    )
    entries = config.num_seeds * max(len(config.sweep_points), 1)
    rollout = 2 * config.rollout_length * checkpoint.tree_bytes(state.rollout)
    return len(parallel.local_devices()) * entries * (checkpoint.tree_bytes(state) + rollout)


def _sebulba_memory(config: SebulbaConfig, spec, layout: parallel.Layout, num_actors: int, per_actor: int) -> int:
    """Bytes of this process's Sebulba run: the learner state on each local learner device, and the trajectories
    in flight (the queue's, one being filled per actor thread, one being learned) with the environments' own
    observation buffers, estimated from shapes alone."""
    agent = make_agent(config.agent, spec, normalization(config))
    optimizer = agent.optimizer
    state = jax.eval_shape(
        lambda key: init_learner_state(
            agent,
            optimizer,
            key,
            example_observation(spec),
            rollout_length=config.rollout_length,
            action_mask=example_action_mask(spec),
        ),
        jax.random.key(0),
    )
    per_env_step = checkpoint.tree_bytes(example_observation(spec)) + 64  # and its reward, action, logits, ...
    trajectories = (config.queue_size + num_actors + 1) * (config.rollout_length + 1) * per_actor * per_env_step
    return (
        len(parallel.local_devices(layout.learner_devices)) * checkpoint.tree_bytes(state)
        + trajectories
        + 2 * num_actors * per_actor * per_env_step
    )


def _check_anakin_batch(agent: Agent, per_device: int, rollout_length: int) -> None:
    if agent.num_minibatches > 1 and agent.minibatch_axis == 0:  # minibatches of transitions
        parallel.check_divisible(
            per_device * rollout_length,
            agent.num_minibatches,
            "the per-device batch (envs per device x rollout length)",
            "minibatches (--num-minibatches)",
        )
    elif agent.num_minibatches > 1:  # minibatches of whole sequences (a recurrent PPO)
        parallel.check_divisible(
            per_device,
            agent.num_minibatches,
            "the per-device batch of sequences (envs per device)",
            "minibatches (--num-minibatches)",
        )


def _opponent_field(env) -> dict:
    """What a two-player game's run is against (``opponent`` in every ``metrics.jsonl`` record), as the
    environment names it."""
    opponent = getattr(env, "opponent_name", None)
    return {"opponent": opponent} if opponent else {}


def _against(opponent: str | None) -> str:
    return f" against {opponent}" if opponent else ""


def _anakin_banner(
    config: AnakinConfig, num_global: int, per_device: int, resume_step: int | None, opponent: str | None = None
) -> str:
    seeds = f", seeds {config.seed} ... {config.seed + config.num_seeds - 1} together" if config.num_seeds > 1 else ""
    if config.sweep:
        points = len(config.sweep_points)
        seeds = f", {points} settings x {config.num_seeds} seed(s) = {points * config.num_seeds} runs together" + (
            f" (seeds {config.seed} ... {config.seed + config.num_seeds - 1})" if config.num_seeds > 1 else ""
        )
    resume = f"; resuming after {resume_step} updates" if resume_step is not None else ""
    return (
        f"podracer anakin: {config.agent_name} on {config.env}{_against(opponent)}, {num_global} device(s) in "
        f"{parallel.process_count()} "
        f"process(es) [{jax.default_backend()}], {per_device} envs per device, rollout {config.rollout_length}, "
        f"{config.num_updates} updates{seeds}{resume}"
    )


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
    _check_anakin_batch(agent, per_device, config.rollout_length)
    check_memory(
        _anakin_memory(config, env, agent, optimizer, per_device),
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
    saver = _AnakinSaver(config, metadata, steps_per_update, resume_step or 0)
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
    logger.add_fields(_opponent_field(env))
    if main:
        print(
            _anakin_banner(config, num_global, per_device, resume_step, getattr(env, "opponent_name", None)), flush=True
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


EVAL_SEED_OFFSET = 1_000_003  # evaluation environments: seeds apart from the training ones


def _anakin_evaluation(config: AnakinConfig, env, agent, sweep: anakin.Sweep | None = None):
    """``evaluate(params) -> returns`` for ``--eval-every``: greedy episodes compiled on the device, with the same
    environment seeds at every evaluation (so equal parameters score equally); per seed with ``--num-seeds``, per
    setting and seed with ``--sweep``."""
    if not config.eval_every:
        return None
    key = jax.random.key(config.seed + EVAL_SEED_OFFSET)
    if sweep is not None:
        values = sweep.expand(anakin.seed_keys(config.seed, config.num_seeds))[1]

        def evaluate_entry(params, entry_values):
            return anakin.make_evaluate(env, sweep.build(entry_values)[0], config.eval_episodes)(params, key)

        compiled = jax.jit(lambda params: jax.vmap(evaluate_entry)(params, values))
        return lambda params: jax.device_get(compiled(params))
    evaluate = anakin.make_evaluate(env, agent, config.eval_episodes)
    if config.num_seeds > 1:
        evaluate = jax.vmap(evaluate, in_axes=(0, None))
    compiled = jax.jit(evaluate)
    return lambda params: jax.device_get(compiled(params, key))


class _AnakinSaver:
    """An Anakin run's checkpoints: at the run kit's cadence (:class:`~podracer.runkit.Cadence`), of the last
    completed call on a stop that abandons the call in flight, and at the end."""

    def __init__(self, config: AnakinConfig, metadata: dict, steps_per_update: int, saved: int):
        self.config, self.metadata, self.steps_per_update = config, metadata, steps_per_update
        self.cadence = Cadence(config.checkpoint_every, config.checkpoint_every_seconds, saved)
        one_run = config.num_seeds == 1 and not config.sweep  # several seeds save once, at the end
        self.stop_snapshot = StopSnapshot(
            self.snapshot,
            lambda copy, updates: self.save(None, updates, copy),
            lambda: self.saved,
            enabled=bool(config.checkpoint_dir) and one_run,
        )

    @property
    def saved(self) -> int:
        return self.cadence.saved

    @staticmethod
    def snapshot(state: anakin.AnakinState):
        """Host copies of what a checkpoint holds: this process's run state, and the learner (process 0). Only
        copies of device buffers, no computation: a snapshot may be saved from the signal's thread while the
        main thread runs the next call."""
        local = parallel.local_entries(state)
        learner = jax.tree.map(lambda x: x[0], local.learner) if parallel.is_main_process() else None
        return local, learner

    def save(self, state: anakin.AnakinState | None, updates: int, snapshot=None) -> None:
        """A checkpoint after ``updates`` updates (of ``state``, or of its :meth:`snapshot`): every process's run
        state, then process 0's learner."""
        local, learner = snapshot or self.snapshot(state)
        checkpoint.save_run_state(self.config.checkpoint_dir, updates, None, local=local)
        if learner is not None:
            checkpoint.save(
                self.config.checkpoint_dir, learner, {**self.metadata, "env_steps": updates * self.steps_per_update}
            )
        self.cadence.saved_at(updates)

    def after_call(self, state: anakin.AnakinState, updates: int) -> None:
        if self.config.checkpoint_dir and self.cadence.due(updates):
            self.save(state, updates)
        self.stop_snapshot.completed(state, updates)

    def finish(self, result: anakin.RunResult) -> None:
        if not lifetime.finishing():  # Ctrl-C abandoned a call and saves the last completed one
            lifetime.wait_for_the_end()
        config = self.config
        if not config.checkpoint_dir:
            return
        done = round(result.history[-1]["env_steps"] / self.steps_per_update) if result.history else self.saved
        if config.num_seeds == 1 and not config.sweep:
            if done > self.saved:  # the end of the run, or Ctrl-C
                self.save(result.state, done)
            return
        if parallel.is_main_process():  # one final checkpoint per seed: DIR/seed_S (a sweep: DIR/SETTING/seed_S)
            learner = parallel.unreplicate(result.state.learner)
            for i, (where, metadata) in enumerate(self.entries()):
                checkpoint.save(
                    os.path.join(config.checkpoint_dir, where),
                    jax.tree.map(lambda x: x[i], learner),  # noqa: B023 - used at once
                    {**metadata, "env_steps": done * self.steps_per_update},
                )

    def entries(self) -> list[tuple[str, dict]]:
        """Where each entry of the seed axis is saved, and its metadata: seed by seed, setting by setting."""
        config, points = self.config, self.config.sweep_points or ({},)
        out = []
        for point in points:
            agent = agent_metadata(with_hyperparameters(config.agent, point))
            for seed in range(config.seed, config.seed + config.num_seeds):
                where = os.path.join(sweep_lib.label(point), f"seed_{seed}") if point else f"seed_{seed}"
                out.append((where, {**self.metadata, **agent, "seed": seed}))
        return out


# ---------------------------------------------------------------------------------------- Sebulba


def host_env_factory(config: SebulbaConfig) -> Callable[[int, int], HostEnv]:
    """``make_env(seed, num_envs)`` for ``config.env``: envpool, gymnasium (``gymnasium:ID``), or a JAX environment
    stepped on the host (``jax:NAME``, ``SUITE:NAME``); see :func:`podracer.envs.make_host`."""

    def make_env(seed: int, num_envs: int) -> HostEnv:
        return envs.make_host(
            config.env, num_envs, seed, num_threads=config.envpool_threads, vectorization=config.gymnasium_vectorization
        )

    return make_env


def _sebulba_checkpoints(config: SebulbaConfig, metadata: dict, state, steps_per_update: int):
    """``(state, updates done, save)``: the state resumed from ``--checkpoint-dir`` when asked, and the saver."""
    if not config.checkpoint_dir:
        return state, 0, None
    identity = {k: metadata[k] for k in ("mode", "env", "agent", "normalize")}
    updates = 0
    if checkpoint.prepare(config.checkpoint_dir, resume=config.resume, identity=identity) is not None:
        state, _ = checkpoint.restore(config.checkpoint_dir, state)
        updates = int(state.step)
        if config.log_dir and parallel.is_main_process():  # the resumed run writes the lines after it again
            logging_lib.keep_records_until(os.path.join(config.log_dir, "metrics.jsonl"), updates * steps_per_update)
    checkpoint.check_start_room(config.checkpoint_dir, checkpoint.tree_bytes(checkpoint.packed(state)))
    if parallel.is_main_process():
        checkpoint.mark_running(config.checkpoint_dir)

    def save(state, updates: int, replicated: bool = True) -> None:
        if parallel.is_main_process():
            checkpoint.save(
                config.checkpoint_dir,
                parallel.unreplicate(state) if replicated else state,
                {**metadata, "env_steps": updates * steps_per_update},
            )

    return state, updates, save


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
    check_memory(
        _sebulba_memory(config, spec, layout, num_actors, per_actor),
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
        return _run_sebulba(config, layout, groups, first_actor, stop, log, make_env)
    finally:
        for group in groups:
            for env in group:
                env.close()


def _run_sebulba(config: SebulbaConfig, layout: parallel.Layout, groups, first_actor: int, stop, log, make_env):
    spec, first_env = groups[0][0].spec(), groups[0][0]
    if isinstance(log, Logger):
        log.add_fields(_opponent_field(first_env))
    check_normalizable(config, spec)
    per_actor = sum(env.num_envs for env in groups[0])
    # Every process feeds one trajectory per actor per update round; the update averages over all of them.
    steps_per_update = config.rollout_length * per_actor * parallel.process_count()
    schedule = sebulba_learner.Schedule(
        num_updates=math.ceil(config.total_env_steps / steps_per_update),
        steps_per_update=steps_per_update,
        log_every=config.log_every,
        checkpoint_every=config.checkpoint_every,
        checkpoint_every_seconds=config.checkpoint_every_seconds,
        frame_skip=4 if getattr(first_env, "atari", False) else 1,
        eval_every=config.eval_every,
    )
    run = RunFacts(
        num_updates=schedule.num_updates,
        rollout_length=config.rollout_length,
        envs_per_learner=per_actor // len(parallel.local_devices(layout.learner_devices)),
        total_env_steps=config.total_env_steps,
    )
    agent = make_agent(config.agent, spec, normalization(config), run)
    learner_key, actor_key = jax.random.split(jax.random.key(config.seed))
    state = init_learner_state(
        agent,
        agent.optimizer,
        learner_key,
        example_observation(spec),
        rollout_length=config.rollout_length,
        action_mask=example_action_mask(spec),
    )
    metadata = {
        "mode": "sebulba",
        "env": getattr(first_env, "task_id", config.env),
        "seed": config.seed,
        "rollout_length": config.rollout_length,
        "normalize": normalization(config),
        **agent_metadata(config.agent, run),
    }
    state, updates, save = _sebulba_checkpoints(config, metadata, state, steps_per_update)
    unroll = should_unroll(observation_rank(spec), layout.learner_devices[0].platform)
    if parallel.is_main_process():
        print(
            _sebulba_banner(config, metadata["env"], first_env, layout, per_actor, len(groups[0]), updates, unroll),
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


def _sebulba_banner(
    config: SebulbaConfig,
    env_name: str,
    first_env,
    layout: parallel.Layout,
    per_actor: int,
    num_groups: int,
    updates: int,
    unroll: bool,
) -> str:
    """What a Sebulba run says before it starts: the agent, the task, the device layout; a shared device; the
    CPU's pace for images."""
    opponent = _against(getattr(first_env, "opponent_name", None))
    lines = [
        f"podracer sebulba: {config.agent_name} on {env_name}{opponent}; actor devices "
        f"{[d.id for d in layout.actor_devices]} x {config.actor_threads} thread(s) x {per_actor} envs "
        f"({num_groups} group(s)); learner devices {[d.id for d in layout.learner_devices]} in "
        f"{parallel.process_count()} process(es)" + (f"; resuming after {updates} updates" if updates else "")
    ]
    shared = sorted({d.id for d in layout.actor_devices} & {d.id for d in layout.learner_devices})
    if shared and len(parallel.local_devices()) > 1:  # on one device sharing is the only layout
        lines.append(
            f"podracer sebulba: device(s) {shared} both act and learn (--actor-devices and --learner-devices "
            "overlap): inference and learning take turns there"
        )
    if unroll:  # image observations with a convolutional torso, learned on the CPU
        lines.append(
            "podracer sebulba: image observations on the CPU: every actor and learner step runs the "
            "convolutional torso on the CPU cores, about 40 env steps/s for Pong on 2 cores (IMPALA, "
            "measured), so the first progress line takes minutes; an accelerator runs it at 13-14k env "
            "steps/s (one H100)"
        )
    return "\n".join(lines)


def _sebulba_evaluation(config: SebulbaConfig, make_env, agent):
    """``evaluate(state) -> summary entries`` for ``--eval-every``: the greedy policy plays one episode on each of
    ``--eval-episodes`` fresh host environments, seeded the same at every evaluation."""
    if not config.eval_every:
        return None

    def evaluate(state) -> dict[str, float]:
        env = make_env(config.seed + EVAL_SEED_OFFSET, config.eval_episodes)
        try:
            params = jax.device_get(parallel.unreplicate(state.params))
            returns, _ = play.play_host(env, agent, params, config.eval_episodes, seed=config.seed)
        finally:
            env.close()
        summary = anakin.summarize_evaluation(returns, config.target_return)
        if parallel.is_main_process() and summary.get("target_reached"):
            print(
                f"podracer: evaluation return {summary['eval_return']:.3f} >= --target-return "
                f"{config.target_return:g}: "
                "stopping" + (" (saving a checkpoint)" if config.checkpoint_dir else ""),
                flush=True,
            )
        return summary

    return evaluate


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
