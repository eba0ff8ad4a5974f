"""The synthetic data-parallel benchmark: its training step, and its command line end to end."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from podracer.run import parallel
from podracer.core.learner import init_learner_state, make_learner_step
from podracer.core.types import TimeStep, Trajectory

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def _benchmark_module():
    sys.path.insert(0, str(BENCHMARKS))  # it imports its sibling _report
    spec = importlib.util.spec_from_file_location(
        "synthetic_policy_gradient", BENCHMARKS / "synthetic_policy_gradient.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_step_on_two_devices_equals_one_device_on_the_concatenated_batch(devices):
    bench = _benchmark_module()
    _, args = bench.parse(["--time-steps", "5", "--core-size", "16", "--hidden-sizes", "16", "--learning-rate", "1e-2"])
    env, agent, optimizer = bench.make_training(args)
    t1, b = 6, 8
    keys = jax.random.split(jax.random.key(0), t1 * b)
    _, timestep = jax.vmap(env.reset)(keys)
    rng = np.random.default_rng(0)
    last = rng.random((t1, b)) < 0.2  # episode ends inside the trajectory: the LSTM resets after them
    timestep = TimeStep(
        jax.tree.map(lambda x: x.reshape(t1, b, *x.shape[1:]), timestep.observation),
        rng.random((t1, b)).astype(np.float32),
        np.ones((t1, b), np.float32),
        last,
    )
    core = rng.normal(size=(2, b, 16)).astype(np.float32)  # a stored mid-episode start state
    extras = {"logits": rng.normal(size=(t1, b, 8)).astype(np.float32)}
    trajectory = Trajectory(timestep, rng.integers(0, 8, (t1, b)).astype(np.int32), extras, (core[0], core[1]))
    state = jax.jit(
        lambda key: init_learner_state(agent, optimizer, key, jax.tree.map(lambda x: x[0], timestep.observation))
    )(jax.random.key(1))

    one_state, one_metrics = jax.jit(make_learner_step(agent, optimizer))(state, trajectory)

    def halves(x):  # [T + 1, 8, ...] -> [2, T + 1, 4, ...]
        return np.moveaxis(np.asarray(x).reshape(x.shape[0], 2, 4, *x.shape[2:]), 1, 0)

    step = parallel.device_map(make_learner_step(agent, optimizer, axis_names=(parallel.DEVICE_AXIS,)), devices[:2])
    # the start state: [8, ...] -> [2, 4, ...]
    halved = jax.tree.map(halves, trajectory._replace(actor_state=()))._replace(
        actor_state=jax.tree.map(lambda x: np.asarray(x).reshape(2, 4, *x.shape[1:]), trajectory.actor_state)
    )
    two_state, two_metrics = step(parallel.replicate(state, devices[:2]), parallel.shard(halved, devices[:2]))
    moved = jax.tree.map(
        lambda a, b: float(np.max(np.abs(np.asarray(a) - np.asarray(b)))), one_state.params, state.params
    )
    assert max(jax.tree.leaves(moved)) > 1e-3  # the step changed the parameters
    for one, two in zip(jax.tree.leaves(one_state.params), jax.tree.leaves(two_state.params)):
        np.testing.assert_allclose(np.asarray(two)[0], one, rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(two)[0], np.asarray(two)[1])  # devices agree
    np.testing.assert_allclose(float(two_metrics["loss"][0]), float(one_metrics["loss"]), rtol=1e-5)


@pytest.mark.slow
def test_benchmark_command_prints_and_saves_its_table(tmp_path):
    out = tmp_path / "synthetic"
    run = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "synthetic_policy_gradient.py"),
            "--batch-size",
            "2",
            "--time-steps",
            "4",
            "--num-devices",
            "2",
            "--updates-per-call",
            "2",
            "--calls",
            "2",
            "--core-size",
            "8",
            "--hidden-sizes",
            "8",
            "--num-discrete",
            "2",
            "--num-entities",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert (
        "| batch/device | time steps | devices | compile (s) | samples/s | samples/s per device | scaling efficiency |"
        in run.stdout
    )
    rows = __import__("json").loads(out.with_suffix(".json").read_text())["rows"]
    assert [r["devices"] for r in rows] == [1, 2] and rows[0]["scaling_efficiency"] == pytest.approx(1.0)
    assert all(r["samples_per_s"] > 0 and r["compile_s"] > 0 for r in rows)
    bad = subprocess.run(
        [sys.executable, str(BENCHMARKS / "synthetic_policy_gradient.py"), "--time-steps", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--time-steps must be >= 1, got 0." in bad.stderr
