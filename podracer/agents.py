"""Agents: ``Agent(init, act, loss | replay)`` bundles that run unchanged in every mode.

The public face of :mod:`podracer.core.agents`: the registry (``register``, ``make``, ``names``), the pieces an agent
of your own is made of, and the built-in agents' configs and factories (``PPOConfig``, ``make_ppo``), each agent's
module imported when one of its names is first read, so that naming one agent imports no other.
"""

from __future__ import annotations

from podracer.core import agents as _agents
from podracer.core.agents import (  # noqa: F401 (re-exported)
    Agent,
    ReplaySpec,
    Transitions,
    config_class,
    config_classes,
    descriptions,
    make,
    make_network,
    make_policy_fns,
    make_recurrent_fns,
    masked_mean,
    name_of,
    names,
    no_state,
    policy_terms,
    register,
    transitions,
    unroll_trajectory,
)

__all__ = list(_agents.__all__)


def __getattr__(name: str):
    """A built-in agent's config class or factory (``agents.PPOConfig``), its module imported on first use."""
    return getattr(_agents, name)


def __dir__() -> list[str]:
    return sorted(__all__)
