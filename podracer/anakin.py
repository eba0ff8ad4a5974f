"""Anakin: JAX environments and the learner in one compiled program per device.

The per-device update is a pure function ``update(state) -> (state, metrics)``: a
rollout (``lax.scan`` over ``vmap(env.step)``) followed by the shared learner step,
whose gradients are averaged over the device axis. Wrap it yourself::

    update = anakin.make_update(env, agent, optimizer, rollout_length=16)
    p_update = jax.pmap(update, axis_name=parallel.DEVICE_AXIS)
    state = anakin.init(env, agent, optimizer, jax.random.key(0), num_envs_per_device=64)
    state, metrics = p_update(state)

or let :func:`run` pmap it over every device of every process and scan many updates
per host call.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from podracer import agents, checkpoint, envs, parallel
from podracer.agents.base import Agent, actor_step, initial_actor_state
from podracer.envs import wrappers
from podracer.envs.base import Environment, State
from podracer.learner import init_learner_state, make_learner_step, make_optimizer, psum_flat
from podracer.logging import make_logger
from podracer.types import LearnerState, Metrics, TimeStep, Trajectory


class RolloutState(NamedTuple):
    """The acting side of one device, carried from rollout to rollout (leading axis B = envs)."""

    env_state: State  # [B, ...] state of the wrapped environments
    timestep: TimeStep  # [B, ...] the time step the environments are at
    action: chex.Array  # int32 [B]: the action chosen at ``timestep``, executed first in the next rollout
    extras: chex.ArrayTree  # [B, ...] actor outputs at ``timestep``
    key: chex.PRNGKey  # the actor's key
    core: chex.ArrayTree = ()  # [B, ...] recurrent agents: the core state after ``timestep`` (``()`` otherwise)


class AnakinState(NamedTuple):
    """Everything one device carries between updates."""

    learner: LearnerState
    rollout: RolloutState


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

    def rollout(params, state: RolloutState):
        def body(state: RolloutState, _):
            key, act_key = jax.random.split(state.key)
            env_state, timestep = step_envs(state.env_state, state.action)
            # A time step after a ``last`` one starts an episode: recurrent agents reset there.
            action, extras, core = actor_step(agent, params, timestep.observation, act_key, state.core,
                                              state.timestep.last)
            emitted = (state.timestep, state.action, state.extras)
            last = timestep.last.astype(jnp.float32)
            episode = (
                last,
                env_state.stats.episode_return * last,
                env_state.stats.episode_length.astype(jnp.float32) * last,
            )
            return RolloutState(env_state, timestep, action, extras, key, core), (emitted, episode)

        state, (emitted, episode) = jax.lax.scan(body, state, None, length=rollout_length)
        final = (state.timestep, state.action, state.extras)
        timestep, action, extras = jax.tree.map(lambda xs, x: jnp.concatenate([xs, x[None]]), emitted, final)
        episodes, returns, lengths = (jnp.sum(x) for x in episode)
        metrics = {"episodes": episodes, "episode_return": returns, "episode_length": lengths}
        return state, Trajectory(timestep, action, extras), metrics

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
        episode = psum_flat(episode, axis_names)
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
) -> AnakinState:
    """One device's initial state with ``num_envs`` environments.

    ``rollout_length`` shapes a replay agent's stored sequences (R2D2); pass the
    update's.

    Parameters come from ``key`` alone, so every device that gets the same ``key``
    starts from the same parameters; environments and actor keys also fold in
    ``actor_index`` (the device's index along the device axis), so devices differ there.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}.")
    env = wrappers.wrap(env)
    learner_key, actor_key = jax.random.split(key)
    actor_key = jax.random.fold_in(actor_key, actor_index)
    actor_key, reset_key, act_key = jax.random.split(actor_key, 3)
    env_state, timestep = jax.vmap(env.reset)(jax.random.split(reset_key, num_envs))
    learner = init_learner_state(agent, optimizer, learner_key, timestep.observation, rollout_length=rollout_length)
    first = jnp.ones((num_envs,), bool)
    action, extras, core = actor_step(agent, learner.params, timestep.observation, act_key,
                                      initial_actor_state(agent, num_envs), first)
    return AnakinState(learner, RolloutState(env_state, timestep, action, extras, actor_key, core))


def init(
    env: Environment,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    key: chex.PRNGKey,
    num_envs_per_device: int,
    devices: Sequence[jax.Device] | None = None,
    *,
    rollout_length: int = 1,
) -> AnakinState:
    """Initial states for the local ones of ``devices`` (default: all devices), stacked on a leading axis.

    Made by a pmap-ed :func:`init_state`, so each device's index along the device axis
    (global across processes) seeds its environments, and parameters are identical.
    """
    init_fn = functools.partial(init_state, env, agent, optimizer, num_envs=num_envs_per_device,
                                rollout_length=rollout_length)
    p_init = parallel.pmap(lambda k: init_fn(k, actor_index=jax.lax.axis_index(parallel.DEVICE_AXIS)), devices)
    return p_init(parallel.replicate(key, devices))


def make_multi_update(update, num_updates: int):
    """``num_updates`` updates in one ``lax.scan``; metrics stacked ``[num_updates]``."""
    if num_updates < 1:
        raise ValueError(f"updates per call must be >= 1, got {num_updates}.")

    def multi_update(state):
        return jax.lax.scan(lambda s, _: update(s), state, None, length=num_updates)

    return multi_update


def summarize(metrics: Metrics) -> dict[str, float]:
    """Host-side summary of metrics stacked over several updates.

    Episode statistics are weighted by the episodes that ended in each update; other
    metrics are averaged.
    """
    metrics = {k: np.asarray(v, dtype=np.float64) for k, v in metrics.items()}
    count = metrics.get("episodes")
    out = {}
    for name, values in metrics.items():
        if name in ("episode_return", "episode_length") and count is not None:
            total = count.sum()
            out[name] = float(np.nansum(values * count) / total) if total > 0 else float("nan")
        elif name == "episodes":
            out[name] = float(values.sum())
        else:
            out[name] = float(values.mean())
    return out


class RunResult(NamedTuple):
    state: AnakinState  # final state, stacked over local devices
    history: list[dict[str, float]]  # one summary per host call
    compile_seconds: float  # first call (compilation included) minus a steady call's time
    env_steps_per_second: float  # median steady-state throughput across calls after the first


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
) -> RunResult:
    """Trains with the update pmap-ed over ``devices`` (default: all devices of all processes).

    Every process of a multi-process run calls this with the same arguments; the
    device axis then spans all of their devices. Each host call scans
    ``updates_per_call`` updates; ``log`` receives one summary per call with
    ``env_steps`` (global), ``sps`` and the averaged metrics.
    """
    num_calls = parallel.check_divisible(num_updates, updates_per_call, "num_updates", "updates per call (--updates-per-call)")
    steps_per_update = rollout_length * num_envs_per_device * parallel.num_global_devices(devices)

    update = make_update(env, agent, optimizer, rollout_length=rollout_length)
    p_multi = parallel.pmap(make_multi_update(update, updates_per_call), devices)
    state = init(env, agent, optimizer, key, num_envs_per_device, devices, rollout_length=rollout_length)

    history, call_seconds = [], []
    for call in range(num_calls):
        start = time.perf_counter()
        state, metrics = p_multi(state)
        metrics = parallel.unreplicate(metrics)
        summary = summarize(jax.device_get(metrics))
        seconds = time.perf_counter() - start
        call_seconds.append(seconds)
        env_steps = (call + 1) * updates_per_call * steps_per_update
        summary = {"env_steps": float(env_steps), "sps": updates_per_call * steps_per_update / seconds, **summary}
        history.append(summary)
        if log is not None:
            log(summary)

    steady = float(np.median(call_seconds[1:])) if len(call_seconds) > 1 else call_seconds[0]
    return RunResult(
        state=state,
        history=history,
        compile_seconds=max(call_seconds[0] - steady, 0.0),
        env_steps_per_second=updates_per_call * steps_per_update / steady,
    )


