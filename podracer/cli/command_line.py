"""The command line's own grammar, beneath the config tree (:func:`podracer.cli.config.parse`): ``--import MODULE``
found and imported before anything is parsed, the agent a command line names, and
the default log directory."""

from __future__ import annotations

import importlib.util  # noqa: F401 (import_module reads importlib.util)
import os
import sys
from collections.abc import Sequence

from podracer.core import agents
from podracer.run.disk import writable_directory
from podracer.cli.flags import UsageError


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


RUNS_DIR = "PODRACER_RUNS_DIR"  # where the command line's default log directories go; unset: ./runs


def default_log_dir(env: str, agent: str, seed: int, root: str | None = None) -> str:
    """A new directory ``ROOT/ENV__AGENT__SEED__TIME`` (``$PODRACER_RUNS_DIR``, else ``runs``), made now: two runs
    started in the same second get ``-2``, ``-3`` ... (made atomically, so that each directory has one writer)."""
    import re
    import time

    root = root or os.environ.get(RUNS_DIR) or "runs"
    writable_directory(root, f"the runs directory {root!r}", f"pass --log-dir, --no-log-dir or set ${RUNS_DIR}")
    stem = "__".join((re.sub(r"[^A-Za-z0-9._-]+", "-", env), agent, str(seed), time.strftime("%Y%m%d-%H%M%S")))
    for attempt in range(1, 1000):
        path = os.path.join(root, stem if attempt == 1 else f"{stem}-{attempt}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    raise ValueError(f"the runs directory {root!r} holds 999 runs named {stem}: pass --log-dir.")


def resumed_log_dir(cfg) -> str | None:
    """The log directory of the run that ``--resume`` (yes or auto) continues from ``--checkpoint-dir``, as its
    newest checkpoint records it, where that directory is still there; else None."""
    if not cfg.checkpoint_dir or cfg.resume == "no":
        return None
    from podracer.run import checkpoint

    try:  # the newest checkpoint's JSON alone: nothing here may start JAX before the devices are set
        found = checkpoint.steps(cfg.checkpoint_dir)
        if not found:
            return None
        recorded = checkpoint.read_metadata(cfg.checkpoint_dir, found[-1]).get("log_dir")
    except (OSError, ValueError):  # no intact checkpoint: the run's own checks say so
        return None
    return recorded if recorded and os.path.isdir(recorded) else None


def settle_log_dir(cfg):
    """``cfg`` with its log directory settled for the command line (the main process): ``--log-dir`` checked (a file,
    or not writable: one line), else a new :func:`default_log_dir` unless ``--no-log-dir``; and the line to say."""
    import dataclasses

    if cfg.log_dir:
        if cfg.no_log_dir:
            raise ValueError("--log-dir and --no-log-dir: pass one of them.")
        writable_directory(cfg.log_dir, f"--log-dir {cfg.log_dir!r}")
        return cfg, None
    if cfg.no_log_dir:
        return cfg, None
    if resumed := resumed_log_dir(cfg):  # a requeued job keeps one record: the directory of the run it resumes
        return dataclasses.replace(cfg, log_dir=resumed), f"logging to {resumed}, the record of the run it resumes"
    path = default_log_dir(cfg.env, cfg.agent_name, cfg.seed)
    return dataclasses.replace(cfg, log_dir=path), f"logging to {path} (metrics.jsonl, TensorBoard; --no-log-dir: none)"


__all__ = [
    "RUNS_DIR",
    "default_log_dir",
    "resumed_log_dir",
    "settle_log_dir",
    "UsageError",
    "flag_values",
    "import_module",
    "import_requested",
    "take_agent",
]
