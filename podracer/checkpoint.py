"""Saving and resuming a learner (orbax), with the metadata needed to rebuild the agent.

A checkpoint directory holds ``step_<updates>/`` (the learner state, written by orbax)
and ``step_<updates>.json`` (what ran: mode, environment, agent and its
hyper-parameters, updates and env steps). The newest few are kept.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any

import jax
import numpy as np

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

    me = jax.process_index()
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
        os.remove(os.path.join(directory, f"step_{old}.json"))
    return path


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
