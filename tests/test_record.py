"""A run directory records its run: ``run.toml`` (the settings, which ``--preset FILE`` replays to the same records on
the same seed), ``run.json`` (the command, the versions, the devices) and TensorBoard's hyper-parameters."""

import json
import sys
import tomllib

import jax
import pytest

from podracer.cli import parser, presets
from podracer.run import record
from podracer.run.config import AnakinConfig


def _train(argv):
    from podracer.cli import command as cli

    return cli.main(["anakin", "--cpu-devices", str(len(jax.devices("cpu"))), *argv])


def _records(directory):
    return [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]


def test_a_run_directory_replays_to_the_same_records(tmp_path, monkeypatch):
    first, again = tmp_path / "first", tmp_path / "again"
    flags = ["--agent", "ppo", "--num-envs", "16", "--rollout-length", "8", "--num-updates", "20",
             "--updates-per-call", "10", "--seed", "7", "--hidden-sizes", "32", "32", "--entropy-coef", "0.02",
             "--no-shared-torso"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["podracer", "anakin", *flags])
    assert _train([*flags, "--log-dir", str(first)]) == 0
    written = tomllib.loads((first / "run.toml").read_text())["run"]
    assert written["mode"] == "anakin" and f"--preset {first / 'run.toml'}" in written["note"]
    assert written["flags"]["seed"] == 7 and written["flags"]["hidden-sizes"] == [32, 32]
    assert written["flags"]["shared-torso"] is False and "log-dir" not in written["flags"]
    facts = json.loads((first / "run.json").read_text())
    assert facts["command"] == ["podracer", "anakin", *flags] and facts["mode"] == "anakin"
    assert facts["versions"]["jax"] == jax.__version__ and "podracer" in facts["versions"]
    assert len(facts["devices"]) == len(jax.devices("cpu"))
    assert b"_hparams_/experiment" in b"".join(p.read_bytes() for p in first.glob("events*"))

    assert _train(["--preset", str(first / "run.toml"), "--log-dir", str(again)]) == 0
    drop = ("sps", "run_id")
    ours, theirs = ([{k: v for k, v in r.items() if k not in drop} for r in _records(d)] for d in (first, again))
    assert ours == theirs and len(ours) == 2

    # the same config, parsed back: every field that says what the run trains
    replayed = parser.parse(AnakinConfig, ["--preset", str(first / "run.toml")], prog="prog")
    original = parser.parse(AnakinConfig, flags, prog="prog")
    assert replayed.agent == original.agent and replayed.seed == original.seed and replayed.num_envs == 16


def test_repeated_flags_are_recorded_and_replayed_once_per_value(tmp_path):
    cfg = parser.parse(AnakinConfig, ["--sweep", "learning_rate=1e-3,3e-3", "--sweep", "discount=0.9,0.99"], prog="p")
    flags = record.resolved_flags(cfg)
    assert flags["sweep"] == ["learning_rate=1e-3,3e-3", "discount=0.9,0.99"] and "import" not in flags
    path = tmp_path / "run.toml"
    path.write_text(record.toml("anakin", flags, "a note"))
    assert parser.parse(AnakinConfig, ["--preset", str(path)], prog="p").sweep == cfg.sweep


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "--preset {path}: cannot be read (No such file or directory)."),
        ("[a]\nmode = 'anakin'\nnote = ''\nflags = {}\n[b]\nmode = 'anakin'\nnote = ''\nflags = {}\n",
         "--preset {path}: holds 2 presets (a, b); give a file of one."),
        ("[run]\nmode = 'sebulba'\nnote = ''\nflags = {}\n", "--preset {path} is for podracer sebulba, not anakin."),
        ("[run\n", "--preset {path}: not TOML ("),
        (b"\x84\x00binary", "--preset {path}: not a UTF-8 text file (byte 0x84 at position 0); a preset file is TOML."),
        ("[run]\nmode = 'anakn'\nnote = ''\nflags = {}\n",
         "--preset {path}: preset 'run' in {stem}.toml: mode 'anakn' is not one of the modes (anakin, sebulba)."),
    ],
)  # fmt: skip
def test_a_bad_preset_file_is_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "run.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse(AnakinConfig, ["--preset", str(path)], prog="prog")
    assert exit_info.value.code == 2
    errors = capsys.readouterr().err.splitlines()
    expected = "prog: error: " + message.format(path=path, stem=str(path).removesuffix(".toml"))
    assert len(errors) == 1 and errors[0].startswith(expected), errors
    assert presets.is_file(str(path))


