"""Command-line interfaces generated from frozen config dataclasses.

Every field becomes ``--field-name`` with the field's type, default and the ``help``
in its metadata; ``bool`` fields get ``--name/--no-name``; ``tuple[int, ...]`` fields
take several values; ``X | None`` fields accept ``none``.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def _unwrap_optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _scalar_parser(tp, optional: bool):
    def parse(text: str):
        if optional and text.lower() == "none":
            return None
        return tp(text)

    parse.__name__ = tp.__name__
    return parse


def add_arguments(parser: argparse.ArgumentParser, cls: type, defaults: dict[str, Any] | None = None) -> None:
    """Adds one option per field of the dataclass ``cls`` to ``parser``; ``defaults`` replace field defaults."""
    hints = typing.get_type_hints(cls)
    defaults = defaults or {}
    unknown = sorted(set(defaults) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {unknown}.")
    for field in dataclasses.fields(cls):
        tp, optional = _unwrap_optional(hints[field.name])
        flag = "--" + field.name.replace("_", "-").rstrip("-")
        if field.name in defaults:
            default = defaults[field.name]
        else:
            default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        help_text = field.metadata.get("help", "")
        shown = " ".join(map(str, default)) if isinstance(default, tuple) else default
        help_text = f"{help_text} (default: {shown})" if help_text else f"default: {shown}"
        kwargs: dict[str, Any] = {"dest": field.name, "default": default, "help": help_text}
        choices = field.metadata.get("choices")
        if choices:
            kwargs["choices"] = choices
        if tp is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        elif typing.get_origin(tp) is tuple:
            item = typing.get_args(tp)[0]
            parser.add_argument(flag, nargs="+", type=item, metavar=item.__name__.upper(), **kwargs)
        else:
            parser.add_argument(flag, type=_scalar_parser(tp, optional), metavar=tp.__name__.upper(), **kwargs)


def parse(cls: type[T], argv: Sequence[str] | None = None, description: str | None = None,
          defaults: dict[str, Any] | None = None) -> T:
    """Parses ``argv`` (default ``sys.argv[1:]``) into an instance of the dataclass ``cls``.

    ``defaults`` replace the fields' own defaults (a script's settings). A ``ValueError``
    from the config's own checks is reported as a usage error.
    """
    parser = argparse.ArgumentParser(description=description)
    add_arguments(parser, cls, defaults)
    namespace = parser.parse_args(argv)
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(namespace).items()}
    try:
        return cls(**values)
    except ValueError as error:
        parser.error(str(error))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_run_config(cfg) -> None:
    """The checks both run configs share, each a ``ValueError`` that names the flag.

    Sizes and counts at least 1, a positive learning rate, gradient clip and replay
    ratio, a discount in [0, 1], a non-negative entropy weight, a burn-in shorter than
    the rollout. The callers then build the chosen agent's config from the flags, so its
    own checks also run at start-up.
    """

    def at_least(name, low):
        value = getattr(cfg, name, None)
        if value is not None and value < low:
            raise ValueError(f"{_flag(name)} must be >= {low}, got {value}.")

    for name in ("rollout_length", "num_epochs", "num_minibatches", "replay_capacity", "batch_size",
                 "min_replay_size", "core_size", "cpu_devices"):
        at_least(name, 1)
    at_least("burn_in", 0)
    for name in ("learning_rate", "max_grad_norm", "replay_ratio"):
        value = getattr(cfg, name, None)
        if value is not None and not value > 0:
            raise ValueError(f"{_flag(name)} must be > 0, got {value}.")
    if not 0.0 <= cfg.discount <= 1.0:
        raise ValueError(f"--discount must be in [0, 1], got {cfg.discount}.")
    if cfg.entropy_coef is not None and cfg.entropy_coef < 0:
        raise ValueError(f"--entropy-coef must be >= 0, got {cfg.entropy_coef}.")
    if any(size < 1 for size in cfg.hidden_sizes):
        raise ValueError(f"--hidden-sizes must all be >= 1, got {' '.join(map(str, cfg.hidden_sizes))}.")
    if cfg.burn_in is not None and cfg.burn_in >= cfg.rollout_length:
        raise ValueError(f"--burn-in ({cfg.burn_in}) must be shorter than --rollout-length ({cfg.rollout_length}).")
