"""Soft actor-critic (Haarnoja et al., 2018): twin Q critics, target critics, entropy temperature tuned.

Continuous actions only. The actor is a tanh-squashed Gaussian: it acts in (-1, 1) per
entry, which the environment wrappers rescale to the action bounds
(:func:`podracer.core.envs.base.to_box`); its log-probabilities include the squashing's
Jacobian. The learner is the replay learner that DQN uses
(:func:`podracer.core.learner.make_replay_learner_step`): it stores the one-step transitions
of every trajectory it receives and takes gradient steps as often as the replay ratio
allows, moving the target network by Polyak averaging after each.

One parameter tree holds the actor, both critics and ``log_alpha``; one loss sums the
critic, actor and temperature terms, each seeing the others' parameters through
``stop_gradient``, so Adam (per-parameter, no global-norm clip by default) takes
exactly the three separate updates. The parameters form two groups
(``optax.multi_transform``): the networks, and the temperature with its own learning
rate (``--alpha-learning-rate``, by default ``--learning-rate``); with
``--critic-learning-rate`` the critics form a third (CleanRL's SAC: critics and temperature
at 1e-3, the actor at 3e-4). ``--random-steps N`` acts uniformly at random for the run's
first N env steps, as CleanRL's and Stable-Baselines3's ``learning_starts`` do. ``--no-tune-alpha`` keeps the
temperature at ``--initial-alpha`` (Stable-Baselines3's ``ent_coef`` given as a number).

``--policy-std sde``: gSDE (generalized state-dependent exploration, Raffin et al. 2021) as Stable-Baselines3's SAC
writes it (``use_sde``: ``full_std``, ``learn_features``, the mean clipped to [-2, 2]): the Gaussian before the
``tanh`` has the variance ``sum_j h_j^2 sigma_jk^2 + 1e-6`` of the actor's last features ``h`` (their gradient kept)
and a learned matrix ``log sigma`` (started at ``--log-std-init``); its samples are ``mean + h @ (sigma * eps)``.
Acting, each environment keeps ``eps`` in its actor state and draws it again at every rollout's start and every
``--sde-sample-freq`` steps into it (:func:`podracer.core.agents.base.make_sde_fns`' schedule); learning, one ``eps``
per gradient step serves the whole batch, its current and next actions alike.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.base import Agent, ReplaySpec, action_size, require_actions
from podracer.core.agents.qlearning import (
    check_replay_sizes,
    count_env_steps,
    transition_items,
    uniform_until,
    with_env_step_clock,
)
from podracer.core.agents.base import sde_draws
from podracer.core.networks import MLP, sde_log_std
from podracer.core.networks import NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, optimizer_field, replay_steps
from podracer.core.types import RunFacts, EnvSpec, Trajectory

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # the actor's log standard deviation is squashed into this range


@dataclasses.dataclass(frozen=True)
class SACConfig(Configurable):
    """Soft actor-critic with twin critics, target critics and a tuned entropy temperature."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=3e-4, max_grad_norm=None)
    discount: float = 0.99  # discount gamma
    # the temperature's own Adam learning rate (same schedule, no clip); None: --learning-rate
    alpha_learning_rate: float | None = None
    # the critics' own Adam learning rate (same schedule and clip); None: --learning-rate, as the actor's
    critic_learning_rate: float | None = None
    # uniformly random actions for the run's first this many env steps (all environments together; its replay learns
    # from them): CleanRL's and Stable-Baselines3's learning_starts; 0: the actor acts from the start
    random_steps: int = 0
    initial_alpha: float = 1.0  # entropy temperature at the start
    tune_alpha: bool = True  # tune the temperature towards the target entropy; off: it stays at --initial-alpha
    target_entropy_scale: float = 1.0  # target entropy = -scale x action entries
    replay_capacity: int = 100_000  # items per replay shard (one shard per learner device)
    batch_size: int = 256  # items per gradient step, per learner device
    replay_ratio: float = 32.0  # items learned from per item inserted, held by a rate limiter
    min_replay_size: int = 1_000  # items inserted before learning starts (per shard)
    target_tau: float = 0.005  # Polyak averaging of the target critics, each gradient step
    # --hidden-sizes; --policy-std state (a head of the state: SAC's) or sde (gSDE), --log-std-init and
    # --sde-sample-freq (sde only)
    network: NetworkConfig = network_field(
        ("hidden_sizes", "policy_std", "log_std_init", "sde_sample_freq"),
        hidden_sizes=(256, 256),
        activation="relu",
        policy_std="state",
    )

    def __post_init__(self):
        check_hyperparameters(self)
        check_replay_sizes(self)
        for name in ("alpha_learning_rate", "critic_learning_rate"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {value}.")
        if not self.initial_alpha > 0:
            raise ValueError(f"--initial-alpha must be > 0, got {self.initial_alpha}.")
        if self.target_entropy_scale < 0:
            raise ValueError(f"--target-entropy-scale must be >= 0, got {self.target_entropy_scale}.")
        if self.network.policy_std not in ("state", "sde"):
            raise ValueError(f"--agent sac takes --policy-std state or sde, got {self.network.policy_std}.")


class SquashedGaussianActor(nn.Module):
    """A Gaussian's mean and log standard deviation (both depend on the state) from flattened observations."""

    action_size: int
    hidden_sizes: Sequence[int]

    @nn.compact
    def __call__(self, x):
        h = MLP(self.hidden_sizes, "relu")(x)
        mean = nn.Dense(self.action_size)(h)
        log_std = nn.Dense(self.action_size)(h)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (jnp.tanh(log_std) + 1.0)
        return mean, log_std


class TwinCritic(nn.Module):
    """``num`` (two by default) independent Q networks on ``concat(observation, action)``: values ``[num, N]``, or
    with ``outputs`` > 1 that many outputs each, ``[num, N, outputs]`` (TD3's categorical critics' logits)."""

    hidden_sizes: Sequence[int]
    outputs: int = 1
    num: int = 2

    @nn.compact
    def __call__(self, x, action):
        xa = jnp.concatenate([x, action], axis=-1)
        heads = [nn.Dense(self.outputs)(MLP(self.hidden_sizes, "relu")(xa)) for _ in range(self.num)]
        return jnp.stack([head[..., 0] if self.outputs == 1 else head for head in heads])


SDE_CLIP_MEAN = 2.0  # gSDE's mean is clipped to [-2, 2] before the tanh (Stable-Baselines3's SAC clip_mean)


class SDESquashedActor(nn.Module):
    """gSDE's actor: the Gaussian's mean (clipped to [-2, 2]), the log standard deviations ``[N, size]`` its
    variance gives, the features ``h [N, features]`` and ``sigma [features, size]`` (module docstring)."""

    action_size: int
    hidden_sizes: Sequence[int]
    log_std_init: float = -3.0

    @nn.compact
    def __call__(self, x):
        h = MLP(self.hidden_sizes, "relu")(x)
        mean = jnp.clip(nn.Dense(self.action_size)(h), -SDE_CLIP_MEAN, SDE_CLIP_MEAN)
        shape = (h.shape[-1], self.action_size)
        sigma = jnp.exp(self.param("log_std", nn.initializers.constant(self.log_std_init), shape))
        log_std = sde_log_std(h, sigma)
        return mean, log_std, h, sigma


def squashed_log_prob(u, mean, log_std):
    """The log-density of ``tanh(u)`` for ``u ~ N(mean, exp(log_std))`` (see :func:`squashed_sample`)."""
    gaussian = -0.5 * jnp.square((u - mean) * jnp.exp(-log_std)) - log_std - 0.5 * jnp.log(2 * jnp.pi)
    correction = 2.0 * (jnp.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return jnp.sum(gaussian - correction, axis=-1)


def squashed_sample(mean, log_std, key):
    """``(action, log_prob)``: ``tanh(u)`` with ``u ~ N(mean, exp(log_std))``, and its log-density (the Gaussian's at
    ``u`` minus ``sum log(1 - tanh(u)^2)``, written stably as ``2 (log 2 - u - softplus(-2 u))``)."""
    u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
    return jnp.tanh(u), squashed_log_prob(u, mean, log_std)


def make_sac(spec: EnvSpec, config: SACConfig = SACConfig(), run: RunFacts | None = None) -> Agent:
    """SAC; see the module docstring."""
    require_actions(spec, "sac", "continuous")
    if isinstance(spec.observation, dict) or len(spec.observation.shape) == 3:
        raise ValueError("--agent sac takes vector observations; this environment's are images or structured.")
    size = action_size(spec)
    sde = config.network.policy_std == "sde"
    hidden = tuple(config.network.hidden_sizes)
    actor = SDESquashedActor(size, hidden, config.network.log_std_init) if sde else SquashedGaussianActor(size, hidden)
    critic = TwinCritic(hidden)
    actor, critic = in_compute_dtype(actor, run), in_compute_dtype(critic, run)
    target_entropy = -config.target_entropy_scale * size
    obs_rank = len(spec.observation.shape)

    def flatten(observation):
        batch_shape = observation.shape[: observation.ndim - obs_rank]
        return jnp.reshape(observation, (math.prod(batch_shape), -1)).astype(jnp.float32), batch_shape

    counted = config.random_steps > 0

    def init(key, observation):
        x, _ = flatten(observation)
        actor_key, critic_key = jax.random.split(key)
        params = {
            "actor": actor.init(actor_key, x),
            "critic": critic.init(critic_key, x, jnp.zeros((x.shape[0], size))),
            "log_alpha": jnp.log(jnp.asarray(config.initial_alpha, jnp.float32)),
        }
        return with_env_step_clock(params) if counted else params  # --random-steps' clock

    sde_schedule = sde_draws(config.network.sde_sample_freq, run)

    def initial_state(batch):
        return (jnp.zeros((batch, hidden[-1], size), jnp.float32), jnp.zeros((batch,), jnp.int32)) if sde else ()

    def act(params, observation, key, state, first):
        x, batch_shape = flatten(observation)
        sample_key, random_key = jax.random.split(key) if counted else (key, None)
        if sde:  # each environment's matrix eps, held between draws (module docstring)
            eps, steps = state
            draw = sde_schedule(steps)
            eps = jnp.where(draw[:, None, None], jax.random.normal(sample_key, eps.shape, eps.dtype), eps)
            mean, _, h, sigma = actor.apply(params["actor"], x)
            action, state = jnp.tanh(mean + jnp.einsum("bj,bjk->bk", h, sigma * eps)), (eps, steps + 1)
        else:
            mean, log_std = actor.apply(params["actor"], x)
            action, _ = squashed_sample(mean, log_std, sample_key)
        if counted:
            action = uniform_until(params, action, random_key, config.random_steps)
        return action.reshape(*batch_shape, size), {"greedy": jnp.tanh(mean).reshape(*batch_shape, size)}, state

    def make_items(trajectory: Trajectory):
        return transition_items(trajectory, 1, config.discount)

    def loss(params, target_params, batch, weights, key):
        del weights  # uniform replay
        next_key, pi_key = jax.random.split(key)
        x, _ = flatten(batch["observation"])
        x_next, _ = flatten(batch["next_observation"])
        valid = batch["valid"].astype(jnp.float32)
        alpha = jnp.exp(params["log_alpha"])
        sg = jax.lax.stop_gradient
        # One actor pass over o_t and o_{t+1}; the o_{t+1} half only feeds the critics' targets (no gradient).
        size = x.shape[0]
        if sde:  # one matrix eps for the gradient step: u = mean + h @ (sigma * eps), current and next alike
            mean, log_std, h, sigma = actor.apply(params["actor"], jnp.concatenate([x, x_next]))
            u = mean + h @ (sigma * jax.random.normal(next_key, sigma.shape, sigma.dtype))
            log_probs = squashed_log_prob(u, mean, log_std)
            next_action, next_log_prob = sg(jnp.tanh(u[size:])), sg(log_probs[size:])
        else:
            mean, log_std = actor.apply(params["actor"], jnp.concatenate([x, x_next]))
            next_action, next_log_prob = squashed_sample(sg(mean[size:]), sg(log_std[size:]), next_key)
        # Critics: soft Bellman targets from the target critics and the current actor.
        q_next = jnp.min(critic.apply(target_params["critic"], x_next, next_action), axis=0)
        target = sg(batch["reward"] + batch["discount"] * (q_next - sg(alpha) * next_log_prob))
        q = critic.apply(params["critic"], x, batch["action"])
        critic_loss = jnp.mean(valid * jnp.sum(jnp.square(q - target[None]), axis=0)) * 0.5
        # Actor: the reparameterized action against the critics, held fixed.
        if sde:
            action, log_prob = jnp.tanh(u[:size]), log_probs[:size]
        else:
            action, log_prob = squashed_sample(mean[:size], log_std[:size], pi_key)
        q_pi = jnp.min(critic.apply(sg(params["critic"]), x, action), axis=0)
        actor_loss = jnp.mean(valid * (sg(alpha) * log_prob - q_pi))
        # Temperature: towards the target entropy.
        alpha_loss = (
            -jnp.mean(valid * params["log_alpha"] * sg(log_prob + target_entropy)) if config.tune_alpha else 0.0
        )
        total = critic_loss + actor_loss + alpha_loss
        metrics = {
            "loss": total,
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "alpha": alpha,
            "entropy": -jnp.mean(valid * log_prob),
            "q_value": jnp.mean(valid * q[0]),
        }
        return total, (metrics, jnp.zeros_like(valid))

    replay = ReplaySpec(
        make_items=make_items,
        loss=loss,
        capacity=config.replay_capacity,
        batch_size=config.batch_size,
        replay_ratio=config.replay_ratio,
        min_size=config.min_replay_size,
        prioritized=False,
        target_tau=config.target_tau,
    )
    return Agent(
        init=init,
        act=act,
        loss=None,
        replay=replay,
        initial_state=initial_state,
        observe=count_env_steps if counted else None,
        optimizer=make_sac_optimizer(config, run),
    )


def make_sac_optimizer(config: SACConfig, run: RunFacts | None = None) -> optax.GradientTransformation:
    """Adam on two parameter groups: the actor and critics with ``config.optimizer``, the temperature
    (``log_alpha``) with ``--alpha-learning-rate`` (default ``--learning-rate``), the same schedule and no clip; with
    ``--critic-learning-rate``, a third: the critics at that rate, the same schedule and clip (without it, the state
    keeps the two groups' layout that runs saved before the flag)."""
    steps = functools.partial(replay_steps, run, config.replay_ratio, config.min_replay_size, config.batch_size)
    settings = config.optimizer
    alpha_rate = settings.learning_rate if config.alpha_learning_rate is None else config.alpha_learning_rate
    temperature = dataclasses.replace(settings, learning_rate=alpha_rate, max_grad_norm=None)
    groups = {"networks": optimizer_of(settings, steps), "temperature": optimizer_of(temperature, steps)}
    if config.critic_learning_rate is not None:
        groups["critic"] = optimizer_of(dataclasses.replace(settings, learning_rate=config.critic_learning_rate), steps)

    def labels(params):  # by path, whatever wraps the tree (normalisation's statistics join the networks' group)
        def label(path, _):
            keys = [getattr(k, "key", None) for k in path]
            if "log_alpha" in keys:
                return "temperature"
            return "critic" if "critic" in groups and "critic" in keys else "networks"

        return jax.tree_util.tree_map_with_path(label, params)

    return optax.multi_transform(groups, labels)
