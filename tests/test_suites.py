"""JAX environment suites by name (SUITE:NAME), tested against the real packages; user-registered environments."""

import importlib.util
import json
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.run import compose
from podracer.cli import parser
from podracer.core import envs, install
from podracer.run.config import AnakinConfig, SebulbaConfig
from podracer.cli import catalog
from podracer.core.envs.gymnax import GymnaxEnv


@pytest.mark.suite("gymnax")
def test_gymnax_cartpole_spec_shapes_dtypes_under_jit_and_vmap():
    env = envs.make("gymnax:CartPole-v1")
    spec = env.spec()
    assert spec.observation.shape == (4,) and spec.observation.dtype == jnp.float32 and spec.num_actions == 2
    state, timestep = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), 8))
    assert timestep.observation.shape == (8, 4) and timestep.observation.dtype == jnp.float32
    assert not timestep.last.any() and np.all(timestep.discount == 1.0)
    state, timestep = jax.jit(jax.vmap(env.step))(state, jnp.ones(8, jnp.int32))
    assert timestep.observation.shape == (8, 4) and timestep.reward.dtype == jnp.float32 and timestep.last.dtype == bool
    np.testing.assert_array_equal(timestep.reward, 1.0)
    # Different keys, different starts; the environment's key moves on with its state.
    assert len(np.unique(np.asarray(timestep.observation[:, 0]))) == 8


@pytest.mark.suite("gymnax")
def test_gymnax_keeps_termination_and_truncation_apart():
    base = envs.make("gymnax:CartPole-v1")
    # Truncation: a time limit of 5 steps that balancing cannot fail in: last, discount 1.
    short = GymnaxEnv("CartPole-v1", env=base.env, params=base.params.replace(max_steps_in_episode=5))
    state, timestep = short.reset(jax.random.key(1))
    lasts = []
    for t in range(5):
        state, timestep = short.step(state, jnp.int32(t % 2))
        lasts.append((bool(timestep.last), float(timestep.discount)))
    assert lasts == [(False, 1.0)] * 4 + [(True, 1.0)]
    # Termination: the pole past its angle limit: last, discount 0.
    state, _ = base.reset(jax.random.key(2))
    state = state._replace(env_state=state.env_state.replace(theta=jnp.float32(0.5)))
    _, timestep = base.step(state, jnp.int32(1))
    assert bool(timestep.last) and float(timestep.discount) == 0.0


class _OldApi:
    """gymnax 0.0.x as far as the adapter can tell: step_env's done includes the time limit; no is_truncated."""

    def __init__(self, env):
        self.env = env

    def __getattr__(self, name):
        if name == "is_truncated":
            raise AttributeError(name)
        return getattr(self.env, name)

    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, info = self.env.step_env(key, state, action, params)
        return obs, state, reward, jnp.logical_or(terminated, state.time >= params.max_steps_in_episode), info


@pytest.mark.suite("gymnax")
def test_gymnax_old_and_new_step_signatures_give_the_same_time_steps():
    new = envs.make("gymnax:CartPole-v1")
    params = new.params.replace(max_steps_in_episode=30)
    new = GymnaxEnv("CartPole-v1", env=new.env, params=params)
    old = GymnaxEnv("CartPole-v1", env=_OldApi(new.env), params=params)
    assert not hasattr(old.env, "is_truncated")
    wrapped_new, wrapped_old = envs.wrap(new), envs.wrap(old)
    actions = jax.random.randint(jax.random.key(3), (200, 16), 0, 2)

    def play(env):
        def body(state, action):
            state, timestep = jax.vmap(env.step)(state, action)
            return state, timestep

        state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(4), 16))
        return jax.lax.scan(body, state, actions)[1]

    a, b = jax.jit(lambda: play(wrapped_new))(), jax.jit(lambda: play(wrapped_old))()
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    # Both kinds of episode end happened: falls (discount 0) and the 30-step limit (discount 1).
    ends = np.asarray(a.last)
    assert (np.asarray(a.discount)[ends] == 0).any() and (np.asarray(a.discount)[ends] == 1).any()


