"""A run's start-up and its edges: the programs a preset's run compiles, the start-up line, a finished run resumed,
``--distributed`` outside a cluster, windows without an episode, a stop with nothing to save, and what saves cut
short leave behind."""

import io
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from podracer.run import checkpoint, lifetime, startup
from podracer.run.multihost import CLUSTER_VARIABLES
from podracer.run.logging import ConsoleSink
from children import child_env  # tests/children.py

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra):
    env = {k: v for k, v in child_env().items() if k not in CLUSTER_VARIABLES}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _podracer(*args, log_compiles=False, timeout=600):
    env = _env(JAX_LOG_COMPILES="1") if log_compiles else _env()
    command = [sys.executable, "-m", "podracer.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.mark.parametrize(
    "preset, flags",
    [
        ("catch", ["--num-updates", "40", "--updates-per-call", "20", "--eval-every", "40", "--num-seeds", "2"]),
        pytest.param(
            "cartpole",
            ["--num-updates", "100", "--eval-every", "100", "--num-seeds", "3"],
            marks=[pytest.mark.slow, pytest.mark.suite("gymnax")],
        ),
    ],
)
def test_a_preset_run_compiles_each_program_once_and_says_its_start_up_once(preset, flags):
    """At most 6 XLA programs, eager operations included (JAX's compile log): the seeds' keys, the learners, the
    devices' states, the update, the evaluation (and gymnax's own at its import); the last line counts them. The
    start-up line comes once, just before the first progress line, and names every phase."""
    out = _podracer("anakin", "--preset", preset, "--cpu-devices", "2", *flags, log_compiles=True)
    assert out.returncode == 0, out.stderr[-3000:]
    compiled = [line for line in out.stderr.splitlines() if "Compiling " in line]  # loads from the cache too
    assert 1 <= len(compiled) <= 6, "\n".join(compiled)
    lines = out.stdout.splitlines()
    assert re.search(rf"; {len(compiled)} XLA programs(, \d+ from the cache)?$", lines[-1]), lines[-1]
    started = [i for i, line in enumerate(lines) if line.startswith("podracer: started in ")]
    # the first progress line (with its share of the budget done; a heartbeat during a long compilation, "| env
    # steps 0/N | compiling", is not one)
    first = next(i for i, line in enumerate(lines) if "| env steps" in line and "%)" in line)
    assert started == [first - 1], out.stdout
    assert all(f" {phase} " in lines[first - 1] for phase in ("imports", "environment", "compile", "first call"))
    # one compile figure in the run, the start-up line's
    figures = [line for line in lines if re.search(r"compil\w* (in )?[0-9.]+ s", line)]
    assert figures == [lines[first - 1]], figures


def test_sebulbas_heartbeat_counts_the_env_steps_of_the_updates_done_between_progress_lines(monkeypatch):
    """Before the first progress line Sebulba's learner has done updates: the heartbeat says their env steps (it
    said "env steps 0" at update 7); its eta is the progress lines' (the pace since the first of them, in the same
    words), not one of its own (they said ``eta 28m31s`` and ``ETA 2,034 s`` at the same moment)."""
    from podracer.run import progress

    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    done = {"updates": 0}
    progress = progress.Progress(100_000, 0, False, describe=lambda: [f"learner: update {done['updates']}"],
                               done=lambda: done["updates"] * 128)  # fmt: skip
    assert progress.status() == "env steps 0 | learner: update 0"
    done["updates"] = 7
    assert progress.status() == "env steps 896 | learner: update 7"  # no pace yet: no eta
    progress.advanced(1_000)  # the first progress line
    sink = ConsoleSink(100_000, stream=io.StringIO(), clock=lambda: now[0])
    sink.write({"env_steps": 1_000})
    now[0], done["updates"] = 130.0, 20  # 30 s later, 1,560 env steps more
    progress.advanced(2_560)
    assert progress.status() == "env steps 2,560 | learner: update 20 | eta 31m14s"
    assert sink.eta(2_560, now[0]) == ", eta 31m14s"


