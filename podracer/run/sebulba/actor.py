"""An actor thread: one host environment batch, one device, one key."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import jax
import numpy as np

from podracer.run.plan import RunPlan
from podracer.run import parallel
from podracer.core.agents.base import Agent, act_mask, split_start_state
from podracer.core.envs.base import HostEnv, check_action_mask
from podracer.run.sebulba.pipeline import ActorStatus, ParamStore, Rollout, StopAwareQueue
from podracer.core.types import TimeStep, Trajectory


def _act(agent: Agent):
    """``act(params, observation, key, state, first, action_mask=None) -> (action, extras, state, next key)``, not
    jitted (:func:`make_act`'s, and the XLA rollout's step)."""
    if agent.plans:
        raise ValueError(
            "--agent alphazero searches with a JAX environment's own rules: it trains in Anakin (podracer anakin), "
            "not in Sebulba."
        )

    def act(params, observation, key, state, first, action_mask=None):
        key, act_key = jax.random.split(key)
        action, extras, state = agent.act(params, observation, act_key, state, first, **act_mask(action_mask))
        return action, extras, state, key

    return act


def make_act(agent: Agent):
    """``act(params, observation, key, state, first, action_mask=None) -> (action, extras, state, next key)``, jitted;
    it runs where its inputs live. ``state`` is the agent's actor state (``agent.initial_state``); ``action_mask``
    the time step's legal actions, where the environment has them."""
    return jax.jit(_act(agent))


class XlaRollout:
    """``length`` steps of one envpool batch in one compiled program on the actor's device (``--envpool-xla``):
    receive, act, send, as the host loop of :func:`run_actor` does, through envpool's XLA interface
    (:meth:`~podracer.run.hostenvs.envpool.EnvpoolEnv.xla_step`), so no Python runs per step and the steps' time
    steps, actions and extras come back to the host in one transfer. The same keys, actions and time steps as the
    host loop: trajectories are the same to the bit."""

    def __init__(self, agent: Agent, env, length: int, device: jax.Device):
        step, act = env.xla_step(), _act(agent)
        self.env, self.length = env, length
        self.handle = parallel.put_on(step.handle, device)

        def rollout(handle, params, key, core, first):
            def one(carry, _):
                handle, key, core, first = carry
                handle, timestep, raw = step.recv(handle)
                action, extras, core, key = act(params, timestep.observation, key, core, first)
                handle = step.send(handle, action)
                return (handle, key, core, timestep.last), (timestep, raw, action, extras)

            (handle, key, core, first), steps = jax.lax.scan(one, (handle, key, core, first), length=length)
            return handle, key, core, first, steps

        self._rollout = jax.jit(rollout, donate_argnums=0)

    def __call__(self, params, key, core, first, returns: list, lengths: list):
        """``(key, core, first, steps)``: ``steps`` the rollout's ``(timesteps, actions, extras)`` on the host, with
        a leading axis of ``length``; the environments' episode statistics counted and the episodes that ended
        added to ``returns`` and ``lengths``."""
        self.handle, key, core, first, steps = self._rollout(self.handle, params, key, core, first)
        timesteps, raws, actions, extras = jax.device_get(steps)
        for t in range(self.length):
            self.env.record(raws[t], timesteps.last[t])
            _episodes_ended(self.env, timesteps.last[t], returns, lengths)
        return key, core, np.asarray(first), (timesteps, actions, extras)


def _stack(entries):
    """The trajectory of ``T + 1`` entries; the start state (recurrent agents) only of the first."""
    timesteps, actions, extras = zip(*entries)
    start = split_start_state(extras[0])[1]
    extras = [split_start_state(e)[0] for e in extras]
    stack = lambda *xs: np.stack(xs)  # noqa: E731
    return Trajectory(jax.tree.map(stack, *timesteps), np.stack(actions), jax.tree.map(stack, *extras), start)


def _stack_after(entry, steps):
    """The trajectory of ``entry`` then ``steps`` (``(timesteps, actions, extras)`` with a leading axis of ``T``), as
    :func:`_stack` makes it of ``T + 1`` entries."""
    timestep, action, extras = entry
    first, start = split_start_state(extras)
    timesteps, actions, rest = steps
    after = lambda x, xs: np.concatenate([np.asarray(x)[None], xs])  # noqa: E731
    rest = split_start_state(rest)[0]
    return Trajectory(
        jax.tree.map(after, timestep, timesteps), after(action, actions), jax.tree.map(after, first, rest), start
    )


