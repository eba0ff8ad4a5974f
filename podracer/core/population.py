"""Population-based training inside the compiled Anakin program (``--population N --pbt-search ... --pbt-every K``).

The lanes of a population train vmapped on every device, as a sweep's settings do, but each lane's searched
hyper-parameters are part of its state (:class:`PopulationState`) and change during the run: every ``every``
updates, inside the program, the lanes are ranked by the mean training return of the episodes that ended since the
last ranking; the bottom ``fraction`` copy the parameters, optimizer state and the rest of the learner state
(normalisation statistics, target network, replay memory) of a lane drawn from the top ``fraction`` (keeping their
own key), and their values become the donor's, each times 0.8 or 1.25 (clipped to its range) or, with probability
``resample``, drawn afresh from its range.

A lane that took a non-finite update since the last ranking (its loss, gradients or parameters: discarded with
``--on-nonfinite skip``, kept with ``continue``) is diverging: its return sum is NaN until the ranking, which ranks
it below every finite lane and always replaces it (with more diverging lanes than ``fraction`` of them, all are
replaced), from donors that are finite; its recorded fitness is NaN, which is how the lineage says why it was
replaced. When every lane is diverging nothing is copied, and the host stops the run (:func:`all_diverged`).

Every lane spans every device of every process (each device steps its own environments of every lane; gradients
average over devices), so each device holds every lane's learner and the same episode statistics: every device
ranks alike and copies alike, with a key made from ``seed`` and the update count, and no collective beyond the
update's own. A run on 2 processes equals the same population on 1 process with the same devices.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from podracer.core.optim import with_injected_hyperparameters
from podracer.core.agents.base import Agent
from podracer.core.anakin import AnakinState, init_learner, make_update
from podracer.core.envs.base import Environment
from podracer.core.pbt import PERTURB, Range

PBT_SEED_OFFSET = 7_000_003  # the exploit/explore key: apart from the training and evaluation seeds


class PopulationState(NamedTuple):
    """One lane's part of the population (stacked over lanes, like the rest of its state)."""

    values: dict[str, chex.Array]  # float32 []: the lane's searched hyper-parameters now
    updates: chex.Array  # int32 []: updates done
    return_sum: chex.Array  # float32 []: returns of the episodes that ended since the last ranking, summed (nan: a
    # non-finite update since then, the lane is diverging)
    episodes: chex.Array  # float32 []: how many ended
    fitness: chex.Array  # float32 []: the mean return the last ranking saw (nan before one, or diverging; -inf: no
    # episode)
    parent: chex.Array  # int32 []: the lane copied at the last copy (-1: none yet)
    copied_at: chex.Array  # int32 []: the update of the last copy (-1: none yet)