def test_a_requeued_job_keeps_one_run_directory(tmp_path, monkeypatch, capsys):
    """The README's Slurm line (--resume auto, no --log-dir), started three times: one run directory under
    $PODRACER_RUNS_DIR, whose metrics.jsonl runs on without a gap; a fourth start of the finished run makes no
    directory and names the flag that set its budget."""
    monkeypatch.setenv("PODRACER_RUNS_DIR", str(tmp_path / "runs"))
    checkpoints = str(tmp_path / "ck")
    common = ["--num-envs", "16", "--rollout-length", "8", "--updates-per-call", "10", "--checkpoint-dir",
              checkpoints, "--resume", "auto", "--checkpoint-every", "10"]  # fmt: skip
    for updates in (20, 40, 60):  # each attempt goes further, as a job's attempts cut by preemption do
        assert _train([*common, "--num-updates", str(updates)]) == 0
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1, runs
    steps = [r["env_steps"] for r in _records(runs[0])]
    assert steps == [16 * 8 * 10 * i for i in range(1, 7)]
    said = capsys.readouterr().out
    assert said.count(f"logging to {runs[0]}, the record of the run it resumes") == 2
    assert _train([*common, "--total-env-steps", str(16 * 8 * 60)]) == 0
    assert list((tmp_path / "runs").iterdir()) == runs
    assert "nothing to train (to train on, raise --total-env-steps)" in capsys.readouterr().out


def test_a_checkpoint_directory_is_its_own_when_moved_and_not_when_copied(tmp_path):
    import shutil

    from podracer.run import checkpoint

    original = tmp_path / "ck"
    original.mkdir()
    identity = checkpoint.directory_identity(str(original))
    assert checkpoint.same_directory(identity, str(original))
    shutil.copytree(original, tmp_path / "copy")
    assert not checkpoint.same_directory(identity, str(tmp_path / "copy"))
    original.rename(tmp_path / "moved")
    assert checkpoint.same_directory(identity, str(tmp_path / "moved"))
    (
        tmp_path / "ck"
    ).mkdir()  # another directory made at the old path: the path names the run's (a volume mounted again)
    assert checkpoint.same_directory(identity, str(tmp_path / "ck"))


@pytest.mark.slow
def test_a_fork_from_a_copied_checkpoint_directory_never_writes_into_the_first_runs_record(
    tmp_path, monkeypatch, capsys
):
    """Run A checkpoints every 10 updates into ckA and logs to logA; ckA copied to ckB without its last checkpoint
    and resumed (--resume auto, no --log-dir) is a fork: it logs to a new run directory, says which and why, and
    logA stays byte for byte as A left it. The copy moved elsewhere is still the fork's own (a move keeps the
    directory); the original, resumed, still continues logA."""
    import shutil

    monkeypatch.setenv("PODRACER_RUNS_DIR", str(tmp_path / "runs"))
    first, ck_a, ck_b = tmp_path / "logA", tmp_path / "ckA", tmp_path / "ckB"
    common = ["--num-envs", "16", "--rollout-length", "8", "--updates-per-call", "10", "--checkpoint-every", "10"]
    assert _train([*common, "--num-updates", "30", "--checkpoint-dir", str(ck_a), "--log-dir", str(first)]) == 0
    before = (first / "metrics.jsonl").read_bytes()
    shutil.copytree(ck_a, ck_b)
    for leftover in [*ck_b.glob("step_30*"), ck_b / "finished.json"]:
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    capsys.readouterr()
    assert _train([*common, "--num-updates", "40", "--checkpoint-dir", str(ck_b), "--resume", "auto"]) == 0
    said = capsys.readouterr().out
    (fork,) = (tmp_path / "runs").iterdir()
    assert (
        f"logging to {fork}: --checkpoint-dir {ck_b} is a copy, and the record {first} belongs to the run whose "
        f"checkpoints {ck_a} holds, which this fork leaves as it is (--log-dir chooses another)"
    ) in said
    assert (first / "metrics.jsonl").read_bytes() == before
    assert [r["env_steps"] for r in _records(fork)] == [16 * 8 * 30, 16 * 8 * 40]
    moved = tmp_path / "moved"
    ck_b.rename(moved)  # the fork's checkpoints, moved: still its own, its record continues
    assert _train([*common, "--num-updates", "50", "--checkpoint-dir", str(moved), "--resume", "auto"]) == 0
    assert f"logging to {fork}, the record of the run it resumes" in capsys.readouterr().out
    assert [r["env_steps"] for r in _records(fork)][-1] == 16 * 8 * 50
    assert _train([*common, "--num-updates", "40", "--checkpoint-dir", str(ck_a), "--resume", "auto"]) == 0
    assert f"logging to {first}, the record of the run it resumes" in capsys.readouterr().out
    assert [r["env_steps"] for r in _records(first)] == [16 * 8 * 10 * i for i in range(1, 5)]


