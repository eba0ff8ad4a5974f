"""Extension points as a researcher uses them: agents and environments of their own (registered in a script,
``--import``-ed, or declared by an installed package's entry points) in every command line."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs, sweep
from podracer.cli import parser
from podracer.core.agents import PPOConfig
from podracer.core.agents.hyperparameters import check_hyperparameters
from podracer.core.optim import OptimizerConfig, optimizer_field
from podracer.run.config import AnakinConfig, SebulbaConfig
from children import child_env  # tests/children.py

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def registries(monkeypatch):
    """The agent and environment registries as they were, after the test."""
    monkeypatch.setattr(agents, "_AGENTS", dict(agents._AGENTS))
    monkeypatch.setattr(envs, "_JAX_ENVS", dict(envs._JAX_ENVS))


@dataclasses.dataclass(frozen=True)
class TinyConfig:
    optimizer: OptimizerConfig = optimizer_field(learning_rate=1e-3, max_grad_norm=0.5)
    discount: float = 0.99
    num_epochs: int = 1
    hidden_sizes: tuple[int, ...] = (8,)

    def __post_init__(self):
        check_hyperparameters(self)


def _make_tiny(spec, config=TinyConfig(), run=None):
    return agents.make_a2c(
        spec, agents.A2CConfig().replace(learning_rate=config.optimizer.learning_rate, hidden_sizes=config.hidden_sizes)
    )


@dataclasses.dataclass(frozen=True)
class TableConfig(TinyConfig):
    table: dict = dataclasses.field(default_factory=dict)  # a type no flag takes


def test_an_agent_config_field_that_cannot_be_a_flag_is_a_one_line_error_naming_it(registries, capsys):
    agents.register("table", TableConfig, _make_tiny)
    with pytest.raises(SystemExit) as exit_:
        parser.parse(AnakinConfig, ["--agent", "table"], prog="train")
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "train: error: TableConfig.table: a config field of type dict cannot be a flag (flags take int, float, str, "
        "bool, a Literal, X | None or tuple[X, ...])."
    )


def test_a_registered_agent_is_a_subcommand_of_both_modes_with_checked_flags(registries, capsys):
    agents.register("tiny", TinyConfig, _make_tiny)
    assert "tiny" in agents.names() and agents.config_class("tiny") is TinyConfig
    cfg = parser.parse(AnakinConfig, ["--agent", "tiny", "--discount", "0.9", "--num-updates", "40"])
    assert isinstance(cfg, AnakinConfig) and cfg.agent == TinyConfig(discount=0.9) and cfg.agent_name == "tiny"
    assert cfg.num_updates == 40
    cfg = parser.parse(SebulbaConfig(env="CartPole", total_env_steps=1000), ["tiny", "--hidden-sizes", "4", "4"])
    assert cfg.agent == TinyConfig(hidden_sizes=(4, 4)) and cfg.env == "CartPole" and cfg.total_env_steps == 1000
    assert parser.parse(AnakinConfig, ["--agent", "ppo"]).agent == PPOConfig()  # the built-in agents are still there
    with pytest.raises(SystemExit) as exit_:
        parser.parse(AnakinConfig, ["--agent", "tiny", "--discount", "2"], prog="train")
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == "train: error: --discount must be in [0, 1], got 2.0."
    with pytest.raises(SystemExit):
        parser.parse(AnakinConfig, ["--agent", "tiny", "--help"], prog="train")
    page = capsys.readouterr().out
    assert (
        page.startswith("usage: train --agent tiny")
        and "tiny hyper-parameters (--agent tiny):" in page
        and "--num-epochs INT" in page
        and "--hidden-sizes" in page
    )
    assert sweep.sweepable(TinyConfig()) == [
        *("learning_rate", "max_grad_norm", "lr_warmup_steps", "lr_end", "lr_decay_steps"),  # its optimizer's
        *("discount", "num_epochs"),
    ]
    spec = envs.make("catch").spec()
    assert agents.make("tiny", spec, discount=0.5).loss is not None
    assert agents.name_of(TinyConfig()) == "tiny"


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: agents.register("Tiny Agent", TinyConfig, _make_tiny),
            "An agent's name is lower case letters, digits, '-' and '_', starting with a letter (it becomes --agent "
            "NAME), "
            "got 'Tiny Agent'.",
        ),
        (
            lambda: agents.register("ppo", TinyConfig, _make_tiny),
            "'ppo' is a built-in agent; register yours under another name.",
        ),
        (
            lambda: agents.register("tiny", dict, _make_tiny),
            "Agent 'tiny': its config must be a dataclass (its fields become flags), got <class 'dict'>.",
        ),
        (
            lambda: agents.register("tiny", dataclasses.make_dataclass("Bare", [("discount", float, 0.9)]), _make_tiny),
            "Agent 'tiny': Bare needs a field optimizer: OptimizerConfig, its optimizer settings (optimizer: "
            "OptimizerConfig = podracer.core.optim.optimizer_field(learning_rate, max_grad_norm)).",
        ),
        (
            lambda: agents.register(
                "tiny",
                dataclasses.make_dataclass(
                    "NoDefault", [("discount", float), ("optimizer", OptimizerConfig, optimizer_field(1e-3, 0.5))]
                ),
                _make_tiny,
            ),
            "Agent 'tiny': every field of NoDefault needs a default (the flags start from them); discount has none.",
        ),
        (
            lambda: agents.register("tiny", PPOConfig, _make_tiny),
            "Agent 'tiny': PPOConfig is already the config of agent 'ppo' (a config class names one agent; subclass "
            "it).",
        ),
        (
            lambda: agents.register("tiny", TinyConfig, "make"),
            "Agent 'tiny': make must be a function make(spec, config) -> Agent, got 'make'.",
        ),
    ],
)
def test_agent_registration_refuses_what_cannot_reach_a_command_line(registries, call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


def test_import_names_a_module_or_a_file_and_fails_in_one_line(registries, tmp_path, capsys):
    plugin = tmp_path / "my_tiny_plugin.py"
    plugin.write_text("from podracer import envs\nenvs.register('my_task', lambda: envs.Catch(rows=4, columns=3))\n")
    cfg = parser.parse(AnakinConfig, ["--import", str(plugin), "--env", "my_task"])
    assert cfg.imports == (str(plugin),) and cfg.env == "my_task" and envs.make("my-task").spec().num_actions == 3
    for argv, message in [
        (
            ["--import", "no_such_module_anywhere"],
            "--import: cannot import 'no_such_module_anywhere': No module named 'no_such_module_anywhere'.",
        ),
        (["--import", str(tmp_path / "absent.py")], f"--import: no such file '{tmp_path / 'absent.py'}'."),
        (["--import"], "--import needs a value: a module (package.module) or a path/to/file.py."),
    ]:
        with pytest.raises(SystemExit) as exit_:
            parser.parse(AnakinConfig, argv, prog="train")
        assert exit_.value.code == 2 and capsys.readouterr().err.strip() == f"train: error: {message}"


_LEAKY = """
import jax.numpy as jnp

