"""podracer's JAX ports of bsuite's experiments (``bsuite:ID``): the ids and their sweeps, the rules step by step,
and the scores script's reading of a run into bsuite's CSV logs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import envs
from podracer.core.envs import bsuite

import benchmark_scripts  # tests/benchmark_scripts.py


def _play(env, actions, key=0):
    state, timestep = env.reset(jax.random.key(key))
    steps = [timestep]
    for action in actions:
        state, timestep = env.step(state, jnp.int32(action))
        steps.append(timestep)
    return state, steps


def test_the_ids_are_bsuites_sweeps():
    assert len(bsuite.names()) == 80
    assert bsuite.ids("catch")[:2] == ["catch/0", "catch/1"]
    scales = [setting["reward_scale"] for setting in bsuite.settings("catch_scale")]
    assert scales == [s for s in (0.001, 0.03, 1.0, 30.0, 1000.0) for _ in range(4)]
    assert bsuite.EPISODES == {"bandit": 10_000, "catch": 10_000, "catch_scale": 10_000, "discounting_chain": 1_000}
    with pytest.raises(ValueError, match=r"^bsuite: no port of the experiment 'deep_sea'; ported: bandit, catch, "):
        bsuite.settings("deep_sea")


def test_an_unknown_id_is_one_line():
    with pytest.raises(ValueError, match=r"^--env bsuite:catch/20: unknown bsuite environment\. Did you mean "):
        envs.make("bsuite:catch/20")


def test_catch_scale_scales_the_reward_and_ends_after_nine_steps():
    env = envs.make("bsuite:catch_scale/19")
    assert (env.reward_scale, env.episode_length, env.spec().num_actions) == (1000.0, 9, 3)
    state, steps = _play(env, [1] * 9)
    assert [bool(t.last) for t in steps] == [False] * 9 + [True]
    caught = int(state.ball_x) == 2  # the paddle starts in the middle column and stayed
    assert float(steps[-1].reward) == (1000.0 if caught else -1000.0)
    assert float(steps[-1].discount) == 0.0
    assert all(float(t.reward) == 0.0 for t in steps[:-1])
    bottom = np.maximum(np.eye(5)[2], np.eye(5)[int(state.ball_x)])  # the paddle and the ball on the bottom row
    np.testing.assert_array_equal(steps[-1].observation[9], bottom)


def test_discounting_chain_pays_each_chain_after_its_delay():
    env = envs.make("bsuite:discounting_chain/7")  # the bonus chain: 7 % 5 = 2
    for chain, delay in enumerate((1, 3, 10, 30, 100)):
        _, steps = _play(env, [chain] + [0] * 99)
        rewards = np.array([float(t.reward) for t in steps[1:]])
        expected = np.zeros(100)
        expected[delay - 1] = 1.1 if chain == 2 else 1.0
        np.testing.assert_allclose(rewards, expected, rtol=1e-6)
        assert [bool(t.last) for t in steps[1:]] == [False] * 99 + [True]
        assert float(steps[-1].discount) == 0.0
        np.testing.assert_allclose(steps[0].observation, [[-1.0, 0.0]])
        np.testing.assert_allclose(steps[50].observation, [[chain, 0.5]])


def test_the_bandit_pays_a_permutation_of_its_arms_in_one_step():
    rewards = [np.asarray(envs.make(f"bsuite:bandit/{seed}").env.rewards) for seed in range(20)]
    for arms in rewards:
        np.testing.assert_allclose(np.sort(arms), np.linspace(0, 1, 11), rtol=1e-6)
    assert len({tuple(arms) for arms in rewards}) == 20
    env = envs.make("bsuite:bandit/3")
    best = int(np.argmax(rewards[3]))
    _, steps = _play(env, [best])
    assert (float(steps[1].reward), bool(steps[1].last), float(steps[1].discount)) == (1.0, True, 0.0)
    np.testing.assert_array_equal(steps[1].observation, np.ones((1, 1)))


def test_the_ports_step_under_jit_and_vmap():
    env = envs.make("bsuite:discounting_chain/0")
    states, timesteps = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 4))
    step = jax.jit(jax.vmap(env.step))
    for _ in range(3):
        states, timesteps = step(states, jnp.arange(4, dtype=jnp.int32))
    np.testing.assert_allclose(timesteps.reward, [0.0, 1.0, 0.0, 0.0])  # chain 1 pays 1 after 3 steps


def test_the_regret_is_the_optimum_less_the_raw_returns():
    assert bsuite.regret(raw_return=6_690.0, episodes=10_000) == 3_310.0


def test_the_scores_script_runs_ids_that_share_rules_together():
    script = benchmark_scripts.load("bsuite_scores")
    assert script.groups("catch") == [list(range(20))]
    assert script.groups("catch_scale") == [list(range(i, i + 4)) for i in range(0, 20, 4)]
    assert script.groups("discounting_chain") == [[i, i + 5, i + 10, i + 15] for i in range(5)]
    assert script.groups("bandit") == [[i] for i in range(20)]


def test_the_scores_script_writes_bsuites_csv_log(tmp_path):
    script = benchmark_scripts.load("bsuite_scores")
    totals = [
        {"episode": 1_000, "steps": 10_000, "total": -30.0},
        {"episode": 10_000, "steps": 100_000, "total": 180.0},
    ]
    script.write_csv("catch_scale", 5, totals, tmp_path)  # id 5: reward scale 0.03
    lines = (tmp_path / "bsuite_id_-_catch_scale-5.csv").read_text().splitlines()
    assert lines[0] == "steps,episode,total_return,episode_len,total_regret"
    steps, episode, total, length, regret = lines[2].split(",")
    assert (int(steps), int(episode), float(total), int(length)) == (90_000, 10_000, 180.0, 9)
    assert float(regret) == pytest.approx(10_000 - 180.0 / 0.03)  # the raw returns' shortfall
    script.write_csv("discounting_chain", 0, totals, tmp_path)
    assert (tmp_path / "bsuite_id_-_discounting_chain-0.csv").read_text().splitlines()[0] == (
        "steps,episode,total_return,episode_len"
    )