@pytest.mark.slow
def test_a_resume_into_a_record_with_lines_past_its_checkpoint_writes_nothing_there(tmp_path, monkeypatch, capsys):
    """An attempt killed after logging past its last checkpoint (step_30 and finished.json gone: a kill -9 before the
    save) leaves a record with a line the resume would write again. Without --log-dir the resume logs to a new run
    directory and names both; with that --log-dir it is refused in one line; the record stays byte for byte."""
    import shutil

    monkeypatch.setenv("PODRACER_RUNS_DIR", str(tmp_path / "runs"))
    checkpoints = tmp_path / "ck"
    common = ["--num-envs", "16", "--rollout-length", "8", "--updates-per-call", "10", "--checkpoint-every", "20",
              "--checkpoint-dir", str(checkpoints), "--resume", "auto"]  # fmt: skip
    assert _train([*common, "--num-updates", "30"]) == 0
    (first,) = (tmp_path / "runs").iterdir()
    for leftover in [*checkpoints.glob("step_30*"), checkpoints / "finished.json"]:
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    before = (first / "metrics.jsonl").read_bytes()
    assert [r["env_steps"] for r in _records(first)] == [1280, 2560, 3840]
    capsys.readouterr()
    assert _train([*common, "--num-updates", "40", "--log-dir", str(first)]) == 2
    assert (
        f"podracer anakin: error: --log-dir {str(first)!r} holds 1 line(s) past step_20 (2,560 env steps), the "
        "checkpoint this run resumes: resuming there would write those steps twice; choose another --log-dir (or "
        "leave it out: a new run directory).\n"
    ) in capsys.readouterr().err
    assert _train([*common, "--num-updates", "40"]) == 0
    (second,) = set((tmp_path / "runs").iterdir()) - {first}
    assert (
        f"logging to {second}: the record {first} holds 1 line(s) past step_20 (2,560 env steps), the checkpoint this "
        "run resumes, which this resume leaves as they are (--log-dir chooses another)"
    ) in capsys.readouterr().out
    assert (first / "metrics.jsonl").read_bytes() == before
    assert [r["env_steps"] for r in _records(second)] == [3840, 5120]


