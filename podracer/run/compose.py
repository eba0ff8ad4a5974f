"""The composition root: a run built from its config (environment, agent, logger, checkpoints) and trained, and the
builders it shares with evaluation and preview (the plan of a run, its sweep or population, its environments and
logger, and what a checkpoint records of its agent and run: enough to rebuild the agent for a resume, an evaluation
or a preview).

The feeders (:mod:`podracer.run.anakin`, :mod:`podracer.run.sebulba`) know neither the agent registry nor the config
tree; the entry points (``podracer``, ``python -m podracer.sebulba``, ``podracer.train``) parse a config and call
:func:`train_anakin` or :func:`train_sebulba`. The agent itself is made by :func:`podracer.core.agents.make` from its
config, whatever asks for it.
"""

from __future__ import annotations


import dataclasses
import json
import os
from collections.abc import Callable

from podracer.core import agents, envs
from podracer.run import hostenvs
from podracer.core import anakin as anakin_core
from podracer.run import checkpoint, parallel, startup
from podracer.run import logging as logging_lib
from podracer.core import normalize as normalize_lib
from podracer.run import plan as plan_lib
from podracer.core import pbt
from podracer.run import record
from podracer.core import sweep as sweep_lib
from podracer.core.population import Population
from podracer.core.agents.hyperparameters import flag, hyperparameters, with_hyperparameters
from podracer.run.config import NORMALIZE_OPTIONS, AnakinConfig, SebulbaConfig
from podracer.core.envs.base import HostEnv, example_observation
from podracer.run.logging import Logger, make_logger
from podracer.run.plan import RunPlan
from podracer.core.types import RunFacts


import threading

import jax

from podracer.run import anakin as anakin_loop
from podracer.run import lifetime, play, banner, capacity, runlock
from podracer.core.agents.base import Agent
from podracer.core.envs.base import example_action_mask
from podracer.core.types import observation_rank
from podracer.core.learner import init_learner_state, should_unroll
from podracer.run.saving import AnakinCheckpoints, check_unfinished, sebulba_checkpoints
from podracer.run.progress import Progress
from podracer.run.sebulba import assemble, learner_loop as sebulba_learner


def normalization(config) -> str | None:
    """What ``--normalize-observations`` and ``--normalize-rewards`` ask for, as checkpoints record it (the
    ``normalize`` entry of their metadata): None, "observations", "rewards" or "observations+rewards"."""
    parts = [
        name
        for name, on in (("observations", config.normalize_observations), ("rewards", config.normalize_rewards))
        if on
    ]
    return "+".join(parts) or None


def normalization_options(config) -> dict:
    """``--observation-clip``, ``--normalize-with`` and ``--return-restart`` where set away from their defaults,
    by :func:`podracer.core.normalize.wrap`'s keywords (checkpoints record them: the metadata's
    ``normalize_options``)."""
    values = {name: getattr(config, name, default) for name, default in NORMALIZE_OPTIONS.items()}
    return {name: value for name, value in values.items() if value != NORMALIZE_OPTIONS[name]}


def check_normalizable(config, spec) -> None:
    """``--normalize-observations`` needs a floating-point observation to normalise."""
    if config.normalize_observations and not normalize_lib.has_floating_leaf(example_observation(spec)):
        raise ValueError(
            f"--normalize-observations: {config.env}'s observations have no floating-point entry to "
            "normalise (images and boards of integers are scaled by their torso); drop the flag."
        )


