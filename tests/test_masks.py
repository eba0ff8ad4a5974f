"""Legal-action masks: no agent, in either mode, ever picks an illegal action; losses and Q targets use legal ones."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs
from podracer import anakin
from podracer.core.agents import A2CConfig, DQNConfig, IMPALAConfig, PPOConfig, PQNConfig, R2D2Config
from podracer.core.agents.losses import policy_terms
from podracer.run.config import AnakinConfig, SebulbaConfig
from podracer.core.types import EnvSpec
from podracer.core.envs.base import first_timestep, step_timestep
from podracer.run.compose import train_anakin, train_sebulba

LENGTH = 10  # steps per episode; every legal action earns 1, an illegal one -1


class LegalMoves:
    """Each step a random half of the actions is legal (at least one); the observation is the mask itself.

    An episode of ``LENGTH`` steps returns exactly ``LENGTH`` when every action taken was legal, so a logged return
    below it proves an illegal action. ``nvec`` makes the actions multi-discrete, one mask per entry.
    """

    def __init__(self, num_actions=6, nvec=None):
        self.num_actions, self.nvec = num_actions, nvec

    def spec(self):
        sizes = self.nvec or (self.num_actions,)
        observation = jax.ShapeDtypeStruct((sum(sizes),), jnp.float32)
        if self.nvec:
            return EnvSpec(observation, nvec=self.nvec, action_mask=True)
        return EnvSpec(observation, num_actions=self.num_actions, action_mask=True)

    def _mask(self, key):
        sizes = self.nvec or (self.num_actions,)
        masks = []
        for n, k in zip(sizes, jax.random.split(key, len(sizes))):
            bits_key, one_key = jax.random.split(k)
            one = jnp.arange(n) == jax.random.randint(one_key, (), 0, n)
            masks.append(jax.random.bernoulli(bits_key, 0.5, (n,)) | one)
        return tuple(masks) if self.nvec else masks[0]

    def _observe(self, mask):
        return jnp.concatenate([m.astype(jnp.float32) for m in jax.tree.leaves(mask)])

    def reset(self, key):
        key, mask_key = jax.random.split(key)
        mask = self._mask(mask_key)
        return (key, jnp.zeros((), jnp.int32), mask), first_timestep(self._observe(mask), mask)

    def step(self, state, action):
        key, t, mask = state
        if self.nvec:
            legal = jnp.all(jnp.stack([m[a] for m, a in zip(mask, action)]))
        else:
            legal = mask[action]
        key, mask_key = jax.random.split(key)
        mask, t = self._mask(mask_key), t + 1
        reward = jnp.where(legal, 1.0, -1.0)
        return (key, t, mask), step_timestep(self._observe(mask), reward, t >= LENGTH, False, mask)


@pytest.fixture(autouse=True)
def registered():
    """The test tasks, registered for each test and removed after it (other tests list the registry)."""
    envs.register("legal-moves", LegalMoves)
    envs.register("legal-moves-multi", lambda: LegalMoves(nvec=(3, 4)))
    yield
    for name in ("legal-moves", "legal-moves-multi"):
        envs._JAX_ENVS.pop(name)


SMALL = {
    "a2c": A2CConfig().replace(hidden_sizes=(16,)),
    "ppo": PPOConfig(num_epochs=1, num_minibatches=2).replace(hidden_sizes=(16,)),
    "impala": IMPALAConfig().replace(hidden_sizes=(16,)),
    "dqn": DQNConfig(batch_size=16, min_replay_size=32, replay_capacity=256, epsilon=1.0, epsilon_alpha=0.0).replace(
        hidden_sizes=(16,)
    ),  # every action a random one: the mask alone keeps them legal
    "r2d2": R2D2Config(
        batch_size=4, min_replay_size=8, replay_capacity=64, burn_in=2, epsilon=1.0, epsilon_alpha=0.0
    ).replace(hidden_sizes=(16,), core_size=8),
    "pqn": PQNConfig(num_minibatches=2, epsilon_end=1.0).replace(hidden_sizes=(16,)),  # every action a random one
}


def _returns(history):
    return [
        record["episode_return"] for record in history if record.get("episodes", 1) > 0 and "episode_return" in record
    ]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_no_agent_takes_an_illegal_action_in_anakin(name, devices):
    config = AnakinConfig(
        env="legal-moves",
        agent=SMALL[name],
        num_envs_per_device=4,
        rollout_length=LENGTH,
        num_updates=6,
        updates_per_call=3,
    )
    result = train_anakin(config)
    returns = _returns(result.history)
    assert returns and all(r == LENGTH for r in returns), returns  # any illegal action would cost 2
    assert np.isfinite(result.history[-1]["loss"])


def test_multi_discrete_masks_hold_for_every_entry(devices):
    config = AnakinConfig(
        env="legal-moves-multi",
        agent=SMALL["ppo"],
        num_envs_per_device=4,
        rollout_length=LENGTH,
        num_updates=4,
        updates_per_call=2,
    )
    returns = _returns(train_anakin(config).history)
    assert returns and all(r == LENGTH for r in returns), returns


def test_no_agent_takes_an_illegal_action_in_sebulba(devices):
    """The actor threads pass the mask to acting; the learner's replay keeps it (every agent's own use of it is
    Anakin's test above: the agents are the same objects in both modes)."""
    config = SebulbaConfig(
        env="jax:legal-moves",
        agent=SMALL["dqn"],
        num_envs_per_actor=8,
        rollout_length=LENGTH,
        total_env_steps=8 * LENGTH * 6,
        log_every=2,
        actor_devices=(0,),
        learner_devices=(1, 2),
    )
    returns = _returns(train_sebulba(config).history)
    assert returns and all(r == LENGTH for r in returns), returns


