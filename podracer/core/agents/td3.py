"""TD3 (Fujimoto et al., 2018), and the options of its massively parallel form, FastTD3 (Seo et al., 2025).

Continuous actions only. The actor is deterministic: ``tanh`` of an MLP (its last layer drawn with a standard
deviation of 0.01, as FastTD3's, so that it starts near the box's centre), acting in (-1, 1) per entry, which the
environment wrappers rescale to the action bounds (:func:`podracer.core.envs.base.to_box`). Acting adds Gaussian noise,
clipped to the box: environment ``i`` of a batch of ``N`` explores with the standard deviation
``--exploration-noise-min + i / (N - 1) x (--exploration-noise-max - --exploration-noise-min)``, a fixed ladder over
the batch as DQN's Ape-X epsilons (TD3: one scale, 0.1, both flags equal; FastTD3 draws each environment's scale
uniformly between the two and redraws it when its episode ends: the ladder holds the same spread of scales at every
step, with no state to carry).
``--random-steps N`` acts uniformly at random for the run's first N env steps, as Stable-Baselines3's and CleanRL's
``learning_starts`` do.

The critics are twin Q networks on ``concat(observation, action)``, either scalar (``--num-atoms 1``: TD3's squared
error) or categorical over ``--num-atoms`` atoms spread evenly on ``[--v-min, --v-max]`` (C51's cross-entropy with
the target distribution projected onto the support by C51's projection, ``losses.categorical_projection``; FastTD3's
critic, 101 atoms). Their targets bootstrap from the target critics (Polyak-averaged, ``--target-tau``) at the next
action of the target actor (``--no-target-actor``: the online actor's, as FastTD3), smoothed with clipped Gaussian noise
(``--target-noise``, ``--target-noise-clip``). Clipped double Q (``--clipped-double-q``, on by default): both critics
learn the target of the critic whose target value is lower (a categorical critic: its whole distribution), and the
actor climbs the lower of the two values; off, each critic learns its own target and the actor climbs their mean.
``--num-critics 1`` keeps one critic: with ``--policy-delay 1 --target-noise 0`` it is DDPG (Lillicrap et al., 2016)
as Stable-Baselines3 writes it, TD3 with one critic, no delay and no target smoothing.

The actor is delayed: its Adam steps once every ``--policy-delay`` gradient steps (the second of each pair by
default), its state untouched in between (``optax.transforms.conditionally_mask``); the critics step every time.
One parameter tree holds the actor and both critics; one loss sums the critic and actor terms, each seeing the other's
parameters through ``stop_gradient``, so that Adam takes exactly the separate updates. The learner is the replay
learner that DQN and SAC use (:func:`podracer.core.learner.make_replay_learner_step`): with many environments and a
large batch (``--num-envs``, ``--batch-size``, ``--replay-ratio``) it is FastTD3's recipe in both modes.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.base import Agent, ReplaySpec, action_size, require_actions
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.losses import categorical_projection
from podracer.core.agents.qlearning import (
    check_replay_sizes,
    count_env_steps,
    transition_items,
    uniform_until,
    with_env_step_clock,
)
from podracer.core.agents.sac import TwinCritic
from podracer.core.networks import MLP, NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_field, optimizer_of, replay_steps
from podracer.core.types import EnvSpec, RunFacts, Trajectory

ACTOR_INIT_SCALE = 0.01  # the standard deviation of the actor's last layer at initialisation (FastTD3's init_scale)


@dataclasses.dataclass(frozen=True)
class TD3Config(Configurable):
    """TD3: a deterministic actor, twin critics (scalar or categorical), a delayed actor and smoothed targets."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=3e-4, max_grad_norm=None)
    discount: float = 0.99  # discount gamma
    n_step: int = 1  # bootstrapped returns over up to n steps (fewer at episode and trajectory ends)
    policy_delay: int = 2  # the actor steps once every this many gradient steps (the critics at every one)
    exploration_noise_min: float = 0.1  # the acting noise's standard deviation, in the unit box: a ladder over ...
    exploration_noise_max: float = 0.1  # ... the batch's environments, from min to max
    # uniformly random actions for the run's first this many env steps (all environments together; its replay learns
    # from them): Stable-Baselines3's and CleanRL's learning_starts; 0: the actor acts from the start
    random_steps: int = 0
    target_noise: float = 0.2  # target policy smoothing: the standard deviation of the next action's noise ...
    target_noise_clip: float = 0.5  # ... clipped to this
    clipped_double_q: bool = True  # the lower critic's target and value; off: each critic its own, their mean
    num_critics: int = 2  # TD3's twin critics; 1: one critic (DDPG, with --policy-delay 1 --target-noise 0)
    target_actor: bool = True  # the next action from the Polyak-averaged actor; off: from the online actor
    num_atoms: int = 1  # 1: scalar critics; more: categorical critics over that many atoms on [--v-min, --v-max]
    v_min: float = -250.0  # the categorical critics' support: its lowest value ...
    v_max: float = 250.0  # ... and its highest
    replay_capacity: int = 100_000  # items per replay shard (one shard per learner device)
    batch_size: int = 256  # items per gradient step, per learner device
    replay_ratio: float = 32.0  # items learned from per item inserted, held by a rate limiter
    min_replay_size: int = 1_000  # items inserted before learning starts (per shard)
    target_tau: float = 0.005  # Polyak averaging of the target networks, each gradient step
    # --hidden-sizes (the actor's and each critic's)
    network: NetworkConfig = network_field(("hidden_sizes",), hidden_sizes=(256, 256), activation="relu")

    def __post_init__(self):
        check_hyperparameters(self)
        check_replay_sizes(self)
        if not self.exploration_noise_min <= self.exploration_noise_max:
            raise ValueError(
                "Need --exploration-noise-min <= --exploration-noise-max, got "
                f"{self.exploration_noise_min} and {self.exploration_noise_max}."
            )
        if self.num_critics not in (1, 2):
            raise ValueError(f"--num-critics must be 1 or 2, got {self.num_critics}.")
        if self.num_critics == 1 and not self.clipped_double_q:
            raise ValueError(
                "--no-clipped-double-q chooses between two critics' targets (the lower, or each its own); "
                "--num-critics 1 has one: drop one of the two flags."
            )
        if self.num_atoms == 2 or (self.num_atoms > 1 and not self.v_min < self.v_max):
            raise ValueError(
                f"--num-atoms 1 (scalar critics) or >= 3 with --v-min < --v-max, got {self.num_atoms} on "
                f"[{self.v_min}, {self.v_max}]."
            )


