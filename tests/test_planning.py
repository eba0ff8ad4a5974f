"""Planning with the game's own rules: Gumbel AlphaZero (mctx) on pgx's boards, self-play, and the baseline players
(random legal, one-step greedy, perfect tic-tac-toe) that evaluations play against."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, envs
from podracer.core import anakin as core
from podracer.run.play import make_evaluate


def _positions(game: str, num: int, moves: int, seed: int = 0):
    """``num`` positions of ``game`` after up to ``moves`` random legal moves (games that ended restart): pgx states
    where some player is to move, stacked."""
    import pgx

    env = pgx.make(game)

    def one(key):
        keys = jax.random.split(key, moves + 1)
        state = env.init(keys[0])

        def move(state, key):
            choose, restart = jax.random.split(key)
            action = jax.random.categorical(choose, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))
            stepped = env.step(state, action)
            over = stepped.terminated | stepped.truncated
            return jax.tree.map(lambda a, b: jnp.where(over, a, b), env.init(restart), stepped), None

        return jax.lax.scan(move, state, keys[1:])[0]

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), num))


def _act(agent, params, env, games):
    """The agent's search at ``games`` (pgx states, the player to move being the agent's seat)."""
    num = games.current_player.shape[0]
    state = (games, games.current_player, jax.random.split(jax.random.key(1), num))
    model = env.search_model()
    return jax.jit(
        lambda p, g, s, k: agent.act(
            p,
            g.observation.astype(jnp.float32),
            k,
            (),
            jnp.zeros(num, bool),
            action_mask=g.legal_action_mask,
            model=model,
            env_state=s,
        )
    )(params, games, state, jax.random.key(2))


@pytest.mark.suite("pgx")
@pytest.mark.parametrize("game", ["tic_tac_toe", "connect_four", "othello"])
def test_every_search_plays_and_weighs_only_legal_moves(game):
    env = envs.make(f"pgx:{game}")
    agent = agents.make("alphazero", env.spec(), num_simulations=8)
    games = _positions(game, 64, 12)
    params = agent.init(jax.random.key(0), games.observation.astype(jnp.float32))
    action, extras, _ = _act(agent, params, env, games)
    legal = np.asarray(games.legal_action_mask)
    chosen = np.take_along_axis(legal, np.asarray(action)[:, None], axis=1)[:, 0]
    greedy = np.take_along_axis(legal, np.asarray(extras["greedy"])[:, None], axis=1)[:, 0]
    assert chosen.all() and greedy.all()
    weights = np.asarray(extras["policy_target"])
    assert (weights[~legal] == 0).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)
    assert legal.sum(axis=1).min() < legal.shape[1]  # the positions had illegal moves to avoid


@pytest.mark.parametrize("rescale", [False, True])
def test_the_search_tries_an_opponents_winning_reply_unless_q_values_are_rescaled(rescale):
    """A traced tic-tac-toe loss, as a tree of six nodes. Our move A lets the opponent win at once with a reply whose
    prior is 36 % (its other reply, 64 %, leads to a draw the network values a hair above its own estimate); move B
    draws. Min-max rescaling each node's Q-values (mctx's default) turns that hair into the whole range, and Gumbel
    MuZero's deterministic selection never tries the winning reply, so the search plays A; without it (AlphaZero's
    default, --no-rescale-values) the reply is tried and the search plays B."""
    import mctx

    from podracer.core.agents.alphazero import AlphaZeroConfig
    from podracer.core.agents.search import completed_q, gumbel_search

    nxt = jnp.array([[1, 2], [3, 4], [5, 5], [5, 5], [5, 5], [5, 5]])  # node, action -> node
    reward = jnp.zeros((6, 2)).at[1, 1].set(1.0)  # the mover's: the opponent's winning reply
    discount = jnp.array([[-1.0, -1.0], [-1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    prior = jnp.zeros((6, 2)).at[1].set(jnp.log(jnp.array([0.64, 0.36])))
    value = jnp.array([0.0, -0.142, 0.0, -0.01, 0.0, 0.0])  # for the player to move at the node

    def recurrent_fn(params, key, action, node):
        following = nxt[node, action]
        stop = discount[node, action] == 0.0
        output = mctx.RecurrentFnOutput(
            reward=reward[node, action],
            discount=discount[node, action],
            prior_logits=prior[following],
            value=jnp.where(stop, 0.0, value[following]),
        )
        return output, following

    root = mctx.RootFnOutput(prior_logits=prior[:1], value=value[:1], embedding=jnp.zeros(1, jnp.int32))
    config = AlphaZeroConfig(num_simulations=64, gumbel_scale=0.0, rescale_values=rescale)
    _, extras = jax.jit(
        lambda key: gumbel_search(config, (), key, root, recurrent_fn, prior[:1], None, completed_q(config))
    )(jax.random.key(0))
    assert int(extras["greedy"][0]) == (0 if rescale else 1)
    assert not AlphaZeroConfig().rescale_values


@pytest.mark.suite("pgx")
def test_random_moves_replace_the_searchs_move_at_their_rate_and_leave_its_targets():
    """--random-move-prob p: about p of the moves played are uniformly random legal ones, the rest the search's own
    (the same as without the flag); the policy target and the greedy move are the search's either way."""
    env = envs.make("pgx:connect_four")
    games = _positions("connect_four", 512, 10)
    plain = agents.make("alphazero", env.spec(), num_simulations=8)
    params = plain.init(jax.random.key(0), games.observation.astype(jnp.float32))
    searched, extras, _ = _act(plain, params, env, games)
    for prob in (0.3, 1.0):
        agent = agents.make("alphazero", env.spec(), num_simulations=8, random_move_prob=prob)
        action, moved_extras, _ = _act(agent, params, env, games)
        np.testing.assert_array_equal(moved_extras["greedy"], extras["greedy"])
        np.testing.assert_array_equal(moved_extras["policy_target"], extras["policy_target"])
        legal = np.asarray(games.legal_action_mask)
        assert np.take_along_axis(legal, np.asarray(action)[:, None], axis=1).all()
        changed = np.mean(np.asarray(action) != np.asarray(searched))
        # a random move is the search's own with chance 1/legal moves (about 1/7 here)
        assert prob * 0.6 < changed <= prob * 0.95 + 0.05, (prob, changed)
    counts = np.bincount(np.asarray(action), minlength=7)  # prob 1: every column about equally often
    assert counts.min() > 0.5 * counts.mean(), counts
    with pytest.raises(ValueError, match=r"^--random-move-prob must be in \[0, 1\], got 1.5\.$"):
        agents.make("alphazero", env.spec(), random_move_prob=1.5)


