"""Watch a trained agent: ``podracer evaluate --checkpoint DIR --episodes N [--gif out.gif]``.

Rebuilds the agent from the checkpoint's metadata (Sebulba: envpool; Anakin: the JAX
environment), plays ``N`` episodes (one per environment, all at once), prints their
returns, and can write a GIF of the first episode (the newest stacked frame of image
observations, or the board of Catch).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Annotated, Literal

import numpy as np

from podracer.run.config import MAX_EPISODES, Imports
from podracer.run import hostenvs
from podracer.run.config import Flag

from podracer.run.play import play_host, play_jax


@dataclasses.dataclass(frozen=True)
class EvaluateConfig:
    """``podracer evaluate``: play a saved agent."""

    checkpoint: str  # a --checkpoint-dir of a run
    episodes: int = 5  # episodes to play, one per environment, all at once
    gif: str | None = None  # write the first episode to this GIF (pictures, boards, classic control, gymnasium:ID)
    # take the most likely (or, for value-based agents, the highest-valued) action instead of the behaviour policy's
    greedy: bool = False
    seed: int = 0  # random seed
    # two-player pgx games: the other player, random legal moves, one-step greedy ones, perfect play (minimax,
    # pgx:tic_tac_toe only) or pgx's baseline model (from --baseline-dir); by default the run's own opponent (random
    # legal moves after self-play)
    opponent: Literal["random", "greedy", "perfect", "baseline"] | None = None
    # where pgx's baseline models are (MODEL.ckpt, as pgx.make_baseline_model leaves them): --opponent baseline reads
    # the game's there and downloads nothing (needs dm-haiku)
    baseline_dir: Annotated[str | None, Flag(metavar="DIR")] = None
    # planning agents (alphazero, muzero): simulations of the search at every move (default: the run's)
    num_simulations: int | None = None
    # planning agents: scale of the Gumbel noise at the root, 0 for none (default: the run's)
    gumbel_scale: float | None = None
    imports: Imports = ()

    def __post_init__(self):
        if self.num_simulations is not None and self.num_simulations < 1:
            raise ValueError(f"--num-simulations must be >= 1, got {self.num_simulations}.")
        if self.gumbel_scale is not None and not self.gumbel_scale >= 0:
            raise ValueError(f"--gumbel-scale must be >= 0, got {self.gumbel_scale}.")
        if (self.opponent == "baseline") != (self.baseline_dir is not None):
            raise ValueError("--opponent baseline and --baseline-dir DIR go together (the model is read from DIR).")
        if not 1 <= self.episodes <= MAX_EPISODES:
            raise ValueError(
                f"--episodes must be between 1 and {MAX_EPISODES:,} (one environment each, all at once), "
                f"got {self.episodes}."
            )


def search_settings(num_simulations: int | None = None, gumbel_scale: float | None = None) -> dict[str, float]:
    """The search settings a play overrides (``--num-simulations``, ``--gumbel-scale``), those given."""
    given = {"num_simulations": num_simulations, "gumbel_scale": gumbel_scale}
    return {name: value for name, value in given.items() if value is not None}


def _agent_for(metadata, spec, search=None):
    from podracer.core import agents
    from podracer.run import compose

    agent_config = compose.agent_config_from(metadata)
    if search:
        missing = [name for name in search if not hasattr(agent_config, name)]
        if missing:
            flags = ", ".join("--" + name.replace("_", "-") for name in search)
            raise ValueError(
                f"{flags}: the checkpoint holds a {metadata['agent']} agent, which does not search "
                "(planning agents: alphazero, muzero)."
            )
        agent_config = agent_config.replace(**search)
    return agents.make(
        agent_config,
        spec,
        run=compose.run_facts_from(metadata),
        normalize=metadata.get("normalize"),
        normalize_options=metadata.get("normalize_options"),
    )


def load(directory: str, spec, search=None):
    """``(agent, params, metadata)`` from the newest checkpoint in ``directory``; ``search``: a planning agent's
    search settings to play with instead of the run's (:func:`search_settings`)."""
    import jax

    from podracer.run import checkpoint
    from podracer.core.types import example_action_mask, example_observation
    from podracer.core.learner import init_learner_state

    metadata, _ = checkpoint.newest_metadata(directory)
    agent = _agent_for(metadata, spec, search)
    example = example_observation(spec)
    # Abstract: a replay agent's template would otherwise allocate its whole replay memory.
    template = jax.eval_shape(
        lambda: init_learner_state(
            agent,
            agent.optimizer,
            jax.random.key(0),
            example,
            rollout_length=metadata.get("rollout_length", 1),
            action_mask=example_action_mask(spec),
        )
    )
    state, metadata = checkpoint.restore(directory, template)
    _check_finite(state.params, directory, metadata)
    return agent, state.params, metadata


