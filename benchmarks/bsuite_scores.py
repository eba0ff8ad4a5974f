"""bsuite scores of podracer's agents: every id of the ported experiments trained with bsuite's episode budget, the
returns written as bsuite's own CSV logs, and the scores computed by bsuite's own analysis.

    python benchmarks/bsuite_scores.py --bsuite-python /tmp/bsuite-venv/bin/python
    python benchmarks/bsuite_scores.py --bsuite-python ... --experiments catch --save   # benchmarks/results/bsuite.*
    python benchmarks/bsuite_scores.py --bsuite-python ... --check-ports   # the ports against bsuite's environments

bsuite 0.3.6 (google-deepmind/bsuite; Osband et al., 2020) defines each experiment as a sweep of ids and an
episode count, and scores an agent from the logs its ``Logging`` wrapper writes: ``episode``, ``total_return``,
``total_regret`` and the rest, one CSV per id. podracer runs the ids on its JAX ports (``bsuite:ID``,
``podracer/core/envs/bsuite.py``) with the command line: one environment per id (bsuite's one stream of episodes),
the ids that share their rules vmapped in one program as seeds (``--num-seeds``), exactly the experiment's
episodes (every port's episodes have one length; each episode takes its steps plus the reset step that podracer's
auto-reset counts). Each host call's returns and episode counts per seed (``metrics.jsonl``) give the running
totals, written as rows at every call's end; ``total_regret`` is the optimal return times the episodes less the
raw (unscaled) returns. Then ``--bsuite-python`` (a Python with ``pip install bsuite==0.3.6``) loads the folder
with ``bsuite.logging.csv_load.load_bsuite`` and scores it with ``bsuite.experiments.summary_analysis
.bsuite_score``, bsuite's code throughout.

The agent's settings per experiment are fixed below, chosen before any run (no tuning: bsuite publishes no
agent's numbers to tune towards), the same for every id; an experiment's 20 ids train on the seeds ``--seed`` to
``--seed`` + 19, one each (in the order of the groups of ids that share their rules).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from podracer.core.envs import bsuite  # noqa: E402  (the ports' sweeps and episode counts; imports no JAX backend)

PPO = {  # the agent every experiment runs, one environment per id
    "agent": "ppo",
    "learning-rate": "1e-3",
    "num-epochs": "4",
    "discount": "0.99",
    "entropy-coef": "0.01",
    "hidden-sizes": ["64", "64"],
}
# experiment: (episodes per rollout, minibatches, host calls): rollouts of whole episodes, whole calls
LAYOUT = {
    "bandit": (10, 2, 10),
    "catch": (10, 2, 10),
    "catch_scale": (10, 2, 10),
    "discounting_chain": (2, 2, 10),
}
REGRET = ("bandit", "catch", "catch_scale")  # the experiments whose bsuite log keeps total_regret

SCORE = """
import json, sys
from bsuite.logging import csv_load
from bsuite.experiments import summary_analysis
df, sweep_vars = csv_load.load_bsuite({"podracer": sys.argv[1]})
scores = summary_analysis.bsuite_score(df, sweep_vars)
import bsuite
print(json.dumps({"bsuite": getattr(bsuite, "__version__", "?"),
                  "scores": {r.bsuite_env: {"score": float(r.score), "finished": bool(r.finished)}
                             for r in scores.itertuples()}}))
"""


BSUITE_SIDE = """
import json, sys
import numpy as np
from bsuite.environments import bandit, catch, discounting_chain
from bsuite.utils import wrappers

arms = []
for s in range(20):
    env = bandit.SimpleBandit(mapping_seed=s)
    rewards = []
    for a in range(11):
        env.reset()
        rewards.append(float(env.step(a).reward))
    arms.append(rewards)
out = {"bandit": arms}
chains = {}
for s in range(20):
    for a in range(5):
        env = discounting_chain.DiscountingChain(mapping_seed=s)
        ts = env.reset()
        steps = [[ts.observation.tolist(), 0.0, 1.0]]
        while not ts.last():
            ts = env.step(a)
            steps.append([ts.observation.tolist(), float(ts.reward), float(ts.discount)])
        chains[f"{s}/{a}"] = steps
out["discounting_chain"] = chains
rng = np.random.RandomState(0)
episodes = []
for e in range(30):
    env = wrappers.RewardScale(catch.Catch(seed=e), reward_scale=30.0)
    ts = env.reset()
    ball, actions = int(np.argmax(ts.observation[0])), rng.randint(3, size=9).tolist()
    steps = [[ts.observation.tolist(), 0.0, 1.0]]
    for a in actions:
        ts = env.step(a)
        steps.append([ts.observation.tolist(), float(ts.reward), float(ts.discount)])
    regret = env.raw_env.bsuite_info()["total_regret"]
    episodes.append({"ball": ball, "actions": actions, "steps": steps, "regret": regret})
