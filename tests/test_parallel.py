"""Device layout: the library's device map (jit of shard_map over a Mesh), placement, and no pmap in library code."""

import ast
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podracer.run import parallel

PACKAGE = Path(__file__).resolve().parents[1] / "podracer"


def test_library_code_calls_no_pmap():
    calls = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name == "pmap":
                    calls.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not calls, calls


def test_device_map_sees_one_entry_per_device_and_reduces_over_all(devices):
    four = devices[:4]

    def per_device(x, key):
        index = jax.lax.axis_index(parallel.DEVICE_AXIS)
        return {
            "total": jax.lax.psum(x.sum(), parallel.DEVICE_AXIS),
            "index": index,
            "shape": jnp.array(x.shape),
            "key": jax.random.key_data(key),
        }

    x = parallel.shard(np.arange(4 * 3, dtype=np.float32).reshape(4, 3), four)
    out = parallel.device_map(per_device, four)(x, parallel.replicate(jax.random.key(7), four))
    np.testing.assert_array_equal(out["total"], np.full(4, 66.0))
    np.testing.assert_array_equal(out["index"], np.arange(4))
    np.testing.assert_array_equal(out["shape"], np.tile([3], (4, 1)))
    np.testing.assert_array_equal(out["key"], np.tile(jax.random.key_data(jax.random.key(7)), (4, 1)))
    assert out["total"].sharding.mesh.axis_names == (parallel.DEVICE_AXIS,)
    assert {s.device for s in out["total"].addressable_shards} == set(four)
    assert float(parallel.unreplicate(out["total"])) == 66.0


def test_shard_names_the_expected_leading_axis(devices):
    with pytest.raises(
        ValueError, match=r"Cannot shard an array of shape \(3, 2\) over 2 devices: its leading axis must be 2\."
    ):
        parallel.shard(np.zeros((3, 2)), devices[:2])
