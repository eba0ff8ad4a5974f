"""The config tree (the command lines are made from it: :mod:`podracer.cli.parser`).

Frozen dataclasses, each checked once in ``__post_init__`` with an error that names the flag:

- :class:`RunConfig`: what every run has (seed, logging, checkpoints, devices, processes);
- :class:`AnakinConfig` and :class:`SebulbaConfig`: a run config plus what is particular to the mode, and
  ``agent``: the chosen agent's config (:mod:`podracer.agents`), which owns every hyper-parameter of the agent.

On the command line each registered agent is a subcommand whose flags are its config's fields (``python -m
podracer.sebulba ppo --num-epochs 2``); ``--agent NAME`` is another spelling of the same choice. A new field of an
agent's config is therefore a new flag of both modes, with its default and help (the field's comment) in ``--help``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import types
import typing
from typing import Annotated, Any, Literal, TypeVar

from podracer.core import agents, envs, install, pbt, sweep
from podracer.run import parallel
from podracer.run import multihost
from podracer.core.agents.hyperparameters import check_finite, flag
from podracer.core.types import MAX_SEED
from podracer.core.precision import ComputeDtype


@dataclasses.dataclass(frozen=True)
class Flag:
    """What a field's name and type do not say of it (``Annotated[T, Flag(...)]``): how its flag is spelled, where the
    help page shows it and the least value it takes."""

    name: str | None = None  # the flag without its dashes, where not the field's name (``import`` for ``imports``)
    metavar: str | None = None  # what the help shows for its value (``NAME``); default: from the type
    help: str | None = None  # the help, where not the field's comment
    pair: bool = True  # a bool field: --x and --no-x; False: --x alone
    repeat: bool = False  # a tuple field: the flag repeated for each value (--sweep A --sweep B), not --x A B
    bare: str | None = None  # the value of the flag given without one (--resume: yes); --no-x then gives ``off``
    off: str | None = None
    group: str | None = None  # the help page's group (one of :data:`GROUPS`); a run field has one
    low: int | None = None  # the least value the field takes (None: no bound), checked by :func:`check_fields`


# The help page's groups, in order: what to train, how long, seeds and logging first; the run's plumbing later (the
# chosen agent's hyper-parameters follow them, in a group titled by the agent).
WHAT, HOW_LONG, SEEDS, ENVS, SWEEPS, FAULTS, DEVICES = GROUPS = (
    "what to train",
    "how long",
    "seeds, evaluation and logging",
    "environments and rollouts",
    "sweeps and populations",
    "checkpoints and faults",
    "devices, processes and compilation",
)


def unwrap(hint) -> tuple[Any, Flag]:
    """A type without ``Annotated`` and the :class:`Flag` it carries (a default one where none)."""
    said = Flag()
    if typing.get_origin(hint) is typing.Annotated:
        hint, *extras = typing.get_args(hint)
        said = next((extra for extra in extras if isinstance(extra, Flag)), said)
    return hint, said


@functools.cache
def declared(cls: type) -> dict[str, tuple[Any, Flag]]:
    """Each field of the config class ``cls``: :func:`unwrap` of its type."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {field.name: unwrap(hints[field.name]) for field in dataclasses.fields(cls)}


def _optional(hint) -> bool:
    return (isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union) and type(None) in (
        typing.get_args(hint)
    )


def _choices(hint) -> tuple | None:
    """The values a ``Literal`` type (or an optional one) allows; None for another type."""
    if _optional(hint):
        hint = next(m for m in typing.get_args(hint) if m is not type(None))
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else None


def check_fields(config) -> None:
    """What the fields' types and :class:`Flag` s say of ``config``'s values: a ``Literal`` field holds one of its
    choices, a field with a :attr:`Flag.low` is at least that (None aside); each refusal names the flag."""
    for name, (hint, said) in declared(type(config)).items():
        value, choices = getattr(config, name), _choices(hint)
        if choices is not None and value not in choices and not (value is None and _optional(hint)):
            shown = "--" + (said.name or name.replace("_", "-"))
            raise ValueError(f"{shown}: invalid choice: {value!r} (choose from {', '.join(map(str, choices))}).")
        if said.low is not None and value is not None and value < said.low:
            raise ValueError(f"{flag(name)} must be >= {said.low}, got {value}.")


