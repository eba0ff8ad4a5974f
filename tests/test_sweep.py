"""Hyper-parameter sweeps in one program: ``--sweep NAME=V1,V2,...`` x ``--num-seeds``."""

import csv
import dataclasses

import jax
import numpy as np
import pytest

from podracer.core import agents, envs, sweep
from podracer import anakin
from podracer.run import compose
from podracer.run import checkpoint, parallel
from podracer.core.agents import A2CConfig, DQNConfig, PPOConfig
from podracer.core.agents.hyperparameters import hyperparameters
from podracer.run.config import AnakinConfig

SMALL = dict(env="catch", num_envs_per_device=2, rollout_length=8, num_updates=4, updates_per_call=2, cpu_devices=None)


def test_a_two_by_two_sweep_equals_separate_runs_of_its_settings(devices):
    config = AnakinConfig(**SMALL, sweep=("learning_rate=3e-3,3e-2", "discount=0.9,0.99"))
    points = [(3e-3, 0.9), (3e-3, 0.99), (3e-2, 0.9), (3e-2, 0.99)]  # the grid: the last name varies fastest
    assert [tuple(p.values()) for p in config.sweep_points] == points
    env = envs.make("catch")
    key = jax.random.key(3)
    plan = anakin.anakin_plan(
        num_envs_per_device=2, rollout_length=8, num_updates=4, updates_per_call=4, devices=devices[:2]
    )
    evaluate = jax.jit(
        jax.vmap(
            lambda params, values: anakin.make_evaluate(
                env, compose.make_sweep(config, env.spec()).build(values)[0], 4
            )(params, jax.random.key(9))
        )
    )
    sweep_ = compose.make_sweep(config, env.spec())
    # Greedy A2C play does not depend on the learning rate or the discount: one compiled evaluation serves all four.
    plain_evaluate = jax.jit(
        lambda params: anakin.make_evaluate(env, sweep_.build(config.sweep_points[0])[0], 4)(params, jax.random.key(9))
    )
    state = anakin.init(env, None, None, key, 2, devices[:2], rollout_length=8, sweep=sweep_)
    together = anakin.run(plan, sweep_, state, env=env)
    together_eval = evaluate(parallel.unreplicate(together.state.learner.params), sweep_.expand(key)[1])
    # The two settings off the diagonal (each value of each axis once; a grid laid out transposed would swap them)
    # each as a run of its own.
    for i, (learning_rate, discount) in [(1, points[1]), (2, points[2])]:
        agent_config = A2CConfig().replace(learning_rate=learning_rate, discount=discount)
        agent, optimizer = (
            agents.make(agent_config, env.spec()),
            agents.make(agent_config, env.spec()).optimizer,
        )
        state = anakin.init(env, agent, optimizer, key, 2, devices[:2], rollout_length=8)
        alone = anakin.run(plan, agent._replace(optimizer=optimizer), state, env=env)
        for a, b in zip(jax.tree.leaves(alone.state.learner.params), jax.tree.leaves(together.state.learner.params)):
            assert b.shape == (2, 4, *a.shape[1:])  # [device, setting x seed, ...]
            np.testing.assert_allclose(b[:, i], a, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            together.history[-1]["episode_return_per_seed"][i],
            alone.history[-1]["episode_return"],
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            together_eval[i], plain_evaluate(parallel.unreplicate(alone.state.learner.params)), rtol=1e-5, atol=1e-6
        )
    params = jax.tree.leaves(together.state.learner.params)[0]  # the settings really differ
    assert not np.allclose(params[:, 0], params[:, 2]) and not np.allclose(params[:, 0], params[:, 1])


