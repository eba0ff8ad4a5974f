"""Saving and resuming a learner (orbax), with the metadata needed to rebuild the agent.

A checkpoint directory holds ``step_<updates>/`` (the learner state, written by orbax)
and ``step_<updates>.json`` (what ran: mode, environment, agent and its
hyper-parameters, updates and env steps). An Anakin run also writes
``step_<updates>.run/process_<i>/``: each process's entries of the whole run state
(learner, replay memory, environments, keys), from which ``--resume`` continues exactly.
The newest few are kept.

A checkpoint counts once its ``.json`` exists, and that file is written last and
atomically (a temporary file renamed), so a process killed during a save leaves the
previous checkpoints as they were. Restoring the newest checkpoint falls back past
ones that cannot be read (a truncated data file, a missing orbax ``_METADATA``, a
broken ``.json``), with a one-line warning naming each.

Rotation and "newest intact" are kept here rather than in orbax's ``CheckpointManager``: a checkpoint is two trees
written by different processes (process 0's learner; each process's own entries of the run state, saved without a
global array) and committed by one JSON file that ``podracer evaluate`` and ``preview`` read without orbax, and a
restore falls back past data that cannot be read; a move to the manager must keep this layout readable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from typing import Any

import jax
import numpy as np

from podracer.run import disk
from podracer.run import parallel
from podracer.run.resume_identity import changes_said, check_resume_identity
from podracer.core.types import LearnerState

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


def packed(state: LearnerState) -> dict[str, Any]:
    """What :func:`save` writes of ``state``."""
    return _pack(state)


def _checkpointer():
    """An orbax checkpointer that this process drives alone (only process 0 saves in a multi-process run)."""
    import orbax.checkpoint as ocp

    me = parallel.process_index()
    return ocp.StandardCheckpointer(
        multiprocessing_options=ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
    )


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


def describe_newest(directory: str) -> str:
    """The newest complete checkpoint of ``directory`` as a stop's last line names it: its path, or that there is
    none."""
    done = steps(directory)
    return os.path.join(directory, f"step_{done[-1]}") if done else f"none ({directory} holds no complete checkpoint)"


DiskFull = disk.DiskFull


# Room kept free beyond a checkpoint's own bytes (orbax's metadata, the JSON, the file system's blocks).
SPACE_MARGIN_BYTES = 1 << 20


def tree_bytes(tree) -> int:
    """Bytes of the arrays of ``tree`` (host or device arrays, or shapes): what a checkpoint of it writes, about."""
    return int(
        sum(
            np.prod(x.shape, dtype=np.int64) * (_key_bytes(x) if _is_key(x) else np.dtype(x.dtype).itemsize)
            for x in jax.tree.leaves(tree)
        )
    )


def _key_bytes(key) -> int:
    """Bytes of one PRNG key of ``key``'s implementation (threefry: 2 x uint32; rbg: 4 x uint32), as saved."""
    data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct((), key.dtype))
    return int(np.prod(data.shape, dtype=np.int64)) * np.dtype(data.dtype).itemsize


def local_bytes(tree) -> int:
    """Bytes of this process's entries of a tree of device arrays (stacked over devices, or not)."""
    return sum(tree_bytes(shard.data) for x in jax.tree.leaves(tree) for shard in x.addressable_shards)


def check_start_room(directory: str, per_save: int, keep: int = 3) -> None:
    """At start-up: a :class:`DiskFull` when the device holding ``directory`` has no room for one checkpoint of
    ``per_save`` bytes; a warning when it has less than the ``keep`` kept plus the one being written."""
    check_room(directory, per_save, "a checkpoint of this run")
    free = shutil.disk_usage(directory).free
    if free < (keep + 1) * per_save + SPACE_MARGIN_BYTES:
        _warn(
            f"--checkpoint-dir {directory!r}: a checkpoint of this run takes about {disk.size(per_save)}; the "
            f"device has {disk.size(free)} free, less than the {keep} kept and one more being written: it may fill."
        )


