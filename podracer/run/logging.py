"""Metrics sinks: a progress line on the console, ``metrics.jsonl``, TensorBoard events and Weights & Biases.

Only the main process (process 0) writes; :func:`make_logger` gives other processes
a logger with no sinks.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TextIO


class Sink(Protocol):
    def write(self, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


def _finite_or_none(value: float):
    value = float(value)
    return value if math.isfinite(value) else None


class ConsoleSink:
    """One progress line per log step: seconds since ``started`` (``time.monotonic()``; default: the sink's creation),
    env steps (of ``total_env_steps``, with the time left at the pace since the first line: ``eta 1m05s``), env
    steps/s, mean episode return, and chosen extras."""

    def __init__(
        self,
        total_env_steps: float | None = None,
        keys: Sequence[str] = (),
        stream: TextIO | None = None,
        started: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total = total_env_steps
        self.keys = tuple(keys)
        self.stream = stream or sys.stdout
        self.clock = clock
        self.start = clock() if started is None else started
        self.first: tuple[float, float] | None = None  # (env steps, time) of the first line: the pace counts from it

    def write(self, metrics: Mapping[str, float]) -> None:
        steps, now = metrics.get("env_steps", float("nan")), self.clock()
        progress = f"{steps:>12,.0f}"
        if self.total:
            progress += f"/{self.total:,.0f} ({100 * steps / self.total:5.1f}%{self.eta(steps, now)})"
        if self.first is None and math.isfinite(steps):
            self.first = (steps, now)
        parts = [
            f"[{now - self.start:7.1f}s]",
            f"env steps {progress}",
            f"sps {metrics.get('sps', float('nan')):>10,.0f}",
            _return_shown(metrics),
        ]
        parts += [f"{k} {metrics[k]:.4g}" for k in self.keys if k in metrics]
        print(" | ".join(parts), file=self.stream, flush=True)

    def eta(self, steps: float, now: float) -> str:
        """``, eta 1m05s``: the time the rest of the run takes at the pace since the first line (compilation and
        start-up left out); "" before a pace is known."""
        left = time_left(self.total, self.first, steps, now)
        return "" if left is None else f", eta {duration(left)}"

    def close(self) -> None:
        pass


def time_left(total: float, first: tuple[float, float] | None, steps: float, now: float) -> float | None:
    """Seconds until ``total`` env steps at the pace since ``first`` (``(env steps, time)`` of the first progress
    line) with ``steps`` done at ``now``: the one eta of a run, its progress lines' and its heartbeat's; None before
    a pace is known."""
    if first is None or not steps > first[0] or not now > first[1]:
        return None
    return max(total - steps, 0.0) * (now - first[1]) / (steps - first[0])


def duration(seconds: float) -> str:
    """``12s``, ``4m05s``, ``2h03m``: a span as a person reads it."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _return_shown(metrics: Mapping[str, float]) -> str:
    """The progress line's return: the window's mean episode return, or, when no episode ended in the window (an
    episode longer than a log window), that, rather than ``nan``."""
    value = metrics.get("episode_return", float("nan"))
    if not math.isfinite(value) and metrics.get("episodes", 1) == 0:
        return "return (no episode ended in this window)"
    return f"return {value:8.3f}"


# The greedy evaluation and the training return disagree when they are further apart than this share of the larger
# (and at least DISAGREE_FLOOR): the closing line then says so.
DISAGREE, DISAGREE_FLOOR = 0.1, 0.1


def training_window(history: Sequence[Mapping[str, float]], key: str = "episode_return"):
    """``(record, note)``: the last window in which an episode ended (``key``: a float, or a list per seed), and what
    the closing line adds when that window is not the last one ("" when it is); the last window, with its note, when
    no episode ended in the run."""
    for back, record in enumerate(reversed(history)):
        value = record.get(key)
        values = value if isinstance(value, (list, tuple)) else [value]
        if value is not None and all(math.isfinite(v) for v in values):
            if back == 0:
                return record, ""
            return (
                record,
                f" (no episode ended in the last window; this is the window to {record['env_steps']:,.0f} env steps)",
            )
    return history[-1], " (no episode ended in the run)"


def episodes_said(count, per_seed: bool = False) -> str:
    """`` over N episodes`` (`` per seed`` for a mean over seeds): how many training episodes a return averages;
    "" where the records do not count them."""
    if count is None or not math.isfinite(count):
        return ""
    shown = f"{count:,.0f}" if float(count).is_integer() or count >= 100 else f"{count:.1f}"
    return f" over {shown} episode{'' if count == 1 else 's'}{' per seed' if per_seed else ''}"


def closing(
    history: Sequence[Mapping[str, float]], policy: str = "greedy", opponent: str | None = None, self_play: bool = False
) -> tuple[str, float]:
    """The run's closing figure and its words: the evaluation at the end when the run made one (of the ``policy``
    that ``--eval-policy`` names), with the training return beside it (and whether they disagree), else the training
    return, named as such with the episodes it averages; never a ``nan`` where an earlier window had a value.

    A two-player game names what each figure played against (``opponent``: the environment's ``opponent_name``);
    ``self_play``: the training episodes are self-play games and its evaluations play random legal moves, two kinds
    of figure that are not compared."""
    window, note = training_window(history)
    trained = window.get("episode_return", float("nan"))
    last = history[-1]
    trained_against = f" against {opponent}" if opponent and not self_play else ""
    if "eval_return" not in last:
        over = episodes_said(window.get("episodes"), "episode_return_per_seed" in window)
        kind = "self-play training return" if self_play else "training return"
        return f"final {kind} {trained:.3f}{over}{trained_against}{note}", trained
    evaluated = last["eval_return"]
    if self_play:
        text = (
            f"final {policy} evaluation return {evaluated:.3f} against random legal moves (wins minus losses); "
            f"self-play training return {trained:.3f}{note}"
        )
        return text, evaluated
    text = (
        f"final {policy} evaluation return {evaluated:.3f}{trained_against}; training return {trained:.3f}"
        f"{trained_against}{note}"
    )
    if math.isfinite(evaluated) and math.isfinite(trained):
        gap = abs(evaluated - trained)
        if gap > max(DISAGREE * max(abs(evaluated), abs(trained)), DISAGREE_FLOOR):
            plays = "which evaluate --greedy plays" if policy == "greedy" else "as evaluate plays it"
            text += (
                f" (they disagree by {gap:.3f}: the {policy} policy, {plays}, scores {evaluated:.3f} on fresh "
                f"environments; the training episodes {trained:.3f})"
            )
    return text, evaluated


# A log line is written only while its device has this much room: a full disk ends the run with one line
# (disk.DiskFull) before any sink fails halfway, and the run saves no checkpoint past its last line.
LOG_ROOM_BYTES = 1 << 20


def check_room(log_dir: str) -> None:
    """A one-line :class:`podracer.run.disk.DiskFull` when the device holding ``log_dir`` is (nearly) full."""
    import shutil

    from podracer.run.disk import DiskFull, size

    free = shutil.disk_usage(log_dir).free
    if free < LOG_ROOM_BYTES:
        raise DiskFull(
            f"--log-dir {log_dir!r}: no room for the next metrics line: the device has {size(free)} "
            f"free, less than the {size(LOG_ROOM_BYTES)} podracer keeps; free some space and "
            "continue with --resume, into another --log-dir where this one holds lines past the newest checkpoint "
            "(nothing is lost or written twice)."
        )


@contextlib.contextmanager
def _disk_errors(log_dir: str, what: str):
    """A device that fills while ``what`` is written (another writer took the room): one line naming it
    (:class:`podracer.run.disk.DiskFull`), not the ``OSError``'s traceback."""
    try:
        yield
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        from podracer.run.disk import DiskFull

        raise DiskFull(
            f"--log-dir {log_dir!r}: the device is full (writing {what}); free some space and continue with "
            "--resume, into another --log-dir where this one holds lines past the newest checkpoint (nothing is lost "
            "or written twice)."
        ) from None


def records_after(path: str, env_steps: float) -> int:
    """How many records of ``path`` (a ``metrics.jsonl``; none where it is missing) are past ``env_steps``."""
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip() and (json.loads(line).get("env_steps") or 0) > env_steps)


