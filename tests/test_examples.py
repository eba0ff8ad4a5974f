"""The command-line example, its multi-process mode, and the notebook, run as a user runs them."""

import json
import math
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from podracer.run import compile_cache
from children import child_env  # tests/children.py

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "anakin_catch.py"


def _env():
    return child_env(PYTHONUNBUFFERED="1")  # the example sets its own device count


def _in_process(capsys, *args) -> tuple[int, str, str]:
    """The example's ``main`` called in this process with the tests' 8 CPU devices (``--cpu-devices 8``): its exit
    status, stdout and stderr. For what a command line says and refuses, where the process boundary is not what is
    tested: a process of its own costs seconds of imports before the first line."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("anakin_catch_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    capsys.readouterr()
    try:
        status = example.main(["--cpu-devices", "8", *args])
    except SystemExit as stop:
        status = stop.code
    out, err = capsys.readouterr()
    return status, out, err


def _run(*args, timeout=300, log_compiles=False):
    env = {**_env(), "JAX_LOG_COMPILES": "1"} if log_compiles else _env()
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


def _records(log_dir: Path):
    return [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]


def test_help_lists_the_flags():
    out = _run("--help")
    assert out.returncode == 0, out.stderr
    for flag in (
        "--seed",
        "--num-envs-per-device",
        "--rollout-length",
        "--num-updates",
        "--log-dir",
        "--agent",
        "--env",
        "--coordinator",
        "--num-processes",
        "--process-id",
        "--distributed",
    ):
        assert flag in out.stdout


def test_four_seeds_in_one_program_solve_catch(tmp_path):
    """--num-seeds 4: at least 3 of the 4 seeds reach 0.9 (1.0 is optimal) with the default settings; a log line per
    host call in metrics.jsonl, and TensorBoard's events."""
    out = _run("--cpu-devices", "2", "--num-seeds", "4", "--log-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "env steps" in out.stdout and "sps" in out.stdout and "return" in out.stdout
    assert "seeds 0 ... 3 together" in out.stdout
    finals = [float(out.stdout.split(f"seed {i}: final training return ")[1].split()[0]) for i in range(4)]
    assert sum(f >= 0.9 for f in finals) >= 3, out.stdout
    assert "over 4 seeds: mean" in out.stdout and "interquartile mean" in out.stdout
    records = _records(tmp_path)
    assert len(records) == 12
    assert all(len(r["episode_return_per_seed"]) == 4 for r in records)
    assert records[-1]["episode_return_per_seed"] == pytest.approx(finals, abs=5e-4)
    assert records[-1]["env_steps"] == 240 * 16 * 64 * 2  # per seed
    assert all({"env_steps", "sps", "episode_return"} <= set(r) for r in records)
    assert list(tmp_path.glob("events.out.tfevents.*"))


def test_bad_command_lines_fail_with_clear_messages(tmp_path, capsys):
    out = _run("--agent", "sac")  # Catch's actions are discrete; in a process of its own: the exit status and stderr
    assert (
        out.returncode == 2
        and (
            "anakin_catch.py: error: --agent sac takes continuous actions and this "
            "environment's are discrete; use a2c, dqn, impala, muzero, ppo, pqn or r2d2."
        )
        in out.stderr
    )
    status, _, err = _in_process(capsys, "--num-processes", "2", "--process-id", "2", "--coordinator", "127.0.0.1:1")
    assert status == 2
    assert "--process-id 2 is out of range for 2 processes (expected 0 ... 1)." in err
    status, _, err = _in_process(capsys, "--num-envs", "10")
    assert status == 2
    assert "--num-envs = 10 is not divisible by the 8 devices of this run; choose a multiple of 8." in err
    # Sizes far beyond this machine's memory: refused from their shapes, before anything is allocated or compiled.
    for flags, named in (
        (["--num-envs-per-device", "1000000000"], "1,000,000,000 envs per device (--num-envs-per-device"),
        (["--agent", "dqn", "--replay-capacity", "1000000000"], "--replay-capacity 1,000,000,000"),
        # what multiplies the memory is named first, where it is the number of learners trained together
        (
            ["--population", "1000000", "--pbt-search", "learning_rate=log:1e-4..1e-2"],
            "(--population 1,000,000 lanes x ",
        ),
        (["--num-seeds", "1000000"], "(--num-seeds 1,000,000 x "),
    ):
        status, _, err = _in_process(
            capsys, "--no-log-dir", "--no-compile-cache", "--compile-cache-dir", str(tmp_path / "off"), *flags
        )
        lines = err.splitlines()
        assert status == 2 and len(lines) == 1, err
        assert lines[0].startswith("anakin_catch.py: error: this run needs about ") and named in lines[0], lines
        assert "of memory for its state and rollouts" in lines[0] and "available; lower them." in lines[0]
    assert not (tmp_path / "off").exists()  # --no-compile-cache: no cache directory made


def _slurm_step(num_tasks: int) -> dict:
    """The variables Slurm sets for every task of a step (``srun``) on one node, here 127.0.0.1, for a job id whose
    coordinator port (JAX derives it: 61440 + id % 4096) is free."""
    import random

    for _ in range(100):
        job_id = random.randrange(10_000, 1_000_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", 61440 + job_id % 4096))
                break
            except OSError:
                continue
    return {
        "SLURM_JOB_ID": str(job_id),
        "SLURM_STEP_NODELIST": "127.0.0.1",
        "SLURM_NTASKS": str(num_tasks),
        "SLURM_STEP_NUM_NODES": "1",
    }


@pytest.mark.slow
def test_two_processes_solve_catch_as_one_process_with_the_same_devices(tmp_path):
    """2 processes x 2 CPU devices joined by jax.distributed on 127.0.0.1 == 1 process x 4 devices. The processes
    find each other as in a Slurm step: ``--distributed`` lets JAX detect the cluster from Slurm's variables
    (the explicit --coordinator flags are exercised by the fault tests and Sebulba's 2-process test)."""
    args = ["--num-envs", "64", "--num-updates", "160", "--updates-per-call", "20"]
    multi, slurm = tmp_path / "multi", _slurm_step(2)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(EXAMPLE),
                "--cpu-devices",
                "2",
                "--distributed",
                "--log-dir",
                str(multi / str(i)),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**_env(), **slurm, "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i)},
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (stdout, stderr) in zip(procs, outputs):
        assert p.returncode == 0, stderr
    assert "4 device(s) in 2 process(es)" in outputs[0][0]
    assert "env steps" not in outputs[1][0]  # only process 0 prints progress ...
    assert not (multi / "1").exists()  # ... and writes files

    single = tmp_path / "single"
    out = _run("--cpu-devices", "4", "--log-dir", str(single), *args)
    assert out.returncode == 0, out.stderr
    multi_records, single_records = _records(multi / "0"), _records(single)
    assert [r["env_steps"] for r in multi_records] == [r["env_steps"] for r in single_records]
    # Same devices, same seeds: the learning curves agree (up to float summation order in the all-reduce).
    for m, s in zip(multi_records[:3], single_records[:3]):
        assert math.isclose(m["episode_return"], s["episode_return"], abs_tol=0.02)
    assert multi_records[-1]["episode_return"] >= 0.9
    assert single_records[-1]["episode_return"] >= 0.9


def test_notebook_executes_and_learns(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # importing envpool sets it to Agg, which hides inline plots
    notebook = nbformat.read(ROOT / "examples" / "anakin_notebook.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )
    assert "pmap over 2 device(s)" in outputs
    assert "pmap and shard_map give the same parameters: True" in outputs
    final = float(outputs.split("final training return")[1].split()[0])
    assert final >= 0.9
    plot_outputs = [cell.get("outputs") for cell in notebook.cells if "plt.show()" in cell.source]
    assert any(
        "image/png" in output.get("data", {})
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    ), plot_outputs


def _cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (every thread's, user and system), from ``/proc``."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_ctrl_c_abandons_a_long_call_and_saves_the_last_completed_update(tmp_path):
    """Each host call takes several seconds: Ctrl-C does not wait for the one in flight."""
    import time

    from podracer.run import checkpoint

    updates_per_call = 20000
    proc = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLE),
            "--cpu-devices",
            "2",
            "--num-envs-per-device",
            "16",
            "--num-updates",
            "400000",
            "--updates-per-call",
            str(updates_per_call),
            "--checkpoint-dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    for line in proc.stdout:  # the first progress line (not a heartbeat line of a slow first call): it is done ...
        if "env steps" in line and "| sps" in line:
            break
    # ... and the second one under way: the signal is sent once the process has computed for a second more (CPU
    # time, not wall time: on a busy machine the host's work between two calls can take a second of wall time, and
    # a signal that lands there stops the run before the second call, which is a different path)
    start, guard = _cpu_seconds(proc.pid), time.monotonic() + 300
    while _cpu_seconds(proc.pid) - start < 1.0 and time.monotonic() < guard and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)  # a hang guard, not a latency bound (that figure is a busy machine's)
    # What happened, not how fast: the call in flight was abandoned (the run did not wait for it to end), status 130.
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert "Ctrl-C: stopping: saving the last completed update" in stderr
    assert "abandoned; saving the last completed update" in stderr, stderr
    assert checkpoint.steps(str(tmp_path)) == [updates_per_call]
    assert checkpoint.read_metadata(str(tmp_path))["env_steps"] == updates_per_call * 16 * 16 * 2
    assert (tmp_path / f"step_{updates_per_call}.run" / "process_0").is_dir()
    # the abandoned call's exit path says the run has ended too: a preview beside it ends
    assert json.loads((tmp_path / "finished.json").read_text()) == {"steps": [updates_per_call]}


def test_sigterm_saves_the_last_completed_update(tmp_path):
    """Preemption: SIGTERM stops the run as Ctrl-C does (status 143). The requeued command line (``--resume auto``)
    resumes: in process in test_anakin.py, and through the command line in test_sebulba.py."""
    from podracer.run import checkpoint

    command = [
        sys.executable,
        str(EXAMPLE),
        "--cpu-devices",
        "2",
        "--num-envs-per-device",
        "16",
        "--num-updates",
        "400000",
        "--checkpoint-dir",
        str(tmp_path),
        "--resume",
        "auto",
    ]

    def preempted():
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT
        )
        lines = []
        for line in proc.stdout:  # the first progress line: some updates are done
            lines.append(line)
            if "env steps" in line and "| sps" in line:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)  # a hang guard, not a latency bound
        return proc.returncode, "".join(lines) + out, err

    status, out, err = preempted()
    assert status == 143, err
    assert "resuming" not in out
    assert "SIGTERM: stopping: saving the last completed update" in err
    first = checkpoint.steps(str(tmp_path))
    assert first and first[-1] % 20 == 0
    assert (
        f"stopped by SIGTERM; saved the last completed update ({tmp_path}/step_{first[-1]}); to go on: the same "
        "command with --resume auto."
    ) in err
    assert (tmp_path / f"step_{first[-1]}.run" / "process_0").is_dir()


@pytest.mark.slow
def test_a_stop_before_the_first_update_claims_no_checkpoint(tmp_path):
    """SIGTERM while the update compiles: nothing has completed, so nothing is saved, and the run says so (it once
    said "saved the last completed update" with no checkpoint on disk)."""
    from podracer.run import checkpoint

    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--cpu-devices", "2", "--num-updates", "400", "--checkpoint-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    for line in proc.stdout:
        if "compiling" in line:
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)  # a hang guard, not a latency bound
    assert proc.returncode == 143, err
    if "env steps" in out:  # the machine was quick: the first call ended before the signal came
        pytest.skip("the first update completed before the signal")
    assert checkpoint.steps(str(tmp_path)) == []
    assert "saved the last completed update" not in err, err
    assert "no update had completed: nothing saved (the same command starts afresh)." in err, err