def test_resume_auto_of_a_finished_run_says_so_exits_0_and_compiles_nothing(tmp_path, capsys):
    """The same line serves every attempt of a requeued job, the last one after the run has ended too; and what
    saves cut short by a kill left (orbax's temporary folders, half-written metadata) is removed and said. Both
    attempts in this process (its 8 CPU devices): what they say and make ready is what is tested."""
    import jax

    from podracer.cli import command as cli
    from podracer.run import startup

    directory = tmp_path / "run"
    args = ["anakin", "--preset", "catch", "--cpu-devices", "8", "--num-updates", "40", "--updates-per-call", "20"]
    args += ["--checkpoint-dir", str(directory), "--resume", "auto"]
    assert cli.main(args) == 0, capsys.readouterr().err[-3000:]
    assert checkpoint.steps(str(directory)) == [40]
    (directory / "step_60.orbax-checkpoint-tmp-1764160000").mkdir()
    (directory / "step_60.orbax-checkpoint-tmp-1764160000" / "d").write_bytes(b"half")
    (directory / "step_60.json.tmp").write_text("{")
    (directory / "step_40.run" / "process_0.orbax-checkpoint-tmp-1764160001").mkdir()
    capsys.readouterr()
    made = []  # every program made ready (compiled, or loaded from the cache), eager operations included

    def listener(event, duration, **_):
        if event == startup.PROGRAM_EVENT:
            made.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        status = cli.main(args)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    out, err = capsys.readouterr()
    assert status == 0, err[-3000:]
    assert (
        f"podracer anakin: the run in {directory} has finished: its newest checkpoint, {directory / 'step_40'}, "
        "holds 40 updates, all of this run's 40; nothing to train (to train on, raise --num-updates)." in out
    ), out
    assert made == [] and "compiling" not in out, (made, out)
    removed = (
        "step_40.run/process_0.orbax-checkpoint-tmp-1764160001, step_60.json.tmp, "
        "step_60.orbax-checkpoint-tmp-1764160000"
    )
    assert f"podracer: removed what saves cut short left in {directory}: {removed}" in out, out
    assert sorted(p.name for p in directory.iterdir() if ".tmp" in p.name or "tmp-" in p.name) == []
    assert sorted(p.name for p in (directory / "step_40.run").iterdir()) == ["process_0"]


def test_distributed_outside_a_cluster_ends_in_one_line_naming_what_is_missing():
    out = _podracer("anakin", "--distributed", "--env", "catch", "--num-updates", "20", timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "podracer anakin: error: --distributed found no cluster to join: none of the variables Slurm sets for a "
        "task of a job step (SLURM_JOB_ID, SLURM_NTASKS, SLURM_PROCID: run the command under srun), nor Open MPI's "
        "or a TPU VM's; outside one, start every process with --coordinator HOST:PORT --num-processes N "
        "--process-id I, or drop --distributed to train in one process."
    ]


def test_a_window_without_an_episode_says_so_instead_of_nan():
    stream = io.StringIO()
    sink = ConsoleSink(1000, stream=stream)
    sink.write({"env_steps": 100, "sps": 10.0, "episode_return": 12.5, "episodes": 2.0})
    sink.write({"env_steps": 200, "sps": 10.0, "episode_return": float("nan"), "episodes": 0.0})
    sink.write({"env_steps": 300, "sps": 10.0, "episode_return": float("nan"), "episodes": 3.0})  # diverged: said
    first, empty, diverged = stream.getvalue().splitlines()
    assert "return   12.500" in first
    assert "return (no episode ended in this window)" in empty and "nan" not in empty
    assert "return      nan" in diverged


_STOPPED = """
import sys
from podracer.run import lifetime
stop, _ = lifetime.stop_on_signals("prog", saving=sys.argv[1] == "yes")
print("ready", flush=True)
stop.wait()
"""


@pytest.mark.parametrize(
    "saving, said",
    [
        ("yes", "prog: Ctrl-C: stopping: saving the last completed update (Ctrl-C again to quit at once) ..."),
        ("no", "prog: Ctrl-C: stopping: nothing to save (no --checkpoint-dir) (Ctrl-C again to quit at once) ..."),
    ],
)
def test_the_first_ctrl_c_line_says_what_the_stop_does(saving, said):
    proc = subprocess.Popen(
        [sys.executable, "-c", _STOPPED, saving], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)  # a hang guard
    assert proc.returncode == 0, err
    assert err.strip().splitlines() == [said]
    assert lifetime.STOP_SIGNALS[signal.SIGINT] == "Ctrl-C"


def test_each_run_has_its_own_lifetime_whose_end_is_taken_once(monkeypatch):
    """``lifetime.starting`` gives the run a :class:`~podracer.run.lifetime.RunLifetime` of its own (the signals act on
    the one started last); its end is taken once, and a stop snapshot registers its save with the run it is given."""
    from podracer.run.saving import StopSnapshot

    first = lifetime.starting()
    assert lifetime.current() is first
    assert first.take_the_end() is True
    assert first.take_the_end() is False  # taken: a stop's timer, or a second taker, must not save
    second = lifetime.starting()
    assert lifetime.current() is second and second is not first
    assert lifetime.take_the_end() is True and second.take_the_end() is False  # the module's function: the current run
    saved = []
    monkeypatch.setattr(lifetime, "GRACE_SECONDS", 0.0)
    third = lifetime.RunLifetime()
    snapshot = StopSnapshot(
        lambda state: state * 2, lambda copy, n: saved.append((copy, n)), lambda: 0, run_lifetime=third
    )
    snapshot.completed(21, 5)
    assert third._save is not None and second._save is None
    third._save()
    assert saved == [(42, 5)]