def check_no_records_after(log_dir: str, env_steps: float, checkpoint_step: int) -> None:
    """A resume from the checkpoint of ``env_steps`` writes the record on from there: a ``--log-dir`` whose
    ``metrics.jsonl`` goes past it (an attempt that saved no checkpoint after those lines) is refused in one line, as
    it would hold those steps twice, and nothing written is dropped. (Without ``--log-dir`` the command line opens a
    new run directory instead: :func:`podracer.run.rundir.resumed_log_dir`.)"""
    later = records_after(os.path.join(log_dir, "metrics.jsonl"), env_steps)
    if later:
        raise ValueError(
            f"--log-dir {log_dir!r} holds {later} line(s) past step_{checkpoint_step} ({env_steps:,.0f} env steps), "
            "the checkpoint this run resumes: resuming there would write those steps twice; choose another --log-dir "
            "(or leave it out: a new run directory)."
        )


def start_fresh(log_dir: str | None, resume: str) -> None:
    """A run starts fresh in ``log_dir`` (nothing to resume from): its ``metrics.jsonl`` never gets a second series.
    Records already there are refused in one line for a run not asked to resume (``--resume no``); under ``--resume
    auto`` they are an earlier attempt's that saved no checkpoint, and are dropped, as a resume drops the lines after
    its checkpoint."""
    path = os.path.join(log_dir or "", "metrics.jsonl")
    if not log_dir or not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    if resume == "no":
        with open(path, encoding="utf-8") as f:
            count = sum(1 for line in f if line.strip())
        raise ValueError(
            f"--log-dir {log_dir!r} already holds the records of another run ({count} lines in metrics.jsonl): a "
            "fresh run there would add a second series; choose another --log-dir (or --resume that run)."
        )
    open(path, "w", encoding="utf-8").close()


