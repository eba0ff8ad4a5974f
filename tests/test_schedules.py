"""Learning-rate schedules (counted in optimizer steps) and PPO's value clipping."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from podracer.core import agents, envs, learner, optim
from podracer import anakin
from podracer.run import compose
from podracer.run import parallel
from podracer.core.agents import DQNConfig, PPOConfig, R2D2Config
from podracer.core.types import RunFacts


def test_the_learning_rate_at_given_optimizer_steps():
    rate = optim.learning_rate_schedule(1.0, "linear", warmup_steps=10, total_steps=110)
    np.testing.assert_allclose(
        [rate(c) for c in (0, 4, 9, 10, 60, 109, 110, 500)], [0.1, 0.5, 1.0, 1.0, 0.5, 0.01, 0.0, 0.0], atol=1e-6
    )
    cosine = optim.learning_rate_schedule(2.0, "cosine", total_steps=100)
    np.testing.assert_allclose([cosine(c) for c in (0, 50, 100)], [2.0, 1.0, 0.0], atol=1e-6)
    constant = optim.learning_rate_schedule(3e-4, "constant", warmup_steps=4)
    np.testing.assert_allclose([constant(c) for c in (0, 3, 1000)], [7.5e-5, 3e-4, 3e-4], rtol=1e-6)
    # A sweep's traced warm-up gives what the number gives.
    traced = jax.jit(lambda w, c: optim.learning_rate_schedule(1.0, "linear", w, 110)(c))
    np.testing.assert_allclose(traced(10.0, 4), 0.5, atol=1e-6)
    with pytest.raises(
        ValueError,
        match=r"^--lr-schedule: unknown schedule 'step'; choose one of constant, linear, "
        r"cosine\.$",
    ):
        optim.learning_rate_schedule(1.0, "step")


def test_a_decay_to_an_end_rate_over_given_steps_then_constant():
    """gymnax-blines' PPO schedule: 5e-3 falling linearly to 5e-4 over 12,500 optimizer steps, then constant, in a
    run of any length (no total needed)."""
    rate = optim.learning_rate_schedule(5e-3, "linear", end=5e-4, decay_steps=12_500)
    np.testing.assert_allclose([rate(c) for c in (0, 6_250, 12_500, 100_000)], [5e-3, 2.75e-3, 5e-4, 5e-4], rtol=1e-5)
    cosine = optim.learning_rate_schedule(1.0, "cosine", warmup_steps=10, total_steps=1_000, end=0.5, decay_steps=20)
    np.testing.assert_allclose([cosine(c) for c in (4, 10, 20, 30, 999)], [0.5, 1.0, 0.75, 0.5, 0.5], atol=1e-6)
    config = PPOConfig().replace(learning_rate=5e-3, lr_schedule="linear", lr_end=5e-4, lr_decay_steps=12_500)
    assert config.optimizer.lr_end == 5e-4 and config.optimizer.lr_decay_steps == 12_500
    for values, message in (
        ({"lr_decay_steps": 0}, "--lr-decay-steps must be >= 1, got 0."),
        ({"lr_end": -1e-4}, "--lr-end must be a finite number >= 0, got -0.0001."),
        ({"learning_rate": 1e-3, "lr_end": 1e-2}, "--lr-end (0.01) must not exceed --learning-rate (0.001)."),
    ):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            PPOConfig().replace(**values)


def test_the_optimizer_steps_at_the_scheduled_rate():
    """Adam's first step moves each parameter by about the rate: here the warm-up's first step, a tenth of it,
    and by the end of a linear schedule nothing."""
    optimizer = learner.make_optimizer(1e-2, None, schedule="linear", warmup_steps=10, total_steps=20)
    params = {"w": jnp.ones(3)}
    state = optimizer.init(params)
    moves = []
    for _ in range(20):
        updates, state = optimizer.update({"w": jnp.array([1.0, -2.0, 0.5])}, state, params)
        moves.append(float(jnp.max(jnp.abs(updates["w"]))))
    np.testing.assert_allclose(moves[0], 1e-3, rtol=1e-3)
    np.testing.assert_allclose(moves[9], 1e-2, rtol=1e-3)
    np.testing.assert_allclose(moves[14], 0.6e-2, rtol=1e-3)  # 4 of the 10 decay steps done
    assert moves[19] < 1.1e-3
    # Every schedule keeps one optimizer-state layout (checkpoints restore whichever was chosen).
    constant = learner.make_optimizer(1e-2, 0.5).init(params)
    cosine = learner.make_optimizer(1e-2, 0.5, schedule="cosine", total_steps=5).init(params)
    assert jax.tree.structure(constant) == jax.tree.structure(cosine)


def test_a_run_counts_its_optimizer_steps_to_end_the_decay():
    catch = envs.make("catch")
    spec = catch.spec()
    ppo = PPOConfig().replace(lr_schedule="linear", num_epochs=3, num_minibatches=2)
    assert optim.on_policy_steps(RunFacts(100, 8, 16, 100 * 8 * 16), 3, 2) == 600
    assert optim.on_policy_steps(None, 3, 2) is None
    # DQN stores T x B transitions per update, R2D2 B sequences; both learn replay_ratio x items / batch after min_size.
    run = RunFacts(num_updates=10, envs_per_learner=8, rollout_length=16, total_env_steps=10 * 8 * 16)
    assert optim.replay_steps(run, 2.0, 64, 32) == (10 * 128 - 64) * 2 // 32
    assert optim.replay_steps(run, 1.0, 8, 4, sequences=True) == (10 * 8 - 8) // 4

    def last_rates(config, steps):  # the agent's own optimizer: the rate at its last steps, when told the run
        optimizer = agents.make(config, spec, run=run).optimizer
        params = {"w": jnp.ones(2)}
        state = optimizer.init(params)
        rates = []
        for _ in range(steps + 1):
            updates, state = optimizer.update({"w": jnp.ones(2)}, state, params)
            rates.append(float(jnp.max(jnp.abs(updates["w"]))))
        return rates[steps - 2], rates[steps]

    ppo_run = RunFacts(num_updates=2, envs_per_learner=8, rollout_length=16, total_env_steps=2 * 8 * 16)
    optimizer = agents.make(ppo, spec, run=ppo_run).optimizer
    assert float(optim.injected_hyperparameters(optimizer.init({"w": jnp.ones(2)}))["learning_rate"]) == pytest.approx(
        3e-3
    )
    dqn = DQNConfig().replace(lr_schedule="cosine", batch_size=32, min_replay_size=64, replay_ratio=2.0)
    before, after = last_rates(dqn, (10 * 128 - 64) * 2 // 32)
    assert before > 0 and after == 0  # the decay ends at the run's last optimizer step
    r2d2 = R2D2Config().replace(lr_schedule="linear", batch_size=4, min_replay_size=8, burn_in=2)
    before, after = last_rates(r2d2, (10 * 8 - 8) // 4)
    assert before > 0 and after == 0


def test_ppo_value_clipping_takes_the_larger_error_of_the_clipped_and_unclipped_values():
    env = envs.make("catch")
    config = PPOConfig(clip_value_loss=True, clip_epsilon=0.2, num_minibatches=1).replace(hidden_sizes=(8,))
    agent = agents.make(config, env.spec())
    state = jax.jit(lambda key: anakin.init_state(env, agent, optax.adam(1e-3), key, 4, rollout_length=8))(
        jax.random.key(0)
    )
    params = state.learner.params
    batch = jax.jit(lambda p, s: agent.prepare(p, anakin.make_rollout(env, agent, 8)(p, s)[1]))(params, state.rollout)
    batch = batch._replace(value=batch.value + jnp.linspace(-1.0, 1.0, batch.value.shape[0]))  # old values moved
    _, values = jax.jit(lambda p, o: agent_network_values(config, env, p, o))(params, batch.observation)
    clipped = batch.value + jnp.clip(values - batch.value, -0.2, 0.2)
    error = jnp.maximum(jnp.square(values - batch.value_target), jnp.square(clipped - batch.value_target))
    _, metrics = jax.jit(agent.loss)(params, batch, jax.random.key(0))
    np.testing.assert_allclose(metrics["value_loss"], 0.5 * jnp.mean(error * batch.mask), rtol=1e-5)
    plain = agents.make(PPOConfig(num_minibatches=1).replace(hidden_sizes=(8,)), env.spec())
    _, unclipped = jax.jit(plain.loss)(params, batch, jax.random.key(0))
    np.testing.assert_allclose(
        unclipped["value_loss"], 0.5 * jnp.mean(jnp.square(values - batch.value_target) * batch.mask), rtol=1e-5
    )
    assert metrics["value_loss"] > unclipped["value_loss"]


def agent_network_values(config, env, params, observation):
    from podracer.core.agents.base import make_network

    return make_network(env.spec(), config).apply(params, observation)


def test_dqn_linear_epsilon_decays_over_its_share_of_the_run_counted_by_the_learner():
    from podracer.core.agents.qlearning import linear_epsilon
    from podracer.run.config import AnakinConfig

    np.testing.assert_allclose(
        [linear_epsilon(s, 1.0, 0.05, 500) for s in (0, 250, 500, 10_000)], [1.0, 0.525, 0.05, 0.05], atol=1e-6
    )
    env = envs.make("catch")
    config = DQNConfig(epsilon_schedule="linear", epsilon_fraction=0.5).replace(hidden_sizes=(8,))
    agent = agents.make(config, env.spec(), run=RunFacts(1, 1, 1, total_env_steps=1000))
    params = agent.init(jax.random.key(0), jnp.zeros((1, *env.spec().observation.shape)))
    observation = jnp.zeros((4000, *env.spec().observation.shape))
    greedy = jnp.argmax(agent.act(params, observation[:1], jax.random.key(1), (), jnp.ones(1, bool))[1]["q_values"])

    def greedy_share(env_steps):
        p = {**params, "env_steps": jnp.float32(env_steps)}
        action, _, _ = agent.act(p, observation, jax.random.key(2), (), jnp.ones(4000, bool))
        return float(jnp.mean(action == greedy))

    assert abs(greedy_share(0) - 1 / 3) < 0.04  # epsilon 1: uniform over catch's 3 actions
    assert abs(greedy_share(250) - (1 - 0.525 * 2 / 3)) < 0.04
    assert abs(greedy_share(500) - (1 - 0.05 * 2 / 3)) < 0.02  # the end of the decay, and after it
    with pytest.raises(
        ValueError, match=r"^--epsilon-schedule: unknown schedule 'exp'; choose one of ladder, linear\.$"
    ):
        DQNConfig(epsilon_schedule="exp")

    # The learner counts the env steps it learns from over every device; the run sets the schedule's length.
    run = AnakinConfig(
        env="catch",
        agent=DQNConfig(epsilon_schedule="linear"),
        num_envs_per_device=2,
        rollout_length=4,
        num_updates=20,
        updates_per_call=10,
    )
    assert compose.anakin_plan(run, 8).facts.total_env_steps == 20 * 4 * 2 * 8
    with pytest.raises(ValueError, match=r"^--epsilon-schedule linear decays over the run's env steps: make the agent"):
        agents.make(config, env.spec())
    small = dict(hidden_sizes=(8,), min_replay_size=64, batch_size=32, replay_capacity=128)
    agent = agents.make(DQNConfig(epsilon_schedule="linear").replace(**small), env.spec(), run=RunFacts(1, 1, 1, 1000))
    optimizer = learner.make_optimizer(1e-3)
    devices = jax.devices()[:2]
    state = anakin.init(env, agent, optimizer, jax.random.key(0), 3, devices)
    update = parallel.device_map(anakin.make_update(env, agent, optimizer, rollout_length=5), devices)
    for _ in range(2):
        state, _ = update(state)
    counted = np.asarray(state.learner.params["env_steps"])
    np.testing.assert_array_equal(counted, [2 * 5 * 3 * 2] * 2)  # both devices' steps, on each device


def test_ppo_without_bootstrap_truncated_treats_a_time_limit_as_a_terminal_state():
    env = envs.make("catch")  # its episodes end terminally (discount 0) within the rollout
    truncating = PPOConfig(num_minibatches=1, bootstrap_truncated=False).replace(hidden_sizes=(8,))
    agent = agents.make(truncating, env.spec())
    state = jax.jit(lambda key: anakin.init_state(env, agent, optax.adam(1e-3), key, 4, rollout_length=24))(
        jax.random.key(0)
    )
    params = state.learner.params
    terminal = jax.jit(lambda p, s: anakin.make_rollout(env, agent, 24)(p, s)[1])(params, state.rollout)
    assert bool(jnp.any(terminal.timestep.last[1:])) and bool(
        jnp.all(terminal.timestep.discount[terminal.timestep.last] == 0)
    )
    # The same steps with every episode end a truncation (discount 1 at the last step).
    truncated = terminal._replace(
        timestep=terminal.timestep._replace(discount=jnp.ones_like(terminal.timestep.discount))
    )
    bootstrapping = agents.make(PPOConfig(num_minibatches=1).replace(hidden_sizes=(8,)), env.spec())
    prepare = jax.jit(lambda agent, p, t: agent.prepare(p, t), static_argnums=0)
    as_terminal = prepare(agent, params, truncated).advantage
    np.testing.assert_allclose(as_terminal, prepare(bootstrapping, params, terminal).advantage, rtol=1e-6)
    bootstrapped = prepare(bootstrapping, params, truncated).advantage
    assert not np.allclose(bootstrapped, as_terminal)  # the truncated steps look past the time limit
