"""podracer's PQN beside podracer's PPO, on the same machine in one run: wall clock to a target return and return
at equal env steps, seeds vmapped in one program.

Each run is a fresh ``podracer anakin --preset NAME --num-seeds S --eval-every U`` process (start-up, imports and
compilation included, as a user runs it; ``U`` the preset's updates per host call, so every call ends with a
greedy evaluation), the two agents' runs alternating (PQN, PPO, PQN, PPO, ...). A run's wall clock to the target
is the time from launch until its ``metrics.jsonl`` first has a line whose greedy return (the seeds' mean)
reaches the target (training returns would hold epsilon-greedy PQN below it); its return at equal env steps is
the greedy return of the line nearest the env steps both presets train. The table names the machine, its load and
the command.

    python benchmarks/pqn_vs_ppo.py                                   # CartPole: cartpole-pqn against cartpole
    python benchmarks/pqn_vs_ppo.py --pairs breakout-minatar-pqn:breakout-minatar --target 10 --repeats 1
    python benchmarks/pqn_vs_ppo.py --save                            # also benchmarks/results/pqn_vs_ppo.*
    python benchmarks/pqn_vs_ppo.py --rejax-python /tmp/rjx/bin/python    # and rejax's PQN (benchmarks/pqn_rejax.py)

With ``--rejax-python`` rejax's PQN joins the CartPole pair as a third side, run by that Python (a virtual
environment made with ``pip install rejax "gymnax<1.0"``): rejax compiles its whole run, so its wall clock to the target
is the whole run's, and its first evaluation at the target is given in env steps.
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


def run_once(preset: str, seeds: int, seed: int, target: float, timeout: float) -> dict:
    """One fresh run of ``preset``: seconds from launch to the first line at or above ``target`` (None: never),
    the whole run's seconds, and every line's (env steps, training return)."""
    with tempfile.TemporaryDirectory() as log_dir:
        command = [sys.executable, "-m", "podracer.cli", "anakin", "--preset", preset, "--num-seeds", str(seeds)]
        from podracer.cli import presets

        every = presets.get(preset).flags["updates-per-call"]
        command += ["--seed", str(seed), "--log-dir", log_dir, "--eval-every", str(every), "--eval-episodes", "16"]
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        reached, lines, seen = None, [], 0
        path = Path(log_dir) / "metrics.jsonl"
        while True:
            done = proc.poll() is not None
            if path.exists():
                records = [json.loads(x) for x in path.read_text().splitlines() if x.strip().endswith("}")]
                for record in records[seen:]:
                    if "eval_return" in record:
                        lines.append((record["env_steps"], record["eval_return"]))
                        if reached is None and record["eval_return"] >= target:
                            reached = time.perf_counter() - start
                seen = len(records)
            if done:
                break
            if time.perf_counter() - start > timeout:
                proc.kill()
                break
            time.sleep(0.25)
        if proc.returncode not in (0, None):
            raise SystemExit(f"{' '.join(command)} exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        return {"to_target_s": reached, "total_s": time.perf_counter() - start, "lines": lines}


def run_rejax(python: str, seeds: int, seed: int, target: float) -> dict:
    """One fresh run of ``benchmarks/pqn_rejax.py`` by ``python``: as :func:`run_once` returns, the time to the
    target being the whole run's (None: no evaluation reached it)."""
    worker = Path(__file__).with_name("pqn_rejax.py")
    start = time.perf_counter()
    out = subprocess.run(
        [python, str(worker), "--seeds", str(seeds), "--seed", str(seed)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{python} {worker} exited {out.returncode}: {out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    total = time.perf_counter() - start
    reached = [steps for steps, value in result["evals"] if value >= target]
    return {"to_target_s": total if reached else None, "total_s": total, "lines": result["evals"]}


def at_steps(lines: list, env_steps: float) -> float:
    """The training return of the line nearest ``env_steps``."""
    return min(lines, key=lambda line: abs(line[0] - env_steps))[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", nargs="+", default=["cartpole-pqn:cartpole"], help="PQN_PRESET:PPO_PRESET ...")
    parser.add_argument("--target", type=float, default=475.0, help="the greedy return to reach")
    parser.add_argument("--seeds", type=int, default=3, help="seeds vmapped in each run")
    parser.add_argument("--seed", type=int, default=100, help="the first seed (presets were tuned on 0-4)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each preset, alternating")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run is stopped")
    parser.add_argument("--rejax-python", default=None, help="a Python with rejax: its PQN joins the CartPole pair")
    _report.add_output_flags(parser, "pqn_vs_ppo")
    args = parser.parse_args()

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    rows, data = [], {"cpu": _report.cpu_model(), "load": os.getloadavg()[0], "command": " ".join(sys.argv)}
    for pair in args.pairs:
        pqn, ppo = pair.split(":")
        runs = {pqn: [], ppo: []}
        rejax = args.rejax_python and pqn == "cartpole-pqn"
        if rejax:
            runs["rejax PQN (2 x 64, whole run compiled)"] = []
        for r in range(args.repeats):
            for preset in (pqn, ppo) if r % 2 == 0 else (ppo, pqn):
                runs[preset].append(run_once(preset, args.seeds, args.seed, args.target, args.timeout))
            if rejax:
                runs["rejax PQN (2 x 64, whole run compiled)"].append(
                    run_rejax(args.rejax_python, args.seeds, args.seed, args.target)
                )
        common = min(max(line[0] for line in run["lines"]) for side in runs.values() for run in side)
        for preset, side in runs.items():
            reached = [run["to_target_s"] for run in side]
            rows.append(
                f"| {preset} | "
                + ", ".join("never" if s is None else f"{s:.0f}" for s in reached)
                + f" | {statistics.median(run['total_s'] for run in side):.0f} | {common:,.0f} | "
                + ", ".join(f"{at_steps(run['lines'], common):.1f}" for run in side)
                + " |"
            )
        data[pair] = {k: v for k, v in runs.items()}
    text = "\n".join(
        [
            f"PQN beside PPO on {_report.cpu_model()} ({os.cpu_count()} cores), load {data['load']:.1f} at the start; "
            f"`python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`",
            "",
            f"{args.seeds} seeds vmapped per run (seeds {args.seed}-{args.seed + args.seeds - 1}); every run a fresh "
            "process (start-up and compilation included); greedy returns (16 episodes a seed after every host "
            "call), the seeds' mean",
            "",
            f"| preset | seconds to {args.target:g} (each run) | seconds per run (median) | equal env steps "
            "| return there (each run) |",
            "|---|---|---:|---:|---|",
            *rows,
        ]
    )
    print(text)
    _report.save(_report.output_path(args.save, args.out, "pqn_vs_ppo"), text + "\n", data)


if __name__ == "__main__":
    main()
