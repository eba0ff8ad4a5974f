"""Whether a run fits, checked before anything compiles: its memory against what the process has (each mode's
estimate), and an Anakin batch against ``--num-minibatches``; each failure a one-line error naming the flags.
"""

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


def search_bytes(agent_config, spec, batch: int, embedding_bytes) -> int:
    """Bytes of a planning agent's search trees for ``batch`` roots at ``agent_config``'s ``num_simulations`` (0 for
    an agent that does not search): each node embeds the latent state (MuZero's ``latent_size`` floats) or, where
    there is none, what ``embedding_bytes()`` gives (AlphaZero searches the environment's own states)."""
    if not hasattr(agent_config, "num_simulations"):
        return 0
    from podracer.core.agents.search import tree_bytes

    latent = getattr(agent_config, "latent_size", None)
    embedding = 4 * latent if latent else embedding_bytes()
    return tree_bytes(agent_config.num_simulations, batch, spec.num_actions, embedding)


def env_state_bytes(env) -> int:
    """Bytes of one state of the JAX environment ``env`` (``env.reset``'s, from shapes alone)."""
    state, _ = jax.eval_shape(env.reset, jax.random.key(0))
    return checkpoint.tree_bytes(state)


def check_search(agent_config, spec, batch: int, embedding_bytes, what: str) -> None:
    """A one-line ``ValueError`` before a planning agent's search is traced when its trees (:func:`search_bytes`)
    exceed this process's memory; ``what`` names the flags that size them."""
    needed = search_bytes(agent_config, spec, batch, embedding_bytes)
    available = parallel.available_memory()
    if available is not None and needed > available:
        raise ValueError(
            f"the search needs about {disk.size(needed)} of memory for its trees ({what}) and this process has "
            f"{disk.size(available)} available; lower them."
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
    """Before anything compiles: the agent's batch divides as its config asks, a planning agent's search trees fit
    (checked first: tracing a search too large to fit takes minutes), and the run fits in memory."""
    check_anakin_batch(agent, per_device, config.rollout_length)
    if hasattr(config.agent, "num_simulations"):
        lanes = len(parallel.local_devices()) * config.entries
        check_search(
            config.agent,
            env.spec(),
            lanes * per_device,
            lambda: env_state_bytes(env),
            _learners(config)
            + f"{per_device:,} envs per device (--num-envs-per-device, --num-envs), --num-simulations "
            f"{config.agent.num_simulations:,}",
        )
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


__all__ = ["anakin_memory", "check_anakin", "check_anakin_batch", "check_memory", "check_sebulba", "sebulba_memory"]
