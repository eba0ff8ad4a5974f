"""envpool batches as :class:`~podracer.core.envs.base.HostEnv` (gymnasium API, numpy arrays).

Termination and truncation stay apart (``discount`` is 0 only on termination).
Atari games get the usual preprocessing (84x84 grayscale, 4 stacked frames, frame skip
4, sticky actions 0.25, minimal action set); their rewards are clipped to [-1, 1] for
learning while :attr:`EnvpoolEnv.stats` reports the raw episode return.

Every suite envpool runs natively is taken by id (:data:`SUITES` names them by envpool's
module: Atari, classic control, MuJoCo, dm_control, MuJoCo Playground, MetaWorld,
MiniGrid/BabyAI, ...), checked against the installed envpool when the batch is made. Dict
observations become one array: Playground's ``state`` entry (its ``privileged_state`` is the
critic's, in Playground's own asymmetric setting), MiniGrid's egocentric ``image`` of (object,
colour, state) ids as a channels-last board, and any other dict (dm_control's named vectors,
BabyAI's image, direction and mission) flattened in the space's order into one float32 vector.
Each environment of a batch gets its own seed (``seed + j`` for environment ``j``), passed to
envpool as a list.
"""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import numpy as np

from podracer.core.types import EnvSpec
from podracer.core.envs.base import HostEpisodes, actions_of, host_action, host_dtype
from podracer.core.types import ImageLayout, TimeStep

SHORT_NAMES = {
    "pong": "Pong-v5",
    "breakout": "Breakout-v5",
    "cartpole": "CartPole-v1",
}


def require(env: str = "") -> None:
    """Fails with one line naming the extra to install when envpool is not installed (Sebulba's gymnasium and jax
    routes run without it); ``env``: the ``--env`` value that asked for it."""
    import importlib.util

    if importlib.util.find_spec("envpool") is None:
        from podracer.core import install

        raise ValueError(
            f"--env {env or 'TASK_ID'}: envpool's tasks need envpool: {install.command('envpool')} "
            "(--env gymnasium:ID and --env jax:NAME run without it)."
        )


@functools.cache
def _all_task_ids() -> tuple[str, ...]:
    require()
    import envpool

    return tuple(envpool.list_all_envs())


def _version() -> str:
    import importlib.metadata

    return importlib.metadata.version("envpool")


def resolve_task_id(name: str) -> str:
    """An envpool task id from an id (``Pong-v5``) or a short name (``Pong``, ``cartpole``).

    Unknown names fail with the closest known ids.
    """
    require(name)
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
    close += [
        t for t in difflib.get_close_matches(lowered, list(by_lower), n=5, cutoff=0.6) if by_lower[t] not in close
    ]
    hint = f" Close matches: {', '.join(close)}." if close else ""
    raise ValueError(f"Unknown envpool task {name!r} in envpool {_version()}.{hint}")


# envpool's native suites by the module that registers them (``envpool.registration.registry.specs``).
SUITES = {
    "envpool.atari": "Atari",
    "envpool.classic_control": "classic control",
    "envpool.toy_text": "toy text",
    "envpool.box2d": "Box2D",
    "envpool.mujoco.gym": "MuJoCo",
    "envpool.mujoco.dmc": "dm_control",
    "envpool.mujoco.playground": "MuJoCo Playground",
    "envpool.mujoco.metaworld": "MetaWorld",
    "envpool.minigrid": "MiniGrid/BabyAI",
    "envpool.mujoco.robotics": "gymnasium-robotics",
    "envpool.mujoco.myosuite": "MyoSuite",
    "envpool.procgen": "Procgen",
    "envpool.vizdoom": "ViZDoom",
    "envpool.highway": "highway-env",
    "envpool.jumanji": "Jumanji",
    "envpool.pgx": "pgx",
    "envpool.gfootball": "Google Research Football",
}


def suite_of(task_id: str) -> str:
    """The suite (:data:`SUITES`) an envpool task id belongs to, as the installed envpool registers it."""
    from envpool.registration import registry

    module = registry.specs[task_id][0]
    return SUITES.get(module, module.removeprefix("envpool."))


def is_atari(task_id: str) -> bool:
    """Atari's games (their ids end in -v5, as do gymnasium's MuJoCo v5 tasks, which are not Atari)."""
    return suite_of(task_id) == "Atari"


MINIGRID_MAX_ID = 10  # MiniGrid's largest object id (the agent); colours and states are smaller