def _field(default, help_text: str, **metadata):
    return dataclasses.field(default=default, metadata={"help": help_text, **metadata})


@dataclasses.dataclass(frozen=True)
class AnakinConfig:
    """A training run in Anakin mode; ``python examples/anakin_catch.py --help`` lists the same fields."""

    env: str = _field("catch", "JAX environment", choices=("catch", "cartpole", "memory", "synthetic"))
    agent: str = _field("a2c", "agent", choices=("a2c", "dqn", "impala", "ppo", "r2d2"))
    seed: int = _field(0, "random seed")
    num_envs_per_device: int = _field(64, "environments stepped on each device")
    num_envs: int | None = _field(None, "total environments over all devices of all processes; overrides --num-envs-per-device")
    rollout_length: int = _field(16, "environment steps per rollout (per update)")
    num_updates: int = _field(240, "learner updates in the run")
    updates_per_call: int = _field(20, "updates scanned on the device per host call; one log line per call")
    learning_rate: float = _field(3e-3, "Adam learning rate")
    max_grad_norm: float = _field(0.5, "global gradient-norm clip")
    discount: float = _field(0.99, "discount gamma")
    entropy_coef: float | None = _field(None, "policy agents: entropy bonus weight (default: the agent's, 0.01)")
    hidden_sizes: tuple[int, ...] = _field((64, 64), "hidden layer sizes of the MLPs")
    num_epochs: int | None = _field(None, "PPO: epochs per update (default: the agent's)")
    num_minibatches: int | None = _field(None, "PPO: minibatches per epoch (default: the agent's)")
    replay_ratio: float | None = _field(None, "DQN, R2D2: items learned from per item inserted, held by a rate limiter (default: the agent's)")
    replay_capacity: int | None = _field(None, "DQN, R2D2: replay items per device (default: the agent's)")
    batch_size: int | None = _field(None, "DQN, R2D2: items per gradient step per device (default: the agent's)")
    min_replay_size: int | None = _field(None, "DQN, R2D2: items per device before learning starts (default: the agent's)")
    core: str | None = _field(None, "a2c, impala (r2d2 always): lstm puts an LSTM between torso and heads, its state carried across "
                              "rollouts (default: none)", choices=("none", "lstm"))
    core_size: int | None = _field(None, "LSTM units (default: the agent's, 128)")
    burn_in: int | None = _field(None, "R2D2: steps of each stored sequence that only warm up the LSTM state (default: the agent's)")
    log_dir: str | None = _field(None, "write DIR/metrics.jsonl and TensorBoard events there")
    checkpoint_dir: str | None = _field(None, "save the final learner there (orbax), for python -m podracer.evaluate")
    cpu_devices: int | None = _field(None, "CPU devices to expose when JAX runs on the CPU (default: one per core)")
    coordinator: str | None = _field(None, "multi-process: HOST:PORT of process 0")
    num_processes: int | None = _field(None, "multi-process: number of processes")
    process_id: int | None = _field(None, "multi-process: index of this process, 0 ... num_processes - 1")
    distributed: bool = _field(False, "multi-process: let JAX detect the cluster (TPU pod slice, Slurm)")

    def __post_init__(self):
        envs.make(self.env)  # unknown names fail here, with the list of known ones
        agents.config_class(self.agent)
        for name in ("num_envs_per_device", "rollout_length", "num_updates", "updates_per_call"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if self.num_envs is not None and self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}.")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}.")
        parallel.check_divisible(self.num_updates, self.updates_per_call, "num_updates", "updates per call (--updates-per-call)")
        parallel.check_process_id(self.num_processes, self.process_id)

    def agent_hyperparameters(self) -> dict:
        """The agent's config fields that this run sets."""
        return agents.select_hyperparameters(
            self.agent,
            {"discount": self.discount, "hidden_sizes": self.hidden_sizes},
            {name: getattr(self, name) for name in agents.FLAG_HYPERPARAMETERS},
        )

    def envs_per_device(self, num_global_devices: int) -> int:
        """Environments on each device, checking that a total splits evenly."""
        if self.num_envs is None:
            return self.num_envs_per_device
        return parallel.check_divisible(self.num_envs, num_global_devices, "num_envs", "devices of this run")