@pytest.mark.suite("gymnax")
def test_gymnax_specs_say_what_observations_and_actions_are():
    from podracer.core.types import Box, ImageLayout

    board = envs.make("gymnax:Breakout-MinAtar").spec()
    assert board.observation.shape == (10, 10, 4) and board.observation.dtype == jnp.float32
    assert board.image == ImageLayout(channel_axis=-1, low=0.0, high=1.0) and board.num_actions == 3
    pendulum = envs.make("gymnax:Pendulum-v1").spec()
    assert pendulum.continuous and pendulum.box == Box((-2.0,), (2.0,)) and pendulum.num_actions == 0
    assert not envs.make("gymnax:Catch-bsuite").spec().image  # a grid: flattened by the MLP, not an image


@pytest.mark.suite("gymnax")
def test_gymnax_errors_name_what_does_not_fit():
    with pytest.raises(
        ValueError,
        match=r"^--env gymnax:Cartpole: unknown gymnax environment\. Did you mean "
        r"gymnax:CartPole-v1\?",
    ):
        envs.make("gymnax:Cartpole")
    with pytest.raises(
        ValueError,
        match=r"^Unknown environment suite 'gym' in 'gym:CartPole-v1'; suites: brax, bsuite, craftax, gymnax, jumanji, "
        r"navix, pgx, playground, xminigrid\.$",
    ):
        envs.make("gym:CartPole-v1")


def test_a_missing_suite_names_the_extra_to_install(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gymnax" else real(name, *a))
    for cls in (AnakinConfig, SebulbaConfig):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse(cls, ["--env", "gymnax:CartPole-v1"], prog="prog")
        assert exit_info.value.code == 2
        assert (
            f"prog: error: --env: gymnax: environments need gymnax: {install.command('gymnax')}."
            in capsys.readouterr().err
        )


@pytest.mark.parametrize(
    "suite, package",
    [
        ("brax", "brax"),
        ("craftax", "craftax"),
        ("jumanji", "jumanji"),
        ("playground", "mujoco_playground"),
        ("xminigrid", "xminigrid"),
    ],
)
def test_every_suite_names_its_extra_when_its_package_is_missing(suite, package, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a))
    with pytest.raises(
        ValueError,
        match=rf"^{suite}: environments need {package}: {re.escape(install.command(suite))}\.$",
    ):
        envs.check(f"{suite}:Anything")
    assert f"{suite}: not installed (environments need {package}: {install.command(suite)}.)" in catalog.listing()


