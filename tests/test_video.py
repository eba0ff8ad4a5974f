"""Video of environments that do not observe pictures (``evaluate --gif``): classic control drawn by gymnasium's
renderers from the state its observation holds, whichever implementation stepped it, and gymnasium batches that
draw themselves."""

import importlib.util

import gymnasium
import jax
import numpy as np
import pytest

from podracer.cli import evaluate as evaluate_command
from podracer.run import evaluate
from podracer.core import install
from podracer.run import video

pytest.importorskip("pygame")


@pytest.mark.parametrize("task", sorted(video.STATES))
def test_a_classic_task_is_drawn_from_its_observation_as_gymnasium_draws_its_state(task):
    """gymnasium's own environment, stepped at random, drawn by itself and by the renderer from its observation."""
    reference = gymnasium.make(task, render_mode="rgb_array").unwrapped
    observation, _ = reference.reset(seed=3)
    renderer = video.ObservationRenderer(task)
    rng = np.random.default_rng(0)
    try:
        for _ in range(12):
            observation, *_ = reference.step(reference.action_space.sample() if task != "Pendulum-v1" else
                                             rng.uniform(-2, 2, (1,)).astype(np.float32))  # fmt: skip
            if hasattr(reference, "last_u"):
                reference.last_u = None
            expected, drawn = reference.render(), renderer(observation)
            assert drawn.shape == expected.shape and drawn.dtype == np.uint8
            # the observation is float32 where gymnasium's state is float64: a pixel may round the other way
            assert np.mean(np.any(drawn != expected, axis=-1)) < 1e-3
    finally:
        renderer.close()
        reference.close()


def test_the_names_of_classic_tasks():
    assert video.classic_task("cartpole") == video.classic_task("jax:cartpole") == "CartPole-v1"
    assert video.classic_task("gymnax:Pendulum-v1") == "Pendulum-v1"
    assert video.classic_task("CartPole-v1") == "CartPole-v1"  # envpool's
    assert video.classic_task("memory") is None and video.classic_task("gymnax:Breakout-MinAtar") is None


def test_without_pygame_a_classic_task_is_one_line_naming_the_video_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pygame" else real(name, *a))
    with pytest.raises(ValueError) as error:
        video.ObservationRenderer("CartPole-v1")
    assert str(error.value) == f"--gif needs pygame to draw CartPole-v1: {install.command('video')}."


def test_evaluate_draws_an_anakin_cartpole_and_refuses_a_vector_it_cannot_draw(tmp_path, capsys):
    import podracer
    from PIL import Image

    cpu = str(len(jax.devices("cpu")))
    for env in ("cartpole", "memory"):
        podracer.train(env=env, agent="ppo", num_updates=1, updates_per_call=1, cpu_devices=cpu,
                       num_envs_per_device=2, log_dir=str(tmp_path / env))  # fmt: skip
    capsys.readouterr()
    gif = tmp_path / "cartpole.gif"
    status = evaluate_command.main(["--checkpoint", str(tmp_path / "cartpole" / "checkpoint"), "--episodes", "2",
                            "--gif", str(gif)], name="evaluate")  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    steps = round(float(out.split("episode 0: return ")[1].split()[0]))  # CartPole's return: its steps
    assert f"wrote {gif} ({steps + 1} frames)" in out
    with Image.open(gif) as picture:
        assert picture.size == (600, 400) and picture.n_frames >= 2
    status = evaluate_command.main(["--checkpoint", str(tmp_path / "memory" / "checkpoint"), "--gif", str(gif)],
                           name="evaluate")  # fmt: skip
    assert status == 2
    assert capsys.readouterr().err.startswith(
        "evaluate: error: --gif needs image or board observations, a classic-control task (Acrobot-v1, "
        "CartPole-v1, MountainCar-v0, MountainCarContinuous-v0, Pendulum-v1) or a gymnasium:ID that renders "
        "rgb_array; memory has observations of shape"
    )


def test_evaluate_draws_a_sebulba_gymnasium_checkpoint_through_gymnasium(tmp_path):
    """A ``gymnasium:ID`` run's batch draws itself (render_mode="rgb_array"): CartPole through gymnasium."""
    from podracer.core.agents import PPOConfig
    from podracer.run.config import SebulbaConfig
    from podracer.run.compose import train_sebulba

    directory = str(tmp_path / "ck")
    train_sebulba(SebulbaConfig(env="gymnasium:CartPole-v1", agent=PPOConfig(), total_env_steps=512,
                                num_envs_per_actor=8, rollout_length=16, actor_devices=(0,), learner_devices=(1,),
                                checkpoint_dir=directory))  # fmt: skip
    returns, frames = evaluate.play(directory, 2, seed=1, greedy=True, record=True)
    assert len(frames) == round(returns[0]) + 1  # the first observation, then one frame per step
    assert all(frame.shape == (400, 600, 3) and frame.dtype == np.uint8 for frame in frames)
    assert any(not np.array_equal(frames[0], frame) for frame in frames[1:])  # the pole moves
