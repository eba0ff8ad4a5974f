"""TD3's categorical critics: C51's projection of the target distribution (``losses.categorical_projection``, O(K)
a distribution) against ``rlax.categorical_l2_project`` (written for any support: every point against every atom,
O(K^2)), alone and inside the whole gradient step.

    python benchmarks/c51_projection.py
    python benchmarks/c51_projection.py --batches 256 1024 4096 --rounds 21 --save

Two measurements, each side compiled first (its seconds reported apart), then called in turn within each round (so
a slow spell of a shared machine falls on both): the projection alone, ``[batch, 101]`` target points onto 101
atoms; and the gradient of TD3's replay loss with FastTD3's critic (101 atoms, twin critics, clipped double Q, the
pendulum-fasttd3 preset's settings: hidden 256 x 256, Pendulum's observations), the loss traced once with each
projection. The table gives each side's median milliseconds a call and the median over rounds of their ratio within
a round, with its quartiles.
"""

from __future__ import annotations

import argparse
import statistics
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

ATOMS = 101
V_MIN, V_MAX = -1000.0, 0.0  # the pendulum-fasttd3 preset's support


def rlax_projection(values, probs, v_min, v_max):
    """``rlax.categorical_l2_project`` onto ``linspace(v_min, v_max, K)``, vmapped over the leading axes."""
    import jax
    import jax.numpy as jnp
    import rlax

    atoms = jnp.linspace(v_min, v_max, probs.shape[-1], dtype=probs.dtype)
    project = rlax.categorical_l2_project
    for _ in range(probs.ndim - 1):
        project = jax.vmap(project, in_axes=(0, 0, None))
    return project(values, probs, atoms)


def timed(calls: dict, rounds: int) -> dict:
    """Each side's compile-and-first-call seconds, then ``rounds`` rounds calling the sides in turn."""
    import jax

    first = {}
    for name, call in calls.items():
        start = time.perf_counter()
        jax.block_until_ready(call())
        first[name] = time.perf_counter() - start
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            jax.block_until_ready(call())
            times[name].append(time.perf_counter() - start)
    ratios = [r / c for r, c in zip(times["rlax"], times["c51"])]
    return {
        "c51_ms": 1e3 * statistics.median(times["c51"]),
        "rlax_ms": 1e3 * statistics.median(times["rlax"]),
        "c51_compile_s": first["c51"],
        "rlax_compile_s": first["rlax"],
        "ratio": statistics.median(ratios),
        "ratio_quartiles": statistics.quantiles(ratios, n=4)[::2] if len(ratios) > 1 else [ratios[0]] * 2,
    }


def projection_alone(batch: int, rounds: int) -> dict:
    import jax
    import jax.numpy as jnp

    from podracer.core.agents.losses import categorical_projection

    key_values, key_logits = jax.random.split(jax.random.key(0))
    values = jax.random.uniform(key_values, (batch, ATOMS), minval=V_MIN - 100, maxval=V_MAX + 100)
    probs = jax.nn.softmax(jax.random.normal(key_logits, (batch, ATOMS)))
    ours = jax.jit(lambda v, p: categorical_projection(v, p, V_MIN, V_MAX))
    theirs = jax.jit(lambda v, p: rlax_projection(v, p, V_MIN, V_MAX))
    difference = float(jnp.max(jnp.abs(ours(values, probs) - theirs(values, probs))))
    return {
        "what": "projection",
        "batch": batch,
        "max_difference": difference,
        **timed({"c51": lambda: ours(values, probs), "rlax": lambda: theirs(values, probs)}, rounds),
    }


def gradient_step(batch: int, rounds: int) -> dict:
    import jax
    import jax.numpy as jnp

    from podracer.core import agents
    from podracer.core.agents import td3
    from podracer.core.types import Box, EnvSpec

    spec = EnvSpec(jax.ShapeDtypeStruct((3,), jnp.float32), box=Box((-2.0,), (2.0,)))  # Pendulum-v1's
    agent = agents.make(
        "td3", spec, num_atoms=ATOMS, v_min=V_MIN, v_max=V_MAX, target_actor=False, batch_size=batch,
        min_replay_size=batch,
        hidden_sizes=(256, 256),
    )  # fmt: skip
    keys = jax.random.split(jax.random.key(1), 6)
    observation = jax.random.normal(keys[0], (batch, 3))
    items = {
        "observation": observation,
        "action": jax.random.uniform(keys[1], (batch, 1), minval=-1.0, maxval=1.0),
        "reward": jax.random.uniform(keys[2], (batch,), minval=-16.0, maxval=0.0),
        "discount": jnp.full((batch,), 0.99),
        "next_observation": jax.random.normal(keys[3], (batch, 3)),
        "valid": jnp.ones((batch,), bool),
    }
    params = agent.init(keys[4], observation)

    def gradient():  # a function of its own for each side: jit's cache is keyed on the function
        return jax.jit(lambda params: jax.grad(lambda p: agent.replay.loss(p, params, items, None, keys[5])[0])(params))

    ours, theirs = gradient(), gradient()
    timed_calls = {"c51": lambda: ours(params), "rlax": lambda: theirs(params)}
    original = td3.categorical_projection
    try:  # each jitted function traces at its first call: rlax's while the module's name points at it
        jax.block_until_ready(ours(params))
        td3.categorical_projection = rlax_projection
        jax.block_until_ready(theirs(params))
    finally:
        td3.categorical_projection = original
    difference = max(
        float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(ours(params)), jax.tree.leaves(theirs(params)))
    )
    return {"what": "gradient step", "batch": batch, "max_difference": difference, **timed(timed_calls, rounds)}


def table(rows: list[dict], machine: str, rounds: int) -> str:
    lines = [
        f"C51's projection against rlax's, {ATOMS} atoms, on {machine}, {rounds} rounds (compile seconds apart: "
        "the first call of each, compilation included)",
        "",
        "| what | batch | C51's, ms | rlax's, ms | rlax's / C51's (quartiles) | compile s, C51's / rlax's | "
        "largest difference |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        low, high = r["ratio_quartiles"]
        lines.append(
            f"| {r['what']} | {r['batch']:,} | {r['c51_ms']:.2f} | {r['rlax_ms']:.2f} | {r['ratio']:.1f}x "
            f"({low:.1f}-{high:.1f}) | {r['c51_compile_s']:.1f} / {r['rlax_compile_s']:.1f} | "
            f"{r['max_difference']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--rounds", type=int, default=21)
    _report.add_output_flags(parser, "c51_projection")
    args = parser.parse_args(argv)
    rows = [projection_alone(b, args.rounds) for b in args.batches]
    rows += [gradient_step(b, args.rounds) for b in args.batches]
    text = table(rows, _report.machine(), args.rounds)
    print(text)
    _report.save(_report.output_path(args.save, args.out, "c51_projection"), text, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
