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

from podracer import lifetime  # noqa: E402

# The tests' own programs go to the same per-worker cache: tests that compile the same program share it.
lifetime.use_compile_cache()


def pytest_configure(config):
    config.addinivalue_line("markers", "suite(package, extra=package): the test needs an optional suite's package; "
                                       "skipped, in one line naming the package and its extra, where it is not installed")


# The slowest tests (seconds on the 2-core CI machine, `pytest --durations=25`), started first: with xdist's load
# scheduling (pyproject's addopts) the two workers then share them and the quick tests fill the gaps, instead of one
# slow test running alone at the end (longest processing time first).
SLOW_FIRST = {
    "test_dqn_with_prioritized_replay_learns_jax_cartpole_in_anakin_on_most_seeds": 27,
    "test_r2d2_stores_aligned_sequences_and_learns_the_memory_task": 27,
    "test_sac_learns_pendulum_on_two_of_three_seeds": 23,
    "test_a_lost_process_ends_the_other_with_one_line": 21,
    "test_a_second_run_loads_its_programs_from_the_compile_cache": 21,
    "test_recurrent_agent_solves_the_memory_task_that_feed_forward_cannot": 21,
    "test_two_processes_solve_catch_as_one_process_with_the_same_devices": 20,
    "test_ctrl_c_abandons_a_long_call_and_saves_the_last_completed_update": 20,
    "test_learner_limit_command_prints_and_saves_its_tables": 19,
    "test_agents_learn_cartpole_through_sebulba": 15,
    "test_cli_help_bad_layout_and_a_short_logged_run": 18,
    "test_recurrent_agents_ship_their_start_state_once_per_trajectory_to_several_learners": 16,
    "test_compare_commits_alternates_two_processes_and_compares_their_parameters": 16,
    "test_sigterm_saves_the_last_update_and_the_same_command_with_resume_auto_continues": 15,
    "test_sigterm_stops_joins_saves_and_resume_auto_continues": 15,
    "test_an_interrupted_and_resumed_run_ends_exactly_as_an_uninterrupted_one": 14,
    "test_notebook_executes_and_learns": 14,
    "test_evaluate_plays_an_anakin_checkpoint_and_writes_a_gif": 14,
    "test_a_two_by_two_sweep_equals_separate_runs_of_its_settings": 14,
    "test_replay_and_recurrent_agents_train_seeds_together_as_alone": 11,
    "test_a_sweep_run_ends_with_its_table_plot_and_a_checkpoint_per_setting_and_seed": 13,
    "test_four_seeds_in_one_program_solve_catch": 13,
    "test_gaussian_ppo_learns_pendulum_on_two_of_three_seeds": 12,
    "test_benchmark_command_prints_and_saves_its_table": 12,
}


def pytest_collection_modifyitems(config, items):
    import importlib.util

    items.sort(key=lambda item: -SLOW_FIRST.get(item.originalname or item.name, 0))  # stable: the rest keep their order
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
