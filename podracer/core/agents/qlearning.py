"""What the value-based agents share (DQN, R2D2, PQN; SAC's replay): epsilon-greedy acting and its schedules (the
Ape-X ladder, a linear decay), n-step targets over a trajectory, the (double) Q-learning TD error, the feed-forward
Q-network, and the replay spec of a config."""

from __future__ import annotations

import functools
import math

import chex
import jax
import jax.numpy as jnp

from podracer.core.agents.base import ReplaySpec
from podracer.core.agents.losses import mask_logits, transitions
from podracer.core.networks import QNetwork
from podracer.core.types import EnvSpec, Trajectory, image_layout


def check_replay_sizes(config) -> None:
    """A replay agent's sizes fit together: batch size <= minimum replay size <= capacity."""
    if not config.batch_size <= config.min_replay_size <= config.replay_capacity:
        raise ValueError(
            f"Need --batch-size <= --min-replay-size <= --replay-capacity, got {config.batch_size}, "
            f"{config.min_replay_size}, {config.replay_capacity}."
        )


def replay_spec(config, make_items, loss) -> ReplaySpec:
    """The :class:`ReplaySpec` of a replay agent's config (DQN, R2D2) with its ``make_items`` and ``loss``."""
    return ReplaySpec(
        make_items=make_items,
        loss=loss,
        capacity=config.replay_capacity,
        batch_size=config.batch_size,
        replay_ratio=config.replay_ratio,
        min_size=config.min_replay_size,
        prioritized=config.prioritized,
        priority_exponent=config.priority_exponent,
        importance_exponent=config.importance_exponent,
        target_period=config.target_period,
        target_tau=config.target_tau,
    )


def count_env_steps(params, trajectory: Trajectory, axis_names=()):
    """``Agent.observe`` of an agent whose acting follows the run's env steps (DQN's linear epsilon, TD3's random
    steps): ``params["env_steps"]`` plus the env steps of ``trajectory`` (``[T + 1, B]``: ``T x B`` new ones), summed
    over ``axis_names``; the trajectory unchanged."""
    steps = jnp.asarray(math.prod(trajectory.action.shape[:2]) - trajectory.action.shape[1], jnp.float32)
    for axis in axis_names:
        steps = jax.lax.psum(steps, axis)
    return {**params, "env_steps": params["env_steps"] + steps}, trajectory


def with_env_step_clock(params):
    """``params`` with the clock :func:`count_env_steps` advances: env steps learned from so far, counted by the
    learner (``observe``) and shipped to the actors with the parameters (float: it takes a zero gradient with the
    rest)."""
    return {**params, "env_steps": jnp.zeros((), jnp.float32)}


def uniform_until(params, action: jax.Array, key: jax.Array, random_steps: int) -> jax.Array:
    """``--random-steps``: actions uniform in [-1, 1] (a continuous agent's squashed units) in place of ``action``
    until the clock of :func:`with_env_step_clock` reaches ``random_steps``."""
    uniform = jax.random.uniform(key, action.shape, minval=-1.0, maxval=1.0)
    return jnp.where(params["env_steps"] < random_steps, uniform, action)


def epsilon_ladder(num_actors: int, epsilon: float = 0.4, alpha: float = 7.0) -> jax.Array:
    """Ape-X exploration rates ``epsilon ** (1 + alpha * i / (N - 1))`` for ``i = 0 ... N - 1``."""
    i = jnp.arange(num_actors, dtype=jnp.float32)
    return epsilon ** (1.0 + alpha * i / max(num_actors - 1, 1))


def linear_epsilon(env_steps, start: float, end: float, decay_steps) -> jax.Array:
    """Epsilon after ``env_steps`` of a linear decay from ``start`` to ``end`` over ``decay_steps``, then ``end``."""
    progress = jnp.clip(jnp.asarray(env_steps, jnp.float32) / jnp.maximum(decay_steps, 1.0), 0.0, 1.0)
    return start + (end - start) * progress


def epsilon_greedy(q_values: jax.Array, key, epsilon: float, alpha: float, action_mask=None, rates=None) -> jax.Array:
    """Greedy actions of ``q_values`` ``[..., A]``, random ones with the Ape-X ladder's rates over the batch (or
    ``rates``, broadcast over it); with ``action_mask`` (bool ``[..., A]``) both the greedy and the random actions
    are legal ones."""
    batch_shape = q_values.shape[:-1]
    if rates is None:
        rates = epsilon_ladder(math.prod(batch_shape), epsilon, alpha).reshape(batch_shape)
    if action_mask is None:
        # One draw of 32 bits per actor gives both: the high 16 the exploration coin, the low 16 the random action
        # (each random call is a loop of its own on XLA:CPU, at every env step).
        bits = jax.random.bits(key, batch_shape, jnp.uint32)
        explore_u = (bits >> 16).astype(jnp.float32) / 65536.0
        random_action = ((bits & 0xFFFF) % q_values.shape[-1]).astype(jnp.int32)
    else:  # uniform over the legal actions
        explore_key, action_key = jax.random.split(key)
        explore_u = jax.random.uniform(explore_key, batch_shape)
        random_action = jax.random.categorical(action_key, mask_logits(jnp.zeros_like(q_values), action_mask))
    explore = explore_u < rates
    greedy = jnp.argmax(mask_logits(q_values, action_mask), axis=-1)
    return jnp.where(explore, random_action, greedy).astype(jnp.int32)


