"""Advantage actor-critic with lambda or n-step returns (rlax)."""

from __future__ import annotations


import dataclasses
import functools

import jax
import jax.numpy as jnp

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.base import Agent, make_network, make_policy_fns, unroll_trajectory
from podracer.core.agents.losses import masked_mean, policy_terms, transitions
from podracer.core.networks import ACTOR_CRITIC_FLAGS, NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, on_policy_steps, optimizer_field
from podracer.core.types import RunFacts, EnvSpec, Trajectory


@dataclasses.dataclass(frozen=True)
class A2CConfig(Configurable):
    """Advantage actor-critic (A2C)."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=3e-3, max_grad_norm=0.5)
    discount: float = 0.99  # discount gamma
    td_lambda: float = 0.95  # lambda of the lambda returns
    n_step: int | None = None  # n-step bootstrapped returns instead of lambda returns; None: lambda returns
    value_coef: float = 0.5  # weight of the value loss
    entropy_coef: float = 0.01  # weight of the entropy bonus
    # --hidden-sizes, --activation, --policy-std, --log-std-init, --sde-sample-freq, --policy-units, --kernel-init,
    # --shared-torso, --torso, --core, --core-size
    network: NetworkConfig = network_field(ACTOR_CRITIC_FLAGS)

    def __post_init__(self):
        check_hyperparameters(self)


def make_a2c(spec: EnvSpec, config: A2CConfig = A2CConfig(), run: RunFacts | None = None) -> Agent:
    """A2C: one gradient step per trajectory on policy-gradient, value and entropy terms."""
    import rlax  # here, not at import: rlax pulls in distrax and TensorFlow Probability (0.5 s)

    network = in_compute_dtype(make_network(spec, config), run)
    fns = make_policy_fns(network, run)

    def returns_fn(r_t, discount_t, continues_t, v_t):
        if config.n_step is None:
            return rlax.lambda_returns(r_t, discount_t, v_t, config.td_lambda * continues_t)
        return rlax.n_step_bootstrapped_returns(r_t, discount_t, v_t, config.n_step, lambda_t=continues_t)

    def loss(params, trajectory: Trajectory, key):
        del key
        policy, values = unroll_trajectory(network, params, trajectory)
        tr = transitions(trajectory, config.discount)
        v_tm1, v_t = values[:-1], values[1:]
        returns = jax.vmap(returns_fn, in_axes=1, out_axes=1)(tr.r_t, tr.discount_t, tr.continues_t, v_t)
        returns = jax.lax.stop_gradient(returns)
        advantage = returns - v_tm1
        action_mask = jax.tree.map(lambda x: x[:-1], trajectory.timestep.action_mask)
        log_prob, entropy = policy_terms(jax.tree.map(lambda x: x[:-1], policy), trajectory.action[:-1], action_mask)
        policy_loss = -masked_mean(log_prob * jax.lax.stop_gradient(advantage), tr.mask_t)
        value_loss = 0.5 * masked_mean(jnp.square(advantage), tr.mask_t)
        entropy = masked_mean(entropy, tr.mask_t)
        total = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return total, {
            "loss": total,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
        }

    return Agent(
        **fns, loss=loss, optimizer=optimizer_of(config.optimizer, functools.partial(on_policy_steps, run, 1, 1))
    )
