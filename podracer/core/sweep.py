"""Hyper-parameter sweeps in one program: ``--sweep NAME=V1,V2,...`` (several: a grid) x ``--num-seeds``.

Every setting of the grid trains with every seed, all vmapped together in one compiled
Anakin program (:class:`podracer.anakin.Sweep`): setting ``p`` with seed ``s`` is the run
``--seed s`` with those values, up to floating-point rounding. A swept value is traced,
so only values used in arithmetic can be swept (learning rate, discount, entropy cost,
clip ratios, ...); one that sets shapes or loop counts (batch size, replay ratio, number
of epochs) is an error that says so.

At the end the run prints, and writes to ``--log-dir`` (``sweep.csv``, ``sweep.png``), the
final return of each setting over its seeds: mean and interquartile mean, each with a 95 %
percentile bootstrap interval over seeds, and the learning curves.
"""

from __future__ import annotations

import csv
import importlib.util
import dataclasses
import itertools
import math
import os
import typing
from collections.abc import Mapping, Sequence

import numpy as np

from podracer.core.agents.hyperparameters import flag, with_hyperparameters
from podracer.core.networks import settable
from podracer.core.stats import INTERVAL_SEEDS, interquartile_mean, spread


def _hints(agent_config) -> dict[str, type]:
    """The type of every hyper-parameter of an agent config by flag name, nested optimizer and network settings
    included."""
    hints = {}
    for field in dataclasses.fields(agent_config):
        value = getattr(agent_config, field.name)
        if dataclasses.is_dataclass(value):
            shown = settable(field, value)
            hints.update({name: hint for name, hint in _hints(value).items() if name in shown})
        else:
            hints[field.name] = typing.get_type_hints(type(agent_config))[field.name]
    return hints


def sweepable(agent_config) -> list[str]:
    """The numeric (int or float, not bool) hyper-parameters of an agent config: the candidates for ``--sweep``."""
    names = []
    for name, hint in _hints(agent_config).items():
        kinds = set(typing.get_args(hint)) - {type(None)} or {hint}
        if kinds and kinds <= {int, float} and bool not in kinds:
            names.append(name)
    return names


def _field_type(agent_config, name: str) -> type:
    hint = _hints(agent_config)[name]
    return float if float in (set(typing.get_args(hint)) | {hint}) else int


def _number(text: str, kind: type, name: str):
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--sweep {name}: {text!r} is not a number.") from None
    if kind is int:
        if not value.is_integer():
            raise ValueError(f"--sweep {name}: {text!r} is not a whole number ({flag(name)} takes integers).")
        return int(value)
    return value


def parse(agent_config, specs: Sequence[str]) -> tuple[dict[str, float], ...]:
    """The grid of settings that ``--sweep`` specs (``NAME=V1,V2,...`` each) describe for ``agent_config``, in
    order (the last name varies fastest); ``()`` for no specs. Each value is checked as the agent's flag is."""
    axes: dict[str, list] = {}
    names = sweepable(agent_config)
    for spec in specs:
        name, _, values = spec.partition("=")
        name = name.strip().removeprefix("--").replace("-", "_")
        if not name or not values.strip():
            raise ValueError(f"--sweep takes NAME=V1,V2,... (for example learning_rate=1e-3,3e-3), got {spec!r}.")
        if name not in names:
            raise ValueError(
                f"--sweep: {name!r} is not a numeric hyper-parameter of this agent; choose from {', '.join(names)}."
            )
        if name in axes:
            raise ValueError(f"--sweep {name}: given twice; put all its values in one NAME=V1,V2,...")
        kind = _field_type(agent_config, name)
        axes[name] = [_number(v.strip(), kind, name) for v in values.split(",")]
        if len(set(axes[name])) != len(axes[name]):
            raise ValueError(f"--sweep {name}: a value is repeated in {values!r}.")
        for value in axes[name]:
            with_hyperparameters(agent_config, {name: value})  # the agent's own checks, naming the flag
    return tuple(dict(zip(axes, combo)) for combo in itertools.product(*axes.values()))


def with_values(agent_config, values: Mapping):
    """A copy of ``agent_config`` holding ``values`` (traced arrays, inside the compiled program) unchecked:
    the values were checked as numbers by :func:`parse`, and a traced value cannot be compared in Python."""
    return with_hyperparameters(agent_config, values, checked=False)


def label(point: Mapping[str, float]) -> str:
    """``learning_rate=0.001,discount=0.99``: a setting as a name (and a directory name)."""
    return ",".join(f"{name}={value:g}" for name, value in point.items())


def final_returns(history: Sequence[dict], num_points: int, policy: str = "greedy") -> tuple[np.ndarray, str]:
    """Final returns ``[points, seeds]`` from a sweep run's summaries, and what they are: the last
    evaluation's returns (of the ``policy`` that ``--eval-policy`` names) when the run evaluated at its end, else the
    last call's training returns."""
    last = history[-1]
    key, what = (
        ("eval_return_per_seed", f"{policy} evaluation return at the end")
        if "eval_return_per_seed" in last
        else ("episode_return_per_seed", "training episode return of the last host call")
    )
    values = np.asarray(last[key], np.float64)
    return values.reshape(num_points, -1), what