_SIGNALLED = """
import sys, time
from podracer.run import lifetime
if sys.argv[1] == "stop":
    stop, _ = lifetime.stop_on_signals("prog", grace=100, bound=float(sys.argv[2]))
    print("ready", flush=True)
    stop.wait()
    print("stopping on", lifetime.stop_reason(), flush=True)
else:
    lifetime.exit_on_signals("prog")
    print("ready", flush=True)
time.sleep(600)  # a stop that never finishes
"""


@pytest.mark.parametrize(
    "kind, signum, status, lines",
    [
        (
            "stop",
            signal.SIGUSR1,
            138,
            [
                "prog: SIGUSR1: stopping: saving the last completed update ...",
                "prog: stopping takes longer than 1 s: exiting now; the newest complete checkpoint is kept.",
            ],
        ),
        ("exit", signal.SIGTERM, 143, ["prog: stopped by SIGTERM."]),
    ],
)
def test_a_stop_signal_ends_the_process_with_its_status_and_one_line(kind, signum, status, lines):
    proc = subprocess.Popen(
        [sys.executable, "-c", _SIGNALLED, kind, "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signum)
    if kind == "stop":
        assert proc.stdout.readline() == "stopping on SIGUSR1\n"
        proc.send_signal(signal.SIGTERM)  # a scheduler repeating itself changes nothing
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert [line for line in err.splitlines() if line] == lines


def test_a_second_run_loads_its_programs_from_the_compile_cache(tmp_path):
    args = [
        "--cpu-devices",
        "2",
        "--num-updates",
        "20",
        "--num-envs-per-device",
        "8",
        "--compile-cache-dir",
        str(tmp_path / "cache"),
    ]
    # An entry without its access-time file (written by an unbounded cache, or cut short) would make every write of
    # JAX 0.10's bounded cache fail (jax-ml/jax issue 39880): it is adopted at start-up.
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "jit_orphan-0123-cache").write_bytes(b"not a program")
    first, second = _run(*args, log_compiles=True), _run(*args, log_compiles=True)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    assert "Error writing persistent compilation cache entry" not in first.stderr, first.stderr
    assert (tmp_path / "cache" / "jit_orphan-0123-atime").exists()
    # What happened, not how fast (a busy machine's timings say little): the first run compiled and wrote its
    # programs, the second loaded them (JAX logs each hit when it logs compiles).
    hit = "Persistent compilation cache hit for '"
    assert any((tmp_path / "cache").iterdir()) and hit not in first.stderr and hit in second.stderr, second.stderr[
        -3000:
    ]
    # Bounded, so JAX locks the directory around every read and write: processes sharing it never read a half-written
    # program. The tests' own cache (conftest), which their example subprocesses share, is bounded the same way.
    assert (tmp_path / "cache" / ".lockfile").exists()
    assert jax.config.jax_compilation_cache_max_size == compile_cache.COMPILE_CACHE_MAX_BYTES


def test_wandb_offline_run_holds_the_metrics(tmp_path):
    pytest.importorskip("wandb")
    env = {**_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    out = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--cpu-devices",
            "2",
            "--num-updates",
            "40",
            "--log-dir",
            str(tmp_path),
            "--wandb-project",
            "podracer-test",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, list((tmp_path / "wandb").iterdir())
    data = b"".join(path.read_bytes() for path in runs[0].glob("run-*.wandb"))  # wandb's record log, for `wandb sync`
    for name in (b"episode_return", b"sps", b"learning_rate", b"num_updates", b"podracer-test"):  # metrics, config
        assert name in data, name
