"""Help pages in a researcher's order: what to train, how long, seeds and logging first; the run's plumbing later;
the agent's hyper-parameters in a group titled by the agent.

A page is written from the command's flags (:func:`podracer.run.flagspec.options`: each flag's name, metavar, default
and help from the config's comments) in the groups its config's fields name (``Flag(group=...)``,
:func:`podracer.run.flagspec.groups`); the agent's fields, which name none, follow in the agent's group, so a field
added to a config is never left out of ``--help``.
"""

from __future__ import annotations

import re
import shutil
import textwrap

HELP_COLUMN = 26  # where the help text starts; a longer flag puts it on the next line


def entries(found) -> dict[str, tuple[str, str]]:
    """The entries of a page: each flag's name (without dashes) -> (its flags and metavar, its help and default)."""
    return {option.flag[2:]: (option.heading, option.described) for option in found}


def _plain(head: str, text: str, mode: str) -> tuple[str, str]:
    """One entry without words meant for the other mode."""
    other = "Sebulba" if mode == "anakin" else "Anakin"
    text = re.sub(rf"\s*\({other}: [^()]*\)", "", text)
    text = re.sub(rf"\({mode.capitalize()}: ([^()]*)\)", r"(\1)", text)
    return head, text


def _lines(head: str, text: str, width: int) -> list[str]:
    wrapped = textwrap.wrap(text, max(30, width - HELP_COLUMN), break_on_hyphens=False) or [""]
    first = f"  {head}"
    if len(first) + 2 > HELP_COLUMN:
        return [first, *(" " * HELP_COLUMN + w for w in wrapped if w)]
    return [first.ljust(HELP_COLUMN) + wrapped[0], *(" " * HELP_COLUMN + w for w in wrapped[1:])]


def arrange(
    found,
    *,
    groups: list[tuple[str, list[str]]],
    usage: str,
    description: str,
    mode: str,
    agent: str,
    agents: dict[str, str],
    default_agent: str = "",
) -> str:
    """The page of a training command's flags (``found``, with ``agent`` chosen): its ``groups`` (title, flag names)
    in order, then the agent's hyper-parameters, then the agents to choose from (``agents``: name -> one line)."""
    width = min(shutil.get_terminal_size((100, 24)).columns, 110)
    found = entries(found)
    found["agent"] = (
        "--agent NAME",
        f"the agent: {', '.join(agents)} (default: {default_agent or agent}); its hyper-parameters follow, "
        "--agent NAME --help shows another's",
    )
    out = [usage, "", *textwrap.wrap(description, width, break_on_hyphens=False), ""]
    shown = set()
    for title, names in groups:
        present = [name for name in names if name in found]
        if not present:
            continue
        out.append(f"{title}:")
        for name in present:
            out += _lines(*_plain(*found[name], mode), width)
            shown.add(name)
        out.append("")
    rest = [name for name in found if name not in shown]
    if rest:
        out.append(f"{agent} hyper-parameters (--agent {agent}):")
        for name in rest:
            out += _lines(*_plain(*found[name], mode), width)
        out.append("")
    out.append("agents (--agent NAME):")
    for name, text in agents.items():
        out += _lines(name, text, width)
    return "\n".join(out).rstrip() + "\n"


def layout(mode: str | None, prog: str, description: str | None, *, agent: str | None = None, given: bool = False):
    """How a command's ``--help`` page is written from its flags: a training command's
    (``mode`` "anakin" or "sebulba", showing ``agent``'s flags, named on the command line when ``given``) by
    :func:`arrange`, another's by :func:`simple`."""
    import functools

    if mode is None:
        return functools.partial(simple, prog=prog, description=description or "")

    from podracer.core import agents
    from podracer.run import flagspec
    from podracer.run.config import AnakinConfig, SebulbaConfig

    chooses = "impala for Atari games, ppo for every other --env" if mode == "sebulba" else ""
    chosen = f"--agent {agent}" if given else "[--agent NAME]"
    usage = f"usage: {prog} {chosen} [--env NAME] [--preset NAME] [--total-env-steps N] [FLAGS ...]"
    about = (description or "").split(". Choose the agent")[0].rstrip(".") + "."
    return functools.partial(
        arrange,
        groups=flagspec.groups(AnakinConfig if mode == "anakin" else SebulbaConfig),
        usage=usage,
        description=about,
        mode=mode,
        agent=agent,
        agents=agents.descriptions(),
        default_agent=chooses,
    )


def simple(found, *, prog: str, description: str) -> str:
    """A command without an agent (``podracer evaluate``, ``preview``): its usage, its description and its flags in
    one group, in the same plain notation."""
    width = min(shutil.get_terminal_size((100, 24)).columns, 110)
    found = entries(found)
    out = [f"usage: {prog} [FLAGS ...]", "", *textwrap.wrap(description, width, break_on_hyphens=False), "", "flags:"]
    for head, text in found.values():
        out += _lines(*_plain(head, text, "evaluate"), width)
    return "\n".join(out).rstrip() + "\n"


__all__ = ["arrange", "entries", "layout", "simple"]
