"""JAX's persistent compilation cache as podracer uses it: where it lives, turned on for every program, and its
directory kept readable by JAX 0.10's eviction."""

from __future__ import annotations

import os

from podracer.run.disk import writable_directory


def compile_cache_dir(directory: str | None = None) -> str:
    """``directory``, or podracer's default for JAX's persistent compilation cache."""
    if directory:
        return directory
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "podracer", "jax")


COMPILE_CACHE_MAX_BYTES = 4 * 2**30  # the persistent compilation cache keeps the most recently used 4 GiB
# Programs that compile faster than this are compiled again rather than kept. JAX's bounded cache reads every
# entry's size and access time before each write (jax/_src/lru_cache.py, JAX 0.10 and 0.12), so a write costs in
# proportion to the entries kept: 0.12 s at 1,286 entries here, and the fast tier of the tests, which kept every
# program, spent more time writing its cache than compiling (three test files: 104 s of their 140). A run's own
# programs (rollout, update, evaluation) take longer than this; the programs below it are the many small ones
# (a key split, an eager op), 97 % of the tests' compilations and under half their compile seconds.
COMPILE_CACHE_MIN_SECONDS = 0.1


def use_compile_cache(directory: str | None = None) -> str:
    """Turns on JAX's persistent compilation cache in ``directory`` (default: :func:`compile_cache_dir`) for
    every program that takes :data:`COMPILE_CACHE_MIN_SECONDS` or more to compile: a second run with the same
    settings loads them instead of compiling (``examples/anakin_catch.py``: 6.3 s, then 2.6 s, here). Call it in
    an entry point before anything compiles. Returns the directory."""
    import jax

    directory = compile_cache_dir(directory)
    check_compile_cache_dir(directory)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", COMPILE_CACHE_MIN_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # A size bound turns on JAX's least-recently-used eviction, and with it a file lock around every read and
    # write of the directory. Without it an entry is written in place, unlocked, so a second process (a preview
    # beside its training run, two runs at once) can read a half-written program, which aborts the process.
    jax.config.update("jax_compilation_cache_max_size", COMPILE_CACHE_MAX_BYTES)
    adopt_orphans(directory)
    return directory


def check_compile_cache_dir(directory: str) -> None:
    """Makes ``directory`` if needed; a one-line ``ValueError`` naming ``--compile-cache-dir`` when it is a file,
    cannot be made or cannot be written."""
    writable_directory(directory, f"--compile-cache-dir {directory!r}", "or pass --no-compile-cache")


def adopt_orphans(directory: str) -> int:
    """Gives every cache entry without its access-time file (entries an unbounded cache wrote, or a write cut
    short) an empty one, which JAX reads as time 0: the entry is evicted first. JAX 0.10's eviction reads every
    entry's access time, so one orphan makes every later write fail (jax-ml/jax issue 39880, fixed after 0.10).
    Returns how many were adopted."""
    adopted = 0
    for name in os.listdir(directory):
        if name.endswith("-cache"):
            atime = os.path.join(directory, name.removesuffix("-cache") + "-atime")
            if not os.path.exists(atime):
                try:
                    with open(atime, "xb"):
                        adopted += 1
                except FileExistsError:  # another process adopted it first
                    pass
    return adopted


__all__ = [
    "COMPILE_CACHE_MAX_BYTES",
    "COMPILE_CACHE_MIN_SECONDS",
    "adopt_orphans",
    "check_compile_cache_dir",
    "compile_cache_dir",
    "use_compile_cache",
]
