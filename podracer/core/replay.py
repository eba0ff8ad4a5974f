"""Device-resident replay memory as pure functions: uniform or prioritized (sum tree).

The state is a :class:`ReplayState` of arrays, so the memory lives wherever its
caller runs: inside Anakin's compiled loop, or on each of Sebulba's learner devices
(one shard per device under a device map). Items are any pytree whose leaves have a
leading item axis: single transitions, or fixed-length sequences together with the
recurrent state at their start.

Prioritized sampling keeps ``priority ** alpha`` of every slot in a sum tree with
16 children per node, so drawing a batch and updating its priorities cost
``O(batch x log capacity)``. The tree is stored as running sums: level ``l`` (``K ** l``
nodes, ``K = 16``) holds, for node ``n``, the mass of ``n`` and of its elder siblings
(nodes ``K (n // K) ... n``); a node's mass is the last running sum of its children's
group, and the total is the last entry of level 1. Drawing then costs one row gather and
one count per level (five levels for a million items): the children wholly below the
draw are those whose running sum is <= it. The running sums are added in order, so they
never decrease and a child without mass repeats its elder sibling's sum exactly: a draw
never lands on an item of priority 0. New items get the largest priority seen so far.
Sampling is stratified: the total mass is cut into ``batch_size`` equal segments and
one item is drawn from each. Importance weights ``(size x P(i)) ** -beta`` are
divided by the batch's largest.

Checks: with concrete arguments (outside ``jit``) bad input raises ``ValueError``
at once; traced, the same checks run as host callbacks whose ``ValueError`` surfaces
from the compiled call.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np


class ReplayState(NamedTuple):
    items: chex.ArrayTree  # every leaf [capacity, ...]
    # float32 [K ** depth]: priority ** alpha of every slot (0 for empty slots and past capacity)
    priorities: chex.Array
    # float32 sum tree levels 1 ... depth ([K], [K ** 2], ..., [K ** depth]) as running sums within groups of K siblings
    running_sums: tuple[chex.Array, ...]
    max_priority: chex.Array  # float32 []: largest priority ** alpha so far; new items get it
    insert: chex.Array  # int32 []: slot the next item goes to
    size: chex.Array  # int32 []: filled slots


class Sample(NamedTuple):
    indices: chex.Array  # int32 [batch]: slots, for update_priorities
    items: chex.ArrayTree  # every leaf [batch, ...]
    weights: chex.Array  # float32 [batch]: importance weights (1 for uniform sampling)
    probabilities: chex.Array  # float32 [batch]: the probability each item had of being drawn


def capacity_of(state: ReplayState) -> int:
    return jax.tree.leaves(state.items)[0].shape[0]


BRANCHING = 16  # children per node of the sum tree: fewer, wider levels suit vector hardware


def _concrete(*xs) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(xs))


def _raise_if(*checks, when: bool | chex.Array = True) -> None:
    """Raises ``ValueError(message.format(*args))`` for the first ``(condition, message, *args)`` in
    ``checks`` that holds: now if concrete, else from the compiled call. Only ``when`` it holds:
    a caller whose call may not count (a branch that ``vmap`` turned into a select) passes its predicate."""
    conditions = [jnp.logical_and(c[0], when) if when is not True else c[0] for c in checks]
    values = [c[2:] for c in checks]
    messages = [c[1] for c in checks]

    if _concrete(conditions, values):
        _report(messages, conditions, values)
        return
    failed = jnp.any(jnp.stack([jnp.any(jnp.asarray(c)) for c in conditions]))
    _checked(failed, conditions, values, messages)


def _report(messages, conditions, values) -> None:
    """The host side of :func:`_raise_if`: raises for the first condition that holds, with the arguments of its
    first failing entry (under ``vmap``, conditions and arguments carry the batch axes in front)."""
    for message, condition, args in zip(messages, conditions, values):
        condition = np.asarray(condition)
        if condition.any():
            where = np.unravel_index(np.argmax(condition), condition.shape)
            picked = [np.asarray(a)[where] if np.ndim(a) >= condition.ndim > 0 else np.asarray(a) for a in args]
            raise ValueError(message.format(*(a.tolist() for a in picked)))


def _checked(failed, conditions, values, messages) -> None:
    # One branch for all checks, and only a failing check calls back to the host (an unconditional callback costs
    # about 1 ms a call on the CPU). Under vmap (seeds, sweeps) a plain cond would become a select that calls back
    # on every step; the batching rule instead branches once on "any entry failed".
    @jax.custom_batching.custom_vmap
    def check(failed, conditions, values):
        jax.lax.cond(
            failed, lambda: jax.debug.callback(functools.partial(_report, messages), conditions, values), lambda: None
        )
        return jnp.zeros((), jnp.int32)

    @check.def_vmap
    def check_batched(axis_size, in_batched, failed, conditions, values):
        def materialize(x, batched):
            return x if batched else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))

        failed = jnp.any(failed) if in_batched[0] else failed
        conditions, values = jax.tree.map(materialize, (conditions, values), tuple(in_batched[1:]))
        check(failed, conditions, values)  # again through the rule, under an outer vmap
        return jnp.zeros((), jnp.int32), False

    check(failed, conditions, values)


def init(item: chex.ArrayTree, capacity: int) -> ReplayState:
    """An empty memory of ``capacity`` slots shaped like ``item`` (one item, no leading axis; arrays or
    ShapeDtypeStructs)."""
    if capacity < 1:
        raise ValueError(f"Replay capacity must be >= 1, got {capacity}.")
    depth = 1
    while BRANCHING**depth < capacity:
        depth += 1
    items = jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape), x.dtype), item)
    running_sums = tuple(jnp.zeros(BRANCHING**level, jnp.float32) for level in range(1, depth + 1))
    zero = jnp.zeros((), jnp.int32)
    return ReplayState(
        items, jnp.zeros(BRANCHING**depth, jnp.float32), running_sums, jnp.ones((), jnp.float32), zero, zero
    )


def _running_sums(rows: chex.Array) -> chex.Array:
    """Running sums along the last axis of ``rows`` [n, K], added in order, so they never decrease and a zero adds
    exactly nothing (XLA:CPU's cumsum is slow, and a matmul may add in any order, which promises neither)."""
    sums = [rows[:, 0]]
    for k in range(1, BRANCHING):
        sums.append(sums[-1] + rows[:, k])
    return jnp.stack(sums, axis=-1)


def _set_priorities(
    state: ReplayState, slots: chex.Array, values: chex.Array
) -> tuple[chex.Array, tuple[chex.Array, ...]]:
    """Writes slot values and recomputes the running sums above them, level by level (``O(len(slots) log capacity)``).

    Each touched group is recomputed whole from the level below after that level is
    written, so slots that share ancestors (or repeat) leave a consistent tree. A level no
    larger than the groups touched is recomputed entirely (the top levels, where every
    slot's group is the same few).
    """
    priorities = state.priorities.at[slots].set(values)
    levels = list(state.running_sums)
    masses = priorities  # the masses of the nodes of the level being written
    groups = slots // BRANCHING
    for level in range(len(levels) - 1, -1, -1):
        if levels[level].shape[0] <= groups.shape[0] * BRANCHING:
            levels[level] = _running_sums(masses.reshape(-1, BRANCHING)).reshape(-1)
        else:
            rows = masses.reshape(-1, BRANCHING).at[groups].get(mode="promise_in_bounds")
            levels[level] = levels[level].reshape(-1, BRANCHING).at[groups].set(_running_sums(rows)).reshape(-1)
        masses = levels[level].reshape(-1, BRANCHING)[:, -1]  # a node's mass: the last running sum of its children
        groups = groups // BRANCHING
    return priorities, tuple(levels)


def next_slots(state: ReplayState, n: int) -> chex.Array:
    """int32 [n]: the slots the next ``n`` items added go to (the oldest ones once the memory is full)."""
    return (state.insert + jnp.arange(n, dtype=jnp.int32)) % capacity_of(state)


def overwritten(state: ReplayState, n: int) -> chex.ArrayTree:
    """The items in the slots the next ``n`` items added will overwrite (every leaf ``[n, ...]``): what
    :func:`put_back` writes back where that add is undone."""
    slots = next_slots(state, n)
    return jax.tree.map(lambda buf: buf[slots], state.items)


def put_back(state: ReplayState, previous: chex.ArrayTree) -> ReplayState:
    """``state`` with ``previous`` (:func:`overwritten`, taken before an add) written back into the slots that add
    wrote: undoes an add whose counters (``insert``, ``size``, and priorities) are already those from before it.

    The memory's items are written and not read, so under ``jit`` with the state donated XLA writes the few slots
    in place; a program that reads the items before writing them copies the whole memory (XLA:CPU), which is why
    the read (:func:`overwritten`) is a program of its own.
    """
    n = jax.tree.leaves(previous)[0].shape[0]
    slots = next_slots(state, n)
    return state._replace(items=jax.tree.map(lambda buf, x: buf.at[slots].set(x), state.items, previous))


def add(
    state: ReplayState, items: chex.ArrayTree, mask: chex.Array | None = None, *, prioritized: bool = True
) -> ReplayState:
    """Writes ``items`` (leading axis N <= capacity) after the newest, overwriting the oldest when full.

    They get the largest priority seen so far; items where ``mask`` is False get priority
    0, so prioritized sampling never draws them (uniform sampling still can). A memory only ever sampled uniformly
    passes ``prioritized=False``: its priorities and sum tree are left as they are (the tree's upkeep is most of an
    add's cost).
    """
    capacity = capacity_of(state)
    n = jax.tree.leaves(items)[0].shape[0]
    if n > capacity:
        raise ValueError(f"Cannot add {n} items at once to a replay of capacity {capacity}.")
    slots = next_slots(state, n)
    stored = jax.tree.map(lambda buf, x: buf.at[slots].set(x.astype(buf.dtype)), state.items, items)
    priorities, running_sums = state.priorities, state.running_sums
    if prioritized:
        priority = jnp.full((n,), state.max_priority)
        if mask is not None:
            priority = jnp.where(mask, priority, 0.0)
        priorities, running_sums = _set_priorities(state, slots, priority)
    return ReplayState(
        stored,
        priorities,
        running_sums,
        state.max_priority,
        (state.insert + n) % capacity,
        jnp.minimum(state.size + n, capacity),
    )


def _choose_children(sums: chex.Array, u: chex.Array) -> tuple[chex.Array, chex.Array]:
    """One level of the descent: for draws ``u`` [batch] into groups of running sums ``sums`` [batch, K], the child
    each draw lands in and the draw less the mass of the children before it.

    The children passed are those whose running sum is <= u. A child without mass has its
    elder sibling's running sum, so it is passed with it, never landed in; and a draw at or
    beyond the group's total (float rounding at the right edge) lands in the last child
    with mass. The draw stays >= 0: it is reduced by a running sum it was compared with.
    """
    passed = (sums <= u[:, None]) & (sums < sums[:, -1:])
    child = jnp.sum(passed, axis=-1, dtype=jnp.int32)
    below = jnp.take_along_axis(sums, jnp.maximum(child - 1, 0)[:, None], axis=-1)[:, 0]
    return child, u - jnp.where(child > 0, below, 0.0)


def uniform_indices(key, count: int, size) -> jax.Array:
    """``count`` indices drawn uniformly from ``0 ... size - 1`` (int32; 0 when ``size`` is 0): the remainders of one
    draw of 32 random bits each. One counter-based random call where ``jax.random.randint`` makes three (a split and
    two draws), each a loop of its own on XLA:CPU, run at every gradient step; the remainder's bias is below
    ``size / 2**32``."""
    bits = jax.random.bits(key, (count,), jnp.uint32)
    return (bits % jnp.maximum(size, 1).astype(jnp.uint32)).astype(jnp.int32)


def sample(
    state: ReplayState,
    key: chex.PRNGKey,
    batch_size: int,
    *,
    prioritized: bool = True,
    beta: float = 0.4,
    checked: bool | chex.Array = True,
) -> Sample:
    """``batch_size`` items: in proportion to ``priority ** alpha`` when ``prioritized``, else uniformly.

    The batch may not be larger than the filled size (nor, prioritized, may all priorities be 0).
    Those checks apply where ``checked`` holds: a caller whose call may not count (a ``lax.cond``
    branch that ``vmap`` over seeds turns into a select, so it also runs where not taken) passes
    the branch's predicate.
    """
    total = state.running_sums[0][-1]
    _raise_if(
        (
            state.size < batch_size,
            "Cannot sample a batch of {} from a replay holding {} items.",
            batch_size,
            state.size,
        ),
        (prioritized & (total <= 0), "Cannot sample by priority: every priority in the replay is 0."),
        when=checked,
    )
    if not prioritized:
        indices = uniform_indices(key, batch_size, state.size)
        probabilities = jnp.full((batch_size,), 1.0, jnp.float32) / jnp.maximum(state.size, 1)
        items = jax.tree.map(lambda x: x[indices], state.items)
        return Sample(indices, items, jnp.ones((batch_size,), jnp.float32), probabilities)
    # Stratified: one draw from each of batch_size equal segments of the total mass.
    u = (jnp.arange(batch_size, dtype=jnp.float32) + jax.random.uniform(key, (batch_size,))) * (total / batch_size)
    nodes = jnp.zeros((batch_size,), jnp.int32)
    for level in state.running_sums:
        sums = level.reshape(-1, BRANCHING).at[nodes].get(mode="promise_in_bounds")  # [batch, K]: one group per draw
        child, u = _choose_children(sums, u)
        nodes = nodes * BRANCHING + child
    indices = nodes
    leaf = state.priorities.at[indices].get(mode="promise_in_bounds")  # the drawn slot's priority ** alpha
    probabilities = leaf / total
    weights = (state.size.astype(jnp.float32) * probabilities) ** -beta
    weights = weights / jnp.max(weights)
    items = jax.tree.map(lambda x: x[indices], state.items)
    return Sample(indices, items, weights, probabilities)


def update_priorities(
    state: ReplayState,
    indices: chex.Array,
    priorities: chex.Array,
    *,
    alpha: float = 0.6,
    checked: bool | chex.Array = True,
) -> ReplayState:
    """Sets the priorities of ``indices`` (raw, >= 0; stored as ``priority ** alpha``); ``checked`` as in
    :func:`sample`."""
    priorities = jnp.asarray(priorities, jnp.float32)
    _raise_if(
        (
            jnp.any(jnp.isnan(priorities)),
            "Replay priorities must not be NaN; got {} NaN value(s).",
            jnp.sum(jnp.isnan(priorities)),
        ),
        (jnp.any(priorities < 0), "Replay priorities must be >= 0; got {}.", jnp.min(priorities)),
        when=checked,
    )
    values = priorities**alpha
    priorities, running_sums = _set_priorities(state, indices.astype(jnp.int32), values)
    return state._replace(
        priorities=priorities, running_sums=running_sums, max_priority=jnp.maximum(state.max_priority, jnp.max(values))
    )


def sequence_priorities(
    abs_td: chex.Array, mask: chex.Array | None = None, *, eta: float = 0.9, axis: int = -1
) -> chex.Array:
    """R2D2's priority of a sequence: ``eta x max |td| + (1 - eta) x mean |td|`` over ``axis``."""
    if mask is None:
        mask = jnp.ones_like(abs_td)
    mask = mask.astype(abs_td.dtype)
    largest = jnp.max(abs_td * mask, axis=axis)
    mean = jnp.sum(abs_td * mask, axis=axis) / jnp.maximum(jnp.sum(mask, axis=axis), 1.0)
    return eta * largest + (1.0 - eta) * mean


class RateLimiter(NamedTuple):
    """Holds ``sampled ~ replay_ratio x (inserted - min_size)``: learning waits for data, and data for learning.

    Counters are items; a learner may take its next batch while
    ``sampled <= replay_ratio x (inserted - min_size)``, so the achieved ratio stays within
    one batch of the target at every point of a run.
    """

    inserted: chex.Array  # int32 []: items inserted so far
    sampled: chex.Array  # int32 []: items sampled for learning so far

    @staticmethod
    def create() -> RateLimiter:
        zero = jnp.zeros((), jnp.int32)
        return RateLimiter(zero, zero)

    def insert(self, n) -> RateLimiter:
        return self._replace(inserted=self.inserted + n)

    def can_sample(self, replay_ratio: float, min_size: int) -> chex.Array:
        ready = self.inserted >= min_size
        allowance = replay_ratio * (self.inserted - min_size).astype(jnp.float32)
        return ready & (self.sampled.astype(jnp.float32) <= allowance)

    def sample(self, n) -> RateLimiter:
        return self._replace(sampled=self.sampled + n)

    def ratio(self, min_size: int) -> chex.Array:
        """Items sampled per item inserted since learning could start."""
        return self.sampled.astype(jnp.float32) / jnp.maximum(self.inserted - min_size, 1).astype(jnp.float32)


__all__ = [
    "RateLimiter",
    "ReplayState",
    "Sample",
    "add",
    "capacity_of",
    "init",
    "sample",
    "uniform_indices",
    "sequence_priorities",
    "update_priorities",
]
