"""envpool batches as :class:`~podracer.envs.base.HostEnv` (gymnasium API, numpy arrays).

Termination and truncation stay apart (``discount`` is 0 only on termination).
Atari games get the usual preprocessing (84x84 grayscale, 4 stacked frames, frame skip
4, sticky actions 0.25, minimal action set); their rewards are clipped to [-1, 1] for
learning while :attr:`EnvpoolEnv.stats` reports the raw episode return.
"""

from __future__ import annotations

import difflib
import functools
import warnings

import jax
import numpy as np

from podracer.envs.base import EnvSpec, HostEpisodes, actions_of, host_action, host_dtype
from podracer.types import TimeStep

SHORT_NAMES = {
    "pong": "Pong-v5",
    "breakout": "Breakout-v5",
    "cartpole": "CartPole-v1",
}


@functools.cache
def _all_task_ids() -> tuple[str, ...]:
    import envpool

    return tuple(envpool.list_all_envs())


def resolve_task_id(name: str) -> str:
    """An envpool task id from an id (``Pong-v5``) or a short name (``Pong``, ``cartpole``).

    Unknown names fail with the closest known ids.
    """
    ids = _all_task_ids()
    if name in ids:
        return name
    lowered = name.lower()
    if lowered in SHORT_NAMES:
        return SHORT_NAMES[lowered]
    by_lower = {task.lower(): task for task in ids}
    for candidate in (lowered, f"{lowered}-v5", f"{lowered}-v1"):
        if candidate in by_lower:
            return by_lower[candidate]
    close = difflib.get_close_matches(name, ids, n=5, cutoff=0.6)
    close += [t for t in difflib.get_close_matches(lowered, list(by_lower), n=5, cutoff=0.6) if by_lower[t] not in close]
    hint = f" Close matches: {', '.join(close)}." if close else ""
    raise ValueError(f"Unknown envpool task {name!r}.{hint}")


def is_atari(task_id: str) -> bool:
    return task_id.endswith("-v5")


class EnvpoolEnv:
    """``num_envs`` envpool environments stepped together.

    ``step`` blocks; ``send`` and ``recv`` split it so that the environments step on
    envpool's threads while the caller does other work (inference, shipping data).
    After a ``last`` time step, the next step of that environment returns the first
    observation of a new episode with reward 0 (envpool's auto-reset).
    """

    def __init__(
        self,
        task: str,
        num_envs: int,
        *,
        seed: int = 0,
        num_threads: int = 0,
        thread_affinity_offset: int = -1,
        sticky_action_probability: float = 0.25,
        full_action_space: bool = False,
        clip_rewards: bool = True,
        max_episode_steps: int | None = None,
    ):
        import envpool

        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}.")
        self.task_id = resolve_task_id(task)
        self.num_envs = num_envs
        self.atari = is_atari(self.task_id)
        kwargs = dict(num_envs=num_envs, batch_size=num_envs, seed=seed, num_threads=num_threads,
                      thread_affinity_offset=thread_affinity_offset)
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        if self.atari:
            kwargs.update(
                repeat_action_probability=sticky_action_probability,
                full_action_space=full_action_space,
                episodic_life=False,
                reward_clip=False,  # clipped here, so that raw rewards stay available
                stack_num=4,
                frame_skip=4,
                img_height=84,
                img_width=84,
                gray_scale=True,
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's Box precision warnings
            self._pool = envpool.make(self.task_id, env_type="gymnasium", **kwargs)
        self.clip_rewards = clip_rewards and self.atari
        space = self._pool.observation_space
        self._dtype = host_dtype(space.dtype)
        self._spec = EnvSpec(jax.ShapeDtypeStruct(space.shape, self._dtype), **actions_of(self._pool.action_space, self.task_id))
        self._all = np.arange(num_envs, dtype=np.int32)
        self._episodes = HostEpisodes(num_envs)
        self.stats = self._episodes.stats

    def spec(self) -> EnvSpec:
        return self._spec

    def reset(self) -> TimeStep:
        observation, _ = self._pool.reset()
        self.stats = self._episodes.reset()
        n = self.num_envs
        return TimeStep(np.asarray(observation, self._dtype), np.zeros(n, np.float32), np.ones(n, np.float32),
                        np.zeros(n, bool))

    def send(self, action: np.ndarray) -> None:
        """Starts a step of every environment with ``action`` (int32 ``[num_envs]``, or float32 ``[num_envs, size]``
        for continuous actions, rescaled from [-1, 1] to the bounds)."""
        self._pool.send(host_action(self._spec, action, self.num_envs), self._all)

    def recv(self) -> TimeStep:
        """Waits for the step started by :meth:`send`."""
        observation, reward, terminated, truncated, info = self._pool.recv()
        order = np.argsort(info["env_id"])
        if not np.array_equal(order, self._all):  # envpool returns a whole batch, possibly permuted
            observation, reward, terminated, truncated = (x[order] for x in (observation, reward, terminated, truncated))
            info = {k: v[order] for k, v in info.items() if isinstance(v, np.ndarray) and len(v) == self.num_envs}
        raw = np.asarray(info.get("reward", reward), np.float32) if self.atari else np.asarray(reward, np.float32)
        last = np.logical_or(terminated, truncated)
        self.stats = self._episodes.update(raw, last)
        reward = np.clip(reward, -1.0, 1.0) if self.clip_rewards else reward
        return TimeStep(
            observation=np.asarray(observation, self._dtype),
            reward=np.asarray(reward, np.float32),
            discount=np.where(terminated, 0.0, 1.0).astype(np.float32),
            last=last,
        )

    def step(self, action: np.ndarray) -> TimeStep:
        self.send(action)
        return self.recv()

    def close(self) -> None:
        close = getattr(self._pool, "close", None)
        if close is not None:
            close()
