"""What an environment suite's adapter costs: Anakin env steps/s on a suite's task against podracer's own JAX version.

    python benchmarks/adapter_overhead.py                          # gymnax:CartPole-v1 against cartpole, 64 envs
    python benchmarks/adapter_overhead.py --agent a2c --num-envs 256 --rounds 7

Both sides compile once (ahead of time, apart); then the timed host calls alternate between
them, round by round, and the table gives each side's median and the median of the
per-round ratios, so a noisy shared machine moves both sides alike.
"""

from __future__ import annotations

import argparse
import statistics
import time

import _report

from podracer.run import parallel

PAIRS = {"gymnax:CartPole-v1": "cartpole"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite-env", default="gymnax:CartPole-v1", choices=sorted(PAIRS))
    parser.add_argument("--agent", default="ppo", choices=["a2c", "ppo"])
    parser.add_argument("--num-envs", type=int, default=64, help="environments per device")
    parser.add_argument("--rounds", type=int, default=9, help="timed host calls per side, alternating")
    parser.add_argument("--updates-per-call", type=int, default=50)
    parser.add_argument("--cpu-devices", type=int, default=1, help="CPU devices to expose (default: 1)")
    _report.add_output_flags(parser, "adapter_overhead")
    args = parser.parse_args(argv)

    parallel.set_cpu_device_count(args.cpu_devices)
    import jax

    from podracer.core import agents, envs, learner
    from podracer import anakin

    machine = _report.machine()
    print(f"# adapter overhead on {machine}, jax {jax.__version__}", flush=True)
    rollout = 16
    devices = jax.devices()[: args.cpu_devices]
    sides = {}
    for name in (args.suite_env, PAIRS[args.suite_env]):
        env = envs.make(name)
        agent = agents.make(args.agent, env.spec())
        optimizer = learner.make_optimizer(3e-3)
        update = anakin.make_update(env, agent, optimizer, rollout_length=rollout)
        state = anakin.init(env, agent, optimizer, jax.random.key(0), args.num_envs, devices)
        start = time.perf_counter()
        compiled = (
            parallel.device_map(anakin.make_multi_update(update, args.updates_per_call), devices).lower(state).compile()
        )
        compile_seconds = time.perf_counter() - start
        state, metrics = compiled(state)  # warm-up
        jax.block_until_ready(metrics)
        sides[name] = {"compiled": compiled, "state": state, "compile_s": compile_seconds, "seconds": []}
    steps = args.updates_per_call * rollout * args.num_envs * len(devices)
    for _ in range(args.rounds):
        for side in sides.values():
            start = time.perf_counter()
            side["state"], metrics = side["compiled"](side["state"])
            jax.block_until_ready(metrics)
            side["seconds"].append(time.perf_counter() - start)
    suite, own = sides[args.suite_env], sides[PAIRS[args.suite_env]]
    ratios = [b / a for a, b in zip(suite["seconds"], own["seconds"])]  # suite sps / own sps, round by round
    rows = [
        {"env": name, "compile_s": side["compile_s"], "sps": steps / statistics.median(side["seconds"])}
        for name, side in sides.items()
    ]
    lines = [
        f"Adapter overhead on {machine}, jax {jax.__version__}: {args.agent}, {len(devices)} device(s), "
        f"{args.num_envs} envs/device, rollout {rollout}, {args.rounds} alternating rounds of {steps:,} env steps",
        "",
        "| env | compile (s) | env steps/s (median) |",
        "|---|---:|---:|",
    ]
    lines += [f"| {r['env']} | {r['compile_s']:.1f} | {r['sps']:,.0f} |" for r in rows]
    lines += [
        "",
        f"{args.suite_env} / {PAIRS[args.suite_env]}: median ratio {statistics.median(ratios):.3f} "
        f"(rounds: {min(ratios):.3f} ... {max(ratios):.3f})",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    _report.save(
        _report.output_path(args.save, args.out, "adapter_overhead"),
        text,
        {
            "machine": machine,
            "jax": jax.__version__,
            "rows": rows,
            "ratios": ratios,
            "agent": args.agent,
            "num_envs": args.num_envs,
        },
    )


if __name__ == "__main__":
    main()
