"""Agents: ``Agent(init, act, loss | replay)`` bundles that run unchanged in every mode.

The public face of :mod:`podracer.core.agents` (the registry, the built-in agents' configs and factories, each
agent's module imported when one of its names is first read): ``podracer.agents.register``, ``podracer.agents.make``,
``podracer.agents.PPOConfig``.
"""

from __future__ import annotations

from podracer.core import agents as _agents

__all__ = list(_agents.__all__)


def __getattr__(name: str):
    return getattr(_agents, name)


def __dir__() -> list[str]:
    return sorted(__all__)
