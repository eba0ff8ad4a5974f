import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("envpool")

from podracer.run.evaluate import play, write_gif
from podracer.core.agents import PPOConfig  # noqa: E402
from podracer.run.config import SebulbaConfig
from podracer.run.compose import train_sebulba as train
from children import child_env  # tests/children.py


@pytest.fixture(scope="module")
def cartpole_checkpoint(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("ckpt"))
    config = SebulbaConfig(
        env="CartPole",
        agent=PPOConfig().replace(learning_rate=1e-3),
        total_env_steps=30_000,
        num_envs_per_actor=32,
        rollout_length=32,
        actor_devices=(0,),
        learner_devices=(1,),
        log_every=10,
        checkpoint_dir=directory,
    )
    result = train(config)
    return directory, result.history[-1]["episode_return"]


def test_evaluate_plays_the_saved_agent(cartpole_checkpoint, tmp_path, capsys):
    directory, trained_return = cartpole_checkpoint
    returns, frames = play(directory, 6, seed=1)
    assert returns.shape == (6,) and np.isfinite(returns).all() and frames == []
    # The saved policy, not a random one (about 22 on CartPole), is what plays.
    assert returns.mean() > 40 and trained_return > 40
    # the command (in this process: what it plays and says is what is tested): its episodes' lines, and envpool's
    # CartPole (it observes its state) drawn by gymnasium's renderer into the GIF of its first episode
    from podracer.cli import evaluate as evaluate_command

    gif = tmp_path / "x.gif"
    capsys.readouterr()
    status = evaluate_command.main(["--checkpoint", directory, "--episodes", "2", "--gif", str(gif)], name="evaluate")
    out, err = capsys.readouterr()
    assert status == 0 and err == "", err
    assert "episode 0: return" in out and "mean return" in out and f"wrote {gif} (" in out


def test_write_gif_writes_every_frame(tmp_path):
    from PIL import Image

    frames = [np.full((84, 84), 10 * i, np.uint8) for i in range(7)]
    path = tmp_path / "play.gif"
    write_gif(frames, str(path))
    with Image.open(path) as gif:
        assert gif.n_frames == 7 and gif.size == (168, 168)


def test_evaluate_plays_an_anakin_checkpoint_and_writes_a_gif(tmp_path):
    from pathlib import Path

    from PIL import Image

    root = Path(__file__).resolve().parents[1]
    env = child_env()
    directory, gif = tmp_path / "catch", tmp_path / "catch.gif"
    out = subprocess.run(
        [
            sys.executable,
            str(root / "examples" / "anakin_catch.py"),
            "--cpu-devices",
            "2",
            "--checkpoint-dir",
            str(directory),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "podracer.cli.evaluate",
            "--checkpoint",
            str(directory),
            "--episodes",
            "20",
            "--greedy",
            "--gif",
            str(gif),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    mean = float(out.stdout.split("mean return")[1].split()[0])
    assert mean >= 0.9  # the solved policy catches the ball
    with Image.open(gif) as image:
        assert image.n_frames == 10 and image.size == (80, 160)  # reset + 9 steps of a 10 x 5 board, scaled 16x


def test_preview_plays_each_new_checkpoint_until_the_run_has_ended(tmp_path):
    import threading
    import time

    from podracer.run import compose, preview
    from podracer.run.config import AnakinConfig

    directory = tmp_path / "run"
    small = dict(
        num_envs_per_device=4, rollout_length=4, updates_per_call=20, checkpoint_every=20, checkpoint_dir=str(directory)
    )
    compose.train_anakin(AnakinConfig(num_updates=20, **small))
    assert (directory / "finished.json").exists()
    lines = []
    played = preview.watch(preview.PreviewConfig(str(directory), poll_seconds=0.2), report=lines.append, timeout=60)
    assert played == [20] and lines[0].startswith("checkpoint step_20: return ") and "wrote" in lines[0]
    assert lines[-1] == "the run has ended; played 1 checkpoint(s)." and (tmp_path / "run-preview.gif").exists()
    assert not (directory / "preview.gif").exists()  # beside the run's directory, never inside it

    # Beside a run that resumes and writes two more checkpoints, the preview picks up the newer ones.
    lines.clear()
    run = threading.Thread(target=compose.train_anakin, args=(AnakinConfig(num_updates=60, resume=True, **small),))
    run.start()
    while (directory / "finished.json").exists() and run.is_alive():  # the run has started writing
        time.sleep(0.05)
    played = preview.watch(preview.PreviewConfig(str(directory), poll_seconds=0.2), report=lines.append, timeout=120)
    run.join()
    assert played[-1] == 60 and set(played) <= {20, 40, 60} and len(played) >= 2, (played, lines)