T = TypeVar("T")
MAX_EPISODES = 65_536  # --eval-episodes, evaluate's --episodes: played at once, one environment each


# A mode's ``agent`` field: the config of one registered agent (:mod:`podracer.agents`). :func:`parse` gives the
# parser the chosen agent's class alone, so that a command line imports that agent's module and no other.
AgentConfig = Any


def _agent_default(name: str):
    """The ``agent`` field's default: ``name``'s config with its defaults, its module imported when first made."""
    return functools.partial(lambda name: agents.config_class(name)(), name)


AnakinEnvName = Annotated[
    str,
    Flag(
        metavar="NAME",
        help=f"JAX environment: {', '.join(envs.names())}, one registered with podracer.envs.register, or "
        f"SUITE:NAME ({', '.join(f'{s}:...' for s in sorted(envs.SUITES))}); --env list shows them, --env list:TEXT "
        "one suite or the names containing TEXT",
        group=WHAT,
    ),
]

Imports = Annotated[
    tuple[str, ...],
    Flag(
        name="import",
        metavar="MODULE",
        help="import this module (package.module, or a path/to/file.py) before anything else, so that the environments "
        "and agents it registers (podracer.envs.register, podracer.agents.register) can be named; repeat for several",
        repeat=True,
        group=WHAT,
    ),
]


