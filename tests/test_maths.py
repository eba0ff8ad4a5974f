"""The hand-written maths against values worked out by hand, each run with and without ``jit`` (chex variants, as
rlax tests its own), and the rank checks that refuse arrays of the wrong shape on entry."""

import functools

import chex
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized

from podracer.core import normalize
from podracer.core.agents import losses
from podracer.core.agents.qlearning import n_step_bootstrap, n_step_targets, q_learning_td
from podracer.core.types import TimeStep, Trajectory


def _trajectory(reward, discount, last) -> Trajectory:
    """A one-environment-per-column trajectory of the given time steps (observations and actions are zeros)."""
    reward = jnp.asarray(reward, jnp.float32)
    timestep = TimeStep(
        jnp.zeros(reward.shape + (1,)), reward, jnp.asarray(discount, jnp.float32), jnp.asarray(last, bool)
    )
    return Trajectory(timestep, jnp.zeros(reward.shape, jnp.int32), {}, ())


# One episode ends at entry 2 (terminated: discount 0); entry 3 starts the next.
REWARD, DISCOUNT, LAST = [0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 0.0, 1.0], [False, False, True, False]


class TransitionsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_rewards_discounts_and_masks_of_one_trajectory(self):
        tr = self.variant(functools.partial(losses.transitions, discount=0.9))(_trajectory(REWARD, DISCOUNT, LAST))
        np.testing.assert_allclose(tr.r_t, [1.0, 2.0, 3.0])
        np.testing.assert_allclose(tr.discount_t, [0.9, 0.0, 0.9])
        np.testing.assert_allclose(tr.continues_t, [1.0, 0.0, 1.0])  # no return looks past entry 2
        np.testing.assert_allclose(tr.mask_t, [1.0, 1.0, 0.0])  # 2 -> 3 is the reset, in no episode

    def test_time_steps_of_unequal_shapes_are_refused(self):
        bad = _trajectory(REWARD, DISCOUNT, LAST)
        bad = bad._replace(timestep=bad.timestep._replace(discount=jnp.ones(5)))
        with pytest.raises(AssertionError):
            losses.transitions(bad, 0.9)


