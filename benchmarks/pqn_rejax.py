"""rejax's PQN on gymnax CartPole-v1 at the settings of podracer's ``cartpole-pqn`` preset where rejax has them:
one side of ``benchmarks/pqn_vs_ppo.py --rejax-python PYTHON``, run by a Python of its own environment:
``pip install rejax "gymnax<1.0"`` (rejax 0.1.3's evaluation unpacks gymnax 0.0.x's five-value ``step``; with
gymnax 1.0.1 it fails with "too many values to unpack"). Prints one JSON line: the seconds from start to the end
(imports, compilation and the seeds' vmapped training: rejax compiles the whole run, so nothing is seen before its
end) and, per evaluation, the env steps and the seeds' mean return (rejax evaluates 128 episodes at epsilon
0.005).

rejax 0.1.3 fixes PQN's MLP at 2 x 64 (LayerNorm before each ReLU), clips gradients element-wise
(``optax.clip``) and has no reward scale and no learning-rate decay: those stay rejax's.

    /path/to/rejax-venv/bin/python benchmarks/pqn_rejax.py --seeds 3 --seed 100
"""

from __future__ import annotations

import argparse
import json
import time

START = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=32 * 64 * 61, help="env steps between evaluations")
    args = parser.parse_args()

    import jax
    import numpy as np
    import rejax

    algo = rejax.PQN.create(
        env="CartPole-v1",
        total_timesteps=32 * 64 * 244,
        eval_freq=args.eval_every,
        num_envs=32,
        num_steps=64,
        num_epochs=4,
        num_minibatches=16,
        learning_rate=1e-4,
        max_grad_norm=10.0,
        gamma=0.99,
        td_lambda=0.95,
        eps_start=1.0,
        eps_end=0.2,
        exploration_fraction=0.2,
    )
    keys = jax.random.split(jax.random.key(args.seed), args.seeds)
    _, (_, returns) = jax.jit(jax.vmap(algo.train))(keys)
    returns = np.asarray(jax.block_until_ready(returns))  # [seeds, evaluations, episodes]
    means = returns.mean(axis=(0, 2))
    evals = [(i * args.eval_every, float(m)) for i, m in enumerate(means)]
    print(json.dumps({"total_s": time.perf_counter() - START, "evals": evals, "rejax": rejax.__name__}), flush=True)


if __name__ == "__main__":
    main()
