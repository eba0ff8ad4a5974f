"""What a run does with an update whose loss, gradients or parameters are not finite (``--on-nonfinite``): stop at
the first (:class:`Diverged`, nothing non-finite saved), or count them (:class:`NonfiniteWatch`); a population
whose every lane diverged (:class:`PopulationDiverged`). Anakin's host loop and Sebulba's learner loop both call it.
"""

from __future__ import annotations


import numpy as np

from podracer.core import pbt
from podracer.core.learner import nonfinite_names


ON_NONFINITE = ("stop", "skip", "continue")  # --on-nonfinite's choices; stop is the default


class Diverged(RuntimeError):
    """An update whose loss, gradients or parameters were not finite stopped the run (``--on-nonfinite stop``):
    ``update`` (1-based, the run's count), ``what`` (names of what was not finite), ``entry`` (the first seed,
    setting or lane that diverged, in a run of several; else None), ``label`` (how that entry is named: ``lane 3``,
    ``setting learning_rate=0.1, seed entry 0``; default ``seed entry N``) and ``values`` (its searched values by
    name, which the message names instead of the run's base flags)."""

    def __init__(
        self,
        update: int,
        what: list[str],
        entry: int | None = None,
        *,
        label: str | None = None,
        values: dict[str, float] | None = None,
    ):
        self.update, self.what, self.entry, self.values = update, what, entry, dict(values or {})
        self.label = label if label is not None or entry is None else f"seed entry {entry}"
        where = "" if self.label is None else f", {self.label}"
        super().__init__(f"update {update} is not finite ({', '.join(what)}{where})")


class PopulationDiverged(Diverged):
    """Every lane of a population was diverging at a ranking (a non-finite update since the one before): no lane is
    left to copy. ``lanes``: each lane's values then, by name."""

    def __init__(self, update: int, lanes: list[dict[str, float]]):
        self.lanes = lanes
        Diverged.__init__(self, update, [])
        named = "; ".join(f"lane {i}: {pbt.lane_label(values)}" for i, values in enumerate(lanes))
        RuntimeError.__init__(
            self,
            f"every lane of the population took a non-finite update before the ranking at update {update}, so none "
            f"is left to copy ({named})",
        )


class NonfiniteWatch:
    """Reads the learner's ``nonfinite`` codes (:func:`podracer.core.learner.nonfinite_code`) after each host call or
    update. ``policy`` ``stop`` raises :class:`Diverged` at the first non-finite update; ``skip`` (the learner step
    discarded it) and ``continue`` count them (``count`` of the ``seen`` updates, entries counted apart), saying so
    at the first one (``main``: this process prints)."""

    def __init__(self, policy: str = "stop", main: bool = True, describe=None):
        if policy not in ON_NONFINITE:
            raise ValueError(f"--on-nonfinite: invalid choice: {policy!r} (choose from {', '.join(ON_NONFINITE)}).")
        self.policy, self.main, self.count, self.seen, self._said = policy, main, 0, 0, False
        # entry -> (its label, its searched values), for a run of several entries
        self.describe = describe or (lambda entry: (f"seed entry {entry}", {}))

    def check(self, codes, done_before: int) -> int:
        """``codes``: ``[updates]`` (or ``[updates, entries]``) of the updates after ``done_before``; returns how many
        of them (entries counted apart) were not finite, or raises :class:`Diverged` (``stop``)."""
        codes = np.asarray(codes, np.float64)
        rows = codes.reshape(len(codes), -1) if codes.ndim else codes.reshape(1, 1)
        bad = rows > 0
        self.seen += bad.size
        if not bad.any():
            return 0
        first = int(np.nonzero(bad.any(axis=1))[0][0])
        entries = np.nonzero(bad[first])[0]
        what = nonfinite_names(np.bitwise_or.reduce(rows[first][entries].astype(np.int64)))
        entry = int(entries[0]) if codes.ndim > 1 else None
        label, values = (None, None) if entry is None else self.describe(entry)
        diverged = Diverged(done_before + first + 1, what, entry, label=label, values=values)
        if self.policy == "stop":
            raise diverged
        if not self._said and self.main:
            doing = "discarding such updates" if self.policy == "skip" else "training on"
            print(
                f"podracer: {diverged}; --on-nonfinite {self.policy}: {doing} "
                "(said once; the closing line counts them, each log record in nonfinite_updates)",
                flush=True,
            )
            self._said = True
        self.count += int(bad.sum())
        return int(bad.sum())


def nonfinite_said(policy: str, counted: tuple[int, int]) -> tuple[str, bool]:
    """The closing line's words on the updates ``--on-nonfinite skip`` discarded or ``continue`` trained on
    (``counted``: :attr:`NonfiniteWatch.count` of :attr:`NonfiniteWatch.seen`; "" when there were none), and
    whether they were more than half of them: such a run ends with exit status 1, its agent no trained one."""
    bad, seen = counted
    if not bad:
        return "", False
    what = "discarded" if policy == "skip" else "not finite"
    return f"{bad:,} of {seen:,} updates {what} (--on-nonfinite {policy})", 2 * bad > seen


__all__ = ["Diverged", "NonfiniteWatch", "ON_NONFINITE", "PopulationDiverged", "nonfinite_said"]
