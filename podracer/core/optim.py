"""How an agent's parameters are optimised: its optimizer settings, the run's facts, and the one optax builder.

Every agent config nests an :class:`OptimizerConfig` (``PPOConfig(optimizer=OptimizerConfig(learning_rate=1e-3))``;
on the command line the flags keep their plain names, ``--learning-rate``). An agent factory receives the run's
facts (:class:`~podracer.core.types.RunFacts`: its updates, env steps, batch per learner device) and returns an
:class:`~podracer.core.agents.base.Agent` whose ``optimizer`` is built here, so training, resuming, evaluation and
preview restore the same optimizer state. The learning rate and the clip norm are injected hyper-parameters
(``optax.inject_hyperparams``): traceable values kept in the optimizer state, which a sweep or a population
may set inside the compiled program.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
import optax

from podracer.core.types import RunFacts

LR_SCHEDULES = ("constant", "linear", "cosine")
LRScheduleName = Literal[LR_SCHEDULES]  # learning-rate schedules (learning_rate_schedule)
UPDATE_RULES = ("adam", "rmsprop")
UpdateRuleName = Literal[UPDATE_RULES]  # the optimizer's update rules (--update-rule)
# OptimizerConfig's, flat in flags
FIELDS = (
    "learning_rate",
    "max_grad_norm",
    "lr_schedule",
    "lr_warmup_steps",
    "lr_end",
    "lr_decay_steps",
    "update_rule",
)
ADAM_EPS = 1e-5
RMSPROP_DECAY = 0.99  # PyTorch's RMSprop alpha, which Stable-Baselines3's A2C keeps


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """Adam (or RMSprop) after global-norm clipping, with a learning-rate schedule over the run's optimizer steps."""

    learning_rate: float = 3e-4  # Adam learning rate
    max_grad_norm: float | None = 0.5  # global gradient-norm clip; None: none
    # the learning rate over the run's optimizer steps: constant, or a linear or cosine decay to 0
    lr_schedule: LRScheduleName = "constant"
    lr_warmup_steps: int = 0  # optimizer steps of linear warm-up to --learning-rate before the schedule
    lr_end: float = 0.0  # the rate a linear or cosine schedule decays to, and keeps after its decay
    # optimizer steps a linear or cosine decay takes after the warm-up; None: the rest of the run
    lr_decay_steps: int | None = None
    # adam; or rmsprop, PyTorch's (decay 0.99, eps 1e-5 outside the root, no momentum), Stable-Baselines3's A2C's
    update_rule: UpdateRuleName = "adam"

    def __post_init__(self):
        for name in ("learning_rate", "max_grad_norm"):
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"--{name.replace('_', '-')} must be a finite number, got {value}.")
            if isinstance(value, int | float) and not value > 0:
                raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {value}.")
        if isinstance(self.lr_warmup_steps, int) and self.lr_warmup_steps < 0:
            raise ValueError(f"--lr-warmup-steps must be >= 0, got {self.lr_warmup_steps}.")
        if isinstance(self.lr_decay_steps, int) and self.lr_decay_steps < 1:
            raise ValueError(f"--lr-decay-steps must be >= 1, got {self.lr_decay_steps}.")
        if isinstance(self.lr_end, int | float) and not (math.isfinite(self.lr_end) and self.lr_end >= 0):
            raise ValueError(f"--lr-end must be a finite number >= 0, got {self.lr_end}.")
        if isinstance(self.lr_end, int | float) and isinstance(self.learning_rate, int | float):
            if self.lr_end > self.learning_rate:
                raise ValueError(f"--lr-end ({self.lr_end}) must not exceed --learning-rate ({self.learning_rate}).")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(
                f"--lr-schedule: unknown schedule {self.lr_schedule!r}; choose one of {', '.join(LR_SCHEDULES)}."
            )
        if self.update_rule not in UPDATE_RULES:
            raise ValueError(
                f"--update-rule: unknown rule {self.update_rule!r}; choose one of {', '.join(UPDATE_RULES)}."
            )


def optimizer_field(learning_rate: float, max_grad_norm: float | None, **others):
    """An agent config's ``optimizer`` field with the agent's own defaults (``others``: schedule, warm-up)."""
    return dataclasses.field(
        default=OptimizerConfig(learning_rate=learning_rate, max_grad_norm=max_grad_norm, **others)
    )


