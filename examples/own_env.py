"""A JAX environment of your own in every command line: a corridor with a locked door, registered as ``corridor``.

The agent starts at the left end of 10 cells and is paid +1 for reaching the right end within 30 steps. The cell
before the end is a door that opens only after the agent has stood on the key (cell 2) — until then "right"
is an illegal action there, which the environment says with a legal-action mask, so no agent ever tries it.

    python examples/own_env.py                                     # trains PPO on it (podracer anakin's flags)
    python examples/anakin_catch.py --import examples/own_env.py --env corridor --agent dqn
    python -m podracer.sebulba --import examples/own_env.py --env jax:corridor --agent ppo --total-env-steps 100000
    python -m podracer.cli.evaluate --import examples/own_env.py --checkpoint runs/corridor --greedy

An installed package registers its environments with no ``--import``: an entry point in the ``podracer.envs`` group,
``corridor = "my_package.corridor:Corridor"``, imported only when the environment is made.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp

from podracer import envs
from podracer.cli import command as cli
from podracer.core.envs.base import first_timestep, step_timestep
from podracer.core.types import EnvSpec

LENGTH, KEY, MAX_STEPS = 10, 2, 30
LEFT, STAY, RIGHT = 0, 1, 2


class Corridor:
    """One environment, pure functions (the caller vmaps): ``reset(key)``, ``step(state, action)``, ``spec()``."""

    def reset(self, key):
        del key
        state = {
            "position": jnp.zeros((), jnp.int32),
            "has_key": jnp.zeros((), bool),
            "steps": jnp.zeros((), jnp.int32),
        }
        return state, first_timestep(self._observe(state), self._legal(state))

    def step(self, state, action):
        position = jnp.clip(state["position"] + action - 1, 0, LENGTH - 1)
        state = {"position": position, "has_key": state["has_key"] | (position == KEY), "steps": state["steps"] + 1}
        done = position == LENGTH - 1
        return state, step_timestep(
            self._observe(state),
            done.astype(jnp.float32),
            terminated=done,
            truncated=state["steps"] >= MAX_STEPS,
            action_mask=self._legal(state),
        )

    def spec(self) -> EnvSpec:
        return EnvSpec(observation=jax.ShapeDtypeStruct((LENGTH + 1,), jnp.float32), num_actions=3, action_mask=True)

    def _observe(self, state):  # where the agent is, and whether it holds the key
        return jnp.concatenate([jax.nn.one_hot(state["position"], LENGTH), state["has_key"][None].astype(jnp.float32)])

    def _legal(self, state):  # the door (the cell before the end) opens with the key
        locked = (state["position"] == LENGTH - 3) & ~state["has_key"]
        return jnp.array([True, True, True]).at[RIGHT].set(~locked)


envs.register("corridor", Corridor)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return cli.anakin(["--env", "corridor", "--agent", "ppo", *argv], prog="examples/own_env.py", name="own_env.py")


if __name__ == "__main__":
    sys.exit(main())
