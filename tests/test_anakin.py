import dataclasses
import json
import os
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs, learner
from podracer import anakin
from podracer.run import checkpoint, parallel
from podracer.run import compose
from podracer.run import multihost
from podracer.core.agents import A2CConfig, PPOConfig
from podracer.run.config import AnakinConfig


def _setup(agent_name="a2c", env_name="catch", **hyper):
    env = envs.make(env_name)
    agent = agents.make(agent_name, env.spec(), **hyper)
    return env, agent, learner.make_optimizer(3e-3)


def test_parameters_stay_identical_on_every_device_while_environments_differ(devices):
    env, agent, optimizer = _setup()
    result = anakin.run(
        anakin.anakin_plan(num_envs_per_device=4, rollout_length=8, num_updates=6, updates_per_call=3, devices=devices),
        agent._replace(optimizer=optimizer),
        anakin.init(env, agent, optimizer, jax.random.key(1), 4, devices, rollout_length=8),
        env=env,
    )
    params = result.state.learner.params
    for leaf in jax.tree.leaves(params):
        assert leaf.shape[0] == 8
        for d in range(1, 8):
            np.testing.assert_array_equal(leaf[d], leaf[0])
    assert int(result.state.learner.step[0]) == 6
    # Each device has its own environments and actor key.
    ball = np.asarray(result.state.rollout.env_state.env_state.env_state.ball_x)
    assert len({tuple(row) for row in ball}) > 1
    keys = np.asarray(jax.random.key_data(result.state.rollout.key))
    assert len({tuple(k) for k in keys}) == 8


def test_trajectories_overlap_by_one_step_and_actions_come_from_the_carried_state():
    env, agent, optimizer = _setup()
    state = anakin.init_state(env, agent, optimizer, jax.random.key(0), 4)
    rollout = jax.jit(anakin.make_rollout(env, agent, 5))
    rs1, traj1, _ = rollout(state.learner.params, state.rollout)
    rs2, traj2, _ = rollout(state.learner.params, rs1)
    assert traj1.timestep.observation.shape == (6, 4, 10, 5)
    assert traj1.action.shape == (6, 4) and traj1.extras["logits"].shape == (6, 4, 3)
    for a, b in zip(jax.tree.leaves((traj1.timestep, traj1.action)), jax.tree.leaves((traj2.timestep, traj2.action))):
        np.testing.assert_array_equal(a[-1], b[0])
    np.testing.assert_array_equal(traj1.action[0], state.rollout.action)


