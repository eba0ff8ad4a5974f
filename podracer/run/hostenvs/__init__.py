"""Host environments for Sebulba: a JAX environment stepped on the host (:mod:`~podracer.run.hostenvs.jax_env`),
envpool's batches (:mod:`~podracer.run.hostenvs.envpool`) and gymnasium's vector environments
(:mod:`~podracer.run.hostenvs.gymnasium`), made by ``--env`` name with :func:`make_host`."""

from __future__ import annotations

from podracer.core import envs
from podracer.core.envs.base import HostEnv
from podracer.run.hostenvs import jax_env


def make_host(
    name: str, num_envs: int, seed: int = 0, *, num_threads: int = 0, vectorization: str = "sync", **kwargs
) -> HostEnv:
    """A Sebulba host batch by ``--env`` name: ``jax:NAME`` or ``SUITE:NAME`` (a JAX environment stepped on the
    host), ``gymnasium:ID`` (any registered gymnasium environment, stepped ``vectorization`` "sync" or "async"),
    else an envpool task id or short name (``num_threads`` envpool threads; 0: envpool's default). Other keyword
    arguments go to the envpool or gymnasium batch."""
    if envs.is_jax_on_host(name):
        task = name.removeprefix(jax_env.PREFIX)
        return jax_env.JaxHostEnv(envs.make(task), num_envs, seed, name=task)
    if name.startswith("gymnasium:"):
        from podracer.run.hostenvs.gymnasium import GymnasiumEnv

        return GymnasiumEnv(name[len("gymnasium:") :], num_envs, seed=seed, vectorization=vectorization, **kwargs)
    from podracer.run.hostenvs.envpool import EnvpoolEnv

    return EnvpoolEnv(name, num_envs, seed=seed, num_threads=num_threads, **kwargs)


__all__ = ["make_host"]