def _check_finite(params, directory: str, metadata: dict) -> None:
    """A checkpoint whose parameters are not all finite is refused in one line (a run that diverged with
    ``--on-nonfinite continue``, or one written by a podracer that saved non-finite updates)."""
    import jax

    leaves = [np.asarray(x) for x in jax.tree.leaves(params)]
    leaves = [x for x in leaves if np.issubdtype(x.dtype, np.inexact)]
    bad = sum(int(np.size(x) - np.isfinite(x).sum()) for x in leaves)
    if bad:
        total = sum(int(np.size(x)) for x in leaves)
        steps = metadata.get("env_steps")
        at = f" (after {steps:,} env steps)" if isinstance(steps, int) else ""
        raise ValueError(
            f"the checkpoint in {directory}{at} holds non-finite parameters ({bad:,} of {total:,} values): the run "
            "diverged before it was saved; play an earlier checkpoint, or train again with a lower --learning-rate "
            "or gradient clipping (--max-grad-norm)."
        )


def snapshot_opponent(checkpoint_dir: str, *, greedy: bool = True):
    """An opponent that plays a saved feed-forward agent (a checkpoint of an earlier run on the same game): its
    greedy move (``greedy``) or a move sampled from its policy, among the legal ones. Its parameters are fixed."""
    import jax
    import jax.numpy as jnp
    import pgx

    from podracer.run import checkpoint
    from podracer.core.agents.base import act_mask, greedy_action
    from podracer.core.envs.pgx import PgxEnv

    metadata, _ = checkpoint.newest_metadata(checkpoint_dir)
    game = metadata["env"].removeprefix("jax:")
    if not game.startswith("pgx:"):
        raise ValueError(f"snapshot_opponent: {checkpoint_dir!r} holds a run on {game!r}, not a pgx game.")
    spec = PgxEnv(game.removeprefix("pgx:"), env=pgx.make(game.removeprefix("pgx:"))).spec()
    agent, params, _ = load(checkpoint_dir, spec)
    if jax.tree.leaves(agent.initial_state(1)):
        raise ValueError(f"snapshot_opponent: {checkpoint_dir!r} holds a recurrent agent; an opponent is feed-forward.")
    if agent.plans:
        raise ValueError(
            f"snapshot_opponent: {checkpoint_dir!r} holds a planning agent ({metadata['agent']}), which searches the "
            "game's state and an opponent sees only the board; podracer.run.ladder.match plays two of its snapshots."
        )

    def opponent(observation, legal_action_mask, key):
        action, extras, _ = agent.act(
            params,
            observation[None].astype(jnp.float32),
            key,
            agent.initial_state(1),
            jnp.ones((1,), bool),
            **act_mask(legal_action_mask[None]),
        )
        return (greedy_action(extras) if greedy else action)[0].astype(jnp.int32)

    step = checkpoint.steps(checkpoint_dir)[-1]
    opponent.__name__ = f"the {'greedy ' if greedy else ''}{metadata['agent']} of {checkpoint_dir} (step {step})"
    return opponent


