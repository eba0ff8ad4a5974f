"""DQN family: double Q-learning (``--no-double-q``: DQN's max) with n-step returns, a target network and prioritized
replay.

Actors are epsilon-greedy with an Ape-X ladder over the environments of a batch:
environment ``i`` of ``N`` explores with ``epsilon ** (1 + alpha * i / (N - 1))``, so
one batch holds actors from eager explorers (0.4) to nearly greedy ones. The learner
(:func:`podracer.core.learner.make_learner_step`, which sees ``agent.replay``) stores the
n-step transitions of every trajectory it receives, then samples and learns from
them as often as the replay ratio allows.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import jax
import jax.numpy as jnp

from podracer.core.precision import in_compute_dtype
from podracer.core.agents.hyperparameters import Configurable, check_hyperparameters
from podracer.core.agents.base import Agent, require_actions
from podracer.core.agents.losses import mask_logits
from podracer.core.agents.qlearning import (
    check_replay_sizes,
    count_env_steps,
    epsilon_greedy,
    linear_epsilon,
    make_q_network,
    q_learning_td,
    replay_spec,
    transition_items,
    with_env_step_clock,
)
from podracer.core.networks import NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_of, optimizer_field, replay_steps
from podracer.core.types import RunFacts, EnvSpec, Trajectory

EPSILON_SCHEDULES = ("ladder", "linear")


@dataclasses.dataclass(frozen=True)
class DQNConfig(Configurable):
    """Double Q-learning with n-step returns, a target network and prioritized replay."""

    # --learning-rate, --max-grad-norm, --lr-schedule, --lr-warmup-steps, --lr-end, --lr-decay-steps, --update-rule
    optimizer: OptimizerConfig = optimizer_field(learning_rate=1e-3, max_grad_norm=10.0)
    discount: float = 0.99  # discount gamma
    n_step: int = 3  # bootstrapped returns over up to n steps (fewer at episode and trajectory ends)
    # ladder: Ape-X's fixed rates over the environments (--epsilon, --epsilon-alpha); linear: every environment's
    # epsilon decays from --epsilon-start to --epsilon-end over --epsilon-fraction of the run's env steps, then stays
    epsilon_schedule: Literal["ladder", "linear"] = "ladder"
    epsilon: float = 0.4  # Ape-X ladder: the most exploring actor's epsilon ...
    epsilon_alpha: float = 7.0  # ... and the ladder's exponent range
    epsilon_start: float = 1.0  # linear schedule: epsilon at the run's start ...
    epsilon_end: float = 0.05  # ... after --epsilon-fraction of the run ...
    epsilon_fraction: float = 0.5  # ... the share of the run's env steps the decay takes
    huber_delta: float = 1.0  # Huber loss threshold
    # double Q-learning: the online network picks the bootstrap action, the target network values it; off: the target
    # network's max (DQN of Mnih et al. 2015, PureJaxRL's dqn.py), one forward pass fewer per gradient step
    double_q: bool = True
    replay_capacity: int = 100_000  # items per replay shard (one shard per learner device)
    batch_size: int = 128  # items per gradient step, per learner device
    replay_ratio: float = 1.0  # items learned from per item inserted, held by a rate limiter
    min_replay_size: int = 1_000  # items inserted before learning starts (per shard)
    prioritized: bool = True  # prioritized replay (a sum tree); uniform otherwise
    priority_exponent: float = 0.6  # prioritized replay alpha
    importance_exponent: float = 0.4  # prioritized replay beta
    target_period: int = 100  # gradient steps between copies of the online network to the target
    target_tau: float | None = None  # Polyak averaging each step instead of periodic copies
    # --hidden-sizes, --torso
    network: NetworkConfig = network_field(("hidden_sizes", "torso"), activation="relu")

    def __post_init__(self):
        check_hyperparameters(self)
        check_replay_sizes(self)
        if self.epsilon_schedule not in EPSILON_SCHEDULES:
            raise ValueError(
                f"--epsilon-schedule: unknown schedule {self.epsilon_schedule!r}; choose one of "
                f"{', '.join(EPSILON_SCHEDULES)}."
            )


def make_dqn(spec: EnvSpec, config: DQNConfig = DQNConfig(), run: RunFacts | None = None) -> Agent:
    """Double DQN with n-step returns and (prioritized) replay; see the module docstring."""
    import rlax  # here, not at import: rlax pulls in distrax and TensorFlow Probability (0.5 s)

    require_actions(spec, "dqn", "discrete")
    network = in_compute_dtype(make_q_network(spec, config.network), run)

    linear = config.epsilon_schedule == "linear"
    if linear and run is None:
        raise ValueError(
            "--epsilon-schedule linear decays over the run's env steps: make the agent with the run's "
            "facts, agents.make(config, spec, run=RunFacts(...)) (the command lines do)."
        )

    def init(key, observation):
        params = network.init(key, observation)
        return with_env_step_clock({"network": params}) if linear else params  # the linear schedule's clock

    def q_network(params):
        return params["network"] if linear else params

    def act(params, observation, key, state, first, action_mask=None):
        q_values = network.apply(q_network(params), observation)
        rates = None
        if linear:
            rates = linear_epsilon(
                params["env_steps"],
                config.epsilon_start,
                config.epsilon_end,
                config.epsilon_fraction * run.total_env_steps,
            )
        action = epsilon_greedy(q_values, key, config.epsilon, config.epsilon_alpha, action_mask, rates)
        return action, {"q_values": mask_logits(q_values, action_mask)}, state

    def make_items(trajectory: Trajectory):
        return transition_items(trajectory, config.n_step, config.discount)

    def loss(params, target_params, batch, weights, key):
        del key
        size = batch["action"].shape[0]
        q_t_target = network.apply(q_network(target_params), batch["next_observation"])
        if config.double_q:
            both = jnp.concatenate([batch["observation"], batch["next_observation"]])
            q_both = network.apply(q_network(params), both)  # one pass over o_t and o_{t+n}
            q_tm1, q_t_select = q_both[:size], q_both[size:]
        else:
            q_tm1, q_t_select = network.apply(q_network(params), batch["observation"]), q_t_target
        a_tm1 = batch["action"].astype(jnp.int32)
        td = q_learning_td(
            q_tm1, a_tm1, batch["reward"], batch["discount"], q_t_target, q_t_select, batch.get("next_action_mask")
        )
        q_a = jnp.take_along_axis(q_tm1, a_tm1[:, None], axis=-1)[:, 0]
        valid = batch["valid"].astype(jnp.float32)
        abs_td = jnp.abs(td) * valid
        # The three batch means as one reduction (XLA:CPU runs each reduction of a batch as a thunk of its own).
        total, q_value, mean_abs_td = jnp.mean(
            jnp.stack([weights * valid * rlax.huber_loss(td, config.huber_delta), q_a, abs_td]), axis=1
        )
        metrics = {"loss": total, "q_value": jax.lax.stop_gradient(q_value), "abs_td": mean_abs_td}
        return total, (metrics, abs_td)

    steps = functools.partial(replay_steps, run, config.replay_ratio, config.min_replay_size, config.batch_size)
    return Agent(
        init=init,
        act=act,
        loss=None,
        replay=replay_spec(config, make_items, loss),
        observe=count_env_steps if linear else None,
        optimizer=optimizer_of(config.optimizer, steps),
    )
