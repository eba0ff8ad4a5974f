"""Solve CartPole with DQN and prioritized replay in Anakin mode, then play it greedily.

    python examples/anakin_dqn_cartpole.py
    python examples/anakin_dqn_cartpole.py --seed 5 --log-dir runs/dqn
    # seeds 0-3 in one program, each to the end
    python examples/anakin_dqn_cartpole.py --num-seeds 4 --target-return None

The replay memory, the sum tree and the rate limiter live on each device inside the
compiled update; every device keeps its own shard and gradients average over all of
them. Training returns mix every actor of the Ape-X epsilon ladder (epsilon 0.4 down to
0.0007), so the policy is judged by greedy episodes: every 250 updates on 32 evaluation
episodes (compiled on the device), and training stops once their mean reaches 490
(--target-return; DQN keeps changing a solved policy and may unlearn it, so a run keeps the
policy that solved the task rather than whatever the last update left). The script then
plays 32 fresh greedy episodes.
"""

from __future__ import annotations

import math
import sys

from podracer import config, envs, parallel
from podracer.cli import command as cli
from podracer.run import evaluate, startup
from podracer.agents import DQNConfig

DEFAULTS = config.AnakinConfig(
    env="cartpole",
    num_envs_per_device=16,
    rollout_length=8,
    num_updates=8000,
    updates_per_call=250,
    eval_every=250,
    eval_episodes=32,
    target_return=490.0,
    agent=DQNConfig().replace(
        learning_rate=1e-3,
        max_grad_norm=10.0,
        replay_ratio=4.0,
        batch_size=128,
        min_replay_size=1000,
        replay_capacity=50_000,
    ),
)


def report(cfg, result) -> int:
    """The training summary, then 32 fresh greedy episodes (seeds' last evaluations with --num-seeds)."""
    from podracer import agents

    if not parallel.is_main_process():
        return 0
    final = result.history[-1]
    print(
        f"training return (all actors of the ladder) {final['episode_return']:.1f}; replay ratio "
        f"{final['replay_ratio']:.2f}; "
        f"steady state {result.env_steps_per_second:,.0f} env steps/s; {startup.programs_said()}",
        flush=True,
    )
    if cfg.num_seeds > 1:  # the last evaluation, seed by seed
        per_seed = final.get("eval_return_per_seed", [])
        for i, value in enumerate(per_seed):
            print(f"seed {cfg.seed + i}: greedy return over {cfg.eval_episodes} episodes {value:.1f}")
        return 0 if math.isfinite(final["episode_return"]) else 1
    env = envs.make(cfg.env)
    agent = agents.make(cfg.agent, env.spec())
    params = parallel.unreplicate(result.state.learner.params)
    returns, _ = evaluate.play_jax(env, agent, params, episodes=32, greedy=True, max_steps=1000)
    print(f"greedy return over 32 episodes: mean {returns.mean():.1f}, min {returns.min():.1f}", flush=True)
    return 0 if math.isfinite(returns.mean()) else 1


def main(argv=None) -> int:
    return cli.anakin(
        argv,
        prog="examples/anakin_dqn_cartpole.py",
        name="anakin_dqn_cartpole.py",
        default=DEFAULTS,
        description=__doc__.split("\n\n")[0],
        report=report,
    )


if __name__ == "__main__":
    sys.exit(main())
