"""Run lifetime for entry points: Ctrl-C, SIGTERM and SIGUSR1 turned into a stop event, grace periods, heartbeats."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time


# Warnings of dependencies that tell a podracer user nothing: (message pattern, category).
DEPENDENCY_NOISE = (
    (r".*precision lowered by casting", UserWarning),  # gymnasium, on envpool's float64 Box bounds
    (r"Brax System, piplines and environments are not actively", UserWarning),  # brax's maintenance notice
)


def quiet_dependencies() -> None:
    """Silences :data:`DEPENDENCY_NOISE` and wandb's start-up banner for this process: entry points call it
    (importing podracer changes no warning filter)."""
    import warnings

    for message, category in DEPENDENCY_NOISE:
        warnings.filterwarnings("ignore", message=message, category=category)
    os.environ.setdefault("WANDB_SILENT", "true")


# After a stop signal, how long the step in flight may take before it is abandoned (the last completed update is
# saved from the thread that took the signal and the process exits), so that a stop ends a run in seconds.
GRACE_SECONDS = 3.0
# After a stop signal, how long the whole stop (the step in flight, the last save, closing environments and
# threads) may take before the process exits anyway: a save cut short leaves the previous checkpoint as it was
# (a checkpoint counts only once it is complete). Below Slurm's KillWait and Kubernetes' grace period (30 s).
STOP_SECONDS = 25.0

# The signals that stop a run, and how a message names them: Ctrl-C; SIGTERM, which a scheduler sends to preempt
# (Kubernetes, Slurm at the end of a job's time or on preemption); SIGUSR1, which Slurm sends ahead of the end
# with ``--signal=USR1@SECONDS``. A stopped run exits with 128 + the signal's number (130, 143, 138).
STOP_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGUSR1: "SIGUSR1"}

_lock = threading.Lock()


class RunLifetime:
    """One run's share of the process's stop, made by :func:`starting` and given to the run's loops: the save a stop
    makes when the step in flight is abandoned (:meth:`completed`), who takes the run's end (:meth:`take_the_end`),
    ``newest()`` (names the run's newest complete checkpoint, or says there is none, for the line of a stop whose
    save does not finish in time) and ``ended()`` (runs on every exit path of this module: an abandoned step, an
    overdue stop, a second Ctrl-C, the exit after a stop, as the run's own ``finally`` runs it on the others: it
    writes the run's ``finished.json``). Signals belong to the process, so they act on the run started last."""

    def __init__(self, newest=None, ended=None):
        self.newest, self.ended = newest, ended
        self._save = None  # what a stop that abandons the step in flight saves (None: nothing)
        self._end_taken = False  # by the run, saving its last update itself, or by a stop that abandoned a step

    def completed(self, save) -> None:
        """Registers ``save()``, which writes a checkpoint of the update that just completed from host copies (the
        devices may be busy with the next one): what a stop saves when the step in flight is abandoned. ``None``:
        nothing to save that way."""
        with _lock:
            self._save = save

    def take_the_end(self) -> bool:
        """The run has stopped (or is done) and takes its end: it saves its last completed update itself, and a
        stop's timer abandons nothing from here on. False when a stop abandoned the step in flight already (it is
        saving that update and the process is ending): the caller must not save."""
        return self._take_the_end()[0]

    def _take_the_end(self):
        """``(taken, save)``: whether the caller takes the end (not if it was taken already), and what a stop that
        abandons the step in flight saves."""
        with _lock:
            if self._end_taken:
                return False, None
            self._end_taken = True
            return True, self._save


_run = RunLifetime()  # the run the signals act on: the one started last
_signal: int | None = None  # the signal that stopped this process's run (None while none has)


def starting(newest=None, ended=None) -> RunLifetime:
    """A run begins: its :class:`RunLifetime` (nothing registered yet, nothing finishing), which the signals act on
    from now on; give it to the run's loops."""
    global _run
    with _lock:
        _run = RunLifetime(newest, ended)
    return _run


def current() -> RunLifetime:
    """The run the signals act on (the one :func:`starting` made last)."""
    return _run


def _exit(status: int) -> None:
    """Ends the process now with ``status``, after the run's ``ended()`` (:func:`starting`), whatever it raises."""
    ended = _run.ended
    if ended is not None:
        try:
            ended()
        except Exception:  # noqa: BLE001 - the process ends all the same
            pass
    os._exit(status)


def completed(save) -> None:
    """:meth:`RunLifetime.completed` of the run started last."""
    _run.completed(save)


def take_the_end() -> bool:
    """:meth:`RunLifetime.take_the_end` of the run started last."""
    return _run.take_the_end()


def wait_for_the_end() -> None:
    """Blocks a thread whose step was abandoned until the process ends."""
    threading.Event().wait()


def stop_signal() -> int | None:
    """The signal that stopped this run (``signal.SIGINT``, ``SIGTERM`` or ``SIGUSR1``); None while none has."""
    return _signal


def stop_reason() -> str:
    """How messages name the signal that stopped the run: "Ctrl-C", "SIGTERM" or "SIGUSR1"."""
    return STOP_SIGNALS.get(_signal, "Ctrl-C")


def exit_status() -> int:
    """A stopped run's exit status: 128 + the signal's number (130 Ctrl-C, 143 SIGTERM, 138 SIGUSR1)."""
    return 128 + int(_signal or signal.SIGINT)


def _abandon(program: str) -> None:
    taken, save = _run._take_the_end()
    if not taken:  # the run is saving its last update itself
        return
    print(
        f"{program}: the step in flight takes longer than {GRACE_SECONDS:g} s: abandoned"
        + ("; saving the last completed update" if save else ""),
        file=sys.stderr,
        flush=True,
    )
    if save is not None:
        try:
            save()
        except Exception as error:  # noqa: BLE001 - one line, and the newest complete checkpoint named
            newest = _newest()
            print(
                f"{program}: stopped by {stop_reason()}; the save of the last completed update failed ({error}); "
                f"the newest complete checkpoint is {newest or 'kept'}.",
                file=sys.stderr,
                flush=True,
            )
            _exit(exit_status())
    print(f"{program}: stopped by {stop_reason()}{saved_line(save is not None)}.", file=sys.stderr, flush=True)
    _exit(exit_status())


RESUME_HINT = "to go on: the same command with --resume auto"


def saved_line(saved: bool) -> str:
    """What a stopped run's last line says it saved (after ``stopped by SIGNAL``): the checkpoint and how to go on
    from it; that no update had completed, so nothing was saved (and the newest checkpoint of an earlier attempt,
    where there is one); or that it saves nothing (no ``--checkpoint-dir``)."""
    if _run.newest is None:
        return "; nothing saved (no --checkpoint-dir)"
    newest = _newest()
    kept = newest if newest and not newest.startswith("none") else None
    if saved:
        return f"; saved the last completed update ({kept or 'kept'}); {RESUME_HINT}"
    if kept:
        return f"; no update had completed: nothing saved; the newest checkpoint is still {kept} ({RESUME_HINT})"
    return "; no update had completed: nothing saved (the same command starts afresh)"


def _newest() -> str | None:
    """The run's newest complete checkpoint as :func:`starting` registered it; None where none is registered or it
    cannot be read (the stop's line is said all the same)."""
    try:
        return _run.newest() if _run.newest is not None else None
    except Exception:  # noqa: BLE001 - the line must still be said
        return None


def _overdue(program: str, bound: float) -> None:
    kept = _newest()
    if kept:  # a run that saves: say that its save did not finish, and which checkpoint is the newest complete one
        print(
            f"{program}: stopping takes longer than {bound:g} s: the save did not finish; exiting now; the newest "
            f"complete checkpoint is {kept}.",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(
            f"{program}: stopping takes longer than {bound:g} s: exiting now; the newest complete checkpoint is kept.",
            file=sys.stderr,
            flush=True,
        )
    _exit(exit_status())


EXIT_AFTER_STOP_SECONDS = 5.0  # how long a stopped run may take to exit once it has said it stopped


def exit_soon(status: int, seconds: float | None = None) -> None:
    """A stopped run has said it stopped: the process ends with ``status`` within ``seconds``
    (:data:`EXIT_AFTER_STOP_SECONDS`) even if a thread of a dependency (envpool's, JAX's) holds the interpreter's
    exit."""
    timer = threading.Timer(EXIT_AFTER_STOP_SECONDS if seconds is None else seconds, _exit, args=(status,))
    timer.daemon = True
    timer.start()


def stop_on_signals(
    program: str, grace: float | None = None, bound: float | None = None, *, saving: bool = True
) -> tuple[threading.Event, threading.Event]:
    """Routes Ctrl-C, SIGTERM and SIGUSR1 (:data:`STOP_SIGNALS`) to ``stop`` instead of raising
    ``KeyboardInterrupt`` or ending the process somewhere in the run; returns ``(stop, interrupted)``. Call it in
    an entry point before JAX starts.

    The run then stops after the step in flight and saves; when that step takes longer than ``grace`` seconds
    (:data:`GRACE_SECONDS`), it is abandoned: the update registered last with :func:`completed` is saved from
    the signal's thread and the process exits with :func:`exit_status`. The whole stop is bounded: ``bound``
    seconds (:data:`STOP_SECONDS`) after the signal the process exits whatever it is doing. A second Ctrl-C
    exits at once; a second SIGTERM or SIGUSR1 (a scheduler repeating itself) changes nothing. ``saving``: whether
    the run saves (its first line says what the stop does).

    The signals are blocked before JAX and envpool start their worker threads, so those threads inherit the
    block: a signal delivered to one of them could break a blocking wait there and hang the run. A waiter
    thread takes the signal synchronously; if it lands on a thread started earlier, the Python-level handler
    does the same.
    """
    grace = GRACE_SECONDS if grace is None else grace
    bound = STOP_SECONDS if bound is None else bound
    global _signal
    stop, interrupted = threading.Event(), threading.Event()
    _signal = None

    def on_signal(signum: int) -> None:
        global _signal
        with _lock:
            first = _signal is None
            if first:
                _signal = signum
        if not first:
            if signum == signal.SIGINT:
                _exit(exit_status())
            return
        again = " (Ctrl-C again to quit at once)" if signum == signal.SIGINT else ""
        # Said before the run is told to stop: this runs on a daemon thread of ours, and a main thread that returns
        # from its wait and ends the interpreter first would take the line with it.
        print(
            f"{program}: {stop_reason()}: stopping: "
            + ("saving the last completed update" if saving else "nothing to save (no --checkpoint-dir)")
            + f"{again} ...",
            file=sys.stderr,
            flush=True,
        )
        interrupted.set()
        stop.set()
        for seconds, then, args in ((grace, _abandon, (program,)), (bound, _overdue, (program, bound))):
            timer = threading.Timer(seconds, then, args=args)
            timer.daemon = True
            timer.start()

    _route_signals(on_signal)
    return stop, interrupted


def exit_on_signals(program: str) -> None:
    """For an entry point with nothing to save (``evaluate``, ``preview``, ``examples/anakin_memory.py``): Ctrl-C,
    SIGTERM or SIGUSR1 ends the process at once, whatever it is doing (compiling included), with one line and
    :func:`exit_status`. Call it before JAX starts."""

    global _signal

    def on_signal(signum: int) -> None:
        global _signal
        _signal = signum
        print(f"\n{program}: stopped by {stop_reason()}.", file=sys.stderr, flush=True)
        os._exit(exit_status())

    _signal = None
    _route_signals(on_signal)


def _route_signals(on_signal) -> None:
    """Calls ``on_signal(signum)`` from a thread of ours for every signal of :data:`STOP_SIGNALS`."""
    # A signal that lands on a thread started before this call (JAX's, at import) runs Python's C-level handler
    # there, which writes the signal's number to the wakeup socket: a thread of ours reads it and stops the run
    # at once. (The Python-level handler would run only in the main thread, once it returns from the
    # computation in flight.)
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda *_: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))

    def woken():
        while data := reader.recv(1):
            if data[0] in STOP_SIGNALS:
                on_signal(data[0])

    def wait():  # threads started from here on inherit the block: the signals come here
        while True:
            on_signal(signal.sigwait(set(STOP_SIGNALS)))

    threading.Thread(target=woken, name="stop-signal-wakeup", daemon=True).start()
    threading.Thread(target=wait, name="stop-signal", daemon=True).start()
    _keep.append((reader, writer))


