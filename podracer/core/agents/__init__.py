"""Agents: ``Agent(init, act, loss | replay)`` bundles that run unchanged in every mode."""

from __future__ import annotations

import dataclasses
import functools
import difflib
import inspect
import re
import importlib
import sys
from collections.abc import Callable
from typing import NamedTuple

from podracer.core import normalize as normalize_lib
from podracer.core import optim
from podracer.core.agents.base import (
    Agent,
    ReplaySpec,
    make_network,
    no_state,
    make_policy_fns,
    make_recurrent_fns,
    unroll_trajectory,
)
from podracer.core.agents.losses import Transitions, masked_mean, policy_terms, transitions
from podracer.core.agents.hyperparameters import hyperparameters, with_hyperparameters
from podracer.core.types import EnvSpec, RunFacts


class BuiltIn(NamedTuple):
    """Where a built-in agent lives, and its one line for ``--help``, so that naming or listing it imports nothing:
    its module is imported when its config class or factory is first asked for."""

    module: str
    make: str
    config: str
    description: str  # the config class's docstring's first sentence (a test keeps them equal)


_BUILT_IN = {
    "a2c": BuiltIn("a2c", "make_a2c", "A2CConfig", "Advantage actor-critic (A2C)."),
    "alphazero": BuiltIn(
        "alphazero",
        "make_alphazero",
        "AlphaZeroConfig",
        "Gumbel AlphaZero: mctx's Gumbel search on the game's own rules, a policy-value network learning from it.",
    ),
    "dqn": BuiltIn(
        "dqn",
        "make_dqn",
        "DQNConfig",
        "Double Q-learning with n-step returns, a target network and prioritized replay.",
    ),
    "impala": BuiltIn("impala", "make_impala", "IMPALAConfig", "IMPALA: actor-critic with V-trace corrections."),
    "muzero": BuiltIn(
        "muzero",
        "make_muzero",
        "MuZeroConfig",
        "Gumbel MuZero: mctx's Gumbel search on a learned model (representation, dynamics, prediction).",
    ),
    "ppo": BuiltIn(
        "ppo", "make_ppo", "PPOConfig", "PPO: clipped surrogate objective, several epochs of minibatches per update."
    ),
    "pqn": BuiltIn(
        "pqn", "make_pqn", "PQNConfig", "PQN: vectorised Q(lambda) with LayerNorm, no replay, no target network."
    ),
    "r2d2": BuiltIn("r2d2", "make_r2d2", "R2D2Config", "R2D2: recurrent double Q-learning from prioritized sequences."),
    "sac": BuiltIn(
        "sac",
        "make_sac",
        "SACConfig",
        "Soft actor-critic with twin critics, target critics and a tuned entropy temperature.",
    ),
    "td3": BuiltIn(
        "td3",
        "make_td3",
        "TD3Config",
        "TD3: a deterministic actor, twin critics (scalar or categorical), a delayed actor and smoothed targets.",
    ),
}
# the public names of the built-in agents' modules (``agents.PPOConfig``, ``agents.make_ppo``, ``agents.PPOBatch``),
# each imported on first use (PEP 562)
_LAZY = {
    **{entry.config: (entry.module, entry.config) for entry in _BUILT_IN.values()},
    **{entry.make: (entry.module, entry.make) for entry in _BUILT_IN.values()},
    "PPOBatch": ("ppo", "PPOBatch"),
}
# registered agents (and built-in ones once imported): name -> (make, config class)
_AGENTS: dict[str, tuple[Callable[..., Agent], type]] = {}
BUILT_IN = frozenset(_BUILT_IN)
ENTRY_POINTS = "podracer.agents"  # the entry-point group an installed package registers its agents in
_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_entry_points_loaded = False


def _entry(name: str) -> tuple[Callable[..., Agent], type]:
    """``name``'s factory and config class; a built-in agent's module is imported here, on first use."""
    if name not in _AGENTS and name in _BUILT_IN:
        where = _BUILT_IN[name]
        module = importlib.import_module(f"{__name__}.{where.module}")
        _AGENTS[name] = (getattr(module, where.make), getattr(module, where.config))
    return _AGENTS[name]


def _adopt_imported() -> None:
    """Enters the built-in agents whose modules are already imported (``from podracer.core.agents.ppo import
    PPOConfig``), so that their configs are known by class without importing the others."""
    for name, where in _BUILT_IN.items():
        if name not in _AGENTS and f"{__name__}.{where.module}" in sys.modules:
            _entry(name)


def descriptions() -> dict[str, str]:
    """Every agent's one line for ``--help`` (its config's docstring's first sentence), by name, in name order,
    without importing a built-in agent's module."""
    out = {}
    for name in names():
        if name in _BUILT_IN:
            out[name] = _BUILT_IN[name].description
        else:
            doc = (_AGENTS[name][1].__doc__ or "").strip().split("\n\n")[0]
            out[name] = " ".join(doc.split())
    return out


