"""Steady-state Anakin throughput: env steps/s per agent, environment, envs per device and device count.

Compilation is timed apart (ahead-of-time ``lower().compile()``); throughput is the
median over several host calls of the compiled program, each scanning enough updates
to take a measurable time. Prints a Markdown table; ``--save`` also writes it (and JSON) to
``benchmarks/results/``.

    python benchmarks/anakin_throughput.py                      # the full sweep
    python benchmarks/anakin_throughput.py --agents ppo --envs catch --num-envs 64 32 --device-counts 1 2
"""

from __future__ import annotations

import argparse

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

from podracer import parallel  # the face (compare_commits.py imports this module beside other revisions)

AGENT_SETTINGS = {
    # agent: (rollout length, agent hyper-parameters)
    "a2c": (16, {}),
    "ppo": (128, {"num_epochs": 4, "num_minibatches": 4}),
}


def measure(env_name: str, agent_name: str, num_envs: int, num_devices: int, calls: int, target_steps: int):
    import jax

    from podracer import agents, envs, learner

    rollout_length, hyper = AGENT_SETTINGS[agent_name]
    env = envs.make(env_name)
    agent = agents.make(agent_name, env.spec(), **hyper)
    optimizer = learner.make_optimizer(3e-4)
    devices = jax.devices()[:num_devices]
    steps_per_update = rollout_length * num_envs * num_devices
    updates_per_call = max(1, target_steps // steps_per_update)

    compile_seconds, median = _report.time_anakin(
        env,
        agent,
        optimizer,
        num_envs=num_envs,
        rollout_length=rollout_length,
        updates_per_call=updates_per_call,
        devices=devices,
        calls=calls,
    )
    return {
        "agent": agent_name,
        "env": env_name,
        "devices": num_devices,
        "envs_per_device": num_envs,
        "total_envs": num_envs * num_devices,
        "rollout_length": rollout_length,
        "updates_per_call": updates_per_call,
        "compile_s": compile_seconds,
        "median_call_s": median,
        "sps": updates_per_call * steps_per_update / median,
    }


def table(rows) -> str:
    lines = [
        "| agent | env | devices | envs/device | total envs | rollout | compile (s) | env steps/s (median) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['agent']} | {r['env']} | {r['devices']} | {r['envs_per_device']} | {r['total_envs']} | "
            f"{r['rollout_length']} | {r['compile_s']:.1f} | {r['sps']:,.0f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=["a2c", "ppo"], choices=sorted(AGENT_SETTINGS))
    parser.add_argument("--envs", nargs="+", default=["catch", "cartpole"], choices=["catch", "cartpole"])
    parser.add_argument(
        "--num-envs", nargs="+", type=int, default=[16, 64, 256, 1024, 4096], help="environments per device"
    )
    parser.add_argument("--device-counts", nargs="+", type=int, default=None, help="default: 1 and all devices")
    parser.add_argument("--cpu-devices", type=int, default=None, help="CPU devices to expose (default: one per core)")
    parser.add_argument("--calls", type=int, default=5, help="timed host calls per setting (after one warm-up call)")
    parser.add_argument(
        "--target-steps", type=int, default=2**17, help="env steps each host call should cover at least"
    )
    _report.add_output_flags(parser, "anakin_throughput")
    args = parser.parse_args(argv)

    parallel.set_cpu_device_count(args.cpu_devices or parallel.available_cores())
    import jax

    available = jax.device_count()
    counts = args.device_counts or sorted({1, available})
    bad = [c for c in counts if not 1 <= c <= available]
    if bad:
        parser.error(f"device counts {bad} are out of range: this machine has {available} device(s).")
    machine = _report.machine()
    print(f"# Anakin throughput on {machine}, jax {jax.__version__}", flush=True)

    rows = []
    for agent_name in args.agents:
        for env_name in args.envs:
            for num_devices in counts:
                for num_envs in args.num_envs:
                    row = measure(env_name, agent_name, num_envs, num_devices, args.calls, args.target_steps)
                    rows.append(row)
                    print(
                        f"{agent_name:4s} {env_name:9s} devices {num_devices} envs/device {num_envs:5d}: "
                        f"compile {row['compile_s']:5.1f} s, {row['sps']:>12,.0f} env steps/s",
                        flush=True,
                    )
    text = f"Anakin throughput on {machine}, jax {jax.__version__}\n\n{table(rows)}\n"
    print("\n" + text)
    _report.save(
        _report.output_path(args.save, args.out, "anakin_throughput"),
        text,
        {"machine": machine, "jax": jax.__version__, "rows": rows},
    )


if __name__ == "__main__":
    main()
