"""Watch a trained agent: ``python -m podracer.evaluate --checkpoint DIR --episodes N [--gif out.gif]``.

Rebuilds the agent from the checkpoint's metadata (Sebulba: envpool; Anakin: the JAX
environment), plays ``N`` episodes (one per environment, all at once), prints their
returns, and can write a GIF of the first episode (the newest stacked frame of image
observations, or the board of Catch).
"""

from __future__ import annotations

import os
import sys

import numpy as np


def _agent_for(metadata, spec):
    from podracer import experiment

    return experiment.make_agent(experiment.agent_config_from(metadata), spec, metadata.get("normalize"))


def load(directory: str, spec):
    """``(agent, params, metadata)`` from the newest checkpoint in ``directory``."""
    import jax

    from podracer import checkpoint
    from podracer.envs.base import example_action_mask, example_observation
    from podracer.learner import init_learner_state, make_optimizer

    metadata, _ = checkpoint.newest_metadata(directory)
    agent = _agent_for(metadata, spec)
    example = example_observation(spec)
    # Abstract: a replay agent's template would otherwise allocate its whole replay memory.
    template = jax.eval_shape(lambda: init_learner_state(agent, make_optimizer(1.0, 1.0), jax.random.key(0), example,
                                                         rollout_length=metadata.get("rollout_length", 1),
                                                         action_mask=example_action_mask(spec)))
    state, metadata = checkpoint.restore(directory, template)
    return agent, state.params, metadata


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


def _check_recordable(metadata, spec) -> None:
    structured = isinstance(spec.observation, dict)
    if structured or len(spec.observation.shape) < 2:
        shape = {k: v.shape for k, v in spec.observation.items()} if structured else spec.observation.shape
        raise ValueError(f"--gif needs image or board observations; {metadata['env']} has observations of shape {shape}.")


def play_host(env, agent, params, episodes: int, *, seed: int = 0, greedy: bool = True, max_steps: int = 100_000,
              record: bool = False):
    """Returns of one episode per environment of the host batch ``env`` (``env.num_envs == episodes``) played by
    ``agent`` with ``params`` (one copy), from ``env.reset()``; the first one's frames when ``record``."""
    import jax

    def step(action):
        timestep = env.step(np.asarray(action))
        return timestep, env.stats.episode_return

    return _episodes(agent, _policy(agent, greedy), params, env.reset(), step, jax.random.key(seed), episodes,
                     max_steps, record, env.spec())


def _play_host(metadata, directory, episodes, seed, greedy, max_steps, record):
    import jax

    from podracer import envs

    env = envs.make_host(metadata["env"], episodes, seed=seed)
    try:
        if record:
            _check_recordable(metadata, env.spec())
        agent, params, _ = load(directory, env.spec())
        return play_host(env, agent, params, episodes, seed=seed, greedy=greedy, max_steps=max_steps, record=record)
    finally:
        env.close()


def _play_jax(metadata, directory, episodes, seed, greedy, max_steps, record):
    from podracer import envs

    env = envs.make(metadata["env"].removeprefix("jax:"))  # Sebulba's JAX environments too
    if record:
        _check_recordable(metadata, env.spec())
    agent, params, _ = load(directory, env.spec())
    return play_jax(env, agent, params, episodes, seed=seed, greedy=greedy, max_steps=max_steps, record=record)


def play_jax(env, agent, params, episodes: int, *, seed: int = 0, greedy: bool = False, max_steps: int = 100_000,
             record: bool = False):
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

    return _episodes(agent, _policy(agent, greedy), params, timestep, step, key, episodes, max_steps, record, env.spec())


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

    return np.array([[round(255 * c) for c in colorsys.hsv_to_rgb((0.07 + i * 0.618034) % 1.0, 0.7, 0.95)]
                     for i in range(n)], np.uint8)


def _scaled(x: np.ndarray, low: float, high: float) -> np.ndarray:
    return (255 * np.clip((x.astype(np.float64) - low) / (high - low), 0, 1)).astype(np.uint8)


