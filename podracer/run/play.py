"""Playing an agent: episodes of a host batch or of a JAX environment (in Python, or compiled in one loop on the
device), random play as a baseline, and observations drawn as pictures.

Below both :mod:`podracer.cli.evaluate` (which plays a checkpoint) and :mod:`podracer.run.compose` (which evaluates
the greedy policy during a Sebulba run).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np

from podracer.run import parallel
from podracer.core.agents.base import Agent, act_mask, greedy_action
from podracer.core.envs import wrappers
from podracer.core.envs.base import Environment
from podracer.core.stats import summarize_evaluation


def _episodes(
    agent, policy, params, timestep, step, key, episodes: int, max_steps: int, record: bool, spec=None, draw=None
):
    """Plays until each of the ``episodes`` environments has ended one episode.

    ``step(action) -> (timestep, running episode returns)``. Returns the returns, and
    the first environment's frames until its episode ends when ``record``: ``draw(timestep)`` of each time step,
    by default a picture of its first observation, drawn as ``spec`` lays it out (:func:`picture`).
    """
    import jax

    if draw is None:
        draw = lambda timestep: picture(timestep.observation[0], spec)  # noqa: E731
    returns = np.full(episodes, np.nan)
    frames = [draw(timestep)] if record else []
    core, first = agent.initial_state(episodes), np.ones(episodes, bool)
    for _ in range(max_steps):
        key, act_key = jax.random.split(key)
        action, core = policy(params, timestep.observation, act_key, core, first, timestep.action_mask)
        first = np.asarray(timestep.last)
        timestep, episode_returns = step(action)
        if record and np.isnan(returns[0]):
            frames.append(draw(timestep))
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
    draw=None,
):
    """Returns of one episode per environment of the host batch ``env`` (``env.num_envs == episodes``) played by
    ``agent`` with ``params`` (one copy), from ``env.reset()``; the first one's frames when ``record``
    (``draw(timestep)``: a frame; by default a picture of the observation)."""
    import jax

    def step(action):
        timestep = env.step(np.asarray(action))
        return timestep, env.stats.episode_return

    return _episodes(
        agent,
        policy(agent, greedy),
        params,
        env.reset(),
        step,
        jax.random.key(seed),
        episodes,
        max_steps,
        record,
        env.spec(),
        draw,
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
    draw=None,
):
    """Returns of ``episodes`` episodes (one per environment, all at once) of ``agent`` with ``params``
    (one copy, not replicated) on the JAX environment ``env``; the first one's frames when ``record``
    (``draw(timestep)``: a frame; by default a picture of the observation)."""
    import jax

    from podracer.core import envs

    env = envs.wrap(env)
    key, reset_key = jax.random.split(jax.random.key(seed))
    state, timestep = jax.jit(jax.vmap(env.reset))(jax.random.split(reset_key, episodes))
    jitted_step = jax.jit(jax.vmap(env.step))

    def step(action):
        nonlocal state
        state, timestep = jitted_step(state, action)
        return timestep, state.stats.episode_return

    act_fn = policy(agent, greedy, env)

    def act(params, observation, key, core, first, action_mask):  # a planning agent searches from the states
        return act_fn(params, observation, key, core, first, action_mask, state)

    return _episodes(agent, act, params, timestep, step, key, episodes, max_steps, record, env.spec(), draw)


def policy(agent, greedy: bool, env=None):
    """The jitted ``policy(params, observation, key, core, first, action_mask, env_state=None) -> (action, core)``
    (``env``, ``env_state``: the wrapped JAX environment and its states, for a planning agent)."""
    import jax

    @jax.jit
    def policy(params, observation, key, core, first, action_mask, env_state=None):
        action, extras, core = agent.act(
            params, observation, key, core, first, **act_mask(action_mask), **wrappers.plan_args(agent, env, env_state)
        )
        return (greedy_action(extras) if greedy else action), core

    return policy


def random_action(spec, key: chex.PRNGKey, num_envs: int, action_mask=None) -> chex.Array:
    """Uniformly random actions for ``num_envs`` environments of ``spec``: legal ones where ``action_mask`` says
    which (bool ``[B, A]``, or a tuple of per-entry masks for multi-discrete actions); uniform in the box for
    continuous actions."""
    if spec.box is not None:
        low, high = jnp.asarray(spec.box.low, jnp.float32), jnp.asarray(spec.box.high, jnp.float32)
        return jax.random.uniform(key, (num_envs, spec.box.size), minval=low, maxval=high)
    if spec.nvec is not None:
        keys = jax.random.split(key, len(spec.nvec))
        masks = action_mask if action_mask is not None else [jnp.ones((num_envs, n), bool) for n in spec.nvec]
        return jnp.stack(
            [jax.random.categorical(k, jnp.where(m, 0.0, -jnp.inf)) for k, m in zip(keys, masks)], axis=-1
        ).astype(jnp.int32)
    mask = action_mask if action_mask is not None else jnp.ones((num_envs, spec.num_actions), bool)
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


def make_random_play(env: Environment, num_episodes: int, *, max_steps: int = 10_000):
    """``play(key) -> returns [num_episodes]``: one episode per environment of uniformly random (legal) actions
    (:func:`random_action`), all at once in one compiled loop, as :func:`make_evaluate` plays an agent; the
    baseline "random play" measured on the same environment object as a trained agent."""
    env = wrappers.for_evaluation(env)
    spec = env.spec()
    env = wrappers.wrap(env)

    def play(key):
        reset_key, act_key = jax.random.split(key)
        env_state, timestep = jax.vmap(env.reset)(jax.random.split(reset_key, num_episodes))
        zeros = jnp.zeros((num_episodes,), jnp.float32)
        carry = (env_state, timestep, zeros, jnp.zeros((num_episodes,), bool), act_key, 0)

        def running(carry):
            *_, done, _, t = carry
            return jnp.logical_and(t < max_steps, jnp.logical_not(jnp.all(done)))

        def body(carry):
            env_state, timestep, returns, done, key, t = carry
            key, step_key = jax.random.split(key)
            action = random_action(spec, step_key, num_episodes, timestep.action_mask)
            env_state, timestep = jax.vmap(env.step)(env_state, action)
            returns = returns + jnp.where(done, 0.0, timestep.reward)
            return env_state, timestep, returns, jnp.logical_or(done, timestep.last), key, t + 1

        return jax.lax.while_loop(running, body, carry)[2]

    return play


def make_evaluate(env: Environment, agent: Agent, num_episodes: int, *, max_steps: int = 10_000, greedy: bool = True):
    """``evaluate(params, key) -> returns [num_episodes]``: greedy episodes of ``agent`` (the most likely action,
    or the highest-valued one; ``greedy=False``: the action it samples, its behaviour policy), one per environment,
    all at once, in one compiled loop on the device.

    Each environment plays one episode from a reset with its own key split from ``key``; the loop ends
    when every episode has ended or after ``max_steps`` steps (an unfinished episode counts what it has).
    The same ``params`` and ``key`` give the same returns. A self-play game is played against random legal moves
    (:func:`~podracer.core.envs.wrappers.for_evaluation`).
    """
    env = wrappers.wrap(wrappers.for_evaluation(env))

    def evaluate(params, key):
        reset_key, act_key = jax.random.split(key)
        env_state, timestep = jax.vmap(env.reset)(jax.random.split(reset_key, num_episodes))
        zeros = jnp.zeros((num_episodes,), jnp.float32)
        carry = (
            env_state,
            timestep,
            agent.initial_state(num_episodes),
            jnp.ones((num_episodes,), bool),
            zeros,
            jnp.zeros((num_episodes,), bool),
            act_key,
            0,
        )

        def running(carry):
            *_, done, _, t = carry
            return jnp.logical_and(t < max_steps, jnp.logical_not(jnp.all(done)))

        def body(carry):
            env_state, timestep, core, first, returns, done, key, t = carry
            key, step_key = jax.random.split(key)
            action, extras, core = agent.act(
                params,
                timestep.observation,
                step_key,
                core,
                first,
                **act_mask(timestep.action_mask),
                **wrappers.plan_args(agent, env, env_state),
            )
            first = timestep.last  # the next observation starts an episode where this one ended it
            env_state, timestep = jax.vmap(env.step)(env_state, greedy_action(extras) if greedy else action)
            returns = returns + jnp.where(done, 0.0, timestep.reward)
            done = jnp.logical_or(done, timestep.last)
            return env_state, timestep, core, first, returns, done, key, t + 1

        return jax.lax.while_loop(running, body, carry)[4]

    return evaluate


EVAL_SEED_OFFSET = 1_000_003  # evaluation environments: seeds apart from the training ones


def evaluation_keys(seed: int, num_seeds: int = 1, points: int = 1) -> jax.Array:
    """The evaluation key of every lane of an Anakin run (``[points x num_seeds]``): lane ``p * S + s`` trains (and
    is evaluated as) seed ``seed + s``, whatever its setting ``p`` (:class:`~podracer.core.anakin.Sweep`'s layout),
    and its key is ``jax.random.key(seed + s + EVAL_SEED_OFFSET)``, a run of that seed alone's (made from uint32
    seeds: below 2**32, as ``--seed`` is at most 2**31 - 1). Traced inside a program, the seeds are its constants."""
    seeds = np.tile(np.arange(seed, seed + num_seeds, dtype=np.uint32), points) + np.uint32(EVAL_SEED_OFFSET)
    return jax.vmap(jax.random.key)(jnp.asarray(seeds))


def periodic_evaluation(
    env: Environment,
    agent: Agent,
    episodes: int,
    seed: int,
    num_seeds: int = 1,
    sweep_entries=None,
    greedy: bool = True,
    population: bool = False,
):
    """``evaluate(params) -> returns`` for evaluations during an Anakin run: greedy episodes (``greedy=False``: the
    sampled policy's) compiled on the device (:func:`make_evaluate`), with the same environment seeds at every
    evaluation (so equal parameters score equally); per seed when ``num_seeds > 1`` (parameters ``[S, ...]``); with
    ``sweep_entries``, ``(values, build)`` of a sweep, per entry (``build(values) -> (agent, optimizer)``).

    Every lane plays its own episodes: seed ``s``'s evaluation key is ``jax.random.key(s + EVAL_SEED_OFFSET)``, as
    in a run of seed ``s`` alone, so a lane's evaluation is its solo run's (the same starts, rewards and sampled
    actions for the same parameters) and two seeds' are independent draws. A sweep's settings of one seed play that
    seed's episodes; ``population``: the lanes share one seed, and lane ``i`` folds ``i`` into its key."""
    if sweep_entries is None and num_seeds == 1:
        evaluate = make_evaluate(env, agent, episodes, greedy=greedy)

        def evaluation(params):  # (the program's name in JAX's compile log)
            return evaluate(params, evaluation_keys(seed)[0])  # made inside the program

        compiled = jax.jit(evaluation)
        return lambda params: jax.device_get(compiled(params))
    if sweep_entries is None:
        lanes = dict(num_seeds=num_seeds)
        evaluate = make_evaluate(env, agent, episodes, greedy=greedy)

        def evaluate_lanes(params, keys):
            return jax.vmap(evaluate)(params, keys)

    else:
        values, build = sweep_entries
        size = len(next(iter(values.values())))
        lanes = dict(points=size) if population else dict(num_seeds=num_seeds, points=size // num_seeds)

        def evaluate_entry(params, key, entry_values):
            return make_evaluate(env, build(entry_values)[0], episodes, greedy=greedy)(params, key)

        def evaluate_lanes(params, keys):
            return jax.vmap(evaluate_entry)(params, keys, values)

    def evaluation(params):  # (the program's name in JAX's compile log)
        keys = evaluation_keys(seed, **lanes)
        if population:
            keys = jax.vmap(jax.random.fold_in)(keys, jnp.arange(len(keys)))
        return evaluate_lanes(params, keys)

    compiled = jax.jit(evaluation)
    return lambda params: jax.device_get(compiled(params))


def periodic_host_evaluation(
    make_env, agent: Agent, episodes: int, seed: int, target_return: float | None, saving: bool, greedy: bool = True
):
    """``evaluate(state) -> summary entries`` for evaluations during a Sebulba run: the greedy policy (``greedy=False``:
    the sampled one) plays one
    episode on each of ``episodes`` fresh host environments (``make_env(seed, num_envs)``), seeded the same at
    every evaluation; says so when the mean reaches ``target_return`` (``saving``: a checkpoint follows)."""

    def evaluate(state) -> dict[str, float]:
        env = make_env(seed + EVAL_SEED_OFFSET, episodes)
        try:
            params = jax.device_get(parallel.unreplicate(state.params))
            returns, _ = play_host(env, agent, params, episodes, seed=seed, greedy=greedy)
        finally:
            env.close()
        summary = summarize_evaluation(returns, target_return)
        if parallel.is_main_process() and summary.get("target_reached"):
            print(
                f"podracer: evaluation return {summary['eval_return']:.3f} >= --target-return {target_return:g}: "
                "stopping" + (" (saving a checkpoint)" if saving else ""),
                flush=True,
            )
        return summary

    return evaluate


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
    from podracer.core.types import image_layout

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


__all__ = [
    "PALETTE_SIZE",
    "make_evaluate",
    "make_random_play",
    "palette",
    "picture",
    "play_host",
    "play_jax",
    "policy",
    "random_action",
]