def check_applies(config, spec) -> None:
    """Flags set away from their defaults that this run would not use are refused in one line naming the flag and
    what it needs (the rule written in ``docs/faults.md``): a Gaussian policy's ``--policy-std``, ``--policy-units``,
    ``--log-std-init`` or ``--sde-sample-freq`` with discrete actions; ``--sde-sample-freq`` without ``--policy-std
    sde``; ``--log-std-init`` with ``--policy-std state``; ``--lr-end`` and ``--lr-decay-steps`` (given, searched or
    swept) with ``--lr-schedule constant``."""
    agent = config.agent
    network = getattr(agent, "network", None)
    gaussian = (
        ("policy_std", "parameter", "standard deviation"),
        ("policy_units", "unit", "units"),
        ("log_std_init", 0.0, "initial log standard deviation"),
        ("sde_sample_freq", -1, "gSDE sampling"),
    )
    # the agent's own network defaults (SAC's standard deviation is a head of the state by default)
    fields = dataclasses.fields(agent) if dataclasses.is_dataclass(agent) else ()
    own = next((f.default for f in fields if f.name == "network"), None)
    for name, default, what in gaussian:
        default = getattr(own, name, default)
        value = getattr(network, name, default)
        if value != default and not spec.continuous:
            raise ValueError(
                f"--{name.replace('_', '-')} {value} sets a Gaussian policy's {what}, and {config.env}'s actions are "
                "discrete: drop it."
            )
    std = getattr(network, "policy_std", "parameter")
    if getattr(network, "sde_sample_freq", -1) != -1 and std != "sde":
        raise ValueError(
            f"--sde-sample-freq {network.sde_sample_freq} sets when gSDE draws its exploration matrices: it needs "
            "--policy-std sde."
        )
    if getattr(network, "log_std_init", 0.0) != 0.0 and std == "state":
        raise ValueError(
            f"--log-std-init {network.log_std_init} starts a learned log standard deviation, which --policy-std "
            "state does not have: drop it, or use --policy-std parameter or sde."
        )
    optimizer = getattr(agent, "optimizer", None)
    if getattr(optimizer, "lr_schedule", None) != "constant":
        return
    varied = [("--sweep", name) for name in (getattr(config, "sweep_points", ()) or ({},))[0]]
    if getattr(config, "pbt_search", ()):
        varied += [("--pbt-search", r.name) for r in pbt.parse_search(agent, config.pbt_search)]
    for name, default in (("lr_end", 0.0), ("lr_decay_steps", None)):
        given = [f"{flag_name} {name}" for flag_name, varied_name in varied if varied_name == name]
        if getattr(optimizer, name) != default:
            given.insert(0, f"{flag(name)} {getattr(optimizer, name)}")
        if given:
            raise ValueError(
                f"{given[0]} has no effect with --lr-schedule constant (the rate never decays): choose "
                "--lr-schedule linear or cosine, or drop it."
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


# Agent hyper-parameters that shape the saved state: a resumed run keeps its checkpoint's.
STATE_SHAPING = (
    "hidden_sizes",
    "torso",
    "core",
    "core_size",
    "shared_torso",
    "layer_norm",
    "replay_capacity",
    "update_rule",  # the optimizer state's tree (Adam's moments, RMSprop's one average)
)


def make_env(config) -> envs.Environment:
    """An Anakin run's JAX environment: ``--env``, its other player as ``--opponent`` says (:func:`env_against`)."""
    return env_against(config.env, getattr(config, "opponent", "random"))


def opponent_name(config) -> str | None:
    """What a two-player game's run plays against, as its environment names it (``"random legal moves"``,
    ``"itself (self-play)"``); None for every other environment (no game is made for them)."""
    if not str(config.env).startswith("pgx:"):
        return None
    return getattr(make_env(config), "opponent_name", None)


def env_against(name: str, opponent: str) -> envs.Environment:
    """The JAX environment ``name`` with ``opponent`` making a two-player game's other moves (pgx's games;
    ``"random"``: the environment as it is made; a one-line error naming ``--opponent`` elsewhere). Runs and
    ``podracer evaluate`` both make their games here."""
    if opponent == "random":
        return envs.make(name)
    if not name.startswith("pgx:"):
        raise ValueError(
            f"--opponent {opponent}: only two-player games (pgx:NAME, e.g. pgx:tic_tac_toe) have another player; "
            f"{name} has none."
        )
    return envs.make(name, opponent=opponent)


def run_metadata(config, mode: str, env: str, run: RunFacts, counts: dict | None = None) -> dict:
    """What every checkpoint of a run records: the mode, the environment, the seed, the rollout, the normalisation,
    the agent (:func:`agent_metadata`) and what a resume must share with it (:func:`resume_identity`; ``counts``:
    the mode's flags that set the saved state's sizes and the env-step count, by flag)."""
    return {
        "mode": mode,
        "env": env,
        "seed": config.seed,
        "rollout_length": config.rollout_length,
        "normalize": normalization(config),
        "normalize_options": normalization_options(config),
        "opponent": getattr(config, "opponent", "random"),
        "sticky_actions": getattr(config, "sticky_actions", None),  # Sebulba's envpool Atari games
        "log_dir": os.path.abspath(config.log_dir) if config.log_dir else None,  # where a resume keeps logging
        "eval_policy": config.eval_policy if config.eval_every else None,  # the policy the run's figure played
        **agent_metadata(config.agent, run),
        "resume_identity": resume_identity(config, mode, env, counts or {}),
    }


def resume_identity(config, mode: str, env: str, counts: dict) -> dict:
    """What a resumed run must share with its checkpoint, by flag, as JSON writes it: the mode, ``--env``,
    ``--agent``, ``--rollout-length``, normalisation, the agent's :data:`STATE_SHAPING` flags and ``counts``."""
    hyper = hyperparameters(config.agent)
    identity = {"mode": mode, "--env": env, "--agent": agents.name_of(config.agent)}
    identity["--rollout-length"] = config.rollout_length
    identity["--normalize-observations"] = config.normalize_observations
    identity["--normalize-rewards"] = config.normalize_rewards
    identity.update({"--" + k.replace("_", "-"): v for k, v in normalization_options(config).items()})
    identity.update({"--" + name.replace("_", "-"): hyper[name] for name in STATE_SHAPING if name in hyper})
    if getattr(config, "population", None):  # the lanes and what they search shape the saved state
        identity.update({"--population": config.population, "--pbt-search": list(config.pbt_search)})
    return json.loads(json.dumps({**identity, **counts}))


def run_logger(config, total_env_steps: int, console_keys: tuple[str, ...], resuming: bool) -> Logger:
    """The run's logger: console progress on process 0 and, with ``--log-dir``, JSONL and TensorBoard (a run that
    does not resume adds no second series there: :func:`podracer.run.logging.start_fresh`)."""
    main = parallel.is_main_process()
    if main and not resuming:
        logging_lib.start_fresh(config.log_dir, config.resume)
    logger = make_logger(
        config.log_dir,
        is_main=main,
        total_env_steps=total_env_steps,
        console_keys=console_keys + (("eval_return", "eval_return_min") if config.eval_every else ()),
        wandb_project=config.wandb_project,
        wandb_config=dataclasses.asdict(config),
        process=parallel.process_index(),
        started=startup.LAUNCH,  # progress lines count from the launch
    )
    if main and config.log_dir:  # the run records itself: run.toml (replayable with --preset), run.json
        mode = "anakin" if isinstance(config, AnakinConfig) else "sebulba"
        logger.add_hyperparameters(record.write(config, mode, config.log_dir))
    return logger


def newest_checkpoint(config):
    """What names the run's newest complete checkpoint when a stop's save does not finish (None: no directory)."""
    directory = config.checkpoint_dir
    return None if not directory else lambda: checkpoint.describe_newest(directory)


def run_ended(config):
    """What every exit path of a run does (:func:`podracer.run.lifetime.starting`): process 0 writes its checkpoint
    directory's ``finished.json``, so that a preview beside it ends (None without a directory)."""
    directory = config.checkpoint_dir
    if not directory or not parallel.is_main_process():
        return None
    return lambda: checkpoint.mark_finished(directory)


def anakin_plan(config: AnakinConfig, num_global_devices: int | None = None) -> RunPlan:
    """The plan of an Anakin run of ``config`` over ``num_global_devices`` devices (default: every device of every
    process): ``--total-env-steps``, when given, turned into updates rounded up to whole host calls."""
    num_global = parallel.num_global_devices() if num_global_devices is None else num_global_devices
    return plan_lib.anakin_plan(
        num_envs_per_device=config.envs_per_device(num_global),
        rollout_length=config.rollout_length,
        num_updates=config.num_updates,
        total_env_steps=config.total_env_steps,
        updates_per_call=config.updates_per_call,
        num_devices=num_global,
        eval_every=config.eval_every,
        target_return=config.target_return,
        on_nonfinite=config.on_nonfinite,
        compute_dtype=config.compute_dtype,
        rollout_unroll=config.rollout_unroll,
    )


def sebulba_plan(config: SebulbaConfig, per_actor: int, layout: parallel.Layout) -> RunPlan:
    """The plan of a Sebulba run of ``per_actor`` environments per actor thread: every process feeds one trajectory
    per update round, split over its learner devices."""
    return plan_lib.sebulba_plan(
        num_envs_per_actor=per_actor,
        rollout_length=config.rollout_length,
        total_env_steps=config.total_env_steps,
        num_learner_devices=len(parallel.local_devices(layout.learner_devices)),
        num_processes=parallel.process_count(),
        eval_every=config.eval_every,
        target_return=config.target_return,
        on_nonfinite=config.on_nonfinite,
        log_every=config.log_every,
        checkpoint_every=config.checkpoint_every,
        checkpoint_every_seconds=config.checkpoint_every_seconds,
        queue_size=config.queue_size,
        compute_dtype=config.compute_dtype,
    )


def make_sweep(config: AnakinConfig, spec, run: RunFacts | None = None) -> anakin_core.Entries | None:
    """The :class:`~podracer.core.anakin.Sweep` of ``--sweep``, or the
    :class:`~podracer.core.population.Population` of ``--population`` (None without either): each setting's (or
    lane's) agent and optimizer from its values (``run``: the run's facts, where a decaying learning rate ends)."""
    if not config.sweep and not config.population:
        return None

    def build(values):
        agent = agents.make(
            sweep_lib.with_values(config.agent, values),
            spec,
            run=run,
            normalize=normalization(config),
            normalize_options=normalization_options(config),
        )
        return agent, agent.optimizer

    if config.sweep:
        return anakin_core.Sweep(config.sweep_points, build)
    search = pbt.parse_search(config.agent, config.pbt_search)
    lanes = pbt.starting_values(search, config.population, config.seed)
    every = config.pbt_every or config.updates_per_call
    return Population(search, lanes, build, every, config.pbt_fraction, config.pbt_resample, config.seed)


def final_entries(config: AnakinConfig, metadata: dict) -> list[tuple[str, dict]]:
    """Where each seed (and setting) of a run of several is saved at its end, and its metadata."""
    out = []
    for point in config.sweep_points or ({},):
        agent = agent_metadata(with_hyperparameters(config.agent, point))
        for seed in range(config.seed, config.seed + config.num_seeds):
            where = os.path.join(sweep_lib.label(point), f"seed_{seed}") if point else f"seed_{seed}"
            out.append((where, {**metadata, **agent, "seed": seed}))
    return out


def host_env_factory(config: SebulbaConfig) -> Callable[[int, int], HostEnv]:
    """``make_env(seed, num_envs)`` for ``config.env``: envpool, gymnasium (``gymnasium:ID``), or a JAX environment
    stepped on the host (``jax:NAME``, ``SUITE:NAME``); see :func:`podracer.envs.make_host`."""

    atari = config.command_line_agent(config.env) == "impala"  # envpool's Atari games (their default agent)
    options = {"sticky_action_probability": config.sticky_actions} if atari else {}

    def make_env(seed: int, num_envs: int) -> HostEnv:
        return hostenvs.make_host(
            config.env,
            num_envs,
            seed,
            num_threads=config.envpool_threads,
            vectorization=config.gymnasium_vectorization,
            **options,
        )

    return make_env


# ----------------------------------------------------------------------------------------- Anakin


def whole_record(log_dir: str | None, history: list[dict]) -> list[dict]:
    """The run's records over every attempt: ``log_dir``'s ``metrics.jsonl`` before this attempt's first record (the
    attempts a resume continues), then this attempt's ``history``; ``history`` alone without a record."""
    path = os.path.join(log_dir, "metrics.jsonl") if log_dir else None
    if not history or not path or not os.path.isfile(path):
        return history
    with open(path, encoding="utf-8") as f:
        earlier = [json.loads(line) for line in f if line.strip()]
    first = history[0]["env_steps"]
    return [r for r in earlier if r.get("env_steps", first) < first] + list(history)


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
    capacity.check_anakin(config, env, agent, per_device)
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
    return play.periodic_evaluation(
        env, agent, config.eval_episodes, config.seed, config.num_seeds, entries, greedy, bool(config.population)
    )


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
        if config.log_dir and main:  # the record goes on from the checkpoint: none past it
            logging_lib.check_no_records_after(config.log_dir, plan.env_steps(resume_step), resume_step)
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
    logger.add_fields(banner.opponent_field(env))
    if main:
        print(
            banner.anakin_banner(config, plan, resume_step, getattr(env, "opponent_name", None)),
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
        if config.population:  # the best lane, its values, and with --log-dir its schedule over every attempt
            print(pbt.report(whole_record(config.log_dir, result.history), sweep.names, config.log_dir)[0], flush=True)
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
        refusal = None
        if config.envpool_xla:
            refuse = getattr(probe, "xla_refusal", None)
            refusal = refuse() if refuse else f"{config.env}'s environments are not envpool's"
    finally:
        probe.close()
    if refusal:
        raise ValueError(f"--envpool-xla: {refusal}.")
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
    capacity.check_sebulba(config, agent, spec, layout, num_actors, per_actor)
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
        log.add_fields(banner.opponent_field(first_env))
    frame_skip = 4 if getattr(first_env, "atari", False) else 1
    plan = dataclasses.replace(plan, frame_skip=frame_skip)
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
            banner.sebulba_banner(
                config, metadata["env"], first_env, layout, per_actor, len(groups[0]), updates, unroll
            ),
            flush=True,
        )
    actors = assemble.Actors(
        groups,
        config.actor_threads,
        first_actor,
        actor_key,
        config.actor_timeout,
        config.max_policy_lag,
        config.envpool_xla,
    )
    try:
        hooks = sebulba_learner.Hooks(stop, log, save, _sebulba_evaluation(config, make_env, agent))
        return assemble.train(
            plan,
            agent,
            parallel.replicate(state, layout.learner_devices),
            hooks,
            layout=layout,
            actors=actors,
            start_update=updates,
            unroll=unroll,
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


__all__ = []