@pytest.mark.parametrize("name", ["ppo", "dqn"])
def test_greedy_play_is_legal_when_the_best_scored_action_is_not(name):
    """Greedy evaluation takes the best legal action even where the network scores an illegal one highest."""
    env = LegalMoves()
    agent = agents.make(SMALL[name], env.spec())
    evaluate = jax.jit(anakin.make_evaluate(env, agent, num_episodes=64))
    params = agent.init(jax.random.key(1), jnp.zeros((1, 6)))
    returns = evaluate(params, jax.random.key(2))
    np.testing.assert_array_equal(np.asarray(returns), LENGTH)


def test_masked_log_probabilities_and_entropy_are_those_over_legal_actions():
    logits = jnp.array([[2.0, -1.0, 0.5, 3.0], [0.0, 1.0, 2.0, 3.0]])
    mask = jnp.array([[True, False, True, False], [False, False, False, True]])
    actions = jnp.array([2, 3])
    log_prob, entropy = policy_terms(logits, actions, mask)
    legal = jax.nn.log_softmax(jnp.array([2.0, 0.5]))  # the first row's legal actions alone
    np.testing.assert_allclose(log_prob, [legal[1], 0.0], atol=1e-6)
    np.testing.assert_allclose(entropy, [-np.sum(np.exp(legal) * legal), 0.0], atol=1e-6)
    # Illegal logits do not move the result, and carry no gradient.
    grads = jax.grad(lambda x: jnp.sum(sum(policy_terms(x, actions, mask))))(logits)
    np.testing.assert_array_equal(np.asarray(grads)[~np.asarray(mask)], 0.0)
    assert np.all(np.isfinite(np.asarray(grads)))
    # Multi-discrete: entries independent, each with its own mask.
    both = policy_terms(
        (logits, logits[:, :3]),
        jnp.stack([actions, jnp.array([0, 2])], -1),
        (mask, jnp.array([[True, True, False], [False, False, True]])),
    )
    second = jax.nn.log_softmax(jnp.array([2.0, -1.0]))
    np.testing.assert_allclose(both[0], [legal[1] + second[0], 0.0], atol=1e-6)


