"""Device layout: the only module that knows how work is spread over devices and hosts.

One mesh axis, :data:`~podracer.core.axes.DEVICE_AXIS` (named in :mod:`podracer.core.axes` with the collectives over it,
and importable from here), spans every device of every process. The library's
multi-device programs are ``jax.jit`` of ``jax.shard_map`` over that :class:`~jax.sharding.Mesh`
(:func:`device_map`): they take and return global arrays with a leading axis of one entry
per device, split over the mesh, and the per-device function inside sees one entry and
reaches every device of every process through collectives over :data:`DEVICE_AXIS`
(``pmean``, ``psum``). A user's own ``pmap`` over :data:`DEVICE_AXIS` takes the same
arrays. Each process builds its part with :func:`replicate` or :func:`shard` from its
local data. Only process 0 prints and writes files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from podracer.core.axes import BATCH_AXIS, DEVICE_AXIS, pmean_flat, psum_flat  # noqa: F401 (the layout's axes)
from podracer.run.multihost import jax_private


def started_cpu_devices() -> int | None:
    """The CPU devices JAX exposes when its backends have started (a notebook that has used JAX), else None."""
    started = jax_private("xla_bridge", "backends_are_initialized")
    return len(jax.devices("cpu")) if started is not None and started() else None


def set_cpu_device_count(count: int) -> None:
    """Exposes ``count`` CPU devices to XLA (for entry points, before JAX starts its backends).

    Each CPU device runs its own computation concurrently, so on a CPU-only machine
    one device per core lets a device-mapped program use every core. Accelerator platforms are unaffected.
    """
    if count < 1:
        raise ValueError(f"The number of CPU devices must be >= 1, got {count}.")
    started = jax_private("xla_bridge", "backends_are_initialized")
    if started is not None and started():
        if len(jax.devices("cpu")) == count:  # started with these devices already (a second run in this process)
            return
        raise RuntimeError("set_cpu_device_count must be called before JAX initialises its backends.")
    flags = [
        f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")
    ]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={count}"])


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def is_main_process() -> bool:
    """True in the process that prints, logs and writes checkpoints."""
    return jax.process_index() == 0


def process_index() -> int:
    """This process's index among the processes of the run (0 in a single-process run)."""
    return jax.process_index()


def process_count() -> int:
    """The processes of the run."""
    return jax.process_count()


def host_cpu_device() -> jax.Device:
    """This process's first CPU device (where host-side JAX work runs, whatever the accelerators)."""
    return jax.local_devices(backend="cpu")[0]


def agree_on_min(value: int) -> int:
    """The smallest of every process's ``value`` (each process calls it; one process: ``value``)."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return int(np.min(multihost_utils.process_allgather(np.asarray(value, np.int64))))


def available_memory(devices: Sequence[jax.Device] | None = None) -> int | None:
    """Bytes free for arrays on this process's ``devices`` (default: its own): the host's available memory on the
    CPU (``MemAvailable``), the devices' free memory on an accelerator; None where it cannot be asked."""
    local = local_devices(devices)
    if all(d.platform == "cpu" for d in local):
        try:
            with open("/proc/meminfo", encoding="ascii") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    total = 0
    for device in local:
        stats = device.memory_stats() or {}
        if "bytes_limit" not in stats:
            return None
        total += stats["bytes_limit"] - stats.get("bytes_in_use", 0)
    return total


def any_process(flag: bool) -> bool:
    """Whether ``flag`` holds in any process of the run (one small all-gather in a multi-process run): processes
    that stop on a signal stop at the same host call, though the signal reached them a little apart (or reached
    only one)."""
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag, np.int32))))


def put_on(tree, device: jax.Device):
    """``tree`` placed on ``device`` (one device: an actor's, a host environment's)."""
    return jax.device_put(tree, device)


def broadcast(tree, devices: Sequence[jax.Device]) -> dict:
    """A copy of ``tree`` on each of ``devices``, by device (parameters for every actor device)."""
    return {d: jax.device_put(tree, d) for d in devices}


def local_devices(devices: Sequence[jax.Device] | None = None) -> list[jax.Device]:
    """The devices of this process among ``devices`` (default: all devices of all processes).

    A device-mapped function takes ``devices`` (the same global list in every process, or
    None for all); each process supplies the entries of its local devices.
    """
    if devices is None:
        return list(jax.local_devices())
    return [d for d in devices if d.process_index == jax.process_index()]


def num_global_devices(devices: Sequence[jax.Device] | None = None) -> int:
    """Devices along :data:`DEVICE_AXIS` across all processes."""
    return jax.device_count() if devices is None else len(devices)


def _check_devices(devices: Sequence[jax.Device] | None) -> list[jax.Device]:
    """``devices`` as a list (default: every device of every process); every process must own one.

    A process with none of ``devices`` would hang the others' collectives.
    """
    if devices is None:
        return list(jax.devices())
    devices = list(devices)
    if not local_devices(devices):
        raise ValueError(
            f"None of the devices {devices} belongs to process {jax.process_index()}; "
            "in a multi-process run, pass the same global device list in every process."
        )
    return devices


def mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-axis :class:`~jax.sharding.Mesh` named :data:`DEVICE_AXIS` over ``devices`` (default: all, of all
    processes)."""
    return Mesh(np.asarray(_check_devices(devices)), (DEVICE_AXIS,))


# XLA's backend at optimization level 1 (LLVM's -O1; XLA's default is 2) for a program a run calls once, at its
# start (its initial learners and states): on XLA:CPU it compiles those in about three quarters of the time (the
# cartpole preset's two: 1.5 s against 2.0, benchmarks/compile_profile.py) and computes the same bits
# (tests/test_anakin.py checks initial states against level 2's), while a program called over and over keeps the
# default.
RUN_ONCE_LEVEL = 1


def run_once_options(devices: Sequence[jax.Device] | None = None) -> dict | None:
    """Compiler options for a program a run calls once (``jax.jit(..., compiler_options=...)``): on CPU devices XLA's
    backend at :data:`RUN_ONCE_LEVEL`; None (XLA's settings) on other platforms (measured only on XLA:CPU) and where
    ``XLA_FLAGS`` sets ``--xla_backend_optimization_level`` at or below it (never raised above what a user asked)."""
    platform = _check_devices(devices)[0].platform
    asked = [f for f in os.environ.get("XLA_FLAGS", "").split() if f.startswith("--xla_backend_optimization_level=")]
    if platform != "cpu" or (asked and int(asked[-1].split("=")[1]) <= RUN_ONCE_LEVEL):
        return None
    return {"xla_backend_optimization_level": RUN_ONCE_LEVEL}


def device_map(
    fn,
    devices: Sequence[jax.Device] | None = None,
    *,
    name: str | None = None,
    compiler_options: dict | None = None,
    donate_argnums: int | Sequence[int] = (),
):
    """``fn`` run on each of ``devices`` as ``jax.jit`` of ``jax.shard_map`` over :func:`mesh`, the program named
    ``name`` (default: ``fn``'s name) in JAX's compile log and timing events (the start-up line's split), compiled
    with ``compiler_options`` (``jax.jit``'s; e.g. :func:`run_once_options`) and ``donate_argnums`` (``jax.jit``'s:
    arguments whose buffers the call may reuse for its results, deleted for the caller; ``fn`` is then vmapped over
    its device's entry, so it must be vmap-safe, as the library's learner steps are).

    Like ``pmap(fn, axis_name=DEVICE_AXIS)``: every argument and result carries a
    leading axis with one entry per device, ``fn`` sees (and returns) one entry without
    it, and collectives over :data:`DEVICE_AXIS` inside ``fn`` reach every device. The
    arguments are global arrays split along that axis (:func:`replicate`, :func:`shard`,
    or a previous call's results); ``lower(...).compile()`` works as for any jitted function.
    """
    spec = PartitionSpec(DEVICE_AXIS)
    donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)

    def per_device(*args):
        if donate_argnums:
            # A vmap over the device's block of one: XLA writes a donated buffer in place where ``fn`` reads it after
            # writing it (a replay memory: insert, then sample), which it copies whole once the block is indexed
            # (x[0]; measured on XLA:CPU, a million items of HalfCheetah's size: 0.5 ms against 110 ms a call).
            return jax.vmap(fn)(*args)
        out = fn(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda x: x[None], out)

    per_device.__name__ = per_device.__qualname__ = name or getattr(fn, "__name__", "per_device")

    # check_vma=False: values are typed as in pmap, so a per-device function written for pmap
    # (scans whose carries become device-varying, collectives on any value) runs unchanged.
    mapped = jax.shard_map(per_device, mesh=mesh(devices), in_specs=spec, out_specs=spec, check_vma=False)
    return jax.jit(mapped, compiler_options=compiler_options, donate_argnums=donate_argnums)


def device_sharding(devices: Sequence[jax.Device] | None = None) -> NamedSharding:
    """Leading axis split over :func:`mesh` of ``devices``: the layout :func:`device_map` functions take and return."""
    return NamedSharding(mesh(devices), PartitionSpec(DEVICE_AXIS))


def _is_key(x) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _place(put, x):
    """``put`` applied to a numpy array, or to the raw data of a typed PRNG key array."""
    if _is_key(x):
        return jax.random.wrap_key_data(put(np.asarray(jax.random.key_data(x))), impl=jax.random.key_impl(x))
    return put(np.asarray(x))


def _global(local: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """The global array whose entries on this process's devices are ``local`` (one per local device)."""
    n = len(sharding.mesh.devices.flat)
    return jax.make_array_from_process_local_data(sharding, local, (n, *local.shape[1:]))


def replicate(tree, devices: Sequence[jax.Device] | None = None):
    """A copy of ``tree`` on each of ``devices`` (default: all), stacked along a new leading axis.

    Every process calls it with the same ``devices`` and its own copy of ``tree``.
    """
    sharding = device_sharding(devices)
    n = len(local_devices(devices))
    return jax.tree.map(lambda x: _place(lambda a: _global(np.broadcast_to(a, (n, *a.shape)), sharding), x), tree)


def shard(tree, devices: Sequence[jax.Device] | None = None):
    """Splits the leading axis of every leaf over this process's ones of ``devices`` (one entry per local device)."""
    sharding = device_sharding(devices)
    n = len(local_devices(devices))

    def put(x):
        if x.shape[:1] != (n,):
            raise ValueError(
                f"Cannot shard an array of shape {x.shape} over {n} devices: its leading axis must be {n}."
            )
        return _global(x, sharding)

    return jax.tree.map(lambda x: _place(put, x), tree)


def local_entries(tree):
    """This process's entries of a tree stacked over devices, as numpy ``[local devices, ...]`` (typed
    PRNG keys as their raw data): the inverse of :func:`shard`."""

    def local(x):
        x = jax.random.key_data(x) if _is_key(x) else x
        by_start = {}  # one shard per slice of the device axis: an array that XLA keeps whole on every device (one of
        for shard in x.addressable_shards:  # no elements: MJX's data.act) has one slice, the whole axis
            by_start.setdefault(shard.index[0].start or 0, shard)
        return np.concatenate([np.asarray(by_start[start].data) for start in sorted(by_start)])

    return jax.tree.map(local, tree)


def host_entry(tree):
    """The first local device's entry of a tree stacked over devices as numpy copies (typed PRNG keys as their
    raw data), brought to the host in one transfer without running a computation: no program to compile, and
    safe from a thread other than the one that runs the next computation (a stop signal's)."""

    def first(x):
        x = jax.random.key_data(x) if _is_key(x) else x
        if isinstance(x, jax.Array):
            return min(x.addressable_shards, key=lambda s: s.index[0].start or 0).data
        return x

    leaves, treedef = jax.tree.flatten(jax.tree.map(first, tree))
    return jax.tree.unflatten(treedef, [np.array(x)[0] for x in jax.device_get(leaves)])


def unreplicate(tree):
    """The first local device's entry of a tree stacked over devices (replicated values, such as
    parameters and averaged metrics, are the same on every device)."""

    def first(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            shard = min(x.addressable_shards, key=lambda s: s.index[0].start or 0)
            return shard.data[0]
        return x[0]

    return jax.tree.map(first, tree)


def check_divisible(total: int, parts: int, what: str, among: str) -> int:
    """``total // parts``, or a clear error when ``total`` does not split evenly."""
    if parts < 1:
        raise ValueError(f"Cannot split {what} among {parts} {among}.")
    if total % parts:
        raise ValueError(f"{what} = {total} is not divisible by the {parts} {among}; choose a multiple of {parts}.")
    return total // parts


class Layout(NamedTuple):
    actor_devices: list[jax.Device]  # this process's actor devices
    learner_devices: list[jax.Device]  # the learner devices of every process (the learner's mesh axis)


def resolve_layout(actor_ids: Sequence[int] | None, learner_ids: Sequence[int] | None, num_envs: int) -> Layout:
    """Actor and learner devices from local device indices, with checks that fail at start-up.

    In a multi-process run every process passes the same indices; the learner group is
    those devices of every process, so gradients average over all of them.
    """
    devices = jax.local_devices()
    n = len(devices)
    if actor_ids is None:
        actor_ids = (0,)
    if learner_ids is None:
        learner_ids = (0,) if n == 1 else tuple(i for i in range(n) if i not in actor_ids) or (0,)
    for name, ids in (("--actor-devices", actor_ids), ("--learner-devices", learner_ids)):
        if not ids:
            raise ValueError(f"{name} needs at least one device index.")
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            raise ValueError(
                f"{name} {list(ids)}: device index {bad[0]} is out of range; this process has {n} device(s) (0 ... "
                f"{n - 1})."
            )
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name} {list(ids)} lists a device twice.")
    shared = sorted(set(actor_ids) & set(learner_ids))
    if shared and n > 1:  # one device alone is shared of necessity; with more, a shared one is a mistake
        raise ValueError(
            f"--actor-devices {list(actor_ids)} and --learner-devices {list(learner_ids)} share device {shared[0]}: "
            f"give each group its own of this process's {n} devices (or leave --learner-devices out: the others)."
        )
    check_divisible(num_envs, len(learner_ids), "--num-envs-per-actor", "learner devices")
    learners = []
    for process in range(jax.process_count()):
        theirs = [d for d in jax.devices() if d.process_index == process]
        learners += [theirs[i] for i in learner_ids]
    return Layout([devices[i] for i in actor_ids], learners)
