"""Jumanji environments (``jumanji:NAME``) as podracer :class:`~podracer.core.envs.base.Environment` s.

Jumanji's ``step`` does not reset (podracer's :class:`~podracer.core.envs.wrappers.AutoReset`
starts the next episode) and keeps termination and truncation apart in dm_env's way: a
``LAST`` step with discount 0 terminated; one with discount 1 hit the time limit.

Jumanji's observations are structured (a NamedTuple of arrays: a board, an action mask,
a step count, ...). The agent sees them as one float32 vector: every field flattened and
concatenated in the observation's field order, a field with finite bounds in its spec
rescaled from ``[minimum, maximum]`` to [0, 1] (booleans become 0/1; unbounded fields
are kept as they are). Actions: ``DiscreteArray`` is discrete, a 1-D
``MultiDiscreteArray`` multi-discrete (Minesweeper's row and column, RubiksCube's face,
depth and direction), a ``BoundedArray`` a continuous box. Multi-agent tasks (Connector,
LevelBasedForaging, RobotWarehouse) are one agent choosing every agent's move, a
multi-discrete action, for the sum of their rewards.

A task whose observation has an ``action_mask`` declares it (``EnvSpec.action_mask``), so
no agent takes an illegal action; the agent also sees the mask among its features.
Three layouts: a discrete task's ``[A]``; a per-entry mask ``[len(nvec), max(nvec)]``
(Connector, JobShop, MMST, RobotWarehouse, LevelBasedForaging, Cleaner), one row per
multi-discrete entry; and a joint mask shaped as ``nvec`` (Minesweeper's ``[rows, cols]``,
Tetris, BinPack, Sudoku, FlatPack), which says which combinations are legal: such a task's
actions become one discrete choice among ``prod(nvec)`` (row-major), so the mask holds
exactly. MultiCVRP's mask goes with continuous actions and stays a feature only.

Boards whose cells are the actions (Minesweeper: an integer ``board`` whose joint mask has the board's shape,
every other field a scalar or shaped as the board) are seen as a channels-last image instead: one 0/1 plane per
value a cell can take, then every other field in field order (the mask; a scalar field rescaled to [0, 1] as a
constant plane). The spec says ``cell_actions``: policies take one logit per cell from convolutions that see each
cell's neighbours (``networks.CellLogits``), which a flat vector hides (masked PPO over the flat vector plays no
better than random legal moves).

The discount is Jumanji's: most of its tasks (Snake, Maze, Minesweeper, ...) end their
time limit with discount 0, a termination, and count the steps in the observation;
Connector and LevelBasedForaging truncate (discount 1).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from podracer.core.envs.base import check_task, first_timestep, require_package, step_timestep
from podracer.core.types import Box, EnvSpec, ImageLayout, TimeStep

LAST = 2  # jumanji.types.StepType.LAST


def require() -> None:
    """A one-line error naming the extra when jumanji is not installed."""
    require_package("jumanji", "jumanji")


def names() -> list[str]:
    """Jumanji's registered environments."""
    require()
    import jumanji

    return sorted(jumanji.registered_environments())


def make(name: str, **kwargs) -> "JumanjiEnv":
    """``jumanji:NAME`` (:func:`podracer.envs.make` calls this)."""
    return JumanjiEnv(name, **kwargs)


def _leaf_bounds(spec, value) -> list[tuple[Any, Any]]:
    """``(minimum, maximum)`` per array of the observation ``value`` (NamedTuples and dataclasses of arrays, in
    ``jax.tree.leaves`` order), from its Jumanji ``spec``; ``(None, None)`` for an unbounded one."""
    if not hasattr(value, "shape"):  # a NamedTuple or dataclass of fields, each with a spec of the same name
        names = value._fields if hasattr(value, "_fields") else [f.name for f in dataclasses.fields(value)]
        return [bound for name in names for bound in _leaf_bounds(getattr(spec, name, None), getattr(value, name))]
    if hasattr(spec, "num_values") and np.ndim(spec.num_values) == 0:  # DiscreteArray
        return [(0, int(spec.num_values) - 1)]
    if hasattr(spec, "minimum") and hasattr(spec, "maximum"):
        return [(np.asarray(spec.minimum, np.float64), np.asarray(spec.maximum, np.float64))]
    return [(None, None)]


