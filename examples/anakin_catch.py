"""Solve Catch in Anakin mode on every device of this machine (or of every host of a pod slice).

    python examples/anakin_catch.py                 # defaults solve Catch
    python examples/anakin_catch.py --agent ppo --log-dir runs/catch
    python examples/anakin_catch.py --coordinator 127.0.0.1:9876 --num-processes 2 --process-id 0
"""

from __future__ import annotations

import math
import sys

from podracer import anakin, config, parallel


def main(argv=None) -> int:
    cfg = config.parse(anakin.AnakinConfig, argv, description=__doc__.split("\n\n")[0])
    parallel.set_cpu_device_count(cfg.cpu_devices or parallel.available_cores())
    try:
        parallel.initialize(cfg.coordinator, cfg.num_processes, cfg.process_id, auto_detect=cfg.distributed)
        result = anakin.train(cfg)
    except ValueError as error:  # a layout that does not fit the devices found
        print(f"anakin_catch.py: error: {error}", file=sys.stderr)
        return 2
    final = result.history[-1]["episode_return"]
    if parallel.is_main_process():
        print(
            f"final mean episode return {final:.3f}; steady state {result.env_steps_per_second:,.0f} env steps/s; "
            f"compile {result.compile_seconds:.1f} s",
            flush=True,
        )
    return 0 if math.isfinite(final) else 1


if __name__ == "__main__":
    sys.exit(main())
