"""Several processes as one run: start-up (``jax.distributed``), the peer watch, barriers, and abandoning a run
when another process is gone. Its state is one object (:class:`_Run`); :mod:`podracer.run.parallel` lays out devices.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import os
import socket
import sys
import threading
import time

import jax


# How fast a multi-process run notices a process that is gone: podracer's own watch ends every other
# process once one has been silent this long (one line, exit status 1) ...
PEER_SILENCE_SECONDS = 5
# ... before JAX's distributed runtime declares it dead (no heartbeat for this long; it then ends the
# other processes itself, with a C++ check failure).
HEARTBEAT_SECONDS = 20
# How long a process that ends waits for the others at JAX's shutdown barrier.
SHUTDOWN_SECONDS = 10


def check_process_id(num_processes: int | None, process_id: int | None) -> None:
    """A clear error for a process count below 1 or a process id outside 0 ... num_processes - 1."""
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"--num-processes must be >= 1, got {num_processes}.")
    if num_processes is not None and process_id is not None and not 0 <= process_id < num_processes:
        raise ValueError(
            f"--process-id {process_id} is out of range for {num_processes} processes "
            f"(expected 0 ... {num_processes - 1})."
        )


def check_coordinator(address: str | None) -> None:
    """``--coordinator`` is ``HOST:PORT`` with a port in 1 ... 65535 (``None``: none given)."""
    if address is None:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"--coordinator must be HOST:PORT, got {address!r}.")
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"--coordinator {address!r}: port {int(port)} is out of range (1 ... 65535).")


# What tells jax.distributed it runs in a cluster it can join by itself (--distributed): Slurm's step, Open MPI's
# and MPICH's launchers, a TPU VM's workers, a Kubernetes pod (JAX's cluster detectors read these).
CLUSTER_VARIABLES = (
    "SLURM_JOB_ID",
    "OMPI_MCA_orte_hnp_uri",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "TPU_WORKER_HOSTNAMES",
    "MEGASCALE_COORDINATOR_ADDRESS",
    "KUBERNETES_SERVICE_HOST",
    "JAX_COORDINATOR_ADDRESS",
)


def check_cluster(environ=None) -> None:
    """``--distributed`` outside a cluster that JAX detects (no :data:`CLUSTER_VARIABLES`, no TPU runtime): a
    one-line ``ValueError`` saying what is missing and what to pass instead, before JAX waits for a coordinator."""
    environ = os.environ if environ is None else environ
    found = [name for name in CLUSTER_VARIABLES if name in environ]
    if found == ["KUBERNETES_SERVICE_HOST"] and importlib.util.find_spec("kubernetes") is None:
        from podracer.core import install

        raise ValueError(  # JAX would warn, skip the pod's detector and fail later without saying why
            "--distributed in a Kubernetes pod needs JAX's kubernetes client to find the other pods: "
            f"{install.command('k8s')} (or start every process with --coordinator HOST:PORT --num-processes N "
            "--process-id I)."
        )
    if found or importlib.util.find_spec("libtpu") is not None:
        return
    raise ValueError(
        "--distributed found no cluster to join: none of the variables Slurm sets for a task of a job step "
        "(SLURM_JOB_ID, SLURM_NTASKS, SLURM_PROCID: run the command under srun), nor Open MPI's or a TPU VM's; "
        "outside one, start every process with --coordinator HOST:PORT --num-processes N --process-id I, or drop "
        "--distributed to train in one process."
    )


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    auto_detect: bool = False,
    timeout: int = 60,
) -> None:
    """Joins this process to a multi-process run, before any JAX computation.

    Either give all three of ``coordinator_address`` (``HOST:PORT`` of process 0),
    ``num_processes`` and ``process_id``, or set ``auto_detect`` to let JAX find them
    (TPU pod slices, Slurm, Open MPI). With neither, this is a single-process run and
    nothing happens. A process that has not joined every other one within ``timeout``
    seconds (``--distributed-timeout``) exits with status 2 and a message naming the
    coordinator's address.
    """
    if timeout < 1:
        raise ValueError(f"--distributed-timeout must be >= 1, got {timeout}.")
    knobs = dict(
        initialization_timeout=timeout,
        heartbeat_timeout_seconds=HEARTBEAT_SECONDS,
        shutdown_timeout_seconds=SHUTDOWN_SECONDS,
    )
    explicit = (coordinator_address, num_processes, process_id)
    if all(v is None for v in explicit):
        if auto_detect:
            check_cluster()  # before JAX waits for a coordinator that is not there
            _no_preemption_service()
            with _deadline(timeout, "the coordinator JAX detected"):
                jax.distributed.initialize(**knobs)
            if jax.process_count() > 1:
                _RUN.timeout = timeout
                _watch_peers()
        return
    if any(v is None for v in explicit):
        raise ValueError(
            "A multi-process run needs all of coordinator_address, num_processes and "
            f"process_id; got coordinator_address={coordinator_address!r}, "
            f"num_processes={num_processes!r}, process_id={process_id!r}."
        )
    check_process_id(num_processes, process_id)
    check_coordinator(coordinator_address)
    _no_preemption_service()
    if process_id == 0 and num_processes > 1:
        knobs.update(_start_coordinator(coordinator_address, num_processes, timeout))
    with _deadline(timeout, coordinator_address, num_processes):
        jax.distributed.initialize(
            coordinator_address=coordinator_address, num_processes=num_processes, process_id=process_id, **knobs
        )
    _RUN.timeout = timeout
    _watch_peers()


def _no_preemption_service() -> None:
    """JAX's preemption service catches SIGTERM itself in a multi-process run; podracer's own handling
    (:mod:`podracer.run.lifetime`: save, one line, exit status 143) is kept instead."""
    try:
        jax.config.update("jax_enable_preemption_service", False)
    except AttributeError:  # a JAX without it: nothing to turn off
        pass


def _start_coordinator(address: str, num_processes: int, timeout: int) -> dict:
    """Process 0 of an explicit multi-process run: JAX's coordination service started in a child process
    (:mod:`podracer.run.coordinator`) on ``address``'s port, so that losing process 0 ends the others with podracer's
    one line rather than JAX's C++ check failure. Returns the extra arguments of ``jax.distributed.initialize``
    (its own service, which JAX starts in process 0 regardless, on an unused local port); ``{}`` (the service in
    this process, as JAX does) where this JAX has no service factory by the name podracer knows."""
    import subprocess

    from podracer.run import coordinator

    if coordinator.service_factory() is None:
        return {}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "podracer.run.coordinator",
            address,
            str(num_processes),
            str(HEARTBEAT_SECONDS),
            str(SHUTDOWN_SECONDS),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )  # holds none of this process's streams: a pipe ends with it
    answer = []
    reader = threading.Thread(target=lambda: answer.append(child.stdout.readline().strip()), daemon=True)
    reader.start()
    reader.join(timeout)
    if answer != ["ready"]:
        child.kill()
        said = answer[0].removeprefix("error: ") if answer and answer[0] else f"no answer within {timeout} s"
        raise ValueError(
            f"--coordinator {address}: cannot start the coordinator there ({said}); is the port free on this host?"
        )
    with socket.socket() as s:  # JAX's own service of process 0: bound where nobody connects
        s.bind(("127.0.0.1", 0))
        unused = s.getsockname()[1]
    return {"coordinator_bind_address": f"127.0.0.1:{unused}"}


def jax_private(module: str, name: str):
    """``jax._src.MODULE.NAME``, or None where this JAX has no such name: JAX's private modules may change in any
    release, and what podracer reads there (the coordinator's client, whether backends have started) has no
    public form yet. Every caller works without it, with less to say."""
    try:
        return getattr(importlib.import_module(f"jax._src.{module}"), name)
    except (ImportError, AttributeError):
        return None


def _distributed_client():
    """The coordinator's client of this process (``jax.distributed``'s), or None (single process, or a JAX whose
    private state moved)."""
    state = jax_private("distributed", "global_state")
    return getattr(state, "client", None)


class _Run:
    """This process's view of its multi-process run: one object, set by :func:`initialize` and the peer watch."""

    def __init__(self):
        self.timeout: int | None = None  # --distributed-timeout of this multi-process run
        # podracer's own heartbeat of the other processes (kept by the watch thread): each one's last counter value
        # and when it changed; and when the coordinator last answered this process.
        self.peers: dict[int, tuple[str | None, float]] = {}
        self.answered = 0.0
        self.arrivals: dict[str, int] = {}  # barriers passed, by name (each use of a name is a new barrier)


