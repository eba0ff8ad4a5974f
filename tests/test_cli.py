"""The ``podracer`` command: its subcommands parse and dispatch, and the older callers parse the same configs."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from podracer import cli, config

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
    pyproject.toml reads, the distribution's name is the one on the package index."""
    probe = (
        "import sys; from podracer import cli; status = cli.main(sys.argv[1:]); "
        "print('imported:', sorted(m for m in ('jax', 'flax', 'optax', 'tyro', 'numpy') if m in sys.modules)); "
        "sys.exit(status)"
    )
    import podracer

    version = f"podracer {podracer.__version__} (pip install podracer-rl)"
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
        parsed.append((config.parse(default, argv, prog=prog, description=description), name))
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
    # The training commands in processes of their own: they set the CPU device count before JAX starts.
    anakin = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "anakin_catch.py"), "--compile-cache-dir", str(afile)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert anakin.returncode == 2 and anakin.stderr == (
        f"anakin_catch.py: error: --compile-cache-dir '{afile}' is a file, not a directory (or pass "
        f"--no-compile-cache).\n"
    )
    sebulba = subprocess.run(
        [sys.executable, "-m", "podracer.sebulba", "--compile-cache-dir", str(afile / "cache")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sebulba.returncode == 2 and sebulba.stderr.startswith(
        f"podracer.sebulba: error: --compile-cache-dir '{afile / 'cache'}' cannot be created: "
    ), sebulba.stderr


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

    from podracer import parallel

    flags = ["--num-envs-per-device", "8", "--rollout-length", "4", "--updates-per-call", "5", "--no-compile-cache"]
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
        config.parse(config.AnakinConfig, ["--total-env-steps", "0"], prog="prog")
    assert capsys.readouterr().err.strip() == "prog: error: --total-env-steps must be >= 1, got 0."
