"""Playing an agent: episodes of a host batch or of a JAX environment, and observations drawn as pictures.

Below both :mod:`podracer.evaluate` (which plays a checkpoint) and :mod:`podracer.experiment` (which evaluates the
greedy policy during a Sebulba run).
"""

from __future__ import annotations

import numpy as np


def _episodes(agent, policy, params, timestep, step, key, episodes: int, max_steps: int, record: bool, spec=None):
    """Plays until each of the ``episodes`` environments has ended one episode.

    ``step(action) -> (timestep, running episode returns)``. Returns the returns, and
    the first environment's frames until its episode ends when ``record`` (pictures of its
    observations, drawn as ``spec`` lays them out: :func:`picture`).
    """
    import jax

    returns = np.full(episodes, np.nan)
    frames = [picture(timestep.observation[0], spec)] if record else []
    core, first = agent.initial_state(episodes), np.ones(episodes, bool)
    for _ in range(max_steps):
        key, act_key = jax.random.split(key)
        action, core = policy(params, timestep.observation, act_key, core, first, timestep.action_mask)
        first = np.asarray(timestep.last)
        timestep, episode_returns = step(action)
        if record and np.isnan(returns[0]):
            frames.append(picture(timestep.observation[0], spec))
        finished = np.asarray(timestep.last) & np.isnan(returns)
        returns[finished] = np.asarray(episode_returns)[finished]
        if not np.isnan(returns).any():
            break
    return returns, frames


def play_host(
    env,
    agent,
    params,
    episodes: int,
    *,
    seed: int = 0,
    greedy: bool = True,
    max_steps: int = 100_000,
    record: bool = False,
):
    """Returns of one episode per environment of the host batch ``env`` (``env.num_envs == episodes``) played by
    ``agent`` with ``params`` (one copy), from ``env.reset()``; the first one's frames when ``record``."""
    import jax

    def step(action):
        timestep = env.step(np.asarray(action))
        return timestep, env.stats.episode_return

    return _episodes(
        agent,
        _policy(agent, greedy),
        params,
        env.reset(),
        step,
        jax.random.key(seed),
        episodes,
        max_steps,
        record,
        env.spec(),
    )


def play_jax(
    env,
    agent,
    params,
    episodes: int,
    *,
    seed: int = 0,
    greedy: bool = False,
    max_steps: int = 100_000,
    record: bool = False,
):
    """Returns of ``episodes`` episodes (one per environment, all at once) of ``agent`` with ``params``
    (one copy, not replicated) on the JAX environment ``env``; the first one's frames when ``record``."""
    import jax

    from podracer import envs

    env = envs.wrap(env)
    key, reset_key = jax.random.split(jax.random.key(seed))
    state, timestep = jax.jit(jax.vmap(env.reset))(jax.random.split(reset_key, episodes))
    jitted_step = jax.jit(jax.vmap(env.step))

    def step(action):
        nonlocal state
        state, timestep = jitted_step(state, action)
        return timestep, state.stats.episode_return

    return _episodes(
        agent, _policy(agent, greedy), params, timestep, step, key, episodes, max_steps, record, env.spec()
    )


def _policy(agent, greedy: bool):
    import jax

    from podracer.agents.base import act_mask, greedy_action

    @jax.jit
    def policy(params, observation, key, core, first, action_mask):
        action, extras, core = agent.act(params, observation, key, core, first, **act_mask(action_mask))
        return (greedy_action(extras) if greedy else action), core

    return policy


PALETTE_SIZE = 24


def palette(n: int = PALETTE_SIZE) -> np.ndarray:
    """``n`` distinct, bright RGB colours (uint8 ``[n, 3]``), the same every time: hues a golden angle apart."""
    import colorsys

    return np.array(
        [[round(255 * c) for c in colorsys.hsv_to_rgb((0.07 + i * 0.618034) % 1.0, 0.7, 0.95)] for i in range(n)],
        np.uint8,
    )


def _scaled(x: np.ndarray, low: float, high: float) -> np.ndarray:
    return (255 * np.clip((x.astype(np.float64) - low) / (high - low), 0, 1)).astype(np.uint8)


def picture(observation, spec) -> np.ndarray:
    """One observation as a picture (uint8 ``[H, W]`` grey or ``[H, W, 3]`` colour), from the layout ``spec``
    declares: channels-first frame stacks (envpool's Atari: the newest frame), channels-last images (RGB, or one
    grey channel) scaled from the declared range, boards of many planes (MinAtar, xminigrid's one-hot tiles, pgx)
    as a colour-coded grid (each cell coloured by its planes' values, empty cells black), and 2-D boards (Catch)
    scaled to grey. A board's cell takes the colour of its last plane that is on (of 24 colours, cycling), or, where
    the planes hold other values, a colour per combination of values; an empty cell is black."""
    from podracer.types import image_layout

    observation = np.asarray(observation)
    layout = image_layout(spec)
    if layout is None:  # a board (rank 2), scaled from its values' own range
        board = observation.astype(np.float64)
        high = max(1.0, float(board.max()))
        return _scaled(board, min(0.0, float(board.min())), high)
    if layout.channel_axis == -3:  # [C, H, W], stacked frames: the newest
        return _scaled(observation[-1], layout.low, layout.high)
    channels = observation.shape[-1]
    if channels == 1:
        return _scaled(observation[..., 0], layout.low, layout.high)
    if channels == 3:
        return _scaled(observation, layout.low, layout.high)
    levels = np.round((observation.astype(np.float64) - layout.low) / (layout.high - layout.low) * 255).astype(
        np.uint64
    )
    empty = (levels == 0).all(axis=-1)
    if np.isin(levels, (0, 255)).all():  # planes that are on or off: the colour of the last plane on
        index = channels - 1 - np.argmax(levels[..., ::-1] > 0, axis=-1)
    else:  # values: a colour per combination, the same in every frame (splitmix64's finaliser of the values)
        with np.errstate(over="ignore"):
            code = (levels * (np.uint64(0x9E3779B97F4A7C15) ** np.arange(1, channels + 1, dtype=np.uint64))).sum(
                axis=-1
            )
            code ^= code >> np.uint64(31)
            code *= np.uint64(0xBF58476D1CE4E5B9)
            code ^= code >> np.uint64(29)
        index = (code % np.uint64(PALETTE_SIZE)).astype(np.int64)
    image = palette()[index % PALETTE_SIZE]
    image[empty] = 0
    return image


__all__ = ["PALETTE_SIZE", "palette", "picture", "play_host", "play_jax"]