def __getattr__(name: str):
    """A built-in agent's config class or factory (``agents.PPOConfig``), its module imported on first use."""
    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(name: str, config_class: type, make: Callable[..., Agent]) -> None:
    """Adds an agent of your own under ``name``: ``make(spec, config, run=None)`` (``run``: the run's
    :class:`~podracer.core.types.RunFacts`, None outside a run) builds its :class:`Agent` from a ``config_class``
    instance.
    ``config_class`` is a dataclass whose every field has a default; its fields become the agent's flags in both
    command lines (``--agent NAME --help`` lists them), each checked in its ``__post_init__`` as the built-in
    agents' are (:func:`podracer.core.agents.hyperparameters.check_hyperparameters`), and its numeric fields can be
    swept. Its optimizer settings are a field ``optimizer: podracer.core.optim.OptimizerConfig`` (as the built-in
    agents', :func:`podracer.core.optim.optimizer_field`). An agent whose ``optimizer`` is None gets the optimizer of
    those settings
    (:func:`podracer.core.optim.optimizer_of`: Adam, or RMSprop); set your own (``Agent(..., optimizer=...)``) for
    parameter groups or another optimizer. Checkpoints record the name, so ``python -m podracer.cli.evaluate`` plays it
    once it is registered there too (``--import MODULE``, or an entry point in the ``podracer.agents`` group).
    Registering a name again replaces it; a built-in name cannot be taken."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"An agent's name is lower case letters, digits, '-' and '_', starting with a letter "
            f"(it becomes --agent NAME), got {name!r}."
        )
    _adopt_imported()
    if name in BUILT_IN and _entry(name)[1] is not config_class:
        raise ValueError(f"{name!r} is a built-in agent; register yours under another name.")
    if not (isinstance(config_class, type) and dataclasses.is_dataclass(config_class)):
        raise ValueError(
            f"Agent {name!r}: its config must be a dataclass (its fields become flags), got {config_class!r}."
        )
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    if not ("optimizer" in fields and isinstance(fields["optimizer"].default, optim.OptimizerConfig)):
        raise ValueError(
            f"Agent {name!r}: {config_class.__name__} needs a field optimizer: OptimizerConfig, its optimizer settings "
            "(optimizer: OptimizerConfig = podracer.core.optim.optimizer_field(learning_rate, max_grad_norm))."
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
        if entry.name in _AGENTS or entry.name in BUILT_IN:
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
    return sorted(set(_AGENTS) | BUILT_IN)


def config_class(name: str):
    """The config dataclass of the agent called ``name``."""
    if name not in names():
        close = difflib.get_close_matches(name, names(), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"Unknown agent {name!r}; available: {', '.join(names())} (an agent of your own: "
            f"agents.register, --import MODULE, or a {ENTRY_POINTS} entry point).{hint}"
        )
    return _entry(name)[1]


def name_of(config) -> str:
    """The registry name of an agent config (``A2CConfig()`` -> ``"a2c"``)."""
    _load_entry_points()
    _adopt_imported()
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
    return {name: _entry(name)[1] for name in (sorted(BUILT_IN) if built_in else names())}


def make(
    agent,
    spec: EnvSpec,
    *,
    run: RunFacts | None = None,
    normalize: str | None = None,
    normalize_options: dict | None = None,
    **hyper,
) -> Agent:
    """The agent for ``spec`` from its config (``make(PPOConfig(num_epochs=2), spec)``), or from its name and
    hyper-parameters (``make("ppo", spec, num_epochs=2, learning_rate=1e-3)``; unknown names and fields are
    errors), with its optimizer. ``run``: the facts of the run it trains in (a decaying learning rate and DQN's
    linear epsilon need them; evaluation and preview, which take no optimizer step, pass none). ``normalize``
    ("observations", "rewards" or "observations+rewards", as checkpoints record it): the agent wrapped to learn and
    act on normalised observations and scaled rewards (:func:`podracer.core.normalize.wrap`, with the agent's discount);
    ``normalize_options``: that function's other keywords, as checkpoints record them (``{"observation_clip": 10}``)."""
    if isinstance(agent, str):
        config_cls = config_class(agent)
        fields = set(hyperparameters(config_cls()))
        unknown = sorted(set(hyper) - fields)
        if unknown:
            raise ValueError(f"Agent {agent!r} has no hyper-parameter(s) {unknown}; it takes {sorted(fields)}.")
        agent = with_hyperparameters(config_cls(), hyper)
    elif hyper:
        raise ValueError("Pass hyper-parameters in the agent's config, or pass the agent's name.")
    factory = _entry(name_of(agent))[0]
    built = factory(spec, agent, run)
    if built.optimizer is None:
        built = built._replace(optimizer=_default_optimizer(built, agent, run))
    if not normalize:
        return built
    return normalize_lib.wrap(
        built,
        observations="observations" in normalize,
        rewards="rewards" in normalize,
        discount=getattr(agent, "discount", 0.99),
        **(normalize_options or {}),
    )


def _default_optimizer(built: Agent, config, run: RunFacts | None):
    """The optimizer of an agent whose factory made none: its config's optimizer settings, stepped as its kind of
    learning takes steps (epochs of minibatches, or the replay ratio's)."""
    if built.replay is None:
        steps = functools.partial(optim.on_policy_steps, run, built.num_epochs, built.num_minibatches)
    else:
        steps = functools.partial(
            optim.replay_steps, run, built.replay.replay_ratio, built.replay.min_size, built.replay.batch_size
        )
    return optim.optimizer_of(config.optimizer, steps)


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
    "TD3Config",
    "Transitions",
    "no_state",
    "make_recurrent_fns",
    "unroll_trajectory",
    "config_class",
    "config_classes",
    "descriptions",
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
    "make_td3",
    "masked_mean",
    "name_of",
    "names",
    "policy_terms",
    "register",
    "transitions",
]
