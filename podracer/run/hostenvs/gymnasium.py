"""Any registered gymnasium environment (``gymnasium:ID``) as a Sebulba :class:`~podracer.core.envs.base.HostEnv`.

``gymnasium.make_vec(ID, num_envs)`` builds the batch, so an environment of your own works
once it is registered: ``gymnasium:my_package:MyTask-v0`` imports ``my_package`` first, whose
``gymnasium.register(...)`` call (an entry point) makes ``MyTask-v0`` known. The batch behaves
as envpool's does: environment ``i`` is seeded ``seed + i``; after a ``last`` time step, the
next step of that environment returns the first observation of a new episode with reward 0
(gymnasium's next-step auto-reset); termination has discount 0 and truncation keeps 1;
:attr:`GymnasiumEnv.stats` holds each episode's return and length so far. ``send`` starts a
step and ``recv`` waits for it: with ``vectorization="async"`` each environment steps in a
process of its own meanwhile; ``"sync"`` (the default, best for environments as cheap as
CartPole, where a process round trip costs more than a step) steps them in ``recv``.

An environment whose ``info`` carries ``"action_mask"`` at reset (Taxi-v3 does; so may your
own) declares it (``EnvSpec.action_mask``): every time step carries the mask, and no agent
takes an illegal action. An environment of the batch whose info lacks it on a step has
every action legal there.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np

from podracer.core.types import EnvSpec, ImageLayout
from podracer.core.envs.base import HostEpisodes, actions_of, host_action, host_dtype
from podracer.core.types import TimeStep

PREFIX = "gymnasium:"
CLOSE_SECONDS = 5.0  # how long closing an asynchronous batch waits for its workers before terminating them


class GymnasiumEnv:
    """``num_envs`` copies of the registered gymnasium environment ``env_id`` (discrete actions) stepped together."""

    def __init__(self, env_id: str, num_envs: int, *, seed: int = 0, vectorization: str = "sync", **kwargs):
        import gymnasium  # a dependency of podracer (and of envpool)

        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}.")
        if vectorization not in ("sync", "async"):
            raise ValueError(f"vectorization must be 'sync' or 'async', got {vectorization!r}.")
        self.task_id, self.num_envs = PREFIX + env_id, num_envs
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # gymnasium's own deprecation and precision notes
                vector_kwargs = {"autoreset_mode": gymnasium.vector.AutoresetMode.NEXT_STEP}
                if vectorization == "async":  # spawned, not forked: this process runs JAX's threads
                    vector_kwargs["context"] = "spawn"
                    # A worker's exception comes back raised, and the run reports it in one line (its traceback in
                    # a file): gymnasium's own logging of it would print the traceback on the console first.
                    gymnasium.logger.min_level = max(gymnasium.logger.min_level, gymnasium.logger.ERROR + 10)
                self._envs = gymnasium.make_vec(
                    env_id, num_envs=num_envs, vectorization_mode=vectorization, vector_kwargs=vector_kwargs, **kwargs
                )
        except gymnasium.error.Error as error:
            raise ValueError(f"--env {self.task_id}: {error}") from None
        except ModuleNotFoundError as error:  # gymnasium:MODULE:ID whose MODULE is not installed
            module = error.name or env_id.rpartition(":")[0] or env_id
            raise ValueError(
                f"--env {self.task_id}: no module named {module!r} to import the environment from "
                "(install it, or check the name before the last ':')."
            ) from None
        action_space, space = self._envs.single_action_space, self._envs.single_observation_space
        try:
            actions = actions_of(action_space, self.task_id)
        except ValueError:
            self._envs.close()
            raise
        # gymnasium's images are [H, W, C]; their value range is the space's
        image = ImageLayout(-1, float(np.min(space.low)), float(np.max(space.high))) if len(space.shape) == 3 else None
        _, info = self._envs.reset(seed=seed)  # does the info say which actions are legal?
        masked = "action_mask" in info and "box" not in actions
        self._spec = EnvSpec(
            jax.ShapeDtypeStruct(space.shape, host_dtype(space.dtype)), image=image, action_mask=masked, **actions
        )
        # Discrete's start, MultiDiscrete's starts
        self._start = np.asarray(getattr(action_space, "start", 0), np.int64)
        self._seed = seed
        self._action = None
        self._episodes = HostEpisodes(num_envs)
        self.stats = self._episodes.stats

    def spec(self) -> EnvSpec:
        return self._spec

    def renders(self) -> bool:
        """Whether :meth:`render_first` draws: a batch made with ``render_mode="rgb_array"`` of an environment that
        has that mode, stepped synchronously."""
        modes = self._envs.metadata.get("render_modes") or ()
        return (
            getattr(self._envs, "render_mode", None) == "rgb_array"
            and "rgb_array" in modes
            and hasattr(self._envs, "envs")
        )

    def render_first(self) -> np.ndarray:
        """The first environment's picture now (uint8 ``[H, W, 3]``), drawn by the environment (:meth:`renders`)."""
        import gymnasium

        try:
            frame = self._envs.envs[0].render()
        except gymnasium.error.DependencyNotInstalled as error:
            raise ValueError(f"--gif needs what {self.task_id} draws with: {error}") from None
        return np.asarray(frame, np.uint8)

    def reset(self) -> TimeStep:
        observation, info = self._envs.reset(seed=self._seed)
        self.stats = self._episodes.reset()
        n = self.num_envs
        return TimeStep(
            self._observation(observation),
            np.zeros(n, np.float32),
            np.ones(n, np.float32),
            np.zeros(n, bool),
            self._mask(info),
        )

    def _mask(self, info):
        """The batch's legal-action masks from a vector ``info`` (bool ``[B, A]``; a tuple of ``[B, nvec[i]]``), or
        None when the spec declares none."""
        if not self._spec.action_mask:
            return None
        sizes = self._spec.nvec or (self._spec.num_actions,)
        mask = np.ones((self.num_envs, sum(sizes)), bool)
        if "action_mask" in info:
            given = np.asarray(info.get("_action_mask", np.ones(self.num_envs, bool)), bool)
            mask[given] = np.asarray(info["action_mask"], bool).reshape(self.num_envs, -1)[given]
        if self._spec.nvec is None:
            return mask
        return tuple(np.split(mask, np.cumsum(sizes)[:-1], axis=1))

    def _observation(self, observation):
        return np.asarray(observation, self._spec.observation.dtype)

    def send(self, action: np.ndarray) -> None:
        """Starts a step of every environment with ``action`` (int ``[num_envs]``, 0 ... n - 1, or ``[num_envs, k]``
        for multi-discrete actions; or float32 ``[num_envs, size]`` for continuous ones, rescaled from [-1, 1] to the
        bounds)."""
        action = host_action(self._spec, action, self.num_envs)
        action = action if self._spec.continuous else action.astype(np.int64) + self._start
        if hasattr(self._envs, "step_async"):
            self._envs.step_async(action)
        else:
            self._action = action

    def recv(self) -> TimeStep:
        """Waits for the step :meth:`send` started."""
        if hasattr(self._envs, "step_wait"):
            observation, reward, terminated, truncated, info = self._envs.step_wait()
        else:
            observation, reward, terminated, truncated, info = self._envs.step(self._action)
        reward = np.asarray(reward, np.float32)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        last = terminated | truncated
        self.stats = self._episodes.update(reward, last)
        return TimeStep(
            self._observation(observation),
            reward,
            np.where(terminated, 0.0, 1.0).astype(np.float32),
            last,
            self._mask(info),
        )

    def step(self, action: np.ndarray) -> TimeStep:
        self.send(action)
        return self.recv()

    def close(self) -> None:
        """Closes the batch. Asynchronous workers get :data:`CLOSE_SECONDS` to finish a step in flight and are then
        terminated (a worker whose environment hangs would hold ``close`` forever)."""
        if not hasattr(self._envs, "step_wait"):
            self._envs.close()
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's note about closing while a step is pending
            try:
                self._envs.close(timeout=CLOSE_SECONDS)
            except Exception:  # noqa: BLE001 - a worker that failed or hung: end them all
                self._envs.close(terminate=True)