@pytest.mark.suite("gymnax")
def test_env_list_prints_every_name(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parser.parse(AnakinConfig, ["--env", "list"], prog="prog")
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "gymnax:CartPole-v1" in out and "gymnax:Breakout-MinAtar" in out
    lines = out.splitlines()
    assert "  catch      bsuite Catch: 10 rows, 5 columns, 3 actions" in lines  # one per line, described
    assert "gymnax: classic control, bsuite and MinAtar" in lines  # each suite with its line
    assert max(map(len, lines)) <= 120  # names in columns, not a suite per line

    def listed(mode, flag):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse(AnakinConfig if mode == "anakin" else SebulbaConfig, ["--env", flag], prog="prog")
        assert exit_info.value.code == 0
        return capsys.readouterr().out.splitlines()

    only = listed("anakin", "list:gymnax")  # one suite
    assert only[0] == "gymnax: classic control, bsuite and MinAtar" and "catch" not in " ".join(only)
    breakout = " ".join(listed("anakin", "list:breakout")).split()  # names containing the text, in every suite
    assert "gymnax:Breakout-MinAtar" in breakout and "gymnax:CartPole-v1" not in breakout
    assert listed("anakin", "list:zzz") == ["no environment matches 'zzz' (--env list shows them all)"]
    host = listed("sebulba", "list")  # Sebulba's: envpool's ids first, then what it steps on the host
    assert host[0].startswith("envpool ") and "short names: pong = Pong-v5" in host[0]
    words = " ".join(host).split()
    assert {"Pong-v5", "Breakout-v5", "CartpoleBalance-v1", "jax:catch", "gymnax:CartPole-v1"} <= set(words)


def test_a_registered_environment_works_by_name_in_both_modes_and_trains(monkeypatch):
    monkeypatch.setitem(envs._JAX_ENVS, "my-catch", None)  # removed again after the test
    envs.register("my-catch", lambda **kw: envs.Catch(rows=5, columns=3, **kw))
    assert isinstance(envs.make("my-catch"), envs.Catch) and "my-catch" in envs.names()
    cfg = parser.parse(
        AnakinConfig,
        [
            "--env",
            "my-catch",
            "--num-envs-per-device",
            "2",
            "--num-updates",
            "2",
            "--updates-per-call",
            "2",
            "--rollout-length",
            "4",
        ],
    )
    result = compose.train_anakin(cfg)
    assert result.history[-1]["env_steps"] == 2 * 4 * 2 * len(jax.devices())
    assert parser.parse(SebulbaConfig, ["--env", "jax:my-catch"]).env == "jax:my-catch"
    with pytest.raises(ValueError, match="take no ':'"):
        envs.register("mine:catch", envs.Catch)


@pytest.mark.suite("gymnax")
def test_sebulba_trains_on_a_suite_environment_and_evaluate_plays_its_checkpoint(tmp_path):
    from podracer.core.agents import PPOConfig
    from podracer.run.evaluate import play

    cfg = parser.parse(SebulbaConfig, ["--env", "gymnax:CartPole-v1", "--agent", "ppo"])
    env = compose.host_env_factory(cfg)(seed=0, num_envs=4)
    assert env.reset().observation.shape == (4, 4) and env.spec().num_actions == 2
    env.close()
    directory = str(tmp_path / "ckpt")
    result = compose.train_sebulba(
        SebulbaConfig(
            env="gymnax:CartPole-v1",
            agent=PPOConfig().replace(learning_rate=1e-3),
            total_env_steps=8_192,
            num_envs_per_actor=16,
            rollout_length=16,
            actor_devices=(0,),
            learner_devices=(1,),
            log_every=8,
            checkpoint_dir=directory,
        )
    )
    assert result.history and np.isfinite(result.history[-1]["episode_return"])
    returns, _ = play(directory, 4, seed=1, greedy=True)  # Sebulba's JAX environment, rebuilt by name
    assert returns.shape == (4,) and np.isfinite(returns).all() and (returns >= 8).all()


def test_brax_spec_shapes_termination_and_truncation_under_jit_and_vmap():
    pytest.importorskip("brax")
    from brax.envs.fast import Fast

    from podracer.core.envs.brax import BraxEnv
    from podracer.core.types import Box

    spec = envs.make("brax:inverted_pendulum").spec()
    assert spec.observation.shape == (4,) and spec.observation.dtype == jnp.float32
    assert spec.box == Box((-1.0,), (1.0,)) and spec.num_actions == 0

    class Falls(Fast):  # brax's own test environment (cheap to compile), done once it has moved
        def step(self, state, action):
            state = super().step(state, action)
            return state.replace(done=jnp.where(state.obs[0] > 5e-4, 1.0, 0.0))

    env = BraxEnv("falls", env=Falls(), episode_length=5)

    def play(key):  # environment 0 stands still; environment 1 accelerates, and is done at its second step
        state, first = jax.vmap(env.reset)(jax.random.split(key, 2))

        def body(state, _):
            return jax.vmap(env.step)(state, jnp.array([[0.0], [1.0]]))

        return first, jax.lax.scan(body, state, None, length=5)[1]

    first, timesteps = jax.jit(play)(jax.random.key(0))
    assert first.observation.shape == (2, 2) and not first.last.any()
    assert timesteps.observation.shape == (5, 2, 2) and timesteps.reward.dtype == jnp.float32
    last, discount = np.asarray(timesteps.last), np.asarray(timesteps.discount)
    # The time limit truncates: last at step 5 only, discount 1 throughout.
    assert last[:, 0].tolist() == [False] * 4 + [True] and discount[:, 0].tolist() == [1.0] * 5
    # brax's done terminates before the limit: last with discount 0.
    assert last[:2, 1].tolist() == [False, True] and discount[:2, 1].tolist() == [1.0, 0.0]
    with pytest.raises(
        ValueError,
        match=r"^--env brax:inverted_pendulm: unknown brax environment\. Did you mean "
        r"brax:inverted_pendulum",
    ):
        envs.make("brax:inverted_pendulm")


def test_registered_names_are_spelled_one_way_everywhere(monkeypatch):
    monkeypatch.setattr(envs, "_JAX_ENVS", dict(envs._JAX_ENVS))  # the registry as it was, after the test
    envs.register("pgx-tic_tac_toe", lambda **kw: envs.Catch(rows=5, columns=3, **kw))
    assert "pgx-tic-tac-toe" in envs.names()
    for spelling in ("pgx-tic_tac_toe", "PGX-Tic-Tac-Toe", "pgx_tic_tac_toe"):
        assert isinstance(envs.make(spelling), envs.Catch)
    assert parser.parse(AnakinConfig, ["--env", "pgx_tic_tac_toe"]).env == "pgx_tic_tac_toe"
    with pytest.raises(ValueError, match=r"lazy environment target is 'package.module:Factory', got 'nocolon'"):
        envs.register("broken", "nocolon")
    envs.register("missing", "no_such_package_here:make")  # nothing imported until it is made
    assert parser.parse(AnakinConfig, ["--env", "missing"]).env == "missing"
    with pytest.raises(ValueError, match=r"^Cannot load the environment 'no_such_package_here:make': No module named"):
        envs.make("missing")


def _random_legal_returns(env, num_envs: int, steps: int, seed: int = 0):
    """Episode returns of random legal moves on ``env`` (podracer's wrappers), and each step's seat and turn."""
    from podracer.core.envs.pgx import random_legal_move

    wrapped = envs.wrap(env)

    def play(key):
        state, first = jax.vmap(wrapped.reset)(jax.random.split(key, num_envs))

        def step(carry, key):
            state, timestep = carry
            actions = jax.vmap(random_legal_move)(
                timestep.observation, timestep.action_mask, jax.random.split(key, num_envs)
            )
            legal = jnp.take_along_axis(timestep.action_mask, actions[:, None], axis=1)[:, 0]
            state, timestep = jax.vmap(wrapped.step)(state, actions)
            return (state, timestep), (timestep.reward, timestep.last, legal)

        return jax.lax.scan(step, (state, first), jax.random.split(key, steps))

    (state, _), (rewards, last, legal) = jax.jit(play)(jax.random.key(seed))
    returns, finished = np.zeros(num_envs), []
    for reward, done in zip(np.asarray(rewards), np.asarray(last)):
        returns += reward
        finished += returns[done].tolist()
        returns[done] = 0.0
    return np.array(finished), np.asarray(legal)


@pytest.mark.suite("pgx")
def test_pgx_two_player_games_against_random_legal_moves():
    from podracer.core.types import EnvSpec, ImageLayout

    env = envs.make("pgx:tic_tac_toe")
    assert env.spec() == EnvSpec(
        jax.ShapeDtypeStruct((3, 3, 2), jnp.float32), num_actions=9, image=ImageLayout(-1, 0.0, 1.0), action_mask=True
    )
    assert env.opponent_name == "random legal moves"
    # The agent's seat is drawn each episode; playing second, it first sees the opponent's opening move.
    states, first = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 64))
    assert set(np.asarray(states[1]).tolist()) == {0, 1}
    np.testing.assert_array_equal(np.asarray(states[0].current_player), np.asarray(states[1]))  # the agent's turn
    marks = np.asarray(first.observation).sum(axis=(1, 2, 3))
    assert set(marks.tolist()) == {0.0, 1.0}  # it plays first or second
    np.testing.assert_array_equal(np.asarray(first.action_mask).sum(axis=1), 9 - marks)
    # Every time step hands the turn back to the agent (or ends the game); returns are +1, 0 or -1.
    returns, legal = _random_legal_returns(env, 64, 30)
    assert legal.all() and len(returns) > 100 and set(returns.tolist()) <= {-1.0, 0.0, 1.0}
    assert {-1.0, 1.0} <= set(returns.tolist())
    with pytest.raises(
        ValueError, match=r"^--env pgx:tic_tac_to: unknown pgx environment\. Did you mean pgx:tic_tac_toe"
    ):
        envs.make("pgx:tic_tac_to")


