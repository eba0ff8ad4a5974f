import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.core import agents, learner
from podracer.core.types import Box, EnvSpec
from podracer.core.networks import ActorCritic, QNetwork
from podracer.core.types import ImageLayout, TimeStep, Trajectory

ATARI = EnvSpec(jax.ShapeDtypeStruct((4, 84, 84), jnp.uint8), 6)


@pytest.mark.parametrize("torso, params", [("impala", 1_091_031), ("nature", 1_687_719)])
def test_image_torsos_take_stacked_uint8_frames_with_any_batch_axes(torso, params):
    net = ActorCritic(num_actions=6, obs_rank=3, torso=torso)
    obs = jnp.zeros((2, 3, 4, 84, 84), jnp.uint8)
    variables = net.init(jax.random.key(0), obs)
    assert sum(x.size for x in jax.tree.leaves(variables)) == params
    logits, value = net.apply(variables, obs)
    assert logits.shape == (2, 3, 6) and value.shape == (2, 3)
    np.testing.assert_allclose(net.apply(variables, obs, method="policy"), logits, rtol=1e-6)


def test_mlp_torsos_and_bad_torso_choices():
    obs = jnp.ones((5, 10, 5))
    separate = ActorCritic(num_actions=3, obs_rank=2)
    variables = separate.init(jax.random.key(0), obs)
    assert set(variables["params"]) == {"policy_torso", "value_torso", "policy_head", "value_head"}
    logits, value = separate.apply(variables, obs)
    assert logits.shape == (5, 3) and value.shape == (5,)
    with pytest.raises(ValueError, match=r"The 'impala' torso needs image observations \(rank 3\), got rank 2\."):
        ActorCritic(num_actions=3, obs_rank=2, torso="impala").init(jax.random.key(0), obs)
    with pytest.raises(ValueError, match=r"Unknown torso 'resnet'"):
        ActorCritic(num_actions=3, obs_rank=2, torso="resnet").init(jax.random.key(0), obs)


def test_the_activation_flag_reaches_the_actor_critic_mlps():
    """``--activation relu`` (gymnax-blines' MinAtar networks) builds ReLU MLPs: the same parameters give relu's
    outputs, where tanh's differ."""
    from podracer.cli import parser
    from podracer.core.agents.ppo import PPOConfig

    spec = EnvSpec(jax.ShapeDtypeStruct((7,), jnp.float32), 3)
    cfg = parser.parse(PPOConfig, ["--activation", "relu", "--hidden-sizes", "16"], prog="test")
    relu_net, tanh_net = (
        agents.make_network(spec, cfg),
        agents.make_network(spec, PPOConfig().replace(hidden_sizes=(16,))),
    )
    obs = jax.random.normal(jax.random.key(1), (4, 7))
    variables = relu_net.init(jax.random.key(0), obs)
    torso = variables["params"]["policy_torso"]["Dense_0"]
    hidden = obs @ torso["kernel"] + torso["bias"]
    head = variables["params"]["policy_head"]
    logits = relu_net.apply(variables, obs)[0]
    np.testing.assert_allclose(logits, jax.nn.relu(hidden) @ head["Dense_0"]["kernel"] + head["Dense_0"]["bias"], 1e-5)
    assert not np.allclose(tanh_net.apply(variables, obs)[0], logits)


