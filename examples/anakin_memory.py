"""Does memory work? Recurrent and feed-forward agents on the cue-recall task, in Anakin mode.

    python examples/anakin_memory.py
    python examples/anakin_memory.py --delay 16 --agents a2c-lstm a2c

The first observation shows one of 4 cues, then ``--delay`` blank steps, then a query:
the answer earns +1 if it names the cue, -1 otherwise. Nothing at the query tells the
cues apart, so a feed-forward agent answers at chance (expected return -0.5); an agent
that remembers scores +1. Each agent trains on every device (the same settings as the
tests, scaled by ``--updates-scale``), then plays 256 greedy episodes; a table of both
returns (final and best log window) follows.
"""

from __future__ import annotations

import argparse
import sys
import time

from podracer.run import lifetime
from podracer import parallel

SETTINGS = {
    # name: (agent, hyper-parameters, learning rate, grad clip, envs per device, updates)
    "a2c-lstm": ("a2c", {"core": "lstm", "core_size": 32, "hidden_sizes": (32,)}, 3e-3, 0.5, 32, 200),
    "a2c": ("a2c", {"hidden_sizes": (64, 64)}, 3e-3, 0.5, 32, 200),
    "r2d2": (
        "r2d2",
        {
            "core_size": 32,
            "hidden_sizes": (32,),
            "batch_size": 32,
            "min_replay_size": 64,
            "replay_capacity": 2000,
            "discount": 0.99,
            "replay_ratio": 4.0,
            "burn_in": 4,
        },
        1e-3,
        10.0,
        16,
        400,
    ),
    "dqn": (
        "dqn",
        {
            "hidden_sizes": (64, 64),
            "batch_size": 128,
            "min_replay_size": 1000,
            "replay_capacity": 20_000,
            "discount": 0.99,
            "replay_ratio": 4.0,
        },
        1e-3,
        10.0,
        16,
        400,
    ),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--agents", nargs="+", default=list(SETTINGS), choices=list(SETTINGS), help="agents to compare (default: all)"
    )
    parser.add_argument("--delay", type=int, default=4, help="blank steps between cue and query (default: 4)")
    parser.add_argument(
        "--updates-scale", type=float, default=1.0, help="multiplies every agent's update count (default: 1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--cpu-devices", type=int, default=None, help="CPU devices to expose (default: one per core)")
    args = parser.parse_args(argv)
    if args.delay < 0 or args.updates_scale <= 0:
        parser.error("--delay must be >= 0 and --updates-scale > 0.")
    lifetime.exit_on_signals("anakin_memory")  # Ctrl-C or SIGTERM: one line, status 130 or 143, even while compiling
    parallel.set_cpu_device_count(args.cpu_devices or parallel.available_cores())
    import jax
    import numpy as np

    from podracer import agents, anakin, envs, learner
    from podracer.run import evaluate

    env = envs.make("memory", delay=args.delay)
    rows = []
    for name in args.agents:
        agent_name, hyper, lr, clip, num_envs, updates = SETTINGS[name]
        agent = agents.make(agent_name, env.spec(), **hyper)
        updates = max(20, int(round(updates * args.updates_scale / 20)) * 20)
        start = time.perf_counter()
        agent = agent._replace(optimizer=learner.make_optimizer(lr, clip))
        plan = anakin.anakin_plan(
            num_envs_per_device=num_envs, rollout_length=16, num_updates=updates, updates_per_call=20
        )
        state = anakin.init(env, agent, agent.optimizer, jax.random.key(args.seed), num_envs, rollout_length=16)
        result = anakin.run(plan, agent, state, env=env)
        seconds = time.perf_counter() - start
        params = parallel.unreplicate(result.state.learner.params)
        greedy, _ = evaluate.play_jax(env, agent, params, episodes=256, greedy=True, seed=args.seed + 1)
        steps = result.history[-1]["env_steps"]
        best = max(h["episode_return"] for h in result.history)
        rows.append((name, steps, result.history[-1]["episode_return"], best, float(np.mean(greedy)), seconds))
        print(
            f"{name:9s} {steps:>9,.0f} env steps in {seconds:5.1f} s: training return {rows[-1][2]:+.3f} "
            f"(best {best:+.3f}), greedy return {rows[-1][4]:+.3f}",
            flush=True,
        )
    print(
        f"\ncue recall, 4 cues, delay {args.delay} (chance: -0.5, perfect: +1); {jax.device_count()} "
        f"{jax.default_backend()} device(s)\n"
    )
    print(
        "| agent | memory | env steps | final training return | best training return | greedy return (256 episodes) "
        "| wall (s) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, steps, train_return, best, greedy_return, seconds in rows:
        memory = "LSTM" if name in ("a2c-lstm", "r2d2") else "none"
        print(
            f"| {name} | {memory} | {steps:,.0f} | {train_return:+.3f} | {best:+.3f} | {greedy_return:+.3f} | "
            f"{seconds:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
