"""podracer's SAC beside rejax's on gymnax Pendulum-v1 at matched settings: whole runs alternating, env steps/s.

rejax 0.1.3 needs gymnax 0.0.x (its evaluation unpacks a five-value ``step``), which podracer's environment does not
hold: its side runs in a Python of its own (``--rejax-python``, an environment with ``pip install rejax "gymnax<1.0"``)
as a worker process; podracer's side runs in another worker under this interpreter. Each worker builds its side's
whole run as one compiled ``train(key)`` (podracer: :func:`podracer.anakin.make_train`; rejax: ``SAC.train``, its
evaluation replaced by nothing), compiles it (timed apart, with a first call), then answers ``run SEED`` with the
seconds of one whole run. The driver alternates the two sides' runs (the order alternating by round) and reports
each side's env steps/s and the median and quartiles of the per-round ratio podracer / rejax.

The settings, matched: one environment, a gradient step of 256 items per env step (podracer:
``--num-envs 1 --rollout-length 1 --batch-size 256 --replay-ratio 256``), learning from 1,000 env steps on (rejax's
``fill_buffer``, podracer's ``--min-replay-size``; both runs include those steps), a 100,000-item uniform replay, 2 x
256 ReLU actor and twin critics, Adam at 3e-4, discount 0.99, Polyak 0.005 (rejax's ``polyak`` 0.995), a learned
temperature from 1 towards minus the action size. What stays each side's own: rejax takes three gradients per step
(actor, critics, temperature, each from its own loss), podracer one of a summed loss; rejax clips gradients
element-wise at its default infinity, podracer not at all.

    /tmp/rejax-venv/bin/python -m pip install rejax "gymnax<1.0"     # once
    python benchmarks/sac_vs_rejax.py --rejax-python /tmp/rejax-venv/bin/python
    python benchmarks/sac_vs_rejax.py --rejax-python ... --env-steps 3000 --rounds 9 --save
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETTINGS = {
    "hidden_sizes": (256, 256),
    "learning_rate": 3e-4,
    "discount": 0.99,
    "batch_size": 256,
    "replay_capacity": 100_000,
    "fill": 1_000,
    "tau": 0.005,
}


def podracer_run(env_steps: int):
    """podracer's whole run of ``env_steps`` as a compiled-on-first-call ``train(seed)``, and its settings."""
    import jax

    from podracer.core import agents, envs
    from podracer import anakin

    env = envs.make("gymnax:Pendulum-v1")
    hyper = dict(
        hidden_sizes=SETTINGS["hidden_sizes"],
        learning_rate=SETTINGS["learning_rate"],
        discount=SETTINGS["discount"],
        batch_size=SETTINGS["batch_size"],
        replay_ratio=float(SETTINGS["batch_size"]),  # one item inserted per env step: one batch learned
        replay_capacity=SETTINGS["replay_capacity"],
        min_replay_size=SETTINGS["fill"],
        target_tau=SETTINGS["tau"],
    )
    agent = agents.make("sac", env.spec(), **hyper)
    train = jax.jit(anakin.make_train(env, agent, agent.optimizer, num_envs=1, rollout_length=1, num_updates=env_steps))
    return lambda seed: train(jax.random.key(seed)), hyper


def rejax_run(env_steps: int):
    """rejax's whole run of ``env_steps`` (its evaluation replaced by nothing), and its settings."""
    import jax
    import rejax

    config = dict(
        env="Pendulum-v1",
        total_timesteps=env_steps,
        eval_freq=env_steps,
        skip_initial_evaluation=True,
        num_envs=1,
        hidden_layer_sizes=SETTINGS["hidden_sizes"],
        learning_rate=SETTINGS["learning_rate"],
        gamma=SETTINGS["discount"],
        batch_size=SETTINGS["batch_size"],
        buffer_size=SETTINGS["replay_capacity"],
        fill_buffer=SETTINGS["fill"],
        polyak=1.0 - SETTINGS["tau"],
    )
    algo = rejax.SAC.create(**config).replace(eval_callback=lambda algo, ts, rng: ())
    train = jax.jit(algo.train)
    return lambda seed: train(jax.random.PRNGKey(seed)), {k: v for k, v in config.items() if k != "env"}


