"""Today's Anakin update against another git revision's, in one run: every speed claim a ratio measured side by side.

Each side runs in its own process: the other revision's ``podracer/`` is taken out of git (``git archive``)
into a temporary folder and put first on that process's path; today's is the working tree. Both build the
same config from the same seed, compile it (timed apart), and then take turns: each round times one host
call (``--updates-per-call`` updates, scanned) of each side, the side that goes first alternating, and
the table gives every round's ratio and their median. At the end the two sides' parameters, after the same
number of calls from the same seed, are compared: a change that claims the same mathematics must end where
the other revision ends, to float tolerance.

    python benchmarks/compare_commits.py --against 105d32c                        # PPO, Catch, 64 envs, 1 device
    python benchmarks/compare_commits.py --against HEAD~3 --agent a2c --env cartpole --num-envs 1024
    # also benchmarks/results/compare_commits.{md,json}
    python benchmarks/compare_commits.py --against 105d32c --save
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

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

REPO = Path(__file__).resolve().parent.parent

# ---- the worker: one side, in its own process, answering one command per line on stdin ----


def worker(config: dict) -> None:
    """Builds ``config``'s update with whichever ``podracer`` is first on the path, compiles it and answers
    ``call`` (seconds of one host call), ``params PATH`` (saves the flat parameters) and ``quit``."""
    from podracer import parallel  # the faces, which every revision compared has (the modules moved in 1270bbc)

    parallel.set_cpu_device_count(config["devices"])
    import jax
    import jax.flatten_util
    import numpy as np
    from anakin_throughput import AGENT_SETTINGS

    import podracer
    from podracer import agents, envs, learner

    rollout_length, hyper = AGENT_SETTINGS[config["agent"]]
    env = envs.make(config["env"])
    agent = agents.make(config["agent"], env.spec(), **hyper)
    optimizer = learner.make_optimizer(3e-4)
    compiled, state, compile_seconds = _report.compile_anakin(
        env,
        agent,
        optimizer,
        num_envs=config["num_envs"],
        rollout_length=rollout_length,
        updates_per_call=config["updates_per_call"],
        devices=jax.devices()[: config["devices"]],
        seed=config["seed"],
    )

    def answer(**fields):
        print(json.dumps(fields), flush=True)

    answer(ready=True, compile_s=compile_seconds, podracer=str(Path(podracer.__file__).parent))
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "call":
            start = time.perf_counter()
            state, metrics = compiled(state)
            jax.block_until_ready(metrics)
            answer(seconds=time.perf_counter() - start)
        elif command == "params":
            flat, _ = jax.flatten_util.ravel_pytree(parallel.unreplicate(state.learner.params))
            np.save(rest[0], np.asarray(flat))
            answer(saved=rest[0])
        else:
            return


# ---- the parent: two workers, alternating ----


class Side:
    """One worker process: ``source`` is the folder whose ``podracer/`` it imports."""

    def __init__(self, name: str, source: Path, config: dict):
        self.name = name
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        }
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(config)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ready = self.receive()
        imported = Path(self.ready["podracer"]).resolve()
        if not imported.is_relative_to(source.resolve()):
            self.close()
            raise SystemExit(
                f"The {name} side imported podracer from {imported}, not from {source}: "
                "an installed copy shadows it (install podracer in editable mode, or uninstall it)."
            )

    def receive(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(
                f"The {self.name} side's worker ended (exit status {self.process.wait()}); its error is above."
            )
        return json.loads(line)

    def ask(self, command: str) -> dict:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.receive()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
            self.process.wait()


def compare(against: str, config: dict, rounds: int) -> dict:
    import numpy as np

    commit = _report.resolve(against)
    with tempfile.TemporaryDirectory(prefix="podracer-compare-") as folder:
        folder = Path(folder)
        _report.extract(commit, folder)
        sides = [Side("today", REPO, config)]
        try:
            sides.append(Side(against, folder, config))
            seconds = {side.name: [] for side in sides}
            for r in range(rounds):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    seconds[side.name].append(side.ask("call")["seconds"])
            ratios = [old / new for new, old in zip(seconds["today"], seconds[against])]
            flat = []
            for side in sides:
                path = folder / f"{side.name.replace('/', '_')}-params.npy"
                side.ask(f"params {path}")
                flat.append(np.load(path))
        finally:
            for side in sides:
                side.close()
    today, other = flat
    same_shape = today.shape == other.shape
    steps = config["updates_per_call"] * config["num_envs"] * config["devices"] * rollout_length(config["agent"])
    return {
        **config,
        "against": against,
        "against_commit": commit,
        "rounds": rounds,
        "compile_s": {side.name: side.ready["compile_s"] for side in sides},
        "seconds": seconds,
        "ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "sps": {name: steps / statistics.median(s) for name, s in seconds.items()},
        "params_max_abs_diff": float(np.max(np.abs(today - other))) if same_shape else None,
        "params_close": bool(same_shape and np.allclose(today, other, rtol=1e-4, atol=1e-5)),
    }


def rollout_length(agent: str) -> int:
    from anakin_throughput import AGENT_SETTINGS

    return AGENT_SETTINGS[agent][0]


def table(result: dict) -> str:
    against = result["against"]
    head = (
        f"{result['agent']} on {result['env']}, {result['num_envs']} envs x {result['devices']} device(s), "
        f"{result['updates_per_call']} updates per call, seed {result['seed']}; today's working tree against "
        f"{against} ({result['against_commit'][:10]}), {result['rounds']} rounds, alternating"
    )
    lines = [
        head,
        "",
        "| round | today (s) | " + against + " (s) | speed ratio (today / " + against + ") |",
        "|---:|---:|---:|---:|",
    ]
    for i, (new, old, ratio) in enumerate(
        zip(result["seconds"]["today"], result["seconds"][against], result["ratios"])
    ):
        lines.append(f"| {i + 1} | {new:.3f} | {old:.3f} | {ratio:.3f} |")
    quartiles = (
        statistics.quantiles(result["ratios"], n=4) if len(result["ratios"]) > 1 else [result["median_ratio"]] * 3
    )
    diff = result["params_max_abs_diff"]
    lines += [
        "",
        f"- median speed ratio: **{result['median_ratio']:.3f}** (quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f})",
        f"- env steps/s (median call): today {result['sps']['today']:,.0f}, {against} {result['sps'][against]:,.0f}",
        f"- compile: today {result['compile_s']['today']:.1f} s, {against} {result['compile_s'][against]:.1f} s",
        "- final parameters after the same calls from the same seed: "
        + (
            "different shapes (the revisions' networks differ)"
            if diff is None
            else f"max |difference| {diff:.3g}, {'equal' if result['params_close'] else 'NOT equal'} to float tolerance"
        ),
    ]
    return "\n".join(lines)


def main(argv=None):
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "--worker":
        return worker(json.loads(sys.argv[2]))
    from anakin_throughput import AGENT_SETTINGS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the git revision to compare with (a commit, tag or branch)")
    parser.add_argument("--agent", default="ppo", choices=sorted(AGENT_SETTINGS))
    parser.add_argument("--env", default="catch", choices=["catch", "cartpole"])
    parser.add_argument("--num-envs", type=int, default=64, help="environments per device")
    parser.add_argument("--devices", type=int, default=1, help="CPU devices each side uses")
    parser.add_argument(
        "--updates-per-call",
        type=int,
        default=None,
        help="updates scanned in one host call (default: enough for 2**17 env steps)",
    )
    parser.add_argument("--rounds", type=int, default=20, help="timed calls of each side")
    parser.add_argument("--seed", type=int, default=0)
    _report.add_output_flags(parser, "compare_commits")
    args = parser.parse_args(argv)
    for name in ("num_envs", "devices", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}.")
    if args.updates_per_call is not None and args.updates_per_call < 1:
        parser.error(f"--updates-per-call must be >= 1, got {args.updates_per_call}.")
    steps_per_update = AGENT_SETTINGS[args.agent][0] * args.num_envs * args.devices
    config = {
        "agent": args.agent,
        "env": args.env,
        "num_envs": args.num_envs,
        "devices": args.devices,
        "seed": args.seed,
        "updates_per_call": args.updates_per_call or max(1, 2**17 // steps_per_update),
    }

    from podracer.run import parallel

    parallel.set_cpu_device_count(args.devices)
    machine = _report.machine()
    print(f"# Today's podracer against {args.against} on {machine}", flush=True)
    result = compare(args.against, config, args.rounds)
    text = f"Today's podracer against {args.against} on {machine}\n\n{table(result)}\n"
    print("\n" + text)
    _report.save(_report.output_path(args.save, args.out, "compare_commits"), text, {"machine": machine, **result})


if __name__ == "__main__":
    main()
