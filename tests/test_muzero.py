"""Gumbel MuZero (mctx's search on a learned model): its targets, its search's respect of the legal-action mask, its
errors, and its learning in both modes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, learner
from podracer import anakin
from podracer.run import compose
from podracer.core.agents.muzero import scale_gradient, scale_to_unit
from podracer.run.config import SebulbaConfig
from podracer.core.envs.catch import Catch
from podracer.core.types import Box, EnvSpec, TimeStep, Trajectory

SPEC = EnvSpec(observation=jax.ShapeDtypeStruct((3,), jnp.float32), num_actions=4)


def test_unrolled_targets_n_step_returns_absorbing_steps_and_masks():
    """One environment, T = 5, K = 2, n = 2, discount 0.5; the episode terminates at entry 2 (reward 2 on arriving)
    and the next one runs to the trajectory's end (bootstrapped there from the untrained value, about 0)."""
    agent = agents.make("muzero", SPEC, unroll_steps=2, n_step=2, discount=0.5, support_size=5)
    last = jnp.array([0, 0, 1, 0, 0, 0], bool)[:, None]
    discount = jnp.array([1, 1, 0, 1, 1, 1], jnp.float32)[:, None]
    reward = jnp.array([0, 1, 2, 0, 4, 8], jnp.float32)[:, None]
    observation = jnp.zeros((6, 1, 3))
    weights = jnp.tile(jnp.arange(6, dtype=jnp.float32)[:, None, None], (1, 1, 4))
    actions = jnp.arange(6, dtype=jnp.int32)[:, None]
    trajectory = Trajectory(TimeStep(observation, reward, discount, last), actions, {"policy_target": weights})
    params = agent.init(jax.random.key(0), observation[0])
    batch = jax.tree.map(np.asarray, agent.prepare(params, trajectory))
    assert batch["observation"].shape == (5, 3) and batch["policy_target"].shape == (5, 3, 4)
    np.testing.assert_array_equal(batch["action"], [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]])
    # Entry 0: 1 + 0.5 x 2 (the episode ends at entry 2); entry 1: 2; entry 2 ended the game: 0; entries 3 and 4:
    # 4 + 0.5 x 8 and 8 + 0.5 x value; entry 5: the value. Past the terminal entry 2: absorbing (targets 0, weighed).
    np.testing.assert_allclose(
        batch["value_target"], [[2, 2, 0], [2, 0, 0], [0, 0, 0], [8, 8, 0], [8, 0, 0]], atol=1e-3
    )
    np.testing.assert_array_equal(batch["value_weight"], [[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 0]])
    np.testing.assert_array_equal(batch["reward_target"], [[1, 2], [2, 0], [0, 0], [4, 8], [8, 0]])
    np.testing.assert_array_equal(batch["reward_weight"], [[1, 1], [1, 1], [1, 1], [1, 1], [1, 0]])
    # The policy learns only at steps of the window's own episode that are not its end.
    np.testing.assert_array_equal(batch["policy_weight"], [[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1], [1, 1, 0]])
    np.testing.assert_array_equal(batch["policy_target"][3, :, 0], [3, 4, 5])


def test_a_truncated_episode_bootstraps_from_its_last_value_and_trains_nothing_past_it():
    agent = agents.make("muzero", SPEC, unroll_steps=1, n_step=3, discount=1.0)
    last = jnp.array([0, 1, 0], bool)[:, None]  # entry 1: a time limit (discount 1)
    trajectory = Trajectory(
        TimeStep(jnp.ones((3, 1, 3)), jnp.array([0, 1, 5], jnp.float32)[:, None], jnp.ones((3, 1)), last),
        jnp.zeros((3, 1), jnp.int32),
        {"policy_target": jnp.full((3, 1, 4), 0.25)},
    )
    params = agent.init(jax.random.key(0), trajectory.timestep.observation[0])
    batch = jax.tree.map(np.asarray, agent.prepare(params, trajectory))
    value = batch["value_target"][1, 0]  # the truncated entry's own value, bootstrapped
    np.testing.assert_allclose(batch["value_target"][0], [1 + value, value], atol=1e-5)  # not 1 + 5 + ...
    np.testing.assert_array_equal(batch["value_weight"], [[1, 1], [1, 0]])
    np.testing.assert_array_equal(batch["reward_weight"], [[1], [0]])


def test_the_search_plays_and_weighs_only_legal_actions():
    agent = agents.make("muzero", SPEC, num_simulations=8, hidden_sizes=(16,), latent_size=8)
    keys = jax.random.split(jax.random.key(0), 3)
    observation = jax.random.normal(keys[0], (256, 3))
    mask = jax.random.bernoulli(keys[1], 0.5, (256, 4)).at[:, 2].set(True)  # at least one legal action
    params = agent.init(keys[2], observation)
    action, extras, _ = jax.jit(agent.act)(params, observation, keys[2], (), jnp.zeros(256, bool), mask)
    legal = np.asarray(mask)
    assert legal.sum(axis=1).min() == 1 and (~legal).any()
    for chosen in (action, extras["greedy"]):
        assert np.take_along_axis(legal, np.asarray(chosen)[:, None], axis=1).all()
    weights = np.asarray(extras["policy_target"])
    assert (weights[~legal] == 0).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)


