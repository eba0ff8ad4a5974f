"""One writer per directory: a second run on a directory that a live run holds is refused in one line naming the
holder; the lock dies with its process, however it ends."""

import dataclasses
import json
import os
import signal
import subprocess
import socket
import sys

import jax
import pytest

from podracer.run import runlock
from podracer.core.agents import A2CConfig
from podracer.run.config import AnakinConfig
from podracer.run.compose import train_anakin
from podracer.run.resume_identity import check_resume_identity
from children import child_env  # tests/children.py

HOLD = """
import sys, time
from podracer.run import runlock
with runlock.hold({"--checkpoint-dir": sys.argv[1]}):
    print("held", flush=True)
    time.sleep(600)
"""


def _holder(directory):
    """A process that holds ``directory``'s lock until it is killed."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_run_is_refused_naming_the_holder_until_the_holder_dies(tmp_path):
    directory = tmp_path / "run"
    process = _holder(directory)
    try:
        config = AnakinConfig(env="catch", agent=A2CConfig(), num_envs=16, num_updates=2, updates_per_call=1)
        with pytest.raises(ValueError) as refused:
            train_anakin(dataclasses.replace(config, checkpoint_dir=str(directory), resume="auto"))
        message = str(refused.value)
        assert message.startswith(f"--checkpoint-dir {str(directory)!r} is in use by another run (process ")
        assert f"process {process.pid} on " in message and "choose another --checkpoint-dir." in message
        assert "\n" not in message
        with pytest.raises(ValueError, match=r"^--log-dir .* is in use by another run"):  # the log directory too
            train_anakin(dataclasses.replace(config, log_dir=str(directory)))
        assert not (directory / "metrics.jsonl").exists()  # refused before anything was written
        assert runlock.holder(str(directory))["pid"] == process.pid
    finally:
        process.send_signal(signal.SIGKILL)  # dies without releasing anything: the kernel drops the lock
        process.wait()
    train_anakin(dataclasses.replace(config, checkpoint_dir=str(directory), log_dir=str(directory), resume="auto"))
    assert (directory / "step_2.json").exists() and len((directory / "metrics.jsonl").read_text().splitlines()) == 2
    assert runlock.holder(str(directory)) == {}  # released at the end


def test_a_process_enters_its_own_lock_again_and_one_path_under_two_flags_is_locked_once(tmp_path):
    with runlock.hold({"--checkpoint-dir": str(tmp_path), "--log-dir": str(tmp_path / ".." / tmp_path.name)}):
        with runlock.hold({"--log-dir": str(tmp_path)}):
            assert runlock.holder(str(tmp_path))["pid"] == os.getpid()
        assert runlock.holder(str(tmp_path))["pid"] == os.getpid()  # the outer hold still has it
        refused = subprocess.run(
            [sys.executable, "-c", HOLD, str(tmp_path)], capture_output=True, text=True, timeout=120
        )
        assert refused.returncode == 1 and "is in use by another run" in refused.stderr.splitlines()[-1]
    assert runlock.holder(str(tmp_path)) == {}
    with runlock.hold({"--checkpoint-dir": str(tmp_path)}, enabled=False):  # another process of a run: no lock
        assert runlock.holder(str(tmp_path)) == {}


def test_without_flock_a_record_of_a_process_that_is_gone_is_stale_and_a_live_one_refuses(tmp_path, monkeypatch):
    def no_flock(fd, operation):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(runlock.fcntl, "flock", no_flock)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = {"host": socket.gethostname(), "pid": int(gone.stdout), "started": "then", "command": "podracer anakin"}
    (tmp_path / runlock.LOCK_NAME).write_text(json.dumps(record))
    with runlock.hold({"--checkpoint-dir": str(tmp_path)}):
        assert runlock.holder(str(tmp_path))["pid"] == os.getpid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (tmp_path / runlock.LOCK_NAME).write_text(json.dumps({**record, "pid": live.pid}))
        with pytest.raises(ValueError, match=rf"in use by another run \(process {live.pid} on .*podracer anakin\)"):
            with runlock.hold({"--checkpoint-dir": str(tmp_path)}):
                pass
    finally:
        live.kill()
        live.wait()


@pytest.mark.slow
def test_two_command_lines_on_one_directory_the_second_refused_and_the_firsts_records_intact(tmp_path):
    env = child_env()
    directory = str(tmp_path / "run")
    flags = "--env catch --num-envs 32 --num-updates 4000 --updates-per-call 20 --cpu-devices 2 --resume auto"
    argv = [sys.executable, "-u", "-m", "podracer.cli", "anakin", *flags.split()]
    argv += ["--checkpoint-dir", directory, "--log-dir", directory, "--checkpoint-every", "20"]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in first.stdout:  # training, with a checkpoint and a metrics line written
            if "env steps" in line and "%" in line:
                break
        second = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        assert second.returncode == 2, second.stderr
        errors = [line for line in second.stderr.splitlines() if "error" in line.lower()]
        assert len(errors) == 1 and errors[0].startswith(
            f"podracer anakin: error: --checkpoint-dir {directory!r} is in use by another run (process {first.pid} on "
        ), second.stderr
        assert first.poll() is None  # the first run goes on
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
    assert first.returncode == 143
    steps = [json.loads(line)["env_steps"] for line in open(os.path.join(directory, "metrics.jsonl"))]
    assert len(steps) >= 1 and steps == sorted(set(steps)), steps  # one series, every line once


def test_a_resume_that_does_not_match_its_run_is_refused_naming_each_flag_and_both_values(tmp_path):
    directory = str(tmp_path / "run")
    first = AnakinConfig(
        env="catch",
        agent=A2CConfig(),
        num_envs_per_device=4,
        num_updates=2,
        updates_per_call=1,
        checkpoint_dir=directory,
    )
    train_anakin(first)
    recorded = json.loads((tmp_path / "run" / "step_2.json").read_text())["resume_identity"]
    assert recorded["--num-envs-per-device"] == 4 and recorded["--hidden-sizes"] == [64, 64]
    assert recorded["devices (--cpu-devices on a CPU)"] == len(jax.devices()) and recorded["--num-processes"] == 1
    again = dataclasses.replace(first, resume="auto", num_updates=4)
    with pytest.raises(ValueError) as refused:
        train_anakin(dataclasses.replace(again, num_envs_per_device=8, agent=A2CConfig().replace(hidden_sizes=(32,))))
    assert str(refused.value) == (
        f"--resume: {directory!r} holds a checkpoint of another run: --hidden-sizes 64 64 there, 32 here; "
        "--num-envs-per-device 4 there, 8 here. Resume with its settings, or choose another --checkpoint-dir."
    )
    other = {**recorded, "devices (--cpu-devices on a CPU)": 2}
    with pytest.raises(ValueError, match=r"devices \(--cpu-devices on a CPU\) 2 there, 8 here\. Resume"):
        check_resume_identity(directory, {"resume_identity": other}, recorded)
    # a checkpoint written before the identity was recorded: what it did record still counts
    older = {"mode": "anakin", "env": "catch", "agent": "a2c", "rollout_length": 16, "normalize": "observations"}
    with pytest.raises(ValueError, match=r"another run: --normalize-observations True there, False here\. Resume"):
        check_resume_identity(directory, older, recorded)
    assert train_anakin(again).history[-1]["env_steps"] == 4 * 4 * 16 * len(jax.devices())  # the same run resumes


def test_a_fresh_run_never_adds_a_second_series_to_a_log_directory(tmp_path):
    logs, directory = tmp_path / "logs", str(tmp_path / "ck")
    config = AnakinConfig(env="catch", agent=A2CConfig(), num_envs=16, num_updates=2, updates_per_call=1)
    train_anakin(dataclasses.replace(config, log_dir=str(logs)))
    with pytest.raises(ValueError) as refused:
        train_anakin(dataclasses.replace(config, log_dir=str(logs)))
    assert str(refused.value) == (
        f"--log-dir {str(logs)!r} already holds the records of another run (2 lines in metrics.jsonl): a fresh run "
        "there would add a second series; choose another --log-dir (or --resume that run)."
    )
    # a requeued job whose earlier attempt saved no checkpoint: --resume auto starts fresh, over those records
    requeued = dataclasses.replace(config, log_dir=str(logs), checkpoint_dir=directory, resume="auto", num_updates=3)
    train_anakin(requeued)
    records = [json.loads(line) for line in (logs / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in records] == [16 * 16 * k for k in (1, 2, 3)]
    assert len({r["run_id"] for r in records}) == 1


@pytest.mark.slow
def test_a_resume_on_another_device_count_is_refused_through_the_command_line(tmp_path):
    env = child_env()
    directory = str(tmp_path / "run")
    flags = ["anakin", "--env", "catch", "--num-envs", "16", "--num-updates", "2", "--updates-per-call", "1"]
    flags += ["--checkpoint-dir", directory, "--resume", "auto"]

    def run(*more):
        return subprocess.run(
            [sys.executable, "-m", "podracer.cli", *flags, *more], capture_output=True, text=True, timeout=300, env=env
        )

    assert run("--cpu-devices", "2").returncode == 0
    refused = run("--cpu-devices", "1", "--num-updates", "4")
    assert refused.returncode == 2, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        f"podracer anakin: error: --resume: {directory!r} holds a checkpoint of another run: --num-envs-per-device 8 "
        "there, 16 here; devices (--cpu-devices on a CPU) 2 there, 1 here. Resume with its settings, or choose "
        "another --checkpoint-dir."
    ], refused.stderr


def test_a_flag_recorded_on_one_side_only_is_a_difference_unless_its_absence_means_the_same():
    here = {"mode": "anakin", "--env": "catch", "--agent": "a2c", "--update-rule": "adam"}
    population = {**here, "--population": 4, "--pbt-search": ["learning_rate=log:1e-4..1e-2"]}
    with pytest.raises(ValueError) as refused:
        check_resume_identity("D", {"resume_identity": population}, here)
    assert str(refused.value) == (
        "--resume: 'D' holds a checkpoint of another run: --population 4 there, none here; --pbt-search "
        "learning_rate=log:1e-4..1e-2 there, none here. Resume with its settings, or choose another --checkpoint-dir."
    )
    with pytest.raises(ValueError, match=r"another run: --population none there, 4 here; --pbt-search none there"):
        check_resume_identity("D", {"resume_identity": here}, population)
    rmsprop = {**here, "--update-rule": "rmsprop"}
    with pytest.raises(ValueError, match=r"another run: --update-rule adam there, rmsprop here\. Resume"):
        check_resume_identity("D", {"resume_identity": here}, rmsprop)
    # a checkpoint written before --update-rule was recorded: its agent's hyper-parameters say it, else Adam
    before = {"mode": "anakin", "--env": "catch", "--agent": "a2c"}
    check_resume_identity("D", {"resume_identity": before}, here)
    check_resume_identity(
        "D", {"resume_identity": before, "agent_hyperparameters": {"update_rule": "rmsprop"}}, rmsprop
    )
    with pytest.raises(ValueError, match=r"--update-rule adam there, rmsprop here"):
        check_resume_identity("D", {"resume_identity": before}, rmsprop)


def test_sebulba_never_calls_another_runs_checkpoint_finished(tmp_path):
    from podracer.run.config import SebulbaConfig
    from podracer.run.compose import train_sebulba

    directory = str(tmp_path / "run")
    train_anakin(
        AnakinConfig(
            env="catch", agent=A2CConfig(), num_envs=8, num_updates=8, updates_per_call=4, checkpoint_dir=directory
        )
    )
    config = SebulbaConfig(
        env="CartPole-v1",
        total_env_steps=64,  # one update: fewer than the 8 the Anakin checkpoint holds
        num_envs_per_actor=4,
        rollout_length=16,
        actor_devices=(0,),
        learner_devices=(1,),
        checkpoint_dir=directory,
        resume="auto",
    )
    with pytest.raises(
        ValueError, match=r"^--resume: .* holds a checkpoint of another run: mode anakin there, sebulba "
    ):
        train_sebulba(config)


def test_a_resume_that_changes_what_shapes_no_state_says_so_in_one_line(tmp_path, capsys):
    from podracer.run.resume_identity import changes_said

    saved = {"agent_hyperparameters": {"unroll_steps": 5, "hidden_sizes": [64, 64], "discount": 0.99}}
    assert changes_said(saved, {"unroll_steps": 3, "hidden_sizes": (64, 64), "discount": 0.99}) == (
        "resuming with --unroll-steps 3 (was 5)"
    )
    assert changes_said(saved, {"unroll_steps": 5, "hidden_sizes": (64, 64), "new_flag": 1}) == ""
    # the other player of a two-player game shapes no state either: said, not refused (an absent record: random)
    assert changes_said({**saved, "opponent": "random"}, {"unroll_steps": 5}, {"opponent": "self"}) == (
        "resuming with --opponent self (was random)"
    )
    assert changes_said(saved, {"unroll_steps": 3}, {"opponent": "greedy"}) == (
        "resuming with --unroll-steps 3 (was 5), --opponent greedy (was random)"
    )
    from podracer.run.resume_identity import check_resume_identity

    check_resume_identity("D", {"resume_identity": {"mode": "anakin", "--opponent": "greedy"}}, {"mode": "anakin"})
    directory = str(tmp_path / "run")
    first = AnakinConfig(
        env="catch", agent=A2CConfig(), num_envs=8, num_updates=4, updates_per_call=4, checkpoint_dir=directory
    )
    train_anakin(first)
    capsys.readouterr()
    again = dataclasses.replace(first, resume="auto", num_updates=8, agent=A2CConfig().replace(entropy_coef=0.02))
    train_anakin(again)
    said = [line for line in capsys.readouterr().out.splitlines() if "resuming with" in line]
    assert said == ["podracer: resuming with --entropy-coef 0.02 (was 0.01)"]
