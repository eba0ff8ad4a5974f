"""What a run checks and says before it starts: its memory against what the process has, its batch against
``--num-minibatches``, and the banner of each mode."""

from __future__ import annotations

import jax

from podracer.core import anakin as anakin_core
from podracer.run import checkpoint, disk, parallel
from podracer.core.agents.base import Agent
from podracer.core.learner import init_learner_state
from podracer.core.types import example_action_mask, example_observation


def check_memory(needed: int, available: int | None, what: str) -> None:
    """A one-line ``ValueError`` before anything is allocated or compiled when ``needed`` bytes (podracer's
    estimate: the arrays a run keeps, and its rollouts) exceed ``available``; ``what`` names the flags that set it."""
    if available is not None and needed > available:
        raise ValueError(
            f"this run needs about {disk.size(needed)} of memory for its state and rollouts "
            f"({what}) and this process has {disk.size(available)} available; lower them."
        )


def anakin_memory(config, env, agent, optimizer, per_device: int) -> int:
    """Bytes of this process's Anakin run: every local device's state (seeds and settings included) and two
    rollouts' worth of time steps (the trajectory and what its loss keeps), estimated from shapes alone."""
    state = jax.eval_shape(  # the key made inside: nothing computed
        lambda: anakin_core.init_state(
            env, agent, optimizer, jax.random.key(0), per_device, rollout_length=config.rollout_length
        )
    )
    entries = config.entries
    rollout = 2 * config.rollout_length * checkpoint.tree_bytes(state.rollout)
    return len(parallel.local_devices()) * entries * (checkpoint.tree_bytes(state) + rollout)


def sebulba_memory(config, agent, spec, layout: parallel.Layout, num_actors: int, per_actor: int) -> int:
    """Bytes of this process's Sebulba run: the learner state on each local learner device, and the trajectories
    in flight (the queue's, one being filled per actor thread, one being learned) with the environments' own
    observation buffers, estimated from shapes alone."""
    optimizer = agent.optimizer
    state = jax.eval_shape(
        lambda: init_learner_state(
            agent,
            optimizer,
            jax.random.key(0),
            example_observation(spec),
            rollout_length=config.rollout_length,
            action_mask=example_action_mask(spec),
        ),
    )
    per_env_step = checkpoint.tree_bytes(example_observation(spec)) + 64  # and its reward, action, logits, ...
    trajectories = (config.queue_size + num_actors + 1) * (config.rollout_length + 1) * per_actor * per_env_step
    return (
        len(parallel.local_devices(layout.learner_devices)) * checkpoint.tree_bytes(state)
        + trajectories
        + 2 * num_actors * per_actor * per_env_step
    )


def check_anakin_batch(agent: Agent, per_device: int, rollout_length: int) -> None:
    """A one-line error when ``--num-minibatches`` does not divide each device's batch (of transitions, or of
    whole sequences for a recurrent agent)."""
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


def check_anakin(config, env, agent: Agent, per_device: int) -> None:
    """Before anything compiles: the agent's batch divides as its config asks, and the run fits in memory."""
    check_anakin_batch(agent, per_device, config.rollout_length)
    check_memory(
        anakin_memory(config, env, agent, agent.optimizer, per_device),
        parallel.available_memory(),
        _learners(config) + f"{per_device:,} envs per device (--num-envs-per-device, --num-envs), --rollout-length "
        f"{config.rollout_length}"
        + (f", --replay-capacity {config.agent.replay_capacity:,}" if hasattr(config.agent, "replay_capacity") else ""),
    )


def _learners(config) -> str:
    """The flags that multiply an Anakin run's memory by the learners it trains together, first: ``--population
    1,000,000 lanes x ``, ``--num-seeds 8 x 3 --sweep settings x ``; "" for one learner."""
    parts = [f"--population {config.population:,} lanes"] if config.population else []
    if config.num_seeds > 1:
        parts.append(f"--num-seeds {config.num_seeds:,}")
    if len(config.sweep_points) > 1:
        parts.append(f"{len(config.sweep_points):,} --sweep settings")
    return "".join(f"{part} x " for part in parts)


