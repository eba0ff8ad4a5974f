"""R2D2 (Kapturowski et al., 2019): recurrent double Q-learning from prioritized sequences.

The actor carries an LSTM state (reset where episodes start) and acts epsilon-greedily
with the Ape-X ladder. The learner stores one sequence per environment and trajectory:
its ``T + 1`` time steps, actions, and the LSTM state the actor had before the first of
them. A sampled sequence is unrolled from that stored state: the first ``burn_in``
steps only warm the state up (no gradient, no loss), the rest give n-step double-Q
targets with value rescaling (``h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x``, rlax's
signed hyperbolic pair): ``h(sum_k gamma^k r + gamma^n h^-1(Q_target(s', argmax Q(s'))))``.
The sequence's new priority mixes the max and the mean absolute TD error (``eta``).
"""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp

from podracer.core.precision import in_compute_dtype
from podracer.core import replay as replay_lib
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.base import Agent, make_recurrent_fns, make_torso, require_actions
from podracer.core.agents.losses import first_flags, mask_logits
from podracer.core.agents.qlearning import check_replay_sizes, epsilon_greedy, n_step_targets, replay_spec
from podracer.core.networks import RecurrentNetwork
from podracer.core.networks import NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, optimizer_field, replay_steps
from podracer.core.types import RunFacts, EnvSpec, TimeStep, Trajectory


