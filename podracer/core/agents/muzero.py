"""Gumbel MuZero (Schrittwieser et al., 2020; Danihelka et al., 2022): mctx's ``gumbel_muzero_policy`` searching a
model the agent learns, at every step, in any mode.

Three networks make the model (:class:`MuZeroNetwork`): the representation maps an observation to a latent state
(min-max scaled to [0, 1], as MuZero's), the dynamics maps a latent state and an action to the next latent state and
the reward, and the prediction maps a latent state to a policy and a value. Value and reward are categorical over
``2 * --support-size + 1`` bins of the signed-hyperbolic transform of the scalar (rlax's ``muzero_pair``). The search
is the agent's ``act``: it needs nothing of the environment but the observation (and the legal-action mask at the
root, where there is one), so Sebulba's actors run it batched on the actor devices as they run any policy.

Learning is on-policy: each batch of trajectories is cut into windows, one starting at every step, and the model is
unrolled ``--unroll-steps`` (K) steps from each window's first observation along the actions taken. At every
unrolled step the policy learns the search's improved policy (``action_weights``), the value the ``--n-step`` return
bootstrapped from the network's value (computed once per batch, before the epochs), and the reward the reward
received. Past the end of an episode that terminated the value and reward targets are 0 (an absorbing state) and
the policy is not trained; past a time limit or the trajectory's end nothing is. Every unrolled step's latent state
has its gradient halved on the way back (MuZero's scaling). On-policy, because each rollout is fresh data from the
current search in both modes with the learner both modes share; replay of old searches' targets needs reanalysis
to stay sound, which this agent does not do.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import chex
import jax
import jax.numpy as jnp

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.search import completed_q, gumbel_search, legal_logits
from podracer.core.agents.base import Agent, make_torso, require_actions
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.losses import masked_mean, transitions
from podracer.core.networks import MLP
from podracer.core.networks import NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, on_policy_steps, optimizer_field
from podracer.core.types import EnvSpec, RunFacts, Trajectory


@dataclasses.dataclass(frozen=True)
class MuZeroConfig(Configurable):
    """Gumbel MuZero: mctx's Gumbel search on a learned model (representation, dynamics, prediction)."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=1e-3, max_grad_norm=1.0)
    num_simulations: int = 16  # simulations of the search at every step
    max_num_considered_actions: int = 16  # actions sampled at the root (Gumbel top-k) for sequential halving
    gumbel_scale: float = 1.0  # scale of the Gumbel noise at the root (0: no exploration noise)
    # the completed Q-values' weight in the improved policy: (50 + most visits) x this x Q
    value_scale: float = 0.1
    # min-max scale each node's Q-values to [0, 1] first (mctx's default): a young model's noise then counts as much
    # as a real difference; off, the scale is the returns' own (Catch: learned in a third of the steps)
    rescale_values: bool = False
    discount: float = 0.99  # discount of the value targets and of the search
    unroll_steps: int = 5  # K: steps the model is unrolled in the loss
    n_step: int = 10  # n of the value targets' n-step returns
    value_coef: float = 0.25  # weight of the value loss
    reward_coef: float = 1.0  # weight of the reward loss
    num_epochs: int = 1  # passes over each batch of windows
    num_minibatches: int = 1  # minibatches per pass; must divide each learner device's windows (steps x envs)
    support_size: int = 20  # value and reward: categorical over 2 x this + 1 bins of the signed-hyperbolic transform
    latent_size: int = 64  # size of the latent state
    # --hidden-sizes, --activation, --torso
    network: NetworkConfig = network_field(
        ("hidden_sizes", "activation", "torso"), hidden_sizes=(128, 128), activation="relu"
    )

    def __post_init__(self):
        check_hyperparameters(self)


def scale_to_unit(latent):
    """MuZero's scaling of a latent state: each state's features min-max scaled into [0, 1]."""
    low = jnp.min(latent, axis=-1, keepdims=True)
    high = jnp.max(latent, axis=-1, keepdims=True)
    return (latent - low) / jnp.maximum(high - low, 1e-5)


def scale_gradient(x, scale: float):
    """``x`` forwards, its gradient times ``scale`` backwards."""
    return x * scale + jax.lax.stop_gradient(x) * (1.0 - scale)


