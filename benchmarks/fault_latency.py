"""How fast runs end on a stop signal or a lost process: repeated measurements, as a table.

    python benchmarks/fault_latency.py                  # every case, 3 repeats
    python benchmarks/fault_latency.py --cases sigterm-anakin kill-process-0 --repeats 5 --save

Each case starts real runs of the command lines (``examples/anakin_catch.py``, ``python -m
podracer.sebulba``), waits for their first progress line, then sends the signal or kills the
process, and measures the seconds until the process (or the surviving one) has exited, with its
exit status. The tests assert only what happened (status, message, checkpoint); these figures
depend on the machine and its load, so they live here. The machine's load average is recorded
with each measurement.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import _report

ROOT = Path(__file__).resolve().parents[1]
ANAKIN = [
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
]
SEBULBA = [
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
    "5",
]
LONG_CALLS = [
    str(ROOT / "examples" / "anakin_catch.py"),
    "--cpu-devices",
    "2",
    "--num-envs-per-device",
    "16",
    "--num-updates",
    "400000",
    "--updates-per-call",
    "10000",
]

CASES = {
    "ctrl-c-anakin-long-call": "Ctrl-C in the middle of a long Anakin host call (the call is abandoned after 3 s)",
    "sigterm-anakin": "SIGTERM to an Anakin run after its first progress line",
    "sigterm-sebulba": "SIGTERM to a Sebulba run after its first progress line",
    "kill-process-1": "kill -9 of process 1 of a 2-process Anakin run: until process 0 exits",
    "kill-process-0": "kill -9 of process 0 of a 2-process Anakin run: until process 1 exits",
    "unreachable-coordinator": "a process whose coordinator never answers, --distributed-timeout 2",
}


def _env():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args, tmp: Path):
    return subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp
    )


def _wait_for_progress(proc, marker: str = "env steps", timeout: float = 300) -> None:
    seen = threading.Event()

    def read():
        for line in proc.stdout:
            if marker in line:
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    if not seen.wait(timeout):
        proc.kill()
        raise RuntimeError(f"no progress line within {timeout:.0f} s")


def _until_exit(proc, since: float) -> tuple[float, int]:
    proc.wait(timeout=300)
    return time.monotonic() - since, proc.returncode


def measure(case: str, tmp: Path) -> tuple[float, int]:
    """``(seconds from the signal or kill to the exit, exit status)`` of one run of ``case``."""
    coordinator = ["--coordinator", f"127.0.0.1:{_free_port()}", "--num-processes", "2", "--process-id"]
    if case == "ctrl-c-anakin-long-call":
        proc = _start([*LONG_CALLS, "--checkpoint-dir", str(tmp / "ckpt")], tmp)
        _wait_for_progress(proc, "| sps")
        time.sleep(1.0)  # the next call under way
        proc.send_signal(signal.SIGINT)
        return _until_exit(proc, time.monotonic())
    if case in ("sigterm-anakin", "sigterm-sebulba"):
        proc = _start(
            [
                *(ANAKIN if case == "sigterm-anakin" else SEBULBA),
                "--checkpoint-dir",
                str(tmp / "ckpt"),
                "--resume",
                "auto",
            ],
            tmp,
        )
        _wait_for_progress(proc)
        proc.send_signal(signal.SIGTERM)
        return _until_exit(proc, time.monotonic())
    if case in ("kill-process-1", "kill-process-0"):
        pair = [_start([*ANAKIN, *coordinator, str(i)], tmp) for i in range(2)]
        try:
            _wait_for_progress(pair[0])
            victim = 1 if case == "kill-process-1" else 0
            os.kill(pair[victim].pid, signal.SIGKILL)
            return _until_exit(pair[1 - victim], time.monotonic())
        finally:
            for p in pair:
                if p.poll() is None:
                    p.kill()
    if case == "unreachable-coordinator":
        start = time.monotonic()
        proc = _start([*ANAKIN, *coordinator, "1", "--distributed-timeout", "2"], tmp)
        return _until_exit(proc, start)  # from the start: the figure includes Python's and JAX's start-up
    raise ValueError(f"unknown case {case!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeats", type=int, default=3, help="measurements per case (default: 3)")
    _report.add_output_flags(parser, "fault_latency")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1.")
    import tempfile

    machine = f"{_report.cpu_model()}, {os.cpu_count()} cores"
    print(f"# fault latency on {machine}", flush=True)
    rows = []
    for case in args.cases:
        seconds, statuses, loads = [], [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                loads.append(os.getloadavg()[0])
                s, status = measure(case, Path(tmp))
            seconds.append(s)
            statuses.append(status)
            print(f"{case}: {s:.1f} s, exit status {status}", flush=True)
        rows.append(
            {
                "case": case,
                "what": CASES[case],
                "seconds": seconds,
                "median_s": statistics.median(seconds),
                "statuses": statuses,
                "load_1min": loads,
            }
        )
    lines = [
        f"Fault latency on {machine}: seconds from the signal or kill to the exit ({args.repeats} repeats; "
        "`python benchmarks/fault_latency.py`)",
        "",
        "| case | median (s) | min (s) | max (s) | exit statuses | load (1 min) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['what']} | {row['median_s']:.1f} | {min(row['seconds']):.1f} | {max(row['seconds']):.1f} | "
            f"{', '.join(map(str, row['statuses']))} | {', '.join(f'{x:.1f}' for x in row['load_1min'])} |"
        )
    text = "\n".join(lines) + "\n"
    print("\n" + text, flush=True)
    _report.save(_report.output_path(args.save, args.out, "fault_latency"), text, {"machine": machine, "rows": rows})


if __name__ == "__main__":
    main()
