"""Run lifetime for entry points: Ctrl-C turned into a stop event."""

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


def compile_cache_dir(directory: str | None = None) -> str:
    """``directory``, or podracer's default for JAX's persistent compilation cache."""
    if directory:
        return directory
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "podracer", "jax")


COMPILE_CACHE_MAX_BYTES = 4 * 2**30  # the persistent compilation cache keeps the most recently used 4 GiB


def use_compile_cache(directory: str | None = None) -> str:
    """Turns on JAX's persistent compilation cache in ``directory`` (default: :func:`compile_cache_dir`) for
    every program, however quick to compile: a second run with the same settings loads them instead of
    compiling (``examples/anakin_catch.py``: 6.3 s, then 2.6 s, here). Call it in an entry point before
    anything compiles. Returns the directory."""
    import jax

    directory = compile_cache_dir(directory)
    os.makedirs(directory, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # A size bound turns on JAX's least-recently-used eviction, and with it a file lock around every read and
    # write of the directory. Without it an entry is written in place, unlocked, so a second process (a preview
    # beside its training run, two runs at once) can read a half-written program, which aborts the process.
    jax.config.update("jax_compilation_cache_max_size", COMPILE_CACHE_MAX_BYTES)
    adopt_orphans(directory)
    return directory


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


# After Ctrl-C, how long the step in flight may take before it is abandoned (the last completed update is
# saved from the thread that took the signal and the process exits), so that Ctrl-C ends a run in seconds.
GRACE_SECONDS = 3.0

_lock = threading.Lock()
_last = {"save": None, "finishing": False}


def starting() -> None:
    """A run begins: nothing registered yet, nothing finishing."""
    with _lock:
        _last["save"], _last["finishing"] = None, False


def completed(save) -> None:
    """Registers ``save()``, which writes a checkpoint of the update that just completed from host copies (the
    devices may be busy with the next one): what Ctrl-C saves when the step in flight is abandoned. ``None``:
    nothing to save that way."""
    with _lock:
        _last["save"] = save


def finishing() -> bool:
    """The run has stopped and is about to save its last completed update itself: nothing is abandoned from here
    on. False when the step in flight was abandoned already: the caller must not save (the process is ending)."""
    with _lock:
        if _last["finishing"]:
            return False
        _last["finishing"] = True
        return True


def wait_for_the_end() -> None:
    """Blocks a thread whose step was abandoned until the process ends."""
    threading.Event().wait()


def _abandon(program: str) -> None:
    with _lock:
        if _last["finishing"]:  # the run is saving its last update itself
            return
        _last["finishing"] = True
        save = _last["save"]
    print(f"{program}: the step in flight takes longer than {GRACE_SECONDS:g} s: abandoned"
          + ("; saving the last completed update" if save else ""), file=sys.stderr, flush=True)
    if save is not None:
        save()
    print(f"{program}: interrupted.", file=sys.stderr, flush=True)
    os._exit(130)


def stop_on_ctrl_c(program: str, grace: float | None = None) -> tuple[threading.Event, threading.Event]:
    """Routes Ctrl-C to ``stop`` instead of raising ``KeyboardInterrupt`` somewhere in the run;
    returns ``(stop, interrupted)``. Call it in an entry point before JAX starts.

    The run then stops after the step in flight and saves; when that step takes longer than
    ``grace`` seconds (:data:`GRACE_SECONDS`), it is abandoned: the update registered last with
    :func:`completed` is saved from the signal's thread and the process exits with status 130.

    SIGINT is blocked before JAX and envpool start their worker threads, so those
    threads inherit the block: a signal delivered to one of them could break a blocking
    wait there and hang the run. A waiter thread takes the signal synchronously; if it
    lands on a thread started earlier, the Python-level handler does the same. A second
    Ctrl-C exits at once.
    """
    grace = GRACE_SECONDS if grace is None else grace
    stop, interrupted = threading.Event(), threading.Event()
    count = [0]

    def on_ctrl_c(*_):
        count[0] += 1
        if count[0] > 1:
            os._exit(130)
        interrupted.set()
        stop.set()
        print(f"{program}: Ctrl-C: stopping: saving the last completed update (again to quit at once) ...",
              file=sys.stderr, flush=True)
        timer = threading.Timer(grace, _abandon, args=(program,))
        timer.daemon = True
        timer.start()

    # A signal that lands on a thread started before this call (JAX's, at import) runs Python's C-level handler
    # there, which writes to the wakeup socket: a thread of ours reads it and stops the run at once. (The
    # Python-level handler would run only in the main thread, once it returns from the computation in flight.)
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGINT, lambda *_: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def woken():
        while reader.recv(1):
            on_ctrl_c()

    def wait():  # threads started from here on inherit the block: the signal comes here
        while True:
            signal.sigwait({signal.SIGINT})
            on_ctrl_c()

    threading.Thread(target=woken, name="ctrl-c-wakeup", daemon=True).start()
    threading.Thread(target=wait, name="ctrl-c", daemon=True).start()
    _keep.append((reader, writer))
    return stop, interrupted


_keep: list = []  # the wakeup sockets live as long as the process


HEARTBEAT_SECONDS = 30.0  # a status line at least this often while no progress line comes


class Heartbeat:
    """Never silent: a daemon thread that prints ``[elapsed] | status()`` whenever ``interval`` seconds have
    passed without a progress line (:meth:`beat` marks one), and runs ``check()`` every second (it may set a
    stop event, for example when an actor is stuck). A context manager; ``enabled=False`` prints nothing
    (processes other than the main one) but still checks."""

    def __init__(self, status, *, interval: float | None = None, check=None, enabled: bool = True, stream=None):
        self.status, self.check, self.enabled = status, check, enabled
        self.interval = HEARTBEAT_SECONDS if interval is None else interval
        self.stream = stream
        self.start = self.last = time.monotonic()
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