@pytest.mark.parametrize("core", ["none", "lstm"])
def test_the_kernel_init_flag_gives_flax_default_kernels_to_every_mlp_and_head(core):
    """``--kernel-init lecun`` (gymnax-blines' networks, flax's Dense default): every MLP and head kernel is LeCun
    normal, variance 1 / fan-in, where ``orthogonal`` scales a policy head by 0.01 and a hidden layer by sqrt(2)."""
    from podracer.cli import parser
    from podracer.core.agents.a2c import A2CConfig
    from podracer.core.agents.ppo import PPOConfig

    spec = EnvSpec(jax.ShapeDtypeStruct((256,), jnp.float32), 3)
    args = ["--kernel-init", "lecun", "--hidden-sizes", "256", "--core", core]
    lecun = parser.parse(PPOConfig, args, prog="test")
    obs = jnp.zeros((1, 256))
    inputs = (obs, jnp.ones((1,), bool), (jnp.zeros((1, 128)), jnp.zeros((1, 128)))) if core == "lstm" else (obs,)

    def kernels(cfg):
        params = agents.make_network(spec, cfg).init(jax.random.key(0), *inputs)["params"]
        flat = jax.tree_util.tree_flatten_with_path(params)[0]
        named = {jax.tree_util.keystr(path): leaf for path, leaf in flat if path[-1].key == "kernel"}
        return {name: leaf for name, leaf in named.items() if "core" not in name}  # the LSTM cell is flax's own

    lecun_kernels, orthogonal_kernels = kernels(lecun), kernels(PPOConfig().replace(hidden_sizes=(256,), core=core))
    assert lecun_kernels.keys() == orthogonal_kernels.keys() and any("policy_head" in k for k in lecun_kernels)
    for name, kernel in lecun_kernels.items():
        fan_in = kernel.shape[0]
        assert abs(float(jnp.std(kernel)) * np.sqrt(fan_in) - 1.0) < 0.2, name  # truncated normal, variance 1/fan-in
    head = next(v for k, v in orthogonal_kernels.items() if "policy_head" in k)
    assert float(jnp.max(jnp.abs(head))) < 0.01  # orthogonal(0.01): rows of norm 0.01
    assert parser.parse(A2CConfig, ["--kernel-init", "lecun"], prog="test").network.kernel_init == "lecun"
    with pytest.raises(
        ValueError, match=r"^--kernel-init: unknown initializer 'he'; choose one of orthogonal, lecun, torch\.$"
    ):
        PPOConfig().replace(kernel_init="he")


@pytest.mark.parametrize("core", ["none", "lstm"])
def test_torch_kernel_init_draws_every_mlp_and_head_layer_uniform_within_one_over_root_fan_in_biases_too(core):
    """``--kernel-init torch`` (PyTorch's nn.Linear default: Stable-Baselines3 under ortho_init=False): every MLP and
    head kernel and bias is uniform in +-1/sqrt(fan_in), where the other initializers start biases at zero."""
    from podracer.core.agents.ppo import PPOConfig

    spec = EnvSpec(jax.ShapeDtypeStruct((300,), jnp.float32), box=Box((-1.0,) * 40, (1.0,) * 40))
    obs = jnp.zeros((1, 300))
    inputs = (obs, jnp.ones((1,), bool), (jnp.zeros((1, 128)), jnp.zeros((1, 128)))) if core == "lstm" else (obs,)
    cfg = PPOConfig().replace(kernel_init="torch", hidden_sizes=(200,), core=core)
    params = agents.make_network(spec, cfg).init(jax.random.key(0), *inputs)["params"]
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    layers = {}
    for path, leaf in flat:
        name = jax.tree_util.keystr(path[:-1])
        if "core" not in name and path[-1].key in ("kernel", "bias"):
            layers.setdefault(name, {})[path[-1].key] = np.asarray(leaf)
    assert any("policy_head" in k for k in layers) and any("value_head" in k for k in layers)
    for name, layer in layers.items():
        bound = 1.0 / np.sqrt(layer["kernel"].shape[0])
        for part in ("kernel", "bias"):
            values = layer[part].ravel()
            assert np.all(np.abs(values) <= bound), (name, part)
            if values.size >= 40:  # uniform in +-bound: standard deviation bound / sqrt(3)
                assert abs(values.std() * np.sqrt(3.0) / bound - 1.0) < 0.25, (name, part)
        assert np.any(layer["bias"] != 0), name


