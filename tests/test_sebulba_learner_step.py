"""Sebulba's learner step takes the state it is given (donated, so that a replay memory is written in place): its
results are the plain step's, and an update that is not finite leaves the state as it was, memory included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs, learner
from podracer import anakin
from podracer.run import parallel
from podracer.run.sebulba.assemble import learner_step

NUM_ENVS, ROLLOUT = 4, 8  # 32 items a trajectory: the memory of 64 wraps at the third


def _dqn(prioritized: bool):
    env = envs.Catch()
    agent = agents.make(
        "dqn",
        env.spec(),
        replay_capacity=64,
        min_replay_size=8,
        batch_size=8,
        replay_ratio=2.0,
        prioritized=prioritized,
        n_step=1,
    )
    state = anakin.init_state(env, agent, agent.optimizer, jax.random.key(0), NUM_ENVS, rollout_length=ROLLOUT)
    rollout = jax.jit(anakin.make_rollout(env, agent, ROLLOUT))
    trajectories, rollout_state = [], state.rollout
    for _ in range(4):
        rollout_state, trajectory, _ = rollout(state.learner.params, rollout_state)
        trajectories.append(trajectory)
    return agent, state.learner, trajectories


def _on(devices, tree):
    return parallel.replicate(tree, devices)


def _assert_trees_equal(got, expected):
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("prioritized", [False, True])
def test_the_donated_step_learns_as_the_plain_step(prioritized, devices):
    agent, state, trajectories = _dqn(prioritized)
    plain = jax.jit(learner.make_learner_step(agent, agent.optimizer))
    expected = state
    for trajectory in trajectories:
        expected, _ = plain(expected, trajectory)

    step = learner_step(agent, devices[:1])
    got = _on(devices[:1], state)
    for trajectory in trajectories:
        got, metrics = step(got, _on(devices[:1], trajectory))
    assert float(metrics["sgd_steps"][0]) > 0
    for g, e in zip(
        jax.tree.leaves(parallel.host_entry(got)),
        jax.tree.leaves(parallel.host_entry(jax.tree.map(lambda x: x[None], expected))),
    ):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("on_nonfinite, prioritized", [("stop", True), ("skip", False)])
def test_an_update_that_is_not_finite_leaves_the_donated_state_as_it_was(on_nonfinite, prioritized, devices):
    agent, state, trajectories = _dqn(prioritized)
    step = learner_step(agent, devices[:1], on_nonfinite=on_nonfinite)
    state = _on(devices[:1], state)
    for trajectory in trajectories[:3]:  # 96 items: the memory of 64 is full and has wrapped
        state, _ = step(state, _on(devices[:1], trajectory))
    before = parallel.host_entry(state)
    poisoned = trajectories[3]._replace(
        timestep=trajectories[3].timestep._replace(reward=jnp.full_like(trajectories[3].timestep.reward, jnp.nan))
    )
    after, metrics = step(state, _on(devices[:1], poisoned))
    assert float(metrics["nonfinite"][0]) > 0
    after = parallel.host_entry(after)
    # The trajectory's items are gone from the memory, and those it overwrote are back.
    _assert_trees_equal(after.extra, before.extra)
    _assert_trees_equal((after.params, after.opt_state), (before.params, before.opt_state))
    if on_nonfinite == "stop":  # the last finite state, whole: the one a stopping run saves
        _assert_trees_equal((after.key, after.step), (before.key, before.step))
    else:  # skip: the key and the update count move on
        assert int(after.step) == int(before.step) + 1
