"""A run's plan: its sizes, its length and its run policy, resolved once before anything is built.

Every later step reads the plan (the agent's schedules through :attr:`RunPlan.facts`, the host loops, the banner,
checkpoints, logging); none recomputes a size from the flags. The environment steps of one update are
:attr:`RunPlan.env_steps_per_update`, computed here and nowhere else.

:func:`anakin_plan` and :func:`sebulba_plan` make one from numbers (a notebook's or a command line's); the command
line resolves its config into them (:func:`podracer.run.compose.anakin_plan`,
:func:`podracer.run.compose.sebulba_plan`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import jax

from podracer.run import parallel
from podracer.core.precision import check_compute_dtype
from podracer.core.types import RunFacts


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """What a run does, in numbers: how many environments step, for how long, on which devices, and what it does
    when an update is not finite or an evaluation reaches its target."""

    num_updates: int  # learner updates in the whole run
    rollout_length: int  # environment steps per trajectory
    num_envs: int  # environments stepped for one update: every device and process together (one seed's)
    envs_per_batch: int  # Anakin: environments each device steps; Sebulba: each actor thread
    envs_per_learner: int  # environments whose trajectories each learner device receives per update
    total_env_steps: int  # the run's budget in env steps, as the agent's schedules are told it
    updates_per_call: int = 1  # Anakin: updates scanned per host call
    devices: tuple[jax.Device, ...] | None = None  # Anakin: the devices of the update (None: all of every process)
    eval_every: int | None = None  # updates between evaluations (None: none)
    target_return: float | None = None  # an evaluation reaching this return ends the run (None: never)
    on_nonfinite: str = "stop"  # a non-finite update: stop the run, skip it (in the program), or continue
    log_every: int = 1  # Sebulba: updates between summaries (Anakin: one summary per host call)
    checkpoint_every: int | None = None  # Sebulba: updates between checkpoints (None: at the end and on a stop)
    checkpoint_every_seconds: float | None = None  # Sebulba: also a checkpoint once this long has passed since one
    queue_size: int = 1  # Sebulba: trajectories that may wait for the learner
    frame_skip: int = 1  # frames per env step (4 for Atari), for frames/s
    compute_dtype: str = "float32"  # the networks' matmuls and activations (podracer.core.precision)
    rollout_unroll: int = 1  # Anakin: environment steps written out in each iteration of the rollout's loop

    def __post_init__(self):
        if self.num_updates < 1:
            raise ValueError(f"a run needs at least one update, got num_updates={self.num_updates}.")
        check_compute_dtype(self.compute_dtype)

    @property
    def env_steps_per_update(self) -> int:
        """Environment steps of one update, every device and process together (per seed)."""
        return self.num_envs * self.rollout_length

    def env_steps(self, updates: int) -> int:
        """Environment steps (per seed) after ``updates`` updates."""
        return updates * self.env_steps_per_update

    @property
    def facts(self) -> RunFacts:
        """What an agent factory is told of the run (:class:`~podracer.core.types.RunFacts`; checkpoints record it)."""
        return RunFacts(
            self.num_updates, self.envs_per_learner, self.rollout_length, self.total_env_steps, self.compute_dtype
        )


def anakin_plan(
    *,
    num_envs_per_device: int,
    rollout_length: int,
    num_updates: int | None = None,
    total_env_steps: int | None = None,
    updates_per_call: int = 1,
    devices: Sequence[jax.Device] | None = None,
    eval_every: int | None = None,
    target_return: float | None = None,
    on_nonfinite: str = "stop",
    num_devices: int | None = None,
    compute_dtype: str = "float32",
    rollout_unroll: int = 1,
) -> RunPlan:
    """The plan of an Anakin run on ``devices`` (default: every device of every process), each stepping
    ``num_envs_per_device`` environments. Its length is ``num_updates``, or ``total_env_steps`` rounded up to whole
    host calls of ``updates_per_call`` updates (so that every call runs the one compiled program). ``num_devices``
    counts the devices instead of ``devices`` (a plan for a machine other than this one)."""
    devices = tuple(devices) if devices is not None else None
    num_devices = parallel.num_global_devices(devices) if num_devices is None else num_devices
    num_envs = num_envs_per_device * num_devices
    per_update = num_envs * rollout_length
    if total_env_steps is not None:
        num_updates = -(-total_env_steps // (per_update * updates_per_call)) * updates_per_call
    if num_updates is None:
        raise ValueError("an Anakin plan needs num_updates or total_env_steps.")
    return RunPlan(
        num_updates=num_updates,
        rollout_length=rollout_length,
        num_envs=num_envs,
        envs_per_batch=num_envs_per_device,
        envs_per_learner=num_envs_per_device,  # each device learns from its own environments
        total_env_steps=num_updates * per_update,
        updates_per_call=updates_per_call,
        devices=devices,
        eval_every=eval_every,
        target_return=target_return,
        on_nonfinite=on_nonfinite,
        compute_dtype=compute_dtype,
        rollout_unroll=rollout_unroll,
    )


def sebulba_plan(
    *,
    num_envs_per_actor: int,
    rollout_length: int,
    total_env_steps: int,
    num_learner_devices: int,
    num_processes: int = 1,
    eval_every: int | None = None,
    target_return: float | None = None,
    on_nonfinite: str = "stop",
    log_every: int = 1,
    checkpoint_every: int | None = None,
    checkpoint_every_seconds: float | None = None,
    queue_size: int = 1,
    frame_skip: int = 1,
    compute_dtype: str = "float32",
) -> RunPlan:
    """The plan of a Sebulba run of ``num_processes`` processes: each update takes one trajectory of
    ``num_envs_per_actor`` environments per process, split over that process's ``num_learner_devices`` learner
    devices; ``total_env_steps`` rounded up to whole updates, as Anakin's is (to whole host calls there), and the
    plan's budget is the rounded one (what the agent's schedules are told)."""
    num_envs = num_envs_per_actor * num_processes
    num_updates = math.ceil(total_env_steps / (num_envs * rollout_length))
    return RunPlan(
        num_updates=num_updates,
        rollout_length=rollout_length,
        num_envs=num_envs,
        envs_per_batch=num_envs_per_actor,
        envs_per_learner=num_envs_per_actor // num_learner_devices,
        total_env_steps=num_updates * num_envs * rollout_length,
        eval_every=eval_every,
        target_return=target_return,
        on_nonfinite=on_nonfinite,
        log_every=log_every,
        checkpoint_every=checkpoint_every,
        checkpoint_every_seconds=checkpoint_every_seconds,
        queue_size=queue_size,
        frame_skip=frame_skip,
        compute_dtype=compute_dtype,
    )


__all__ = ["RunPlan", "anakin_plan", "sebulba_plan"]
