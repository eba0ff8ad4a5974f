"""Population-based training (Jaderberg et al., 2017) as the command line states it, and what a population run
leaves behind: ``--population N --pbt-search NAME=[log:]LOW..HIGH --pbt-every K``.

The lanes train vmapped in one compiled Anakin program (:class:`podracer.core.population.Population`); this
module holds what the host needs: the search space parsed and checked against the agent's flags, each lane's
starting values (drawn from the ranges with ``--seed``), and at the end the best lane's schedule of values
(``pbt_schedule.csv``, ``pbt_schedule.png``) traced back through the lanes it copied, from the run's log records.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import os
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from podracer.core.agents.hyperparameters import flag, with_hyperparameters
from podracer.core.sweep import _field_type, plot_needs, sweepable

SEBULBA_REFUSAL = (
    "--population trains in Anakin only (podracer anakin --population N --pbt-search ...): Sebulba's learner "
    "trains one agent."
)
PERTURB = (0.8, 1.25)  # explore: a copied value times one of these (then clipped to its range), when not redrawn


class Range(NamedTuple):
    """A searched hyper-parameter: its name, its range and whether values are drawn (and clipped) on a log scale."""

    name: str
    low: float
    high: float
    log: bool

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.log:
            return np.exp(rng.uniform(math.log(self.low), math.log(self.high), n))
        return rng.uniform(self.low, self.high, n)


# real-valued hyper-parameters read only when the parameters are made: perturbing them mid-run would change nothing
INITIAL_ONLY = ("log_std_init", "initial_alpha")


def parse_search(agent_config, specs: Sequence[str]) -> tuple[Range, ...]:
    """The ranges that ``--pbt-search`` specs (``NAME=[log:]LOW..HIGH`` each) give for ``agent_config``; one-line
    errors naming the flag for a malformed spec, an unknown or integer hyper-parameter, a value the agent refuses."""
    ranges: dict[str, Range] = {}
    names = sweepable(agent_config)
    # what PBT can perturb: real-valued settings a running member uses, not those that only set initial values
    real = [name for name in names if _field_type(agent_config, name) is not int and name not in INITIAL_ONLY]
    for spec in specs:
        name, _, text = spec.partition("=")
        name = name.strip().removeprefix("--").replace("-", "_")
        log = text.strip().startswith("log:")
        low, dots, high = text.strip().removeprefix("log:").partition("..")
        if not name or not dots:
            raise ValueError(
                f"--pbt-search takes NAME=[log:]LOW..HIGH (for example learning_rate=log:1e-4..1e-2), got {spec!r}."
            )
        if name not in names:
            raise ValueError(
                f"--pbt-search: {name!r} is not a real-valued hyper-parameter of this agent; choose from "
                f"{', '.join(real)}."
            )
        if name in INITIAL_ONLY:
            raise ValueError(
                f"--pbt-search {name}: {flag(name)} sets a value at initialisation only, which a running member never "
                "reads again; PBT perturbs what training uses (--sweep takes it)."
            )
        if _field_type(agent_config, name) is int:
            raise ValueError(
                f"--pbt-search {name}: {flag(name)} takes whole numbers (they set shapes or loop counts); PBT perturbs "
                "real-valued hyper-parameters (--sweep takes whole numbers)."
            )
        try:
            bounds = float(low), float(high)
        except ValueError:
            raise ValueError(f"--pbt-search {name}: {low!r}..{high!r} are not two numbers.") from None
        if not all(map(math.isfinite, bounds)) or not bounds[0] < bounds[1] or (log and bounds[0] <= 0):
            need = "0 < LOW < HIGH" if log else "LOW < HIGH"
            raise ValueError(f"--pbt-search {name}: the range {low}..{high} needs {need}, finite.")
        if name in ranges:
            raise ValueError(f"--pbt-search {name}: given twice.")
        for value in bounds:
            with_hyperparameters(agent_config, {name: value})  # the agent's own checks, naming the flag
        ranges[name] = Range(name, *bounds, log)
    return tuple(ranges.values())


def check_config(config) -> None:
    """An Anakin config's ``--num-seeds``, ``--sweep`` and ``--population`` against each other and the run's other
    flags: one-line ``ValueError`` s naming the flags."""
    from podracer.core.sweep import parse

    checkpoints = config.checkpoint_every is not None or config.checkpoint_every_seconds is not None
    if config.num_seeds > 1 and (checkpoints or config.resume != "no"):
        raise ValueError(
            "--checkpoint-every, --checkpoint-every-seconds and --resume take one seed: drop --num-seeds (final "
            "checkpoints of several seeds go to --checkpoint-dir/seed_S)."
        )
    if config.sweep:
        parse(config.agent, config.sweep)
        if checkpoints or config.resume != "no":
            raise ValueError(
                "--checkpoint-every, --checkpoint-every-seconds and --resume take one run: drop --sweep (a sweep's "
                "final checkpoints go to --checkpoint-dir/SETTING/seed_S)."
            )
        if config.target_return is not None:
            raise ValueError(
                "--target-return stops one run: drop it or --sweep (a sweep trains every setting to the end)."
            )
    if config.population is None:
        if config.pbt_search:
            raise ValueError("--pbt-search needs --population N (the lanes that search).")
        return
    if config.population < 2:
        raise ValueError(f"--population must be >= 2 (lanes that rank and copy each other), got {config.population}.")
    if config.sweep or config.num_seeds > 1:
        raise ValueError(
            "--population trains its own lanes: drop --sweep and --num-seeds (each lane has its own seed)."
        )
    if not config.pbt_search:
        raise ValueError(
            "--population needs --pbt-search NAME=[log:]LOW..HIGH (for example learning_rate=log:1e-4..1e-2)."
        )
    parse_search(config.agent, config.pbt_search)
    every = config.pbt_every
    if every is not None and (every < 1 or every % config.updates_per_call):
        raise ValueError(
            f"--pbt-every {every} must be a positive multiple of the {config.updates_per_call} updates per call "
            "(--updates-per-call)."
        )
    if not 0 < config.pbt_fraction <= 0.5 or int(config.population * config.pbt_fraction) < 1:
        raise ValueError(
            f"--pbt-fraction must be in (0, 0.5] and leave at least one lane of --population {config.population} to "
            f"copy, got {config.pbt_fraction:g}."
        )
    if not 0 <= config.pbt_resample <= 1:
        raise ValueError(f"--pbt-resample is a probability in [0, 1], got {config.pbt_resample:g}.")
    if config.target_return is not None:
        raise ValueError("--target-return stops one run: drop it or --population (a population trains to the end).")


def starting_values(search: Sequence[Range], size: int, seed: int) -> tuple[dict[str, float], ...]:
    """Each lane's starting values: drawn from every range (log-uniform for ``log:``) with ``seed``."""
    rng = np.random.default_rng([seed, 0x9B7])
    drawn = {r.name: r.draw(rng, size) for r in search}
    return tuple({name: float(values[i]) for name, values in drawn.items()} for i in range(size))


