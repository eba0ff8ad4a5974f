"""Data-parallel training throughput of a recurrent policy on synthetic structured experience.

The policy is the usual shape of such benchmarks: embeddings of discrete observations,
clipped continuous ones pooled by a max over entities, dense layers, an LSTM over the
time steps and a softmax over the actions (``podracer.core.networks.StructuredTorso`` under
``RecurrentNetwork``), trained by recurrent A2C (policy gradient with a value baseline).
Experience comes from the ``synthetic`` JAX environment, stepped under the current
policy inside Anakin's compiled update, so one update per device is: ``--time-steps``
steps of ``--batch-size`` environments, then one gradient step, gradients averaged over
the devices (``pmap``). A sample is one time step of one environment.

For every batch size and every device count 1, 2, 4, ... ``--num-devices`` it reports
compile time (ahead-of-time, apart), the median steady-state samples/s overall and per
device, and the scaling efficiency ``samples/s(N) / (N x samples/s(1))``. Prints a
Markdown table; ``--save`` also writes it (and JSON) to ``benchmarks/results/``.

    python benchmarks/synthetic_policy_gradient.py --batch-size 8 --time-steps 16 --num-devices 8
    python benchmarks/synthetic_policy_gradient.py --batch-size 8 64 512 4096 --num-devices 1   # on a GPU
"""

from __future__ import annotations

import argparse

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

from podracer.run import parallel


def make_training(args):
    """``(env, agent, optimizer)`` the benchmark trains, from its parsed arguments."""
    from podracer.core import agents, envs, learner

    env = envs.make(
        "synthetic",
        num_discrete=args.num_discrete,
        vocab_size=args.vocab_size,
        num_entities=args.num_entities,
        num_features=args.num_features,
        num_actions=args.num_actions,
        episode_length=args.episode_length,
    )
    agent = agents.make("a2c", env.spec(), core="lstm", core_size=args.core_size, hidden_sizes=tuple(args.hidden_sizes))
    return env, agent, learner.make_optimizer(args.learning_rate)


def measure(args, batch_size: int, num_devices: int) -> dict:
    import jax

    env, agent, optimizer = make_training(args)
    devices = jax.devices()[:num_devices]
    samples_per_update = batch_size * args.time_steps * num_devices
    compile_seconds, median = _report.time_anakin(
        env,
        agent,
        optimizer,
        num_envs=batch_size,
        rollout_length=args.time_steps,
        updates_per_call=args.updates_per_call,
        devices=devices,
        calls=args.calls,
    )
    sps = args.updates_per_call * samples_per_update / median
    return {
        "batch_size": batch_size,
        "time_steps": args.time_steps,
        "devices": num_devices,
        "compile_s": compile_seconds,
        "median_call_s": median,
        "samples_per_s": sps,
        "samples_per_s_per_device": sps / num_devices,
    }


def device_counts(num_devices: int) -> list[int]:
    """1, 2, 4, ... up to ``num_devices``, and ``num_devices`` itself."""
    counts, n = [], 1
    while n < num_devices:
        counts.append(n)
        n *= 2
    return [*counts, num_devices]


def table(rows) -> str:
    lines = [
        "| batch/device | time steps | devices | compile (s) | samples/s | samples/s per device | scaling efficiency |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch_size']} | {r['time_steps']} | {r['devices']} | {r['compile_s']:.1f} | "
            f"{r['samples_per_s']:,.0f} | {r['samples_per_s_per_device']:,.0f} | "
            f"{100 * r['scaling_efficiency']:.0f} % |"
        )
    return "\n".join(lines)


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--batch-size",
        nargs="+",
        type=int,
        default=[8],
        help="environments per device; several values sweep (default: 8)",
    )
    parser.add_argument(
        "--time-steps", type=int, default=16, help="time steps per update, the LSTM's unroll (default: 16)"
    )
    parser.add_argument(
        "--num-devices",
        type=int,
        default=None,
        help="largest device count (default: all; on a CPU this many are exposed)",
    )
    parser.add_argument(
        "--updates-per-call", type=int, default=10, help="updates scanned per timed host call (default: 10)"
    )
    parser.add_argument(
        "--calls", type=int, default=5, help="timed host calls per setting, after one warm-up (default: 5)"
    )
    parser.add_argument("--num-discrete", type=int, default=8, help="discrete observation features (default: 8)")
    parser.add_argument("--vocab-size", type=int, default=32, help="values of a discrete feature (default: 32)")
    parser.add_argument(
        "--num-entities", type=int, default=8, help="rows of the continuous observation, pooled by a max (default: 8)"
    )
    parser.add_argument("--num-features", type=int, default=16, help="features per entity (default: 16)")
    parser.add_argument("--num-actions", type=int, default=8, help="actions (default: 8)")
    parser.add_argument("--episode-length", type=int, default=32, help="steps per synthetic episode (default: 32)")
    parser.add_argument(
        "--hidden-sizes", nargs="+", type=int, default=[128], help="dense layers after the concatenation (default: 128)"
    )
    parser.add_argument("--core-size", type=int, default=128, help="LSTM units (default: 128)")
    parser.add_argument("--learning-rate", type=float, default=3e-4, help="Adam learning rate (default: 3e-4)")
    _report.add_output_flags(parser, "synthetic_policy_gradient")
    args = parser.parse_args(argv)
    for name in ("time_steps", "updates_per_call", "calls", "core_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}.")
    if min(args.batch_size) < 1:
        parser.error(f"--batch-size values must be >= 1, got {args.batch_size}.")
    if args.num_devices is not None and args.num_devices < 1:
        parser.error(f"--num-devices must be >= 1, got {args.num_devices}.")
    return parser, args


def main(argv=None):
    parser, args = parse(argv)
    parallel.set_cpu_device_count(max(args.num_devices or 1, parallel.available_cores()))
    import jax

    available = jax.device_count()
    num_devices = args.num_devices or available
    if num_devices > available:
        parser.error(
            f"--num-devices {num_devices} is out of range: this machine has {available} {jax.default_backend()} "
            f"device(s)."
        )
    machine = _report.machine()
    print(f"# Synthetic recurrent policy gradient on {machine}, jax {jax.__version__}", flush=True)
    rows = []
    for batch_size in args.batch_size:
        base = None
        for n in device_counts(num_devices):
            row = measure(args, batch_size, n)
            base = base or row["samples_per_s"]
            row["scaling_efficiency"] = row["samples_per_s"] / (n * base)
            rows.append(row)
            print(
                f"batch/device {batch_size:5d} devices {n}: compile {row['compile_s']:5.1f} s, "
                f"{row['samples_per_s']:>12,.0f} samples/s ({row['samples_per_s_per_device']:,.0f} per device), "
                f"scaling {100 * row['scaling_efficiency']:.0f} %",
                flush=True,
            )
    settings = (
        f"time steps {args.time_steps}; observations: {args.num_discrete} discrete (vocab {args.vocab_size}), "
        f"{args.num_entities} x {args.num_features} continuous; {args.num_actions} actions; dense "
        f"{args.hidden_sizes}, LSTM {args.core_size}"
    )
    text = f"Synthetic recurrent policy gradient on {machine}, jax {jax.__version__}\n\n{settings}\n\n{table(rows)}\n"
    print("\n" + text)
    _report.save(
        _report.output_path(args.save, args.out, "synthetic_policy_gradient"),
        text,
        {"machine": machine, "jax": jax.__version__, "settings": vars(args), "rows": rows},
    )


if __name__ == "__main__":
    main()
