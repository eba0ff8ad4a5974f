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


def _resumed_metadata(cfg) -> dict | None:
    """The metadata of the checkpoint ``--resume`` (yes or auto) continues from (the newest whose JSON reads), else
    None. Its JSON alone, read here without asking the other processes (that starts JAX): nothing here may start JAX
    before the devices are set."""
    if not cfg.checkpoint_dir or cfg.resume == "no":
        return None
    from podracer.run import checkpoint

    try:
        found = checkpoint.steps(cfg.checkpoint_dir)
    except (OSError, ValueError):
        return None
    for step in reversed(found):  # this process's own reading (the run's restore agrees across processes later)
        try:
            return checkpoint.read_metadata(cfg.checkpoint_dir, step)
        except ValueError:  # unreadable: the run's restore says so and takes the one before
            continue
    return None


def _not_in_use(cfg) -> None:
    """The one-line refusal of :func:`podracer.run.runlock.hold` when another run holds ``--checkpoint-dir`` or an
    existing ``--log-dir`` (the lock is taken and let go at once; the run takes it for good later): a live run's
    record runs past its newest checkpoint, and a second command line on it is refused as the lock refuses it, not
    as a record past its checkpoint."""
    from podracer.run import runlock

    log_dir = cfg.log_dir if cfg.log_dir and os.path.isdir(cfg.log_dir) else None
    with runlock.hold({"--checkpoint-dir": cfg.checkpoint_dir, "--log-dir": log_dir}):
        pass


def resumed_log_dir(cfg, metadata: dict | None = None) -> tuple[str | None, str | None]:
    """``(log directory, why another)``: the record that ``--resume`` (yes or auto) continues from
    ``--checkpoint-dir``, as its newest checkpoint records it, where that directory is still there, the checkpoint
    was written in this very checkpoint directory (a record has one owner: the run whose checkpoint directory wrote
    it) and the record holds no line past that checkpoint (an attempt that saved none after them: the resume would
    write those steps again); else None, and, for those two cases, why the record is left alone, in words."""
    from podracer.run import checkpoint, logging

    metadata = metadata or _resumed_metadata(cfg)  # given: the caller read it already
    if metadata is None:
        return None, None
    recorded, written = metadata.get("log_dir"), metadata.get("written_in")
    if not recorded or not os.path.isdir(recorded):
        return None, None
    if written and not checkpoint.same_directory(written, cfg.checkpoint_dir):
        return None, (
            f"--checkpoint-dir {cfg.checkpoint_dir} is a copy, and the record {recorded} belongs to the run whose "
            f"checkpoints {written['path']} holds, which this fork leaves as it is"
        )
    env_steps = metadata.get("env_steps")
    later = logging.records_after(os.path.join(recorded, "metrics.jsonl"), env_steps) if env_steps is not None else 0
    if later:
        return None, (
            f"the record {recorded} holds {later} line(s) past step_{metadata.get('updates')} ({env_steps:,} env "
            "steps), the checkpoint this run resumes, which this resume leaves as they are"
        )
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
        metadata = _resumed_metadata(cfg)
        if metadata is not None and metadata.get("env_steps") is not None:  # before anything starts: one line
            from podracer.run import logging

            _not_in_use(cfg)  # a live run's record goes past its checkpoint: its lock's line, not this one
            logging.check_no_records_after(cfg.log_dir, metadata["env_steps"], metadata.get("updates"))
        return cfg, None
    if cfg.no_log_dir:
        return cfg, None
    metadata = _resumed_metadata(cfg)
    if metadata is not None:
        _not_in_use(cfg)
    resumed, elsewhere = resumed_log_dir(cfg, metadata)
    if resumed:  # a requeued job keeps one record: the directory of the run it resumes
        return dataclasses.replace(cfg, log_dir=resumed), f"logging to {resumed}, the record of the run it resumes"
    path = default_log_dir(cfg.env, cfg.agent_name, cfg.seed)
    if elsewhere:  # a fork, or a record past the checkpoint: the resume starts a record of its own
        return dataclasses.replace(cfg, log_dir=path), f"logging to {path}: {elsewhere} (--log-dir chooses another)"
    return dataclasses.replace(cfg, log_dir=path), logging_to(path)


def logging_to(path: str, off: str = "--no-log-dir") -> str:
    """What a run says of the run directory made for it (``off``: how its caller asks for none)."""
    return f"logging to {path} (metrics.jsonl, TensorBoard; {off}: none)"


__all__ = ["RUNS_DIR", "default_log_dir", "discard_if_untrained", "logging_to", "resumed_log_dir", "settle_log_dir"]