@pytest.mark.parametrize("form", ["device_map", "pmap"])
def test_second_call_of_the_compiled_update_does_not_recompile(form, devices):
    env, agent, optimizer = _setup("ppo", num_minibatches=2, num_epochs=2)
    compiles = []

    def listener(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        traces = []
        update = anakin.make_update(env, agent, optimizer, rollout_length=4)

        def counted(state):
            traces.append(1)
            return update(state)

        if form == "device_map":
            p_update = parallel.device_map(counted, devices[:2])
        else:
            p_update = jax.pmap(counted, axis_name=parallel.DEVICE_AXIS, devices=devices[:2])
        state = anakin.init(env, agent, optimizer, jax.random.key(0), 4, devices[:2])
        state, _ = p_update(state)
        jax.block_until_ready(state)
        compiled = len(compiles)
        for _ in range(3):
            state, metrics = p_update(state)
        jax.block_until_ready(metrics)
        assert len(traces) == 1
        assert len(compiles) == compiled
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


@pytest.mark.parametrize(
    "agent_name, hyper, num_envs, rollout, updates",
    [
        ("a2c", dict(), 32, 16, 160),
        ("impala", dict(), 32, 16, 160),
        ("ppo", dict(num_epochs=4, num_minibatches=4), 32, 32, 60),
    ],
)
def test_agents_learn_catch(agent_name, hyper, num_envs, rollout, updates, devices, optimized_xla):
    """Four seeds in one program, from a random policy (mean return about -0.6): at least 3 of 4 reach >= 0.9 (the
    optimum is 1), and the seeds' mean reaches 0.8."""
    env, agent, optimizer = _setup(agent_name, **hyper)
    result = anakin.run(
        anakin.anakin_plan(
            num_envs_per_device=num_envs,
            rollout_length=rollout,
            num_updates=updates,
            updates_per_call=4,
            devices=devices[:2],
        ),
        agent._replace(optimizer=optimizer),
        anakin.init(env, agent, optimizer, anakin.seed_keys(0, 4), num_envs, devices[:2], rollout_length=rollout),
        env=env,
    )
    first, final = result.history[0]["episode_return_per_seed"], result.history[-1]["episode_return_per_seed"]
    assert max(first) < 0.0, first
    assert sum(f >= 0.9 for f in final) >= 3 and np.mean(final) >= 0.8, final


def test_metrics_report_episodes_from_all_devices(devices):
    env, agent, optimizer = _setup()
    update = anakin.make_update(env, agent, optimizer, rollout_length=9)
    p_update = jax.pmap(update, axis_name=parallel.DEVICE_AXIS, devices=devices[:4])
    state = anakin.init(env, agent, optimizer, jax.random.key(0), 3, devices[:4])
    _, metrics = p_update(state)
    # Catch episodes last 9 steps: in the first 9 steps every environment of every device ends one.
    np.testing.assert_array_equal(metrics["episodes"], 12.0)
    np.testing.assert_array_equal(metrics["episode_length"], 9.0)
    assert set(np.unique(np.abs(metrics["episode_return"] * 12))) <= set(range(0, 13))


@pytest.mark.parametrize("agent_name", ["ppo", pytest.param("dqn", marks=pytest.mark.slow)])
def test_initial_state_compiled_for_one_call_has_the_bits_of_xla_defaults(agent_name, devices, monkeypatch):
    """The initial learners and states compile at XLA's backend optimization level 1 on CPU (a faster compile,
    :func:`podracer.run.parallel.run_once_options`): the same state to the bit as at XLA's default level, 2. (The tests
    run at level 0, set in conftest.py, which the option never raises.)"""
    assert parallel.run_once_options(devices) is None  # XLA_FLAGS asks for level 0
    assert parallel.run_once_options([type("Gpu", (), {"platform": "gpu", "process_index": 0})()]) is None
    flags = [f for f in os.environ["XLA_FLAGS"].split() if "optimization_level" not in f]
    monkeypatch.setenv("XLA_FLAGS", " ".join(flags))
    assert parallel.run_once_options(devices) == {"xla_backend_optimization_level": 1}
    env, agent, optimizer = _setup(agent_name)
    keys = anakin.seed_keys(7, 3)
    fast = anakin.init(env, agent, optimizer, keys, 4, devices[:2], rollout_length=8)
    monkeypatch.setattr(parallel, "RUN_ONCE_LEVEL", 2)
    default = anakin.init(env, agent, optimizer, keys, 4, devices[:2], rollout_length=8)
    fast, default = jax.tree.leaves(parallel.local_entries(fast)), jax.tree.leaves(parallel.local_entries(default))
    assert len(fast) == len(default) > 10
    for a, b in zip(fast, default):
        np.testing.assert_array_equal(a, b)


def test_vmapped_train_of_four_seeds_equals_four_separate_runs():
    env, agent, optimizer = _setup()
    train = anakin.make_train(env, agent, optimizer, num_envs=8, rollout_length=8, num_updates=6)
    keys = anakin.seed_keys(5, 4)
    together, together_metrics = jax.jit(jax.vmap(train))(keys)
    one = jax.jit(train)
    for i in range(4):
        alone, alone_metrics = one(jax.random.key(5 + i))  # seed_keys(5, 4)[i] is the key of seed 5 + i
        for a, b in zip(jax.tree.leaves(alone.learner.params), jax.tree.leaves(together.learner.params)):
            np.testing.assert_allclose(b[i], a, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(together_metrics["loss"][i], alone_metrics["loss"], rtol=1e-4, atol=1e-6)
    # The seeds really differ.
    first = jax.tree.leaves(together.learner.params)[0]
    assert not np.allclose(first[0], first[1])


def test_run_trains_seeds_together_on_two_devices_as_it_trains_each_alone(devices):
    env, agent, optimizer = _setup()
    agent = agent._replace(optimizer=optimizer)
    plan = anakin.anakin_plan(
        num_envs_per_device=4, rollout_length=8, num_updates=4, updates_per_call=2, devices=devices[:2]
    )

    def trained(key):
        return anakin.run(
            plan, agent, anakin.init(env, agent, optimizer, key, 4, devices[:2], rollout_length=8), env=env
        )

    together = trained(anakin.seed_keys(3, 2))
    for i in range(2):
        alone = trained(jax.random.key(3 + i))
        for t, a in zip(together.history, alone.history):
            assert t["env_steps"] == a["env_steps"]
            np.testing.assert_allclose(t["episode_return_per_seed"][i], a["episode_return"], rtol=1e-5, atol=1e-6)
        for a, b in zip(jax.tree.leaves(alone.state.learner.params), jax.tree.leaves(together.state.learner.params)):
            assert b.shape == (2, 2, *a.shape[1:])  # [device, seed, ...]
            np.testing.assert_allclose(b[:, i], a, rtol=1e-5, atol=1e-6)
    last = together.history[-1]
    assert last["episode_return"] == pytest.approx(np.mean(last["episode_return_per_seed"]))
    assert last["episode_return_min"] == min(last["episode_return_per_seed"])


def test_run_with_a_plan_calls_its_hooks_counts_the_plans_env_steps_and_continues_a_run(devices):
    """``anakin.run(plan, agent, state, hooks, env=)`` (the agent's own optimizer): hooks change nothing of what is
    trained (the parameters and summaries of a run without them, bit for bit, seeds vmapped); the plan's env steps
    per update are what the summaries count; ``after_call`` hears every call and ``start_update`` continues a run.
    The keyword form (``run(env, agent, optimizer, key=...)``) is refused in one line."""
    env, agent, optimizer = _setup()
    agent = agent._replace(optimizer=optimizer)
    key = anakin.seed_keys(7, 2)
    plan = anakin.anakin_plan(
        num_envs_per_device=4, rollout_length=8, num_updates=4, updates_per_call=2, devices=devices[:2]
    )
    assert (plan.env_steps_per_update, plan.total_env_steps, plan.facts.envs_per_learner) == (64, 256, 4)
    calls = []
    state = anakin.init(env, agent, optimizer, key, 4, devices[:2], rollout_length=8)
    old = anakin.run(plan, agent, state, env=env)
    new = anakin.run(plan, agent, state, anakin.Hooks(after_call=lambda s, done: calls.append(done)), env=env)
    assert calls == [2, 4]
    assert [h["env_steps"] for h in new.history] == [128.0, 256.0]
    for a, b in zip(jax.tree.leaves(old.state.learner.params), jax.tree.leaves(new.state.learner.params)):
        np.testing.assert_array_equal(a, b)
    assert [h["episode_return_per_seed"] for h in new.history] == [h["episode_return_per_seed"] for h in old.history]
    half = anakin.run(dataclasses.replace(plan, num_updates=2), agent, state, env=env)
    rest = anakin.run(plan, agent, half.state, env=env, start_update=2)
    assert [h["env_steps"] for h in rest.history] == [256.0]
    for a, b in zip(jax.tree.leaves(rest.state.learner.params), jax.tree.leaves(new.state.learner.params)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"^anakin.run: the agent has no optimizer; give it one"):
        anakin.run(plan, agent._replace(optimizer=None), state, env=env)
    with pytest.raises(
        TypeError, match=r"^anakin.run takes a RunPlan first \(anakin.anakin_plan\(\.\.\.\)\), got Catch"
    ):
        anakin.run(env, agent, state, env=env)  # the keyword form's first argument


def test_a_plan_rounds_a_budget_up_to_whole_host_calls():
    plan = anakin.anakin_plan(
        num_envs_per_device=4, rollout_length=8, total_env_steps=1000, updates_per_call=3, num_devices=2
    )
    assert (plan.num_updates, plan.env_steps_per_update, plan.total_env_steps) == (18, 64, 18 * 64)
    with pytest.raises(ValueError, match=r"^an Anakin plan needs num_updates or total_env_steps\.$"):
        anakin.anakin_plan(num_envs_per_device=4, rollout_length=8)


def test_interquartile_mean_drops_a_quarter_at_each_end():
    assert anakin.interquartile_mean([0.0, 1.0, 2.0, 100.0]) == 1.5
    assert anakin.interquartile_mean([3.0, -50.0, 1.0, 2.0, 7.0, 80.0, 4.0, 5.0]) == 3.5
    assert anakin.interquartile_mean([2.0]) == 2.0


def test_summarize_weights_episode_statistics_by_episode_counts():
    summary = anakin.summarize(
        {
            "episodes": jnp.array([0.0, 1.0, 3.0]),
            "episode_return": jnp.array([jnp.nan, 1.0, -1.0]),
            "loss": jnp.array([1.0, 2.0, 3.0]),
        }
    )
    assert summary == {"episodes": 4.0, "episode_return": -0.5, "loss": 2.0}


def test_clear_errors_for_bad_input():
    with pytest.raises(
        ValueError,
        match=r"Unknown agent 'dqnn'; available: a2c, alphazero, dqn, impala, muzero, ppo, pqn, r2d2, sac, td3 "
        r"\(an agent of your own: agents.register, "
        r"--import MODULE, or a podracer.agents entry point\)\. Did you mean 'dqn'\?",
    ):
        agents.config_class("dqnn")
    with pytest.raises(
        ValueError,
        match=r"Unknown JAX environment 'pong'; available: cartpole, catch, memory, synthetic, "
        r"or SUITE:NAME \(brax, bsuite, craftax, gymnax, jumanji, navix, pgx, playground, xminigrid; --env list\); "
        r"your own: envs.register, --import MODULE or a podracer.envs entry point\.",
    ):
        envs.make("pong")
    with pytest.raises(ValueError, match=r"--process-id 2 is out of range for 2 processes \(expected 0 \.\.\. 1\)\."):
        AnakinConfig(num_processes=2, process_id=2, coordinator="127.0.0.1:1234")
    with pytest.raises(ValueError, match=r"--process-id 5 is out of range for 2 processes"):
        multihost.initialize("127.0.0.1:1234", 2, 5)
    with pytest.raises(
        ValueError, match=r"--num-envs = 10 is not divisible by the 8 devices of this run; choose a multiple of 8\."
    ):
        AnakinConfig(num_envs=10).envs_per_device(8)
    assert AnakinConfig(num_envs=16).envs_per_device(8) == 2
    with pytest.raises(ValueError, match=r"--num-updates = 50 is not divisible by the 20 updates per call"):
        AnakinConfig(num_updates=50, updates_per_call=20)
    with pytest.raises(ValueError, match=r"Agent 'a2c' has no hyper-parameter\(s\) \['num_epochs'\]"):
        agents.make("a2c", envs.make("catch").spec(), num_epochs=3)
    with pytest.raises(
        ValueError, match=r"A multi-process run needs all of coordinator_address, num_processes and process_id"
    ):
        multihost.initialize("127.0.0.1:1234", 2, None)
    with pytest.raises(ValueError, match=r"--coordinator must be HOST:PORT, got 'localhost'\."):
        multihost.initialize("localhost", 2, 0)


class _StopAfter(threading.Event):
    """A stop event that reads as set from its ``n + 1``-th check on: the run stops after ``n`` host calls."""

    def __init__(self, n):
        super().__init__()
        self.checks, self.n = 0, n

    def is_set(self):
        self.checks += 1
        return self.checks > self.n or super().is_set()


def test_an_interrupted_and_resumed_run_ends_exactly_as_an_uninterrupted_one(tmp_path):
    common = dict(
        agent=A2CConfig(),
        env="catch",
        num_envs_per_device=8,
        rollout_length=8,
        num_updates=200,
        updates_per_call=20,
        checkpoint_every=40,
    )
    whole = AnakinConfig(checkpoint_dir=str(tmp_path / "whole"), log_dir=str(tmp_path / "whole"), **common)
    compose.train_anakin(whole)
    parts = AnakinConfig(checkpoint_dir=str(tmp_path / "parts"), log_dir=str(tmp_path / "parts"), **common)
    first = compose.train_anakin(parts, stop=_StopAfter(5))  # Ctrl-C after 100 updates: a checkpoint of update 100
    assert first.history[-1]["env_steps"] == 100 * 8 * 8 * 8
    assert checkpoint.steps(parts.checkpoint_dir) == [40, 80, 100]
    second = compose.train_anakin(dataclasses.replace(parts, resume=True))
    assert [h["env_steps"] for h in second.history] == [n * 8 * 8 * 8 for n in range(120, 201, 20)]

    env = envs.make("catch")
    template = anakin.init_state(
        env,
        agents.make(whole.agent, env.spec()),
        agents.make(whole.agent, env.spec()).optimizer,
        jax.random.key(0),
        8,
    ).learner
    a, meta_a = checkpoint.restore(whole.checkpoint_dir, template)
    b, meta_b = checkpoint.restore(parts.checkpoint_dir, template)
    assert meta_a["updates"] == meta_b["updates"] == 200 and meta_a["env_steps"] == meta_b["env_steps"]
    for x, y in zip(jax.tree.leaves((a.params, a.opt_state)), jax.tree.leaves((b.params, b.opt_state))):
        np.testing.assert_array_equal(x, y)  # bit for bit

    def last_line(directory):
        record = json.loads((tmp_path / directory / "metrics.jsonl").read_text().splitlines()[-1])
        record.pop("sps")
        return record, record.pop("run_id")

    (whole_line, _), (parts_line, resumed_id) = last_line("whole"), last_line("parts")
    assert whole_line == parts_line
    first_id = json.loads((tmp_path / "parts" / "metrics.jsonl").read_text().splitlines()[0])["run_id"]
    assert first_id != resumed_id  # each attempt of the run names itself in the shared log


def test_checkpoint_directory_is_checked_before_training(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(ValueError, match=r"--checkpoint-dir '.*afile' is a file, not a directory\."):
        compose.train_anakin(AnakinConfig(checkpoint_dir=str(afile), num_updates=20))
    with pytest.raises(ValueError, match=r"--resume: no checkpoint in '.*empty' to resume from\."):
        compose.train_anakin(AnakinConfig(checkpoint_dir=str(tmp_path / "empty"), resume=True, num_updates=20))
    done = tmp_path / "done"
    compose.train_anakin(
        AnakinConfig(checkpoint_dir=str(done), num_updates=20, num_envs_per_device=4, rollout_length=4)
    )
    with pytest.raises(ValueError, match=r"already holds checkpoints; pass --resume \(or --resume auto\) to continue"):
        compose.train_anakin(AnakinConfig(checkpoint_dir=str(done), num_updates=20))
    with pytest.raises(
        ValueError, match=r"--resume: '.*done' holds a checkpoint of another run: --agent a2c there, ppo here; "
    ):
        compose.train_anakin(
            AnakinConfig(checkpoint_dir=str(done), agent=PPOConfig(), resume=True, num_updates=20, rollout_length=4)
        )
    with pytest.raises(ValueError, match=r"--checkpoint-every = 30 is not divisible by the 20 updates per call"):
        AnakinConfig(checkpoint_dir=str(done), checkpoint_every=30)
    with pytest.raises(
        ValueError, match=r"--checkpoint-every, --checkpoint-every-seconds and --resume need --checkpoint-dir\."
    ):
        AnakinConfig(resume=True)
    with pytest.raises(
        ValueError, match=r"--resume: '.*done' holds a checkpoint of another run: --agent a2c there, ppo here; "
    ):
        compose.train_anakin(
            AnakinConfig(checkpoint_dir=str(done), agent=PPOConfig(), resume="auto", num_updates=20, rollout_length=4)
        )


def test_resume_auto_starts_fresh_then_resumes_and_checkpoints_by_wall_time(tmp_path):
    """One command line for every attempt of a requeued job: ``--resume auto``; ``--checkpoint-every-seconds``."""
    small = dict(num_envs_per_device=4, rollout_length=4, updates_per_call=20)
    per_update = 4 * 4 * jax.device_count()
    directory = str(tmp_path / "run")
    first = compose.train_anakin(
        AnakinConfig(checkpoint_dir=directory, resume="auto", num_updates=40, checkpoint_every_seconds=1e9, **small)
    )  # a fresh start
    assert [h["env_steps"] for h in first.history] == [20 * per_update, 40 * per_update]
    assert checkpoint.steps(directory) == [40]  # no save by time: only the final one
    again = compose.train_anakin(
        AnakinConfig(checkpoint_dir=directory, resume="auto", num_updates=100, checkpoint_every_seconds=1e-9, **small)
    )  # resumes after 40 updates
    assert [h["env_steps"] for h in again.history] == [n * per_update for n in (60, 80, 100)]
    assert checkpoint.steps(directory) == [60, 80, 100]  # due by time after every call


@pytest.mark.parametrize(
    "agent_name, env_name, hyper",
    [
        ("r2d2", "memory", dict(batch_size=8, min_replay_size=8, replay_capacity=64, core_size=16, hidden_sizes=(16,))),
        ("dqn", "catch", dict(batch_size=64, min_replay_size=64, replay_capacity=512, hidden_sizes=(16,))),
    ],
)
def test_replay_and_recurrent_agents_train_seeds_together_as_alone(agent_name, env_name, hyper):
    """Before the replay holds a batch, a vmap over seeds still runs the (not taken) gradient step: its
    replay checks must not fire there, and each seed must learn exactly as alone."""
    env, agent, optimizer = _setup(agent_name, env_name, **hyper)
    train = anakin.make_train(env, agent, optimizer, num_envs=4, rollout_length=8, num_updates=6)
    together, metrics = jax.jit(jax.vmap(train))(anakin.seed_keys(0, 2))
    assert np.asarray(metrics["sgd_steps"])[:, 0].sum() == 0 and np.asarray(metrics["sgd_steps"]).sum() > 0
    for i in range(2):
        alone, _ = jax.jit(train)(jax.random.key(i))
        for a, b in zip(jax.tree.leaves(alone.learner.params), jax.tree.leaves(together.learner.params)):
            np.testing.assert_allclose(b[i], a, rtol=1e-4, atol=1e-5)


def _damage(directory, damage):
    import os

    for part in ("step_60", "step_60.run/process_0"):
        if damage == "truncated data file":
            data = sorted((directory / part / "ocdbt.process_0" / "d").iterdir(), key=os.path.getsize)[-1]
            data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
        elif damage == "missing _METADATA":
            (directory / part / "_METADATA").unlink()
    if damage == "broken json":
        (directory / "step_60.json").write_text("{not json")


def test_resume_falls_back_past_a_damaged_newest_checkpoint(tmp_path, capfd):
    """Anakin's and Sebulba's resume, podracer evaluate and podracer preview skip a damaged newest checkpoint the same
    way: one warning naming it, the previous one read, and the step said is the one played."""
    import shutil

    from podracer.cli import evaluate as evaluate_command, preview as preview_command

    small = dict(num_envs_per_device=4, rollout_length=4, updates_per_call=20, checkpoint_every=20)
    saved = tmp_path / "saved"
    compose.train_anakin(AnakinConfig(checkpoint_dir=str(saved), num_updates=60, **small))
    assert checkpoint.steps(str(saved)) == [20, 40, 60]
    env = envs.make("catch")
    agent, optimizer = (
        agents.make(A2CConfig(), env.spec()),
        agents.make(A2CConfig(), env.spec()).optimizer,
    )
    template = anakin.init(env, agent, optimizer, jax.random.key(0), 4)
    for damage in ("truncated data file", "missing _METADATA", "broken json"):
        directory = tmp_path / damage.replace(" ", "_")
        shutil.copytree(saved, directory)
        _damage(directory, damage)
        capfd.readouterr()
        _, step = checkpoint.restore_newest_run_state(str(directory), template)  # Anakin's --resume
        _, metadata = checkpoint.restore(str(directory), template.learner)  # evaluate, Sebulba's --resume
        err = capfd.readouterr().err
        warnings = [line for line in err.splitlines() if "warning" in line]
        assert step == 40 and metadata["updates"] == 40, damage
        assert len(warnings) == 1 and f"{directory}/step_60 cannot be restored" in warnings[0], (damage, err)
        assert "Traceback" not in err and "Event loop" not in err, err
        # podracer evaluate and preview (in this process) play step 40 and say so, exit 0
        assert evaluate_command.main(["--checkpoint", str(directory), "--episodes", "2"]) == 0, damage
        assert preview_command.main(["--checkpoint-dir", str(directory)]) == 0, damage
        out, err = capfd.readouterr()
        assert (
            "over 2 episodes of the behaviour policy (sampled) (checkpoint step_40)" in out
            and "checkpoint step_40: return" in out
        ), (damage, out)
        assert "Traceback" not in err, err
    # The whole run resumes from update 40 and saves over the damaged checkpoint.
    directory = tmp_path / "truncated_data_file"
    resumed = compose.train_anakin(AnakinConfig(checkpoint_dir=str(directory), num_updates=80, resume=True, **small))
    assert [h["env_steps"] for h in resumed.history] == [60 * 16 * 8, 80 * 16 * 8]
    assert checkpoint.steps(str(directory)) == [40, 60, 80]


def test_an_evaluation_plays_the_greedy_or_the_sampled_action_as_asked():
    """``make_evaluate(greedy=False)`` plays the action ``act`` returns, not the most likely one: two agents whose
    sampled and greedy actions are swapped score the same with the policies swapped, and Catch tells the two apart."""
    env = envs.make("catch")
    agent = agents.make(A2CConfig(), env.spec())

    def fixed(sampled: int, greedy: int):
        def act(params, observation, key, state, first, **_):
            batch = observation.shape[0]
            logits = 10.0 * jax.nn.one_hot(jnp.full((batch,), greedy), env.spec().num_actions)
            return jnp.full((batch,), sampled, jnp.int32), {"logits": logits}, state

        return agent._replace(act=act)

    def returns(agent, greedy):
        return np.asarray(jax.jit(anakin.make_evaluate(env, agent, 16, greedy=greedy))(None, jax.random.key(3)))

    left_sampled, right_sampled = fixed(sampled=0, greedy=2), fixed(sampled=2, greedy=0)
    np.testing.assert_array_equal(returns(left_sampled, False), returns(right_sampled, True))
    np.testing.assert_array_equal(returns(left_sampled, True), returns(right_sampled, False))
    assert not np.array_equal(returns(left_sampled, False), returns(left_sampled, True))


def test_each_seed_is_evaluated_on_its_own_episodes_as_it_is_alone():
    """Lane ``s`` of ``--seed 5 --num-seeds 3`` plays the episodes of ``--seed 5 + s`` alone (Catch's starts and the
    sampled policy's actions both come from the key: equal returns episode by episode), and two lanes play different
    ones; a sweep's settings of one seed play that seed's episodes, a population's lanes each their own."""
    from podracer.run import play

    env = envs.make("catch")
    agent = agents.make(A2CConfig(), env.spec())
    params = anakin.init_state(env, agent, agent.optimizer, jax.random.key(0), 4).learner.params
    stacked = jax.tree.map(lambda x: jnp.stack([x] * 3), params)  # the same parameters in every lane
    lanes = play.periodic_evaluation(env, agent, 32, seed=5, num_seeds=3, greedy=False)(stacked)
    assert lanes.shape == (3, 32)
    for s in (0, 2):
        alone = play.periodic_evaluation(env, agent, 32, seed=5 + s, greedy=False)(params)
        np.testing.assert_array_equal(lanes[s], alone)
    assert not np.array_equal(lanes[0], lanes[1]) and not np.array_equal(lanes[1], lanes[2])

    values = {"learning_rate": jnp.asarray([1e-3, 1e-3, 1e-2, 1e-2])}  # 2 settings x seeds 5, 6
    build = lambda v: (agent, agent.optimizer)  # noqa: E731 (acting does not read the learning rate)
    stacked = jax.tree.map(lambda x: jnp.stack([x] * 4), params)
    sweep = play.periodic_evaluation(env, agent, 32, 5, 2, (values, build), greedy=False)(stacked)
    np.testing.assert_array_equal(sweep[[0, 1, 2, 3]], lanes[[0, 1, 0, 1]])
    population = play.periodic_evaluation(env, agent, 32, 5, 1, (values, build), False, population=True)(stacked)
    assert len({tuple(lane) for lane in population}) == 4


def test_a_lane_of_a_run_of_seeds_closes_on_the_evaluation_of_its_seed_alone():
    """Through the composition root: seed 6 trained and evaluated among seeds 5-6 scores what ``--seed 6`` scores
    alone (its training and evaluation keys are its own), the other lane its own figure."""
    small = dict(env="catch", num_envs=8, rollout_length=8, num_updates=4, updates_per_call=4, cpu_devices=None)
    options = dict(small, eval_every=4, eval_episodes=64, eval_policy="sampled")
    together = compose.train_anakin(AnakinConfig(**options, seed=5, num_seeds=2)).history[-1]
    alone = compose.train_anakin(AnakinConfig(**options, seed=6)).history[-1]
    assert together["eval_return_per_seed"][1] == pytest.approx(alone["eval_return"], abs=1e-6)
    first = compose.train_anakin(AnakinConfig(**options, seed=5)).history[-1]
    assert together["eval_return_per_seed"][0] == pytest.approx(first["eval_return"], abs=1e-6)


def test_evaluation_uses_fixed_seeds_and_a_target_return_stops_the_run_with_a_checkpoint(tmp_path, capfd):
    env = envs.make("catch")
    agent = agents.make(A2CConfig(), env.spec())
    params = anakin.init_state(
        env, agent, agents.make(A2CConfig(), env.spec()).optimizer, jax.random.key(0), 4
    ).learner.params
    evaluate = jax.jit(anakin.make_evaluate(env, agent, 16))
    first, again = evaluate(params, jax.random.key(5)), evaluate(params, jax.random.key(5))
    assert first.shape == (16,) and np.all(np.abs(first) == 1.0)  # every Catch episode ends with +1 or -1
    np.testing.assert_array_equal(first, again)

    config = AnakinConfig(
        num_envs=128,
        num_updates=400,
        updates_per_call=20,
        eval_every=20,
        eval_episodes=32,
        target_return=0.95,
        checkpoint_dir=str(tmp_path),
    )
    result = compose.train_anakin(config)
    last = result.history[-1]
    updates = round(last["env_steps"] / (16 * 128))
    assert last["target_reached"] == 1.0 and last["eval_return"] >= 0.95 and updates < 400, last
    assert all(h["eval_return"] < 0.95 for h in result.history[:-1])
    assert checkpoint.steps(str(tmp_path)) == [updates]
    assert f"evaluation return {last['eval_return']:.3f} >= --target-return 0.95" in capfd.readouterr().out


def test_a_full_disk_ends_the_run_with_one_error_keeps_the_last_checkpoint_and_resume_repeats_no_line(
    tmp_path, monkeypatch
):
    """A device that fills (its size fixed through ``shutil.disk_usage``, which every room check reads): the save
    that does not fit is refused before orbax writes anything, the newest complete checkpoint is kept, and a resume
    into the record, which holds a line past that checkpoint, is refused in one line (nothing dropped); resumed with
    another --log-dir, it goes on from the checkpoint."""
    import os
    import shutil
    from collections import namedtuple

    from podracer.run import disk

    directory, logs = tmp_path / "ckpt", tmp_path / "logs"
    small = dict(
        num_envs_per_device=4,
        rollout_length=4,
        updates_per_call=20,
        checkpoint_every=20,
        checkpoint_dir=str(directory),
        log_dir=str(logs),
    )
    per_update = 4 * 4 * jax.device_count()
    compose.train_anakin(AnakinConfig(num_updates=20, **small))  # one checkpoint: its size on disk
    size = sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())
    shutil.rmtree(directory)
    shutil.rmtree(logs)
    # podracer's estimate of the run state it saves (uncompressed; orbax writes less), against the bytes on disk:
    # a device where two checkpoints fit and the estimate of a third does not.
    config = AnakinConfig(num_updates=20, **small)
    env = envs.make("catch")
    run_state = checkpoint.tree_bytes(
        parallel.local_entries(
            anakin.init(
                env,
                agents.make(config.agent, env.spec()),
                agents.make(config.agent, env.spec()).optimizer,
                jax.random.key(0),
                4,
                rollout_length=4,
            )
        )
    )
    capacity = [checkpoint.SPACE_MARGIN_BYTES + run_state + int(1.5 * size)]
    usage = namedtuple("usage", "total used free")

    def disk_usage(path):
        used = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file())
        return usage(capacity[0], used, max(capacity[0] - used, 0))

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    monkeypatch.setattr("podracer.run.logging.LOG_ROOM_BYTES", 0)
    with pytest.raises(
        disk.DiskFull,
        match=r"^--checkpoint-dir '.*ckpt': no room for the run state of checkpoint "
        r"step_60: it needs about .* MB \(and podracer keeps 1.0 MB spare\) and the device has .* MB free; "
        r"step_40, the newest complete checkpoint, is intact; free some space",
    ):
        compose.train_anakin(AnakinConfig(num_updates=100, **small))
    assert checkpoint.steps(str(directory)) == [20, 40]
    assert not [n for n in os.listdir(directory) if n.startswith("step_60")]  # nothing half-written
    capacity[0] = 1 << 40  # space freed
    record = (logs / "metrics.jsonl").read_bytes()  # its line of update 60 is past step_40, the newest checkpoint
    with pytest.raises(ValueError, match=r"^--log-dir '.*logs' holds 1 line\(s\) past step_40 \("):
        compose.train_anakin(AnakinConfig(num_updates=100, resume="auto", **small))
    assert (logs / "metrics.jsonl").read_bytes() == record  # nothing dropped
    again = tmp_path / "again"
    compose.train_anakin(AnakinConfig(num_updates=100, resume="auto", **{**small, "log_dir": str(again)}))
    steps = [json.loads(line)["env_steps"] for line in record.decode().splitlines()]
    resumed = [json.loads(line)["env_steps"] for line in (again / "metrics.jsonl").read_text().splitlines()]
    assert steps == [n * per_update for n in (20, 40, 60)] and resumed == [n * per_update for n in (60, 80, 100)]
    assert checkpoint.steps(str(directory)) == [60, 80, 100]


def test_checkpoint_size_estimates_count_each_key_implementations_bytes():
    three = jax.random.split(jax.random.key(0), 3)  # threefry: 2 x uint32 each
    assert checkpoint.tree_bytes({"keys": three, "x": jnp.zeros(4, jnp.float32)}) == 3 * 8 + 4 * 4
    assert checkpoint.tree_bytes({"keys": jax.random.split(jax.random.key(0, impl="rbg"), 3)}) == 3 * 16
    assert checkpoint.tree_bytes(jax.eval_shape(lambda: three)) == 3 * 8  # shapes, before anything is made


def test_env_steps_per_second_count_the_whole_call_not_its_dispatch(devices):
    """Each summary's ``sps`` is measured until the call's metrics are on the host: the calls' seconds it implies
    fill most of the loop after compilation (a figure timed at dispatch implied a few per cent of it)."""
    import time

    env, agent, optimizer = _setup()
    marks = {}

    def progress(event):
        if event.startswith("compiled"):
            marks["compiled"] = time.perf_counter()

    result = anakin.run(
        anakin.anakin_plan(
            num_envs_per_device=32, rollout_length=16, num_updates=40, updates_per_call=10, devices=devices[:2]
        ),
        agent._replace(optimizer=optimizer),
        anakin.init(env, agent, optimizer, jax.random.key(0), 32, devices[:2], rollout_length=16),
        anakin.Hooks(progress=progress),
        env=env,
    )
    loop_seconds = time.perf_counter() - marks["compiled"]
    steps_per_call = 10 * 16 * 32 * 2
    implied = sum(steps_per_call / record["sps"] for record in result.history)
    assert implied >= 0.5 * loop_seconds, (implied, loop_seconds)


def test_an_unrolled_rollout_computes_the_same_steps_to_the_bit():
    """--rollout-unroll writes steps of the rollout's loop out (lax.scan's unroll): the same trajectories, losses and
    parameters, bit for bit; a factor beyond the rollout is refused, naming both flags."""
    from podracer.core import anakin as core_anakin

    env, agent, optimizer = _setup("ppo", num_minibatches=2, num_epochs=2)
    ends = []
    for unroll in (1, 4):
        update = jax.jit(
            core_anakin.make_update(env, agent, optimizer, rollout_length=8, axis_names=(), rollout_unroll=unroll)
        )
        state = core_anakin.init_state(env, agent, optimizer, jax.random.key(3), 4, rollout_length=8)
        for _ in range(3):
            state, metrics = update(state)
        ends.append(jax.tree.leaves((state, metrics)))
    for a, b in zip(*ends):
        np.testing.assert_array_equal(
            jax.random.key_data(a) if jnp.issubdtype(a.dtype, jax.dtypes.prng_key) else a,
            jax.random.key_data(b) if jnp.issubdtype(b.dtype, jax.dtypes.prng_key) else b,
        )
    with pytest.raises(
        ValueError, match=r"^--rollout-unroll 32 is more than the rollout's 16 steps \(--rollout-length\)"
    ):
        AnakinConfig(rollout_unroll=32)
