"""Sebulba end to end with and without ``--envpool-xla``, the two alternating in one process.

``--envpool-xla`` makes each actor rollout one compiled program through envpool's XLA step (receive, act, send,
``--rollout-length`` times, no Python per step); without it the actor's Python loop receives, acts and sends each
step. Both learn the same trajectories (``tests/test_envpool.py`` holds them to the bit), so what differs is the
time. Each round trains the run once each way (the order alternating), ``--updates`` updates, and takes its steady
env steps/s (the updates after the first quarter, which holds compilation and the trajectories queued meanwhile) and
its mean policy lag; the table gives the medians and the median over rounds of the within-round ratio. Compilation
is in every run's first quarter, not in the figure. Pass any flag of ``python -m podracer.sebulba`` (``--preset``,
``--max-policy-lag``, a layout): both forms run it.

    python benchmarks/envpool_xla.py --env CartPole --agent ppo --updates 200 --max-policy-lag 1 --save
    python benchmarks/envpool_xla.py --preset pong --updates 6 --rounds 1 --out /tmp/pong_xla
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

import _report  # benchmarks/_report.py (the script's folder is on sys.path)


def steady(result, config) -> tuple[float, float]:
    """``(env steps/s, mean policy lag)`` over the updates after the first quarter (one log line per update)."""
    actors = len(config.actor_devices or (0,)) * config.actor_threads
    skip = max(1 + config.queue_size + actors, len(result.history) // 4)
    last = result.history[skip:] or result.history[-1:]
    return len(last) / sum(1.0 / h["sps"] for h in last), statistics.mean(h["policy_lag"] for h in last)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    own.add_argument("--updates", type=int, default=100, help="learner updates a run (default: 100)")
    own.add_argument("--rounds", type=int, default=3, help="rounds, each form once a round, order alternating")
    _report.add_output_flags(own, "envpool_xla")
    args, rest = own.parse_known_args(argv)
    if "--envpool-xla" in rest:
        raise SystemExit("benchmarks/envpool_xla.py: error: --envpool-xla is what the script compares; leave it out.")

    from podracer.cli import parser
    from podracer.run import parallel
    from podracer.run.config import SebulbaConfig

    cfg = parser.parse(SebulbaConfig, rest, prog="benchmarks/envpool_xla.py")
    parallel.set_cpu_device_count(cfg.cpu_devices or parallel.available_cores())
    import jax

    from podracer.run import compose

    actors = len(cfg.actor_devices or (0,)) * cfg.actor_threads
    per_actor = cfg.envs_per_actor(actors)
    cfg = dataclasses.replace(
        cfg,
        num_envs=None,
        num_envs_per_actor=per_actor,
        total_env_steps=args.updates * cfg.rollout_length * per_actor * actors,
        log_every=1,
        log_dir=None,
        checkpoint_dir=None,
        eval_every=None,
    )
    forms = {"host loop": cfg, "--envpool-xla": dataclasses.replace(cfg, envpool_xla=True, env_groups=None)}
    rates = {name: [] for name in forms}
    lags = {name: [] for name in forms}
    ratios = []
    for r in range(args.rounds):
        order = list(forms) if r % 2 == 0 else list(reversed(forms))
        got = {}
        for name in order:
            got[name], lag = steady(compose.train_sebulba(forms[name]), forms[name])
            rates[name].append(got[name])
            lags[name].append(lag)
            print(f"round {r + 1}: {name} {got[name]:,.0f} env steps/s, policy lag {lag:.2f}", flush=True)
        ratios.append(got["--envpool-xla"] / got["host loop"])
    groups = cfg.groups(jax.local_devices()[(cfg.actor_devices or (0,))[0]].platform, per_actor)
    machine = _report.machine()
    lines = [
        f"Sebulba {cfg.agent_name} on {cfg.env}, {per_actor} envs x {actors} actor thread(s), rollout "
        f"{cfg.rollout_length}, the host loop with {groups} group(s), --max-policy-lag {cfg.max_policy_lag}, on "
        f"{machine}, jax {jax.__version__}; {args.rounds} round(s) of {args.updates} updates per form, alternating "
        f"(`python benchmarks/envpool_xla.py {' '.join(argv)}`)",
        "",
        "| form | median env steps/s (steady) | min | max | mean policy lag |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {statistics.median(rates[name]):,.0f} | {min(rates[name]):,.0f} | {max(rates[name]):,.0f} | "
            f"{statistics.mean(lags[name]):.2f} |"
            for name in forms
        ),
        "",
        f"**--envpool-xla / host loop: median {statistics.median(ratios):.2f}x** over {args.rounds} round(s) "
        f"({', '.join(f'{x:.2f}x' for x in ratios)}).",
    ]
    text = "\n".join(lines)
    print(text)
    data = {
        "machine": machine,
        "jax": jax.__version__,
        "argv": argv,
        "env_steps_per_s": rates,
        "policy_lag": lags,
        "ratios": ratios,
    }
    _report.save(_report.output_path(args.save, args.out, "envpool_xla"), text + "\n", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
