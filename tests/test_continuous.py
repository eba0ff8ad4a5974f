"""Action spaces and observation layouts: Gaussian policies, SAC, TD3, boxes, boards."""

import os
import subprocess
import sys
from types import SimpleNamespace

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs, networks
from podracer import anakin
from podracer.core.agents.base import greedy_action, sample_policy
from podracer.core.agents.losses import policy_terms
from podracer.core.agents.sac import squashed_sample
from podracer.core.types import image_layout
from podracer.core.envs.base import to_box
from podracer.core.learner import make_optimizer
from podracer.core.types import Box, EnvSpec, ImageLayout


VECTOR_BOX = EnvSpec(jax.ShapeDtypeStruct((3,), jnp.float32), box=Box((-2.0, 0.0), (2.0, 1.0)))


def test_gaussian_log_probabilities_and_entropy_match_a_reference_distribution():
    rng = np.random.default_rng(0)
    mean, log_std = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32) * 0.5
    actions = rng.normal(size=(5, 3)).astype(np.float32) * 2
    log_prob, entropy = policy_terms({"mean": jnp.asarray(mean), "log_std": jnp.asarray(log_std)}, jnp.asarray(actions))
    reference = distrax.MultivariateNormalDiag(mean, np.exp(log_std))
    np.testing.assert_allclose(log_prob, reference.log_prob(actions), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(entropy, reference.entropy(), rtol=1e-5, atol=1e-5)
    # The categorical branch is unchanged: log-softmax at the actions.
    logits = rng.normal(size=(4, 6)).astype(np.float32)
    log_prob, entropy = policy_terms(jnp.asarray(logits), jnp.arange(4))
    np.testing.assert_allclose(
        log_prob, distrax.Categorical(logits=logits).log_prob(np.arange(4)), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(entropy, distrax.Categorical(logits=logits).entropy(), rtol=1e-5, atol=1e-6)


def test_squashed_gaussian_log_probabilities_match_a_reference_distribution():
    rng = np.random.default_rng(1)
    mean, log_std = rng.normal(size=(64, 2)).astype(np.float32), rng.normal(size=(64, 2)).astype(np.float32) * 0.5
    action, log_prob = squashed_sample(jnp.asarray(mean), jnp.asarray(log_std), jax.random.key(0))
    assert np.all(np.abs(action) < 1.0)
    reference = distrax.Independent(distrax.Transformed(distrax.Normal(mean, np.exp(log_std)), distrax.Tanh()), 1)
    np.testing.assert_allclose(log_prob, reference.log_prob(np.clip(action, -0.999999, 0.999999)), rtol=2e-3, atol=2e-3)


def test_actions_are_rescaled_to_the_box_in_numpy_and_jax():
    box = Box((-2.0, 0.0), (2.0, 1.0))
    action = np.array([[-1.0, 1.0], [0.5, 0.0], [9.0, -9.0]], np.float32)
    expected = np.array([[-2.0, 1.0], [1.0, 0.5], [2.0, 0.0]], np.float32)
    np.testing.assert_allclose(to_box(box, action), expected)
    np.testing.assert_allclose(jax.jit(lambda a: to_box(box, a))(jnp.asarray(action)), expected)
    assert isinstance(to_box(box, action), np.ndarray)


@pytest.mark.suite("gymnax")
def test_the_anakin_wrapper_steps_a_continuous_environment_in_its_bounds():
    env = envs.make("gymnax:Pendulum-v1")
    wrapped = envs.wrap(env)
    key = jax.random.key(2)
    state, _ = wrapped.reset(key)
    raw_state, _ = env.reset(jax.random.split(key)[1])
    _, timestep = wrapped.step(state, jnp.array([0.5]))  # the agent's 0.5: a torque of 1.0
    _, expected = env.step(raw_state, jnp.array([1.0]))
    np.testing.assert_allclose(timestep.observation, expected.observation, rtol=1e-6)
    np.testing.assert_allclose(timestep.reward, expected.reward, rtol=1e-6)


@pytest.mark.parametrize("name", ["ppo", "a2c"])
def test_gaussian_policy_agents_act_in_a_box(name):
    agent = agents.make(name, VECTOR_BOX, hidden_sizes=(8,))
    observation = jnp.zeros((5, 3))
    params = agent.init(jax.random.key(0), observation)
    assert params["params"]["policy_head"]["log_std"].shape == (2,)
    action, extras, _ = agent.act(params, observation, jax.random.key(1), (), jnp.ones(5, bool))
    assert action.shape == (5, 2) and action.dtype == jnp.float32
    assert extras["mean"].shape == (5, 2) and extras["log_std"].shape == (5, 2)
    # Initial standard deviation 1 around a mean near 0, and the greedy action is the mean.
    assert 0.3 < float(jnp.std(action)) < 3.0 and greedy_action(extras) is extras["mean"]


@pytest.mark.parametrize("jit", [pytest.param(False, marks=pytest.mark.slow), True])
def test_gsde_acts_mean_plus_features_times_a_held_matrix_and_its_variance_is_sb3s(jit):
    """--policy-std sde: the Gaussian's variance per entry is sum_j h_j^2 sigma_jk^2 + 1e-6 (h: the policy torso's
    features), the action is mean + h @ (sigma * eps), and each environment draws eps at every rollout's start and
    every --sde-sample-freq steps into it (rollouts of 6, every 4: at steps 0, 4, 6, 10, 12), keeping it across an
    episode's end; actions and the distribution in the box's units (--policy-units env: divided by the half range)."""
    from podracer.core.types import RunFacts

    run = RunFacts(num_updates=4, envs_per_learner=3, rollout_length=6, total_env_steps=72)
    agent = agents.make(
        "ppo", VECTOR_BOX, run=run, policy_std="sde", sde_sample_freq=4, log_std_init=-0.5, policy_units="env"
    )
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)), jnp.float32)
    params = agent.init(jax.random.key(0), obs)
    head = params["params"]["policy_head"]
    np.testing.assert_allclose(np.asarray(head["log_std"]), np.full((64, 2), -0.5))
    sigma = np.exp(np.asarray(head["log_std"], np.float64)) * np.linspace(0.5, 1.5, 128).reshape(64, 2)
    params = jax.tree.map(lambda x: x, params)
    params["params"]["policy_head"]["log_std"] = jnp.asarray(np.log(sigma), jnp.float32)
    torso = params["params"]["policy_torso"]
    h = np.tanh(
        np.tanh(
            np.asarray(obs, np.float64) @ np.asarray(torso["Dense_0"]["kernel"]) + np.asarray(torso["Dense_0"]["bias"])
        )
        @ np.asarray(torso["Dense_1"]["kernel"])
        + np.asarray(torso["Dense_1"]["bias"])
    )
    dense = head["Dense_0"]
    half, centre = np.array([2.0, 0.5]), np.array([0.0, 0.5])
    mean = (h @ np.asarray(dense["kernel"]) + np.asarray(dense["bias"]) - centre) / half
    log_std = 0.5 * np.log(np.square(h) @ np.square(sigma) + 1e-6) - np.log(half)
    act = jax.jit(agent.act) if jit else agent.act
    state, first = agent.initial_state(3), jnp.asarray([True, False, False])
    draws, eps_before = [], None
    for t in range(13):
        action, extras, state = act(params, obs, jax.random.key(t), state, first)
        eps = np.asarray(state[0], np.float64)
        draws.append(eps_before is None or not np.array_equal(eps, eps_before))
        eps_before = eps
        np.testing.assert_allclose(np.asarray(extras["mean"]), mean, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(extras["log_std"]), log_std, rtol=1e-4, atol=1e-5)
        noise = np.einsum("bj,bjk->bk", h, sigma[None] * eps) / half
        np.testing.assert_allclose(np.asarray(action), mean + noise, rtol=1e-4, atol=1e-4)
        first = jnp.asarray([t == 2] * 3)  # an episode ends: the matrix stays
    assert [t for t, drawn in enumerate(draws) if drawn] == [0, 4, 6, 10, 12]
    assert list(np.asarray(state[1])) == [13, 13, 13]


