"""Run lifetime for entry points: Ctrl-C turned into a stop event."""

from __future__ import annotations

import os
import signal
import sys
import threading


def stop_on_ctrl_c(program: str) -> tuple[threading.Event, threading.Event]:
    """Routes Ctrl-C to ``stop`` instead of raising ``KeyboardInterrupt`` somewhere in the run;
    returns ``(stop, interrupted)``. Call it in an entry point before JAX starts.

    SIGINT is blocked before JAX and envpool start their worker threads, so those
    threads inherit the block: a signal delivered to one of them could break a blocking
    wait there and hang the run. A waiter thread takes the signal synchronously; if it
    lands on a thread started earlier, the Python-level handler does the same. A second
    Ctrl-C exits at once.
    """
    stop, interrupted = threading.Event(), threading.Event()
    count = [0]

    def on_ctrl_c(*_):
        count[0] += 1
        if count[0] > 1:
            os._exit(130)
        interrupted.set()
        stop.set()
        print(f"{program}: Ctrl-C: stopping (again to quit at once) ...", file=sys.stderr, flush=True)

    signal.signal(signal.SIGINT, on_ctrl_c)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def wait():
        while True:
            signal.sigwait({signal.SIGINT})
            on_ctrl_c()

    threading.Thread(target=wait, name="ctrl-c", daemon=True).start()
    return stop, interrupted
