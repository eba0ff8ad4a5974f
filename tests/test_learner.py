import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs, learner
from podracer import anakin
from podracer.run import parallel
from podracer.core.learner import permutation


def _trajectory(agent, env, num_envs, rollout_length=8, seed=0):
    optimizer = learner.make_optimizer(1e-2)
    state = anakin.init_state(env, agent, optimizer, jax.random.key(seed), num_envs)
    rollout = jax.jit(anakin.make_rollout(env, agent, rollout_length))
    # A few rollouts in, so episode boundaries fall inside the trajectory.
    rollout_state = state.rollout
    for _ in range(3):
        rollout_state, trajectory, _ = rollout(state.learner.params, rollout_state)
    return state.learner, trajectory, optimizer


AGENTS = {
    "a2c": dict(),
    "a2c_nstep": dict(n_step=3),
    "ppo": dict(num_minibatches=1, num_epochs=3, normalize_advantages=False),
}


def _map_over(form, fn, devices):
    """The library's jit of shard_map over a Mesh, or a user's own pmap, of ``fn``."""
    if form == "device_map":
        return parallel.device_map(fn, devices)
    return jax.pmap(fn, axis_name=parallel.DEVICE_AXIS, devices=devices)


@pytest.mark.parametrize("form", ["device_map", "pmap"])
@pytest.mark.parametrize("name", sorted(AGENTS))
def test_learner_step_on_two_devices_with_half_batches_equals_one_device(name, form, devices):
    env = envs.Catch()
    agent_name = name.split("_")[0]
    agent = agents.make(agent_name, env.spec(), **AGENTS[name])
    state, trajectory, optimizer = _trajectory(agent, env, num_envs=8)

    single = jax.jit(learner.make_learner_step(agent, optimizer))
    expected, expected_metrics = single(state, trajectory)

    step = learner.make_learner_step(agent, optimizer, axis_names=(parallel.DEVICE_AXIS,))
    pair = devices[:2]
    halves = jax.tree.map(lambda x: jnp.stack(jnp.split(x, 2, axis=1)), trajectory)
    p_step = _map_over(form, step, pair)
    got, metrics = p_step(parallel.replicate(state, pair), parallel.shard(halves, pair))

    for leaf_expected, leaf_got in zip(jax.tree.leaves(expected.params), jax.tree.leaves(got.params)):
        np.testing.assert_allclose(leaf_got[0], leaf_expected, rtol=2e-5, atol=2e-6)
        np.testing.assert_array_equal(leaf_got[0], leaf_got[1])
    np.testing.assert_allclose(metrics["loss"][0], expected_metrics["loss"], rtol=1e-4, atol=1e-6)
    assert int(got.step[0]) == 1


@pytest.mark.parametrize("form", ["device_map", "pmap"])
def test_gradients_average_over_a_vmapped_batch_axis_and_the_device_axis(form, devices):
    """2 devices x 2 vmapped learners with B/4 each equals one learner with B."""
    env = envs.Catch()
    agent = agents.make("a2c", env.spec())
    state, trajectory, optimizer = _trajectory(agent, env, num_envs=8)
    expected, _ = jax.jit(learner.make_learner_step(agent, optimizer))(state, trajectory)

    step = learner.make_learner_step(agent, optimizer, axis_names=(parallel.BATCH_AXIS, parallel.DEVICE_AXIS))
    batched = jax.vmap(step, axis_name=parallel.BATCH_AXIS, in_axes=(None, 0))
    p_step = _map_over(form, batched, devices[:2])
    quarters = jax.tree.map(
        lambda x: jnp.stack(jnp.split(x, 4, axis=1)).reshape(2, 2, *x.shape[:1], -1, *x.shape[2:]), trajectory
    )
    got, _ = p_step(parallel.replicate(state, devices[:2]), parallel.shard(quarters, devices[:2]))
    for leaf_expected, leaf_got in zip(jax.tree.leaves(expected.params), jax.tree.leaves(got.params)):
        np.testing.assert_allclose(leaf_got[1, 1], leaf_expected, rtol=2e-5, atol=2e-6)


def test_unrolled_epochs_and_minibatches_equal_the_scanned_ones():
    env = envs.Catch()
    agent = agents.make("ppo", env.spec(), num_epochs=2, num_minibatches=2)  # both loops, each of two steps
    state, trajectory, optimizer = _trajectory(agent, env, num_envs=8)
    scanned, _ = jax.jit(learner.make_learner_step(agent, optimizer))(state, trajectory)
    unrolled, _ = jax.jit(learner.make_learner_step(agent, optimizer, unroll=True))(state, trajectory)
    for a, b in zip(jax.tree.leaves(scanned.params), jax.tree.leaves(unrolled.params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [1, 7, 4096, 8192, 20000, 70000])
def test_permutation_is_a_permutation(n):
    order = np.asarray(jax.jit(permutation, static_argnums=1)(jax.random.key(n), n))
    np.testing.assert_array_equal(np.sort(order), np.arange(n))
    if n > 100:
        assert not np.array_equal(order, np.arange(n))


def test_permutation_is_uniform_over_positions():
    """Where index 0 lands, over many keys: a chi-square test against the uniform distribution."""
    n, trials = 16, 4000
    keys = jax.random.split(jax.random.key(0), trials)
    orders = np.asarray(jax.jit(jax.vmap(functools.partial(permutation, n=n)))(keys))
    positions = np.argmax(orders == 0, axis=1)
    counts = np.bincount(positions, minlength=n)
    expected = trials / n
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert chi2 < 37.7  # 99.9% quantile of chi-square with 15 degrees of freedom


def test_minibatches_that_do_not_divide_the_batch_fail_clearly():
    env = envs.Catch()
    agent = agents.make("ppo", env.spec(), num_minibatches=3)
    state, trajectory, optimizer = _trajectory(agent, env, num_envs=4)
    with pytest.raises(
        ValueError,
        match=r"The learner batch has 32 entries along axis 0, which is not divisible by num_minibatches = 3\.",
    ):
        jax.jit(learner.make_learner_step(agent, optimizer))(state, trajectory)


def test_a_branch_on_any_entry_runs_once_for_a_vmapped_batch_and_keeps_each_entrys_own_result():
    """The replay learner's gradient step under a vmap over seeds: taken only when some entry's limiter allows it
    (counted by a callback in the branch), and then kept only by the entries it allows."""
    taken = []

    def step(flag, x):
        def branch(x):
            jax.debug.callback(lambda: taken.append(1))
            return learner.keep_entries(flag, x + 1.0, x)

        return jax.lax.cond(learner.any_entry(flag), branch, lambda x: x, x)

    x = jnp.arange(6.0).reshape(2, 3)
    none = jax.jit(jax.vmap(jax.vmap(step)))(jnp.zeros((2, 3), bool), x)
    np.testing.assert_array_equal(none, x)
    assert taken == []  # a select would have run the branch
    flags = jnp.array([[True, False, True], [False, False, False]])
    some = jax.jit(jax.vmap(jax.vmap(step)))(flags, x)
    np.testing.assert_array_equal(some, x + flags)
    assert len(taken) == 1
    # unbatched: a plain branch
    assert float(jax.jit(step)(jnp.array(True), jnp.array(1.0))) == 2.0
    assert float(jax.jit(step)(jnp.array(False), jnp.array(1.0))) == 1.0
    # a flag shared by the batch (unbatched) with batched values
    shared = jax.jit(jax.vmap(step, in_axes=(None, 0)))(jnp.array(True), jnp.arange(3.0))
    np.testing.assert_array_equal(shared, jnp.arange(3.0) + 1)