TABLE = jnp.arange(3.0)  # made at import, as pgx and navix make their arrays


class Leaky:
    def __init__(self):
        self.offset = jnp.ones(()) * 2.0  # made when the environment is made

    def value(self):
        return TABLE.sum() + self.offset
"""


def test_a_package_first_imported_inside_a_trace_leaks_no_tracers(registries, tmp_path, monkeypatch):
    """A lazy target imported (and its environment made) for the first time while JAX traces: its arrays stay arrays."""
    (tmp_path / "leaky_stand_in_pkg.py").write_text(_LEAKY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "leaky_stand_in_pkg", raising=False)
    envs.register("leaky", "leaky_stand_in_pkg:Leaky")

    @jax.jit
    def traced(x):
        return x + envs.make("leaky").value()

    assert float(traced(1.0)) == 6.0
    import leaky_stand_in_pkg

    assert not isinstance(leaky_stand_in_pkg.TABLE, jax.core.Tracer)
    assert float(envs.make("leaky").value()) == 5.0  # used outside the trace: no UnexpectedTracerError
    assert float(jnp.sum(leaky_stand_in_pkg.TABLE)) == 3.0


_STAND_IN_PKG = """
import jax
import jax.numpy as jnp

GRID = jnp.zeros((5, 3))  # JAX's backends start at import, as pgx's and navix's do

from podracer.core.envs import Catch


def make(**kwargs):
    return Catch(rows=5, columns=3, **kwargs)