out["catch_scale/12"] = episodes
print(json.dumps(out))
"""


def check_ports(bsuite_python: str) -> str:
    """The ports against bsuite's own environments, step by step: the bandit's 20 arm orders, the discounting chain's
    20 ids x 5 first actions to the end of the episode, and 30 catch episodes at reward scale 30 (the ball's column
    bsuite drew and random actions replayed), through bsuite's public API; a ``SystemExit`` naming the first
    difference, else what was checked."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from podracer.core import envs

    out = subprocess.run([bsuite_python, "-c", BSUITE_SIDE], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bsuite_scores: bsuite's environments failed: {out.stderr.strip().splitlines()[-1:]}")
    theirs = json.loads(out.stdout)

    def play(env, state, first, actions):
        steps = [[np.asarray(first), 0.0, 1.0]]
        for action in actions:
            state, timestep = env.step(state, jnp.int32(action))
            steps.append([np.asarray(timestep.observation), float(timestep.reward), float(timestep.discount)])
        return steps

    def same(ours, reference, what):
        for (o, r, d), (o2, r2, d2) in zip(ours, reference, strict=True):
            if not (np.allclose(o, o2) and np.isclose(r, r2) and d == d2):
                raise SystemExit(
                    f"bsuite_scores: {what} differs from bsuite's: {o.tolist()}, {r}, {d} vs {o2}, {r2}, {d2}"
                )

    for seed in range(20):
        if not np.allclose(envs.make(f"bsuite:bandit/{seed}").env.rewards, theirs["bandit"][seed]):
            raise SystemExit(f"bsuite_scores: bandit/{seed}'s arms differ from bsuite's")
    for name, reference in theirs["discounting_chain"].items():
        seed, action = map(int, name.split("/"))
        env = envs.make(f"bsuite:discounting_chain/{seed}")
        state, timestep = env.reset(jax.random.key(0))
        same(
            play(env, state, timestep.observation, [action] * 100),
            reference,
            f"discounting_chain/{seed}, chain {action}",
        )
    env = envs.make("bsuite:catch_scale/12")
    for episode in theirs["catch_scale/12"]:
        state, _ = env.reset(jax.random.key(0))
        state = state._replace(ball_x=jnp.int32(episode["ball"]))
        steps = play(env, state, env.env._observe(state), episode["actions"])
        same(steps, episode["steps"], "a catch_scale/12 episode")
        if bsuite.regret(steps[-1][1] / env.reward_scale, 1) != episode["regret"]:
            raise SystemExit("bsuite_scores: catch's regret differs from bsuite's")
    return "bandit: 20 arm orders; discounting_chain: 20 ids x 5 chains; catch_scale/12: 30 episodes"


def groups(experiment: str) -> list[list[int]]:
    """The experiment's id indices, grouped by identical rules (one program each)."""
    by_rules: dict[str, list[int]] = {}
    for index, setting in enumerate(bsuite.settings(experiment)):
        if experiment == "discounting_chain":
            setting = {"chain": setting["mapping_seed"] % 5}
        by_rules.setdefault(json.dumps(setting, sort_keys=True), []).append(index)
    return list(by_rules.values())


def run_group(experiment: str, indices: list[int], seed: int, workdir: Path) -> list[dict]:
    """Trains the ids ``indices`` (the same rules) together; their per-call running totals, one list per id."""
    first = f"{experiment}/{indices[0]}"
    length = bsuite.make(first).episode_length + 1  # the reset step counts
    per_rollout, minibatches, calls = LAYOUT[experiment]
    episodes = bsuite.EPISODES[experiment]
    rollout = per_rollout * length
    updates = episodes // per_rollout
    if updates % calls:
        raise ValueError(f"{experiment}: {updates} updates do not split into {calls} calls")
    log_dir = workdir / f"{experiment}-{indices[0]}"
    command = [sys.executable, "-m", "podracer.cli", "anakin", "--env", f"bsuite:{first}", "--cpu-devices", "1"]
    command += ["--num-envs", "1", "--rollout-length", str(rollout), "--num-minibatches", str(minibatches)]
    command += ["--num-updates", str(updates), "--updates-per-call", str(updates // calls)]
    command += ["--seed", str(seed), "--num-seeds", str(len(indices)), "--log-dir", str(log_dir)]
    for flag, value in PPO.items():
        command += [f"--{flag}", *([value] if isinstance(value, str) else value)]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:]
        raise SystemExit(f"bsuite_scores: {' '.join(command)} failed: {tail}")
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    totals = [[] for _ in indices]
    done = [0.0] * len(indices)
    total = [0.0] * len(indices)
    for row in rows:
        returns = row.get("episode_return_per_seed", [row["episode_return"]])
        counts = row.get("episodes_per_seed", [row["episodes"]])
        for i, (mean, count) in enumerate(zip(returns, counts)):
            done[i] += count
            total[i] += mean * count if count else 0.0
            totals[i].append({"episode": int(round(done[i])), "total": total[i]})
    for i, index in enumerate(indices):
        if totals[i][-1]["episode"] != episodes:
            raise SystemExit(
                f"bsuite_scores: {experiment}/{index} ended {totals[i][-1]['episode']} episodes, not {episodes}"
            )
    return totals


def write_csv(experiment: str, index: int, totals: list[dict], results: Path) -> None:
    """One id's rows as bsuite's CSV logger writes them (``bsuite_id_-_EXPERIMENT-INDEX.csv``)."""
    scale = bsuite.settings(experiment)[index].get("reward_scale", 1.0)
    length = bsuite.make(f"{experiment}/{index}").episode_length
    lines = ["steps,episode,total_return,episode_len" + (",total_regret" if experiment in REGRET else "")]
    for row in totals:
        steps = row["episode"] * length  # bsuite counts no reset step
        line = f"{steps},{row['episode']},{row['total']!r},{length}"
        if experiment in REGRET:
            line += f",{bsuite.regret(row['total'] / scale, row['episode'])!r}"
        lines.append(line)
    (results / f"bsuite_id_-_{experiment}-{index}.csv").write_text("\n".join(lines) + "\n")


def score(bsuite_python: str, results: Path) -> dict:
    out = subprocess.run([bsuite_python, "-c", SCORE, str(results)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bsuite_scores: bsuite's scoring failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(data: dict) -> str:
    lines = [
        f"bsuite scores (bsuite {data['bsuite']}'s own analysis over its CSV logs) of podracer's PPO on its JAX ports, "
        f"on {data['cpu']}; `{data['command']}`",
        "",
        "| experiment | ids | episodes per id | score | mean raw return per episode (over ids) | seconds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for experiment, row in data["experiments"].items():
        lines.append(
            f"| {experiment} | {row['ids']} | {row['episodes']:,} | {row['score']:.2f} | "
            f"{row['mean_return']:.3f} | {row['seconds']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bsuite-python", required=True, help="a Python with bsuite 0.3.6 installed (its scoring)")
    parser.add_argument("--experiments", default=",".join(bsuite.EPISODES), help="comma-separated experiments")
    parser.add_argument("--seed", type=int, default=100, help="the first seed: an experiment's 20 ids take 20 seeds")
    parser.add_argument("--check-ports", action="store_true", help="only check the ports against bsuite's own")
    parser.add_argument("--keep", help="a folder to keep the CSV logs and runs in (default: a temporary one)")
    _report.add_output_flags(parser, "bsuite")
    args = parser.parse_args()
    experiments = [e for e in args.experiments.split(",") if e]
    for experiment in experiments:
        if experiment not in bsuite.EPISODES:
            parser.error(f"--experiments: {experiment!r} is not ported; ported: {', '.join(bsuite.EPISODES)}")
    if not os.path.exists(args.bsuite_python):
        parser.error(f"--bsuite-python: no such file {args.bsuite_python!r}")
    if args.check_ports:
        print("the ports step as bsuite's environments do:", check_ports(args.bsuite_python))
        return

    with tempfile.TemporaryDirectory(prefix="bsuite-") as scratch:
        workdir = Path(args.keep or scratch)
        results = workdir / "csv"
        results.mkdir(parents=True, exist_ok=True)
        summary = {}
        for experiment in experiments:
            start = time.monotonic()
            finals, seed = [], args.seed
            for indices in groups(experiment):
                totals = run_group(experiment, indices, seed, workdir / "runs")
                seed += len(indices)
                for index, rows in zip(indices, totals):
                    write_csv(experiment, index, rows, results)
                    scale = bsuite.settings(experiment)[index].get("reward_scale", 1.0)
                    finals.append(rows[-1]["total"] / scale / rows[-1]["episode"])
                print(f"{experiment} ids {indices}: done", flush=True)
            summary[experiment] = {
                "ids": len(finals),
                "episodes": bsuite.EPISODES[experiment],
                "mean_return": sum(finals) / len(finals),
                "seconds": time.monotonic() - start,
            }
        scored = score(args.bsuite_python, results)
        for experiment in experiments:
            entry = scored["scores"].get(experiment)
            if entry is None or not entry["finished"]:
                raise SystemExit(f"bsuite_scores: bsuite did not score {experiment} as finished: {entry}")
            summary[experiment]["score"] = entry["score"]
        data = {
            "cpu": _report.cpu_model(),
            "bsuite": scored["bsuite"],
            "command": "python benchmarks/bsuite_scores.py " + " ".join(sys.argv[1:]),
            "settings": {"agent": PPO, "layout": {e: LAYOUT[e] for e in experiments}, "seed": args.seed},
            "experiments": summary,
        }
        print(table(data))
        _report.save(_report.output_path(args.save, args.out, "bsuite"), table(data), data)


if __name__ == "__main__":
    main()
