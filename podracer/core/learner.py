"""The learner step that every mode shares: trajectories in, new parameters out."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from podracer.core import replay as replay_lib
from podracer.core.axes import pmean_flat, psum_flat
from podracer.core.agents.base import Agent, act_mask, split_start_state
from podracer.core.optim import make_optimizer
from podracer.core.types import LearnerState, Metrics, Params, TimeStep, Trajectory

LearnerStep = Callable[[LearnerState, Trajectory], tuple[LearnerState, Metrics]]

# What the ``nonfinite`` metric of a learner step adds up: which of its results were not finite (0: all were).
NONFINITE_LOSS, NONFINITE_GRADIENTS, NONFINITE_PARAMETERS = 1, 2, 4
NONFINITE_NAMES = (
    (NONFINITE_LOSS, "loss"),
    (NONFINITE_GRADIENTS, "gradient norm"),
    (NONFINITE_PARAMETERS, "parameters"),
)


def nonfinite_code(metrics: Metrics, params: Params) -> chex.Array:
    """float32 []: 0 when the step's ``loss``, ``grad_norm`` (where ``metrics`` has them) and every floating
    parameter are finite; else the sum of :data:`NONFINITE_LOSS`, :data:`NONFINITE_GRADIENTS` and
    :data:`NONFINITE_PARAMETERS` for those that are not.

    The parameters are checked by one floating-point sum of ``x * 0`` over every leaf: 0 when all are finite, NaN as
    soon as one is not (``inf * 0`` is NaN, and NaN survives the sum; no finite value can overflow it), the leaves
    laid end to end (:func:`tree_sum`): for a 10k-parameter MLP, 6.0 us per update where ``all(isfinite(x))`` leaf
    by leaf took 17.6 us (a scan of 5,000 updates, 2-core Xeon, loaded)."""
    code = jnp.float32(0.0)
    for name, bit in (("loss", NONFINITE_LOSS), ("grad_norm", NONFINITE_GRADIENTS)):
        if name in metrics:
            code = code + jnp.where(jnp.isfinite(tree_sum(lambda x: x * 0.0, metrics[name])), 0.0, float(bit))
    leaves = [x for x in jax.tree.leaves(params) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
    zero = tree_sum(lambda x: x * 0.0, leaves)
    return code + jnp.where(jnp.isfinite(zero), 0.0, float(NONFINITE_PARAMETERS))


def tree_sum(fn, tree) -> chex.Array:
    """float32 []: the sum of ``fn(leaf)`` over every element of every leaf, as one reduction over the leaves laid
    end to end. XLA:CPU splits each reduction of more than 32 elements into a windowed reduction of its own, which
    cannot fuse with ``fn``: one per leaf cost about twice the copy that joins them (a 10k-parameter MLP)."""
    leaves = [jnp.ravel(fn(jnp.asarray(x, jnp.float32))) for x in jax.tree.leaves(tree)]
    if not leaves:
        return jnp.float32(0.0)
    return jnp.sum(leaves[0] if len(leaves) == 1 else jnp.concatenate(leaves))


def nonfinite_names(code: float) -> list[str]:
    """The names of what :func:`nonfinite_code`'s ``code`` says was not finite."""
    return [name for bit, name in NONFINITE_NAMES if int(code) & bit]


def _guard(
    old: LearnerState,
    new: LearnerState,
    metrics: Metrics,
    skip_nonfinite: bool,
    *,
    keep_last_finite: bool = False,
    items_in_place: bool = False,
):
    """``(state, metrics)`` with ``metrics["nonfinite"]`` (:func:`nonfinite_code`); with ``skip_nonfinite`` a
    non-finite update is discarded: the parameters, optimizer state and learner extras stay as they were (the key
    and the update count move on). ``keep_last_finite``: a non-finite update returns ``old`` whole, its key and
    count too, so that a caller that donates the state still holds the last finite one. ``items_in_place``: a
    discarded update leaves the replay memory's items as it wrote them (choosing between two memories would copy
    the whole of it); its caller writes back what the trajectory overwrote (:func:`replay_overwritten`,
    :func:`put_back_replay`)."""
    code = nonfinite_code(metrics, new.params)
    if skip_nonfinite or keep_last_finite:
        keep = code > 0

        def choose(n, o):
            return jax.tree.map(lambda a, b: jnp.where(keep, b, a), n, o)

        new_extra, old_extra, items = new.extra, old.extra, None
        if items_in_place:
            items = new_extra.replay.items
            new_extra = new_extra._replace(replay=new_extra.replay._replace(items=None))
            old_extra = old_extra._replace(replay=old_extra.replay._replace(items=None))
        params, opt_state, extra = choose(
            (new.params, new.opt_state, new_extra), (old.params, old.opt_state, old_extra)
        )
        if items_in_place:
            extra = extra._replace(replay=extra.replay._replace(items=items))
        new = new._replace(params=params, opt_state=opt_state, extra=extra)
        if keep_last_finite:
            new = new._replace(key=choose(new.key, old.key), step=choose(new.step, old.step))
    return new, {**metrics, "nonfinite": code}


