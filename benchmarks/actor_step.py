"""A Sebulba actor's inference round trip per step, as the actor makes it and as it made it before 2026-11-29.

The actor hands each step's host observations to its jitted policy and reads the action and the agent's extras
back (``podracer.run.sebulba.actor.run_actor``). Before, it placed the observations on its device with ``device_put``
first and read the action and the extras back in two transfers; now it passes the numpy arrays as they are (jit
moves them to the device of the parameters) and reads both back in one ``device_get``. At a handful of
environments (CleanRL's MuJoCo settings run one) those transfers, not the policy's arithmetic, are most of a step.

Both forms run the same compiled ``act`` (``podracer.run.sebulba.actor.make_act``) of a preset's agent on the preset's
host environment's observations, on one CPU device; after a warm-up, ``--rounds`` rounds time ``--steps`` steps of
each, the order alternating; the table gives each form's median microseconds per step and the median over rounds
of the within-round ratio (before / now: above 1, now is faster). The environment itself is not stepped: the
figure is the actor's own share of a step.

    python benchmarks/actor_step.py                                   # PPO at pusher-ppo-cleanrl's settings
    python benchmarks/actor_step.py --preset cartpole-sebulba --num-envs 32 --rounds 15 --save
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)


def _forms(act, params, device):
    """The two forms of a step, each ``step(observation, key, state, first) -> (action, extras, state, key)``."""
    import jax
    import numpy as np

    def before(observation, key, state, first):
        observation = jax.device_put(observation, device)
        action, extras, state, key = act(params, observation, key, state, first, None)
        return np.asarray(action), jax.device_get(extras), state, key

    def now(observation, key, state, first):
        action, extras, state, key = act(params, observation, key, state, first, None)
        action, extras = jax.device_get((action, extras))
        return np.asarray(action), extras, state, key

    return {"before": before, "now": now}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="pusher-ppo-cleanrl", help="a Sebulba preset: its agent and environment")
    parser.add_argument("--num-envs", type=int, default=None, help="environments per step (default: the preset's)")
    parser.add_argument("--steps", type=int, default=2000, help="steps per form per round")
    parser.add_argument("--rounds", type=int, default=9, help="rounds, each form once per round, order alternating")
    _report.add_output_flags(parser, "actor_step")
    args = parser.parse_args(argv)

    from podracer.cli import parser
    from podracer.run import parallel

    parallel.set_cpu_device_count(1)
    import jax
    import numpy as np

    from podracer.core import agents
    from podracer.run import hostenvs
    from podracer.run import plan as plans
    from podracer.run.compose import normalization
    from podracer.run.config import SebulbaConfig
    from podracer.run.sebulba.actor import make_act

    cfg = parser.parse(SebulbaConfig, ["--preset", args.preset], prog="actor_step.py")
    num_envs = args.num_envs or cfg.envs_per_actor(1)
    env = hostenvs.make_host(cfg.env, num_envs, 0)
    try:
        timestep = env.reset()
        spec = env.spec()
    finally:
        env.close()
    plan = plans.sebulba_plan(
        num_envs_per_actor=num_envs,
        rollout_length=cfg.rollout_length,
        total_env_steps=cfg.total_env_steps,
        num_learner_devices=1,
    )
    agent = agents.make(cfg.agent, spec, run=plan.facts, normalize=normalization(cfg))
    device = jax.devices()[0]
    params = jax.device_put(agent.init(jax.random.key(0), timestep.observation), device)
    act = make_act(agent)
    forms = _forms(act, params, device)
    state = jax.device_put(agent.initial_state(num_envs), device)
    first = np.zeros(num_envs, bool)
    observation = timestep.observation

    def timed(form) -> float:
        key = jax.device_put(jax.random.key(1), device)
        carried = state
        start = time.perf_counter()
        for _ in range(args.steps):
            _, _, carried, key = form(observation, key, carried, first)
        return (time.perf_counter() - start) / args.steps * 1e6

    for form in forms.values():  # compiles act once, then warms each path
        timed(form)
    times = {name: [] for name in forms}
    ratios = []
    for r in range(args.rounds):
        order = list(forms) if r % 2 == 0 else list(reversed(forms))
        got = {name: timed(forms[name]) for name in order}
        for name, value in got.items():
            times[name].append(value)
        ratios.append(got["before"] / got["now"])
    quartiles = statistics.quantiles(ratios, n=4)
    machine = _report.machine()
    lines = [
        f"A Sebulba actor's inference round trip per step, {cfg.agent_name} at --preset {args.preset} on "
        f"{cfg.env} x {num_envs} env(s), on {machine}, jax {jax.__version__}; {args.rounds} rounds of "
        f"{args.steps:,} steps per form, alternating (`python benchmarks/actor_step.py "
        f"{' '.join(sys.argv[1:] if argv is None else argv)}`)",
        "",
        "| form | median us per step | min | max |",
        "|---|---:|---:|---:|",
        *(
            f"| {name} | {statistics.median(values):.0f} | {min(values):.0f} | {max(values):.0f} |"
            for name, values in times.items()
        ),
        "",
        f"**before / now: median {statistics.median(ratios):.2f}x** over {args.rounds} rounds (quartiles "
        f"{quartiles[0]:.2f}x to {quartiles[2]:.2f}x). before: `device_put` of the observations, the action and the "
        "extras read back one after the other; now: the numpy observations into jit, one `device_get`.",
    ]
    text = "\n".join(lines)
    print(text)
    data = {
        "machine": machine,
        "jax": jax.__version__,
        "preset": args.preset,
        "num_envs": num_envs,
        "us_per_step": times,
        "ratios": ratios,
    }
    _report.save(_report.output_path(args.save, args.out, "actor_step"), text + "\n", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