def test_gsde_is_refused_where_it_cannot_act():
    discrete = envs.make("cartpole").spec()
    message = r"^--policy-std sde takes continuous actions and vector observations, without --core lstm\.$"
    with pytest.raises(ValueError, match=message):
        agents.make("ppo", discrete, policy_std="sde")
    with pytest.raises(ValueError, match=message):
        agents.make("a2c", VECTOR_BOX, policy_std="sde", core="lstm")
    with pytest.raises(ValueError, match=r"^--sde-sample-freq must be -1 or >= 1, got 0\.$"):
        agents.make("ppo", VECTOR_BOX, policy_std="sde", sde_sample_freq=0)


def test_sac_acts_inside_the_unit_box_and_its_greedy_action_is_the_squashed_mean():
    agent = agents.make("sac", VECTOR_BOX, hidden_sizes=(8,))
    observation = jnp.ones((7, 3))
    params = agent.init(jax.random.key(0), observation)
    assert set(params) == {"actor", "critic", "log_alpha"}
    action, extras, _ = agent.act(params, observation, jax.random.key(1), (), jnp.ones(7, bool))
    assert action.shape == (7, 2) and np.all(np.abs(action) < 1.0)
    assert extras["greedy"].shape == (7, 2) and np.all(np.abs(greedy_action(extras)) < 1.0)


def test_sac_with_gsde_acts_tanh_of_mean_plus_a_held_matrix_and_learns_with_one_matrix_per_step():
    """SAC --policy-std sde (SB3's use_sde): acting tanh(mean + h @ (sigma * eps)), eps held per environment for a
    rollout (4 steps here, -1: no draw within one); greedy tanh(mean); the mean clipped to [-2, 2]; the variance
    sum_j h_j^2 sigma_jk^2 + 1e-6. Learning: the loss's sampled actions share one eps across the batch (its entropy
    term is the log-density at mean + h @ (sigma * eps) of one eps); --no-tune-alpha leaves the temperature alone."""
    from podracer.core.agents.sac import SDESquashedActor, squashed_log_prob
    from podracer.core.types import RunFacts

    run = RunFacts(num_updates=4, envs_per_learner=3, rollout_length=4, total_env_steps=48)
    agent = agents.make(
        "sac", VECTOR_BOX, run=run, hidden_sizes=(8,), policy_std="sde", log_std_init=-1.0, tune_alpha=False
    )
    obs = jnp.asarray(np.random.default_rng(1).normal(size=(3, 3)), jnp.float32)
    params = agent.init(jax.random.key(0), obs)
    mean, log_std, h, sigma = SDESquashedActor(2, (8,), -1.0).apply(params["actor"], obs)
    np.testing.assert_allclose(np.asarray(sigma), np.exp(-1.0), rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(log_std), 0.5 * np.log(np.square(np.asarray(h)) @ np.square(np.asarray(sigma)) + 1e-6), rtol=1e-5
    )
    assert np.all(np.abs(np.asarray(mean)) <= 2.0)
    state, eps_before, draws = agent.initial_state(3), None, []
    for t in range(9):
        action, extras, state = agent.act(params, obs, jax.random.key(t), state, jnp.zeros(3, bool))
        eps = np.asarray(state[0])
        draws.append(eps_before is None or not np.array_equal(eps, eps_before))
        eps_before = eps
        expected = np.tanh(np.asarray(mean) + np.einsum("bj,bjk->bk", np.asarray(h), np.asarray(sigma)[None] * eps))
        np.testing.assert_allclose(np.asarray(action), expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(extras["greedy"]), np.tanh(np.asarray(mean)), rtol=1e-5)
    assert [t for t, drawn in enumerate(draws) if drawn] == [0, 4, 8]
    batch = {
        "observation": jnp.concatenate([obs[:1], obs[:1], obs[1:]]),
        "action": jnp.zeros((4, 2)),
        "reward": jnp.ones((4,)),
        "discount": jnp.full((4,), 0.9),
        "next_observation": jnp.concatenate([obs, obs[:1]]),
        "valid": jnp.ones((4,), bool),
    }
    loss = jax.jit(agent.replay.loss)
    (_, (metrics, _)), grads = jax.value_and_grad(loss, has_aux=True)(params, params, batch, None, jax.random.key(7))
    assert float(jnp.abs(grads["log_alpha"])) == 0.0  # a fixed temperature: no gradient, no Adam step
    assert float(metrics["alpha"]) == pytest.approx(1.0)  # --initial-alpha's default, kept
    # one matrix for the step: the loss's entropy is the mean of squashed_log_prob at u = mean + h @ (sigma * eps)
    m2, ls2, h2, s2 = SDESquashedActor(2, (8,), -1.0).apply(params["actor"], batch["observation"])
    eps = jax.random.normal(jax.random.split(jax.random.key(7))[0], s2.shape, s2.dtype)  # the loss's first key
    u = m2 + h2 @ (s2 * eps)
    np.testing.assert_allclose(float(metrics["entropy"]), -float(jnp.mean(squashed_log_prob(u, m2, ls2))), rtol=1e-4)
    with pytest.raises(ValueError, match=r"^--agent sac takes --policy-std state or sde, got parameter\.$"):
        agents.make("sac", VECTOR_BOX, policy_std="parameter")


