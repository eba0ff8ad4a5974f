"""Observation and reward normalisation: statistics merged across devices, kept with the parameters."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs, normalize
from podracer import anakin
from podracer.run import compose, evaluate
from podracer.run import checkpoint, parallel
from podracer.core.agents import PPOConfig
from podracer.run.config import AnakinConfig
from podracer.core.types import EnvSpec


def _batches(seed=0):
    rng = np.random.default_rng(seed)
    # [T, B, 3] observations far from standard (large mean, mixed scales), and [T, B] returns
    return [
        (
            rng.normal([100.0, -3.0, 0.0], [10.0, 0.01, 1.0], size=(5, 8, 3)).astype(np.float32),
            rng.normal(50.0, 20.0, size=(5, 8)).astype(np.float32),
        )
        for _ in range(3)
    ]


def test_statistics_on_two_devices_equal_one_device_on_the_concatenated_batch():
    devices = jax.devices()[:2]
    assert len(devices) == 2
    example = jnp.zeros((1, 3))
    fresh = normalize.init(example, observations=True, rewards=True)

    def on_devices(stats, obs, returns):
        return normalize.update(stats, obs, returns, (parallel.DEVICE_AXIS,))

    two = parallel.device_map(on_devices, devices)
    one = jax.jit(normalize.update)
    stats_two, stats_one = parallel.replicate(fresh, devices), fresh
    seen_obs, seen_returns = [], []
    for obs, returns in _batches():
        # each device takes half of the environments (axis 1)
        split = lambda x: np.stack(np.split(x, 2, axis=1))  # noqa: E731
        stats_two = two(stats_two, split(obs), split(returns))
        stats_one = one(stats_one, obs, returns)
        seen_obs.append(obs.reshape(-1, 3))
        seen_returns.append(returns.ravel())
    for device in range(2):
        for a, b in zip(jax.tree.leaves(jax.tree.map(lambda x: x[device], stats_two)), jax.tree.leaves(stats_one)):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-9)
    every_obs, every_return = np.concatenate(seen_obs), np.concatenate(seen_returns)
    assert float(stats_one.observation.count) == len(every_obs) == 120
    np.testing.assert_allclose(stats_one.observation.mean, every_obs.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats_one.observation.var, every_obs.var(0), rtol=1e-4)
    np.testing.assert_allclose(stats_one.discounted_return.var, every_return.var(), rtol=1e-4)
    normalized = normalize.normalize_observation(stats_one, jnp.asarray(every_obs))
    np.testing.assert_allclose(np.mean(normalized, 0), 0.0, atol=1e-3)
    np.testing.assert_allclose(np.std(normalized, 0), 1.0, atol=1e-3)


def test_the_rollout_ships_each_environments_discounted_return_reset_at_episode_starts():
    env = envs.make("catch")  # rewards only at the last step of 9-step episodes
    agent = agents.make(PPOConfig(discount=0.9), env.spec(), normalize="rewards")
    assert agent.return_discount == 0.9
    state = anakin.init_state(env, agent, agents.make(PPOConfig(), env.spec()).optimizer, jax.random.key(0), 4)
    rollout = jax.jit(anakin.make_rollout(env, agent, 25))
    _, trajectory, _ = rollout(state.learner.params, state.rollout)
    reward, last = np.asarray(trajectory.timestep.reward), np.asarray(trajectory.timestep.last)
    expected, running = np.zeros_like(reward), np.zeros(4, np.float32)
    for t in range(len(reward)):
        starts = last[t - 1] if t else np.ones(4, bool)  # the reset's time step starts an episode
        running = np.where(starts, 0.0, 0.9 * running) + reward[t]
        expected[t] = running
    np.testing.assert_allclose(trajectory.discounted_return, expected, rtol=1e-6)
    assert np.any(reward != 0)  # episodes ended inside the rollout


# A short normalised PPO run on CartPole, checkpointed: the resume and evaluate tests' settings
SHORT_RUN = dict(
    agent=PPOConfig(num_epochs=1, num_minibatches=1).replace(hidden_sizes=(8,)),
    env="cartpole",
    num_envs_per_device=2,
    rollout_length=8,
    normalize_observations=True,
    normalize_rewards=True,
)


def test_normalized_runs_resume_exactly_and_evaluate_plays_with_the_saved_statistics(tmp_path):
    common = dict(SHORT_RUN, num_updates=20, updates_per_call=10)
    whole = AnakinConfig(checkpoint_dir=str(tmp_path / "whole"), **common)
    compose.train_anakin(whole)
    parts = AnakinConfig(checkpoint_dir=str(tmp_path / "parts"), **{**common, "num_updates": 10})
    compose.train_anakin(parts)
    compose.train_anakin(dataclasses.replace(parts, num_updates=20, resume="yes"))

    env = envs.make(common["env"])
    agent = agents.make(whole.agent, env.spec(), normalize="observations+rewards")
    template = anakin.init_state(
        env, agent, agents.make(whole.agent, env.spec()).optimizer, jax.random.key(0), 2
    ).learner
    a, meta = checkpoint.restore(whole.checkpoint_dir, template)
    b, _ = checkpoint.restore(parts.checkpoint_dir, template)
    assert meta["normalize"] == "observations+rewards"
    assert float(a.params.statistics.observation.count) == 20 * 8 * 2 * jax.device_count()
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
        np.testing.assert_array_equal(x, y)  # statistics included, bit for bit
    assert float(a.params.statistics.discounted_return.var) > 1.0  # returns of CartPole spread well beyond 1

    loaded_agent, params, _ = evaluate.load(whole.checkpoint_dir, env.spec())
    for x, y in zip(jax.tree.leaves(params), jax.tree.leaves(a.params)):
        np.testing.assert_array_equal(x, y)
    _, timestep = env.reset(jax.random.key(3))
    observation = jnp.stack([timestep.observation] * 2) * 3.0
    _, extras, _ = loaded_agent.act(params, observation, jax.random.key(0), (), jnp.ones(2, bool))
    inner = agents.make(whole.agent, env.spec())
    by_hand = normalize.normalize_observation(params.statistics, observation)
    _, expected, _ = inner.act(params.agent, by_hand, jax.random.key(0), (), jnp.ones(2, bool))
    _, raw, _ = inner.act(params.agent, observation, jax.random.key(0), (), jnp.ones(2, bool))
    np.testing.assert_allclose(jax.tree.leaves(extras)[0], jax.tree.leaves(expected)[0], rtol=1e-6)
    assert not np.allclose(jax.tree.leaves(extras)[0], jax.tree.leaves(raw)[0])  # the statistics matter

    with pytest.raises(
        ValueError,
        match=r"--resume: '.*whole' holds a checkpoint of another run: --normalize-observations True there, "
        r"False here; --normalize-rewards True there, False here\. Resume with its settings",
    ):
        compose.train_anakin(
            dataclasses.replace(
                whole, normalize_observations=False, normalize_rewards=False, num_updates=50, resume="yes"
            )
        )


def test_normalize_observations_needs_a_floating_point_observation():
    spec = EnvSpec(jax.ShapeDtypeStruct((10, 10, 3), jnp.uint8), num_actions=3)
    config = AnakinConfig(normalize_observations=True)
    with pytest.raises(
        ValueError,
        match=r"^--normalize-observations: catch's observations have no floating-point "
        r"entry to normalise .*; drop the flag\.$",
    ):
        compose.check_normalizable(config, spec)
    compose.check_normalizable(dataclasses.replace(config, normalize_observations=False), spec)


def test_return_restart_termination_runs_the_return_on_across_a_time_limit_and_restarts_it_at_a_termination():
    from podracer.run.sebulba.actor import discounted_returns

    # one environment: a time limit ends the episode at t=2 (discount 1), a termination at t=5 (discount 0); the
    # time step after each last one is the next episode's first, with reward 0
    reward = np.array([[0.0], [1.0], [2.0], [0.0], [4.0], [8.0], [0.0], [16.0]], np.float32)
    last = np.array([[0], [0], [1], [0], [0], [1], [0], [0]], bool)
    discount = np.array([[1.0], [1.0], [1.0], [1.0], [1.0], [0.0], [1.0], [1.0]], np.float32)
    carried = np.array([3.0], np.float32)
    g = 0.5
    by_hand = [3.0, g * 3 + 1, g * (g * 3 + 1) + 2]
    by_hand += [by_hand[-1], g * by_hand[-1] + 4]  # the truncation's return carried on through the reset, undiscounted
    by_hand += [g * by_hand[-1] + 8, 0.0, 16.0]  # after the termination: from 0
    terminations = discounted_returns(reward, last, discount, g, carried, "termination")
    np.testing.assert_allclose(terminations[:, 0], by_hand, rtol=1e-6)
    episodes = discounted_returns(reward, last, discount, g, carried, "episode")
    np.testing.assert_allclose(episodes[:, 0], [3.0, 2.5, 3.25, 0.0, 4.0, 10.0, 0.0, 16.0], rtol=1e-6)


@pytest.mark.suite("gymnax")
def test_anakin_rollouts_restart_the_return_as_the_actors_do():
    """Pendulum ends only by its time limit (200 steps): with --return-restart termination the return runs on."""
    from podracer.run.sebulba.actor import discounted_returns

    env = envs.make("gymnax:Pendulum-v1")
    for restart in ("termination", "episode"):
        agent = agents.make(
            PPOConfig(discount=0.9), env.spec(), normalize="rewards", normalize_options={"return_restart": restart}
        )
        assert agent.return_restart == restart
        state = anakin.init_state(env, agent, agents.make(PPOConfig(), env.spec()).optimizer, jax.random.key(0), 2)
        _, trajectory, _ = jax.jit(anakin.make_rollout(env, agent, 210))(state.learner.params, state.rollout)
        timestep = jax.tree.map(np.asarray, trajectory.timestep)
        end = int(np.flatnonzero(timestep.last[:, 0])[0])
        assert timestep.last[end].all() and (timestep.discount[end] == 1).all()  # a time limit, not a termination
        expected = discounted_returns(
            timestep.reward, timestep.last, timestep.discount, 0.9, np.zeros(2, np.float32), restart
        )
        np.testing.assert_allclose(trajectory.discounted_return, expected, rtol=1e-5, atol=1e-4)
        assert (np.abs(expected[end + 1]) > 1.0).all() == (restart == "termination")  # Pendulum's rewards: -16 to 0


def test_normalize_with_acting_shows_the_loss_the_statistics_the_actor_acted_with():
    env = envs.make("cartpole")
    agents_by = {
        how: agents.make(
            PPOConfig(), env.spec(), normalize="observations+rewards", normalize_options={"normalize_with": how}
        )
        for how in ("updated", "acting")
    }
    state = anakin.init_state(
        env, agents_by["acting"], agents.make(PPOConfig(), env.spec()).optimizer, jax.random.key(0), 4
    )
    params = state.learner.params
    before = normalize.update(params.statistics, jnp.full((3, 4, 4), 2.0), jnp.full((3, 4), 7.0))
    params = params._replace(statistics=before)  # statistics away from the identity
    _, trajectory, _ = jax.jit(anakin.make_rollout(env, agents_by["acting"], 16))(params, state.rollout)
    seen = {how: agent.observe(params, trajectory) for how, agent in agents_by.items()}
    after = seen["acting"][0].statistics
    for x, y in zip(jax.tree.leaves(after), jax.tree.leaves(seen["updated"][0].statistics)):
        np.testing.assert_array_equal(x, y)  # both update the statistics alike
    assert float(after.observation.count) == float(before.observation.count) + 16 * 4
    for how, stats in (("acting", before), ("updated", after)):
        shown = seen[how][1].timestep
        np.testing.assert_allclose(
            shown.observation, normalize.normalize_observation(stats, trajectory.timestep.observation), rtol=1e-6
        )
        np.testing.assert_allclose(shown.reward, normalize.scale_reward(stats, trajectory.timestep.reward), rtol=1e-6)
    assert not np.allclose(seen["acting"][1].timestep.observation, seen["updated"][1].timestep.observation)


def test_the_normalisation_options_are_recorded_played_by_evaluate_and_kept_by_a_resume(tmp_path):
    config = AnakinConfig(
        **SHORT_RUN,
        num_updates=4,
        updates_per_call=2,
        observation_clip=50.0,
        normalize_with="acting",
        return_restart="termination",
        checkpoint_dir=str(tmp_path / "run"),
    )
    compose.train_anakin(config)
    env = envs.make("cartpole")
    agent, params, metadata = evaluate.load(config.checkpoint_dir, env.spec())
    assert metadata["normalize_options"] == {
        "observation_clip": 50.0,
        "normalize_with": "acting",
        "return_restart": "termination",
    }
    assert agent.return_restart == "termination"
    _, timestep = env.reset(jax.random.key(3))
    observation = jnp.stack([timestep.observation] * 2) + 1e3  # hundreds of standard deviations out
    inner = agents.make(config.agent, env.spec())
    _, extras, _ = agent.act(params, observation, jax.random.key(0), (), jnp.ones(2, bool))
    for clip, same in ((50.0, True), (5.0, False)):
        by_hand = normalize.normalize_observation(params.statistics, observation, clip)
        _, expected, _ = inner.act(params.agent, by_hand, jax.random.key(0), (), jnp.ones(2, bool))
        assert np.allclose(jax.tree.leaves(extras)[0], jax.tree.leaves(expected)[0], rtol=1e-6) == same
    with pytest.raises(
        ValueError,
        match=r"--resume: '.*run' holds a checkpoint of another run: --observation-clip 50.0 there, 5.0 here; "
        r"--return-restart termination there, episode here\. Resume",
    ):
        compose.train_anakin(
            dataclasses.replace(config, observation_clip=5.0, return_restart="episode", num_updates=6, resume="yes")
        )


@pytest.mark.slow
def test_anakin_learns_cartpole_with_both_normalisations_on_most_seeds():
    config = AnakinConfig(
        env="cartpole",
        agent=PPOConfig(),
        num_envs_per_device=8,
        rollout_length=16,
        num_updates=60,
        updates_per_call=20,
        num_seeds=3,
        normalize_observations=True,
        normalize_rewards=True,
    )
    final = compose.train_anakin(config).history[-1]["episode_return_per_seed"]
    assert sum(r >= 150 for r in final) >= 2, final  # random play: about 22


def test_sebulba_counts_every_learned_step_in_the_statistics_on_two_learner_devices():
    from podracer.run.config import SebulbaConfig

    config = SebulbaConfig(
        env="jax:cartpole",
        agent=PPOConfig(),
        num_envs_per_actor=16,
        rollout_length=16,
        total_env_steps=40_000,
        learner_devices=(1, 2),
        normalize_observations=True,
        normalize_rewards=True,
    )
    result = compose.run_sebulba(config)
    statistics = jax.tree.map(np.asarray, parallel.unreplicate(result.state.params.statistics))
    assert float(statistics.observation.count) == result.updates * 16 * 16
    assert float(statistics.discounted_return.count) == result.updates * 16 * 16
    assert np.all(statistics.observation.var > 0) and np.all(np.abs(statistics.observation.mean) < 5)
    assert result.history[-1]["episode_return"] > 60  # random play: about 22
