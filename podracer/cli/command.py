"""The ``podracer`` command: ``podracer anakin | sebulba | evaluate | preview``.

Every training command goes through one start-up and exit path (:func:`train`): the config parsed from the
command line, Ctrl-C turned into a stop event before JAX starts, the CPU device count, the persistent
compilation cache, the multi-process start, and the exit statuses (0 done, 1 no finite result, an update that was
not finite (``--on-nonfinite stop``) or more than half of them (``skip``, ``continue``), 2 bad input
or a layout that does not fit; a run stopped by a signal, after saving its last completed update: 130 Ctrl-C,
143 SIGTERM, 138 SIGUSR1). ``examples/anakin_catch.py`` and ``python -m
podracer.sebulba`` call it with their own names and take the same flags.
"""

from __future__ import annotations

import math
import os
import signal
import sys
from collections.abc import Callable, Sequence

from podracer import __version__
from podracer.core import install
from podracer.run import startup

# Nothing that imports JAX is imported here: ``podracer --help`` and ``--version`` print at once; a command imports
# what it needs (the config tree, the devices) when it runs.

COMMANDS = {
    "anakin": "train in Anakin mode: JAX environments and the learner in one program per device",
    "sebulba": "train in Sebulba mode: host environments (envpool, gymnasium) stepped by actor threads",
    "evaluate": "play a saved agent (its behaviour policy, or --greedy), optionally to a GIF",
    "preview": "play each new checkpoint of a training run as it is saved",
}

USAGE = (
    "usage: podracer {anakin,sebulba,evaluate,preview} [FLAGS ...] | --version\n\n"
    + "\n".join(f"  {name:9s} {text}" for name, text in COMMANDS.items())
    + ("\n\n`podracer COMMAND --help` lists a command's flags.")
)

ANAKIN_DESCRIPTION = "Train in Anakin mode on every device of this machine (or of every host of a pod slice)"
SEBULBA_DESCRIPTION = "Train in Sebulba mode: envpool actors and a learner mapped over devices"