@pytest.mark.suite("pgx")
def test_the_search_finds_a_win_in_one_and_blocks_a_loss_in_one_with_an_untrained_network():
    import pgx

    game = pgx.make("tic_tac_toe")

    def position(moves):
        state = game.init(jax.random.key(0))
        for a in moves:
            state = game.step(state, a)
        return state

    # X at 0 and 1, O at 3 and 4, X to move: 2 wins. X at 0 and 1, O at 4, O to move: 2 blocks.
    games = jax.tree.map(lambda *xs: jnp.stack(xs), position([0, 3, 1, 4]), position([0, 4, 1]))
    env = envs.make("pgx:tic_tac_toe")
    agent = agents.make("alphazero", env.spec(), num_simulations=64, gumbel_scale=0.0)
    params = agent.init(jax.random.key(0), games.observation.astype(jnp.float32))
    _, extras, _ = _act(agent, params, env, games)
    np.testing.assert_array_equal(np.asarray(extras["greedy"]), [2, 2])


@pytest.mark.suite("pgx")
def test_self_play_steps_are_single_moves_with_the_movers_reward_and_a_sign_flip_between_players():
    env = envs.make("pgx:tic_tac_toe", opponent="self")
    assert env.opponent_name == "itself (self-play)"
    wrapped = envs.wrap(env)
    # X: 0, 1, 2 (wins on the fifth move); O: 3, 4.
    state, timestep = wrapped.reset(jax.random.key(0))
    rewards, discounts, lasts = [], [], []
    for action in (0, 3, 1, 4, 2):
        state, timestep = wrapped.step(state, jnp.int32(action))
        rewards.append(float(timestep.reward))
        discounts.append(float(timestep.discount))
        lasts.append(bool(timestep.last))
    assert rewards == [0.0, 0.0, 0.0, 0.0, 1.0]  # the winner moved last
    assert discounts == [-1.0, -1.0, -1.0, -1.0, 0.0]
    assert lasts == [False] * 4 + [True]
    # Evaluations of a self-play run play against random legal moves.
    assert envs.wrappers.for_evaluation(env).opponent_name == "random legal moves"


