"""Population-based training inside the compiled Anakin program (``--population``): the ranking and its copies, the
logged lineage and schedule, exact resume, a run on two processes equal to one, and the command line's refusals."""

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer import anakin, checkpoint, experiment, pbt as population
from podracer.agents import A2CConfig
from podracer.anakin.population import Population, PopulationState
from podracer.config import AnakinConfig, SebulbaConfig, parse
from podracer.pbt import PERTURB, Range
from podracer.types import LearnerState

ROOT = Path(__file__).resolve().parents[1]
SEARCH = ("learning_rate=log:1e-4..1e-2", "entropy_coef=log:1e-3..1e-1")


def _lanes(fitness):
    n = len(fitness)
    values = {"learning_rate": jnp.linspace(1e-3, 4e-3, n), "entropy_coef": jnp.full((n,), 0.01)}
    ones = jnp.ones(n, jnp.float32)
    return PopulationState(
        values=values,
        updates=jnp.full((n,), 40, jnp.int32),
        return_sum=jnp.asarray(fitness, jnp.float32) * 2,
        episodes=2 * ones,
        fitness=jnp.full((n,), jnp.nan),
        parent=-jnp.ones(n, jnp.int32),
        copied_at=-jnp.ones(n, jnp.int32),
    )


def test_a_ranking_copies_the_top_into_the_bottom_and_explores_their_values():
    """8 lanes, fraction 0.25: the 2 worst lanes take the parameters, optimizer state and extra state of lanes among
    the 2 best, keep their own key, and their values become the donor's times 0.8 or 1.25 (clipped) or a fresh
    draw in range; the other lanes are untouched; the window's statistics restart."""
    search = (Range("learning_rate", 1e-4, 1e-2, True), Range("entropy_coef", 1e-3, 1e-1, True))
    pop = Population(search, ({"learning_rate": 1e-3, "entropy_coef": 0.01},) * 8, None, every=40, fraction=0.25)
    fitness = [0.5, -1.0, 0.9, 0.1, 0.95, -0.5, 0.3, 0.2]  # worst: lanes 1 and 5; best: lanes 4 and 2
    lanes = _lanes(fitness)
    n = len(fitness)
    learner = LearnerState(
        params={"w": jnp.arange(n, dtype=jnp.float32)[:, None] * jnp.ones((n, 3))},
        opt_state=(jnp.arange(n, dtype=jnp.float32) * 10,),
        key=jax.random.split(jax.random.key(0), n),
        step=jnp.full((n,), 40, jnp.int32),
        extra={"target": jnp.arange(n, dtype=jnp.float32) * 100},
    )
    new, after = jax.jit(pop.exploit)(learner, lanes)
    parent, copied_at = np.asarray(after.parent), np.asarray(after.copied_at)
    assert set(np.flatnonzero(copied_at == 40)) == {1, 5}
    for lane in (1, 5):
        donor = int(parent[lane])
        assert donor in (2, 4)
        np.testing.assert_array_equal(new.params["w"][lane], learner.params["w"][donor])
        assert float(new.opt_state[0][lane]) == 10 * donor and float(new.extra["target"][lane]) == 100 * donor
        for r in search:
            value, given = float(after.values[r.name][lane]), float(lanes.values[r.name][donor])
            perturbed = [min(max(given * f, r.low), r.high) for f in PERTURB]
            assert any(math.isclose(value, p, rel_tol=1e-5) for p in perturbed) or r.low <= value <= r.high
    untouched = np.asarray([i for i in range(n) if i not in (1, 5)])
    np.testing.assert_array_equal(new.params["w"][untouched], learner.params["w"][untouched])
    np.testing.assert_array_equal(jax.random.key_data(new.key), jax.random.key_data(learner.key))
    for name in ("learning_rate", "entropy_coef"):
        np.testing.assert_array_equal(after.values[name][untouched], lanes.values[name][untouched])
    np.testing.assert_allclose(after.fitness, fitness)
    assert float(jnp.sum(after.return_sum)) == 0 and float(jnp.sum(after.episodes)) == 0
    assert set(parent[untouched]) == {-1}


def _config(tmp_path, name, **changes):
    common = dict(
        agent=A2CConfig(),
        env="catch",
        num_envs_per_device=8,
        rollout_length=8,
        num_updates=80,
        updates_per_call=20,
        population=4,
        pbt_search=SEARCH,
        pbt_every=40,
        checkpoint_dir=str(tmp_path / name / "ck"),
        log_dir=str(tmp_path / name),
    )
    return AnakinConfig(**{**common, **changes})


