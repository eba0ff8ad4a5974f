"""One writer per directory: a run holds a lock on its checkpoint and log directories for as long as it lives.

The lock is ``fcntl.flock`` on ``DIR/.podracer.lock``: the kernel releases it when the process ends, however it ends
(``kill -9`` included), so a dead run never leaves a stale lock behind. The file names its holder (host, process id,
start time, command line) for the message that refuses a second run. Where the file system has no ``flock`` (some
network file systems), the holder's record decides instead: a record of a live process on this host, or of another
host, refuses; a record of a process of this host that is gone is stale and taken over. Readers (``podracer
preview``, ``podracer evaluate``) take no lock.

Written by hand rather than with ``filelock.FileLock`` (which podracer uses for JAX's compilation cache): filelock 3.x
opens its lock file with ``O_TRUNC`` before it tries the lock, so a refused run would erase the holder's record that
the refusal names.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator

from podracer.run import disk

LOCK_NAME = ".podracer.lock"

_held: dict[str, list] = {}  # real path -> [file descriptor, depth]: a process may enter its own lock again


def _record() -> str:
    return json.dumps(
        {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(sys.argv),
        }
    )


def _read(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 1 << 16).decode() or "{}")
    except (OSError, ValueError):
        return {}


def _alive(record: dict) -> bool:
    """Whether ``record``'s process may still run: on another host it cannot be told, so it may."""
    if record.get("host") != socket.gethostname():
        return bool(record)
    try:
        os.kill(int(record["pid"]), 0)
    except (KeyError, ValueError, ProcessLookupError):
        return False
    except PermissionError:  # alive, another user's
        return True
    return int(record["pid"]) != os.getpid()


def _describe(record: dict) -> str:
    if not record:
        return "a run whose record cannot be read"
    return (
        f"process {record.get('pid')} on {record.get('host')}, started {record.get('started')}: "
        f"{record.get('command', '')}".rstrip(": ")
    )


def _acquire(directory: str, flag: str) -> int:
    disk.writable_directory(directory, f"{flag} {directory!r}")  # a file, or a path that cannot be written: one line
    fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = _read(fd)
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN) or _alive(holder):
            os.close(fd)
            raise ValueError(
                f"{flag} {directory!r} is in use by another run ({_describe(holder)}): one run writes to a directory "
                f"at a time; wait for that run to end, or choose another {flag}."
            ) from None
        # no flock on this file system, and the holder's process is gone: its record is stale
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, _record().encode())
    os.fsync(fd)
    return fd


def _release(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)  # the file stays (removing it would race a run that opened it a moment ago)
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


@contextlib.contextmanager
def hold(directories: dict[str, str | None], enabled: bool = True) -> Iterator[None]:
    """Holds the lock of each directory (flag -> path; None skipped, a path named twice locked once) for the
    block; a directory another run holds is a one-line ``ValueError`` naming the flag and the holder.
    ``enabled=False`` (the other processes of a multi-process run: process 0 holds the run's locks) does nothing."""
    taken: list[str] = []
    try:
        for flag, directory in directories.items():
            if not enabled or directory is None:
                continue
            path = os.path.realpath(directory)
            if path in taken:
                continue
            if path in _held:
                _held[path][1] += 1
            else:
                _held[path] = [_acquire(directory, flag), 1]
            taken.append(path)
        yield
    finally:
        for path in reversed(taken):
            _held[path][1] -= 1
            if _held[path][1] == 0:
                _release(_held.pop(path)[0])


def holder(directory: str) -> dict:
    """The record of the run that holds (or last held) ``directory``'s lock; empty when none does."""
    try:
        with open(os.path.join(directory, LOCK_NAME), encoding="utf-8") as f:
            return json.loads(f.read() or "{}")
    except (OSError, ValueError):
        return {}


__all__ = ["LOCK_NAME", "hold", "holder"]