@pytest.mark.suite("pgx")
def test_the_baseline_players():
    from podracer.core.envs.pgx import PgxEnv, perfect_tic_tac_toe

    # Perfect play never loses to random legal moves, and draws against itself.
    perfect = PgxEnv("tic_tac_toe", opponent="perfect")
    assert perfect._choose is not None and perfect.opponent is perfect_tic_tac_toe
    from podracer.run.play import make_random_play

    returns = np.asarray(jax.jit(make_random_play(perfect, 512))(jax.random.key(0)))  # random legal moves vs perfect
    assert returns.max() <= 0.0 and (returns == -1.0).mean() > 0.5
    # One-step greedy takes a win in one: X at 0 and 1, O at 3 and 4, X to move.
    import pgx

    from podracer.core.envs.pgx import one_step_greedy

    game = pgx.make("tic_tac_toe")
    state = game.init(jax.random.key(0))
    for a in (0, 3, 1, 4):
        state = game.step(state, a)
    picks = jax.vmap(lambda k: one_step_greedy(game, state, k))(jax.random.split(jax.random.key(0), 16))
    assert set(np.asarray(picks).tolist()) == {2}
    assert PgxEnv("connect_four", opponent="greedy").opponent_name == "one-step greedy moves"
    with pytest.raises(ValueError, match=r"^--opponent perfect: perfect play is known for pgx:tic_tac_toe only"):
        PgxEnv("connect_four", opponent="perfect")
    with pytest.raises(ValueError, match=r"^--opponent: pgx:2048 has 1 player\(s\); an opponent is for two\.$"):
        PgxEnv("2048", opponent="self")


def test_planning_needs_an_environment_with_rules_to_search_and_runs_in_anakin():
    env = envs.make("catch")
    agent = agents.make("alphazero", env.spec(), num_simulations=2)
    with pytest.raises(ValueError, match=r"^--agent alphazero plans with the environment's own rules, and Catch has"):
        core.init_state(env, agent, agent.optimizer, jax.random.key(0), 4)
    from podracer.run.sebulba.actor import make_act

    with pytest.raises(ValueError, match=r"^--agent alphazero searches with a JAX environment's own rules: it trains"):
        make_act(agent)
    from podracer.run import compose
    from podracer.run.config import AnakinConfig

    with pytest.raises(ValueError, match=r"^--opponent self: only two-player games \(pgx:NAME, e\.g\."):
        compose.make_env(AnakinConfig(env="catch", opponent="self"))


@pytest.mark.suite("pgx")
def test_alphazero_trains_in_self_play_and_its_evaluation_plays_random_legal_moves():
    env = envs.make("pgx:tic_tac_toe", opponent="self")
    agent = agents.make("alphazero", env.spec(), num_simulations=4)
    state = core.init_state(env, agent, agent.optimizer, jax.random.key(0), 8, rollout_length=4)
    update = jax.jit(core.make_update(env, agent, agent.optimizer, rollout_length=4, axis_names=()))
    before = state.learner.params
    for _ in range(3):
        state, metrics = update(state)
    assert np.isfinite(float(metrics["loss"])) and float(metrics["policy_loss"]) > 0.0
    changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), before, state.learner.params)
    assert all(jax.tree.leaves(changed))
    returns = jax.jit(make_evaluate(env, agent, 16))(state.learner.params, jax.random.key(0))
    assert set(np.asarray(returns).tolist()) <= {-1.0, 0.0, 1.0}


