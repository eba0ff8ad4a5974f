"""What flows between Sebulba's threads: trajectories (actors -> learner) and parameters (learner -> actors)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax

from podracer.run import parallel


class Stopped(Exception):
    """Raised inside a thread when the run's stop event is set while it waits."""


class ParamStore:
    """The newest parameters, copied to every actor device when the learner publishes them.

    Actors read without blocking (``latest``); ``version`` counts learner updates, so an
    actor can tell how far its policy lags.
    """

    def __init__(self, actor_devices: Sequence[jax.Device]):
        self._devices = list(actor_devices)
        self._lock = threading.Lock()
        self._published = threading.Condition(self._lock)
        self._ready = threading.Event()
        self._params: dict[jax.Device, Any] = {}
        self._version = -1
        self._first = 0  # the version first published: the updates done before this run (a resume's)
        self._started = 0  # trajectories this process's actors have started (each call of latest starts one)

    def publish(self, params, version: int) -> None:
        placed = parallel.broadcast(params, self._devices)
        with self._published:
            if not self._ready.is_set():
                self._first = version
            self._params, self._version = placed, version
            self._published.notify_all()
        self._ready.set()

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def latest(self, device: jax.Device, stop: threading.Event, timeout: float = 0.1, max_lag: int | None = None):
        """``(params on device, version)`` for a trajectory an actor starts now; waits until the first publish,
        and with ``max_lag`` until the learner has taken every trajectory started before this one but ``max_lag``.
        0 is on-policy whatever the actor threads: one trajectory at a time, learned from with the parameters that
        acted it."""
        while not self._ready.wait(timeout):
            if stop.is_set():
                raise Stopped
        with self._published:
            while max_lag is not None and self._version < self._first + self._started - max_lag:
                if stop.is_set():
                    raise Stopped
                self._published.wait(timeout)
            self._started += 1
            return self._params[device], self._version


class ActorStatus:
    """What one actor thread is doing (``environment``, ``inference``, ``parameters``, ``queue``, ``learner``: the
    wait of ``--max-policy-lag``) and when it last shipped a trajectory: for the stuck-actor check and the heartbeat
    line."""

    def __init__(self, name: str, device: jax.Device):
        self.name, self.device = name, device
        self.doing, self.since = "starting", time.monotonic()
        self.last_trajectory, self.acting = self.since, False

    def now(self, doing: str) -> None:
        self.doing, self.since = doing, time.monotonic()

    def shipped(self) -> None:
        self.last_trajectory = time.monotonic()

    def first_parameters(self, store: ParamStore, device: jax.Device, stop: threading.Event, max_lag=None):
        """``store.latest(device, stop, max_lag=max_lag)``, the thread's first parameters; its clock starts once it
        holds them (the wait for them is the learner's start-up, or another actor's trajectory under max_lag)."""
        self.now("parameters")
        params_and_version = store.latest(device, stop, max_lag=max_lag)
        self.last_trajectory, self.acting = time.monotonic(), True
        return params_and_version

    def stuck_seconds(self, now: float) -> float:
        """Seconds without a trajectory since the thread could first act, not counting a wait for room in the queue
        or for the learner's first parameters (the learner's pace: its compile, on a busy machine)."""
        waiting_on_learner = self.doing in ("queue", "learner") or not self.acting
        return 0.0 if waiting_on_learner else now - self.last_trajectory

    def describe(self, now: float) -> str:
        return f"{self.name} waits on its {self.doing} ({now - self.since:.0f} s)"


class Rollout(NamedTuple):
    """One actor thread's contribution to one learner update."""

    trajectory: Any  # Trajectory with a leading axis of learner devices, already on them
    policy_version: int  # the parameter version that acted
    episode_returns: list[float]  # raw returns of the episodes that ended in it
    episode_lengths: list[int]
    actor_seconds: dict[str, float]  # where the actor's time went: env, act, ship, put_wait


class StopAwareQueue:
    """A bounded queue whose ``put`` and ``get`` give up when the run stops."""

    def __init__(self, maxsize: int):
        self._queue: queue.Queue = queue.Queue(maxsize)

    def put(self, item, stop: threading.Event, poll: float = 0.05) -> float:
        """Blocks while full; returns the seconds spent waiting."""
        start = time.perf_counter()
        while True:
            try:
                self._queue.put(item, timeout=poll)
                return time.perf_counter() - start
            except queue.Full:
                if stop.is_set():
                    raise Stopped from None

    def get(self, stop: threading.Event, poll: float = 0.05):
        """Blocks while empty; returns ``(item, seconds spent waiting)``."""
        start = time.perf_counter()
        while True:
            try:
                return self._queue.get(timeout=poll), time.perf_counter() - start
            except queue.Empty:
                if stop.is_set():
                    raise Stopped from None

    def qsize(self) -> int:
        return self._queue.qsize()