def worker(side: str, env_steps: int) -> None:
    """One side: compile (timed with a first call), then answer ``run SEED`` with the seconds of a whole run."""
    if side == "podracer":
        from podracer.run import lifetime, parallel

        parallel.set_cpu_device_count(1)
        lifetime.quiet_dependencies()
    import jax

    run, settings = (podracer_run if side == "podracer" else rejax_run)(env_steps)
    start = time.perf_counter()
    jax.block_until_ready(run(0))
    print(json.dumps({"compile_s": time.perf_counter() - start, "jax": jax.__version__, "settings": settings}))
    sys.stdout.flush()
    for line in sys.stdin:
        command, *rest = line.split()
        if command != "run":
            return
        start = time.perf_counter()
        jax.block_until_ready(run(int(rest[0])))
        print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


class Side:
    def __init__(self, name: str, python: str, env_steps: int):
        self.name = name
        self.process = subprocess.Popen(
            [python, __file__, "--worker", name, "--env-steps", str(env_steps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ready = self.receive()

    def receive(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"The {self.name} side's worker ended (exit status {self.process.wait()}); see above.")
        return json.loads(line)

    def run(self, seed: int) -> float:
        self.process.stdin.write(f"run {seed}\n")
        self.process.stdin.flush()
        return self.receive()["seconds"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
            self.process.wait()


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def main(argv=None) -> int:
    import _report  # benchmarks/_report.py (the script's folder is on sys.path)

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rejax-python", required=True, help="a Python whose environment holds rejax and gymnax<1.0")
    parser.add_argument("--env-steps", type=int, default=3_000, help="env steps of each whole run")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each one run of each side, alternating")
    _report.add_output_flags(parser, "sac_vs_rejax")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.env_steps <= SETTINGS["fill"]:
        parser.error(f"--rounds must be >= 1 and --env-steps > {SETTINGS['fill']:,} (the replay's fill)")
    if not Path(args.rejax_python).exists():
        parser.error(f"--rejax-python: no such interpreter: {args.rejax_python}")

    sides = [Side("podracer", sys.executable, args.env_steps), Side("rejax", args.rejax_python, args.env_steps)]
    seconds = {side.name: [] for side in sides}
    try:
        for r in range(args.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                seconds[side.name].append(side.run(r + 1))
    finally:
        for side in sides:
            side.close()
    rates = {name: [args.env_steps / s for s in values] for name, values in seconds.items()}
    ratios = [a / b for a, b in zip(rates["podracer"], rates["rejax"])]
    low, high = quartiles(ratios)
    machine = _report.machine()
    ready = {side.name: side.ready for side in sides}
    lines = [
        f"SAC on gymnax Pendulum-v1, podracer beside rejax 0.1.3 at matched settings, on {machine}; podracer on jax "
        f"{ready['podracer']['jax']}, rejax on jax {ready['rejax']['jax']}; each run a whole one of "
        f"{args.env_steps:,} env steps (one env, a gradient step of 256 per env step after {SETTINGS['fill']:,}); "
        f"{args.rounds} rounds, the sides alternating (`python benchmarks/sac_vs_rejax.py --rejax-python PYTHON "
        f"--env-steps {args.env_steps} --rounds {args.rounds}`)\n",
        "| side | compile + first run s | median env steps/s | min | max |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {ready[name]['compile_s']:.1f} | {statistics.median(r):,.0f} | {min(r):,.0f} | {max(r):,.0f} |"
            for name, r in rates.items()
        ),
        "",
        f"**podracer / rejax env steps/s: median {statistics.median(ratios):.2f}x** over {len(ratios)} rounds "
        f"(quartiles {low:.2f}x to {high:.2f}x; range {min(ratios):.2f}x to {max(ratios):.2f}x)",
    ]
    text = "\n".join(lines)
    print(text)
    data = {
        "machine": machine,
        "env_steps": args.env_steps,
        "rounds": args.rounds,
        "compile_s": {name: ready[name]["compile_s"] for name in ready},
        "jax": {name: ready[name]["jax"] for name in ready},
        "env_steps_per_s": rates,
        "ratio_per_round": ratios,
        "median_ratio": statistics.median(ratios),
        "quartiles": [low, high],
        "settings": {name: ready[name]["settings"] for name in ready},
    }
    _report.save(_report.output_path(args.save, args.out, "sac_vs_rejax"), text + "\n", data)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[4]))
    else:
        sys.exit(main())
