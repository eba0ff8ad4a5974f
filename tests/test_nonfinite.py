"""A run whose updates stop being finite: stopped at the first (nothing non-finite saved), skipped, or carried on;
evaluation refuses non-finite parameters."""

import json
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.run import checkpoint
from podracer.run import hostenvs
from podracer.core import envs, learner
from podracer.run import evaluate
from podracer.core.agents import A2CConfig
from podracer.run.config import AnakinConfig, SebulbaConfig
from podracer.run.compose import train_anakin, train_sebulba
from podracer.run.nonfinite import Diverged, NonfiniteWatch
from children import child_env  # tests/children.py

# Adam's first step at a warm-up's learning rate of 0 is finite; the second, at 1e30 / 1000, is not.
DIVERGING = A2CConfig().replace(learning_rate=1e30, max_grad_norm=1e30, lr_warmup_steps=1000)


class TestNonfiniteCode(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_the_code_adds_up_what_is_not_finite(self):
        code = self.variant(learner.nonfinite_code)
        finite = {"w": jnp.ones(3), "count": jnp.int32(7)}
        assert code({"loss": 1.0, "grad_norm": 2.0}, finite) == 0.0
        assert code({"loss": jnp.nan, "grad_norm": 2.0}, finite) == 1.0
        assert code({"loss": 1.0, "grad_norm": jnp.inf}, {"w": jnp.array([1.0, -jnp.inf])}) == 6.0
        assert code({"q_value": jnp.nan}, finite) == 0.0  # only the loss and the gradient norm are read
        assert learner.nonfinite_names(7.0) == ["loss", "gradient norm", "parameters"]
        assert learner.nonfinite_names(4.0) == ["parameters"]


def test_the_watch_stops_at_the_first_update_and_names_the_entry():
    watch = NonfiniteWatch("stop")
    assert watch.check(np.zeros((4, 3)), 8) == 0
    codes = np.zeros((4, 3))
    codes[2, 1], codes[3] = 4.0, 7.0
    with pytest.raises(Diverged, match=r"^update 11 is not finite \(parameters, seed entry 1\)$"):
        watch.check(codes, 8)
    assert NonfiniteWatch("skip").check(codes, 8) == 4
    with pytest.raises(ValueError, match="--on-nonfinite: invalid choice: 'maybe'"):
        NonfiniteWatch("maybe")


def _anakin(tmp_path, name, **overrides):
    settings = dict(env="catch", agent=DIVERGING, num_envs=32, num_updates=4, updates_per_call=1)
    settings.update(checkpoint_dir=str(tmp_path / name), log_dir=str(tmp_path / name / "log"))
    return AnakinConfig(**{**settings, **overrides})


def _params(directory):
    return evaluate.load(directory, envs.make("catch").spec())[1]


def test_anakin_stops_at_the_first_nonfinite_update_and_keeps_the_last_finite_checkpoint(tmp_path):
    with pytest.raises(Diverged, match=r"^update 2 is not finite \(loss, gradient norm, parameters\)$"):
        train_anakin(_anakin(tmp_path, "stop", checkpoint_every=1))
    directory = tmp_path / "stop"
    assert checkpoint.steps(str(directory)) == [1]
    params = _params(str(directory))  # evaluation takes it: every parameter is finite
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(params))
    records = [json.loads(line) for line in (directory / "log" / "metrics.jsonl").read_text().splitlines()]
    assert [r["nonfinite_updates"] for r in records] == [0, 1]  # the diverged call is logged, then the run stops


@pytest.mark.slow
def test_skip_discards_every_nonfinite_update_and_continue_trains_on_into_a_checkpoint_evaluate_refuses(tmp_path):
    skipped = train_anakin(_anakin(tmp_path, "skip", on_nonfinite="skip", updates_per_call=4))
    assert skipped.history[-1]["nonfinite_updates"] == 3
    train_anakin(_anakin(tmp_path, "one", num_updates=1))  # the same seed's first (finite) update alone
    chex.assert_trees_all_close(_params(str(tmp_path / "skip")), _params(str(tmp_path / "one")))

    carried = train_anakin(_anakin(tmp_path, "continue", on_nonfinite="continue", updates_per_call=4))
    assert carried.history[-1]["nonfinite_updates"] == 3
    with pytest.raises(ValueError, match=r"holds non-finite parameters \(7,684 of 7,684 values\): the run diverged"):
        _params(str(tmp_path / "continue"))