_RUN = _Run()


def _gone_processes() -> list[int] | None:
    """The processes of this run that have sent no heartbeat for :data:`PEER_SILENCE_SECONDS` (podracer's own,
    kept by :func:`_watch_peers`); None when the coordinator itself has not answered for that long (it is gone).
    Never a call that could wait on another process."""
    now = time.monotonic()
    if _RUN.peers and now - _RUN.answered > PEER_SILENCE_SECONDS:
        return None
    return sorted(
        p for p, (value, since) in _RUN.peers.items() if value is not None and now - since > PEER_SILENCE_SECONDS
    )


def _alive_after(moment: float, wait: float) -> list[int]:
    """The other processes that have sent a heartbeat since ``moment``, waiting up to ``wait`` s for each to
    show itself (meanwhile the watch ends this process if one falls silent)."""
    deadline = time.monotonic() + wait
    while True:
        alive = sorted(p for p, (value, since) in _RUN.peers.items() if value is not None and since > moment)
        if len(alive) == len(_RUN.peers) or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _lost(gone: list[int] | None) -> str:
    if gone is None:
        return "process 0 (the coordinator) is gone or unreachable"
    if gone:
        return f"process {', '.join(map(str, gone))} of the run {'is' if len(gone) == 1 else 'are'} gone"
    return "another process of the run is gone or failed (the coordinator has not yet noticed which)"