def _last_entry(steps):
    """The last of ``steps``' entries (:func:`_stack_after`), the next trajectory's first."""
    return jax.tree.map(lambda x: x[-1], steps)


def _split_for_learners(trajectory: Trajectory, num_learners: int) -> Trajectory:
    """``[T + 1, B, ...]`` -> ``[num_learners, T + 1, B / num_learners, ...]`` (the actor state: ``[B, ...]`` ->
    ``[num_learners, B / num_learners, ...]``)."""

    def split(x):
        t, b = x.shape[:2]
        return np.moveaxis(x.reshape(t, num_learners, b // num_learners, *x.shape[2:]), 1, 0)

    def split_batch(x):
        return x.reshape(num_learners, x.shape[0] // num_learners, *x.shape[1:])

    time_major = trajectory._replace(actor_state=())
    return jax.tree.map(split, time_major)._replace(actor_state=jax.tree.map(split_batch, trajectory.actor_state))


def _concat(parts):
    """Entries of the environment groups -> one entry over their concatenated batch."""
    if len(parts) == 1:
        return parts[0]
    return jax.tree.map(lambda *xs: np.concatenate(xs), *parts)


class _DiscountedReturns:
    """Adds each environment's discounted return so far (``Trajectory.discounted_return``) to an actor's
    trajectories, for agents that scale rewards by its spread (``Agent.return_discount``); for the others, the
    trajectory as it is. Entry 0 of a trajectory is the previous one's last entry: its value is carried over."""

    def __init__(self, gamma: float | None, num_envs: int, restart: str = "episode"):
        self.gamma, self.carried = gamma, np.zeros(num_envs, np.float32)  # the reset's time step: reward 0
        self.restart = restart

    def __call__(self, trajectory: Trajectory) -> Trajectory:
        if self.gamma is None:
            return trajectory
        timestep = trajectory.timestep
        returns = discounted_returns(
            np.asarray(timestep.reward, np.float32),
            np.asarray(timestep.last),
            np.asarray(timestep.discount),
            self.gamma,
            self.carried,
            self.restart,
        )
        self.carried = returns[-1]
        return trajectory._replace(discounted_return=returns)


def discounted_returns(reward, last, discount, gamma: float, carried, restart: str = "episode") -> np.ndarray:
    """Each environment's discounted return so far [T, B], entry 0's being ``carried``. A time step after a
    ``last`` one is the next episode's first (reward 0): the return restarts there from 0 (``restart``
    "episode"), or only after a termination (``discount`` 0; "termination"), carrying on as it was across a time
    limit, as if one episode continued the other (gymnasium's ``NormalizeReward``)."""
    returns = np.empty_like(reward)
    returns[0] = carried
    for t in range(1, len(reward)):
        ended = last[t - 1] if restart == "episode" else last[t - 1] & (discount[t - 1] == 0)
        after_last = np.where(ended, 0.0, returns[t - 1])
        returns[t] = np.where(last[t - 1], after_last, gamma * returns[t - 1]) + reward[t]
    return returns


def _reset(env: HostEnv) -> TimeStep:
    """``env``'s first time steps, their legal-action masks checked against its spec."""
    timestep = env.reset()
    check_action_mask(env.spec(), timestep, batch_axes=1)
    return timestep


def _episodes_ended(env: HostEnv, last, returns: list, lengths: list) -> None:
    """Adds the returns and lengths of ``env``'s episodes that end where ``last``."""
    if last.any():
        returns.extend(env.stats.episode_return[last].tolist())
        lengths.extend(env.stats.episode_length[last].tolist())


def _send(env: HostEnv, action, status: ActorStatus) -> None:
    """Starts ``env``'s step; the thread waits on its environment meanwhile (a send that raises is the environment's
    failure)."""
    status.now("environment")
    env.send(action)


def run_actor(
    plan: RunPlan,
    agent: Agent,
    envs: Sequence[HostEnv],
    *,
    act,
    device: jax.Device,
    learner_devices: Sequence[jax.Device],
    key: jax.Array,
    store: ParamStore,
    queue: StopAwareQueue,
    stop: threading.Event,
    status: ActorStatus | None = None,
    max_policy_lag: int | None = None,
    envpool_xla: bool = False,
) -> None:
    """Steps ``envs`` with the newest parameters (``act`` is :func:`make_act` of ``agent``) and ships ``[T + 1, B]``
    trajectories (``T``: ``plan.rollout_length``) until ``stop``.

    ``envs`` are groups of one batch (B is their sizes added up). While one group's
    actions are being computed, the others step on envpool's threads: each group is
    received, acted on and sent again in turn, so with two groups stepping and inference
    overlap. With one group they take turns.

    Each trajectory starts with the previous one's last entry (observation and the action
    already chosen there). Parameters are refreshed between rollouts without waiting, or with
    ``max_policy_lag`` once the learner has taken every trajectory started before but that many.
    A recurrent agent's core state stays on ``device``, one per group, carried across
    rollouts and reset where an episode starts. ``status`` hears what the thread waits on.
    With ``envpool_xla`` (one envpool group) each rollout after the first step is one :class:`XlaRollout`.
    """
    status = status or ActorStatus("actor", device)
    num_learners = len(parallel.local_devices(learner_devices))
    params, version = status.first_parameters(store, device, stop, max_policy_lag)
    key = parallel.put_on(key, device)
    cores = [parallel.put_on(agent.initial_state(env.num_envs), device) for env in envs]
    firsts = [np.ones(env.num_envs, bool) for env in envs]
    discounted = _DiscountedReturns(agent.return_discount, sum(env.num_envs for env in envs), agent.return_restart)

    def act_on(timestep, g):
        nonlocal key
        status.now("inference")
        # the host's arrays go in as they are: jit moves them to the device of the parameters, in C++, where a
        # device_put first took a third of a one-environment step
        action, extras, cores[g], key = act(
            params, timestep.observation, key, cores[g], firsts[g], timestep.action_mask
        )
        firsts[g] = np.asarray(timestep.last)  # the next time step of a finished episode starts a new one
        # one transfer for both: each device_get waits on its own, which costs more than the step's inference
        # at a handful of environments
        action, extras = jax.device_get((action, extras))
        return timestep, np.asarray(action), extras

    status.now("environment")
    parts = [act_on(_reset(env), g) for g, env in enumerate(envs)]
    for env, part in zip(envs, parts):
        _send(env, part[1], status)
    entry = _concat(parts)
    xla = XlaRollout(agent, envs[0], plan.rollout_length, device) if envpool_xla else None
    while not stop.is_set():
        seconds, entries, returns, lengths = {"env": 0.0, "act": 0.0, "ship": 0.0, "put_wait": 0.0}, [entry], [], []
        if xla is not None:  # the environments' steps and the inference in one program: its time is "act"
            status.now("inference")
            start = time.perf_counter()
            key, cores[0], firsts[0], steps = xla(params, key, cores[0], firsts[0], returns, lengths)
            seconds["act"] = time.perf_counter() - start
            stacked, entry = _stack_after(entry, steps), _last_entry(steps)
        else:
            for _ in range(plan.rollout_length):
                for g, env in enumerate(envs):
                    start = time.perf_counter()
                    status.now("environment")
                    timestep = env.recv()
                    now = time.perf_counter()
                    seconds["env"] += now - start
                    _episodes_ended(env, timestep.last, returns, lengths)
                    parts[g] = act_on(timestep, g)
                    _send(env, parts[g][1], status)
                    seconds["act"] += time.perf_counter() - now
                entries.append(_concat(parts))
            stacked, entry = _stack(entries), entries[-1]
        # Every group is stepping now (its next action sent): shipping overlaps with them.
        start = time.perf_counter()
        trajectory = parallel.shard(_split_for_learners(discounted(stacked), num_learners), learner_devices)
        seconds["ship"] = time.perf_counter() - start
        status.now("queue")
        seconds["put_wait"] = queue.put(Rollout(trajectory, version, returns, lengths, seconds), stop)
        status.shipped()
        status.now("parameters" if max_policy_lag is None else "learner")
        params, version = store.latest(device, stop, max_lag=max_policy_lag)
