"""The config tree's fields as flags: each field's spelling, kind, default and help, read from the dataclasses (the
parser, :mod:`podracer.cli.parser`, hands them to the standard library's ``argparse``; a run's record writes them
back as a preset).

Each field is a flag named after it (``num_envs_per_device`` is ``--num-envs-per-device``), whose type its annotation
gives (``int``, ``float``, ``str``, ``bool`` as ``--x``/``--no-x``, a ``Literal`` as its choices, ``X | None`` taking
``None``, ``tuple[X, ...]`` taking several values) and whose help is the comment beside or above it in the config's
source. A field whose value is a dataclass (the chosen agent's config, its optimizer's) gives its own fields as flags
of the same command line, without a prefix. :class:`Flag` says what the name and type do not (``--import`` for the
field ``imports``, a metavar, a flag repeated rather than given several values).

The help page is written from the same :class:`Option` list (:mod:`podracer.cli.helptext`), never read back from a
rendered page.
"""

from __future__ import annotations

import argparse  # its documented ArgumentTypeError: what a flag's converter raises for a bad token
import ast
import dataclasses
import functools
import inspect
import io
import textwrap
import tokenize
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

from podracer.run.config import GROUPS, Flag, declared, unwrap


@dataclasses.dataclass(frozen=True)
class Option:
    """One flag: where its value goes in the config tree, how it is read and how ``--help`` shows it."""

    path: tuple[str, ...]  # the field's path from the root config: ("agent", "optimizer", "learning_rate")
    flag: str  # "--learning-rate"
    kind: Literal["switch", "value", "several", "repeat"]
    convert: Callable[[str], Any] | None  # a token to a value (None for a switch)
    metavar: str
    help: str
    default: Any  # dataclasses.MISSING: required
    pair: bool = True
    choices: tuple[str, ...] | None = None
    bare: str | None = None  # the value of the flag alone (``Flag.bare``), and of --no-x (``Flag.off``)
    off: str | None = None

    @property
    def dest(self) -> str:
        return ".".join(self.path)

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    @property
    def heading(self) -> str:
        """The flag as the help page's entry starts: ``--seed INT``, ``--compile-cache, --no-compile-cache``."""
        if self.kind == "switch":
            return f"{self.flag}, --no-{self.flag[2:]}" if self.pair else self.flag
        if self.kind == "several":
            return f"{self.flag} {self.metavar} ..."
        return f"{self.flag} {self.metavar}"

    @property
    def described(self) -> str:
        """The help with the default, as the help page shows it."""
        if self.required:
            return f"{self.help} (required)".strip()
        if self.kind == "repeat":
            return f"{self.help} (repeatable)".strip()
        if self.default is None or self.default == () or (self.kind == "switch" and not self.pair):
            return self.help
        shown = " ".join(map(str, self.default)) if isinstance(self.default, tuple) else str(self.default)
        return f"{self.help} (default: {shown})".strip()


def _spelled(field: str, said: Flag) -> str:
    """A field's flag: ``--`` and its name with dashes, or the name its :class:`Flag` gives."""
    return "--" + (said.name or field.replace("_", "-"))