class MuZeroNetwork(nn.Module):
    """MuZero's three functions: :meth:`represent`, :meth:`dynamics` and :meth:`predict` (``[N, ...]`` in)."""

    torso: nn.Module  # the representation's torso (podracer.core.agents.base.make_torso)
    num_actions: int
    latent_size: int
    hidden_sizes: tuple[int, ...]
    activation: str
    bins: int  # categorical bins of the value and the reward

    def setup(self):
        dense = functools.partial(nn.Dense, kernel_init=nn.initializers.orthogonal(1.0))
        self.represent_out = dense(self.latent_size)
        self.dynamics_net = MLP(self.hidden_sizes, self.activation, layer_norm=True)
        self.dynamics_out = dense(self.latent_size)
        self.reward_head = nn.Sequential([MLP(self.hidden_sizes[-1:], self.activation), dense(self.bins)])
        self.prediction_net = MLP(self.hidden_sizes, self.activation, layer_norm=True)
        self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
        self.value_head = dense(self.bins)

    def represent(self, observation):
        """The latent state of ``[N, ...]`` observations: ``[N, latent_size]`` in [0, 1]."""
        return scale_to_unit(self.represent_out(self.torso(observation)))

    def dynamics(self, latent, action):
        """``(next latent state, reward logits [N, bins])`` after int ``[N]`` actions."""
        x = jnp.concatenate([latent, jax.nn.one_hot(action, self.num_actions)], axis=-1)
        following = scale_to_unit(self.dynamics_out(self.dynamics_net(x)))
        return following, self.reward_head(following)

    def predict(self, latent):
        """``(policy logits [N, num_actions], value logits [N, bins])``."""
        h = self.prediction_net(latent)
        return self.policy_head(h), self.value_head(h)

    def __call__(self, observation):
        latent = self.represent(observation)
        self.dynamics(latent, jnp.zeros(latent.shape[:1], jnp.int32))
        return self.predict(latent)