@pytest.mark.slow
def test_a_fresh_process_resumes_into_its_record_and_a_fork_into_a_new_one(tmp_path):
    """The command line as a job runs it, each start a process of its own (JAX not yet started when the log directory
    is settled from the checkpoint's metadata): a resume without --log-dir continues the record, with --log-dir too,
    and a copy of the checkpoint directory logs to a new run directory."""
    import os
    import shutil
    import subprocess

    env = {**os.environ, "PODRACER_RUNS_DIR": str(tmp_path / "runs")}
    env.pop("XLA_FLAGS", None)
    common = ["--num-envs-per-device", "4", "--rollout-length", "4", "--updates-per-call", "10", "--checkpoint-every",
              "10", "--resume", "auto"]  # fmt: skip

    def podracer_cores():
        from podracer.run import parallel

        return parallel.available_cores()

    def podracer(*argv):
        done = subprocess.run([sys.executable, "-m", "podracer.cli", "anakin", *common, *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    podracer("--num-updates", "10", "--checkpoint-dir", "ck")
    (run,) = (tmp_path / "runs").iterdir()
    assert f"logging to {run}, the record of the run it resumes" in podracer(
        "--num-updates", "20", "--checkpoint-dir", "ck"
    )
    podracer("--num-updates", "30", "--checkpoint-dir", "ck", "--log-dir", str(run))
    shutil.copytree(tmp_path / "ck", tmp_path / "copy")
    shutil.rmtree(tmp_path / "copy" / "step_30")
    for leftover in ("step_30.json", "finished.json"):
        (tmp_path / "copy" / leftover).unlink()
    assert "is a copy, and the record" in podracer("--num-updates", "40", "--checkpoint-dir", "copy")
    per_line = 10 * 4 * 4 * int(podracer_cores())  # 10 updates of 4 envs x 4 steps on each of the cores' devices
    assert [r["env_steps"] for r in _records(run)] == [per_line, 2 * per_line, 3 * per_line]
    assert len(list((tmp_path / "runs").iterdir())) == 2  # the fork's record beside the first


def test_a_sebulba_run_directory_replays_to_the_same_first_progress_line(tmp_path, monkeypatch):
    """Sebulba's actor threads make later windows depend on timing; the first (the initial policy's rollout and
    the first update) does not, and a replay from the run directory repeats it."""
    from podracer.cli import command as cli

    first, again = tmp_path / "first", tmp_path / "again"
    flags = ["--env", "gymnasium:CartPole-v1", "--agent", "ppo", "--num-envs", "8", "--rollout-length", "32",
             "--total-env-steps", "512", "--log-every", "1", "--seed", "3", "--actor-devices", "0",
             "--learner-devices", "1"]  # fmt: skip
    cpu = ["--cpu-devices", str(len(jax.devices("cpu")))]
    monkeypatch.setattr(sys, "argv", ["podracer", "sebulba", *flags])
    assert cli.main(["sebulba", *cpu, *flags, "--log-dir", str(first)]) == 0
    written = tomllib.loads((first / "run.toml").read_text())["run"]
    assert written["mode"] == "sebulba" and written["flags"]["env"] == "gymnasium:CartPole-v1"
    assert cli.main(["sebulba", *cpu, "--preset", str(first / "run.toml"), "--log-dir", str(again)]) == 0
    timing = ("sps", "fps", "run_id", "learner_wait_s", "learn_s", "policy_lag", "queue_size", "host_memory_mb")
    ours, theirs = (
        {k: v for k, v in _records(d)[0].items() if k not in timing and not k.startswith("actor_")}
        for d in (first, again)
    )
    assert ours == theirs and ours["env_steps"] == 256 and ours["episodes"] > 0, ours


def test_a_refused_command_leaves_no_run_directory(tmp_path, monkeypatch, capsys):
    """A command refused after its run directory was made (here: environments that do not split over the devices)
    removes that directory; one with a record of training is kept."""
    from podracer.run import rundir

    monkeypatch.setenv("PODRACER_RUNS_DIR", str(tmp_path / "runs"))
    assert _train(["--num-envs", "3"]) == 2
    assert "--num-envs = 3 is not divisible" in capsys.readouterr().err
    assert list((tmp_path / "runs").iterdir()) == []
    kept = rundir.default_log_dir("catch", "a2c", 0)
    (tmp_path / "runs" / kept.split("/")[-1] / "metrics.jsonl").write_text('{"env_steps": 1}\n')
    assert not rundir.discard_if_untrained(kept) and (tmp_path / "runs").joinpath(kept.split("/")[-1]).is_dir()
