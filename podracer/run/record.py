"""What a run directory records of its run, so that it can be read and replayed: ``run.toml``, the resolved settings
as a preset the command line takes back (``podracer anakin --preset RUN_DIR/run.toml`` trains the same run on the
same seed), and ``run.json``, the command, the versions (podracer, and its git commit in a checkout; JAX, jaxlib
and the suites installed) and the devices. The main process writes both when the run starts (again on each resume,
which may change what shapes no saved state); TensorBoard gets the same settings as its hyper-parameters."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import subprocess
import sys
from typing import Any

from podracer.run import flagspec as flags_lib

RUN_TOML, RUN_JSON = "run.toml", "run.json"
# Where and how a run runs, not what it trains: a replay writes its own directories and joins no cluster.
NOT_REPLAYED = frozenset(
    {
        "log_dir",
        "no_log_dir",
        "checkpoint_dir",
        "checkpoint_every",
        "checkpoint_every_seconds",
        "resume",
        "preset",
        "coordinator",
        "num_processes",
        "process_id",
        "distributed",
        "distributed_timeout",
        "wandb_project",
        "compile_cache",
        "compile_cache_dir",
    }
)
# the distributions whose versions a run records, where installed
PACKAGES = (
    "jax", "jaxlib", "flax", "optax", "chex", "rlax", "mctx", "envpool", "gymnasium", "gymnax", "brax", "playground",
    "jumanji", "craftax", "xminigrid", "navix", "pgx",
)  # fmt: skip


def resolved_flags(cfg, *, cpu_devices: int | None = None) -> dict[str, Any]:
    """The flags that give ``cfg`` again, by name without dashes, in the command line's order: ``agent`` first,
    then every field that says what the run trains (not where it writes, :data:`NOT_REPLAYED`); a ``None`` is
    written as ``"None"`` where the default is not None, and left out where it is. ``cpu_devices``: the CPU devices
    the run used, recorded where the command line left the count to the machine."""
    out: dict[str, Any] = {"agent": cfg.agent_name}
    defaults = {option.flag: option.default for option in flags_lib.options(type(cfg), _defaults_like(cfg))}
    for option in flags_lib.options(type(cfg), cfg):
        if option.path[-1] in NOT_REPLAYED:
            continue
        value = option.default
        if option.path[-1] == "cpu_devices" and value is None:
            value = cpu_devices
        name = option.flag.removeprefix("--")
        if value is None:
            if defaults.get(option.flag) is not None:
                out[name] = "None"
        elif option.kind == "switch" and not option.pair and value is False:
            continue  # a flag without a --no- form, off
        elif isinstance(value, tuple) and not value:
            continue  # nothing given (--sweep, --import)
        else:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def _defaults_like(cfg):
    """``cfg``'s class with its defaults, and the defaults of ``cfg``'s agent."""
    return type(cfg)(agent=type(cfg.agent)())


def toml(mode: str, flags: dict[str, Any], note: str) -> str:
    """A preset file of one table, ``[run]``, as ``podracer.cli.presets`` reads it."""
    lines = ["[run]", f"mode = {_value(mode)}", f"note = {_value(note)}", "", "[run.flags]"]
    lines += [f"{name} = {_value(value)}" for name, value in flags.items()]
    return "\n".join(lines) + "\n"


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string: JSON's escapes are TOML's


def versions() -> dict[str, str]:
    """The versions of podracer (with its git commit when it runs from a checkout) and of :data:`PACKAGES` that are
    installed."""
    import podracer

    out = {"podracer": podracer.__version__}
    commit = _commit(os.path.dirname(os.path.dirname(os.path.abspath(podracer.__file__))))
    if commit:
        out["podracer_commit"] = commit
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _commit(root: str) -> str | None:
    if not os.path.isdir(os.path.join(root, ".git")):
        return None
    try:
        done = subprocess.run(
            ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        )
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def write(cfg, mode: str, log_dir: str, argv: list[str] | None = None) -> dict[str, Any]:
    """Writes ``run.toml`` and ``run.json`` into ``log_dir`` for the run of ``cfg`` (``mode``: ``anakin`` or
    ``sebulba``; ``argv``: its command line, default ``sys.argv``); returns the flags recorded."""
    from podracer.run import parallel

    devices = parallel.local_devices()
    cpu = devices[0].platform == "cpu"
    flags = resolved_flags(cfg, cpu_devices=len(devices) if cpu else None)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    path = os.path.join(log_dir, RUN_TOML)
    note = (
        f"the settings of the run in {os.path.abspath(log_dir)}, started {now}; replay: podracer {mode} --preset {path}"
    )
    os.makedirs(log_dir, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(toml(mode, flags, note))
    facts = {
        "command": list(sys.argv if argv is None else argv),
        "mode": mode,
        "started": now,
        "versions": versions(),
        "devices": [str(d) for d in devices],
        "processes": parallel.process_count(),
        "hostname": os.uname().nodename if hasattr(os, "uname") else "",
    }
    with open(os.path.join(log_dir, RUN_JSON), "w", encoding="utf-8") as f:
        json.dump(facts, f, indent=1)
        f.write("\n")
    return flags


__all__ = ["NOT_REPLAYED", "PACKAGES", "RUN_JSON", "RUN_TOML", "resolved_flags", "toml", "versions", "write"]
