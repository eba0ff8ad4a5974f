"""The environment a test gives a process it starts (a command line, an example, a worker)."""

import os


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child that sets its own CPU device count (``--cpu-devices``, or one per
    core), with ``extra``. In the fast tier the child compiles as the tests do (tests/conftest.py: XLA's backend
    optimisations off, JAX 0.10's older fusion emitters; the fast tier's children run short programs, compiling is
    most of their time); in the slow tier, whose children run learning runs, with XLA's defaults."""
    env = dict(os.environ)
    flags = [f for f in env.pop("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    if flags and env.get("PODRACER_TEST_TIER") == "fast":
        env["XLA_FLAGS"] = " ".join(flags)
    return {**env, **extra}
