"""Faults end cleanly and fast: a lost process, an unreachable coordinator (2 processes on 127.0.0.1)."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "anakin": [str(ROOT / "examples" / "anakin_catch.py"), "--cpu-devices", "1", "--num-envs-per-device", "8",
               "--rollout-length", "4", "--num-updates", "1000000", "--updates-per-call", "20"],
    "sebulba": ["-m", "podracer.sebulba", "--env", "jax:catch", "--agent", "a2c", "--cpu-devices", "2",
                "--num-envs-per-actor", "8", "--rollout-length", "4", "--total-env-steps", "1000000000", "--log-every", "5"],
}


def _env():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(mode, port, process_id, *extra):
    return subprocess.Popen([sys.executable, *COMMANDS[mode], "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
                             "--process-id", str(process_id), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)


def _kill_the_second_when_the_first_trains(first, second):
    """``(exit status of first, seconds from the kill to its exit, its stderr)``."""
    progress = threading.Event()
    lines = []

    def read():
        for line in first.stdout:
            lines.append(line)
            if "env steps" in line:
                progress.set()

    threading.Thread(target=read, daemon=True).start()
    assert progress.wait(180), lines  # both processes train together ...
    os.kill(second.pid, signal.SIGKILL)  # ... until one is gone
    killed = time.monotonic()
    first.wait(timeout=60)
    return first.returncode, time.monotonic() - killed, first.stderr.read()


def test_a_lost_process_ends_the_other_with_one_line():
    """Both modes at once: 2 runs of 2 processes each on 127.0.0.1; process 1 of each is killed."""
    runs = {mode: (_start(mode, port, 0), _start(mode, port, 1)) for mode, port in (("anakin", _free_port()),
                                                                                    ("sebulba", _free_port()))}
    results = {}
    try:
        threads = [threading.Thread(target=lambda m=m, p=p: results.__setitem__(m, _kill_the_second_when_the_first_trains(*p)))
                   for m, p in runs.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    finally:
        for pair in runs.values():
            for p in pair:
                if p.poll() is None:
                    p.kill()
    assert set(results) == {"anakin", "sebulba"}, results
    for mode, (status, seconds, stderr) in results.items():
        # Within about 5 s on a quiet machine (docs/faults.md); the bound here only tells an end from a hang.
        assert status == 1 and seconds < 60, (mode, status, seconds, stderr[-2000:])
        errors = [line for line in stderr.splitlines() if "error:" in line]
        assert len(errors) == 1 and "process 1 of the run is gone" in errors[0], (mode, stderr[-2000:])
        assert "Check failure" not in stderr and "Traceback" not in stderr, (mode, stderr[-2000:])


def test_an_unreachable_coordinator_ends_the_process_naming_its_address():
    port = _free_port()
    start = time.monotonic()
    out = subprocess.run([sys.executable, *COMMANDS["anakin"], "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
                          "--process-id", "1", "--distributed-timeout", "2"],
                         capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    seconds = time.monotonic() - start
    assert out.returncode == 2 and seconds < 60, (out.returncode, seconds, out.stderr[-2000:])
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"coordinator 127.0.0.1:{port} within 2 s (--distributed-timeout)" in errors[0], out.stderr
