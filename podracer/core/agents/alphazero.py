"""Gumbel AlphaZero (Danihelka et al., 2022, "Policy improvement by planning with Gumbel"): a search of the game's
own rules at every move, with mctx's ``gumbel_muzero_policy``, guided by a policy-value network that learns from it.

The search's model is the environment's :class:`~podracer.core.envs.base.SearchModel` (pgx's games: the true rules,
pgx's state the embedding); its root's invalid actions are the legal-action mask's complement, and the prior inside the
tree is the network's policy over the legal moves of each node. The agent plays the action the search chose (Gumbel
sampling without replacement and sequential halving over ``--max-num-considered-actions``); its greedy action is the
most weighted move of the improved policy. The policy target is the search's improved policy (``action_weights``:
the prior's logits plus the completed Q-values, through a softmax), the value target the game's outcome: the
lambda-return with lambda 1 at ``--discount`` (1: the sum of the rewards to the game's end, from the agent's point
of view), bootstrapped from the network's value only where a rollout ends inside a game. The loss is the cross
entropy to the improved policy plus ``--value-coef`` times the squared error of the value.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.base import Agent, make_network, require_actions
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.losses import mask_logits, masked_mean, transitions
from podracer.core.agents.search import completed_q, gumbel_search, legal_logits
from podracer.core.networks import NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, on_policy_steps, optimizer_field
from podracer.core.types import EnvSpec, RunFacts, Trajectory


@dataclasses.dataclass(frozen=True)
class AlphaZeroConfig(Configurable):
    """Gumbel AlphaZero: mctx's Gumbel search on the game's own rules, a policy-value network learning from it."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=1e-3, max_grad_norm=1.0)
    num_simulations: int = 32  # simulations of the search at every move
    max_num_considered_actions: int = 16  # actions sampled at the root (Gumbel top-k) for sequential halving
    gumbel_scale: float = 1.0  # scale of the Gumbel noise at the root (0: no exploration noise)
    # the completed Q-values' weight in the improved policy: (50 + most visits) x this x Q
    value_scale: float = 0.1
    # min-max scale each node's Q-values to [0, 1] first (mctx's default); off (a game's outcomes are in [-1, 1]),
    # a tiny Q difference cannot starve a node's unvisited moves: rescaled, it is the whole range, and the tree's
    # selection never tried an opponent's winning reply whose prior was 36 %
    rescale_values: bool = False
    # the probability that a move played in training is a uniformly random legal one instead of the search's (the
    # search's policy stays the move's target; greedy play and evaluation never take it)
    random_move_prob: float = 0.0
    discount: float = 1.0  # discount of the value target (1: the game's outcome)
    value_coef: float = 1.0  # weight of the value loss
    num_epochs: int = 1  # passes over each batch of trajectories
    num_minibatches: int = 1  # minibatches per pass; must divide each learner device's batch
    # --hidden-sizes, --activation, --shared-torso, --torso
    network: NetworkConfig = network_field(
        ("hidden_sizes", "activation", "shared_torso", "torso"), hidden_sizes=(128, 128), activation="relu"
    )

    def __post_init__(self):
        check_hyperparameters(self)


def make_alphazero(spec: EnvSpec, config: AlphaZeroConfig = AlphaZeroConfig(), run: RunFacts | None = None) -> Agent:
    """Gumbel AlphaZero on ``spec``'s discrete, masked actions (its environment gives the model: ``Agent.plans``)."""
    import mctx
    import rlax

    require_actions(spec, "alphazero", "discrete")
    network = in_compute_dtype(make_network(spec, config), run)
    qtransform = completed_q(config)

    def init(key, observation):
        return network.init(key, observation)

    def act(params, observation, key, state, first, action_mask=None, *, model, env_state):
        del first
        logits, value = network.apply(params, observation)
        logits = legal_logits(logits, action_mask)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=jax.vmap(model.root)(env_state))

        def recurrent_fn(params, key, action, embedding):
            keys = jax.random.split(key, action.shape[0])
            embedding, reward, discount, observation, legal = jax.vmap(model.step)(embedding, action, keys)
            logits, value = network.apply(params, observation)
            output = mctx.RecurrentFnOutput(
                reward=reward,
                discount=discount,
                prior_logits=legal_logits(logits, legal),
                value=jnp.where(discount == 0.0, 0.0, value),  # a finished game is worth nothing more
            )
            return output, embedding

        action, extras = gumbel_search(config, params, key, root, recurrent_fn, logits, action_mask, qtransform)
        if config.random_move_prob:  # keys of their own, so the search draws as it does without them
            coin_key, move_key = jax.random.split(jax.random.fold_in(key, 1))
            uniform = jax.random.categorical(move_key, mask_logits(jnp.zeros_like(logits), action_mask))
            coin = jax.random.uniform(coin_key, action.shape) < config.random_move_prob
            action = jnp.where(coin, uniform.astype(jnp.int32), action)
        return action, extras, state

    lambda_returns = jax.vmap(functools.partial(rlax.lambda_returns, lambda_=1.0), in_axes=1, out_axes=1)

    def prepare(params, trajectory: Trajectory):
        _, values = network.apply(params, trajectory.timestep.observation)
        tr = transitions(trajectory, config.discount)
        target = lambda_returns(tr.r_t, tr.discount_t, values[1:])
        batch = {
            "observation": jax.tree.map(lambda x: x[:-1], trajectory.timestep.observation),
            "action_mask": jax.tree.map(lambda x: x[:-1], trajectory.timestep.action_mask),
            "policy_target": trajectory.extras["policy_target"][:-1],
            "value_target": target,
            "mask": tr.mask_t,
        }
        flat = jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:])), batch)
        return jax.lax.stop_gradient(flat)

    def loss(params, batch, key):
        del key
        logits, value = network.apply(params, batch["observation"])
        log_policy = jax.nn.log_softmax(legal_logits(logits, batch["action_mask"]))
        target = batch["policy_target"]
        cross_entropy = -jnp.sum(jnp.where(target > 0, target * log_policy, 0.0), axis=-1)
        policy_loss = masked_mean(cross_entropy, batch["mask"])
        value_loss = masked_mean(jnp.square(value - batch["value_target"]), batch["mask"])
        total = policy_loss + config.value_coef * value_loss
        entropy = -jnp.sum(jnp.where(target > 0, target * jnp.log(jnp.where(target > 0, target, 1.0)), 0.0), -1)
        return total, {
            "loss": total,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "target_entropy": masked_mean(entropy, batch["mask"]),
        }

    return Agent(
        init=init,
        act=act,
        loss=loss,
        prepare=prepare,
        num_epochs=config.num_epochs,
        num_minibatches=config.num_minibatches,
        minibatch_axis=0,
        plans=True,
        optimizer=optimizer_of(
            config.optimizer, functools.partial(on_policy_steps, run, config.num_epochs, config.num_minibatches)
        ),
    )