def picture(observation, spec) -> np.ndarray:
    """One observation as a picture (uint8 ``[H, W]`` grey or ``[H, W, 3]`` colour), from the layout ``spec``
    declares: channels-first frame stacks (envpool's Atari: the newest frame), channels-last images (RGB, or one
    grey channel) scaled from the declared range, boards of many planes (MinAtar, xminigrid's one-hot tiles, pgx)
    as a colour-coded grid (each cell coloured by its planes' values, empty cells black), and 2-D boards (Catch)
    scaled to grey. A board's cell takes the colour of its last plane that is on (of 24 colours, cycling), or, where
    the planes hold other values, a colour per combination of values; an empty cell is black."""
    from podracer.envs.base import image_layout

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
    levels = np.round((observation.astype(np.float64) - layout.low) / (layout.high - layout.low) * 255).astype(np.uint64)
    empty = (levels == 0).all(axis=-1)
    if np.isin(levels, (0, 255)).all():  # planes that are on or off: the colour of the last plane on
        index = channels - 1 - np.argmax(levels[..., ::-1] > 0, axis=-1)
    else:  # values: a colour per combination, the same in every frame (splitmix64's finaliser of the values)
        with np.errstate(over="ignore"):
            code = (levels * (np.uint64(0x9E3779B97F4A7C15) ** np.arange(1, channels + 1, dtype=np.uint64))).sum(axis=-1)
            code ^= code >> np.uint64(31)
            code *= np.uint64(0xBF58476D1CE4E5B9)
            code ^= code >> np.uint64(29)
        index = (code % np.uint64(PALETTE_SIZE)).astype(np.int64)
    image = palette()[index % PALETTE_SIZE]
    image[empty] = 0
    return image


def play(directory: str, episodes: int, *, seed: int = 0, greedy: bool = False, max_steps: int = 100_000, record: bool = False):
    """Returns of ``episodes`` episodes of a Sebulba (envpool) or Anakin (JAX) checkpoint, and the first
    episode's frames when ``record`` (image or board observations)."""
    from podracer import checkpoint

    metadata, _ = checkpoint.newest_metadata(directory)
    mode = metadata.get("mode")
    if mode not in ("sebulba", "anakin"):
        raise ValueError(f"{directory!r} holds a checkpoint of unknown mode {mode!r}.")
    from podracer import envs

    jax_env = envs.is_jax_on_host(metadata.get("env", ""))  # a JAX environment Sebulba stepped on the host
    play_fn = _play_host if mode == "sebulba" and not jax_env else _play_jax
    return play_fn(metadata, directory, episodes, seed, greedy, max_steps, record)


def check_output_file(path: str, flag: str) -> None:
    """``path`` can be written (its directory is made if needed): a one-line ``ValueError`` naming ``flag``
    otherwise, before anything is played."""
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path!r} is a directory; give a file name (for example {os.path.join(path, 'play.gif')!r}).")
    from podracer import lifetime

    parent = os.path.dirname(os.path.abspath(path))
    lifetime.writable_directory(parent, f"{flag} {path!r}: directory {parent!r}")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise ValueError(f"{flag} {path!r} cannot be written.")


def write_gif(frames, path: str, fps: int = 15) -> None:
    from PIL import Image

    height, width = np.asarray(frames[0]).shape[:2]
    scale = max(1, 168 // max(height, width))
    images = [Image.fromarray(np.asarray(f, np.uint8)).resize((width * scale, height * scale), Image.NEAREST) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)


DESCRIPTION = ("Play a trained agent from a checkpoint directory: one episode per environment, all at once, each "
               "episode's return printed, the first episode optionally written to a GIF.")


def main(argv=None, *, prog: str = "python -m podracer.evaluate", name: str = "podracer.evaluate") -> int:
    """``podracer evaluate`` (``python -m podracer.evaluate``): the exit status."""
    from podracer import config, lifetime

    args = config.parse(config.EvaluateConfig, argv, prog=prog, description=DESCRIPTION)
    lifetime.quiet_dependencies()
    lifetime.exit_on_signals(name)
    try:
        if args.gif:
            check_output_file(args.gif, "--gif")
        returns, frames = play(args.checkpoint, args.episodes, seed=args.seed, greedy=args.greedy, record=bool(args.gif))
    except (ValueError, FileNotFoundError) as error:
        print(f"{name}: error: {error}", file=sys.stderr)
        return 2
    for i, value in enumerate(returns):
        print(f"episode {i}: return {value:.1f}")
    print(f"mean return {np.nanmean(returns):.2f} over {len(returns)} episodes")
    if args.gif:
        write_gif(frames, args.gif)
        print(f"wrote {args.gif} ({len(frames)} frames)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