class ReplayExtra(NamedTuple):
    """What the learner of a replay-based agent keeps besides parameters (``LearnerState.extra``)."""

    target_params: Params
    replay: replay_lib.ReplayState  # this learner device's shard
    limiter: replay_lib.RateLimiter
    sgd_steps: chex.Array  # int32 []: gradient steps taken (target updates count them)


def replay_overwritten(agent: Agent, state: LearnerState, trajectory: Trajectory) -> chex.ArrayTree:
    """The items of ``state``'s replay memory (one device's) that the update on ``trajectory`` will overwrite: taken
    by a program of its own before a learner step made with ``items_in_place`` (which its caller donates the state
    to), so that :func:`put_back_replay` can undo the add of an update that step discards."""
    items, _ = jax.eval_shape(agent.replay.make_items, trajectory)
    return replay_lib.overwritten(state.extra.replay, jax.tree.leaves(items)[0].shape[0])


def put_back_replay(state: LearnerState, previous: chex.ArrayTree) -> LearnerState:
    """``state`` (returned by a learner step made with ``items_in_place`` that discarded its update) with the replay
    items its trajectory overwrote written back (``previous``: :func:`replay_overwritten`): the memory as it was."""
    return state._replace(extra=state.extra._replace(replay=replay_lib.put_back(state.extra.replay, previous)))


def init_learner_state(
    agent: Agent,
    optimizer: optax.GradientTransformation,
    key: chex.PRNGKey,
    observation,
    *,
    rollout_length: int = 1,
    action_mask=None,
) -> LearnerState:
    """Fresh parameters (from ``key``) for ``observation``-shaped inputs, optimizer state, step 0.

    A replay-based agent also gets its target network and an empty replay shard, whose
    items are shaped after a ``[rollout_length + 1, 1]`` trajectory of ``observation[:1]``
    (items that are whole sequences, as R2D2's, have the trajectories' length), and of
    ``action_mask`` (shaped as the time steps' legal-action masks) where the environment has one.
    """
    params_key, learner_key = jax.random.split(key)
    params = agent.init(params_key, observation)
    extra = None
    if agent.replay is not None:
        spec = agent.replay
        one = jax.tree.map(lambda x: x[:1], observation)
        mask = jax.tree.map(lambda x: x[:1], action_mask)
        example = jax.eval_shape(lambda params: _example_items(agent, params, one, rollout_length, mask), params)
        item = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), example)
        zero = jnp.zeros((), jnp.int32)
        extra = ReplayExtra(params, replay_lib.init(item, spec.capacity), replay_lib.RateLimiter.create(), zero)
    return LearnerState(params, optimizer.init(params), learner_key, jnp.zeros((), jnp.int32), extra)


def _example_items(agent: Agent, params, observation, rollout_length: int, action_mask):
    """A replay agent's items of a ``[rollout_length + 1, B]`` trajectory repeating ``observation`` ``[B]``."""
    batch = jax.tree.leaves(observation)[0].shape[0]
    timestep = TimeStep(observation, jnp.zeros(batch), jnp.ones(batch), jnp.zeros(batch, bool), action_mask)
    action, extras, _ = agent.act(
        params,
        observation,
        jax.random.key(0),
        agent.initial_state(batch),
        jnp.ones((batch,), bool),
        **act_mask(action_mask),
    )
    repeat = lambda x: jnp.stack([x] * (rollout_length + 1))  # noqa: E731
    extras, start = split_start_state(extras)
    trajectory = Trajectory(jax.tree.map(repeat, timestep), repeat(action), jax.tree.map(repeat, extras), start)
    return agent.replay.make_items(trajectory)[0]


