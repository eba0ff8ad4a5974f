"""How near a replay agent's update runs to the machine's arithmetic: XLA's count of the update's floating-point
operations, the rate the compiled update reaches, and the rate of plain matrix products on the same device.

The update is Anakin's (:func:`podracer.anakin.make_update`), ``--seeds`` seeds vmapped as the reproduction table
vmaps them, one gradient step of ``--batch-size`` per env step (``--replay-ratio`` equal to the batch), on one CPU
device (XLA:CPU spreads each product over the cores). Its floating-point operations are XLA's own count
(``compiled.cost_analysis()["flops"]`` of one update). Two products stand for what the arithmetic allows: one of the
update's widest layer (``[seeds x batch, width] @ [width, width]``) and one large square product, which comes
nearest the cores' peak. The rounds alternate the update's host call and the products'; each round gives the
update's rate as a fraction of each product's, and the table shows their medians. The floor is the time the row's
gradient steps (``--gradient-steps`` a seed) would take at each rate, compilation and evaluation left out.

    python benchmarks/arithmetic_floor.py                          # SAC at the Pendulum row's settings, 5 seeds
    python benchmarks/arithmetic_floor.py --agent td3 --rounds 9 --save
"""

from __future__ import annotations

import argparse
import statistics
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

# The reproduction table's Pendulum rows (benchmarks/reproduce.py: pendulum-sac, pendulum-td3): the zoo's settings,
# and the gradient steps a seed takes in the row's 20,000 env steps (TD3's first 10,000 act at random and learn nothing)
GRADIENT_STEPS = {"sac": 20_000, "td3": 10_000}
ROW_SETTINGS = {
    "sac": {"learning_rate": 1e-3},
    "td3": {"learning_rate": 1e-3, "discount": 0.98, "hidden_sizes": (400, 300)},
}


def _parts(agent_name: str, seeds: int, batch: int):
    """``(update, state, width)``: the seeds' vmapped update, their initial state, the widest hidden layer."""
    import jax

    from podracer.core import agents, envs
    from podracer import anakin
    from podracer.core.agents.hyperparameters import hyperparameters

    env = envs.make("gymnax:Pendulum-v1")
    hyper = {**ROW_SETTINGS[agent_name], "batch_size": batch, "replay_ratio": float(batch), "min_replay_size": batch}
    agent = agents.make(agent_name, env.spec(), **hyper)
    update = jax.vmap(anakin.make_update(env, agent, agent.optimizer, rollout_length=1, axis_names=()))
    keys = jax.random.split(jax.random.key(0), seeds)
    state = jax.jit(jax.vmap(lambda k: anakin.init_state(env, agent, agent.optimizer, k, 1)))(keys)
    width = max(hyper.get("hidden_sizes") or hyperparameters(agents.config_class(agent_name)())["hidden_sizes"])
    return update, state, width


def count_flops(agent_name: str, seeds: int, batch: int) -> float:
    """XLA's count of the floating-point operations of one update of ``seeds`` vmapped seeds."""
    import jax

    update, state, _ = _parts(agent_name, seeds, batch)
    cost = jax.jit(update).lower(state).compile().cost_analysis()
    return float((cost[0] if isinstance(cost, list) else cost)["flops"])