def test_sampling_never_picks_an_illegal_action():
    from podracer.core.agents.base import sample_policy
    from podracer.core.agents.qlearning import epsilon_greedy

    logits = jnp.array([5.0, 0.0, 9.0, -2.0, 1.0])
    mask = jnp.array([False, True, False, True, True])
    keys = jax.random.split(jax.random.key(0), 4000)
    sampled = jax.vmap(lambda k: sample_policy(logits, k, mask)[0])(keys)
    assert set(np.unique(np.asarray(sampled))) == {1, 3, 4}  # every legal action, no illegal one
    explored = epsilon_greedy(
        jnp.broadcast_to(logits, (4000, 5)), jax.random.key(1), 1.0, 0.0, jnp.broadcast_to(mask, (4000, 5))
    )
    assert set(np.unique(np.asarray(explored))) == {1, 3, 4}
    greedy = epsilon_greedy(
        jnp.broadcast_to(logits, (8, 5)), jax.random.key(1), 0.0, 0.0, jnp.broadcast_to(mask, (8, 5))
    )
    np.testing.assert_array_equal(greedy, 4)  # the best legal action, not 2 (illegal, scored 9)


def test_q_targets_take_the_max_over_legal_actions():
    """DQN's double-Q target bootstraps from the best legal action of the next observation, not the best one."""
    import rlax

    from podracer.core.networks import QNetwork

    config = DQNConfig(huber_delta=100.0).replace(hidden_sizes=(8,))  # quadratic: loss = td^2 / 2
    spec = LegalMoves(num_actions=4).spec()
    agent = agents.make(config, spec)
    network = QNetwork(4, 1, config.network.hidden_sizes)
    params = agent.init(jax.random.key(0), jnp.zeros((1, 4)))
    observations = jax.random.normal(jax.random.key(1), (64, 4))
    q = network.apply(params, observations)
    best = np.asarray(jnp.argmax(q, -1))
    mask = np.ones((64, 4), bool)
    mask[np.arange(64), best] = False  # the best action is illegal everywhere
    batch = {
        "observation": observations,
        "action": jnp.zeros((64,), jnp.int32),
        "reward": jnp.zeros((64,)),
        "discount": jnp.ones((64,)),
        "next_observation": observations,
        "valid": jnp.ones((64,), bool),
        "next_action_mask": jnp.asarray(mask),
    }
    loss, _ = agent.replay.loss(params, params, batch, jnp.ones((64,)), jax.random.key(0))
    legal_max = jnp.max(jnp.where(mask, q, -jnp.inf), -1)
    expected = jnp.mean(rlax.huber_loss(legal_max - q[:, 0], 100.0))
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    unmasked, _ = agent.replay.loss(
        params, params, {k: v for k, v in batch.items() if k != "next_action_mask"}, jnp.ones((64,)), jax.random.key(0)
    )
    assert not np.isclose(unmasked, loss)  # the mask changed the target


def test_gymnasium_info_masks_reach_the_time_steps():
    """Taxi's info carries "action_mask": the spec declares it and every time step carries the batch's masks."""
    from podracer.run.hostenvs.gymnasium import GymnasiumEnv

    env = GymnasiumEnv("Taxi-v4", 4)
    try:
        assert env.spec().action_mask and env.spec().num_actions == 6
        timestep = env.reset()
        for _ in range(5):
            assert timestep.action_mask.shape == (4, 6) and timestep.action_mask.dtype == bool
            assert timestep.action_mask.any(axis=1).all() and not timestep.action_mask.all()
            legal = timestep.action_mask.argmax(axis=1)
            timestep = env.step(legal.astype(np.int32))
    finally:
        env.close()


def test_a_mask_the_spec_does_not_declare_is_refused_in_one_line():
    class Undeclared(LegalMoves):
        def spec(self):
            return super().spec()._replace(action_mask=False)

    agent = agents.make(SMALL["a2c"], Undeclared().spec())
    import optax

    with pytest.raises(
        ValueError,
        match=r"^The environment's time steps carry an action_mask but its spec does not "
        r"declare one: set EnvSpec\(action_mask=True\)\.$",
    ):
        anakin.init_state(Undeclared(), agent, optax.adam(1e-3), jax.random.key(0), 2)
