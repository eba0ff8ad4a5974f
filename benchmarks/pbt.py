"""Population-based training against a grid sweep and against fixed settings at equal compute, and what PBT costs.

    python benchmarks/pbt.py --save                       # both parts: the comparison and the overhead
    python benchmarks/pbt.py --tasks acrobot --repeats 3 --rounds 0 --out benchmarks/results/pbt_acrobot
    python benchmarks/pbt.py --tasks --rounds 5 --out benchmarks/results/pbt_overhead      # the overhead alone

Comparison: on each task (a gymnax preset, PPO), three ways of spending the same env steps (``--lanes`` learners,
each trained for the preset's budget, in one program): PBT (``--population LANES`` over ``--pbt-search``, ranked
every host call), the grid (``--sweep`` of ``LANES`` settings log-spaced over the same ranges) and the preset's
fixed settings (``--num-seeds LANES``). Each is run ``--repeats`` times (population, grid and seed ranges from
``--seed 0, 1, ...``: seeds the preset's settings were not tuned on start at 100). A run's result is its best
learner's greedy return at the end (64 episodes, the preset's evaluation): PBT's best lane, the grid's best
setting, the best of the fixed seeds; and the mean over all its learners. The table gives the interquartile mean
over repeats with a 95 % bootstrap interval.

Overhead: a population of 64 lanes against 64 vmapped seeds without PBT on Catch (A2C), the same flags otherwise,
the two alternating; steady-state env steps/s from each run's last line, and their ratio per round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _report
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SEARCH = {"learning_rate": (1e-4, 1e-2), "entropy_coef": (1e-4, 1e-1)}
TASKS = {"acrobot": "acrobot", "mountaincar": "mountaincar"}  # name: preset
FIRST_SEED = 100  # the presets' notes were measured on seeds 0-4


def _grid(lanes: int) -> list[str]:
    """``--sweep`` specs: ``lanes`` settings, log-spaced over SEARCH (learning rates x entropy costs)."""
    rates = max(1, lanes // 2)
    lr = np.geomspace(*SEARCH["learning_rate"], rates)
    ent = np.geomspace(*SEARCH["entropy_coef"], lanes // rates)
    return [
        "--sweep",
        "learning_rate=" + ",".join(f"{v:.3g}" for v in lr),
        "--sweep",
        "entropy_coef=" + ",".join(f"{v:.3g}" for v in ent),
    ]


def _run(args: list[str], log_dir: str) -> tuple[list[dict], str]:
    command = [sys.executable, "-m", "podracer.cli", "anakin", *args, "--log-dir", log_dir]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {out.returncode}: {out.stderr[-2000:]}")
    lines = Path(log_dir, "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines], out.stdout


def compare(task: str, lanes: int, repeats: int) -> dict:
    preset = TASKS[task]
    ways = {
        "PBT": ["--population", str(lanes)]
        + [f"--pbt-search={n}=log:{lo:g}..{hi:g}" for n, (lo, hi) in SEARCH.items()],
        "grid": _grid(lanes),
        "fixed (preset)": ["--num-seeds", str(lanes)],
    }
    results = {way: [] for way in ways}
    for r in range(repeats):
        for way, flags in ways.items():
            seed = FIRST_SEED + r * lanes
            with tempfile.TemporaryDirectory() as log_dir:
                records, _ = _run(["--preset", preset, "--seed", str(seed), *flags], log_dir)
            final = np.asarray(records[-1]["eval_return_per_seed"], np.float64)
            results[way].append({"seed": seed, "best": float(np.max(final)), "mean": float(np.mean(final))})
            print(json.dumps({"task": task, "way": way, **results[way][-1]}), flush=True)
    return results


def overhead(rounds: int) -> list[dict]:
    common = ["--env", "catch", "--agent", "a2c", "--num-envs-per-device", "16", "--num-updates", "240"]
    pbt = ["--population", "64", "--pbt-search=learning_rate=log:1e-3..1e-2", "--pbt-every", "20"]
    out = []
    for r in range(rounds):
        pair = {}
        for side, flags in (("pbt", pbt), ("seeds", ["--num-seeds", "64"]))[:: 1 if r % 2 == 0 else -1]:
            with tempfile.TemporaryDirectory() as log_dir:
                _, stdout = _run([*common, *flags], log_dir)
            last = stdout.strip().splitlines()[-1]
            pair[side] = float(last.split("steady state ")[1].split(" env steps/s")[0].replace(",", ""))
        out.append({**pair, "time_ratio": pair["seeds"] / pair["pbt"], "load": os.getloadavg()[0]})
        print(json.dumps(out[-1]), flush=True)
    return out


def _iqm_interval(values) -> str:
    from podracer.core.stats import bootstrap_interval, interquartile_mean

    values = np.asarray(values, np.float64)
    if len(values) < 2:
        return f"{interquartile_mean(values):.1f}"
    low, high = bootstrap_interval(values, interquartile_mean)
    return f"{interquartile_mean(values):.1f} [{low:.1f}, {high:.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS), help="none: the overhead only")
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the overhead measurement (0: skip it)")
    _report.add_output_flags(parser, "pbt")
    args = parser.parse_args()

    data = {"cpu": _report.cpu_model(), "command": " ".join(sys.argv), "compare": {}, "overhead": []}
    rows = []
    for task in args.tasks:
        results = compare(task, args.lanes, args.repeats)
        data["compare"][task] = results
        for way, runs in results.items():
            each = ", ".join(f"{x['best']:.1f}" for x in runs)
            rows.append(
                f"| {task} | {way} | {_iqm_interval([x['best'] for x in runs])} | "
                f"{_iqm_interval([x['mean'] for x in runs])} | {each} |"
            )
    lines = (
        []
        if not args.tasks
        else [
            f"PBT, a grid sweep and fixed settings at equal compute ({args.lanes} learners x each preset's budget, "
            f"{args.repeats} repeats) on {_report.cpu_model()} ({os.cpu_count()} cores); "
            f"`python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`",
            "",
            "Greedy return at the end (64 episodes); IQM over repeats [95 % bootstrap interval]. Search space: "
            + ", ".join(f"{n} {lo:g}..{hi:g} (log)" for n, (lo, hi) in SEARCH.items()),
            "",
            "| task | way | best learner | mean of the learners | best learner, each repeat |",
            "|---|---|---:|---:|---|",
            *rows,
        ]
    )
    if args.rounds:
        data["overhead"] = overhead(args.rounds)
        ratios = [x["time_ratio"] for x in data["overhead"]]
        lines += [
            ""
            if lines
            else f"On {_report.cpu_model()} ({os.cpu_count()} cores); `python benchmarks/{Path(__file__).name} "
            f"{' '.join(sys.argv[1:])}`",
            "",
            f"Overhead: 64 PBT lanes against 64 vmapped seeds on Catch (A2C, 16 envs per device, 240 updates): "
            f"wall-time ratio (steady state) median {statistics.median(ratios):.3f} over {len(ratios)} rounds "
            f"({', '.join(f'{r:.3f}' for r in ratios)}), load {min(x['load'] for x in data['overhead']):.1f}-"
            f"{max(x['load'] for x in data['overhead']):.1f}",
        ]
    text = "\n".join(lines)
    print(text)
    _report.save(_report.output_path(args.save, args.out, "pbt"), text + "\n", data)


if __name__ == "__main__":
    main()