class _StopAfter:
    """A stop that reads as set from its ``n + 1``-th check on: the run stops after ``n`` host calls."""

    def __init__(self, n):
        self.checks, self.n = 0, n

    def is_set(self):
        self.checks += 1
        return self.checks > self.n


def _records(directory):
    return [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_population_run_logs_its_lanes_and_resumes_exactly(tmp_path):
    """Stopped after 60 updates (between the rankings at 40 and 80) and resumed, a population ends with the same
    lanes, values, lineage and returns as the run that was not stopped; the records hold every lane's values and
    lineage, the rankings happen at every --pbt-every updates, and the run leaves the best lane's schedule."""
    whole = _config(tmp_path, "whole")
    experiment.train_anakin(whole)
    parts = _config(tmp_path, "parts", checkpoint_every=20)
    experiment.train_anakin(parts, stop=_StopAfter(3))
    assert checkpoint.steps(parts.checkpoint_dir) == [20, 40, 60]
    experiment.train_anakin(dataclasses.replace(parts, resume="auto"))

    ours, theirs = _records(tmp_path / "whole"), _records(tmp_path / "parts")
    drop = ("sps", "run_id")
    assert [{k: v for k, v in r.items() if k not in drop} for r in ours] == [
        {k: v for k, v in r.items() if k not in drop} for r in theirs
    ]
    last = ours[-1]
    assert last["pbt_updates"] == 80 and len(last["pbt_learning_rate_per_lane"]) == 4
    for r in ours:
        copies = [u for u in r["pbt_copied_at_per_lane"] if u >= 0]
        assert all(u % 40 == 0 for u in copies)
        assert all(1e-4 <= v <= 1e-2 for v in r["pbt_learning_rate_per_lane"])
    ranked = [r for r in ours if r["pbt_updates"] % 40 == 0]
    assert all(r["pbt_copied_at_per_lane"].count(r["pbt_updates"]) == 1 for r in ranked)  # 4 x 0.25: one copy
    assert (tmp_path / "whole" / "pbt_schedule.csv").exists() and (tmp_path / "whole" / "pbt_schedule.png").exists()
    schedule = (tmp_path / "whole" / "pbt_schedule.csv").read_text().splitlines()
    assert schedule[0] == "env_steps,lane,learning_rate,entropy_coef" and len(schedule) == 1 + len(ours)

    meta = [checkpoint.read_metadata(d) for d in (whole.checkpoint_dir, parts.checkpoint_dir)]
    assert meta[0]["updates"] == meta[1]["updates"] == 80
    assert meta[0]["env_steps"] == meta[1]["env_steps"]


def test_schedule_follows_the_lanes_a_line_copied():
    history = [
        {"env_steps": 10, "pbt_updates": 1, "pbt_x_per_lane": [1.0, 2.0], "pbt_parent_per_lane": [-1, -1],
         "pbt_copied_at_per_lane": [-1, -1]},
        {"env_steps": 20, "pbt_updates": 2, "pbt_x_per_lane": [2.5, 2.0], "pbt_parent_per_lane": [1, -1],
         "pbt_copied_at_per_lane": [2, -1]},
        {"env_steps": 30, "pbt_updates": 3, "pbt_x_per_lane": [2.5, 2.1], "pbt_parent_per_lane": [1, -1],
         "pbt_copied_at_per_lane": [2, -1]},
    ]  # fmt: skip
    rows = population.schedule(history, ["x"], 0)
    assert [(r["lane"], r["x"]) for r in rows] == [(1, 2.0), (0, 2.5), (0, 2.5)]


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            "--population 4",
            "--population needs --pbt-search NAME=[log:]LOW..HIGH (for example learning_rate=log:1e-4..1e-2).",
        ),
        (
            "--population 1 --pbt-search learning_rate=1e-4..1e-2",
            "--population must be >= 2 (lanes that rank and copy each other), got 1.",
        ),
        ("--pbt-search learning_rate=1e-4..1e-2", "--pbt-search needs --population N (the lanes that search)."),
        (
            "--population 4 --pbt-search learning_rate=1e-4",
            "--pbt-search takes NAME=[log:]LOW..HIGH (for example learning_rate=log:1e-4..1e-2), got "
            "'learning_rate=1e-4'.",
        ),
        (
            "--population 4 --pbt-search nope=1..2",
            "--pbt-search: 'nope' is not a numeric hyper-parameter of this agent",
        ),
        (
            "--agent ppo --population 4 --pbt-search num_epochs=1..4",
            "--pbt-search num_epochs: --num-epochs takes whole numbers",
        ),
        (
            "--population 4 --pbt-search learning_rate=log:0..1e-2",
            "--pbt-search learning_rate: the range 0..1e-2 needs 0 < LOW < HIGH, finite.",
        ),
        (
            "--population 4 --pbt-search learning_rate=1e-4..1e-2 --pbt-every 30",
            "--pbt-every 30 must be a positive multiple of the 20 updates per call (--updates-per-call).",
        ),
        (
            "--population 4 --pbt-search learning_rate=1e-4..1e-2 --num-seeds 2",
            "--population trains its own lanes: drop --sweep and --num-seeds",
        ),
        (
            "--population 4 --pbt-search learning_rate=1e-4..1e-2 --pbt-fraction 0.6",
            "--pbt-fraction must be in (0, 0.5]",
        ),
        (
            "--population 4 --pbt-search learning_rate=1e-4..1e-2 --pbt-resample 2",
            "--pbt-resample is a probability in [0, 1], got 2.",
        ),
    ],
)
def test_bad_population_flags_are_one_line_errors(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(AnakinConfig, flags.split(), prog="prog")
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("prog: error: ") and message in errors[0], errors


def test_sebulba_refuses_a_population_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(SebulbaConfig, ["--population", "4"], prog="prog")
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert errors == [f"prog: error: {population.SEBULBA_REFUSAL}"], errors


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k != "XLA_FLAGS"}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


