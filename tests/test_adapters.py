"""The craftax, XLand-MiniGrid, MuJoCo Playground and Jumanji adapters, against the real packages: specs, jit and
vmap, and termination kept apart from truncation on forced episode ends."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import envs
from podracer.core.envs.base import action_shape
from podracer.core.networks import choose_torso
from podracer.core.types import Box, ImageLayout


def first_ends(timesteps):
    """Per environment, the index of the first ``last`` step of ``[T, B]`` time steps and its discount."""
    last = np.asarray(timesteps.last)
    index = np.argmax(last, axis=0)
    assert last.any(axis=0).all(), "every episode was meant to end"
    return index, np.asarray(timesteps.discount)[index, np.arange(last.shape[1])]


def play(env, key, actions):
    """The time steps of ``env`` under ``actions`` ``[T, B, ...]``: B environments reset from ``key``, unwrapped
    (no reset after an episode's end), in one jitted scan."""

    def run(key):
        state, first = jax.vmap(env.reset)(jax.random.split(key, actions.shape[1]))
        return first, jax.lax.scan(lambda s, a: jax.vmap(env.step)(s, a), state, actions)[1]

    return jax.jit(run)(key)


def test_craftax_symbolic_and_pixels():
    pytest.importorskip("craftax")
    from podracer.core.envs.craftax import CraftaxEnv

    pixels = envs.make("craftax:Craftax-Classic-Pixels-v1").spec()
    assert pixels.observation.shape == (63, 63, 3) and pixels.num_actions == 17
    assert pixels.image == ImageLayout(-1, 0.0, 1.0)
    assert choose_torso("auto", 3, pixels.image, pixels.observation.shape) == "impala"  # too big for the board torso

    base = CraftaxEnv("Craftax-Classic-Symbolic-v1")
    env = CraftaxEnv("Craftax-Classic-Symbolic-v1", env=base.env, params=base.params.replace(max_timesteps=3))
    spec = env.spec()
    assert spec.observation.shape == (1345,) and spec.observation.dtype == jnp.float32 and spec.num_actions == 17

    def run(key):  # environment 0 is killed before its first step; environment 1 lives to the time limit
        state, first = jax.vmap(env.reset)(jax.random.split(key, 2))
        health = state.env_state.player_health
        state = state._replace(env_state=state.env_state.replace(player_health=health.at[0].set(0)))
        noop = jnp.zeros(2, jnp.int32)
        return first, jax.lax.scan(lambda s, _: jax.vmap(env.step)(s, noop), state, None, length=3)[1]

    first, timesteps = jax.jit(run)(jax.random.key(0))
    assert first.observation.shape == (2, 1345) and not first.last.any()
    index, discount = first_ends(timesteps)
    assert index.tolist() == [0, 2] and discount.tolist() == [0.0, 1.0]
    with pytest.raises(
        ValueError,
        match=r"^--env craftax:Craftax-Clasic-Symbolic: unknown craftax environment\. Did "
        r"you mean craftax:Craftax-Classic-Symbolic-v1",
    ):
        envs.make("craftax:Craftax-Clasic-Symbolic")


def test_xminigrid_one_hot_views_and_episode_ends():
    pytest.importorskip("xminigrid")
    env = envs.make("xminigrid:MiniGrid-Empty-5x5", max_steps=12)
    spec = env.spec()
    assert spec.observation.shape == (7, 7, 25) and spec.num_actions == 6 and spec.image == ImageLayout(-1, 0.0, 1.0)
    assert choose_torso("auto", 3, spec.image, spec.observation.shape) == "board"
    # Random walks in the 3 x 3 room: some reach the goal (terminated), the others hit max_steps (truncated).
    actions = jax.random.randint(jax.random.key(1), (12, 32), 0, 3)  # forward, left, right
    first, timesteps = play(env, jax.random.key(0), actions)
    assert first.observation.shape == (32, 7, 7, 25)
    np.testing.assert_array_equal(np.asarray(first.observation).sum(-1), 2.0)  # one tile and one colour per cell
    index, discount = first_ends(timesteps)
    reward = np.asarray(timesteps.reward)[index, np.arange(32)]
    goal = index < 11
    assert goal.any() and (~goal).any()
    np.testing.assert_array_equal(discount, np.where(goal, 0.0, 1.0))
    assert (reward[goal] > 0).all() and (reward[~goal] == 0).all()


def test_playground_spec_and_episode_ends():
    pytest.importorskip("mujoco_playground")
    from podracer.core.envs.playground import PlaygroundEnv

    base = envs.make("playground:CartpoleBalance")
    spec = base.spec()
    assert spec.observation.shape == (5,) and spec.box == Box((-1.0,), (1.0,)) and base.episode_length == 1000

    class Leaves:  # Playground's own task, done once the cart has moved right
        def __init__(self, env):
            self.env, self.action_size = env, env.action_size

        def reset(self, key):
            return self.env.reset(key)

        def step(self, state, action):
            state = self.env.step(state, action)
            return state.replace(done=jnp.where(state.obs[0] > 1e-3, 1.0, 0.0))

    env = PlaygroundEnv("leaves", env=Leaves(base.env), episode_length=4)
    actions = jnp.broadcast_to(jnp.array([[0.0], [1.0]]), (4, 2, 1))  # 0 stands still, 1 pushes right
    first, timesteps = play(env, jax.random.key(0), actions)
    assert first.observation.shape == (2, 5) and timesteps.reward.dtype == jnp.float32
    index, discount = first_ends(timesteps)
    assert index[0] == 3 and discount[0] == 1.0  # the time limit truncates
    assert index[1] < 3 and discount[1] == 0.0  # done terminates
    with pytest.raises(
        ValueError,
        match=r"^--env playground:CartpoleBalanse: unknown playground environment\. Did "
        r"you mean playground:CartpoleBalance",
    ):
        envs.make("playground:CartpoleBalanse")


def test_jumanji_vectors_discrete_and_multi_discrete_actions_and_episode_ends():
    pytest.importorskip("jumanji")
    spec = envs.make("jumanji:Snake-v1").spec()
    assert spec.observation.shape == (12 * 12 * 5 + 1 + 4,) and spec.num_actions == 4 and spec.nvec is None
    assert spec.action_mask  # Snake's [4] mask
    binpack = envs.make("jumanji:BinPack-v2")  # fields that are dataclasses of bounded arrays
    # BinPack's mask is joint over (space, item) pairs: one discrete choice among the 40 x 20.
    assert binpack.spec().nvec is None and binpack.spec().num_actions == 800 and binpack.spec().action_mask
    assert all(scale is not None for scale in binpack._scales)

    # Minesweeper's joint [rows, cols] mask: flat action r * 10 + c opens (r, c), whose square then turns illegal.
    minesweeper = envs.make("jumanji:Minesweeper-v0")
    state, timestep = minesweeper.reset(jax.random.key(0))
    assert timestep.action_mask.shape == (100,) and bool(timestep.action_mask.all())
    state, timestep = minesweeper.step(state, jnp.int32(3 * 10 + 7))
    assert not bool(timestep.action_mask[37]) and int(timestep.action_mask.sum()) == 99
    assert bool(state.board[3, 7] >= 0) and int((state.board >= 0).sum()) == 1  # jumanji opened row 3, column 7

    # Connector (ten agents, five moves each) keeps its time limit a truncation: discount 1.
    connector = envs.make("jumanji:Connector-v3", time_limit=3)
    spec = connector.spec()
    assert spec.nvec == (5,) * 10 and action_shape(spec) == (10,) and spec.action_mask
    first, timesteps = play(connector, jax.random.key(0), jnp.zeros((3, 4, 10), jnp.int32))  # everyone stays put
    assert len(first.action_mask) == 10 and first.action_mask[0].shape == (4, 5)  # one row per agent
    observation = np.asarray(first.observation)
    assert observation.shape == (4, 10 * 10 + 10 * 5 + 1) and observation.min() >= 0.0 and observation.max() <= 1.0
    index, discount = first_ends(timesteps)
    assert index.tolist() == [2] * 4 and discount.tolist() == [1.0] * 4

    mines = envs.make("jumanji:Minesweeper-v0")
    spec = mines.spec()
    assert spec.nvec is None and spec.num_actions == 100 and action_shape(spec) == ()
    # The board view: one plane per cell value (-1 unopened, 0-8 mines around), the mask, then num_mines and
    # step_count as constant planes; its actions are the board's cells.
    assert spec.observation.shape == (10, 10, 10 + 1 + 2) and spec.image.channel_axis == -1 and spec.cell_actions
    state, timestep = mines.reset(jax.random.key(0))
    state, timestep = mines.step(state, jnp.int32(3 * 10 + 7))
    planes = np.asarray(timestep.observation)
    board = np.asarray(state.board)
    np.testing.assert_array_equal(planes[..., :10].argmax(-1) - 1, board)  # one-hot: plane v + 1 is value v
    np.testing.assert_array_equal(planes[..., :10].sum(-1), np.ones((10, 10)))
    np.testing.assert_array_equal(planes[..., 10], board < 0)  # the mask: unopened squares
    np.testing.assert_allclose(planes[..., 11], 10 / 99)  # num_mines in [0, 99]
    np.testing.assert_allclose(planes[..., 12], 1 / 90)  # one step of at most 90
    assert not envs.make("jumanji:Game2048-v1").spec().cell_actions  # a [4] mask over moves: the flat view
    # Opening the same square twice is invalid: the episode terminates (at once, if the square was a mine).
    first, timesteps = play(mines, jax.random.key(0), jnp.zeros((2, 4), jnp.int32))
    index, discount = first_ends(timesteps)
    assert (index <= 1).all() and (discount == 0.0).all()
    with pytest.raises(
        ValueError,
        match=r"^--env jumanji:Snake: unknown jumanji environment\. Did you mean "
        r"jumanji:Snake-v1",
    ):
        envs.make("jumanji:Snake")
