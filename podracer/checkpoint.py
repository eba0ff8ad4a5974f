"""Saving and resuming a learner (orbax), with the metadata needed to rebuild the agent.

A checkpoint directory holds ``step_<updates>/`` (the learner state, written by orbax)
and ``step_<updates>.json`` (what ran: mode, environment, agent and its
hyper-parameters, updates and env steps). An Anakin run also writes
``step_<updates>.run/process_<i>/``: each process's entries of the whole run state
(learner, replay memory, environments, keys), from which ``--resume`` continues exactly.
The newest few are kept.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any

import jax
import numpy as np

from podracer import parallel
from podracer.types import LearnerState

_STEP = re.compile(r"^step_(\d+)$")


def _pack(state: LearnerState) -> dict[str, Any]:
    """What is saved: parameters, optimizer state, key, step and, for replay agents, the target network.

    A replay memory is not saved (it can be gigabytes); a resumed run refills it.
    """
    key = state.key
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    tree = {"params": state.params, "opt_state": state.opt_state, "key": key, "step": state.step}
    if hasattr(state.extra, "target_params"):
        tree["target_params"] = state.extra.target_params
    return tree


def _checkpointer():
    """An orbax checkpointer that this process drives alone (only process 0 saves in a multi-process run)."""
    import orbax.checkpoint as ocp

    me = parallel.process_index()
    return ocp.StandardCheckpointer(multiprocessing_options=ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me}))


def steps(directory: str) -> list[int]:
    """Update counts of the complete checkpoints in ``directory``, oldest first."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        match = _STEP.match(name)
        if match and os.path.exists(os.path.join(directory, f"{name}.json")):
            found.append(int(match.group(1)))
    return sorted(found)


def save(directory: str, state: LearnerState, metadata: dict[str, Any], *, keep: int = 3) -> str:
    """Writes ``state`` (one device's copy, host arrays) and ``metadata`` as ``step_<state.step>``."""
    directory = os.path.abspath(directory)
    os.makedirs(directory, exist_ok=True)
    step = int(np.asarray(state.step))
    path = os.path.join(directory, f"step_{step}")
    if os.path.exists(path):
        shutil.rmtree(path)
    checkpointer = _checkpointer()
    checkpointer.save(path, jax.device_get(_pack(state)))
    checkpointer.wait_until_finished()
    with open(f"{path}.json", "w", encoding="utf-8") as f:
        json.dump({**metadata, "updates": step}, f, indent=1)
    for old in steps(directory)[:-keep]:
        shutil.rmtree(os.path.join(directory, f"step_{old}"), ignore_errors=True)
        shutil.rmtree(os.path.join(directory, f"step_{old}.run"), ignore_errors=True)
        os.remove(os.path.join(directory, f"step_{old}.json"))
    return path


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _run_state_path(directory: str, step: int) -> str:
    return os.path.join(os.path.abspath(directory), f"step_{step}.run", f"process_{parallel.process_index()}")


def save_run_state(directory: str, step: int, tree) -> None:
    """Writes this process's entries of ``tree`` (stacked over devices) for checkpoint ``step``.

    Every process calls it, before the main process's :func:`save` of the same step.
    """
    path = _run_state_path(directory, step)
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    checkpointer = _checkpointer()
    checkpointer.save(path, parallel.local_entries(tree))
    checkpointer.wait_until_finished()


def restore_run_state(directory: str, step: int, template):
    """This process's entries of the run state saved at ``step``, shaped like ``template`` (stacked over
    devices, as :func:`save_run_state` took it): numpy arrays ``[local devices, ...]``, keys as keys."""
    path = _run_state_path(directory, step)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path!r} is missing: checkpoint step_{step} holds no run state for this process "
                                "(it was not written by an Anakin run of this layout).")
    local = parallel.local_entries(template)
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), local)
    tree = _checkpointer().restore(path, abstract)
    return jax.tree.map(lambda t, x: jax.random.wrap_key_data(np.asarray(x), impl=jax.random.key_impl(t)) if _is_key(t)
                        else np.asarray(x), template, tree)


def prepare(directory: str, *, resume: bool, identity: dict[str, Any]) -> int | None:
    """Checks ``directory`` at start-up; returns the step to resume from (``None``: a fresh run).

    One-line errors (``ValueError``) for a path that is a file or cannot be written, for
    checkpoints already there without ``resume`` (they would be mixed with this run's),
    for ``resume`` with nothing to resume, and for a checkpoint whose metadata differ from
    ``identity`` (for example ``{"mode": "anakin", "env": "catch", "agent": "a2c"}``).
    """
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"--checkpoint-dir {directory!r} is a file, not a directory.")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise ValueError(f"--checkpoint-dir {directory!r} cannot be created: {error.strerror}.") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"--checkpoint-dir {directory!r} is not writable.")
    found = steps(directory)
    if not resume:
        if found:
            raise ValueError(f"--checkpoint-dir {directory!r} already holds checkpoints; pass --resume to continue "
                             "that run or choose another --checkpoint-dir.")
        return None
    if not found:
        raise ValueError(f"--resume: no checkpoint in {directory!r} to resume from.")
    saved = read_metadata(directory, found[-1])
    differ = {k: saved.get(k) for k, v in identity.items() if saved.get(k) != v}
    if differ:
        got = ", ".join(f"{k} {v!r}" for k, v in differ.items())
        want = ", ".join(f"{k} {identity[k]!r}" for k in differ)
        raise ValueError(f"--resume: {directory!r} holds a checkpoint of {got}, not {want}.")
    return found[-1]


def read_metadata(directory: str, step: int | None = None) -> dict[str, Any]:
    """The metadata of the newest checkpoint (or of ``step``)."""
    step = latest(directory) if step is None else step
    with open(os.path.join(directory, f"step_{step}.json"), encoding="utf-8") as f:
        return json.load(f)


def latest(directory: str) -> int:
    found = steps(directory)
    if not found:
        raise FileNotFoundError(f"No podracer checkpoint in {directory!r}.")
    return found[-1]


def restore(directory: str, template: LearnerState, step: int | None = None) -> tuple[LearnerState, dict[str, Any]]:
    """The newest checkpoint (or ``step``) shaped like ``template``, as host arrays, and its metadata.

    ``template`` may be abstract (``jax.eval_shape`` of the initial state). Parts that are
    not saved (a replay memory) come back as they are in ``template``.
    """
    directory = os.path.abspath(directory)
    step = latest(directory) if step is None else step
    abstract = jax.eval_shape(_pack, template)
    tree = _checkpointer().restore(os.path.join(directory, f"step_{step}"), abstract)
    key = tree["key"]
    if jax.dtypes.issubdtype(template.key.dtype, jax.dtypes.prng_key):
        key = jax.random.wrap_key_data(key)  # podracer's keys are jax.random.key's default kind
    extra = template.extra
    if "target_params" in tree:
        extra = extra._replace(target_params=tree["target_params"])
    state = LearnerState(tree["params"], tree["opt_state"], key, np.asarray(tree["step"]), extra)
    return state, read_metadata(directory, step)
