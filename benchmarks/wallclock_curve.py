"""Return against wall-clock seconds on one MuJoCo task: SAC at CleanRL's settings beside TD3 with FastTD3's options,
each trained for the same seconds in Sebulba on envpool's HalfCheetah-v4, one after the other on one machine.

    python benchmarks/wallclock_curve.py --seconds 900              # prints the table
    python benchmarks/wallclock_curve.py --seconds 900 --save       # and writes benchmarks/results/wallclock_curve.*
    python benchmarks/wallclock_curve.py --seconds 60 --sides sac --out /tmp/curve  # a short look

Each side runs in a process of its own (its compilation counted in its seconds, as a user's launch is), from its
launch until ``--seconds`` have passed, when the run is stopped; every ``--eval-every-steps`` env steps (to the
nearest update) it plays ``--eval-episodes`` greedy episodes on fresh environments, and the curve is those
evaluations' mean returns against the seconds since launch, beside the env steps taken by then. Seconds include
the evaluations, which both sides pay alike per evaluation (not per env step).

Sides (the flags are in :data:`SIDES`):

- ``sac``: CleanRL's ``sac_continuous_action.py`` settings (vwxyzjn/cleanrl at fe8d8a0): one environment, a
  gradient step of 256 items per env step, a million-item memory, learning from 5,000 items, 2 x 256 ReLU networks,
  tau 0.005, gamma 0.99, the temperature tuned towards -|A| from 1. Departures: one learning rate, 3e-4, for actor,
  critics and temperature (CleanRL: 1e-3 for the critics), the actor stepped at every gradient step (CleanRL: twice
  every second one), and the first 5,000 env steps acted by the initial policy (CleanRL: uniform actions).
- ``fasttd3``: TD3 with FastTD3's options (younggyoseo/FastTD3 at 229ed59, ``fast_td3/hyperparams.py``'s defaults:
  C51 critics over 101 atoms, no target actor, tau 0.1, exploration noise from 0.001 to 0.4 over the environments,
  target noise 0.001 clipped at 0.5, the actor every second gradient step, two gradient steps per vector step,
  normalised observations) at a CPU's size: 32 environments (FastTD3: 128 and more), batches of 1,024 (32,768),
  2 x 256 networks for both (512 and 1,024), the support [-100, 1000] for HalfCheetah's returns (FastTD3's ±250 is
  for rewards near 1 a step), Adam (AdamW) in float32 (bf16).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

ENV = "HalfCheetah-v4"
SIDES = {
    "sac": [
        "--agent", "sac", "--num-envs-per-actor", "1", "--rollout-length", "1", "--batch-size", "256",
        "--replay-ratio", "256", "--replay-capacity", "1000000", "--min-replay-size", "5000",
        "--learning-rate", "3e-4", "--target-tau", "0.005", "--discount", "0.99", "--hidden-sizes", "256", "256",
    ],
    "fasttd3": [
        "--agent", "td3", "--num-envs-per-actor", "32", "--rollout-length", "1", "--batch-size", "1024",
        "--replay-ratio", "64", "--replay-capacity", "1000000", "--min-replay-size", "2048",
        "--num-atoms", "101", "--v-min", "-100", "--v-max", "1000", "--no-target-actor", "--target-tau", "0.1",
        "--exploration-noise-min", "0.001", "--exploration-noise-max", "0.4", "--target-noise", "0.001",
        "--target-noise-clip", "0.5", "--policy-delay", "2", "--learning-rate", "3e-4", "--discount", "0.99",
        "--normalize-observations", "--hidden-sizes", "256", "256",
    ],
}  # fmt: skip
ENVS = {"sac": 1, "fasttd3": 32}  # env steps per update (one actor, rollouts of one step)


def side_argv(side: str, seed: int, eval_every_steps: int, eval_episodes: int) -> list[str]:
    """The Sebulba flags one side trains with: its settings, an evaluation every ``eval_every_steps`` env steps (to
    the nearest update), and a budget of env steps no run reaches (the seconds stop it)."""
    every = max(1, round(eval_every_steps / ENVS[side]))
    return [
        "--env", ENV, *SIDES[side], "--seed", str(seed), "--total-env-steps", str(ENVS[side] * 10_000_000),
        "--eval-every", str(every), "--eval-episodes", str(eval_episodes), "--log-every", str(every), "--no-log-dir",
    ]  # fmt: skip


def run_side(argv: list[str], seconds: float, launch: float) -> None:
    """In the child: trains ``argv`` until ``seconds`` after ``launch`` (the parent's clock at the launch), printing
    one ``CURVE {json}`` line per evaluation: seconds since launch, env steps, mean greedy return."""
    from podracer.cli import parser
    from podracer.run import compose
    from podracer.run import parallel
    from podracer.run.config import SebulbaConfig

    parallel.set_cpu_device_count(parallel.available_cores())
    cfg = parser.parse(SebulbaConfig, argv, prog="wallclock_curve.py")
    print("MACHINE " + _report.machine(), flush=True)
    stop = threading.Event()
    threading.Timer(max(0.0, launch + seconds - time.time()), stop.set).start()

    def log(summary: dict) -> None:
        if "eval_return" in summary:
            point = {"s": time.time() - launch, "env_steps": summary["env_steps"], "return": summary["eval_return"]}
            print("CURVE " + json.dumps(point), flush=True)

    compose.train_sebulba(cfg, stop=stop, log=log)


def measure(side: str, seed: int, seconds: float, eval_every_steps: int, eval_episodes: int) -> dict:
    """Launches one side's process and reads its curve."""
    argv = side_argv(side, seed, eval_every_steps, eval_episodes)
    launch = time.time()
    child = [sys.executable, __file__, "--child", str(seconds), str(launch), "--", *argv]
    done = subprocess.run(child, capture_output=True, text=True, check=False)
    points = [json.loads(line[6:]) for line in done.stdout.splitlines() if line.startswith("CURVE ")]
    if done.returncode != 0:
        raise RuntimeError(f"{side} exited {done.returncode}:\n{done.stderr[-3000:]}")
    machine = next((line[8:] for line in done.stdout.splitlines() if line.startswith("MACHINE ")), "unknown")
    return {
        "side": side,
        "seed": seed,
        "argv": argv,
        "wall_s": time.time() - launch,
        "machine": machine,
        "points": points,
    }


def best_by(points: list[dict], seconds: float) -> float | None:
    """The best evaluation return reached within ``seconds`` of launch (None: no evaluation by then)."""
    returns = [p["return"] for p in points if p["s"] <= seconds]
    return max(returns) if returns else None


def table(runs: list[dict], seconds: float, machine: str, command: str) -> str:
    marks = [m for m in (60, 120, 300, 600, 900, 1200, 1800, 3600) if m <= seconds]
    lines = [
        f"Greedy evaluation return against seconds since launch, envpool {ENV}, Sebulba, on {machine}; `{command}`",
        "",
        "| side | seed | evaluations | env steps at the end | env steps/s | "
        + " | ".join(f"best by {m} s" for m in marks)
        + " | last return |",
        "|---|---|---:|---:|---:|" + "---:|" * len(marks) + "---:|",
    ]
    for run in runs:
        points = run["points"]
        last = points[-1] if points else {"env_steps": 0, "return": float("nan"), "s": 1}
        cells = [best_by(points, m) for m in marks]
        lines.append(
            f"| {run['side']} | {run['seed']} | {len(points)} | {last['env_steps']:,.0f} | "
            f"{last['env_steps'] / max(last['s'], 1e-9):,.0f} | "
            + " | ".join("-" if c is None else f"{c:,.1f}" for c in cells)
            + f" | {last['return']:,.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        ax.plot([p["s"] for p in run["points"]], [p["return"] for p in run["points"]], marker="o", ms=3,
                label=f"{run['side']} (seed {run['seed']})")  # fmt: skip
    ax.set_xlabel("seconds since launch")
    ax.set_ylabel("greedy evaluation return")
    ax.set_title(f"{ENV}, Sebulba")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        run_side(argv[4:], float(argv[1]), float(argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=900.0, help="wall-clock seconds each side trains for")
    parser.add_argument("--sides", nargs="+", choices=sorted(SIDES), default=["sac", "fasttd3"])
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--eval-every-steps", type=int, default=5000)
    parser.add_argument("--eval-episodes", type=int, default=4)
    _report.add_output_flags(parser, "wallclock_curve")
    args = parser.parse_args(argv)
    command = "python benchmarks/wallclock_curve.py " + " ".join(argv)
    runs = []
    for side in args.sides:
        runs.append(measure(side, args.seed, args.seconds, args.eval_every_steps, args.eval_episodes))
        print(f"{side}: {len(runs[-1]['points'])} evaluations in {runs[-1]['wall_s']:.0f} s", flush=True)
    machine = runs[0]["machine"]  # as the sides' processes saw it (one CPU device per core)
    text = table(runs, args.seconds, machine, command)
    print(text)
    out = _report.output_path(args.save, args.out, "wallclock_curve")
    if out is not None:
        picture = out.with_suffix(".png")
        _report.save(out, text + f"\n![return against seconds]({picture.name})\n", {"machine": machine, "runs": runs})
        plot(runs, picture)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