# Words in the errors of a collective or of the coordinator that another process left.
_LOST_PEER_SIGNS = (
    "Gloo",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
    "Connection reset",
    "Connection closed",
    "Socket closed",
)


def lost_peer(error: BaseException) -> bool:
    """Whether ``error`` reads as a collective or the coordinator losing another process of the run."""
    return any(sign in str(error) for sign in _LOST_PEER_SIGNS)


def abandon_run(program: str, error: BaseException) -> None:
    """Ends this process of a multi-process run at once after ``error`` (status 1); JAX's shutdown barrier
    would wait for the other processes and then abort with a C++ stack dump. A collective that failed because
    a process is gone is one line naming that process; any other error keeps its traceback."""
    detail = (str(error).strip().splitlines() or [type(error).__name__])[-1][:200]
    if isinstance(error, LateProcesses):
        print(f"{program}: error: {error}", file=sys.stderr, flush=True)
    elif lost_peer(error):
        # A collective also fails when another process is alive but late (still compiling on a busy machine): wait
        # for the heartbeats to tell (the watch ends this process meanwhile when one falls silent). A beat sent just
        # before a process died can still be read one round later: only beats read two rounds on count.
        failed = time.monotonic() + 2 * WATCH_PERIOD_SECONDS
        alive = _alive_after(failed, PEER_SILENCE_SECONDS + 2) if _RUN.peers else []
        if _RUN.peers and len(alive) == len(_RUN.peers):
            late = ", ".join(map(str, alive))
            print(
                f"{program}: error: a collective with process {late} failed while it is alive (it may still be "
                f"starting or compiling on a busy machine; --distributed-timeout sets how long processes wait for "
                f"each other); ending this process ({detail})",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(
                f"{program}: error: {_lost(_gone_processes())}; ending this process ({detail})",
                file=sys.stderr,
                flush=True,
            )
    else:
        import traceback

        traceback.print_exception(error)
        print(f"{program}: error: {detail}; ending this process of the run.", file=sys.stderr, flush=True)
    os._exit(1)


WATCH_PERIOD_SECONDS = 0.5  # how often each process beats and reads the others' beats


def _watch_peers(period: float = WATCH_PERIOD_SECONDS) -> None:
    """A daemon thread that ends this process (status 1, one line) when another process of the run falls silent
    for :data:`PEER_SILENCE_SECONDS`, or the coordinator cannot be reached: whatever this process is doing
    (compiling, waiting for a queue). Each process bumps a counter in the coordinator's key-value store every
    ``period`` seconds and reads the others'; this notices a lost process before JAX's own heartbeat check
    (:data:`HEARTBEAT_SECONDS`), which would end the process with a C++ check failure instead. A process that
    exits normally says so first (``podracer/done/I``) and stops its watch before JAX shuts down."""
    client, me, count = _distributed_client(), jax.process_index(), jax.process_count()
    if client is None:  # a JAX whose private state moved: JAX's own heartbeat check is left
        return
    others = [p for p in range(count) if p != me]
    done = threading.Event()

    def end(gone: list[int] | None) -> None:
        if not done.is_set():
            print(f"podracer: error: {_lost(gone)}; ending this process.", file=sys.stderr, flush=True)
            os._exit(1)

    seen = _RUN.peers
    seen.update({p: (None, time.monotonic()) for p in others})
    _RUN.answered = time.monotonic()

    def watch():
        beat = 0
        while not done.wait(period):
            beat += 1
            try:
                asked = time.monotonic()  # a value read from here on was written no earlier than this
                client.key_value_set(f"podracer/alive/{me}", str(beat), allow_overwrite=True)
                values = {p: _try_get(client, f"podracer/alive/{p}") for p in others}
                if (waited := _try_get(client, f"podracer/late/{me}")) is not None:  # the others gave up on this one
                    return _late(waited)
                now = _RUN.answered = time.monotonic()
                for p, value in values.items():
                    if value != seen[p][0]:
                        seen[p] = (value, asked)
                silent = [
                    p
                    for p in others
                    if seen[p][0] is not None
                    and now - seen[p][1] > PEER_SILENCE_SECONDS
                    and _try_get(client, f"podracer/done/{p}") is None
                ]  # one that ended normally is not lost
            except Exception:  # noqa: BLE001 - the coordinator does not answer
                return end(None)
            if silent:
                return end(silent)

    thread = threading.Thread(target=watch, name="peer-watch", daemon=True)
    thread.start()

    def stop_watching():  # at exit, before JAX's own shutdown (atexit runs in reverse order of registration)
        try:
            client.key_value_set(f"podracer/done/{me}", "1", allow_overwrite=True)
        except Exception:  # noqa: BLE001 - the coordinator is gone: nothing to tell
            pass
        done.set()
        thread.join(timeout=5)

    atexit.register(stop_watching)


class LateProcesses(RuntimeError):
    """Another process of the run did not reach a point of the start-up within ``--distributed-timeout`` (late, or
    gone); the message says which, in one line."""


def all_arrive(what: str, timeout: int | None = None) -> None:
    """In a multi-process run, waits until every process has reached ``what`` (for example "the compiled
    update"), for at most ``timeout`` seconds (default ``--distributed-timeout``): processes then enter their first
    collective together, and a process that is late is named, as late (it may still be compiling), not as gone.
    Nothing happens in a single-process run or where this JAX offers no barrier. :class:`LateProcesses` when the
    wait runs out."""
    client, timeout = _distributed_client(), timeout or _RUN.timeout
    if client is None or timeout is None or jax.process_count() == 1 or not hasattr(client, "wait_at_barrier"):
        return
    me, count = jax.process_index(), jax.process_count()
    n = _RUN.arrivals[what] = _RUN.arrivals.get(what, 0) + 1
    name = f"podracer/arrived/{what}/{n}"
    client.key_value_set(f"{name}/{me}", "1", allow_overwrite=True)
    try:
        client.wait_at_barrier(name, int(timeout * 1000))
    except Exception as error:  # noqa: BLE001 - DEADLINE_EXCEEDED, or the barrier failed for another process
        try:
            late = [p for p in range(count) if p != me and _try_get(client, f"{name}/{p}") is None]
        except Exception:  # noqa: BLE001 - the coordinator is gone with the process that ran it
            late = None
        if late == [] and _RUN.peers:  # every other process was there first and gave up: this one is the late one
            _late(f"{what}|{timeout}")
        gone = set(_gone_processes() or [])
        alive = [p for p in late or [] if p not in gone]
        if not alive:
            raise LateProcesses(
                f"{_lost(_gone_processes())}; ending this process ({str(error).splitlines()[0][:200]})"
            ) from None
        for p in alive:  # tell the late ones why the run ends, before this process does (their watch reads it)
            client.key_value_set(f"podracer/late/{p}", f"{what}|{timeout}", allow_overwrite=True)
        time.sleep(4 * WATCH_PERIOD_SECONDS)
        raise LateProcesses(
            f"process {', '.join(map(str, alive))} did not reach {what} within {timeout} s (--distributed-timeout) "
            f"and is still alive: it may still be starting or compiling on a busy machine; raise "
            f"--distributed-timeout on every process, or check that every process runs the same command."
        ) from None


def _late(waited: str) -> None:
    """Ends this process (status 2, one line): the others waited ``--distributed-timeout`` for it at a point of the
    start-up (``waited``: "WHAT|SECONDS") and gave up; it is the late one, not they."""
    what, _, seconds = waited.rpartition("|")
    print(
        f"podracer: error: this process (process {jax.process_index()}) reached {what} more than {seconds} s "
        "(--distributed-timeout) after the others, which have ended the run: it was still starting or compiling on "
        "a busy machine; raise --distributed-timeout on every process.",
        file=sys.stderr,
        flush=True,
    )
    os._exit(2)


def arrive_before_first_call(fn, what: str):
    """``fn`` (a :func:`device_map` function), except that in a multi-process run its first call compiles it ahead
    and waits for every process (:func:`all_arrive`) before running: the processes enter its collectives together,
    however long each took to compile."""
    if jax.process_count() == 1:
        return fn
    compiled = []

    def call(*args):
        if not compiled:
            compiled.append(fn.lower(*args).compile())
            all_arrive(what)
        return compiled[0](*args)

    return call


def _try_get(client, key: str) -> str | None:
    try:
        return client.key_value_try_get(key)
    except Exception as error:  # noqa: BLE001 - NOT_FOUND until that process has started its watch
        if "NOT_FOUND" in str(error) or "not found" in str(error).lower():
            return None
        raise


def _unreachable(address: str, timeout: int, num_processes: int | None) -> str:
    processes = f"all {num_processes} processes" if num_processes else "every process"
    return (
        f"could not join the run at the coordinator {address} within {timeout} s (--distributed-timeout): check "
        f"that process 0 runs with the same --coordinator, that {address} is reachable from this host (address, "
        f"port, firewall) and that {processes} have started."
    )


@contextlib.contextmanager
def _deadline(timeout: int, address: str, num_processes: int | None = None):
    """Ends the process (status 2, one line) when the block has not finished ``timeout`` s after it began:
    JAX's own time-out can abort with a C++ stack dump and a message that names no address."""
    done = threading.Event()

    def watch():
        if not done.wait(timeout):
            print(f"podracer: error: {_unreachable(address, timeout, num_processes)}", file=sys.stderr, flush=True)
            os._exit(2)

    threading.Thread(target=watch, name="distributed-deadline", daemon=True).start()
    try:
        yield
    except Exception as error:  # noqa: BLE001 - JAX raises several kinds here
        raise ValueError(
            f"{_unreachable(address, timeout, num_processes)} ({str(error).splitlines()[0][:200]})"
        ) from None
    finally:
        done.set()


__all__ = [
    "CLUSTER_VARIABLES",
    "HEARTBEAT_SECONDS",
    "LateProcesses",
    "PEER_SILENCE_SECONDS",
    "SHUTDOWN_SECONDS",
    "WATCH_PERIOD_SECONDS",
    "abandon_run",
    "all_arrive",
    "arrive_before_first_call",
    "check_cluster",
    "check_coordinator",
    "check_process_id",
    "initialize",
    "jax_private",
    "lost_peer",
]
