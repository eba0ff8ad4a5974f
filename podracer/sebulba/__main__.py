"""``python -m podracer.sebulba --env Pong``: train with envpool actors and a pmap-ed learner."""

from __future__ import annotations

import math
import sys

from podracer import config, parallel


def main(argv=None) -> int:
    from podracer.sebulba.run import SebulbaConfig

    cfg = config.parse(SebulbaConfig, argv, description=__doc__.strip("`").split("``")[0] or None)
    parallel.set_cpu_device_count(cfg.cpu_devices or parallel.available_cores())
    from podracer.sebulba.run import run

    try:
        result = run(cfg)
    except ValueError as error:  # an unknown task or a layout that does not fit the devices
        print(f"podracer.sebulba: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("podracer.sebulba: interrupted; every thread stopped.", file=sys.stderr)
        return 130
    final = result.history[-1]["episode_return"] if result.history else float("nan")
    if parallel.is_main_process():
        print(f"done: {result.updates} updates; final mean episode return {final:.2f}", flush=True)
    return 0 if math.isfinite(final) or not result.history else 0


if __name__ == "__main__":
    sys.exit(main())
