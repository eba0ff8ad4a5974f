"""Environments: JAX environments for Anakin, host environments for Sebulba.

The public face of :mod:`podracer.core.envs` (the registry, the protocols, our tasks and the suites' adapters) and of
:func:`podracer.run.hostenvs.make_host` (a Sebulba host batch by ``--env`` name): ``podracer.envs.register``,
``podracer.envs.make``, ``podracer.envs.Environment``.
"""

from __future__ import annotations

from podracer.core import envs as _envs

__all__ = sorted([*_envs.__all__, "make_host"])


def __getattr__(name: str):
    if name == "make_host":
        from podracer.run.hostenvs import make_host

        return make_host
    return getattr(_envs, name)


def __dir__() -> list[str]:
    return sorted(__all__)
