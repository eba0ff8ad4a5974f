"""``python -m podracer.cli ARGS``: the ``podracer`` command, for a checkout without the console script."""

import sys

from podracer.cli import command

sys.exit(command.main())
