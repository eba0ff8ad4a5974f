"""Agents: ``Agent(init, act, loss | replay)`` bundles that run unchanged in every mode."""

from __future__ import annotations

import dataclasses
import functools
import difflib
import inspect
import re
import sys
from collections.abc import Callable

from podracer.agents.a2c import A2CConfig, make_a2c
from podracer.agents.alphazero import AlphaZeroConfig, make_alphazero
from podracer import optim
from podracer.agents.base import (
    Agent,
    ReplaySpec,
    Transitions,
    hyperparameters,
    make_network,
    no_state,
    with_hyperparameters,
    make_policy_fns,
    make_recurrent_fns,
    masked_mean,
    policy_terms,
    transitions,
    unroll_trajectory,
)
from podracer.agents.dqn import DQNConfig, make_dqn
from podracer.agents.impala import IMPALAConfig, make_impala
from podracer.agents.muzero import MuZeroConfig, make_muzero
from podracer.agents.ppo import PPOBatch, PPOConfig, make_ppo
from podracer.agents.pqn import PQNConfig, make_pqn
from podracer.agents.r2d2 import R2D2Config, make_r2d2
from podracer.agents.sac import SACConfig, make_sac
from podracer.types import EnvSpec, RunFacts

_AGENTS: dict[str, tuple[Callable[..., Agent], type]] = {
    "a2c": (make_a2c, A2CConfig),
    "alphazero": (make_alphazero, AlphaZeroConfig),
    "dqn": (make_dqn, DQNConfig),
    "impala": (make_impala, IMPALAConfig),
    "muzero": (make_muzero, MuZeroConfig),
    "ppo": (make_ppo, PPOConfig),
    "pqn": (make_pqn, PQNConfig),
    "r2d2": (make_r2d2, R2D2Config),
    "sac": (make_sac, SACConfig),
}
BUILT_IN = frozenset(_AGENTS)
ENTRY_POINTS = "podracer.agents"  # the entry-point group an installed package registers its agents in
_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_REQUIRED_FIELDS = ("learning_rate", "max_grad_norm")  # what the optimizer is made from, where no `optimizer` field
_entry_points_loaded = False


def register(name: str, config_class: type, make: Callable[..., Agent]) -> None:
    """Adds an agent of your own under ``name``: ``make(spec, config)`` (or ``make(spec, config, run)``, told the
    run's :class:`~podracer.types.RunFacts`) builds its :class:`Agent` from a ``config_class`` instance.
    ``config_class`` is a dataclass whose every field has a default; its fields become the agent's flags in both
    command lines (``--agent NAME --help`` lists them), each checked in its ``__post_init__`` as the built-in
    agents' are (:func:`podracer.agents.base.check_hyperparameters`), and its numeric fields can be swept. Its
    optimizer settings are a field ``optimizer: podracer.optim.OptimizerConfig`` (as the built-in agents'), or the
    flat fields ``learning_rate`` and ``max_grad_norm`` (``lr_schedule``, ``lr_warmup_steps`` optional). An agent
    whose ``optimizer`` is None gets the optimizer of those settings (:func:`podracer.optim.optimizer_of`: Adam, or
    RMSprop); set your own (``Agent(..., optimizer=...)``) for parameter groups or another optimizer. Checkpoints
    record the name, so ``python -m podracer.evaluate`` plays it once it is registered there too (``--import
    MODULE``, or an entry point in the ``podracer.agents`` group). Registering a name again replaces it; a built-in
    name cannot be taken."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"An agent's name is lower case letters, digits, '-' and '_', starting with a letter "
            f"(it becomes --agent NAME), got {name!r}."
        )
    if name in BUILT_IN and _AGENTS[name][1] is not config_class:
        raise ValueError(f"{name!r} is a built-in agent; register yours under another name.")
    if not (isinstance(config_class, type) and dataclasses.is_dataclass(config_class)):
        raise ValueError(
            f"Agent {name!r}: its config must be a dataclass (its fields become flags), got {config_class!r}."
        )
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    missing = [field for field in _REQUIRED_FIELDS if field not in fields]
    nested = "optimizer" in fields and isinstance(fields["optimizer"].default, optim.OptimizerConfig)
    if missing and not nested:
        raise ValueError(
            f"Agent {name!r}: {config_class.__name__} needs the field(s) {', '.join(missing)} "
            "(the optimizer is made from them)."
        )
    no_default = [
        f.name for f in fields.values() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if no_default:
        raise ValueError(
            f"Agent {name!r}: every field of {config_class.__name__} needs a default (the flags start "
            f"from them); {', '.join(no_default)} has none."
        )
    if not callable(make):
        raise ValueError(f"Agent {name!r}: make must be a function make(spec, config) -> Agent, got {make!r}.")
    for other, (_, cls) in _AGENTS.items():
        if cls is config_class and other != name:
            raise ValueError(
                f"Agent {name!r}: {config_class.__name__} is already the config of agent {other!r} "
                "(a config class names one agent; subclass it)."
            )
    _AGENTS[name] = (make, config_class)


def _config_class_of(make: Callable, where: str) -> type:
    """An entry point's factory ``make(spec, config=MyConfig())``: the config class is its default's type."""
    try:
        default = inspect.signature(make).parameters["config"].default
    except (KeyError, TypeError, ValueError):
        default = inspect.Parameter.empty
    if default is inspect.Parameter.empty:
        raise ValueError(
            f"{where}: the factory must be make(spec, config=MyConfig()); the config's default names its class."
        )
    return type(default)


def _load_entry_points() -> None:
    """Registers, once, every agent that an installed package declares in the ``podracer.agents`` entry-point
    group: ``NAME = "package.module:make_agent"``, where ``make_agent(spec, config=MyConfig())``. The module is
    imported here (its config class makes the flags): it must not start JAX at import. An entry that fails to
    load is reported on one line and left out."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib import metadata

    for entry in metadata.entry_points(group=ENTRY_POINTS):
        if entry.name in _AGENTS:
            continue
        where = f"podracer.agents entry point {entry.name} = {entry.value!r}"
        try:
            make = entry.load()
            register(entry.name, _config_class_of(make, where), make)
        except Exception as error:  # noqa: BLE001 - a broken plugin must not stop runs of other agents
            print(f"podracer: warning: {where} left out: {error}", file=sys.stderr, flush=True)