@pytest.mark.slow
@pytest.mark.suite("pgx")
def test_pgx_2048_with_ppo_beats_random_legal_play_on_most_seeds(devices, optimized_xla):
    """The bar: masked PPO beats random play that makes legal moves only, measured on the same environment."""
    from podracer import anakin
    from podracer.core import agents, learner

    env = envs.make("pgx:2048")
    random_returns, _ = _random_legal_returns(env, 32, 300)
    agent = agents.make("ppo", env.spec(), hidden_sizes=(64,), num_minibatches=2)
    result = anakin.run(
        anakin.anakin_plan(
            num_envs_per_device=8, rollout_length=32, num_updates=100, updates_per_call=50, devices=devices[:2]
        ),
        agent._replace(optimizer=learner.make_optimizer(3e-4, 0.5)),
        anakin.init(
            env, agent, learner.make_optimizer(3e-4, 0.5), anakin.seed_keys(0, 3), 8, devices[:2], rollout_length=32
        ),
        env=env,
    )
    finals = result.history[-1]["episode_return_per_seed"]  # 2,635-3,039 here (AMD EPYC); random about 1,060
    assert sum(f >= 1.5 * random_returns.mean() for f in finals) >= 2, (finals, random_returns.mean())


@pytest.mark.slow
@pytest.mark.suite("navix")
def test_navix_grid_worlds_keep_termination_apart_and_ppo_solves_empty_5x5(devices, optimized_xla):
    from podracer import anakin
    from podracer.core import agents, learner

    env = envs.make("navix:Empty-5x5")
    assert env.name == "Navix-Empty-5x5-v0" and envs.make("navix:Navix-Empty-5x5-v0").name == env.name
    spec = env.spec()
    assert spec.observation.shape == (5, 5, 3) and spec.num_actions == 7 and spec.image.channel_axis == -1
    assert not spec.action_mask
    state, first = env.reset(jax.random.key(0))
    assert not bool(first.last)
    # Standing still (action 6, "done") until the time limit: a truncation.
    _, timesteps = jax.jit(lambda state: jax.lax.scan(lambda s, _: env.step(s, jnp.int32(6)), state, length=100))(state)
    assert np.asarray(timesteps.last).tolist() == [False] * 99 + [True] and float(timesteps.discount[-1]) == 1.0
    with pytest.raises(ValueError, match=r"^--env navix:Empty-5x: unknown navix environment"):
        envs.make("navix:Empty-5x")
    agent = agents.make("ppo", spec, hidden_sizes=(64,), num_minibatches=2)
    result = anakin.run(
        anakin.anakin_plan(
            num_envs_per_device=8, rollout_length=32, num_updates=40, updates_per_call=20, devices=devices[:2]
        ),
        agent._replace(optimizer=learner.make_optimizer(3e-3, 0.5)),
        anakin.init(
            env, agent, learner.make_optimizer(3e-3, 0.5), anakin.seed_keys(0, 3), 8, devices[:2], rollout_length=32
        ),
        env=env,
    )
    finals = result.history[-1]["episode_return_per_seed"]
    assert sum(f >= 0.9 for f in finals) >= 2, finals


