"""A Sebulba run assembled: the learner step over the learner devices, the queue, the parameter store, one actor
thread per environment group list, the stuck-actor watch and the progress line, run until the plan's end.

:func:`train` takes what the composition root built (an agent with its optimizer, a device layout, environment
groups, a learner state, checkpoint and evaluation callbacks) and knows neither the agent registry nor the config.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import NamedTuple

import jax
import numpy as np

from podracer.run.plan import RunPlan
from podracer.run import disk, lifetime, multihost, parallel
from podracer.core.agents.base import Agent
from podracer.core.envs.base import HostEnv
from podracer.core.learner import make_learner_step, put_back_replay, replay_overwritten
from podracer.run.progress import Progress
from podracer.run.sebulba.actor import make_act, run_actor
from podracer.run.sebulba.learner_loop import Hooks, LearnerStatus, SebulbaResult, learn
from podracer.run.sebulba.pipeline import ActorStatus, ParamStore, StopAwareQueue
from podracer.run.sebulba.threads import ActorFailed, run
from podracer.core.types import LearnerState


class Actors(NamedTuple):
    """Where the actor threads run and what they step."""

    groups: Sequence[Sequence[HostEnv]]  # per actor thread, its environment groups
    threads_per_device: int  # actor threads per actor device (--actor-threads)
    first: int  # this process's first actor's number among every process's
    key: jax.Array  # actor i acts with fold_in(key, first + i)
    timeout: float  # seconds an actor may go without shipping a trajectory (--actor-timeout)
    max_policy_lag: int | None = None  # trajectories the learner may not have taken when one starts (--max-policy-lag)
    envpool_xla: bool = False  # each actor's rollout in one program through envpool's XLA step (--envpool-xla)


def train(
    plan: RunPlan,
    agent: Agent,
    state: LearnerState,
    hooks: Hooks,
    *,
    layout: parallel.Layout,
    actors: Actors,
    start_update: int = 0,
    unroll: bool = False,
    run_lifetime: lifetime.RunLifetime | None = None,
) -> SebulbaResult:
    """Learns from ``actors`` by the ``plan`` until ``plan.num_updates`` (``start_update`` done already) or
    ``hooks.stop``, as Anakin's :func:`podracer.run.anakin.run` trains by its plan.

    ``state`` is replicated over ``layout.learner_devices``; trajectories wait in a queue of ``plan.queue_size``; the
    learner step is ``agent``'s with ``agent.optimizer``. The hooks (:class:`~podracer.run.sebulba.learner_loop.Hooks`):
    ``save(state, updates, replicated=True)`` writes a checkpoint (the learner loop calls it at the plan's cadence and
    at the end; a stop that abandons the step in flight saves the last completed update's host copy with
    ``replicated=False``); ``log(summary)`` takes every log line; ``evaluate(state)`` runs every ``plan.eval_every``
    updates; a set ``stop`` ends the run. Only the main process prints.
    """
    main = parallel.is_main_process()
    step = learner_step(agent, layout.learner_devices, unroll=unroll, on_nonfinite=plan.on_nonfinite)
    step = multihost.arrive_before_first_call(step, "the compiled learner step")
    store, queue = ParamStore(layout.actor_devices), StopAwareQueue(plan.queue_size)
    threads, statuses = _actor_threads(plan, agent, layout, actors, store, queue, hooks.stop)
    watch = _Watch(statuses, actors.timeout, plan, start_update, main)
    save = hooks.save
    if save is not None:  # no checkpoint past a metrics line that could not be written (a full disk)
        save = _unless_log_failed(save, watch)
    learner = functools.partial(
        learn,
        plan,
        step,
        state,
        hooks._replace(save=save, log=watch.logging_to(hooks.log)),
        queue=queue,
        store=store,
        start_update=start_update,
        status=watch.learner,
        run_lifetime=run_lifetime,
    )
    with lifetime.Heartbeat(watch.progress.status, enabled=main) as heartbeat:
        watch.progress.heartbeat = heartbeat
        try:
            return run(learner, threads, hooks.stop, watch=watch.stuck)
        except ActorFailed as failure:  # what the thread was doing: its environment, inference, ...
            failure.doing = {status.name: status.doing for status in statuses}.get(failure.thread)
            raise


def learner_step(agent: Agent, devices: Sequence[jax.Device], *, unroll: bool = False, on_nonfinite: str = "stop"):
    """``step(state, trajectory) -> (state, metrics)``: ``agent``'s learner step over ``devices``, the state donated
    to it, so that a replay memory is written in place (not donated, every update copied the whole memory: SAC on
    HalfCheetah-v4 with a million-item memory stepped 9-11 env steps/s, 64-74 donated, on a 2-core AMD EPYC). The
    caller holds only the state it returns: an update that is not finite is discarded (``on_nonfinite`` "skip") or,
    "stop", returns the state it was given whole, the last finite one, to save; either way a replay agent's step then
    writes back the items its trajectory overwrote (:func:`~podracer.core.learner.put_back_replay`, a program of its
    own: a program that reads a memory before writing it copies it), and its metrics carry the ``nonfinite`` code it
    fetched to decide, on the host (the learner loop reads it as it reads a device's)."""
    in_place = on_nonfinite in ("skip", "stop") and agent.replay is not None
    step = parallel.device_map(
        make_learner_step(
            agent,
            agent.optimizer,
            axis_names=(parallel.DEVICE_AXIS,),
            unroll=unroll,
            skip_nonfinite=on_nonfinite == "skip",
            keep_last_finite=on_nonfinite == "stop",
            items_in_place=in_place,
        ),
        devices,
        donate_argnums=0,
    )
    if not in_place:
        return step
    overwritten = parallel.device_map(functools.partial(replay_overwritten, agent), devices, name="replay_overwritten")
    put_back = parallel.device_map(put_back_replay, devices, name="put_back_replay", donate_argnums=0)

    def step_in_place(state, trajectory):
        previous = overwritten(state, trajectory)
        state, metrics = step(state, trajectory)
        code = jax.device_get(parallel.unreplicate(metrics["nonfinite"]))  # waits for the step
        if code > 0:
            state = put_back(state, previous)
        return state, {**metrics, "nonfinite": np.asarray(code)[None]}  # fetched once: the loop reads it from here

    return step_in_place


def _actor_threads(plan, agent, layout, actors, store, queue, stop):
    """``(name -> thread function, statuses)``: one actor thread per entry of ``actors.groups``, each on its actor
    device with its own key, acting with the newest parameters of ``store`` and shipping to ``queue``."""
    act, threads, statuses = make_act(agent), {}, []
    for i, groups in enumerate(actors.groups):
        device = layout.actor_devices[i // actors.threads_per_device]
        name = f"actor-{actors.first + i}-device-{device.id}"
        statuses.append(ActorStatus(name, device))
        key = jax.random.fold_in(actors.key, actors.first + i)
        threads[name] = functools.partial(
            run_actor,
            plan,
            agent,
            groups,
            act=act,
            device=device,
            learner_devices=layout.learner_devices,
            key=key,
            store=store,
            queue=queue,
            stop=stop,
            status=statuses[i],
            max_policy_lag=actors.max_policy_lag,
            envpool_xla=actors.envpool_xla,
        )
    return threads, statuses


def _unless_log_failed(save, watch):
    def guarded(*args, **kwargs):
        if not watch.log_failed:
            save(*args, **kwargs)

    return guarded


class _Watch:
    """Stuck actors, the first learner step's compile time, and what the run is doing for the heartbeat line."""

    def __init__(self, statuses: list[ActorStatus], actor_timeout: float, plan: RunPlan, updates: int, main: bool):
        self.statuses, self.timeout, self.main = statuses, actor_timeout, main
        self.learner = LearnerStatus(updates=updates)
        self.log_failed = False  # a metrics line could not be written: no checkpoint may pass it
        self.progress = Progress(
            plan.total_env_steps,
            plan.env_steps(updates),
            main,
            what="--total-env-steps",
            describe=self._describe,
            first="first updates",
            done=lambda: plan.env_steps(self.learner.updates),
        )

    def stuck(self) -> str | None:
        now = time.monotonic()
        for status in self.statuses:
            if status.stuck_seconds(now) > self.timeout:
                return (
                    f"{status.name} produced no trajectory for {status.stuck_seconds(now):.0f} s (--actor-timeout "
                    f"{self.timeout:g}): it has been waiting on its {status.doing} for {now - status.since:.0f} s."
                )
        return None

    def _describe(self) -> list[str]:
        now = time.monotonic()
        return [f"learner: {self.learner.doing}", *(s.describe(now) for s in self.statuses)]

    def logging_to(self, log):
        def write(summary):
            compiled = self.learner.take_compiled_seconds()
            if self.main and compiled is not None:
                print(
                    f"podracer: the first learner step took {compiled:.1f} s, compilation included "
                    "(env steps/s leave it out)",
                    flush=True,
                )
            self.progress.advanced(summary.get("env_steps", self.progress.steps))
            if log is not None:
                try:
                    log(summary)
                except disk.DiskFull:
                    self.log_failed = True
                    raise

        return write


__all__ = ["Actors", "train"]