def test_latent_scaling_and_gradient_scaling():
    latent = scale_to_unit(jnp.array([[2.0, 4.0, 3.0]]))
    np.testing.assert_allclose(latent, [[0.0, 1.0, 0.5]])
    x = jnp.array([1.0, -2.0])
    np.testing.assert_array_equal(scale_gradient(x, 0.5), x)
    np.testing.assert_allclose(jax.grad(lambda v: jnp.sum(scale_gradient(v, 0.5) ** 2))(x), x)  # half of 2x


def test_errors_name_the_flag():
    with pytest.raises(ValueError, match=r"^--unroll-steps must be >= 1, got 0\.$"):
        agents.make("muzero", SPEC, unroll_steps=0)
    with pytest.raises(ValueError, match=r"^--value-scale must be > 0, got 0\.0\.$"):
        agents.make("muzero", SPEC, value_scale=0.0)
    continuous = EnvSpec(observation=SPEC.observation, box=Box((-1.0,), (1.0,)))
    with pytest.raises(ValueError, match=r"^--agent muzero takes discrete actions and this environment's are"):
        agents.make("muzero", continuous)


SMALL = dict(num_epochs=4, num_minibatches=4, num_simulations=8, hidden_sizes=(64,), latent_size=32)


@pytest.mark.slow
def test_muzero_solves_catch_in_anakin_on_most_seeds(devices, optimized_xla):
    """Three seeds in one program, up to 410k env steps each (the catch-muzero preset): from random play (about -0.6)
    to >= 0.9 on >= 2 of 3 (2-core AMD EPYC, tuning seeds 0-2 and 10-12: training 0.98-1.00, greedy 1.0 on all six).
    The run stops after the host call (50 updates) whose training returns reach the bar."""
    import threading

    env = Catch()
    agent = agents.make("muzero", env.spec(), gumbel_scale=2.0, **SMALL)
    reached = threading.Event()

    def log(summary):
        if sum(f >= 0.9 for f in summary["episode_return_per_seed"]) >= 2:
            reached.set()

    result = anakin.run(
        anakin.anakin_plan(
            num_envs_per_device=32, rollout_length=16, num_updates=400, updates_per_call=50, devices=devices[:2]
        ),
        agent._replace(optimizer=learner.make_optimizer(1e-3, max_grad_norm=1.0)),
        anakin.init(
            env,
            agent,
            learner.make_optimizer(1e-3, max_grad_norm=1.0),
            anakin.seed_keys(100, 3),
            32,
            devices[:2],
            rollout_length=16,
        ),
        anakin.Hooks(log=log, stop=reached),
        env=env,
    )
    first, final = result.history[0]["episode_return_per_seed"], result.history[-1]["episode_return_per_seed"]
    assert max(first) < 0.0, first
    assert sum(f >= 0.9 for f in final) >= 2, final


@pytest.mark.slow
@pytest.mark.timeout(1500)  # three whole runs: 600 s was not enough on a loaded 2-core machine (2026-11-30)
def test_muzero_balances_cartpole_in_sebulba_in_most_runs(devices):
    """envpool CartPole-v1, up to three runs of up to 400k env steps (seeds 100-102; the search's actor threads make
    any run differ), greedy evaluations every 130 updates: one of them reaches >= 475 in >= 2 of 3 runs, and a run
    stops at that evaluation (--target-return 475: the bar is the run's own stop). MuZero can dip after it balances:
    evaluated every 65 updates (2-core AMD EPYC, 2026-11-30), seed 100 scored 500 from 133k env steps to 333k and
    461 at the end, seed 101 500 from 266k, seed 102 499 at 333k and 500 at the end; run to 400k each, the test
    took 618 s in CI. Random play: 22."""
    finals = []
    for seed in (100, 101, 102):
        config = SebulbaConfig(
            env="CartPole-v1",
            agent=agents.MuZeroConfig(value_scale=0.02).replace(**SMALL),
            total_env_steps=400_000,
            num_envs_per_actor=32,
            rollout_length=32,
            actor_devices=(0,),
            learner_devices=(1,),
            eval_every=130,
            eval_episodes=32,
            target_return=475.0,
            seed=seed,
        )
        history = compose.train_sebulba(config).history
        assert history[0]["episode_return"] < 60.0, history[0]
        evaluations = [h["eval_return"] for h in history if "eval_return" in h]
        assert evaluations and all(e < 475.0 for e in evaluations[:-1]), evaluations  # it stopped at the first
        steps = history[-1]["env_steps"]
        assert evaluations[-1] >= 475.0 or steps >= 390 * 32 * 32, (evaluations, steps)  # the bar, or the budget
        finals.append(max(evaluations))
        if sum(f >= 475.0 for f in finals) >= 2:
            break
    assert sum(f >= 475.0 for f in finals) >= 2, finals
