import importlib.metadata

import numpy as np
import pytest

envpool = pytest.importorskip("envpool")

from podracer.run.hostenvs.envpool import EnvpoolEnv, resolve_task_id  # noqa: E402


def test_short_names_and_unknown_ids():
    assert resolve_task_id("Pong") == "Pong-v5"
    assert resolve_task_id("breakout") == "Breakout-v5"
    assert resolve_task_id("CartPole") == "CartPole-v1"
    assert resolve_task_id("CartPole-v0") == "CartPole-v0"
    version = importlib.metadata.version("envpool").replace(".", r"\.")
    with pytest.raises(
        ValueError, match=rf"Unknown envpool task 'Pongg' in envpool {version}\. Close matches: .*Pong-v5"
    ):
        resolve_task_id("Pongg")
    with pytest.raises(
        ValueError, match=r"Unknown envpool task 'Brekout-v5' in envpool .*\. Close matches: .*Breakout-v5"
    ):
        resolve_task_id("Brekout-v5")


def test_cartpole_termination_resets_and_episode_statistics():
    env = EnvpoolEnv("CartPole", num_envs=8, seed=1)
    spec = env.spec()
    assert spec.num_actions == 2 and spec.observation.shape == (4,) and spec.observation.dtype == np.float32
    ts = env.reset()
    assert ts.observation.shape == (8, 4) and ts.reward.dtype == np.float32 and ts.last.dtype == bool
    rng = np.random.default_rng(0)
    ended = 0
    previous_last = np.zeros(8, bool)
    for _ in range(200):
        ts = env.step(rng.integers(0, 2, 8))
        # the step after an episode's end is a reset: reward 0, counters at 0
        np.testing.assert_array_equal(ts.reward[previous_last], 0.0)
        np.testing.assert_array_equal(env.stats.episode_length[previous_last], 0)
        # CartPole pays 1 per step, so a finished episode's return is its length
        np.testing.assert_array_equal(env.stats.episode_return[ts.last], env.stats.episode_length[ts.last])
        np.testing.assert_array_equal(ts.discount[ts.last], 0.0)  # falling terminates
        ended += int(ts.last.sum())
        previous_last = ts.last
    assert ended > 20
    env.close()


def test_cartpole_truncation_keeps_discount_one():
    env = EnvpoolEnv("CartPole-v1", num_envs=4, seed=0, max_episode_steps=10)
    env.reset()
    for t in range(10):
        ts = env.step(np.zeros(4, np.int32) + t % 2)  # alternate: the pole stays up for 10 steps
    assert ts.last.all()
    np.testing.assert_array_equal(ts.discount, 1.0)
    np.testing.assert_array_equal(env.stats.episode_length, 10)


def test_pong_preprocessing_and_clipped_rewards_with_raw_returns():
    env = EnvpoolEnv("Pong", num_envs=2, seed=0)
    config = env._pool.spec.config
    assert config.repeat_action_probability == 0.25 and config.frame_skip == 4 and config.stack_num == 4
    assert not config.full_action_space and config.gray_scale
    spec = env.spec()
    assert spec.observation.shape == (4, 84, 84) and spec.observation.dtype == np.uint8 and spec.num_actions == 6
    ts = env.reset()
    assert ts.observation.shape == (2, 4, 84, 84) and ts.observation.dtype == np.uint8
    rewards = []
    rng = np.random.default_rng(0)
    for _ in range(300):
        ts = env.step(rng.integers(0, 6, 2))
        rewards.append(ts.reward)
    rewards = np.concatenate(rewards)
    assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0} and (rewards != 0).any()
    # Pong's raw points are also +-1, so the raw running return equals the sum of clipped rewards
    np.testing.assert_array_equal(env.stats.episode_return, np.sum(np.stack(np.split(rewards, 300)), axis=0))
    env.close()


