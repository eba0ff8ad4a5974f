"""bsuite's experiments in JAX (``bsuite:ID``, an id as bsuite names one: ``catch/0``, ``discounting_chain/7``).

Ports of the environments of bsuite 0.3.6 (google-deepmind/bsuite; Osband et al., 2020, "Behaviour Suite for
Reinforcement Learning") for the experiments whose bsuite score a run's returns decide: ``bandit``, ``catch``,
``catch_scale`` and ``discounting_chain``, each with its sweep of 20 ids (:func:`ids`) and its episode count
(:data:`EPISODES`). Rules, observation shapes and rewards are bsuite's; randomness is JAX's, so a run matches
bsuite's in distribution, not draw for draw (``tests/test_bsuite.py`` checks the rules step by step, and
``benchmarks/bsuite_scores.py --check-ports`` replays bsuite's own environments against them). Episodes
end by termination (discount 0), as bsuite's do. ``benchmarks/bsuite_scores.py`` writes a run's returns as
bsuite's CSV logs and scores them with bsuite's own analysis.

bsuite also keeps a ``total_regret`` per run: the optimal return (1 an episode in catch and the bandit) times
the episodes, less the raw returns (:func:`regret`); ``catch_scale`` scales the reward the agent sees
(:attr:`BsuiteEnv.reward_scale`) but not its regret. The umbrella and noise experiments' regret counts part of
an episode's reward only, which a run's returns do not tell apart: they are not ported.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from podracer.core.envs.base import check_task, first_timestep, step_timestep
from podracer.core.envs.catch import Catch
from podracer.core.types import EnvSpec

EPISODES = {  # bsuite's NUM_EPISODES per experiment (bsuite/experiments/*/sweep.py)
    "bandit": 10_000,
    "catch": 10_000,
    "catch_scale": 10_000,
    "discounting_chain": 1_000,
}
_SCALES = (0.001, 0.03, 1.0, 30.0, 1000.0)


def settings(experiment: str) -> list[dict]:
    """The keyword settings of an experiment's 20 ids, in bsuite's order (``ID = f"{experiment}/{index}"``)."""
    if experiment == "catch":
        return [{} for _ in range(20)]
    if experiment == "catch_scale":
        return [{"reward_scale": scale} for scale in _SCALES for _ in range(4)]
    if experiment in ("bandit", "discounting_chain"):
        return [{"mapping_seed": n} for n in range(20)]
    raise ValueError(f"bsuite: no port of the experiment {experiment!r}; ported: {', '.join(EPISODES)}.")


def ids(experiment: str) -> list[str]:
    """An experiment's bsuite ids."""
    return [f"{experiment}/{index}" for index in range(len(settings(experiment)))]


def require() -> None:
    """The ports need no package (bsuite itself scores the logs: ``benchmarks/bsuite_scores.py``)."""


def names() -> list[str]:
    """Every ported id."""
    return [bsuite_id for experiment in EPISODES for bsuite_id in ids(experiment)]


def make(name: str, **kwargs) -> "BsuiteEnv":
    """``bsuite:ID`` (:func:`podracer.envs.make` calls this)."""
    check_task("bsuite", name, names())
    experiment, index = name.split("/")
    setting = settings(experiment)[int(index)]
    scale = setting.get("reward_scale", 1.0)
    if experiment in ("catch", "catch_scale"):
        env = Catch(rows=10, columns=5)
    elif experiment == "bandit":
        env = Bandit(setting["mapping_seed"])
    else:
        env = DiscountingChain(setting["mapping_seed"])
    return BsuiteEnv(name, env, reward_scale=scale, **kwargs)


def episode_length(env) -> int:
    """Steps of each of a port's episodes (every ported experiment's episodes have one length)."""
    return 9 if isinstance(env, Catch) else env.episode_length


def regret(raw_return: float, episodes: int) -> float:
    """bsuite's ``total_regret`` after ``episodes`` episodes whose raw (unscaled) returns sum to ``raw_return``:
    the optimal return, 1 an episode in catch and the bandit, times the episodes, less what they got."""
    return float(episodes) - float(raw_return)


