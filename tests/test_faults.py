"""Faults end cleanly and fast: a lost process, an unreachable coordinator (2 processes on 127.0.0.1)."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from children import child_env  # tests/children.py


ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "anakin": [
        str(ROOT / "examples" / "anakin_catch.py"),
        "--cpu-devices",
        "1",
        "--num-envs-per-device",
        "8",
        "--rollout-length",
        "4",
        "--num-updates",
        "1000000",
        "--updates-per-call",
        "20",
    ],
    "sebulba": [
        "-m",
        "podracer.sebulba",
        "--env",
        "jax:catch",
        "--agent",
        "a2c",
        "--cpu-devices",
        "2",
        "--num-envs-per-actor",
        "8",
        "--rollout-length",
        "4",
        "--total-env-steps",
        "1000000000",
        "--log-every",
        "1",
    ],
}


def _env():
    env = child_env()
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(mode, port, process_id, *extra):
    return subprocess.Popen(
        [
            sys.executable,
            *COMMANDS[mode],
            "--coordinator",
            f"127.0.0.1:{port}",
            "--num-processes",
            "2",
            "--process-id",
            str(process_id),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )


def _kill_one_when_they_train(pair, victim):
    """Kills process ``victim`` of ``pair`` once process 0 prints progress: ``(exit status of the other, seconds
    from the kill to its exit, its stderr)``."""
    progress = threading.Event()
    lines = []

    def read():
        for line in pair[0].stdout:
            lines.append(line)
            if "env steps" in line:
                progress.set()

    threading.Thread(target=read, daemon=True).start()
    assert progress.wait(180), lines  # both processes train together ...
    os.kill(pair[victim].pid, signal.SIGKILL)  # ... until one is gone
    killed = time.monotonic()
    survivor = pair[1 - victim]
    survivor.wait(timeout=60)
    return survivor.returncode, time.monotonic() - killed, survivor.stderr.read()


@pytest.mark.parametrize("mode, victim", [("anakin", 0), ("anakin", 1)])
def test_a_lost_process_ends_the_other_with_one_line(mode, victim):
    """2 processes on 127.0.0.1; one is killed: process 0 (the coordinator's host) or process 1. Sebulba's processes
    watch each other with the same heartbeat (its 2-process run is tested in test_sebulba.py)."""
    port = _free_port()
    pair = (_start(mode, port, 0), _start(mode, port, 1))
    try:
        status, seconds, stderr = _kill_one_when_they_train(pair, victim)
    finally:
        for p in pair:
            if p.poll() is None:
                p.kill()
    # Within about 5 s on a quiet machine (docs/faults.md, benchmarks/fault_latency.py); a hang ends at the wait's
    # timeout.
    assert status == 1, (status, seconds, stderr[-2000:])
    errors = [line for line in stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"process {victim} of the run is gone" in errors[0], stderr[-2000:]
    assert "Check failure" not in stderr and "Traceback" not in stderr, stderr[-2000:]


def test_an_unreachable_coordinator_ends_the_process_naming_its_address():
    port = _free_port()
    start = time.monotonic()
    out = subprocess.run(
        [
            sys.executable,
            *COMMANDS["anakin"],
            "--coordinator",
            f"127.0.0.1:{port}",
            "--num-processes",
            "2",
            "--process-id",
            "1",
            "--distributed-timeout",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd=ROOT,
    )
    seconds = time.monotonic() - start
    assert out.returncode == 2, (out.returncode, seconds, out.stderr[-2000:])
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"coordinator 127.0.0.1:{port} within 2 s (--distributed-timeout)" in errors[0], (
        out.stderr
    )


_ARRIVE = """
import os, sys, time
from podracer.run import parallel
from podracer.run import multihost
port, me, delay, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
parallel.set_cpu_device_count(1)
multihost.initialize(f"127.0.0.1:{port}", 2, me, timeout=120)
time.sleep(delay)  # compiling, on a busy machine
try:
    multihost.all_arrive("the compiled update", timeout=timeout)
except multihost.LateProcesses as error:
    print(f"late: {error}", flush=True)
    os._exit(3)
print("arrived", flush=True)
"""


def test_a_process_later_than_the_distributed_timeout_is_named_late_not_gone():
    """Start-up is bounded by --distributed-timeout: the processes wait for each other after compiling (every
    2-process test passes through that wait in time); one later than the bound is named as late and alive."""
    port = _free_port()
    pair = [
        subprocess.Popen(
            [sys.executable, "-c", _ARRIVE, str(port), str(i), str(30 * i), "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        for i in (0, 1)
    ]
    try:
        out, err = pair[0].communicate(timeout=180)
    finally:
        for p in pair:
            if p.poll() is None:
                p.kill()
    assert pair[0].returncode == 3, err
    assert out == (
        "late: process 1 did not reach the compiled update within 2 s (--distributed-timeout) and is still "
        "alive: it may still be starting or compiling on a busy machine; raise --distributed-timeout on "
        "every process, or check that every process runs the same command.\n"
    ), (out, err)