def test_cell_actions_give_each_cell_a_logit_from_its_neighbourhood_with_shared_weights():
    image = ImageLayout(channel_axis=-1, low=0.0, high=1.0)
    board = jnp.zeros((7, 8, 3)).at[3, 3].set(jnp.array([1.0, 0.5, 0.25]))
    for net in (
        ActorCritic(num_actions=56, obs_rank=3, image=image, obs_shape=(7, 8, 3), cell_actions=True),
        QNetwork(num_actions=56, obs_rank=3, image=image, obs_shape=(7, 8, 3), cell_actions=True),
    ):
        variables = net.init(jax.random.key(1), board[None])
        out = net.apply(variables, jnp.stack([board, jnp.roll(board, (1, 2), axis=(0, 1))]))
        logits = (out[0] if isinstance(out, tuple) else out).reshape(2, 7, 8)
        assert logits.shape == (2, 7, 8)
        # Translation equivariance: the same pattern one row down and two columns right moves every interior
        # cell's logit with it (the SAME padding changes only cells near the edge).
        np.testing.assert_allclose(logits[1, 3:6, 4:7], logits[0, 2:5, 2:5], rtol=1e-5, atol=1e-6)
        # A cell three or more rows and columns away from the pattern sees none of it (two 3 x 3 layers).
        empty = net.apply(variables, jnp.zeros((1, 7, 8, 3)))
        empty = (empty[0] if isinstance(empty, tuple) else empty).reshape(7, 8)
        np.testing.assert_allclose(logits[0, 6, 0:8], empty[6], rtol=1e-6)
        assert not np.allclose(logits[0, 3, 3], empty[3, 3])
    with pytest.raises(
        ValueError,
        match=r"^Cell actions need one action per cell of the board: 55 actions for "
        r"7 x 8 cells\.",
    ):
        ActorCritic(num_actions=55, obs_rank=3, image=image, obs_shape=(7, 8, 3), cell_actions=True).init(
            jax.random.key(0), board[None]
        )


def _sub_jaxprs(params):
    for value in params.values():
        for x in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(x, "eqns"):
                yield x
            elif hasattr(getattr(x, "jaxpr", None), "eqns"):  # a closed jaxpr
                yield x.jaxpr


def _convolutions_inside_loops(jaxpr, in_loop: bool = False) -> int:
    count = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        count += name == "conv_general_dilated" and in_loop
        for sub in _sub_jaxprs(eqn.params):
            count += _convolutions_inside_loops(sub, in_loop or name in ("scan", "while"))
    return count


def test_the_atari_learner_step_on_cpu_keeps_every_convolution_out_of_loops():
    """Guards the XLA:CPU trap (jax-ml/jax#12868): a convolution's gradient inside a scanned loop runs ~20x slower
    there. What the step is made of, not how fast it runs (that figure is a benchmark's: the learner step took 2.2x
    a forward-backward pass unrolled, 18x scanned)."""
    assert (
        learner.should_unroll(3, "cpu") and not learner.should_unroll(1, "cpu") and not learner.should_unroll(3, "gpu")
    )
    agent = agents.make("ppo", ATARI, num_epochs=2, num_minibatches=2)
    t, b = 2, 8
    rng = np.random.default_rng(0)
    ts = TimeStep(
        rng.integers(0, 255, (t + 1, b, 4, 84, 84), dtype=np.uint8),
        np.zeros((t + 1, b), np.float32),
        np.ones((t + 1, b), np.float32),
        np.zeros((t + 1, b), bool),
    )
    trajectory = Trajectory(
        ts, rng.integers(0, 6, (t + 1, b)).astype(np.int32), {"logits": np.zeros((t + 1, b, 6), np.float32)}
    )
    optimizer = learner.make_optimizer(1e-4)
    state = learner.init_learner_state(agent, optimizer, jax.random.key(0), ts.observation[0])

    def inside_loops(unroll: bool) -> int:
        step = learner.make_learner_step(agent, optimizer, unroll=unroll)
        return _convolutions_inside_loops(jax.make_jaxpr(step)(state, trajectory).jaxpr)

    assert inside_loops(unroll=True) == 0
    assert inside_loops(unroll=False) > 0  # the scanned epochs and minibatches: the check sees the trap


