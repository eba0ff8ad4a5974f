"""Statistics of returns and metrics on the host: summaries of a host call's metrics (one seed or several),
evaluation summaries, the interquartile mean and percentile bootstrap intervals over seeds."""

from __future__ import annotations

import numpy as np

from podracer.core.types import Metrics

BOOTSTRAP_SAMPLES = 2_000
BOOTSTRAP_SEED = 0  # the intervals are the same for the same returns


def summarize_evaluation(returns, target_return: float | None = None) -> dict[str, float]:
    """Summary entries of evaluation returns (``[episodes]``, or ``[seeds, episodes]``): ``eval_return`` (the
    mean), its minimum and maximum, per seed, and ``target_reached`` when a ``target_return`` is given."""
    returns = np.asarray(returns, np.float64)
    out = {
        "eval_return": float(returns.mean()),
        "eval_return_min": float(returns.min()),
        "eval_return_max": float(returns.max()),
    }
    if returns.ndim == 2:
        out["eval_return_per_seed"] = returns.mean(axis=1).tolist()
    if target_return is not None:
        out["target_reached"] = float(out["eval_return"] >= target_return)
    return out


def summarize(metrics: Metrics) -> dict[str, float]:
    """Host-side summary of metrics stacked over several updates.

    Episode statistics are weighted by the episodes that ended in each update; other
    metrics are averaged.
    """
    metrics = {k: np.asarray(v, dtype=np.float64) for k, v in metrics.items()}
    count = metrics.get("episodes")
    out = {}
    for name, values in metrics.items():
        if name in ("episode_return", "episode_length") and count is not None:
            total = count.sum()
            out[name] = float(np.nansum(values * count) / total) if total > 0 else float("nan")
        elif name == "episodes":
            out[name] = float(values.sum())
        else:
            out[name] = float(values.mean())
    return out


def interquartile_mean(values) -> float:
    """The mean of the middle half of ``values`` (a quarter of the sorted values dropped at each end)."""
    values = np.sort(np.asarray(values, np.float64))
    cut = len(values) // 4
    return float(np.mean(values[cut : len(values) - cut]))


def summarize_seeds(metrics: Metrics) -> dict:
    """:func:`summarize` of metrics ``[updates, seeds]``, seed by seed, then over seeds.

    Each metric is its mean over seeds; the episode return also comes with its minimum
    and maximum over seeds and the list of per-seed values (``episode_return_per_seed``), the episodes that ended
    with theirs (``episodes_per_seed``).
    """
    metrics = {k: np.asarray(v) for k, v in metrics.items()}
    num_seeds = next(iter(metrics.values())).shape[1]
    per_seed = [summarize({k: v[:, i] for k, v in metrics.items()}) for i in range(num_seeds)]
    out = {}
    for name in per_seed[0]:
        values = np.array([s[name] for s in per_seed])
        out[name] = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
    returns = [s["episode_return"] for s in per_seed]
    if np.isfinite(returns).any():
        out["episode_return_min"], out["episode_return_max"] = float(np.nanmin(returns)), float(np.nanmax(returns))
    out["episode_return_per_seed"] = returns
    if "episodes" in per_seed[0]:
        out["episodes_per_seed"] = [s["episodes"] for s in per_seed]
    return out


def _resampled(rng: np.random.Generator, values: np.ndarray, samples: int) -> np.ndarray:
    """``samples`` rows, each ``len(values)`` of ``values`` drawn with replacement."""
    return values[rng.integers(0, len(values), size=(samples, len(values)))]


def _central(stats: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` share of a bootstrap's statistics: its two percentiles."""
    tail = (1.0 - level) / 2 * 100
    return float(np.percentile(stats, tail)), float(np.percentile(stats, 100 - tail))


def bootstrap_interval(
    values, statistic, *, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``statistic`` over ``values`` (resampled with replacement)."""
    values = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    stats = np.array([statistic(row) for row in _resampled(rng, values, samples)])
    return _central(stats, level)


def difference_interval(
    values, others, statistic, *, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``statistic(values) - statistic(others)``, two independent samples
    (each resampled with replacement on its own): an interval that holds 0 says the two cannot be told apart."""
    values, others = np.asarray(values, np.float64), np.asarray(others, np.float64)
    rng = np.random.default_rng(seed)
    draws, other_draws = _resampled(rng, values, samples), _resampled(rng, others, samples)
    stats = np.array([statistic(a) - statistic(b) for a, b in zip(draws, other_draws, strict=True)])
    return _central(stats, level)


INTERVAL_SEEDS = 5  # fewer seeds than this make a bootstrap interval that means little: their range is said instead


def spread(values, statistic) -> tuple[float, float, str]:
    """How far ``statistic`` over ``values`` (one per seed) could be off, and what that is: its 95 % bootstrap
    interval (``"95% CI"``) over :data:`INTERVAL_SEEDS` or more values, else the values' range, lowest to highest
    (``"range"``)."""
    values = np.asarray(values, np.float64)
    if len(values) < INTERVAL_SEEDS:
        return float(np.min(values)), float(np.max(values)), "range"
    return (*bootstrap_interval(values, statistic), "95% CI")


__all__ = [
    "BOOTSTRAP_SAMPLES",
    "BOOTSTRAP_SEED",
    "INTERVAL_SEEDS",
    "spread",
    "bootstrap_interval",
    "difference_interval",
    "interquartile_mean",
    "summarize",
    "summarize_evaluation",
    "summarize_seeds",
]
