"""The Sebulba learner loop: trajectories from the queue, the learner step on the learner devices, parameters out."""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from podracer.run.plan import RunPlan
from podracer.run import lifetime, parallel
from podracer.run.saving import Cadence, StopSnapshot
from podracer.run.nonfinite import NonfiniteWatch
from podracer.run.sebulba.pipeline import ParamStore, StopAwareQueue, Stopped
from podracer.core.types import LearnerState


@dataclasses.dataclass
class LearnerStatus:
    """What the learner loop is doing, written by its thread and read by the run's watch (the heartbeat line, the
    first step's compile line)."""

    doing: str = "starting"
    updates: int = 0  # updates done
    compiled_seconds: float | None = None  # the first learner step's seconds, compilation included, until taken

    def take_compiled_seconds(self) -> float | None:
        """The first step's seconds once (None before it is done, and after it is taken)."""
        seconds, self.compiled_seconds = self.compiled_seconds, None
        return seconds


class SebulbaResult(NamedTuple):
    state: LearnerState  # replicated over the learner devices
    history: list[dict[str, float]]  # one summary per log line
    updates: int  # learner updates done, those before a resume included
    # updates that were not finite, of those this run took: --on-nonfinite skip's or continue's
    nonfinite: tuple[int, int] = (0, 0)


class Hooks(NamedTuple):
    """What the learner loop calls along the way (each optional but ``stop``), as Anakin's loop takes its hooks."""

    stop: threading.Event  # once set, the loop ends after the update in flight
    log: Callable[[dict[str, float]], None] | None = None  # every summary
    save: Callable[..., None] | None = None  # save(state, updates, replicated=True): a checkpoint
    evaluate: Callable[[LearnerState], dict[str, float]] | None = None  # every ``plan.eval_every`` updates


def learn(
    plan: RunPlan,
    step,
    state: LearnerState,
    hooks: Hooks,
    *,
    queue: StopAwareQueue,
    store: ParamStore,
    start_update: int = 0,
    status: LearnerStatus | None = None,
    run_lifetime: lifetime.RunLifetime | None = None,
) -> SebulbaResult:
    """Learns from the queue's trajectories until ``plan.num_updates`` or ``hooks.stop``.

    ``step(state, trajectory) -> (state, metrics)`` is the learner step mapped over the learner
    devices, which may take the state it is given (donated: :func:`~podracer.run.sebulba.assemble.learner_step`), so the
    loop keeps only what it returns (under ``stop``, an update that is not finite returns the last finite state).
    ``start_update``: the updates already done (a resumed run). After every update the new
    parameters go to ``store``. ``hooks.save(state, updates)`` runs at the plan's cadence
    (:class:`~podracer.run.saving.Cadence`) and, when the loop ends for any reason, for updates not yet
    saved. ``status`` (:class:`LearnerStatus`) hears what the loop is doing, the updates done and the
    first step's seconds. A stop that abandons the step in flight saves the last completed update's host copy
    (:class:`~podracer.run.saving.StopSnapshot`; ``save(copy, updates, replicated=False)``). ``hooks.evaluate(state)``
    runs every ``plan.eval_every`` updates and after the last (the closing figure is then the evaluation of the
    parameters saved last); its entries join a summary logged at once, and the
    loop ends when it holds a true ``target_reached``. An update whose loss, gradients or parameters are not finite
    (``plan.on_nonfinite``, :class:`~podracer.run.nonfinite.NonfiniteWatch`) raises
    :class:`~podracer.run.nonfinite.Diverged` under ``stop``, before its parameters reach the actors or a checkpoint
    (the last finite update is saved as at any end); summaries count such updates in ``nonfinite_updates``.
    ``run_lifetime``: the run's :class:`~podracer.run.lifetime.RunLifetime` (default: the one started last).
    """
    run_lifetime = run_lifetime or lifetime.current()
    updates, stop, save, evaluate = start_update, hooks.stop, hooks.save, hooks.evaluate
    status, log, history = (
        (LearnerStatus(updates=updates) if status is None else status),
        (hooks.log or (lambda summary: None)),
        [],
    )
    first, cadence = updates, Cadence(plan.checkpoint_every, plan.checkpoint_every_seconds, updates)
    store.publish(parallel.unreplicate(state.params), updates)
    window, clock = _Window(), _Clock(updates * plan.env_steps_per_update)
    abandoned = (lambda copy, done: save(copy, done, replicated=False)) if save is not None else None
    snapshot = StopSnapshot(
        parallel.host_entry, abandoned, lambda: cadence.saved, enabled=save is not None, run_lifetime=run_lifetime
    )
    nonfinite = NonfiniteWatch(plan.on_nonfinite, parallel.is_main_process())
    try:
        while updates < plan.num_updates and not stop.is_set():
            status.doing = "waiting for trajectories"
            try:
                rollout, waited = queue.get(stop)
            except Stopped:  # the run is stopping
                break
            status.doing = f"update {updates + 1}" + (" (compiling the learner step)" if updates == first else "")
            learn_start = time.perf_counter()
            # The step takes the state (donated): what it returns is the one to keep, the last finite state where
            # an update is not finite and the run stops (--on-nonfinite stop) or skips it.
            state, metrics = step(state, rollout.trajectory)
            code = jax.device_get(parallel.unreplicate(metrics.pop("nonfinite", 0.0)))  # waits for the step
            window.nonfinite += nonfinite.check([code], updates)  # stop: raises; the last finite state is saved
            updates += 1
            if updates == first + 1:  # compiled: steps/s count from here (unless this update is logged now)
                status.compiled_seconds = clock.compiled(state, learn_start, updates, plan)
            status.updates = updates
            snapshot.completed(state, updates)
            store.publish(parallel.unreplicate(state.params), updates)
            jax.block_until_ready(state.params)
            lag = updates - rollout.policy_version - 1
            window.add(rollout, metrics, waited, time.perf_counter() - learn_start, lag)
            if save is not None and cadence.due(updates):
                save(state, updates)
                cadence.saved_at(updates)
            # every --eval-every updates, and at the end: the closing figure is the evaluation of what is saved last
            last = updates == plan.num_updates
            if evaluate is not None and plan.eval_every and (updates % plan.eval_every == 0 or last):
                window.evaluation = evaluate(state)
            if updates % plan.log_every == 0 or updates == plan.num_updates or window.evaluation:
                history.append(window.summary(updates * plan.env_steps_per_update, clock, plan, queue.qsize()))
                log(history[-1])
                window = _Window()
                if history[-1].get("target_reached"):
                    break
    finally:
        if not run_lifetime.take_the_end():  # Ctrl-C abandoned the step in flight and saves the last completed one
            lifetime.wait_for_the_end()
        if save is not None and updates > cadence.saved:  # the end of the run, a stop, Ctrl-C or a failure
            if _given_away(state):  # a step that failed took it: its host copy, if any, was saved by the snapshot
                print(
                    f"podracer sebulba: update {updates} not saved: the learner step that failed held its state",
                    file=sys.stderr,
                    flush=True,
                )
            else:
                save(state, updates)
    return SebulbaResult(state, history, updates, (nonfinite.count, nonfinite.seen))