def names() -> list[str]:
    """Names accepted by :func:`make`: the built-in agents, those registered, those of installed entry points."""
    _load_entry_points()
    return sorted(_AGENTS)


def config_class(name: str):
    """The config dataclass of the agent called ``name``."""
    _load_entry_points()
    if name not in _AGENTS:
        close = difflib.get_close_matches(name, list(_AGENTS), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown agent {name!r}; available: {', '.join(names())} (an agent of your own: "
            f"agents.register, --import MODULE, or a {ENTRY_POINTS} entry point).{hint}"
        )
    return _AGENTS[name][1]


def name_of(config) -> str:
    """The registry name of an agent config (``A2CConfig()`` -> ``"a2c"``)."""
    _load_entry_points()
    for name, (_, cls) in _AGENTS.items():
        if type(config) is cls:
            return name
    raise ValueError(
        f"{type(config).__name__} is not the config of a registered agent ({', '.join(names())}); "
        "register it with podracer.agents.register(name, config_class, make)."
    )


def config_classes(*, built_in: bool = False) -> dict[str, type]:
    """Every registered agent's config class by name, in name order (``built_in``: podracer's own only, without
    loading entry points)."""
    return {name: _AGENTS[name][1] for name in (sorted(BUILT_IN) if built_in else names())}


def make(agent, spec: EnvSpec, *, run: RunFacts | None = None, **hyper) -> Agent:
    """The agent for ``spec`` from its config (``make(PPOConfig(num_epochs=2), spec)``), or from its name and
    hyper-parameters (``make("ppo", spec, num_epochs=2, learning_rate=1e-3)``; unknown names and fields are
    errors), with its optimizer. ``run``: the facts of the run it trains in (a decaying learning rate and DQN's
    linear epsilon need them; evaluation and preview, which take no optimizer step, pass none)."""
    if isinstance(agent, str):
        config_cls = config_class(agent)
        fields = set(hyperparameters(config_cls()))
        unknown = sorted(set(hyper) - fields)
        if unknown:
            raise ValueError(f"Agent {agent!r} has no hyper-parameter(s) {unknown}; it takes {sorted(fields)}.")
        agent = with_hyperparameters(config_cls(), hyper)
    elif hyper:
        raise ValueError("Pass hyper-parameters in the agent's config, or pass the agent's name.")
    factory = _AGENTS[name_of(agent)][0]
    built = factory(spec, agent, run) if _takes_run(factory) else factory(spec, agent)
    if built.optimizer is not None:
        return built
    if built.replay is None:
        steps = functools.partial(optim.on_policy_steps, run, built.num_epochs, built.num_minibatches)
    else:
        steps = functools.partial(
            optim.replay_steps, run, built.replay.replay_ratio, built.replay.min_size, built.replay.batch_size
        )
    return built._replace(optimizer=optim.optimizer_of(optim.settings_of(agent), steps))


def _takes_run(factory) -> bool:
    """Whether an agent factory takes the run's facts as a third argument (``make(spec, config, run)``)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return "run" in parameters


__all__ = [
    "A2CConfig",
    "AlphaZeroConfig",
    "Agent",
    "DQNConfig",
    "ReplaySpec",
    "IMPALAConfig",
    "MuZeroConfig",
    "PPOBatch",
    "PPOConfig",
    "PQNConfig",
    "R2D2Config",
    "SACConfig",
    "Transitions",
    "no_state",
    "make_recurrent_fns",
    "unroll_trajectory",
    "config_class",
    "config_classes",
    "make",
    "make_a2c",
    "make_alphazero",
    "make_dqn",
    "make_impala",
    "make_muzero",
    "make_network",
    "make_policy_fns",
    "make_ppo",
    "make_pqn",
    "make_r2d2",
    "make_sac",
    "masked_mean",
    "name_of",
    "names",
    "policy_terms",
    "register",
    "transitions",
]
