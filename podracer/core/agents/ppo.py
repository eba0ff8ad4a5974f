"""PPO: clipped surrogate objective, GAE (rlax), several epochs of minibatches."""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.base import Agent, make_network, make_policy_fns, unroll_trajectory
from podracer.core.agents.losses import behaviour_policy, first_flags, masked_mean, policy_terms, transitions
from podracer.core.agents import losses
from podracer.core.agents.losses import clipped_surrogate, normalized_advantages
from podracer.core.networks import RecurrentNetwork
from podracer.core.networks import ACTOR_CRITIC_FLAGS, NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, on_policy_steps, optimizer_field
from podracer.core.types import RunFacts, EnvSpec, Trajectory


@dataclasses.dataclass(frozen=True)
class PPOConfig(Configurable):
    """PPO: clipped surrogate objective, several epochs of minibatches per update."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=3e-3, max_grad_norm=0.5)
    discount: float = 0.99  # discount gamma
    gae_lambda: float = 0.95  # lambda of generalized advantage estimation
    clip_epsilon: float = 0.2  # clip of the probability ratio
    value_coef: float = 0.5  # weight of the value loss
    entropy_coef: float = 0.01  # weight of the entropy bonus
    num_epochs: int = 4  # passes over each batch of trajectories
    num_minibatches: int = 4  # minibatches per pass; must divide each learner device's batch
    normalize_advantages: bool = True  # advantages normalized per minibatch
    # PPO2's value clipping: the new value may move at most --clip-epsilon from the value at the update's start, the
    # loss the larger of the clipped and unclipped errors
    clip_value_loss: bool = False
    # bootstrap from the value of the last observation of an episode cut by a time limit; off: the cut ends the
    # episode as a terminal state does (as gymnax-blines' and PureJaxRL's GAE treat every done)
    bootstrap_truncated: bool = True
    # --hidden-sizes, --activation, --policy-std, --log-std-init, --sde-sample-freq, --policy-units, --kernel-init,
    # --shared-torso, --torso, --core, --core-size
    network: NetworkConfig = network_field(
        ACTOR_CRITIC_FLAGS,
        shared_torso=False,
    )

    def __post_init__(self):
        check_hyperparameters(self)


class PPOBatch(NamedTuple):
    """Flattened samples ``[N]`` (N = T x B) with their fixed targets; for a recurrent network, whole sequences
    ``[T, B]`` instead, with the flags of episode starts and the core state each sequence started from."""

    observation: chex.ArrayTree  # o_t
    action: chex.Array  # a_t: int32, or float32 [size] for continuous actions
    behaviour_log_prob: chex.Array  # float32: log mu(a_t | o_t) of the acting policy
    advantage: chex.Array  # float32: GAE at t
    value_target: chex.Array  # float32: advantage + v(o_t)
    value: chex.Array  # float32: v(o_t) with the parameters at the update's start (value clipping's anchor)
    mask: chex.Array  # float32: 1 where the transition lies inside an episode
    action_mask: chex.ArrayTree = None  # bool [A] (a tuple per multi-discrete entry): legal actions at o_t, or None
    first: chex.Array = None  # bool [T, B]: o_t starts an episode (recurrent networks only)
    # the core state at o_0, [1, B, ...] so that axis 1 is the batch's (recurrent only)
    start_state: chex.ArrayTree = None


def make_ppo(spec: EnvSpec, config: PPOConfig = PPOConfig(), run: RunFacts | None = None) -> Agent:
    """PPO whose advantages are computed once per learner step with the learner's parameters."""
    import rlax  # here, not at import: rlax pulls in distrax and TensorFlow Probability (0.5 s)

    network = in_compute_dtype(make_network(spec, config), run)
    fns = make_policy_fns(network, run)
    recurrent = isinstance(network, RecurrentNetwork)
    gae = jax.vmap(rlax.truncated_generalized_advantage_estimation, in_axes=1, out_axes=1)

    def prepare(params, trajectory: Trajectory) -> PPOBatch:
        observation = trajectory.timestep.observation
        _, values = unroll_trajectory(network, params, trajectory)
        tr = transitions(trajectory, config.discount)
        discount_t = tr.discount_t if config.bootstrap_truncated else tr.discount_t * tr.continues_t
        advantage = gae(tr.r_t, discount_t, config.gae_lambda * tr.continues_t, values)
        actions = trajectory.action[:-1]
        behaviour = jax.tree.map(lambda x: x[:-1], behaviour_policy(trajectory.extras))
        action_mask = jax.tree.map(lambda x: x[:-1], trajectory.timestep.action_mask)
        behaviour_log_prob, _ = policy_terms(behaviour, actions, action_mask)
        batch = PPOBatch(
            observation=jax.tree.map(lambda x: x[:-1], observation),
            action=actions,
            behaviour_log_prob=behaviour_log_prob,
            advantage=advantage,
            value_target=advantage + values[:-1],
            value=values[:-1],
            mask=tr.mask_t,
            action_mask=action_mask,
        )
        if recurrent:  # whole sequences, each with the core state it started from (minibatches split axis 1)
            batch = batch._replace(
                first=first_flags(trajectory)[:-1], start_state=jax.tree.map(lambda x: x[None], trajectory.actor_state)
            )
            return jax.lax.stop_gradient(batch)
        flat = jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:])), batch)
        return jax.lax.stop_gradient(flat)

    def loss(params, batch: PPOBatch, key):
        del key
        if recurrent:
            start = jax.tree.map(lambda x: x[0], batch.start_state)
            (policy, values), _ = network.apply(params, batch.observation, batch.first, start, method="unroll")
        else:
            policy, values = network.apply(params, batch.observation)
        log_prob, entropy = policy_terms(policy, batch.action, batch.action_mask)
        advantage = batch.advantage
        if config.normalize_advantages:
            advantage = normalized_advantages(advantage, batch.mask)
        policy_loss, ratio, log_ratio = clipped_surrogate(
            log_prob, batch.behaviour_log_prob, advantage, batch.mask, config.clip_epsilon
        )
        clip = config.clip_epsilon if config.clip_value_loss else None
        value_loss = losses.value_loss(values, batch.value_target, batch.mask, batch.value, clip)
        entropy = masked_mean(entropy, batch.mask)
        total = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return total, {
            "loss": total,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "approx_kl": masked_mean(ratio - 1.0 - log_ratio, batch.mask),
            "clip_fraction": masked_mean((jnp.abs(ratio - 1.0) > config.clip_epsilon).astype(jnp.float32), batch.mask),
        }

    return Agent(
        **fns,
        loss=loss,
        prepare=prepare,
        num_epochs=config.num_epochs,
        num_minibatches=config.num_minibatches,
        minibatch_axis=1 if recurrent else 0,
        optimizer=optimizer_of(
            config.optimizer, functools.partial(on_policy_steps, run, config.num_epochs, config.num_minibatches)
        ),
    )