def make_agent(config: AnakinConfig, env: Environment | None = None) -> Agent:
    """The agent ``config`` describes, for ``env`` (default: the config's environment)."""
    env = env or envs.make(config.env)
    return agents.make(config.agent, env.spec(), **config.agent_hyperparameters())


def train(config: AnakinConfig) -> RunResult:
    """Runs ``config`` on every device of every process; only process 0 logs.

    Call :func:`podracer.parallel.initialize` first in a multi-process run (the
    example's entry point does, from the config's multi-process fields).
    """
    env = envs.make(config.env)
    agent = make_agent(config, env)
    num_global = parallel.num_global_devices()
    per_device = config.envs_per_device(num_global)
    if agent.num_minibatches > 1:
        parallel.check_divisible(
            per_device * config.rollout_length,
            agent.num_minibatches,
            "the per-device batch (envs per device x rollout length)",
            "minibatches",
        )
    optimizer = make_optimizer(config.learning_rate, config.max_grad_norm)
    total_steps = config.num_updates * config.rollout_length * per_device * num_global
    logger = make_logger(config.log_dir, is_main=parallel.is_main_process(), total_env_steps=total_steps)
    if parallel.is_main_process():
        print(
            f"podracer anakin: {config.agent} on {config.env}, {num_global} device(s) in "
            f"{jax.process_count()} process(es) [{jax.default_backend()}], {per_device} envs per device, "
            f"rollout {config.rollout_length}, {config.num_updates} updates",
            flush=True,
        )
    with logger:
        result = run(
            env,
            agent,
            optimizer,
            key=jax.random.key(config.seed),
            num_envs_per_device=per_device,
            rollout_length=config.rollout_length,
            num_updates=config.num_updates,
            updates_per_call=config.updates_per_call,
            log=logger,
        )
    if config.checkpoint_dir and parallel.is_main_process():
        metadata = {"mode": "anakin", "env": config.env, "agent": config.agent, "rollout_length": config.rollout_length,
                    "agent_hyperparameters": config.agent_hyperparameters(), "seed": config.seed, "env_steps": total_steps}
        checkpoint.save(config.checkpoint_dir, parallel.unreplicate(result.state.learner), metadata)
    return result
