"""The environment a test gives a process it starts (a command line, an example, a worker)."""

import importlib.metadata
import os


def older_emitters() -> list[str]:
    """JAX 0.10's XLA:CPU flag for its older fusion emitters, which compile in less than half the time
    (tests/conftest.py); none on JAX 0.12, whose XLA rejects it, or where ``XLA_FLAGS`` already names it."""
    if "--xla_cpu_use_fusion_emitters" in os.environ.get("XLA_FLAGS", ""):
        return []  # the caller's own choice
    try:
        major, minor = (int(part) for part in importlib.metadata.version("jaxlib").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return []
    return ["--xla_cpu_use_fusion_emitters=false"] if (major, minor) < (0, 11) else []


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