def make_muzero(spec: EnvSpec, config: MuZeroConfig = MuZeroConfig(), run: RunFacts | None = None) -> Agent:
    """Gumbel MuZero on ``spec``'s discrete actions."""
    import mctx
    import rlax

    require_actions(spec, "muzero", "discrete")
    if isinstance(spec.observation, dict):
        raise ValueError("--agent muzero takes array observations; this environment's are structured (a dict).")
    net = config.network
    torso = make_torso(spec, net.torso, net.hidden_sizes, net.activation)
    bins = 2 * config.support_size + 1
    network = MuZeroNetwork(torso, spec.num_actions, config.latent_size, net.hidden_sizes, net.activation, bins)
    network = in_compute_dtype(network, run)
    pair = rlax.muzero_pair(-config.support_size, config.support_size, bins, rlax.SIGNED_HYPERBOLIC_PAIR)
    K = config.unroll_steps
    qtransform = completed_q(config)

    def scalar(logits):
        return pair.apply_inv(jax.nn.softmax(logits))

    def init(key, observation):
        return network.init(key, observation)

    def act(params, observation, key, state, first, action_mask=None):
        del first
        latent = network.apply(params, observation, method="represent")
        logits, value_logits = network.apply(params, latent, method="predict")
        logits = legal_logits(logits, action_mask)
        root = mctx.RootFnOutput(prior_logits=logits, value=scalar(value_logits), embedding=latent)

        def recurrent_fn(params, key, action, latent):
            del key
            latent, reward_logits = network.apply(params, latent, action, method="dynamics")
            logits, value_logits = network.apply(params, latent, method="predict")
            output = mctx.RecurrentFnOutput(
                reward=scalar(reward_logits),
                discount=jnp.full(action.shape, config.discount, jnp.float32),
                prior_logits=logits - jnp.max(logits, axis=-1, keepdims=True),
                value=scalar(value_logits),
            )
            return output, latent

        action, extras = gumbel_search(config, params, key, root, recurrent_fn, logits, action_mask, qtransform)
        return action, extras, state

    def n_step_returns(r_t, discount_t, v_t, lambda_t):  # [T, B] each, per environment
        one = functools.partial(rlax.n_step_bootstrapped_returns, n=config.n_step)
        return jax.vmap(lambda *args: one(*args[:3], lambda_t=args[3]), in_axes=1, out_axes=1)(
            r_t, discount_t, v_t, lambda_t
        )

    def prepare(params, trajectory: Trajectory):
        return jax.lax.stop_gradient(unroll_targets(trajectory, values(params, trajectory)))

    def values(params, trajectory):
        observation = trajectory.timestep.observation
        flat = jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:])), observation)
        latent = network.apply(params, flat, method="represent")
        _, value_logits = network.apply(params, latent, method="predict")
        return jnp.reshape(scalar(value_logits), trajectory.timestep.reward.shape)

    def unroll_targets(trajectory, value):
        ts = trajectory.timestep
        tr = transitions(trajectory, config.discount)
        returns = n_step_returns(tr.r_t, tr.discount_t, value[1:], tr.continues_t)  # [T, B]
        returns = jnp.concatenate([returns, value[-1:]], axis=0)  # [T + 1, B]: the last entry bootstraps
        terminal = ts.last & (ts.discount == 0.0)
        returns = jnp.where(ts.last, jnp.where(terminal, 0.0, value), returns)
        return windows(trajectory, returns, terminal)

    def windows(trajectory, returns, terminal):
        """One window of K + 1 steps from every step ``t < T``: ``[T * B, ...]`` (see the module's docstring)."""
        ts = trajectory.timestep
        chex.assert_rank([ts.reward, ts.last, returns, terminal, trajectory.action], 2)  # [T + 1, B]
        chex.assert_equal_shape([ts.reward, ts.last, returns, terminal, trajectory.action])
        T = ts.reward.shape[0] - 1
        index = jnp.arange(T)[:, None] + jnp.arange(K + 1)[None, :]  # [T, K + 1]
        inside = index <= T

        def at(x, fill=0):  # x[t + k] for every window, [T, K + 1, B, ...], `fill` past the trajectory
            padded = jnp.concatenate([x, jnp.full((K, *x.shape[1:]), fill, x.dtype)], axis=0)
            return padded[index]

        last, ends = at(ts.last, True), at(terminal, False)
        before = jnp.cumsum(last, axis=1) - last  # lasts strictly before step k of the window
        same = (before == 0) & inside[..., None]  # step k is in the window's first episode
        first_end = last & (before == 0)  # the episode's end, where the window reaches it
        absorbing = ~same & (jnp.cumsum(first_end & ends, axis=1) - (first_end & ends) > 0)
        target_weight = (same | absorbing).astype(jnp.float32)
        batch = {
            "observation": jax.tree.map(lambda x: x[:-1], ts.observation),  # [T, B, ...]
            "action": jnp.moveaxis(at(trajectory.action)[:, :K], 1, 2),  # [T, B, K]
            "policy_target": jnp.moveaxis(at(trajectory.extras["policy_target"]), 1, 2),  # [T, B, K + 1, A]
            "policy_weight": jnp.moveaxis((same & ~last).astype(jnp.float32), 1, 2),
            "value_target": jnp.moveaxis(jnp.where(same, at(returns), 0.0), 1, 2),
            "reward_target": jnp.moveaxis(jnp.where(same, at(ts.reward), 0.0)[:, 1:], 1, 2),  # [T, B, K]
            "value_weight": jnp.moveaxis(target_weight, 1, 2),
            "reward_weight": jnp.moveaxis(target_weight[:, 1:], 1, 2),
        }
        return jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:])), batch)

    def cross_entropy(logits, target):
        """Hand-written: rlax's categorical_cross_entropy warns of its deprecation (PendingDeprecationWarning) in
        favour of distrax, which podracer does not depend on; this is its one line."""
        return -jnp.sum(target * jax.nn.log_softmax(logits), axis=-1)

    def loss(params, batch, key):
        del key
        latent = network.apply(params, batch["observation"], method="represent")
        policy, value, reward = [], [], []
        for k in range(K + 1):
            logits, value_logits = network.apply(params, latent, method="predict")
            policy.append(logits)
            value.append(value_logits)
            if k < K:
                latent, reward_logits = network.apply(params, latent, batch["action"][:, k], method="dynamics")
                latent = scale_gradient(latent, 0.5)
                reward.append(reward_logits)
        policy, value = jnp.stack(policy, axis=1), jnp.stack(value, axis=1)  # [N, K + 1, ...]
        policy_loss = masked_mean(cross_entropy(policy, batch["policy_target"]), batch["policy_weight"])
        value_loss = masked_mean(cross_entropy(value, pair.apply(batch["value_target"])), batch["value_weight"])
        total = policy_loss + config.value_coef * value_loss
        reward = jnp.stack(reward, axis=1)  # [N, K, bins]
        reward_loss = masked_mean(cross_entropy(reward, pair.apply(batch["reward_target"])), batch["reward_weight"])
        total = total + config.reward_coef * reward_loss
        value_error = masked_mean(
            jnp.abs(scalar(value[:, 0]) - batch["value_target"][:, 0]), batch["value_weight"][:, 0]
        )
        return total, {
            "loss": total,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "reward_loss": reward_loss,
            "value_error": value_error,
        }

    return Agent(
        init=init,
        act=act,
        loss=loss,
        prepare=prepare,
        num_epochs=config.num_epochs,
        num_minibatches=config.num_minibatches,
        minibatch_axis=0,
        optimizer=optimizer_of(
            config.optimizer, functools.partial(on_policy_steps, run, config.num_epochs, config.num_minibatches)
        ),
    )


__all__ = ["MuZeroConfig", "MuZeroNetwork", "make_muzero", "scale_gradient", "scale_to_unit"]
