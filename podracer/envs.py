"""Environments: JAX environments for Anakin, host environments for Sebulba.

The public face of :mod:`podracer.core.envs` (the registry, the protocols, our tasks and the suites' adapters) and of
:func:`podracer.run.hostenvs.make_host` (a Sebulba host batch by ``--env`` name).
"""

from podracer.core.envs import *  # noqa: F403 (the face: every public name of the registry)
from podracer.core.envs import __all__ as _core
from podracer.run.hostenvs import make_host  # noqa: F401 (the face)

__all__ = sorted([*_core, "make_host"])
