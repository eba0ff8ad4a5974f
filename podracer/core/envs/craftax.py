"""craftax environments (``craftax:NAME``) as podracer :class:`~podracer.core.envs.base.Environment` s.

craftax's environments have gymnax's functions (``reset_env``, ``step_env``, spaces), so
the adapter is :class:`~podracer.core.envs.gymnax.GymnaxEnv` on craftax's non-resetting
variants (podracer's :class:`~podracer.core.envs.wrappers.AutoReset` starts the next episode).
craftax's ``done`` includes its time limit (``params.max_timesteps``); the adapter counts
a ``done`` at that limit as a truncation (discount 1) and any other, death or (Craftax)
the defeated boss, as a termination (discount 0).

Symbolic observations are vectors (an MLP torso); pixel observations are channels-last
RGB images in [0, 1], ``[63, 63, 3]`` (Classic) or ``[130, 110, 3]``, which ``--torso
auto`` gives the IMPALA ResNet. The first pixel environment of a kind made on a machine
builds craftax's texture cache (about 20 s for Classic).
"""

from __future__ import annotations


import chex
import jax.numpy as jnp

from podracer.core.envs.base import check_task, require_package
from podracer.core.envs.gymnax import GymnaxEnv

NAMES = ("Craftax-Classic-Pixels-v1", "Craftax-Classic-Symbolic-v1", "Craftax-Pixels-v1", "Craftax-Symbolic-v1")


def require() -> None:
    """A one-line error naming the extra when craftax is not installed."""
    require_package("craftax", "craftax")


def names() -> list[str]:
    """craftax's environments (craftax has no registry; these are the names its ``make_craftax_env_from_name``
    takes)."""
    require()
    return list(NAMES)


def make(name: str, **kwargs) -> "CraftaxEnv":
    """``craftax:NAME`` (:func:`podracer.envs.make` calls this)."""
    return CraftaxEnv(name, **kwargs)


class CraftaxEnv(GymnaxEnv):
    """craftax's environment ``name`` without auto-reset; ``params``: its ``EnvParams`` (craftax's defaults when
    ``None``; ``max_timesteps`` is the time limit, 10,000 steps in Classic and 100,000 in Craftax)."""

    suite = "craftax"

    def __init__(self, name: str, *, env=None, params=None):
        if env is None:
            require()
            check_task("craftax", name, NAMES)
            from craftax.craftax_env import make_craftax_env_from_name

            env = make_craftax_env_from_name(name, auto_reset=False)
        super().__init__(name, env=env, params=params if params is not None else env.default_params)

    def _episode_end(self, env_state, done: chex.Array) -> tuple[chex.Array, chex.Array]:
        truncated = env_state.timestep >= self.params.max_timesteps
        return jnp.logical_and(done, ~truncated), jnp.logical_and(done, truncated)
