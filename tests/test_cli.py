"""The ``podracer`` command: its subcommands parse and dispatch, and the older callers parse the same configs."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from podracer.cli import command as cli, parser
from podracer.run import config

ROOT = Path(__file__).parent.parent


def _example(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_console_script_lists_its_four_commands():
    script = shutil.which("podracer") or str(Path(sys.executable).parent / "podracer")
    run = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: podracer {anakin,sebulba,evaluate,preview}")
    for command in ("anakin", "sebulba", "evaluate", "preview"):
        assert f"\n  {command} " in run.stdout


def test_version_and_help_print_without_importing_jax():
    """``podracer --version`` and ``--help`` import nothing heavy (``import podracer`` is lazy): the version is the one
    pyproject.toml reads, and it says where this copy came from (a checkout here, before any release)."""
    probe = (
        "import sys; from podracer.cli import command; status = command.main(sys.argv[1:]); "
        "print('imported:', sorted(m for m in ('jax', 'flax', 'optax', 'tyro', 'numpy') if m in sys.modules)); "
        "sys.exit(status)"
    )
    import podracer

    origin = f"the checkout {ROOT.resolve()}; not on the package index before the first release"
    version = f"podracer {podracer.__version__} (from {origin})"
    for argv, said in ((["--version"], version), (["--help"], "usage: podracer")):
        run = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith(said) and run.stdout.rstrip().endswith("imported: []"), run.stdout
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'name = "podracer-rl"' in pyproject and 'version = { attr = "podracer.__version__" }' in pyproject
    assert podracer.AnakinConfig is config.AnakinConfig
    with pytest.raises(AttributeError, match="module 'podracer' has no attribute 'Anakin'"):
        podracer.Anakin


def test_usage_and_unknown_commands(capsys):
    assert cli.main([]) == 2 and capsys.readouterr().out.startswith("usage: podracer")
    assert cli.main(["anakn"]) == 2
    assert capsys.readouterr().err.strip() == (
        "podracer: error: unknown command 'anakn'; choose one of anakin, sebulba, evaluate, preview (podracer --help)."
    )


def test_examples_and_python_m_parse_the_same_config_as_the_subcommands(monkeypatch):
    """``examples/anakin_catch.py`` is ``podracer anakin`` and ``python -m podracer.sebulba`` is ``podracer sebulba``:
    the same flags give the same config, through the same start-up path (:func:`cli.train`)."""
    from podracer.sebulba import __main__ as sebulba_main

    parsed = []

    def parse_only(default, argv, *, prog, name, description, run, report, stopped=""):
        parsed.append((parser.parse(default, argv, prog=prog, description=description), name))
        return 0

    monkeypatch.setattr(cli, "train", parse_only)
    anakin_flags = ["--agent", "ppo", "--env", "cartpole", "--num-updates", "40", "--num-epochs", "2"]
    assert cli.main(["anakin", *anakin_flags]) == 0 and _example("anakin_catch").main(anakin_flags) == 0
    (subcommand, name), (example, example_name) = parsed
    assert subcommand == example and subcommand.agent.num_epochs == 2 and subcommand.num_updates == 40
    assert (name, example_name) == ("podracer anakin", "anakin_catch.py")

    parsed.clear()
    sebulba_flags = ["--env", "CartPole-v1", "--agent", "impala", "--total-env-steps", "4096"]
    assert cli.main(["sebulba", *sebulba_flags]) == 0 and sebulba_main.main(sebulba_flags) == 0
    (subcommand, _), (module, _) = parsed
    assert subcommand == module and subcommand.total_env_steps == 4096

    parsed.clear()  # the DQN example starts from its own defaults, on the same path
    assert _example("anakin_dqn_cartpole").main(["--seed", "3"]) == 0
    ((dqn, _),) = parsed
    assert dqn.seed == 3 and dqn.agent.replay_ratio == 4.0 and dqn.target_return == 490.0


def test_evaluate_dispatches_with_its_own_name(tmp_path, capsys):
    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("podracer evaluate: error: ")


def test_an_unwritable_gif_or_compile_cache_is_refused_before_anything_runs(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "missing"), "--gif", str(afile / "play.gif")]) == 2
    assert capsys.readouterr().err == (
        f"podracer evaluate: error: --gif '{afile / 'play.gif'}': directory '{afile}' is a file, not a directory.\n"
    )
    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "missing"), "--gif", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(
        f"podracer evaluate: error: --gif '{tmp_path}' is a directory; give a file name"
    )
    # The training commands, in this process with its 8 CPU devices (--cpu-devices 8, as JAX has them already)
    assert cli.main(["anakin", "--cpu-devices", "8", "--compile-cache-dir", str(afile)]) == 2
    assert capsys.readouterr().err == (
        f"podracer anakin: error: --compile-cache-dir '{afile}' is a file, not a directory (or pass "
        f"--no-compile-cache).\n"
    )
    assert cli.main(["sebulba", "--cpu-devices", "8", "--compile-cache-dir", str(afile / "cache")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"podracer sebulba: error: --compile-cache-dir '{afile / 'cache'}' cannot be created: "), err


@pytest.mark.parametrize("command", ["evaluate", "preview"])
def test_evaluate_and_preview_help_is_plain_text(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: podracer {command}") and "``" not in out and "{None}|" not in out


def test_total_env_steps_in_anakin_stops_at_the_budget_rounded_up_to_whole_calls(tmp_path, capsys):
    """``--total-env-steps`` is Anakin's budget too: D devices x 8 envs x rollout 4 env steps per update, 5 updates per
    call: 3,000 steps round up to whole calls, and the banner says by how much."""
    import json
    import math

    from podracer.run import parallel

    flags = ["--num-envs-per-device", "8", "--rollout-length", "4", "--updates-per-call", "5", "--no-compile-cache"]
    flags += ["--cpu-devices", "8"]  # the tests' devices (conftest)
    assert cli.main(["anakin", *flags, "--total-env-steps", "3000", "--log-dir", str(tmp_path)]) == 0
    per_update = parallel.num_global_devices() * 8 * 4
    updates = 5 * math.ceil(3000 / (5 * per_update))
    steps = updates * per_update
    out = capsys.readouterr().out
    said = f"{updates} updates = {steps:,} env steps (--total-env-steps 3,000 + {steps - 3000:,}: whole calls of "
    assert said + "--updates-per-call 5)" in out, out
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in records if "episode_return" in r][-1] == steps
    with pytest.raises(SystemExit):
        parser.parse(config.AnakinConfig, ["--total-env-steps", "0"], prog="prog")
    assert capsys.readouterr().err.strip() == "prog: error: --total-env-steps must be >= 1, got 0."


# Bad input that only a command meets (files, devices, imports, a preset's file): (argv, the one error line's text);
# {file} is an existing file, {raises} and {syntax} modules that fail to import.
COMMAND_BAD_INPUTS = [
    (["anakin", "--log-dir", "{file}"], "--log-dir '{file}' is a file, not a directory."),
    (["anakin", "--log-dir", "/proc/podracer-logs"], "--log-dir '/proc/podracer-logs' cannot be created: "),
    (["anakin", "--log-dir", "x", "--no-log-dir"], "--log-dir and --no-log-dir: pass one of them."),
    (["anakin", "--import", "{raises}"], "--import {raises}: importing it raised RuntimeError: boom (line 2 of "),
    (["sebulba", "--import", "{syntax}"], "--import {syntax}: a syntax error at line 1: "),
    (["anakin", "--preset", "misspelt"], "--preset misspelt: mine.toml gives --learning-rat, which is not a flag"),
    (["evaluate", "--checkpoint", "x", "--gif", "/proc/podracer.gif"], "--gif '/proc/podracer.gif' cannot be written"),
    (
        [
            "sebulba",
            "--env",
            "CartPole-v1",
            "--actor-devices",
            "0",
            "--learner-devices",
            "0",
            "1",
            "--cpu-devices",
            "8",
        ],
        "--actor-devices [0] and --learner-devices [0, 1] share device 0: give each group its own",
    ),
]


@pytest.mark.parametrize("argv, message", COMMAND_BAD_INPUTS, ids=[" ".join(a) for a, _ in COMMAND_BAD_INPUTS])
def test_a_commands_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, monkeypatch, capsys):
    from podracer.cli import presets

    names = {"file": tmp_path / "a-file", "raises": tmp_path / "raises.py", "syntax": tmp_path / "syntax.py"}
    names["file"].write_text("")
    names["raises"].write_text('"""A module with a bug."""\nraise RuntimeError("boom")\n')
    names["syntax"].write_text("def f(:\n")
    real = presets.load()  # a preset file with a misspelt key, as if beside podracer's own
    mine = presets._parse("mine", '[misspelt]\nmode = "anakin"\nnote = ""\nflags = { learning-rat = 0.1 }\n')
    monkeypatch.setattr(presets, "load", lambda: {**real, **mine})
    argv = [token.format(**names) for token in argv]
    try:
        status = cli.main(argv)
    except SystemExit as exit_info:
        status = exit_info.code
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert status == 2 and len(errors) == 1, errors
    assert errors[0].startswith(f"podracer {argv[0]}: error: ") and message.format(**names) in errors[0], errors


def test_without_log_dir_a_run_writes_runs_env_agent_seed_time_and_says_so_first(tmp_path, monkeypatch, capsys):
    """As CleanRL and SB3 do: a record of every run unless --no-log-dir; two runs in the same second get two
    directories (each has one writer)."""
    import re

    monkeypatch.setenv("PODRACER_RUNS_DIR", str(tmp_path / "runs"))
    flags = ["--env", "catch", "--num-envs-per-device", "2", "--rollout-length", "10", "--num-updates", "2"]
    flags += ["--updates-per-call", "1", "--seed", "3", "--no-compile-cache", "--cpu-devices", "8"]
    assert cli.main(["anakin", *flags]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    match = re.fullmatch(r"podracer anakin: logging to (\S+) \(metrics.jsonl, TensorBoard; --no-log-dir: none\)", first)
    assert match, first
    made = Path(match.group(1))
    assert made.parent == tmp_path / "runs" and re.fullmatch(r"catch__a2c__3__\d{8}-\d{6}", made.name)
    assert (made / "metrics.jsonl").stat().st_size > 0 and list(made.glob("events.out.tfevents.*"))
    assert cli.main(["anakin", *flags, "--no-log-dir"]) == 0
    assert "logging to" not in capsys.readouterr().out and list((tmp_path / "runs").iterdir()) == [made]
    from podracer.run import rundir

    twins = {rundir.default_log_dir("gymnax:CartPole-v1", "ppo", 0, str(tmp_path)) for _ in range(3)}
    assert len(twins) == 3 and all(Path(p).name.startswith("gymnax-CartPole-v1__ppo__0__") for p in twins)