@pytest.mark.slow
@pytest.mark.suite("pgx")
def test_alphazero_in_self_play_beats_random_play_at_tic_tac_toe_on_most_seeds():
    """The bar, measured on the same game: random legal play wins 42 % against random legal moves (4,096 games).
    Three seeds vmapped in one program, 200 updates of 32 self-play games x 16 moves (102k moves per seed), 16
    simulations; 256 greedy games per seed. Seeds 0-2 and 10-12 (2-core AMD EPYC, 2026-11-30): wins 73-94 % (76,
    77, 91 and 73, 94, 74); at 400 updates and 32 simulations, as the test ran before (a quarter of the search's
    work now), tuning seeds 0-2 and 10-12 won 73-89 % (2-core Xeon). Issue 40's bar (never a loss to random legal
    moves, 90 % draws against perfect play) takes ten times the moves and more noise: benchmarks/alphazero_boards.py,
    docs/agents.md."""
    from podracer.core.envs.pgx import PgxEnv

    env = PgxEnv("tic_tac_toe", opponent="self")
    agent = agents.make("alphazero", env.spec(), num_simulations=16, torso="mlp")
    keys = jnp.stack([jax.random.key(seed) for seed in (10, 11, 12)])
    init = jax.vmap(lambda key: core.init_state(env, agent, agent.optimizer, key, 32, rollout_length=16))
    update = core.make_update(env, agent, agent.optimizer, rollout_length=16, axis_names=())
    call = jax.jit(jax.vmap(lambda state: jax.lax.scan(lambda s, _: update(s), state, None, length=50)))
    state = jax.jit(init)(keys)
    for _ in range(4):
        state, metrics = call(state)
    assert np.isfinite(np.asarray(metrics["loss"])).all()

    def outcomes(opponent):
        evaluate = make_evaluate(PgxEnv("tic_tac_toe", opponent=opponent), agent, 256)
        returns = np.asarray(jax.jit(jax.vmap(evaluate, in_axes=(0, None)))(state.learner.params, jax.random.key(7)))
        return (returns > 0).mean(axis=1), (returns == 0).mean(axis=1)

    wins, _ = outcomes("random")
    assert (wins >= 0.65).sum() >= 2, wins


def test_elo_fit_recovers_the_odds_and_is_anchored_at_random_play():
    from podracer.run.ladder import fit_elo

    # A scores 75 % against random play (3 to 1: 400 log10 3 = 190.8 Elo), B 75 % against A, 90 % against random.
    elo = fit_elo(3, [(1, 0, 0.75, 10_000), (2, 1, 0.75, 10_000), (2, 0, 0.9, 10_000)])
    assert elo[0] == 0.0 and 185 < elo[1] < 197 and 370 < elo[2] < 390
    # One player won every game: the virtual draw keeps the rating finite, and more wins rate higher.
    few, many = fit_elo(2, [(1, 0, 1.0, 10)])[1], fit_elo(2, [(1, 0, 1.0, 100)])[1]
    assert np.isfinite(many) and 0 < few < many


@pytest.mark.suite("pgx")
def test_a_match_seats_each_player_first_in_half_the_games_and_the_ladder_rates_its_snapshots():
    from podracer.run import ladder

    env = envs.make("pgx:tic_tac_toe")
    agent = agents.make("alphazero", env.spec(), num_simulations=32, hidden_sizes=(16,))
    params = agent.init(jax.random.key(0), jnp.zeros((1, *env.spec().observation.shape)))
    # Random play against itself: the first mover wins more (random tic-tac-toe: about 58 % of games, the second 29 %).
    outcome = ladder.match("tic_tac_toe", agent, ladder.RANDOM, ladder.RANDOM, 512, jax.random.key(1))
    assert set(np.unique(outcome)) <= {-1.0, 0.0, 1.0}
    first, second = outcome[0::2], outcome[1::2]  # A moved first in the even games
    assert first.mean() > 0.1 and second.mean() < -0.1
    # A search of the true rules with an untrained network beats random play; the ladder rates it above 0.
    elo, matches = ladder.ladder("tic_tac_toe", agent, [params, params], 64, jax.random.key(2))
    assert [(m["player"], m["opponent"]) for m in matches] == [(1, 0), (2, 0), (2, 1)]
    assert all(m["wins"] + m["draws"] + m["losses"] == 64 for m in matches)
    assert elo.shape == (2,) and (elo > 0).all()
    with pytest.raises(ValueError, match=r"^A match has an even number of games \(each player first in half\), got 3"):
        ladder.match("tic_tac_toe", agent, params, ladder.RANDOM, 3, jax.random.key(0))


