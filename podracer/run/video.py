"""Pictures of environments whose observations are not pictures, for ``podracer evaluate --gif`` and ``preview``.

Classic control is drawn by gymnasium's own renderers (pygame, the ``video`` extra) from the state its observation
holds, whichever implementation stepped it: podracer's CartPole (``cartpole``, ``jax:cartpole``), gymnax's
(``gymnax:CartPole-v1``, ``gymnax:Acrobot-v1``, ``gymnax:MountainCar-v0``, ``gymnax:MountainCarContinuous-v0``,
``gymnax:Pendulum-v1``) and envpool's (``CartPole-v1``, ...) observe the same state gymnasium draws (Pendulum and
Acrobot as the cosine and sine of each angle). A ``gymnasium:ID`` batch draws itself
(:meth:`podracer.run.hostenvs.gymnasium.GymnasiumEnv.render_first`)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np


def _angle(cos, sin):
    return np.arctan2(sin, cos)


# gymnasium's id -> the state its renderer reads (``env.unwrapped.state``), from one observation
STATES = {
    "CartPole-v1": lambda o: np.asarray(o, np.float64),  # x, x_dot, theta, theta_dot
    "MountainCar-v0": lambda o: np.asarray(o, np.float64),  # position, velocity
    "MountainCarContinuous-v0": lambda o: np.asarray(o, np.float64),
    "Pendulum-v1": lambda o: np.array([_angle(o[0], o[1]), o[2]], np.float64),  # cos, sin, theta_dot
    # cos and sin of both joints, then their velocities
    "Acrobot-v1": lambda o: np.array([_angle(o[0], o[1]), _angle(o[2], o[3]), o[4], o[5]], np.float64),
}
# podracer's own names for the same tasks
OWN = {"cartpole": "CartPole-v1"}


def classic_task(env: str) -> str | None:
    """The gymnasium id of a classic-control task ``env`` names (a checkpoint's ``--env``), or None."""
    name = env.removeprefix("jax:")
    if name in OWN:
        return OWN[name]
    name = name.removeprefix("gymnax:")
    return name if name in STATES else None


class ObservationRenderer:
    """Draws a classic-control task from its observations: ``renderer(observation)`` is an RGB frame (uint8
    ``[H, W, 3]``) of the state the observation holds, drawn by gymnasium's renderer for ``task``."""

    def __init__(self, task: str):
        if importlib.util.find_spec("pygame") is None:
            from podracer.core import install

            raise ValueError(f"--gif needs pygame to draw {task}: {install.command('video')}.")
        # no window, no sound card: pygame's drivers would otherwise print to the console on a headless machine
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        import gymnasium

        self.task, self._state = task, STATES[task]
        self._env = gymnasium.make(task, render_mode="rgb_array").unwrapped
        self._env.reset(seed=0)

    def __call__(self, observation) -> np.ndarray:
        self._env.state = self._state(np.asarray(observation, np.float64))
        if hasattr(self._env, "last_u"):
            self._env.last_u = None  # Pendulum's torque arrow: an observation does not hold the last action
        return np.asarray(self._env.render(), np.uint8)

    def close(self) -> None:
        self._env.close()


__all__ = ["OWN", "STATES", "ObservationRenderer", "classic_task"]
