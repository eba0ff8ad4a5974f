import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import envs
from podracer.core.envs.cartpole import CartPoleState


def _board(ball_x, ball_y, paddle_x, rows=10, columns=5):
    board = np.zeros((rows, columns), np.float32)
    board[ball_y, ball_x] = 1.0
    board[rows - 1, paddle_x] = 1.0
    return board


def test_catch_reset_puts_ball_in_top_row_and_paddle_in_the_middle():
    env = envs.Catch()
    states, ts = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 500))
    assert ts.observation.shape == (500, 10, 5) and ts.observation.dtype == jnp.float32
    assert set(np.asarray(states.ball_x).tolist()) == {0, 1, 2, 3, 4}
    np.testing.assert_array_equal(states.ball_y, 0)
    np.testing.assert_array_equal(states.paddle_x, 2)
    np.testing.assert_array_equal(ts.reward, 0.0)
    np.testing.assert_array_equal(ts.discount, 1.0)
    assert not np.any(ts.last)
    for i in range(5):
        np.testing.assert_array_equal(ts.observation[i], _board(int(states.ball_x[i]), 0, 2))


def test_catch_ball_falls_and_paddle_moves_within_the_board():
    env = envs.Catch()
    state, _ = env.reset(jax.random.key(1))
    ball_x = int(state.ball_x)
    expected_paddle = 2
    for t, action in enumerate([0, 0, 0, 2, 1, 2, 2, 2]):  # left x3 (clipped at 0), right, stay, right x3
        state, ts = env.step(state, jnp.asarray(action))
        expected_paddle = int(np.clip(expected_paddle + action - 1, 0, 4))
        assert int(state.ball_y) == t + 1
        assert int(state.paddle_x) == expected_paddle
        np.testing.assert_array_equal(ts.observation, _board(ball_x, t + 1, expected_paddle))
        assert float(ts.reward) == 0.0 and float(ts.discount) == 1.0 and not bool(ts.last)


@pytest.mark.parametrize("catch", [True, False])
def test_catch_episode_ends_in_the_bottom_row_with_plus_or_minus_one(catch):
    env = envs.Catch()
    for seed in range(10):
        state, _ = env.reset(jax.random.key(seed))
        for t in range(9):
            ball, paddle = int(state.ball_x), int(state.paddle_x)
            toward = 1 + int(np.sign(ball - paddle))
            away = 0 if ball >= 2 else 2
            state, ts = env.step(state, jnp.asarray(toward if catch else away))
            assert bool(ts.last) == (t == 8)
        assert float(ts.reward) == (1.0 if catch else -1.0)
        assert float(ts.discount) == 0.0


def test_auto_reset_and_episode_statistics_follow_the_dm_env_convention():
    env = envs.wrap(envs.Catch())
    state, ts = env.reset(jax.random.key(3))
    step = jax.jit(env.step)
    lasts, rewards, returns, lengths = [], [], [], []
    for _ in range(25):
        state, ts = step(state, jnp.asarray(1))
        lasts.append(bool(ts.last))
        rewards.append(float(ts.reward))
        returns.append(float(state.stats.episode_return))
        lengths.append(int(state.stats.episode_length))
    # Episodes of 9 steps, then one reset step (reward 0, not last) that starts the next.
    assert [i for i, last in enumerate(lasts) if last] == [8, 18]
    assert rewards[9] == 0.0 and lengths[9] == 0 and returns[9] == 0.0
    assert lengths[8] == 9 and lengths[18] == 9
    assert returns[8] == rewards[8] and returns[18] == rewards[18]
    assert abs(rewards[8]) == 1.0


def test_a_batch_steps_as_its_environments_do_and_resets_only_where_an_episode_starts():
    env = envs.wrap(envs.Catch())
    one = jax.jit(env.step)
    # Environment 0 at its first step, environment 1 four steps into its episode: their episodes end apart.
    first, _ = env.reset(jax.random.key(0))
    ahead, _ = env.reset(jax.random.key(1))
    for _ in range(4):
        ahead, _ = one(ahead, jnp.asarray(1))
    state = jax.tree.map(lambda a, b: jnp.stack([a, b]), first, ahead)
    step_batch, action = jax.jit(env.step_batch), jnp.ones((2,), jnp.int32)
    lasts = []
    for t in range(20):
        alone = [one(jax.tree.map(lambda x, i=i: x[i], state), jnp.asarray(1))[1] for i in range(2)]
        resetting = bool(jnp.any(state.last))
        before = state.env_state.key
        state, ts = step_batch(state, action)
        lasts.append(np.asarray(ts.last).tolist())
        for i in range(2):
            if not bool(state.env_state.env_state.ball_y[i] == 0):  # mid-episode: the environment's own step
                np.testing.assert_array_equal(ts.observation[i], alone[i].observation)
                assert float(ts.reward[i]) == float(alone[i].reward)
        if not resetting:  # no episode started: no random draw, the keys stay
            np.testing.assert_array_equal(jax.random.key_data(state.env_state.key), jax.random.key_data(before))
    ends = [[t for t, last in enumerate(lasts) if last[i]] for i in range(2)]
    assert ends == [[8, 18], [4, 14]]  # 9-step episodes, then one reset step each
    assert state.stats.episode_length.tolist() == [0, 4]  # env 0 at its reset step, env 1 four steps into its episode