def train(
    default,
    argv: Sequence[str] | None,
    *,
    prog: str,
    name: str,
    description: str,
    run: Callable,
    report: Callable[[object, object], int],
    stopped: str = "",
) -> int:
    """The one start-up and exit path of a training command.

    ``default`` is the config (or config class) whose defaults the command line starts from; ``prog`` names the
    command in usage lines, ``name`` in its messages. ``run(cfg, stop)`` trains; ``report(cfg, result)`` prints
    the outcome in the main process and returns the exit status; ``stopped`` is what a run stopped by a signal
    adds to its last line.
    """
    from podracer.run import banner, compile_cache, lifetime, multihost, parallel
    from podracer.cli import parser

    cfg = parser.parse(default, argv, prog=prog, description=description)
    startup.mark("imports")
    startup.count_programs()
    given_log_dir = cfg.log_dir
    if cfg.process_id in (None, 0) and not cfg.distributed:  # the main process (--distributed: known once started)
        try:
            cfg = _log_dir(cfg, name)
        except ValueError as error:
            print(f"{name}: error: {error}", file=sys.stderr, flush=True)
            return 2
    if cfg.process_id in (None, 0):
        print(banner.in_lines(f"{name}: {settings_line(cfg)}"), flush=True)
    lifetime.quiet_dependencies()
    stop, interrupted = lifetime.stop_on_signals(name, saving=bool(cfg.checkpoint_dir))
    parallel.set_cpu_device_count(cfg.cpu_devices or parallel.available_cores())
    try:
        if cfg.compile_cache:
            compile_cache.use_compile_cache(cfg.compile_cache_dir)
        multihost.initialize(
            cfg.coordinator,
            cfg.num_processes,
            cfg.process_id,
            auto_detect=cfg.distributed,
            timeout=cfg.distributed_timeout,
        )
        if cfg.distributed and parallel.is_main_process():
            cfg = _log_dir(cfg, name)
        result = run(cfg, stop)
    # a layout that does not fit the devices found, an unknown task, a checkpoint directory that does not fit
    except ValueError as error:
        if parallel.process_count() > 1 and multihost.lost_peer(error):  # a collective's error, raised as ValueError
            multihost.abandon_run(name, error)
        if cfg.log_dir and cfg.log_dir != given_log_dir:  # a run directory made for this command, which is refused:
            from podracer.run import rundir

            rundir.discard_if_untrained(cfg.log_dir)
        print(f"{name}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - in a multi-process run, most likely a process that is gone
        from podracer.run.nonfinite import Diverged
        from podracer.run.saving import Finished

        if isinstance(error, Finished):  # --resume of a run that is done: nothing was compiled
            if parallel.is_main_process():
                print(f"{name}: {error}", flush=True)
            return 0
        if isinstance(error, Diverged):  # every process of the run stopped at the same update
            print(f"{name}: error: {divergence_line(cfg, error)}", file=sys.stderr, flush=True)
            return 1
        from podracer.run.sebulba.threads import ActorFailed

        if isinstance(error, ActorFailed):  # an environment that raised or hung: one line, the traceback in a file
            print(f"{name}: error: {actor_failure_line(cfg, error)}", file=sys.stderr, flush=True)
            return 1
        if parallel.process_count() > 1:
            multihost.abandon_run(name, error)
        raise
    if interrupted.is_set():
        saved = "; nothing saved (no --checkpoint-dir)"
        if cfg.checkpoint_dir:  # what the stop left: the newest complete checkpoint, or that no update had completed
            from podracer.run import checkpoint

            done = checkpoint.steps(cfg.checkpoint_dir)
            saved = (
                f"; saved the last completed update ({checkpoint.describe_newest(cfg.checkpoint_dir)}); "
                f"{lifetime.RESUME_HINT}"
                if done
                else "; no update had completed: nothing saved (the same command starts afresh)"
            )
        how = "interrupted" if lifetime.stop_signal() == signal.SIGINT else f"stopped by {lifetime.stop_reason()}"
        print(f"{name}: {how}{stopped}{saved}.", file=sys.stderr, flush=True)
        lifetime.exit_soon(lifetime.exit_status())  # said it stopped: nothing may hold the process past this
        return lifetime.exit_status()
    return report(cfg, result)


def _log_dir(cfg, name: str):
    """``cfg`` with its log directory settled (:func:`podracer.run.rundir.settle_log_dir`), said when it is
    new."""
    from podracer.run import rundir

    cfg, said = rundir.settle_log_dir(cfg)
    if said:
        print(f"{name}: {said}", flush=True)
    return cfg


def divergence_line(cfg, error) -> str:
    """What a run stopped by a non-finite update (:class:`~podracer.run.nonfinite.Diverged`) says: the update, what was
    not finite, the flags most likely at fault with their values, and the newest checkpoint, which is finite."""
    from podracer.core.agents.hyperparameters import flag, hyperparameters
    from podracer.run.nonfinite import PopulationDiverged

    lanes = isinstance(error, PopulationDiverged)  # --on-nonfinite skip or continue: a saved lane may not be finite
    searched = error.lanes[0] if lanes else error.values
    values = hyperparameters(cfg.agent)
    whose = f" ({error.label.split(':')[0]}'s)" if error.values else ""  # a lane's or a setting's own values
    suspects = [f"{flag(name)} {value:.3g}{whose}" for name, value in error.values.items()]
    if lanes:
        suspects.append(f"--pbt-search {' '.join(cfg.pbt_search)} (narrow the ranges)")
    defaults = hyperparameters(type(cfg.agent)())
    numeric = [n for n, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    changed = [n for n in numeric if n not in searched and values[n] != defaults.get(n)]  # set by the run: first
    suspects += [f"{flag(name)} {values[name]:g} (default {defaults[name]:g})" for name in changed]
    suspects += [
        f"{flag(name)} {values[name]:g}"
        for name in ("learning_rate", "max_grad_norm", "reward_scale")
        if name in numeric and name not in searched and name not in changed
    ]
    kept = "nothing was saved (no --checkpoint-dir)"
    if cfg.checkpoint_dir:
        from podracer.run import checkpoint

        kept = f"no checkpoint had been saved in {cfg.checkpoint_dir}"
        if checkpoint.steps(cfg.checkpoint_dir):
            newest = checkpoint.describe_newest(cfg.checkpoint_dir)
            kept = f"the newest checkpoint is {newest}" if lanes else f"the newest checkpoint, {newest}, is finite"
    instead = "" if lanes else "; --on-nonfinite skip discards such updates instead"
    return (
        f"{error}: the run stops; {kept}. Most likely at fault: {', '.join(suspects) or 'the learning rate'} "
        f"(lower the rate, clip gradients, scale rewards){instead}."
    )


def actor_failure_line(cfg, failure) -> str:
    """What a Sebulba run stopped by an actor thread says (:class:`~podracer.run.sebulba.threads.ActorFailed`): the
    environment (``--env``) and its exception, or the stuck thread; the newest checkpoint; where the traceback is
    (``--log-dir``'s ``traceback.txt``, else a temporary file), so that the console holds one line."""
    import tempfile
    import traceback

    error = failure.error
    if error is None:  # stopped answering: the watch's message names the thread and what it waits on
        said = f"{failure} (--env {cfg.env})"
    elif failure.doing == "environment":
        said = f"the environment --env {cfg.env} raised {type(error).__name__}: {error} ({failure.thread})"
    else:
        said = f"{failure.thread} failed during {failure.doing or 'its work'}: {type(error).__name__}: {error}"
    if cfg.checkpoint_dir:
        from podracer.run import checkpoint

        said += f"; the run stopped; its newest checkpoint is {checkpoint.describe_newest(cfg.checkpoint_dir)}"
    else:
        said += "; the run stopped (no --checkpoint-dir: nothing saved)"
    if error is not None:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        try:
            path = os.path.join(cfg.log_dir, "traceback.txt") if cfg.log_dir else None
            if path is None:
                handle, path = tempfile.mkstemp(prefix="podracer-traceback-", suffix=".txt")
                os.close(handle)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            said += f"; its traceback is in {path}"
        except OSError:
            said += " (its traceback could not be written)"
    return said + "."


def settings_line(cfg) -> str:
    """What a training run uses, said before it starts: its preset's flags (``--preset``), or, without one, the
    agent's settings in full and the presets there are for its environment."""
    from podracer.run import config
    from podracer.cli import presets
    from podracer.core.agents.hyperparameters import hyperparameters

    mode = "anakin" if isinstance(cfg, config.AnakinConfig) else "sebulba"
    if cfg.preset and presets.is_file(cfg.preset):
        return f"preset {cfg.preset}: the settings recorded there (flags on the command line override them)"
    if cfg.preset:
        flags = " ".join(presets.get(cfg.preset).argv())
        return f"preset {cfg.preset}: {flags} (flags on the command line override it)"
    values = dict(hyperparameters(cfg.agent))
    values.update(normalize_observations=cfg.normalize_observations, normalize_rewards=cfg.normalize_rewards)
    settings = " ".join(_shown(name, value) for name, value in values.items() if value is not None)  # unset: left out
    known = presets.for_env(cfg.env, mode)
    hint = f"; --preset {' or --preset '.join(known)} has settings measured on it" if known else ""
    return f"no --preset: {cfg.agent_name} on {cfg.env} with {settings}{hint}"


def _shown(name: str, value) -> str:
    """``name = value`` as a flag: ``--name value``, ``--name`` (true), ``--no-name`` (false)."""
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return f"--{flag} " + (" ".join(map(str, value)) if isinstance(value, tuple) else str(value))


def _train_anakin(cfg, stop):
    from podracer.run import compose

    return compose.train_anakin(cfg, stop=stop)


def _report_anakin(cfg, result) -> int:
    from podracer.core.stats import interquartile_mean
    from podracer.run import compose, logging, parallel, nonfinite

    self_play = getattr(cfg, "opponent", "random") == "self"
    said, final = logging.closing(result.history, cfg.eval_policy, compose.opponent_name(cfg), self_play)
    if cfg.sweep or cfg.population:  # their figures are per setting, or per lane, above: no average of them here
        said = f"final returns: {'per setting, in the table' if cfg.sweep else 'the best lane'} above"
    if parallel.is_main_process():
        if cfg.num_seeds > 1 and not cfg.sweep:  # a sweep prints its own table
            greedy = "eval_return_per_seed" in result.history[-1]  # (or sampled: --eval-policy)
            window, _ = logging.training_window(result.history, "episode_return_per_seed")
            returns = window.get("episode_return_per_seed", [float("nan")] * cfg.num_seeds)
            counts = window.get("episodes_per_seed", [None] * len(returns))
            shown = result.history[-1]["eval_return_per_seed"] if greedy else returns
            for i, value in enumerate(shown):
                if greedy:
                    said_seed = f"{cfg.eval_policy} evaluation return {value:.3f} (training {returns[i]:.3f})"
                else:
                    said_seed = f"training return {value:.3f}{logging.episodes_said(counts[i])}"
                print(f"seed {cfg.seed + i}: final {said_seed}")
            print(
                f"over {len(shown)} seeds: mean {sum(shown) / len(shown):.3f}, min {min(shown):.3f}, "
                f"interquartile mean {interquartile_mean(shown):.3f}"
            )
    discarded, most = nonfinite.nonfinite_said(cfg.on_nonfinite, result.nonfinite)
    if parallel.is_main_process():
        print(
            f"{said}; {discarded + '; ' if discarded else ''}steady state {result.env_steps_per_second:,.0f} env "
            f"steps/s; {startup.programs_said()}",
            flush=True,
        )
    return _most_not_finite(cfg, most) or (0 if math.isfinite(final) else 1)


def _most_not_finite(cfg, most: bool) -> int:
    """Exit status 1, said in one line, for a run that discarded (or trained on) more than half its updates."""
    from podracer.run import parallel

    if not most:
        return 0
    if parallel.is_main_process():
        print(
            f"podracer: more than half of the run's updates were not finite (--on-nonfinite {cfg.on_nonfinite}): "
            "its agent is not a trained one (lower --learning-rate, clip gradients with --max-grad-norm, or scale "
            "rewards); exit status 1",
            flush=True,
        )
    return 1


def anakin(
    argv: Sequence[str] | None = None,
    *,
    prog: str = "podracer anakin",
    name: str = "podracer anakin",
    default=None,
    description: str = ANAKIN_DESCRIPTION,
    report: Callable[[object, object], int] = _report_anakin,
) -> int:
    """``podracer anakin``: train with ``default``'s settings (:class:`~podracer.run.config.AnakinConfig`'s when None)
    changed by the command line; the exit status."""
    if default is None:
        from podracer.run import config

        default = config.AnakinConfig
    return train(default, argv, prog=prog, name=name, description=description, run=_train_anakin, report=report)


def _train_sebulba(cfg, stop):
    from podracer.run import compose

    return compose.run_sebulba(cfg, stop=stop)


def _report_sebulba(cfg, result) -> int:
    """Sebulba's closing line, in Anakin's form: the closing figure (the policy it played named), what was discarded,
    the updates, the steady state (the median of the progress lines' env steps/s after the first, which holds the
    start-up) and the XLA programs."""
    import statistics

    from podracer.run import logging, parallel, nonfinite

    ended = [h for h in result.history if h.get("episodes", 1) > 0 or "eval_return" in h]
    discarded, most = nonfinite.nonfinite_said(cfg.on_nonfinite, result.nonfinite)
    if parallel.is_main_process():
        said = logging.closing(ended, cfg.eval_policy)[0] if ended else "no episode ended"
        paces = [h["sps"] for h in result.history[1:] if math.isfinite(h.get("sps", math.nan))]
        steady = f"; steady state {statistics.median(paces):,.0f} env steps/s" if paces else ""
        print(
            f"{said}{'; ' + discarded if discarded else ''}; {result.updates:,} updates{steady}; "
            f"{startup.programs_said()}",
            flush=True,
        )
    return _most_not_finite(cfg, most)


def sebulba(
    argv: Sequence[str] | None = None, *, prog: str = "podracer sebulba", name: str = "podracer sebulba"
) -> int:
    """``podracer sebulba``: train in Sebulba mode; the exit status."""
    from podracer.run import config

    return train(
        config.SebulbaConfig,
        argv,
        prog=prog,
        name=name,
        description=SEBULBA_DESCRIPTION,
        run=_train_sebulba,
        report=_report_sebulba,
        stopped="; every thread stopped",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``podracer COMMAND [FLAGS ...]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"podracer {__version__} (from {install.origin()})")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "anakin":
        return anakin(rest)
    if command == "sebulba":
        return sebulba(rest)
    if command == "evaluate":
        from podracer.cli import evaluate as evaluate_command

        return evaluate_command.main(rest, prog="podracer evaluate", name="podracer evaluate")
    if command == "preview":
        from podracer.cli import preview as preview_command

        return preview_command.main(rest, prog="podracer preview", name="podracer preview")
    print(
        f"podracer: error: unknown command {command!r}; choose one of {', '.join(COMMANDS)} (podracer --help).",
        file=sys.stderr,
    )
    return 2


__all__ = ["COMMANDS", "anakin", "main", "sebulba", "train"]


if __name__ == "__main__":  # python -m podracer.cli behaves as the podracer command
    sys.exit(main())
