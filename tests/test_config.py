"""Every bad input fails at start-up, in the command-line parser, with a one-line error naming the flag (exit 2)."""

import dataclasses

import pytest

from podracer.cli import parser
from podracer.core import install
from podracer.core.agents.hyperparameters import hyperparameters
from podracer.run.config import AnakinConfig, SebulbaConfig
from podracer.run.evaluate import EvaluateConfig
from podracer.run.preview import PreviewConfig

A, S, E, P = AnakinConfig, SebulbaConfig, EvaluateConfig, PreviewConfig

BAD_INPUTS = [
    (A, "--learning-rate -1", "--learning-rate must be > 0, got -1.0."),
    (S, "--learning-rate -1", "--learning-rate must be > 0, got -1.0."),
    (A, "--learning-rate 0", "--learning-rate must be > 0, got 0.0."),
    (A, "--max-grad-norm 0", "--max-grad-norm must be > 0, got 0.0."),
    (S, "--max-grad-norm 0", "--max-grad-norm must be > 0, got 0.0."),
    (A, "--max-grad-norm -1", "--max-grad-norm must be > 0, got -1.0."),
    (A, "--hidden-sizes 0", "--hidden-sizes must all be >= 1, got 0."),
    (S, "--hidden-sizes -3", "--hidden-sizes must all be >= 1, got -3."),
    (A, "--hidden-sizes 64 0", "--hidden-sizes must all be >= 1, got 64 0."),
    (A, "--cpu-devices 0", "--cpu-devices must be >= 1, got 0."),
    (S, "--cpu-devices 0", "--cpu-devices must be >= 1, got 0."),
    (A, "--discount 1.5", "--discount must be in [0, 1], got 1.5."),
    (S, "--discount -0.1", "--discount must be in [0, 1], got -0.1."),
    (A, "--entropy-coef -0.1", "--entropy-coef must be >= 0, got -0.1."),
    (A, "--agent ppo --num-epochs 0", "--num-epochs must be >= 1, got 0."),
    (S, "--agent ppo --num-minibatches 0", "--num-minibatches must be >= 1, got 0."),
    (A, "--agent dqn --replay-ratio 0", "--replay-ratio must be > 0, got 0.0."),
    (A, "--agent dqn --replay-capacity 0", "--replay-capacity must be >= 1, got 0."),
    (S, "--agent dqn --batch-size 0", "--batch-size must be >= 1, got 0."),
    (A, "--agent dqn --min-replay-size 0", "--min-replay-size must be >= 1, got 0."),
    (A, "--core lstm --core-size 0", "--core-size must be >= 1, got 0."),
    (A, "--agent r2d2 --burn-in 16 --rollout-length 16", "--burn-in (16) must be shorter than --rollout-length (16)."),
    (S, "--agent r2d2 --burn-in 20", "--burn-in (20) must be shorter than --rollout-length (20)."),
    (A, "--agent r2d2 --burn-in -1", "--burn-in must be >= 0, got -1."),
    (A, "--lr-warmup-steps -1", "--lr-warmup-steps must be >= 0, got -1."),
    (
        S,
        "--agent ppo --lr-schedule cosin",
        "--lr-schedule: invalid choice: 'cosin' (choose from constant, linear, cosine).",
    ),
    (A, "--rollout-length 0", "--rollout-length must be >= 1, got 0."),
    (S, "--rollout-length 0", "--rollout-length must be >= 1, got 0."),
    (A, "--num-updates 0", "--num-updates must be >= 1, got 0."),
    (A, "--updates-per-call 0", "--updates-per-call must be >= 1, got 0."),
    (A, "--num-updates 50", "--num-updates = 50 is not divisible by the 20 updates per call (--updates-per-call)"),
    (A, "--num-envs 0", "--num-envs must be >= 1, got 0."),
    (A, "--num-envs-per-device 0", "--num-envs-per-device must be >= 1, got 0."),
    (A, "--num-seeds 0", "--num-seeds must be >= 1, got 0."),
    (S, "--num-envs 0", "--num-envs must be >= 1, got 0."),
    (S, "--num-envs-per-actor 0", "--num-envs-per-actor must be >= 1, got 0."),
    (S, "--actor-threads 0", "--actor-threads must be >= 1, got 0."),
    (S, "--queue-size 0", "--queue-size must be >= 1, got 0."),
    (S, "--log-every 0", "--log-every must be >= 1, got 0."),
    (S, "--actor-timeout 0", "--actor-timeout must be > 0, got 0.0."),
    (A, "--target-return 0.9", "--target-return needs --eval-every."),
    (S, "--target-return 450", "--target-return needs --eval-every."),
    (S, "--eval-every 0", "--eval-every must be >= 1, got 0."),
    (A, "--eval-every 30", "--eval-every = 30 is not divisible by the 20 updates per call (--updates-per-call)"),
    (A, "--eval-every 20 --eval-episodes 0", "--eval-episodes must be >= 1, got 0."),
    (A, "--distributed-timeout 0", "--distributed-timeout must be >= 1, got 0."),
    (S, "--envpool-threads -1", "--envpool-threads must be >= 0, got -1."),
    (S, "--max-policy-lag -1", "--max-policy-lag must be >= 0, got -1."),
    (S, "--num-envs-per-actor 32 --env-groups 3", "--num-envs-per-actor = 32 is not divisible by the 3 --env-groups"),
    (A, "--agent a2c --num-epochs 3", "unrecognized arguments: --num-epochs 3"),
    (S, "--agent impala --replay-ratio 2", "unrecognized arguments: --replay-ratio 2"),
    (A, "--resume", "--checkpoint-every, --checkpoint-every-seconds and --resume need --checkpoint-dir."),
    (S, "--resume auto", "--checkpoint-every, --checkpoint-every-seconds and --resume need --checkpoint-dir."),
    (
        S,
        "--checkpoint-every-seconds 60",
        "--checkpoint-every, --checkpoint-every-seconds and --resume need --checkpoint-dir.",
    ),
    (A, "--checkpoint-dir x --resume maybe", "--resume: invalid choice: 'maybe' (choose from no, yes, auto)."),
    (S, "--on-nonfinite ignore", "--on-nonfinite: invalid choice: 'ignore' (choose from stop, skip, continue)."),
    (A, "--checkpoint-dir x --checkpoint-every-seconds 0", "--checkpoint-every-seconds must be > 0, got 0.0."),
    (
        S,
        "--checkpoint-dir x --checkpoint-every-seconds nan",
        "--checkpoint-every-seconds must be a finite number, got nan.",
    ),
    (A, "--learning-rate inf", "--learning-rate must be a finite number, got inf."),
    (A, "--normalize-observations --observation-clip 0", "--observation-clip must be > 0, got 0.0."),
    (
        S,
        "--observation-clip 10",
        "--observation-clip shapes --normalize-observations, which this run does not ask for: add it, or drop "
        "--observation-clip.",
    ),
    (
        A,
        "--normalize-observations --return-restart termination",
        "--return-restart shapes --normalize-rewards, which this run does not ask for: add it, or drop "
        "--return-restart.",
    ),
    (
        S,
        "--normalize-with acting",
        "--normalize-with shapes --normalize-observations or --normalize-rewards, which this run does not ask for: "
        "add it, or drop --normalize-with.",
    ),
    (A, "--normalize-rewards --normalize-with before", "--normalize-with: invalid choice: 'before'"),
    (S, "--agent ppo --max-grad-norm inf", "--max-grad-norm must be a finite number, got inf."),
    (A, "--eval-every 20 --target-return nan", "--target-return must be a finite number, got nan."),
    (S, "--actor-timeout inf", "--actor-timeout must be a finite number, got inf."),
    (A, "--sweep learning_rate=1e-3,inf", "--learning-rate must be a finite number, got inf."),
    (P, "--checkpoint-dir x --poll-seconds inf", "--poll-seconds must be a finite number, got inf."),
    (
        A,
        "--checkpoint-dir x --checkpoint-every 30",
        "--checkpoint-every = 30 is not divisible by the 20 updates per call",
    ),
    (
        A,
        "--num-seeds 2 --checkpoint-dir x --resume",
        "--checkpoint-every, --checkpoint-every-seconds and --resume take one seed: drop --num-seeds",
    ),
    (
        A,
        "--num-processes 2 --process-id 2 --coordinator 127.0.0.1:1",
        "--process-id 2 is out of range for 2 processes (expected 0 ... 1).",
    ),
    (S, "--num-processes 0", "--num-processes must be >= 1, got 0."),
    (
        A,
        "--num-processes 2 --process-id 0 --coordinator 127.0.0.1:99999",
        "--coordinator '127.0.0.1:99999': port 99999 is out of range (1 ... 65535).",
    ),
    (S, "--coordinator localhost", "--coordinator must be HOST:PORT, got 'localhost'."),
    (
        A,
        "--env pong",
        "--env: Unknown JAX environment 'pong'; available: cartpole, catch, memory, synthetic, or SUITE:NAME "
        "(brax, bsuite, craftax, gymnax, jumanji, navix, pgx, playground, xminigrid; --env list); your own: "
        "envs.register, --import MODULE or a podracer.envs entry point.",
    ),
    (
        A,
        "--env gym:CartPole-v1",
        "--env: Unknown environment suite 'gym' in 'gym:CartPole-v1'; suites: brax, bsuite, craftax, gymnax, jumanji, "
        "navix, pgx, playground, xminigrid.",
    ),
    (
        S,
        "--env jax:gym:CartPole-v1",
        "--env: Unknown environment suite 'gym' in 'gym:CartPole-v1'; suites: brax, bsuite, craftax, gymnax, jumanji, "
        "navix, pgx, playground, xminigrid.",
    ),
    (
        S,
        "--agent ddpg",
        "--agent: invalid choice: 'ddpg' (choose from a2c, alphazero, dqn, impala, muzero, ppo, pqn, r2d2, sac, td3).",
    ),
    (A, "--seed x", "--seed: invalid literal for int() with base 10: 'x'"),
    (S, "--agent ppo --clip-epsilon 0", "--clip-epsilon must be > 0, got 0.0."),
    (A, "--agent ppo --gae-lambda 1.5", "--gae-lambda must be in [0, 1], got 1.5."),
    (A, "--td-lambda -0.5", "--td-lambda must be in [0, 1], got -0.5."),
    (S, "--agent dqn --epsilon 2", "--epsilon must be in [0, 1], got 2.0."),
    (
        A,
        "--agent dqn --batch-size 64 --min-replay-size 32",
        "Need --batch-size <= --min-replay-size <= --replay-capacity, got 64, 32, 100000.",
    ),
    (S, "--agent dqn --target-tau 0", "--target-tau must be in (0, 1], got 0.0."),
    (A, "--agent r2d2 --eta 1.5", "--eta must be in [0, 1], got 1.5."),
    (S, "--agent impala --clip-rho-threshold 0", "--clip-rho-threshold must be > 0, got 0.0."),
    (A, "--agent dqn --n-step 0", "--n-step must be >= 1, got 0."),
    (S, "--checkpoint-dir x --checkpoint-every 0", "--checkpoint-every must be >= 1, got 0."),
    (S, "--num-envs 0 --actor-threads 2", "--num-envs must be >= 1, got 0."),
    (S, "--env jax:pong", "Unknown JAX environment 'pong'"),
    (S, "--agent r2d2 --core lstm", "unrecognized arguments: --core lstm"),
    (A, "--torso resnet", "--torso: invalid choice: 'resnet' (choose from auto, mlp, impala, nature, board)."),
    (
        E,
        "--checkpoint x --episodes 0",
        "--episodes must be between 1 and 65,536 (one environment each, all at once), got 0.",
    ),
    (E, "--episodes 2", "the following arguments are required: --checkpoint"),
    (P, "--checkpoint-dir x --poll-seconds 0", "--poll-seconds must be > 0, got 0.0."),
    (P, "--checkpoint-dir x --wait -1", "--wait must be >= 0, got -1.0."),
    (P, "--gif x.gif", "the following arguments are required: --checkpoint-dir"),
    (
        A,
        "--sweep learning_rate",
        "--sweep takes NAME=V1,V2,... (for example learning_rate=1e-3,3e-3), got 'learning_rate'.",
    ),
    (
        A,
        "--sweep lr=1e-3,3e-3",
        "--sweep: 'lr' is not a numeric hyper-parameter of this agent; choose from learning_rate, max_grad_norm, "
        "lr_warmup_steps, lr_end, lr_decay_steps, discount,",
    ),
    (A, "--sweep torso=1,2", "--sweep: 'torso' is not a numeric hyper-parameter of this agent"),
    (A, "--sweep learning_rate=1e-3,fast", "--sweep learning_rate: 'fast' is not a number."),
    (A, "--sweep learning_rate=-1e-3,1e-3", "--learning-rate must be > 0, got -0.001."),
    (A, "--sweep learning_rate=1e-3 --sweep learning_rate=3e-3", "--sweep learning_rate: given twice"),
    (A, "--sweep learning_rate=1e-3,1e-3", "--sweep learning_rate: a value is repeated in '1e-3,1e-3'."),
    (A, "--agent dqn --sweep n_step=1.5,3", "--sweep n_step: '1.5' is not a whole number (--n-step takes integers)."),
    (
        A,
        "--sweep discount=0.9,0.99 --eval-every 20 --target-return 1",
        "--target-return stops one run: drop it or --sweep",
    ),
    (
        A,
        "--sweep discount=0.9,0.99 --checkpoint-dir x --resume",
        "--checkpoint-every, --checkpoint-every-seconds and --resume take one run: drop --sweep",
    ),
    (S, "--sweep discount=0.9,0.99", "unrecognized arguments: --sweep"),
    (A, "--seed 1180591620717411303424", "--seed must be between 0 and 2147483647, got 1180591620717411303424."),
    (S, "--seed -1", "--seed must be between 0 and 2147483647, got -1."),
    (A, "--preset missing/run.toml", "--preset missing/run.toml: cannot be read (No such file or directory)."),
    (S, "--preset missing.toml", "--preset missing.toml: cannot be read (No such file or directory)."),
    (A, "--eval-episodes 100000", "--eval-episodes must be <= 65,536 (one environment each), got 100000."),
    (
        E,
        "--checkpoint x --episodes 1000000000",
        "--episodes must be between 1 and 65,536 (one environment each, all at once), got 1000000000.",
    ),
]