def test_td3_acts_with_a_ladder_of_noise_scales_inside_the_unit_box_and_its_greedy_action_is_the_actor():
    agent = agents.make("td3", VECTOR_BOX, hidden_sizes=(8,), exploration_noise_min=0.05, exploration_noise_max=0.3)
    observation = jnp.ones((5, 3))
    params = agent.init(jax.random.key(0), observation)
    assert set(params) == {"actor", "critic"}
    act = jax.vmap(lambda key: agent.act(params, observation, key, (), jnp.ones(5, bool))[:2])
    actions, extras = act(jax.random.split(jax.random.key(1), 4000))
    assert actions.shape == (4000, 5, 2) and np.all(np.abs(actions) <= 1.0)
    greedy = np.asarray(extras["greedy"][0])
    assert np.all(np.abs(greedy) < 1.0) and np.allclose(np.asarray(extras["greedy"]), greedy)
    # around the actor's action (its last layer starts small: near the box's centre), each environment's noise is its
    # rung of the ladder from 0.05 to 0.3
    assert np.all(np.abs(greedy) < 0.2)
    np.testing.assert_allclose(np.std(actions, axis=0), np.linspace(0.05, 0.3, 5)[:, None] * np.ones(2), rtol=0.08)
    np.testing.assert_allclose(np.mean(actions, axis=0), greedy, atol=0.03)


def test_sac_acts_uniformly_at_random_for_its_random_steps_then_from_its_actor():
    """SAC's ``--random-steps`` (CleanRL's learning_starts): uniform actions until the learner has counted that many
    env steps into the parameters, then the squashed Gaussian's samples, as an agent without the flag (which keeps
    no clock) samples them."""
    agent = agents.make("sac", VECTOR_BOX, hidden_sizes=(8,), random_steps=100)
    plain = agents.make("sac", VECTOR_BOX, hidden_sizes=(8,))
    observation = jnp.ones((2000, 3))
    params = agent.init(jax.random.key(0), observation)
    assert plain.observe is None and set(plain.init(jax.random.key(0), observation)) == set(params) - {"env_steps"}

    def actions(agent, params):
        return np.asarray(jax.jit(agent.act)(params, observation, jax.random.key(1), (), jnp.ones(2000, bool))[0])

    early = actions(agent, params)
    np.testing.assert_allclose(early.mean(0), 0.0, atol=0.05)  # uniform on [-1, 1]: mean 0, std 0.577
    np.testing.assert_allclose(early.std(0), 1 / np.sqrt(3), atol=0.03)
    counted, _ = agent.observe(params, SimpleNamespace(action=jnp.zeros((5, 25, 2))))  # 4 x 25 = 100 env steps
    late, policy = actions(agent, counted), actions(plain, {k: v for k, v in params.items() if k != "env_steps"})
    assert np.abs(policy.mean(0)).max() > 0.3 or np.abs(policy.std(0) - 1 / np.sqrt(3)).max() > 0.2  # not uniform
    np.testing.assert_allclose(late.mean(0), policy.mean(0), atol=0.05)
    np.testing.assert_allclose(late.std(0), policy.std(0), rtol=0.1, atol=0.01)


def test_td3_acts_uniformly_at_random_for_its_random_steps_then_from_its_actor():
    """``--random-steps``: the learner counts env steps (``observe``) into the parameters the actors act with."""
    agent = agents.make("td3", VECTOR_BOX, hidden_sizes=(8,), random_steps=100, exploration_noise_max=0.1)
    observation = jnp.ones((64, 3))
    params = agent.init(jax.random.key(0), observation)
    act = jax.jit(lambda p, k: agent.act(p, observation, k, (), jnp.ones(64, bool))[0])
    early = act(params, jax.random.key(1))
    assert float(jnp.std(early)) > 0.5 and np.all(np.abs(early) <= 1.0)  # uniform on [-1, 1]: std 0.58
    # 4 steps of 25 environments (a [5, 25] trajectory) make 100 env steps: the actor acts from then on
    counted, _ = agent.observe(params, SimpleNamespace(action=jnp.zeros((5, 25, 2))))
    assert float(counted["env_steps"]) == 100.0
    late = act(counted, jax.random.key(1))
    assert float(jnp.std(late)) < 0.2