def _fake_baseline(directory, game="othello"):
    """A file in the format of pgx's baseline models (pgx's own AlphaZero network, made small and untrained), as
    ``pgx.make_baseline_model`` leaves it in its download directory."""
    import pickle

    import haiku as hk
    import pgx
    from pgx._src.baseline import _create_az_model_v0

    env = pgx.make(game)
    args = {"num_actions": env.num_actions, "num_channels": 4, "num_layers": 1, "resnet_v2": True}

    def forward(x, is_eval=False):  # as pgx's: training mode at init makes the batch norms' moving averages
        return _create_az_model_v0(**args)(x, is_training=not is_eval, test_local_stats=False)

    forward = hk.without_apply_rng(hk.transform_with_state(forward))
    params, state = forward.init(jax.random.key(1), env.init(jax.random.key(0)).observation[None])
    with open(directory / f"{game}_v0.ckpt", "wb") as f:
        pickle.dump({"args": args, "params": params, "state": state}, f)


@pytest.mark.suite("pgx")
def test_pgx_baseline_models_are_read_from_a_local_directory_and_play_legal_moves(tmp_path):
    pytest.importorskip("haiku")
    from podracer.core.envs.pgx import baseline_opponent
    from podracer.run.evaluate import EvaluateConfig

    with pytest.raises(
        ValueError, match=r"^--baseline-dir: no othello_v0\.ckpt in .* fetches it; copy DIR's file here\)\.$"
    ):
        baseline_opponent("othello", str(tmp_path))
    with pytest.raises(
        ValueError, match=r"^--opponent baseline: pgx has baseline models for animal_shogi, .*, not tic_tac_toe\.$"
    ):
        baseline_opponent("tic_tac_toe", str(tmp_path))
    with pytest.raises(ValueError, match=r"^--opponent baseline and --baseline-dir DIR go together"):
        EvaluateConfig(checkpoint="runs/x", opponent="baseline")
    (tmp_path / "othello_v0.ckpt").write_bytes(b"\x80\x04not a pickle")  # a corrupt file: one line, no traceback
    with pytest.raises(
        ValueError, match=r"^--baseline-dir: .*othello_v0\.ckpt is not pgx's baseline model othello_v0 \(Unpickling"
    ):
        baseline_opponent("othello", str(tmp_path))
    _fake_baseline(tmp_path)
    opponent = baseline_opponent("othello", str(tmp_path))
    assert opponent.__name__ == "pgx's baseline model othello_v0 (greedy)"
    games = _positions("othello", 32, 20)
    moves = jax.jit(jax.vmap(opponent))(
        games.observation, games.legal_action_mask, jax.random.split(jax.random.key(0), 32)
    )
    assert np.take_along_axis(np.asarray(games.legal_action_mask), np.asarray(moves)[:, None], axis=1).all()
    # A game against it, as `podracer evaluate --opponent baseline --baseline-dir DIR` plays one.
    env = envs.wrap(envs.make("pgx:othello", opponent=opponent))
    state, timestep = env.reset(jax.random.key(3))
    assert timestep.action_mask.any()


