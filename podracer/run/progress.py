"""What a run says while it runs: the heartbeat's status line (env steps, phase, eta), the warning of a run that
needs more than a day, and the beat of every progress line (:class:`Progress`).
"""

from __future__ import annotations

import time
from collections.abc import Callable


from podracer.run import lifetime, logging, startup


SLOW_RUN_SECONDS = 86_400  # a run whose ETA is longer than this is said to be slow, once


class Progress:
    """What a run is doing, for the heartbeat line printed when no progress line has come for a while: env steps
    done of ``total_steps`` and the phase (starting, compiling, training), or instead what ``describe()`` says
    (Sebulba's learner and actor threads), then the ETA; and, once, a warning when the ETA passes a day
    (``what``: the flag that sets the run's length). ``done()``: the env steps done now, where the feeder knows them
    between progress lines (Sebulba's learner counts its updates)."""

    def __init__(
        self,
        total_steps: float,
        steps: float,
        main: bool,
        *,
        what: str = "",
        describe: Callable[[], list[str]] | None = None,
        first: str = "first call",
        done: Callable[[], float] | None = None,
    ):
        self.total, self.steps, self.main, self.what, self.describe = total_steps, steps, main, what, describe
        self.done = done
        self.first = first  # the start-up's last phase: until the first progress line
        self.phase = "starting"
        self.first_line: tuple[float, float] | None = None  # (env steps, time) of the first progress line
        self.heartbeat: lifetime.Heartbeat | None = None
        self.warned = False

    def event(self, text: str) -> None:
        """A feeder's progress: ``"compiling"`` (said), then ``"compiled in S s"`` (not said: the start-up line that
        comes with the first progress line gives the run's one compile figure)."""
        compiling = text == "compiling"
        self.phase = "compiling" if compiling else "training"
        if not compiling:
            startup.mark("compile")
        if self.main and compiling:
            print("podracer: compiling ...", flush=True)

    def advanced(self, steps: float) -> None:
        """A progress line: ``steps`` env steps done. Beats the heartbeat; warns once of a run longer than a day."""
        self.steps, self.phase = steps, "training"
        if self.first_line is None:
            self.first_line = (steps, time.monotonic())
        if self.heartbeat is not None:
            self.heartbeat.beat()
        eta = self.eta()
        if self.main and not self.warned and eta is not None and eta > SLOW_RUN_SECONDS:
            self.warned = True
            print(
                f"podracer: at this pace the run needs about {eta / SLOW_RUN_SECONDS:.1f} days more"
                + (f" ({self.what} {self.total:,.0f})." if self.what else "."),
                flush=True,
            )

    def logging_to(self, log: Callable[[dict], None] | None):
        """``log`` preceded by :meth:`advanced` for every summary (its ``env_steps``)."""

        def write(summary):
            startup.mark(self.first)
            if self.main and (said := startup.line()):  # once, before the first progress line
                print(f"podracer: {said}", flush=True)
            self.advanced(summary.get("env_steps", self.steps))
            if log is not None:
                log(summary)

        return write

    def eta(self) -> float | None:
        """Seconds the rest of the run takes at the pace since the first progress line, as that line's own ``eta``
        counts it (:meth:`podracer.run.logging.ConsoleSink.eta`): one ETA per run; None before a pace is known."""
        return logging.time_left(self.total, self.first_line, self.steps, time.monotonic())

    def status(self) -> str:
        if self.done is not None:
            self.steps = max(self.steps, self.done())
        eta = self.eta()
        if self.describe is not None:
            parts = [f"env steps {self.steps:,.0f}", *self.describe()]
        else:
            parts = [f"env steps {self.steps:,.0f}/{self.total:,.0f}", self.phase]
        if eta is not None:
            parts.append(f"eta {logging.duration(eta)}")
        return " | ".join(parts)


__all__ = ["Progress", "SLOW_RUN_SECONDS"]