def _drawing(metadata, spec, env=None):
    """How ``--gif`` draws the first episode: ``(draw(timestep) -> frame, or None for a picture of the
    observation, close)``. Image and board observations are their own pictures; a gymnasium batch made to render
    draws itself; classic control is drawn from its observations (:mod:`podracer.run.video`); anything else is a
    one-line error."""
    structured = isinstance(spec.observation, dict)
    if not structured and len(spec.observation.shape) >= 2:
        return None, lambda: None
    if env is not None and getattr(env, "renders", lambda: False)():
        return (lambda timestep: env.render_first()), lambda: None
    from podracer.run import video

    task = video.classic_task(metadata["env"])
    if task is not None:
        renderer = video.ObservationRenderer(task)
        return (lambda timestep: renderer(np.asarray(timestep.observation[0]))), renderer.close
    shape = {k: v.shape for k, v in spec.observation.items()} if structured else spec.observation.shape
    raise ValueError(
        f"--gif needs image or board observations, a classic-control task ({', '.join(sorted(video.STATES))}) or a "
        f"gymnasium:ID that renders rgb_array; {metadata['env']} has observations of shape {shape}."
    )


def _is_atari(env: str) -> bool:
    """Whether a Sebulba run's ``--env`` is one of envpool's Atari games (whose batches take sticky actions)."""
    from podracer.run.config import SebulbaConfig

    return SebulbaConfig.command_line_agent(env) == "impala"


def _check_search(metadata, spec, episodes: int, search=None, env=None) -> None:
    """A planning checkpoint's search trees for ``episodes`` roots (one environment each) at the simulations it plays
    with fit in memory, else one line naming both flags, before the search is traced
    (:func:`podracer.run.capacity.check_search`; ``env``: the JAX environment whose states AlphaZero embeds)."""
    from podracer.run import capacity, compose

    config = compose.agent_config_from(metadata)
    if not hasattr(config, "num_simulations"):
        return
    config = config.replace(**(search or {}))
    capacity.check_search(
        config,
        spec,
        episodes,
        lambda: capacity.env_state_bytes(env),
        f"--episodes {episodes:,}, --num-simulations {config.num_simulations:,}",
    )


def _play_host(metadata, directory, episodes, seed, greedy, max_steps, record, opponent=None, search=None):
    if opponent is not None:
        raise ValueError(f"--opponent: {metadata['env']} is not a two-player game (pgx:NAME).")

    drawn = record and metadata["env"].startswith("gymnasium:")  # the batch draws itself
    options = {"render_mode": "rgb_array"} if drawn else {}
    if metadata.get("sticky_actions") is not None and _is_atari(metadata["env"]):
        options["sticky_action_probability"] = metadata["sticky_actions"]  # as the run played
    env = hostenvs.make_host(metadata["env"], episodes, seed=seed, **options)
    close = lambda: None  # noqa: E731
    try:
        draw, close = _drawing(metadata, env.spec(), env) if record else (None, close)
        agent, params, _ = load(directory, env.spec(), search)
        _check_search(metadata, env.spec(), episodes, search)
        return play_host(
            env, agent, params, episodes, seed=seed, greedy=greedy, max_steps=max_steps, record=record, draw=draw
        )
    finally:
        close()
        env.close()


def _play_jax(metadata, directory, episodes, seed, greedy, max_steps, record, opponent=None, search=None):
    from podracer.run import compose
    from podracer.core.envs import wrappers

    name = metadata["env"].removeprefix("jax:")  # Sebulba's JAX environments too
    opponent = opponent or metadata.get("opponent", "random")
    if isinstance(opponent, tuple):  # ("baseline", DIR): pgx's baseline model, read from DIR
        from podracer.core.envs.pgx import baseline_opponent

        if not name.startswith("pgx:"):
            raise ValueError(f"--opponent baseline: {name} is not a two-player pgx game (pgx:NAME).")
        opponent = baseline_opponent(name.removeprefix("pgx:"), opponent[1])
    env = wrappers.for_evaluation(compose.env_against(name, opponent))
    draw, close = _drawing(metadata, env.spec()) if record else (None, lambda: None)
    try:
        agent, params, _ = load(directory, env.spec(), search)
        _check_search(metadata, env.spec(), episodes, search, env)
        return play_jax(
            env, agent, params, episodes, seed=seed, greedy=greedy, max_steps=max_steps, record=record, draw=draw
        )
    finally:
        close()


