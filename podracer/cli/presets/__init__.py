"""Per-task settings kept as data: ``--preset NAME`` in both command lines.

Each ``*.toml`` file in this package holds the presets of one suite; each table is one preset (format: the
comment at the top of ``podracer.toml``). :func:`expand` turns ``--preset NAME`` into the preset's flags,
placed before the command line's own, so that a flag given on the command line wins.
"""

from __future__ import annotations

import functools
import importlib.resources
import tomllib
from collections.abc import Sequence
from typing import Any, NamedTuple

MODES = ("anakin", "sebulba")


class Preset(NamedTuple):
    """One preset: the settings of one task, and what they reach."""

    name: str  # what --preset takes
    suite: str  # the file it comes from (without .toml)
    mode: str  # "anakin" or "sebulba": the command that takes it
    note: str  # what it reaches, measured where
    flags: dict[str, Any]  # flag name (without the dashes) -> value

    @property
    def env(self) -> str | None:
        return self.flags.get("env")

    @property
    def agent(self) -> str | None:
        return self.flags.get("agent")

    def argv(self, *, agent: bool = True, repeat: frozenset[str] = frozenset()) -> list[str]:
        """The preset as command-line tokens (``agent=False``: without its ``--agent``; ``repeat``: the flags given
        once per value, ``--sweep A --sweep B``, rather than ``--hidden-sizes 64 64``)."""
        tokens = []
        for name, value in self.flags.items():
            if name == "agent" and not agent:
                continue
            if value is True:
                tokens.append(f"--{name}")
            elif value is False:
                tokens.append(f"--no-{name}")
            elif isinstance(value, list) and name in repeat:
                tokens += [token for v in value for token in (f"--{name}", str(v))]
            elif isinstance(value, list):
                tokens += [f"--{name}", *(str(v) for v in value)]
            else:
                tokens += [f"--{name}", str(value)]
        return tokens


def _parse(suite: str, text: str) -> dict[str, Preset]:
    presets = {}
    for name, table in tomllib.loads(text).items():
        if not isinstance(table, dict):
            raise ValueError(f"{suite}.toml: {name!r} is not a table of mode, note and flags.")
        unknown = set(table) - {"mode", "note", "flags"}
        if "mode" in table and table["mode"] not in MODES:
            raise ValueError(
                f"preset {name!r} in {suite}.toml: mode {table['mode']!r} is not one of the modes ({', '.join(MODES)})."
            )
        if unknown or table.get("mode") not in MODES or not isinstance(table.get("flags"), dict):
            raise ValueError(
                f"preset {name!r} in {suite}.toml: needs mode ({' or '.join(MODES)}), note and a flags "
                f"table, and nothing else (found {sorted(table)})."
            )
        presets[name] = Preset(name, suite, table["mode"], str(table.get("note", "")), dict(table["flags"]))
    return presets