class BsuiteEnv:
    """One bsuite id: its rules (``env``) with the reward scaled by ``reward_scale`` (``catch_scale``'s wrapper,
    which leaves first time steps alone)."""

    suite = "bsuite"

    def __init__(self, name: str, env, *, reward_scale: float = 1.0):
        self.name, self.env, self.reward_scale = name, env, float(reward_scale)
        self.experiment = name.split("/")[0]
        self.episodes = EPISODES[self.experiment]

    def spec(self) -> EnvSpec:
        return self.env.spec()

    def reset(self, key: chex.PRNGKey):
        return self.env.reset(key)

    def step(self, state, action: chex.Array):
        state, timestep = self.env.step(state, action)
        if self.reward_scale != 1.0:
            timestep = timestep._replace(reward=timestep.reward * jnp.float32(self.reward_scale))
        return state, timestep

    @property
    def episode_length(self) -> int:
        """Steps of every episode (bsuite's ported episodes all have one length)."""
        return episode_length(self.env)


class Bandit:
    """bsuite's bandit: one step per episode, 11 arms paying ``linspace(0, 1, 11)`` in an order fixed by
    ``mapping_seed`` (drawn as bsuite draws it, with numpy's ``RandomState``); observation ``ones([1, 1])``."""

    episode_length = 1

    def __init__(self, mapping_seed: int, num_actions: int = 11):
        order = np.random.RandomState(mapping_seed).choice(range(num_actions), size=num_actions, replace=False)
        self.rewards = np.linspace(0, 1, num_actions)[order].astype(np.float32)
        self.num_actions = num_actions

    def spec(self) -> EnvSpec:
        return EnvSpec(jax.ShapeDtypeStruct((1, 1), jnp.float32), num_actions=self.num_actions)

    def reset(self, key: chex.PRNGKey):
        del key  # the arms' order is fixed
        return jnp.zeros((), jnp.int32), first_timestep(jnp.ones((1, 1), jnp.float32))

    def step(self, state: chex.Array, action: chex.Array):
        reward = jnp.asarray(self.rewards)[action]
        return state, step_timestep(jnp.ones((1, 1), jnp.float32), reward, True, False)


class ChainState(NamedTuple):
    t: chex.Array  # int32 []: steps taken this episode
    context: chex.Array  # int32 []: the first action, the chain chosen (-1 before it)


class DiscountingChain:
    """bsuite's discounting_chain: the first action picks one of 5 chains, whose reward, 1 (1.1 for the chain
    ``mapping_seed % 5``), comes after 1, 3, 10, 30 or 100 steps; every episode lasts 100 steps; observation
    ``[[context, t / 100]]``."""

    episode_length = 100
    _delays = (1, 3, 10, 30, 100)

    def __init__(self, mapping_seed: int):
        rewards = np.ones(len(self._delays), np.float32)
        rewards[mapping_seed % len(self._delays)] += 0.1
        self.rewards = rewards

    def spec(self) -> EnvSpec:
        return EnvSpec(jax.ShapeDtypeStruct((1, 2), jnp.float32), num_actions=len(self._delays))

    def _observe(self, state: ChainState):
        return jnp.stack([state.context.astype(jnp.float32), state.t / self.episode_length])[None]

    def reset(self, key: chex.PRNGKey):
        del key  # nothing random
        state = ChainState(jnp.int32(0), jnp.int32(-1))
        return state, first_timestep(self._observe(state))

    def step(self, state: ChainState, action: chex.Array):
        context = jnp.where(state.t == 0, action.astype(jnp.int32), state.context)
        t = state.t + 1
        reward = jnp.where(t == jnp.asarray(self._delays)[context], jnp.asarray(self.rewards)[context], 0.0)
        state = ChainState(t, context)
        return state, step_timestep(self._observe(state), reward, t == self.episode_length, False)
