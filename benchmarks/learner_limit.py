"""The learner step against its limit: achieved GFLOP/s of the PPO and A2C learner steps beside XLA's bare matmuls
of the same shapes, on the same machine in the same run, and where one Anakin update's time goes.

The limit is measured, not quoted: every ``dot_general`` of one gradient step (the forward pass and its
backward pass, read from the step's jaxpr) is run alone, on random inputs of the same shapes, dtypes and
dimension numbers, in one compiled program. A step that runs as fast as that program spends its time in its
matmuls at the rate XLA reaches for those shapes; the rest of the step (activations, softmax, Adam) is then free.
The two sides alternate, call by call, and the table gives the median of the per-round ratios. A 1024 x 1024
matmul gives the CPU's rate for large square shapes, for scale.

The profile splits one update (one device) into the rollout, the value pass and GAE (PPO's ``prepare``), the
shuffles into minibatches, and the SGD steps, each compiled and timed alone; "learner step" and "update" are
the whole learner step and the whole update, compiled as they run.

    python benchmarks/learner_limit.py                        # PPO and A2C, Catch and CartPole, 64 and 1,024 envs
    python benchmarks/learner_limit.py --agents ppo --envs catch --num-envs 64 --rounds 30
    python benchmarks/learner_limit.py --save                 # also writes benchmarks/results/learner_limit.{md,json}
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)
from anakin_throughput import AGENT_SETTINGS

from podracer.run import parallel


def dot_generals(jaxpr) -> list:
    """Every ``dot_general`` equation of ``jaxpr`` (a ``ClosedJaxpr`` or ``Jaxpr``), sub-jaxprs (jit, custom
    derivatives, loops) included, each once per occurrence in the program text."""
    import jax

    inner = jaxpr.jaxpr if isinstance(jaxpr, jax.extend.core.ClosedJaxpr) else jaxpr
    found = []
    for eqn in inner.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, (jax.extend.core.ClosedJaxpr, jax.extend.core.Jaxpr)):
                    found += dot_generals(sub)
    return found


def dot_flops(eqn) -> int:
    """Multiply-adds x 2 of one ``dot_general``: every lhs entry meets every free (non-contracted, non-batch) rhs
    entry."""
    lhs, rhs = (v.aval.shape for v in eqn.invars)
    (_, rhs_contract), (_, rhs_batch) = eqn.params["dimension_numbers"]
    free = [d for i, d in enumerate(rhs) if i not in rhs_contract and i not in rhs_batch]
    return 2 * math.prod(lhs) * math.prod(free)


def make_bare(eqns, key):
    """``(bare(operands), operands)``: the ``dot_general`` equations ``eqns`` alone, on random operands of their
    shapes and dtypes, in one function (each product's result is returned, so none is dropped as dead code).

    An operand that several products share in the step (an activation, in the forward pass and in its weight's
    gradient) is one array here too, so the bare program reads memory as the step does.
    """
    import jax

    arrays = {}  # one array per jaxpr variable
    for eqn in eqns:
        for var in eqn.invars:
            if var not in arrays:
                arrays[var] = jax.random.normal(jax.random.fold_in(key, len(arrays)), var.aval.shape, var.aval.dtype)
    variables = list(arrays)
    pairs = [tuple(variables.index(v) for v in eqn.invars) for eqn in eqns]

    def bare(operands):
        return [
            jax.lax.dot_general(
                operands[i],
                operands[j],
                eqn.params["dimension_numbers"],
                precision=eqn.params["precision"],
                preferred_element_type=eqn.params["preferred_element_type"],
            )
            for eqn, (i, j) in zip(eqns, pairs)
        ]

    return bare, list(arrays.values())


def _timed(fn, *args) -> float:
    import jax

    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def _compiled(fn, *args):
    """``(compiled fn, compile seconds)``; one warm-up call made."""
    import jax

    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    seconds = time.perf_counter() - start
    jax.block_until_ready(compiled(*args))
    return compiled, seconds


def measure(env_name: str, agent_name: str, num_envs: int, rounds: int) -> dict:
    import jax
    import jax.numpy as jnp
    import optax

    from podracer.core import agents, envs, learner
    from podracer import anakin

    rollout_length, hyper = AGENT_SETTINGS[agent_name]
    env = envs.make(env_name)
    agent = agents.make(agent_name, env.spec(), **hyper)
    optimizer = learner.make_optimizer(3e-4)
    state = jax.jit(lambda k: anakin.init_state(env, agent, optimizer, k, num_envs, rollout_length=rollout_length))(
        jax.random.key(0)
    )
    params, opt_state = state.learner.params, state.learner.opt_state

    rollout_fn = anakin.make_rollout(env, agent, rollout_length)
    rollout, _ = _compiled(rollout_fn, params, state.rollout)
    _, trajectory, _ = rollout(params, state.rollout)
    prepare = None
    batch = trajectory
    if agent.prepare is not None:
        prepare, _ = _compiled(agent.prepare, params, trajectory)
        batch = prepare(params, trajectory)
    key = jax.random.key(1)
    shuffle = None
    if agent.num_minibatches > 1:
        split = lambda batch, key: learner._split_minibatches(batch, key, agent.num_minibatches, agent.minibatch_axis)  # noqa: E731, SLF001
        shuffle, _ = _compiled(split, batch, key)
        minibatches = shuffle(batch, key)
    else:
        minibatches = jax.tree.map(lambda x: x[None], batch)
    minibatch = jax.tree.map(lambda x: x[0], minibatches)
    steps = agent.num_epochs * agent.num_minibatches

    def sgd_step(carry, minibatch):  # the learner's SGD step (learner.make_learner_step), with no axes to average over
        params, opt_state = carry
        (_, metrics), grads = jax.value_and_grad(agent.loss, has_aux=True)(params, minibatch, key)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), metrics

    def sgd(params, opt_state, minibatches):  # every SGD step of an update, over the same minibatches each epoch
        epochs = jax.tree.map(lambda x: jnp.concatenate([x] * agent.num_epochs), minibatches)
        return jax.lax.scan(sgd_step, (params, opt_state), epochs)

    sgd_compiled, _ = _compiled(sgd, params, opt_state, minibatches)
    eqns = dot_generals(jax.make_jaxpr(lambda p, m: sgd_step((p, opt_state), m))(params, minibatch))
    flops = sum(dot_flops(e) for e in eqns)
    bare, operands = make_bare(eqns, jax.random.key(2))
    bare_compiled, _ = _compiled(bare, operands)

    step = learner.make_learner_step(agent, optimizer, axis_names=())
    step_compiled, _ = _compiled(step, state.learner, trajectory)
    update = anakin.make_update(env, agent, optimizer, rollout_length=rollout_length, axis_names=())
    update_compiled, update_compile_s = _compiled(update, state)

    # Alternating rounds: each round times every part once, so load on a shared machine falls on all of them.
    times = {name: [] for name in ("bare", "sgd", "rollout", "prepare", "shuffle", "learner", "update")}
    for _ in range(rounds):
        times["bare"].append(_timed(bare_compiled, operands) * steps)  # the matmuls of every SGD step of an update
        times["sgd"].append(_timed(sgd_compiled, params, opt_state, minibatches))
        times["rollout"].append(_timed(rollout, params, state.rollout))
        if prepare is not None:
            times["prepare"].append(_timed(prepare, params, trajectory))
        if shuffle is not None:
            times["shuffle"].append(_timed(shuffle, batch, key) * agent.num_epochs)
        times["learner"].append(_timed(step_compiled, state.learner, trajectory))
        times["update"].append(_timed(update_compiled, state))
    ratios = [b / s for b, s in zip(times["bare"], times["sgd"])]
    ms = {name: statistics.median(t) * 1e3 if t else None for name, t in times.items()}
    sgd_flops = flops * steps
    return {
        "agent": agent_name,
        "env": env_name,
        "envs": num_envs,
        "rollout_length": rollout_length,
        "minibatch": jax.tree.leaves(minibatch)[0].shape[0] * (1 if agent.minibatch_axis == 0 else num_envs),
        "sgd_steps": steps,
        "matmuls_per_step": len(eqns),
        "matmul_mflop_per_step": flops / 1e6,
        "update_compile_s": update_compile_s,
        "ms": ms,
        "bare_gflops": sgd_flops / (ms["bare"] / 1e3) / 1e9,
        "sgd_gflops": sgd_flops / (ms["sgd"] / 1e3) / 1e9,
        "sgd_over_bare": statistics.median(ratios),  # the SGD steps' speed as a share of the bare matmuls'
        "env_steps_per_s": rollout_length * num_envs / (ms["update"] / 1e3),
    }


def square_matmul_gflops(size: int = 1024, calls: int = 10) -> float:
    """XLA's rate on a large square float32 matmul (the CPU's matmul rate for shapes that suit it)."""
    import jax

    a = jax.random.normal(jax.random.key(0), (size, size))
    mm, _ = _compiled(lambda a: a @ a, a)
    return 2 * size**3 / statistics.median(_timed(mm, a) for _ in range(calls)) / 1e9


def _ms(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def tables(rows, square: float) -> str:
    limit = [
        "| agent | env | envs | minibatch | SGD steps | matmuls/step | MFLOP/step | bare matmuls GFLOP/s | "
        "learner SGD GFLOP/s | SGD / bare (median of rounds) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    profile = [
        "| agent | env | envs | rollout | value pass + GAE | shuffles | SGD steps | learner step | update | "
        "update compile (s) | env steps/s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ms = r["ms"]
        limit.append(
            f"| {r['agent']} | {r['env']} | {r['envs']} | {r['minibatch']} | {r['sgd_steps']} | "
            f"{r['matmuls_per_step']} | {r['matmul_mflop_per_step']:.1f} | {r['bare_gflops']:.1f} | "
            f"{r['sgd_gflops']:.1f} | {r['sgd_over_bare']:.2f} |"
        )
        profile.append(
            f"| {r['agent']} | {r['env']} | {r['envs']} | {_ms(ms['rollout'])} | {_ms(ms['prepare'])} | "
            f"{_ms(ms['shuffle'])} | {_ms(ms['sgd'])} | {_ms(ms['learner'])} | {_ms(ms['update'])} | "
            f"{r['update_compile_s']:.1f} | {r['env_steps_per_s']:,.0f} |"
        )
    return (
        "Achieved matmul rate of the SGD steps against XLA's bare matmuls of the same shapes "
        f"(a 1024 x 1024 x 1024 matmul runs at {square:.1f} GFLOP/s here):\n\n"
        + "\n".join(limit)
        + "\n\nWhere one update's time goes (ms, medians over rounds; one device):\n\n"
        + "\n".join(profile)
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=["ppo", "a2c"], choices=sorted(AGENT_SETTINGS))
    parser.add_argument("--envs", nargs="+", default=["catch", "cartpole"], choices=["catch", "cartpole"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[64, 1024], help="environments (one device)")
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds (each times every part once)")
    _report.add_output_flags(parser, "learner_limit")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}.")
    if any(n < 1 for n in args.num_envs):
        parser.error(f"--num-envs must all be >= 1, got {args.num_envs}.")

    parallel.set_cpu_device_count(1)  # one device; XLA:CPU spreads its work over every core
    import jax

    machine = _report.machine()
    print(f"# The learner step against its limit on {machine}, jax {jax.__version__}", flush=True)
    square = square_matmul_gflops()
    rows = []
    for agent_name in args.agents:
        for env_name in args.envs:
            for num_envs in args.num_envs:
                row = measure(env_name, agent_name, num_envs, args.rounds)
                rows.append(row)
                print(
                    f"{agent_name:4s} {env_name:9s} envs {num_envs:5d}: SGD {row['sgd_gflops']:6.1f} GFLOP/s, "
                    f"bare {row['bare_gflops']:6.1f} GFLOP/s, ratio {row['sgd_over_bare']:.2f}; "
                    f"update {row['ms']['update']:.1f} ms",
                    flush=True,
                )
    text = f"The learner step against its limit on {machine}, jax {jax.__version__}\n\n{tables(rows, square)}\n"
    print("\n" + text)
    _report.save(
        _report.output_path(args.save, args.out, "learner_limit"),
        text,
        {"machine": machine, "jax": jax.__version__, "square_matmul_gflops": square, "rows": rows},
    )


if __name__ == "__main__":
    main()