@pytest.mark.parametrize("cls, argv, message", BAD_INPUTS, ids=[f"{c.__name__}:{a}" for c, a, _ in BAD_INPUTS])
def test_bad_input_is_a_one_line_error_naming_the_flag(cls, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parser.parse(cls, argv.split(), prog="prog")
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("prog: error: ") and message in errors[0], errors


def test_the_table_covers_at_least_thirty_inputs_of_both_modes():
    assert len(BAD_INPUTS) >= 30
    assert {cls for cls, _, _ in BAD_INPUTS} == {A, S, E, P}


def test_the_registry_describes_each_agent_as_its_config_docstring_does():
    """``--help`` lists the agents from the registry's lines without importing them: each line is its config's
    docstring's first paragraph, so the two cannot drift apart."""
    from podracer.core import agents

    for name, line in agents.descriptions().items():
        first = (agents.config_class(name).__doc__ or "").strip().split("\n\n")[0]
        assert line == " ".join(first.split()), name


def test_every_agent_field_is_a_flag_of_both_modes_with_the_agents_own_defaults():

    from podracer.core import agents

    for name, cls in agents.config_classes().items():
        for mode in (A, S):
            parsed = parser.parse(mode, ["--agent", name])
            assert parsed.agent == cls()  # the agent's own defaults, whatever the mode
            # The run's length is a fact the composition root gives the agent, not a flag (DQN's run_env_steps was).
            with pytest.raises(SystemExit):
                parser.parse(mode, [name, "--run-env-steps", "1"])
            for field_name, value in hyperparameters(cls()).items():  # nested optimizer settings included
                if isinstance(value, bool):
                    argv = ["--agent", name, "--no-" + field_name.replace("_", "-")]
                    assert hyperparameters(parser.parse(mode, argv).agent)[field_name] is False
                    continue
                # Each field is a flag: setting it to its default round-trips.
                text = (
                    ["None"] if value is None else [str(v) for v in value] if isinstance(value, tuple) else [str(value)]
                )
                argv = [name, "--" + field_name.replace("_", "-"), *text]
                assert hyperparameters(parser.parse(mode, argv).agent)[field_name] == value, (mode, name, field_name)
    # R2D2's own discount and network, IMPALA's own gradient clip, in both modes.
    for mode in (A, S):
        assert parser.parse(mode, ["--agent", "r2d2"]).agent.discount == 0.997
        assert parser.parse(mode, ["r2d2"]).agent.network.hidden_sizes == (64,)
        assert parser.parse(mode, ["--agent=impala"]).agent.optimizer.max_grad_norm == 40.0


def test_help_names_the_program_and_takes_choices_from_the_registries(capsys):
    from podracer.core import agents, envs
    from podracer.core.networks import TORSOS
    from podracer.run.config import GROUPS

    with pytest.raises(SystemExit) as exit_info:
        parser.parse(A, ["--help"], prog="examples/anakin_catch.py")
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: examples/anakin_catch.py [--agent NAME] [--env NAME]")
    flat = " ".join(out.split())  # the help's lines wrapped where the terminal's width says
    assert ", ".join(agents.names()) in flat and ", ".join(envs.names()) in flat and "--env list" in out
    # a researcher's order: what to train, how long, seeds and logging; plumbing later; the agent's own group last
    titles = [line for line in out.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert titles == [
        *(f"{t}:" for t in GROUPS),
        "a2c hyper-parameters (--agent a2c):",
        "agents (--agent NAME):",
    ]
    for notation in ("{None}|", "source subcommand", "(default: None)", "[INT [INT ...]]", " options", "-h, --help"):
        assert notation not in out, notation
    flags = {line.split()[0].rstrip(",") for line in out.splitlines() if line.startswith("  --")}
    fields = {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(A) if f.name not in ("agent", "imports")}
    assert fields | {"--agent", "--import", "--learning-rate", "--td-lambda"} <= flags  # nothing left out
    with pytest.raises(SystemExit):
        parser.parse(S, ["--agent", "ppo", "--help"], prog="python -m podracer.sebulba")
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m podracer.sebulba --agent ppo") and "{" + ",".join(TORSOS) + "}" in out
    assert out.count("(default: 0.003)") == 1  # PPO's learning rate, shown once
    assert "--checkpoint-dir DIR" in out and "ppo hyper-parameters (--agent ppo):" in out
    assert "Anakin" not in out  # Sebulba's page speaks in Sebulba's terms
    assert "--total-env-steps INT" in out.split("how long:")[1].split("seeds, evaluation")[0]


def test_wandb_without_the_package_is_a_one_line_error(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(SystemExit) as exit_info:
        parser.parse(A, ["--wandb-project", "p"], prog="prog")
    assert exit_info.value.code == 2
    assert f"prog: error: --wandb-project needs wandb: {install.command('wandb')}." in capsys.readouterr().err


def test_a_sweep_without_matplotlib_writes_its_table_and_says_how_to_get_the_plot(monkeypatch, tmp_path):
    """A plain install (no matplotlib) runs a sweep with a log directory (the command line's default one included):
    its table is written and the report says what the picture needs, instead of a refusal or a traceback."""
    import importlib.util

    from podracer.core import sweep

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert parser.parse(A, ["--sweep", "learning_rate=1e-3,3e-3", "--log-dir", str(tmp_path)]).sweep
    points = [{"learning_rate": 1e-3}, {"learning_rate": 3e-3}]
    history = [{"env_steps": 100, "episode_return_per_seed": [0.5, 0.7]}]
    text = sweep.report(history, points, str(tmp_path))
    assert text.splitlines()[-1] == (
        f"sweep: wrote {tmp_path / 'sweep.csv'} (not {tmp_path / 'sweep.png'}: drawing it needs matplotlib: "
        f"{install.command('plot')})"
    )
    assert (tmp_path / "sweep.csv").is_file() and not (tmp_path / "sweep.png").exists()


@pytest.mark.parametrize(
    "argv, resume",
    [
        ([], "no"),
        (["--resume"], "yes"),
        (["--resume", "--seed", "1"], "yes"),
        (["--resume", "auto"], "auto"),
        (["--resume=auto"], "auto"),
        (["--resume", "no"], "no"),
        (["--no-resume"], "no"),
        (["--resume", "ppo"], "yes"),
    ],
)
def test_resume_takes_no_yes_auto_and_alone_means_yes(argv, resume):
    cfg = parser.parse(AnakinConfig, ["--checkpoint-dir", "x", *argv], prog="prog")
    assert cfg.resume == resume
    assert AnakinConfig(checkpoint_dir="x", resume=True).resume == "yes" and AnakinConfig(resume=False).resume == "no"


def test_a_sebulba_command_line_without_agent_picks_impala_for_atari_and_ppo_otherwise():
    picked = lambda *argv: parser.parse(S, list(argv), prog="prog").agent_name  # noqa: E731
    assert picked() == picked("--env", "Pong") == picked("--env=Breakout-v5") == "impala"  # Atari frames
    assert picked("--env", "CartPole-v1") == picked("--env", "HalfCheetah-v5") == picked("--env", "jax:catch") == "ppo"
    assert picked("--env", "gymnasium:CartPole-v1") == "ppo"
    assert picked("--env", "CartPole-v1", "--agent", "impala") == picked("--env", "CartPole-v1", "impala") == "impala"
    assert (
        parser.parse(S, ["--env", "CartPole-v1", "--learning-rate", "1e-3"], prog="prog").agent.optimizer.learning_rate
        == 1e-3
    )
    # A caller's own default config keeps its agent; Anakin's default is unchanged.
    assert parser.parse(S(env="CartPole-v1"), [], prog="prog").agent_name == "impala"
    assert parser.parse(A, ["--env", "cartpole"], prog="prog").agent_name == "a2c"


_COMMENTED = """
import dataclasses


@dataclasses.dataclass(frozen=True)
class Commented:
    beside: int = 1  # at the end of its line
    # above it,
    # in two lines
    above: int = 2
    split: int | None = (
        None  # inside a field a formatter split over lines
    )
    bare: int = 3
"""


def test_a_fields_help_is_its_comment_beside_above_or_inside_it(tmp_path):
    from podracer.run import flagspec as flags

    path = tmp_path / "commented.py"
    path.write_text(_COMMENTED)
    commented = parser.import_module(str(path)).Commented
    assert flags.comments(commented) == {
        "beside": "at the end of its line",
        "above": "above it, in two lines",
        "split": "inside a field a formatter split over lines",
    }
    assert [(o.flag, o.help) for o in flags.options(commented)][-1] == ("--bare", "")  # no comment, still a flag


@pytest.mark.parametrize(
    "cls, argv, message",
    [
        (
            AnakinConfig,
            "--policy-std state",
            "--policy-std state sets a Gaussian policy's standard deviation, and catch's actions are discrete: drop "
            "it.",
        ),
        (
            SebulbaConfig,
            "--env CartPole-v1 --agent ppo --policy-std state",
            "--policy-std state sets a Gaussian policy's standard deviation, and CartPole-v1's actions are discrete",
        ),
        (
            AnakinConfig,
            "--policy-units env",
            "--policy-units env sets a Gaussian policy's units, and catch's actions are discrete: drop it.",
        ),
        (
            AnakinConfig,
            "--log-std-init -2",
            "--log-std-init -2.0 sets a Gaussian policy's initial log standard deviation, and catch's actions are "
            "discrete: drop it.",
        ),
        pytest.param(
            AnakinConfig,
            "--env gymnax:Pendulum-v1 --sde-sample-freq 4",
            "--sde-sample-freq 4 sets when gSDE draws its exploration matrices: it needs --policy-std sde.",
            marks=pytest.mark.suite("gymnax"),
        ),
        pytest.param(
            AnakinConfig,
            "--env gymnax:Pendulum-v1 --policy-std state --log-std-init -1",
            "--log-std-init -1.0 starts a learned log standard deviation, which --policy-std state does not have: "
            "drop it, or use --policy-std parameter or sde.",
            marks=pytest.mark.suite("gymnax"),
        ),
        (
            AnakinConfig,
            "--lr-end 0.001",
            "--lr-end 0.001 has no effect with --lr-schedule constant (the rate never decays): choose --lr-schedule "
            "linear or cosine, or drop it.",
        ),
        (AnakinConfig, "--lr-decay-steps 10", "--lr-decay-steps 10 has no effect with --lr-schedule constant"),
        (AnakinConfig, "--sweep lr_end=0,1e-4", "--sweep lr_end has no effect with --lr-schedule constant"),
        (
            AnakinConfig,
            "--population 4 --pbt-search lr_end=1e-5..1e-4",
            "--pbt-search lr_end has no effect with --lr-schedule constant",
        ),
    ],
)
def test_a_flag_that_would_have_no_effect_is_refused_naming_it(cls, argv, message):
    """The rule of docs/faults.md: a flag set away from its default that this run would not use is refused."""
    from podracer.run import compose
    from podracer.core import envs

    parsed = parser.parse(cls, argv.split(), prog="prog")
    spec = envs.make(parsed.env).spec() if cls is AnakinConfig else _host_spec(parsed.env)
    with pytest.raises(ValueError) as error:
        compose.check_applies(parsed, spec)
    assert str(error.value).startswith(message), str(error.value)


def _host_spec(name):
    from podracer.run import compose

    env = compose.host_env_factory(parser.parse(SebulbaConfig, ["--env", name], prog="prog"))(0, 1)
    try:
        return env.spec()
    finally:
        getattr(env, "close", lambda: None)()


@pytest.mark.parametrize(
    "argv",
    ["--lr-schedule linear --lr-end 0.001", "--lr-schedule cosine --lr-decay-steps 10", "--lr-warmup-steps 5"],
)
def test_the_same_flags_are_taken_where_they_apply(argv):
    from podracer.run import compose
    from podracer.core import envs
    from podracer.core.types import Box

    parsed = parser.parse(AnakinConfig, argv.split(), prog="prog")
    compose.check_applies(parsed, envs.make(parsed.env).spec())
    continuous = parser.parse(AnakinConfig, ["--agent", "ppo", "--policy-std", "state"], prog="prog")
    spec = envs.make("catch").spec()
    compose.check_applies(continuous, spec._replace(num_actions=0, box=Box(low=(-1.0,), high=(1.0,))))


def test_a_run_fields_group_and_bounds_are_metadata_on_the_field():
    """A run field's place on the help page and its least value are said once, on the field (``Flag``): a field
    without a group is refused by name; a bound and a ``Literal``'s choices hold for Python callers too."""
    from typing import Annotated

    from podracer.run import flagspec
    from podracer.run.config import DEVICES, Flag

    names = dict(flagspec.groups(SebulbaConfig))
    assert names["how long"] == ["total-env-steps"] and names["what to train"][:2] == ["env", "agent"]
    assert names[DEVICES].index("queue-size") < names[DEVICES].index("cpu-devices")  # the mode's own fields first

    @dataclasses.dataclass(frozen=True)
    class Grown(AnakinConfig):
        lanes: Annotated[int, Flag(low=2)] = 2  # a field added without a group

    with pytest.raises(ValueError, match=r"^Grown\.lanes: a run's field needs Flag\(group=\.\.\.\)"):
        flagspec.groups(Grown)
    with pytest.raises(ValueError, match=r"^--lanes must be >= 2, got 1\.$"):
        Grown(lanes=1)
    with pytest.raises(ValueError, match=r"^--eval-policy: invalid choice: 'best' \(choose from greedy, sampled\)\.$"):
        AnakinConfig(eval_policy="best")
    with pytest.raises(ValueError, match=r"^--max-policy-lag must be >= 0, got -1\.$"):
        SebulbaConfig(env="jax:catch", max_policy_lag=-1)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--total-env-steps", "100", "--num-updates", "40"],
            "--total-env-steps and --num-updates both set the run's length: pass one (--total-env-steps wins over a "
            "preset's --num-updates).",
        ),
        (
            ["--env", "catch", "--agent", "td3", "--num-critics", "1", "--no-clipped-double-q"],
            "--no-clipped-double-q chooses between two critics' targets (the lower, or each its own); --num-critics 1 "
            "has one: drop one of the two flags.",
        ),
    ],
)
def test_flags_that_change_nothing_are_one_line(argv, message, capsys):
    from podracer.cli import parser as cli_parser

    with pytest.raises(SystemExit):
        cli_parser.parse(AnakinConfig, argv, prog="p")
    assert capsys.readouterr().err.strip().splitlines() == [f"p: error: {message}"]
    # a preset's --num-updates gives way to the command line's --total-env-steps
    assert cli_parser.parse(AnakinConfig, ["--preset", "catch", "--total-env-steps", "4096"]).total_env_steps == 4096