stop_on_ctrl_c = stop_on_signals  # the name of releases before SIGTERM and SIGUSR1 stopped a run too


_keep: list = []  # the wakeup sockets live as long as the process


HEARTBEAT_SECONDS = 30.0  # a status line at least this often while no progress line comes


class Heartbeat:
    """Never silent: a daemon thread that prints ``[elapsed] | status()`` (seconds since the launch, as the progress
    lines count them: :data:`podracer.run.startup.LAUNCH`) whenever ``interval`` seconds have
    passed without a progress line (:meth:`beat` marks one), and runs ``check()`` every second (it may set a
    stop event, for example when an actor is stuck). A context manager; ``enabled=False`` prints nothing
    (processes other than the main one) but still checks."""

    def __init__(self, status, *, interval: float | None = None, check=None, enabled: bool = True, stream=None):
        from podracer.run import startup

        self.status, self.check, self.enabled = status, check, enabled
        self.interval = HEARTBEAT_SECONDS if interval is None else interval
        self.stream = stream
        self.start, self.last = startup.LAUNCH, time.monotonic()  # the progress lines' clock: one per run
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def beat(self) -> None:
        self.last = time.monotonic()

    def _run(self) -> None:
        while not self._done.wait(min(1.0, self.interval / 2)):
            if self.check is not None:
                self.check()
            now = time.monotonic()
            if self.enabled and now - self.last >= self.interval:
                print(f"[{now - self.start:7.1f}s] | {self.status()}", file=self.stream or sys.stdout, flush=True)
                self.last = now

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join(timeout=5)
