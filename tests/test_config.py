"""Every bad input fails at start-up, in the command-line parser, with a one-line error naming the flag (exit 2)."""

import pytest

from podracer import config
from podracer.anakin import AnakinConfig
from podracer.sebulba import SebulbaConfig

A, S = AnakinConfig, SebulbaConfig

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
    (A, "--rollout-length 0", "--rollout-length must be >= 1, got 0."),
    (S, "--rollout-length 0", "--rollout-length must be >= 1, got 0."),
    (A, "--num-updates 0", "num_updates must be >= 1, got 0."),
    (A, "--updates-per-call 0", "updates_per_call must be >= 1, got 0."),
    (A, "--num-updates 50", "num_updates = 50 is not divisible by the 20 updates per call (--updates-per-call)"),
    (A, "--num-envs 0", "num_envs must be >= 1, got 0."),
    (A, "--num-envs-per-device 0", "num_envs_per_device must be >= 1, got 0."),
    (A, "--num-seeds 0", "num_seeds must be >= 1, got 0."),
    (S, "--num-envs 0", "num_envs must be >= 1, got 0."),
    (S, "--actor-threads 0", "actor_threads must be >= 1, got 0."),
    (S, "--queue-size 0", "queue_size must be >= 1, got 0."),
    (S, "--log-every 0", "log_every must be >= 1, got 0."),
    (S, "--envpool-threads -1", "envpool_threads must be >= 0, got -1."),
    (S, "--num-envs 32 --env-groups 3", "num_envs (environments per actor thread) = 32 is not divisible by the 3 env_groups"),
    (A, "--agent a2c --num-epochs 3", "--num-epochs does not apply to agent 'a2c'."),
    (S, "--agent impala --replay-ratio 2", "--replay-ratio does not apply to agent 'impala'."),
    (A, "--resume", "--checkpoint-every and --resume need --checkpoint-dir."),
    (S, "--resume", "--resume needs --checkpoint-dir."),
    (A, "--checkpoint-dir x --checkpoint-every 30", "checkpoint_every = 30 is not divisible by the 20 updates per call"),
    (A, "--num-seeds 2 --checkpoint-dir x --resume", "--checkpoint-every and --resume take one seed: drop --num-seeds"),
    (A, "--num-processes 2 --process-id 2 --coordinator 127.0.0.1:1", "process_id 2 is out of range for 2 processes (expected 0 ... 1)."),
    (S, "--num-processes 0", "num_processes must be >= 1, got 0."),
    (A, "--env pong", "invalid choice: 'pong'"),
    (S, "--agent sac", "invalid choice: 'sac'"),
]


@pytest.mark.parametrize("cls, argv, message", BAD_INPUTS, ids=[f"{c.__name__}:{a}" for c, a, _ in BAD_INPUTS])
def test_bad_input_is_a_one_line_error_naming_the_flag(cls, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        config.parse(cls, argv.split())
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], errors


def test_the_table_covers_at_least_thirty_inputs_of_both_modes():
    assert len(BAD_INPUTS) >= 30
    assert {cls for cls, _, _ in BAD_INPUTS} == {A, S}