def test_td3_steps_its_actor_once_every_policy_delay_gradient_steps_and_its_critics_at_every_one():
    agent = agents.make("td3", VECTOR_BOX, hidden_sizes=(8,), policy_delay=3)
    params = agent.init(jax.random.key(0), jnp.ones((4, 3)))
    grads = jax.tree.map(jnp.ones_like, params)
    state = agent.optimizer.init(params)
    moved = []
    for _ in range(6):
        updates, state = agent.optimizer.update(grads, state, params)
        moved.append(tuple(any(bool(jnp.any(u != 0)) for u in jax.tree.leaves(updates[part])) for part in params))
    assert list(params) == ["actor", "critic"]
    assert moved == [(False, True), (False, True), (True, True)] * 2


def _c51_target(probs, reward, discount, atoms):
    """C51's projection, written out: each atom's probability split between the two atoms around r + discount z."""
    v_min, v_max, delta = atoms[0], atoms[-1], atoms[1] - atoms[0]
    out = np.zeros_like(probs)
    for j, z in enumerate(atoms):
        b = (np.clip(reward + discount * z, v_min, v_max) - v_min) / delta
        low, high = int(np.floor(b + 1e-6)), int(np.ceil(b - 1e-6))
        if low == high:
            out[low] += probs[j]
        else:
            out[low] += probs[j] * (high - b)
            out[high] += probs[j] * (b - low)
    return out


@pytest.mark.parametrize("jit", [pytest.param(False, marks=pytest.mark.slow), True])
def test_the_categorical_projection_is_c51s_and_rlaxs_on_an_even_support(jit):
    """losses.categorical_projection against C51's projection written out and rlax's (any support, O(K^2)): points
    inside the support, on its atoms, beyond both ends; two leading axes; the mass kept."""
    import rlax

    from podracer.core.agents.losses import categorical_projection

    rng = np.random.default_rng(0)
    atoms = np.linspace(-3.0, 3.0, 7)
    probs = rng.dirichlet(np.ones(7), size=(2, 5))  # [2, 5, 7]
    rewards = np.array([0.3, -1.2, 2.5, 0.0, -4.0])  # the fourth: every point on an atom; the fifth: below the support
    discounts = np.array([0.9, 0.9, 1.0, 1.0, 0.9])
    values = np.broadcast_to(rewards[:, None] + discounts[:, None] * atoms, probs.shape)
    project = jax.jit(categorical_projection, static_argnums=(2, 3)) if jit else categorical_projection
    out = np.asarray(project(jnp.asarray(values, jnp.float32), jnp.asarray(probs, jnp.float32), -3.0, 3.0))
    expected = np.array(
        [[_c51_target(probs[c, i], rewards[i], discounts[i], atoms) for i in range(5)] for c in range(2)]
    )
    np.testing.assert_allclose(out, expected, atol=1e-6)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-6)
    by_rlax = jax.vmap(jax.vmap(rlax.categorical_l2_project, in_axes=(0, 0, None)), in_axes=(0, 0, None))(
        jnp.asarray(values, jnp.float32), jnp.asarray(probs, jnp.float32), jnp.asarray(atoms, jnp.float32)
    )
    np.testing.assert_allclose(out, np.asarray(by_rlax), atol=1e-6)


def _td3_batch(seed: int) -> dict:
    """Six replay items for VECTOR_BOX (the last one invalid): a terminal, a half discount, rewards of both signs."""
    rng = np.random.default_rng(seed)
    return {
        "observation": jnp.asarray(rng.normal(size=(6, 3)), jnp.float32),
        "action": jnp.asarray(rng.uniform(-1, 1, size=(6, 2)), jnp.float32),
        "reward": jnp.asarray([0.3, -1.2, 2.5, 0.0, -4.0, 1.0], jnp.float32),
        "discount": jnp.asarray([0.9, 0.9, 0.0, 0.5, 0.9, 0.9], jnp.float32),
        "next_observation": jnp.asarray(rng.normal(size=(6, 3)), jnp.float32),
        "valid": jnp.asarray([1, 1, 1, 1, 1, 0], bool),
    }


