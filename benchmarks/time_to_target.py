"""Launch to target: seconds from launching a training command until its seeds' mean return first reaches the
target, for podracer's preset and for peer libraries run as their own READMEs run them, with a cold and a warm
persistent compilation cache, the libraries alternating on one machine.

    python benchmarks/time_to_target.py --peers-python /tmp/peers/bin/python --purejaxrl /tmp/purejaxrl-31756b1
    python benchmarks/time_to_target.py ... --rounds 3 --save      # writes benchmarks/results/time_to_target.md

Task: gymnax CartPole-v1, 3 seeds vmapped in one program, target 475 (the return at which CartPole-v1 counts as
solved). Sides:

- ``podracer``: ``podracer anakin --preset cartpole --num-seeds 3`` (153,600 env steps per seed); the target's time
  is the arrival of the first progress line whose mean over the seeds reaches it, read as the process prints it.
- ``rejax`` and ``purejaxrl`` (``benchmarks/ppo_peers.py``, run by ``--peers-python``: an environment with
  ``pip install rejax "gymnax<1.0"``; PureJaxRL's ``ppo.py`` and ``wrappers.py`` copied from luchris429/purejaxrl
  at 31756b1 into a scratch folder outside the project, ``--purejaxrl``): each compiles its whole run as one
  program, so its result is seen at its end; its time to target is its launch to exit when its seeds' mean
  reached the target during the run (and "not reached" otherwise).

Cold: an empty cache folder (JAX's persistent cache, turned on for every program: ``JAX_COMPILATION_CACHE_DIR``
and minimum compile time and entry size 0 for the peers; ``--compile-cache-dir`` for podracer). Warm: the same
command again with the folder the cold run filled. Each round runs every side cold then warm, the sides' order
rotating from round to round; the table gives medians over rounds and each peer's median ratio to podracer's
time in the same round. Each side's imports are given apart, with the ratio again with each side's imports left
out: a peer's imports move with the versions of what its code imports (PureJaxRL's ``wrappers.py`` imports brax
and navix), which is not a matter of either library's start. Every side runs under ``python -X importtime``, and
its imports are the seconds Python counts for every import its process makes, the lazy ones too (podracer imports
gymnax and rlax when it makes the environment and the agent, after its start-up line's ``imports`` phase), summed
over the imports no other import made (:func:`import_seconds`): one measure for every side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _report

ROOT = Path(__file__).resolve().parents[1]
TARGET = 475.0
SEEDS = 3
PODRACER = ["-m", "podracer.cli", "anakin", "--preset", "cartpole", "--num-seeds", str(SEEDS), "--no-log-dir"]


def _env(cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    return {
        **env,
        "PYTHONUNBUFFERED": "1",
        "JAX_COMPILATION_CACHE_DIR": cache,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
    }


def import_seconds(stderr: str) -> float:
    """Seconds of a process's imports from its ``python -X importtime`` report: the cumulative time of every import
    no other import made (the report's lines whose module name is indented by one space), summed."""
    total = 0
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            _, cumulative, name = line.split("|")
            if name.startswith(" ") and not name.startswith("  ") and cumulative.strip().isdigit():
                total += int(cumulative)
    return total / 1e6


def run_podracer(cache: str) -> dict:
    """Launch to the first progress line at the target, and to exit."""
    start = time.monotonic()
    command = [sys.executable, "-X", "importtime", *PODRACER, "--compile-cache-dir", cache]
    reached, steps, final = None, None, None
    # stderr (the import report) to a file: a full pipe would stop the run
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=_env(cache))
        for line in proc.stdout:
            if "| env steps" in line and "| return" in line:
                value = float(line.split("| return")[1].split()[0])
                final = value
                if reached is None and value >= TARGET:
                    reached = time.monotonic() - start
                    steps = float(line.split("env steps")[1].split("/")[0].replace(",", ""))
        proc.wait()
        total = time.monotonic() - start
        log.seek(0)
        err = log.read()
    if proc.returncode != 0:
        raise RuntimeError(f"podracer exited with {proc.returncode}: {err[-2000:]}")
    imports = import_seconds(err)
    return {"to_target_s": reached, "total_s": total, "reached_at": steps, "final": final, "imports_s": imports}


