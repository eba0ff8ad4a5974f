"""Axis names and the collectives over them: the one place a program's mesh and vmap axes are named.

Every collective in the library names its axis with a constant of this module and reduces over each axis it is given,
explicitly. Device layout (the mesh over these axes, placement) is :mod:`podracer.run.parallel`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.flatten_util

# The mesh axis over devices (of all processes).
DEVICE_AXIS = "device"
# The vmap axis over independent learners inside one device, for users who vmap an update.
BATCH_AXIS = "batch"


def _reduce_flat(tree, axis_names: Sequence[str], reduce):
    if not axis_names:
        return tree
    flat, unravel = jax.flatten_util.ravel_pytree(tree)
    for axis in axis_names:
        flat = reduce(flat, axis)
    return unravel(flat)


def pmean_flat(tree, axis_names: Sequence[str]):
    """``tree`` averaged over each of ``axis_names``, as one collective per axis.

    The leaves travel as one flat vector: across processes (gloo, NCCL, ICI) one large
    all-reduce costs far less than one per leaf.
    """
    return _reduce_flat(tree, axis_names, jax.lax.pmean)


def psum_flat(tree, axis_names: Sequence[str]):
    """``tree`` summed over each of ``axis_names``, as one collective per axis."""
    return _reduce_flat(tree, axis_names, jax.lax.psum)


__all__ = ["BATCH_AXIS", "DEVICE_AXIS", "pmean_flat", "psum_flat"]