def learning_rate_schedule(
    learning_rate,
    schedule: str = "constant",
    warmup_steps=0,
    total_steps: int | None = None,
    end=0.0,
    decay_steps: int | None = None,
):
    """``count -> learning rate`` at optimizer step ``count`` (0 for the first update).

    A linear warm-up over the first ``warmup_steps`` steps (step ``c`` takes ``(c + 1) / warmup_steps`` of the
    rate, so no step is wasted at rate 0), then ``schedule``: "constant", or a decay to ``end`` (default 0),
    "linear" or "cosine" (half a cosine period), over ``decay_steps`` steps after the warm-up (None: until
    ``total_steps``), the rate staying at ``end`` after it (gymnax-blines' PPO: linear from 5e-3 to 5e-4 over
    its first 5 % of steps). ``learning_rate`` and ``warmup_steps`` may be traced values (a sweep's), so the
    arithmetic is ``jnp``'s.
    """
    if schedule not in LR_SCHEDULES:
        raise ValueError(f"--lr-schedule: unknown schedule {schedule!r}; choose one of {', '.join(LR_SCHEDULES)}.")
    if schedule != "constant" and total_steps is None and decay_steps is None:
        raise ValueError(f"--lr-schedule {schedule} decays over the run's optimizer steps: give total_steps.")

    if schedule == "constant" and isinstance(warmup_steps, int) and warmup_steps == 0:
        return lambda count: jnp.asarray(learning_rate, jnp.float32)  # nothing to count: no work per step

    def rate(count):
        count = jnp.asarray(count, jnp.float32)
        warmup = jnp.asarray(warmup_steps, jnp.float32)
        scale = jnp.where(warmup > 0, jnp.minimum(1.0, (count + 1.0) / jnp.maximum(warmup, 1.0)), 1.0)
        if schedule == "constant":
            return learning_rate * scale
        length = (
            jnp.maximum(total_steps - warmup, 1.0) if decay_steps is None else jnp.asarray(decay_steps, jnp.float32)
        )
        progress = jnp.clip((count - warmup) / length, 0.0, 1.0)
        left = 1.0 - progress if schedule == "linear" else 0.5 * (1.0 + jnp.cos(jnp.pi * progress))
        return scale * (end + (learning_rate - end) * left)

    return rate


def optimizer_of(
    settings: OptimizerConfig, total_steps: int | Callable[[], int | None] | None = None, *, eps: float = ADAM_EPS
) -> optax.GradientTransformation:
    """Adam (``settings.update_rule`` "adam", the default) or RMSprop ("rmsprop": PyTorch's, squares averaged with
    decay 0.99 from zero, ``eps`` added outside the square root, no momentum) after clipping to
    ``settings.max_grad_norm`` (None: no clip), its rate following :func:`learning_rate_schedule` over
    ``total_steps`` optimizer steps (always a schedule, so the state has one layout whatever the choice).
    ``learning_rate`` (and the clip norm) are injected hyper-parameters: the state's ``hyperparams`` hold them as
    arrays, read at every update. ``total_steps`` None (a run of unknown length: evaluation, preview) builds the
    same state layout with a one-step decay. ``total_steps`` may be a function that counts them, called only for a
    decaying schedule (a constant rate needs no count, and a sweep's traced settings cannot be counted in
    Python). The schedule is written here rather than taken from ``optax.schedules``: a sweep varies its rate and
    its length as traced values inside one program."""
    schedule, warmup = settings.lr_schedule, settings.lr_warmup_steps
    if callable(total_steps):
        total_steps = None if schedule == "constant" or settings.lr_decay_steps is not None else total_steps()
    steps = None if schedule == "constant" else (total_steps or 1)

    def chain(learning_rate, max_grad_norm=None):
        rate = learning_rate_schedule(learning_rate, schedule, warmup, steps, settings.lr_end, settings.lr_decay_steps)
        parts = [] if max_grad_norm is None else [optax.clip_by_global_norm(max_grad_norm)]
        if settings.update_rule == "rmsprop":
            rule = optax.scale_by_rms(decay=RMSPROP_DECAY, eps=eps, eps_in_sqrt=False)
        else:
            rule = optax.scale_by_adam(eps=eps)
        return optax.chain(*parts, rule, optax.scale_by_learning_rate(rate))

    hyper = {"learning_rate": settings.learning_rate}
    if settings.max_grad_norm is not None:
        hyper["max_grad_norm"] = settings.max_grad_norm
    return optax.inject_hyperparams(chain)(**hyper)


