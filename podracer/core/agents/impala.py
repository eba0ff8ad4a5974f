"""IMPALA: actor-critic with V-trace off-policy corrections (rlax), for actors that lag the learner."""

from __future__ import annotations


import dataclasses
import functools

import jax
import jax.numpy as jnp

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.base import Agent, make_network, require_actions, make_policy_fns, unroll_trajectory
from podracer.core.agents.losses import masked_mean, policy_terms, transitions
from podracer.core.networks import NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, on_policy_steps, optimizer_field
from podracer.core.types import RunFacts, EnvSpec, Trajectory


@dataclasses.dataclass(frozen=True)
class IMPALAConfig(Configurable):
    """IMPALA: actor-critic with V-trace corrections."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=6e-4, max_grad_norm=40.0)
    discount: float = 0.99  # discount gamma
    td_lambda: float = 1.0  # V-trace lambda
    clip_rho_threshold: float = 1.0  # V-trace: clip of the importance weights in the value targets
    clip_pg_rho_threshold: float = 1.0  # V-trace: clip of the importance weights in the policy gradient
    value_coef: float = 0.5  # weight of the value loss
    entropy_coef: float = 0.01  # weight of the entropy bonus
    # --hidden-sizes, --activation, --shared-torso, --torso, --core, --core-size
    network: NetworkConfig = network_field(("hidden_sizes", "activation", "shared_torso", "torso", "core", "core_size"))

    def __post_init__(self):
        check_hyperparameters(self)


def make_impala(spec: EnvSpec, config: IMPALAConfig = IMPALAConfig(), run: RunFacts | None = None) -> Agent:
    """IMPALA: one gradient step per trajectory; V-trace corrects for the actors' older policy."""
    import rlax  # here, not at import: rlax pulls in distrax and TensorFlow Probability (0.5 s)

    require_actions(spec, "impala", "discrete", "multi-discrete")
    network = in_compute_dtype(make_network(spec, config), run)
    fns = make_policy_fns(network, run)

    def vtrace_fn(v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_):
        return rlax.vtrace_td_error_and_advantage(
            v_tm1,
            v_t,
            r_t,
            discount_t,
            rho_tm1,
            lambda_,
            clip_rho_threshold=config.clip_rho_threshold,
            clip_pg_rho_threshold=config.clip_pg_rho_threshold,
        )

    vtrace = jax.vmap(vtrace_fn, in_axes=1, out_axes=1)

    def loss(params, trajectory: Trajectory, key):
        del key
        logits, values = unroll_trajectory(network, params, trajectory)
        tr = transitions(trajectory, config.discount)
        actions = trajectory.action[:-1]
        action_mask = jax.tree.map(lambda x: x[:-1], trajectory.timestep.action_mask)
        log_prob, entropy = policy_terms(jax.tree.map(lambda x: x[:-1], logits), actions, action_mask)
        behaviour_log_prob, _ = policy_terms(
            jax.tree.map(lambda x: x[:-1], trajectory.extras["logits"]), actions, action_mask
        )
        rho = jnp.exp(jax.lax.stop_gradient(log_prob) - behaviour_log_prob)
        out = vtrace(values[:-1], values[1:], tr.r_t, tr.discount_t, rho, config.td_lambda * tr.continues_t)
        policy_loss = -masked_mean(log_prob * jax.lax.stop_gradient(out.pg_advantage), tr.mask_t)
        value_loss = 0.5 * masked_mean(jnp.square(out.errors), tr.mask_t)
        entropy = masked_mean(entropy, tr.mask_t)
        total = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return total, {
            "loss": total,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "rho": masked_mean(rho, tr.mask_t),
        }

    return Agent(
        **fns, loss=loss, optimizer=optimizer_of(config.optimizer, functools.partial(on_policy_steps, run, 1, 1))
    )
