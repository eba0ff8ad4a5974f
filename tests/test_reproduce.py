"""benchmarks/reproduce.py: the reproduction table, in its quick form."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
FIELDS = {"task", "agent", "env_steps", "seeds", "iqm", "ci_low", "ci_high", "random", "published", "published_source"}


def test_a_quick_row_trains_measures_random_play_and_writes_only_when_asked(tmp_path):
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
            "2",
            "--budget-scale",
            "0.1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    assert "| task | agent | preset | env steps per seed | seeds | final return IQM [95% CI] | random |" in run.stdout
    rows = json.loads(out.with_suffix(".json").read_text())
    assert isinstance(rows, list) and len(rows) == 1
    row = rows[0]
    assert FIELDS <= set(row) and " cores of " in row["machine"]
    assert (row["task"], row["agent"], row["seeds"], row["published"]) == ("gymnax:CartPole-v1", "ppo", 2, 500.0)
    assert "gymnax" in row["published_source"] and row["published_env_steps"] == 150_000
    assert row["env_steps"] == 50 * 16 * 32  # a tenth of the preset's 300 updates, in whole calls of 50
    assert row["ci_low"] <= row["iqm"] <= row["ci_high"] and len(row["per_seed"]) == 2
    assert 10 < row["random"] < 40  # uniformly random CartPole lasts about 22 steps
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "reproduce_cartpole.png").stat().st_size > 0
    bad = subprocess.run(
        [sys.executable, str(BENCHMARKS / "reproduce.py"), "--rows", "nope"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--rows: unknown row(s) nope; choose from cartpole, " in bad.stderr