class DeterministicActor(nn.Module):
    """``tanh`` of an MLP of the flattened observations: one action in (-1, 1) per entry."""

    action_size: int
    hidden_sizes: tuple[int, ...]

    @nn.compact
    def __call__(self, x):
        h = MLP(self.hidden_sizes, "relu")(x)
        head = nn.Dense(self.action_size, kernel_init=nn.initializers.normal(ACTOR_INIT_SCALE))
        return jnp.tanh(head(h))


def noise_ladder(num_actors: int, low: float, high: float) -> jax.Array:
    """The acting noise's standard deviations ``[num_actors]``: evenly from ``low`` to ``high`` over the batch."""
    return jnp.linspace(low, high, num_actors, dtype=jnp.float32) if num_actors > 1 else jnp.full((1,), low)


def make_td3(spec: EnvSpec, config: TD3Config = TD3Config(), run: RunFacts | None = None) -> Agent:
    """TD3; see the module docstring."""
    require_actions(spec, "td3", "continuous")
    if isinstance(spec.observation, dict) or len(spec.observation.shape) == 3:
        raise ValueError("--agent td3 takes vector observations; this environment's are images or structured.")
    size = action_size(spec)
    hidden = tuple(config.network.hidden_sizes)
    actor = DeterministicActor(size, hidden)
    critic = TwinCritic(hidden, outputs=config.num_atoms, num=config.num_critics)
    actor, critic = in_compute_dtype(actor, run), in_compute_dtype(critic, run)
    twin = config.num_critics == 2
    categorical = config.num_atoms > 1
    atoms = jnp.linspace(config.v_min, config.v_max, config.num_atoms, dtype=jnp.float32) if categorical else None
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
        }
        return with_env_step_clock(params) if counted else params  # --random-steps' clock

    def act(params, observation, key, state, first):
        x, batch_shape = flatten(observation)
        mean = actor.apply(params["actor"], x)
        noise_key, random_key = jax.random.split(key)
        scale = noise_ladder(x.shape[0], config.exploration_noise_min, config.exploration_noise_max)
        action = jnp.clip(mean + scale[:, None] * jax.random.normal(noise_key, mean.shape), -1.0, 1.0)
        if counted:
            action = uniform_until(params, action, random_key, config.random_steps)
        return action.reshape(*batch_shape, size), {"greedy": mean.reshape(*batch_shape, size)}, state

    def make_items(trajectory: Trajectory):
        return transition_items(trajectory, config.n_step, config.discount)

    def values(output):
        """The critics' values ``[C, N]`` of their outputs (scalars, or logits ``[C, N, atoms]``)."""
        return jnp.sum(jax.nn.softmax(output) * atoms, axis=-1) if categorical else output

    def loss(params, target_params, batch, weights, key):
        del weights  # uniform replay
        sg = jax.lax.stop_gradient
        x, _ = flatten(batch["observation"])
        x_next, _ = flatten(batch["next_observation"])
        valid = batch["valid"].astype(jnp.float32)
        n = x.shape[0]
        # The actor's pass: over o_t (the actor's term) and, without a target actor, o_{t+1} (the targets') at once.
        if config.target_actor:
            pi = actor.apply(params["actor"], x)
            next_mean = actor.apply(target_params["actor"], x_next)
        else:
            both = actor.apply(params["actor"], jnp.concatenate([x, x_next]))
            pi, next_mean = both[:n], sg(both[n:])
        # Critics: targets at the smoothed next action, from the target critics.
        noise = jnp.clip(
            config.target_noise * jax.random.normal(key, next_mean.shape),
            -config.target_noise_clip,
            config.target_noise_clip,
        )
        next_action = jnp.clip(next_mean + noise, -1.0, 1.0)
        next_output = sg(critic.apply(target_params["critic"], x_next, next_action))  # [C, N] or [C, N, atoms]
        next_values = values(next_output)
        if config.clipped_double_q and twin:  # both learn the lower one's target (a categorical one's distribution)
            first_lower = next_values[0] <= next_values[1]  # [N]: the first critic's target value is the lower
            first_lower = first_lower[:, None] if categorical else first_lower
            next_output = jnp.broadcast_to(jnp.where(first_lower, next_output[0], next_output[1]), next_output.shape)
        output = critic.apply(params["critic"], x, batch["action"])
        if categorical:
            # C51: the target distribution on r + discount z, projected onto the support z, per item and critic (the
            # lower critic's distribution once, when both learn it)
            shifted = batch["reward"][:, None] + batch["discount"][:, None] * atoms[None]  # [N, atoms]
            targets = next_output[:1] if config.clipped_double_q else next_output
            shifted = jnp.broadcast_to(shifted, targets.shape)
            projected = categorical_projection(shifted, jax.nn.softmax(targets), config.v_min, config.v_max)
            projected = jnp.broadcast_to(projected, next_output.shape)  # [C, N, atoms]
            errors = -jnp.sum(sg(projected) * jax.nn.log_softmax(output), axis=-1)  # cross-entropy [C, N]
        else:
            target = batch["reward"][None] + batch["discount"][None] * next_output
            errors = jnp.square(output - target)
        critic_loss = jnp.mean(valid * jnp.sum(errors, axis=0))
        # Actor: the lower (or the mean) of the critics' values at its action, the critics held fixed.
        q_pi = values(critic.apply(sg(params["critic"]), x, pi))
        q_pi = jnp.min(q_pi, axis=0) if config.clipped_double_q else jnp.mean(q_pi, axis=0)
        actor_loss = -jnp.mean(valid * q_pi)
        total = critic_loss + actor_loss
        metrics = {
            "loss": total,
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "q_value": jnp.mean(valid * values(output)[0]),
            "target_q_value": jnp.mean(valid * jnp.min(next_values, axis=0)),
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
        observe=count_env_steps if counted else None,
        optimizer=make_td3_optimizer(config, run),
    )


def make_td3_optimizer(config: TD3Config, run: RunFacts | None = None) -> optax.GradientTransformation:
    """``config.optimizer`` on two parameter groups: the critics (and anything else: normalisation's statistics,
    which receive no gradient) at every gradient step, the actor at every ``--policy-delay``-th, its state (the Adam
    moments, the schedule's count) untouched in between."""
    steps = functools.partial(replay_steps, run, config.replay_ratio, config.min_replay_size, config.batch_size)
    delay = config.policy_delay

    def actor_steps():
        total = steps()
        return None if total is None else max(1, total // delay)

    actor = optax.transforms.conditionally_mask(
        optimizer_of(config.optimizer, actor_steps), lambda count: (count + 1) % delay == 0
    )

    def labels(params):  # by path, whatever wraps the tree
        def label(path, _):
            return "actor" if any(getattr(k, "key", None) == "actor" for k in path) else "critic"

        return jax.tree_util.tree_map_with_path(label, params)

    return optax.multi_transform({"critic": optimizer_of(config.optimizer, steps), "actor": actor}, labels)


__all__ = ["ACTOR_INIT_SCALE", "DeterministicActor", "TD3Config", "make_td3", "make_td3_optimizer", "noise_ladder"]
