"""Gumbel AlphaZero (``--agent alphazero``) trained in self-play on pgx's boards, then played against baselines that
need no download: random legal moves, one-step greedy moves (a win in one where there is one) and, on tic-tac-toe,
perfect play (minimax). Seeds are vmapped in one program; every seed plays ``--games`` greedy games against each
baseline (its seat drawn at random each game). The table gives wins / draws / losses per seed, the env steps (moves
of both sides) and the wall clock, compile apart, and names the machine.

    python benchmarks/alphazero_boards.py                              # tic-tac-toe, 3 seeds
    python benchmarks/alphazero_boards.py --game connect_four --updates 600 --num-simulations 32
    python benchmarks/alphazero_boards.py --save                       # also benchmarks/results/alphazero_GAME.*
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import _report


def train_self_play(args, on_call=None):
    """``(agent, state, compile seconds, training seconds, env steps per seed)``: AlphaZero trained in self-play on
    ``args.game`` for ``args.updates`` updates, ``args.seeds`` seeds from ``args.seed`` vmapped in one program;
    ``on_call(call, state)`` before the first host call (call 0, the initial state) and after every one (the state
    stacked over seeds)."""
    import jax
    import numpy as np

    from podracer.core import agents
    from podracer.core import anakin as core
    from podracer.core.envs.pgx import PgxEnv

    env = PgxEnv(args.game, opponent="self")
    agent = agents.make(
        "alphazero",
        env.spec(),
        num_simulations=args.num_simulations,
        gumbel_scale=args.gumbel_scale,
        random_move_prob=args.random_move_prob,
        rescale_values=args.rescale_values,
    )
    keys = jax.numpy.stack([jax.random.key(args.seed + i) for i in range(args.seeds)])

    def init(key):
        return core.init_state(env, agent, agent.optimizer, key, args.num_envs, rollout_length=args.rollout_length)

    update = core.make_update(env, agent, agent.optimizer, rollout_length=args.rollout_length, axis_names=())

    def call(state):
        return jax.lax.scan(lambda s, _: update(s), state, None, length=args.updates_per_call)

    state = jax.jit(jax.vmap(init))(keys)
    start = time.perf_counter()
    compiled = jax.jit(jax.vmap(call)).lower(state).compile()
    compile_seconds = time.perf_counter() - start
    if on_call is not None:
        on_call(0, state)
    train_seconds = 0.0
    for i in range(args.updates // args.updates_per_call):
        start = time.perf_counter()
        state, metrics = compiled(state)
        jax.block_until_ready(metrics)
        train_seconds += time.perf_counter() - start
        print(f"call {i + 1}: decisive {np.asarray(metrics['episode_return'][:, -1]).round(2)}", file=sys.stderr)
        if on_call is not None:
            on_call(i + 1, state)
    env_steps = args.updates // args.updates_per_call * args.updates_per_call * args.num_envs * args.rollout_length
    return agent, state, compile_seconds, train_seconds, env_steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="tic_tac_toe", help="a two-player pgx game (tic_tac_toe, connect_four, ...)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=100, help="the first seed (tuning used 0-4)")
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--updates-per-call", type=int, default=50)
    parser.add_argument("--num-envs", type=int, default=64, help="self-play games in parallel per seed")
    parser.add_argument("--rollout-length", type=int, default=16)
    parser.add_argument("--num-simulations", type=int, default=64)
    parser.add_argument(
        "--gumbel-scale", type=float, default=1.0, help="the Gumbel noise of self-play's root (the games': training's)"
    )
    parser.add_argument(
        "--random-move-prob", type=float, default=0.0, help="self-play's moves made at random among the legal ones"
    )
    parser.add_argument(
        "--rescale-values", action="store_true", help="min-max scale the search's Q-values (mctx's default; off here)"
    )
    parser.add_argument("--games", type=int, default=256, help="games against each baseline per seed")
    parser.add_argument(
        "--eval-simulations", type=int, default=None, help="the search's simulations in the games (default: training's)"
    )
    parser.add_argument(
        "--eval-gumbel-scale",
        type=float,
        default=None,
        help="the Gumbel noise of the games' search (default: training's; 0: none, a deterministic search)",
    )
    _report.add_output_flags(parser, "alphazero_GAME")
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    import jax
    import numpy as np

    from podracer.core import agents
    from podracer.core.envs.pgx import PgxEnv
    from podracer.run.play import evaluation_keys, make_evaluate

    agent, state, compile_seconds, train_seconds, env_steps = train_self_play(args)
    searches = args.eval_simulations or args.num_simulations
    noise = args.gumbel_scale if args.eval_gumbel_scale is None else args.eval_gumbel_scale
    player = agents.make(  # the same parameters
        "alphazero",
        PgxEnv(args.game).spec(),
        num_simulations=searches,
        gumbel_scale=noise,
        rescale_values=args.rescale_values,
    )
    baselines = ["random", "greedy"] + (["perfect"] if args.game == "tic_tac_toe" else [])
    results = {}
    for name in baselines:
        evaluate = make_evaluate(PgxEnv(args.game, opponent=name), player, args.games)
        keys = evaluation_keys(args.seed, args.seeds)  # each seed its own games, as its run's evaluations
        returns = np.asarray(jax.jit(jax.vmap(evaluate))(state.learner.params, keys))
        results[name] = [[int((r > 0).sum()), int((r == 0).sum()), int((r < 0).sum())] for r in returns]

    lines = [
        f"# Gumbel AlphaZero, self-play, pgx:{args.game}",
        "",
        f"Machine: {_report.machine()}. {args.seeds} seeds ({args.seed}-{args.seed + args.seeds - 1}) vmapped in one "
        f"program; {args.num_envs} games x {args.rollout_length} moves per update, {args.updates} updates = "
        f"{env_steps:,} env steps (moves of both sides) per seed; --gumbel-scale {args.gumbel_scale}, "
        f"--random-move-prob {args.random_move_prob}, {'' if args.rescale_values else 'no '}--rescale-values, "
        f"--num-simulations {args.num_simulations} "
        f"in training, {searches} in the games (their Gumbel scale {noise}); "
        f"compile {compile_seconds:.0f} s, training {train_seconds:.0f} s (all seeds together). "
        f"Greedy play, {args.games} games per seed against each baseline, wins / draws / losses.",
        "",
        "| seed | " + " | ".join(f"vs {name}" for name in baselines) + " |",
        "|---|" + "---|" * len(baselines),
    ]
    for i in range(args.seeds):
        cells = [" / ".join(map(str, results[name][i])) for name in baselines]
        lines.append(f"| {args.seed + i} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    data = {
        "game": args.game,
        "machine": _report.machine(),
        "seeds": list(range(args.seed, args.seed + args.seeds)),
        "env_steps_per_seed": env_steps,
        "num_simulations": args.num_simulations,
        "gumbel_scale": args.gumbel_scale,
        "random_move_prob": args.random_move_prob,
        "rescale_values": args.rescale_values,
        "eval_simulations": searches,
        "eval_gumbel_scale": noise,
        "num_envs": args.num_envs,
        "rollout_length": args.rollout_length,
        "updates": args.updates,
        "compile_seconds": compile_seconds,
        "train_seconds": train_seconds,
        "games_per_baseline": args.games,
        "wins_draws_losses": results,
        "command": "python benchmarks/alphazero_boards.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    _report.save(_report.output_path(args.save, args.out, f"alphazero_{args.game}"), text, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
