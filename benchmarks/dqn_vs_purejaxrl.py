"""podracer's DQN beside PureJaxRL's ``dqn.py`` at PureJaxRL's settings on gymnax CartPole-v1: env steps/s of each,
both compiled in one process and called alternately.

PureJaxRL is not on the package index and its code stays out of this project: take a scratch copy of its ``dqn.py``
(it needs flashbax) and pass the file. Three shims let the 2024 file run on today's stack, none touching its work: an
empty ``wandb`` module when wandb is absent (it is used only with WANDB_MODE online), ``jax.tree_map`` as
``jax.tree.map`` (gone from JAX since), and its ``LogWrapper`` returning gymnax 0.0.x's five-tuple step
(``done = terminated or truncated``, as gymnax 0.0.x computed it) from gymnax 1.x's six:

    git clone https://github.com/luchris429/purejaxrl /tmp/purejaxrl && pip install flashbax
    python benchmarks/dqn_vs_purejaxrl.py --purejaxrl /tmp/purejaxrl/purejaxrl/dqn.py
    python benchmarks/dqn_vs_purejaxrl.py --purejaxrl ... --rounds 15 --env-steps 100000 --save

The settings are those of ``dqn.py``'s ``main()`` (luchris429/purejaxrl at 31756b1): 10 environments, a 10,000-item
uniform replay, batches of 128, one gradient step per 10 env steps, learning from 10,000 env steps, the target copied
every 500 env steps, Adam at 2.5e-4, epsilon 1.0 to 0.05 over half the run, a 120-84 ReLU MLP. podracer runs them as
``--num-envs 10 --rollout-length 1 --replay-ratio 12.8 --n-step 1 --no-prioritized --target-period 50
--no-double-q`` on one device (PureJaxRL's program runs on one): DQN's target, as PureJaxRL's; its loss is Huber's
where PureJaxRL's is the squared error (the same work). Each side is its whole run as one
compiled ``train(key)`` (PureJaxRL's ``make_train``, podracer's :func:`podracer.anakin.make_train`) over
``--env-steps``, learning start included on both; after a compiling call of each, ``--rounds`` rounds call the two
in turn (the order alternating), and the table gives each side's median env steps/s and the median over rounds of
the within-round ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
import types
from pathlib import Path

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

SETTINGS = {  # dqn.py's main() at 31756b1, less wandb's entries
    "NUM_ENVS": 10,
    "BUFFER_SIZE": 10_000,
    "BUFFER_BATCH_SIZE": 128,
    "EPSILON_START": 1.0,
    "EPSILON_FINISH": 0.05,
    "TARGET_UPDATE_INTERVAL": 500,
    "LR": 2.5e-4,
    "LEARNING_STARTS": 10_000,
    "TRAINING_INTERVAL": 10,
    "LR_LINEAR_DECAY": False,
    "GAMMA": 0.99,
    "TAU": 1.0,
    "ENV_NAME": "CartPole-v1",
}


def load_purejaxrl(path: Path):
    """PureJaxRL's ``dqn`` module from a scratch copy of its file."""
    import jax
    import jax.numpy as jnp
    from gymnax.wrappers.purerl import LogWrapper

    class FiveTupleLogWrapper(LogWrapper):
        def step(self, key, state, action, params=None):
            obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
            return obs, state, reward, jnp.logical_or(terminated, truncated), info

    if importlib.util.find_spec("wandb") is None:
        sys.modules["wandb"] = types.ModuleType("wandb")  # imported at its top, used only with WANDB_MODE online
    if not hasattr(jax, "tree_map"):
        jax.tree_map = jax.tree.map  # removed from JAX after dqn.py was written
    spec = importlib.util.spec_from_file_location("purejaxrl_dqn", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.LogWrapper = FiveTupleLogWrapper
    return module


def purejaxrl_train(module, env_steps: int):
    import jax

    config = {**SETTINGS, "TOTAL_TIMESTEPS": env_steps, "EPSILON_ANNEAL_TIME": env_steps / 2}
    return jax.jit(module.make_train(config))


def podracer_train(env_steps: int):
    import jax

    from podracer.core import agents, envs
    from podracer import anakin
    from podracer.core.learner import make_optimizer
    from podracer.core.types import RunFacts

    num_envs = SETTINGS["NUM_ENVS"]
    updates = env_steps // num_envs
    env = envs.make("gymnax:CartPole-v1")
    hyper = dict(
        n_step=1,
        double_q=False,
        hidden_sizes=(120, 84),
        epsilon_schedule="linear",
        epsilon_start=1.0,
        epsilon_end=0.05,
        epsilon_fraction=0.5,
        replay_capacity=SETTINGS["BUFFER_SIZE"],
        batch_size=SETTINGS["BUFFER_BATCH_SIZE"],
        replay_ratio=SETTINGS["BUFFER_BATCH_SIZE"] / SETTINGS["TRAINING_INTERVAL"],
        min_replay_size=SETTINGS["LEARNING_STARTS"],
        prioritized=False,
        target_period=SETTINGS["TARGET_UPDATE_INTERVAL"] // SETTINGS["TRAINING_INTERVAL"],
    )
    agent = agents.make("dqn", env.spec(), run=RunFacts(updates, num_envs, 1, env_steps), **hyper)
    train = anakin.make_train(
        env, agent, make_optimizer(SETTINGS["LR"], None), num_envs=num_envs, rollout_length=1, num_updates=updates
    )
    return jax.jit(train), hyper


def measure(calls: dict, rounds: int, env_steps: int):
    """Compiles each call, then ``rounds`` rounds calling each once, the order alternating; per side its compile
    seconds and every round's env steps/s."""
    import jax

    compile_s, rates = {}, {name: [] for name in calls}
    for name, call in calls.items():
        start = time.perf_counter()
        jax.block_until_ready(call(0))
        compile_s[name] = time.perf_counter() - start
    names = list(calls)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            jax.block_until_ready(calls[name](r + 1))
            rates[name].append(env_steps / (time.perf_counter() - start))
    return compile_s, rates


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--purejaxrl", type=Path, required=True, help="a scratch copy of PureJaxRL's purejaxrl/dqn.py")
    parser.add_argument("--env-steps", type=int, default=100_000, help="env steps per call, each side")
    parser.add_argument("--rounds", type=int, default=15, help="rounds of alternating timed calls")
    _report.add_output_flags(parser, "dqn_vs_purejaxrl")
    args = parser.parse_args(argv)
    if not args.purejaxrl.is_file():
        parser.error(f"--purejaxrl: no file {args.purejaxrl} (a copy of luchris429/purejaxrl's purejaxrl/dqn.py)")
    if importlib.util.find_spec("flashbax") is None:
        parser.error("--purejaxrl: PureJaxRL's dqn.py needs flashbax (pip install flashbax)")
    if args.rounds < 1 or args.env_steps < 10 * SETTINGS["LEARNING_STARTS"] // 10:
        parser.error("--rounds must be >= 1 and --env-steps >= 10,000 (PureJaxRL's learning start)")

    from podracer.run import lifetime, parallel

    parallel.set_cpu_device_count(1)
    lifetime.quiet_dependencies()
    import jax

    module = load_purejaxrl(args.purejaxrl)
    theirs = purejaxrl_train(module, args.env_steps)
    ours, hyper = podracer_train(args.env_steps)
    calls = {
        "podracer": lambda seed: ours(jax.random.key(seed)),
        "PureJaxRL": lambda seed: theirs(jax.random.PRNGKey(seed)),
    }
    compile_s, rates = measure(calls, args.rounds, args.env_steps)
    ratios = [a / b for a, b in zip(rates["podracer"], rates["PureJaxRL"])]
    machine = _report.machine()
    lines = [
        f"DQN on gymnax CartPole-v1 at PureJaxRL's dqn.py settings (luchris429/purejaxrl at 31756b1), on {machine}, "
        f"jax {jax.__version__}, one device; each call a whole run of {args.env_steps:,} env steps; {args.rounds} "
        "rounds, the two sides alternating "
        f"(`python benchmarks/dqn_vs_purejaxrl.py --purejaxrl PATH --env-steps {args.env_steps} "
        f"--rounds {args.rounds}`)\n",
        "| side | compile + first call s | median env steps/s | min | max |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {compile_s[name]:.1f} | {statistics.median(r):,.0f} | {min(r):,.0f} | {max(r):,.0f} |"
            for name, r in rates.items()
        ),
        "",
        f"**podracer / PureJaxRL env steps/s: median {statistics.median(ratios):.2f}x** over {len(ratios)} rounds "
        f"(range {min(ratios):.2f}x to {max(ratios):.2f}x). podracer's settings: "
        + ", ".join(f"{k}={v}" for k, v in hyper.items()),
    ]
    text = "\n".join(lines)
    print(text)
    data = {
        "machine": machine,
        "jax": jax.__version__,
        "env_steps": args.env_steps,
        "rounds": args.rounds,
        "compile_s": compile_s,
        "env_steps_per_s": rates,
        "ratio_per_round": ratios,
        "median_ratio": statistics.median(ratios),
        "purejaxrl_settings": SETTINGS,
        "podracer_settings": {k: list(v) if isinstance(v, tuple) else v for k, v in hyper.items()},
    }
    _report.save(_report.output_path(args.save, args.out, "dqn_vs_purejaxrl"), text + "\n", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