"""

_DIST_INFO = {
    "METADATA": "Metadata-Version: 2.1\nName: stand-in-tasks\nVersion: 0.1\n",
    "entry_points.txt": "[podracer.envs]\nstand_in_catch = stand_in_tasks:make\n\n"
    "[podracer.agents]\nreinforce = own_agent:make_reinforce\n",
}


def _installed_stand_in(tmp_path) -> dict:
    """A stand-in installed package: a module that creates JAX arrays at import and a dist-info whose entry points
    register its task (``stand_in_catch``, named with an underscore) and ``examples/own_agent.py``'s agent."""
    (tmp_path / "stand_in_tasks.py").write_text(_STAND_IN_PKG)
    dist = tmp_path / "stand_in_tasks-0.1.dist-info"
    dist.mkdir()
    for name, text in _DIST_INFO.items():
        (dist / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # XLA's defaults: faster here than the tests'
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(EXAMPLES), env.get("PYTHONPATH", "")])
    return env


def test_an_installed_package_registers_its_task_and_agent_through_entry_points(tmp_path):
    """The bar: a package that starts JAX at import, its task named with an underscore, trains through
    ``examples/anakin_catch.py --env`` with an agent of its own and plays in ``evaluate``, with no code in the
    user's script and no --import."""
    env = _installed_stand_in(tmp_path)
    run = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "anakin_catch.py"),
            "--env",
            "stand-in-catch",
            "--agent",
            "reinforce",
            "--cpu-devices",
            "2",
            "--num-envs-per-device",
            "8",
            "--num-updates",
            "20",
            "--checkpoint-dir",
            str(tmp_path / "run"),
            "--no-compile-cache",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "2 device(s) in 1 process(es)" in run.stdout and "final training return" in run.stdout
    play = subprocess.run(
        [sys.executable, "-m", "podracer.cli.evaluate", "--checkpoint", str(tmp_path / "run"), "--episodes", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert play.returncode == 0, play.stderr
    returns = [float(line.split("return ")[1]) for line in play.stdout.splitlines() if line.startswith("episode ")]
    assert len(returns) == 3 and all(r in (-1.0, 1.0) for r in returns)


def _finals(stdout: str, seeds: int) -> list[float]:
    return [float(stdout.split(f"seed {i}: final training return ")[1].split()[0]) for i in range(seeds)]


def test_own_agent_example_learns_catch_on_most_seeds():
    """``examples/own_agent.py`` (REINFORCE, registered in the script) solves Catch on >= 2 of 3 seeds (random:
    -0.6)."""
    out = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "own_agent.py"),
            "--cpu-devices",
            "2",
            "--num-seeds",
            "3",
            "--num-envs-per-device",
            "32",
            "--num-updates",
            "160",
            "--no-compile-cache",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert sum(f >= 0.8 for f in _finals(out.stdout, 3)) >= 2, out.stdout


@pytest.mark.slow
def test_own_env_and_own_agent_train_in_sebulba_and_the_env_in_anakin(tmp_path):
    """``examples/own_env.py``'s corridor (a legal-action mask) learns in Anakin on >= 2 of 3 seeds, and with
    ``examples/own_agent.py``'s agent through ``python -m podracer.sebulba --import``; evaluate plays it."""
    env = child_env()
    out = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "own_env.py"),
            "--cpu-devices",
            "2",
            "--num-seeds",
            "3",
            "--num-envs-per-device",
            "16",
            "--num-updates",
            "60",
            "--no-compile-cache",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert sum(f >= 0.9 for f in _finals(out.stdout, 3)) >= 2, out.stdout
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "podracer.sebulba",
            "--import",
            "examples/own_env.py",
            "--import",
            "examples/own_agent.py",
            "--agent",
            "reinforce",
            "--env",
            "jax:corridor",
            "--cpu-devices",
            "2",
            "--num-envs-per-actor",
            "8",
            "--rollout-length",
            "8",
            "--total-env-steps",
            "2000",
            "--checkpoint-dir",
            str(tmp_path / "run"),
            "--no-compile-cache",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert " updates; steady state " in run.stdout
    play = subprocess.run(
        [
            sys.executable,
            "-m",
            "podracer.cli.evaluate",
            "--import",
            "examples/own_env.py",
            "--import",
            "examples/own_agent.py",
            "--checkpoint",
            str(tmp_path / "run"),
            "--episodes",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert play.returncode == 0, play.stderr
    assert "mean return" in play.stdout
    assert np.isfinite(float(out.stdout.split("final training return ")[-1].split()[0]))


_TOY_SUITE = """
from podracer.core.envs import Catch

CALLS = []


def require():
    CALLS.append("require")


def names():
    return ["catch-4", "catch-6"]


def make(task, **kwargs):
    CALLS.append(task)
    return Catch(rows=int(task.split("-")[1]), columns=3, **kwargs)
"""


def test_a_suite_adapter_of_your_own_names_its_tasks_suite_colon_task(registries, tmp_path, monkeypatch, capsys):
    (tmp_path / "toy_suite_adapter.py").write_text(_TOY_SUITE)
    monkeypatch.syspath_prepend(str(tmp_path))
    # the built-in suites left out of the listing (test_suites lists them): --env list imports every suite's adapter
    monkeypatch.setattr(envs, "SUITES", {})
    envs.register_suite("toy", "toy_suite_adapter")
    assert parser.parse(AnakinConfig, ["--env", "toy:catch-4"]).env == "toy:catch-4"
    assert envs.make("toy:catch-6").spec().observation.shape == (6, 3)
    assert (
        envs.is_jax_on_host("toy:catch-4")
        and parser.parse(SebulbaConfig, ["--env", "toy:catch-4"]).env == "toy:catch-4"
    )
    with pytest.raises(SystemExit):
        parser.parse(AnakinConfig, ["--env", "list"])
    listed = capsys.readouterr().out.splitlines()
    toy = listed.index("toy: a registered suite (envs.register_suite)")  # its module has no docstring to describe it
    assert listed[toy + 1].split() == ["toy:catch-4", "toy:catch-6"]
    for call, message in [
        (
            lambda: envs.register_suite("gymnax", "x"),
            "'gymnax' is a built-in suite prefix; register yours under another name.",
        ),
        (
            lambda: envs.register_suite("Toy Suite", "x"),
            "A suite's name is lower case letters, digits, '-' and '_' (the "
            "SUITE of --env SUITE:TASK), got 'Toy Suite'.",
        ),
        (
            lambda: envs.register_suite("toy2", "pkg:make"),
            "A suite adapter is a module path ('package.module'), got 'pkg:make'.",
        ),
    ]:
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value) == message
    envs.register_suite("gone", "no_such_adapter_module")  # nothing imported until a task is named
    with pytest.raises(
        ValueError, match=r"^Cannot load the adapter of suite 'gone' \('no_such_adapter_module'\): No module"
    ):
        envs.make("gone:task")


def test_entry_points_of_an_installed_package_register_tasks_suites_and_agents(registries, tmp_path, monkeypatch):
    """Read in this process: the three entry-point groups, lazily (nothing imported until named, the agent's module
    when the agents are listed)."""
    import importlib

    dist = tmp_path / "toy_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[podracer.envs]\ntoy_catch = toy_suite_adapter:make_catch\n\n"
        "[podracer.suites]\ntoyz = toy_suite_adapter\n\n"
        "[podracer.agents]\ntoy-agent = toy_agent_module:make_toy\n"
    )
    (tmp_path / "toy_suite_adapter.py").write_text(
        _TOY_SUITE + "\n\ndef make_catch():\n    return Catch(rows=7, columns=3)\n"
    )
    (tmp_path / "toy_agent_module.py").write_text(
        "import dataclasses\nfrom podracer.agents import A2CConfig, make_a2c\n\n\n"
        "@dataclasses.dataclass(frozen=True)\nclass ToyConfig(A2CConfig):\n    pass\n\n\n"
        "def make_toy(spec, config=ToyConfig()):\n    return make_a2c(spec, A2CConfig(**dataclasses.asdict(config)))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setattr(envs, "SUITES", dict(envs.SUITES))
    monkeypatch.setattr(envs, "_entry_points_loaded", False)
    monkeypatch.setattr(agents, "_entry_points_loaded", False)
    for module in ("toy_suite_adapter", "toy_agent_module"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    assert "toy-catch" in envs.names() and "toy_suite_adapter" not in sys.modules
    assert envs.make("toy_catch").spec().observation.shape == (7, 3)
    assert envs.make("toyz:catch-4").spec().observation.shape == (4, 3)
    assert "toy-agent" in agents.names() and agents.config_class("toy-agent").__name__ == "ToyConfig"
    cfg = parser.parse(AnakinConfig, ["--agent", "toy-agent", "--env", "toy_catch", "--entropy-coef", "0.1"])
    assert cfg.agent_name == "toy-agent" and cfg.agent.entropy_coef == 0.1
