"""The agent bundle: pure functions that every mode (Anakin, Sebulba) calls the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from podracer.core.types import image_layout
from podracer.core.networks import (
    ActorCritic,
    ObservationTorso,
    RecurrentNetwork,
    StructuredTorso,
    choose_torso,
    lstm_initial_state,
    network_of,
    reset_state,
)
from podracer.core.agents.losses import (
    first_flags,
    mask_logits,
)
from podracer.core.types import Metrics, Params, Trajectory

Batch = Any


class ReplaySpec(NamedTuple):
    """How a replay-based agent learns: what it stores of a trajectory, how it samples, how often.

    ``make_items(trajectory) -> (items, mask)``: items with a leading axis N for the
    replay (:mod:`podracer.core.replay`), and which of them are real transitions.
    ``loss(params, target_params, items, importance_weights, key) -> (loss, (metrics,
    priorities))``: the new priorities (>= 0) of the sampled items.
    """

    make_items: Callable[[Trajectory], tuple[chex.ArrayTree, chex.Array]]
    loss: Callable[..., tuple[jax.Array, tuple[Metrics, chex.Array]]]
    capacity: int  # items per replay shard (one per learner device)
    batch_size: int  # items per gradient step per shard
    replay_ratio: float  # items learned from per item inserted (held by a rate limiter)
    min_size: int  # items inserted into a shard before learning starts
    prioritized: bool = True
    priority_exponent: float = 0.6  # alpha
    importance_exponent: float = 0.4  # beta
    target_period: int = 100  # gradient steps between target-network copies
    target_tau: float | None = None  # Polyak averaging instead, each gradient step


# The key of a recurrent agent's ``extras`` that holds the state a step started from.
START_STATE = "core_state"


def split_start_state(extras):
    """``(extras without the start state, the start state or ())``: drivers store the start state once
    per trajectory (``Trajectory.actor_state``), not at every step."""
    if isinstance(extras, dict) and START_STATE in extras:
        rest = {k: v for k, v in extras.items() if k != START_STATE}
        return rest, extras[START_STATE]
    return extras, ()


def greedy_action(extras) -> chex.Array:
    """The greedy action, from what ``act`` returned: int32 ``[B]``, the most likely action of a discrete policy
    (``extras["logits"]``; ``[B, len(nvec)]``, each entry's, for a multi-discrete one) or the highest-valued one of
    a Q agent (``extras["q_values"]``); float32 ``[B, size]``, the mean of a Gaussian policy (``extras["mean"]``) or
    what an agent names as its greedy action
    (``extras["greedy"]``, e.g. SAC's squashed mean)."""
    for key in ("mean", "greedy"):
        if key in extras:
            return extras[key]
    scores = extras["logits"] if "logits" in extras else extras["q_values"]
    if isinstance(scores, tuple):  # multi-discrete: each entry's most likely choice, int32 [B, len(nvec)]
        return jnp.stack([jnp.argmax(s, axis=-1) for s in scores], axis=-1).astype(jnp.int32)
    return jnp.argmax(scores, axis=-1).astype(jnp.int32)


def no_state(batch: int) -> tuple:
    """A feed-forward agent's actor state: nothing."""
    return ()


class Agent(NamedTuple):
    """An RL algorithm as pure functions, made by a factory that closes over its hyper-parameters.

    Every agent acts the same way: ``initial_state(batch) -> state`` is what an actor carries
    for ``batch`` fresh episodes (``()`` for a feed-forward agent, the core state for a
    recurrent one), and ``act(params, observation, key, state, first) -> (action, extras,
    state)`` takes ``[B]`` observations with the state before them and ``first`` flags (bool
    ``[B]``: the observation starts an episode, so a recurrent core resets before it). A
    recurrent agent returns in ``extras[START_STATE]`` the state the step started from
    (after the reset); drivers keep it for a trajectory's first entry only
    (:func:`split_start_state`, ``Trajectory.actor_state``), and the loss unrolls from it. A
    feed-forward agent returns ``state`` unchanged. ``loss`` works on the batch
    that ``prepare`` made of a time-major trajectory (``prepare`` runs once per learner
    step, before the epochs; ``None`` passes the trajectory through). The learner splits
    that batch into ``num_minibatches`` along ``minibatch_axis`` and makes ``num_epochs``
    passes over it. A replay-based agent sets ``replay`` instead of ``loss``: the learner
    then stores what it receives and learns from samples (:class:`ReplaySpec`).
    """

    init: Callable[[chex.PRNGKey, chex.ArrayTree], Params]
    act: Callable[
        [Params, chex.ArrayTree, chex.PRNGKey, chex.ArrayTree, chex.Array],
        tuple[chex.Array, chex.ArrayTree, chex.ArrayTree],
    ]
    loss: Callable[[Params, Batch, chex.PRNGKey], tuple[jax.Array, Metrics]] | None
    prepare: Callable[[Params, Trajectory], Batch] | None = None
    num_epochs: int = 1
    num_minibatches: int = 1
    minibatch_axis: int = 1
    replay: ReplaySpec | None = None
    initial_state: Callable[[int], chex.ArrayTree] = no_state
    # Called first in every learner step: ``observe(params, trajectory, axis_names) -> (params, trajectory)``
    # updates what the parameters keep of the data (running statistics, reduced over ``axis_names``) and returns
    # the trajectory as the loss and the replay should see it (podracer.core.normalize); None: neither changes.
    observe: Callable | None = None
    # The discount of the return the feeders accumulate into Trajectory.discounted_return; None: they do not.
    return_discount: float | None = None
    # Where that return restarts: at every episode's end ("episode"), or only where one terminates ("termination":
    # across a time limit it runs on into the next episode, as gymnasium's NormalizeReward's)
    return_restart: str = "episode"
    # How the parameters are optimised (podracer.core.optim.optimizer_of, or a partition of the parameters with an
    # optimizer per group); None: the registry gives it the agent config's optimizer settings (podracer.agents.make).
    optimizer: optax.GradientTransformation | None = None
    # A planning agent (podracer.core.agents.alphazero): its ``act`` also takes ``model=`` (the environment's
    # podracer.core.envs.base.SearchModel) and ``env_state=`` (the batch's own environment states), which the drivers
    # pass (podracer.core.envs.wrappers.plan_args); it runs where the environment is JAX (Anakin, evaluation).
    plans: bool = False


def unroll_trajectory(network, params, trajectory: Trajectory):
    """The network's outputs at every entry of a ``[T + 1, B]`` trajectory.

    A recurrent network (:class:`podracer.core.networks.RecurrentNetwork`) unrolls from the
    core state the actor stored at entry 0, resetting where episodes start; a
    feed-forward one sees each observation alone.
    """
    if isinstance(network, RecurrentNetwork):
        state = trajectory.actor_state
        outputs, _ = network.apply(
            params, trajectory.timestep.observation, first_flags(trajectory), state, method="unroll"
        )
        return outputs
    return network.apply(params, trajectory.timestep.observation)


def make_torso(
    spec, torso: str, hidden_sizes, activation: str = "relu", layer_norm: bool = False, kernel_init="orthogonal"
):
    """The torso for ``spec``'s observations: :class:`~podracer.core.networks.StructuredTorso` for structured
    (dict) observations, else :class:`~podracer.core.networks.ObservationTorso` (``torso`` as in ``ActorCritic``;
    ``layer_norm``: LayerNorm before its activations; ``kernel_init``: its MLP's kernels)."""
    if isinstance(spec.observation, dict):
        if spec.vocab_size is None:
            raise ValueError("Structured observations need the environment spec's vocab_size.")
        return StructuredTorso(spec.vocab_size, hidden_sizes=hidden_sizes)
    image = image_layout(spec)
    kind = choose_torso(torso, len(spec.observation.shape), image, spec.observation.shape)
    return ObservationTorso(kind, hidden_sizes, activation, image, layer_norm, kernel_init)


def make_network(spec, config):
    """The actor-critic network for ``spec`` from network settings (:func:`podracer.core.networks.network_of`: a
    :class:`~podracer.core.networks.NetworkConfig`, or an agent config holding one or its fields): ``hidden_sizes``,
    ``activation``, ``shared_torso``, ``torso``, ``policy_std``, ``policy_units`` and ``kernel_init``; with ``core =
    "lstm"`` (or structured observations) a :class:`~podracer.core.networks.RecurrentNetwork` whose LSTM has
    ``core_size`` units."""
    net = network_of(config)
    bounds = (spec.box.low, spec.box.high) if net.policy_units == "env" and spec.box is not None else None
    if net.policy_std == "sde":
        vector = not isinstance(spec.observation, dict) and "mlp" == choose_torso(
            net.torso, len(spec.observation.shape), image_layout(spec), spec.observation.shape
        )
        if not spec.continuous or net.core == "lstm" or not vector:
            raise ValueError("--policy-std sde takes continuous actions and vector observations, without --core lstm.")
    if net.core == "lstm" or isinstance(spec.observation, dict):
        if net.core != "lstm":
            raise ValueError("Structured (dict) observations need a recurrent agent (core='lstm').")
        torso = make_torso(spec, net.torso, net.hidden_sizes, net.activation, kernel_init=net.kernel_init)
        return RecurrentNetwork(
            policy_actions(spec),
            torso,
            net.core_size,
            heads="actor_critic",
            action_size=action_size(spec),
            policy_std=net.policy_std,
            kernel_init=net.kernel_init,
            action_bounds=bounds,
            log_std_init=net.log_std_init,
        )
    return ActorCritic(
        num_actions=policy_actions(spec),
        obs_rank=len(spec.observation.shape),
        hidden_sizes=net.hidden_sizes,
        activation=net.activation,
        shared_torso=net.shared_torso,
        torso=net.torso,
        image=image_layout(spec),
        obs_shape=tuple(spec.observation.shape),
        action_size=action_size(spec),
        cell_actions=spec.cell_actions,
        policy_std=net.policy_std,
        kernel_init=net.kernel_init,
        action_bounds=bounds,
        log_std_init=net.log_std_init,
        sde_sample_freq=net.sde_sample_freq,
    )


def action_size(spec) -> int:
    """Entries of one continuous action; 0 for discrete actions."""
    return spec.box.size if spec.continuous else 0


def policy_actions(spec) -> int | tuple[int, ...]:
    """What a policy head's ``num_actions`` is for ``spec``: the count of discrete actions, or multi-discrete
    actions' ``nvec`` (:class:`~podracer.core.networks.PolicyHead`)."""
    return spec.nvec if spec.nvec is not None else spec.num_actions


# Which agents act in each kind of action space (EnvSpec.action_kind), for require_actions' messages.
AGENTS_FOR = {
    "discrete": "a2c, dqn, impala, muzero, ppo, pqn or r2d2",
    "multi-discrete": "a2c, impala or ppo",
    "continuous": "a2c, ppo, sac or td3",
}


def require_actions(spec, agent: str, *kinds: str) -> None:
    """A one-line error when ``agent``, which takes actions of ``kinds`` (``EnvSpec.action_kind`` values), cannot act
    in ``spec``'s action space."""
    if spec.action_kind not in kinds:
        raise ValueError(
            f"--agent {agent} takes {' or '.join(kinds)} actions and this environment's are "
            f"{spec.action_kind}; use {AGENTS_FOR[spec.action_kind]}."
        )


def make_policy_fns(network, run=None):
    """``Agent`` fields ``init``, ``act`` and ``initial_state`` for a network that maps observations to (logits, value).

    ``act`` samples from the softmax policy and returns the behaviour logits as extras,
    which off-policy corrections (PPO ratios, V-trace) need. It calls the network's
    ``policy`` method when it has one, so acting skips the value head. For a recurrent
    network they are :func:`make_recurrent_fns`'s (``act`` carries the core state;
    see :class:`Agent`). A Gaussian policy with gSDE (``policy_std="sde"``) is :func:`make_sde_fns`'s (``run``:
    the run's :class:`~podracer.core.types.RunFacts`, whose rollout length sets when exploration matrices are drawn).
    Use as ``Agent(**make_policy_fns(network), loss=loss)``.
    """
    if isinstance(network, RecurrentNetwork):
        return make_recurrent_fns(network)
    if getattr(network, "policy_std", None) == "sde" and network.action_size > 0:
        return make_sde_fns(network, run)

    def init(key, observation):
        return network.init(key, observation)

    def act(params, observation, key, state, first, action_mask=None):
        if hasattr(network, "policy"):
            policy = network.apply(params, observation, method="policy")
        else:
            policy, _ = network.apply(params, observation)
        return *sample_policy(policy, key, action_mask), state

    return {"init": init, "act": act, "initial_state": no_state}


def sde_draws(sample_freq: int, run=None):
    """gSDE's schedule: ``draws(steps) -> bool [B]``, whether an environment that has acted ``steps`` times draws a
    new exploration matrix before its next action: at every rollout's start (``run.rollout_length`` steps; without
    ``run``, evaluation, at its first step) and every ``sample_freq`` steps into a rollout (-1: never within it), as
    Stable-Baselines3 resets its noise."""
    period = run.rollout_length if run is not None else None

    def draws(steps):
        phase = steps % period if period is not None else steps
        return phase % sample_freq == 0 if sample_freq > 0 else phase == 0

    return draws


def make_sde_fns(network, run=None):
    """:func:`make_policy_fns` for gSDE (generalized state-dependent exploration, Raffin et al. 2021), as
    Stable-Baselines3 acts with it: each environment keeps a standard-normal matrix ``eps [features, action_size]``
    in its actor state and acts ``mean + h @ (sigma * eps)`` (:class:`~podracer.core.networks.PolicyHead`), drawing a
    new ``eps`` at the start of every rollout (``run.rollout_length`` steps; without ``run``, evaluation, at its first
    step) and every ``network.sde_sample_freq`` steps into one (-1: never within it). Across the steps one matrix
    holds, the noise is a smooth function of the state; at each step the action's distribution is the Gaussian the
    extras keep (``{"mean", "log_std"}``), which the losses use. The state: ``(eps [B, features, action_size],
    steps [B])``, the steps each environment has acted."""
    features, size = network.hidden_sizes[-1], network.action_size
    draws = sde_draws(network.sde_sample_freq, run)

    def init(key, observation):
        return network.init(key, observation)

    def initial_state(batch):
        return jnp.zeros((batch, features, size), jnp.float32), jnp.zeros((batch,), jnp.int32)

    def act(params, observation, key, state, first, action_mask=None):
        del first, action_mask  # a new episode keeps its environment's matrix, as Stable-Baselines3's
        eps, steps = state
        eps = jnp.where(draws(steps)[:, None, None], jax.random.normal(key, eps.shape, eps.dtype), eps)
        policy = network.apply(params, observation, eps, method="policy")
        noise = policy.pop("noise")
        return policy["mean"] + noise, policy, (eps, steps + 1)

    return {"init": init, "act": act, "initial_state": initial_state}


def sample_policy(policy, key, action_mask=None):
    """``(action, extras)`` sampled from a policy head's outputs (:class:`~podracer.core.networks.PolicyHead`): a
    softmax over logits (int32 action, extras ``{"logits"}``; a tuple of logits samples int32 ``[..., len(nvec)]``), or
    a Gaussian (float32 action, unclipped: the environment wrappers clip it to [-1, 1] and rescale it to the bounds;
    extras ``{"mean", "log_std"}``). With ``action_mask`` (:attr:`~podracer.core.types.TimeStep.action_mask`) only legal
    actions are sampled, and the extras keep the masked logits, so the behaviour policy is the one that acted."""
    if isinstance(policy, dict):
        noise = jax.random.normal(key, policy["mean"].shape, policy["mean"].dtype)
        return policy["mean"] + jnp.exp(policy["log_std"]) * noise, dict(policy)
    policy = mask_logits(policy, action_mask)
    if isinstance(policy, tuple):  # multi-discrete: one independent choice per entry
        keys = jax.random.split(key, len(policy))
        action = jnp.stack([jax.random.categorical(k, logits) for k, logits in zip(keys, policy)], axis=-1)
        return action.astype(jnp.int32), {"logits": policy}
    return jax.random.categorical(key, policy).astype(jnp.int32), {"logits": policy}


def act_mask(action_mask) -> dict:
    """The keyword arguments that pass a time step's legal-action mask to ``Agent.act``: ``{}`` without one (None),
    so an agent whose ``act`` takes no mask still runs on unmasked environments."""
    return {} if action_mask is None else {"action_mask": action_mask}


def make_recurrent_fns(network, choose=None):
    """``Agent`` fields ``init``, ``act`` and ``initial_state`` of a recurrent agent on ``network`` (a
    ``RecurrentNetwork``).

    ``choose(outputs, key, action_mask) -> (action, extras)`` picks actions from the
    network's outputs at one step (``action_mask``: legal actions, or None); by default it
    samples the softmax of actor-critic logits.
    """

    def initial_state(batch):
        return lstm_initial_state(batch, network.core_size)

    def init(key, observation):
        batch = jax.tree.leaves(observation)[0].shape[0]
        return network.init(key, observation, jnp.ones((batch,), bool), initial_state(batch))

    def sample(outputs, key, action_mask):
        policy, _ = outputs
        return sample_policy(policy, key, action_mask)

    choose = choose or sample

    def act(params, observation, key, state, first, action_mask=None):
        start = reset_state(state, first)
        outputs, state = network.apply(params, observation, first, state)
        action, extras = choose(outputs, key, action_mask)
        return action, {**extras, START_STATE: start}, state

    return {"init": init, "act": act, "initial_state": initial_state}


__all__ = [
    "Agent",
    "make_sde_fns",
    "sde_draws",
    "act_mask",
    "ReplaySpec",
    "START_STATE",
    "no_state",
    "split_start_state",
    "make_network",
    "make_policy_fns",
    "action_size",
    "policy_actions",
    "greedy_action",
    "require_actions",
    "sample_policy",
    "make_recurrent_fns",
    "make_torso",
    "unroll_trajectory",
]
