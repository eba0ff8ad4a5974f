"""Sebulba's lifetime: start the actor threads, run the learner loop here, stop and join every thread, re-raise.

One stop event ends every thread; an exception in any actor thread sets it, and once
every thread has been joined it is raised again in the calling thread, naming the
actor, with the original as its cause.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from podracer.sebulba.pipeline import Stopped

R = TypeVar("R")

JOIN_SECONDS = 30.0  # how long each thread gets to stop once the stop event is set


def run(learn: Callable[[], R], actors: dict[str, Callable[[], Any]], stop: threading.Event) -> R:
    """Starts one daemon thread per entry of ``actors`` (name -> function), runs ``learn()`` in this thread,
    then sets ``stop`` and joins every thread; returns what ``learn`` returned.

    The first actor failure (any exception but :class:`~podracer.sebulba.pipeline.Stopped`)
    sets ``stop`` and is raised here as ``RuntimeError("NAME failed: ...")``; a thread still
    alive after :data:`JOIN_SECONDS` is an error naming it.
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

    threads = [threading.Thread(target=guarded, args=(name, target), name=name, daemon=True)
               for name, target in actors.items()]
    try:
        for thread in threads:
            thread.start()
        result = learn()
    finally:
        stop.set()
        for thread in threads:
            if thread.ident is not None:
                thread.join(timeout=JOIN_SECONDS)
        alive = [t.name for t in threads if t.is_alive()]
        if alive:
            raise RuntimeError(f"actor threads did not stop within {JOIN_SECONDS:.0f} s: {alive}")
    if errors:
        name, error = errors[0]
        raise RuntimeError(f"{name} failed: {error!r}") from error
    return result
