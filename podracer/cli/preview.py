"""``podracer preview`` (``python -m podracer.cli.preview``): a training run watched from the command line
(:mod:`podracer.run.preview` watches it)."""

from __future__ import annotations

import sys

from podracer.run import preview as preview_lib


DESCRIPTION = (
    "Watch a run while it trains: play one greedy episode with each new checkpoint in --checkpoint-dir, "
    "print its return and rewrite the GIF, until the run has ended."
)


def main(argv=None, *, prog: str = "python -m podracer.cli.preview", name: str = "podracer.cli.preview") -> int:
    """``podracer preview`` (``python -m podracer.cli.preview``): the exit status."""
    from podracer.cli import parser

    from podracer.run import lifetime

    args = parser.parse(preview_lib.PreviewConfig, argv, prog=prog, description=DESCRIPTION)
    lifetime.quiet_dependencies()
    lifetime.exit_on_signals(name)
    try:
        preview_lib.watch(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"{name}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