def build(agent_name: str, seeds: int, batch: int, updates_per_call: int):
    """``(multi, state, flops per update, width)``: ``updates_per_call`` updates of ``seeds`` vmapped seeds,
    compiled, their state after warm-up calls that take the replay past its minimum (one env step per update),
    and XLA's count of one update's floating-point operations."""
    import jax

    from podracer import anakin

    update, state, width = _parts(agent_name, seeds, batch)
    flops = count_flops(agent_name, seeds, batch)
    multi = jax.jit(anakin.make_multi_update(update, updates_per_call)).lower(state).compile()
    for _ in range(-(-batch // updates_per_call) + 1):  # warm-up calls: the replay past its minimum after them
        state, metrics = multi(state)
    jax.block_until_ready(metrics)
    return multi, state, flops, width


def product(rows: int, width: int, repeats: int):
    """``(call, flops per call)``: ``repeats`` products ``[rows, width] @ [width, width]`` in one compiled loop."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(1), (rows, width), jnp.float32)
    b = jax.random.normal(jax.random.key(2), (width, width), jnp.float32) / width**0.5

    @jax.jit
    def call(a, b):
        return jax.lax.fori_loop(0, repeats, lambda _, x: jnp.tanh(x @ b), a)

    jax.block_until_ready(call(a, b))
    return (lambda: jax.block_until_ready(call(a, b))), 2.0 * rows * width * width * repeats


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", default="sac", choices=sorted(ROW_SETTINGS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds vmapped in one program (the table's 5)")
    parser.add_argument("--batch-size", type=int, default=256, help="items per gradient step (the zoo's 256)")
    parser.add_argument(
        "--gradient-steps", type=int, default=None, help="a seed's gradient steps in the row (SAC 20k, TD3 10k)"
    )
    parser.add_argument("--updates-per-call", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--large", type=int, default=2048, help="the large square product's size")
    _report.add_output_flags(parser, "arithmetic_floor")
    args = parser.parse_args(argv)
    if args.gradient_steps is None:
        args.gradient_steps = GRADIENT_STEPS[args.agent]
    for name in ("seeds", "batch_size", "gradient_steps", "updates_per_call", "rounds", "large"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}.")

    from podracer.run import lifetime, parallel

    parallel.set_cpu_device_count(1)
    lifetime.quiet_dependencies()
    import jax

    multi, state, flops, width = build(args.agent, args.seeds, args.batch_size, args.updates_per_call)
    layer, layer_flops = product(args.seeds * args.batch_size, width, 200)
    large, large_flops = product(args.large, args.large, 4)
    rates = {"update": [], "layer": [], "large": []}
    for _ in range(args.rounds):  # the sides alternate within each round
        start = time.perf_counter()
        state, metrics = multi(state)
        jax.block_until_ready(metrics)
        rates["update"].append(flops * args.updates_per_call / (time.perf_counter() - start))
        for name, (call, work) in (("layer", (layer, layer_flops)), ("large", (large, large_flops))):
            start = time.perf_counter()
            call()
            rates[name].append(work / (time.perf_counter() - start))
    row_flops = flops * args.gradient_steps  # one update a gradient step, of every seed
    fraction = {
        name: statistics.median(u / r for u, r in zip(rates["update"], rates[name])) for name in ("layer", "large")
    }
    lines = [
        f"{args.agent.upper()}'s update at the reproduction table's Pendulum settings ({args.seeds} seeds vmapped, a "
        f"gradient step of {args.batch_size} per env step, hidden width {width}) on {_report.machine()}, jax "
        f"{jax.__version__}, one device; {args.rounds} rounds of {args.updates_per_call} updates, the update and the "
        f"products alternating (`python benchmarks/arithmetic_floor.py --agent {args.agent} --seeds {args.seeds} "
        f"--rounds {args.rounds}`)",
        "",
        f"XLA's count: {flops / 1e9:.3f} GFLOP per update ({args.seeds} seeds); the row's "
        f"{args.gradient_steps:,} gradient steps a seed: {row_flops / 1e12:.1f} TFLOP",
        "",
        "| what runs | median GFLOP/s | the row's gradient steps at that rate, s |",
        "|---|---:|---:|",
    ]
    names = {
        "update": "the update",
        "layer": f"[{args.seeds * args.batch_size}, {width}] @ [{width}, {width}] products",
        "large": f"[{args.large}, {args.large}] @ [{args.large}, {args.large}] products",
    }
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, rate in medians.items():
        lines.append(f"| {names[name]} | {rate / 1e9:.1f} | {row_flops / rate:.0f} |")
    lines += [
        "",
        f"**The update runs at {fraction['layer']:.2f}x the rate of its widest layer's product and "
        f"{fraction['large']:.2f}x the large product's** (medians of per-round ratios).",
    ]
    text = "\n".join(lines)
    print(text)
    data = {
        "agent": args.agent,
        "seeds": args.seeds,
        "batch_size": args.batch_size,
        "width": width,
        "gradient_steps": args.gradient_steps,
        "flops_per_update": flops,
        "rates": rates,
        "fraction_of_layer": fraction["layer"],
        "fraction_of_large": fraction["large"],
        "machine": _report.machine(),
        "jax": jax.__version__,
    }
    _report.save(_report.output_path(args.save, args.out, f"arithmetic_floor_{args.agent}"), text, data)


if __name__ == "__main__":
    main()