@functools.cache
def comments(cls: type) -> dict[str, str]:
    """Each field's comment in ``cls``'s source (and its bases'): the comment at the end of its line (or lines), else
    the comment lines right above it, joined into one line; fields without one are left out. Read from the source by
    hand because the comments are the config tree's documentation and argparse takes help only as strings."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):  # made at run time, or its source is not installed
            continue
        notes: dict[int, str] = {}
        code_lines: set[int] = set()
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                notes[token.start[0]] = token.string.lstrip("#").strip()
            elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                code_lines.add(token.start[0])
        body = ast.parse(source).body[0].body
        for node in body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            inside = [notes[line] for line in range(node.lineno, node.end_lineno + 1) if line in notes]
            if inside:  # at the end of its line (of one of its lines, where a formatter split it)
                found[node.target.id] = " ".join(inside)
                continue
            above, line = [], node.lineno - 1
            while line in notes and line not in code_lines:
                above.insert(0, notes[line])
                line -= 1
            if above:
                found[node.target.id] = " ".join(above)
    return found


def _scalar(kind: type, name: str) -> Callable[[str], Any]:
    def convert(token: str):
        try:
            return kind(token)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = name
    return convert


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def convert(token: str) -> str:
        if token not in choices:
            raise argparse.ArgumentTypeError(f"invalid choice: {token!r} (choose from {', '.join(choices)}).")
        return token

    return convert


def _or_none(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    return lambda token: None if token == "None" else convert(token)


def _reader(hint) -> tuple[Callable[[str], Any], str, tuple[str, ...] | None]:
    """How a token becomes a value of the (non-optional, non-tuple) type ``hint``: converter, metavar, choices."""
    if typing.get_origin(hint) is Literal:
        choices = tuple(str(c) for c in typing.get_args(hint))
        return _choice(choices), "{" + ",".join(choices) + "}", choices
    if hint in (int, float, str):
        return _scalar(hint, hint.__name__), hint.__name__.upper(), None
    raise ValueError(
        f"a config field of type {getattr(hint, '__name__', hint)} cannot be a flag (flags take int, float, str, "
        "bool, a Literal, X | None or tuple[X, ...])"
    )


def starting(cls: type, instance=None, **values) -> types.SimpleNamespace:
    """The values a command line starts from: ``values``, then ``instance``'s (a config of ``cls``), else the
    fields' defaults (``dataclasses.MISSING`` where a field has none: its flag is required)."""
    out = {}
    for field in dataclasses.fields(cls):
        if field.name in values:
            out[field.name] = values[field.name]
        elif instance is not None:
            out[field.name] = getattr(instance, field.name)
        elif field.default is not dataclasses.MISSING:
            out[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            out[field.name] = field.default_factory()
        else:
            out[field.name] = dataclasses.MISSING
    return types.SimpleNamespace(**out)


def options(cls: type, instance=None, path: tuple[str, ...] = ()) -> list[Option]:
    """The flags of the config class ``cls``, with the values of ``instance`` (one of ``cls``, a :func:`starting`,
    or None: the fields' defaults) as their defaults; a field holding a dataclass gives its own fields' flags after
    the others' (those its field's ``metadata["flags"]`` names, where it names some). A field of another type is a
    one-line ``ValueError`` naming it."""
    fields = declared(cls)
    notes = comments(cls)
    own, nested = [], []
    for field in dataclasses.fields(cls):
        if instance is not None:
            value = getattr(instance, field.name, dataclasses.MISSING)
        elif field.default is not dataclasses.MISSING:
            value = field.default
        elif field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
        else:
            value = dataclasses.MISSING
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            inner = options(type(value), value, (*path, field.name))
            shown = field.metadata.get(
                "flags"
            )  # the settings an agent lets change (podracer.core.networks.network_field)
            nested += [option for option in inner if shown is None or option.path[-1] in shown]
            continue
        hint, said = fields[field.name]
        optional = False
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            members = [m for m in typing.get_args(hint) if m is not type(None)]
            optional, hint = len(members) < len(typing.get_args(hint)), members[0]
            hint, more = unwrap(hint)
            said = said if said != Flag() else more
        help_text = said.help if said.help is not None else notes.get(field.name, "")
        name = _spelled(field.name, said)
        if hint is bool:
            own.append(Option((*path, field.name), name, "switch", None, "", help_text, value, pair=said.pair))
            continue
        try:
            if typing.get_origin(hint) is tuple:
                convert, metavar, choices = _reader(typing.get_args(hint)[0])
                kind = "repeat" if said.repeat else "several"
            else:
                convert, metavar, choices = _reader(hint)
                kind = "value"
        except ValueError as error:
            raise ValueError(f"{cls.__name__}.{field.name}: {error}.") from None
        if optional:
            convert = _or_none(convert)
        own.append(
            Option(
                (*path, field.name),
                name,
                kind,
                convert,
                said.metavar or metavar,
                help_text,
                value,
                choices=choices,
                bare=said.bare,
                off=said.off,
            )
        )
    return own + nested


def groups(cls: type) -> list[tuple[str, list[str]]]:
    """The help page's groups of the run config class ``cls`` (:data:`podracer.run.config.GROUPS`, in order), each
    with the flags (without their dashes) its fields' :attr:`Flag.group` puts there: ``cls``'s own fields first (the
    mode's), then its bases', each in the order they are declared. A field without a group is a ``ValueError``
    naming it: every flag of a run has a place on its page."""
    inherited = {f.name for base in cls.__mro__[1:] if dataclasses.is_dataclass(base) for f in dataclasses.fields(base)}
    fields = sorted(declared(cls).items(), key=lambda item: item[0] in inherited)  # stable: declaration order kept
    out: dict[str, list[str]] = {title: [] for title in GROUPS}
    for name, (_, said) in fields:
        if said.group not in out:
            raise ValueError(f"{cls.__name__}.{name}: a run's field needs Flag(group=...), one of {GROUPS}.")
        out[said.group].append(_spelled(name, said).removeprefix("--"))
    return list(out.items())


def repeated(cls: type) -> frozenset[str]:
    """The flags of ``cls``'s own fields (without their dashes) given once per value (``--sweep A --sweep B``),
    read from the annotations alone: no default is made (an agent's config is not imported for it)."""
    fields = declared(cls)
    out = set()
    for field in dataclasses.fields(cls):
        hint, said = fields[field.name]
        if said.repeat:
            out.add(_spelled(field.name, said).removeprefix("--"))
    return frozenset(out)


def without_value(cls: type) -> set[str]:
    """The flags of ``cls``'s own fields that may stand without a value: switches (``--x``, ``--no-x``) and flags
    with a :attr:`Flag.bare` value (``--resume``), so that a token after them is not read as their value."""
    fields = declared(cls)
    out = set()
    for field in dataclasses.fields(cls):
        hint, said = fields[field.name]
        if hint is bool or said.bare is not None:
            name = _spelled(field.name, said)
            out |= {name, "--no-" + name[2:]}
    return out


def build(cls: type, instance, given: dict[str, Any], path: tuple[str, ...] = ()):
    """A ``cls`` from ``instance``'s values (None: the fields' defaults) with ``given`` (dest -> value) in place;
    nested dataclasses are rebuilt where a flag of theirs was given. Each config's ``__post_init__`` checks it."""
    values = {}
    for field in dataclasses.fields(cls):
        dest = ".".join((*path, field.name))
        current = getattr(instance, field.name) if instance is not None else dataclasses.MISSING
        if dest in given:
            value = given[dest]
            if isinstance(value, list):  # several values, or a flag repeated; "None" alone: none
                value = None if value == [None] else tuple(value)
            values[field.name] = value
        elif dataclasses.is_dataclass(current) and not isinstance(current, type):
            if any(key.startswith(dest + ".") for key in given):
                values[field.name] = build(type(current), current, given, (*path, field.name))
            else:
                values[field.name] = current
        elif current is not dataclasses.MISSING:
            values[field.name] = current
    return cls(**values)


__all__ = ["Flag", "Option", "build", "comments", "groups", "options", "repeated", "starting", "without_value"]
