"""The Elo ladder of one AlphaZero self-play run on a pgx board: the run's snapshots (every ``--every`` updates, the
untrained network first) each play random legal moves and every earlier snapshot ``--games`` greedy games, and one
Elo rating per snapshot is fitted to all the games (``podracer.run.ladder``: Bradley-Terry on Elo's scale, random legal
play anchored at 0, one virtual draw per pair that met). Needs no download: the ratings are relative to random play
and to the run itself (pgx's own Elo figures are anchored at its baseline models instead).

Writes the curve (Elo against env steps) as CSV and PNG beside the table with ``--save``.

    python benchmarks/elo_ladder.py                                    # tic-tac-toe
    python benchmarks/elo_ladder.py --game connect_four --updates 400 --every 50 --num-simulations 32 --save
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time

import _report
from alphazero_boards import train_self_play


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="tic_tac_toe", help="a two-player pgx game (tic_tac_toe, connect_four, ...)")
    parser.add_argument("--seed", type=int, default=100, help="the run's seed (tuning used 0-4)")
    parser.add_argument("--updates", type=int, default=400)
    parser.add_argument("--every", type=int, default=50, help="updates between snapshots (a host call each)")
    parser.add_argument("--num-envs", type=int, default=32, help="self-play games in parallel")
    parser.add_argument("--rollout-length", type=int, default=16)
    parser.add_argument("--num-simulations", type=int, default=32)
    parser.add_argument("--gumbel-scale", type=float, default=1.0, help="the Gumbel noise of self-play's root")
    parser.add_argument(
        "--rescale-values", action="store_true", help="min-max scale the search's Q-values (mctx's default; off here)"
    )
    parser.add_argument("--games", type=int, default=128, help="games of each match (each player first in half)")
    _report.add_output_flags(parser, "elo_GAME")
    args = parser.parse_args(argv)
    args.seeds, args.updates_per_call, args.random_move_prob = 1, args.every, 0.0  # what train_self_play reads
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    import jax
    import numpy as np

    from podracer.run import ladder

    snapshots = []

    def keep(call, state):
        snapshots.append((call * args.every, jax.tree.map(lambda x: x[0], state.learner.params)))

    agent, state, compile_seconds, train_seconds, env_steps = train_self_play(args, keep)  # call 0: untrained
    steps_per_update = args.num_envs * args.rollout_length

    start = time.perf_counter()
    elo, matches = ladder.ladder(args.game, agent, [p for _, p in snapshots], args.games, jax.random.key(args.seed + 7))
    ladder_seconds = time.perf_counter() - start

    def score(player, opponent):
        m = next(m for m in matches if m["player"] == player and m["opponent"] == opponent)
        return f"{m['wins']} / {m['draws']} / {m['losses']}"

    rows = []
    for k, (updates, _) in enumerate(snapshots, start=1):
        rows.append(
            {
                "snapshot": k,
                "updates": updates,
                "env_steps": updates * steps_per_update,
                "elo": float(elo[k - 1]),
                "vs_random": score(k, 0),
                "vs_previous": score(k, k - 1) if k > 1 else "",
            }
        )
    name = f"elo_{args.game}"
    lines = [
        f"# Elo ladder of one AlphaZero self-play run, pgx:{args.game}",
        "",
        f"Machine: {_report.machine()}. Seed {args.seed}; {args.num_envs} games x {args.rollout_length} moves per "
        f"update, a snapshot every {args.every} updates ({args.every * steps_per_update:,} env steps, moves of both "
        f"sides), {env_steps:,} in all; --num-simulations {args.num_simulations}, --gumbel-scale {args.gumbel_scale}, "
        f"{'' if args.rescale_values else 'no '}--rescale-values; "
        f"compile {compile_seconds:.0f} s, "
        f"training {train_seconds:.0f} s, ladder {ladder_seconds:.0f} s ({len(matches)} matches of {args.games} "
        "greedy games, each player first in half). Elo: random legal moves = 0 (podracer.run.ladder.fit_elo). "
        "Wins / draws / losses of the snapshot.",
        "",
        "| snapshot | env steps | Elo | vs random legal | vs the previous snapshot |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['snapshot']} | {r['env_steps']:,} | {r['elo']:.0f} | {r['vs_random']} | {r['vs_previous']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    data = {
        "game": args.game,
        "machine": _report.machine(),
        "seed": args.seed,
        "num_simulations": args.num_simulations,
        "gumbel_scale": args.gumbel_scale,
        "rescale_values": args.rescale_values,
        "games_per_match": args.games,
        "compile_seconds": compile_seconds,
        "train_seconds": train_seconds,
        "ladder_seconds": ladder_seconds,
        "rows": rows,
        "matches": matches,
        "command": "python benchmarks/elo_ladder.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    out = _report.output_path(args.save, args.out, name)
    _report.save(out, text, data)
    if out is not None:
        _write_curve(rows, out, args.game, np)
    return 0


def _write_curve(rows, out, game, np) -> None:
    """``out``.csv (snapshot, updates, env steps, Elo) and ``out``.png (Elo against env steps)."""
    from pathlib import Path

    out = Path(out)
    with open(out.with_suffix(".csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["snapshot", "updates", "env_steps", "elo"])
        for r in rows:
            writer.writerow([r["snapshot"], r["updates"], r["env_steps"], f"{r['elo']:.1f}"])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["env_steps"] for r in rows], [r["elo"] for r in rows], marker="o")
    ax.axhline(0.0, color="grey", linewidth=0.8, linestyle="--", label="random legal moves")
    ax.set_xlabel("env steps (moves of both sides)")
    ax.set_ylabel("Elo")
    ax.set_title(f"AlphaZero self-play, pgx:{game}")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=100)
    plt.close(fig)
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.png')}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
