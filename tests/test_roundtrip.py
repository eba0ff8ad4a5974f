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


def test_a_run_state_with_arrays_of_no_elements_saves_and_restores_exactly(tmp_path, devices):
    """MJX's state holds arrays of size 0 (``data.act`` of a model without actuators), which orbax refuses and XLA
    keeps whole on every device: the run state saves them as a stand-in and restores each leaf's shape, the others
    to the bit."""
    import jax

    from podracer.run import parallel

    two = devices[:2]
    tree = {
        "act": parallel.shard(np.zeros((2, 4, 0), np.float32), two),
        "qpos": parallel.shard(np.arange(16, dtype=np.float32).reshape(2, 8), two),
        "key": parallel.shard(jax.random.split(jax.random.key(0), 2), two),
    }
    assert parallel.local_entries(tree)["act"].shape == (2, 4, 0)
    checkpoint.save_run_state(str(tmp_path), 3, tree)
    restored = checkpoint.restore_run_state(str(tmp_path), 3, tree)
    assert restored["act"].shape == (2, 4, 0) and restored["act"].dtype == np.float32
    np.testing.assert_array_equal(restored["qpos"], np.arange(16, dtype=np.float32).reshape(2, 8))
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]), parallel.local_entries(tree)["key"])
    assert parallel.shard(restored, two)["act"].shape == (2, 4, 0)  # what a resume places back on the devices


SUITE_TASKS = [  # one task of every JAX suite, with the package it needs
    ("catch", None),
    ("gymnax:CartPole-v1", "gymnax"),
    ("brax:inverted_pendulum", "brax"),
    ("jumanji:Snake-v1", "jumanji"),
    ("xminigrid:MiniGrid-Empty-5x5", "xminigrid"),
    ("craftax:Craftax-Classic-Symbolic-v1", "craftax"),
    ("pgx:tic_tac_toe", "pgx"),
    ("navix:Navix-Empty-5x5-v0", "navix"),
    ("playground:CartpoleBalance", "mujoco_playground"),
]


@pytest.mark.parametrize(
    "task",
    [
        pytest.param(task, marks=[pytest.mark.suite(package)] if package else [], id=task.split(":")[0])
        for task, package in SUITE_TASKS
    ],
)
def test_every_suites_run_state_saves_and_restores_to_the_bit(task, tmp_path, devices):
    """An Anakin run state of each JAX suite (its environments' states: dataclasses of its own, keys, integer
    counters, MJX's empty arrays) saved as a checkpoint's run state and restored into a template: every leaf back to
    the bit, with its shape and dtype, and placed on the devices again as a resume places it."""
    import jax

    from podracer import anakin
    from podracer.core import agents, envs
    from podracer.run import parallel

    two = devices[:2]
    env = envs.make(task)
    agent = agents.make("ppo", env.spec(), hidden_sizes=(8,))
    state = anakin.init(env, agent, agent.optimizer, jax.random.key(0), 2, two, rollout_length=4)
    checkpoint.save_run_state(str(tmp_path), 1, state)
    restored = checkpoint.restore_run_state(str(tmp_path), 1, state)
    saved = parallel.local_entries(state)
    leaves, tree = jax.tree.flatten(saved)
    back, back_tree = jax.tree.flatten(restored)
    assert back_tree == tree and len(leaves) > 10

    def data(x):  # a key as its words (the saved side holds them so; the restored one gives keys back as keys)
        return np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)

    for a, b in zip(leaves, back):
        a, b = data(a), data(b)
        assert (a.shape, a.dtype) == (b.shape, b.dtype)
        np.testing.assert_array_equal(a, b)
    placed = parallel.shard(restored, two)  # what a resume hands the compiled update
    assert [x.shape for x in jax.tree.leaves(placed)] == [x.shape for x in jax.tree.leaves(state)]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mujoco_playground") is None, reason="needs mujoco_playground")
def test_a_playground_run_saves_resumes_and_plays_back(tmp_path, capfd):
    """MuJoCo Playground's CartpoleBalance (an MJX state with arrays of size 0): the run closes on its figure, saves,
    resumes from its checkpoint, and podracer evaluate plays it."""
    import jax

    from podracer.cli import command as cli, evaluate as evaluate_command

    directory = str(tmp_path / "ck")
    common = ["anakin", "--cpu-devices", str(len(jax.devices("cpu"))), "--env", "playground:CartpoleBalance"]
    common += ["--agent", "ppo", "--num-envs", "8", "--rollout-length", "8", "--updates-per-call", "2"]
    common += ["--checkpoint-dir", directory, "--no-log-dir", "--eval-every", "2", "--eval-episodes", "2"]
    assert cli.main([*common, "--num-updates", "4"]) == 0
    assert cli.main([*common, "--num-updates", "6", "--resume", "auto"]) == 0
    assert checkpoint.steps(directory) == [4, 6]
    assert evaluate_command.main(["--checkpoint", directory, "--episodes", "2"]) == 0
    out, err = capfd.readouterr()
    assert (
        "final greedy evaluation return" in out
        and (
            "over 2 episodes of the behaviour policy (sampled) (checkpoint step_6); its run's evaluations played the "
            "greedy policy: --greedy plays that"
        )
        in out
    ), out
    assert "Traceback" not in err, err
