"""Replay throughput on device: add, sample (uniform and prioritized) and priority updates, and DQN in Anakin.

Each operation runs ``--ops`` times inside one compiled ``lax.scan`` (as it does inside
Anakin's update), with the memory an argument of the call. After a compiling call of each,
``--repeats`` rounds call the four operations in turn (so a slow spell of a shared machine
falls on all of them), and each is timed as its median over the rounds; items are
CartPole-sized n-step transitions (two 4-float observations and four scalars). The table
gives items/s and microseconds per call, and at each capacity the ratio of prioritized to
uniform sampling time: the median over rounds of the two calls' ratio within a round. Then DQN with prioritized
replay trains on JAX CartPole in Anakin (the settings of examples/anakin_dqn_cartpole.py)
and its steady-state env steps/s and compile time are reported.

    python benchmarks/replay_throughput.py
    python benchmarks/replay_throughput.py --capacities 10000 1000000 --batch-size 256
"""

from __future__ import annotations

import argparse
import statistics
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)


def _item():
    import jax
    import jax.numpy as jnp

    f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
    return {
        "observation": f32(4),
        "action": jax.ShapeDtypeStruct((), jnp.int32),
        "reward": f32(),
        "discount": f32(),
        "next_observation": f32(4),
        "valid": f32(),
    }


def _time_interleaved(calls: dict, repeats: int) -> tuple[dict, dict, list[dict]]:
    """Calls every ``calls[name]()`` once (compiling), then ``repeats`` rounds of one call each, in turn, so slow
    spells of a shared machine fall on all of them alike. Returns each one's median seconds, its compile seconds
    (first call less the median) and every round's times."""
    import jax

    first = {}
    for name, call in calls.items():
        start = time.perf_counter()
        jax.block_until_ready(call())
        first[name] = time.perf_counter() - start
    rounds = []
    for _ in range(repeats):
        times = {}
        for name, call in calls.items():
            start = time.perf_counter()
            jax.block_until_ready(call())
            times[name] = time.perf_counter() - start
        rounds.append(times)
    steady = {name: statistics.median(r[name] for r in rounds) for name in calls}
    return steady, {name: max(first[name] - steady[name], 0.0) for name in calls}, rounds


def replay_rows(capacities, batch_size: int, add_size: int, ops: int, repeats: int):
    import jax
    import jax.numpy as jnp

    from podracer.core import replay

    rows = []
    item = _item()
    for capacity in capacities:
        state = replay.init(item, capacity)
        fill = jax.tree.map(lambda s: jnp.ones((capacity, *s.shape), s.dtype), item)
        state = jax.jit(replay.add)(state, fill)
        batch = jax.tree.map(lambda s: jnp.ones((add_size, *s.shape), s.dtype), item)

        # The memory goes in and comes out (donated), so the writes cannot be optimised away.
        add_many = jax.jit(
            lambda s: jax.lax.scan(lambda s, _: (replay.add(s, batch), None), s, None, length=ops)[0], donate_argnums=0
        )
        held = [jax.tree.map(jnp.copy, state)]

        def adds():
            held[0] = add_many(held[0])
            return held[0].size

        # The memory is an argument (as in a learner step), not a constant XLA could fold.
        def sampler(prioritized):
            def draws(state, key):
                def body(total, key):
                    sample = replay.sample(state, key, batch_size, prioritized=prioritized)
                    return total + jnp.sum(sample.items["observation"]) + jnp.sum(sample.weights), None

                return jax.lax.scan(body, 0.0, jax.random.split(key, ops))[0]

            return jax.jit(draws)

        @jax.jit
        def updates(state, key):
            def body(s, key):
                indices = jax.random.randint(key, (batch_size,), 0, capacity)
                return replay.update_priorities(s, indices, jax.random.uniform(key, (batch_size,)) + 0.1), None

            return jax.lax.scan(body, state, jax.random.split(key, ops))[0].max_priority

        key = jax.random.key(0)
        uniform, prioritized = sampler(False), sampler(True)
        calls = {
            "add": adds,
            "sample uniform": lambda: uniform(state, key),
            "sample prioritized": lambda: prioritized(state, key),
            "update priorities": lambda: updates(state, key),
        }
        sizes = {
            "add": add_size,
            "sample uniform": batch_size,
            "sample prioritized": batch_size,
            "update priorities": batch_size,
        }
        steady, compile_s, rounds = _time_interleaved(calls, repeats)
        for name, seconds in steady.items():
            rows.append(
                {
                    "capacity": capacity,
                    "op": name,
                    "items": sizes[name],
                    "us_per_call": 1e6 * seconds / ops,
                    "items_per_s": sizes[name] * ops / seconds,
                    "compile_s": compile_s[name],
                }
            )
        # The ratio of the two sampling calls of each round (taken back to back), median over rounds.
        ratio = statistics.median(r["sample prioritized"] / r["sample uniform"] for r in rounds)
        rows.append({"capacity": capacity, "op": "prioritized / uniform", "ratio": ratio})
        print(
            f"capacity {capacity:>9,}: "
            + ", ".join(f"{r['op']} {r['us_per_call']:.1f} us" for r in rows[-5:-1])
            + f"; prioritized/uniform {ratio:.2f}x",
            flush=True,
        )
    return rows


