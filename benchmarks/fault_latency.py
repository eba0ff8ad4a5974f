"""How fast runs end on a stop signal or a lost process: repeated measurements, as a table.

    python benchmarks/fault_latency.py                  # every case, 3 repeats
    python benchmarks/fault_latency.py --cases sigterm-anakin kill-process-0 --repeats 5 --save
    python benchmarks/fault_latency.py --cases sigint-anakin sigterm-anakin sigint-sebulba sigterm-sebulba \
        --repeats 5 --load 20       # under a load made here: busy loops until the load average reaches 20

Each case starts real runs of the command lines (``examples/anakin_catch.py``, ``python -m
podracer.sebulba``), waits for their first progress line, then sends the signal or kills the
process, and measures the seconds until the process (or the surviving one) has exited, with its
exit status. The tests assert only what happened (status, message, checkpoint); these figures
depend on the machine and its load, so they live here. The machine's load average is recorded
with each measurement. A stop of a run with a checkpoint directory is also judged: "saved" when it left a
complete checkpoint and said so, "said" when it said in one line that the save did not finish and named the
newest complete checkpoint, "nothing to save" when it was stopped before its first update completed and said so,
"neither" otherwise; and whether it exited within the stop's bound plus 5 s. Runs that end themselves (a non-finite
update, an environment that raises or hangs) are judged by whether they said so in one line.
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
    "--no-log-dir",  # the latency of the stop, not of a log directory
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
    "--no-log-dir",
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
    "--no-log-dir",
]

CASES = {
    "ctrl-c-anakin-long-call": "Ctrl-C in the middle of a long Anakin host call (the call is abandoned after 3 s)",
    "sigint-anakin": "Ctrl-C to an Anakin run with a checkpoint directory after its first progress line",
    "sigterm-anakin": "SIGTERM to an Anakin run after its first progress line",
    "sigint-sebulba": "Ctrl-C to a Sebulba run with a checkpoint directory after its first progress line",
    "sigterm-sebulba": "SIGTERM to a Sebulba run after its first progress line",
    "kill-process-1": "kill -9 of process 1 of a 2-process Anakin run: until process 0 exits",
    "kill-process-0": "kill -9 of process 0 of a 2-process Anakin run: until process 1 exits",
    "unreachable-coordinator": "a process whose coordinator never answers, --distributed-timeout 2",
    "diverging-anakin": "an Anakin run whose second update is not finite: from its first progress line",
    "diverging-sebulba": "a Sebulba run whose second update is not finite: from its start",
    "raising-env-sebulba": "a Sebulba environment that raises (gymnasium, async): from the run's start",
    "hanging-env-sebulba": "a Sebulba environment that hangs (gymnasium, async), --actor-timeout 10: from the start",
}
ONE_LINE_CASES = ("diverging-anakin", "diverging-sebulba", "raising-env-sebulba", "hanging-env-sebulba")
# Adam's first step at a warm-up's learning rate of 0 is finite, the second (1e30 / 1000) is not.
DIVERGING = ["--learning-rate", "1e30", "--max-grad-norm", "1e30", "--lr-warmup-steps", "1000"]  # with --agent a2c
# tests/faulty_envs.py: gymnasium environments that raise or hang after 200 steps
FAULTY = ["-m", "podracer.cli", "sebulba", "--gymnasium-vectorization", "async", "--num-envs-per-actor", "2"]
FAULTY += ["--rollout-length", "8", "--total-env-steps", "1000000", "--actor-timeout", "10", "--cpu-devices", "2"]
FAULTY += ["--no-log-dir"]


def _env():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), env.get("PYTHONPATH", "")])  # faulty_envs
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


def _verdict(proc, directory: Path) -> str:
    """How a stopped run with a checkpoint directory ended: "saved", "said" (the save did not finish, and the line
    names the newest complete checkpoint) or "neither"."""
    from podracer.run import checkpoint

    err = proc.stderr.read() if proc.stderr else ""
    if "the save did not finish" in err and "newest complete checkpoint is" in err:
        return "said"
    if checkpoint.steps(str(directory)) and "saved the last completed update" in err:
        return "saved"
    if not checkpoint.steps(str(directory)) and "no update had completed: nothing to save" in err:
        return "nothing to save"  # stopped while compiling (a heartbeat line came before any update)
    return "neither"


def _load(target: float) -> list:
    """Busy loops, one process each (each adds 1 to the load average), as many as ``target`` less the load already
    there; then waits (up to 3 minutes) for the 1-minute load average, which lags, to reach ``target``. Adding
    loops until the average reaches the target would overshoot it (52 loops for a target of 20)."""
    try:  # the processes runnable now (the 1-minute average lags): /proc/loadavg's "running/total", less this one
        with open("/proc/loadavg") as f:
            there = int(f.read().split()[3].split("/")[0]) - 1
    except (OSError, ValueError, IndexError):
        there = os.getloadavg()[0]
    count = max(0, round(target - there))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    deadline = time.monotonic() + 180
    while os.getloadavg()[0] < 0.9 * target and time.monotonic() < deadline:
        time.sleep(5)
    return busy


VERDICTS: list[str] = []  # the last stop's verdict (_verdict), where the case has a checkpoint directory


def measure(case: str, tmp: Path) -> tuple[float, int]:
    """``(seconds from the signal or kill to the exit, exit status)`` of one run of ``case``."""
    coordinator = ["--coordinator", f"127.0.0.1:{_free_port()}", "--num-processes", "2", "--process-id"]
    if case == "ctrl-c-anakin-long-call":
        proc = _start([*LONG_CALLS, "--checkpoint-dir", str(tmp / "ckpt")], tmp)
        _wait_for_progress(proc, "| sps")
        time.sleep(1.0)  # the next call under way
        proc.send_signal(signal.SIGINT)
        return _until_exit(proc, time.monotonic())
    if case in ("sigterm-anakin", "sigterm-sebulba", "sigint-anakin", "sigint-sebulba"):
        command = ANAKIN if case.endswith("anakin") else SEBULBA
        proc = _start([*command, "--checkpoint-dir", str(tmp / "ckpt"), "--resume", "auto"], tmp)
        _wait_for_progress(proc)
        proc.send_signal(signal.SIGTERM if case.startswith("sigterm") else signal.SIGINT)
        seconds, status = _until_exit(proc, time.monotonic())
        VERDICTS.append(_verdict(proc, tmp / "ckpt"))
        return seconds, status
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
    if case in ONE_LINE_CASES:
        return _one_line_stop(case, tmp)
    if case == "unreachable-coordinator":
        start = time.monotonic()
        proc = _start([*ANAKIN, *coordinator, "1", "--distributed-timeout", "2"], tmp)
        return _until_exit(proc, start)  # from the start: the figure includes Python's and JAX's start-up
    raise ValueError(f"unknown case {case!r}")


def _one_line_stop(case: str, tmp: Path) -> tuple[float, int]:
    """A run that ends itself (a non-finite update, a failing environment): seconds to its exit, and whether it said
    so in one line (:data:`VERDICTS`: "one line", or the count of lines that read as errors)."""
    directory = ["--checkpoint-dir", str(tmp / "ckpt")]
    if case == "diverging-anakin":
        proc = _start([*ANAKIN[:-2], "--updates-per-call", "1", "--agent", "a2c", *DIVERGING, *directory], tmp)
        _wait_for_progress(proc, "| sps")
        start = time.monotonic()
    else:
        start = time.monotonic()
        if case == "diverging-sebulba":
            proc = _start([*SEBULBA, *DIVERGING, *directory], tmp)
        else:
            task = "Raising-v0" if case == "raising-env-sebulba" else "Hanging-v0"
            proc = _start([*FAULTY, "--env", f"gymnasium:faulty_envs:{task}", *directory], tmp)
        threading.Thread(target=proc.stdout.read, daemon=True).start()
    seconds, status = _until_exit(proc, start)
    errors = [line for line in proc.stderr.read().splitlines() if "error" in line.lower() or "Traceback" in line]
    VERDICTS.append("one line" if len(errors) == 1 else f"{len(errors)} lines")
    return seconds, status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeats", type=int, default=3, help="measurements per case (default: 3)")
    parser.add_argument(
        "--load",
        type=float,
        default=None,
        help="first make a load: busy loops until the 1-minute load average reaches this (they run until the end)",
    )
    _report.add_output_flags(parser, "fault_latency")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1.")

    machine = f"{_report.cpu_model()}, {os.cpu_count()} cores"
    print(f"# fault latency on {machine}", flush=True)
    busy = _load(args.load) if args.load else []
    if busy:
        print(f"# load: {len(busy)} busy loops, load average {os.getloadavg()[0]:.1f}", flush=True)
    try:
        rows = _measure_cases(args)
    finally:
        for proc in busy:
            proc.kill()
    _table(args, machine, rows)


def _measure_cases(args) -> list[dict]:
    import tempfile

    from podracer.run import lifetime

    rows = []
    for case in args.cases:
        seconds, statuses, loads = [], [], []
        verdicts = []
        for _ in range(args.repeats):
            VERDICTS.clear()
            with tempfile.TemporaryDirectory() as tmp:
                loads.append(os.getloadavg()[0])
                s, status = measure(case, Path(tmp))
            seconds.append(s)
            statuses.append(status)
            verdicts += VERDICTS
            print(f"{case}: {s:.1f} s, exit status {status}" + (f", {VERDICTS[0]}" if VERDICTS else ""), flush=True)
        bound = lifetime.STOP_SECONDS + 5
        rows.append(
            {
                "case": case,
                "what": CASES[case],
                "seconds": seconds,
                "median_s": statistics.median(seconds),
                "statuses": statuses,
                "load_1min": loads,
                "verdicts": verdicts,
                "within_bound": None if case in ONE_LINE_CASES else sum(x <= bound for x in seconds),
            }
        )
    return rows


def _table(args, machine: str, rows: list[dict]) -> None:
    lines = [
        f"Fault latency on {machine}: seconds from the signal or kill to the exit ({args.repeats} repeats; "
        "`python benchmarks/fault_latency.py`)",
        "",
        "| case | median (s) | min (s) | max (s) | exit statuses | stops: saved / said / neither | within bound + 5 s "
        "| load (1 min) |",
        "|---|---:|---:|---:|---|---|---|---|",
    ]
    for row in rows:
        v = row["verdicts"]
        stops = f"{v.count('saved')} / {v.count('said')} / {v.count('neither')}" if v else "-"
        if v and all("line" in x for x in v):  # a run that ended itself: did it say so in one line?
            stops = f"one line: {v.count('one line')} of {len(v)}"
        lines.append(
            f"| {row['what']} | {row['median_s']:.1f} | {min(row['seconds']):.1f} | {max(row['seconds']):.1f} | "
            f"{', '.join(map(str, row['statuses']))} | {stops} | "
            + ("-" if row["within_bound"] is None else f"{row['within_bound']} of {len(row['seconds'])}")
            + " | "
            f"{', '.join(f'{x:.1f}' for x in row['load_1min'])} |"
        )
    text = "\n".join(lines) + "\n"
    print("\n" + text, flush=True)
    _report.save(_report.output_path(args.save, args.out, "fault_latency"), text, {"machine": machine, "rows": rows})


if __name__ == "__main__":
    main()