def test_mujoco_tasks_take_continuous_actions_rescaled_to_their_bounds():
    from podracer.core.types import Box

    env = EnvpoolEnv("HalfCheetah-v4", num_envs=3, seed=0)
    spec = env.spec()
    assert spec.continuous and spec.box == Box((-1.0,) * 6, (1.0,) * 6) and spec.num_actions == 0
    assert spec.observation.shape == (17,) and spec.observation.dtype == np.float32  # float64 arrives as float32
    ts = env.reset()
    assert ts.observation.dtype == np.float32 and ts.observation.shape == (3, 17)
    ts = env.step(np.full((3, 6), 0.5, np.float32))
    assert ts.observation.dtype == np.float32 and ts.reward.shape == (3,) and not ts.last.any()
    with pytest.raises(ValueError, match=r"^Expected actions of shape \(3, 6\), got \(3,\)\.$"):
        env.send(np.zeros(3, np.int32))
    env.close()


# One task of each of envpool's newer native suites: (id, suite, observation shape, channels-last board).
NATIVE = [
    ("CartpoleBalance-v1", "dm_control", (5,), False),  # position (3) and velocity (2), flattened
    ("Go1JoystickFlatTerrain-v1", "MuJoCo Playground", (48,), False),  # the actor's "state"
    ("MetaWorld/Reach-v3", "MetaWorld", (39,), False),
    ("MiniGrid-Empty-5x5-v0", "MiniGrid/BabyAI", (7, 7, 3), True),  # the egocentric view of ids
    ("BabyAI-GoToLocal-v0", "MiniGrid/BabyAI", None, False),  # image, direction and mission, flattened
    ("HalfCheetah-v5", "MuJoCo", (17,), False),  # a -v5 id that is not Atari
]


@pytest.mark.parametrize("task,suite,shape,board", NATIVE, ids=[row[0] for row in NATIVE])
def test_envpools_native_suites_by_id(task, suite, shape, board):
    from podracer.run.hostenvs.envpool import suite_of

    if task not in envpool.list_all_envs():
        pytest.skip(f"envpool {importlib.metadata.version('envpool')} has no {suite} task {task}")
    env = EnvpoolEnv(task, num_envs=2, seed=3)
    spec = env.spec()
    assert suite_of(env.task_id) == suite and not env.atari and env.seeds == [3, 4]
    assert spec.observation.dtype == np.float32 and spec.observation.shape == (shape or spec.observation.shape)
    assert len(spec.observation.shape) == (3 if board else 1) and (spec.image is not None) == board
    if board:
        assert spec.image.channel_axis == -1 and spec.image.high == 10.0
    ts = env.reset()
    rng = np.random.default_rng(0)
    for _ in range(5):
        assert ts.observation.shape == (2, *spec.observation.shape) and np.isfinite(ts.observation).all()
        if board:
            assert ts.observation.max() <= spec.image.high and ts.observation.max() >= 1
        action = (
            rng.uniform(-1, 1, (2, len(spec.box.low))).astype(np.float32)
            if spec.continuous
            else rng.integers(0, spec.num_actions, 2).astype(np.int32)
        )
        ts = env.step(action)
        assert ts.reward.dtype == np.float32 and np.isfinite(ts.reward).all()
    env.close()


def test_each_environment_gets_its_own_seed():
    batch = EnvpoolEnv("CartPole-v1", num_envs=3, seed=5)
    alone = EnvpoolEnv("CartPole-v1", num_envs=1, seed=6)
    assert batch.seeds == [5, 6, 7]
    first = alone.reset().observation[0]
    np.testing.assert_array_equal(batch.reset().observation[1], first)
    given = EnvpoolEnv("CartPole-v1", num_envs=2, seed=[6, 100])
    np.testing.assert_array_equal(given.reset().observation[0], first)
    with pytest.raises(ValueError, match=r"^3 seeds for 2 environments; give one per environment\.$"):
        EnvpoolEnv("CartPole-v1", num_envs=2, seed=[1, 2, 3])


