"""``python -m podracer.sebulba --env Pong``: train with envpool actors and a pmap-ed learner."""

from __future__ import annotations

import os
import signal
import sys
import threading

from podracer import config, parallel


def _stop_on_ctrl_c(stop: threading.Event, interrupted: threading.Event) -> None:
    """Routes Ctrl-C to ``stop`` instead of raising ``KeyboardInterrupt`` somewhere in the run.

    SIGINT is blocked before JAX and envpool start their worker threads, so those
    threads inherit the block: a signal delivered to one of them could break a blocking
    wait there and hang the run. A waiter thread takes the signal synchronously; if it
    lands on a thread started earlier, the Python-level handler does the same. A second
    Ctrl-C exits at once.
    """
    count = [0]

    def on_ctrl_c(*_):
        count[0] += 1
        if count[0] > 1:
            os._exit(130)
        interrupted.set()
        stop.set()
        print("podracer.sebulba: Ctrl-C: stopping (again to quit at once) ...", file=sys.stderr, flush=True)

    signal.signal(signal.SIGINT, on_ctrl_c)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def wait():
        while True:
            signal.sigwait({signal.SIGINT})
            on_ctrl_c()

    threading.Thread(target=wait, name="ctrl-c", daemon=True).start()


def main(argv=None) -> int:
    from podracer.sebulba.run import SebulbaConfig

    cfg = config.parse(SebulbaConfig, argv, description="Train in Sebulba mode: envpool actors and a pmap-ed learner.")
    stop, interrupted = threading.Event(), threading.Event()
    _stop_on_ctrl_c(stop, interrupted)
    parallel.set_cpu_device_count(cfg.cpu_devices or parallel.available_cores())
    from podracer.sebulba.run import run

    try:
        parallel.initialize(cfg.coordinator, cfg.num_processes, cfg.process_id, auto_detect=cfg.distributed)
        result = run(cfg, stop=stop)
    except ValueError as error:  # an unknown task or a layout that does not fit the devices
        print(f"podracer.sebulba: error: {error}", file=sys.stderr)
        return 2
    if interrupted.is_set():
        print("podracer.sebulba: interrupted; every thread stopped.", file=sys.stderr)
        return 130
    final = result.history[-1]["episode_return"] if result.history else float("nan")  # nan: no episode ended
    if parallel.is_main_process():
        print(f"done: {result.updates} updates; final mean episode return {final:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
