"""A run's start-up, timed from the process's launch: the phases until the first progress line (imports, the
environment, compilation, the first call), said once in one line, and the XLA programs the run compiled (or
loaded from the persistent cache), counted with ``jax.monitoring``."""

from __future__ import annotations

import os
import re
import threading
import time


# Python starts and reaches its first import of podracer well within this many seconds; a process older than that at
# the import did other work first: a shell that ran pip and then exec'd the command (``bash -c 'pip ... && podracer
# anakin'``, ``srun bash -c``, a Dockerfile's ``sh -c``: the same process, its start the shell's), a notebook's kernel.
LAUNCH_SECONDS = 5.0


def _launched() -> float:
    """``time.monotonic()`` at this interpreter's launch (Linux: the process's start, from ``/proc``), or now (this
    module's import) where that start is older than :data:`LAUNCH_SECONDS` (the process did other work before this
    program: its clock starts at this program's imports) or cannot be read."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time, in clock ticks after boot
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
        return time.monotonic() - age if 0 <= age < LAUNCH_SECONDS else time.monotonic()
    except (OSError, ValueError, IndexError):
        return time.monotonic()


LAUNCH = _launched()
_lock = threading.Lock()
_marks: list[tuple[str, float]] = []  # (phase, when it ended), in order
_said = False
_programs = {"compiled": 0, "cached": 0, "seconds": 0.0}
_by_program: dict[str, float] = {}  # XLA backend seconds by program name (jit(update) -> update)
SPLIT_SECONDS = 0.5  # programs that took at least this long are named in the start-up line's compile phase

# JAX's monitoring events: one per program made ready to run (compiled, or loaded from the persistent cache), with
# its duration; and one per load from the cache.
PROGRAM_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"


def seconds() -> float:
    """Seconds since the process's launch."""
    return time.monotonic() - LAUNCH


def mark(phase: str) -> None:
    """``phase`` ended now (the next one starts): ``imports``, ``environment``, ``compile``, ``first call``..."""
    with _lock:
        _marks.append((phase, time.monotonic()))


def line() -> str | None:
    """Once per process, the start-up as one line, ``started in 9.4 s: imports 1.2 s, environment 0.3 s, compile
    7.4 s (XLA: per_device 5.4 s, learners 1.4 s), first call 0.5 s``, the programs whose XLA compilation took
    :data:`SPLIT_SECONDS` or more named in the compile phase; None after the first time."""
    global _said
    with _lock:
        if _said or not _marks:
            return None
        _said = True
        parts, before = [], LAUNCH
        slow = sorted(((s, name) for name, s in _by_program.items() if s >= SPLIT_SECONDS), reverse=True)
        split = f" (XLA: {', '.join(f'{name} {s:.1f} s' for s, name in slow)})" if slow else ""
        for phase, when in _marks:
            parts.append(f"{phase} {when - before:.1f} s" + (split if phase == "compile" else ""))
            before = when
    return f"started in {before - LAUNCH:.1f} s: {', '.join(parts)}"


def reset() -> None:
    """Forgets the phases (a second run in the same process times its own start from now)."""
    global _said, LAUNCH
    with _lock:
        _marks.clear()
        _by_program.clear()
        _said = False
        LAUNCH = time.monotonic()


def _on_duration(event: str, duration: float, **fields) -> None:
    if event == PROGRAM_EVENT:
        name = re.sub(r"^jit\((.*)\)$", r"\1", str(fields.get("fun_name", "?")))
        with _lock:
            _programs["compiled"] += 1
            _programs["seconds"] += duration
            _by_program[name] = _by_program.get(name, 0.0) + duration


def _on_event(event: str, **_) -> None:
    if event == CACHE_HIT_EVENT:
        with _lock:
            _programs["cached"] += 1


_listening = False


def count_programs() -> None:
    """Starts counting the XLA programs this process makes ready (idempotent); :func:`programs` reads the count."""
    global _listening
    if _listening:
        return
    import jax

    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    jax.monitoring.register_event_listener(_on_event)
    _listening = True


def programs() -> dict[str, float]:
    """``{"compiled": N, "cached": M, "seconds": S}``: programs made ready since :func:`count_programs` (``cached``
    of them loaded from the persistent compilation cache), and the seconds that took."""
    with _lock:
        return dict(_programs)


def programs_said(before: dict[str, float] | None = None) -> str:
    """The count as the run's last line says it: ``5 XLA programs, 2 from the cache``, since ``before``."""
    now = programs()
    if before:
        now = {k: now[k] - before[k] for k in now}
    cached = f", {int(now['cached'])} from the cache" if now["cached"] else ""
    return f"{int(now['compiled'])} XLA program{'s' if now['compiled'] != 1 else ''}{cached}"


__all__ = ["LAUNCH", "count_programs", "line", "mark", "programs", "programs_said", "reset", "seconds"]
