"""benchmarks/reproduce.py: the reproduction table, in its quick form."""

import argparse
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import benchmark_scripts  # tests/benchmark_scripts.py

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
FIELDS = {"task", "agent", "env_steps", "seeds", "iqm", "ci_low", "ci_high", "random", "published", "published_source"}


def test_a_quick_row_trains_measures_random_play_and_writes_only_when_asked(tmp_path):
    """The cartpole row at its published budget (gymnax-blines' 150k env steps) on five seeds; --check passes on its
    saved table and fails on the same table with the row's budget changed."""
    if importlib.util.find_spec("gymnax") is None:
        pytest.skip("the cartpole row needs gymnax")
    out = tmp_path / "reproduce"
    run = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "reproduce.py"),
            "--rows",
            "cartpole",
            "--seeds",
            "5",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    header = (
        "| row | task | agent | final return IQM [95% CI] | published (budget) | random | normalised IQM | reached |"
    )
    assert header in run.stdout
    assert "| row | preset | env steps per seed | budget ratio | seeds run | measured by | wall s | env steps/s |" in (
        run.stdout
    )
    assert "| 100-104 |" in run.stdout  # the report's seeds, not the presets' tuning seeds 0-4
    rows = json.loads(out.with_suffix(".json").read_text())
    assert isinstance(rows, list) and len(rows) == 1
    row = rows[0]
    assert FIELDS <= set(row) and " cores of " in row["machine"]
    assert (row["task"], row["agent"], row["seeds"], row["published"]) == ("gymnax:CartPole-v1", "ppo", 5, 500.0)
    assert row["seed"] == 100
    assert "gymnax" in row["published_source"] and row["published_env_steps"] == 150_000
    assert row["env_steps"] == 300 * 16 * 32  # the preset's 300 updates: 1.02x the source's budget
    assert row["final"] == "sampled evaluation return at the end"  # gymnax-blines' protocol (164 sampled episodes)
    assert row["ci_low"] <= row["iqm"] <= row["ci_high"] and len(row["per_seed"]) == 5
    assert 10 < row["random"] < 40  # uniformly random CartPole lasts about 22 steps
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "reproduce_cartpole.png").stat().st_size > 0
    check = [sys.executable, str(BENCHMARKS / "reproduce.py"), "--check", "--out", str(out)]
    one_set = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert one_set.returncode == 1 and one_set.stderr.strip() == (
        "reproduce.py --check: cartpole: judged on one seed set (100-104); train a second, disjoint one: --rows "
        "cartpole --seed 300 --check-set --save"
    ), one_set.stderr
    # the second set, 300-304, beside the reported one, which it leaves as it is
    second = [sys.executable, str(BENCHMARKS / "reproduce.py"), "--rows", "cartpole", "--check-set", "--out", str(out)]
    run = subprocess.run(second, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "cartpole (check set): seeds 300-304, IQM " in run.stdout
    (checked,) = json.loads(out.with_suffix(".json").read_text())
    assert {k: v for k, v in checked.items() if k != "check_sets"} == row
    (other,) = checked["check_sets"]
    assert (other["seed"], other["seeds"], other["env_steps"], len(other["per_seed"])) == (300, 5, row["env_steps"], 5)
    assert other["per_seed"] != row["per_seed"]
    assert "| 300-304 |" not in out.with_suffix(".md").read_text() and "; seeds 300-304: " in run.stdout
    passed = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0 and passed.stdout.strip().endswith("reproduce.json: ok"), passed.stderr
    assert "judged on two disjoint seed sets" in passed.stdout
    overlap = subprocess.run([*second[:-2], "--seed", "102", "--out", str(out)], capture_output=True, text=True)
    assert overlap.returncode == 2 and overlap.stderr.strip().endswith(
        "error: --check-set: cartpole reports seeds 100-104; --seed 102 --seeds 5 overlaps them (a check set is a "
        "disjoint one)."
    ), overlap.stderr
    out.with_suffix(".json").write_text(json.dumps([{**row, "env_steps": 25_600}]))  # 0.17x the source's budget
    failed = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert failed.stderr.strip() == (
        "reproduce.py --check: cartpole: ran 25,600 env steps per seed, 0.17x its source's 150,000 (more than 5% apart)"
    )
    out.with_suffix(".json").write_text(json.dumps([{**row, "seeds": 3}]))  # a comparison over too few seeds
    failed = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert failed.stderr.strip() == "reproduce.py --check: cartpole: compared over 3 seeds (at least 5)"
    bad = subprocess.run(
        [sys.executable, str(BENCHMARKS / "reproduce.py"), "--rows", "nope"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--rows: unknown row(s) nope; choose from cartpole, " in bad.stderr


def test_check_names_each_row_that_cannot_be_counted():
    """--check's rule: a row with a published figure ran its source's budget (within 5 %) over at least 5 seeds
    and names its source and seeds; a row without a figure needs no budget."""
    reproduce = _reproduce()
    good = {"key": "a", "published": 1.0, "published_env_steps": 1000, "env_steps": 1040, "seed": 100, "seeds": 5}
    good["published_source"] = "somewhere (1k env steps)"
    good["check_sets"] = [{"seed": 300, "seeds": 5, "env_steps": 1040, "iqm": 1.0}]
    no_figure = {**good, "key": "b", "published": None, "published_env_steps": None, "env_steps": 5}
    assert reproduce.check([good, no_figure]) == []
    # judged on more than the seeds it reports: a second set of 5, disjoint from them and from the tuning seeds 0-4
    one_set = (
        "a: judged on one seed set (100-104); train a second, disjoint one: --rows a --seed 300 --check-set --save"
    )
    for sets in ([], [{**good["check_sets"][0], "seed": 102}], [{**good["check_sets"][0], "seed": 0}],
                 [{**good["check_sets"][0], "seeds": 3}], [{**good["check_sets"][0], "env_steps": 500}]):  # fmt: skip
        assert reproduce.check([{**good, "check_sets": sets}]) == [one_set], sets
    assert reproduce.check([{**good, "env_steps": 1060}]) == [
        "a: ran 1,060 env steps per seed, 1.06x its source's 1,000 (more than 5% apart)"
    ]
    assert reproduce.check([{**good, "published_env_steps": None, "published_source": ""}]) == [
        "a: no source for its published figure (or for its absence)",
        "a: published 1 without the budget it was measured at",
    ]
    assert reproduce.check([{k: v for k, v in good.items() if k != "seed"}]) == ["a: the seeds it ran are not recorded"]
    assert reproduce.check([{**good, "seeds": 3}]) == ["a: compared over 3 seeds (at least 5)"]
    # MinAtar at 10M is held to it too (its rows once waited for a device at 3 seeds)
    assert reproduce.check([{**good, "key": "breakout", "seeds": 3}]) == [
        "breakout: compared over 3 seeds (at least 5)"
    ]
    assert reproduce.check([{**no_figure, "seeds": 2}]) == []  # not compared: any number of seeds


def test_a_compared_row_reaches_when_its_iqm_went_95_percent_of_the_way_from_random_play():
    """The normalised IQM: 0 is random play, 1 the published figure; a row reaches at 0.95 or more, whichever the
    direction of the returns, and the upper end of the interval no longer counts."""
    reproduce = _reproduce()
    assert reproduce.normalized(-122.9, -200.0, -118.0) == pytest.approx(77.1 / 82.0)  # MountainCar PPO: 0.94
    assert reproduce.reached(-118.0, 250_000, 249_856, -122.9, -200.0) is False
    assert reproduce.reached(-118.0, 250_000, 249_856, -122.0, -200.0) is True  # 78 / 82 = 0.951
    assert reproduce.reached(15.0, 10**7, 10**7, 13.4, 0.6) is False  # Asterix: 0.89, whatever its interval's top
    assert reproduce.reached(1.1, 150_000, 149_760, 1.1, 1.02) is True
    assert reproduce.normalized(5.0, 5.0, 5.0) is None  # the figure is random play's: reached at or above it
    assert reproduce.reached(5.0, 100, 100, 5.0, 5.0) is True and reproduce.reached(5.0, 100, 100, 4.9, 5.0) is False
    # on every seed set: cartpole-dqn-zoo reached on seeds 100-104 (IQM 500) and not on 300-304 (IQM 281.2)
    row = {"key": "cartpole-dqn-zoo", "published": 500.0, "published_env_steps": 50_000, "env_steps": 50_000,
           "random": 22.6, "seed": 100, "seeds": 5, "iqm": 500.0, "final": "greedy evaluation return at the end",
           "evaluation_keys": reproduce.EVALUATION_KEYS}  # fmt: skip
    fresh = {"seed": 300, "seeds": 5, "env_steps": 50_000, "iqm": 281.2, "final": row["final"],
             "evaluation_keys": reproduce.EVALUATION_KEYS}  # fmt: skip
    assert reproduce._verdict(row) is True and reproduce.reach_count([row]) == (1, 1, 0)
    assert reproduce._verdict({**row, "check_sets": [fresh]}) is False
    assert reproduce.reach_count([{**row, "check_sets": [fresh]}]) == (0, 1, 1)
    assert reproduce._sets_said({**row, "check_sets": [fresh]}) == "; seeds 300-304: 281.2 (0.54)"
    assert reproduce._verdict({**row, "check_sets": [{**fresh, "iqm": 490.0}]}) is True


def test_a_rows_flags_come_in_name_value_pairs():
    """Every row's flags read as {"--name": value} (the accelerator suite and --from-accelerator compare them so);
    a lone switch or a value without its name is refused, naming the row."""
    reproduce = _reproduce()
    pairs = {row.key: row.flag_values() for row in reproduce.ROWS}
    assert pairs["breakout"] == {"--kernel-init": "lecun"}
    lone = reproduce.Row("x", "cartpole", None, "", None, flags=("--kernel-init", "lecun", "--no-bootstrap-truncated"))
    with pytest.raises(ValueError, match=r"^x: the row's flags .* are not --name value pairs$"):
        lone.flag_values()
    with pytest.raises(ValueError, match="not --name value pairs"):
        reproduce.Row("y", "cartpole", None, "", None, flags=("lecun", "--kernel-init")).flag_values()


def test_the_readme_counts_the_reaching_rows_as_the_saved_table_judges_them():
    """The README's count of reaching rows is the saved table's (it said 33 of 35 while its rows were judged on the
    one seed set that reached), with how many rows were judged on two disjoint sets."""
    reproduce = _reproduce()
    reach, compared, two = reproduce.reach_count(json.loads((BENCHMARKS / "results" / "reproduce.json").read_text()))
    readme = " ".join((BENCHMARKS.parent / "README.md").read_text().split())
    said = (
        f"of the {compared} rows compared at their figures' budgets, {reach} reach them on every seed set they ran; "
        f"{two} were judged on two disjoint seed sets"
    )
    assert said in readme


def test_the_saved_tables_are_what_their_renderers_write_from_the_saved_rows():
    """reproduce.md and source_runs.md are rendered from the saved reproduce.json and source_runs.json as they are
    today: a row rerun, or a row's description changed, without the tables rewritten (--render) fails here, where
    the source runs' table once showed podracer's rows as they were before a rerun."""
    reproduce, source_runs = _reproduce(), benchmark_scripts.load("source_runs")
    results = BENCHMARKS / "results"
    rows = json.loads((results / "reproduce.json").read_text())
    assert (results / "reproduce.md").read_text() == reproduce.render(rows, reproduce.saved_source_runs(results))
    saved = {row["key"]: row for row in rows}
    runs = json.loads((results / "source_runs.json").read_text())
    summaries = [source_runs.summarize(run["key"], run["runs"], saved, run["source"]) for run in runs]
    assert (results / "source_runs.md").read_text() == source_runs.table(summaries)


def test_jobs_below_one_is_refused_naming_the_flag(capsys):
    with pytest.raises(SystemExit):
        _reproduce().main(["--rows", "hopper", "--jobs", "0"])
    assert "error: --jobs must be >= 1, got 0." in capsys.readouterr().err


def _reproduce():
    return benchmark_scripts.load("reproduce")


def test_the_rows_that_run_twenty_seeds_are_named_rows_that_vmap_their_seeds():
    """MANY_SEEDS_ROWS names rows that exist (a misspelt key would leave its row at five seeds, silently), each an
    Anakin row with a published figure; those rows run MANY_SEEDS, the others MIN_SEEDS."""
    reproduce = _reproduce()
    by_key = {row.key: row for row in reproduce.ROWS}
    assert reproduce.MANY_SEEDS_ROWS <= set(by_key)
    for row in reproduce.ROWS:
        many = row.key in reproduce.MANY_SEEDS_ROWS
        assert row.seeds == (reproduce.MANY_SEEDS if many else reproduce.MIN_SEEDS), row.key
        if many:
            assert reproduce.mode(row) == "anakin" and row.published is not None, row.key


def test_a_row_is_compared_only_at_its_published_budget():
    """Within 5 % of the figure's env steps a row reaches it or not; at another budget it is not compared, and the
    table says the ratio."""
    reproduce = _reproduce()
    assert reproduce.reached(-130.0, 1_000_000, 1_024_000, -135.0, -1237.2) is True  # 1.02x: compared
    assert reproduce.reached(-130.0, 1_000_000, 1_024_000, -200.0, -1237.2) is False
    assert reproduce.reached(-172.2, 100_000, 1_228_800, -158.2, -1237.2) is None  # 12.3x: another budget
    assert reproduce.reached(None, None, 1_000, 1.0, 0.0) is None
    row = {
        "task": "gymnax:Pendulum-v1",
        "agent": "ppo",
        "preset": "pendulum",
        "key": "pendulum",
        "seeds": 5,
        "env_steps": 1_228_800,
        "iqm": -176.2,
        "ci_low": -287.2,
        "ci_high": -158.2,
        "random": -1237.2,
        "published": -172.2,
        "published_env_steps": 100_000,
        "published_source": "zoo",
        "wall_s": 42.0,
        "env_steps_per_s": 182_289.0,
        "reached": True,
    }  # saved under the old rule: judged again
    text = reproduce.table([row])
    line = text.splitlines()[2]
    assert line.endswith("| -176.2 [-287.2, -158.2] | -172.2 (100,000) | -1,237.2 | 0.99 | not compared |"), line
    ran = text.split("How each row ran:\n\n")[1].splitlines()[2]
    assert ran.endswith("| 1,228,800 | 12.29x | 0-4 (tuning seeds) | - | 42 | 182,289 |"), ran  # no measure: "-"


def test_a_source_run_is_compared_with_the_row_on_the_seeds_both_ran():
    """A row that ran more seeds (100-119) than the source's code (100-104) is compared with it on those five: the
    row's IQM there, normalised, and the difference; a row that did not run one of them is not compared seed by seed
    (its saved IQM is shown, and no difference)."""
    source_runs = benchmark_scripts.load("source_runs")
    runs = [{"seed": 100 + i, "return": r} for i, r in enumerate((-126.5, -115.8, -120.0, -130.0, -110.0))]
    row = {"iqm": -150.0, "random": -200.0, "published": -110.4, "seed": 100}
    saved = {"mountaincar-zoo": {**row, "per_seed": [-104.0, -100.0, -102.0, -103.0, -101.0] + [-190.0] * 15}}
    summary = source_runs.summarize("mountaincar-zoo", runs, saved, "the zoo")
    assert summary["podracer_iqm"] == pytest.approx(-102.0)  # the middle three of seeds 100-104, not of all twenty
    assert summary["podracer_normalised"] == pytest.approx(98.0 / 89.6)
    assert summary["difference"][0] == pytest.approx(-102.0 - summary["iqm"])
    saved["mountaincar-zoo"]["seed"] = 101  # the row ran seeds 101-120: the source's seed 100 is not among them
    summary = source_runs.summarize("mountaincar-zoo", runs, saved, "the zoo")
    assert (summary["podracer_iqm"], summary["difference"]) == (-150.0, None)


def test_a_source_run_is_read_from_its_own_records_and_scored_as_the_table_scores(tmp_path):
    """source_runs.py: a zoo evaluation's returns come from Stable-Baselines3's monitor files; a row's runs become
    an IQM normalised against the row's own random play and figure; the table adds it to the row's verdict."""
    source_runs = benchmark_scripts.load("source_runs")
    (tmp_path / "0.monitor.csv").write_text(
        '#{"t_start": 0, "env_id": "MountainCar-v0"}\nr,l,t\n-120.0,120,0.5\n-98,98,1\n'
    )
    (tmp_path / "1.monitor.csv").write_text('#{"t_start": 0}\nr,l,t\n-200.0,200,0.7\n')
    assert source_runs.monitor_returns(tmp_path) == [-120.0, -98.0, -200.0]
    saved = {"mountaincar-zoo": {"iqm": -115.8, "random": -200.0, "published": -110.4}}
    runs = [{"seed": 100 + i, "return": r} for i, r in enumerate((-126.5, -115.8, -120.0, -130.0, -110.0))]
    summary = source_runs.summarize("mountaincar-zoo", runs, saved, "the zoo")
    assert summary["returns"] == [-126.5, -115.8, -120.0, -130.0, -110.0] and summary["seeds"] == list(range(100, 105))
    assert summary["iqm"] == pytest.approx((-126.5 - 115.8 - 120.0) / 3)  # the middle three of five
    assert summary["normalised"] == pytest.approx((summary["iqm"] + 200.0) / 89.6)
    assert summary["podracer_normalised"] == pytest.approx(84.2 / 89.6)
    assert summary["ci_low"] <= summary["iqm"] <= summary["ci_high"]
    assert summary["difference"] is None  # a saved row without its seeds' returns: nothing to compare
    saved["mountaincar-zoo"]["per_seed"] = [-115.8 + d for d in (-9.0, -3.0, 0.0, 3.0, 9.0)]  # IQM -115.8
    difference = source_runs.summarize("mountaincar-zoo", runs, saved, "the zoo")["difference"]
    assert difference[0] == pytest.approx(-115.8 - summary["iqm"])  # podracer's IQM minus the source's
    assert difference[1] < 0 < difference[2]  # five seeds a side, 5.6 apart with spreads of 18 and 20: no verdict
    saved["mountaincar-zoo"]["per_seed"] = [-90.0, -89.0, -88.0, -87.0, -86.0]  # above every seed of the source
    difference = source_runs.summarize("mountaincar-zoo", runs, saved, "the zoo")["difference"]
    assert difference[0] == pytest.approx(-88.0 - summary["iqm"]) and 0 < difference[1] < difference[0] < difference[2]
    assert source_runs.shown_difference([30.04, -1.25, 41.0]) == "+30.0 [-1.2, +41.0]"
    assert source_runs.shown_difference(None) == "-"
    row = {
        "key": "mountaincar-zoo",
        "task": "gymnax:MountainCar-v0",
        "agent": "ppo",
        "preset": "mountaincar-ppo-zoo",
        "seeds": 5,
        "seed": 100,
        "env_steps": 999_936,
        "iqm": -115.8,
        "ci_low": -121.0,
        "ci_high": -109.5,
        "random": -200.0,
        "published": -110.4,
        "published_env_steps": 1_000_000,
        "published_source": "the zoo",
        "wall_s": 24.0,
        "env_steps_per_s": 1.0,
    }
    verdict = "| 0.93 | no; the source's code here: -120.8 (0.88); one seed set |"  # each rounded down: 0.9399, 0.8839
    assert verdict in _reproduce().table([row], [summary])
    fewer = source_runs.summarize("mountaincar-zoo", runs[:2], saved, "the zoo")  # a run stopped after two seeds
    assert (fewer["spread"], fewer["ci_low"], fewer["ci_high"], fewer["difference"]) == ("range", -126.5, -115.8, None)
    assert "| no; the source's code here (2 seeds): -121.2 (0.88); one seed set |" in _reproduce().table([row], [fewer])
    source_runs.write(tmp_path / "runs", [summary])  # written after each seed: the latest replaces its row's
    source_runs.write(tmp_path / "runs", [fewer])
    written = json.loads((tmp_path / "runs.json").read_text())
    assert [(r["key"], len(r["returns"])) for r in written] == [("mountaincar-zoo", 2)]
    assert "| -121.2 [-126.5, -115.8] (range, 2 seeds) |" in (tmp_path / "runs.md").read_text()
    assert "| 0.93 | no; one seed set |" in _reproduce().table([row])
    assert [_reproduce().shown(x) for x in (0.9466, 0.95, 1.0, 1.0 - 1e-12, 42.14)] == [
        "0.94",
        "0.95",
        "1.00",
        "1.00",
        "42.14",
    ]


def test_a_source_run_names_the_flags_its_rows_need(capsys):
    """The script's refusals, in this process (what it says, not how a process ends, is what is tested)."""
    source_runs = benchmark_scripts.load("source_runs")

    def refused(*argv):
        capsys.readouterr()
        with pytest.raises(SystemExit) as stop:
            source_runs.main(list(argv))
        assert stop.value.code == 2
        return capsys.readouterr().err.strip().splitlines()[-1]

    assert refused("--rows", "mountaincar-dqn,mountaincar").endswith(
        "--zoo-python is needed for --rows mountaincar-dqn"
    )
    assert refused("--rows", "cartpole").endswith(
        "--rows: no source run for cartpole (rows: mountaincar-zoo, mountaincar-a2c, mountaincar-dqn, "
        "cartpole-dqn-zoo, acrobot-dqn, acrobot-a2c, mountaincar, pendulum, mountaincar-continuous, "
        "inverted-pendulum-mujoco, halfcheetah, hopper, pusher)"
    )
    assert refused("--rows", "pusher", "--cleanrl-python", "python").endswith(
        "--cleanrl-git is needed for --rows pusher"
    )


def test_a_cleanrl_run_is_scored_by_the_last_100_episodes_it_prints(tmp_path):
    """source_runs.py's CleanRL seed: the script is run with the row's environment and seed, one thread, and scored
    by the mean of the last 100 episode returns it prints (its figure's statistic), in the form it prints them."""
    source_runs = benchmark_scripts.load("source_runs")
    script = tmp_path / "source" / source_runs.CLEANRL_SCRIPT
    script.parent.mkdir(parents=True)
    script.write_text(  # prints as ppo_continuous_action.py prints: a float32 array of one return per episode
        "import os, sys\n"
        "assert sys.argv[1:] == ['--env-id', 'Pusher-v4', '--seed', '103', '--no-cuda'], sys.argv\n"
        "assert os.environ['OMP_NUM_THREADS'] == '1'\n"
        "for i in range(150):\n"
        "    print(f'global_step={100 * i}, episodic_return=[{-200.0 + i:.1f}]' if i % 2 else\n"
        "          f'global_step={100 * i}, episodic_return=[{-200.0 + i:.0f}.]')\n"
        "print('SPS: 626')\n"
    )
    (tmp_path / "work").mkdir()
    run = source_runs.cleanrl_seed(
        sys.executable,
        tmp_path / "source",
        source_runs.CLEANRL_ROWS["pusher"],
        103,
        tmp_path / "work",
        argparse.Namespace(),
    )
    assert run["seed"] == 103 and run["episodes"] == 100 and run["episodes_in_run"] == 150
    assert run["return"] == pytest.approx(sum(-200.0 + i for i in range(50, 150)) / 100)


def test_a_sebulba_rows_figure_is_the_training_return_of_its_last_100_episodes_in_whole_log_windows():
    """CleanRL's figure is a seed's last 100 training episodes: the log windows counted back from the end until they
    hold 100, each weighed by its episodes; a window that ended none adds nothing."""
    reproduce = benchmark_scripts.load("reproduce")
    history = [
        {"episode_return": 10.0, "episodes": 60.0},
        {"episode_return": 20.0, "episodes": 50.0},
        {"episode_return": float("nan"), "episodes": 0.0},
        {"episode_return": 40.0, "episodes": 30.0},
    ]
    assert reproduce.last_episodes(history) == ((20.0 * 50 + 40.0 * 30 + 10.0 * 60) / 140, 140)
    assert reproduce.last_episodes(history, episodes=30) == (40.0, 30)
    none, count = reproduce.last_episodes(history[2:3])
    assert math.isnan(none) and count == 0  # no episode ended: no figure


def test_a_sebulba_row_runs_its_presets_budget_in_whole_updates_and_is_one_of_the_host_tasks():
    """The MuJoCo rows are Sebulba presets at CleanRL's budget: 488 updates of 1 env x 2048 steps (1M env steps
    as ppo_continuous_action.py's 488 iterations); --budget-scale keeps whole updates and at least a log window."""
    if importlib.util.find_spec("envpool") is None:
        pytest.skip("the MuJoCo rows need envpool")
    reproduce = benchmark_scripts.load("reproduce")
    rows = {row.key: row for row in reproduce.ROWS}
    for key in ("inverted-pendulum-mujoco", "halfcheetah", "pusher"):
        row = rows[key]
        assert reproduce.mode(row) == "sebulba" and row.published_env_steps == 1_000_000
        cfg, per_update = reproduce.sebulba_config(row, 1.0, False, 103)
        assert (cfg.seed, per_update, cfg.total_env_steps) == (103, 2048, 488 * 2048)
        assert reproduce.budget_ratio(cfg.total_env_steps, row.published_env_steps) == pytest.approx(0.999424)
        quick, _ = reproduce.sebulba_config(row, 0.001, False, 100)  # half an update: one log window (8 updates)
        assert quick.total_env_steps == 8 * 2048
    assert reproduce.mode(rows["cartpole"]) == "anakin"


@pytest.mark.slow
def test_a_sebulba_rows_seeds_trained_side_by_side_score_as_one_after_the_other(tmp_path):
    """A MuJoCo row at its smallest budget (one log window, 8 updates of 2048 steps) on seeds 100-101: --jobs 2
    trains them in two processes of their own and the row records it; each seed scores what it scores alone in
    this process (--jobs 1), in seed order, over its last 100 episodes."""
    if importlib.util.find_spec("envpool") is None:
        pytest.skip("the MuJoCo rows need envpool")
    rows = {}
    for jobs in (2, 1):
        out = tmp_path / f"jobs{jobs}" / "reproduce"
        command = [sys.executable, str(BENCHMARKS / "reproduce.py"), "--rows", "inverted-pendulum-mujoco"]
        command += ["--seeds", "2", "--budget-scale", "0.001", "--jobs", str(jobs), "--out", str(out)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        for seed in (100, 101):
            assert f"inverted-pendulum-mujoco seed {seed}: training return " in run.stdout
        (rows[jobs],) = json.loads(out.with_suffix(".json").read_text())
        assert (rows[jobs]["mode"], rows[jobs]["jobs"], rows[jobs]["seeds"]) == ("sebulba", jobs, 2)
        assert rows[jobs]["env_steps"] == 8 * 2048 and min(rows[jobs]["episodes_per_seed"]) >= 100
    assert rows[2]["per_seed"] == rows[1]["per_seed"]
    assert rows[2]["episodes_per_seed"] == rows[1]["episodes_per_seed"]
    assert len(rows[2]["curve"]["return_per_seed"][0]) == 2
    shown = (tmp_path / "jobs2" / "reproduce.md").read_text()
    assert (
        " (2 seeds at once) |" in shown
        and " (2 seeds at once)" not in (tmp_path / "jobs1" / "reproduce.md").read_text()
    )


def test_random_play_on_a_host_environment_is_one_episode_per_environment():
    if importlib.util.find_spec("envpool") is None:
        pytest.skip("needs envpool")
    reproduce = benchmark_scripts.load("reproduce")
    assert 10 < reproduce.host_random_play("CartPole-v1", episodes=64) < 40  # uniformly random CartPole: about 22
    pendulum = reproduce.host_random_play("InvertedPendulum-v4", episodes=16, seed=1)
    assert 1 <= pendulum < 20  # a random torque topples the pole within a few steps (a reward of 1 per step)


def test_mujoco_dynamics_reports_each_step_ranges_largest_gap_and_where_each_episode_ended(capsys):
    """mujoco_dynamics.py: envpool's and gymnasium's episodes compared over the steps both took: the largest
    observation gap per step range (the start apart), the largest reward gap, the step each terminated at."""
    dynamics = benchmark_scripts.load("mujoco_dynamics")
    steps = 60
    ours = {
        "observations": np.zeros((steps + 1, 3)),
        "rewards": [1.0] * steps,
        "ends": [False] * (steps - 1) + [True],  # envpool's episode terminated at its 60th step
    }
    theirs_obs = np.zeros((steps + 1, 3))
    theirs_obs[5, 1], theirs_obs[30, 2], theirs_obs[55, 0] = 0.5, -2.0, 1e-9
    theirs = {"observations": theirs_obs.tolist(), "rewards": [1.0] * 9 + [1.25] + [1.0] * 50, "ends": [False] * 60}
    result = dynamics.compare("HalfCheetah-v4", ours, theirs)
    assert result["steps"] == steps and result["envpool_end"] == steps and result["gymnasium_end"] is None
    assert result["observation_gap"] == {"0-0": 0.0, "1-9": 0.5, "10-49": 2.0, "50-60": 1e-9}
    assert result["reward_gap"] == 0.25
    text = dynamics.table([result], "header")
    assert "| HalfCheetah-v4 | 60 | 0.0e+00 | 5.0e-01 | 2.0e+00 | 1.0e-09 | 2.5e-01 | 60, - |" in text
    short = dynamics.compare("InvertedPendulum-v4", {**ours, "observations": ours["observations"][:14]}, theirs)
    assert list(short["observation_gap"]) == ["0-0", "1-9", "10-13"]  # ranges past the episode are left out
    assert "| 5.0e-01 | 0.0e+00 | - |" in dynamics.table([short], "header")
    with pytest.raises(SystemExit):
        dynamics.main(["--gymnasium-python", sys.executable, "--tasks", "Hopper-v4"])
    assert "--tasks: Hopper-v4 is not one of InvertedPendulum-v4, HalfCheetah-v4, Pusher-v4" in capsys.readouterr().err


def test_an_accelerator_call_stands_for_a_row_only_when_it_trained_the_rows_settings(tmp_path, capsys):
    """--from-accelerator takes a MinAtar record trained with its row's flags and budget into the table (random play
    measured here), refuses one trained with other flags or another budget, saying why, and keeps the saved rows;
    the suite trains a preset with its row's flags."""
    if importlib.util.find_spec("gymnax") is None:
        pytest.skip("the MinAtar rows need gymnax")
    from podracer.core import stats

    accelerator = benchmark_scripts.load("accelerator")
    assert accelerator.row_flags("breakout-minatar") == {"kernel_init": "lecun"}
    assert accelerator.row_flags("freeway-minatar") == {}
    header = {"header": True, "device": "NVIDIA H200 x1 [gpu]", "jax": "0.11.2", "commit": "abc", "date": "2026-11-30"}
    data = {"per_seed": [131.2, 136.1, 124.7, 119.5, 3.0], "env_steps": 9_994_240, "seconds": 46.4, "compile_s": 11.5}
    data.update(sps=1.9e6, kind="sampled evaluation")
    records = [
        header,
        {"row": "minatar-ppo", "what": "PPO space-invaders MinAtar, 9,994,240 env steps x 5 seeds", "data": data},
        {"row": "minatar-ppo", "what": "PPO asterix MinAtar, 9,994,240 env steps x 5 seeds", "data": data},
        {"row": "minatar-ppo", "what": "PPO freeway MinAtar", "data": {**data, "env_steps": 655_360}},
        {"row": "anakin", "what": "ppo gymnax CartPole-v1, 4,096 envs", "podracer": 3.3e7},
    ]
    path = tmp_path / "accelerator.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "reproduce"
    table = json.loads((BENCHMARKS / "results" / "reproduce.json").read_text())
    out.with_suffix(".json").write_text(json.dumps(table))
    reproduce = benchmark_scripts.load("reproduce")  # in this process: what it takes and says is what is tested
    capsys.readouterr()
    assert reproduce.main(["--from-accelerator", str(path), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "not taken: asterix: trained with the preset alone, the row with {'--kernel-init': 'lecun'}" in said
    assert "not taken: freeway: 655,360 env steps, the row 9,994,240" in said
    assert said.rstrip().endswith(f"took space-invaders from {path}")
    now = json.loads(out.with_suffix(".json").read_text())
    assert [r["key"] for r in now] == [r["key"] for r in table]  # the others kept, in the table's order
    assert [r for r in now if r["key"] != "space-invaders"] == [r for r in table if r["key"] != "space-invaders"]
    (row,) = [r for r in now if r["key"] == "space-invaders"]
    assert row["seeds"] == 5 and row["seed"] == 100 and row["env_steps"] == 9_994_240
    assert row["per_seed"] == data["per_seed"] and row["final"] == "sampled evaluation return at the end"
    assert row["iqm"] == pytest.approx(float(stats.interquartile_mean(data["per_seed"])))
    assert row["machine"] == "NVIDIA H200 x1 [gpu] (benchmarks/accelerator.py, podracer abc, 2026-11-30)"
    assert 0 < row["random"] < 20 and row["wall_s"] == 46.4 and row["jax"] == "0.11.2" and row["curve"] is None
    assert reproduce.main(["--from-accelerator", str(tmp_path / "none.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"reproduce.py: error: --from-accelerator {tmp_path / 'none.jsonl'}: no such file"
    )


def test_jobs_on_an_anakin_row_is_refused_naming_the_row(capsys):
    with pytest.raises(SystemExit):
        _reproduce().main(["--rows", "cartpole,hopper", "--jobs", "2"])
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith(
            "error: --jobs trains a Sebulba row's seeds in processes side by side; cartpole is an Anakin row, whose "
            "seeds train in one program."
        )
    )