def test_skip_says_so_at_the_first_discarded_update_counts_them_at_the_end_and_most_discarded_exits_1(tmp_path, capsys):
    from podracer.cli import command as cli

    config = _anakin(tmp_path, "aloud", on_nonfinite="skip", updates_per_call=2)
    result = train_anakin(config)
    assert result.nonfinite == (3, 4)  # the first update is finite, the three after it are discarded
    said = capsys.readouterr().out
    assert said.count("--on-nonfinite skip: discarding such updates") == 1
    assert "podracer: update 2 is not finite (loss, gradient norm, parameters); --on-nonfinite skip" in said
    assert cli._report_anakin(config, result) == 1
    closing, verdict = capsys.readouterr().out.splitlines()[-2:]
    assert "; 3 of 4 updates discarded (--on-nonfinite skip); steady state " in closing
    assert verdict.startswith("podracer: more than half of the run's updates were not finite (--on-nonfinite skip)")


def test_the_closing_words_on_discarded_updates():
    from podracer.run.nonfinite import nonfinite_said

    watch = NonfiniteWatch("continue", main=False)
    watch.check(np.zeros((2, 3)), 0)
    watch.check(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]), 2)
    assert (watch.count, watch.seen) == (1, 12)
    assert nonfinite_said("continue", (watch.count, watch.seen)) == (
        "1 of 12 updates not finite (--on-nonfinite continue)",
        False,
    )
    assert nonfinite_said("skip", (7, 12)) == ("7 of 12 updates discarded (--on-nonfinite skip)", True)
    assert nonfinite_said("skip", (6, 12))[1] is False and nonfinite_said("stop", (0, 12)) == ("", False)


def test_sebulba_stops_before_the_nonfinite_parameters_reach_the_actors_or_a_checkpoint(tmp_path):
    config = SebulbaConfig(
        env="CartPole-v1",
        agent=DIVERGING,
        total_env_steps=32 * 16 * 6,
        num_envs_per_actor=32,
        rollout_length=16,
        actor_devices=(0,),
        learner_devices=(1,),
        checkpoint_dir=str(tmp_path / "ck"),
    )
    with pytest.raises(Diverged, match=r"^update 2 is not finite"):
        train_sebulba(config)
    # the loop's end saved the last completed update, the first, which is finite
    assert checkpoint.steps(str(tmp_path / "ck")) == [1]
    params = evaluate.load(str(tmp_path / "ck"), hostenvs.make_host("CartPole-v1", 1).spec())[1]
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(params))


@pytest.mark.slow
def test_the_command_line_says_it_in_one_line_and_exits_1(tmp_path):
    env = child_env()
    directory = str(tmp_path / "ck")
    args = "--env catch --num-envs 32 --num-updates 4 --updates-per-call 1 --checkpoint-every 1 --cpu-devices 2"
    args += " --agent a2c --learning-rate 1e30 --max-grad-norm 1e30 --lr-warmup-steps 1000"
    out = subprocess.run(
        [sys.executable, "-m", "podracer.cli", "anakin", *args.split(), "--checkpoint-dir", directory],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 1, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        "podracer anakin: error: update 2 is not finite (loss, gradient norm, parameters): the run stops; the newest "
        f"checkpoint, {directory}/step_1, is finite. Most likely at fault: --learning-rate 1e+30 (default 0.003), "
        "--max-grad-norm 1e+30 (default 0.5), --lr-warmup-steps 1000 (default 0) (lower the rate, clip gradients, "
        "scale rewards); --on-nonfinite skip discards such updates instead."
    ], out.stderr
    assert "Traceback" not in out.stderr