def best_lane(fitness, return_sum, episodes) -> int:
    """The lane a population's checkpoint keeps (``[lanes]`` each, one device's): the best mean return of the last
    ranking, or, before the first, of the episodes ended so far."""
    fitness = np.asarray(fitness, np.float64)
    if not np.isfinite(fitness).any():
        episodes = np.asarray(episodes, np.float64)
        fitness = np.where(episodes > 0, np.asarray(return_sum, np.float64) / np.maximum(episodes, 1), -np.inf)
    return int(np.argmax(np.where(np.isnan(fitness), -np.inf, fitness)))


def lane_label(values: Mapping[str, float]) -> str:
    return ",".join(f"{name}={value:.3g}" for name, value in values.items())


def schedule(history: Sequence[dict], names: Sequence[str], lane: int) -> list[dict]:
    """Lane ``lane``'s values after every logged call, traced back through the lanes it copied: before a copy made
    at update ``u`` from lane ``j`` (``pbt_parent_per_lane``, ``pbt_copied_at_per_lane``), its line is ``j``'s. The
    row of a copy says why in ``copied`` (``lane 2 (ranked in the bottom)``, or ``(diverging)``: a non-finite update
    since the ranking before, its fitness then NaN); other rows leave it empty."""
    rows, current = [], lane
    for record in reversed(history):
        row = {
            "env_steps": record["env_steps"],
            "lane": current,
            **{name: record[f"pbt_{name}_per_lane"][current] for name in names},
            "copied": "",
        }
        rows.append(row)
        # --pbt-every is a multiple of --updates-per-call: a copy happens at the last update of a call
        if record["pbt_copied_at_per_lane"][current] == record["pbt_updates"]:
            fitness = record.get("pbt_fitness_per_lane", [0.0] * (current + 1))[current]
            why = "diverging" if fitness is None or math.isnan(fitness) else "ranked in the bottom"
            current = int(record["pbt_parent_per_lane"][current])
            row["copied"] = f"lane {current} ({why})"
    return rows[::-1]


def report(history: Sequence[dict], names: Sequence[str], log_dir: str | None) -> tuple[str, int]:
    """``(text, best lane)``: the population's ending (the best lane by the last call's training return, its values
    and what it copied), and with ``log_dir`` its schedule as ``pbt_schedule.csv`` and ``pbt_schedule.png``."""
    last = history[-1]
    returns = np.asarray(last["episode_return_per_seed"], np.float64)
    best = int(np.nanargmax(np.where(np.isfinite(returns), returns, -np.inf)))
    rows = schedule(history, names, best)
    copies = sum(1 for a, b in zip(rows, rows[1:]) if a["lane"] != b["lane"])
    text = (
        f"pbt: best lane {best} (last training return {returns[best]:.3f}; population median "
        f"{np.nanmedian(returns):.3f}): {lane_label({n: rows[-1][n] for n in names})}; its line copied another lane "
        f"{copies} time(s)"
    )
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        path = os.path.join(log_dir, "pbt_schedule.csv")
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        picture = os.path.join(log_dir, "pbt_schedule.png")
        if importlib.util.find_spec("matplotlib") is None:
            text += f"\npbt: wrote {path} (not {picture}: {plot_needs()})"
        else:
            _plot(rows, names, picture)
            text += f"\npbt: wrote {path} and {picture}"
    return text, best


def _plot(rows: Sequence[dict], names: Sequence[str], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(names), 1, figsize=(7, 2.2 * len(names) + 0.6), sharex=True, squeeze=False)
    steps = [r["env_steps"] for r in rows]
    for ax, name in zip(axes[:, 0], names):
        ax.step(steps, [r[name] for r in rows], where="post")
        ax.set_yscale("log" if min(r[name] for r in rows) > 0 else "linear")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("env steps (per lane)")
    axes[0, 0].set_title("the best lane's hyper-parameters, traced through the lanes it copied")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


__all__ = [
    "PERTURB",
    "Range",
    "best_lane",
    "check_config",
    "lane_label",
    "parse_search",
    "report",
    "schedule",
    "starting_values",
]