def check_env(name: str) -> None:
    """``--env`` names a JAX environment that can be made (built-in, registered, or SUITE:NAME from an installed
    suite)."""
    try:
        envs.check(name)
    except ValueError as error:
        raise ValueError(f"--env: {error}") from None


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What every run has, in either mode."""

    # settings saved for a task (podracer/cli/presets/*.toml), applied before the command line's own flags (which win);
    # --preset list describes them
    preset: Annotated[str | None, Flag(metavar="NAME", group=WHAT)] = None
    imports: Imports = ()
    seed: Annotated[int, Flag(group=SEEDS)] = 0  # random seed
    # write DIR/metrics.jsonl and TensorBoard events there; on the command line, without it: a new
    # runs/ENV__AGENT__SEED__TIME ($PODRACER_RUNS_DIR instead of runs)
    log_dir: Annotated[str | None, Flag(metavar="DIR", group=SEEDS)] = None
    no_log_dir: Annotated[bool, Flag(pair=False, group=SEEDS)] = False  # the command line writes no log directory
    # also log to this Weights & Biases project (the wandb extra; WANDB_MODE=offline needs no network)
    wandb_project: Annotated[str | None, Flag(metavar="NAME", group=SEEDS)] = None
    # updates between evaluations of the greedy policy on separate environments with fixed seeds (Anakin: a multiple of
    # --updates-per-call); None: none
    eval_every: Annotated[int | None, Flag(group=SEEDS, low=1)] = None
    # the policy evaluations play: greedy (the most likely or highest-valued action) or sampled (the behaviour policy)
    eval_policy: Annotated[Literal["greedy", "sampled"], Flag(group=SEEDS)] = "greedy"
    # episodes per evaluation, one per environment, all at once (Anakin: compiled on the device)
    eval_episodes: Annotated[int, Flag(group=SEEDS, low=1)] = 32
    # stop (and save) once an evaluation's mean return reaches this; needs --eval-every
    target_return: Annotated[float | None, Flag(group=SEEDS)] = None
    # act and learn on observations standardised by running statistics (mean and variance of every device's and
    # process's batches, kept with the parameters: checkpointed, used by evaluate), clipped to [-5, 5]; floating-point
    # observations only
    normalize_observations: Annotated[bool, Flag(group=ENVS)] = False
    # learn from rewards divided by a running estimate of the discounted return's standard deviation (the agent's
    # --discount), clipped to [-10, 10]
    normalize_rewards: Annotated[bool, Flag(group=ENVS)] = False
    # --normalize-observations clips each standardised entry to [-this, this] (CleanRL's and gymnasium's: 10)
    observation_clip: Annotated[float, Flag(metavar="STDS", group=ENVS)] = 5.0
    # the statistics the loss sees a trajectory normalised with: those updated with it (brax's PPO), or those the
    # actor acted with, before the update (acting: Stable-Baselines3's and CleanRL's, whose buffers keep observations
    # as acted on; exact where the actor has the learner's newest parameters, as with Sebulba's --max-policy-lag 0)
    normalize_with: Annotated[Literal["updated", "acting"], Flag(group=ENVS)] = "updated"
    # where the discounted return whose spread scales rewards (--normalize-rewards) restarts: at every episode's end
    # (Stable-Baselines3's VecNormalize), or only where one terminates, running on across a time limit (termination:
    # gymnasium's NormalizeReward, CleanRL's)
    return_restart: Annotated[Literal["episode", "termination"], Flag(group=ENVS)] = "episode"
    # save the learner there (orbax; podracer evaluate plays it) at the end, on Ctrl-C and every
    # --checkpoint-every updates; the newest 3 are kept
    checkpoint_dir: Annotated[str | None, Flag(metavar="DIR", group=FAULTS)] = None
    # updates between checkpoints; None: only at the end and on a stop (Ctrl-C, SIGTERM, SIGUSR1)
    checkpoint_every: Annotated[int | None, Flag(group=FAULTS, low=1)] = None
    # also take a checkpoint once this many seconds have passed since the last one (wall time, checked after each host
    # call or learner update); None: never by time
    checkpoint_every_seconds: Annotated[float | None, Flag(group=FAULTS)] = None
    # continue from the newest checkpoint in --checkpoint-dir: yes (bare --resume): it must be there; auto: when it is,
    # else start fresh (one command line for every attempt of a requeued job); no
    resume: Annotated[Literal["no", "yes", "auto"], Flag(bare="yes", off="no", group=FAULTS)] = "no"
    # an update with a non-finite loss, gradient or parameter: stop (one line, exit 1; none saved), skip it, continue
    on_nonfinite: Annotated[Literal["stop", "skip", "continue"], Flag(group=FAULTS)] = "stop"
    # CPU devices to expose when JAX runs on the CPU; None: one per core
    cpu_devices: Annotated[int | None, Flag(group=DEVICES, low=1)] = None
    coordinator: Annotated[str | None, Flag(group=DEVICES)] = None  # multi-process: HOST:PORT of process 0
    num_processes: Annotated[int | None, Flag(group=DEVICES)] = None  # multi-process: number of processes
    # multi-process: index of this process, 0 ... num_processes - 1
    process_id: Annotated[int | None, Flag(group=DEVICES)] = None
    # multi-process: let JAX detect the cluster (TPU pod slice, Slurm)
    distributed: Annotated[bool, Flag(group=DEVICES)] = False
    # multi-process: seconds to reach the coordinator and every process before giving up
    distributed_timeout: Annotated[int, Flag(group=DEVICES, low=1)] = 45
    # keep compiled programs on disk (JAX's persistent compilation cache): a run with the same settings skips
    # compilation
    compile_cache: Annotated[bool, Flag(group=DEVICES)] = True
    # where; None: $XDG_CACHE_HOME/podracer/jax (~/.cache/podracer/jax)
    compile_cache_dir: Annotated[str | None, Flag(metavar="DIR", group=DEVICES)] = None
    # the networks' matmuls and activations: float32, or bfloat16 over float32 parameters, optimizer state, losses,
    # returns and normalisation statistics (mixed precision, for accelerators with bfloat16 units)
    compute_dtype: Annotated[ComputeDtype, Flag(group=DEVICES)] = "float32"

    def __post_init__(self):
        if isinstance(self.resume, bool):  # Python callers: resume=True / False
            object.__setattr__(self, "resume", "yes" if self.resume else "no")
        check_fields(self)  # choices and bounds, the modes' fields' too
        check_finite(self)
        if not 0 <= self.seed <= MAX_SEED:  # seeds are int32 in the programs that make their keys
            raise ValueError(f"--seed must be between 0 and {MAX_SEED}, got {self.seed}.")
        if self.eval_episodes > MAX_EPISODES:
            raise ValueError(
                f"--eval-episodes must be <= {MAX_EPISODES:,} (one environment each), got {self.eval_episodes}."
            )
        if self.checkpoint_every_seconds is not None and not self.checkpoint_every_seconds > 0:
            raise ValueError(f"--checkpoint-every-seconds must be > 0, got {self.checkpoint_every_seconds}.")
        _check_normalization(self)
        multihost.check_process_id(self.num_processes, self.process_id)
        multihost.check_coordinator(self.coordinator)
        if self.target_return is not None and self.eval_every is None:
            raise ValueError("--target-return needs --eval-every.")
        if self.wandb_project and importlib.util.find_spec("wandb") is None:
            raise ValueError(f"--wandb-project needs wandb: {install.command('wandb')}.")
        if (
            self.checkpoint_every is not None or self.checkpoint_every_seconds is not None or self.resume != "no"
        ) and not self.checkpoint_dir:
            raise ValueError("--checkpoint-every, --checkpoint-every-seconds and --resume need --checkpoint-dir.")


# The normalisation options beside the two switches, by field (podracer.core.normalize.wrap's keywords), with their
# defaults: checkpoints record those set away from them (podracer.run.compose.normalization_options).
NORMALIZE_OPTIONS = {
    field.name: field.default
    for field in dataclasses.fields(RunConfig)
    if field.name in ("observation_clip", "normalize_with", "return_restart")
}


def _check_normalization(config) -> None:
    """The normalisation options (:data:`NORMALIZE_OPTIONS`): given only with the normalisation they shape."""
    if not config.observation_clip > 0:
        raise ValueError(f"--observation-clip must be > 0, got {config.observation_clip}.")
    shapes = {
        "observation_clip": (config.normalize_observations, "--normalize-observations"),
        "return_restart": (config.normalize_rewards, "--normalize-rewards"),
        "normalize_with": (
            config.normalize_observations or config.normalize_rewards,
            "--normalize-observations or --normalize-rewards",
        ),
    }
    for name, default in NORMALIZE_OPTIONS.items():
        on, what = shapes[name]
        if getattr(config, name) != default and not on:
            flag_name = "--" + name.replace("_", "-")
            raise ValueError(
                f"{flag_name} shapes {what}, which this run does not ask for: add it, or drop {flag_name}."
            )


def _check_burn_in(agent, rollout_length: int) -> None:
    burn_in = getattr(agent, "burn_in", None)
    if burn_in is not None and burn_in >= rollout_length:
        raise ValueError(f"--burn-in ({burn_in}) must be shorter than --rollout-length ({rollout_length}).")


class _ChoosesAnAgent:
    """A mode's config: its ``agent`` field is one registered agent's config."""

    @property
    def agent_name(self) -> str:
        return agents.name_of(self.agent)


@dataclasses.dataclass(frozen=True)
class AnakinConfig(RunConfig, _ChoosesAnAgent):
    """A training run in Anakin mode: JAX environments and the learner in one program per device."""

    env: AnakinEnvName = "catch"
    # the agent and its hyper-parameters
    agent: Annotated[AgentConfig, Flag(group=WHAT)] = dataclasses.field(default_factory=_agent_default("a2c"))
    # the run's budget in environment steps per seed (all devices together), rounded up to whole updates as Sebulba's
    # is, here to whole host calls (--updates-per-call updates each; the banner says by how much); instead of
    # --num-updates (a preset's; a command line gives one of the two)
    total_env_steps: Annotated[int | None, Flag(group=HOW_LONG, low=1)] = None
    num_updates: Annotated[int, Flag(group=HOW_LONG, low=1)] = 240  # learner updates in the run
    # updates scanned on the device per host call; one log line per call
    updates_per_call: Annotated[int, Flag(group=HOW_LONG, low=1)] = 20
    # seeds trained together in one compiled program, vmapped on every device: --seed S --num-seeds N trains seeds S ...
    # S + N - 1, each with the training and evaluation keys of --seed S + i alone (vmapped arithmetic rounds otherwise,
    # and training can amplify that: a seed's figures can differ from its run alone's)
    num_seeds: Annotated[int, Flag(group=SEEDS, low=1)] = 1
    # environments stepped on each device
    num_envs_per_device: Annotated[int, Flag(group=ENVS, low=1)] = 64
    # environments in total, over all devices of all processes; overrides --num-envs-per-device
    num_envs: Annotated[int | None, Flag(group=ENVS, low=1)] = None
    # environment steps per rollout (per update)
    rollout_length: Annotated[int, Flag(group=ENVS, low=1)] = 16
    # environment steps written out in each iteration of the rollout's loop (lax.scan's unroll): fewer iterations, each
    # fusing more, at a longer compilation; the same steps computed (benchmarks/fixed_cost.py)
    rollout_unroll: Annotated[int, Flag(group=ENVS, low=1)] = 1
    # two-player pgx games: who makes the other player's moves: random legal moves, one-step greedy ones (a winning
    # move where there is one), or the agent itself (self-play: every move the agent's; evaluations play random moves)
    opponent: Annotated[Literal["random", "greedy", "self"], Flag(group=ENVS)] = "random"
    # NAME=V1,V2,... (repeat for a grid): train every setting x --num-seeds in one program; ends with a table of final
    # returns (mean, IQM, 95% bootstrap intervals) and, with --log-dir, sweep.csv and sweep.png
    sweep: Annotated[tuple[str, ...], Flag(metavar="SETTING", repeat=True, group=SWEEPS)] = ()
    # lanes of a population trained in one program with population-based training over --pbt-search
    population: Annotated[int | None, Flag(group=SWEEPS)] = None
    # NAME=[log:]LOW..HIGH (repeat): a hyper-parameter PBT searches, its range and scale (learning_rate=log:1e-4..1e-2)
    pbt_search: Annotated[tuple[str, ...], Flag(metavar="RANGE", repeat=True, group=SWEEPS)] = ()
    # updates between rankings (a multiple of --updates-per-call); None: every call
    pbt_every: Annotated[int | None, Flag(group=SWEEPS)] = None
    # the bottom fraction of lanes copies a lane of the top fraction at each ranking
    pbt_fraction: Annotated[float, Flag(group=SWEEPS)] = 0.25
    # chance that a copied value is drawn afresh from its range, else x0.8 or x1.25
    pbt_resample: Annotated[float, Flag(group=SWEEPS)] = 0.25

    # flags of which a command line gives one: the other may come from a preset, and the command line's wins
    ONE_OF = (("total_env_steps", "num_updates"),)

    def __post_init__(self):
        super().__post_init__()
        check_env(self.env)
        if self.eval_every is not None:
            parallel.check_divisible(
                self.eval_every, self.updates_per_call, "--eval-every", "updates per call (--updates-per-call)"
            )
        _check_burn_in(self.agent, self.rollout_length)
        if self.rollout_unroll > self.rollout_length:
            raise ValueError(
                f"--rollout-unroll {self.rollout_unroll} is more than the rollout's {self.rollout_length} steps "
                "(--rollout-length): at most that many can be written out."
            )
        parallel.check_divisible(
            self.num_updates, self.updates_per_call, "--num-updates", "updates per call (--updates-per-call)"
        )
        if self.checkpoint_every is not None:
            parallel.check_divisible(
                self.checkpoint_every,
                self.updates_per_call,
                "--checkpoint-every",
                "updates per call (--updates-per-call)",
            )
        pbt.check_config(self)  # --num-seeds, --sweep and --population against each other and the rest

    @property
    def sweep_points(self) -> tuple[dict[str, float], ...]:
        """The settings of ``--sweep`` (the grid, last name fastest); ``()`` without one."""
        return sweep.parse(self.agent, self.sweep)

    @property
    def entries(self) -> int:
        """How many learners the run trains together: seeds x settings, or the population's lanes."""
        return self.population or self.num_seeds * max(len(self.sweep_points), 1)

    def envs_per_device(self, num_global_devices: int) -> int:
        """Environments on each device, checking that a total splits evenly."""
        if self.num_envs is None:
            return self.num_envs_per_device
        return parallel.check_divisible(self.num_envs, num_global_devices, "--num-envs", "devices of this run")


