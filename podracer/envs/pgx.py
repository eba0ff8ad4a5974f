"""pgx games (``pgx:NAME``) as podracer :class:`~podracer.envs.base.Environment` s.

pgx (board games, 2048, MinAtar, ...) keeps every player's reward in ``state.rewards``, the legal moves in
``state.legal_action_mask`` and whose turn it is in ``state.current_player``; its ``step`` does not reset
(podracer's :class:`~podracer.envs.wrappers.AutoReset` starts the next episode). The agent sees pgx's
observation as float32 (a channels-last board of 0/1 planes for the board games and 2048, declared as such,
so ``--torso auto`` gives it the board torso and pictures draw it), and the legal-action mask with every time
step (``EnvSpec.action_mask``), so no agent makes an illegal move.

One-player games (2048, MinAtar) are played as they are. In a game of two or more players the agent plays one
seat, drawn at random each episode, against a built-in **opponent** that makes every other move: by default
uniformly random legal moves; any ``opponent(observation, legal_action_mask, key) -> action`` (one game, pure
JAX) instead, for example :func:`podracer.evaluate.snapshot_opponent`, a fixed earlier checkpoint of an agent. A time
step is the
agent's move followed by the opponent's replies, so its reward is the agent's own reward over both (+1 a win,
-1 a loss, 0 a draw in the board games) and the next observation is the agent's view of the board. A game that
ends on a time limit (pgx's ``truncated``) is a truncation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp

from podracer.envs.base import check_task, first_timestep, require_package, step_timestep
from podracer.types import EnvSpec, ImageLayout, TimeStep

Opponent = Callable[[chex.Array, chex.Array, chex.PRNGKey], chex.Array]


def require() -> None:
    """A one-line error naming the extra when pgx is not installed."""
    require_package("pgx", "pgx")


def names() -> list[str]:
    """pgx's games."""
    require()
    import pgx

    return sorted(pgx.available_envs())


def make(name: str, **kwargs) -> PgxEnv:
    """``pgx:NAME`` (:func:`podracer.envs.make` calls this)."""
    return PgxEnv(name, **kwargs)


def random_legal_move(observation, legal_action_mask, key) -> chex.Array:
    """The default opponent: a uniformly random legal move."""
    del observation
    return jax.random.categorical(key, jnp.where(legal_action_mask, 0.0, -jnp.inf)).astype(jnp.int32)


class PgxEnv:
    """``pgx.make(name)`` behind podracer's environment protocol (``env``: a pgx environment, used as it is;
    ``opponent``: who makes the other players' moves, :func:`random_legal_move` by default). The state is
    ``(pgx state, the agent's seat, a key)``."""

    def __init__(self, name: str, *, env=None, opponent: Opponent | None = None):
        require()
        if env is None:
            import pgx

            check_task("pgx", name, pgx.available_envs())
            env = pgx.make(name)
        self.name, self.env = name, env
        self.num_players = int(env.num_players)
        self.opponent = opponent or random_legal_move
        self.opponent_name = (
            None
            if self.num_players == 1
            else (
                "random legal moves" if opponent is None else getattr(opponent, "__name__", "an opponent of your own")
            )
        )
        probe = env.init(jax.random.key(0))
        self._obs = jax.ShapeDtypeStruct(probe.observation.shape, jnp.float32)
        self._num_actions = int(probe.legal_action_mask.shape[0])

    def spec(self) -> EnvSpec:
        image = ImageLayout(channel_axis=-1, low=0.0, high=1.0) if len(self._obs.shape) == 3 else None
        return EnvSpec(observation=self._obs, num_actions=self._num_actions, image=image, action_mask=True)

    def _replies(self, state, seat, key, reward):
        """The opponent's moves until it is the agent's turn again or the game is over; the agent's reward added."""

        def opponent_to_move(carry):
            state, _, _ = carry
            return (state.current_player != seat) & ~state.terminated & ~state.truncated

        def move(carry):
            state, key, reward = carry
            key, choose, chance = jax.random.split(key, 3)
            action = self.opponent(state.observation, state.legal_action_mask, choose)
            state = self.env.step(state, action, chance)
            return state, key, reward + state.rewards[seat]

        if self.num_players == 1:
            return state, key, reward
        return jax.lax.while_loop(opponent_to_move, move, (state, key, reward))

    def _timestep(self, state, reward=None):
        observation = state.observation.astype(jnp.float32)
        if reward is None:
            return first_timestep(observation, state.legal_action_mask)
        return step_timestep(
            observation,
            reward,
            terminated=state.terminated,
            truncated=state.truncated & ~state.terminated,
            action_mask=state.legal_action_mask,
        )

    def reset(self, key: chex.PRNGKey) -> tuple[Any, TimeStep]:
        init, seat_key, key = jax.random.split(key, 3)
        seat = jax.random.randint(seat_key, (), 0, self.num_players)
        state, key, _ = self._replies(self.env.init(init), seat, key, jnp.zeros((), jnp.float32))
        return (state, seat, key), self._timestep(state)

    def step(self, state: Any, action: chex.Array) -> tuple[Any, TimeStep]:
        state, seat, key = state
        key, chance = jax.random.split(key)
        state = self.env.step(state, action.astype(jnp.int32), chance)
        state, key, reward = self._replies(state, seat, key, state.rewards[seat].astype(jnp.float32))
        return (state, seat, key), self._timestep(state, reward)
