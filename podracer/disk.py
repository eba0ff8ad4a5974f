"""Disk room and writable directories: the one-line errors of a full disk and of a directory that cannot be
written, and sizes as people read them."""

from __future__ import annotations

import os


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


__all__ = ["DiskFull", "size", "writable_directory"]
