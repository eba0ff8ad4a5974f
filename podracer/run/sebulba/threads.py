"""Sebulba's lifetime: start the actor threads, run the learner loop here, stop and join every thread, re-raise.

One stop event ends every thread; an exception in any actor thread sets it, and once
every thread has been joined it is raised again in the calling thread, naming the
actor, with the original as its cause.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from podracer.run.sebulba.pipeline import Stopped

R = TypeVar("R")

JOIN_SECONDS = 30.0  # how long each thread gets to stop once the stop event is set


class ActorFailed(RuntimeError):
    """An actor thread ``thread`` raised ``error``, or stopped answering (``error`` None; ``thread`` "watch"): the run
    stopped. ``doing``: what the thread was doing then (``environment``, ``inference``, ...), where known."""

    def __init__(self, message: str, thread: str, error: BaseException | None = None):
        super().__init__(message)
        self.thread, self.error, self.doing = thread, error, None


def run(
    learn: Callable[[], R],
    actors: dict[str, Callable[[], Any]],
    stop: threading.Event,
    watch: Callable[[], str | None] | None = None,
) -> R:
    """Starts one daemon thread per entry of ``actors`` (name -> function), runs ``learn()`` in this thread,
    then sets ``stop`` and joins every thread; returns what ``learn`` returned.

    The first actor failure (any exception but :class:`~podracer.run.sebulba.pipeline.Stopped`)
    sets ``stop`` and is raised here as :class:`ActorFailed` (``"NAME failed: ..."``); a thread still
    alive after :data:`JOIN_SECONDS` is an error naming it. ``watch()`` runs every second
    while the run lasts; a message from it (a stuck actor) stops the run and is raised here (:class:`ActorFailed`).
    """
    errors: list[tuple[str, BaseException]] = []

    def guarded(name: str, target: Callable[[], Any]) -> None:
        try:
            target()
        except Stopped:
            pass
        except BaseException as error:  # noqa: BLE001 - any failure ends the run
            errors.append((name, error))
            stop.set()

    threads = [
        threading.Thread(target=guarded, args=(name, target), name=name, daemon=True) for name, target in actors.items()
    ]
    if watch is not None:

        def watching():
            while not stop.wait(1.0):
                message = watch()
                if message:
                    errors.append(("watch", RuntimeError(message)))
                    stop.set()

        threads.append(threading.Thread(target=watching, name="actor-watch", daemon=True))
    try:
        for thread in threads:
            thread.start()
        result = learn()
    finally:
        stop.set()
        stuck = any(name == "watch" for name, _ in errors)  # a stuck thread will not stop: do not wait for it
        for thread in threads:
            if thread.ident is not None:
                thread.join(timeout=1.0 if stuck else JOIN_SECONDS)
        alive = [t.name for t in threads if t.is_alive()]
        if alive and not stuck:
            raise RuntimeError(f"actor threads did not stop within {JOIN_SECONDS:.0f} s: {alive}")
    if errors:
        name, error = errors[0]
        if name == "watch":
            raise ActorFailed(str(error), name)
        raise ActorFailed(f"{name} failed: {error!r}", name, error) from error
    return result
