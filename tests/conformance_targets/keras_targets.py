"""Implementations for compare.py check in Keras 3's ops, which run on the framework that
KERAS_BACKEND names (tests/test_framework_probe.py): the module imports keras, not torch or
jax, so only a call tells which arrays it takes and returns."""

import keras
from keras import ops


def rope(x, positions):
    """The half layout, its angles in float64 for a float64 x, else in float32; but Keras's
    ops.cos and ops.sin return float32 for float64 on JAX and NumPy (not on torch), so there
    a float64 x is computed in float32."""
    dtype = keras.backend.standardize_dtype(x.dtype)
    wide = "float64" if dtype == "float64" else "float32"
    dim = x.shape[-1]
    inverse = 1.0 / 10000.0 ** (ops.arange(0, dim, 2, dtype=wide) / dim)
    angles = ops.cast(positions, wide)[:, None] * inverse  # (T, dim/2)
    cos, sin = ops.cos(angles), ops.sin(angles)
    a, b = ops.split(ops.cast(x, wide), 2, axis=-1)
    return ops.cast(ops.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1), dtype)


def lookup(token_table, position_table, token_ids, start):
    positions = ops.arange(start, start + token_ids.shape[-1])
    return ops.take(token_table, token_ids, axis=0) + ops.take(position_table, positions, axis=0)
