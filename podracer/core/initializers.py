"""Parameter initializers that are safe where flax's are not: orthogonal initialisation whose QR never re-enters
XLA:CPU's thread pool under ``vmap``."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


@jax.custom_batching.custom_vmap
def _qr(matrix):
    return tuple(jnp.linalg.qr(matrix))


@_qr.def_vmap
def _qr_vmap(axis_size, in_batched, matrix):
    del axis_size
    if not in_batched[0]:
        return _qr(matrix), (False, False)
    return jax.lax.map(_qr, matrix), (True, True)  # one matrix after another (:func:`orthogonal`)


def orthogonal(scale: float = 1.0):
    """``flax.linen.initializers.orthogonal(scale)`` (the same values), safe to vmap on XLA:CPU.

    Under ``vmap`` (seeds trained together) flax's initializer runs one batched QR, and
    XLA:CPU's LAPACK QR spreads a batch over the same thread pool that runs the program: two
    such QRs at once on a 2-core machine wait on each other for ever (reproduced here within
    300 calls of a vmapped SAC initialization). Here a batch of QRs runs one matrix after
    another, which never re-enters the pool.
    """

    def init(key, shape, dtype=jnp.float32):
        rows, columns = math.prod(shape[:-1]), shape[-1]
        matrix_shape = (columns, rows) if rows < columns else (rows, columns)
        q, r = _qr(jax.random.normal(key, matrix_shape, dtype))
        q = q * jnp.sign(jnp.diagonal(r))[None, :]
        if rows < columns:
            q = q.T
        return (scale * q.reshape(shape)).astype(dtype)

    return init


KERNEL_INITS = ("orthogonal", "lecun", "torch")  # what --kernel-init takes


def make_kernel_init(kind: str, scale: float):
    """A dense layer's kernel initializer: ``orthogonal``, :func:`orthogonal` with the ``scale`` the layer's role asks
    for (sqrt(2) before an activation, 0.01 for a policy's outputs, 1 for a value: the PPO implementations' habit);
    ``lecun``, LeCun-normal kernels whatever the role (``flax.linen.Dense``'s default, which codebases built on flax's
    defaults, such as gymnax-blines, train with); ``torch``, PyTorch's ``nn.Linear`` default whatever the role
    (uniform in ``±1 / sqrt(fan_in)``, its biases too: :func:`make_bias_init`), which Stable-Baselines3 trains with
    under ``ortho_init=False``."""
    if kind == "orthogonal":
        return orthogonal(scale)
    if kind == "lecun":
        return jax.nn.initializers.lecun_normal()
    if kind == "torch":
        return jax.nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")  # bound sqrt(3 / 3 / fan_in)
    raise ValueError(f"--kernel-init: unknown initializer {kind!r}; choose one of {', '.join(KERNEL_INITS)}.")


def make_bias_init(kind: str, fan_in: int):
    """A dense layer's bias initializer to go with :func:`make_kernel_init`'s kernels: zeros, but for ``torch``,
    PyTorch's ``nn.Linear`` default, uniform in ``±1 / sqrt(fan_in)`` (``fan_in``: the layer's inputs)."""
    if kind != "torch":
        return jax.nn.initializers.zeros
    bound = 1.0 / math.sqrt(fan_in)

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


__all__ = ["KERNEL_INITS", "make_bias_init", "make_kernel_init", "orthogonal"]
