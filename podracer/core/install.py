"""How podracer and its extras are installed, said one way wherever a line is printed (``podracer --version``, a
missing package's one-line error, the test skips).

No release of ``podracer-rl`` is on the package index yet (:data:`RELEASED`; the name is reserved for the first
one, and ``podracer`` there is an unrelated project), so a line never sends anyone to the index: from a checkout it
reinstalls the checkout with the extra (``pip install -e '.[gymnax]'``, the path spelled out when the working
directory is elsewhere); from a wheel built out of a checkout it installs the extra's own requirements as the
wheel's metadata lists them (``pip install 'gymnax>=1.0.1'``), which the index has. Importing this module starts
nothing: it reads files and the installed metadata only."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import pathlib
import re
import shlex

DISTRIBUTION = "podracer-rl"  # the distribution's name (pyproject.toml); the import and the command are podracer
RELEASED = False  # True from the commit that publishes the first release of DISTRIBUTION on the package index


@functools.cache
def checkout() -> pathlib.Path | None:
    """The source checkout podracer is imported from (an editable install, or the working tree on ``sys.path``),
    or ``None`` for an installed wheel."""
    root = pathlib.Path(__file__).resolve().parents[2]  # podracer/core/install.py -> the checkout
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if re.search(rf'^name = "{re.escape(DISTRIBUTION)}"', text, re.MULTILINE) else None


def requirements(extra: str) -> list[str]:
    """The requirements an extra adds, as the installed metadata lists them, with the extras it names expanded
    (``suites`` is every suite's); ``[]`` for an extra the metadata does not define."""
    try:
        listed = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    out: list[str] = []
    for line in listed:
        requirement, _, marker = line.partition(";")
        if not re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", marker):
            continue
        requirement = requirement.strip()
        own = re.fullmatch(rf"{re.escape(DISTRIBUTION)}\s*\[([^\]]*)\]", requirement)
        if own:
            out += [r for name in own.group(1).split(",") for r in requirements(name.strip()) if r not in out]
        elif requirement not in out:
            out.append(requirement)
    return out


def command(*extras: str) -> str:
    """The command that installs podracer with ``extras`` from where this copy came from (see the module's
    docstring): ``pip install -e '.[gymnax]'`` in a checkout."""
    spec = f"[{','.join(extras)}]" if extras else ""
    if RELEASED:
        return f"pip install {shlex.quote(DISTRIBUTION + spec)}"
    root = checkout()
    if root is not None:
        here = pathlib.Path(os.getcwd()).resolve() == root
        return f"pip install -e {shlex.quote(('.' if here else str(root)) + spec)}"
    needed = [r for extra in extras for r in requirements(extra)]
    if extras and needed:
        return "pip install " + " ".join(shlex.quote(r) for r in dict.fromkeys(needed))
    return f"pip install {shlex.quote(wheel() + spec)}"


def wheel() -> str:
    """The file name of this version's wheel, as ``pip wheel --no-deps .`` builds it in a checkout."""
    from podracer import __version__

    return f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl"


def origin() -> str:
    """Where this copy of podracer was installed from, and how another is installed, for ``--version``."""
    if RELEASED:
        return f"{DISTRIBUTION} on the package index: {command()}"
    root = checkout()
    if root is not None:
        return f"the checkout {root}; not on the package index before the first release"
    return (
        f"a wheel built from a checkout ({command()}, built there with pip wheel --no-deps .); not on the package "
        "index before the first release"
    )


__all__ = ["DISTRIBUTION", "RELEASED", "checkout", "command", "origin", "requirements", "wheel"]