def _no_room(directory: str, needed: int, what: str) -> DiskFull:
    free = shutil.disk_usage(directory).free
    newest = steps(directory)
    kept = f"; step_{newest[-1]}, the newest complete checkpoint, is intact" if newest else ""
    return DiskFull(
        f"--checkpoint-dir {directory!r}: no room for {what}: it needs about {disk.size(needed)} (and "
        f"podracer keeps {disk.size(SPACE_MARGIN_BYTES)} spare) and the device has {disk.size(free)} free"
        f"{kept}; free some space or choose another --checkpoint-dir."
    )


def check_room(directory: str, needed: int, what: str) -> None:
    """A :class:`DiskFull` when the device holding ``directory`` has less than ``needed`` bytes (and a margin)
    free for ``what`` (for example "checkpoint step_40"); nothing is written."""
    if shutil.disk_usage(directory).free < needed + SPACE_MARGIN_BYTES:
        raise _no_room(directory, needed, what)


def _no_space(error: BaseException) -> bool:
    text = str(error)
    return getattr(error, "errno", None) == 28 or "No space left on device" in text or "os_error_code='28'" in text


def _written(directory: str, path: str, tree, what: str) -> None:
    """Saves ``tree`` at ``path`` (inside the checkpoint ``directory``) with orbax after checking for room; a disk
    that fills during the save (another writer) ends in a :class:`DiskFull`, what was half-written removed."""
    import logging

    needed = tree_bytes(tree)
    check_room(directory, needed, what)
    checkpointer = _checkpointer()
    orbax_log = logging.getLogger("absl")  # orbax reports a failed write from each of its threads, tracebacks and all
    level, failed = orbax_log.level, False
    orbax_log.setLevel(logging.CRITICAL)
    held = _hold_stderr()  # and so do tensorstore's callbacks, from C++
    try:
        checkpointer.save(path, tree)
        checkpointer.wait_until_finished()
    except Exception as error:
        if not _no_space(error):
            raise
        failed = True
        parent, name = os.path.split(path)
        for leftover in [path] + [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(name + ".orbax")]:
            shutil.rmtree(leftover, ignore_errors=True)
        raise _no_room(directory, needed, what) from None
    finally:
        orbax_log.setLevel(level)
        _release_stderr(held, replay=not failed)
        if failed:  # orbax's threads go on reporting the failure: the run ends with one line
            silence_stderr()


def _hold_stderr():
    """Standard error (file descriptor 2, C++ included) diverted to a temporary file; :func:`_release_stderr`
    restores it."""
    import tempfile

    sys.stderr.flush()
    saved, held = os.dup(2), tempfile.TemporaryFile()
    os.dup2(held.fileno(), 2)
    return saved, held


def _release_stderr(hold, replay: bool) -> None:
    """Standard error back where it was; what was written meanwhile follows when ``replay``."""
    saved, held = hold
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    if replay:
        held.seek(0)
        text = held.read()
        if text:
            os.write(2, text)
    held.close()