def new_run_id() -> str:
    """A run's identity in its logs: start time, host, process id and 4 random hex digits
    (``20261124-101502-myhost-4242-9f3a``), so two runs started in the same second stay apart."""
    import secrets
    import socket

    host = "".join(c if c.isalnum() or c in "-_" else "-" for c in socket.gethostname())[:32] or "host"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{host}-{os.getpid()}-{secrets.token_hex(2)}"


class JsonlSink:
    """Appends one JSON object per log step to ``path`` (non-finite values become null); with ``identity`` (for
    example ``{"run_id": ..., "process": 0}``) every record carries it, so runs sharing a file stay apart."""

    def __init__(self, path: str, identity: Mapping[str, object] | None = None):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path, self.identity = path, dict(identity or {})
        self.file = None  # opened at the first line: a resumed run first drops what it will write again

    def write(self, metrics: Mapping[str, float]) -> None:
        record = {
            k: [_finite_or_none(x) for x in v] if isinstance(v, (list, tuple)) else _finite_or_none(v)
            for k, v in metrics.items()
        }
        record.update(self.identity)
        log_dir = os.path.dirname(os.path.abspath(self.path))
        check_room(log_dir)
        with _disk_errors(log_dir, self.path):
            if self.file is None:
                self.file = open(self.path, "a", encoding="utf-8")
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            file, self.file = self.file, None
            try:
                file.close()
            except OSError:  # the line that could not be written was said when it failed
                pass


class TensorBoardSink:
    """TensorBoard event files in ``log_dir``; every metric is a scalar against ``env_steps``
    (a list of values, such as per-seed returns, becomes ``name/0``, ``name/1``, ...).

    Events are written in the calling thread (tensorboardX's ``EventsWriter``, not ``SummaryWriter``'s writer
    thread): a device that fills is then one line (:class:`podracer.run.disk.DiskFull`), where the writer thread died
    with a traceback and the next write waited forever for it."""

    def __init__(self, log_dir: str, run_id: str | None = None):
        from tensorboardX.event_file_writer import EventsWriter

        os.makedirs(log_dir, exist_ok=True)
        self.log_dir = log_dir
        # The event file's name ends with the run id: two runs started in the same second on one host would
        # otherwise write to the same file name and one run's events would be lost.
        with _disk_errors(log_dir, "its TensorBoard events"):
            self.writer = EventsWriter(os.path.join(log_dir, "events"), f".{run_id}" if run_id else "")

    def write(self, metrics: Mapping[str, float]) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.summary import scalar

        step, now = int(metrics.get("env_steps", 0)), time.time()
        check_room(self.log_dir)
        with _disk_errors(self.log_dir, "its TensorBoard events"):
            for name, value in metrics.items():
                values = (
                    {f"{name}/{i}": v for i, v in enumerate(value)}
                    if isinstance(value, (list, tuple))
                    else {name: value}
                )
                for tag, v in values.items():
                    if name != "env_steps" and math.isfinite(float(v)):
                        self.writer.write_event(Event(wall_time=now, step=step, summary=scalar(tag, float(v))))
            self.writer.flush()

    def hyperparameters(self, values: Mapping[str, object], metrics: Sequence[str] = ("episode_return",)) -> None:
        """The run's settings in TensorBoard's HParams tab (``values``: name -> number, string or bool; a list is
        written as its text), beside ``metrics``."""
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.summary import hparams

        shown = {k: v if isinstance(v, int | float | str | bool) else str(v) for k, v in values.items()}
        now = time.time()
        with _disk_errors(self.log_dir, "its TensorBoard events"):
            for summary in hparams(shown, dict.fromkeys(metrics, 0.0)):
                self.writer.write_event(Event(wall_time=now, step=0, summary=summary))
            self.writer.flush()

    def close(self) -> None:
        try:
            self.writer.close()
        except OSError:  # the event that could not be written was said when it failed
            pass


