"""The coordinator of a multi-process run, in a process of its own: ``python -m podracer.run.coordinator ADDRESS N``.

JAX's coordination service normally runs inside process 0. When process 0 dies, every other process's client
loses the service at once and JAX's runtime ends it with a C++ check failure (SIGABRT and a stack dump),
before podracer's own watch can end it with one line. Process 0 therefore starts the service here, in a
child process (:func:`podracer.run.multihost.initialize`): when process 0 dies, the service stays up a little
longer, the others notice process 0's silence through podracer's heartbeat and end with one line, status 1.

The service binds ``[::]:PORT`` of ``ADDRESS`` for ``N`` processes, prints ``ready`` and stays up until its
parent has exited, then :data:`LINGER_SECONDS` more (so the others can shut down or notice). It ignores
Ctrl-C and SIGTERM, which reach the whole process group: the run's processes stop and save first.
"""

from __future__ import annotations

import os
import signal
import sys
import time

LINGER_SECONDS = 10.0  # after the parent has exited: longer than podracer's peer silence (5 s) and its poll


def service_factory():
    """JAX's (private) factory of the coordination service, or None where this JAX has none by that name."""
    try:
        from jax._src.lib import _jax
    except ImportError:
        return None
    return getattr(_jax, "get_distributed_runtime_service", None)


def main(argv: list[str] | None = None) -> int:
    address, num_processes, heartbeat, shutdown = (argv or sys.argv[1:])[:4]
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(signum, signal.SIG_IGN)
    parent = os.getppid()
    make = service_factory()
    try:
        service = make(
            "[::]:" + address.rsplit(":", 1)[1],
            int(num_processes),
            heartbeat_timeout=int(heartbeat),
            shutdown_timeout=int(shutdown),
        )
    except Exception as error:  # noqa: BLE001 - the port is taken, or the address cannot be bound
        print(f"error: {str(error).splitlines()[0][:200]}", flush=True)
        return 2
    print("ready", flush=True)
    while os.getppid() == parent:  # reparented once the parent has exited
        time.sleep(0.2)
    time.sleep(LINGER_SECONDS)
    del service
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
