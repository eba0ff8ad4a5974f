"""Every agent's checkpoint is played as a user plays it: trained and saved in Anakin (and the on-policy agents,
SAC and TD3 in Sebulba), then restored by ``podracer evaluate``'s player and ``podracer preview``'s, with the optimizer
the agent itself builds: none restores with a made-up optimizer, none is called corrupt."""

import importlib.util

import numpy as np
import pytest

from podracer.run import checkpoint
from podracer.run import evaluate, compose, preview
from podracer.core.agents import (
    A2CConfig,
    AlphaZeroConfig,
    DQNConfig,
    IMPALAConfig,
    MuZeroConfig,
    PPOConfig,
    PQNConfig,
    R2D2Config,
    SACConfig,
    TD3Config,
)
from podracer.run.config import AnakinConfig, SebulbaConfig

pytestmark = pytest.mark.slow

REPLAY = dict(batch_size=8, min_replay_size=16, replay_capacity=256)
ANAKIN = {
    "a2c": ("catch", A2CConfig().replace(hidden_sizes=(16,))),
    "a2c-lstm": ("catch", A2CConfig().replace(hidden_sizes=(16,), core="lstm", core_size=8)),
    "ppo": ("catch", PPOConfig(num_epochs=1, num_minibatches=2).replace(hidden_sizes=(16,))),
    "ppo-lstm": (
        "catch",
        PPOConfig(num_epochs=1, num_minibatches=2).replace(hidden_sizes=(16,), core="lstm", core_size=8),
    ),
    "impala": ("catch", IMPALAConfig().replace(hidden_sizes=(16,))),
    "impala-lstm": ("catch", IMPALAConfig().replace(hidden_sizes=(16,), core="lstm", core_size=8)),
    "dqn": ("catch", DQNConfig(**REPLAY).replace(hidden_sizes=(16,))),
    "dqn-linear": ("catch", DQNConfig(epsilon_schedule="linear", **REPLAY).replace(hidden_sizes=(16,))),
    "r2d2": (
        "catch",
        R2D2Config(burn_in=2, batch_size=4, min_replay_size=8, replay_capacity=64).replace(
            hidden_sizes=(16,), core_size=8
        ),
    ),
    "sac": ("gymnax:Pendulum-v1", SACConfig(**REPLAY).replace(hidden_sizes=(16,)).replace(lr_schedule="linear")),
    "td3": (
        "gymnax:Pendulum-v1",
        TD3Config(**REPLAY, num_atoms=11, v_min=-10.0, v_max=0.0).replace(hidden_sizes=(16,), lr_schedule="linear"),
    ),
    "pqn": ("catch", PQNConfig(num_minibatches=2).replace(hidden_sizes=(16,))),
    "pqn-lstm": ("catch", PQNConfig(num_minibatches=2).replace(hidden_sizes=(16,), core="lstm", core_size=8)),
    "alphazero": ("pgx:tic_tac_toe", AlphaZeroConfig(num_simulations=4).replace(hidden_sizes=(16,))),
    "muzero": ("catch", MuZeroConfig(latent_size=8, num_simulations=4, unroll_steps=2).replace(hidden_sizes=(16,))),
}
SEBULBA = {
    "a2c": A2CConfig().replace(hidden_sizes=(16,)),
    "ppo": PPOConfig(num_epochs=1, num_minibatches=2).replace(hidden_sizes=(16,)).replace(lr_schedule="cosine"),
    "ppo-lstm": PPOConfig(num_epochs=1, num_minibatches=2).replace(hidden_sizes=(16,), core="lstm", core_size=8),
    "impala": IMPALAConfig().replace(hidden_sizes=(16,)),
    "sac": SACConfig(**REPLAY).replace(hidden_sizes=(16,)),
    "td3": TD3Config(**REPLAY, policy_delay=3).replace(hidden_sizes=(16,)),
    "pqn": PQNConfig(num_minibatches=2).replace(hidden_sizes=(16,)),
    "muzero": MuZeroConfig(latent_size=8, num_simulations=4, unroll_steps=2).replace(hidden_sizes=(16,)),
}


def _plays_every_way(directory: str, capfd) -> None:
    """``podracer evaluate``'s player (the behaviour policy) and ``podracer preview``'s (one greedy episode) both
    restore the newest checkpoint, and nothing falls back past it."""
    newest = checkpoint.steps(directory)[-1]
    returns, _ = evaluate.play(directory, 2, seed=1, max_steps=300)
    assert returns.shape == (2,) and np.isfinite(returns).all()
    returns, frames = preview._play(
        evaluate, preview.PreviewConfig(checkpoint_dir=directory, max_steps=300), drawable=False
    )
    assert np.isfinite(returns).all() and frames is None
    metadata, step = checkpoint.newest_metadata(directory)
    assert step == newest and metadata["run"]["num_updates"] >= 1  # the run's facts, recorded for the optimizer
    err = capfd.readouterr().err
    assert "cannot be restored" not in err and "No intact checkpoint" not in err, err


@pytest.mark.parametrize("name", list(ANAKIN))
def test_every_agent_trained_in_anakin_is_played_by_evaluate_and_preview(name, tmp_path, capfd):
    env, agent = ANAKIN[name]
    suite = env.split(":")[0] if ":" in env else None
    if suite and importlib.util.find_spec(suite) is None:
        pytest.skip(f"{suite} is not installed here")
    directory = str(tmp_path / name)
    compose.train_anakin(
        AnakinConfig(
            env=env,
            agent=agent,
            num_envs_per_device=4,
            rollout_length=8,
            num_updates=4,
            updates_per_call=2,
            checkpoint_dir=directory,
        )
    )
    _plays_every_way(directory, capfd)


@pytest.mark.parametrize("name", list(SEBULBA))
def test_every_on_policy_agent_sac_and_td3_trained_in_sebulba_is_played_by_evaluate_and_preview(name, tmp_path, capfd):
    env = "gymnasium:Pendulum-v1" if name in ("sac", "td3") else "CartPole-v1"
    directory = str(tmp_path / name)
    compose.train_sebulba(
        SebulbaConfig(
            env=env,
            agent=SEBULBA[name],
            total_env_steps=1_024,
            num_envs_per_actor=8,
            rollout_length=16,
            actor_devices=(0,),
            learner_devices=(1,),
            log_every=4,
            checkpoint_dir=directory,
        )
    )
    _plays_every_way(directory, capfd)
