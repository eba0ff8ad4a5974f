"""PPO on gymnax CartPole-v1 as two peer libraries run it: one side of ``benchmarks/time_to_target.py``, run by a
Python of the peers' own environment (``pip install rejax "gymnax<1.0"``: rejax 0.1.3 and PureJaxRL's ``ppo.py``
both use gymnax 0.0.x's five-value ``step``; distrax comes with rejax).

- ``rejax``: ``rejax.PPO.create(**config)`` with rejax's own CartPole-v1 PPO settings (``configs/gymnax/
  cartpole.yaml`` of keraJLi/rejax at d751095: 5 envs x 100 steps, 5 epochs x 5 minibatches, lr 7.5e-4, 100k env
  steps, an evaluation every 1,000 steps), ``jax.jit(jax.vmap(algo.train))`` over the seeds' keys, as rejax's
  README runs it.
- ``purejaxrl``: ``make_train(config)`` of PureJaxRL's ``purejaxrl/ppo.py`` (luchris429/purejaxrl at 31756b1),
  imported from a scratch copy of that file and its ``wrappers.py`` (``--purejaxrl DIR``, outside this project),
  with the settings of its ``__main__`` (4 envs x 128 steps, 500k env steps) and ``DEBUG`` off,
  ``jax.jit(jax.vmap(make_train(config)))`` over the seeds' keys, as its notebook runs several seeds.

Both compile the whole run as one program, so nothing is seen before its end: the JSON line printed at the end gives
the seconds from launch to the end, the env steps at which the seeds' mean return first reached ``--target``
(rejax: its evaluations; PureJaxRL: the mean return of the episodes that ended in each update), and the final
mean return.

    /path/to/peers-venv/bin/python benchmarks/ppo_peers.py rejax --seeds 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

LAUNCH = time.monotonic()

REJAX_CARTPOLE = dict(  # keraJLi/rejax configs/gymnax/cartpole.yaml at d7510951, section ppo
    env="CartPole-v1",
    agent_kwargs={"activation": "tanh"},
    num_envs=5,
    num_steps=100,
    num_epochs=5,
    num_minibatches=5,
    learning_rate=0.00075,
    max_grad_norm=0.5,
    total_timesteps=100_000,
    eval_freq=1000,
    gamma=0.99,
    gae_lambda=0.95,
    clip_eps=0.2,
    ent_coef=0.01,
    vf_coef=0.5,
)

PUREJAXRL_CARTPOLE = {  # purejaxrl/ppo.py's __main__ at 31756b19, DEBUG off
    "LR": 2.5e-4,
    "NUM_ENVS": 4,
    "NUM_STEPS": 128,
    "TOTAL_TIMESTEPS": 5e5,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True,
    "DEBUG": False,
}


def first_reaching(steps, means, target: float):
    for step, mean in zip(steps, means):
        if mean >= target:
            return float(step)
    return None


def rejax_run(seeds: int, seed: int, target: float) -> dict:
    import jax
    import numpy as np
    import rejax

    algo = rejax.PPO.create(**REJAX_CARTPOLE)
    keys = jax.random.split(jax.random.PRNGKey(seed), seeds)
    _, (_, returns) = jax.block_until_ready(jax.jit(jax.vmap(algo.train))(keys))
    means = np.asarray(returns).mean(axis=(0, 2))  # [seeds, evaluations, episodes] -> per evaluation
    steps = [i * REJAX_CARTPOLE["eval_freq"] for i in range(len(means))]
    return {"reached_at": first_reaching(steps, means, target), "final": float(means[-1])}


def purejaxrl_run(seeds: int, seed: int, target: float, directory: str) -> dict:
    sys.path.insert(0, directory)
    import jax
    import numpy as np
    from ppo import make_train  # PureJaxRL's purejaxrl/ppo.py, copied to ``directory``

    keys = jax.random.split(jax.random.PRNGKey(seed), seeds)
    out = jax.block_until_ready(jax.jit(jax.vmap(make_train(PUREJAXRL_CARTPOLE)))(keys))
    info = out["metrics"]  # [seeds, updates, steps, envs]
    ended = np.asarray(info["returned_episode"])
    returns = np.asarray(info["returned_episode_returns"])
    per_seed = (returns * ended).sum(axis=(2, 3)) / np.maximum(ended.sum(axis=(2, 3)), 1)  # [seeds, updates]
    any_ended = ended.any(axis=(2, 3)).all(axis=0)
    means = np.where(any_ended, per_seed.mean(axis=0), -np.inf)
    per_update = PUREJAXRL_CARTPOLE["NUM_ENVS"] * PUREJAXRL_CARTPOLE["NUM_STEPS"]
    steps = [(i + 1) * per_update for i in range(len(means))]
    return {"reached_at": first_reaching(steps, means, target), "final": float(means[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", choices=("rejax", "purejaxrl"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--purejaxrl", help="the folder holding PureJaxRL's ppo.py and wrappers.py")
    args = parser.parse_args()
    if args.library == "rejax":
        result = rejax_run(args.seeds, args.seed, args.target)
    else:
        if not args.purejaxrl or not os.path.exists(os.path.join(args.purejaxrl, "ppo.py")):
            parser.error("--purejaxrl DIR: a folder with PureJaxRL's ppo.py and wrappers.py")
        result = purejaxrl_run(args.seeds, args.seed, args.target, args.purejaxrl)
    print(json.dumps({"library": args.library, "total_s": time.monotonic() - LAUNCH, **result}))


if __name__ == "__main__":
    main()