@functools.cache
def load() -> dict[str, Preset]:
    """Every preset by name, from every ``*.toml`` file of this package; a name used twice is an error."""
    presets: dict[str, Preset] = {}
    for entry in sorted(importlib.resources.files(__package__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            for name, preset in _parse(entry.name.removesuffix(".toml"), entry.read_text()).items():
                if name in presets:
                    raise ValueError(f"preset {name!r} is in both {presets[name].suite}.toml and {preset.suite}.toml.")
                presets[name] = preset
    return presets


def names(mode: str | None = None) -> list[str]:
    """The presets' names (those of ``mode`` only, when given), sorted."""
    return sorted(name for name, preset in load().items() if mode is None or preset.mode == mode)


def from_file(path: str) -> Preset:
    """The preset that the TOML file ``path`` holds (one table, in the format of this package's files: a run
    directory's ``run.toml`` is one); its name is ``path``. One-line ``ValueError`` s naming ``--preset``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as error:
        raise ValueError(f"--preset {path}: cannot be read ({error.strerror or error}).") from None
    except UnicodeDecodeError as error:
        raise ValueError(
            f"--preset {path}: not a UTF-8 text file (byte {error.object[error.start]:#04x} at position "
            f"{error.start}); a preset file is TOML."
        ) from None
    try:
        found = _parse(path.removesuffix(".toml"), text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"--preset {path}: not TOML ({error}).") from None
    except ValueError as error:
        raise ValueError(f"--preset {path}: {error}") from None
    if len(found) != 1:
        named = ", ".join(found) or "none"
        raise ValueError(f"--preset {path}: holds {len(found)} presets ({named}); give a file of one.")
    return next(iter(found.values()))._replace(name=path)


def is_file(name: str) -> bool:
    """Whether ``--preset`` names a file (a path ending in ``.toml``) rather than one of this package's presets."""
    return name.endswith(".toml")


def get(name: str, mode: str | None = None) -> Preset:
    """The preset ``name`` (one of this package's, or a file: :func:`from_file`); a one-line ``ValueError`` naming
    ``--preset`` for an unknown one or one of another mode."""
    if is_file(name):
        preset = from_file(name)
        if mode is not None and preset.mode != mode:
            raise ValueError(f"--preset {name} is for podracer {preset.mode}, not {mode}.")
        return preset
    presets = load()
    if name not in presets:
        raise ValueError(
            f"--preset: unknown preset {name!r}; choose one of {', '.join(names(mode))} (--preset list describes them)."
        )
    preset = presets[name]
    if mode is not None and preset.mode != mode:
        raise ValueError(
            f"--preset {name} is for podracer {preset.mode}, not {mode}; this command's presets: "
            f"{', '.join(names(mode))}."
        )
    return preset


def for_env(env: str, mode: str | None = None) -> list[str]:
    """The presets that train ``env`` (in ``mode``, when given)."""
    return [name for name in names(mode) if load()[name].env == env]


def listing(mode: str | None = None) -> str:
    """``--preset list``: each preset with its environment, agent and note."""
    lines = []
    for name in names(mode):
        preset = load()[name]
        lines.append(f"{name:18s} {preset.mode:8s} {preset.env or '':26s} {preset.agent or '':7s} {preset.note}")
    return "\n".join(lines)


def take(
    argv: Sequence[str], mode: str, repeat: frozenset[str] = frozenset()
) -> tuple[list[str], Preset | None, list[str]]:
    """``argv`` split into the preset that ``--preset NAME`` (or ``--preset=NAME``, or ``--preset FILE.toml``)
    names (None without one), its flags (the parser's defaults: the command line's own flags win; ``repeat``: the
    flags given once per value) and the rest of ``argv``, ``--preset`` taken out."""
    argv = list(argv)
    found = [i for i, token in enumerate(argv) if token == "--preset" or token.startswith("--preset=")]
    if not found:
        return [], None, argv
    if len(found) > 1:
        raise ValueError("--preset takes one preset; give it once.")
    i = found[0]
    if argv[i] == "--preset":
        if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
            raise ValueError(f"--preset needs a value: {', '.join(names(mode))} (--preset list describes them).")
        name, rest = argv[i + 1], argv[:i] + argv[i + 2 :]
    else:
        name, rest = argv[i].split("=", 1)[1], argv[:i] + argv[i + 1 :]
    preset = get(name, mode)
    return preset.argv(repeat=repeat), preset, rest


def blame(preset: Preset, message: str) -> str:
    """A usage error in the flags that ``preset`` gives names the preset and its file (a misspelt key in its TOML)."""
    if message.startswith("unrecognized arguments: "):
        flag = message.removeprefix("unrecognized arguments: ").split()[0]
        return (
            f"--preset {preset.name}: {preset.suite}.toml gives {flag}, which is not a flag of this command (a "
            "misspelt key? flag names as on the command line, without the dashes)."
        )
    return f"--preset {preset.name}: {preset.suite}.toml: {message}"


__all__ = ["MODES", "Preset", "blame", "take", "for_env", "from_file", "get", "is_file", "listing", "load", "names"]
