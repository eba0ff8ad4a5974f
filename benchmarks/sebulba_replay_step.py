"""Sebulba's learner step for a replay agent with the state donated (the memory written in place) against the same
step not donated (every call copying the whole memory), across memory sizes.

    python benchmarks/sebulba_replay_step.py
    python benchmarks/sebulba_replay_step.py --capacities 10000 1000000 --rounds 21 --save

DQN with uniform replay on podracer's Catch (one learner device; trajectories of 4 environments x 8 steps, 32
items, a gradient step of 32 items per call), the memory filled to capacity first. Each round calls the two steps
once each, in turn (so a slow spell of a shared machine falls on both), each on its own state; the table gives each
one's median milliseconds per call and the median over rounds of their ratio within a round. The donated one is
:func:`podracer.run.sebulba.assemble.learner_step` (what a Sebulba run calls); the other is
``parallel.device_map(learner.make_learner_step(...))`` (what it called before).
"""

from __future__ import annotations

import argparse
import statistics
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)


def measure(capacity: int, rounds: int) -> dict:
    import jax

    from podracer.core import agents, envs, learner, replay
    from podracer import anakin
    from podracer.run import parallel
    from podracer.run.sebulba.assemble import learner_step

    env = envs.Catch()
    agent = agents.make(
        "dqn", env.spec(), replay_capacity=capacity, min_replay_size=32, batch_size=32, replay_ratio=1.0,
        prioritized=False, n_step=1,
    )  # fmt: skip
    state = anakin.init_state(env, agent, agent.optimizer, jax.random.key(0), 4, rollout_length=8)
    _, trajectory, _ = jax.jit(anakin.make_rollout(env, agent, 8))(state.learner.params, state.rollout)
    items, _ = agent.replay.make_items(trajectory)
    filled = jax.tree.map(lambda x: jax.numpy.resize(x, (capacity, *x.shape[1:])), items)
    memory = replay.add(state.learner.extra.replay, filled, prioritized=False)
    full = state.learner._replace(extra=state.learner.extra._replace(replay=memory))
    devices = jax.devices()[:1]
    on = lambda tree: parallel.replicate(tree, devices)  # noqa: E731
    steps = {
        "donated": learner_step(agent, devices),
        "copied": parallel.device_map(
            learner.make_learner_step(agent, agent.optimizer, axis_names=("device",)), devices
        ),
    }
    states = {name: on(full) for name in steps}
    batch = on(trajectory)
    for name, step in steps.items():  # compile, and the donated step's first call (which may copy what it got)
        states[name], metrics = step(states[name], batch)
        jax.block_until_ready(metrics)
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            states[name], metrics = step(states[name], batch)
            jax.block_until_ready((states[name].params, metrics))
            times[name].append(time.perf_counter() - start)
    ratios = [c / d for c, d in zip(times["copied"], times["donated"])]
    return {
        "capacity": capacity,
        "memory_mb": sum(x.nbytes for x in jax.tree.leaves(memory.items)) / 2**20,
        "donated_ms": 1e3 * statistics.median(times["donated"]),
        "copied_ms": 1e3 * statistics.median(times["copied"]),
        "ratio": statistics.median(ratios),
        "ratio_quartiles": statistics.quantiles(ratios, n=4)[::2] if len(ratios) > 1 else [ratios[0]] * 2,
    }


def table(rows: list[dict], machine: str, rounds: int) -> str:
    lines = [
        f"Sebulba's replay learner step, donated against copied, DQN on Catch, on {machine}, {rounds} rounds",
        "",
        "| capacity | memory | donated, ms a call | not donated, ms a call | not donated / donated (quartiles) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        low, high = r["ratio_quartiles"]
        lines.append(
            f"| {r['capacity']:,} | {r['memory_mb']:,.0f} MiB | {r['donated_ms']:.2f} | {r['copied_ms']:.2f} | "
            f"{r['ratio']:.1f}x ({low:.1f}-{high:.1f}) |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacities", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=21)
    _report.add_output_flags(parser, "sebulba_replay_step")
    args = parser.parse_args(argv)
    rows = [measure(c, args.rounds) for c in args.capacities]
    text = table(rows, _report.machine(), args.rounds)
    print(text)
    _report.save(_report.output_path(args.save, args.out, "sebulba_replay_step"), text, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