def test_make_rejects_unknown_environment_names():
    with pytest.raises(
        ValueError,
        match=r"Unknown JAX environment 'cartpol'; available: cartpole, catch, memory, synthetic, or SUITE:NAME "
        r"\(brax, bsuite, craftax, gymnax, jumanji, navix, pgx, playground, xminigrid; --env list\); your own: "
        r"envs.register, --import MODULE or a podracer.envs entry point\. Did you mean 'cartpole'\?",
    ):
        envs.make("cartpol")
    assert isinstance(envs.make("CartPole-v1"), envs.CartPole)


def _envpool_cartpole(num_envs, seed):
    envpool = pytest.importorskip("envpool")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return envpool.make("CartPole-v1", env_type="gymnasium", num_envs=num_envs, seed=seed)


def test_jax_cartpole_matches_envpool_step_for_step_from_the_same_state():
    """Every transition (including terminations and the 500-step truncation) from envpool's state."""
    num_envs, steps = 16, 1200
    pool = _envpool_cartpole(num_envs, seed=7)
    jax_env = envs.CartPole()
    step = jax.jit(jax.vmap(jax_env.step))
    rng = np.random.default_rng(0)
    noise = np.linspace(0.02, 0.6, num_envs)
    obs, info = pool.reset()
    elapsed = info["elapsed_step"]
    previous_done = np.zeros(num_envs, bool)
    seen_terminated = seen_truncated = 0
    for _ in range(steps):
        # A balancing controller with 2% ... 60% random actions: some episodes reach truncation, others fall.
        balance = (obs[:, 2] + 0.5 * obs[:, 3] + 0.01 * obs[:, 0] + 0.1 * obs[:, 1] > 0).astype(np.int32)
        action = np.where(rng.random(num_envs) < noise, rng.integers(0, 2, num_envs), balance).astype(np.int32)
        state = CartPoleState(jnp.asarray(obs), jnp.asarray(elapsed, jnp.int32))
        _, ts = step(state, jnp.asarray(action))
        obs, reward, terminated, truncated, info = pool.step(action)
        live = ~previous_done  # after done, envpool resets instead of stepping
        np.testing.assert_allclose(np.asarray(ts.observation)[live], obs[live], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(np.asarray(ts.reward)[live], reward[live])
        np.testing.assert_array_equal(np.asarray(ts.last)[live], (terminated | truncated)[live])
        np.testing.assert_array_equal(np.asarray(ts.discount)[live], np.where(terminated, 0.0, 1.0)[live])
        np.testing.assert_array_equal(reward[~live], 0.0)
        seen_terminated += int(np.sum(terminated & live))
        seen_truncated += int(np.sum(truncated & live))
        previous_done = terminated | truncated
        elapsed = info["elapsed_step"]
    assert seen_terminated > 5 and seen_truncated > 5


def test_jax_cartpole_matches_envpool_over_whole_random_episodes():
    num_envs = 32
    pool = _envpool_cartpole(num_envs, seed=3)
    jax_env = envs.CartPole()
    step = jax.jit(jax.vmap(jax_env.step))
    rng = np.random.default_rng(1)
    obs, info = pool.reset()
    state = CartPoleState(jnp.asarray(obs), jnp.zeros(num_envs, jnp.int32))
    alive = np.ones(num_envs, bool)
    lengths = np.zeros(num_envs, int)
    while alive.any():
        action = rng.integers(0, 2, num_envs).astype(np.int32)
        state, ts = step(state, jnp.asarray(action))
        obs, reward, terminated, truncated, _ = pool.step(action)
        np.testing.assert_allclose(np.asarray(ts.observation)[alive], obs[alive], rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(np.asarray(ts.last)[alive], terminated[alive])
        lengths += alive
        alive &= ~terminated
    assert lengths.min() >= 8 and lengths.max() < 200


def test_a_step_that_draws_no_random_numbers_keeps_its_key():
    """``uses_first_argument`` reads a function's traced program: a deterministic step ignores its key, a stochastic
    one reads it. gymnax's adapter splits its key only for the latter (a random call per env and step saved)."""
    from podracer.core.envs.base import uses_first_argument

    key, x = jax.random.key(0), jnp.ones(3)
    assert not uses_first_argument(lambda k, x: x * 2.0, key, x)
    assert uses_first_argument(lambda k, x: x + jax.random.uniform(k, (3,)), key, x)
    assert uses_first_argument(lambda k, x: (k, x), key, x)  # passed through: used
    pytest.importorskip("gymnax")
    for name, stochastic in (("gymnax:CartPole-v1", False), ("gymnax:Asterix-MinAtar", True)):
        env = envs.make(name)
        state, _ = env.reset(jax.random.key(1))
        stepped, _ = jax.jit(env.step)(state, jnp.int32(0))
        same = bool(jnp.all(jax.random.key_data(stepped.key) == jax.random.key_data(state.key)))
        assert env._step_uses_key is stochastic and same is not stochastic, name