@pytest.mark.parametrize("task", ["Pong", "CartPole"])
def test_the_xla_step_receives_what_recv_receives(task):
    """``EnvpoolEnv.xla_step`` inside jit gives the time steps, raw rewards and episode statistics that ``recv`` gives
    for the same seeds and actions: Pong's stacked frames, clipped rewards and raw ones, CartPole's terminations."""
    import jax

    host, xla = (EnvpoolEnv(task, num_envs=4, seed=3, sticky_action_probability=0.0) for _ in range(2))
    step = xla.xla_step()

    @jax.jit
    def receive_and_send(handle, action):
        handle, timestep, raw = step.recv(handle)
        return step.send(handle, action), timestep, raw

    rng = np.random.default_rng(0)
    n = host.spec().num_actions
    for env in (host, xla):
        env.reset()
    action = rng.integers(0, n, 4).astype(np.int32)
    host.send(action)
    xla.send(action)
    handle, raws, lasts = step.handle, [], []
    for _ in range(300 if task == "Pong" else 100):
        action = rng.integers(0, n, 4).astype(np.int32)
        expected = host.recv()
        host.send(action)
        handle, got, raw = receive_and_send(handle, action)
        xla.record(np.asarray(raw), np.asarray(got.last))
        for field in ("observation", "reward", "discount", "last"):
            np.testing.assert_array_equal(np.asarray(getattr(got, field)), getattr(expected, field), err_msg=field)
        assert np.asarray(got.observation).dtype == expected.observation.dtype
        np.testing.assert_array_equal(xla.stats.episode_return, host.stats.episode_return)
        np.testing.assert_array_equal(xla.stats.episode_length, host.stats.episode_length)
        raws.append(np.asarray(raw))
        lasts.append(expected.last)
    assert np.any(np.concatenate(raws) != 0) and (
        task == "Pong" or np.any(lasts)
    )  # points were scored, or episodes ended
    if task == "Pong":  # the raw rewards are Pong's points; the learning ones are clipped (the same here: +-1)
        assert set(np.unique(np.concatenate(raws))) <= {-1.0, 0.0, 1.0}
    for env in (host, xla):
        env.close()


def test_the_xla_step_refuses_what_it_cannot_pass():
    with pytest.raises(ValueError, match=r"^--envpool-xla: Pendulum-v1's actions are not discrete; it steps discrete "):
        EnvpoolEnv("Pendulum-v1", num_envs=2).xla_step()
    assert EnvpoolEnv("CartPole", num_envs=2).xla_refusal() is None
    refusal = EnvpoolEnv("HalfCheetah-v4", num_envs=1).xla_refusal()
    assert refusal == "HalfCheetah-v4's observations are float64, which JAX holds as float32 here", refusal


@pytest.mark.parametrize("core", [None, "lstm"])
def test_sebulba_with_envpool_xla_trains_to_the_same_parameters_as_the_host_loop(core, devices):
    """--envpool-xla: each actor rollout in one program through envpool's XLA step; with --max-policy-lag 0 (each
    trajectory learned with the parameters that acted it) the run's parameters and records are the host loop's to the
    bit, for a feed-forward and a recurrent PPO."""
    import dataclasses

    import jax

    from podracer.core.agents import PPOConfig
    from podracer.run.compose import train_sebulba
    from podracer.run.config import SebulbaConfig

    agent = PPOConfig(num_minibatches=2).replace(hidden_sizes=(16,))
    if core:
        agent = agent.replace(core=core, core_size=8)
    config = SebulbaConfig(
        env="CartPole",
        agent=agent,
        num_envs_per_actor=8,
        rollout_length=16,
        total_env_steps=8 * 16 * 4,
        actor_devices=(0,),
        learner_devices=(1,),
        max_policy_lag=0,
        log_every=2,
    )
    host = train_sebulba(config)
    xla = train_sebulba(dataclasses.replace(config, envpool_xla=True))
    assert host.updates == xla.updates == 4
    for a, b in zip(jax.tree.leaves(host.state.params), jax.tree.leaves(xla.state.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for key in ("env_steps", "episode_return", "episode_length", "episodes", "loss"):
        assert [h[key] for h in host.history] == [h[key] for h in xla.history], key
    assert xla.history[-1]["actor_env_s"] == 0.0 and xla.history[-1]["actor_act_s"] > 0


def test_envpool_xla_refusals_are_one_line():
    from podracer.run.config import SebulbaConfig

    with pytest.raises(ValueError, match=r"^--envpool-xla steps envpool's tasks; jax:cartpole is not one\.$"):
        SebulbaConfig(env="jax:cartpole", envpool_xla=True)
    with pytest.raises(
        ValueError,
        match=r"^--envpool-xla steps one envpool batch per actor thread in one program; drop --env-groups 2\.$",
    ):
        SebulbaConfig(env="CartPole", envpool_xla=True, env_groups=2)
