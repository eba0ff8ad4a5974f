"""The Python entry that trains: ``podracer.train(...)`` trains as the command line does (its settings are the
command line's flags, parsed by the same parser); ``podracer.load(dir)`` (:mod:`podracer.run.policy`) gives a policy
that acts on observations in one call.

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

    def __repr__(self) -> str:
        """A few lines, not the trained state (what a notebook shows for a bare ``run``): what trained, how far, its
        last figures, where it logged and saved; the state is ``run.result.state``."""
        mode = "anakin" if hasattr(self.result, "compile_seconds") else "sebulba"
        last = self.result.history[-1] if self.result is not None and self.result.history else {}
        figures = ", ".join(
            f"{name} {_figure(last[name])}"
            for name in ("episode_return", "eval_return", "greedy_return")
            if name in last and last[name] is not None
        )
        lines = [
            f"Trained(podracer.train({mode!r}): {self.config.agent_name} on {self.config.env}, status {self.status}",
            f"  env steps: {last.get('env_steps', 0):,.0f}" + (f"; last record: {figures}" if figures else ""),
            f"  log_dir: {self.log_dir}",
            f"  checkpoint_dir: {self.checkpoint_dir}",
            "  (the trained state: .result.state; every record: .result.history)",
            ")",
        ]
        return "\n".join(lines)


def _figure(value) -> str:
    """A record's figure as the closing line prints it (a list of per-seed figures: its range)."""
    if isinstance(value, (list, tuple)):
        finite = [float(v) for v in value if v is not None]
        return f"{min(finite):.3g} to {max(finite):.3g} over {len(value)} seeds" if finite else "none"
    return f"{float(value):.3g}"


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
    from podracer.cli import command as cli, parser
    from podracer.run import rundir, config
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
            parsed = parser.parse(cls, argv_of(settings), prog=prog)
            if not parsed.log_dir and not parsed.no_log_dir:  # the command line's run directory, made now
                settings["log_dir"] = rundir.default_log_dir(parsed.env, parsed.agent_name, parsed.seed)
            if not parsed.checkpoint_dir and settings.get("log_dir"):
                settings["checkpoint_dir"] = os.path.join(settings["log_dir"], "checkpoint")
    except SystemExit:
        raise ValueError(error.getvalue().strip().splitlines()[-1]) from None
    if settings.get("log_dir") and not parsed.log_dir:  # the command line's line for the directory it makes
        print(f"{prog}: {rundir.logging_to(settings['log_dir'], off='no_log_dir=True')}", flush=True)
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
        if settings.get("log_dir") and not parsed.log_dir:  # the run directory made above, for a run refused
            rundir.discard_if_untrained(settings["log_dir"])
        raise RuntimeError(f"{prog}: the run ended with exit status {status} before it trained (said above).")
    cfg = kept["config"]
    return Trained(cfg, kept["result"], cfg.log_dir, cfg.checkpoint_dir, status)


__all__ = ["Trained", "argv_of", "train"]