@pytest.mark.suite("pgx")
def test_evaluate_plays_a_planning_checkpoint_with_the_search_settings_it_is_given(tmp_path, monkeypatch, capsys):
    """``podracer evaluate --num-simulations N --gumbel-scale G`` plays with that search (a figure measured at 256
    simulations is reproduced at 256, not at training's 32); an agent that does not search refuses them in one line."""
    import podracer
    from podracer.cli import evaluate as evaluate_command

    cpu = str(len(jax.devices("cpu")))
    podracer.train(
        env="pgx:tic_tac_toe",
        agent="alphazero",
        num_updates=1,
        updates_per_call=1,
        num_envs_per_device=2,
        rollout_length=4,
        num_simulations=2,
        hidden_sizes=[8],
        cpu_devices=cpu,
        log_dir=str(tmp_path / "az"),
    )
    podracer.train(env="catch", agent="ppo", num_updates=1, updates_per_call=1, num_envs_per_device=2,
                   cpu_devices=cpu, log_dir=str(tmp_path / "ppo"))  # fmt: skip
    made, real = [], agents.make
    monkeypatch.setattr(agents, "make", lambda config, *a, **k: made.append(config) or real(config, *a, **k))
    argv = ["--checkpoint", str(tmp_path / "az" / "checkpoint"), "--episodes", "2", "--greedy", "--opponent", "perfect"]
    assert evaluate_command.main([*argv, "--num-simulations", "8", "--gumbel-scale", "0"], name="evaluate") == 0
    assert (made[-1].num_simulations, made[-1].gumbel_scale) == (8, 0.0)
    assert evaluate_command.main(argv, name="evaluate") == 0
    assert (made[-1].num_simulations, made[-1].gumbel_scale) == (2, 1.0)  # the run's
    capsys.readouterr()
    refused = ["--checkpoint", str(tmp_path / "ppo" / "checkpoint"), "--num-simulations", "8"]
    assert evaluate_command.main(refused, name="evaluate") == 2
    assert capsys.readouterr().err == (
        "evaluate: error: --num-simulations: the checkpoint holds a ppo agent, which does not search (planning "
        "agents: alphazero, muzero).\n"
    )
    huge = [*argv, "--num-simulations", "100000000"]  # refused before the search is traced
    assert evaluate_command.main(huge, name="evaluate") == 2
    err = capsys.readouterr().err
    assert err.startswith("evaluate: error: the search needs about "), err
    assert "of memory for its trees (--episodes 2, --num-simulations 100,000,000) and this process has " in err


def test_the_search_trees_size_is_known_from_the_settings_alone():
    """``search.tree_bytes`` (what the memory checks of training, evaluate and preview refuse a search by) equals the
    bytes of the arrays of the tree mctx's Gumbel search really holds, node embeddings included."""
    import mctx

    from podracer.core.agents.search import tree_bytes
    from podracer.run import checkpoint

    batch, actions, simulations = 3, 5, 7
    embedding = {"board": jnp.zeros((batch, 4, 2), jnp.float32), "turn": jnp.zeros((batch,), jnp.int32)}

    def recurrent(params, key, action, embedding):
        del params, key, action
        zeros = jnp.zeros((batch,), jnp.float32)
        logits = jnp.zeros((batch, actions), jnp.float32)
        return mctx.RecurrentFnOutput(reward=zeros, discount=zeros + 1, prior_logits=logits, value=zeros), embedding

    root = mctx.RootFnOutput(prior_logits=jnp.zeros((batch, actions)), value=jnp.zeros((batch,)), embedding=embedding)
    out = mctx.gumbel_muzero_policy((), jax.random.key(0), root, recurrent, num_simulations=simulations)
    tree = out.search_tree
    fields = (
        "node_visits",
        "raw_values",
        "node_values",
        "parents",
        "action_from_parent",
        "children_index",
        "children_prior_logits",
        "children_visits",
        "children_rewards",
        "children_discounts",
        "children_values",
        "embeddings",
    )  # fmt: skip  (mctx.Tree's, as its docstring lists them)
    held = checkpoint.tree_bytes([getattr(tree, name) for name in fields])
    per_node = checkpoint.tree_bytes(embedding) // batch
    assert tree.node_visits.shape == (batch, simulations + 1)
    assert tree_bytes(simulations, batch, actions, per_node) == held


@pytest.mark.suite("pgx")
def test_a_search_too_large_for_memory_is_refused_before_it_is_traced(capsys):
    """AlphaZero with 10^8 simulations: training says what its trees need in one line (tracing such a search would
    take minutes: mctx lays out its visit schedule in Python)."""
    from podracer.cli import command as cli

    argv = ["anakin", "--agent", "alphazero", "--env", "pgx:tic_tac_toe", "--num-simulations", "100000000",
            "--num-updates", "20", "--no-log-dir", "--cpu-devices", str(len(jax.devices("cpu")))]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("podracer anakin: error: the search needs about "), err
    assert (
        "TB of memory for its trees (64 envs per device (--num-envs-per-device, --num-envs), --num-simulations "
        "100,000,000) and this process has "
        in err
        and err.endswith(" available; lower them.\n")
    )
