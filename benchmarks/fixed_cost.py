"""What one step of an Anakin rollout costs regardless of its environments, and what ``--rollout-unroll`` does to it.

A rollout is a loop (``lax.scan``) of ``rollout_length`` iterations, each one environment step of every environment
and one call of the policy. Each iteration pays a fixed cost (the loop's own bookkeeping, the kernels' launches on
an accelerator, each fused kernel's start) before the per-environment work: at MinAtar's sizes (640-1,280 envs) on a
GPU the fixed cost is most of a step. Two measures of it, per configuration:

- **kernels per step**: the top-level instructions of the rollout loop's body in the compiled program (fusions,
  custom calls, copies, collectives; not parameters, constants, tuples or bitcasts), divided by the steps one
  iteration writes out: on an accelerator, each is a kernel launched per step.
- **fixed seconds per step**: the rollout alone (policy and environment, no learning) timed at two sizes, and
  ``seconds per step = a + b * envs`` fitted through them: ``a`` is the fixed cost, ``b`` the cost of one env step.

Then the same with the rollout loop unrolled by each factor of ``--unrolls``: the trajectories are the same bit for
bit (``tests/test_anakin.py``), the program longer to compile.

    python benchmarks/fixed_cost.py                                  # PPO on MinAtar Breakout, 64 and 256 envs here
    python benchmarks/fixed_cost.py --sizes 640 1280 --unrolls 1 2 4 8   # on an accelerator (accelerator.py's row)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRIVIAL = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast"}


def computations(hlo: str) -> dict[str, list[str]]:
    """The compiled module's computations by name: each one's instruction lines."""
    found, name = {}, None
    for line in hlo.splitlines():
        header = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if header:
            name = header.group(1)
            found[name] = []
        elif line.startswith("}"):
            name = None
        elif name is not None and "=" in line:
            found[name].append(line.strip())
    return found


def opcode(line: str) -> str:
    """The instruction's opcode: the word before its first ``(`` after ``=`` and the result's shape."""
    right = line.split("=", 1)[1]
    match = re.search(r"\s([a-z][\w\-]*)\(", right)
    return match.group(1) if match else ""


def loop_bodies(hlo: str) -> list[tuple[str, int]]:
    """``(body name, kernel-like instructions)`` of every while loop of the module, largest first."""
    comps = computations(hlo)
    bodies = []
    for lines in comps.values():
        for line in lines:
            if opcode(line) == "while":
                body = re.search(r"body=%?([\w.\-]+)", line)
                if body and body.group(1) in comps:
                    kernels = [op for op in map(opcode, comps[body.group(1)]) if op and op not in TRIVIAL]
                    bodies.append((body.group(1), len(kernels)))
    return sorted(bodies, key=lambda b: -b[1])


def rollout_program(env_name: str, num_envs: int, rollout: int, unroll: int, agent_name: str = "ppo"):
    """``(compiled rollout, params, rollout state, compile seconds)``: one rollout of ``num_envs`` environments
    on one device, policy and environment only."""
    import jax

    from podracer.core import agents, anakin, envs, learner

    env = envs.make(env_name)
    agent = agents.make(agent_name, env.spec())
    optimizer = learner.make_optimizer(2.5e-4)
    state = anakin.init_state(env, agent, optimizer, jax.random.key(0), num_envs, rollout_length=rollout)
    step = anakin.make_rollout(env, agent, rollout, unroll=unroll)
    start = time.perf_counter()
    compiled = jax.jit(lambda p, r: step(p, r)[:2]).lower(state.learner.params, state.rollout).compile()
    return compiled, state.learner.params, state.rollout, time.perf_counter() - start


def measure(env_name: str, sizes, unrolls, rollout: int, rounds: int) -> list[dict]:
    import jax

    programs = {}
    for n in sizes:
        for u in unrolls:
            compiled, params, rollout_state, compile_s = rollout_program(env_name, n, rollout, u)
            rollout_state, trajectory = compiled(params, rollout_state)  # warm-up
            jax.block_until_ready(trajectory)
            body = loop_bodies(compiled.as_text())
            programs[n, u] = dict(compiled=compiled, params=params, state=rollout_state, compile_s=compile_s, body=body)
    times = {key: [] for key in programs}
    for r in range(rounds):  # every program once a round, the order rotating
        keys = list(programs)
        keys = keys[r % len(keys) :] + keys[: r % len(keys)]
        for key in keys:
            p = programs[key]
            start = time.perf_counter()
            p["state"], trajectory = p["compiled"](p["params"], p["state"])
            jax.block_until_ready(trajectory)
            times[key].append((time.perf_counter() - start) / rollout)
    rows = []
    small, large = min(sizes), max(sizes)
    for u in unrolls:
        per_step = {n: statistics.median(times[n, u]) for n in sizes}
        b = (per_step[large] - per_step[small]) / (large - small) if large > small else float("nan")
        a = per_step[small] - b * small
        body = programs[small, u]["body"]
        rows.append(
            {
                "unroll": u,
                "kernels_per_step": body[0][1] / u if body else None,
                "fixed_us_per_step": a * 1e6,
                "ns_per_env_step": b * 1e9,
                "us_per_step": {n: per_step[n] * 1e6 for n in sizes},
                "compile_s": {n: programs[n, u]["compile_s"] for n in sizes},
            }
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="gymnax:Breakout-MinAtar", help="the JAX environment")
    parser.add_argument("--sizes", type=int, nargs=2, default=[64, 256], help="two environment counts to fit")
    parser.add_argument("--unrolls", type=int, nargs="+", default=[1, 2, 4, 8], help="rollout-unroll factors")
    parser.add_argument("--rollout-length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=7, help="timed calls of each program, rounds alternating")
    parser.add_argument("--out", help="write the table and records here (a path without suffix)")
    args = parser.parse_args(argv)
    if any(u < 1 or u > args.rollout_length for u in args.unrolls):
        parser.error(f"--unrolls must lie in [1, --rollout-length {args.rollout_length}], got {args.unrolls}.")
    sys.path.insert(0, str(HERE))
    import _report

    rows = measure(args.env, args.sizes, args.unrolls, args.rollout_length, args.rounds)
    small, large = args.sizes
    lines = [
        f"The fixed cost of a rollout step: PPO's policy on {args.env}, {args.rollout_length} steps, on "
        f"{_report.machine()}; {args.rounds} rounds alternating, medians",
        "",
        f"| --rollout-unroll | kernels per step | fixed µs per step | ns per env step | µs per step at {small} | "
        f"µs per step at {large} | compile s ({small}) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        kernels = "–" if r["kernels_per_step"] is None else f"{r['kernels_per_step']:.1f}"
        lines.append(
            f"| {r['unroll']} | {kernels} | {r['fixed_us_per_step']:.1f} | {r['ns_per_env_step']:.2f} | "
            f"{r['us_per_step'][small]:.1f} | {r['us_per_step'][large]:.1f} | {r['compile_s'][small]:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        out = Path(args.out)
        out.with_suffix(".md").write_text(text)
        out.with_suffix(".json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
