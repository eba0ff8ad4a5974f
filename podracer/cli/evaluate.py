"""``podracer evaluate`` (``python -m podracer.cli.evaluate``): a checkpoint played from the command line
(:mod:`podracer.run.evaluate` plays it)."""

from __future__ import annotations

import sys

import numpy as np

from podracer.run import evaluate as evaluate_lib


DESCRIPTION = (
    "Play a trained agent from a checkpoint directory: one episode per environment, all at once, each "
    "episode's return printed, the first episode optionally written to a GIF."
)


def main(argv=None, *, prog: str = "python -m podracer.cli.evaluate", name: str = "podracer.cli.evaluate") -> int:
    """``podracer evaluate`` (``python -m podracer.cli.evaluate``): the exit status."""
    from podracer.cli import parser
    from podracer.run import lifetime

    args = parser.parse(evaluate_lib.EvaluateConfig, argv, prog=prog, description=DESCRIPTION)
    lifetime.quiet_dependencies()
    lifetime.exit_on_signals(name)
    try:
        if args.gif:
            evaluate_lib.check_output_file(args.gif, "--gif")
            if unavailable := evaluate_lib.gif_unavailable():
                raise ValueError(unavailable)
        returns, frames = evaluate_lib.play(
            args.checkpoint,
            args.episodes,
            seed=args.seed,
            greedy=args.greedy,
            record=bool(args.gif),
            opponent=("baseline", args.baseline_dir) if args.opponent == "baseline" else args.opponent,
            search=evaluate_lib.search_settings(args.num_simulations, args.gumbel_scale),
        )
    except (ValueError, FileNotFoundError) as error:
        print(f"{name}: error: {error}", file=sys.stderr)
        return 2
    if kept := evaluate_lib.kept_lane(args.checkpoint):
        print(f"{name}: {kept}")
    for i, value in enumerate(returns):
        print(f"episode {i}: return {value:.1f}")
    from podracer.run import checkpoint

    step = checkpoint.restored_step(args.checkpoint)  # the checkpoint played: the newest intact one
    print(
        f"mean return {np.nanmean(returns):.2f} over {len(returns)} episodes of the {policy_said(args.greedy)} "
        f"(checkpoint step_{step}){_run_played(checkpoint.read_metadata(args.checkpoint, step), args.greedy)}"
    )
    if args.gif:
        evaluate_lib.write_gif(frames, args.gif)
        print(f"wrote {args.gif} ({len(frames)} frames)")
    return 0


def policy_said(greedy: bool) -> str:
    """The policy an evaluation plays, in the words of the run's closing line (``--eval-policy``)."""
    return "greedy policy" if greedy else "behaviour policy (sampled)"


def _run_played(metadata: dict, greedy: bool) -> str:
    """``; its run's evaluations played the greedy policy: --greedy plays that`` where the checkpoint's run closed on
    another policy than this one, else nothing."""
    closed_on = metadata.get("eval_policy")
    if closed_on is None or (closed_on == "greedy") == greedy:
        return ""
    flag = "--greedy plays that" if closed_on == "greedy" else "this command without --greedy plays that"
    return f"; its run's evaluations played the {policy_said(closed_on == 'greedy')}: {flag}"


if __name__ == "__main__":
    sys.exit(main())
