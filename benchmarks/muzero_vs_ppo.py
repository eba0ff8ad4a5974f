"""podracer's MuZero (``--agent muzero``) beside podracer's PPO at equal env steps, on the same machine in one run:
Catch, CartPole and MinAtar Breakout in Anakin (seeds vmapped in one program), Catch (stepped on the host) and
CartPole (envpool) in Sebulba (one run per seed, one after another).

Each side is a fresh ``podracer anakin|sebulba --preset NAME`` process, the two sides alternating task by task
(MuZero, PPO, ...), both trained for the task's env steps per seed (``--num-updates`` set from each preset's
batch; Sebulba: ``--total-env-steps``), both ending with a greedy evaluation (``--eval-episodes`` episodes per
seed). The table gives each seed's greedy return and the training return of the last host call, and the wall clock
of the process (start-up and compilation included, as a user runs it), and names the machine.

    python benchmarks/muzero_vs_ppo.py                                  # every task, seeds 100-102
    python benchmarks/muzero_vs_ppo.py --tasks catch cartpole-sebulba   # some of them
    python benchmarks/muzero_vs_ppo.py --save                           # also benchmarks/results/muzero_vs_ppo.*
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _report

# task: (mode, MuZero's preset, PPO's preset, env steps per seed, PPO's flags over its preset)
TASKS = {
    "catch": ("anakin", "catch-muzero", "catch-ppo", 409_600, []),
    "cartpole": ("anakin", "cartpole-muzero", "cartpole", 409_600, []),
    "breakout": ("anakin", "breakout-minatar-muzero", "breakout-minatar", 2_048_000, []),
    "catch-sebulba": ("sebulba", "catch-sebulba-muzero", "catch-sebulba-ppo", 409_600, []),
    "cartpole-sebulba": ("sebulba", "cartpole-sebulba-muzero", "cartpole-sebulba", 409_600, []),
}


def anakin_flags(preset: str, env_steps: int, episodes: int) -> list[str]:
    """``--num-updates`` for ``env_steps`` per seed (``--updates-per-call`` the largest divisor of it up to the
    preset's), one greedy evaluation at the end."""
    from podracer.cli import presets

    flags = presets.get(preset).flags
    batch = flags.get("num-envs", 64) * flags.get("rollout-length", 16)
    updates = max(1, round(env_steps / batch))
    every = max(d for d in range(1, flags.get("updates-per-call", 20) + 1) if updates % d == 0)
    return [
        *("--num-updates", str(updates), "--updates-per-call", str(every)),
        *("--eval-every", str(updates), "--eval-episodes", str(episodes)),
    ]


def run(mode: str, preset: str, extra: list[str], seeds: int, seed: int) -> dict:
    """One fresh process per Anakin side (seeds vmapped) or per Sebulba seed: greedy and training returns per seed,
    env steps per seed, wall clock."""
    out = {"greedy": [], "training": [], "seconds": 0.0, "env_steps": 0}
    for s in [seed] if mode == "anakin" else range(seed, seed + seeds):
        with tempfile.TemporaryDirectory() as log_dir:
            command = [sys.executable, "-m", "podracer.cli", mode, "--preset", preset, *extra]
            command += ["--seed", str(s), "--log-dir", log_dir]
            if mode == "anakin":
                command += ["--num-seeds", str(seeds)]
            print("$", " ".join(command[2:]), file=sys.stderr, flush=True)
            start = time.perf_counter()
            done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            out["seconds"] += time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
            lines = [json.loads(x) for x in (Path(log_dir) / "metrics.jsonl").read_text().splitlines() if x.strip()]
            last = lines[-1]
            evaluated = [x for x in lines if "eval_return" in x][-1]
            out["env_steps"] = int(last["env_steps"])  # per seed
            if mode == "anakin":
                out["greedy"] += evaluated.get("eval_return_per_seed", [evaluated["eval_return"]])
                out["training"] += last.get("episode_return_per_seed", [last["episode_return"]])
            else:
                out["greedy"].append(evaluated["eval_return"])
                out["training"].append(last["episode_return"])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=100, help="the first seed (tuning used 0-4)")
    parser.add_argument("--eval-episodes", type=int, default=64, help="greedy episodes per seed at the end")
    _report.add_output_flags(parser, "muzero_vs_ppo")
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    rows, load = [], os.getloadavg()[0]
    for task in args.tasks:
        mode, muzero, ppo, env_steps, ppo_extra = TASKS[task]
        for agent, preset, extra in (("muzero", muzero, []), ("ppo", ppo, ppo_extra)):
            flags = list(extra)
            if mode == "anakin":
                flags += anakin_flags(preset, env_steps, args.eval_episodes)
            else:
                flags += ["--total-env-steps", str(env_steps), "--eval-episodes", str(args.eval_episodes)]
                flags += ["--eval-every", str(env_steps // _sebulba_batch(preset))]
            result = run(mode, preset, flags, args.seeds, args.seed)
            rows.append({"task": task, "mode": mode, "agent": agent, "preset": preset, "flags": flags, **result})
            print(f"{task} {agent}: greedy {[round(g, 2) for g in result['greedy']]}", file=sys.stderr, flush=True)

    def cell(values):
        return ", ".join(f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}" for v in values)

    lines = [
        "# MuZero beside PPO at equal env steps",
        "",
        f"Machine: {_report.machine()}, load {load:.1f} at the start. Seeds {args.seed}-{args.seed + args.seeds - 1}; "
        f"greedy evaluation over {args.eval_episodes} episodes per seed at the end; training: the last host call's "
        "episodes; wall clock: the whole process (start-up and compilation included), all seeds of a side.",
        "",
        "| task | mode | agent | preset | env steps per seed | greedy return per seed | training return per seed "
        "| wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['task']} | {r['mode']} | {r['agent']} | {r['preset']} | {r['env_steps']:,} | {cell(r['greedy'])} "
            f"| {cell(r['training'])} | {r['seconds']:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    data = {
        "machine": _report.machine(),
        "load": load,
        "seeds": list(range(args.seed, args.seed + args.seeds)),
        "rows": rows,
        "command": "python benchmarks/muzero_vs_ppo.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    _report.save(_report.output_path(args.save, args.out, "muzero_vs_ppo"), text, data)
    return 0


def _sebulba_batch(preset: str) -> int:
    """Env steps per learner update of a Sebulba preset (one actor thread)."""
    from podracer.cli import presets

    flags = presets.get(preset).flags
    return flags.get("num-envs-per-actor", 32) * flags.get("rollout-length", 20)


if __name__ == "__main__":
    sys.exit(main())
