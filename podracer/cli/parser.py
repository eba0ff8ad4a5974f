"""The parser: a command line (argv) to a config of the tree (:mod:`podracer.run.config`).

``--import MODULE`` is found and imported before anything is parsed, ``--env list`` and ``--preset list`` print and
exit, the preset is taken out of argv, the agent a command line names is chosen (its config's fields are then flags),
and the standard library's ``argparse`` parses the preset's flags, then the command line's own. argparse is used as
documented: :class:`Parser` overrides ``error`` (its documented extension point) so that every bad input is one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import TypeVar

from podracer.cli import catalog, helptext, presets
from podracer.core import agents, pbt
from podracer.run import flagspec
from podracer.run.config import AnakinConfig, SebulbaConfig
from podracer.run.flagspec import Option

T = TypeVar("T")


class UsageError(Exception):
    """A command line that cannot run; :func:`podracer.cli.parser.parse` prints it as one line and exits with status
    2."""


class Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are :class:`UsageError` (one line, said by the caller) instead of a usage
    block and an exit; ``error`` is the method argparse documents for this."""

    def error(self, message: str):
        if message.startswith("argument "):
            message = message.removeprefix("argument ")  # "--seed: invalid literal ..."
        raise UsageError(message)


def parser(found: Sequence[Option], prog: str) -> Parser:
    """A parser of ``found``'s flags; each value parsed lands at its option's ``dest``, flags not given stay unset."""
    out = Parser(prog=prog, add_help=False, allow_abbrev=False, argument_default=argparse.SUPPRESS)
    for option in found:
        if option.kind == "switch":
            out.add_argument(option.flag, dest=option.dest, action="store_true")
            if option.pair:
                out.add_argument("--no-" + option.flag[2:], dest=option.dest, action="store_false")
        elif option.bare is not None:  # --x alone is --x BARE; --no-x is --x OFF
            out.add_argument(option.flag, dest=option.dest, type=option.convert, nargs="?", const=option.bare)
            out.add_argument("--no-" + option.flag[2:], dest=option.dest, action="store_const", const=option.off)
        elif option.kind == "repeat":
            out.add_argument(option.flag, dest=option.dest, action="append", type=option.convert)
        else:
            out.add_argument(
                option.flag,
                dest=option.dest,
                type=option.convert,
                nargs="*" if option.kind == "several" else None,
                required=option.required,
            )
    return out


def import_module(target: str):
    """Imports ``--import``'s ``target``: a module name (``my_package.tasks``) or a Python file
    (``examples/own_env.py``,
    imported as a module named after the file). A module that cannot be found, has a syntax error or raises while
    it is imported (a registration refused, a bug) is a one-line ``ValueError``."""
    import importlib
    import os

    try:
        if target.endswith(".py") or os.sep in target:
            if not os.path.isfile(target):
                raise ValueError(f"--import: no such file {target!r}.")
            name = os.path.splitext(os.path.basename(target))[0]
            if name in sys.modules and getattr(sys.modules[name], "__file__", None) == os.path.abspath(target):
                return sys.modules[name]
            spec = importlib.util.spec_from_file_location(name, target)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            return module
        return importlib.import_module(target)
    except ImportError as error:
        raise ValueError(f"--import: cannot import {target!r}: {error}.") from None
    except ValueError as error:
        if str(error).startswith("--import"):
            raise
        raise ValueError(f"--import {target}: {error}") from None
    except SyntaxError as error:
        raise ValueError(f"--import {target}: a syntax error at line {error.lineno}: {error.msg}.") from None
    except Exception as error:  # noqa: BLE001 - the module's own fault, said in one line with where it happened
        import traceback

        frames = [f for f in traceback.extract_tb(error.__traceback__) if "importlib" not in f.filename]
        where = f" (line {frames[-1].lineno} of {frames[-1].filename})" if frames else ""
        raise ValueError(f"--import {target}: importing it raised {type(error).__name__}: {error}{where}.") from None


def import_requested(argv: Sequence[str]) -> None:
    """Imports every module that ``--import MODULE`` (or ``--import=MODULE``) names, in order, before the command
    line is parsed: the agents they register are then subcommands, their environments known names."""
    for i, token in enumerate(argv):
        if token == "--import":
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                raise UsageError("--import needs a value: a module (package.module) or a path/to/file.py.")
            import_module(argv[i + 1])
        elif token.startswith("--import="):
            import_module(token.split("=", 1)[1])


def take_agent(argv: Sequence[str], without_value: set[str]) -> tuple[str | None, list[str]]:
    """The agent ``argv`` names (``--agent NAME``, ``--agent=NAME``, or ``NAME`` alone where it is not a flag's value:
    after a flag of ``without_value``, a switch, it is not) and ``argv`` without it; None where it names none. The
    parser is made from that agent's config, so it is found before anything is parsed."""
    argv, names = list(argv), agents.names()
    for i, token in enumerate(argv):
        if token == "--agent" or token.startswith("--agent="):
            if token == "--agent":
                if i + 1 >= len(argv):
                    raise UsageError("--agent needs a value: " + ", ".join(names) + ".")
                name, rest = argv[i + 1], argv[:i] + argv[i + 2 :]
            else:
                name, rest = token.split("=", 1)[1], argv[:i] + argv[i + 1 :]
            if name not in names:
                raise UsageError(f"--agent: invalid choice: {name!r} (choose from {', '.join(names)}).")
            return name, rest
    for i, token in enumerate(argv):
        before = argv[i - 1] if i else ""
        if token in names and (not before.startswith("-") or "=" in before or before in without_value):
            return token, argv[:i] + argv[i + 1 :]
    return None, argv


def flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Every value ``argv`` gives ``flag`` (``--flag VALUE`` or ``--flag=VALUE``), in order."""
    return [
        argv[i + 1] if token == flag else token.split("=", 1)[1]
        for i, token in enumerate(argv)
        if (token == flag and i + 1 < len(argv)) or token.startswith(flag + "=")
    ]


def _default_agent(cls, argv: list[str], asks_help: bool) -> str | None:
    """The agent a command line that names none trains, where its config class chooses by ``--env``
    (``command_line_agent``: Sebulba's); None (the field's default) for ``--help`` and other classes."""
    choose = getattr(cls, "command_line_agent", None)
    if choose is None or asks_help:
        return None
    given = flag_values(argv, "--env")
    env = given[-1] if given else next((f.default for f in dataclasses.fields(cls) if f.name == "env"), None)
    return choose(env) if isinstance(env, str) else None


def _mode(cls) -> str | None:
    """The command a config class configures ("anakin" or "sebulba"), for its presets; None for others."""
    return "anakin" if issubclass(cls, AnakinConfig) else "sebulba" if issubclass(cls, SebulbaConfig) else None


def parse(
    default: T | type[T], argv: Sequence[str] | None = None, *, prog: str | None = None, description: str | None = None
) -> T:
    """The config that ``argv`` (default ``sys.argv[1:]``) describes, starting from ``default`` (a config, or a
    config class whose defaults apply). Bad input prints ``PROG: error: MESSAGE`` and exits with status 2.

    In order: ``--import`` (it registers agents and environments the rest may name), ``--env list`` and ``--preset
    list`` (they print and exit), the agent (``--agent NAME``, a preset's, or the default: its config's fields are
    flags), the preset's flags parsed as the defaults of the command line's own, then the command line."""
    prog = prog or sys.argv[0]
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        import_requested(argv)
    except (UsageError, ValueError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    cls = default if isinstance(default, type) else type(default)
    chooses = any(f.name == "agent" for f in dataclasses.fields(cls))
    if chooses:
        description = ((description or "").rstrip(".") + ". " if description else "") + (
            "Choose the agent with --agent NAME (or NAME alone); --agent NAME --help lists its flags."
        )
    mode = _mode(cls)
    if "env" in {f.name for f in dataclasses.fields(cls)}:
        catalog.list_if_asked(flag_values(argv, "--env"), mode or "anakin")  # --env list[:TEXT]: exits 0
    if mode == "sebulba" and any(a.split("=")[0] in ("--population", "--pbt-search") for a in argv):
        print(f"{prog}: error: {pbt.SEBULBA_REFUSAL}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    if mode and "list" in flag_values(argv, "--preset"):
        print(presets.listing(mode))
        raise SystemExit(0)
    preset = None
    try:
        if not mode and flag_values(argv, "--preset"):  # a field of a run config inside another: no preset applies
            raise UsageError(
                "--preset: this command takes a run's flags, not a preset's name; give the preset's flags themselves "
                "(a run with --preset prints them first)."
            )
        preset_argv, preset, argv = presets.take(argv, mode, flagspec.repeated(cls)) if mode else ([], None, argv)
        asks_help = any(a in ("-h", "--help") for a in argv)
        argv = [a for a in argv if a not in ("-h", "--help")]
        instance = None if isinstance(default, type) else default
        given = from_preset = None
        chosen = {}  # the agent, where not the default's
        if chooses:
            given, argv = take_agent(argv, flagspec.without_value(cls))
            from_preset, preset_argv = take_agent(preset_argv, set())
            if given and from_preset and given != from_preset:  # the preset's agent flags would not apply to it
                raise UsageError(
                    f"--preset {preset.name} trains --agent {from_preset}; drop --agent {given} or the preset."
                )
            named = given or from_preset or _default_agent(cls, preset_argv + argv, asks_help)
            if named is not None and not (instance is not None and agents.name_of(instance.agent) == named):
                chosen = {"agent": agents.config_class(named)()}
        start = flagspec.starting(cls, instance, **chosen)
        found = flagspec.options(cls, start)
        if asks_help:
            name = agents.name_of(start.agent) if chooses else None
            page = helptext.layout(mode, prog, description, agent=name, given=bool(given or from_preset))
            sys.stdout.write(page(found))
            sys.stdout.flush()
            raise SystemExit(0)
        argparser = parser(found, prog)
        values = argparse.Namespace()
        if preset is not None:
            try:
                values = argparser.parse_args(preset_argv, values)
            except UsageError as error:
                raise UsageError(presets.blame(preset, str(error))) from None
            values.preset = preset.name
        values = argparser.parse_args(argv, values)
        here = vars(argparser.parse_args(argv, argparse.Namespace()))  # what the command line itself gave
        for first, second in getattr(cls, "ONE_OF", ()):
            if first in here and second in here:
                a, b = (f"--{name.replace('_', '-')}" for name in (first, second))
                raise UsageError(f"{a} and {b} both set the run's length: pass one ({a} wins over a preset's {b}).")
        return flagspec.build(cls, start, vars(values))  # each config's __post_init__ checks it: a ValueError
    except (UsageError, ValueError) as error:
        message = str(error)
        if message.startswith("unrecognized arguments: ") and chooses:
            message += " (each agent's flags: --agent NAME --help)"
        print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


__all__ = ["Parser", "UsageError", "flag_values", "import_module", "import_requested", "parse", "parser", "take_agent"]