def check_sebulba(config, agent: Agent, spec, layout: parallel.Layout, num_actors: int, per_actor: int) -> None:
    """Before the environment batches are made: the run fits in memory."""
    check_memory(
        sebulba_memory(config, agent, spec, layout, num_actors, per_actor),
        parallel.available_memory(),
        f"{per_actor:,} envs per actor thread (--num-envs-per-actor, --num-envs) x {num_actors} thread(s), "
        f"--rollout-length {config.rollout_length}, --queue-size {config.queue_size}"
        + (f", --replay-capacity {config.agent.replay_capacity:,}" if hasattr(config.agent, "replay_capacity") else ""),
    )


def opponent_field(env) -> dict:
    """What a two-player game's run is against (``opponent`` in every ``metrics.jsonl`` record), as the
    environment names it."""
    opponent = getattr(env, "opponent_name", None)
    return {"opponent": opponent} if opponent else {}


def against(opponent: str | None) -> str:
    """`` against OPPONENT`` for a banner, or nothing."""
    return f" against {opponent}" if opponent else ""


def anakin_banner(config, plan, resume_step: int | None, opponent: str | None = None) -> str:
    """The line an Anakin run says before it starts: agent, task, devices, environments, seeds or settings (``plan``:
    the run's :class:`~podracer.run.plan.RunPlan`)."""
    per_device = plan.envs_per_batch
    num_global = plan.num_envs // per_device
    seeds = f", seeds {config.seed} ... {config.seed + config.num_seeds - 1} together" if config.num_seeds > 1 else ""
    if config.sweep:
        points = len(config.sweep_points)
        seeds = f", {points} settings x {config.num_seeds} seed(s) = {points * config.num_seeds} runs together" + (
            f" (seeds {config.seed} ... {config.seed + config.num_seeds - 1})" if config.num_seeds > 1 else ""
        )
    if config.population:
        names, every = ", ".join(spec.partition("=")[0] for spec in config.pbt_search), config.pbt_every
        seeds = f", a population of {config.population} lanes searching {names} (ranked every "
        seeds += f"{every or config.updates_per_call} updates)"
    resume = f"; resuming after {resume_step} updates" if resume_step is not None else ""
    steps = plan.env_steps(plan.num_updates)
    budget = f" = {steps:,} env steps" if config.total_env_steps else ""
    if config.total_env_steps and steps != config.total_env_steps:  # rounded up to whole host calls
        budget += (
            f" (--total-env-steps {config.total_env_steps:,} + {steps - config.total_env_steps:,}: whole calls of "
            f"--updates-per-call {config.updates_per_call})"
        )
    return (
        f"podracer anakin: {config.agent_name} on {config.env}{against(opponent)}, {num_global} device(s) in "
        f"{parallel.process_count()} "
        f"process(es) [{jax.default_backend()}], {per_device} envs per device, rollout {config.rollout_length}, "
        f"{plan.num_updates} updates{budget}{seeds}{resume}"
    )


def sebulba_banner(
    config,
    env_name: str,
    first_env,
    layout: parallel.Layout,
    per_actor: int,
    num_groups: int,
    updates: int,
    unroll: bool,
) -> str:
    """What a Sebulba run says before it starts: the agent, the task, the device layout; the CPU's pace for images
    (devices shared by actors and the learner are refused: :func:`podracer.run.parallel.resolve_layout`)."""
    opponent = against(getattr(first_env, "opponent_name", None))
    lines = [
        f"podracer sebulba: {config.agent_name} on {env_name}{opponent}; actor devices "
        f"{[d.id for d in layout.actor_devices]} x {config.actor_threads} thread(s) x {per_actor} envs "
        f"({num_groups} group(s)); learner devices {[d.id for d in layout.learner_devices]} in "
        f"{parallel.process_count()} process(es)" + (f"; resuming after {updates} updates" if updates else "")
    ]
    if unroll:  # image observations with a convolutional torso, learned on the CPU
        lines.append(
            "podracer sebulba: image observations on the CPU: every actor and learner step runs the "
            "convolutional torso on the CPU cores, about 40 env steps/s for Pong on 2 cores (IMPALA, "
            "measured), so the first progress line takes minutes; an accelerator runs it at 13-14k env "
            "steps/s (one H100)"
        )
    return "\n".join(lines)


__all__ = [
    "against",
    "anakin_banner",
    "anakin_memory",
    "check_anakin_batch",
    "check_memory",
    "opponent_field",
    "sebulba_banner",
    "sebulba_memory",
]
