"""PQN (Gallici et al., 2024, "Simplifying Deep Temporal Difference Learning"): Q-learning from many vectorised
environments with no replay and no target network, LayerNorm in the network, and Q(lambda) targets.

Actors act epsilon-greedily, epsilon decaying linearly over a share of the run's env steps as the learner counts
them (the count travels with the parameters, so Sebulba's actors follow it). Each learner step computes the
targets once from the Q-values the actors recorded (``extras["q_values"]``, legal actions only), then makes
``--num-epochs`` passes of ``--num-minibatches`` over the rollout, as the on-policy agents do:

    G_t = r_t + gamma_t [(1 - lambda) max_a Q(o_{t+1}, a) + lambda G_{t+1}],   loss = 1/2 (Q(o_t, a_t) - G_t)^2

with ``G`` bootstrapping from ``max_a Q`` at the rollout's end and ``lambda`` cut to 0 where an episode ends
(:func:`q_lambda_targets`, rlax's ``lambda_returns``). ``--core lstm`` is PQN-RNN: sequences unrolled from the core
state the actor stored, minibatches of whole sequences.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.base import Agent, START_STATE, make_torso, require_actions
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.losses import first_flags, mask_logits, masked_mean, transitions
from podracer.core.agents.qlearning import epsilon_greedy, linear_epsilon, make_q_network, with_env_step_clock
from podracer.core.networks import RecurrentNetwork, lstm_initial_state, reset_state
from podracer.core.networks import NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, on_policy_steps, optimizer_field
from podracer.core.types import EnvSpec, RunFacts, Trajectory


@dataclasses.dataclass(frozen=True)
class PQNConfig(Configurable):
    """PQN: vectorised Q(lambda) with LayerNorm, no replay, no target network."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=1e-4, max_grad_norm=10.0, lr_schedule="linear")
    discount: float = 0.99  # discount gamma
    q_lambda: float = 0.65  # lambda of the Q(lambda) targets (0: one-step Q-learning, 1: Monte Carlo returns)
    reward_scale: float = 1.0  # rewards are multiplied by this in the targets (purejaxql's CartPole: 0.1)
    num_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # minibatches per pass; must divide each learner device's batch
    epsilon_start: float = 1.0  # exploration: epsilon at the run's start ...
    epsilon_end: float = 0.05  # ... after --epsilon-fraction of the run ...
    epsilon_fraction: float = 0.2  # ... the share of the run's env steps the linear decay takes
    # --layer-norm, --hidden-sizes, --torso, --core, --core-size
    network: NetworkConfig = network_field(
        ("layer_norm", "hidden_sizes", "torso", "core", "core_size"),
        hidden_sizes=(128, 128),
        activation="relu",
        layer_norm=True,
    )

    def __post_init__(self):
        check_hyperparameters(self)


class PQNBatch(NamedTuple):
    """Flattened samples ``[N]`` with their fixed targets; for a recurrent network whole sequences ``[T, B]``, with
    the flags of episode starts and the core state each sequence started from."""

    observation: chex.ArrayTree  # o_t
    action: chex.Array  # int32 a_t
    target: chex.Array  # float32 G_t
    mask: chex.Array  # float32: 1 where the transition lies inside an episode
    first: chex.Array = None  # bool [T, B]: o_t starts an episode (recurrent only)
    start_state: chex.ArrayTree = None  # the core state at o_0, [1, B, ...] (recurrent only)


def q_lambda_targets(r_t, discount_t, continues_t, q_t, legal_t=None, *, lambda_: float) -> chex.Array:
    """Q(lambda) targets of one trajectory's ``T`` transitions (``[T]`` each; :class:`~podracer.core.agents.losses.
    Transitions`): ``q_t`` ``[T, A]`` are the action values at ``o_{t+1}``; with ``legal_t`` (bool ``[T, A]``) the
    max is over legal actions (0 where none is legal). ``lambda`` is cut to 0 where an episode ends, so a target
    never looks past it (a truncated episode still bootstraps from ``max Q`` of its last observation)."""
    import rlax  # here, not at import: rlax pulls in distrax and TensorFlow Probability

    chex.assert_rank([r_t, discount_t, continues_t, q_t], [1, 1, 1, 2])
    chex.assert_equal_shape([r_t, discount_t, continues_t])
    chex.assert_equal_shape_prefix([r_t, q_t], 1)
    v_t = jnp.max(mask_logits(q_t, legal_t), axis=-1)
    if legal_t is not None:
        v_t = jnp.where(jnp.any(legal_t, axis=-1), v_t, 0.0)
    return rlax.lambda_returns(r_t, discount_t, v_t, lambda_ * continues_t)


