"""The learner-limit, commit-comparison and compile-profile benchmarks: the matmuls they take from a step, and
their command lines."""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import benchmark_scripts  # tests/benchmark_scripts.py

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
REPO = BENCHMARKS.parent


@pytest.mark.slow
def test_learner_limit_command_prints_and_saves_its_tables(tmp_path):
    out = tmp_path / "limit"
    run = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "learner_limit.py"),
            "--agents",
            "ppo",
            "a2c",
            "--envs",
            "catch",
            "--num-envs",
            "4",
            "--rounds",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert run.returncode == 0, run.stderr
    assert "| agent | env | envs | minibatch | SGD steps | matmuls/step |" in run.stdout
    assert (
        "| agent | env | envs | rollout | value pass + GAE | shuffles | SGD steps | learner step | update |"
        in run.stdout
    )
    data = json.loads(out.with_suffix(".json").read_text())
    assert " cores of " in data["machine"]  # the CPU model is named
    ppo, a2c = data["rows"]
    minibatch = 4 * 128 // 4
    assert (ppo["agent"], ppo["sgd_steps"], ppo["minibatch"]) == ("ppo", 16, minibatch)
    # PPO's separate policy and value MLPs on Catch (50 inputs; layers 64, 64, then 3 logits or 1 value): each layer's
    # forward product and weight gradient, and the input gradient of every layer but the first, read from the jaxpr.
    assert ppo["matmuls_per_step"] == 6 + 6 + 4
    layers = [(50, 64), (64, 64), (64, 3), (50, 64), (64, 64), (64, 1)]
    inner = [(k, n) for i, (k, n) in enumerate(layers) if i % 3]
    flops = 2 * minibatch * (2 * sum(k * n for k, n in layers) + sum(k * n for k, n in inner))
    assert ppo["matmul_mflop_per_step"] == pytest.approx(flops / 1e6, rel=1e-9)
    assert (a2c["agent"], a2c["sgd_steps"], a2c["ms"]["prepare"], a2c["ms"]["shuffle"]) == ("a2c", 1, None, None)
    for row in (ppo, a2c):
        assert row["bare_gflops"] > 0 and row["sgd_gflops"] > 0 and row["sgd_over_bare"] > 0
        assert row["ms"]["update"] > 0 and row["ms"]["rollout"] > 0
    bad = subprocess.run(
        [sys.executable, str(BENCHMARKS / "learner_limit.py"), "--rounds", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--rounds must be >= 1, got 0." in bad.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs git and a git checkout")
def test_compare_commits_alternates_two_processes_and_compares_their_parameters(tmp_path):
    out = tmp_path / "compare"
    run = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "compare_commits.py"),
            "--against",
            "HEAD",
            "--num-envs",
            "4",
            "--updates-per-call",
            "2",
            "--rounds",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert run.returncode == 0, run.stderr
    assert "| round | today (s) | HEAD (s) | speed ratio (today / HEAD) |" in run.stdout
    data = json.loads(out.with_suffix(".json").read_text())
    assert len(data["ratios"]) == 2 and len(data["seconds"]["today"]) == 2 and len(data["seconds"]["HEAD"]) == 2
    assert all(r > 0 for r in data["ratios"]) and data["median_ratio"] > 0
    unchanged = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD", "--", "podracer"]).returncode == 0
    if unchanged:  # the same code on both sides, from the same seed: the very same parameters
        assert data["params_max_abs_diff"] == 0.0 and data["params_close"]
    bad = subprocess.run(
        [sys.executable, str(BENCHMARKS / "compare_commits.py"), "--against", "no-such-revision"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1] == (
        f"--against: 'no-such-revision' is not a commit of {REPO.resolve()}."
    )


@pytest.mark.slow
def test_compile_profile_times_each_program_of_a_cold_launch_beside_another_revision(tmp_path):
    out = tmp_path / "profile"
    command = [sys.executable, str(BENCHMARKS / "compile_profile.py"), "--presets", "catch", "--rounds", "1",
               "--against", "HEAD", "--out", str(out)]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(out.with_suffix(".json").read_text())
    today, other = (data["presets"]["catch"][side] for side in data["sides"])
    # the update scanned over a host call: traced, lowered and compiled by XLA's backend, on both sides
    assert all(program["update"]["backend"] > 0 and program["update"]["trace"] > 0
               for program in (today["programs"], other["programs"]))  # fmt: skip
    assert today["compile_phase_s"] > 0 and data["presets"]["catch"]["ratio"] > 0
    assert "| update |" in out.with_suffix(".md").read_text()
    bad = subprocess.run([sys.executable, str(BENCHMARKS / "compile_profile.py"), "--against", "no-such-revision"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.strip().startswith("--against: 'no-such-revision' is not a commit of")


@pytest.mark.slow
@pytest.mark.suite("gymnax")
def test_sac_vs_rejax_podracer_side_answers_whole_runs_and_a_missing_peer_is_one_line(tmp_path):
    """The podracer side of ``benchmarks/sac_vs_rejax.py`` (rejax's needs an environment of its own): it compiles
    its whole run, then answers each ``run SEED`` with that run's seconds."""
    worker = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / "sac_vs_rejax.py"), "--worker", "podracer", "--env-steps", "1100"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = worker.communicate("run 1\nquit\n", timeout=300)
    assert worker.returncode == 0, err
    ready, ran = (json.loads(line) for line in out.splitlines())
    assert ready["compile_s"] > 0 and ready["settings"]["replay_ratio"] == 256.0 and ran["seconds"] > 0
    missing = subprocess.run(
        [sys.executable, str(BENCHMARKS / "sac_vs_rejax.py"), "--rejax-python", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    assert missing.stderr.splitlines()[-1].endswith(f"--rejax-python: no such interpreter: {tmp_path / 'none'}")


def test_compile_options_compares_each_launch_with_the_defaults_in_its_round():
    script = benchmark_scripts.load("compile_options")
    runs = []
    for r, (base, faster) in enumerate([(10.0, 8.0), (12.0, 9.0), (9.0, 9.9)]):
        for option in script.OPTIONS:
            total = {"default": base, "O1": faster}.get(option, base)
            runs.append({"round": r, "preset": "catch", "option": option, "load": 1.0, "total_s": total,
                         "compile_s": 4.0, "update_xla_s": 2.0, "sps": 1000.0})  # fmt: skip
    text = script.table(runs, ["catch"], 3)
    o1 = next(line for line in text.splitlines() if "optimization_level=1" in line)
    assert o1.endswith("| 0.80 |")  # the median of 0.80, 0.75 and 1.10, each against its own round's default
    assert next(line for line in text.splitlines() if "(none)" in line).endswith("| 10.0 |  |")


def test_time_to_target_leaves_imports_out_of_both_sides():
    script = benchmark_scripts.load("time_to_target")
    runs = [
        {"round": 0, "side": side, "cache": cache, "load": 1.0, "to_target_s": seconds, "total_s": seconds + 3,
         "reached_at": 51200.0, "final": 500.0, "imports_s": imports}
        for side, cache, seconds, imports in [("podracer", "cold", 9.0, 1.0), ("podracer", "warm", 4.0, 1.0),
                                              ("purejaxrl", "cold", 24.0, 8.0), ("purejaxrl", "warm", 19.0, 8.0)]
    ]  # fmt: skip
    row = next(
        line for line in script.table(runs, ["podracer", "purejaxrl"], 1).splitlines() if "| purejaxrl |" in line
    )
    assert row.endswith("| 8.0 | 2.67 | 2.00 |")  # 24 / 9; (24 - 8) / (9 - 1)


def test_time_to_target_counts_every_import_once_from_pythons_own_report():
    """Imports are read from ``python -X importtime``: each import no other import made, lazy ones included,
    counted once (its cumulative time holds the imports it made)."""
    script = benchmark_scripts.load("time_to_target")
    report = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:       100 |        100 |   _io",
            "import time:       300 |        400 | site",
            "import time:       200 |        200 |     b.c",
            "import time:       500 |        700 |   b",
            "import time:      1000 |       1700 | a",
            "podracer: started in 1.0 s",
            "import time:       250 |        250 | lazy",
        ]
    )
    assert script.import_seconds(report) == pytest.approx((400 + 1700 + 250) / 1e6)
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import json, time; t = time.monotonic(); import email.message"],
        capture_output=True,
        text=True,
    )
    lines = [line for line in run.stderr.splitlines() if line.startswith("import time:") and "us]" not in line]
    assert any("|   " in line for line in lines)  # nested imports, inside their parents' cumulative time
    assert 0 < script.import_seconds(run.stderr) * 1e6 < sum(int(line.split("|")[1]) for line in lines)


@pytest.mark.slow
def test_actor_step_times_both_forms_of_the_round_trip_and_they_act_alike(tmp_path):
    """The two forms of a Sebulba actor's step run the same compiled policy: from one key they give the same actions
    and extras; the script prints both forms' medians and writes only when asked."""
    if importlib.util.find_spec("envpool") is None:
        pytest.skip("needs envpool")
    script = benchmark_scripts.load("actor_step")
    out = tmp_path / "actor_step"
    run = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "actor_step.py"),
            "--preset",
            "cartpole-sebulba",
            "--num-envs",
            "4",
            "--steps",
            "20",
            "--rounds",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "| before |" in run.stdout and "| now |" in run.stdout and "**before / now: median " in run.stdout
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["num_envs"] == 4 and len(data["ratios"]) == 3 and set(data["us_per_step"]) == {"before", "now"}

    import jax
    import numpy as np

    from podracer.core import agents
    from podracer.run import hostenvs
    from podracer.run import plan as plans
    from podracer.run.sebulba.actor import make_act

    env = hostenvs.make_host("CartPole-v1", 4, 0)
    try:
        timestep, spec = env.reset(), env.spec()
    finally:
        env.close()
    plan = plans.sebulba_plan(num_envs_per_actor=4, rollout_length=8, total_env_steps=64, num_learner_devices=1)
    agent = agents.make("ppo", spec, run=plan.facts)
    device = jax.devices()[0]
    params = jax.device_put(agent.init(jax.random.key(0), timestep.observation), device)
    forms = script._forms(make_act(agent), params, device)
    state, first = agent.initial_state(4), np.ones(4, bool)
    results = [forms[name](timestep.observation, jax.random.key(3), state, first) for name in ("before", "now")]
    np.testing.assert_array_equal(results[0][0], results[1][0])
    jax.tree.map(np.testing.assert_array_equal, results[0][1], results[1][1])