def dqn_row(updates: int):
    import jax

    from podracer.core import agents, envs
    from podracer import anakin
    from podracer.core.learner import make_optimizer

    defaults = dict(replay_ratio=4.0, batch_size=128, min_replay_size=1000, replay_capacity=50_000)
    env = envs.make("cartpole")
    agent = agents.make("dqn", env.spec(), **defaults)
    devices = jax.devices()
    result = anakin.run(
        anakin.anakin_plan(
            num_envs_per_device=16,
            rollout_length=8,
            num_updates=updates,
            updates_per_call=updates // 5,
            devices=devices,
        ),
        agent._replace(optimizer=make_optimizer(1e-3, 10.0)),
        anakin.init(env, agent, make_optimizer(1e-3, 10.0), jax.random.key(0), 16, devices, rollout_length=8),
        env=env,
    )
    return {
        "devices": len(devices),
        "num_envs_per_device": 16,
        "rollout_length": 8,
        **defaults,
        "env_steps_per_s": result.env_steps_per_second,
        "compile_s": result.compile_seconds,
        "final_training_return": result.history[-1]["episode_return"],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacities", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--batch-size", type=int, default=256, help="items per sample / priority update")
    parser.add_argument("--add-size", type=int, default=256, help="items per add")
    parser.add_argument("--ops", type=int, default=100, help="operations per compiled call")
    parser.add_argument("--repeats", type=int, default=21, help="rounds of interleaved timed calls")
    parser.add_argument("--dqn-updates", type=int, default=1000, help="Anakin DQN updates (0: skip)")
    _report.add_output_flags(parser, "replay_throughput")
    args = parser.parse_args(argv)

    from podracer.run import parallel

    parallel.set_cpu_device_count(parallel.available_cores())
    import jax

    machine = _report.machine()
    print(f"# replay throughput on {machine}, jax {jax.__version__}", flush=True)
    rows = replay_rows(args.capacities, args.batch_size, args.add_size, args.ops, args.repeats)
    dqn = dqn_row(args.dqn_updates) if args.dqn_updates else None

    lines = [
        f"Replay throughput on {machine}, jax {jax.__version__}; {args.ops} operations per compiled call, "
        f"median of {args.repeats} interleaved rounds\n",
        "| capacity | operation | items per call | us per call | items/s |",
        "|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        if "ratio" in row:
            lines.append(
                f"| {row['capacity']:,} | **prioritized / uniform sampling time** | | **{row['ratio']:.2f}x** | |"
            )
        else:
            lines.append(
                f"| {row['capacity']:,} | {row['op']} | {row['items']} | {row['us_per_call']:.1f} | "
                f"{row['items_per_s']:,.0f} |"
            )
    if dqn:
        lines += [
            "",
            f"DQN (prioritized replay, ratio {dqn['replay_ratio']}, batch {dqn['batch_size']}) on JAX CartPole in "
            f"Anakin, "
            f"{dqn['devices']} device(s) x {dqn['num_envs_per_device']} envs, rollout {dqn['rollout_length']}: "
            f"**{dqn['env_steps_per_s']:,.0f} env steps/s** steady state, compile {dqn['compile_s']:.1f} s.",
        ]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    _report.save(
        _report.output_path(args.save, args.out, "replay_throughput"),
        text,
        {"machine": machine, "jax": jax.__version__, "rows": rows, "dqn": dqn},
    )


if __name__ == "__main__":
    main()
