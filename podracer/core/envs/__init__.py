"""Environments: JAX environments for Anakin, host environments for Sebulba."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from podracer.core.types import EnvSpec
from podracer.core.envs.base import Environment, HostEnv, first_timestep
from podracer.core.envs.cartpole import CartPole
from podracer.core.envs.catch import Catch
from podracer.core.envs.memory import CueMemory
from podracer.core.envs.synthetic import Synthetic
from podracer.core.envs.wrappers import AutoReset, EpisodeStatistics, wrap

_JAX_ENVS: dict[str, Callable[..., Environment]] = {
    "catch": Catch,
    "cartpole": CartPole,
    "memory": CueMemory,
    "synthetic": Synthetic,
}


# Suites of JAX environments by name, SUITE:NAME: the adapter module (imported when used); the suite's name is also
# its pip extra (bsuite's, podracer's own ports, installs nothing).
SUITES: dict[str, str] = {
    suite: f"podracer.core.envs.{suite}"
    for suite in ("brax", "bsuite", "craftax", "gymnax", "jumanji", "navix", "pgx", "playground", "xminigrid")
}
_BUILT_IN_SUITES = frozenset(SUITES)


_ALIASES = {"cartpole-v1": "cartpole"}
ENTRY_POINTS = "podracer.envs"  # the entry-point group an installed package registers its environments in
SUITE_ENTRY_POINTS = "podracer.suites"  # ... and its suite adapters in
_entry_points_loaded = False


def _load_entry_points() -> None:
    """Registers, once, every environment an installed package declares in the ``podracer.envs`` entry-point group
    (``NAME = "package.module:factory"``) as a lazy target: nothing is imported until the environment is made. A
    name registered in this process wins over an entry point's."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib import metadata

    for entry in metadata.entry_points(group=ENTRY_POINTS):
        key = normalize(entry.name)
        if key not in _JAX_ENVS and ":" not in entry.name and entry.value.count(":") == 1:
            _JAX_ENVS[key] = entry.value
    for entry in metadata.entry_points(group=SUITE_ENTRY_POINTS):
        if entry.name not in SUITES and ":" not in entry.name and ":" not in entry.value:
            SUITES[entry.name] = entry.value


def register_suite(name: str, module: str) -> None:
    """Adds a suite adapter of your own: ``--env NAME:TASK`` (Anakin) and ``--env NAME:TASK`` stepped on the host
    (Sebulba) make ``module.make(TASK, **kwargs)``. ``module`` is a module path, imported only when one of its
    tasks is checked or made (a suite's package may start JAX at import); it provides ``require()`` (a one-line
    ``ValueError`` naming what to install, or nothing), ``names()`` (its tasks, for ``--env list``) and
    ``make(task, **kwargs) -> Environment``. An installed package can declare it in the ``podracer.suites``
    entry-point group instead (``NAME = "package.module"``). A built-in suite's name cannot be taken."""
    _load_entry_points()
    if not name or not name.replace("_", "").replace("-", "").isalnum() or name != name.lower():
        raise ValueError(
            f"A suite's name is lower case letters, digits, '-' and '_' (the SUITE of --env SUITE:TASK), got {name!r}."
        )
    if name in _BUILT_IN_SUITES or name == "jax" or name == "gymnasium":
        raise ValueError(f"{name!r} is a built-in suite prefix; register yours under another name.")
    if not isinstance(module, str) or ":" in module or not module:
        raise ValueError(f"A suite adapter is a module path ('package.module'), got {module!r}.")
    SUITES[name] = module


def normalize(name: str) -> str:
    """How :func:`register`, :func:`make`, ``--env`` and ``--env list`` spell a name: lower case, ``-`` for ``_``."""
    key = name.strip().lower().replace("_", "-")
    return _ALIASES.get(key, key)


