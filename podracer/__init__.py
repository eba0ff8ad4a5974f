"""podracer: Anakin and Sebulba reinforcement learning in JAX.

The names below are imported on first use (PEP 562), so that ``import podracer`` and ``podracer --help`` or
``--version`` do not start JAX: ``podracer.AnakinConfig`` or ``from podracer import Agent`` import their module then.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it; podracer --version prints it)

# name -> the module that defines it; a submodule maps to itself
_WHERE = {
    "Agent": "podracer.agents",
    "AnakinConfig": "podracer.run.config",
    "AnakinState": "podracer.anakin",
    "EnvSpec": "podracer.envs",
    "Environment": "podracer.envs",
    "EpisodeStats": "podracer.core.types",
    "HostEnv": "podracer.envs",
    "LearnerState": "podracer.core.types",
    "RolloutState": "podracer.anakin",
    "RunConfig": "podracer.run.config",
    "SebulbaConfig": "podracer.run.config",
    "TimeStep": "podracer.core.types",
    "Trajectory": "podracer.core.types",
    "load": "podracer.run.policy",
    "make_learner_step": "podracer.core.learner",
    "make_optimizer": "podracer.core.learner",
    "train": "podracer.cli.train",
}
# the public modules by their short names (``from podracer import parallel``) -> where each lives
_SUBMODULES = {
    "agents": "podracer.agents",
    "anakin": "podracer.anakin",
    "config": "podracer.run.config",
    "envs": "podracer.envs",
    "learner": "podracer.core.learner",
    "logging": "podracer.run.logging",
    "networks": "podracer.core.networks",
    "parallel": "podracer.run.parallel",
    "sebulba": "podracer.sebulba",
}


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(_SUBMODULES[name])
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value  # later lookups do not come back here
        return value
    raise AttributeError(f"module 'podracer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = sorted([*_WHERE, *_SUBMODULES])