class WandbSink:
    """A Weights & Biases run in ``project`` (the ``wandb`` extra); every metric against ``env_steps``
    (lists become ``name/0``, ``name/1``, ...). ``WANDB_MODE=offline`` writes the run to disk only (``wandb sync``
    uploads it later); its files go under ``log_dir`` when one is given."""

    def __init__(self, project: str, config: Mapping | None = None, log_dir: str | None = None):
        import wandb

        if log_dir:
            os.makedirs(log_dir, exist_ok=True)
        self.run = wandb.init(project=project, config=dict(config or {}), dir=log_dir)

    def write(self, metrics: Mapping[str, float]) -> None:
        record = {}
        for name, value in metrics.items():
            values = (
                {f"{name}/{i}": v for i, v in enumerate(value)} if isinstance(value, (list, tuple)) else {name: value}
            )
            record.update({k: float(v) for k, v in values.items() if name != "env_steps" and math.isfinite(float(v))})
        self.run.log(record, step=int(metrics.get("env_steps", 0)))

    def close(self) -> None:
        self.run.finish()


class Logger:
    """Fans one metrics dict out to every sink; usable as a callable and a context manager."""

    def __init__(self, sinks: Sequence[Sink] = ()):
        self.sinks = list(sinks)

    def __call__(self, metrics: Mapping[str, float]) -> None:
        for sink in self.sinks:
            sink.write(metrics)

    def add_fields(self, fields: Mapping[str, object]) -> None:
        """Fields every later ``metrics.jsonl`` record carries (what the run is against, e.g. ``{"opponent":
        "random legal moves"}``), known once the environment is made."""
        for sink in self.sinks:
            if isinstance(sink, JsonlSink):
                sink.identity.update(fields)

    def add_hyperparameters(self, values: Mapping[str, object]) -> None:
        """The run's settings, for the sinks that show them (TensorBoard's HParams tab)."""
        for sink in self.sinks:
            if isinstance(sink, TensorBoardSink):
                sink.hyperparameters(values)

    def close(self) -> None:
        """Closes every sink, even when one fails (the first failure is raised once all are closed)."""
        failed = None
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as error:  # noqa: BLE001 - the others still close
                failed = failed or error
        if failed is not None:
            raise failed

    def __enter__(self) -> Logger:
        return self

    def __exit__(self, kind, *exc) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a run already failing says why in its own line
            if kind is None:
                raise


def make_logger(
    log_dir: str | None = None,
    *,
    is_main: bool = True,
    console: bool = True,
    total_env_steps: float | None = None,
    console_keys: Sequence[str] = (),
    wandb_project: str | None = None,
    wandb_config: Mapping | None = None,
    run_id: str | None = None,
    process: int = 0,
    started: float | None = None,
) -> Logger:
    """Console progress, and with ``log_dir`` also ``log_dir/metrics.jsonl`` and TensorBoard events; with
    ``wandb_project`` also a Weights & Biases run (its config: ``wandb_config``).

    With ``log_dir``, a line is written only while the device has room (:func:`check_room`). Every
    ``metrics.jsonl`` record carries ``run_id`` (default: :func:`new_run_id`) and ``process`` (the index of
    the process that wrote it), and the TensorBoard event file's name ends with the run id, so runs sharing a
    ``log_dir`` stay apart (:meth:`Logger.add_fields` adds more). On processes other than the main one the logger
    writes nothing. ``started``: when the console's clock starts (``time.monotonic()``; default: now).
    """
    if not is_main:
        return Logger()
    sinks: list[Sink] = []
    if console:
        sinks.append(ConsoleSink(total_env_steps, console_keys, started=started))
    if log_dir:
        run_id = run_id or new_run_id()
        sinks.append(JsonlSink(os.path.join(log_dir, "metrics.jsonl"), {"run_id": run_id, "process": process}))
        sinks.append(TensorBoardSink(log_dir, run_id))
    if wandb_project:
        sinks.append(WandbSink(wandb_project, wandb_config, log_dir))
    return Logger(sinks)
