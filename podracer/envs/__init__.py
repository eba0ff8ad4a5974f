"""Environments: JAX environments for Anakin, host environments for Sebulba."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from podracer.envs.base import EnvSpec, Environment, HostEnv, first_timestep
from podracer.envs.cartpole import CartPole
from podracer.envs.catch import Catch
from podracer.envs.memory import CueMemory
from podracer.envs.synthetic import Synthetic
from podracer.envs.wrappers import AutoReset, EpisodeStatistics, wrap

_JAX_ENVS: dict[str, Callable[..., Environment]] = {
    "catch": Catch,
    "cartpole": CartPole,
    "memory": CueMemory,
    "synthetic": Synthetic,
}


def make(name: str, **kwargs) -> Environment:
    """A JAX environment by name (``catch``, ``cartpole``, ``memory``, ``synthetic``); keyword arguments go to its constructor."""
    key = name.lower().replace("_", "-")
    aliases = {"cartpole-v1": "cartpole"}
    key = aliases.get(key, key)
    if key not in _JAX_ENVS:
        close = difflib.get_close_matches(key, list(_JAX_ENVS), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown JAX environment {name!r}; available: {', '.join(sorted(_JAX_ENVS))}.{hint}"
        )
    return _JAX_ENVS[key](**kwargs)


def names() -> list[str]:
    """Names accepted by :func:`make`."""
    return sorted(_JAX_ENVS)


__all__ = [
    "AutoReset",
    "CartPole",
    "Catch",
    "CueMemory",
    "EnvSpec",
    "Environment",
    "EpisodeStatistics",
    "HostEnv",
    "Synthetic",
    "first_timestep",
    "make",
    "names",
    "wrap",
]