def make_pqn(spec: EnvSpec, config: PQNConfig = PQNConfig(), run: RunFacts | None = None) -> Agent:
    """PQN; see the module docstring."""
    require_actions(spec, "pqn", "discrete")
    if run is None:
        raise ValueError(
            "--agent pqn decays epsilon over the run's env steps: make it with the run's facts, "
            "agents.make(config, spec, run=RunFacts(...)) (the command lines do)."
        )
    net = config.network
    recurrent = net.core == "lstm"
    if recurrent:
        torso = make_torso(spec, net.torso, net.hidden_sizes, net.activation, net.layer_norm)
        network = RecurrentNetwork(spec.num_actions, torso, net.core_size, heads="q")
    else:
        network = make_q_network(spec, net)
    network = in_compute_dtype(network, run)
    decay_steps = config.epsilon_fraction * run.total_env_steps

    def initial_state(batch):
        return lstm_initial_state(batch, net.core_size) if recurrent else ()

    def init(key, observation):
        if recurrent:
            batch = jax.tree.leaves(observation)[0].shape[0]
            params = network.init(key, observation, jnp.ones((batch,), bool), initial_state(batch))
        else:
            params = network.init(key, observation)
        return with_env_step_clock({"network": params})  # epsilon's clock

    def act(params, observation, key, state, first, action_mask=None):
        extras = {}
        if recurrent:
            extras[START_STATE] = state = reset_state(state, first)
            q_values, state = network.apply(params["network"], observation, first, state)
        else:
            q_values = network.apply(params["network"], observation)
        epsilon = linear_epsilon(params["env_steps"], config.epsilon_start, config.epsilon_end, decay_steps)
        action = epsilon_greedy(q_values, key, 0.0, 0.0, action_mask, rates=epsilon)
        return action, {**extras, "q_values": mask_logits(q_values, action_mask)}, state

    def observe(params, trajectory: Trajectory, axis_names=()):
        steps = jnp.asarray(trajectory.action.shape[0] - 1, jnp.float32) * trajectory.action.shape[1]
        for axis in axis_names:
            steps = jax.lax.psum(steps, axis)
        return {**params, "env_steps": params["env_steps"] + steps}, trajectory

    targets = jax.vmap(
        functools.partial(q_lambda_targets, lambda_=config.q_lambda), in_axes=(1, 1, 1, 1, 1), out_axes=1
    )

    def prepare(params, trajectory: Trajectory) -> PQNBatch:
        del params  # the targets use the Q-values the actors recorded
        tr = transitions(trajectory, config.discount)
        legal = trajectory.timestep.action_mask
        legal = None if legal is None else legal[1:]
        r_t = config.reward_scale * tr.r_t
        target = targets(r_t, tr.discount_t, tr.continues_t, trajectory.extras["q_values"][1:], legal)
        batch = PQNBatch(
            observation=jax.tree.map(lambda x: x[:-1], trajectory.timestep.observation),
            action=trajectory.action[:-1],
            target=target,
            mask=tr.mask_t,
        )
        if recurrent:
            start = jax.tree.map(lambda x: x[None], trajectory.actor_state)
            return jax.lax.stop_gradient(batch._replace(first=first_flags(trajectory)[:-1], start_state=start))
        return jax.lax.stop_gradient(jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:])), batch))

    def loss(params, batch: PQNBatch, key):
        del key
        if recurrent:
            start = jax.tree.map(lambda x: x[0], batch.start_state)
            q_values, _ = network.apply(params["network"], batch.observation, batch.first, start, method="unroll")
        else:
            q_values = network.apply(params["network"], batch.observation)
        q_a = jnp.take_along_axis(q_values, batch.action[..., None].astype(jnp.int32), axis=-1)[..., 0]
        total = 0.5 * masked_mean(jnp.square(q_a - batch.target), batch.mask)
        epsilon = linear_epsilon(params["env_steps"], config.epsilon_start, config.epsilon_end, decay_steps)
        return total, {"loss": total, "q_value": masked_mean(q_a, batch.mask), "epsilon": epsilon}

    return Agent(
        init=init,
        act=act,
        loss=loss,
        prepare=prepare,
        num_epochs=config.num_epochs,
        num_minibatches=config.num_minibatches,
        minibatch_axis=1 if recurrent else 0,
        initial_state=initial_state,
        observe=observe,
        optimizer=optimizer_of(
            config.optimizer, functools.partial(on_policy_steps, run, config.num_epochs, config.num_minibatches)
        ),
    )


__all__ = ["PQNBatch", "PQNConfig", "make_pqn", "q_lambda_targets"]
