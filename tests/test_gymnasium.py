"""Any registered gymnasium environment as a Sebulba host batch (gymnasium:ID), held to envpool's behaviour."""

import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("envpool")

from podracer.cli import parser
from podracer.run import compose
from podracer.run import hostenvs
from podracer.core import envs
from podracer.core.agents import PPOConfig  # noqa: E402
from podracer.run.config import SebulbaConfig


def _play(env, actions):
    timesteps, stats = [env.reset()], []
    for action in actions:
        timesteps.append(env.step(action))
        stats.append(env.stats)
    return timesteps, stats


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_gymnasium_cartpole_behaves_as_envpool_cartpole(vectorization):
    """Same spec, shapes and dtypes; the same episode-end rules (termination: discount 0; the time limit: discount
    1; the next step starts a new episode with reward 0, and the statistics restart) and statistics."""
    n = 6
    actions = [np.zeros(n, np.int32)] * 40  # always left: every episode falls within about 10 steps
    ours = hostenvs.make_host("gymnasium:CartPole-v1", n, seed=3, vectorization=vectorization)
    pool = hostenvs.make_host("CartPole-v1", n, seed=3)
    assert ours.spec() == pool.spec() and ours.task_id == "gymnasium:CartPole-v1"
    for env in (ours, pool):
        timesteps, stats = _play(env, actions)
        for t in timesteps:
            assert t.observation.shape == (n, 4) and t.observation.dtype == np.float32
            assert t.reward.dtype == np.float32 and t.discount.dtype == np.float32 and t.last.dtype == bool
        last = np.stack([t.last for t in timesteps[1:]])
        discount = np.stack([t.discount for t in timesteps[1:]])
        reward = np.stack([t.reward for t in timesteps[1:]])
        assert last.any(axis=0).all() and np.all(discount[last] == 0.0)  # falls are terminations
        after = np.zeros_like(last)
        after[1:] = last[:-1]
        assert np.all(reward[after] == 0.0) and not np.any(last & after)  # the step after an end starts anew
        returns, lengths = np.stack([s.episode_return for s in stats]), np.stack([s.episode_length for s in stats])
        np.testing.assert_array_equal(returns, lengths)  # reward 1 a step
        assert np.all(lengths[after] == 0) and 8 <= lengths[last].min() and lengths[last].max() <= 12
        env.close()
    # The time limit: alternating actions do not fall within 5 steps; the end is a truncation (discount 1).
    for env in (
        hostenvs.make_host("gymnasium:CartPole-v1", n, max_episode_steps=5),
        hostenvs.make_host("CartPole-v1", n, max_episode_steps=5),
    ):
        timesteps, _ = _play(env, [np.full(n, i % 2, np.int32) for i in range(5)])
        assert timesteps[-1].last.all() and np.all(timesteps[-1].discount == 1.0)
        assert not np.any([t.last for t in timesteps[:-1]])
        env.close()


def test_an_environment_of_your_own_registered_by_entry_point(tmp_path, monkeypatch):
    (tmp_path / "corridor_envs.py").write_text(
        textwrap.dedent('''
        import gymnasium
        import numpy as np

        class Corridor(gymnasium.Env):
            """Walk right (action 1) three times to the goal: reward 1, terminated; 10 steps at most."""
            observation_space = gymnasium.spaces.Box(0.0, 3.0, (1,), np.float32)
            action_space = gymnasium.spaces.Discrete(2)

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.position = 0
                return np.zeros(1, np.float32), {}

            def step(self, action):
                self.position = min(3, self.position + int(action))
                done = self.position == 3
                return np.full(1, self.position, np.float32), float(done), done, False, {}

        gymnasium.register(id="Corridor-v0", entry_point=Corridor, max_episode_steps=10)
    ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    name = "gymnasium:corridor_envs:Corridor-v0"
    assert parser.parse(SebulbaConfig, ["--env", name, "--agent", "ppo"]).env == name
    env = hostenvs.make_host(name, 2)
    env.reset()
    timesteps = [env.step(np.array([1, 0], np.int32)) for _ in range(3)]
    assert timesteps[-1].last.tolist() == [True, False] and timesteps[-1].reward.tolist() == [1.0, 0.0]
    assert timesteps[-1].discount.tolist() == [0.0, 1.0] and env.stats.episode_return.tolist() == [1.0, 0.0]
    env.close()
    del sys.modules["corridor_envs"]


def test_continuous_actions_are_rescaled_from_the_agents_range_to_the_bounds():
    import gymnasium

    from podracer.core.types import Box

    env = hostenvs.make_host("gymnasium:Pendulum-v1", 2, seed=3)
    assert env.spec().box == Box((-2.0,), (2.0,)) and env.spec().num_actions == 0
    reference = gymnasium.make("Pendulum-v1")
    observation, _ = reference.reset(seed=3)
    np.testing.assert_allclose(env.reset().observation[0], observation, rtol=1e-6)
    # The agent's 0.5 is a torque of 1.0 (bounds -2 ... 2); its 7.0 is clipped to the largest torque, 2.0.
    for agent_action, torque in ((0.5, 1.0), (7.0, 2.0)):
        timestep = env.step(np.array([[agent_action], [0.0]], np.float32))
        observation, reward, *_ = reference.step(np.array([torque], np.float32))
        np.testing.assert_allclose(timestep.observation[0], observation, rtol=1e-5)
        np.testing.assert_allclose(timestep.reward[0], reward, rtol=1e-5)
    with pytest.raises(ValueError, match=r"^Expected actions of shape \(2, 1\), got \(2,\)\.$"):
        env.send(np.zeros(2, np.float32))
    env.close()


def test_what_does_not_fit_is_one_clear_line():
    import gymnasium

    with pytest.raises(
        ValueError,
        match=r"^--env gymnasium:X has actions of MultiBinary \(3,\); podracer takes "
        r"discrete and multi-discrete actions and continuous vectors with finite "
        r"bounds\.$",
    ):
        envs.base.actions_of(gymnasium.spaces.MultiBinary(3), "gymnasium:X")
    assert envs.base.actions_of(gymnasium.spaces.MultiDiscrete([2, 3]), "gymnasium:X") == {"nvec": (2, 3)}
    with pytest.raises(ValueError, match=r"^--env gymnasium:NoSuchTask-v0: .*NoSuchTask"):
        hostenvs.make_host("gymnasium:NoSuchTask-v0", 2)
    with pytest.raises(
        ValueError,
        match=r"^--env gymnasium:missing_module:Foo-v0: no module named 'missing_module' to "
        r"import the environment from \(install it, or check the name before the last ':'\)\.$",
    ):
        hostenvs.make_host("gymnasium:missing_module:Foo-v0", 2)


def test_sebulba_trains_on_gymnasium_and_evaluate_plays_the_checkpoint(tmp_path):
    from podracer.run.evaluate import play

    directory = str(tmp_path / "ckpt")
    result = compose.train_sebulba(
        SebulbaConfig(
            env="gymnasium:CartPole-v1",
            agent=PPOConfig().replace(learning_rate=1e-3),
            total_env_steps=8_192,
            num_envs_per_actor=16,
            rollout_length=16,
            actor_devices=(0,),
            learner_devices=(1,),
            log_every=8,
            checkpoint_dir=directory,
            eval_every=8,
            eval_episodes=4,
        )
    )
    last = result.history[-1]
    assert np.isfinite(last["episode_return"]) and "eval_return" in last
    returns, _ = play(directory, 4, seed=1, greedy=True)
    assert returns.shape == (4,) and np.isfinite(returns).all() and (returns >= 8).all()
