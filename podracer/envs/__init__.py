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


# Suites of JAX environments by name, SUITE:NAME: the adapter module (imported when used); the suite's name is also
# its pip extra.
SUITES: dict[str, str] = {
    suite: f"podracer.envs.{suite}" for suite in ("brax", "craftax", "gymnax", "jumanji", "playground", "xminigrid")
}


_ALIASES = {"cartpole-v1": "cartpole"}


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
    Sebulba, :func:`podracer.evaluate.play`); nothing is made or imported to check it."""
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


def make(name: str, **kwargs) -> Environment:
    """A JAX environment by name: a built-in or registered one (``catch``, ``cartpole``, ``memory``,
    ``synthetic``), or ``SUITE:NAME`` from an installed suite (``gymnax:CartPole-v1``); keyword arguments
    go to its constructor."""
    if ":" in name:
        check(name)
        import importlib

        suite, task = name.split(":", 1)
        return importlib.import_module(SUITES[suite]).make(task, **kwargs)
    return _factory(_JAX_ENVS[_known(name)])(**kwargs)


def _known(name: str) -> str:
    """The registry's key for ``name``; a one-line ``ValueError`` naming the known ones (with the closest) if none."""
    key = normalize(name)
    if key not in _JAX_ENVS:
        close = difflib.get_close_matches(key, list(_JAX_ENVS), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown JAX environment {name!r}; available: {', '.join(sorted(_JAX_ENVS))}, or SUITE:NAME "
            f"({', '.join(sorted(SUITES))}; --env list).{hint}"
        )
    return key


def check(name: str) -> None:
    """Fails, as :func:`make` would, for a name that cannot be made, without importing a suite's package (importing
    one may start JAX, which a command line checks before it chooses JAX's devices): for ``SUITE:NAME`` only the
    suite and its installation are checked here, the task when the environment is made."""
    if ":" in name:
        suite = name.split(":", 1)[0]
        if suite not in SUITES:
            raise ValueError(f"Unknown environment suite {suite!r} in {name!r}; suites: {', '.join(sorted(SUITES))}.")
        import importlib

        importlib.import_module(SUITES[suite]).require()
        return
    _known(name)  # the factory is not called: it may start JAX before the command line has chosen the devices


def is_jax_on_host(name: str) -> bool:
    """Whether a Sebulba ``--env`` names a JAX environment stepped on the host (``jax:NAME`` or ``SUITE:NAME``)."""
    return name.startswith("jax:") or name.split(":", 1)[0] in SUITES


def make_host(name: str, num_envs: int, seed: int = 0, *, num_threads: int = 0, vectorization: str = "sync",
              **kwargs) -> HostEnv:
    """A Sebulba host batch by ``--env`` name: ``jax:NAME`` or ``SUITE:NAME`` (a JAX environment stepped on the
    host), ``gymnasium:ID`` (any registered gymnasium environment, stepped ``vectorization`` "sync" or "async"),
    else an envpool task id or short name (``num_threads`` envpool threads; 0: envpool's default). Other keyword
    arguments go to the envpool or gymnasium batch."""
    from podracer.envs import host

    if is_jax_on_host(name):
        return host.make(host.PREFIX + name.removeprefix(host.PREFIX), num_envs, seed)
    if name.startswith("gymnasium:"):
        from podracer.envs.gymnasium import GymnasiumEnv

        return GymnasiumEnv(name[len("gymnasium:"):], num_envs, seed=seed, vectorization=vectorization, **kwargs)
    from podracer.envs.envpool import EnvpoolEnv

    return EnvpoolEnv(name, num_envs, seed=seed, num_threads=num_threads, **kwargs)


def names() -> list[str]:
    """Names accepted by :func:`make` without a suite prefix (built-in and registered)."""
    return sorted(_JAX_ENVS)


def listing() -> str:
    """What ``--env list`` prints: the built-in and registered names, then each suite's (or how to install it)."""
    import importlib

    lines = ["JAX environments: " + ", ".join(names())]
    for suite, path in sorted(SUITES.items()):
        module = importlib.import_module(path)
        try:
            lines.append(f"{suite}: " + ", ".join(f"{suite}:{n}" for n in module.names()))
        except ValueError as error:
            lines.append(f"{suite}: not installed ({str(error).split(': ', 1)[-1]})")
    return "\n".join(lines)


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
    "listing",
    "make_host",
    "make",
    "names",
    "normalize",
    "register",
    "wrap",
]