def _unit_scale(space) -> tuple[np.ndarray, np.ndarray]:
    """``(offset, scale)`` taking an entry to [0, 1] where its bounds say how (a discrete choice, or a box of
    finite bounds less than a million apart, such as BabyAI's mission bytes); ``(0, 1)`` for unbounded entries
    (dm_control's, whose bounds are the float64 extremes)."""
    if hasattr(space, "n") and np.ndim(space.n) == 0:
        return np.float32(0.0), np.float32(max(int(space.n) - 1, 1))
    low, high = (np.asarray(getattr(space, bound, np.nan), np.float64).reshape(-1) for bound in ("low", "high"))
    if np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high - low < 1e6) and np.all(high > low):
        return low.astype(np.float32), (high - low).astype(np.float32)
    return np.float32(0.0), np.float32(1.0)


def observation_of(space, task_id: str):
    """``(shape, dtype, image layout, convert)``: what the agent sees of an envpool observation space, and the
    function turning a batch of observations into it (module docstring)."""
    import gymnasium

    if not isinstance(space, gymnasium.spaces.Dict):
        return space.shape, host_dtype(space.dtype), None, lambda observation: observation
    entries = dict(space.spaces)
    if "state" in entries and suite_of(task_id) == "MuJoCo Playground":
        return entries["state"].shape, np.dtype(np.float32), None, lambda o: np.asarray(o["state"], np.float32)
    if "image" in entries and task_id.startswith("MiniGrid-"):
        # ids, not pixels: objects 0-10, colours 0-5, door states 0-2 (the space says 0-255)
        layout = ImageLayout(channel_axis=-1, low=0.0, high=float(MINIGRID_MAX_ID))
        return entries["image"].shape, np.dtype(np.float32), layout, lambda o: np.asarray(o["image"], np.float32)
    sizes = {key: int(np.prod(entry.shape)) for key, entry in entries.items()}
    scales = {key: _unit_scale(entry) for key, entry in entries.items()}

    def flatten(observation):
        return np.concatenate(
            [
                (np.asarray(observation[key], np.float32).reshape(len(observation[key]), sizes[key]) - scales[key][0])
                / scales[key][1]
                for key in entries
            ],
            axis=1,
        )

    return (sum(sizes.values()),), np.dtype(np.float32), None, flatten


def atari_options(sticky_action_probability: float = 0.25, full_action_space: bool = False) -> dict:
    """The keyword arguments ``envpool.make`` gets for an Atari game here (the preprocessing of the module
    docstring); rewards stay unclipped in envpool, so that raw returns stay available."""
    return dict(
        repeat_action_probability=sticky_action_probability,
        full_action_space=full_action_space,
        episodic_life=False,
        reward_clip=False,  # clipped by EnvpoolEnv, so that raw rewards stay available
        stack_num=4,
        frame_skip=4,
        img_height=84,
        img_width=84,
        gray_scale=True,
    )


