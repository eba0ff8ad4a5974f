"""An Elo ladder of one run's snapshots on a two-player pgx game: each new snapshot plays random legal moves and
every earlier snapshot, and one Elo rating per player is fitted to all the games at once, needing no download.

:func:`match` plays two players (an agent's parameters, or ``None`` for random legal moves) against each other,
each first in half the games; :func:`fit_elo` fits Bradley-Terry ratings on Elo's scale (400 points: 10 to 1 odds)
to the scores, the random player anchored at 0, and :func:`ladder` does both for a list of snapshots. A planning
agent (``Agent.plans``: AlphaZero) searches with the game's own rules, as it does in training; every agent plays its
greedy move (:func:`podracer.core.agents.base.greedy_action`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from podracer.core.agents.base import Agent, act_mask, greedy_action

RANDOM = None  # the player that moves uniformly at random among the legal moves
ELO = 400.0 / np.log(10.0)  # Elo points per unit of the Bradley-Terry log-strength


def _moves(agent: Agent, model, params, state, key):
    """The greedy moves of ``agent`` with ``params`` in every game of ``state`` (a batch of pgx states)."""
    num = state.current_player.shape[0]
    planning = {"model": model, "env_state": (state,)} if agent.plans else {}
    _, extras, _ = agent.act(
        params,
        state.observation.astype(jnp.float32),
        key,
        agent.initial_state(num),
        jnp.zeros((num,), bool),
        **act_mask(state.legal_action_mask),
        **planning,
    )
    return greedy_action(extras)


@functools.lru_cache(maxsize=16)
def _compiled(game: str, agent: Agent, a_random: bool, b_random: bool, num_games: int):
    import pgx

    from podracer.core.envs.pgx import PgxEnv, random_legal_move

    env = pgx.make(game)
    model = PgxEnv(game, env=env).search_model()

    def play(params_a, params_b, key):
        init_key, key = jax.random.split(key)
        state = jax.vmap(env.init)(jax.random.split(init_key, num_games))
        # A moves first in the even games: its seat is the first mover's there, the other one in the odd games.
        first = state.current_player
        seat_a = jnp.where(jnp.arange(num_games) % 2 == 0, first, 1 - first)
        score = jnp.zeros(num_games, jnp.float32)

        def unfinished(carry):
            state, _, _ = carry
            return ~jnp.all(state.terminated | state.truncated)

        def move(carry):
            state, score, key = carry
            key, ka, kb, ks = jax.random.split(key, 4)
            legal = state.legal_action_mask
            a = random_legal_move(None, legal, ka) if a_random else _moves(agent, model, params_a, state, ka)
            b = random_legal_move(None, legal, kb) if b_random else _moves(agent, model, params_b, state, kb)
            action = jnp.where(state.current_player == seat_a, a, b)
            done = state.terminated | state.truncated
            stepped = jax.vmap(env.step)(state, action, jax.random.split(ks, num_games))
            reward = jnp.take_along_axis(stepped.rewards, seat_a[:, None], axis=1)[:, 0]
            score = score + jnp.where(done, 0.0, reward)
            state = jax.tree.map(lambda old, new: jnp.where(_expand(done, old), old, new), state, stepped)
            return state, score, key

        _, score, _ = jax.lax.while_loop(unfinished, move, (state, score, key))
        return score

    return jax.jit(play)


def _expand(flags, like):
    return jnp.reshape(flags, flags.shape + (1,) * (like.ndim - 1))


def match(game: str, agent: Agent, params_a, params_b, num_games: int, key) -> np.ndarray:
    """The outcomes for player A of ``num_games`` games of pgx's ``game`` (float ``[num_games]``: 1 a win, 0 a
    draw, -1 a loss), A moving first in the even games. ``params_a``/``params_b``: ``agent``'s parameters, or
    :data:`RANDOM` for random legal moves."""
    if num_games < 2 or num_games % 2:
        raise ValueError(f"A match has an even number of games (each player first in half), got {num_games}.")
    play = _compiled(game, agent, params_a is RANDOM, params_b is RANDOM, num_games)
    return np.asarray(play(params_a, params_b, key))


def fit_elo(num_players: int, games: Sequence[tuple[int, int, float, int]], *, prior: float = 1.0) -> np.ndarray:
    """Elo ratings of ``num_players`` players, player 0 anchored at 0, fitted (Bradley-Terry, maximum likelihood) to
    ``games``: ``(i, j, score of i in [0, 1] on average, number of games)``, a draw half a win. ``prior`` virtual
    draws between every pair that met keep the ratings finite where one player won every game."""
    pairs = [(i, j, s * n + prior / 2, n + prior) for i, j, s, n in games]
    strength = np.zeros(num_players)
    for _ in range(2000):  # Newton's method on the log-likelihood (concave), player 0 fixed
        gradient, hessian = np.zeros(num_players), np.zeros((num_players, num_players))
        for i, j, wins, total in pairs:
            p = 1.0 / (1.0 + np.exp(strength[j] - strength[i]))
            g, h = wins - total * p, total * p * (1.0 - p)
            gradient[i] += g
            gradient[j] -= g
            hessian[i, i] += h
            hessian[j, j] += h
            hessian[i, j] -= h
            hessian[j, i] -= h
        free = np.arange(1, num_players)
        step = np.linalg.lstsq(hessian[np.ix_(free, free)], gradient[free], rcond=None)[0]
        strength[free] += step
        if np.max(np.abs(step)) < 1e-9:
            break
    return strength * ELO


def ladder(game: str, agent: Agent, snapshots: Sequence, num_games: int, key) -> tuple[np.ndarray, list[dict]]:
    """Each snapshot (``agent``'s parameters, oldest first) plays random legal moves and every earlier snapshot
    ``num_games`` games; ``(Elo of each snapshot, random legal moves at 0; the matches)``. A match is a dict: the
    two players' indices (0 the random player, ``k`` the ``k``-th snapshot counted from 1), wins, draws, losses of
    the first."""
    players = [RANDOM, *snapshots]
    matches = []
    for i in range(1, len(players)):
        for j in range(i):
            key, sub = jax.random.split(key)
            outcome = match(game, agent, players[i], players[j], num_games, sub)
            wins, draws = int((outcome > 0).sum()), int((outcome == 0).sum())
            matches.append(
                {"player": i, "opponent": j, "wins": wins, "draws": draws, "losses": num_games - wins - draws}
            )
    games = [(m["player"], m["opponent"], (m["wins"] + m["draws"] / 2) / num_games, num_games) for m in matches]
    return fit_elo(len(players), games)[1:], matches


__all__ = ["ELO", "RANDOM", "fit_elo", "ladder", "match"]