def table(points: Sequence[Mapping[str, float]], returns: np.ndarray) -> list[dict]:
    """One row per setting: its values, the seeds, and the mean and interquartile mean over seeds of its
    ``returns`` ``[points, seeds]``, each with its 95 % bootstrap interval, or over fewer than
    :data:`~podracer.core.stats.INTERVAL_SEEDS` seeds the seeds' range (``interval`` says which)."""
    rows = []
    for point, values in zip(points, returns):
        finite = values[np.isfinite(values)]
        row = {**point, "seeds": len(values), "interval": "range"}  # (none finished: no interval either)
        for name, statistic in (("mean", np.mean), ("iqm", interquartile_mean)):
            if len(finite):
                low, high, row["interval"] = spread(finite, statistic)
                row.update({name: float(statistic(finite)), f"{name}_low": low, f"{name}_high": high})
            else:
                row.update({name: math.nan, f"{name}_low": math.nan, f"{name}_high": math.nan})
        rows.append(row)
    return rows


def format_table(rows: Sequence[dict], what: str) -> str:
    """The table as text, best setting (by interquartile mean) marked."""
    statistics = ("seeds", "interval", "mean", "mean_low", "mean_high", "iqm", "iqm_low", "iqm_high")
    names = [k for k in rows[0] if k not in statistics]
    ranges = all(row["interval"] == "range" for row in rows)
    spread_name = "range" if ranges else "95% CI"
    header = ["setting", "seeds", "mean", spread_name, "IQM", spread_name]
    marks = ["" if ranges or row["interval"] != "range" else "*" for row in rows]  # a range among intervals
    body = [
        [
            label({n: row[n] for n in names}),
            str(row["seeds"]),
            f"{row['mean']:.3f}",
            f"[{row['mean_low']:.3f}, {row['mean_high']:.3f}]{mark}",
            f"{row['iqm']:.3f}",
            f"[{row['iqm_low']:.3f}, {row['iqm_high']:.3f}]{mark}",
        ]
        for row, mark in zip(rows, marks)
    ]
    best = int(np.nanargmax([row["iqm"] for row in rows])) if any(np.isfinite(row["iqm"]) for row in rows) else -1
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        f"sweep: final returns over seeds ({what}); "
        + (
            f"ranges: lowest to highest seed (fewer than {INTERVAL_SEEDS} seeds make no interval worth the name)"
            if ranges
            else "intervals: 95% percentile bootstrap over seeds"
            + ("; *: a range, fewer seeds finished" if any(marks) else "")
        ),
        "  ".join(h.ljust(w) for h, w in zip(header, widths)),
    ]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(line, widths)) + ("  <- best IQM" if i == best else "")
        for i, line in enumerate(body)
    ]
    return "\n".join(lines)


def plot_needs() -> str:
    """Why a sweep's picture was not drawn, and the command that makes it possible."""
    from podracer.core import install

    return f"drawing it needs matplotlib: {install.command('plot')}"


def plot(history: Sequence[dict], points: Sequence[Mapping[str, float]], path: str) -> None:
    """Learning curves: per setting, the mean training return over seeds against env steps, with the
    band from its lowest to its highest seed (and greedy evaluations as points, where the run made them)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError(f"the sweep's plot {plot_needs().removeprefix('drawing it ')}.") from None
    steps = np.array([h["env_steps"] for h in history])
    curves = np.array([h["episode_return_per_seed"] for h in history], np.float64).reshape(
        len(history), len(points), -1
    )
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for p, point in enumerate(points):
        with np.errstate(all="ignore"):
            mean = np.nanmean(curves[:, p], axis=1)
            low, high = np.nanmin(curves[:, p], axis=1), np.nanmax(curves[:, p], axis=1)
        (line,) = axes.plot(steps, mean, label=label(point))
        axes.fill_between(steps, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
        evaluated = [
            (h["env_steps"], np.mean(np.reshape(h["eval_return_per_seed"], (len(points), -1))[p]))
            for h in history
            if "eval_return_per_seed" in h
        ]
        if evaluated:
            axes.plot(*zip(*evaluated), "o", color=line.get_color(), markersize=4)
    axes.set_xlabel("env steps (per seed)")
    axes.set_ylabel("episode return (mean over seeds; band: min to max)")
    axes.legend(fontsize="small")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def report(
    history: Sequence[dict], points: Sequence[Mapping[str, float]], log_dir: str | None, policy: str = "greedy"
) -> str:
    """The sweep's table as text; with a ``log_dir``, also ``sweep.csv`` and the plot ``sweep.png`` there."""
    returns, what = final_returns(history, len(points), policy)
    rows = table(points, returns)
    text = format_table(rows, what)
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        with open(os.path.join(log_dir, "sweep.csv"), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        table_path, picture = os.path.join(log_dir, "sweep.csv"), os.path.join(log_dir, "sweep.png")
        if importlib.util.find_spec("matplotlib") is None:  # a plain install: the table, and how to get the picture
            text += f"\nsweep: wrote {table_path} (not {picture}: {plot_needs()})"
        else:
            plot(history, points, picture)
            text += f"\nsweep: wrote {table_path} and {picture}"
    else:
        text += "\nsweep: pass --log-dir to keep the table (sweep.csv) and the learning curves (sweep.png)"
    return text
