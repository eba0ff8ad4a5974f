"""Anakin: JAX environments and the learner in one compiled program per device.

The per-device update is a pure function ``update(state) -> (state, metrics)``: a
rollout (``lax.scan`` over the environments' batched step) followed by the shared learner step,
whose gradients are averaged over the device axis. Map it over devices yourself::

    update = anakin.make_update(env, agent, optimizer, rollout_length=16)
    p_update = parallel.device_map(update)   # jit of shard_map over a Mesh; or your own pmap
    state = anakin.init(env, agent, optimizer, jax.random.key(0), num_envs_per_device=64)
    state, metrics = p_update(state)

(a ``pmap`` over :data:`~podracer.run.parallel.DEVICE_AXIS` takes the same state), or let
:func:`run` map it over every device of every process and scan many updates per host call.
"""

from podracer.core.anakin import (
    AnakinState,
    Entries,
    RolloutState,
    Sweep,
    init_learner,
    init_state,
    make_rollout,
    make_update,
    shape_setting,
    unsweepable,
)
from podracer.core.population import Population
from podracer.run.anakin import Hooks, RunResult, init, make_multi_update, make_train, run, run_key, seed_keys
from podracer.run.plan import RunPlan, anakin_plan
from podracer.run.play import make_evaluate, make_random_play, random_action
from podracer.core.stats import interquartile_mean, summarize, summarize_evaluation, summarize_seeds

__all__ = [
    "AnakinState",
    "anakin_plan",
    "Entries",
    "Hooks",
    "Population",
    "RolloutState",
    "RunPlan",
    "RunResult",
    "Sweep",
    "init",
    "init_learner",
    "init_state",
    "interquartile_mean",
    "make_evaluate",
    "make_multi_update",
    "make_random_play",
    "make_rollout",
    "make_train",
    "make_update",
    "random_action",
    "run",
    "run_key",
    "seed_keys",
    "summarize",
    "summarize_evaluation",
    "summarize_seeds",
    "shape_setting",
    "unsweepable",
]
