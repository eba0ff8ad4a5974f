"""Sebulba: actor threads step host environments; a learner mapped over devices trains on what they send.

Devices split into an actor group (batched inference, ``actor_threads`` Python threads
per device, each owning an envpool batch) and a learner group (the shared learner step,
``jit`` of ``shard_map`` over a mesh). Trajectories flow through a bounded queue; parameters flow back through a
:class:`~podracer.sebulba.pipeline.ParamStore`. The learner runs in the calling
thread; a stop event ends every actor; any thread's exception ends the run and is
raised again here with its traceback.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import numpy as np

from podracer import agents, checkpoint, envs, parallel
from podracer import config as config_checks
from podracer.envs.base import HostEnv, example_observation, observation_rank
from podracer.learner import init_learner_state, make_learner_step, make_optimizer, should_unroll
from podracer.logging import make_logger
from podracer.sebulba.actor import make_act, run_actor
from podracer.sebulba.pipeline import ParamStore, StopAwareQueue, Stopped
from podracer.types import LearnerState


def _field(default, help_text: str, **metadata):
    return dataclasses.field(default=default, metadata={"help": help_text, **metadata})


@dataclasses.dataclass(frozen=True)
class SebulbaConfig:
    """A Sebulba run; ``python -m podracer.sebulba --help`` lists the same fields."""

    env: str = _field("Pong", "envpool task id or short name (Pong, Breakout, CartPole), or jax:NAME for a JAX "
                              "environment stepped on the host (jax:memory, jax:catch, jax:cartpole)")
    agent: str = _field("auto", "agent; auto: impala for images (Atari), ppo for vectors", choices=("auto", "a2c", "dqn", "impala", "ppo", "r2d2"))
    total_env_steps: int = _field(10_000_000, "environment steps to train for (all actors together)")
    seed: int = _field(0, "random seed")
    actor_devices: tuple[int, ...] | None = _field(None, "indices of the local devices that act (default: 0)")
    learner_devices: tuple[int, ...] | None = _field(None, "indices of the local devices that learn (default: all but 0, or 0 alone)")
    actor_threads: int = _field(1, "actor threads per actor device, each with its own envpool batch")
    num_envs: int = _field(32, "environments per actor thread (must divide over the learner devices)")
    env_groups: int | None = _field(None, "groups an actor thread's environments are split into: one group steps while "
                                    "another's actions are computed (default: 2 on accelerators, 1 when actors run on the CPU)")
    envpool_threads: int = _field(0, "envpool worker threads per batch (0: envpool's default)")
    rollout_length: int = _field(20, "environment steps per trajectory")
    queue_size: int = _field(2, "trajectories the queue holds before actors wait")
    learning_rate: float = _field(6e-4, "Adam learning rate")
    max_grad_norm: float | None = _field(None, "global gradient-norm clip (default: 40 for impala, 10 for dqn, 0.5 otherwise)")
    discount: float = _field(0.99, "discount gamma")
    entropy_coef: float | None = _field(None, "policy agents: entropy bonus weight (default: the agent's, 0.01)")
    hidden_sizes: tuple[int, ...] = _field((64, 64), "MLP sizes for vector observations")
    torso: str = _field("auto", "image torso: impala (ResNet) or nature (CNN); auto picks impala", choices=("auto", "impala", "nature", "mlp"))
    num_epochs: int | None = _field(None, "PPO: epochs per update (default: the agent's)")
    num_minibatches: int | None = _field(None, "PPO: minibatches per epoch (default: the agent's)")
    replay_ratio: float | None = _field(None, "DQN, R2D2: items learned from per item inserted, held by a rate limiter (default: the agent's)")
    replay_capacity: int | None = _field(None, "DQN, R2D2: replay items per learner device (default: the agent's)")
    batch_size: int | None = _field(None, "DQN, R2D2: items per gradient step per learner device (default: the agent's)")
    min_replay_size: int | None = _field(None, "DQN, R2D2: items per learner device before learning starts (default: the agent's)")
    core: str | None = _field(None, "a2c, impala (r2d2 always): lstm puts an LSTM between torso and heads, its state carried across "
                              "rollouts (default: none)", choices=("none", "lstm"))
    core_size: int | None = _field(None, "LSTM units (default: the agent's, 128)")
    burn_in: int | None = _field(None, "R2D2: steps of each stored sequence that only warm up the LSTM state (default: the agent's)")
    log_every: int = _field(10, "learner updates between log lines")
    checkpoint_dir: str | None = _field(None, "save the learner there (orbax) every --checkpoint-every updates and at the end")
    checkpoint_every: int = _field(100, "learner updates between checkpoints")
    resume: bool = _field(False, "continue from the newest checkpoint in --checkpoint-dir (step count, parameters, optimizer)")
    cpu_devices: int | None = _field(None, "CPU devices to expose when JAX runs on the CPU (default: one per core)")
    coordinator: str | None = _field(None, "multi-process: HOST:PORT of process 0")
    num_processes: int | None = _field(None, "multi-process: number of processes")
    process_id: int | None = _field(None, "multi-process: index of this process, 0 ... num_processes - 1")
    distributed: bool = _field(False, "multi-process: let JAX detect the cluster (TPU pod slice, Slurm)")
    log_dir: str | None = _field(None, "write DIR/metrics.jsonl and TensorBoard events there")

    def __post_init__(self):
        if self.agent != "auto":
            agents.config_class(self.agent)
        config_checks.check_run_config(self)
        if self.agent != "auto":  # the agent's own checks, at start-up ("auto" is known once the environment is)
            agents.config_class(self.agent)(**self.agent_hyperparameters(self.agent))
        if self.env.startswith("jax:"):
            envs.make(self.env[len("jax:"):])  # unknown names fail here, with the list of known ones
        for name in ("total_env_steps", "actor_threads", "num_envs", "queue_size", "log_every"):  # the rest: check_run_config
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        parallel.check_process_id(self.num_processes, self.process_id)
        if self.resume and not self.checkpoint_dir:
            raise ValueError("--resume needs --checkpoint-dir.")
        if self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {self.checkpoint_every}.")
        if self.envpool_threads < 0:
            raise ValueError(f"envpool_threads must be >= 0, got {self.envpool_threads}.")
        if self.env_groups is not None:
            parallel.check_divisible(self.num_envs, self.env_groups, "num_envs (environments per actor thread)", "env_groups")

    def agent_name(self, observation_rank: int) -> str:
        """The agent to run: ``auto`` is IMPALA for images and PPO for vectors."""
        if self.agent != "auto":
            return self.agent
        return "impala" if observation_rank == 3 else "ppo"

    def groups(self, actor_platform: str) -> int:
        """Environment groups per actor thread. On the CPU, inference and envpool share the same
        cores and splitting the batch only adds per-call overhead (CartPole: 29k env steps/s with one
        group, 21k with two), so one group; on an accelerator, inference overlaps stepping."""
        if self.env_groups is not None:
            return self.env_groups
        return 1 if actor_platform == "cpu" or self.num_envs % 2 else 2

    def grad_clip(self, agent_name: str) -> float:
        if self.max_grad_norm is not None:
            return self.max_grad_norm
        return {"impala": 40.0, "dqn": 10.0, "r2d2": 40.0}.get(agent_name, 0.5)

    def agent_hyperparameters(self, agent_name: str) -> dict:
        return agents.select_hyperparameters(
            agent_name,
            {"discount": self.discount, "hidden_sizes": self.hidden_sizes, "torso": self.torso},
            {name: getattr(self, name) for name in agents.FLAG_HYPERPARAMETERS},
        )


class Layout(NamedTuple):
    actor_devices: list[jax.Device]  # this process's actor devices
    learner_devices: list[jax.Device]  # the learner devices of every process (the learner's mesh axis)


def resolve_layout(actor_ids: Sequence[int] | None, learner_ids: Sequence[int] | None, num_envs: int) -> Layout:
    """Actor and learner devices from local device indices, with checks that fail at start-up.

    In a multi-process run every process passes the same indices; the learner group is
    those devices of every process, so gradients average over all of them.
    """
    devices = jax.local_devices()
    n = len(devices)
    if actor_ids is None:
        actor_ids = (0,)
    if learner_ids is None:
        learner_ids = (0,) if n == 1 else tuple(i for i in range(n) if i not in actor_ids) or (0,)
    for name, ids in (("--actor-devices", actor_ids), ("--learner-devices", learner_ids)):
        if not ids:
            raise ValueError(f"{name} needs at least one device index.")
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            raise ValueError(f"{name} {list(ids)}: device index {bad[0]} is out of range; this process has {n} device(s) (0 ... {n - 1}).")
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name} {list(ids)} lists a device twice.")
    parallel.check_divisible(num_envs, len(learner_ids), "num_envs (environments per actor thread)", "learner devices")
    learners = []
    for process in range(jax.process_count()):
        theirs = [d for d in jax.devices() if d.process_index == process]
        learners += [theirs[i] for i in learner_ids]
    return Layout([devices[i] for i in actor_ids], learners)


class SebulbaResult(NamedTuple):
    state: LearnerState  # replicated over the learner devices
    history: list[dict[str, float]]
    updates: int


def train(
    config: SebulbaConfig,
    *,
    make_env: Callable[[int, int], HostEnv] | None = None,
    stop: threading.Event | None = None,
    log: Callable[[dict[str, float]], None] | None = None,
) -> SebulbaResult:
    """Runs ``config`` until ``total_env_steps`` or ``stop`` is set.

    ``make_env(seed, num_envs)`` builds each actor thread's host environment (default:
    envpool for ``config.env``, or the JAX environment for ``jax:NAME``). Returns the
    learner state and one summary per log line.
    """
    from podracer.envs import host
    from podracer.envs.envpool import EnvpoolEnv

    layout = resolve_layout(config.actor_devices, config.learner_devices, config.num_envs)
    if make_env is None:
        def make_env(seed, num_envs):
            if config.env.startswith(host.PREFIX):
                return host.make(config.env, num_envs, seed)
            return EnvpoolEnv(config.env, num_envs, seed=seed, num_threads=config.envpool_threads)

    stop = stop or threading.Event()
    num_actors = len(layout.actor_devices) * config.actor_threads
    first_actor = jax.process_index() * num_actors  # actors are numbered across processes
    num_groups = config.groups(layout.actor_devices[0].platform)
    group_size = config.num_envs // num_groups
    # Actor i's group g gets seeds as if its batch were one envpool batch (envpool seeds env j with seed + j).
    groups = [[make_env(config.seed + 1000 * (first_actor + i) + g * group_size, group_size) for g in range(num_groups)]
              for i in range(num_actors)]
    envs = [env for group in groups for env in group]
    try:
        spec = envs[0].spec()
        agent_name = config.agent_name(observation_rank(spec))
        hyperparameters = config.agent_hyperparameters(agent_name)
        agent = agents.make(agent_name, spec, **hyperparameters)
        # Every process feeds one trajectory per update; the update averages over all of them.
        steps_per_update = config.rollout_length * config.num_envs * jax.process_count()
        num_updates = math.ceil(config.total_env_steps / steps_per_update)
        frame_skip = 4 if getattr(envs[0], "atari", False) else 1
        optimizer = make_optimizer(config.learning_rate, config.grad_clip(agent_name))
        unroll = should_unroll(observation_rank(spec), layout.learner_devices[0].platform)
        learner_step = make_learner_step(agent, optimizer, axis_names=(parallel.DEVICE_AXIS,), unroll=unroll)
        p_step = parallel.device_map(learner_step, layout.learner_devices)
        key = jax.random.key(config.seed)
        learner_key, actor_key = jax.random.split(key)
        state = init_learner_state(agent, optimizer, learner_key, example_observation(spec),
                                   rollout_length=config.rollout_length)
        metadata = {"mode": "sebulba", "env": getattr(envs[0], "task_id", config.env), "agent": agent_name,
                    "agent_hyperparameters": hyperparameters, "seed": config.seed, "rollout_length": config.rollout_length}
        updates = 0
        if config.checkpoint_dir:
            identity = {"mode": "sebulba", "env": metadata["env"], "agent": agent_name}
            if checkpoint.prepare(config.checkpoint_dir, resume=config.resume, identity=identity) is not None:
                state, _ = checkpoint.restore(config.checkpoint_dir, state)
                updates = int(state.step)
        state = parallel.replicate(state, layout.learner_devices)
        if parallel.is_main_process():
            print(f"podracer sebulba: {agent_name} on {metadata['env']}; actor devices {[d.id for d in layout.actor_devices]} "
                  f"x {config.actor_threads} thread(s) x {config.num_envs} envs ({num_groups} group(s)); learner devices "
                  f"{[d.id for d in layout.learner_devices]} in {jax.process_count()} process(es)", flush=True)

        def save_checkpoint():
            if config.checkpoint_dir and parallel.is_main_process():
                checkpoint.save(config.checkpoint_dir, parallel.unreplicate(state),
                                {**metadata, "env_steps": updates * steps_per_update})

        store = ParamStore(layout.actor_devices)
        queue = StopAwareQueue(config.queue_size)
        errors: list[tuple[str, BaseException]] = []
        act = make_act(agent)

        def guarded(name, **kwargs):
            try:
                run_actor(**kwargs)
            except Stopped:
                pass
            except BaseException as error:  # noqa: BLE001 - any failure ends the run
                errors.append((name, error))
                stop.set()

        threads = []
        for i in range(num_actors):
            device = layout.actor_devices[i // config.actor_threads]
            name = f"actor-{i}-device-{device.id}"
            kwargs = dict(envs=groups[i], agent=agent, act=act, device=device, learner_devices=layout.learner_devices,
                          rollout_length=config.rollout_length, key=jax.random.fold_in(actor_key, first_actor + i),
                          store=store, queue=queue, stop=stop)
            threads.append(threading.Thread(target=guarded, args=(name,), kwargs=kwargs, name=name, daemon=True))

        history: list[dict[str, float]] = []
        saved_at = updates
        try:
            store.publish(parallel.unreplicate(state.params), updates)
            for thread in threads:
                thread.start()
            window = _Window()
            last_time, last_steps = time.perf_counter(), updates * steps_per_update
            while updates < num_updates and not stop.is_set():
                try:
                    rollout, waited = queue.get(stop)
                except Stopped:
                    break
                learn_start = time.perf_counter()
                state, metrics = p_step(state, rollout.trajectory)
                updates += 1
                store.publish(parallel.unreplicate(state.params), updates)
                jax.block_until_ready(state.params)
                window.add(rollout, metrics, waited, time.perf_counter() - learn_start, updates - rollout.policy_version - 1)
                if updates % config.checkpoint_every == 0:
                    save_checkpoint()
                    saved_at = updates
                if updates % config.log_every == 0 or updates == num_updates:
                    now, steps = time.perf_counter(), updates * steps_per_update
                    summary = window.summary(steps, (steps - last_steps) / (now - last_time), frame_skip, queue.qsize())
                    history.append(summary)
                    if log is not None:
                        log(summary)
                    window, last_time, last_steps = _Window(), now, steps
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
            if updates > saved_at:  # the end of the run, a stop or Ctrl-C: keep what was learned
                save_checkpoint()
            alive = [t.name for t in threads if t.is_alive()]
            if alive:
                raise RuntimeError(f"actor threads did not stop within 30 s: {alive}")
        if errors:
            name, error = errors[0]
            raise RuntimeError(f"{name} failed: {error!r}") from error
        return SebulbaResult(state, history, updates)
    finally:
        for env in envs:
            env.close()


class _Window:
    """Metrics gathered between two log lines."""

    def __init__(self):
        self.returns: deque = deque(maxlen=1000)
        self.lengths: deque = deque(maxlen=1000)
        self.metrics: list = []
        self.learner_wait = self.learn = 0.0
        self.actor = {"env": 0.0, "act": 0.0, "ship": 0.0, "put_wait": 0.0}
        self.lags: list[int] = []

    def add(self, rollout, metrics, waited, learn_seconds, lag):
        self.returns.extend(rollout.episode_returns)
        self.lengths.extend(rollout.episode_lengths)
        self.metrics.append(metrics)
        self.learner_wait += waited
        self.learn += learn_seconds
        for k, v in rollout.actor_seconds.items():
            self.actor[k] += v
        self.lags.append(lag)

    def summary(self, env_steps, sps, frame_skip, queue_size) -> dict[str, float]:
        metrics = jax.device_get(jax.tree.map(lambda *x: np.stack(x), *map(parallel.unreplicate, self.metrics)))
        out = {"env_steps": float(env_steps), "sps": sps, "fps": sps * frame_skip}
        out["episode_return"] = float(np.mean(self.returns)) if self.returns else float("nan")
        out["episode_length"] = float(np.mean(self.lengths)) if self.lengths else float("nan")
        out["episodes"] = float(len(self.returns))
        out.update({k: float(np.mean(v)) for k, v in metrics.items()})
        out["learner_wait_s"] = self.learner_wait
        out["learn_s"] = self.learn
        out.update({f"actor_{k}_s": v for k, v in self.actor.items()})
        out["policy_lag"] = float(statistics.mean(self.lags))
        out["queue_size"] = float(queue_size)
        out["host_memory_mb"] = host_memory_mb()
        return out


def host_memory_mb() -> float:
    """This process's resident memory in MiB (peak resident memory where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def run(config: SebulbaConfig, stop: threading.Event | None = None) -> SebulbaResult:
    """The command line's run: console progress and, with ``log_dir``, JSONL and TensorBoard."""
    logger = make_logger(config.log_dir, is_main=parallel.is_main_process(), total_env_steps=config.total_env_steps,
                         console_keys=("fps", "learner_wait_s", "actor_put_wait_s", "policy_lag"))
    with logger:
        return train(config, log=logger, stop=stop)