def play(
    directory: str,
    episodes: int,
    *,
    seed: int = 0,
    greedy: bool = False,
    max_steps: int = 100_000,
    record: bool = False,
    opponent: str | None = None,
    search: dict | None = None,
):
    """Returns of ``episodes`` episodes of a Sebulba (envpool) or Anakin (JAX) checkpoint, and the first
    episode's frames when ``record`` (pictures, boards, classic control, a gymnasium batch: :func:`_drawing`);
    ``opponent``: a two-player game's other player (``"random"``, ``"greedy"``, ``"perfect"``, ``("baseline",
    DIR)``: pgx's baseline model read from DIR; None: the run's); ``search``: a planning agent's search settings
    instead of the run's (:func:`search_settings`)."""
    from podracer.run import checkpoint

    metadata, _ = checkpoint.newest_metadata(directory)
    mode = metadata.get("mode")
    if mode not in ("sebulba", "anakin"):
        raise ValueError(f"{directory!r} holds a checkpoint of unknown mode {mode!r}.")
    from podracer.core import envs

    jax_env = envs.is_jax_on_host(metadata.get("env", ""))  # a JAX environment Sebulba stepped on the host
    play_fn = _play_host if mode == "sebulba" and not jax_env else _play_jax
    return play_fn(metadata, directory, episodes, seed, greedy, max_steps, record, opponent, search)


def check_output_file(path: str, flag: str) -> None:
    """``path`` can be written (its directory is made if needed): a one-line ``ValueError`` naming ``flag``
    otherwise, before anything is played."""
    if os.path.isdir(path):
        raise ValueError(
            f"{flag} {path!r} is a directory; give a file name (for example {os.path.join(path, 'play.gif')!r})."
        )
    from podracer.run import disk

    parent = os.path.dirname(os.path.abspath(path))
    disk.writable_directory(parent, f"{flag} {path!r}: directory {parent!r}")
    existed = os.path.exists(path)
    try:  # the one sure test (as root, os.access says yes to /proc and read-only mounts)
        with open(path, "ab"):
            pass
    except OSError as error:
        raise ValueError(f"{flag} {path!r} cannot be written: {error.strerror}.") from None
    if not existed:
        os.remove(path)


def gif_unavailable() -> str:
    """Why no GIF can be written here ("" when one can): pillow, the ``video`` extra, is not installed."""
    import importlib.util

    if importlib.util.find_spec("PIL") is not None:
        return ""
    from podracer.core import install

    return f"--gif needs pillow: {install.command('video')}."


def write_gif(frames, path: str, fps: int = 15) -> None:
    from PIL import Image

    height, width = np.asarray(frames[0]).shape[:2]
    scale = max(1, 168 // max(height, width))
    images = [
        Image.fromarray(np.asarray(f, np.uint8)).resize((width * scale, height * scale), Image.NEAREST) for f in frames
    ]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)


def kept_lane(checkpoint_dir: str) -> str:
    """What a population's checkpoint holds, in words: its kept lane and that lane's searched values ("" for a
    checkpoint of one agent)."""
    from podracer.run import checkpoint
    from podracer.core.pbt import lane_label

    step = checkpoint.restored_step(checkpoint_dir)  # the checkpoint played, where one was: the newest intact one
    metadata = checkpoint.read_metadata(checkpoint_dir, step) if step else checkpoint.newest_metadata(checkpoint_dir)[0]
    if "population_lane" not in metadata:
        return ""
    return (
        f"playing lane {metadata['population_lane']} of the population (the best at its last ranking): "
        f"{lane_label(metadata['population_values'])}"
    )
