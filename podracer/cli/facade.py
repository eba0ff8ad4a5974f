"""The Python entry: ``podracer.train(...)`` trains as the command line does, and ``podracer.load(dir)`` gives a
policy that acts on observations in one call.

    import podracer

    run = podracer.train(env="catch", agent="ppo", num_updates=100)   # podracer anakin --env catch --agent ppo ...
    policy = podracer.load(run.log_dir + "/checkpoint")                # or any --checkpoint-dir
    actions = policy.act(observations)                                 # a batch of observations -> of actions

``train`` takes the command line's settings as keywords (``num_updates=100`` is ``--num-updates 100``; a list is
several values; ``True`` and ``False`` are ``--x`` and ``--no-x``), with its defaults: every CPU core a device
(where JAX has not started yet), a run directory that records the run, and a checkpoint of the end in
``LOG_DIR/checkpoint`` unless ``checkpoint_dir`` says where. Bad settings raise ``ValueError`` with the command
line's one line.
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any, NamedTuple


class Trained(NamedTuple):
    """What :func:`train` leaves: the run's ``config``, its ``result`` (``anakin.RunResult`` or
    ``sebulba.SebulbaResult``), its ``log_dir`` and ``checkpoint_dir``, and the exit status the command line would
    have ended with (0: trained; 1: it diverged or discarded most updates, said above)."""

    config: Any
    result: Any
    log_dir: str | None
    checkpoint_dir: str | None
    status: int


def argv_of(settings: dict[str, Any]) -> list[str]:
    """Keyword settings as command-line tokens: ``num_updates=100`` -> ``--num-updates 100``."""
    argv = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False:
            argv.append("--no-" + name.replace("_", "-"))
        elif isinstance(value, list | tuple):
            argv += [flag, *map(str, value)]
        elif value is not None:
            argv += [flag, str(value)]
    return argv


def train(mode: str = "anakin", **settings) -> Trained:
    """Trains as ``podracer MODE`` with ``settings`` as its flags (see the module's docstring) and returns the run
    (:class:`Trained`)."""
    from podracer.cli import command as cli, command_line, config
    from podracer.run import parallel

    if mode not in ("anakin", "sebulba"):
        raise ValueError(f"podracer.train: mode is 'anakin' or 'sebulba', got {mode!r}.")
    if "cpu_devices" not in settings and (started := parallel.started_cpu_devices()):
        settings["cpu_devices"] = started  # JAX has started: its devices are the run's
    cls = config.AnakinConfig if mode == "anakin" else config.SebulbaConfig
    prog = f"podracer.train({mode!r})"
    error = io.StringIO()
    try:
        with contextlib.redirect_stderr(error):
            parsed = config.parse(cls, argv_of(settings), prog=prog)
            if not parsed.log_dir and not parsed.no_log_dir:  # the command line's run directory, made now
                settings["log_dir"] = command_line.default_log_dir(parsed.env, parsed.agent_name, parsed.seed)
            if not parsed.checkpoint_dir and settings.get("log_dir"):
                settings["checkpoint_dir"] = os.path.join(settings["log_dir"], "checkpoint")
    except SystemExit:
        raise ValueError(error.getvalue().strip().splitlines()[-1]) from None
    kept: dict[str, Any] = {}
    said = cli._report_anakin if mode == "anakin" else cli._report_sebulba

    def report(cfg, result) -> int:
        kept.update(config=cfg, result=result)
        return said(cfg, result)

    status = cli.train(
        cls,
        argv_of(settings),
        prog=prog,
        name=prog,
        description="",
        run=cli._train_anakin if mode == "anakin" else cli._train_sebulba,
        report=report,
    )
    if "result" not in kept:
        raise RuntimeError(f"{prog}: the run ended with exit status {status} before it trained (said above).")
    cfg = kept["config"]
    return Trained(cfg, kept["result"], cfg.log_dir, cfg.checkpoint_dir, status)


class Policy:
    """A trained agent that acts: ``act(observations)`` takes a batch of observations (the environment's, as the
    run saw them) and returns a batch of actions, greedy by default (``greedy=False``: sampled with ``key``). A
    recurrent agent keeps its state between calls (``reset()`` starts episodes afresh)."""

    def __init__(self, directory: str):
        import jax

        from podracer.run import checkpoint, play
        from podracer.cli import evaluate

        metadata, _ = checkpoint.newest_metadata(directory)
        self.spec = _spec_of(metadata)
        self.agent, self.params, self.metadata = evaluate.load(directory, self.spec)
        if getattr(self.agent, "plans", False) and metadata.get("agent") == "alphazero":
            raise ValueError(
                f"podracer.load: {directory} holds AlphaZero, which searches the game's own states; play it with "
                "podracer evaluate (or podracer.cli.evaluate.play)."
            )
        self._policies = {g: play.policy(self.agent, g) for g in (True, False)}
        self._core, self._batch = None, None
        self._key = jax.random.key(0)

    def reset(self) -> None:
        """Forget a recurrent agent's state: the next call starts every episode."""
        self._core, self._batch = None, None

    def act(self, observations, key=None, *, greedy: bool = True, action_mask=None):
        """Actions for a batch of observations (``[B, ...]``, the leading axis the batch)."""
        import jax
        import jax.numpy as jnp

        batch = jax.tree.leaves(observations)[0].shape[0]
        first = jnp.zeros((batch,), bool)
        if self._core is None or self._batch != batch:
            self._core, self._batch, first = self.agent.initial_state(batch), batch, jnp.ones((batch,), bool)
        if key is None:
            self._key, key = jax.random.split(self._key)
        action, self._core = self._policies[greedy](self.params, observations, key, self._core, first, action_mask)
        return action


def _spec_of(metadata: dict):
    """The environment spec a checkpoint's agent was built for: its JAX environment's (wrapped as evaluation wraps
    it), or its host environment's."""
    from podracer.cli import build
    from podracer.core import envs
    from podracer.run import hostenvs
    from podracer.core.envs import wrappers

    name = metadata["env"].removeprefix("jax:")
    if metadata.get("mode") == "sebulba" and not envs.is_jax_on_host(metadata["env"]):
        env = hostenvs.make_host(name, 1, seed=0)
        try:
            return env.spec()
        finally:
            env.close()
    return wrappers.for_evaluation(build.env_against(name, metadata.get("opponent", "random"))).spec()


def load(directory: str) -> Policy:
    """The agent of the newest checkpoint in ``directory`` (a ``--checkpoint-dir``), ready to act (:class:`Policy`)."""
    if not os.path.isdir(directory):
        raise ValueError(f"podracer.load: {directory!r} is not a directory (a --checkpoint-dir of a run).")
    return Policy(directory)


__all__ = ["Policy", "Trained", "argv_of", "load", "train"]