def silence_stderr() -> None:
    """Sends what this process writes to its standard error from here on (C++ and library threads included) to
    nowhere, but keeps Python's ``sys.stderr`` on the old stream: a run that ends on a full disk says so in one line."""
    sys.stderr.flush()
    kept = os.dup(2)
    sys.stderr = os.fdopen(kept, "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def directory_identity(directory: str) -> dict[str, Any]:
    """Which directory this is: its absolute path, and its device and inode (which a move keeps, a copy does not)."""
    info = os.stat(directory)
    return {"path": os.path.abspath(directory), "device": info.st_dev, "inode": info.st_ino}


def same_directory(identity: dict[str, Any], directory: str) -> bool:
    """Whether ``directory`` is the one ``identity`` (:func:`directory_identity`) describes: the same path (a
    volume mounted again there, on another node), or the same inode on the same device (the directory moved); a copy
    is neither."""
    here = directory_identity(directory)
    return here["path"] == identity.get("path") or (
        (here["device"], here["inode"]) == (identity.get("device"), identity.get("inode"))
    )


def save(directory: str, state: LearnerState, metadata: dict[str, Any], *, keep: int = 3) -> str:
    """Writes ``state`` (one device's copy, host arrays) and ``metadata`` as ``step_<state.step>``; a
    :class:`DiskFull` (nothing written) when the device has no room for it."""
    directory = os.path.abspath(directory)
    os.makedirs(directory, exist_ok=True)
    step = int(np.asarray(state.step))
    path = os.path.join(directory, f"step_{step}")
    if os.path.exists(path):
        shutil.rmtree(path)
    try:
        _written(directory, path, jax.device_get(_pack(state)), f"checkpoint step_{step}")
    except DiskFull:
        shutil.rmtree(f"{path}.run", ignore_errors=True)  # this step's run state: no checkpoint without its learner
        raise
    with open(f"{path}.json.tmp", "w", encoding="utf-8") as f:
        json.dump({**metadata, "updates": step, "written_in": directory_identity(directory)}, f, indent=1)
    os.replace(f"{path}.json.tmp", f"{path}.json")  # the checkpoint counts from here on
    for old in steps(directory)[:-keep]:
        shutil.rmtree(os.path.join(directory, f"step_{old}"), ignore_errors=True)
        shutil.rmtree(os.path.join(directory, f"step_{old}.run"), ignore_errors=True)
        os.remove(os.path.join(directory, f"step_{old}.json"))
    return path


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _run_state_path(directory: str, step: int) -> str:
    return os.path.join(os.path.abspath(directory), f"step_{step}.run", f"process_{parallel.process_index()}")


def save_run_state(directory: str, step: int, tree, *, local=None) -> None:
    """Writes this process's entries of ``tree`` (stacked over devices) for checkpoint ``step``.

    Every process calls it, before the main process's :func:`save` of the same step. ``local``: this
    process's entries already copied to the host (:func:`podracer.run.parallel.local_entries`), instead of ``tree``.
    """
    path = _run_state_path(directory, step)
    if os.path.exists(path):
        shutil.rmtree(path)
    tree = parallel.local_entries(tree) if local is None else local
    check_room(os.path.abspath(directory), tree_bytes(tree), f"the run state of checkpoint step_{step}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _written(os.path.abspath(directory), path, _stand_in_for_empty(tree), f"the run state of checkpoint step_{step}")


def _stand_in_for_empty(tree):
    """``tree`` with each array of no elements replaced by one element of its dtype: orbax refuses to save arrays
    of size 0 (MJX's state holds them for a model without actuators, ``data.act``), which hold nothing to restore."""
    return jax.tree.map(lambda x: np.zeros((1,), x.dtype) if np.size(x) == 0 else x, tree)


_WARNED: set[str] = set()


def _warn(message: str) -> None:
    print(f"podracer: warning: {message}", file=sys.stderr, flush=True)


def _reason(error: BaseException) -> str:
    """One line about why a checkpoint could not be read."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _mismatch_message(directory: str, step: int, error: BaseException) -> str | None:
    """One line when ``error`` says a complete checkpoint is shaped for another run (agent, network or optimizer)
    rather than damaged: why, and what to do; None for damage."""
    if "Structure mismatch" not in str(error) and "ree structure" not in str(error):
        return None
    older = "run" not in read_metadata(directory, step)  # written before checkpoints recorded the run's facts
    why = (
        "it was written by an earlier podracer, whose optimizer state did not hold its learning rate (optax."
        "inject_hyperparams): use the podracer that wrote it"
        if older
        else "its arrays are laid out for another agent, network or optimizer than this run's settings"
    )
    reason = _reason(error)
    return f"checkpoint {directory}/step_{step} does not fit this run ({reason}): {why}; or a new --checkpoint-dir."


def _newest_intact(directory: str, load, what: str):
    """``(load(step), step)`` for the newest step of ``directory`` that ``load`` reads, warning about each
    newer one that it cannot; in a multi-process run every process ends on the same step."""
    found = steps(directory)
    if not found:
        raise ValueError(f"No podracer checkpoint in {directory!r}.")
    result, chosen = None, None
    for step in reversed(found):
        try:
            result, chosen = load(step), step
            break
        except Exception as error:  # noqa: BLE001 - orbax, JSON and file errors all mean "not intact"
            path = os.path.join(directory, f"step_{step}")
            if message := _mismatch_message(directory, step, error):  # complete, but another run's: no older fits
                raise ValueError(message) from None
            if path not in _WARNED:  # once per checkpoint, though the metadata and then the state are tried
                _WARNED.add(path)
                _warn(f"{what} {path} cannot be restored ({_reason(error)}); using the previous checkpoint.")
    agreed = parallel.agree_on_min(-1 if chosen is None else chosen)
    if agreed < 0:
        raise ValueError(
            f"No intact checkpoint in {directory!r} (tried {', '.join(f'step_{s}' for s in reversed(found))})."
        )
    if agreed != chosen:  # another process could not read this one: all take the newest every process reads
        result = load(agreed)
    return result, agreed


def restore_newest_run_state(directory: str, template):
    """``(run state, step)``: :func:`restore_run_state` of the newest checkpoint whose metadata and run state
    are intact (see :func:`_newest_intact`)."""
    directory = os.path.abspath(directory)

    def load(step):
        read_metadata(directory, step)
        return restore_run_state(directory, step, template)

    return _newest_intact(directory, load, "run state of")


def restore_run_state(directory: str, step: int, template):
    """This process's entries of the run state saved at ``step``, shaped like ``template`` (stacked over
    devices, as :func:`save_run_state` took it): numpy arrays ``[local devices, ...]``, keys as keys."""
    path = _run_state_path(directory, step)
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"{path!r} is missing: checkpoint step_{step} holds no run state for this process "
            "(it was not written by an Anakin run of this layout)."
        )
    local = parallel.local_entries(template)
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), _stand_in_for_empty(local))
    tree = _checkpointer().restore(path, abstract)
    tree = jax.tree.map(lambda t, x: np.zeros(t.shape, t.dtype) if np.size(t) == 0 else x, local, tree)
    return jax.tree.map(
        lambda t, x: (
            jax.random.wrap_key_data(np.asarray(x), impl=jax.random.key_impl(t)) if _is_key(t) else np.asarray(x)
        ),
        template,
        tree,
    )


def prepare(
    directory: str,
    *,
    resume: str | bool,
    identity: dict[str, Any],
    hyperparameters: dict | None = None,
    run: dict | None = None,
) -> int | None:
    """Checks ``directory`` at start-up; returns the step to resume from (``None``: a fresh run).

    ``resume`` is ``"no"``, ``"yes"`` or ``"auto"`` (``--resume``; ``True`` and ``False`` mean yes and no):
    ``"auto"`` resumes when ``directory`` holds a checkpoint and starts fresh when it holds none, so one
    command line serves every attempt of a requeued job. One-line errors (``ValueError``) for a path that is
    a file or cannot be written, for checkpoints already there with ``"no"`` (they would be mixed with this
    run's), for ``"yes"`` with nothing to resume, and for a checkpoint whose metadata differ from ``identity``
    (for example ``{"mode": "anakin", "env": "catch", "agent": "a2c"}``). A resume that changes hyper-parameters
    shaping no saved state (``hyperparameters``: this run's agent's, by flag name; ``run``: its run flags that
    shape none, :data:`podracer.run.resume_identity.SAID`) says so in one line.
    """
    resume = {True: "yes", False: "no"}.get(resume, resume)
    disk.writable_directory(directory, f"--checkpoint-dir {directory!r}")
    if removed := disk.remove_unfinished(directory, parallel.process_index(), parallel.is_main_process()):
        print(f"podracer: removed what saves cut short left in {directory}: {', '.join(removed)}", flush=True)
    found = steps(directory)
    if resume == "auto" and not found:
        return None
    if resume == "no":
        if found:
            raise ValueError(
                f"--checkpoint-dir {directory!r} already holds checkpoints; pass --resume (or "
                "--resume auto) to continue that run or choose another --checkpoint-dir."
            )
        return None
    if not found:
        raise ValueError(f"--resume: no checkpoint in {directory!r} to resume from.")
    saved, newest = newest_metadata(directory)
    check_resume_identity(directory, saved, identity)
    said = changes_said(saved, hyperparameters, run) if hyperparameters is not None else ""
    if said and parallel.is_main_process():
        print(f"podracer: {said}", flush=True)
    return newest


FINISHED = "finished.json"  # in a checkpoint directory while no run is writing to it (python -m podracer.cli.preview)


def mark_running(directory: str) -> None:
    """A run starts writing to ``directory``: ``python -m podracer.cli.preview`` keeps watching."""
    if os.path.exists(os.path.join(directory, FINISHED)):
        os.remove(os.path.join(directory, FINISHED))


def mark_finished(directory: str) -> None:
    """The run writing to ``directory`` has ended (done, stopped or failed): a preview may end too."""
    with open(os.path.join(directory, FINISHED), "w", encoding="utf-8") as f:
        json.dump({"steps": steps(directory)}, f)


def read_metadata(directory: str, step: int | None = None) -> dict[str, Any]:
    """The metadata of the newest checkpoint (or of ``step``); a ``ValueError`` naming the file when it cannot be
    read."""
    step = latest(directory) if step is None else step
    path = os.path.join(directory, f"step_{step}.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error.msg}, line {error.lineno}).") from None
    except OSError as error:
        raise ValueError(f"{path} cannot be read ({error.strerror}).") from None


def newest_metadata(directory: str) -> tuple[dict[str, Any], int]:
    """``(metadata, step)`` of the newest checkpoint whose ``.json`` reads, warning about newer ones that do not."""
    return _newest_intact(directory, lambda step: read_metadata(directory, step), "metadata of")


def latest(directory: str) -> int:
    found = steps(directory)
    if not found:
        raise FileNotFoundError(f"No podracer checkpoint in {directory!r}.")
    return found[-1]


def restore(directory: str, template: LearnerState, step: int | None = None) -> tuple[LearnerState, dict[str, Any]]:
    """The newest intact checkpoint (or ``step``) shaped like ``template``, as host arrays, and its metadata.

    ``template`` may be abstract (``jax.eval_shape`` of the initial state). Parts that are
    not saved (a replay memory) come back as they are in ``template``. Without ``step``,
    a newest checkpoint that cannot be read is skipped with a warning naming it.
    """
    directory = os.path.abspath(directory)
    if step is None:
        return _newest_intact(directory, lambda step: restore(directory, template, step), "checkpoint")[0]
    metadata = read_metadata(directory, step)
    abstract = jax.eval_shape(_pack, template)
    tree = _checkpointer().restore(os.path.join(directory, f"step_{step}"), abstract)
    key = tree["key"]
    if jax.dtypes.issubdtype(template.key.dtype, jax.dtypes.prng_key):
        key = jax.random.wrap_key_data(key)  # podracer's keys are jax.random.key's default kind
    extra = template.extra
    if "target_params" in tree:
        extra = extra._replace(target_params=tree["target_params"])
    state = LearnerState(tree["params"], tree["opt_state"], key, np.asarray(tree["step"]), extra)
    _RESTORED[directory] = step
    return state, metadata


_RESTORED: dict[str, int] = {}  # each directory's step that restore last read, what evaluate and preview played


def restored_step(directory: str) -> int | None:
    """The step :func:`restore` last read from ``directory`` in this process (the newest intact one, where it was
    asked for the newest), or None: what a reader of the newest checkpoint really played."""
    return _RESTORED.get(os.path.abspath(directory))
