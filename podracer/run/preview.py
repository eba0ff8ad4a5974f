"""Watch a run while it trains: ``python -m podracer.cli.preview --checkpoint-dir DIR [--gif preview.gif]``.

Beside a training run that writes checkpoints (``--checkpoint-dir DIR --checkpoint-every K``),
this loads the newest checkpoint whenever a new one appears, plays one greedy episode with it,
prints the return and rewrites the GIF (Atari frames, the Catch board; other tasks print their
return with a note that they cannot be drawn). It ends once the run has ended (the run writes
``DIR/finished.json`` last) and its newest checkpoint has been played.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable
from typing import Annotated

from podracer.run.config import Imports
from podracer.run.config import Flag

FINISHED = "finished.json"  # written by a run into its checkpoint directory when it ends


@dataclasses.dataclass(frozen=True)
class PreviewConfig:
    """``python -m podracer.cli.preview``: play each new checkpoint of a training run."""

    checkpoint_dir: Annotated[str, Flag(metavar="DIR")]  # the --checkpoint-dir of the run to watch
    # rewrite this GIF with each new checkpoint's episode; None: DIR-preview.gif, beside the run's directory (its
    # inside is the run's, locked while it trains)
    gif: str | None = None
    poll_seconds: float = 2.0  # how often to look for a new checkpoint
    seed: int = 0  # seed of the environment the episode is played on
    max_steps: int = 10_000  # an episode longer than this is cut
    # seconds to wait for --checkpoint-dir to hold a first checkpoint (a run not started yet); None: as long as it
    # takes (said once); 0: fail at once when there is none
    wait: float | None = None
    imports: Imports = ()

    def __post_init__(self):
        from podracer.core.agents.hyperparameters import check_finite

        check_finite(self)
        if not self.poll_seconds > 0:
            raise ValueError(f"--poll-seconds must be > 0, got {self.poll_seconds}.")
        if self.max_steps < 1:
            raise ValueError(f"--max-steps must be >= 1, got {self.max_steps}.")
        if self.wait is not None and not self.wait >= 0:
            raise ValueError(f"--wait must be >= 0, got {self.wait}.")


def default_gif(checkpoint_dir: str) -> str:
    """Where the preview of ``checkpoint_dir`` goes without ``--gif``: ``DIR-preview.gif``, beside the directory
    (``runs/ck`` -> ``runs/ck-preview.gif``), never inside the directory a run holds."""
    return os.path.normpath(os.path.abspath(checkpoint_dir)) + "-preview.gif"


def watch(config: PreviewConfig, *, report: Callable[[str], None] = print, timeout: float | None = None) -> list[int]:
    """Plays every new newest checkpoint of ``config.checkpoint_dir`` until the run has ended (or ``timeout``
    seconds); returns the checkpoints (updates) it played."""
    from podracer.run import checkpoint
    from podracer.run import evaluate

    if config.gif:
        evaluate.check_output_file(config.gif, "--gif")
    gif = config.gif or default_gif(config.checkpoint_dir)
    played: list[int] = []
    drawable, waiting, start = True, False, time.monotonic()
    if unavailable := evaluate.gif_unavailable():
        if config.gif:
            raise ValueError(unavailable)
        notice = unavailable.replace("--gif needs", "a GIF needs")
        print(f"podracer.cli.preview: {notice} Printing returns only.", file=sys.stderr, flush=True)
        drawable = False
    while timeout is None or time.monotonic() - start < timeout:
        if os.path.isfile(config.checkpoint_dir):
            raise ValueError(f"--checkpoint-dir {config.checkpoint_dir!r} is a file, not a directory.")
        finished = os.path.exists(os.path.join(config.checkpoint_dir, FINISHED))  # read first: no step is missed
        found = checkpoint.steps(config.checkpoint_dir)
        if found and (not played or found[-1] > played[-1]):
            try:
                returns, frames = _play(evaluate, config, drawable)
            except Exception:  # the run rotated the checkpoint away while it was read: take the newest again
                if found[-1] in checkpoint.steps(config.checkpoint_dir):
                    raise
                continue
            drawable = frames is not None
            played.append(found[-1])
            step = checkpoint.restored_step(config.checkpoint_dir)  # the one played: the newest intact one
            line = f"checkpoint step_{step}: return {float(returns[0]):.2f}"
            if drawable:
                evaluate.write_gif(frames, gif)
                line += f"; wrote {gif} ({len(frames)} frames)"
            report(line)
            continue
        if finished:
            report(f"the run has ended; played {len(played)} checkpoint(s).")
            return played
        if not found:
            waiting = _wait_for_a_checkpoint(config, time.monotonic() - start, waiting, report)
        time.sleep(config.poll_seconds)
    return played


def _wait_for_a_checkpoint(config: PreviewConfig, waited: float, said: bool, report) -> bool:
    """No checkpoint yet: past ``--wait`` a one-line error; else said once (returns that it was said)."""
    directory = config.checkpoint_dir
    if config.wait is not None and waited >= config.wait:
        where = "does not exist" if not os.path.isdir(directory) else "holds no checkpoint"
        raise ValueError(f"--checkpoint-dir {directory!r} {where} (after --wait {config.wait:g} s).")
    if not said:
        where = "does not exist yet" if not os.path.isdir(directory) else "holds no checkpoint yet"
        report(f"{directory} {where}: waiting for a run to save one there (--wait SECONDS to give up).")
    return True


def _play(evaluate, config: PreviewConfig, drawable: bool):
    """``(returns, frames or None)`` of one greedy episode of the newest checkpoint."""
    if drawable:
        try:
            return evaluate.play(
                config.checkpoint_dir, 1, seed=config.seed, greedy=True, max_steps=config.max_steps, record=True
            )
        except ValueError as error:
            if "--gif needs" not in str(error):
                raise
            print(
                f"podracer.cli.preview: {error.args[0].replace('--gif needs', 'a GIF needs')} Printing returns only.",
                file=sys.stderr,
                flush=True,
            )
    returns, _ = evaluate.play(config.checkpoint_dir, 1, seed=config.seed, greedy=True, max_steps=config.max_steps)
    return returns, None