@pytest.mark.parametrize("clipped", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_td3_categorical_critics_learn_the_projected_target_of_c51(clipped):
    from podracer.core.agents.sac import TwinCritic

    agent = agents.make(
        "td3",
        VECTOR_BOX,
        hidden_sizes=(8,),
        num_atoms=7,
        v_min=-3.0,
        v_max=3.0,
        target_noise=0.0,
        clipped_double_q=clipped,
    )
    batch = _td3_batch(3)
    params = agent.init(jax.random.key(0), batch["observation"])
    target = agent.init(jax.random.key(1), batch["observation"])
    _, (metrics, _) = agent.replay.loss(params, target, batch, None, jax.random.key(2))
    critic, atoms = TwinCritic((8,), outputs=7), np.linspace(-3.0, 3.0, 7)
    from podracer.core.agents.td3 import DeterministicActor

    next_action = DeterministicActor(2, (8,)).apply(target["actor"], batch["next_observation"])
    next_logits = np.asarray(critic.apply(target["critic"], batch["next_observation"], next_action), np.float64)
    logits = np.asarray(critic.apply(params["critic"], batch["observation"], batch["action"]), np.float64)
    next_probs = np.exp(next_logits) / np.exp(next_logits).sum(-1, keepdims=True)
    next_values = (next_probs * atoms).sum(-1)
    expected = 0.0
    for i in range(5):  # the valid items
        r, d = float(batch["reward"][i]), float(batch["discount"][i])
        for c in range(2):
            source = int(np.argmin(next_values[:, i])) if clipped else c
            m = _c51_target(next_probs[source, i], r, d, atoms)
            log_p = logits[c, i] - np.log(np.exp(logits[c, i]).sum())
            expected -= (m * log_p).sum()
    np.testing.assert_allclose(float(metrics["critic_loss"]), expected / 6, rtol=1e-4)


@pytest.mark.parametrize("jit", [False, True])
def test_ddpg_one_critic_learns_the_target_actors_unsmoothed_target_by_hand(jit):
    """--num-critics 1 --target-noise 0 (DDPG): one critic's squared error from r + discount Q'(o', mu'(o')), and the
    actor's loss -Q(o, mu(o)), over the valid items, against the networks applied by hand."""
    from podracer.core.agents.sac import TwinCritic
    from podracer.core.agents.td3 import DeterministicActor

    agent = agents.make("td3", VECTOR_BOX, hidden_sizes=(8,), num_critics=1, policy_delay=1, target_noise=0.0)
    batch = _td3_batch(5)
    params = agent.init(jax.random.key(0), batch["observation"])
    target = agent.init(jax.random.key(1), batch["observation"])
    loss = jax.jit(agent.replay.loss) if jit else agent.replay.loss
    _, (metrics, _) = loss(params, target, batch, None, jax.random.key(2))
    actor, critic = DeterministicActor(2, (8,)), TwinCritic((8,), num=1)
    next_action = actor.apply(target["actor"], batch["next_observation"])
    next_q = np.asarray(critic.apply(target["critic"], batch["next_observation"], next_action), np.float64)[0]
    q = np.asarray(critic.apply(params["critic"], batch["observation"], batch["action"]), np.float64)[0]
    q_pi = np.asarray(
        critic.apply(params["critic"], batch["observation"], actor.apply(params["actor"], batch["observation"])),
        np.float64,
    )[0]
    r, d, valid = (np.asarray(batch[k], np.float64) for k in ("reward", "discount", "valid"))
    expected_critic = np.sum(valid * (q - (r + d * next_q)) ** 2) / 6
    np.testing.assert_allclose(float(metrics["critic_loss"]), expected_critic, rtol=1e-5)
    np.testing.assert_allclose(float(metrics["actor_loss"]), -np.sum(valid * q_pi) / 6, rtol=1e-5, atol=1e-7)


def test_td3_settings_that_cannot_work_are_refused_naming_the_flags():
    with pytest.raises(
        ValueError, match=r"^Need --exploration-noise-min <= --exploration-noise-max, got 0.5 and 0.1\.$"
    ):
        agents.TD3Config(exploration_noise_min=0.5)
    with pytest.raises(ValueError, match=r"^--num-atoms 1 \(scalar critics\) or >= 3 with --v-min < --v-max, got 51"):
        agents.TD3Config(num_atoms=51, v_min=1.0, v_max=-1.0)
    with pytest.raises(ValueError, match=r"^--policy-delay must be >= 1, got 0\.$"):
        agents.TD3Config(policy_delay=0)
    with pytest.raises(ValueError, match=r"^--target-noise must be >= 0, got -0.1\.$"):
        agents.TD3Config(target_noise=-0.1)
    with pytest.raises(ValueError, match=r"^--num-critics must be 1 or 2, got 3\.$"):
        agents.TD3Config(num_critics=3)


def test_agents_refuse_actions_they_cannot_take():
    discrete = envs.make("cartpole").spec()
    with pytest.raises(
        ValueError,
        match=r"^--agent dqn takes discrete actions and this environment's are continuous; "
        r"use a2c, ppo, sac or td3\.$",
    ):
        agents.make("dqn", VECTOR_BOX)
    with pytest.raises(
        ValueError,
        match=r"^--agent impala takes discrete or multi-discrete actions and this "
        r"environment's are continuous; use a2c, ppo, sac or td3\.$",
    ):
        agents.make("impala", VECTOR_BOX)
    with pytest.raises(
        ValueError,
        match=r"^--agent r2d2 takes discrete actions and this environment's are "
        r"multi-discrete; use a2c, impala or ppo\.$",
    ):
        agents.make("r2d2", discrete._replace(num_actions=0, nvec=(2, 3)))
    with pytest.raises(
        ValueError,
        match=r"^--agent sac takes continuous actions and this environment's are discrete; "
        r"use a2c, dqn, impala, muzero, ppo, pqn or r2d2\.$",
    ):
        agents.make("sac", discrete)


def test_image_layouts_choose_the_torso_and_nothing_is_guessed():
    atari = EnvSpec(jax.ShapeDtypeStruct((4, 84, 84), jnp.uint8), 6)
    board = EnvSpec(jax.ShapeDtypeStruct((10, 10, 4), jnp.float32), 3, image=ImageLayout(-1, 0.0, 1.0))
    pixels = EnvSpec(jax.ShapeDtypeStruct((64, 64, 3), jnp.float32), 3, image=ImageLayout(-1, 0.0, 1.0))
    assert image_layout(atari) == ImageLayout(-3, 0.0, 255.0)
    kinds = [networks.choose_torso("auto", 3, image_layout(s), s.observation.shape) for s in (atari, board, pixels)]
    assert kinds == ["impala", "board", "impala"]
    assert networks.choose_torso("auto", 1) == "mlp"
    unsaid = EnvSpec(jax.ShapeDtypeStruct((10, 10, 4), jnp.float32), 3)
    with pytest.raises(
        ValueError,
        match=r"^Observations of shape \(10, 10, 4\) \(float32\) have rank 3, but the "
        r"environment spec does not say how: give EnvSpec\(image=ImageLayout",
    ):
        agents.make("ppo", unsaid)
    wrong = EnvSpec(jax.ShapeDtypeStruct((10, 4), jnp.float32), 3, image=ImageLayout(-1, 0.0, 1.0))
    with pytest.raises(ValueError, match=r"does not fit observations of shape \(10, 4\)"):
        agents.make("ppo", wrong)


def test_images_are_scaled_by_their_range_and_channels_last_boards_keep_their_axes():
    board = np.random.default_rng(0).integers(0, 2, (2, 10, 10, 4)).astype(np.float32)
    np.testing.assert_array_equal(networks.to_nhwc(jnp.asarray(board), ImageLayout(-1, 0.0, 1.0)), board)
    frames = np.random.default_rng(1).integers(0, 256, (2, 4, 8, 8)).astype(np.uint8)
    np.testing.assert_allclose(networks.to_nhwc(jnp.asarray(frames)), np.transpose(frames, (0, 2, 3, 1)) / 255.0)


def test_the_board_torso_is_a_valid_three_by_three_convolution():
    import flax.linen as nn

    x = jnp.asarray(np.random.default_rng(2).normal(size=(3, 10, 10, 4)).astype(np.float32))
    torso = networks.BoardCNN(channels=5, hidden=7)
    params = torso.init(jax.random.key(0), x)
    kernel = params["params"]["Dense_0"]["kernel"].reshape(3, 3, 4, 5)  # patches are ordered (row, column, channel)
    bias = params["params"]["Dense_0"]["bias"]
    conv = nn.Conv(5, (3, 3), padding="VALID")
    expected_features = conv.apply({"params": {"kernel": kernel, "bias": bias}}, x)
    dense = params["params"]["Dense_1"]
    expected = jax.nn.relu(jax.nn.relu(expected_features).reshape(3, -1) @ dense["kernel"] + dense["bias"])
    np.testing.assert_allclose(torso.apply(params, x), expected, rtol=1e-5, atol=1e-5)


def _train_seeds(env, agent, num_seeds, num_envs, rollout_length, num_updates, learning_rate=None):
    """The greedy returns of ``num_seeds`` seeds trained together, with Adam at ``learning_rate`` (None: the agent's own
    optimizer, as TD3's delayed actor needs)."""
    optimizer = agent.optimizer if learning_rate is None else make_optimizer(learning_rate, None)
    update = anakin.make_update(env, agent, optimizer, rollout_length=rollout_length, axis_names=())
    multi = anakin.make_multi_update(update, num_updates)

    def train(key):
        state = anakin.init_state(env, agent, optimizer, key, num_envs, rollout_length=rollout_length)
        return multi(state)

    keys = jax.random.split(jax.random.key(0), num_seeds)
    state, metrics = jax.jit(jax.vmap(train)).lower(keys).compile()(keys)
    evaluate = anakin.make_evaluate(env, agent, 8)
    returns = jax.jit(jax.vmap(evaluate, in_axes=(0, None)))(state.learner.params, jax.random.key(1))
    return np.asarray(returns).mean(axis=-1)


@pytest.mark.slow
@pytest.mark.suite("gymnax")
def test_gaussian_ppo_learns_pendulum_on_two_of_three_seeds(optimized_xla):
    env = envs.make("gymnax:Pendulum-v1")
    agent = agents.make("ppo", env.spec(), discount=0.95, entropy_coef=0.0, num_epochs=10, num_minibatches=8)
    returns = _train_seeds(env, agent, num_seeds=3, num_envs=32, rollout_length=64, num_updates=60, learning_rate=1e-3)
    # A random policy scores about -1,200; the bar of the issue is -300, here with a margin for a short run (five
    # seeds reached -113 to -130 here after these 60 updates, as after 100).
    assert (returns > -450).sum() >= 2 and returns.mean() > -700, returns


@pytest.mark.slow
@pytest.mark.suite("gymnax")
def test_ppo_with_gsde_reaches_mountaincar_continuous_goal_on_two_of_three_seeds(tmp_path):
    """The mountaincar-continuous-ppo-sde preset (the reproduction row's settings), at a quarter of its budget, seeds
    vmapped: gSDE's held exploration matrices push the car up the hill, where a Gaussian drawn anew each step learns to
    stand still (return about 0). Seeds 0-4 here at this budget (AMD EPYC): training return 92 on every seed."""
    argv = ["anakin", "--preset", "mountaincar-continuous-ppo-sde", "--num-updates", "244", "--updates-per-call", "61"]
    argv += ["--eval-every", "244", "--eval-episodes", "32", "--num-seeds", "3", "--cpu-devices", "2", "--no-log-dir"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("XLA_FLAGS", None)  # --cpu-devices sets the count
    probe = "import sys; from podracer.cli import command; sys.exit(command.main(sys.argv[1:]))"
    run = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    finals = [float(run.stdout.split(f"seed {i}: final sampled evaluation return ")[1].split()[0]) for i in range(3)]
    # The goal pays 100 less the actions' cost; standing still scores about 0, random play about -33.
    assert sum(f > 80 for f in finals) >= 2, run.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.suite("gymnax")
def test_sac_learns_pendulum_on_two_of_three_seeds(optimized_xla):
    env = envs.make("gymnax:Pendulum-v1")
    agent = agents.make("sac", env.spec(), hidden_sizes=(64, 64), learning_rate=1e-3, replay_ratio=32.0)
    returns = _train_seeds(env, agent, num_seeds=3, num_envs=8, rollout_length=8, num_updates=400, learning_rate=1e-3)
    assert (returns > -400).sum() >= 2 and returns.mean() > -700, returns


@pytest.mark.slow
@pytest.mark.suite("gymnax")
@pytest.mark.parametrize(
    "options",
    [
        {},  # TD3
        # FastTD3's options: a categorical critic, no target actor, fast targets, a ladder of exploration noise
        dict(
            num_atoms=101,
            v_min=-1000.0,
            v_max=0.0,
            target_actor=False,
            target_tau=0.1,
            exploration_noise_min=0.01,
            exploration_noise_max=0.4,
        ),
    ],
    ids=["td3", "fasttd3"],
)
def test_td3_learns_pendulum_on_four_of_five_seeds(options, optimized_xla):
    env = envs.make("gymnax:Pendulum-v1")
    agent = agents.make("td3", env.spec(), hidden_sizes=(64, 64), learning_rate=1e-3, replay_ratio=32.0, **options)
    returns = _train_seeds(env, agent, num_seeds=5, num_envs=8, rollout_length=8, num_updates=400)
    # Random play scores about -1,200. Seeds 0-4 here (AMD EPYC): TD3 -116 to -184; FastTD3's options -105 to -175.
    assert (returns > -400).sum() >= 4 and np.median(returns) > -300, returns


@pytest.mark.parametrize(
    "agent", ["sac", pytest.param("td3", marks=pytest.mark.slow)]
)  # Gaussian PPO's acts the same way (the README's HalfCheetah run)
def test_sebulba_trains_continuous_agents_on_host_environments(agent):
    from podracer.run import compose
    from podracer.core.agents import PPOConfig, SACConfig, TD3Config
    from podracer.run.config import SebulbaConfig

    replay = {"min_replay_size": 128, "batch_size": 32}
    agent_config = {
        "ppo": lambda: PPOConfig(),
        "sac": lambda: SACConfig(**replay).replace(hidden_sizes=(16,)),
        "td3": lambda: TD3Config(**replay, num_atoms=11, v_min=-100.0, v_max=0.0).replace(hidden_sizes=(16,)),
    }[agent]()
    result = compose.train_sebulba(
        SebulbaConfig(
            env="gymnasium:Pendulum-v1",
            agent=agent_config,
            total_env_steps=2_048,
            num_envs_per_actor=8,
            rollout_length=16,
            actor_devices=(0,),
            learner_devices=(1,),
            log_every=8,
        )
    )
    last = result.history[-1]
    assert last["env_steps"] >= 2_048 and np.isfinite(last["episode_return"]) and -2_000 < last["episode_return"] < 0
    if agent in ("sac", "td3"):
        assert last["sgd_steps"] > 0


def test_a_recurrent_gaussian_policy_carries_its_core_and_acts_in_a_box():
    agent = agents.make("a2c", VECTOR_BOX, core="lstm", core_size=8, hidden_sizes=(8,))
    observation, first = jnp.zeros((4, 3)), jnp.ones(4, bool)
    params = agent.init(jax.random.key(0), observation)
    action, extras, state = agent.act(params, observation, jax.random.key(1), agent.initial_state(4), first)
    assert action.shape == (4, 2) and extras["mean"].shape == (4, 2) and state[0].shape == (4, 8)
    assert "core_state" in extras


class Pairs:
    """A contextual bandit with two-part actions (multi-discrete, ``nvec`` (3, 4)): each step shows a target pair
    ``(a, b)``, one-hot, and pays 0.5 for each part of the action that matches it. Four steps an episode, then a
    truncation. Random play earns 0.5 / 3 + 0.5 / 4 a step; matching both parts, 1."""

    def spec(self):
        return EnvSpec(jax.ShapeDtypeStruct((7,), jnp.float32), nvec=(3, 4))

    def _observe(self, key, t):
        target = jnp.stack(
            [jax.random.randint(key, (), 0, 3), jax.random.randint(jax.random.fold_in(key, 1), (), 0, 4)]
        )
        observation = jnp.concatenate([jax.nn.one_hot(target[0], 3), jax.nn.one_hot(target[1], 4)])
        return (jax.random.fold_in(key, 2), target, t), observation

    def reset(self, key):
        state, observation = self._observe(key, jnp.zeros((), jnp.int32))
        return state, envs.first_timestep(observation)

    def step(self, state, action):
        key, target, t = state
        reward = 0.5 * jnp.sum(action == target).astype(jnp.float32)
        state, observation = self._observe(key, t + 1)
        return state, envs.base.TimeStep(observation, reward, jnp.ones((), jnp.float32), t + 1 >= 4)


def test_multi_discrete_log_probabilities_entropy_and_greedy_choice_are_the_joint_distributions():
    rng = np.random.default_rng(2)
    logits = (jnp.asarray(rng.normal(size=(5, 3)), jnp.float32), jnp.asarray(rng.normal(size=(5, 4)), jnp.float32))
    actions = jnp.stack([jnp.asarray(rng.integers(0, 3, 5)), jnp.asarray(rng.integers(0, 4, 5))], axis=-1)
    log_prob, entropy = policy_terms(logits, actions)
    # The joint distribution over all 12 pairs, written out.
    joint = jax.nn.softmax(logits[0])[:, :, None] * jax.nn.softmax(logits[1])[:, None, :]  # [5, 3, 4]
    np.testing.assert_allclose(log_prob, np.log(joint[np.arange(5), actions[:, 0], actions[:, 1]]), rtol=1e-5)
    np.testing.assert_allclose(entropy, -np.sum(joint * np.log(joint), axis=(1, 2)), rtol=1e-5)
    extras = {"logits": logits}
    np.testing.assert_array_equal(
        greedy_action(extras), np.stack(np.unravel_index(np.asarray(joint).reshape(5, -1).argmax(-1), (3, 4)), axis=-1)
    )
    # Sampling: int32 [B, 2], each part inside its range, with the joint's frequencies.
    batch = tuple(jnp.broadcast_to(x[0], (4096, x.shape[-1])) for x in logits)
    action, extras = jax.jit(sample_policy)(batch, jax.random.key(1))
    assert action.shape == (4096, 2) and action.dtype == jnp.int32 and extras["logits"] is not None
    counts = np.bincount(np.asarray(action[:, 0] * 4 + action[:, 1]), minlength=12) / 4096
    np.testing.assert_allclose(counts, np.asarray(joint[0]).reshape(-1), atol=0.03)
    # The policy head gives one logit vector per part.
    head = networks.PolicyHead((3, 4))
    outputs = head.apply(head.init(jax.random.key(0), jnp.zeros((2, 5))), jnp.zeros((2, 5)))
    assert [x.shape for x in outputs] == [(2, 3), (2, 4)]


def test_multi_discrete_ppo_learns_both_parts_on_two_of_three_seeds():
    env = Pairs()
    agent = agents.make("ppo", env.spec(), hidden_sizes=(32,), entropy_coef=0.001, num_epochs=2, num_minibatches=2)
    returns = _train_seeds(env, agent, num_seeds=3, num_envs=16, rollout_length=8, num_updates=100, learning_rate=3e-3)
    # Random play earns about 1.2 an episode; matching one part and guessing the other, about 2.5; both, 4. (Here
    # every seed reached 4.0 within 100 updates.)
    assert (returns > 3.5).sum() >= 2 and returns.mean() > 2.5, returns


@pytest.mark.parametrize("agent", ["impala"])  # PPO's multi-discrete actions take the same path (learning, above)
def test_sebulba_trains_multi_discrete_agents(agent, monkeypatch):
    from podracer.run import compose
    from podracer.core.agents import IMPALAConfig
    from podracer.run.config import SebulbaConfig

    monkeypatch.setitem(envs._JAX_ENVS, "pairs", None)  # removed again after the test
    envs.register("pairs", Pairs)
    result = compose.train_sebulba(
        SebulbaConfig(
            env="jax:pairs",
            agent=IMPALAConfig().replace(hidden_sizes=(32,), learning_rate=3e-3, entropy_coef=0.001),
            total_env_steps=16_384,
            num_envs_per_actor=16,
            rollout_length=8,
            actor_devices=(0,),
            learner_devices=(1,),
            log_every=16,
        )
    )
    history = result.history
    # Random play earns about 1.2 an episode (s.d. of a record's mean about 0.1). IMPALA's sampled returns rose to
    # 1.5 to 1.8 here over these 128 batches (its greedy policy learns faster than its sampled one; in Anakin its
    # seeds' greedy returns reached 3.3 to 4.0 after 3,000 batches).
    assert history[-1]["env_steps"] >= 16_384 and history[-1]["episode_return"] > 1.35, history


def test_a_state_dependent_standard_deviation_is_a_softplus_head_of_the_state():
    """``--policy-std state`` (gymnax-blines' Gaussian policy): the standard deviation is softplus of a linear head of
    the policy features plus 0.001, so it differs between states, where ``parameter``'s is one learned vector."""
    from podracer.core.agents.ppo import PPOConfig

    obs = jax.random.normal(jax.random.key(1), (6, 3))
    state_net = agents.make_network(VECTOR_BOX, PPOConfig().replace(hidden_sizes=(16,), policy_std="state"))
    variables = state_net.init(jax.random.key(0), obs)
    head = variables["params"]["policy_head"]
    assert set(head) == {"Dense_0", "scale"}
    policy, _ = state_net.apply(variables, obs)
    torso = variables["params"]["policy_torso"]["Dense_0"]
    features = jnp.tanh(obs @ torso["kernel"] + torso["bias"])
    expected = jax.nn.softplus(features @ head["scale"]["kernel"] + head["scale"]["bias"]) + networks.MIN_STD
    np.testing.assert_allclose(jnp.exp(policy["log_std"]), expected, rtol=1e-5)
    assert policy["log_std"].shape == (6, 2) and float(jnp.std(policy["log_std"][:, 0])) > 0
    shared = agents.make_network(VECTOR_BOX, PPOConfig().replace(hidden_sizes=(16,)))
    shared_variables = shared.init(jax.random.key(0), obs)
    assert set(shared_variables["params"]["policy_head"]) == {"Dense_0", "log_std"}
    np.testing.assert_allclose(jnp.std(shared.apply(shared_variables, obs)[0]["log_std"], axis=0), 0.0)
    with pytest.raises(
        ValueError, match=r"^--policy-std: unknown choice 'tanh'; choose one of parameter, state, sde\.$"
    ):
        PPOConfig().replace(policy_std="tanh")


def test_a_gaussian_in_the_environments_units_is_mapped_onto_the_unit_box_the_wrappers_rescale():
    """``--policy-units env`` (gymnax-blines', PureJaxRL's and CleanRL's Gaussian policies): the same parameters give
    the Gaussian over the environment's units, returned on [-1, 1]: the wrappers' rescaling of its mean is the
    network's raw mean in the environment's units (clipped to the bounds), its standard deviation the raw one over
    the half-range; the
    policy's log-probability ratios are those of the Gaussian in the environment's units."""
    from podracer.core.agents.ppo import PPOConfig
    from podracer.core.envs.base import to_box

    obs = jax.random.normal(jax.random.key(1), (6, 3))
    for std in ("parameter", "state"):
        config = PPOConfig().replace(hidden_sizes=(16,), policy_std=std)
        unit = agents.make_network(VECTOR_BOX, config)
        env = agents.make_network(VECTOR_BOX, config.replace(policy_units="env"))
        variables = unit.init(jax.random.key(0), obs)
        raw, mapped = unit.apply(variables, obs)[0], env.apply(variables, obs)[0]  # the same parameters
        low, high = np.array(VECTOR_BOX.box.low), np.array(VECTOR_BOX.box.high)
        half = (high - low) / 2
        in_box = np.clip(raw["mean"], low, high)  # acting in the environment's units, clipped to its bounds
        np.testing.assert_allclose(to_box(VECTOR_BOX.box, mapped["mean"]), in_box, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.exp(mapped["log_std"]), np.exp(raw["log_std"]) / half, rtol=1e-5)
        a_env, b_env = raw["mean"] + 0.3, raw["mean"] - 0.1  # two actions in the environment's units
        a_unit, b_unit = ((x - (low + half)) / half for x in (a_env, b_env))

        def log_prob(policy, action):
            z = (action - policy["mean"]) / jnp.exp(policy["log_std"])
            return jnp.sum(-0.5 * z**2 - policy["log_std"], axis=-1)

        np.testing.assert_allclose(
            log_prob(mapped, a_unit) - log_prob(mapped, b_unit), log_prob(raw, a_env) - log_prob(raw, b_env), rtol=1e-4
        )
    with pytest.raises(ValueError, match=r"^--policy-units: unknown choice 'torque'; choose one of unit, env\.$"):
        PPOConfig().replace(policy_units="torque")
