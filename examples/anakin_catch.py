"""Solve Catch in Anakin mode on every device of this machine (or of every host of a pod slice).

    python examples/anakin_catch.py                 # defaults solve Catch
    python examples/anakin_catch.py --agent ppo --log-dir runs/catch
    python examples/anakin_catch.py --num-seeds 4     # seeds 0-3 in one compiled program
    python examples/anakin_catch.py --coordinator 127.0.0.1:9876 --num-processes 2 --process-id 0
"""

from __future__ import annotations

import math
import sys

from podracer import anakin, config, lifetime, parallel


def main(argv=None) -> int:
    cfg = config.parse(config.AnakinConfig, argv, prog="examples/anakin_catch.py", description=__doc__.split("\n\n")[0])
    stop, interrupted = lifetime.stop_on_ctrl_c("anakin_catch.py")
    parallel.set_cpu_device_count(cfg.cpu_devices or parallel.available_cores())
    if cfg.compile_cache:
        lifetime.use_compile_cache(cfg.compile_cache_dir)
    from podracer import experiment

    try:
        parallel.initialize(cfg.coordinator, cfg.num_processes, cfg.process_id, auto_detect=cfg.distributed,
                            timeout=cfg.distributed_timeout)
        result = experiment.train_anakin(cfg, stop=stop)
    except ValueError as error:  # a layout that does not fit the devices found, a checkpoint directory that does not fit
        print(f"anakin_catch.py: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - in a multi-process run, most likely a process that is gone
        if parallel.process_count() > 1:
            parallel.abandon_run("anakin_catch.py", error)
        raise
    if interrupted.is_set():
        print("anakin_catch.py: interrupted; saved the last completed update." if cfg.checkpoint_dir
              else "anakin_catch.py: interrupted.", file=sys.stderr)
        return 130
    last = result.history[-1]
    final = last["episode_return"]
    if parallel.is_main_process():
        if cfg.num_seeds > 1 and not cfg.sweep:  # a sweep prints its own table
            returns = last["episode_return_per_seed"]
            for i, value in enumerate(returns):
                print(f"seed {cfg.seed + i}: final mean episode return {value:.3f}")
            print(f"over {len(returns)} seeds: mean {final:.3f}, min {min(returns):.3f}, "
                  f"interquartile mean {anakin.interquartile_mean(returns):.3f}")
        print(
            f"final mean episode return {final:.3f}; steady state {result.env_steps_per_second:,.0f} env steps/s; "
            f"compile {result.compile_seconds:.1f} s",
            flush=True,
        )
    return 0 if math.isfinite(final) else 1


if __name__ == "__main__":
    sys.exit(main())