class Population(NamedTuple):
    """A population of ``len(points)`` lanes: ``points`` their starting values, ``build(values) -> (agent,
    optimizer)`` a lane's agent and optimizer from its values (traced inside the program)."""

    search: tuple[Range, ...]
    points: tuple[dict[str, float], ...]
    build: Callable[[dict], tuple[Agent, optax.GradientTransformation]]
    every: int
    fraction: float = 0.25
    resample: float = 0.25
    seed: int = 0

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.search]

    def values(self, num_seeds: int = 1) -> dict[str, chex.Array]:
        """Every lane's starting values ``[lanes]`` (one key: a population trains one seed)."""
        return {name: jnp.asarray(np.asarray([p[name] for p in self.points], np.float32)) for name in self.names}

    def expand(self, key: chex.PRNGKey) -> tuple[chex.PRNGKey, dict[str, chex.Array]]:
        """Every lane's key (split from the run's one key) and starting values."""
        return jax.random.split(key, len(self.points)), self.values()

    def learners(self, env: Environment, key, num_envs_per_device: int, rollout_length: int):
        """Every lane's key and learner, made in one program (``lax.map``: seed after seed, see
        :func:`podracer.core.anakin.stack_learners`)."""
        sizes = dict(num_envs=num_envs_per_device, rollout_length=rollout_length)
        keys, values = self.expand(key)

        def one(lane):
            return init_learner(env, *self.build(lane[1]), lane[0], **sizes)

        return keys, jax.lax.map(one, (keys, values))

    def finish(self, state: AnakinState, values) -> AnakinState:
        """A lane's state: its acting state and its part of the population, no update done yet."""
        none, zero = jnp.int32(-1), jnp.float32(0.0)
        lanes = PopulationState(values, jnp.int32(0), zero, zero, jnp.float32(jnp.nan), none, none)
        return AnakinState(state.learner, state.rollout, lanes)

    def update(self, env: Environment, rollout_length: int, values=None, *, skip_nonfinite: bool = False, **kwargs):
        """The per-device update of every lane (:func:`~podracer.core.anakin.make_update` with the lane's current
        values, vmapped), then, every ``every`` updates, the ranking, the copies and the new values."""

        def one(state, values):
            agent, optimizer = self.build(values)
            update = make_update(
                env, agent, optimizer, rollout_length=rollout_length, skip_nonfinite=skip_nonfinite, **kwargs
            )
            return update(state)

        def update(state: AnakinState):
            lanes = state.population
            inner, metrics = jax.vmap(one)(AnakinState(state.learner, state.rollout), lanes.values)
            ended = metrics["episodes"]
            returns = jnp.where(ended > 0, metrics["episode_return"], 0.0) * ended
            returns = jnp.where(metrics["nonfinite"] > 0, jnp.nan, returns)  # diverging until the next ranking
            lanes = lanes._replace(
                updates=lanes.updates + 1, return_sum=lanes.return_sum + returns, episodes=lanes.episodes + ended
            )
            due = lanes.updates[0] % self.every == 0
            learner, lanes = jax.lax.cond(due, self.exploit, lambda lr, ln: (lr, ln), inner.learner, lanes)
            return AnakinState(learner, inner.rollout, lanes), metrics

        return update

    def exploit(self, learner, lanes: PopulationState):
        """The ranking, the copies and the new values (see the module's docstring), on one device's lanes."""
        n = len(self.points)
        k = max(1, int(n * self.fraction))
        diverging = jnp.isnan(lanes.return_sum)
        fitness = jnp.where(lanes.episodes > 0, lanes.return_sum / jnp.maximum(lanes.episodes, 1.0), -jnp.inf)
        fitness = jnp.where(diverging, -jnp.inf, fitness)
        order = jnp.lexsort((fitness, ~diverging))  # worst first: every diverging lane, then by fitness (stable)
        position = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
        donors = jnp.minimum(k, n - diverging.sum())  # the top lanes, never a diverging one
        copied = ((position < k) | diverging) & (donors > 0)
        key = jax.random.fold_in(jax.random.key(self.seed + PBT_SEED_OFFSET), lanes.updates[0])
        pick, *keys = jax.random.split(key, 1 + 2 * len(self.search))
        drawn_donor = order[n - 1 - jax.random.randint(pick, (n,), 0, jnp.maximum(donors, 1))]
        source = jnp.where(copied, drawn_donor, jnp.arange(n))

        def take(tree):
            return jax.tree.map(lambda x: x[source], tree)

        learner = learner._replace(params=take(learner.params), opt_state=take(learner.opt_state))
        learner = learner._replace(extra=take(learner.extra))
        values = {}
        for r, redraw_key, scale_key in zip(self.search, keys[0::2], keys[1::2]):
            donor = lanes.values[r.name][source]
            factor = jnp.where(jax.random.bernoulli(scale_key, 0.5, (n,)), PERTURB[0], PERTURB[1])
            low, high = (math.log(r.low), math.log(r.high)) if r.log else (r.low, r.high)
            drawn_key, redraw_key = jax.random.split(redraw_key)
            drawn = jax.random.uniform(drawn_key, (n,), minval=low, maxval=high)
            drawn = jnp.exp(drawn) if r.log else drawn
            explored = jnp.where(
                jax.random.uniform(redraw_key, (n,)) < self.resample, drawn, jnp.clip(donor * factor, r.low, r.high)
            )
            values[r.name] = jnp.where(copied, explored, lanes.values[r.name]).astype(jnp.float32)
        # the update reads an injected rate (and clip norm) from the optimizer state: the copied one holds the donor's
        learner = learner._replace(opt_state=with_injected_hyperparameters(learner.opt_state, values))
        zero = jnp.zeros(n, jnp.float32)
        return learner, lanes._replace(
            values=values,
            fitness=jnp.where(diverging, jnp.nan, fitness).astype(jnp.float32),
            return_sum=zero,
            episodes=zero,
            parent=jnp.where(copied, source, lanes.parent).astype(jnp.int32),
            copied_at=jnp.where(copied, lanes.updates, lanes.copied_at).astype(jnp.int32),
        )

    def all_diverged(self, summary: dict) -> list[dict[str, float]] | None:
        """Each lane's values (by name) when a ranking in the call that ``summary`` (:meth:`summary`'s) describes
        found every lane diverging, so that nothing could be copied; else None. The host stops the run then."""
        fitness = np.asarray(summary["pbt_fitness_per_lane"], np.float64)
        ranked = summary["pbt_updates"] > 0 and summary["pbt_updates"] % self.every == 0
        if not ranked or not np.isnan(fitness).all():
            return None
        return [{name: float(summary[f"pbt_{name}_per_lane"][i]) for name in self.names} for i in range(len(fitness))]

    def summary(self, lanes: PopulationState) -> dict:
        """Every lane's values and lineage after a host call, from ``lanes``, the first local device's
        :class:`PopulationState` on the host (every device holds the same): ``pbt_NAME_per_lane``,
        ``pbt_parent_per_lane``, ``pbt_copied_at_per_lane``, ``pbt_fitness_per_lane``, ``pbt_diverging_per_lane``
        (1: the last ranking found a non-finite update since the one before) and ``pbt_updates``, for the log."""
        out = {f"pbt_{name}_per_lane": np.asarray(v, np.float64).tolist() for name, v in lanes.values.items()}
        out["pbt_parent_per_lane"] = np.asarray(lanes.parent).tolist()
        out["pbt_copied_at_per_lane"] = np.asarray(lanes.copied_at).tolist()
        out["pbt_fitness_per_lane"] = np.asarray(lanes.fitness, np.float64).tolist()
        out["pbt_updates"] = int(np.asarray(lanes.updates)[0])
        ranked = out["pbt_updates"] >= self.every  # NaN fitness after a ranking: the lane was diverging then
        out["pbt_diverging_per_lane"] = [int(ranked and math.isnan(f)) for f in out["pbt_fitness_per_lane"]]
        return out


__all__ = ["PBT_SEED_OFFSET", "Population", "PopulationState"]
