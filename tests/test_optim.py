"""The agent's own optimizer: parameter groups, injected hyper-parameters, and the same state layout for training
and for the templates that evaluation restores into."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs, optim
from podracer.core.agents import PPOConfig, SACConfig
from podracer.core.types import RunFacts

RUN = RunFacts(num_updates=10, envs_per_learner=4, rollout_length=4, total_env_steps=160)


@pytest.mark.parametrize("normalize", [None, "observations"])
def test_sac_moves_its_temperature_at_its_own_rate(normalize):
    """Adam's first step moves each parameter by about its group's rate: the temperature by
    --alpha-learning-rate, the networks by --learning-rate, inside a normalising wrapper too."""
    pytest.importorskip("gymnax")
    env = envs.make("gymnax:Pendulum-v1")
    config = SACConfig(alpha_learning_rate=0.1).replace(hidden_sizes=(8,)).replace(learning_rate=1e-3)
    agent = agents.make(config, env.spec(), normalize=normalize, run=RUN)
    params = agent.init(jax.random.key(0), jnp.zeros((1, 3)))
    updates, _ = agent.optimizer.update(jax.tree.map(jnp.ones_like, params), agent.optimizer.init(params), params)
    inner = updates.agent if normalize else updates
    np.testing.assert_allclose(inner["log_alpha"], -0.1, rtol=1e-3)
    moves = np.concatenate([np.abs(np.ravel(x)) for x in jax.tree.leaves(inner["actor"])])
    np.testing.assert_allclose(moves, 1e-3, rtol=1e-3)


def test_sac_moves_its_critics_at_their_own_rate_when_given_one():
    """--critic-learning-rate (CleanRL's q_lr): Adam's first step moves the critics by that rate, the actor by
    --learning-rate and the temperature by --alpha-learning-rate; without it the state keeps its two groups (the
    layout of checkpoints saved before the flag)."""
    config = SACConfig(alpha_learning_rate=0.1, critic_learning_rate=0.01).replace(hidden_sizes=(8,))
    from podracer.core.types import Box, EnvSpec

    spec = EnvSpec(jax.ShapeDtypeStruct((3,), jnp.float32), box=Box((-2.0,), (2.0,)))
    agent = agents.make(config.replace(learning_rate=1e-3), spec, run=RUN)
    params = agent.init(jax.random.key(0), jnp.zeros((1, 3)))
    updates, _ = agent.optimizer.update(jax.tree.map(jnp.ones_like, params), agent.optimizer.init(params), params)
    np.testing.assert_allclose(updates["log_alpha"], -0.1, rtol=1e-3)
    for part, rate in (("actor", 1e-3), ("critic", 0.01)):
        moves = np.concatenate([np.abs(np.ravel(x)) for x in jax.tree.leaves(updates[part])])
        np.testing.assert_allclose(moves, rate, rtol=1e-3)
    plain = agents.make(SACConfig().replace(hidden_sizes=(8,)), spec, run=RUN)
    assert set(plain.optimizer.init(params).inner_states) == {"networks", "temperature"}
    with pytest.raises(ValueError, match=r"^--critic-learning-rate must be > 0, got 0\.0\.$"):
        SACConfig(critic_learning_rate=0.0)


def test_the_learning_rate_is_state_a_population_can_change():
    """The learning rate lives in the optimizer state (optax.inject_hyperparams): set there, the next update
    follows it, inside jit."""
    spec = envs.make("catch").spec()
    agent = agents.make(PPOConfig().replace(learning_rate=1e-3), spec, run=RUN)
    params = {"w": jnp.ones(3)}
    state = agent.optimizer.init(params)
    assert float(optim.injected_hyperparameters(state)["learning_rate"]) == pytest.approx(1e-3)

    @jax.jit
    def step(state, rate):
        state.hyperparams["learning_rate"] = rate
        return agent.optimizer.update({"w": jnp.ones(3)}, state, params)[0]["w"]

    np.testing.assert_allclose(step(state, 0.05), -0.05, rtol=1e-3)
    np.testing.assert_allclose(step(state, 0.002), -0.002, rtol=1e-3)


def test_training_and_evaluation_build_the_same_optimizer_state():
    """What evaluation restores into (no run facts) has the layout training saved (with them), for every agent."""
    spec = envs.make("catch").spec()
    observation = jnp.zeros((1, *spec.observation.shape))
    for name in ("a2c", "ppo", "impala", "dqn", "r2d2"):
        config = agents.config_class(name)().replace(lr_schedule="cosine")
        trained, played = agents.make(config, spec, run=RUN), agents.make(config, spec)
        params = trained.init(jax.random.key(0), observation)
        assert jax.tree.structure(trained.optimizer.init(params)) == jax.tree.structure(played.optimizer.init(params))


def test_rmsprop_is_pytorchs():
    """--update-rule rmsprop steps as PyTorch's RMSprop (Stable-Baselines3's A2C): squares averaged with decay 0.99
    from zero, eps 1e-5 added outside the root, after the global-norm clip; Adam's first step would be -rate."""
    settings = optim.OptimizerConfig(learning_rate=7e-4, max_grad_norm=0.5, update_rule="rmsprop")
    optimizer = optim.optimizer_of(settings, 10)
    params = {"w": jnp.zeros(2)}
    state = optimizer.init(params)
    square = np.zeros(2)
    for g in np.array([[0.3, -0.1], [0.2, 0.4], [1.0, 0.0]]):
        clipped = g * min(1.0, 0.5 / np.linalg.norm(g))
        square = 0.99 * square + 0.01 * clipped**2
        updates, state = optimizer.update({"w": jnp.asarray(g, jnp.float32)}, state, params)
        np.testing.assert_allclose(updates["w"], -7e-4 * clipped / (np.sqrt(square) + 1e-5), rtol=1e-4)
    with pytest.raises(ValueError, match=r"^--update-rule: unknown rule 'sgd'; choose one of adam, rmsprop\.$"):
        optim.OptimizerConfig(update_rule="sgd")
