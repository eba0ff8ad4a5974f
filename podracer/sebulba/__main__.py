"""``python -m podracer.sebulba --env Pong``: train with envpool actors and a learner mapped over devices
(``podracer sebulba``, with the same flags)."""

from __future__ import annotations

import sys

from podracer.cli import command as cli


def main(argv=None) -> int:
    return cli.sebulba(argv, prog="python -m podracer.sebulba", name="podracer sebulba")


if __name__ == "__main__":
    sys.exit(main())
