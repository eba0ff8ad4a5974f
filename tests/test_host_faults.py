"""A host environment that raises or hangs ends a Sebulba run in one line naming the --env id, in both gymnasium
vectorization modes, the last completed update saved, the traceback in the log directory, no process left behind."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from podracer.run import checkpoint
from children import child_env  # tests/children.py

TESTS = Path(__file__).resolve().parent


def _marked_processes(marker: str) -> list[int]:
    """Processes whose environment carries ``marker`` (the run and every worker it spawned)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    "task, vectorization",
    [("Raising-v0", "sync"), ("Raising-v0", "async"), ("Hanging-v0", "async"), ("Hanging-v0", "sync")],
)
def test_a_failing_environment_ends_the_run_in_one_line_naming_the_env(tmp_path, task, vectorization):
    marker = f"PODRACER_FAULT_TEST={uuid.uuid4().hex}"
    env = child_env()
    env.update(PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]), **dict([marker.split("=")]))
    env_id = f"gymnasium:faulty_envs:{task}"
    directory, logs = tmp_path / "ck", tmp_path / "logs"
    flags = f"--env {env_id} --gymnasium-vectorization {vectorization} --num-envs-per-actor 2 --rollout-length 8"
    flags += " --total-env-steps 100000 --actor-timeout 10 --checkpoint-every 1 --cpu-devices 2"
    out = subprocess.run(
        [sys.executable, "-m", "podracer.cli", "sebulba", *flags.split(), "--checkpoint-dir", str(directory)]
        + ["--log-dir", str(logs)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 1, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert len(errors) == 1, out.stderr
    (line,) = errors
    if task == "Raising-v0":
        assert line.startswith(
            f"podracer sebulba: error: the environment --env {env_id} raised ValueError: the simulator lost its "
            "state (actor-0-device-0); the run stopped; its newest checkpoint is "
        ), line
        assert line.endswith(f"; its traceback is in {logs / 'traceback.txt'}."), line
        assert "the simulator lost its state" in (logs / "traceback.txt").read_text()
    else:
        assert (
            line.startswith("podracer sebulba: error: actor-0-device-0 produced no trajectory for ")
            and "(--actor-timeout 10): it has been waiting on its environment for" in line
        ), line
        assert f"(--env {env_id}); the run stopped; its newest checkpoint is " in line, line
    assert checkpoint.steps(str(directory)), out.stderr  # the last completed update is saved
    assert _marked_processes(marker) == []  # the run and its workers are gone