def test_orthogonal_init_equals_flax_and_vmapped_seeds_never_deadlock():
    """flax's orthogonal initializer under vmap runs one batched LAPACK QR, which XLA:CPU spreads over the pool that
    runs the program: two at once on 2 cores waited on each other for ever (within 300 calls, every try here)."""
    import flax.linen as nn

    from podracer.core.networks import orthogonal

    keys = jax.random.split(jax.random.key(3), 3)
    for shape, scale in (((5, 3), 0.01), ((3, 7), 2.0), ((2, 3, 4), 1.0)):
        mine = jax.jit(jax.vmap(lambda k, s=shape, c=scale: orthogonal(c)(k, s)))(keys)
        np.testing.assert_array_equal(
            mine, jax.vmap(lambda k, s=shape, c=scale: nn.initializers.orthogonal(c)(k, s))(keys)
        )
    # In a process of its own with one CPU device (the tests' 8 devices give XLA:CPU a pool in which flax's
    # initializer happened not to deadlock), initialize 3 seeds of six orthogonal layers 300 times: with flax's
    # initializer this hung in every try here.
    code = (
        "import jax, jax.numpy as jnp, flax.linen as nn\n"
        "from podracer.core.networks import orthogonal\n"
        "class Net(nn.Module):\n"
        "    @nn.compact\n"
        "    def __call__(self, x):\n"
        "        return [nn.Dense(64, kernel_init=orthogonal(1.0))(x) for _ in range(6)]\n"
        "init = jax.jit(jax.vmap(lambda k: Net().init(k, jnp.zeros((1, 64)))))\n"
        "keys = jax.random.split(jax.random.key(3), 3)\n"
        "for _ in range(300):\n"
        "    jax.block_until_ready(init(keys))\n"
        "print('done')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # XLA's defaults, where the deadlock was seen
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr[-2000:]


def test_an_agent_keeps_the_network_settings_it_does_not_take_fixed_and_says_so():
    from podracer.run import config
    from podracer.cli import parser
    from podracer.core.agents import DQNConfig, PQNConfig, hyperparameters
    from podracer.core.networks import NetworkConfig

    assert DQNConfig().network.activation == "relu" and PQNConfig().network.layer_norm
    assert {"hidden_sizes", "torso"} <= set(hyperparameters(DQNConfig()))
    assert not {"activation", "core", "shared_torso", "layer_norm"} & set(hyperparameters(DQNConfig()))
    assert DQNConfig().replace(hidden_sizes=(8,)).network == NetworkConfig(hidden_sizes=(8,), activation="relu")
    with pytest.raises(
        ValueError,
        match=r"^DQNConfig has no --activation \(its network is fixed at 'relu'\); it takes "
        r"--hidden-sizes, --torso\.$",
    ):
        DQNConfig(network=NetworkConfig(activation="tanh"))
    with pytest.raises(SystemExit) as exit_:
        parser.parse(config.AnakinConfig, ["--agent", "dqn", "--activation", "tanh"], prog="prog")
    assert exit_.value.code == 2


def test_network_settings_come_nested_or_the_network_is_refused_in_one_line():
    """An agent config's network settings are a nested ``network: NetworkConfig`` (as the built-in agents'); a config
    that keeps them flat is refused, naming the field it needs."""
    import dataclasses

    from podracer.core.networks import NetworkConfig

    @dataclasses.dataclass(frozen=True)
    class Flat:
        hidden_sizes: tuple[int, ...] = (16,)

    @dataclasses.dataclass(frozen=True)
    class Nested:
        network: NetworkConfig = NetworkConfig(hidden_sizes=(16,), activation="relu", shared_torso=False)

    spec = EnvSpec(jax.ShapeDtypeStruct((5,), jnp.float32), 3)
    assert agents.make_network(spec, Nested()) == agents.make_network(spec, Nested().network)
    assert agents.make_network(spec, Nested()) != agents.make_network(spec, NetworkConfig())
    with pytest.raises(TypeError, match=r"^Flat holds no network settings: give it a field network: NetworkConfig"):
        agents.make_network(spec, Flat())
