"""MuJoCo Playground environments (``playground:NAME``) as podracer :class:`~podracer.core.envs.base.Environment` s.

Playground's environments speak brax's functional API (``reset(key)``, ``step(state,
action)``, a state with ``obs``, ``reward``, ``done``), so the adapter is
:class:`~podracer.core.envs.brax.BraxEnv` on ``mujoco_playground.registry.load``: ``done`` is a
termination (discount 0); the adapter's ``episode_length`` (the task's own
``episode_length`` unless given) is a truncation (discount 1). Actions are continuous in
``[-1, 1]`` per actuator. A task whose observations are a dict gives the agent its
``"state"`` entry (the policy's, in Playground's convention); vision tasks are refused.

Playground simulates with MJX; ``impl`` chooses its implementation, ``"jax"`` by default
here (it runs on every backend; ``"warp"``, Playground's own default, needs an NVIDIA GPU).
Other keyword arguments override fields of the task's config.
"""

from __future__ import annotations

from podracer.core.envs.base import check_task, require_package
from podracer.core.envs.brax import BraxEnv


def require() -> None:
    """A one-line error naming the extra when MuJoCo Playground is not installed."""
    require_package("playground", "mujoco_playground")


def _registry():
    require()
    try:  # Playground's warp backend announces itself on stdout when first loaded
        import warp

        warp.config.quiet = True
    except ImportError:
        pass
    from mujoco_playground import registry

    return registry


def names() -> list[str]:
    """Playground's registered environments."""
    return list(_registry().ALL_ENVS)


def make(name: str, **kwargs) -> "PlaygroundEnv":
    """``playground:NAME`` (:func:`podracer.envs.make` calls this)."""
    return PlaygroundEnv(name, **kwargs)


class PlaygroundEnv(BraxEnv):
    """``mujoco_playground.registry.load(name)`` with ``impl`` and the other keyword arguments as config overrides;
    episodes cut at ``episode_length`` steps (the task config's when ``None``)."""

    suite = "playground"

    def __init__(self, name: str, *, episode_length: int | None = None, env=None, impl: str = "jax", **kwargs):
        if env is None:
            registry = _registry()
            check_task("playground", name, registry.ALL_ENVS)
            env = registry.load(name, config_overrides={"impl": impl, **kwargs})
        if episode_length is None:
            episode_length = int(getattr(getattr(env, "_config", None), "episode_length", 1000))
        super().__init__(name, episode_length=episode_length, env=env)

    def _observe(self, observation):
        if isinstance(observation, dict):
            if "state" not in observation:
                raise ValueError(
                    f"playground:{self.name} has observations {sorted(observation)}; podracer takes a "
                    "vector or a dict with a 'state' vector."
                )
            return observation["state"]
        return observation