def test_a_sweep_run_ends_with_its_table_plot_and_a_checkpoint_per_setting_and_seed(tmp_path, capsys):
    """Through the composition root: entry p x S + s of the seed axis is setting p with seed s; the table (from the
    final greedy evaluation), sweep.csv, sweep.png, and a final checkpoint per entry recording its values."""
    config = AnakinConfig(
        **SMALL,
        seed=5,
        num_seeds=2,
        agent=PPOConfig(num_epochs=1, num_minibatches=1),
        sweep=("clip_epsilon=0.1,0.3",),
        checkpoint_dir=str(tmp_path / "ckpt"),
        log_dir=str(tmp_path / "logs"),
        eval_every=4,
        eval_episodes=4,
    )
    together = compose.train_anakin(config)
    out = capsys.readouterr().out
    assert "2 settings x 2 seed(s) = 4 runs together (seeds 5 ... 6)" in out
    assert "greedy evaluation return at the end" in out and "clip_epsilon=0.3" in out
    alone = compose.train_anakin(
        dataclasses.replace(
            config,
            sweep=(),
            checkpoint_dir=None,
            log_dir=None,
            seed=6,
            num_seeds=1,
            eval_every=None,
            agent=PPOConfig(num_epochs=1, num_minibatches=1, clip_epsilon=0.3),
        )
    )
    for a, b in zip(jax.tree.leaves(alone.state.learner.params), jax.tree.leaves(together.state.learner.params)):
        np.testing.assert_allclose(b[:, 3], a, rtol=1e-5, atol=1e-6)
    metadata, _ = checkpoint.newest_metadata(str(tmp_path / "ckpt" / "clip_epsilon=0.3" / "seed_6"))
    assert metadata["seed"] == 6 and metadata["agent_hyperparameters"]["clip_epsilon"] == 0.3
    with open(tmp_path / "logs" / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["clip_epsilon"]) for r in rows] == [0.1, 0.3] and [r["seeds"] for r in rows] == ["2", "2"]
    final = np.reshape(together.history[-1]["eval_return_per_seed"], (2, 2))
    for row, values in zip(rows, final):
        assert float(row["mean"]) == pytest.approx(values.mean())
    assert (tmp_path / "logs" / "sweep.png").stat().st_size > 10_000


def test_a_value_that_sets_shapes_is_named_and_refused():
    config = AnakinConfig(
        **SMALL,
        agent=DQNConfig(batch_size=16, min_replay_size=32, replay_capacity=64),
        sweep=("batch_size=16,32", "learning_rate=1e-3,3e-3"),
    )
    with pytest.raises(ValueError, match=r"^--sweep batch_size: sets shapes or loop counts of the compiled update"):
        compose.train_anakin(config)
    # a value that sets the learner's own shapes (an LSTM's width) is named before any state is stacked
    config = AnakinConfig(
        **SMALL,
        agent=A2CConfig().replace(core="lstm", core_size=8, hidden_sizes=(8,)),
        sweep=("core_size=8,16", "learning_rate=1e-3,3e-3"),
    )
    with pytest.raises(ValueError, match=r"^--sweep core_size: sets shapes or loop counts of the compiled update"):
        compose.train_anakin(config)


def test_sweepable_names_are_the_numeric_hyperparameters():
    names = sweep.sweepable(PPOConfig())
    assert {"learning_rate", "max_grad_norm", "discount", "clip_epsilon", "num_epochs"} <= set(names)
    assert not {"torso", "hidden_sizes", "normalize_advantages"} & set(names)
    assert "target_tau" in sweep.sweepable(DQNConfig())  # float | None


