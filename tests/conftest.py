"""Eight CPU devices for every test, so pmap, device splits and collectives really run."""

import os

# XLA's backend optimizations off (LLVM -O0): the tests' programs are small and compiled once or twice each, so
# compilation, not running, is most of their time; this cut the suite's by about a fifth. Speed is measured in
# benchmarks/, where the flag is not set. XLA_FLAGS="--xla_backend_optimization_level=2" pytest runs the tests on
# XLA's default, optimized code.
#
# The fast tier, on JAX 0.10 (Python 3.11's newest, the README's stack), also has XLA:CPU compile fusions with its older
# emitters (pytest_configure below), which compile in less than half the time (PPO, DQN and IMPALA updates: 4.9-5.9 s,
# then 2.0-2.2 s, 2-core AMD EPYC, 2026-12-02; whole launches: benchmarks/results/compile_options.md) and run about 8 %
# slower at this level: the fast tier's tests are mostly compilation, the slow tier's learning runs mostly running,
# so the slow tier keeps XLA's emitters. The flag is gone from JAX 0.12's XLA, which rejects it and compiles faster
# without it. The tests assert what programs compute, never how XLA emits them.
from children import older_emitters  # noqa: E402  (tests/children.py)

os.environ["XLA_FLAGS"] = " ".join(
    ["--xla_backend_optimization_level=0"]
    + [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    + ["--xla_force_host_platform_device_count=8"]
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The entry points keep compiled programs in $XDG_CACHE_HOME/podracer/jax: one fresh cache per test worker,
# shared by the commands it runs, never the user's. Not one for every worker: JAX's cache, bounded as podracer bounds
# it, locks the directory for every read and write, and two workers sharing one ran 10-25 % slower (five test files,
# JAX 0.12, 2-core AMD EPYC, 2026-12-02: 216 s and 246 s against 198 s and 199 s, alternating), and once only the
# programs of compile_cache.COMPILE_CACHE_MIN_SECONDS or more were kept, the whole fast tier 6:30 against 6:15 (724
# test-seconds against 702): the tests rarely compile another test's program (147 loads from a shared cache, 140
# from per-worker ones).
import tempfile  # noqa: E402

os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="podracer-test-cache-")
# Commands run without --log-dir write runs/ENV__AGENT__SEED__TIME: here, not in the checkout.
os.environ["PODRACER_RUNS_DIR"] = tempfile.mkdtemp(prefix="podracer-test-runs-")

import jax  # noqa: E402
import pytest  # noqa: E402

from podracer.run import compile_cache  # noqa: E402
from podracer.core import install  # noqa: E402

# The tests' own programs go to the same per-worker cache: tests that compile the same program share it.
compile_cache.use_compile_cache()


TIERS = ("fast", "slow", "all")

# Tests of the fast tier that took 15 s or more each in a full fast run (pytest --durations, 2-core AMD EPYC,
# 2026-11-25: 12.6 min in all, over the README's 8): they run in the slow tier, as if marked slow.
SLOW_BY_MEASUREMENT = {
    # 12.5-15 s each in the same run: the fast tier took 8.1 min in CI after the first move (oldest stack)
    "tests/test_anakin.py::test_run_trains_seeds_together_on_two_devices_as_it_trains_each_alone",
    "tests/test_anakin.py::test_a_lane_of_a_run_of_seeds_closes_on_the_evaluation_of_its_seed_alone",  # 13 s
    "tests/test_adapters.py::test_playground_spec_and_episode_ends",
    "tests/test_anakin.py::test_parameters_stay_identical_on_every_device_while_environments_differ",
    "tests/test_adapters.py::test_jumanji_vectors_discrete_and_multi_discrete_actions_and_episode_ends",
    "tests/test_masks.py::test_no_agent_takes_an_illegal_action_in_anakin[r2d2]",
    "tests/test_examples.py::test_a_second_run_loads_its_programs_from_the_compile_cache",
    "tests/test_optim.py::test_sac_moves_its_temperature_at_its_own_rate[None]",
    "tests/test_recurrent.py::test_structured_torso_shapes_and_clipping",
    "tests/test_replay.py::test_sequences_come_back_aligned_with_their_start_state",
    "tests/test_sebulba.py::test_cli_help_bad_layout_and_a_short_logged_run",
    "tests/test_sebulba.py::test_sigterm_stops_joins_saves_and_resume_auto_continues",
    "tests/test_sebulba.py::test_recurrent_agents_ship_their_start_state_once_per_trajectory_to_several_learners",
    "tests/test_faults.py::test_a_lost_process_ends_the_other_with_one_line[anakin-0]",
    "tests/test_examples.py::test_ctrl_c_abandons_a_long_call_and_saves_the_last_completed_update",
    "tests/test_sweep.py::test_a_sweep_run_ends_with_its_table_plot_and_a_checkpoint_per_setting_and_seed",
    "tests/test_examples.py::test_notebook_executes_and_learns",
    "tests/test_anakin.py::test_replay_and_recurrent_agents_train_seeds_together_as_alone[r2d2-memory-hyper0]",
    "tests/test_evaluate.py::test_evaluate_plays_an_anakin_checkpoint_and_writes_a_gif",
    "tests/test_sweep.py::test_a_two_by_two_sweep_equals_separate_runs_of_its_settings",
    "tests/test_reproduce.py::test_a_quick_row_trains_measures_random_play_and_writes_only_when_asked",
    "tests/test_recurrent.py::test_recurrent_ppo_learns_from_whole_sequences_that_replay_what_the_actor_saw",
    "tests/test_sebulba.py::test_agents_learn_cartpole_through_sebulba[ppo]",
    "tests/test_faults.py::test_a_lost_process_ends_the_other_with_one_line[anakin-1]",
    "tests/test_normalize.py::test_sebulba_counts_every_learned_step_in_the_statistics_on_two_learner_devices",
    "tests/test_sebulba.py::test_two_processes_average_their_learners",
    "tests/test_extensions.py::test_an_installed_package_registers_its_task_and_agent_through_entry_points",
    "tests/test_examples.py::test_four_seeds_in_one_program_solve_catch",
    "tests/test_anakin.py::test_an_interrupted_and_resumed_run_ends_exactly_as_an_uninterrupted_one",
    "tests/test_sebulba.py::test_host_memory_stays_flat_over_a_long_run",
    "tests/test_normalize.py::test_normalized_runs_resume_exactly_and_evaluate_plays_with_the_saved_statistics",
    "tests/test_synthetic_benchmark.py::test_training_step_on_two_devices_equals_one_device_on_the_concatenated_batch",
    "tests/test_adapters.py::test_craftax_symbolic_and_pixels",
    "tests/test_replay.py::test_prioritized_sampling_frequencies_follow_priorities",
    "tests/test_extensions.py::test_own_agent_example_learns_catch_on_most_seeds",
    "tests/test_anakin.py::test_agents_learn_catch[ppo-hyper2-32-32-60]",
    "tests/test_schedules.py::test_dqn_linear_epsilon_decays_over_its_share_of_the_run_counted_by_the_learner",
    "tests/test_recurrent.py::test_unroll_equals_stepping_and_a_first_step_starts_from_the_initial_state",
    "tests/test_anakin.py::test_replay_and_recurrent_agents_train_seeds_together_as_alone[dqn-catch-hyper1]",
    "tests/test_networks.py::test_cell_actions_give_each_cell_a_logit_from_its_neighbourhood_with_shared_weights",
    # 10 s or more each, proved by no faster test, in a fast run of 6:15 (2026-12-02, 2-core AMD EPYC, 675 tests):
    # wandb's service process, a late process of a 2-process run, a signal to a run in a process of its own, the
    # start-up line from the launch of a process of its own, a run.toml's replay (two runs), classic control drawn
    "tests/test_examples.py::test_wandb_offline_run_holds_the_metrics",
    "tests/test_faults.py::test_a_process_later_than_the_distributed_timeout_is_named_late_not_gone",
    "tests/test_examples.py::test_sigterm_saves_the_last_completed_update",
    "tests/test_startup.py::test_a_preset_run_compiles_each_program_once_and_says_its_start_up_once[catch-flags0]",
    "tests/test_record.py::test_a_run_directory_replays_to_the_same_records",
    "tests/test_video.py::test_evaluate_draws_an_anakin_cartpole_and_refuses_a_vector_it_cannot_draw",
    # 10-16 s each in the next (5:49): the README's train-and-load lines (a 60-update run), the deadlock probe of
    # vmapped orthogonal initialisations in a process of its own
    "tests/test_facade.py::test_the_readmes_train_and_load_lines_run_as_written",
    "tests/test_networks.py::test_orthogonal_init_equals_flax_and_vmapped_seeds_never_deadlock",
    # 7.7-9 s each in the same run, each search or run compiled for itself: random moves' rate, a match's seats
    # and the ladder, Sebulba's masks, navix's pictures, a requeued job's run directory
    "tests/test_planning.py::test_random_moves_replace_the_searchs_move_at_their_rate_and_leave_its_targets",
    "tests/test_planning.py::test_a_match_seats_each_player_first_in_half_the_games_and_the_ladder_rates_its_snapshots",
    "tests/test_masks.py::test_no_agent_takes_an_illegal_action_in_sebulba",
    "tests/test_pictures.py::test_navix_views_are_colour_coded",
    "tests/test_record.py::test_a_requeued_job_keeps_one_run_directory",
    # 39 s and 24 s of a quiet run whose fast tier took 7:56 (2026-11-30, AMD EPYC, 641 tests)
    "tests/test_planning.py::test_alphazero_trains_in_self_play_and_its_evaluation_plays_random_legal_moves",
    "tests/test_planning.py::test_evaluate_plays_a_planning_checkpoint_with_the_search_settings_it_is_given",
    # 12 s and 6.8 s (2026-12-02, AMD EPYC): --envpool-xla's runs against the host loop's, two Sebulba runs each (the
    # fast tier keeps the XLA step's own equivalence with recv)
    "tests/test_envpool.py::test_sebulba_with_envpool_xla_trains_to_the_same_parameters_as_the_host_loop[None]",
    "tests/test_envpool.py::test_sebulba_with_envpool_xla_trains_to_the_same_parameters_as_the_host_loop[lstm]",
}


# The slow tier's longest tests (CI's oldest stack, 2026-12-02: 217 s down to 35 s): they start first, alternately
# at the head of each half of the list, the halves pytest-xdist's worksteal deals its two workers at the start (it
# steals from the end of a worker's queue), so that no long test starts last and leaves one worker running alone.
LONGEST_FIRST = (
    "tests/test_muzero.py::test_muzero_balances_cartpole_in_sebulba_in_most_runs",
    "tests/test_accelerator.py::test_smoke_runs_every_row_at_toy_sizes_on_the_cpu",
    "tests/test_muzero.py::test_muzero_solves_catch_in_anakin_on_most_seeds",
    "tests/test_reproduce.py::test_a_sebulba_rows_seeds_trained_side_by_side_score_as_one_after_the_other",
    "tests/test_planning.py::test_alphazero_in_self_play_beats_random_play_at_tic_tac_toe_on_most_seeds",
    "tests/test_population.py::test_a_population_on_two_processes_equals_it_on_one",
    "tests/test_continuous.py::test_td3_learns_pendulum_on_four_of_five_seeds[fasttd3]",
    "tests/test_population.py::test_a_population_with_one_sane_lane_learns_and_never_copies_a_diverging_one",
    "tests/test_sebulba.py::test_agents_learn_cartpole_through_sebulba[pqn]",
    "tests/test_adapters.py::test_craftax_symbolic_and_pixels",
    "tests/test_accelerator.py::test_the_wheelhouse_installs_with_no_index_and_its_trimmed_envpool_steps_pong",
    "tests/test_replay.py::test_dqn_with_prioritized_replay_learns_jax_cartpole_in_anakin_on_most_seeds",
    "tests/test_continuous.py::test_ppo_with_gsde_reaches_mountaincar_continuous_goal_on_two_of_three_seeds",
    "tests/test_examples.py::test_two_processes_solve_catch_as_one_process_with_the_same_devices",
    "tests/test_continuous.py::test_td3_learns_pendulum_on_four_of_five_seeds[td3]",
)


def _longest_first(items) -> None:
    rank = {nodeid: i for i, nodeid in enumerate(LONGEST_FIRST)}
    longest = sorted((item for item in items if item.nodeid in rank), key=lambda item: rank[item.nodeid])
    if not longest:
        return
    rest = [item for item in items if item.nodeid not in rank]
    first, second = longest[0::2], longest[1::2]
    cut = max(0, len(items) // 2 - len(first))
    items[:] = first + rest[:cut] + second + rest[cut:]


def pytest_addoption(parser):
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="fast",
        help="fast (default): every test not marked slow, the README's 5-minute command; slow: only the "
        "tests marked slow (learning bars over seeds, multi-process runs, benchmark commands); all: both. "
        "A test named by its node id always runs.",
    )


def pytest_configure(config):
    # before anything starts JAX's backends (collection imports the test modules): the tier's XLA flags, and the
    # tier told to the processes the tests start (tests/children.py)
    tier = config.getoption("--tier")
    os.environ["PODRACER_TEST_TIER"] = tier
    if tier == "fast":
        os.environ["XLA_FLAGS"] = " ".join([*os.environ["XLA_FLAGS"].split(), *older_emitters()])
    config.addinivalue_line(
        "markers",
        "suite(package, extra=package): the test needs an optional suite's package; "
        "skipped, in one line naming the package and its extra, where it is not installed",
    )
    config.addinivalue_line(
        "markers",
        "slow: a long test (about 7 s or more of a 2-core machine): run by `pytest --tier slow` (CI runs both tiers)",
    )


def pytest_collection_modifyitems(config, items):
    import importlib.util

    tier = config.getoption("--tier")
    named = any("::" in arg for arg in config.args)  # tests named by node id run whatever their tier
    for item in items:
        if item.nodeid in SLOW_BY_MEASUREMENT:
            item.add_marker(pytest.mark.slow)
    if tier != "all" and not named:
        keep, drop = [], []
        for item in items:
            (keep if (item.get_closest_marker("slow") is not None) == (tier == "slow") else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    _longest_first(items)
    for item in items:
        for mark in item.iter_markers("suite"):
            package = mark.args[0]
            if importlib.util.find_spec(package) is None:
                extra = mark.kwargs.get("extra", package)
                item.add_marker(pytest.mark.skip(reason=f"{package} is not installed: {install.command(extra)}"))


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


# Where a test's time goes (CONTRIBUTING.md, "Where the suite's time goes"): PODRACER_TEST_PROFILE=FILE pytest ...
# appends one JSON line per test to FILE: its wall seconds (setup, call and teardown), the seconds JAX spent tracing,
# lowering and compiling in the test's own process, the programs it loaded from the compilation cache, and the
# processes it started (a subprocess's own compilation is inside its wall time, not in the compile seconds).
_PROFILE = os.environ.get("PODRACER_TEST_PROFILE")
_COMPILE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
    "/jax/core/compile/backend_compile_duration": "compile_s",
}
_counts: dict = {}

if _PROFILE:
    import json
    import sys
    import time

    def _on_duration(event, duration, **_):
        key = _COMPILE_EVENTS.get(event)
        if key is not None:
            _counts[key] = _counts.get(key, 0.0) + duration

    def _on_event(event, **_):
        if event == "/jax/compilation_cache/cache_hits":
            _counts["cache_hits"] = _counts.get("cache_hits", 0) + 1

    def _on_audit(event, _args):
        if event == "subprocess.Popen":
            _counts["processes"] = _counts.get("processes", 0) + 1

    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    jax.monitoring.register_event_listener(_on_event)
    sys.addaudithook(_on_audit)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        _counts.clear()
        start = time.perf_counter()
        yield
        record = {"test": item.nodeid, "wall_s": round(time.perf_counter() - start, 3)}
        record.update({k: round(v, 3) if isinstance(v, float) else v for k, v in _counts.items()})
        with open(_PROFILE, "a") as out:
            out.write(json.dumps(record) + "\n")