@pytest.mark.slow
@pytest.mark.suite("pgx")
def test_a_pgx_game_against_a_fixed_snapshot_of_an_earlier_agent(tmp_path, capsys):
    """Sebulba trains against random legal moves, named in its banner and every record; its checkpoint then plays
    as a fixed opponent. (Anakin names the opponent the same way, from the same environment attribute.)"""
    from podracer.core.agents import PPOConfig
    from podracer.core.envs.pgx import PgxEnv
    from podracer.run.evaluate import snapshot_opponent

    compose.run_sebulba(
        SebulbaConfig(
            env="pgx:tic_tac_toe",
            agent=PPOConfig().replace(hidden_sizes=(16,)),
            total_env_steps=64,
            num_envs_per_actor=4,
            rollout_length=4,
            actor_devices=(0,),
            learner_devices=(1,),
            log_every=1,
            log_dir=str(tmp_path / "logs"),
            checkpoint_dir=str(tmp_path / "v1"),
        )
    )
    assert "ppo on jax:pgx:tic_tac_toe against random legal moves;" in capsys.readouterr().out
    records = [json.loads(line) for line in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert records and all(record["opponent"] == "random legal moves" for record in records)
    opponent = snapshot_opponent(str(tmp_path / "v1"))
    env = PgxEnv("tic_tac_toe", opponent=opponent)
    assert re.fullmatch(rf"the greedy ppo of {re.escape(str(tmp_path / 'v1'))} \(step \d+\)", env.opponent_name)
    returns, legal = _random_legal_returns(env, 16, 20)
    assert legal.all() and len(returns) > 10 and set(returns.tolist()) <= {-1.0, 0.0, 1.0}
    step = max(int(p.stem.removeprefix("step_")) for p in (tmp_path / "v1").glob("step_*.json"))
    shutil.copytree(tmp_path / "v1", tmp_path / "catch")  # the same checkpoint, as if of a run on catch
    metadata = json.loads((tmp_path / "catch" / f"step_{step}.json").read_text())
    (tmp_path / "catch" / f"step_{step}.json").write_text(json.dumps({**metadata, "env": "catch"}))
    with pytest.raises(ValueError, match=r"holds a run on 'catch', not a pgx game"):
        snapshot_opponent(str(tmp_path / "catch"))