def _given_away(state: LearnerState) -> bool:
    """Whether a donating step took ``state``'s buffers (a step that raised after taking them)."""
    return any(isinstance(x, jax.Array) and x.is_deleted() for x in jax.tree.leaves(state))


def _seconds_until_ready(state: LearnerState, start: float) -> float:
    jax.block_until_ready(state.params)
    return time.perf_counter() - start


class _Clock:
    """Env steps per second between two log lines."""

    def __init__(self, steps: float):
        self.restart(steps)

    def restart(self, steps: float) -> None:
        self.time, self.steps = time.perf_counter(), steps

    def compiled(self, state: LearnerState, start: float, updates: int, plan: RunPlan) -> float:
        """The first update has completed: the seconds it took since ``start``, compilation included; the clock
        restarts after it unless that update is logged now."""
        seconds = _seconds_until_ready(state, start)
        if updates % plan.log_every:
            self.restart(updates * plan.env_steps_per_update)
        return seconds

    def rate(self, steps: float) -> float:
        now = time.perf_counter()
        rate = (steps - self.steps) / max(now - self.time, 1e-9)
        self.time, self.steps = now, steps
        return rate


class _Window:
    """Metrics gathered between two log lines."""

    def __init__(self):
        self.returns: deque = deque(maxlen=1000)
        self.lengths: deque = deque(maxlen=1000)
        self.metrics: list = []
        self.learner_wait = self.learn = 0.0
        self.actor = {"env": 0.0, "act": 0.0, "ship": 0.0, "put_wait": 0.0}
        self.lags: list[int] = []
        self.evaluation: dict[str, float] = {}
        self.nonfinite = 0  # updates whose loss, gradients or parameters were not finite

    def add(self, rollout, metrics, waited, learn_seconds, lag):
        self.returns.extend(rollout.episode_returns)
        self.lengths.extend(rollout.episode_lengths)
        self.metrics.append(metrics)
        self.learner_wait += waited
        self.learn += learn_seconds
        for k, v in rollout.actor_seconds.items():
            self.actor[k] += v
        self.lags.append(lag)

    def summary(self, env_steps, clock: _Clock, plan: RunPlan, queue_size) -> dict[str, float]:
        sps, frame_skip = clock.rate(env_steps), plan.frame_skip
        metrics = jax.device_get(jax.tree.map(lambda *x: np.stack(x), *map(parallel.unreplicate, self.metrics)))
        out = {"env_steps": float(env_steps), "sps": sps, "fps": sps * frame_skip}
        out["episode_return"] = float(np.mean(self.returns)) if self.returns else float("nan")
        out["episode_length"] = float(np.mean(self.lengths)) if self.lengths else float("nan")
        out["episodes"] = float(len(self.returns))
        out.update({k: float(np.mean(v)) for k, v in metrics.items()})
        out["nonfinite_updates"] = self.nonfinite
        out["learner_wait_s"] = self.learner_wait
        out["learn_s"] = self.learn
        out.update({f"actor_{k}_s": v for k, v in self.actor.items()})
        out["policy_lag"] = float(statistics.mean(self.lags))
        out["queue_size"] = float(queue_size)
        out["host_memory_mb"] = host_memory_mb()
        out.update(self.evaluation)
        return out


def host_memory_mb() -> float:
    """This process's resident memory in MiB (peak resident memory where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10
