"""The docs' help blocks, generated: every ``<!-- help: podracer COMMAND ... -->`` line in ``docs/*.md`` is followed
by a ``text`` code block holding that command's ``--help`` output, 100 columns wide (``<!-- help: config tree -->``:
the config tree's nodes and fields).

``python tools/generate_help.py`` rewrites the blocks; ``--check`` exits 1 naming the blocks that differ
(``tests/test_docs_help.py`` runs the check, so that a usage block cannot drift from the real ``--help``).
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import sys

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
MARKER = re.compile(r"^<!-- help: (podracer [^>]*?|config tree) -->\n```text\n(.*?)```\n", re.M | re.S)
WIDTH = "100"


def config_tree() -> str:
    """The config tree as the API page shows it: each node's own fields, the agents' configs, the optimizer's."""
    import dataclasses
    import textwrap

    from podracer.core import agents
    from podracer.run import config
    from podracer.run.evaluate import EvaluateConfig
    from podracer.core.optim import OptimizerConfig

    base = {f.name for f in dataclasses.fields(config.RunConfig)}

    def node(label: str, cls, skip=frozenset()) -> list[str]:
        names = ", ".join(f.name for f in dataclasses.fields(cls) if f.name not in skip)
        lines = textwrap.wrap(names, 100 - 23, break_on_hyphens=False)
        return [f"{label:23s}{lines[0]}", *(" " * 23 + line for line in lines[1:])]

    classes = agents.config_classes(built_in=True)
    lines = node("RunConfig", config.RunConfig)
    lines += node("├── AnakinConfig", config.AnakinConfig, base) + node("└── SebulbaConfig", config.SebulbaConfig, base)
    names = textwrap.wrap(" | ".join(cls.__name__ for cls in classes.values()), 100 - 23)
    lines += [f"{'agent (one of):':23s}{names[0]}", *(" " * 23 + line for line in names[1:])]
    lines += node("  optimizer:", OptimizerConfig)
    lines += node("EvaluateConfig", EvaluateConfig)
    return "\n".join(lines) + "\n"


def render(command: str) -> str:
    """``command``'s help page (``podracer anakin --help``), as a user at a 100-column terminal sees it; ``config
    tree``: :func:`config_tree`."""
    if command == "config tree":
        return config_tree()
    from podracer.cli import command as cli

    os.environ["COLUMNS"] = WIDTH
    page = io.StringIO()
    with contextlib.redirect_stdout(page):
        try:
            cli.main(command.split()[1:])
        except SystemExit:
            pass
    return page.getvalue()


def blocks(text: str) -> list[tuple[str, str]]:
    """The (command, block text) pairs of one page."""
    return [(m.group(1), m.group(2)) for m in MARKER.finditer(text)]


def update(path: pathlib.Path, write: bool) -> list[str]:
    """The commands whose block in ``path`` differs from their help (rewritten when ``write``)."""
    text = path.read_text()
    stale = [command for command, block in blocks(text) if block != render(command)]
    if write and stale:
        path.write_text(MARKER.sub(lambda m: f"<!-- help: {m.group(1)} -->\n```text\n{render(m.group(1))}```\n", text))
    return stale


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = [f"{path.name}: {command}" for path in sorted(DOCS.glob("*.md")) for command in update(path, not check)]
    for line in stale:
        print(("differs from --help: " if check else "rewrote: ") + line)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
