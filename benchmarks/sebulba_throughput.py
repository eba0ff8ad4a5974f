"""Sebulba pipeline efficiency: end-to-end env steps/s against the bound its stages allow.

In one run, at the run's own batch sizes:
1. the raw envpool ceiling (random actions, the same task, envs, groups and threads);
2. each stage alone: envpool step and ``act`` on one environment group, the learner step on the
   learner batch, as seconds per environment step;
3. the bound: per-step times added when the stages share the same cores (JAX on the
   CPU), the slowest stage when they run on separate hardware (actors and learners on
   accelerators, environments on the host); the environments' share is the ceiling;
4. Sebulba's end-to-end env steps/s while learning (steps over time, one-update windows after
   the first quarter, which holds compilation and the burst of trajectories queued meanwhile),
   its ratio to the bound, and where the time went.
Prints a Markdown table; ``--save`` also writes it (and JSON) to ``benchmarks/results/``.

    python benchmarks/sebulba_throughput.py --env Pong --updates 8
    python benchmarks/sebulba_throughput.py --env CartPole --updates 200
    python benchmarks/sebulba_throughput.py --env Pong --agent muzero --updates 8   # another agent than IMPALA
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import threading
import time

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

from podracer.run import config as config_cli
from podracer.cli import parser
from podracer.run import parallel


def _median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up (compilation)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def envpool_ceiling(cfg, groups: int, steps: int) -> float:
    """Env steps/s of envpool alone in the run's structure, random actions instead of inference.

    Every actor thread owns ``groups`` envpool batches and keeps them all stepping, as the
    actors do (receive a group, choose its actions, send it again), concurrently with the
    other threads.
    """
    import numpy as np

    from podracer.run.hostenvs.envpool import EnvpoolEnv

    num_actors = len(cfg.actor_devices or (0,)) * cfg.actor_threads
    size = cfg.num_envs_per_actor // groups
    actors = [
        [EnvpoolEnv(cfg.env, size, seed=1000 * i + g, num_threads=cfg.envpool_threads) for g in range(groups)]
        for i in range(num_actors)
    ]
    n = actors[0][0].spec().num_actions

    def drive(envs, seed):
        rng = np.random.default_rng(seed)
        for env in envs:
            env.reset()
            env.send(rng.integers(0, n, size))
        for _ in range(steps):
            for env in envs:
                env.recv()
                env.send(rng.integers(0, n, size))
        for env in envs:
            env.recv()

    threads = [threading.Thread(target=drive, args=(envs, i)) for i, envs in enumerate(actors)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    for envs in actors:
        for env in envs:
            env.close()
    return num_actors * cfg.num_envs_per_actor * steps / seconds


def stage_seconds(cfg, groups: int, repeats: int) -> dict[str, float]:
    """Seconds per environment step of each stage alone, at the run's batch sizes (``groups`` environment groups)."""
    import jax
    import numpy as np

    from podracer.core import agents
    from podracer.core.agents.base import split_start_state
    from podracer.run.hostenvs.envpool import EnvpoolEnv
    from podracer.core.learner import init_learner_state, make_learner_step, should_unroll
    from podracer.run.sebulba.actor import _split_for_learners, make_act
    from podracer.core.types import TimeStep, Trajectory

    layout = parallel.resolve_layout(cfg.actor_devices, cfg.learner_devices, cfg.num_envs_per_actor)
    b, t = cfg.num_envs_per_actor, cfg.rollout_length
    g = b // groups  # envpool and act see one group at a time
    env = EnvpoolEnv(cfg.env, g, seed=0, num_threads=cfg.envpool_threads)
    spec = env.spec()
    rng = np.random.default_rng(0)
    env.reset()
    env_step = _median_seconds(lambda: env.step(rng.integers(0, spec.num_actions, g)), repeats * 10)
    env.close()

    name = cfg.agent_name
    agent = agents.make(cfg.agent, spec)
    optimizer = agent.optimizer
    obs = np.zeros((g, *spec.observation.shape), spec.observation.dtype)
    state = init_learner_state(agent, optimizer, jax.random.key(0), obs[:1])
    device = layout.actor_devices[0]
    params = jax.device_put(state.params, device)
    act = make_act(agent)
    key = jax.device_put(jax.random.key(1), device)
    core, first = agent.initial_state(g), np.ones(g, bool)

    def act_once():
        action, extras, _, _ = act(params, jax.device_put(obs, device), key, core, first)
        np.asarray(action), jax.device_get(extras)

    act_step = _median_seconds(act_once, repeats * 5)

    unroll = should_unroll(len(spec.observation.shape), layout.learner_devices[0].platform)
    p_step = parallel.device_map(
        make_learner_step(agent, optimizer, axis_names=(parallel.DEVICE_AXIS,), unroll=unroll), layout.learner_devices
    )
    ts = TimeStep(
        np.zeros((t + 1, b, *spec.observation.shape), spec.observation.dtype),
        np.zeros((t + 1, b), np.float32),
        np.ones((t + 1, b), np.float32),
        np.zeros((t + 1, b), bool),
    )
    extras = jax.device_get(
        act(
            params,
            jax.device_put(np.zeros((b, *obs.shape[1:]), obs.dtype), device),
            key,
            agent.initial_state(b),
            np.ones(b, bool),
        )[1]
    )
    extras, start = split_start_state(extras)
    trajectory = Trajectory(
        ts, np.zeros((t + 1, b), np.int32), jax.tree.map(lambda x: np.broadcast_to(x, (t + 1, *x.shape)), extras), start
    )
    sharded = parallel.shard(_split_for_learners(trajectory, len(layout.learner_devices)), layout.learner_devices)
    replicated = parallel.replicate(state, layout.learner_devices)
    learn = _median_seconds(lambda: jax.block_until_ready(p_step(replicated, sharded)), repeats)
    return {
        "env": env_step / g,
        "act": act_step / g,
        "learn": learn / (t * b),
        "platform": layout.learner_devices[0].platform,
        "agent": name,
    }


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """The Sebulba run to measure (every flag of python -m podracer.sebulba) and the measurement's own settings."""

    run: config_cli.SebulbaConfig = config_cli.SebulbaConfig()  # the Sebulba run
    updates: int = 8  # learner updates in the end-to-end run
    repeats: int = 3  # timed repeats of each stage
    ceiling_steps: int = 200  # envpool steps per batch for the ceiling
    save: bool = False  # also write the table to benchmarks/results/sebulba_<env>.{md,json}
    out: str | None = None  # write the table to OUT.{md,json} instead (a path without extension)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    default = BenchmarkConfig()
    if "--agent" in argv:  # the run's agent (its hyper-parameters are then flags too); IMPALA by default
        from podracer.core import agents

        at = argv.index("--agent")
        name = argv[at + 1] if at + 1 < len(argv) else ""
        if name not in agents.names():
            raise SystemExit(f"benchmarks/sebulba_throughput.py: error: --agent: one of {', '.join(agents.names())}")
        del argv[at : at + 2]
        default = BenchmarkConfig(run=dataclasses.replace(default.run, agent=agents.config_class(name)()))
    args = parser.parse(default, argv, prog="benchmarks/sebulba_throughput.py", description=__doc__.split("\n\n")[0])
    cfg = args.run
    parallel.set_cpu_device_count(cfg.cpu_devices or parallel.available_cores())
    import jax

    from podracer.run import compose

    actor_devices = len(cfg.actor_devices or (0,))
    per_actor = cfg.envs_per_actor(actor_devices * cfg.actor_threads)
    steps_per_update = cfg.rollout_length * per_actor
    cfg = dataclasses.replace(
        cfg, num_envs=None, num_envs_per_actor=per_actor, total_env_steps=args.updates * steps_per_update, log_every=1
    )
    groups = cfg.groups(jax.local_devices()[(cfg.actor_devices or (0,))[0]].platform, per_actor)
    machine = _report.machine()
    print(
        f"# Sebulba throughput on {machine}, jax {jax.__version__}: {cfg.env}, {cfg.num_envs_per_actor} envs "
        f"({groups} group(s)) "
        f"x {cfg.actor_threads} actor thread(s), rollout {cfg.rollout_length}",
        flush=True,
    )

    ceiling = envpool_ceiling(cfg, groups, args.ceiling_steps)
    print(f"envpool ceiling (random actions): {ceiling:,.0f} env steps/s", flush=True)
    stages = stage_seconds(cfg, groups, args.repeats)
    per_step = {k: stages[k] for k in ("env", "act", "learn")}
    shared = stages["platform"] == "cpu"
    # The environments of every actor thread together step at most at the ceiling; inference
    # runs one call at a time per actor device; the learner step is measured on its whole batch.
    if shared:
        bound = 1.0 / (1.0 / ceiling + per_step["act"] + per_step["learn"])
    else:
        bound = min(ceiling, actor_devices / per_step["act"], 1.0 / per_step["learn"])
    print(
        "stage alone, ms per 1000 env steps: "
        + ", ".join(f"{k} {v * 1e6:.1f}" for k, v in per_step.items())
        + f"; bound ({'sum: shared cores' if shared else 'slowest stage'}) {bound:,.1f} env steps/s",
        flush=True,
    )

    result = compose.train_sebulba(cfg)
    # Windows are one update each. Skip the first quarter (compilation, then the trajectories queued
    # and held by actors meanwhile, which arrive in a burst), then divide the steps by the time:
    # with several actor threads updates arrive in bursts, so a median of per-window rates overstates.
    skip = max(1 + cfg.queue_size + cfg.actor_threads * actor_devices, len(result.history) // 4)
    last = result.history[skip:] or result.history[-1:]
    end_to_end = len(last) / sum(1.0 / h["sps"] for h in last)
    breakdown = {
        k: sum(h[k] for h in last)
        for k in ("learn_s", "learner_wait_s", "actor_env_s", "actor_act_s", "actor_ship_s", "actor_put_wait_s")
    }
    row = {
        "env": cfg.env,
        "agent": stages["agent"],
        "num_envs": cfg.num_envs_per_actor,
        "env_groups": groups,
        "actor_threads": cfg.actor_threads,
        "rollout_length": cfg.rollout_length,
        "envpool_ceiling_sps": ceiling,
        "bound_sps": bound,
        "end_to_end_sps": end_to_end,
        "efficiency": end_to_end / bound,
        "of_ceiling": end_to_end / ceiling,
        "stage_seconds_per_step": per_step,
        "breakdown_s": breakdown,
        "policy_lag": statistics.mean(h["policy_lag"] for h in last),
    }
    text = (
        f"Sebulba throughput on {machine}, jax {jax.__version__}\n\n"
        "| env | agent | envs x threads | groups | rollout | envpool ceiling | env ms/1k steps | act ms/1k | learn "
        "ms/1k | bound | end to end | of bound | of ceiling |\n"
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {cfg.env} | {row['agent']} | {cfg.num_envs_per_actor} x {cfg.actor_threads} | {groups} | "
        f"{cfg.rollout_length} | {ceiling:,.0f} | "
        f"{per_step['env'] * 1e6:.1f} | {per_step['act'] * 1e6:.1f} | {per_step['learn'] * 1e6:.1f} | {bound:,.1f} | "
        f"{end_to_end:,.1f} | {100 * end_to_end / bound:.0f} % | {100 * end_to_end / ceiling:.1f} % |\n\n"
        "Time over the measured windows (s): "
        + ", ".join(f"{k} {v:.2f}" for k, v in breakdown.items())
        + f"; mean policy lag {row['policy_lag']:.2f} updates.\n"
    )
    print("\n" + text)
    _report.save(
        _report.output_path(args.save, args.out, f"sebulba_{cfg.env.lower()}"),
        text,
        {"machine": machine, "jax": jax.__version__, "row": row},
    )


if __name__ == "__main__":
    main()
