"""Device layout: the only module that knows how work is spread over devices and hosts.

One pmap axis, :data:`DEVICE_AXIS`, spans every device of every process. Arrays that
enter a pmap-ed function carry a leading axis with one entry per *local* device; the
collectives inside (``pmean`` over :data:`DEVICE_AXIS`) reach the devices of all
processes. Only process 0 prints and writes files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

# The pmap axis over devices (of all processes).
DEVICE_AXIS = "device"
# The vmap axis over independent learners inside one device, for users who vmap an update.
BATCH_AXIS = "batch"


def check_process_id(num_processes: int | None, process_id: int | None) -> None:
    """A clear error for a process count below 1 or a process id outside 0 ... num_processes - 1."""
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"num_processes must be >= 1, got {num_processes}.")
    if num_processes is not None and process_id is not None and not 0 <= process_id < num_processes:
        raise ValueError(
            f"process_id {process_id} is out of range for {num_processes} processes "
            f"(expected 0 ... {num_processes - 1})."
        )


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    auto_detect: bool = False,
) -> None:
    """Joins this process to a multi-process run, before any JAX computation.

    Either give all three of ``coordinator_address`` (``HOST:PORT`` of process 0),
    ``num_processes`` and ``process_id``, or set ``auto_detect`` to let JAX find them
    (TPU pod slices, Slurm, Open MPI). With neither, this is a single-process run and
    nothing happens.
    """
    explicit = (coordinator_address, num_processes, process_id)
    if all(v is None for v in explicit):
        if auto_detect:
            jax.distributed.initialize()
        return
    if any(v is None for v in explicit):
        raise ValueError(
            "A multi-process run needs all of coordinator_address, num_processes and "
            f"process_id; got coordinator_address={coordinator_address!r}, "
            f"num_processes={num_processes!r}, process_id={process_id!r}."
        )
    check_process_id(num_processes, process_id)
    host, sep, port = coordinator_address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(
            f"coordinator_address must be HOST:PORT, got {coordinator_address!r}."
        )
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
    )


def set_cpu_device_count(count: int) -> None:
    """Exposes ``count`` CPU devices to XLA (for entry points, before JAX starts its backends).

    Each CPU device runs its own computation concurrently, so on a CPU-only machine
    one device per core lets pmap use every core. Accelerator platforms are unaffected.
    """
    if count < 1:
        raise ValueError(f"The number of CPU devices must be >= 1, got {count}.")
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise RuntimeError("set_cpu_device_count must be called before JAX initialises its backends.")
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
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


def local_devices(devices: Sequence[jax.Device] | None = None) -> list[jax.Device]:
    """The devices of this process among ``devices`` (default: all devices of all processes).

    A pmap-ed function takes ``devices`` (the same global list in every process, or
    None for all) and arrays with one leading entry per local device.
    """
    if devices is None:
        return list(jax.local_devices())
    return [d for d in devices if d.process_index == jax.process_index()]


def num_global_devices(devices: Sequence[jax.Device] | None = None) -> int:
    """Devices along :data:`DEVICE_AXIS` across all processes."""
    return jax.device_count() if devices is None else len(devices)


def pmap(fn, devices: Sequence[jax.Device] | None = None, **kwargs):
    """``jax.pmap`` over :data:`DEVICE_AXIS` and ``devices`` (global; default all devices).

    Checks that every process takes part: a process with none of ``devices`` would
    hang the others' collectives.
    """
    if devices is not None:
        devices = list(devices)
        if not local_devices(devices):
            raise ValueError(
                f"None of the devices {devices} belongs to process {jax.process_index()}; "
                "in a multi-process run, pass the same global device list in every process."
            )
    return jax.pmap(fn, axis_name=DEVICE_AXIS, devices=devices, **kwargs)


def device_sharding(devices: Sequence[jax.Device] | None = None) -> NamedSharding:
    """Leading axis split over the local ones of ``devices``: the layout pmap-ed functions take and return."""
    mesh = Mesh(np.asarray(local_devices(devices)), (DEVICE_AXIS,))
    return NamedSharding(mesh, PartitionSpec(DEVICE_AXIS))


def _is_key(x) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _place(put, x):
    """``put`` applied to a numpy array, or to the raw data of a typed PRNG key array."""
    if _is_key(x):
        return jax.random.wrap_key_data(put(np.asarray(jax.random.key_data(x))), impl=jax.random.key_impl(x))
    return put(np.asarray(x))


def replicate(tree, devices: Sequence[jax.Device] | None = None):
    """A copy of ``tree`` on each local device of ``devices``, stacked along a new leading axis."""
    devices = local_devices(devices)
    sharding = device_sharding(devices)
    n = len(devices)

    def put(x):
        return jax.device_put(np.broadcast_to(x, (n, *x.shape)), sharding)

    return jax.tree.map(lambda x: _place(put, x), tree)


def shard(tree, devices: Sequence[jax.Device] | None = None):
    """Splits the leading axis of every leaf over the local ones of ``devices`` (one entry per local device)."""
    devices = local_devices(devices)
    sharding = device_sharding(devices)
    n = len(devices)

    def put(x):
        if x.shape[:1] != (n,):
            raise ValueError(
                f"Cannot shard an array of shape {x.shape} over {n} devices: "
                f"its leading axis must be {n}."
            )
        return jax.device_put(x, sharding)

    return jax.tree.map(lambda x: _place(put, x), tree)


def unreplicate(tree):
    """The first local device's copy of a replicated (pmap-ed) tree."""
    return jax.tree.map(lambda x: x[0], tree)


def check_divisible(total: int, parts: int, what: str, among: str) -> int:
    """``total // parts``, or a clear error when ``total`` does not split evenly."""
    if parts < 1:
        raise ValueError(f"Cannot split {what} among {parts} {among}.")
    if total % parts:
        raise ValueError(
            f"{what} = {total} is not divisible by the {parts} {among}; "
            f"choose a multiple of {parts}."
        )
    return total // parts
