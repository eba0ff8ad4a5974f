"""What ``--env list`` prints: one environment per line (names laid out in columns), grouped by suite, each suite with
its one-line description; ``--env list:TEXT`` keeps the suite named TEXT, or the names that contain TEXT.

Anakin lists JAX environments (built-in, registered, each suite's ``SUITE:NAME``); Sebulba lists what it steps on the
host: envpool's task ids by envpool's own suites, the short names, ``gymnasium:ID``, and the JAX environments it can
step on the host (``jax:NAME``, ``SUITE:NAME``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable

# One line for each suite of JAX environments podracer has an adapter for (a registered suite: its module's docstring).
DESCRIPTIONS = {
    "brax": "rigid-body physics (ant, hopper, humanoid, ...): continuous actions",
    "bsuite": "bsuite's bandit, catch, catch_scale and discounting_chain by id, ported to JAX",
    "craftax": "an open-ended survival game in the spirit of Crafter (pixels or symbols)",
    "gymnax": "classic control, bsuite and MinAtar",
    "jumanji": "combinatorial and grid tasks (Snake, TSP, RubiksCube, ...)",
    "navix": "MiniGrid's grid worlds (NAVIX)",
    "pgx": "board games (Go, chess, shogi, connect four, ...) against a built-in opponent, and MinAtar",
    "playground": "MuJoCo Playground: MJX locomotion and manipulation (dm_control suite, robots)",
    "xminigrid": "XLand-MiniGrid: meta-RL grid worlds",
}


def first_line(text: str | None) -> str:
    """The first sentence of a docstring, on one line ('' without one)."""
    words = (text or "").strip().split("\n\n")[0].replace("``", "").split()
    return " ".join(words).split(". ")[0].split("; ")[0].rstrip(".")


def columns(names: Iterable[str], indent: str = "  ", width: int | None = None) -> list[str]:
    """``names`` in columns that fit the terminal (read down, then across), one name per cell."""
    names = list(names)
    if not names:
        return []
    width = width or shutil.get_terminal_size((100, 24)).columns
    cell = max(map(len, names)) + 2
    across = max(1, (width - len(indent)) // cell)
    rows = -(-len(names) // across)
    return [(indent + "".join(name.ljust(cell) for name in names[row::rows])).rstrip() for row in range(rows)]


def _section(title: str, names: list[str], pattern: str) -> list[str]:
    """A suite's title line and its names in columns; with a ``pattern`` that is not the suite's name, the names that
    contain it ([] when none does)."""
    if pattern and pattern != title.split(":")[0].lower():
        names = [name for name in names if pattern in name.lower()]
        if not names:
            return []
    return [title, *columns(names)]


def _jax_sections(pattern: str, prefix: str = "") -> list[list[str]]:
    from podracer.core import envs

    own = [name for name in envs.names() if not pattern or pattern in ("podracer", "jax") or pattern in name]
    sections = []
    if own:
        about = {name: first_line(getattr(envs._JAX_ENVS.get(name), "__doc__", "")) for name in own}
        width = max(len(prefix + name) for name in own) + 2
        title = "podracer: JAX environments of its own and those registered (podracer.envs.register)"
        sections.append([title, *(f"  {(prefix + name).ljust(width)}{about[name]}".rstrip() for name in own)])
    for suite in sorted(envs.SUITES):
        try:
            module = envs._suite(suite)
            names = [f"{suite}:{name}" for name in module.names()]
            about = DESCRIPTIONS.get(suite) or first_line(module.__doc__) or "a registered suite (envs.register_suite)"
            title = f"{suite}: {about}"
        except ValueError as error:
            names, title = [], f"{suite}: not installed ({str(error).split(': ', 1)[-1]})"
        sections.append(_section(title, names, pattern) if names else ([title] if pattern in ("", suite) else []))
    return [section for section in sections if section]


def _host_sections(pattern: str) -> list[list[str]]:
    from podracer.run.hostenvs import envpool as envpool_lib

    by_suite: dict[str, list[str]] = {}
    try:
        tasks, missing = envpool_lib._all_task_ids(), False
    except ValueError:  # not installed
        tasks, missing = (), True
    for task in tasks:
        by_suite.setdefault(envpool_lib.suite_of(task), []).append(task)
    sections = [_section(f"envpool {suite}:", tasks, pattern) for suite, tasks in by_suite.items()]
    sections = [section for section in sections if section]
    if missing:  # whatever the pattern: the tasks it may have meant are not here
        from podracer.core import install

        sections.append([f"envpool's tasks: not installed ({install.command('envpool')})"])
    if sections and not missing:
        short = ", ".join(f"{name} = {task}" for name, task in envpool_lib.SHORT_NAMES.items())
        sections.insert(0, [f"envpool {envpool_lib._version()} (--env TASK_ID; short names: {short}):"])
    if pattern in ("", "gymnasium"):
        sections.append(["gymnasium: --env gymnasium:ID steps any environment registered with gymnasium"])
    jax = _jax_sections(pattern, "jax:")
    if jax:
        sections.append(["", "JAX environments, stepped on the host (--env jax:NAME or SUITE:NAME):"])
    return sections + jax


def list_if_asked(env_values: list[str], mode: str) -> None:
    """``--env list`` or ``--env list:TEXT`` among a command line's ``--env`` values: prints the listing and exits 0."""
    listed = [value for value in env_values if value == "list" or value.startswith("list:")]
    if listed:
        print(listing(mode, listed[-1].removeprefix("list").removeprefix(":")))
        raise SystemExit(0)


def listing(mode: str = "anakin", pattern: str = "") -> str:
    """What ``--env list[:PATTERN]`` prints for ``mode`` ("anakin" or "sebulba"); a one-line note when nothing
    matches."""
    pattern = pattern.lower()
    sections = _jax_sections(pattern) if mode == "anakin" else _host_sections(pattern)
    lines = [line for section in sections for line in section]
    if not lines:
        return f"no environment matches {pattern!r} (--env list shows them all)"
    return "\n".join([*lines, "", "--env list:TEXT shows one suite (list:gymnax) or the names that contain TEXT."])


__all__ = ["DESCRIPTIONS", "columns", "first_line", "list_if_asked", "listing"]
