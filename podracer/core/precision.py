"""The networks' compute dtype: bfloat16 matmuls and activations over float32 parameters (mixed precision).

A run's ``--compute-dtype bfloat16`` (``RunFacts.compute_dtype``) makes each agent's networks compute in bfloat16
as flax modules built with ``dtype=jnp.bfloat16, param_dtype=jnp.float32`` do: every floating parameter and every
floating input of every module call is cast to bfloat16 where it is used, and the network's floating outputs come
back as float32. Parameters, their gradients, the optimizer state, the losses, returns, targets and normalisation
statistics stay float32: the casts sit inside the differentiated function, so a gradient reaches the float32
parameters through them. ``float32`` (the default) leaves the module as it is, so a run is bit-identical to one
without the option.

Flax sets a compute dtype per layer (``nn.Dense(dtype=...)``); podracer's torsos, heads and agents' own modules
would each need the field threaded through. :func:`in_compute_dtype` gives every agent the same behaviour from one
place instead: it casts the parameters on the way into ``apply`` and the inputs of every module call through flax's
documented method interception (``flax.linen.intercept_methods``), which also catches a float32 array that a module
makes inside (``to_nhwc``'s scaled frames) before the next layer uses it.
"""

from __future__ import annotations

from typing import Any, Literal

import flax.linen as nn
import jax
import jax.numpy as jnp

COMPUTE_DTYPES = ("float32", "bfloat16")
ComputeDtype = Literal[COMPUTE_DTYPES]  # the choices, for configs and the command lines


def check_compute_dtype(name: str) -> None:
    """A one-line error naming the flag for a compute dtype podracer does not offer."""
    if name not in COMPUTE_DTYPES:
        raise ValueError(f"--compute-dtype: unknown dtype {name!r}; choose one of {', '.join(COMPUTE_DTYPES)}.")


def _cast_floats(tree, dtype):
    """``tree`` with its floating arrays (not its integers, booleans or keys) cast to ``dtype``."""

    def cast(leaf):
        if isinstance(leaf, (jax.Array, jnp.ndarray)) and jnp.issubdtype(leaf.dtype, jnp.floating):
            return leaf.astype(dtype)
        return leaf

    return jax.tree.map(cast, tree)


class MixedPrecision:
    """``module`` computing in ``dtype``: ``init`` as the module's (float32 parameters), ``apply`` with the
    parameters and every module call's floating inputs in ``dtype`` and floating outputs back in float32. Other
    attributes are the module's."""

    def __init__(self, module: nn.Module, dtype):
        self.module = module
        self.dtype = jnp.dtype(dtype)

    def init(self, *args, **kwargs):
        return self.module.init(*args, **kwargs)

    def apply(self, variables, *args, **kwargs):
        dtype = self.dtype

        def cast_inputs(next_fun, call_args, call_kwargs, context):
            return next_fun(*_cast_floats(call_args, dtype), **_cast_floats(call_kwargs, dtype))

        with nn.intercept_methods(cast_inputs):
            out = self.module.apply(_cast_floats(variables, dtype), *args, **kwargs)
        return _cast_floats(out, jnp.float32)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def __repr__(self) -> str:
        return f"MixedPrecision({self.module!r}, {self.dtype.name})"


def in_compute_dtype(module: nn.Module, run=None):
    """``module`` as the run computes it: itself for float32 (no run facts: float32), else a
    :class:`MixedPrecision` of it in the run's ``compute_dtype``."""
    name = "float32" if run is None else run.compute_dtype
    check_compute_dtype(name)
    return module if name == "float32" else MixedPrecision(module, jnp.dtype(name))
