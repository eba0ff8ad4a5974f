"""Solve Catch in Anakin mode on every device of this machine (or of every host of a pod slice).

The same command as ``podracer anakin``, with the same flags:

    python examples/anakin_catch.py                 # defaults solve Catch
    python examples/anakin_catch.py --agent ppo --log-dir runs/catch
    python examples/anakin_catch.py --num-seeds 4     # seeds 0-3 in one compiled program
    python examples/anakin_catch.py --coordinator 127.0.0.1:9876 --num-processes 2 --process-id 0
"""

from __future__ import annotations

import sys

from podracer.cli import command as cli


def main(argv=None) -> int:
    return cli.anakin(argv, prog="examples/anakin_catch.py", name="anakin_catch.py")


if __name__ == "__main__":
    sys.exit(main())