def register(name: str, factory: Callable[..., Environment] | str) -> None:
    """Adds a JAX environment of your own under ``name`` (spelled as :func:`normalize` does: ``my_task`` and
    ``My-Task`` are one name): ``factory(**kwargs)`` makes it. ``factory`` may also be a lazy target,
    ``"package.module:Factory"``, imported only when the environment is made: a package that starts JAX when it
    is imported (pgx, navix) then waits until the command line has chosen JAX's devices. In the process that
    registered it, the name works as a built-in one does (``--env NAME`` in Anakin, ``--env jax:NAME`` in
    Sebulba, :func:`podracer.run.evaluate.play`); nothing is made or imported to check it."""
    if ":" in name:
        raise ValueError(f"Environment names take no ':' (SUITE:NAME is for the suites), got {name!r}.")
    if isinstance(factory, str) and (factory.count(":") != 1 or not all(factory.split(":"))):
        raise ValueError(f"A lazy environment target is 'package.module:Factory', got {factory!r}.")
    _JAX_ENVS[normalize(name)] = factory


def _factory(target: Callable[..., Environment] | str) -> Callable[..., Environment]:
    if not isinstance(target, str):
        return target
    import importlib

    module, attribute = target.split(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"Cannot load the environment {target!r}: {error}.") from None


def _made(target: Callable[..., Environment] | str, kwargs) -> Environment:
    """The environment ``target`` makes. Its module is imported, and the factory called, with JAX evaluating
    eagerly even inside a trace (``jax.ensure_compile_time_eval``): the arrays a package creates when it is imported
    or its environment made are then arrays, never tracers that would leak out of the trace that first made it."""
    import jax

    with jax.ensure_compile_time_eval():
        return _factory(target)(**kwargs)


def make(name: str, **kwargs) -> Environment:
    """A JAX environment by name: a built-in or registered one (``catch``, ``cartpole``, ``memory``,
    ``synthetic``), or ``SUITE:NAME`` from an installed suite (``gymnax:CartPole-v1``); keyword arguments
    go to its constructor."""
    if ":" in name:
        check(name)
        suite, task = name.split(":", 1)
        return _made(lambda **kw: _suite(suite).make(task, **kw), kwargs)
    return _made(_JAX_ENVS[_known(name)], kwargs)


def _known(name: str) -> str:
    """The registry's key for ``name``; a one-line ``ValueError`` naming the known ones (with the closest) if none."""
    _load_entry_points()
    key = normalize(name)
    if key not in _JAX_ENVS:
        close = difflib.get_close_matches(key, list(_JAX_ENVS), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown JAX environment {name!r}; available: {', '.join(sorted(_JAX_ENVS))}, or SUITE:NAME "
            f"({', '.join(sorted(SUITES))}; --env list); your own: envs.register, --import MODULE or a "
            f"{ENTRY_POINTS} entry point.{hint}"
        )
    return key


def check(name: str) -> None:
    """Fails, as :func:`make` would, for a name that cannot be made, without importing a suite's package (importing
    one may start JAX, which a command line checks before it chooses JAX's devices): for ``SUITE:NAME`` only the
    suite and its installation are checked here, the task when the environment is made."""
    if ":" in name:
        _load_entry_points()
        suite = name.split(":", 1)[0]
        if suite not in SUITES:
            raise ValueError(f"Unknown environment suite {suite!r} in {name!r}; suites: {', '.join(sorted(SUITES))}.")
        _suite(suite).require()
        return
    _known(name)  # the factory is not called: it may start JAX before the command line has chosen the devices


def _suite(suite: str):
    """The adapter module of a suite (imported here); a one-line ``ValueError`` if a registered one cannot be."""
    import importlib

    try:
        return importlib.import_module(SUITES[suite])
    except ImportError as error:
        raise ValueError(f"Cannot load the adapter of suite {suite!r} ({SUITES[suite]!r}): {error}.") from None


def is_jax_on_host(name: str) -> bool:
    """Whether a Sebulba ``--env`` names a JAX environment stepped on the host (``jax:NAME`` or ``SUITE:NAME``)."""
    _load_entry_points()
    return name.startswith("jax:") or name.split(":", 1)[0] in SUITES


def names() -> list[str]:
    """Names accepted by :func:`make` without a suite prefix (built-in, registered, and installed packages'
    ``podracer.envs`` entry points)."""
    _load_entry_points()
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
    "check",
    "is_jax_on_host",
    "make",
    "names",
    "normalize",
    "register",
    "register_suite",
    "wrap",
]