class XlaStep(NamedTuple):
    """An envpool batch stepped from inside a compiled program (envpool's XLA interface, ``env.xla()``): its
    ``recv`` and ``send`` are custom calls that XLA runs where the program runs, ordered by the ``handle`` they
    thread. The batch is in environment order, as :meth:`EnvpoolEnv.recv` gives it."""

    handle: np.ndarray  # the pool, as envpool's XLA functions take it (uint8 bytes)
    recv: Callable  # recv(handle) -> (handle, TimeStep, raw reward [B]): what EnvpoolEnv.recv returns, traced
    send: Callable  # send(handle, action int32 [B]) -> handle


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
        seed: int | Sequence[int] = 0,
        num_threads: int = 0,
        thread_affinity_offset: int = -1,
        sticky_action_probability: float = 0.25,
        full_action_space: bool = False,
        clip_rewards: bool = True,
        max_episode_steps: int | None = None,
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}.")
        self.task_id = resolve_task_id(task)  # without envpool: one line naming its extra
        import envpool

        self.num_envs = num_envs
        self.atari = is_atari(self.task_id)
        # One seed per environment: seed + j for environment j (what envpool does with one seed), or as given.
        self.seeds = [int(seed) + j for j in range(num_envs)] if np.ndim(seed) == 0 else [int(s) for s in seed]
        if len(self.seeds) != num_envs:
            raise ValueError(f"{len(self.seeds)} seeds for {num_envs} environments; give one per environment.")
        kwargs = dict(
            num_envs=num_envs,
            batch_size=num_envs,
            seed=self.seeds,
            num_threads=num_threads,
            thread_affinity_offset=thread_affinity_offset,
        )
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        if self.atari:
            kwargs.update(atari_options(sticky_action_probability, full_action_space))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's Box precision warnings
            self._pool = envpool.make(self.task_id, env_type="gymnasium", **kwargs)
        self.clip_rewards = clip_rewards and self.atari
        shape, self._dtype, image, self._convert = observation_of(self._pool.observation_space, self.task_id)
        self._spec = EnvSpec(
            jax.ShapeDtypeStruct(shape, self._dtype), image=image, **actions_of(self._pool.action_space, self.task_id)
        )
        self._all = np.arange(num_envs, dtype=np.int32)
        self._episodes = HostEpisodes(num_envs)
        self.stats = self._episodes.stats
        self._xla: XlaStep | None = None

    def spec(self) -> EnvSpec:
        return self._spec

    def reset(self) -> TimeStep:
        observation, _ = self._pool.reset()
        self.stats = self._episodes.reset()
        n = self.num_envs
        return TimeStep(
            np.asarray(self._convert(observation), self._dtype),
            np.zeros(n, np.float32),
            np.ones(n, np.float32),
            np.zeros(n, bool),
        )

    def send(self, action: np.ndarray) -> None:
        """Starts a step of every environment with ``action`` (int32 ``[num_envs]``, or float32 ``[num_envs, size]``
        for continuous actions, rescaled from [-1, 1] to the bounds)."""
        self._pool.send(host_action(self._spec, action, self.num_envs), self._all)

    def recv(self) -> TimeStep:
        """Waits for the step started by :meth:`send`."""
        observation, reward, terminated, truncated, info = self._pool.recv()
        order = np.argsort(info["env_id"])
        observation = self._convert(observation)
        if not np.array_equal(order, self._all):  # envpool returns a whole batch, possibly permuted
            observation, reward, terminated, truncated = (
                x[order] for x in (observation, reward, terminated, truncated)
            )
            info = {k: v[order] for k, v in info.items() if isinstance(v, np.ndarray) and len(v) == self.num_envs}
        raw = np.asarray(info.get("reward", reward), np.float32) if self.atari else np.asarray(reward, np.float32)
        last = np.logical_or(terminated, truncated)
        self.record(raw, last)
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

    def record(self, raw_reward: np.ndarray, last: np.ndarray) -> None:
        """Counts one step of every environment in :attr:`stats` (what :meth:`recv` does; the XLA step's caller
        calls it for each step of what it received)."""
        self.stats = self._episodes.update(raw_reward, last)

    def xla_refusal(self) -> str | None:
        """Why :meth:`xla_step` cannot step this batch (one line), else ``None``: the XLA step passes observations
        and actions as envpool makes them, so they must be arrays JAX holds as they are (not float64, not a dict)
        and the actions discrete without a mask."""
        space = self._pool.observation_space
        if not hasattr(space, "dtype") or getattr(space, "spaces", None) is not None:
            return f"{self.task_id}'s observations are a dict of entries; it steps array observations"
        if jax.dtypes.canonicalize_dtype(space.dtype) != np.dtype(space.dtype):
            return f"{self.task_id}'s observations are {np.dtype(space.dtype)}, which JAX holds as float32 here"
        if not self._spec.num_actions or self._spec.action_mask:
            return f"{self.task_id}'s actions are not discrete; it steps discrete actions"
        return None

    def xla_step(self) -> XlaStep:
        """This batch's :class:`XlaStep` (made once). It steps the same pool as :meth:`send` and :meth:`recv`: a
        batch reset with :meth:`reset` and sent its first actions goes on in a program that receives."""
        if self._xla is not None:
            return self._xla
        refusal = self.xla_refusal()
        if refusal:
            raise ValueError(f"--envpool-xla: {refusal}.")
        import jax.numpy as jnp

        handle, recv, send, _ = self._pool.xla()
        atari, clip_rewards, n = self.atari, self.clip_rewards, self.num_envs

        def receive(handle):
            handle, (observation, reward, terminated, truncated, info) = recv(handle)
            order = jnp.argsort(info["env_id"])  # envpool may return the batch permuted
            take = lambda x: jnp.take(x, order, axis=0)  # noqa: E731
            observation, reward, terminated, truncated = map(take, (observation, reward, terminated, truncated))
            raw = take(info["reward"]) if atari and "reward" in info else reward
            reward = jnp.clip(reward, -1.0, 1.0) if clip_rewards else reward
            timestep = TimeStep(
                observation=observation,
                reward=reward.astype(jnp.float32),
                discount=jnp.where(terminated, 0.0, 1.0).astype(jnp.float32),
                last=jnp.logical_or(terminated, truncated),
            )
            return handle, timestep, raw.astype(jnp.float32)

        def transmit(handle, action):
            return send(handle, jnp.asarray(action, jnp.int32).reshape(n), jnp.arange(n, dtype=jnp.int32))

        self._xla = XlaStep(handle, receive, transmit)
        return self._xla

    def close(self) -> None:
        close = getattr(self._pool, "close", None)
        if close is not None:
            close()