def adam(settings: OptimizerConfig, total_steps=None, *, eps: float = ADAM_EPS) -> optax.GradientTransformation:
    """The former name of :func:`optimizer_of`, which builds RMSprop too (``settings.update_rule``); kept so that
    code written against it runs."""
    return optimizer_of(settings, total_steps, eps=eps)


def hyperparameters(opt_state) -> dict:
    """The former name of :func:`injected_hyperparameters` (an agent config's are
    :func:`podracer.core.agents.hyperparameters.hyperparameters`); kept so that code written against it runs."""
    return injected_hyperparameters(opt_state)


def make_optimizer(
    learning_rate: float,
    max_grad_norm: float | None = 0.5,
    *,
    schedule: str = "constant",
    warmup_steps: int = 0,
    total_steps: int | None = None,
    end: float = 0.0,
    decay_steps: int | None = None,
    update_rule: str = "adam",
) -> optax.GradientTransformation:
    """:func:`adam` from its settings as arguments (a notebook's spelling): ``make_optimizer(3e-3, 0.5)``."""
    settings = OptimizerConfig(learning_rate, max_grad_norm, schedule, warmup_steps, end, decay_steps, update_rule)
    return optimizer_of(settings, total_steps)


def on_policy_steps(run: RunFacts | None, num_epochs: int, num_minibatches: int) -> int | None:
    """Optimizer steps of a run of an on-policy agent: ``num_epochs x num_minibatches`` per update (None: the run's
    length is unknown)."""
    return None if run is None else max(1, run.num_updates * num_epochs * num_minibatches)


def replay_steps(
    run: RunFacts | None, replay_ratio: float, min_size: int, batch_size: int, *, sequences: bool = False
) -> int | None:
    """Optimizer steps of a run of a replay agent: ``replay_ratio`` x the items each replay shard receives after its
    first ``min_size``, over ``batch_size``, as the rate limiter allows. A shard receives the transitions of its
    learner device's trajectories (``rollout_length x envs_per_learner`` per update), or with ``sequences`` one
    item per trajectory (``envs_per_learner``)."""
    if run is None:
        return None
    items_per_update = run.envs_per_learner * (1 if sequences else run.rollout_length)
    return max(1, math.ceil(replay_ratio * max(run.num_updates * items_per_update - min_size, 0) / batch_size))


def injected_hyperparameters(opt_state) -> dict:
    """The injected hyper-parameters of an optimizer state built by :func:`optimizer_of`
    (``{"learning_rate": ...}``), for every such state found in it (a multi-transform's groups: the first found per
    name)."""
    found = {}

    def visit(node):
        if isinstance(getattr(node, "hyperparams", None), dict):  # optax's Inject(Stateful)HyperparamsState
            for name, value in node.hyperparams.items():
                found.setdefault(name, value)
        elif isinstance(node, tuple | list):
            for child in node:
                visit(child)
        elif isinstance(node, dict):
            for child in node.values():
                visit(child)
        elif hasattr(node, "inner_states"):  # optax.multi_transform's state
            visit(node.inner_states)
        elif hasattr(node, "inner_state"):
            visit(node.inner_state)

    visit(opt_state)
    return found


def with_injected_hyperparameters(opt_state, values: dict):
    """``opt_state`` with the injected hyper-parameters that ``values`` names (``{"learning_rate": ...}``) set to
    its values, wherever they are held (see :func:`injected_hyperparameters`); names it does not hold are ignored.
    A population's lane that copies another's optimizer state takes its own new rate this way: the update reads the
    rate from the state, not from the optimizer it was built with."""

    def injected(node) -> bool:
        return isinstance(getattr(node, "hyperparams", None), dict)

    def set_values(node):
        if not injected(node):
            return node
        held = node.hyperparams
        return node._replace(
            hyperparams={
                name: jnp.asarray(values[name], jnp.asarray(v).dtype).reshape(jnp.shape(v)) if name in values else v
                for name, v in held.items()
            }
        )

    return jax.tree.map(set_values, opt_state, is_leaf=injected)


__all__ = [
    "ADAM_EPS",
    "FIELDS",
    "LR_SCHEDULES",
    "LRScheduleName",
    "RMSPROP_DECAY",
    "UPDATE_RULES",
    "UpdateRuleName",
    "OptimizerConfig",
    "RunFacts",
    "adam",
    "hyperparameters",
    "injected_hyperparameters",
    "learning_rate_schedule",
    "make_optimizer",
    "on_policy_steps",
    "optimizer_field",
    "optimizer_of",
    "replay_steps",
    "with_injected_hyperparameters",
]