def _mask_layout(mask, actions: dict) -> str | None:
    """How a Jumanji observation's ``action_mask`` (a shape-dtype struct, or None) fits the actions: "flat" (discrete
    ``[A]``), "rows" (one row per multi-discrete entry), "joint" (shaped as ``nvec``), or None (no mask we can hold
    to: none, or one beside continuous actions)."""
    if mask is None or "box" in actions:
        return None
    shape = tuple(mask.shape)
    if "num_actions" in actions:
        return "flat" if shape == (actions["num_actions"],) else None
    nvec = actions["nvec"]
    if shape == tuple(nvec):
        return "joint"
    if shape == (len(nvec), max(nvec)):
        return "rows"
    return None


MAX_BOARD_VALUES = 32  # the board view: at most this many values per cell (one plane each)


def _board_values(observation, spec, mask_layout) -> tuple[int, int] | None:
    """``(low, high)``, the values a cell takes, when ``observation`` (a shape-dtype struct) is a board whose cells
    are the actions: an integer rank-2 ``board`` with finite bounds, a joint mask of the board's shape, and every
    other field a scalar or shaped as the board; None otherwise."""
    board = getattr(observation, "board", None)
    if mask_layout != "joint" or board is None or len(board.shape) != 2 or not jnp.issubdtype(board.dtype, jnp.integer):
        return None
    if tuple(observation.action_mask.shape) != tuple(board.shape):
        return None
    fields = [getattr(observation, name) for name in getattr(observation, "_fields", ())]
    if not fields or any(
        not hasattr(field, "shape") or field.shape not in ((), tuple(board.shape)) for field in fields
    ):
        return None  # a field nested or shaped otherwise
    bounds = getattr(spec, "board", None)
    low, high = getattr(bounds, "minimum", None), getattr(bounds, "maximum", None)
    if low is None or high is None or np.size(low) != 1 or np.size(high) != 1:
        return None
    low, high = int(np.asarray(low)), int(np.asarray(high))
    return (low, high) if 0 < high - low < MAX_BOARD_VALUES else None


def _rescaled(leaf, scale) -> chex.Array:
    """One observation array as float32, mapped into [0, 1] by its ``(offset, scale)`` (None: kept as it is)."""
    x = jnp.asarray(leaf, jnp.float32)
    return x if scale is None else (x - scale[0]) * scale[1]