@pytest.mark.slow
def test_a_population_on_two_processes_equals_it_on_one(tmp_path):
    """2 processes x 1 CPU device joined by jax.distributed (as a Slurm step) train the same lanes as 1 process x 2
    devices: the same copies at the same updates, the same values, returns up to the all-reduce's rounding."""
    from test_examples import _slurm_step

    args = ["anakin", "--env", "catch", "--agent", "ppo", "--num-envs", "16", "--rollout-length", "8"]
    args += ["--num-updates", "80", "--population", "4", "--pbt-every", "20", "--no-compile-cache"]
    args += [f"--pbt-search={spec}" for spec in SEARCH]
    slurm = _slurm_step(2)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "podracer.cli", *args, "--cpu-devices", "1", "--distributed"]
            + ["--log-dir", str(tmp_path / f"multi{i}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=_env(**slurm, SLURM_PROCID=str(i), SLURM_LOCALID=str(i)),
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, stderr) in zip(procs, outputs):
        assert p.returncode == 0, stderr[-3000:]
    single = subprocess.run(
        [sys.executable, "-m", "podracer.cli", *args, "--cpu-devices", "2", "--log-dir", str(tmp_path / "single")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=600,
    )
    assert single.returncode == 0, single.stderr[-3000:]
    multi, one = _records(tmp_path / "multi0"), _records(tmp_path / "single")
    assert len(multi) == len(one) == 4
    for m, s in zip(multi, one):
        assert m["pbt_parent_per_lane"] == s["pbt_parent_per_lane"]
        assert m["pbt_copied_at_per_lane"] == s["pbt_copied_at_per_lane"]
        np.testing.assert_allclose(m["pbt_learning_rate_per_lane"], s["pbt_learning_rate_per_lane"], rtol=1e-6)
        np.testing.assert_allclose(m["episode_return_per_seed"], s["episode_return_per_seed"], atol=0.05)


def test_a_sweep_and_a_population_both_keep_the_entries_protocol():
    """The host loop asks the same of both (anakin.Entries): names, values, keys, init, update and a summary."""
    build = lambda values: (None, None)  # noqa: E731 (never called here)
    sweep = anakin.Sweep(({"learning_rate": 1e-3}, {"learning_rate": 3e-3}), build)
    lanes = Population((Range("learning_rate", 1e-4, 1e-2, True),), ({"learning_rate": 1e-3},) * 2, build, every=5)
    for entries in (sweep, lanes):
        assert isinstance(entries, anakin.Entries), type(entries)
        assert entries.names == ["learning_rate"]
        keys, values = entries.expand(jax.random.key(0))
        assert keys.shape == (2,) and values["learning_rate"].shape == (2,)
    assert sweep.summary(None) == {}
    assert not isinstance(object(), anakin.Entries)
