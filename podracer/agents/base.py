"""The agent bundle: pure functions that every mode (Anakin, Sebulba) calls the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.networks import ActorCritic
from podracer.types import Metrics, Params, Trajectory

Batch = Any


class ReplaySpec(NamedTuple):
    """How a replay-based agent learns: what it stores of a trajectory, how it samples, how often.

    ``make_items(trajectory) -> (items, mask)``: items with a leading axis N for the
    replay (:mod:`podracer.replay`), and which of them are real transitions.
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


class Agent(NamedTuple):
    """An RL algorithm as pure functions, made by a factory that closes over its hyper-parameters.

    ``act`` works on a batch of observations (any leading axes); ``loss`` on the batch
    that ``prepare`` made of a time-major trajectory (``prepare`` runs once per learner
    step, before the epochs; ``None`` passes the trajectory through). The learner splits
    that batch into ``num_minibatches`` along ``minibatch_axis`` and makes ``num_epochs``
    passes over it. A replay-based agent sets ``replay`` instead of ``loss``: the learner
    then stores what it receives and learns from samples (:class:`ReplaySpec`).
    """

    init: Callable[[chex.PRNGKey, chex.ArrayTree], Params]
    act: Callable[[Params, chex.ArrayTree, chex.PRNGKey], tuple[chex.Array, chex.ArrayTree]]
    loss: Callable[[Params, Batch, chex.PRNGKey], tuple[jax.Array, Metrics]] | None
    prepare: Callable[[Params, Trajectory], Batch] | None = None
    num_epochs: int = 1
    num_minibatches: int = 1
    minibatch_axis: int = 1
    replay: ReplaySpec | None = None


def make_network(spec, config) -> ActorCritic:
    """The actor-critic network for ``spec`` from an agent config's ``hidden_sizes``, ``shared_torso`` and ``torso``."""
    return ActorCritic(
        num_actions=spec.num_actions,
        obs_rank=len(spec.observation.shape),
        hidden_sizes=config.hidden_sizes,
        shared_torso=config.shared_torso,
        torso=config.torso,
    )


def make_policy_fns(network):
    """``init`` and ``act`` for a network that maps observations to (logits, value).

    ``act`` samples from the softmax policy and returns the behaviour logits as extras,
    which off-policy corrections (PPO ratios, V-trace) need. It calls the network's
    ``policy`` method when it has one, so acting skips the value head.
    """

    def init(key, observation):
        return network.init(key, observation)

    def act(params, observation, key):
        if hasattr(network, "policy"):
            logits = network.apply(params, observation, method="policy")
        else:
            logits, _ = network.apply(params, observation)
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        return action, {"logits": logits}

    return init, act


class Transitions(NamedTuple):
    """Time-major transitions ``t -> t + 1`` of a ``[T + 1, B]`` trajectory, ``[T, B]`` each."""

    r_t: chex.Array  # float32: reward on arriving at o_{t+1}
    discount_t: chex.Array  # float32: gamma * discount of o_{t+1}
    continues_t: chex.Array  # float32: 1 where o_{t+1} did not end its episode (returns may look past it)
    mask_t: chex.Array  # float32: 1 where the transition lies inside one episode (o_t is not last)


def transitions(trajectory: Trajectory, discount: float) -> Transitions:
    """Rewards, discounts and masks of the ``T`` transitions of a ``[T + 1, B]`` trajectory.

    A transition that starts at a ``last`` time step is the environment's reset: it is
    masked out, and no return looks across it (``continues_t`` cuts bootstrapping
    chains at episode ends; a truncated episode still bootstraps from its last value).
    """
    ts = trajectory.timestep
    last = ts.last.astype(jnp.float32)
    return Transitions(
        r_t=ts.reward[1:],
        discount_t=discount * ts.discount[1:],
        continues_t=1.0 - last[1:],
        mask_t=1.0 - last[:-1],
    )


def masked_mean(x: chex.Array, mask: chex.Array) -> chex.Array:
    """Mean over all entries with masked ones counted as zero.

    Dividing by the entry count, not the mask's sum, keeps a loss on a batch split
    over devices equal to the loss on the whole batch.
    """
    return jnp.mean(x * mask)


def policy_terms(logits: chex.Array, actions: chex.Array):
    """Log-probabilities of ``actions`` and the entropy of the softmax policy."""
    log_pi = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_pi, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]
    entropy = -jnp.sum(jnp.exp(log_pi) * log_pi, axis=-1)
    return log_prob, entropy


__all__ = ["Agent", "ReplaySpec", "Transitions", "make_network", "make_policy_fns", "masked_mean", "policy_terms", "transitions"]