@dataclasses.dataclass(frozen=True)
class R2D2Config(Configurable):
    """R2D2: recurrent double Q-learning from prioritized sequences."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=6e-4, max_grad_norm=40.0)
    discount: float = 0.997  # discount gamma
    n_step: int = 5  # bootstrapped returns over up to n steps
    burn_in: int = 4  # steps of each stored sequence that only warm the LSTM state up; < --rollout-length
    epsilon: float = 0.4  # Ape-X ladder: the most exploring actor's epsilon ...
    epsilon_alpha: float = 7.0  # ... and the ladder's exponent range
    value_rescaling: bool = True  # learn h(Q) (off: plain n-step double Q on sequences)
    value_rescaling_eps: float = 1e-3  # eps of h
    replay_capacity: int = 10_000  # sequences per replay shard
    batch_size: int = 32  # sequences per gradient step, per learner device
    replay_ratio: float = 1.0  # sequences learned from per sequence inserted, held by a rate limiter
    min_replay_size: int = 256  # sequences inserted before learning starts (per shard)
    prioritized: bool = True  # prioritized replay (a sum tree); uniform otherwise
    priority_exponent: float = 0.9  # prioritized replay alpha
    importance_exponent: float = 0.6  # prioritized replay beta
    eta: float = 0.9  # priority = eta x max |td| + (1 - eta) x mean |td| over a sequence
    target_period: int = 100  # gradient steps between target-network copies
    target_tau: float | None = None  # Polyak averaging each step instead of periodic copies
    # --hidden-sizes, --torso, --core-size
    network: NetworkConfig = network_field(
        ("hidden_sizes", "torso", "core_size"), hidden_sizes=(64,), activation="relu", core="lstm"
    )

    def __post_init__(self):
        check_hyperparameters(self)
        check_replay_sizes(self)


def make_r2d2(spec: EnvSpec, config: R2D2Config = R2D2Config(), run: RunFacts | None = None) -> Agent:
    """R2D2; see the module docstring. Sequences are the learner's trajectories (``--rollout-length`` + 1 steps)."""
    import rlax  # here, not at import: rlax pulls in distrax and TensorFlow Probability (0.5 s)

    require_actions(spec, "r2d2", "discrete")
    net = config.network
    torso = make_torso(spec, net.torso, net.hidden_sizes, net.activation)
    network = in_compute_dtype(RecurrentNetwork(spec.num_actions, torso, net.core_size, heads="q"), run)

    def choose(q_values, key, action_mask):
        action = epsilon_greedy(q_values, key, config.epsilon, config.epsilon_alpha, action_mask)
        return action, {"q_values": mask_logits(q_values, action_mask)}

    fns = make_recurrent_fns(network, choose)
    if config.value_rescaling:
        h = lambda x: rlax.signed_hyperbolic(x, config.value_rescaling_eps)  # noqa: E731
        h_inv = lambda x: rlax.signed_parabolic(x, config.value_rescaling_eps)  # noqa: E731
    else:
        h = h_inv = lambda x: x  # noqa: E731

    def make_items(trajectory: Trajectory):
        length = trajectory.action.shape[0]
        if config.burn_in + 1 >= length:
            raise ValueError(
                f"R2D2 needs sequences longer than burn_in + 1 = {config.burn_in + 1} steps; the "
                f"trajectories have {length} (raise --rollout-length or lower --burn-in)."
            )
        ts = trajectory.timestep
        batch_major = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
        items = {
            "observation": jax.tree.map(batch_major, ts.observation),
            "reward": batch_major(ts.reward),
            "discount": batch_major(ts.discount),
            "last": batch_major(ts.last),
            "action": batch_major(trajectory.action),
            "core_state": trajectory.actor_state,
        }
        if ts.action_mask is not None:
            items["action_mask"] = batch_major(ts.action_mask)
        return items, jnp.ones(trajectory.action.shape[1], bool)

    def unroll(params, observation, first, state):
        """Q-values ``[S, N, A]``: the burn-in steps without gradient, the rest from the state they reach."""
        b = config.burn_in
        if b == 0:
            return network.apply(params, observation, first, state, method="unroll")[0]
        head = lambda x: x[:b]  # noqa: E731
        tail = lambda x: x[b:]  # noqa: E731
        q_burn, state = network.apply(params, jax.tree.map(head, observation), head(first), state, method="unroll")
        state = jax.lax.stop_gradient(state)
        q_rest, _ = network.apply(params, jax.tree.map(tail, observation), tail(first), state, method="unroll")
        return jnp.concatenate([jax.lax.stop_gradient(q_burn), q_rest])

    def loss(params, target_params, items, weights, key):
        del key
        time_major = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
        observation = jax.tree.map(time_major, items["observation"])
        timestep = TimeStep(
            observation, time_major(items["reward"]), time_major(items["discount"]), time_major(items["last"])
        )
        trajectory = Trajectory(timestep, time_major(items["action"]), {})
        first = first_flags(trajectory)
        q = unroll(params, observation, first, items["core_state"])  # [S, N, A]
        q_target = unroll(target_params, observation, first, items["core_state"])
        reward, discount, index, mask = n_step_targets(trajectory, config.n_step, config.discount)  # [S - 1, N]
        columns = jnp.arange(reward.shape[1])[None, :]
        action_mask = time_major(items["action_mask"])[index, columns] if "action_mask" in items else None
        chex.assert_rank([q, q_target], 3)  # [S, N, A]
        chex.assert_equal_shape([reward, discount, index, mask])
        # The transformed n-step target by hand around rlax's transform pair: rlax.transformed_n_step_q_learning sums
        # a fixed n over one unbroken sequence, where a replayed sequence here holds episode ends and the reset step
        # between two episodes, which n_step_targets stops at and masks.
        best = jnp.argmax(mask_logits(q[index, columns], action_mask), axis=-1)  # over legal actions
        bootstrap = jnp.take_along_axis(q_target[index, columns], best[..., None], axis=-1)[..., 0]
        target = jax.lax.stop_gradient(h(reward + discount * h_inv(bootstrap)))
        q_a = jnp.take_along_axis(q[:-1], trajectory.action[:-1, :, None].astype(jnp.int32), axis=-1)[..., 0]
        learn = mask * (jnp.arange(mask.shape[0]) >= config.burn_in)[:, None]  # no loss on burn-in steps
        td = (target - q_a) * learn
        total = jnp.mean(weights[None, :] * 0.5 * jnp.square(td))
        abs_td = jnp.abs(td)
        priorities = replay_lib.sequence_priorities(abs_td, learn, eta=config.eta, axis=0)
        metrics = {
            "loss": total,
            "q_value": jnp.sum(q_a * learn) / jnp.maximum(jnp.sum(learn), 1.0),
            "abs_td": jnp.sum(abs_td) / jnp.maximum(jnp.sum(learn), 1.0),
        }
        return total, (metrics, priorities)

    steps = functools.partial(
        replay_steps, run, config.replay_ratio, config.min_replay_size, config.batch_size, sequences=True
    )
    return Agent(
        **fns, loss=None, replay=replay_spec(config, make_items, loss), optimizer=optimizer_of(config.optimizer, steps)
    )
