"""pgx games (``pgx:NAME``) as podracer :class:`~podracer.core.envs.base.Environment` s.

pgx (board games, 2048, MinAtar, ...) keeps every player's reward in ``state.rewards``, the legal moves in
``state.legal_action_mask`` and whose turn it is in ``state.current_player``; its ``step`` does not reset
(podracer's :class:`~podracer.core.envs.wrappers.AutoReset` starts the next episode). The agent sees pgx's
observation as float32 (a channels-last board of 0/1 planes for the board games and 2048, declared as such,
so ``--torso auto`` gives it the board torso and pictures draw it), and the legal-action mask with every time
step (``EnvSpec.action_mask``), so no agent makes an illegal move.

One-player games (2048, MinAtar) are played as they are. In a game of two or more players the agent plays one
seat, drawn at random each episode, against a built-in **opponent** that makes every other move: by default
uniformly random legal moves; any ``opponent(observation, legal_action_mask, key) -> action`` (one game, pure
JAX) instead, for example :func:`podracer.run.evaluate.snapshot_opponent`, a fixed earlier checkpoint of an agent. A
time step is the
agent's move followed by the opponent's replies, so its reward is the agent's own reward over both (+1 a win,
-1 a loss, 0 a draw in the board games) and the next observation is the agent's view of the board. A game that
ends on a time limit (pgx's ``truncated``) is a truncation.

In **self-play** (``opponent="self"``, ``--opponent self``) the agent makes every move: a time step is one move,
its reward the mover's, its observation the view of the player to move next, and its discount -1 where the other
player moves next (0 where the game ended): a two-player zero-sum game's values change sign from one player to the
other, so returns and bootstrapped values computed with these discounts are every mover's own. An episode's return
is then the last mover's (1 a decisive game, 0 a draw); evaluations play against random legal moves instead
(:meth:`PgxEnv.for_evaluation`). :meth:`PgxEnv.search_model` gives planning agents the game's rules move by move.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from podracer.core.envs.base import SearchModel, check_task, first_timestep, require_package, step_timestep
from podracer.core.types import EnvSpec, ImageLayout, TimeStep

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


def one_step_greedy(env, state, key) -> chex.Array:
    """A baseline opponent (``opponent="greedy"``): a move that wins at once (the largest immediate reward of the
    player to move) where there is one, else a uniformly random legal move. ``env``: the pgx environment."""
    moves = jnp.arange(state.legal_action_mask.shape[0], dtype=jnp.int32)
    mover = state.current_player
    rewards = jax.vmap(lambda a: env.step(state, a, key).rewards[mover])(moves)
    rewards = jnp.where(state.legal_action_mask, rewards, -jnp.inf)
    best = state.legal_action_mask & (rewards == jnp.max(rewards))
    return jax.random.categorical(key, jnp.where(best, 0.0, -jnp.inf)).astype(jnp.int32)


@functools.cache
def _tic_tac_toe_table() -> np.ndarray:
    """bool ``[3**9, 9]``: the moves of perfect play (minimax) for the player to move, by board (cell i's digit in
    base 3: 0 empty, 1 the mover's mark, 2 the other player's)."""
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
    table = np.zeros((3**9, 9), bool)
    powers = 3 ** np.arange(9)

    @functools.cache
    def value(board: tuple) -> int:  # the mover's outcome under perfect play: 1, 0 or -1
        if any(all(board[i] == 2 for i in line) for line in lines):
            return -1  # the other player's last move won
        empty = [i for i in range(9) if board[i] == 0]
        if not empty:
            return 0
        swapped = tuple((0, 2, 1)[c] for c in board)  # the next mover's view
        scores = [-value(swapped[:i] + (2,) + swapped[i + 1 :]) for i in empty]
        best = max(scores)
        table[int(np.dot(board, powers))] = [i in empty and scores[empty.index(i)] == best for i in range(9)]
        return best

    value((0,) * 9)
    return table


def perfect_tic_tac_toe(observation, legal_action_mask, key) -> chex.Array:
    """An opponent for ``pgx:tic_tac_toe`` that plays perfectly (minimax; among equally good moves, one at random):
    against it the best result is a draw."""
    cells = observation.reshape(9, 2)
    index = jnp.sum((cells[:, 0] + 2 * cells[:, 1]).astype(jnp.int32) * 3 ** jnp.arange(9))
    best = jnp.asarray(_tic_tac_toe_table())[index] & legal_action_mask
    return jax.random.categorical(key, jnp.where(best, 0.0, -jnp.inf)).astype(jnp.int32)


# The games pgx has an AlphaZero baseline model for (pgx.make_baseline_model; pgx's Elo figures are anchored there).
BASELINES = {
    "animal_shogi": "animal_shogi_v0",
    "gardner_chess": "gardner_chess_v0",
    "go_9x9": "go_9x9_v0",
    "hex": "hex_v0",
    "othello": "othello_v0",
}


def baseline_opponent(name: str, directory: str) -> Opponent:
    """An opponent that plays pgx's baseline model of game ``name`` greedily (the most likely legal move of its
    policy), read from ``directory``/MODEL.ckpt, a file as ``pgx.make_baseline_model(MODEL, download_dir=...)``
    leaves it. Nothing is downloaded: pgx fetches these files from Google Drive, which a machine behind a firewall
    cannot reach. Needs dm-haiku (pgx's models are haiku networks)."""
    import os

    if name not in BASELINES:
        games = ", ".join(sorted(BASELINES))
        raise ValueError(f"--opponent baseline: pgx has baseline models for {games}, not {name}.")
    model_id = BASELINES[name]
    path = os.path.join(directory, f"{model_id}.ckpt")
    if not os.path.isfile(path):
        raise ValueError(
            f"--baseline-dir: no {model_id}.ckpt in {directory} (on a machine that reaches Google Drive, "
            f"pgx.make_baseline_model('{model_id}', download_dir=DIR) fetches it; copy DIR's file here)."
        )
    require_package("pgx", "haiku")
    from pgx import make_baseline_model

    try:
        model = make_baseline_model(model_id, download_dir=directory)
    except Exception as error:  # noqa: BLE001 - pickle, haiku and key errors all mean the file is not the model
        reason = str(error).splitlines()[0] if str(error).strip() else ""
        raise ValueError(
            f"--baseline-dir: {path} is not pgx's baseline model {model_id} ({type(error).__name__}"
            f"{': ' + reason if reason else ''}); fetch it again with pgx.make_baseline_model('{model_id}', "
            "download_dir=DIR) and copy DIR's file here."
        ) from None

    def opponent(observation, legal_action_mask, key):
        del key
        logits, _ = model(observation[None])
        return jnp.argmax(jnp.where(legal_action_mask, logits[0], -jnp.inf)).astype(jnp.int32)

    opponent.__name__ = f"pgx's baseline model {model_id} (greedy)"
    return opponent


class PgxEnv:
    """``pgx.make(name)`` behind podracer's environment protocol (``env``: a pgx environment, used as it is;
    ``opponent``: who makes the other player's moves in a two-player game: ``"random"`` (:func:`random_legal_move`,
    the default), ``"greedy"`` (:func:`one_step_greedy`), ``"perfect"`` (:func:`perfect_tic_tac_toe`), a function
    ``opponent(observation, legal_action_mask, key)``, or ``"self"``: self-play, every move the agent's). The state
    is ``(pgx state, the agent's seat, a key)``."""

    def __init__(self, name: str, *, env=None, opponent: Opponent | str | None = None):
        require()
        if env is None:
            import pgx

            check_task("pgx", name, pgx.available_envs())
            env = pgx.make(name)
        self.name, self.env = name, env
        self.num_players = int(env.num_players)
        opponent = None if opponent == "random" else opponent
        if opponent is not None and self.num_players != 2:
            raise ValueError(f"--opponent: pgx:{name} has {self.num_players} player(s); an opponent is for two.")
        if opponent == "perfect":
            if name != "tic_tac_toe":
                raise ValueError(f"--opponent perfect: perfect play is known for pgx:tic_tac_toe only, not pgx:{name}.")
            opponent = perfect_tic_tac_toe
        if not (opponent in (None, "greedy", "self") or callable(opponent)):
            raise ValueError(f"--opponent: a function, 'random', 'greedy', 'perfect' or 'self', got {opponent!r}.")
        self.self_play = opponent == "self"
        if opponent == "greedy":
            self._choose = functools.partial(one_step_greedy, env)
        else:
            chosen = opponent if callable(opponent) else random_legal_move
            self._choose = lambda state, key: chosen(state.observation, state.legal_action_mask, key)
        self.opponent = opponent or random_legal_move
        names = {None: "random legal moves", "greedy": "one-step greedy moves", "self": "itself (self-play)"}
        own = None if callable(opponent) else names[opponent]
        self.opponent_name = (
            None if self.num_players == 1 else own or getattr(opponent, "__name__", "an opponent of your own")
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
            action = self._choose(state, choose)
            state = self.env.step(state, action, chance)
            return state, key, reward + state.rewards[seat]

        if self.num_players == 1 or self.self_play:
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
        if self.self_play:  # the mover's reward; the discount -1 where the other player moves next
            mover = state.current_player
            state = self.env.step(state, action.astype(jnp.int32), chance)
            timestep = self._timestep(state, state.rewards[mover].astype(jnp.float32))
            turn = (state.current_player != mover) & ~state.terminated
            return (state, state.current_player, key), timestep._replace(
                discount=jnp.where(turn, -1.0, timestep.discount)
            )
        state = self.env.step(state, action.astype(jnp.int32), chance)
        state, key, reward = self._replies(state, seat, key, state.rewards[seat].astype(jnp.float32))
        return (state, seat, key), self._timestep(state, reward)

    def for_evaluation(self) -> PgxEnv:
        """The game an evaluation plays: a self-play game against random legal moves (a return then says who won),
        any other as it is."""
        return PgxEnv(self.name, env=self.env) if self.self_play else self

    def search_model(self) -> SearchModel:
        """The game's own rules move by move (:class:`~podracer.core.envs.base.SearchModel`), for planning agents: the
        embedding is pgx's state; every player's moves are searched (the built-in opponent's too, as moves of the
        other player), the values changing sign between the two players."""
        if self.num_players > 2:
            raise ValueError(f"pgx:{self.name} has {self.num_players} players; planning searches games of one or two.")
        env = self.env

        def step(game, action, key):
            mover = game.current_player
            game = env.step(game, action.astype(jnp.int32), key)
            over = game.terminated | game.truncated
            discount = jnp.where(over, 0.0, jnp.where(game.current_player == mover, 1.0, -1.0))
            reward = game.rewards[mover].astype(jnp.float32)
            return game, reward, discount, game.observation.astype(jnp.float32), game.legal_action_mask

        return SearchModel(root=lambda state: state[0], step=step)
