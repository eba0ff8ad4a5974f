"""The figure a run closes with is the saved agent's: a run that evaluates does so after its last update too (it
evaluated only every --eval-every updates, so the closing line could report the parameters of an earlier one),
and its checkpoint, played by ``podracer evaluate`` on the evaluation's environments, scores what the line says."""

import re

import jax
import numpy as np

from podracer.cli import command as cli
from podracer.run import evaluate
from podracer.run.play import EVAL_SEED_OFFSET


def test_sebulbas_closing_evaluation_is_its_checkpoint_played_by_evaluate(tmp_path, capsys):
    directory = tmp_path / "ck"
    flags = ["--env", "gymnasium:CartPole-v1", "--agent", "ppo", "--num-envs", "8", "--rollout-length", "32",
             "--total-env-steps", str(5 * 8 * 32), "--eval-every", "3", "--eval-episodes", "6", "--seed", "4",
             "--actor-devices", "0", "--learner-devices", "1", "--checkpoint-dir", str(directory), "--no-log-dir",
             "--cpu-devices", str(len(jax.devices("cpu")))]  # fmt: skip
    assert cli.main(["sebulba", *flags]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("final greedy evaluation return "), last
    assert "; 5 updates; steady state " in last, last  # the evaluation after update 5, not 3
    assert re.search(r"; \d+ XLA programs?(, \d+ from the cache)?$", last), last  # Anakin's closing form
    said = float(last.split("final greedy evaluation return ")[1].split(";")[0])
    # the greedy policy is deterministic: the evaluation's environments give the same episodes again
    returns, _ = evaluate.play(str(directory), 6, seed=4 + EVAL_SEED_OFFSET, greedy=True)
    assert round(float(np.mean(returns)), 3) == said, (returns, said)


def test_anakin_evaluates_after_its_last_call_too(tmp_path, capsys):
    flags = ["--env", "catch", "--num-envs", "16", "--rollout-length", "8", "--num-updates", "30",
             "--updates-per-call", "10", "--eval-every", "20", "--eval-episodes", "8", "--no-log-dir",
             "--cpu-devices", str(len(jax.devices("cpu")))]  # fmt: skip
    assert cli.main(["anakin", *flags]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("final greedy evaluation return "), out[-1]  # update 30's, though 30 % 20 != 0


def test_evaluate_names_the_policy_it_played_and_the_flag_that_plays_the_runs(tmp_path, capsys):
    """``podracer evaluate`` played the behaviour policy and said ``mean return 470.62 over 16 episodes`` of a DQN
    checkpoint whose run closed on greedy 500.0: it names the policy, and the flag that plays the run's."""
    from podracer.cli import evaluate as evaluate_command

    directory = str(tmp_path / "ck")
    flags = ["--env", "catch", "--agent", "dqn", "--num-envs", "16", "--rollout-length", "8", "--num-updates", "10",
             "--updates-per-call", "10", "--eval-every", "10", "--eval-episodes", "8", "--no-log-dir",
             "--checkpoint-dir", directory, "--cpu-devices", str(len(jax.devices("cpu")))]  # fmt: skip
    assert cli.main(["anakin", *flags]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("final greedy evaluation return ")
    assert evaluate_command.main(["--checkpoint", directory, "--episodes", "4"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith(
        " over 4 episodes of the behaviour policy (sampled) (checkpoint step_10); its run's evaluations played the "
        "greedy policy: --greedy plays that"
    ), last
    assert evaluate_command.main(["--checkpoint", directory, "--episodes", "4", "--greedy"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith(" over 4 episodes of the greedy policy (checkpoint step_10)"), last