def _loop(body, carry, xs, length: int, unroll: bool):
    """``lax.scan(body, carry, xs)``, or the same steps written out when ``unroll``.

    Unrolling keeps convolution gradients out of XLA:CPU while-loops, where they run
    tens of times slower (jax-ml/jax issue 12868).
    """
    if not unroll:
        return jax.lax.scan(body, carry, xs, length=length)
    outs = []
    for i in range(length):
        carry, out = body(carry, jax.tree.map(lambda x: x[i], xs))
        outs.append(out)
    return carry, jax.tree.map(lambda *x: jnp.stack(x), *outs)


@jax.custom_batching.custom_vmap
def any_entry(flag: chex.Array) -> chex.Array:
    """``flag`` (a bool scalar); under ``vmap`` (seeds, sweeps, a population's lanes) whether it holds for any entry,
    unbatched: a ``lax.cond`` on it stays a branch, where a batched predicate would turn it into a select that runs
    both sides for every entry. Pair it with :func:`keep_entries` inside the branch."""
    return flag


@any_entry.def_vmap
def _any_entry_batched(axis_size, in_batched, flag):
    del axis_size
    return any_entry(jnp.any(flag) if in_batched[0] else flag), False  # again through the rule, under an outer vmap


@jax.custom_batching.custom_vmap
def keep_entries(flag: chex.Array, new, old):
    """``new``: the branch of a ``lax.cond`` on ``any_entry(flag)`` runs only where ``flag`` holds. Under ``vmap``,
    each entry's ``new`` where its ``flag`` holds and its ``old`` elsewhere (the branch ran for every entry because
    one needed it)."""
    del flag, old
    return new


@keep_entries.def_vmap
def _keep_entries_batched(axis_size, in_batched, flag, new, old):
    flag_batched, new_batched, old_batched = in_batched

    def full(x, batched):
        return x if batched else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))

    new, old = jax.tree.map(full, new, new_batched), jax.tree.map(full, old, old_batched)
    if flag_batched:  # per entry; an outer vmap batches the select itself
        out = jax.tree.map(
            lambda n, o: jnp.where(jnp.reshape(flag, (axis_size,) + (1,) * (n.ndim - 1)), n, o), new, old
        )
    else:
        out = keep_entries(flag, new, old)
    return out, jax.tree.map(lambda _: True, out)


def permutation(key: chex.PRNGKey, n: int) -> chex.Array:
    """A uniformly random permutation of ``0 ... n - 1`` (int32 ``[n]``).

    XLA:CPU sorts one uint32 array several times faster than key/value pairs, so for
    ``n <= 2**16`` random bits fill the high bits above the index, one sort orders them
    and a mask reads the indices back. Equal random bits keep index order; when such
    ties would touch more than 1% of the entries a second round reshuffles them.
    Larger ``n`` use :func:`jax.random.permutation`.
    """
    index_bits = max(int(n - 1).bit_length(), 1)
    if n > 2**16:
        return jax.random.permutation(key, n).astype(jnp.int32)
    free_bits = 32 - index_bits
    rounds = 1 if 100 * n < 2 ** (free_bits + 1) else 2
    order = jnp.arange(n, dtype=jnp.uint32)
    for round_key in jax.random.split(key, rounds):
        noise = jax.random.bits(round_key, (n,), jnp.uint32) << index_bits
        order = jnp.sort(noise | order) & jnp.uint32(2**index_bits - 1)
    return order.astype(jnp.int32)


def _apply_gradients(optimizer, grads, params, opt_state, axis_names):
    """Averages ``grads`` over ``axis_names`` and applies them: ``(params, opt_state, grad norm)``."""
    grads = pmean_flat(grads, axis_names)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, jnp.sqrt(tree_sum(jnp.square, grads))


def _observe(agent: Agent, state: LearnerState, trajectory: Trajectory, axis_names) -> tuple[LearnerState, Trajectory]:
    """``agent.observe``'s parameters and trajectory (running statistics updated over ``axis_names``, the trajectory
    normalised), or both as they are."""
    if agent.observe is None:
        return state, trajectory
    params, trajectory = agent.observe(state.params, trajectory, axis_names)
    return state._replace(params=params), trajectory


