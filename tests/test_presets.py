"""--preset: settings kept as data, applied before the command line's own flags."""

import dataclasses
import importlib.util

import pytest

from podracer.core import agents
from podracer.cli import command as cli, parser, presets
from podracer.core.agents.hyperparameters import hyperparameters
from podracer.run.config import AnakinConfig, SebulbaConfig

CLASSES = {"anakin": AnakinConfig, "sebulba": SebulbaConfig}


def _flag_names(cls) -> set[str]:
    names = (
        hyperparameters(cls()) if cls in agents.config_classes().values() else {f.name for f in dataclasses.fields(cls)}
    )
    return {name.replace("_", "-") for name in names}


@pytest.mark.parametrize("name", presets.names())
def test_each_preset_names_only_existing_flags_and_parses(name):
    preset = presets.get(name)
    assert preset.note and preset.env and preset.agent in agents.names()
    known = _flag_names(CLASSES[preset.mode]) | _flag_names(agents.config_class(preset.agent)) | {"agent"}
    assert set(preset.flags) <= known, sorted(set(preset.flags) - known)
    suite = preset.env.split(":")[0] if ":" in preset.env else None
    if suite in ("gymnax", "jumanji", "brax", "xminigrid") and importlib.util.find_spec(suite) is None:
        pytest.skip(f"{suite} is not installed here")
    cfg = parser.parse(CLASSES[preset.mode], ["--preset", name])
    assert cfg.preset == name and cfg.env == preset.env and cfg.agent_name == preset.agent
    for flag, value in preset.flags.items():
        if flag in ("env", "agent"):
            continue
        field = flag.replace("-", "_")
        got = getattr(cfg, field) if hasattr(cfg, field) else hyperparameters(cfg.agent)[field]
        assert got == (tuple(value) if isinstance(value, list) else value), (flag, got, value)


def test_a_flag_on_the_command_line_wins_over_the_preset():
    cfg = parser.parse(AnakinConfig, ["--num-updates", "480", "--preset", "memory-lstm", "--core-size", "16"])
    assert cfg.num_updates == 480 and cfg.agent.network.core_size == 16  # given
    assert cfg.agent.network.core == "lstm" and cfg.rollout_length == 16 and cfg.num_envs == 32  # the preset's
    same_agent = parser.parse(AnakinConfig, ["--preset", "memory-lstm", "--agent", "ppo"])
    assert same_agent.agent.network.core == "lstm"


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--preset", "nope"],
            f"--preset: unknown preset 'nope'; choose one of {', '.join(presets.names('anakin'))} "
            "(--preset list describes them).",
        ),
        (["--preset", "pong"], "--preset pong is for podracer sebulba, not anakin; this command's presets: "),
        (
            ["--preset", "memory-lstm", "--agent", "a2c"],
            "--preset memory-lstm trains --agent ppo; drop --agent a2c or the preset.",
        ),
        (["--preset"], "--preset needs a value: "),
    ],
)
def test_bad_presets_are_one_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        parser.parse(AnakinConfig, argv, prog="podracer anakin")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"podracer anakin: error: {message}") and err.count("\n") == 1, err


def test_preset_list_and_what_a_run_without_a_preset_says(capsys):
    with pytest.raises(SystemExit) as exit_:
        parser.parse(SebulbaConfig, ["--preset", "list"])
    assert exit_.value.code == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == presets.names("sebulba")
    cfg = parser.parse(AnakinConfig, ["--env", "memory", "--agent", "ppo", "--num-epochs", "2"])
    line = cli.settings_line(cfg)
    assert line.startswith("no --preset: ppo on memory with --learning-rate 0.003 ")
    assert " --num-epochs 2 " in line and " --normalize-advantages " in line and " --no-clip-value-loss " in line
    assert line.endswith("; --preset memory-lstm has settings measured on it")
    with_preset = cli.settings_line(parser.parse(AnakinConfig, ["--preset", "catch"]))
    assert with_preset == (
        "preset catch: --env catch --agent a2c --num-envs 128 --rollout-length 16 --num-updates 240 "
        "(flags on the command line override it)"
    )
