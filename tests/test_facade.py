"""The Python entry: the README's ``podracer.train(...)`` and ``podracer.load(dir).act(obs)`` lines, as written."""

import re
from pathlib import Path

import jax
import numpy as np
import pytest

import podracer

ROOT = Path(__file__).resolve().parents[1]


def test_the_readmes_train_and_load_lines_run_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PODRACER_RUNS_DIR", str(tmp_path / "runs"))
    block = next(
        b for b in re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S) if "podracer.train(" in b
    )
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - the README's own lines
    run, policy, actions = scope["run"], scope["policy"], scope["actions"]
    assert run.status == 0 and run.log_dir.startswith(str(tmp_path / "runs"))
    said = capsys.readouterr().out.splitlines()  # the command line's start and closing lines
    assert said[0] == (
        f"podracer.train('anakin'): logging to {run.log_dir} (metrics.jsonl, TensorBoard; no_log_dir=True: none)"
    )
    assert any(line.startswith("podracer anakin: ") and " on catch, " in line for line in said), said  # the banner
    (closing,) = [line for line in said if line.startswith("final ")]
    assert re.search(r"; \d+ XLA programs?(, \d+ from the cache)?$", closing), closing
    assert run.checkpoint_dir == f"{run.log_dir}/checkpoint" and (Path(run.log_dir) / "run.toml").exists()
    shown = repr(run).splitlines()  # what a notebook shows for a bare `run`: a few lines, not the trained state
    assert (
        len(shown) < 10 and shown[0] == f"Trained(podracer.train('anakin'): {run.config.agent_name} on catch, status 0"
    )
    assert f"  log_dir: {run.log_dir}" in shown and f"  checkpoint_dir: {run.checkpoint_dir}" in shown
    assert shown[1].startswith(f"  env steps: {run.result.history[-1]['env_steps']:,.0f}; last record: episode_return ")
    assert np.asarray(actions).shape == (8,) and set(np.asarray(actions).tolist()) <= {0, 1, 2}
    again = policy.act(scope["timestep"].observation)
    np.testing.assert_array_equal(again, actions)  # greedy: the same observations, the same actions
    sampled = policy.act(scope["timestep"].observation, jax.random.key(3), greedy=False)
    assert np.asarray(sampled).shape == (8,)


def test_bad_settings_and_directories_raise_one_line():
    with pytest.raises(
        ValueError, match=r"^podracer.train\('anakin'\): error: --learning-rate must be > 0, got -1.0\.$"
    ):
        podracer.train(learning_rate=-1)
    with pytest.raises(ValueError, match=r"^podracer.train: mode is 'anakin' or 'sebulba', got 'x'\.$"):
        podracer.train("x")
    with pytest.raises(ValueError, match=r"^podracer.load: 'nowhere' is not a directory"):
        podracer.load("nowhere")


def test_a_loaded_policy_names_both_shapes_for_observations_it_cannot_take(tmp_path):
    from podracer.run import compose
    from podracer.run.config import AnakinConfig

    directory = str(tmp_path / "ck")
    small = dict(num_envs_per_device=2, rollout_length=4, num_updates=2, updates_per_call=2, no_log_dir=True)
    compose.train_anakin(AnakinConfig(checkpoint_dir=directory, **small))
    policy = podracer.load(directory)
    assert policy.act(np.zeros((3, 10, 5), np.float32)).shape == (3,)  # Catch: a batch of 10 x 5 boards
    for bad, said in [((3, 5, 10), "(3, 5, 10)"), ((10, 5), "(10, 5)")]:
        with pytest.raises(ValueError) as error:
            policy.act(np.zeros(bad, np.float32))
        assert str(error.value) == (
            f"Policy.act: observations of shape {said}, dtype float32; this checkpoint's agent acts on a batch of "
            "observations of shape (10, 5) (float32): pass [B, 10, 5]."
        )
