"""``python -m podracer.sebulba --env Pong``: train with envpool actors and a learner mapped over devices."""

from __future__ import annotations

import sys

from podracer import config, lifetime, parallel


def main(argv=None) -> int:
    cfg = config.parse(config.SebulbaConfig, argv, prog="python -m podracer.sebulba",
                       description="Train in Sebulba mode: envpool actors and a learner mapped over devices.")
    stop, interrupted = lifetime.stop_on_ctrl_c("podracer.sebulba")
    parallel.set_cpu_device_count(cfg.cpu_devices or parallel.available_cores())
    if cfg.compile_cache:
        lifetime.use_compile_cache(cfg.compile_cache_dir)
    from podracer import experiment

    try:
        parallel.initialize(cfg.coordinator, cfg.num_processes, cfg.process_id, auto_detect=cfg.distributed,
                            timeout=cfg.distributed_timeout)
        result = experiment.run_sebulba(cfg, stop=stop)
    except ValueError as error:  # an unknown task or a layout that does not fit the devices
        print(f"podracer.sebulba: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - in a multi-process run, most likely a process that is gone
        if parallel.process_count() > 1:
            parallel.abandon_run("podracer.sebulba", error)
        raise
    if interrupted.is_set():
        print("podracer.sebulba: interrupted; every thread stopped.", file=sys.stderr)
        return 130
    final = result.history[-1]["episode_return"] if result.history else float("nan")  # nan: no episode ended
    if parallel.is_main_process():
        print(f"done: {result.updates} updates; final mean episode return {final:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
