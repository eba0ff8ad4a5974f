"""A Sebulba actor's environment-and-inference loop in four forms: how envpool is driven, measured alone.

The actor (``podracer.run.sebulba.actor.run_actor``) receives a batch of time steps from envpool, computes its
actions with the jitted policy, reads them back and sends them, ``--rollout-length`` times a trajectory. This script
times that loop without the learner, on one device, for the same agent, environments and threads, in four forms:

- ``sync``: one envpool batch of all ``--num-envs`` (``batch_size == num_envs``), received, acted on, sent: the
  actor with one environment group (its default on the CPU);
- ``groups``: two batches of half the environments, one stepping on envpool's threads while the other's actions are
  computed: the actor with ``--env-groups 2`` (its default on accelerators);
- ``async``: one envpool pool of all the environments with ``batch_size`` half of them (envpool's asynchronous
  batches): ``recv`` returns whichever half finished first, their actions go back to those ``env_id``s;
- ``xla``: envpool's XLA step (``env.xla()``: ``recv`` and ``send`` as custom calls) inside one jitted
  ``lax.scan`` over the rollout, with the policy between them: no Python per step, the trajectory stays on the
  device (the question of cleanba issue 20).

Every form makes the same env steps (``recv`` batches x their size) with the same policy and stacks what a
trajectory holds (observations, actions, rewards); after a warm-up (compilation), ``--rounds`` rounds time each
form on ``--rollouts`` rollouts, the order alternating, and the table gives each form's median env steps/s and the
median over rounds of its within-round ratio to ``sync``. The ``async`` form's trajectories would be per
environment (its batches mix environments): the actor does not assemble them today, so it is measured here first.

    python benchmarks/actor_envpool.py --preset cartpole-sebulba --num-envs 32 --save
    python benchmarks/actor_envpool.py --preset pong --num-envs 32 --rollouts 2 --rounds 3 --save
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

FORMS = ("sync", "groups", "async", "xla")


def _pool(task_id: str, num_envs: int, batch_size: int, seed: int, threads: int, atari_kwargs: dict):
    import envpool

    return envpool.make(
        task_id,
        env_type="gymnasium",
        num_envs=num_envs,
        batch_size=batch_size,
        seed=seed,
        num_threads=threads,
        **atari_kwargs,
    )


def make_forms(task_id: str, num_envs: int, length: int, threads: int, atari_kwargs: dict, agent, params, device):
    """``{form: run(rollouts) -> env steps}``; each run drives its own pools (made here, reset once)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from podracer.run.sebulba.actor import make_act

    act = make_act(agent)
    half = num_envs // 2
    key0 = jax.device_put(jax.random.key(1), device)

    def host_form(pools, batch):
        """A rollout at a time: ``recv`` a batch from each pool in turn, act, send; ``batch``: a recv's size."""
        state = {"key": key0, "first": np.ones(batch, bool)}
        core = jax.device_put(agent.initial_state(batch), device)
        for pool in pools:
            pool.async_reset()

        def run(rollouts: int) -> int:
            steps = 0
            for _ in range(rollouts):
                observations, actions, rewards = [], [], []
                for _ in range(length):
                    for pool in pools:
                        observation, reward, terminated, truncated, info = pool.recv()
                        action, _, _, state["key"] = act(params, observation, state["key"], core, state["first"])
                        action = np.asarray(jax.device_get(action))
                        pool.send(action, info["env_id"])
                        state["first"] = np.logical_or(terminated, truncated)
                        observations.append(observation)
                        actions.append(action)
                        rewards.append(reward)
                        steps += len(reward)
                np.stack(observations), np.stack(actions), np.stack(rewards)
            return steps

        return run

    def xla_form():
        pool = _pool(task_id, num_envs, num_envs, 3000, threads, atari_kwargs)
        handle, recv, send, _ = pool.xla()
        pool.async_reset()
        core = agent.initial_state(num_envs)

        @jax.jit
        def rollout(handle, params, key, first):
            def step(carry, _):
                handle, key, first = carry
                handle, (observation, reward, terminated, truncated, info) = recv(handle)
                key, act_key = jax.random.split(key)
                action, _, _ = agent.act(params, observation, act_key, core, first)
                handle = send(handle, action.astype(jnp.int32), info["env_id"])
                return (handle, key, jnp.logical_or(terminated, truncated)), (observation, action, reward)

            (handle, key, first), trajectory = jax.lax.scan(step, (handle, key, first), length=length)
            return handle, key, first, trajectory

        carry = {"handle": jax.device_put(handle, device), "key": key0, "first": np.ones(num_envs, bool)}

        def run(rollouts: int) -> int:
            for _ in range(rollouts):
                carry["handle"], carry["key"], first, trajectory = rollout(
                    carry["handle"], params, carry["key"], carry["first"]
                )
                carry["first"] = np.asarray(first)  # as the actor carries it (a device array would compile again)
            jax.block_until_ready(trajectory)
            return rollouts * length * num_envs

        run.pool = pool  # kept alive with the function
        return run

    return {
        "sync": host_form([_pool(task_id, num_envs, num_envs, 0, threads, atari_kwargs)], num_envs),
        "groups": host_form(
            [_pool(task_id, half, half, 1000 + 1000 * g, threads, atari_kwargs) for g in range(2)], half
        ),
        "async": host_form([_pool(task_id, num_envs, half, 2000, threads, atari_kwargs)], half),
        "xla": xla_form(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="cartpole-sebulba", help="a Sebulba preset: its agent and environment")
    parser.add_argument("--num-envs", type=int, default=None, help="environments per actor (default: the preset's)")
    parser.add_argument("--rollout-length", type=int, default=None, help="steps a rollout (default: the preset's)")
    parser.add_argument("--rollouts", type=int, default=10, help="rollouts per form per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each form once per round, order alternating")
    _report.add_output_flags(parser, "actor_envpool")
    args = parser.parse_args(argv)

    from podracer.cli import parser as cli_parser
    from podracer.run import parallel

    parallel.set_cpu_device_count(1)
    import jax

    from podracer.core import agents
    from podracer.run import hostenvs
    from podracer.run import plan as plans
    from podracer.run.compose import normalization
    from podracer.run.config import SebulbaConfig
    from podracer.run.hostenvs.envpool import atari_options, is_atari, resolve_task_id

    cfg = cli_parser.parse(SebulbaConfig, ["--preset", args.preset], prog="actor_envpool.py")
    num_envs = args.num_envs or cfg.envs_per_actor(1)
    length = args.rollout_length or cfg.rollout_length
    if num_envs % 2:
        raise SystemExit(f"benchmarks/actor_envpool.py: error: --num-envs must be even (two groups), got {num_envs}.")
    task_id = resolve_task_id(cfg.env)
    if not task_id or cfg.env.startswith(("jax:", "gymnasium:")):
        raise SystemExit(f"benchmarks/actor_envpool.py: error: --preset {args.preset} does not train on envpool.")
    env = hostenvs.make_host(cfg.env, num_envs, 0)
    try:
        timestep = env.reset()
        spec = env.spec()
    finally:
        env.close()
    if not spec.num_actions or spec.action_mask:
        raise SystemExit(
            f"benchmarks/actor_envpool.py: error: --preset {args.preset}: the forms here drive discrete actions "
            "without a mask."
        )
    # the keyword arguments EnvpoolEnv gives envpool for Atari, so that the forms step the same game
    atari_kwargs = atari_options(cfg.sticky_actions) if is_atari(task_id) else {}
    plan = plans.sebulba_plan(
        num_envs_per_actor=num_envs,
        rollout_length=length,
        total_env_steps=cfg.total_env_steps,
        num_learner_devices=1,
    )
    agent = agents.make(cfg.agent, spec, run=plan.facts, normalize=normalization(cfg))
    if jax.tree.leaves(agent.initial_state(2)):
        raise SystemExit(
            f"benchmarks/actor_envpool.py: error: --preset {args.preset}: {cfg.agent_name} carries a core state "
            "between steps; the forms here drive a feed-forward policy."
        )
    device = jax.devices()[0]
    params = jax.device_put(agent.init(jax.random.key(0), timestep.observation), device)
    forms = make_forms(task_id, num_envs, length, cfg.envpool_threads, atari_kwargs, agent, params, device)

    def timed(name: str) -> float:
        start = time.perf_counter()
        steps = forms[name](args.rollouts)
        return steps / (time.perf_counter() - start)

    for name in FORMS:  # compiles act (and the XLA form's rollout), warms each pool
        forms[name](1)
    rates = {name: [] for name in FORMS}
    ratios = {name: [] for name in FORMS if name != "sync"}
    for r in range(args.rounds):
        order = list(FORMS) if r % 2 == 0 else list(reversed(FORMS))
        got = {name: timed(name) for name in order}
        for name, value in got.items():
            rates[name].append(value)
            if name != "sync":
                ratios[name].append(value / got["sync"])
    machine = _report.machine()
    command = " ".join(sys.argv[1:] if argv is None else argv)
    lines = [
        f"A Sebulba actor's envpool loop alone, {cfg.agent_name} at --preset {args.preset} on {task_id} x {num_envs} "
        f"envs, rollouts of {length} steps, envpool threads {cfg.envpool_threads or 'default'}, on {machine}, jax "
        f"{jax.__version__}; {args.rounds} rounds of {args.rollouts} rollout(s) per form, alternating "
        f"(`python benchmarks/actor_envpool.py {command}`)",
        "",
        "| form | median env steps/s | min | max | / sync (median of rounds) |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {statistics.median(values):,.0f} | {min(values):,.0f} | {max(values):,.0f} | "
            + (f"{statistics.median(ratios[name]):.2f}x |" if name in ratios else "1 |")
            for name, values in rates.items()
        ),
    ]
    text = "\n".join(lines)
    print(text)
    data = {
        "machine": machine,
        "jax": jax.__version__,
        "preset": args.preset,
        "task_id": task_id,
        "num_envs": num_envs,
        "rollout_length": length,
        "env_steps_per_s": rates,
        "ratio_to_sync": ratios,
    }
    _report.save(_report.output_path(args.save, args.out, "actor_envpool"), text + "\n", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