def _split_minibatches(batch, key, num_minibatches: int, axis: int):
    """Shuffles ``batch`` along ``axis`` and splits it into ``[num_minibatches, ...]``."""
    leaves = jax.tree.leaves(batch)
    size = leaves[0].shape[axis]
    if size % num_minibatches:
        raise ValueError(
            f"The learner batch has {size} entries along axis {axis}, which is not divisible "
            f"by num_minibatches = {num_minibatches}."
        )
    order = permutation(key, size)

    def split(x):
        x = jnp.take(x, order, axis=axis)
        x = jnp.reshape(x, (*x.shape[:axis], num_minibatches, size // num_minibatches, *x.shape[axis + 1 :]))
        return jnp.moveaxis(x, axis, 0)

    return jax.tree.map(split, batch)


def make_learner_step(
    agent: Agent,
    optimizer: optax.GradientTransformation,
    *,
    axis_names: Sequence[str] = (),
    unroll: bool = False,
    skip_nonfinite: bool = False,
    keep_last_finite: bool = False,
    items_in_place: bool = False,
) -> LearnerStep:
    """``learner_step(state, trajectory) -> (state, metrics)`` for ``agent``.

    ``agent.prepare`` turns the trajectory into a batch once; then ``agent.num_epochs``
    passes over ``agent.num_minibatches`` shuffled minibatches each take a gradient of
    ``agent.loss``, average it over every axis in ``axis_names`` (the devices, and any
    batch axis the caller vmaps over) and apply the optimizer. Metrics are averaged over
    minibatches, epochs and ``axis_names``, so they are the same on every device.
    ``unroll`` writes the epoch and minibatch loops out instead of scanning them. ``metrics["nonfinite"]`` is 0
    when the loss, the gradients and the new parameters are finite (:func:`nonfinite_code`); ``skip_nonfinite``
    discards an update where they are not (the state stays as it was). For a caller that donates the state to each
    call (Sebulba's learner): ``keep_last_finite`` returns the state it was given, whole, from an update that was
    not finite (the last finite state, to save where the run stops); ``items_in_place`` leaves a discarded update's
    replay items as written, for :func:`put_back_replay` to put back.

    A replay-based agent (``agent.replay`` set) gets :func:`make_replay_learner_step`.
    """
    axis_names = tuple(axis_names)
    if agent.replay is not None:
        return make_replay_learner_step(
            agent,
            optimizer,
            axis_names=axis_names,
            unroll=unroll,
            skip_nonfinite=skip_nonfinite,
            keep_last_finite=keep_last_finite,
            items_in_place=items_in_place,
        )
    grad_fn = jax.value_and_grad(agent.loss, has_aux=True)

    def sgd_step(carry, minibatch):
        params, opt_state, key = carry
        key, loss_key = jax.random.split(key)
        (_, metrics), grads = grad_fn(params, minibatch, loss_key)
        params, opt_state, grad_norm = _apply_gradients(optimizer, grads, params, opt_state, axis_names)
        return (params, opt_state, key), {**metrics, "grad_norm": grad_norm}

    def learner_step(state: LearnerState, trajectory: Trajectory) -> tuple[LearnerState, Metrics]:
        state, trajectory = _observe(agent, state, trajectory, axis_names)
        key, step_key = jax.random.split(state.key)
        batch = trajectory if agent.prepare is None else agent.prepare(state.params, trajectory)

        def epoch(carry, epoch_key):
            shuffle_key, sgd_key = jax.random.split(epoch_key)
            params, opt_state = carry
            if agent.num_minibatches == 1:
                minibatches = jax.tree.map(lambda x: x[None], batch)
            else:
                minibatches = _split_minibatches(batch, shuffle_key, agent.num_minibatches, agent.minibatch_axis)
            (params, opt_state, _), metrics = _loop(
                sgd_step, (params, opt_state, sgd_key), minibatches, agent.num_minibatches, unroll
            )
            return (params, opt_state), metrics

        epoch_keys = jax.random.split(step_key, agent.num_epochs)
        (params, opt_state), metrics = _loop(
            epoch, (state.params, state.opt_state), epoch_keys, agent.num_epochs, unroll
        )
        metrics = pmean_flat(jax.tree.map(jnp.mean, metrics), axis_names)
        new = LearnerState(params, opt_state, key, state.step + 1)
        return _guard(state, new, metrics, skip_nonfinite, keep_last_finite=keep_last_finite)

    return learner_step


UNROLL_STEPS = 4  # a replay learner writes out its loop of gradient steps up to this many per update


def make_replay_learner_step(
    agent: Agent,
    optimizer: optax.GradientTransformation,
    *,
    axis_names: Sequence[str] = (),
    unroll: bool = False,
    skip_nonfinite: bool = False,
    keep_last_finite: bool = False,
    items_in_place: bool = False,
) -> LearnerStep:
    """``learner_step(state, trajectory) -> (state, metrics)`` for a replay-based agent.

    The trajectory's items go into this device's replay shard; then up to
    ``ceil(replay_ratio x items / batch_size) + 1`` gradient steps run, each only while
    the rate limiter allows (a ``lax.cond``, so a skipped step costs nothing): each
    samples a batch from the shard (by priority or uniformly), averages its gradient
    over ``axis_names``, updates the priorities and the target network. Every shard
    receives the same number of items, so every device takes the same steps. Metrics:
    the loss terms averaged over the steps taken, ``sgd_steps`` taken in this call,
    ``replay_size`` and the achieved ``replay_ratio`` since learning could start; ``nonfinite`` as in
    :func:`make_learner_step` (a discarded update, with ``skip_nonfinite``, keeps neither the trajectory's items nor
    its gradient steps).
    """
    spec = agent.replay
    axis_names = tuple(axis_names)
    grad_fn = jax.value_and_grad(spec.loss, has_aux=True)
    discards = skip_nonfinite or keep_last_finite

    def target_update(params, target, sgd_steps):
        if spec.target_tau is not None:
            return optax.incremental_update(params, target, spec.target_tau)
        copy = sgd_steps % spec.target_period == 0
        return jax.tree.map(lambda p, t: jnp.where(copy, p, t), params, target)

    def draw(memory, keys, allowed):
        # ``keys``: the step's sample and loss keys ``[2]``. ``allowed``: the limiter's verdict. The step runs only
        # where it holds, except under a vmap (over seeds) that turns the branch into a select: there the replay
        # checks must not fire where it does not.
        sample_key, loss_key = keys[0], keys[1]
        return replay_lib.sample(
            memory,
            sample_key,
            spec.batch_size,
            prioritized=spec.prioritized,
            beta=spec.importance_exponent,
            checked=allowed,
        ), loss_key

    def sgd_step(carry, keys, allowed=True, drawn=None):
        # ``drawn``: the batch, drawn before the branch (uniform replay: the memory is then no operand of the branch);
        # else drawn here from the carry's memory.
        params, opt_state, extra = carry
        sample, loss_key = drawn or draw(extra.replay, keys, allowed)
        (_, (metrics, priorities)), grads = grad_fn(params, extra.target_params, sample.items, sample.weights, loss_key)
        params, opt_state, grad_norm = _apply_gradients(optimizer, grads, params, opt_state, axis_names)
        memory = extra.replay
        if spec.prioritized:
            if discards:  # a NaN priority comes with a NaN loss: the update is discarded, priorities and all, so
                priorities = jnp.nan_to_num(priorities, nan=0.0, posinf=0.0)  # the memory need not refuse it first
            memory = replay_lib.update_priorities(
                memory, sample.indices, priorities, alpha=spec.priority_exponent, checked=allowed
            )
        sgd_steps = extra.sgd_steps + 1
        extra = ReplayExtra(
            target_update(params, extra.target_params, sgd_steps),
            memory,
            extra.limiter.sample(spec.batch_size),
            sgd_steps,
        )
        return (params, opt_state, extra), {**metrics, "grad_norm": grad_norm}

    def maybe_step(carry, keys, zeros):
        params, opt_state, extra = carry
        allowed = extra.limiter.can_sample(spec.replay_ratio, spec.min_size)
        # Under a vmap over seeds the step runs when any entry's limiter allows it (they agree unless a discarded
        # update held one back), each entry keeping its step only where its own allows: before the replay holds a
        # batch, and at a spare step with no allowance, nothing is computed.
        run = any_entry(allowed)
        if spec.prioritized:  # the step writes priorities: the memory goes through the branch
            carry, metrics = jax.lax.cond(
                run,
                lambda c, k: keep_entries(allowed, sgd_step(c, k, allowed), (c, zeros)),
                lambda c, k: (c, zeros),
                carry,
                keys,
            )
            return carry, (metrics, allowed.astype(jnp.float32))
        # Uniform replay: the batch is drawn before the branch (a gather of one batch), so that the memory is not an
        # operand of the branch (measured beside drawing inside it: the same rate, 0.98x PureJaxRL's both).
        memory = extra.replay
        drawn = draw(memory, keys, allowed)
        (params, opt_state, extra), metrics = jax.lax.cond(
            run,
            lambda c, d: keep_entries(allowed, sgd_step(c, keys, allowed, d), (c, zeros)),
            lambda c, d: (c, zeros),
            (params, opt_state, extra._replace(replay=None)),
            drawn,
        )
        return (params, opt_state, extra._replace(replay=memory)), (metrics, allowed.astype(jnp.float32))

    def learner_step(state: LearnerState, trajectory: Trajectory) -> tuple[LearnerState, Metrics]:
        state, trajectory = _observe(agent, state, trajectory, axis_names)
        items, mask = spec.make_items(trajectory)
        num_items = jax.tree.leaves(items)[0].shape[0]
        extra = state.extra
        extra = extra._replace(
            replay=replay_lib.add(extra.replay, items, mask, prioritized=spec.prioritized),
            limiter=extra.limiter.insert(num_items),
        )
        max_steps = gradient_steps_per_update(spec.replay_ratio, num_items, spec.batch_size)
        # One random call for the update's keys: the next update's, and each step's sample and loss keys.
        keys = jax.random.split(state.key, 2 * max_steps + 1)
        key, keys = keys[0], keys[1:].reshape(max_steps, 2)
        carry = (state.params, state.opt_state, extra)
        # A skipped step's metrics, shaped once per trace (not once per unrolled step).
        zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(sgd_step, carry, keys[0])[1])
        # A few steps are written out: a loop's own cost outweighs them (one or two steps per update is common).
        (params, opt_state, extra), (metrics, taken) = _loop(
            lambda c, k: maybe_step(c, k, zeros), carry, keys, max_steps, unroll or max_steps <= UNROLL_STEPS
        )
        steps = jnp.sum(taken)
        metrics = jax.tree.map(lambda m: jnp.sum(m * taken) / jnp.maximum(steps, 1.0), metrics)
        metrics = pmean_flat(metrics, axis_names)
        new, metrics = _guard(
            state,
            LearnerState(params, opt_state, key, state.step + 1, extra),
            metrics,
            skip_nonfinite,
            keep_last_finite=keep_last_finite,
            items_in_place=items_in_place,
        )
        metrics.update(
            sgd_steps=steps,
            replay_size=new.extra.replay.size.astype(jnp.float32),
            replay_ratio=new.extra.limiter.ratio(spec.min_size),
        )
        return new, metrics

    return learner_step


def gradient_steps_per_update(replay_ratio: float, num_items: int, batch_size: int) -> int:
    """The most gradient steps one update may take under the rate limiter: ``replay_ratio x num_items / batch_size``
    rounded up, and one more when that is fractional (the allowance then builds up across updates). A whole number
    needs no spare step: each update adds exactly that many batches to the allowance, so a backlog never grows past
    the one batch the limiter's ``<=`` admits at the start."""
    exact = replay_ratio * num_items / batch_size
    return math.ceil(exact) + (0 if float(exact).is_integer() else 1)


def should_unroll(observation_rank: int, platform: str) -> bool:
    """Whether learner loops must be written out: convolutional losses (image observations) on XLA:CPU.

    There the gradient of a convolution inside ``lax.scan`` or ``fori_loop`` runs tens of
    times slower than the same work unrolled (jax-ml/jax issue 12868; about 22x for one
    PPO step of the IMPALA ResNet on a 2-core CPU).
    """
    return platform == "cpu" and observation_rank == 3


__all__ = [
    "LearnerStep",
    "any_entry",
    "keep_entries",
    "NONFINITE_GRADIENTS",
    "NONFINITE_LOSS",
    "NONFINITE_PARAMETERS",
    "ReplayExtra",
    "init_learner_state",
    "make_replay_learner_step",
    "make_learner_step",
    "make_optimizer",
    "nonfinite_code",
    "nonfinite_names",
    "permutation",
    "pmean_flat",
    "psum_flat",
    "should_unroll",
    "gradient_steps_per_update",
    "tree_sum",
]
