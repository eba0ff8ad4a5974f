"""A run's directory on disk: a new one by default (``runs/ENV__AGENT__SEED__TIME``), the one a resume continues,
or the one ``--log-dir`` gives, checked before the run starts."""

from __future__ import annotations

import os

from podracer.run.disk import writable_directory


RUNS_DIR = "PODRACER_RUNS_DIR"  # where the command line's default log directories go; unset: ./runs
MADE: set[str] = set()  # the run directories this process made (default_log_dir): the only ones it may discard


def default_log_dir(env: str, agent: str, seed: int, root: str | None = None) -> str:
    """A new directory ``ROOT/ENV__AGENT__SEED__TIME`` (``$PODRACER_RUNS_DIR``, else ``runs``), made now: two runs
    started in the same second get ``-2``, ``-3`` ... (made atomically, so that each directory has one writer)."""
    import re
    import time

    root = root or os.environ.get(RUNS_DIR) or "runs"
    writable_directory(root, f"the runs directory {root!r}", f"pass --log-dir, --no-log-dir or set ${RUNS_DIR}")
    stem = "__".join((re.sub(r"[^A-Za-z0-9._-]+", "-", env), agent, str(seed), time.strftime("%Y%m%d-%H%M%S")))
    for attempt in range(1, 1000):
        path = os.path.join(root, stem if attempt == 1 else f"{stem}-{attempt}")
        try:
            os.mkdir(path)
            MADE.add(path)
            return path
        except FileExistsError:
            continue
    raise ValueError(f"the runs directory {root!r} holds 999 runs named {stem}: pass --log-dir.")


def resumed_log_dir(cfg) -> tuple[str | None, str | None]:
    """``(log directory, fork)``: the record that ``--resume`` (yes or auto) continues from ``--checkpoint-dir``, as
    its newest checkpoint records it, where that directory is still there and the checkpoint was written in this
    very checkpoint directory (a record has one owner: the run whose checkpoint directory wrote it); else None, and,
    when the checkpoints were written in another directory (``--checkpoint-dir`` is a copy: a fork), what the fork
    leaves alone, in words."""
    if not cfg.checkpoint_dir or cfg.resume == "no":
        return None, None
    from podracer.run import checkpoint

    try:  # the newest checkpoint's JSON alone: nothing here may start JAX before the devices are set
        if not checkpoint.steps(cfg.checkpoint_dir):
            return None, None
        metadata, _ = checkpoint.newest_metadata(cfg.checkpoint_dir)  # the one the run resumes: the newest that reads
    except (OSError, ValueError):  # no intact checkpoint: the run's own checks say so
        return None, None
    recorded, written = metadata.get("log_dir"), metadata.get("written_in")
    if not recorded or not os.path.isdir(recorded):
        return None, None
    if written and not checkpoint.same_directory(written, cfg.checkpoint_dir):
        return None, f"the record {recorded} belongs to the run whose checkpoints {written['path']} holds"
    return recorded, None


def discard_if_untrained(path: str) -> bool:
    """Removes the run directory ``path``, made for a command that was then refused, where it holds no record of
    training (no line in ``metrics.jsonl``, no checkpoint): a refused command leaves nothing behind. A directory
    that a resume continues is never passed here (only one made for this command)."""
    import shutil

    metrics = os.path.join(path, "metrics.jsonl")
    if path not in MADE or not os.path.isdir(path) or (os.path.isfile(metrics) and os.path.getsize(metrics) > 0):
        return False
    if any(name.startswith("step_") for _, dirs, files in os.walk(path) for name in dirs + files):
        return False  # a checkpoint (the Python API's default --checkpoint-dir is inside the run directory)
    shutil.rmtree(path, ignore_errors=True)
    return True


def settle_log_dir(cfg):
    """``cfg`` with its log directory settled for the command line (the main process): ``--log-dir`` checked (a file,
    or not writable: one line), else a new :func:`default_log_dir` unless ``--no-log-dir``; and the line to say."""
    import dataclasses

    if cfg.log_dir:
        if cfg.no_log_dir:
            raise ValueError("--log-dir and --no-log-dir: pass one of them.")
        writable_directory(cfg.log_dir, f"--log-dir {cfg.log_dir!r}")
        return cfg, None
    if cfg.no_log_dir:
        return cfg, None
    resumed, fork = resumed_log_dir(cfg)
    if resumed:  # a requeued job keeps one record: the directory of the run it resumes
        return dataclasses.replace(cfg, log_dir=resumed), f"logging to {resumed}, the record of the run it resumes"
    path = default_log_dir(cfg.env, cfg.agent_name, cfg.seed)
    if fork:  # --checkpoint-dir is a copy of another run's: the fork starts a record of its own
        return dataclasses.replace(cfg, log_dir=path), (
            f"logging to {path}: --checkpoint-dir {cfg.checkpoint_dir} is a copy, and {fork}, which this fork leaves "
            "as it is (--log-dir chooses another)"
        )
    return dataclasses.replace(cfg, log_dir=path), f"logging to {path} (metrics.jsonl, TensorBoard; --no-log-dir: none)"


__all__ = ["RUNS_DIR", "default_log_dir", "discard_if_untrained", "resumed_log_dir", "settle_log_dir"]