def test_progress_lines_say_the_time_left_at_the_pace_since_the_first_line():
    """The first line has no pace yet (compilation came before it); later lines say how long the rest takes."""
    times = iter([10.0, 12.0, 14.0, 5000.0])
    stream = io.StringIO()
    sink = ConsoleSink(1000, stream=stream, started=0.0, clock=lambda: next(times))
    for steps in (100, 200, 300):
        sink.write({"env_steps": steps, "sps": 50.0, "episode_return": 1.0, "episodes": 1.0})
    first, second, third = stream.getvalue().splitlines()
    assert "( 10.0%)" in first and "eta" not in first
    assert "( 20.0%, eta 16s)" in second  # 800 steps left at 100 steps per 2 s
    assert "( 30.0%, eta 14s)" in third
    from podracer.run.logging import duration

    assert [duration(s) for s in (5, 65, 3600 * 2 + 180)] == ["5s", "1m05s", "2h03m"]


def test_the_start_up_line_names_the_programs_whose_compilation_took_long():
    """The compile phase says where its time went, program by program, as XLA's backend reports it (a cold start:
    the update and the learners' initial states); a program loaded from the cache in a moment is not named."""
    from podracer.run import startup

    startup.reset()
    try:
        startup.mark("imports")
        for name, seconds in (("jit(per_device)", 5.4), ("jit(key)", 0.04), ("jit(learners)", 1.4)):
            startup._on_duration(startup.PROGRAM_EVENT, seconds, fun_name=name)
        startup.mark("compile")
        startup.mark("first call")
        line = startup.line()
        assert re.fullmatch(
            r"started in [0-9.]+ s: imports [0-9.]+ s, compile [0-9.]+ s \(XLA: per_device 5\.4 s, learners 1\.4 s\), "
            r"first call [0-9.]+ s",
            line,
        ), line
    finally:
        startup.reset()


def test_status_and_progress_lines_count_seconds_on_one_clock_from_the_launch():
    """The heartbeat's status lines and the progress lines interleaved: one clock, the launch's (they counted from
    starts about 60 s apart, ``[ 276.7s]`` then ``[ 214.8s]``), so the seconds never go back."""
    import threading
    import time

    stream = io.StringIO()
    sink = ConsoleSink(1_000, stream=stream, started=startup.LAUNCH)
    ticks = threading.Event()
    with lifetime.Heartbeat(lambda: ticks.set() or "status", interval=0.05, stream=stream):
        for steps in (100, 200, 300):
            ticks.clear()
            assert ticks.wait(10)
            sink.write({"env_steps": steps})
            time.sleep(0.06)
    shown = [float(line[1:].split("s]")[0]) for line in stream.getvalue().splitlines()]
    assert len(shown) >= 6 and shown == sorted(shown), stream.getvalue()
    assert shown[0] >= startup.seconds() - 60  # counted from the launch, not from the heartbeat's start


def test_a_command_a_shell_execs_after_other_work_counts_from_its_own_start():
    """``bash -c 'work && exec python ...'`` keeps the shell's process (its start): the seconds the shell spent
    before the exec are not billed to the program (``started in 115.4 s: imports 93.9 s`` after pip ran)."""
    code = "from podracer.run import startup; print(startup.seconds())"
    shell = f"sleep {startup.LAUNCH_SECONDS + 1}; exec {sys.executable} -c '{code}'"
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 2.0, out.stdout


@pytest.mark.parametrize("argv", [["--preset", "pong"], ["--env", "Pong"], ["--env", "CartPole", "--agent", "r2d2"]])
def test_what_a_run_says_before_it_starts_comes_in_lines_of_at_most_120_characters(argv):
    """The settings line was one line of about 620 characters (an agent's settings in full): it breaks between
    clauses and before flags, and says every word it said."""
    from podracer.cli import command, parser
    from podracer.run import banner
    from podracer.run.config import SebulbaConfig

    said = f"podracer sebulba: {command.settings_line(parser.parse(SebulbaConfig, argv, prog='podracer sebulba'))}"
    shown = banner.in_lines(said).splitlines()
    assert len(said) > 300 and len(shown) >= 3 and max(map(len, shown)) <= banner.LINE_WIDTH, shown
    assert " ".join(line.strip() for line in shown) == said


def test_a_line_breaks_between_clauses_never_inside_brackets():
    """``learner devices [1, 2049] in 2 process(es)`` stays whole (a test of the two-process run once found it cut)."""
    from podracer.run import banner

    said = "podracer sebulba: impala on fake; actor devices [0] x 1 thread(s) x 8 envs (1 group(s)); learner devices "
    said += "[1, 2049] in 2 process(es), a clause, another one"
    shown = banner.in_lines(said).splitlines()
    assert len(shown) == 2 and max(map(len, shown)) <= banner.LINE_WIDTH, shown
    assert shown[1] == "  learner devices [1, 2049] in 2 process(es), a clause, another one"
