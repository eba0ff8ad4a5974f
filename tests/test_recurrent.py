"""Recurrent agents: the LSTM core, its state carried by every driver, and the memory task that needs it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs
from podracer import anakin
from podracer.run import compose
from podracer.run.config import AnakinConfig
from podracer.run.hostenvs.jax_env import JaxHostEnv
from podracer.core.learner import make_optimizer
from podracer.core.networks import ObservationTorso, RecurrentNetwork, StructuredTorso, lstm_initial_state


def _network(heads="actor_critic"):
    return RecurrentNetwork(num_actions=3, torso=ObservationTorso("mlp", (8,)), core_size=5, heads=heads)


def test_unroll_equals_stepping_and_a_first_step_starts_from_the_initial_state():
    net = _network()
    t_len, batch = 6, 3
    obs = jax.random.normal(jax.random.key(0), (t_len, batch, 4))
    first = np.zeros((t_len, batch), bool)
    first[3, 0] = True  # env 0 starts an episode at step 3
    state = jax.tree.map(lambda x: x + 0.7, lstm_initial_state(batch, 5))  # mid-episode state
    params = net.init(jax.random.key(1), obs[0], first[0], state)
    (logits, values), final = net.apply(params, obs, first, state, method="unroll")
    assert logits.shape == (t_len, batch, 3) and values.shape == (t_len, batch) and final[0].shape == (batch, 5)

    carry = state
    for t in range(t_len):
        (step_logits, step_values), carry = net.apply(params, obs[t], first[t], carry)
        np.testing.assert_allclose(step_logits, logits[t], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(step_values, values[t], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(carry[1], final[1], rtol=1e-5, atol=1e-6)

    # From step 3 on, env 0 behaves as a fresh episode started there; env 1 does not.
    (fresh, _), _ = net.apply(
        params, obs[3:], np.zeros((t_len - 3, batch), bool), lstm_initial_state(batch, 5), method="unroll"
    )
    np.testing.assert_allclose(logits[3:, 0], fresh[:, 0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(logits[3:, 1], fresh[:, 1], atol=1e-4)


def test_structured_torso_shapes_and_clipping():
    env = envs.make("synthetic", num_discrete=3, vocab_size=7, num_entities=4, num_features=2)
    spec = env.spec()
    _, timestep = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 5))
    obs = timestep.observation
    assert obs["discrete"].shape == (5, 3) and obs["discrete"].dtype == jnp.int32
    assert obs["continuous"].shape == (5, 4, 2) and obs["continuous"].dtype == jnp.float32
    assert int(obs["discrete"].min()) >= 0 and int(obs["discrete"].max()) < 7 and spec.vocab_size == 7

    torso = StructuredTorso(vocab_size=7, embed_dim=6, entity_dim=10, clip=2.0, hidden_sizes=(12,))
    params = torso.init(jax.random.key(1), obs)
    assert params["params"]["Embed_0"]["embedding"].shape == (7, 6)
    assert params["params"]["Dense_0"]["kernel"].shape == (2, 10)  # per entity: features -> entity_dim
    assert params["params"]["MLP_0"]["Dense_0"]["kernel"].shape == (3 * 6 + 10, 12)  # embeddings ++ pooled
    apply = jax.jit(torso.apply)  # one compilation, not op by op for every call below
    assert apply(params, obs).shape == (5, 12)

    def out(value, entity=0):
        continuous = jnp.zeros((1, 4, 2)).at[0, entity, 0].set(value)
        return apply(params, {"discrete": jnp.zeros((1, 3), jnp.int32), "continuous": continuous})

    np.testing.assert_array_equal(out(100.0), out(2.0))  # clipped to the same value
    np.testing.assert_array_equal(out(-1e9), out(-2.0))
    assert not np.allclose(out(1.0), out(2.0))
    np.testing.assert_allclose(out(1.5, entity=0), out(1.5, entity=3), rtol=1e-6)  # max over entities: order-free

    # The full policy: structured torso, LSTM, softmax over the actions.
    agent = agents.make("a2c", spec, core="lstm", core_size=16, hidden_sizes=(12,))
    state = agent.initial_state(5)
    agent_params = jax.jit(agent.init)(jax.random.key(2), obs)
    action, extras, state = jax.jit(agent.act)(agent_params, obs, jax.random.key(3), state, jnp.ones(5, bool))
    assert action.shape == (5,) and extras["logits"].shape == (5, 8) and state[0].shape == (5, 16)
    with pytest.raises(ValueError, match=r"Structured \(dict\) observations need a recurrent agent \(core='lstm'\)\."):
        agents.make("a2c", spec)
    with pytest.raises(ValueError, match=r"--core: unknown core 'gru'; choose one of none, lstm\."):
        agents.make("a2c", spec, core="gru")


def test_anakin_rollout_stores_the_start_state_once_and_resets_it_after_last(devices):
    env = envs.make("memory", delay=2)  # episodes of 5 entries: 0-4 (last at 4), 5-9, ...
    agent = agents.make("a2c", env.spec(), core="lstm", core_size=8, hidden_sizes=(8,))
    optimizer = make_optimizer(1e-3)
    state = jax.jit(lambda key: anakin.init_state(env, agent, optimizer, key, 3))(jax.random.key(0))
    params = state.learner.params
    five, two = jax.jit(anakin.make_rollout(env, agent, 5)), jax.jit(anakin.make_rollout(env, agent, 2))
    rollout_state, trajectory, _ = five(params, state.rollout)  # entries 0-5
    assert "core_state" not in trajectory.extras and trajectory.extras["logits"].shape == (6, 3, 4)
    h = np.asarray(trajectory.actor_state[1])  # h of the state entry 0 started from, [B, 8], stored once
    assert h.shape == (3, 8) and np.all(h == 0.0)  # the very first step starts from the initial state
    assert np.asarray(trajectory.timestep.last)[4].all()
    rollout_state, trajectory, _ = two(params, rollout_state)  # entries 5-7: entry 5 starts an episode
    np.testing.assert_array_equal(np.asarray(trajectory.actor_state[1]), 0.0)
    _, trajectory, _ = two(params, rollout_state)  # entries 7-9: entry 7 is mid-episode and carries a state
    assert np.all(np.abs(np.asarray(trajectory.actor_state[1])).max(axis=-1) > 0)
    np.testing.assert_array_equal(trajectory.actor_state[1], rollout_state.extras["core_state"][1])


def _greedy_per_seed(env, agent, params, episodes=64):
    """Mean greedy return of each seed's parameters (``[device, seed, ...]``), compiled, with fixed environment
    seeds."""
    evaluate = jax.jit(jax.vmap(anakin.make_evaluate(env, agent, episodes), in_axes=(0, None)))
    return np.asarray(evaluate(jax.tree.map(lambda x: x[0], params), jax.random.key(1))).mean(axis=1)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, updates, extra", [("a2c", (300, 60), {}), ("ppo", (60, 40), {"num_minibatches": 2})], ids=["a2c", "ppo"]
)
def test_recurrent_agent_solves_the_memory_task_that_feed_forward_cannot(name, updates, extra, devices, optimized_xla):
    """Cue recall over 4 blank steps: chance is -0.5 (4 cues), recall is +1. Three seeds each: at least 2 of 3 LSTM
    seeds recall (training > 0.6, greedy > 0.8); no feed-forward seed can (greedy < -0.2 for all). PPO's recurrent
    minibatches are whole sequences (here it recalled on every seed by update 60, 0.99 training and 1.0 greedy)."""
    env = envs.make("memory")
    results = {}
    for core, num_updates in zip(("lstm", "none"), updates):
        agent = agents.make(name, env.spec(), core=core, core_size=32, hidden_sizes=(32,), **extra)
        result = anakin.run(
            anakin.anakin_plan(
                num_envs_per_device=32,
                rollout_length=16,
                num_updates=num_updates,
                updates_per_call=20,
                devices=devices[:2],
            ),
            agent._replace(optimizer=make_optimizer(3e-3)),
            anakin.init(env, agent, make_optimizer(3e-3), anakin.seed_keys(0, 3), 32, devices[:2], rollout_length=16),
            env=env,
        )
        results[core] = (
            np.array(result.history[-1]["episode_return_per_seed"]),
            _greedy_per_seed(env, agent, result.state.learner.params),
        )
    training, greedy = results["lstm"]
    assert np.sum((training > 0.6) & (greedy > 0.8)) >= 2, results
    training, greedy = results["none"]
    assert np.all(training < -0.3) and np.all(greedy < -0.2), results


@pytest.mark.slow
def test_r2d2_stores_aligned_sequences_and_learns_the_memory_task(devices, optimized_xla):
    env = envs.make("memory")
    agent = agents.make(
        "r2d2",
        env.spec(),
        core_size=32,
        hidden_sizes=(32,),
        batch_size=32,
        min_replay_size=64,
        replay_capacity=2000,
        discount=0.99,
        replay_ratio=4.0,
        burn_in=4,
    )
    state = jax.jit(lambda key: anakin.init_state(env, agent, make_optimizer(1e-3), key, 5, rollout_length=9))(
        jax.random.key(0)
    )
    _, trajectory, _ = jax.jit(anakin.make_rollout(env, agent, 9))(state.learner.params, state.rollout)
    items, mask = agent.replay.make_items(trajectory)
    assert items["observation"].shape == (5, 10, 6) and mask.shape == (5,) and bool(mask.all())
    np.testing.assert_array_equal(items["action"][2], trajectory.action[:, 2])
    np.testing.assert_array_equal(items["core_state"][1][2], trajectory.actor_state[1][2])
    assert state.learner.extra.replay.items["observation"].shape == (2000, 10, 6)
    with pytest.raises(
        ValueError,
        match=r"R2D2 needs sequences longer than burn_in \+ 1 = 5 steps; the trajectories "
        r"have 4 \(raise --rollout-length or lower --burn-in\)\.",
    ):
        anakin.init_state(env, agent, make_optimizer(1e-3), jax.random.key(0), 5, rollout_length=3)
    with pytest.raises(ValueError, match=r"Agent 'r2d2' has no hyper-parameter\(s\) \['core'\]"):  # always recurrent
        agents.make("r2d2", env.spec(), core="none")

    # Three seeds in one program: at least 2 of 3 recall (training > 0.5, greedy > 0.7).
    result = anakin.run(
        anakin.anakin_plan(
            num_envs_per_device=16, rollout_length=16, num_updates=240, updates_per_call=40, devices=devices[:2]
        ),
        agent._replace(optimizer=make_optimizer(1e-3, 10.0)),
        anakin.init(env, agent, make_optimizer(1e-3, 10.0), anakin.seed_keys(0, 3), 16, devices[:2], rollout_length=16),
        env=env,
    )
    last = result.history[-1]
    training, greedy = (
        np.array(last["episode_return_per_seed"]),
        _greedy_per_seed(env, agent, result.state.learner.params),
    )
    assert np.sum((training > 0.5) & (greedy > 0.7)) >= 2, (training, greedy)
    assert abs(last["replay_ratio"] - 4.0) < 0.2


def test_jax_environments_serve_as_host_batches():
    host = JaxHostEnv(envs.make("memory", delay=1), 4, seed=3)
    first = host.reset()
    assert first.observation.shape == (4, 6) and isinstance(first.observation, np.ndarray)
    assert np.all(first.observation[:, :4].sum(axis=1) == 1)  # the cue
    cue = first.observation[:, :4].argmax(axis=1)
    host.step(np.zeros(4, np.int32))
    query = host.step(np.zeros(4, np.int32))
    assert np.all(query.observation[:, 5] == 1) and not query.last.any()
    done = host.step(cue.astype(np.int32))
    assert done.last.all() and np.all(done.reward == 1.0) and np.all(host.stats.episode_return == 1.0)
    assert np.all(host.step(np.zeros(4, np.int32)).reward == 0.0)  # the next episode starts
    with pytest.raises(ValueError, match=r"Expected actions of shape \(4,\), got \(3,\)\."):
        host.send(np.zeros(3, np.int32))


def test_recurrent_ppo_learns_from_whole_sequences_that_replay_what_the_actor_saw():
    """The batch keeps [T, B] sequences with their start state; unrolled from it, the learner's policy at the
    update's start is the actor's own (probability ratios of 1), on a rollout that did not start from zeros."""
    from podracer.core.agents import PPOConfig

    env = envs.make("memory")
    agent = agents.make("ppo", env.spec(), core="lstm", core_size=8, hidden_sizes=(8,), num_minibatches=2)
    state = jax.jit(lambda key: anakin.init_state(env, agent, make_optimizer(1e-3), key, 4, rollout_length=9))(
        jax.random.key(0)
    )
    rollout = jax.jit(anakin.make_rollout(env, agent, 9))
    carried, _, _ = rollout(state.learner.params, state.rollout)
    _, trajectory, _ = rollout(state.learner.params, carried)  # the second rollout starts mid-episode
    batch = agent.prepare(state.learner.params, trajectory)
    assert batch.observation.shape == (9, 4, 6) and batch.first.shape == (9, 4) and agent.minibatch_axis == 1
    assert [x.shape for x in jax.tree.leaves(batch.start_state)] == [(1, 4, 8), (1, 4, 8)]
    assert float(jnp.abs(jax.tree.leaves(batch.start_state)[0]).max()) > 0  # a real carried state
    half = jax.tree.map(lambda x: x[:, 2:], batch)  # one minibatch: sequences 2 and 3
    _, metrics = agent.loss(state.learner.params, half, jax.random.key(1))
    assert abs(float(metrics["approx_kl"])) < 1e-6 and float(metrics["clip_fraction"]) == 0.0, metrics
    with pytest.raises(
        ValueError,
        match=r"^the per-device batch of sequences \(envs per device\) = 6 is not divisible "
        r"by the 4 minibatches \(--num-minibatches\); choose a multiple of 4\.$",
    ):
        compose.train_anakin(
            AnakinConfig(
                env="memory",
                agent=PPOConfig(num_minibatches=4).replace(core="lstm"),
                num_envs_per_device=6,
                rollout_length=4,
                num_updates=1,
                updates_per_call=1,
            )
        )
