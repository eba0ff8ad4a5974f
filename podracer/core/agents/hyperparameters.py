"""Agent configs' shared habits: the flag of every field, the checks every config makes by field name (each failure
a one-line error naming the flag), and the hyper-parameters by flag name, nested optimizer settings included."""

from __future__ import annotations

import copy
import dataclasses
import math

from podracer.core.networks import (
    CORES,
    KERNEL_INITS,
    POLICY_STDS,
    POLICY_UNITS,
    TORSOS,
    CoreName,
    check_fixed,
    settable,
)
from podracer.core.optim import LR_SCHEDULES, UPDATE_RULES

# How every agent config's fields are checked, by field name; each failure is a ValueError naming the flag.
_AT_LEAST_ONE = (
    "n_step",
    "core_size",
    "num_epochs",
    "num_minibatches",
    "replay_capacity",
    "batch_size",
    "min_replay_size",
    "target_period",
    "num_simulations",
    "max_num_considered_actions",
    "unroll_steps",
    "support_size",
    "latent_size",
    "policy_delay",
    "num_atoms",
)
_POSITIVE = (
    "reward_scale",
    "learning_rate",
    "max_grad_norm",
    "replay_ratio",
    "clip_epsilon",
    "clip_rho_threshold",
    "clip_pg_rho_threshold",
    "huber_delta",
    "value_rescaling_eps",
    "value_scale",
)
_NON_NEGATIVE = (
    "gumbel_scale",
    "entropy_coef",
    "value_coef",
    "reward_coef",
    "burn_in",
    "epsilon_alpha",
    "lr_warmup_steps",
    "exploration_noise_min",
    "exploration_noise_max",
    "target_noise",
    "target_noise_clip",
    "random_steps",
)
_UNIT_INTERVAL = (
    "discount",
    "td_lambda",
    "gae_lambda",
    "q_lambda",
    "epsilon",
    "eta",
    "priority_exponent",
    "importance_exponent",
    "epsilon_start",
    "epsilon_end",
    "epsilon_fraction",
    "random_move_prob",
)


def flag(name: str) -> str:
    """The command-line flag of config field ``name``."""
    return "--" + name.replace("_", "-")


def check_finite(config) -> None:
    """Every number of ``config`` (a dataclass) is finite: ``nan`` or ``inf`` is refused, naming the flag."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{flag(field.name)} must be a finite number, got {value}.")


def _groups(config) -> dict[str, tuple[object, tuple[str, ...]]]:
    """The nested settings groups of an agent config (its optimizer's, its network's), by field name, each with the
    names of its fields that are hyper-parameters (:func:`podracer.core.networks.settable`)."""
    out = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out[field.name] = (value, settable(field, value))
    return out


def hyperparameters(config) -> dict:
    """Every hyper-parameter of an agent config by its flag's name, the nested optimizer and network settings'
    included (``{"learning_rate": 3e-3, ..., "discount": 0.99, ..., "hidden_sizes": (64, 64), ...}``)."""
    groups, values = _groups(config), {}
    for field in dataclasses.fields(config):
        if field.name in groups:
            group, names = groups[field.name]
            values.update({name: getattr(group, name) for name in names})
        else:
            values[field.name] = getattr(config, field.name)
    return values


def with_hyperparameters(config, values, *, checked: bool = True):
    """``config`` with ``values`` (flag names, :func:`hyperparameters`) set, nested optimizer and network settings
    included; ``checked=False`` sets them without the configs' checks (traced values inside a compiled program)."""
    groups = _groups(config)
    own, inner = dict(values), {}
    for name, (_, names) in groups.items():
        inner[name] = {k: own.pop(k) for k in list(own) if k in names}
    if checked:
        parts = {name: dataclasses.replace(groups[name][0], **v) for name, v in inner.items() if v}
        return dataclasses.replace(config, **own, **parts)
    out = copy.copy(config)
    for name, value in own.items():
        object.__setattr__(out, name, value)
    for name, v in inner.items():
        if v:
            group = copy.copy(groups[name][0])
            for k, value in v.items():
                object.__setattr__(group, k, value)
            object.__setattr__(out, name, group)
    return out


class Configurable:
    """What every built-in agent config can do besides its fields: :meth:`replace` by flag name."""

    def replace(self, **values):
        """A copy with ``values`` set by flag name, nested optimizer settings included, each checked:
        ``PPOConfig().replace(learning_rate=1e-3, num_epochs=2)``."""
        return with_hyperparameters(self, values)


def check_hyperparameters(config) -> None:
    """The checks every agent config makes in ``__post_init__``, by field name (a field that is ``None``
    means "off" and is not checked): finite numbers, counts >= 1, rates and thresholds > 0, weights >= 0,
    probabilities and discounts in [0, 1], hidden sizes >= 1, a known torso and core."""
    check_finite(config)
    check_fixed(config)
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    for name, value in values.items():
        if value is None:
            continue
        if name in _AT_LEAST_ONE and value < 1:
            raise ValueError(f"{flag(name)} must be >= 1, got {value}.")
        if name in _POSITIVE and not value > 0:
            raise ValueError(f"{flag(name)} must be > 0, got {value}.")
        if name in _NON_NEGATIVE and value < 0:
            raise ValueError(f"{flag(name)} must be >= 0, got {value}.")
        if name in _UNIT_INTERVAL and not 0.0 <= value <= 1.0:
            raise ValueError(f"{flag(name)} must be in [0, 1], got {value}.")
    if "target_tau" in values and values["target_tau"] is not None and not 0.0 < values["target_tau"] <= 1.0:
        raise ValueError(f"--target-tau must be in (0, 1], got {values['target_tau']}.")
    if any(size < 1 for size in values.get("hidden_sizes", ())):
        raise ValueError(f"--hidden-sizes must all be >= 1, got {' '.join(map(str, values['hidden_sizes']))}.")
    if values.get("torso", "auto") not in TORSOS:
        raise ValueError(f"--torso: unknown torso {values['torso']!r}; choose one of {', '.join(TORSOS)}.")
    if values.get("lr_schedule", "constant") not in LR_SCHEDULES:
        raise ValueError(
            f"--lr-schedule: unknown schedule {values['lr_schedule']!r}; choose one of {', '.join(LR_SCHEDULES)}."
        )
    if values.get("update_rule", "adam") not in UPDATE_RULES:
        raise ValueError(
            f"--update-rule: unknown rule {values['update_rule']!r}; choose one of {', '.join(UPDATE_RULES)}."
        )
    if values.get("policy_std", "parameter") not in POLICY_STDS:
        raise ValueError(
            f"--policy-std: unknown choice {values['policy_std']!r}; choose one of {', '.join(POLICY_STDS)}."
        )
    if values.get("policy_units", "unit") not in POLICY_UNITS:
        raise ValueError(
            f"--policy-units: unknown choice {values['policy_units']!r}; choose one of {', '.join(POLICY_UNITS)}."
        )
    if values.get("kernel_init", "orthogonal") not in KERNEL_INITS:
        raise ValueError(
            f"--kernel-init: unknown initializer {values['kernel_init']!r}; choose one of {', '.join(KERNEL_INITS)}."
        )
    if values.get("core", "none") not in CORES:
        raise ValueError(f"--core: unknown core {values['core']!r}; choose one of {', '.join(CORES)}.")


__all__ = [
    "CORES",
    "Configurable",
    "CoreName",
    "check_finite",
    "check_hyperparameters",
    "flag",
    "hyperparameters",
    "with_hyperparameters",
]
