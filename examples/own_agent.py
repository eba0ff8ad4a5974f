"""An agent of your own in every command line: REINFORCE with a learned baseline, registered as ``reinforce``.

Registering it (``agents.register(name, config_class, make)``) makes its config's fields flags of both modes,
checked as the built-in agents' are, sweepable, recorded in checkpoints and played by ``evaluate``:

    python examples/own_agent.py                                   # trains it on Catch (podracer anakin's flags)
    python examples/own_agent.py --num-seeds 4 --sweep learning_rate=1e-3,3e-3
    python examples/anakin_catch.py --import examples/own_agent.py --agent reinforce --help
    python -m podracer.sebulba --import examples/own_agent.py --agent reinforce --env CartPole --total-env-steps 200000
    python -m podracer.cli.evaluate --import examples/own_agent.py --checkpoint runs/reinforce

An installed package registers its agents with no ``--import``: an entry point in the ``podracer.agents`` group,
``reinforce = "my_package.reinforce:make_reinforce"`` (the factory's ``config`` default names its config class).
"""

from __future__ import annotations

import dataclasses
import sys

import jax
import jax.numpy as jnp

from podracer import agents
from podracer.cli import command as cli
from podracer.core.agents.base import Agent, make_network, make_policy_fns, unroll_trajectory
from podracer.core.agents.hyperparameters import check_hyperparameters
from podracer.core.agents.losses import masked_mean, policy_terms, transitions
from podracer.core.networks import NetworkConfig, network_field
from podracer.core.optim import OptimizerConfig, optimizer_field


@dataclasses.dataclass(frozen=True)
class ReinforceConfig:
    """REINFORCE with a learned baseline: Monte Carlo returns within each trajectory, bootstrapped at its end."""

    # Adam: --learning-rate 3e-3, --max-grad-norm 0.5 (a global gradient-norm clip), --lr-schedule, ...
    optimizer: OptimizerConfig = optimizer_field(learning_rate=3e-3, max_grad_norm=0.5)
    discount: float = 0.99  # discount gamma
    value_coef: float = 0.5  # weight of the baseline's loss
    entropy_coef: float = 0.01  # weight of the entropy bonus
    # the torso and heads: --hidden-sizes (64 64), --shared-torso (one MLP under the policy and the baseline), --torso
    # (auto: impala, a ResNet, for images; mlp otherwise)
    network: NetworkConfig = network_field(
        ("hidden_sizes", "shared_torso", "torso"), hidden_sizes=(64, 64), shared_torso=True, torso="auto"
    )

    def __post_init__(self):
        check_hyperparameters(self)  # the built-in checks, by field name: errors that name the flag


def make_reinforce(spec, config: ReinforceConfig = ReinforceConfig(), run=None) -> Agent:
    """The agent for environments of ``spec``: podracer's network and sampling, this loss."""
    import rlax

    network = make_network(spec, config.network)  # the torso from the spec; a softmax, multi-discrete or Gaussian head

    def loss(params, trajectory, key):
        del key
        policy, values = unroll_trajectory(network, params, trajectory)  # [T + 1, B]
        tr = transitions(trajectory, config.discount)  # rewards, discounts, episode boundaries
        baseline = jax.lax.stop_gradient(values[1:])
        returns = jax.vmap(rlax.discounted_returns, in_axes=1, out_axes=1)(
            tr.r_t, tr.discount_t * tr.continues_t, baseline
        )
        advantage = returns - values[:-1]
        mask = jax.tree.map(lambda x: x[:-1], trajectory.timestep.action_mask)  # legal actions (None: all)
        log_prob, entropy = policy_terms(jax.tree.map(lambda x: x[:-1], policy), trajectory.action[:-1], mask)
        policy_loss = -masked_mean(log_prob * jax.lax.stop_gradient(advantage), tr.mask_t)
        value_loss = 0.5 * masked_mean(jnp.square(advantage), tr.mask_t)
        entropy = masked_mean(entropy, tr.mask_t)
        total = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return total, {"loss": total, "policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}

    return Agent(**make_policy_fns(network), loss=loss)


agents.register("reinforce", ReinforceConfig, make_reinforce)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return cli.anakin(["--agent", "reinforce", *argv], prog="examples/own_agent.py", name="own_agent.py")


if __name__ == "__main__":
    sys.exit(main())
