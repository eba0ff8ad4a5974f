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
from podracer.agents.sac import SACConfig, make_sac
from podracer.types import EnvSpec

_AGENTS = {
    "a2c": (make_a2c, A2CConfig),
    "dqn": (make_dqn, DQNConfig),
    "impala": (make_impala, IMPALAConfig),
    "ppo": (make_ppo, PPOConfig),
    "r2d2": (make_r2d2, R2D2Config),
    "sac": (make_sac, SACConfig),
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


def name_of(config) -> str:
    """The registry name of an agent config (``A2CConfig()`` -> ``"a2c"``)."""
    for name, (_, cls) in _AGENTS.items():
        if type(config) is cls:
            return name
    raise ValueError(f"{type(config).__name__} is not the config of a registered agent ({', '.join(names())}).")


def config_classes() -> dict[str, type]:
    """Every registered agent's config class by name, in name order."""
    return {name: _AGENTS[name][1] for name in names()}


def make(agent, spec: EnvSpec, **hyper) -> Agent:
    """The agent for ``spec`` from its config (``make(PPOConfig(num_epochs=2), spec)``), or from its name and
    hyper-parameters (``make("ppo", spec, num_epochs=2)``; unknown names and fields are errors)."""
    if isinstance(agent, str):
        config_cls = config_class(agent)
        fields = {f.name for f in dataclasses.fields(config_cls)}
        unknown = sorted(set(hyper) - fields)
        if unknown:
            raise ValueError(f"Agent {agent!r} has no hyper-parameter(s) {unknown}; it takes {sorted(fields)}.")
        agent = config_cls(**hyper)
    elif hyper:
        raise ValueError("Pass hyper-parameters in the agent's config, or pass the agent's name.")
    return _AGENTS[name_of(agent)][0](spec, agent)


__all__ = [
    "A2CConfig",
    "Agent",
    "DQNConfig",
    "ReplaySpec",
    "IMPALAConfig",
    "PPOBatch",
    "PPOConfig",
    "R2D2Config",
    "SACConfig",
    "Transitions",
    "no_state",
    "make_recurrent_fns",
    "unroll_trajectory",
    "config_class",
    "config_classes",
    "make",
    "make_a2c",
    "make_dqn",
    "make_impala",
    "make_network",
    "make_policy_fns",
    "make_ppo",
    "make_r2d2",
    "make_sac",
    "masked_mean",
    "name_of",
    "names",
    "policy_terms",
    "transitions",
]