@pytest.mark.slow
@pytest.mark.suite("gymnax")
def test_arithmetic_floor_counts_the_updates_operations_in_proportion_to_the_seeds():
    """XLA's count of the update's floating-point operations doubles with the seeds vmapped."""
    floor = benchmark_scripts.load("arithmetic_floor")
    one, two = (floor.count_flops("sac", seeds, 16) for seeds in (1, 2))
    assert 1.9 < two / one < 2.1, (one, two)


@pytest.mark.slow
@pytest.mark.suite("gymnax")
def test_arithmetic_floor_prints_and_saves_its_table(tmp_path):
    out = tmp_path / "floor"
    argv = ["--seeds", "1", "--batch-size", "16", "--updates-per-call", "8", "--rounds", "1", "--large", "64"]
    run = subprocess.run(
        [sys.executable, str(BENCHMARKS / "arithmetic_floor.py"), *argv, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["flops_per_update"] > 0 and all(len(v) == 1 for v in data["rates"].values())
    assert "| the update |" in run.stdout and "[16, 256] @ [256, 256] products" in run.stdout


def test_wallclock_curve_sides_are_valid_runs_and_its_table_reads_the_best_return_by_each_mark():
    script = benchmark_scripts.load("wallclock_curve")
    from podracer.cli import parser
    from podracer.run.config import SebulbaConfig

    for side in script.SIDES:  # every flag a side passes is one the command line takes, evaluations included
        cfg = parser.parse(SebulbaConfig, script.side_argv(side, 100, 5000, 4), prog="test")
        assert cfg.eval_every * script.ENVS[side] == pytest.approx(5000, rel=0.01)
        assert cfg.env == "HalfCheetah-v4" and cfg.seed == 100
    points = [{"s": 50.0, "env_steps": 3000, "return": -300.0}, {"s": 110.0, "env_steps": 7000, "return": 500.0}]
    assert script.best_by(points, 60) == -300.0 and script.best_by(points, 120) == 500.0
    assert script.best_by(points, 10) is None
    text = script.table([{"side": "sac", "seed": 100, "points": points}], 120, "a machine", "the command")
    row = text.splitlines()[-1]
    assert row == "| sac | 100 | 2 | 7,000 | 64 | -300.0 | 500.0 | 500.0 |"


@pytest.mark.slow
def test_sebulba_replay_step_times_both_steps_on_a_full_memory():
    script = benchmark_scripts.load("sebulba_replay_step")
    row = script.measure(256, rounds=2)
    assert row["capacity"] == 256 and row["donated_ms"] > 0 and row["copied_ms"] > 0
    assert script.table([row], "a machine", 2).splitlines()[-1].startswith("| 256 | 0 MiB | ")


@pytest.mark.slow
def test_c51_projection_compares_the_same_numbers_both_ways(tmp_path):
    """Both measurements give the same projection and the same gradient with either projection (the rlax side is
    really traced with rlax's: its projection's numbers differ from C51's in the last bits), and the table and JSON
    are written where asked."""
    script = benchmark_scripts.load("c51_projection")
    assert script.main(["--batches", "16", "--rounds", "1", "--out", str(tmp_path / "c51")]) == 0
    rows = json.loads((tmp_path / "c51.json").read_text())["rows"]
    assert [(r["what"], r["batch"]) for r in rows] == [("projection", 16), ("gradient step", 16)]
    assert all(r["max_difference"] < 1e-5 for r in rows)
    assert rows[1]["max_difference"] > 0  # the two gradient programs differ: each traced its own projection
    assert (tmp_path / "c51.md").read_text().splitlines()[-1].startswith("| gradient step | 16 | ")
