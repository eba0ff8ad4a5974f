"""Craftax-1M: podracer's PPO on Craftax-Symbolic-v1 at 1M env steps, scored as Craftax's scoreboard scores, beside the
scoreboard's entries.

    python benchmarks/craftax_1m.py                          # trains seeds 100-104, one after another (about 35 min)
    python benchmarks/craftax_1m.py --from-log DIR --save    # finished runs' log folder; writes results/craftax_1m.*

The Craftax README's scoreboard (MichaelTMatthews/Craftax at c3c2e0d, "Craftax-1M") reports an algorithm's reward as
a percentage of the maximum, 226, after 1M env steps. podracer runs the settings of Craftax_Baselines' ``ppo.py``
(MichaelTMatthews/Craftax_Baselines at 7ce36fa: lr 2e-4 annealed linearly, 64 steps per rollout, 4 epochs of 8
minibatches, gamma 0.99, GAE lambda 0.8, clip 0.2, entropy 0.01, value 0.5, gradient norm 1.0, tanh, separate
actor and critic of three layers), except what the budget and this CPU set: 64 environments (its default 1024
would leave 15 updates in 1M steps) and layers of 64 units (its 512 run at a quarter of the speed here, where the
environment alone steps at about 2.6k env steps/s). Chosen before any run, not tuned. The figure is each seed's
mean return over the episodes that ended in the run's last host call (8 updates, 32,768 env steps), the sampled
policy, as the baselines' logs report it; the row gives the interquartile mean over seeds and the range. Each seed
is its own run (``DIR/seed-S``): vmapped together, five seeds' 320 Craftax states stepped at a quarter of one seed's
speed per env step on this CPU (622 env steps/s in all, against about 2.6k for one seed's 64 environments).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import _report

ROOT = Path(__file__).resolve().parents[1]
MAXIMUM = 226.0  # the Craftax README at c3c2e0d: "We report reward as a % of the maximum (226)"
SCOREBOARD = (  # Craftax README at c3c2e0d, "Craftax-1M", reward as % of the maximum
    ("Simulus", 6.6),
    ("Efficient MBRL", 5.4),
    ("PPO-RNN (Craftax_Baselines)", 2.3),
    ("RND (Craftax_Baselines)", 2.2),
    ("PPO (Craftax_Baselines)", 2.2),
    ("ICM (Craftax_Baselines)", 2.2),
)
SETTINGS = [
    "--env", "craftax:Craftax-Symbolic-v1", "--agent", "ppo", "--total-env-steps", "1000000",
    "--num-envs", "64", "--rollout-length", "64", "--num-epochs", "4", "--num-minibatches", "8",
    "--learning-rate", "2e-4", "--lr-schedule", "linear", "--discount", "0.99", "--gae-lambda", "0.8",
    "--clip-epsilon", "0.2", "--entropy-coef", "0.01", "--value-coef", "0.5", "--max-grad-norm", "1.0",
    "--activation", "tanh", "--hidden-sizes", "64", "64", "64", "--updates-per-call", "8",
]  # fmt: skip


def flags(argv: list[str]) -> dict[str, list[str]]:
    """A command line's flags and their values: ``--a 1 2 --b`` -> ``{"--a": ["1", "2"], "--b": []}``."""
    parsed: dict[str, list[str]] = {}
    flag = None
    for token in argv:
        if token.startswith("--"):
            flag = token
            parsed[flag] = []
        elif flag is not None:
            parsed[flag].append(token)
    return parsed


def iqm(values: list[float]) -> float:
    from podracer.core import stats

    return float(stats.interquartile_mean(values))


def read(log_dir: Path) -> dict:
    """A run's last host call: its mean return, its episodes and the run's env steps (``log_dir/metrics.jsonl``)."""
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    last = rows[-1]
    return {"env_steps": int(last["env_steps"]), "return": float(last["episode_return"]), "episodes": last["episodes"]}


def check(log_dir: Path, seed: int) -> list[str]:
    """The flags of this script's settings (and ``seed``) that the run in ``log_dir`` ran otherwise."""
    ran = flags(json.loads((log_dir / "run.json").read_text())["command"])
    wanted = flags([*SETTINGS, "--seed", str(seed)])
    return sorted(flag for flag, values in wanted.items() if ran.get(flag) != values)


def table(data: dict) -> str:
    percent = [100 * r / MAXIMUM for r in data["returns"]]
    lines = [
        f"Craftax-Symbolic-v1 at {data['env_steps']:,} env steps per seed (seeds {data['seeds']}), on {data['cpu']}; "
        f"`{data['command']}`",
        "",
        "| algorithm | reward, % of the maximum (226) | source |",
        "|---|---:|---|",
        f"| podracer PPO (64-unit layers, 64 envs) | {iqm(percent):.2f} (IQM; seeds {min(percent):.2f}-"
        f"{max(percent):.2f}) | this run: last host call's episodes, sampled policy |",
    ]
    lines += [f"| {name} | {value:.1f} | Craftax README at c3c2e0d, Craftax-1M |" for name, value in SCOREBOARD]
    lines += ["", "Per seed, mean return (episodes): " + ", ".join(
        f"{r:.2f} ({int(n)})" for r, n in zip(data["returns"], data["episodes"]))]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--num-seeds", type=int, default=5)
    parser.add_argument("--from-log", help="a folder of finished runs, seed-S/ each (this script's settings)")
    parser.add_argument("--log-dir", default="runs/craftax-1m", help="where the runs started here log (seed-S/ each)")
    _report.add_output_flags(parser, "craftax_1m")
    args = parser.parse_args()
    seeds = range(args.seed, args.seed + args.num_seeds)
    folder = Path(args.from_log or args.log_dir)
    runs = []
    for seed in seeds:
        log_dir = folder / f"seed-{seed}"
        command = ["podracer", "anakin", *SETTINGS, "--seed", str(seed), "--log-dir", str(log_dir)]
        if not args.from_log:
            out = subprocess.run([sys.executable, "-m", "podracer.cli", *command[1:]], cwd=ROOT)
            if out.returncode != 0:
                raise SystemExit(f"craftax_1m: {' '.join(command)} exited with {out.returncode}")
        if differ := check(log_dir, seed):
            parser.error(f"--from-log: {log_dir} ran other settings than this script's: {', '.join(differ)}")
        runs.append(read(log_dir))
    data = {
        "cpu": _report.cpu_model(),
        "seeds": f"{seeds[0]}-{seeds[-1]}",
        "command": f"podracer anakin {' '.join(SETTINGS)} --seed S (S = {seeds[0]} ... {seeds[-1]}, one run each)",
        "env_steps": runs[0]["env_steps"],
        "returns": [r["return"] for r in runs],
        "episodes": [r["episodes"] for r in runs],
    }
    print(table(data))
    _report.save(_report.output_path(args.save, args.out, "craftax_1m"), table(data), data)


if __name__ == "__main__":
    main()