class QLearningTest(chex.TestCase):
    # two transitions, three actions; the online network's values at o_t select, the target network's value
    Q_TM1 = [[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]]
    Q_T_TARGET = [[10.0, 20.0, 30.0], [4.0, 5.0, 6.0]]
    Q_T_ONLINE = [[3.0, 1.0, 2.0], [0.0, 9.0, 1.0]]

    def _td(self, selector, legal=None):
        td = self.variant(q_learning_td)
        f = functools.partial(jnp.asarray, dtype=jnp.float32)
        legal = None if legal is None else jnp.asarray(legal)
        return td(
            f(self.Q_TM1), jnp.array([2, 0]), f([1.0, -1.0]), f([0.9, 0.0]), f(self.Q_T_TARGET), f(selector), legal
        )

    @chex.variants(with_jit=True, without_jit=True)
    def test_double_q_values_the_online_choice_with_the_target_network(self):
        # row 0: online picks action 0, target values it 10: 1 + 0.9 * 10 - q_tm1[2] = 10 - 3 = 7
        # row 1: terminal (discount 0): -1 - q_tm1[0] = -1.5
        np.testing.assert_allclose(self._td(self.Q_T_ONLINE), [7.0, -1.5], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_dqn_max_and_illegal_actions_never_bootstrap(self):
        np.testing.assert_allclose(self._td(self.Q_T_TARGET), [1 + 0.9 * 30 - 3, -1.5], rtol=1e-6)
        # action 2 illegal at o_t in row 0: the max over legal actions is 20
        legal = [[True, True, False], [True, True, True]]
        np.testing.assert_allclose(self._td(self.Q_T_TARGET, legal), [1 + 0.9 * 20 - 3, -1.5], rtol=1e-6)
        np.testing.assert_allclose(
            self._td(self.Q_T_ONLINE, [[False, True, True], [True] * 3]), [1 + 0.9 * 30 - 3, -1.5]
        )

    def test_values_of_another_rank_are_refused(self):
        with pytest.raises(AssertionError):
            q_learning_td(jnp.zeros(3), jnp.zeros(1, jnp.int32), jnp.zeros(1), jnp.zeros(1), jnp.zeros(3), jnp.zeros(3))


class NStepTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_sums_stop_at_the_episode_and_the_trajectory_end(self):
        bootstrap = self.variant(functools.partial(n_step_bootstrap, n=2))
        reward, discount, index = bootstrap(
            jnp.array([1.0, 2.0, 3.0]), jnp.array([0.9, 0.0, 0.9]), jnp.array([1.0, 0.0, 1.0])
        )
        # t=0: 1 + 0.9 * 2, then the episode ends (discount 0); t=1: its last step; t=2: one step left.
        np.testing.assert_allclose(reward, [2.8, 2.0, 3.0], rtol=1e-6)
        np.testing.assert_allclose(discount, [0.0, 0.0, 0.9], rtol=1e-6)
        np.testing.assert_array_equal(index, [2, 2, 3])

    @chex.variants(with_jit=True, without_jit=True)
    def test_a_batch_is_its_columns_one_by_one(self):
        batch = _trajectory(
            np.stack([REWARD, REWARD[::-1]], 1), np.stack([DISCOUNT, [1.0] * 4], 1), np.stack([LAST, [False] * 4], 1)
        )
        reward, discount, index, mask = self.variant(functools.partial(n_step_targets, n=2, discount=0.9))(batch)
        np.testing.assert_allclose(reward[:, 0], [2.8, 2.0, 3.0], rtol=1e-6)
        np.testing.assert_allclose(reward[:, 1], [2 + 0.9 * 1, 1 + 0.9 * 0, 0.0], rtol=1e-6)
        np.testing.assert_allclose(discount[:, 1], [0.81, 0.81, 0.9], rtol=1e-6)
        np.testing.assert_array_equal(index[:, 1], [2, 3, 3])
        np.testing.assert_allclose(mask[:, 0], [1.0, 1.0, 0.0])

    def test_a_batch_passed_as_one_trajectory_is_refused(self):
        with pytest.raises(AssertionError):
            n_step_bootstrap(jnp.ones((3, 2)), jnp.ones((3, 2)), jnp.ones((3, 2)), n=2)


class PolicyLossTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_the_clipped_surrogate_takes_the_pessimistic_side(self):
        surrogate = self.variant(functools.partial(losses.clipped_surrogate, clip_epsilon=0.2))
        loss, ratio, log_ratio = surrogate(
            jnp.log(jnp.array([1.5, 0.5])), jnp.zeros(2), jnp.array([2.0, -1.0]), jnp.ones(2)
        )
        # min(1.5 * 2, 1.2 * 2) = 2.4 and min(0.5 * -1, 0.8 * -1) = -0.8: the loss is -(2.4 - 0.8) / 2.
        np.testing.assert_allclose(loss, -0.8, rtol=1e-6)
        np.testing.assert_allclose(ratio, [1.5, 0.5], rtol=1e-6)
        np.testing.assert_allclose(log_ratio, np.log([1.5, 0.5]), rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_the_value_loss_plain_and_clipped(self):
        plain = self.variant(losses.value_loss)
        np.testing.assert_allclose(plain(jnp.array([1.0, 3.0]), jnp.array([2.0, 2.0]), jnp.ones(2)), 0.5)
        clipped = self.variant(functools.partial(losses.value_loss, clip_epsilon=0.5))
        # Exact values, but the old values lie 1 away: clipped to 0.5 away, each errs by 0.25; 0.5 x 0.25.
        loss = clipped(jnp.array([2.0, 2.0]), jnp.array([2.0, 2.0]), jnp.ones(2), jnp.array([1.0, 3.0]))
        np.testing.assert_allclose(loss, 0.125, rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_advantages_are_standardised_over_the_masked_entries(self):
        out = self.variant(losses.normalized_advantages)(jnp.array([1.0, 3.0, 100.0]), jnp.array([1.0, 1.0, 0.0]))
        np.testing.assert_allclose(out, [-1.0, 1.0, 98.0], rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_log_probabilities_and_entropy_of_a_masked_softmax(self):
        terms = self.variant(losses.policy_terms)
        log_prob, entropy = terms(jnp.array([0.0, np.log(3.0)]), jnp.array(1))
        np.testing.assert_allclose(log_prob, np.log(0.75), rtol=1e-6)
        np.testing.assert_allclose(entropy, -(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), rtol=1e-6)
        log_prob, entropy = terms(jnp.array([0.0, np.log(3.0)]), jnp.array(0), jnp.array([True, False]))
        np.testing.assert_allclose([log_prob, entropy], [0.0, 0.0], atol=1e-6)  # one legal action: certain


class NormalizeTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.parameters(1, 2)
    def test_running_moments_equal_the_moments_of_every_batch_together(self, batches):
        rng = np.random.default_rng(0)
        data = [rng.normal(3.0, 2.0, size=(2, 3, 2)).astype(np.float32) for _ in range(batches)]
        stats = normalize.init(data[0][0], rewards=True)

        @self.variant
        def update(stats, x):
            return normalize.update(stats, x, jnp.sum(x, -1), batch_dims=2)

        for x in data:
            stats = update(stats, jnp.asarray(x))
        every = np.concatenate([x.reshape(-1, 2) for x in data])
        np.testing.assert_allclose(stats.observation.count, len(every))
        np.testing.assert_allclose(stats.observation.mean, every.mean(0), rtol=1e-5)
        np.testing.assert_allclose(stats.observation.var, every.var(0), rtol=1e-4)
        np.testing.assert_allclose(stats.discounted_return.mean, every.sum(-1).mean(), rtol=1e-5)

    def test_observations_of_another_shape_are_refused(self):
        stats = normalize.init(jnp.zeros((1, 2)))
        with pytest.raises(AssertionError):
            normalize.update(stats, jnp.zeros((2, 3, 5)), jnp.zeros((2, 3)), batch_dims=2)