class JumanjiEnv:
    """``jumanji.make(name, **kwargs)`` behind podracer's environment protocol (``env``: a Jumanji environment, used
    as it is)."""

    def __init__(self, name: str, *, env=None, **kwargs):
        if env is None:
            require()
            import jumanji

            check_task("jumanji", name, jumanji.registered_environments())
            env = jumanji.make(name, **kwargs)
        self.name, self.env = name, env
        # made when first asked for: a config check makes the environment
        self._spec, self._scales, self._mask_layout, self._joint = None, None, None, None
        # before JAX may start
        self._board = None  # the board view's value range (low, high) when the task is seen as planes

    def spec(self) -> EnvSpec:
        if self._spec is None:
            observation = jax.eval_shape(lambda: self.env.reset(jax.random.key(0)))[1].observation
            leaves = jax.tree.leaves(observation)
            bounds = _leaf_bounds(self.env.observation_spec, observation)
            if len(bounds) != len(leaves):  # a layout this walk does not know: every field as it is
                bounds = [(None, None)] * len(leaves)
            self._scales = []  # per array: (offset, scale) that map it into [0, 1], or None
            for (low, high), leaf in zip(bounds, leaves):
                finite = (
                    low is not None and np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)
                )
                self._scales.append(
                    (
                        np.broadcast_to(low, leaf.shape).astype(np.float32),
                        np.broadcast_to(1.0 / (high - low), leaf.shape).astype(np.float32),
                    )
                    if finite
                    else None
                )
            size = sum(int(np.prod(leaf.shape)) for leaf in leaves)
            actions = self._actions()
            self._mask_layout = _mask_layout(getattr(observation, "action_mask", None), actions)
            if self._mask_layout == "joint":  # one discrete choice among every combination
                self._joint = actions.pop("nvec")
                actions["num_actions"] = int(np.prod(self._joint))
            observation_shape, image = (size,), None
            self._board = _board_values(observation, self.env.observation_spec, self._mask_layout)
            if self._board is not None:
                observation_shape = jax.eval_shape(self._planes, observation).shape
                image = ImageLayout(channel_axis=-1, low=0.0, high=1.0)
            self._spec = EnvSpec(
                jax.ShapeDtypeStruct(observation_shape, jnp.float32),
                action_mask=self._mask_layout is not None,
                image=image,
                cell_actions=self._board is not None,
                **actions,
            )
        return self._spec

    def _mask(self, observation):
        """The time step's legal-action mask in the layout the spec declares, or None."""
        layout = self._mask_layout
        if layout is None:
            return None
        mask = jnp.asarray(observation.action_mask, jnp.bool_)
        if layout == "rows":
            return tuple(mask[i, :n] for i, n in enumerate(self._spec.nvec))
        return mask.reshape(-1)

    def _actions(self) -> dict:
        action = self.env.action_spec
        num_values = getattr(action, "num_values", None)
        if num_values is not None and np.ndim(num_values) == 0:
            return {"num_actions": int(num_values)}
        if num_values is not None and np.ndim(num_values) == 1:
            return {"nvec": tuple(int(n) for n in np.asarray(num_values))}
        if hasattr(action, "minimum") and len(action.shape) == 1:
            low, high = (
                np.broadcast_to(np.asarray(b, np.float64), action.shape) for b in (action.minimum, action.maximum)
            )
            if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
                return {"box": Box(tuple(map(float, low)), tuple(map(float, high)))}
        raise ValueError(
            f"jumanji:{self.name} has actions of {type(action).__name__} {tuple(action.shape)}; podracer "
            "takes discrete, 1-D multi-discrete and bounded 1-D continuous actions."
        )

    def _observe(self, observation) -> chex.Array:
        self.spec()
        if self._board is not None:
            return self._planes(observation)
        return jnp.concatenate(
            [_rescaled(leaf, scale).reshape(-1) for leaf, scale in zip(jax.tree.leaves(observation), self._scales)]
        )

    def _planes(self, observation) -> chex.Array:
        """The board view: the board's value planes (one-hot), then every other field in the observation's field
        order, rescaled to [0, 1] as the flat view rescales it, a scalar field as a constant plane."""
        low, high = self._board
        board = jnp.asarray(observation.board)
        planes = [jax.nn.one_hot(board - low, high - low + 1, dtype=jnp.float32)]
        # One array per field here (the board view's condition), so the fields and their scales pair up.
        for name, scale in zip(observation._fields, self._scales):
            if name != "board":
                planes.append(jnp.broadcast_to(_rescaled(getattr(observation, name), scale), board.shape)[..., None])
        return jnp.concatenate(planes, axis=-1)

    def reset(self, key: chex.PRNGKey) -> tuple[Any, TimeStep]:
        state, timestep = self.env.reset(key)
        return state, first_timestep(self._observe(timestep.observation), self._mask(timestep.observation))

    def step(self, state: Any, action: chex.Array) -> tuple[Any, TimeStep]:
        if self._mask_layout == "joint":  # the flat choice back to one entry per axis of the joint mask
            action = jnp.stack(jnp.unravel_index(action, self._joint)).astype(jnp.int32)
        state, timestep = self.env.step(state, action)
        last = timestep.step_type == LAST
        # Multi-agent tasks give every agent a reward and a discount: the team's reward is their sum, and the
        # episode terminates only when no agent has a discount left.
        terminated = jnp.logical_and(last, jnp.max(timestep.discount) == 0.0)
        reward = jnp.sum(jnp.asarray(timestep.reward, jnp.float32))
        return state, step_timestep(
            self._observe(timestep.observation), reward, terminated, last, self._mask(timestep.observation)
        )
