"""When a training run saves and what, the same in both modes: a checkpoint every ``--checkpoint-every`` updates or
once ``--checkpoint-every-seconds`` have passed (:class:`Cadence`; every process of a run agrees, since each writes
its part), host copies of the last completed update that a stop saves (:class:`StopSnapshot`), each mode's
checkpoints at that cadence, on a stop and at the end (:class:`AnakinCheckpoints`, :func:`sebulba_checkpoints`), and a
resume that finds its run done (:func:`check_unfinished`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import jax
import numpy as np

from podracer.run import checkpoint, lifetime, parallel
from podracer.core import pbt
from podracer.run import logging as logging_lib
from podracer.run.resume_identity import check_resume_identity


class Finished(Exception):
    """``--resume`` found the run done (:func:`check_unfinished`): the command says so and exits 0."""


def check_unfinished(
    directory: str | None, resume: str, num_updates: int, budget: str, identity: dict | None = None
) -> None:
    """Raises :class:`Finished`, before anything is compiled, when ``--resume`` (``yes`` or ``auto``) would continue a
    run whose newest checkpoint in ``directory`` already holds its ``num_updates`` updates (``budget``: the flag that
    sets the run's length); first, with ``identity`` (:func:`podracer.run.compose.resume_identity`), the checkpoint must
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


class AnakinCheckpoints:
    """An Anakin run's checkpoints: at the run kit's cadence (:class:`~podracer.run.saving.Cadence`), of the last
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
        if config.log_dir and parallel.is_main_process():  # the record goes on from the checkpoint: none past it
            logging_lib.check_no_records_after(config.log_dir, updates * steps_per_update, updates)
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


__all__ = ["AnakinCheckpoints", "Cadence", "Finished", "StopSnapshot", "check_unfinished", "sebulba_checkpoints"]