def n_step_bootstrap(r_t: chex.Array, discount_t: chex.Array, continues_t: chex.Array, n: int):
    """Per transition ``t -> t + 1`` of one trajectory (``[T]`` each: its
    :class:`~podracer.core.agents.losses.Transitions` fields): the reward sum over up to ``n`` steps, the discount of
    its bootstrap, and the time index to bootstrap from (``[T]`` each).

    Sums stop at the end of an episode (``continues_t`` 0: terminal, bootstrap discount 0; truncated, bootstrap from
    the last observation) and at the end of the trajectory (fewer than n steps).
    """
    chex.assert_rank([r_t, discount_t, continues_t], 1)
    chex.assert_equal_shape([r_t, discount_t, continues_t])
    t_len = r_t.shape[0]
    pad = lambda x: jnp.concatenate([x, jnp.zeros((n,), x.dtype)])  # noqa: E731
    r, d, c = pad(r_t), pad(discount_t), pad(continues_t)
    steps = jnp.arange(t_len, dtype=jnp.int32)
    reward_sum, bootstrap_discount = jnp.zeros((t_len,), jnp.float32), jnp.ones((t_len,), jnp.float32)
    bootstrap_index, alive = steps, jnp.ones((t_len,), bool)
    for k in range(n):
        valid = alive & (steps + k < t_len)
        reward_sum = reward_sum + jnp.where(valid, bootstrap_discount * r[k : k + t_len], 0.0)
        bootstrap_discount = jnp.where(valid, bootstrap_discount * d[k : k + t_len], bootstrap_discount)
        bootstrap_index = jnp.where(valid, steps + k + 1, bootstrap_index)
        alive = valid & (c[k : k + t_len] > 0)
    return reward_sum, bootstrap_discount, bootstrap_index


def n_step_targets(trajectory: Trajectory, n: int, discount: float):
    """:func:`n_step_bootstrap` of every environment of a ``[T + 1, B]`` trajectory (``[T, B]`` each), and the
    validity mask of its transitions."""
    tr = transitions(trajectory, discount)
    one = functools.partial(n_step_bootstrap, n=n)
    reward_sum, bootstrap_discount, bootstrap_index = jax.vmap(one, in_axes=1, out_axes=1)(
        tr.r_t, tr.discount_t, tr.continues_t
    )
    return reward_sum, bootstrap_discount, bootstrap_index, tr.mask_t


def transition_items(trajectory: Trajectory, n: int, discount: float):
    """A replay agent's items from a ``[T + 1, B]`` trajectory: its ``T x B`` n-step transitions (observation,
    action, reward sum, bootstrap discount, bootstrap observation, validity; the bootstrap observation's legal
    actions where the environment has a mask), flattened, and which are real."""
    reward, bootstrap_discount, index, mask = n_step_targets(trajectory, n, discount)
    observation = trajectory.timestep.observation
    t_len, batch = reward.shape

    def at_bootstrap(x):  # one step on (n = 1 always bootstraps from t + 1: a slice, not a gather)
        return x[1:] if n == 1 else x[index, jnp.arange(batch)[None, :]]

    items = {
        "observation": observation[:-1],
        "action": trajectory.action[:-1],
        "reward": reward,
        "discount": bootstrap_discount,
        "next_observation": at_bootstrap(observation),
        "valid": mask,
    }
    if trajectory.timestep.action_mask is not None:
        items["next_action_mask"] = at_bootstrap(trajectory.timestep.action_mask)
    flat = jax.tree.map(lambda x: x.reshape(t_len * batch, *x.shape[2:]), items)
    return flat, mask.reshape(-1) > 0


def q_learning_td(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, legal_t=None) -> chex.Array:
    """The TD errors ``[B]`` of (double) Q-learning for a batch of transitions: ``r_t + discount_t * q_t_value[a*]
    - q_tm1[a_tm1]``, where ``a*`` is the legal action (``legal_t``, bool ``[B, A]``, None: every action) that
    ``q_t_selector`` ranks first: the online network's values for double Q-learning, the target network's own for
    DQN's max. ``rlax.double_q_learning`` per transition, vmapped; the target carries no gradient."""
    chex.assert_rank([q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector], [2, 1, 1, 1, 2, 2])
    chex.assert_equal_shape([q_tm1, q_t_value, q_t_selector])
    chex.assert_equal_shape([a_tm1, r_t, discount_t])
    import rlax  # here, not at import: rlax pulls in distrax and TensorFlow Probability (0.5 s)

    selector = mask_logits(q_t_selector, legal_t)  # a* among the legal actions
    return jax.vmap(rlax.double_q_learning)(q_tm1, a_tm1, r_t, discount_t, q_t_value, selector)


def make_q_network(spec: EnvSpec, network) -> QNetwork:
    """The feed-forward Q-network of a :class:`~podracer.core.networks.NetworkConfig` (its ``hidden_sizes``,
    ``activation``, ``torso`` and ``layer_norm``) for ``spec``'s observations."""
    return QNetwork(
        spec.num_actions,
        len(spec.observation.shape),
        network.hidden_sizes,
        activation=network.activation,
        torso=network.torso,
        image=image_layout(spec),
        obs_shape=tuple(spec.observation.shape),
        cell_actions=spec.cell_actions,
        layer_norm=network.layer_norm,
    )


__all__ = [
    "check_replay_sizes",
    "count_env_steps",
    "epsilon_greedy",
    "epsilon_ladder",
    "linear_epsilon",
    "make_q_network",
    "n_step_bootstrap",
    "n_step_targets",
    "q_learning_td",
    "replay_spec",
    "transition_items",
    "uniform_until",
    "with_env_step_clock",
]
