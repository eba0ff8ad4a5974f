"""Environments: JAX environments for Anakin, host environments for Sebulba.

The public face of :mod:`podracer.core.envs` (the registry, the protocols, our tasks and the suites' adapters) and of
:func:`podracer.run.hostenvs.make_host` (a Sebulba host batch by ``--env`` name).
"""

from __future__ import annotations

from podracer.core.envs import (  # noqa: F401 (re-exported)
    AutoReset,
    CartPole,
    Catch,
    CueMemory,
    EnvSpec,
    Environment,
    EpisodeStatistics,
    HostEnv,
    Synthetic,
    check,
    first_timestep,
    is_jax_on_host,
    make,
    names,
    normalize,
    register,
    register_suite,
    wrap,
)
from podracer.run.hostenvs import make_host  # noqa: F401 (re-exported)

__all__ = sorted(
    [
        *[
            "AutoReset",
            "CartPole",
            "Catch",
            "CueMemory",
            "EnvSpec",
            "Environment",
            "EpisodeStatistics",
            "HostEnv",
            "Synthetic",
            "check",
            "first_timestep",
            "is_jax_on_host",
            "make",
            "names",
            "normalize",
            "register",
            "register_suite",
            "wrap",
        ],
        "make_host",
    ]
)
