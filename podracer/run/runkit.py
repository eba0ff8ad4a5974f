"""What a training run does around its learning, the same in both modes: when to save, what a stop saves, and what
the run says while it runs.

- :class:`Cadence`: a checkpoint every ``--checkpoint-every`` updates or once ``--checkpoint-every-seconds`` have
  passed (every process of a run agrees, since each writes its part);
- :class:`StopSnapshot`: after an update long enough that a stop may abandon the next one, host copies of it,
  registered with :func:`podracer.run.lifetime.completed` so that a stop saves the last completed update;
- :class:`Progress`: the heartbeat's status line (env steps, phase, ETA), the warning of a run that needs more than a
  day, and the beat of every progress line;
- :class:`AnakinCheckpoints` and :func:`sebulba_checkpoints`: each mode's checkpoints at that cadence, on a stop, at
  the end, and the resume of a requeued run;
- :class:`NonfiniteWatch`: what a run does with an update whose loss, gradients or parameters are not finite
  (``--on-nonfinite``): stop at the first (:class:`Diverged`, nothing non-finite saved), or count them.

Anakin's host loop and Sebulba's learner loop both call them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import jax
import numpy as np

from podracer.run import checkpoint, lifetime, parallel, startup
from podracer.core import pbt
from podracer.run import logging as logging_lib
from podracer.core.learner import nonfinite_names
from podracer.run.resume_identity import check_resume_identity

SLOW_RUN_SECONDS = 86_400  # a run whose ETA is longer than this is said to be slow, once
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


class Finished(Exception):
    """``--resume`` found the run done (:func:`check_unfinished`): the command says so and exits 0."""


def check_unfinished(
    directory: str | None, resume: str, num_updates: int, budget: str, identity: dict | None = None
) -> None:
    """Raises :class:`Finished`, before anything is compiled, when ``--resume`` (``yes`` or ``auto``) would continue a
    run whose newest checkpoint in ``directory`` already holds its ``num_updates`` updates (``budget``: the flag that
    sets the run's length); first, with ``identity`` (:func:`podracer.cli.build.resume_identity`), the checkpoint must
    be this run's (a one-line ``ValueError`` naming each flag that differs): another run's is never called
    finished."""
    done = checkpoint.steps(directory) if directory and resume != "no" else []
    if done and identity is not None:
        check_resume_identity(directory, checkpoint.newest_metadata(directory)[0], identity)
    if done and done[-1] >= num_updates:
        raise Finished(
            f"the run in {directory} has finished: its newest checkpoint, {checkpoint.describe_newest(directory)}, "
            f"holds {done[-1]:,} updates, all of this run's {num_updates:,}; nothing to train (to train on, raise "
            f"{budget})."
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


class Cadence:
    """When a run saves: every ``every`` updates, or once ``every_seconds`` have passed since the last save (wall
    time); ``saved``: the updates of the checkpoint the run starts from."""

    def __init__(self, every: int | None, every_seconds: float | None, saved: int = 0):
        self.every, self.every_seconds = every, every_seconds
        self.saved, self.saved_time = saved, time.monotonic()

    def due(self, updates: int) -> bool:
        """A checkpoint after ``updates`` updates? By time, every process agrees (the smallest verdict wins)."""
        if self.every and updates % self.every == 0:
            return True
        if self.every_seconds is None:
            return False
        due = time.monotonic() - self.saved_time >= self.every_seconds
        return bool(parallel.agree_on_min(int(due))) if parallel.process_count() > 1 else due

    def saved_at(self, updates: int) -> None:
        """A checkpoint of ``updates`` updates is complete."""
        self.saved, self.saved_time = updates, time.monotonic()


class StopSnapshot:
    """What a stop saves when the step in flight is abandoned: after each completed update that took at least half
    the grace period (:data:`podracer.run.lifetime.GRACE_SECONDS`), ``snapshot(state)`` (host copies of device buffers,
    no computation) is kept, and ``save(snapshot, updates)`` registered to write it from the signal's thread, unless
    ``saved()`` (the updates of the newest checkpoint) has reached it by then, with ``run_lifetime`` (the run's
    :class:`~podracer.run.lifetime.RunLifetime`; default: the one started last)."""

    def __init__(
        self,
        snapshot: Callable,
        save: Callable[[object, int], None],
        saved: Callable[[], int],
        *,
        enabled: bool = True,
        run_lifetime: lifetime.RunLifetime | None = None,
    ):
        self.snapshot, self.save, self.saved, self.enabled = snapshot, save, saved, enabled
        self.run_lifetime = run_lifetime or lifetime.current()
        self.last = time.monotonic()

    def completed(self, state, updates: int) -> None:
        """Update ``updates`` has completed."""
        now = time.monotonic()
        if self.enabled and now - self.last >= lifetime.GRACE_SECONDS / 2:
            copy = self.snapshot(state)
            self.run_lifetime.completed(lambda: self.save(copy, updates) if updates > self.saved() else None)
        self.last = time.monotonic()


class Progress:
    """What a run is doing, for the heartbeat line printed when no progress line has come for a while: env steps
    done of ``total_steps`` and the phase (starting, compiling, training), or instead what ``describe()`` says
    (Sebulba's learner and actor threads), then the ETA; and, once, a warning when the ETA passes a day
    (``what``: the flag that sets the run's length). ``done()``: the env steps done now, where the feeder knows them
    between progress lines (Sebulba's learner counts its updates)."""

    def __init__(
        self,
        total_steps: float,
        steps: float,
        main: bool,
        *,
        what: str = "",
        describe: Callable[[], list[str]] | None = None,
        first: str = "first call",
        done: Callable[[], float] | None = None,
    ):
        self.total, self.steps, self.main, self.what, self.describe = total_steps, steps, main, what, describe
        self.done = done
        self.first = first  # the start-up's last phase: until the first progress line
        self.phase, self.start, self.first_steps = "starting", time.monotonic(), steps
        self.heartbeat: lifetime.Heartbeat | None = None
        self.warned = False

    def event(self, text: str) -> None:
        """A feeder's progress: ``"compiling"`` (said), then ``"compiled in S s"`` (the clock of the ETA starts
        there; not said: the start-up line that comes with the first progress line gives the run's one compile
        figure)."""
        compiling = text == "compiling"
        self.phase = "compiling" if compiling else "training"
        if not compiling:
            startup.mark("compile")
        if self.main and compiling:
            print("podracer: compiling ...", flush=True)
        self.start, self.first_steps = time.monotonic(), self.steps

    def advanced(self, steps: float) -> None:
        """A progress line: ``steps`` env steps done. Beats the heartbeat; warns once of a run longer than a day."""
        self.steps, self.phase = steps, "training"
        if self.heartbeat is not None:
            self.heartbeat.beat()
        eta = self.eta()
        if self.main and not self.warned and eta is not None and eta > SLOW_RUN_SECONDS:
            self.warned = True
            print(
                f"podracer: at this pace the run needs about {eta / SLOW_RUN_SECONDS:.1f} days more"
                + (f" ({self.what} {self.total:,.0f})." if self.what else "."),
                flush=True,
            )

    def logging_to(self, log: Callable[[dict], None] | None):
        """``log`` preceded by :meth:`advanced` for every summary (its ``env_steps``)."""

        def write(summary):
            startup.mark(self.first)
            if self.main and (said := startup.line()):  # once, before the first progress line
                print(f"podracer: {said}", flush=True)
            self.advanced(summary.get("env_steps", self.steps))
            if log is not None:
                log(summary)

        return write

    def eta(self) -> float | None:
        done = self.steps - self.first_steps
        if done <= 0:
            return None
        return (self.total - self.steps) * (time.monotonic() - self.start) / done

    def status(self) -> str:
        if self.done is not None:
            self.steps = max(self.steps, self.done())
        eta = self.eta()
        if self.describe is not None:
            parts = [f"env steps {self.steps:,.0f}", *self.describe()]
        else:
            parts = [f"env steps {self.steps:,.0f}/{self.total:,.0f}", self.phase]
        if eta is not None:
            parts.append(f"ETA {eta:,.0f} s")
        return " | ".join(parts)


class AnakinCheckpoints:
    """An Anakin run's checkpoints: at the run kit's cadence (:class:`~podracer.run.runkit.Cadence`), of the last
    completed call on a stop that abandons the call in flight, and at the end."""

    def __init__(
        self,
        config,
        metadata: dict,
        steps_per_update: int,
        saved: int,
        entries: list[tuple[str, dict]],
        run_lifetime: lifetime.RunLifetime | None = None,
    ):
        """``config``: the run's (its checkpoint flags, seeds and sweep); ``entries``: where each entry of a run of
        several seeds or settings is saved at the end, with its metadata (``DIR/seed_S``, ``DIR/SETTING/seed_S``);
        ``run_lifetime``: the run's :class:`~podracer.run.lifetime.RunLifetime` (default: the one started last)."""
        self.config, self.metadata, self.steps_per_update, self._entries = config, metadata, steps_per_update, entries
        self.run_lifetime = run_lifetime or lifetime.current()
        self.cadence = Cadence(config.checkpoint_every, config.checkpoint_every_seconds, saved)
        one_run = config.num_seeds == 1 and not config.sweep  # several seeds save once, at the end
        self.stop_snapshot = StopSnapshot(
            self.snapshot,
            lambda copy, updates: self.save(None, updates, copy),
            lambda: self.saved,
            enabled=bool(config.checkpoint_dir) and one_run,
            run_lifetime=self.run_lifetime,
        )

    @property
    def saved(self) -> int:
        return self.cadence.saved

    @staticmethod
    def snapshot(state):
        """Host copies of what a checkpoint holds: this process's run state, and the learner (process 0). Only
        copies of device buffers, no computation: a snapshot may be saved from the signal's thread while the
        main thread runs the next call."""
        local = parallel.local_entries(state)
        learner = jax.tree.map(lambda x: x[0], local.learner) if parallel.is_main_process() else None
        kept = {}
        if learner is not None and local.population != ():  # a population: its best lane's learner
            lanes = jax.tree.map(lambda x: x[0], local.population)
            best = pbt.best_lane(lanes.fitness, lanes.return_sum, lanes.episodes)
            learner = jax.tree.map(lambda x: x[best], learner)
            values = {name: float(np.asarray(v)[best]) for name, v in lanes.values.items()}
            kept = {"population_lane": best, "population_values": values}  # what evaluate names
        return local, learner, kept

    def save(self, state, updates: int, snapshot=None) -> None:
        """A checkpoint after ``updates`` updates (of ``state``, or of its :meth:`snapshot`): every process's run
        state, then process 0's learner (a population's: its best lane's, named in the metadata with its values)."""
        local, learner, kept = snapshot or self.snapshot(state)
        checkpoint.save_run_state(self.config.checkpoint_dir, updates, None, local=local)
        if learner is not None:
            checkpoint.save(
                self.config.checkpoint_dir,
                learner,
                {**self.metadata, **kept, "env_steps": updates * self.steps_per_update},
            )
        self.cadence.saved_at(updates)

    def after_call(self, state, updates: int) -> None:
        if self.config.checkpoint_dir and self.cadence.due(updates):
            self.save(state, updates)
        self.stop_snapshot.completed(state, updates)

    def finish(self, result) -> None:
        if not self.run_lifetime.take_the_end():  # Ctrl-C abandoned a call and saves the last completed one
            lifetime.wait_for_the_end()
        config = self.config
        if not config.checkpoint_dir:
            return
        done = round(result.history[-1]["env_steps"] / self.steps_per_update) if result.history else self.saved
        if config.num_seeds == 1 and not config.sweep:
            if done > self.saved:  # the end of the run, or Ctrl-C
                self.save(result.state, done)
            return
        if parallel.is_main_process():  # one final checkpoint per seed: DIR/seed_S (a sweep: DIR/SETTING/seed_S)
            learner = parallel.unreplicate(result.state.learner)
            for i, (where, metadata) in enumerate(self._entries):
                checkpoint.save(
                    os.path.join(config.checkpoint_dir, where),
                    jax.tree.map(lambda x: x[i], learner),  # noqa: B023 - used at once
                    {**metadata, "env_steps": done * self.steps_per_update},
                )


def sebulba_checkpoints(config, metadata: dict, state, steps_per_update: int):
    """A Sebulba run's checkpoints: ``(state, updates done, save)``, the learner ``state`` resumed from
    ``--checkpoint-dir`` when asked (the metrics lines after it dropped, to be written again), and ``save(state,
    updates, replicated=True)`` for the learner loop (None without a directory)."""
    if not config.checkpoint_dir:
        return state, 0, None
    identity = metadata["resume_identity"]
    updates = 0
    hyper = metadata["agent_hyperparameters"]
    resumed = checkpoint.prepare(config.checkpoint_dir, resume=config.resume, identity=identity, hyperparameters=hyper)
    if resumed is not None:
        state, _ = checkpoint.restore(config.checkpoint_dir, state)
        updates = int(state.step)
        if config.log_dir and parallel.is_main_process():  # the resumed run writes the lines after it again
            logging_lib.keep_records_until(os.path.join(config.log_dir, "metrics.jsonl"), updates * steps_per_update)
    checkpoint.check_start_room(config.checkpoint_dir, checkpoint.tree_bytes(checkpoint.packed(state)))
    if parallel.is_main_process():
        checkpoint.mark_running(config.checkpoint_dir)

    def save(state, updates: int, replicated: bool = True) -> None:
        if parallel.is_main_process():
            checkpoint.save(
                config.checkpoint_dir,
                parallel.unreplicate(state) if replicated else state,
                {**metadata, "env_steps": updates * steps_per_update},
            )

    return state, updates, save


__all__ = [
    "AnakinCheckpoints",
    "Cadence",
    "Diverged",
    "Finished",
    "NonfiniteWatch",
    "PopulationDiverged",
    "ON_NONFINITE",
    "Progress",
    "SLOW_RUN_SECONDS",
    "StopSnapshot",
    "check_unfinished",
    "sebulba_checkpoints",
]
