"""Disk room and writable directories: the one-line errors of a full disk and of a directory that cannot be
written, and sizes as people read them."""

from __future__ import annotations

import os
import re
import shutil


class DiskFull(ValueError):
    """No room on the device for a checkpoint or a metrics line: the message is one line naming the path, the
    space needed and the space free; the newest complete checkpoint is left as it was."""


def size(n: float) -> str:
    """Bytes as people read them: "0.5 MB", "23.5 GB", "16.1 TB"."""
    for unit, scale in (("TB", 2**40), ("GB", 2**30)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 2**20:,.1f} MB"


def writable_directory(directory: str, what: str, hint: str = "") -> None:
    """Makes ``directory`` if needed; a one-line ``ValueError`` starting with ``what`` (a flag and its value) when
    it is a file, cannot be made or cannot be written; ``hint`` ends the message."""
    end = f" ({hint})." if hint else "."
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"{what} is a file, not a directory{end}")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise ValueError(f"{what} cannot be created: {error.strerror}{end}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"{what} is not writable{end}")


UNFINISHED = re.compile(r"\.orbax-checkpoint-tmp|\.json\.tmp$")  # what a save cut short leaves behind


def remove_unfinished(directory: str, process: int, main: bool) -> list[str]:
    """Removes what saves cut short by a kill left in the checkpoint ``directory``: orbax's temporary folders and
    half-written metadata (the main process: at the top; process ``process``: in its own part of each run state).
    Returns their paths relative to ``directory``, sorted. Call it before the run writes there (its lock held)."""
    if not os.path.isdir(directory):
        return []
    found = [name for name in os.listdir(directory) if main and UNFINISHED.search(name)]
    for run in (name for name in os.listdir(directory) if name.endswith(".run")):
        mine = f"process_{process}"
        found += [os.path.join(run, n) for n in os.listdir(os.path.join(directory, run)) if n.startswith(mine + ".")]
    for name in found:
        path = os.path.join(directory, name)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)
    return sorted(found)


__all__ = ["DiskFull", "remove_unfinished", "size", "writable_directory"]
