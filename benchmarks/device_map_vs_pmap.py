"""The library's ``jit`` of ``shard_map`` (``parallel.device_map``) against ``jax.pmap`` of the same function.

For Anakin (A2C and PPO on Catch, environments per device and device counts) and for
Sebulba's learner step (PPO on CartPole-sized trajectories), both forms are compiled ahead
of time (apart), then called in turn for ``--rounds`` rounds, each side carrying its own
state. Each side is quoted as its median call time; the ratio is the median over rounds of
``pmap time / device_map time`` within a round (>= 1: device_map is faster). Prints a
Markdown table; ``--save`` also writes it (and JSON) to ``benchmarks/results/``.

    python benchmarks/device_map_vs_pmap.py
    python benchmarks/device_map_vs_pmap.py --agents a2c --num-envs 64 --device-counts 2 --rounds 11
"""

from __future__ import annotations

import argparse
import statistics
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

from podracer.run import parallel

ANAKIN_SETTINGS = {
    # agent: (rollout length, agent hyper-parameters)
    "a2c": (16, {}),
    "ppo": (128, {"num_epochs": 4, "num_minibatches": 4}),
}


def _compile(fn, *args):
    start = time.perf_counter()
    compiled = fn.lower(*args).compile()
    return compiled, time.perf_counter() - start


def alternate(calls: dict, states: dict, rounds: int) -> dict:
    """Calls each compiled function in turn for ``rounds`` rounds (after one warm-up call each);
    ``calls[name](state) -> state`` and ``states[name]`` its first state."""
    import jax

    for name in calls:
        states[name] = jax.block_until_ready(calls[name](states[name]))
    seconds = {name: [] for name in calls}
    for _ in range(rounds):
        for name in calls:
            start = time.perf_counter()
            states[name] = jax.block_until_ready(calls[name](states[name]))
            seconds[name].append(time.perf_counter() - start)
    ratios = [p / d for p, d in zip(seconds["pmap"], seconds["device_map"])]
    return {
        "pmap_s": statistics.median(seconds["pmap"]),
        "device_map_s": statistics.median(seconds["device_map"]),
        "ratio": statistics.median(ratios),
    }


