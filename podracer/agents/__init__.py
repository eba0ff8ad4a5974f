"""Agents: ``Agent(init, act, loss | replay)`` bundles that run unchanged in every mode."""

from __future__ import annotations

import dataclasses
import difflib

from podracer.agents.a2c import A2CConfig, make_a2c
from podracer.agents.base import (Agent, ReplaySpec, Transitions, make_network, no_state,
                                  make_policy_fns, make_recurrent_fns, masked_mean, policy_terms, transitions,
                                  unroll_trajectory)
from podracer.agents.dqn import DQNConfig, make_dqn
from podracer.agents.impala import IMPALAConfig, make_impala
from podracer.agents.ppo import PPOBatch, PPOConfig, make_ppo
from podracer.agents.r2d2 import R2D2Config, make_r2d2
from podracer.types import EnvSpec

_AGENTS = {
    "a2c": (make_a2c, A2CConfig),
    "dqn": (make_dqn, DQNConfig),
    "impala": (make_impala, IMPALAConfig),
    "ppo": (make_ppo, PPOConfig),
    "r2d2": (make_r2d2, R2D2Config),
}


def names() -> list[str]:
    """Names accepted by :func:`make`."""
    return sorted(_AGENTS)


def config_class(name: str):
    """The frozen config dataclass of the agent called ``name``."""
    if name not in _AGENTS:
        close = difflib.get_close_matches(name, list(_AGENTS), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"Unknown agent {name!r}; available: {', '.join(names())}.{hint}")
    return _AGENTS[name][1]


# Hyper-parameters that the command lines offer as flags defaulting to None ("the agent's");
# a flag that is set must be a field of the chosen agent's config.
FLAG_HYPERPARAMETERS = ("entropy_coef", "num_epochs", "num_minibatches", "replay_ratio", "replay_capacity",
                        "batch_size", "min_replay_size", "core", "core_size", "burn_in")


def select_hyperparameters(name: str, always: dict, if_set: dict) -> dict:
    """``always`` plus the entries of ``if_set`` that are not None, which must be fields of agent ``name``'s config.

    For command lines whose flags serve several agents: a flag set for an agent that
    has no such hyper-parameter is an error naming the flag.
    """
    fields = {f.name for f in dataclasses.fields(config_class(name))}
    hyper = dict(always)
    for key, value in if_set.items():
        if value is None:
            continue
        if key not in fields:
            raise ValueError(f"--{key.replace('_', '-')} does not apply to agent {name!r}.")
        hyper[key] = value
    return hyper


def make(name: str, spec: EnvSpec, **hyper) -> Agent:
    """An agent by name; ``hyper`` sets fields of its config (unknown fields are an error)."""
    config_cls = config_class(name)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(hyper) - fields)
    if unknown:
        raise ValueError(f"Agent {name!r} has no hyper-parameter(s) {unknown}; it takes {sorted(fields)}.")
    return _AGENTS[name][0](spec, config_cls(**hyper))


__all__ = [
    "A2CConfig",
    "FLAG_HYPERPARAMETERS",
    "Agent",
    "DQNConfig",
    "ReplaySpec",
    "IMPALAConfig",
    "PPOBatch",
    "PPOConfig",
    "R2D2Config",
    "Transitions",
    "no_state",
    "make_recurrent_fns",
    "unroll_trajectory",
    "config_class",
    "make",
    "make_a2c",
    "make_dqn",
    "make_impala",
    "make_network",
    "make_policy_fns",
    "make_ppo",
    "make_r2d2",
    "masked_mean",
    "names",
    "policy_terms",
    "select_hyperparameters",
    "transitions",
]
