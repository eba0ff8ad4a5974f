"""Eight CPU devices for every test, so pmap, device splits and collectives really run."""

import os

# XLA's backend optimizations off (LLVM -O0): the tests' programs are small and compiled once or twice each, so
# compilation, not running, is most of their time; this cut the suite's by about a fifth. Speed is measured in
# benchmarks/, where the flag is not set. XLA_FLAGS="--xla_backend_optimization_level=2" pytest runs the tests on
# XLA's default, optimized code.
os.environ["XLA_FLAGS"] = " ".join(
    ["--xla_backend_optimization_level=0"]
    + [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    + ["--xla_force_host_platform_device_count=8"]
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The entry points keep compiled programs in $XDG_CACHE_HOME/podracer/jax: one fresh cache per test worker,
# shared by the commands it runs, never by two workers at once, never the user's.
import tempfile  # noqa: E402

os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="podracer-test-cache-")

import jax  # noqa: E402
import pytest  # noqa: E402

from podracer import compile_cache  # noqa: E402

# The tests' own programs go to the same per-worker cache: tests that compile the same program share it.
compile_cache.use_compile_cache()


TIERS = ("fast", "slow", "all")


def pytest_addoption(parser):
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="fast",
        help="fast (default): every test not marked slow, the README's 8-minute command; slow: only the "
        "tests marked slow (learning bars over seeds, multi-process runs, benchmark commands); all: both. "
        "A test named by its node id always runs.",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "suite(package, extra=package): the test needs an optional suite's package; "
        "skipped, in one line naming the package and its extra, where it is not installed",
    )
    config.addinivalue_line(
        "markers",
        "slow: a long test (about 10 s or more of a quiet 2-core machine): run by "
        "`pytest --tier slow` (CI runs both tiers)",
    )


def pytest_collection_modifyitems(config, items):
    import importlib.util

    tier = config.getoption("--tier")
    named = any("::" in arg for arg in config.args)  # tests named by node id run whatever their tier
    if tier != "all" and not named:
        keep, drop = [], []
        for item in items:
            (keep if (item.get_closest_marker("slow") is not None) == (tier == "slow") else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    for item in items:
        for mark in item.iter_markers("suite"):
            package = mark.args[0]
            if importlib.util.find_spec(package) is None:
                extra = mark.kwargs.get("extra", package)
                item.add_marker(pytest.mark.skip(reason=f"{package} is not installed: pip install 'podracer[{extra}]'"))


@pytest.fixture
def optimized_xla(monkeypatch):
    """Programs compiled ahead of time (``lower(...).compile()``, as ``anakin.run`` does) during the test get XLA's
    default backend optimizations back: for learning tests whose time goes into running long programs rather
    than compiling them (DQN on CartPole: 35 s at -O0, 19 s at -O2 here)."""
    compile = jax.stages.Lowered.compile

    def optimized(self, compiler_options=None, **kwargs):
        return compile(self, {"xla_backend_optimization_level": 2, **(compiler_options or {})}, **kwargs)

    monkeypatch.setattr(jax.stages.Lowered, "compile", optimized)


@pytest.fixture(scope="session")
def devices():
    found = jax.devices()
    assert len(found) == 8, f"tests expect 8 CPU devices, found {found}"
    return found