def run_peer(library: str, cache: str, python: str, purejaxrl: str | None) -> dict:
    start = time.monotonic()
    command = [python, "-X", "importtime", str(ROOT / "benchmarks" / "ppo_peers.py"), library]
    command += ["--seeds", str(SEEDS), "--target", "475"]
    if purejaxrl:
        command += ["--purejaxrl", purejaxrl]
    out = subprocess.run(command, capture_output=True, text=True, env=_env(cache))
    total = time.monotonic() - start
    if out.returncode != 0:
        raise RuntimeError(f"{library} exited with {out.returncode}: {out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    reached = total if result["reached_at"] is not None else None  # seen at the end of its one program
    return {
        "to_target_s": reached,
        "total_s": total,
        "reached_at": result["reached_at"],
        "final": result["final"],
        "imports_s": import_seconds(out.stderr),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers-python", help="a Python with rejax and gymnax<1.0 installed (none: podracer only)")
    parser.add_argument("--purejaxrl", help="a scratch folder with PureJaxRL's ppo.py and wrappers.py")
    parser.add_argument("--rounds", type=int, default=2)
    _report.add_output_flags(parser, "time_to_target")
    args = parser.parse_args()

    sides = ["podracer"]
    if args.peers_python:
        sides += ["rejax"] + (["purejaxrl"] if args.purejaxrl else [])
    runs = []
    for r in range(args.rounds):
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for side in order:
            with tempfile.TemporaryDirectory(prefix="ttt-cache-") as cache:
                for state in ("cold", "warm"):
                    if side == "podracer":
                        result = run_podracer(cache)
                    else:
                        purejaxrl = args.purejaxrl if side == "purejaxrl" else None
                        result = run_peer(side, cache, args.peers_python, purejaxrl)
                    runs.append({"round": r, "side": side, "cache": state, "load": os.getloadavg()[0], **result})
                    print(json.dumps(runs[-1]), flush=True)

    print(table(runs, sides, args.rounds))
    data = {"cpu": _report.cpu_model(), "command": " ".join(sys.argv), "runs": runs}
    _report.save(_report.output_path(args.save, args.out, "time_to_target"), table(runs, sides, args.rounds), data)


def table(runs: list[dict], sides: list[str], rounds: int) -> str:
    rows = []
    for side in sides:
        for state in ("cold", "warm"):
            mine = [x for x in runs if x["side"] == side and x["cache"] == state]
            reached = [x["to_target_s"] for x in mine if x["to_target_s"] is not None]
            ratios, after_imports = [], []
            for x in mine:
                base = [y for y in runs if (y["round"], y["side"], y["cache"]) == (x["round"], "podracer", state)]
                if x["to_target_s"] is not None and base and base[0]["to_target_s"] is not None:
                    ratios.append(x["to_target_s"] / base[0]["to_target_s"])
                    if x.get("imports_s") is not None and base[0].get("imports_s") is not None:
                        after_imports.append(
                            (x["to_target_s"] - x["imports_s"]) / (base[0]["to_target_s"] - base[0]["imports_s"])
                        )
            imports = [x["imports_s"] for x in mine if x.get("imports_s") is not None]
            steps = ", ".join("-" if x["reached_at"] is None else f"{x['reached_at']:,.0f}" for x in mine)
            rows.append(
                f"| {side} | {state} | "
                + (f"{statistics.median(reached):.1f}" if reached else "not reached")
                + f" ({len(reached)}/{len(mine)}) | {statistics.median(x['total_s'] for x in mine):.1f} | {steps} | "
                + ", ".join(f"{x['final']:.1f}" for x in mine)
                + " | "
                + (f"{statistics.median(imports):.1f}" if imports else "-")
                + " | "
                + (f"{statistics.median(ratios):.2f}" if ratios and side != "podracer" else "")
                + " | "
                + (f"{statistics.median(after_imports):.2f}" if after_imports and side != "podracer" else "")
                + " |"
            )
    loads = [x["load"] for x in runs]
    return "\n".join(
        [
            f"Launch to a mean return of {TARGET:g} over {SEEDS} seeds, gymnax CartPole-v1, on {_report.cpu_model()} "
            f"({os.cpu_count()} cores), load average {min(loads):.1f}-{max(loads):.1f}, {rounds} round(s); "
            f"`python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`",
            "",
            "| side | cache | launch to target, s (median; runs reaching it) | launch to exit, s (median) "
            "| env steps per seed at target (each run) | final mean return (each run) | of which imports, s (median) "
            "| time ratio to podracer (median of rounds) | the same, imports left out on both sides |",
            "|---|---|---:|---:|---|---|---:|---:|---:|",
            *rows,
        ]
    )


if __name__ == "__main__":
    main()
