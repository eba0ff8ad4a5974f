"""The cli layer: the only one that reads argv. The ``podracer`` command and its subcommands
(:mod:`podracer.cli.command`; ``python -m podracer.cli``), the parser, the flags, the help pages, the presets and
``--env list``.
"""