STICKY_ACTIONS = 0.25  # --sticky-actions' default: Machado et al. 2018's protocol, gymnasium's Atari v5 ids'


@dataclasses.dataclass(frozen=True)
class SebulbaConfig(RunConfig, _ChoosesAnAgent):
    """A training run in Sebulba mode: actor threads step host environments, a learner trains on their trajectories."""

    # envpool task id or short name (Pong, Breakout, CartPole, HalfCheetah-v4); gymnasium:ID, any registered gymnasium
    # environment (gymnasium:CartPole-v1, gymnasium:my_package:MyTask-v0); or a JAX environment stepped on the host:
    # jax:NAME (jax:memory, jax:catch, jax:cartpole) or SUITE:NAME (gymnax:CartPole-v1, brax:ant); --env list shows them
    # (envpool's ids first), --env list:TEXT one suite or the names containing TEXT
    env: Annotated[str, Flag(group=WHAT)] = "Pong"
    # the agent and its hyper-parameters; on the command line without --agent: impala for Atari games, ppo for every
    # other environment
    agent: Annotated[AgentConfig, Flag(group=WHAT)] = dataclasses.field(default_factory=_agent_default("impala"))
    # the run's budget in environment steps (all actors together), rounded up to whole updates
    total_env_steps: Annotated[int, Flag(group=HOW_LONG, low=1)] = 10_000_000
    log_every: Annotated[int, Flag(group=SEEDS, low=1)] = 10  # learner updates between log lines
    # environments per actor thread (must divide over the learner devices)
    num_envs_per_actor: Annotated[int, Flag(group=ENVS, low=1)] = 32
    # environments in total, over all actor threads of all processes; overrides --num-envs-per-actor
    num_envs: Annotated[int | None, Flag(group=ENVS, low=1)] = None
    rollout_length: Annotated[int, Flag(group=ENVS, low=1)] = 20  # environment steps per trajectory
    # gymnasium:ID batches: sync steps them in the actor thread; async gives each environment a process of its own (for
    # environments slower to step than a process round trip)
    gymnasium_vectorization: Annotated[Literal["sync", "async"], Flag(group=ENVS)] = "sync"
    # envpool worker threads per batch; 0: envpool's default
    envpool_threads: Annotated[int, Flag(group=ENVS, low=0)] = 0
    # groups an actor thread's environments are split into: one group steps while another's actions are computed; None:
    # 2 on accelerators, 1 when actors run on the CPU
    env_groups: Annotated[int | None, Flag(group=ENVS, low=1)] = None
    # each actor thread steps its envpool batch through envpool's XLA interface inside one compiled rollout on its
    # device (receive, act, send, rollout-length times): no Python per step, the same trajectories to the bit;
    # envpool's tasks of discrete actions and array observations, one environment group
    envpool_xla: Annotated[bool, Flag(group=ENVS)] = False
    # envpool's Atari games: the probability that the emulator repeats the previous action instead of the chosen one
    # (Machado et al. 2018's sticky actions; envpool's own default and CleanRL's envpool scripts: 0)
    sticky_actions: Annotated[float, Flag(metavar="PROB", group=ENVS)] = 0.25
    # seconds an actor thread may go without shipping a trajectory (waits for queue room and its first parameters
    # aside) before the run stops, naming it
    actor_timeout: Annotated[float, Flag(group=FAULTS)] = 900.0
    # indices of the local devices that act; None: device 0
    actor_devices: Annotated[tuple[int, ...] | None, Flag(group=DEVICES)] = None
    # indices of the local devices that learn; None: all but the actor devices, or device 0 alone
    learner_devices: Annotated[tuple[int, ...] | None, Flag(group=DEVICES)] = None
    # actor threads per actor device, each with its own envpool batch
    actor_threads: Annotated[int, Flag(group=DEVICES, low=1)] = 1
    # trajectories the queue holds before actors wait
    queue_size: Annotated[int, Flag(group=DEVICES, low=1)] = 2
    # an actor starts a trajectory only once the learner has taken every trajectory started before it but this many:
    # 0 learns from each trajectory with the parameters that acted it (on-policy, as CleanRL's PPO; several actor
    # threads then take turns); None: actors act with the newest parameters without waiting (Sebulba's pipelining)
    max_policy_lag: Annotated[int | None, Flag(group=DEVICES, low=0)] = None

    @classmethod
    def command_line_agent(cls, env: str) -> str | None:
        """The agent a command line without ``--agent`` trains on ``env``: IMPALA for Atari games (envpool's
        stacked frames, what IMPALA's ResNet was made for), PPO for every other environment (vectors, boards,
        JAX environments: PPO solves CartPole with its defaults where IMPALA's stall); ``None`` (the field's
        default) for an id envpool does not know, which fails later with its own message."""
        if envs.is_jax_on_host(env) or env.startswith("gymnasium:"):
            return "ppo"
        try:
            from podracer.run.hostenvs.envpool import is_atari, resolve_task_id

            return "impala" if is_atari(resolve_task_id(env)) else "ppo"
        except (ImportError, ValueError):
            return None

    def __post_init__(self):
        super().__post_init__()
        if not self.actor_timeout > 0:
            raise ValueError(f"--actor-timeout must be > 0, got {self.actor_timeout}.")
        _check_burn_in(self.agent, self.rollout_length)
        if envs.is_jax_on_host(self.env):
            check_env(self.env.removeprefix("jax:"))  # unknown names fail here, with the list of known ones
        elif not self.env.startswith("gymnasium:"):
            from podracer.run.hostenvs.envpool import require

            require(self.env)  # envpool is an extra: its absence is one line here, before anything starts
        if self.env_groups is not None:
            parallel.check_divisible(self.num_envs_per_actor, self.env_groups, "--num-envs-per-actor", "--env-groups")
        if self.envpool_xla and (envs.is_jax_on_host(self.env) or self.env.startswith("gymnasium:")):
            raise ValueError(f"--envpool-xla steps envpool's tasks; {self.env} is not one.")
        if self.envpool_xla and self.env_groups not in (None, 1):
            raise ValueError(
                f"--envpool-xla steps one envpool batch per actor thread in one program; drop --env-groups "
                f"{self.env_groups}."
            )
        if not 0.0 <= self.sticky_actions <= 1.0:
            raise ValueError(f"--sticky-actions is a probability in [0, 1], got {self.sticky_actions:g}.")
        if self.sticky_actions != STICKY_ACTIONS and self.command_line_agent(self.env) != "impala":
            raise ValueError(f"--sticky-actions applies to envpool's Atari games; {self.env} is not one.")

    def envs_per_actor(self, num_actors: int) -> int:
        """Environments per actor thread, given the actor threads of all processes; checks that a total splits
        evenly."""
        if self.num_envs is None:
            return self.num_envs_per_actor
        return parallel.check_divisible(self.num_envs, num_actors, "--num-envs", "actor threads of this run")

    def groups(self, actor_platform: str, num_envs_per_actor: int) -> int:
        """Environment groups per actor thread. On the CPU, inference and envpool share the same
        cores and splitting the batch only adds per-call overhead (CartPole: 29k env steps/s with one
        group, 21k with two), so one group; on an accelerator, inference overlaps stepping."""
        if self.env_groups is not None:
            return self.env_groups
        return 1 if self.envpool_xla or actor_platform == "cpu" or num_envs_per_actor % 2 else 2