def test_table_gives_mean_and_interquartile_mean_with_bootstrap_intervals():
    points = [{"learning_rate": 1e-3}, {"learning_rate": 1e-2}]
    returns = np.array([[1.0, 2.0, 3.0, 100.0, 4.0], [5.0, 5.0, 5.0, 5.0, 5.0]])
    rows = sweep.table(points, returns)
    assert rows[0]["mean"] == pytest.approx(22.0) and rows[0]["iqm"] == pytest.approx(3.0)
    assert rows[0]["mean_low"] < 22.0 < rows[0]["mean_high"] and rows[0]["iqm_low"] <= 3.0 <= rows[0]["iqm_high"]
    assert 1.0 <= rows[0]["mean_low"] and rows[0]["mean_high"] <= 100.0 and rows[0]["interval"] == "95% CI"
    assert (rows[1]["mean_low"], rows[1]["mean_high"], rows[1]["iqm"]) == (5.0, 5.0, 5.0)
    assert sweep.table(points, returns) == rows  # a fixed bootstrap seed: the same returns, the same intervals
    text = sweep.format_table(rows, "test")
    assert text.splitlines()[0].endswith("intervals: 95% percentile bootstrap over seeds")
    assert text.splitlines()[-1].endswith("<- best IQM") and "learning_rate=0.01" in text.splitlines()[-1]


def test_fewer_than_five_seeds_are_said_as_their_range_not_an_interval():
    """Two seeds make no interval worth the name: the table says the lowest and highest seed, and calls it so."""
    points = [{"learning_rate": 1e-3}, {"learning_rate": 1e-2}]
    rows = sweep.table(points, np.array([[0.2, 0.9], [0.5, 0.7]]))
    assert [(r["interval"], r["mean_low"], r["mean_high"], r["iqm_low"], r["iqm_high"]) for r in rows] == [
        ("range", 0.2, 0.9, 0.2, 0.9),
        ("range", 0.5, 0.7, 0.5, 0.7),
    ]
    lines = sweep.format_table(rows, "test").splitlines()
    assert lines[0].endswith("ranges: lowest to highest seed (fewer than 5 seeds make no interval worth the name)")
    assert lines[1].split() == ["setting", "seeds", "mean", "range", "IQM", "range"]
    assert "95% CI" not in "\n".join(lines)


@pytest.mark.parametrize(
    "name, swept, refused",
    [
        ("a2c", ["learning_rate", "max_grad_norm", "discount", "td_lambda", "value_coef", "entropy_coef"], []),
        ("ppo", ["learning_rate", "gae_lambda", "clip_epsilon", "entropy_coef"], ["num_epochs", "num_minibatches"]),
        ("impala", ["learning_rate", "td_lambda", "clip_rho_threshold", "clip_pg_rho_threshold"], []),
        (
            "dqn",
            [
                "learning_rate",
                "discount",
                "epsilon",
                "epsilon_alpha",
                "huber_delta",
                "priority_exponent",
                "importance_exponent",
            ],
            ["batch_size", "replay_ratio", "n_step"],
        ),
        pytest.param(
            "sac",
            ["learning_rate", "discount", "initial_alpha", "target_entropy_scale", "target_tau"],
            ["batch_size", "replay_ratio"],
            marks=pytest.mark.suite("gymnax"),
        ),
        pytest.param(
            "td3",
            ["learning_rate", "discount", "target_noise", "exploration_noise_max", "target_tau", "policy_delay"],
            ["batch_size", "replay_ratio"],
            marks=pytest.mark.suite("gymnax"),
        ),
    ],
)
def test_what_the_readme_says_can_be_swept_can_be(name, swept, refused, devices):
    """The README names these as sweepable (traced in one program) or refused (they set shapes or loop counts)."""
    from podracer.core import agents

    env = envs.make("gymnax:Pendulum-v1" if name in ("sac", "td3") else "catch")
    small = {"batch_size": 8, "min_replay_size": 16, "replay_capacity": 64}
    config = agents.config_class(name)(**(small if name in ("dqn", "sac", "td3") else {}))
    point = {n: hyperparameters(config)[n] for n in swept + refused}

    def make(values):
        agent = agents.make(sweep.with_values(config, values), env.spec())
        return agent, agent.optimizer

    sweep_ = anakin.Sweep((point,), make)
    state = anakin.init(env, None, None, jax.random.key(0), 2, devices[:1], rollout_length=4, sweep=sweep_)
    assert anakin.unsweepable(env, sweep_, state, 4) == refused