def anakin_row(agent_name: str, num_envs: int, num_devices: int, rounds: int, target_steps: int) -> dict:
    import jax

    from podracer.core import agents, envs, learner
    from podracer import anakin

    rollout_length, hyper = ANAKIN_SETTINGS[agent_name]
    env = envs.make("catch")
    agent = agents.make(agent_name, env.spec(), **hyper)
    optimizer = learner.make_optimizer(3e-4)
    devices = jax.devices()[:num_devices]
    steps_per_update = rollout_length * num_envs * num_devices
    updates_per_call = max(1, target_steps // steps_per_update)
    update = anakin.make_update(env, agent, optimizer, rollout_length=rollout_length)
    multi = anakin.make_multi_update(update, updates_per_call)
    state = anakin.init(env, agent, optimizer, jax.random.key(0), num_envs, devices)
    forms = {
        "pmap": jax.pmap(multi, axis_name=parallel.DEVICE_AXIS, devices=devices),
        "device_map": parallel.device_map(multi, devices),
    }
    compiled, compile_s = {}, {}
    for name, fn in forms.items():
        compiled[name], compile_s[name] = _compile(fn, state)
    calls = {name: (lambda c: lambda s: c(s)[0])(c) for name, c in compiled.items()}
    timing = alternate(calls, {name: state for name in calls}, rounds)
    steps = updates_per_call * steps_per_update
    return {
        "what": f"anakin {agent_name} catch",
        "devices": num_devices,
        "envs_per_device": num_envs,
        "pmap_compile_s": compile_s["pmap"],
        "device_map_compile_s": compile_s["device_map"],
        "pmap_sps": steps / timing["pmap_s"],
        "device_map_sps": steps / timing["device_map_s"],
        **timing,
    }


def sebulba_row(num_envs: int, num_devices: int, rounds: int) -> dict:
    """Sebulba's learner step (PPO, CartPole observations, rollout 20) on ``num_envs`` envs split over the devices."""
    import jax
    import numpy as np

    from podracer.core import agents
    from podracer.core.envs.cartpole import CartPole
    from podracer.core.learner import init_learner_state, make_learner_step, make_optimizer
    from podracer.core.types import TimeStep, Trajectory

    t = 20
    devices = jax.devices()[:num_devices]
    spec = CartPole().spec()
    agent = agents.make("ppo", spec)
    optimizer = make_optimizer(6e-4, 0.5)
    obs_shape = spec.observation.shape
    state = init_learner_state(agent, optimizer, jax.random.key(0), np.zeros((1, *obs_shape), np.float32))
    rng = np.random.default_rng(0)
    b = num_envs // num_devices
    extras = jax.device_get(
        agent.act(state.params, np.zeros((b, *obs_shape), np.float32), jax.random.key(1), (), np.ones(b, bool))[1]
    )
    trajectory = Trajectory(
        TimeStep(
            rng.normal(size=(num_devices, t + 1, b, *obs_shape)).astype(np.float32),
            rng.normal(size=(num_devices, t + 1, b)).astype(np.float32),
            np.ones((num_devices, t + 1, b), np.float32),
            rng.random((num_devices, t + 1, b)) < 0.05,
        ),
        rng.integers(0, spec.num_actions, (num_devices, t + 1, b)).astype(np.int32),
        jax.tree.map(lambda x: np.broadcast_to(x, (num_devices, t + 1, *x.shape)).copy(), extras),
    )
    trajectory = parallel.shard(trajectory, devices)
    replicated = parallel.replicate(state, devices)
    step = make_learner_step(agent, optimizer, axis_names=(parallel.DEVICE_AXIS,))
    forms = {
        "pmap": jax.pmap(step, axis_name=parallel.DEVICE_AXIS, devices=devices),
        "device_map": parallel.device_map(step, devices),
    }
    compiled, compile_s = {}, {}
    for name, fn in forms.items():
        compiled[name], compile_s[name] = _compile(fn, replicated, trajectory)
    calls = {name: (lambda c: lambda s: c(s, trajectory)[0])(c) for name, c in compiled.items()}
    timing = alternate(calls, {name: replicated for name in calls}, rounds)
    return {
        "what": "sebulba learner step ppo cartpole",
        "devices": num_devices,
        "envs_per_device": b,
        "pmap_compile_s": compile_s["pmap"],
        "device_map_compile_s": compile_s["device_map"],
        "pmap_sps": t * num_envs / timing["pmap_s"],
        "device_map_sps": t * num_envs / timing["device_map_s"],
        **timing,
    }


def table(rows) -> str:
    lines = [
        "| program | devices | envs/device | compile pmap (s) | compile device_map (s) | pmap env steps/s | "
        "device_map env steps/s | speed ratio device_map / pmap |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['what']} | {r['devices']} | {r['envs_per_device']} | {r['pmap_compile_s']:.1f} | "
            f"{r['device_map_compile_s']:.1f} | {r['pmap_sps']:,.0f} | {r['device_map_sps']:,.0f} | {r['ratio']:.3f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=["a2c", "ppo"], choices=sorted(ANAKIN_SETTINGS))
    parser.add_argument("--num-envs", nargs="+", type=int, default=[64, 1024], help="Anakin environments per device")
    parser.add_argument("--device-counts", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--sebulba-envs", type=int, default=32, help="Sebulba learner batch (environments), 0: skip")
    parser.add_argument("--rounds", type=int, default=11, help="timed rounds (each calls both forms once)")
    parser.add_argument("--target-steps", type=int, default=2**17, help="env steps each Anakin call covers at least")
    parser.add_argument("--cpu-devices", type=int, default=None, help="CPU devices to expose (default: one per core)")
    _report.add_output_flags(parser, "device_map_vs_pmap")
    args = parser.parse_args(argv)

    parallel.set_cpu_device_count(args.cpu_devices or max(2, parallel.available_cores()))
    import jax

    machine = _report.machine()
    print(f"# device_map (jit of shard_map) vs pmap on {machine}, jax {jax.__version__}", flush=True)
    rows = []
    for agent_name in args.agents:
        for num_devices in args.device_counts:
            for num_envs in args.num_envs:
                rows.append(anakin_row(agent_name, num_envs, num_devices, args.rounds, args.target_steps))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    if args.sebulba_envs:
        for num_devices in args.device_counts:
            rows.append(sebulba_row(args.sebulba_envs, num_devices, args.rounds * 10))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = f"device_map (jit of shard_map) vs pmap on {machine}, jax {jax.__version__}\n\n{table(rows)}\n"
    print("\n" + text)
    _report.save(
        _report.output_path(args.save, args.out, "device_map_vs_pmap"),
        text,
        {"machine": machine, "jax": jax.__version__, "rows": rows},
    )


if __name__ == "__main__":
    main()
