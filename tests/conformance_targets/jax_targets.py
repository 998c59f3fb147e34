"""Implementations for compare.py check, in JAX."""

import jax
import jax.numpy as jnp


def lookup_indexing(token_table, position_table, token_ids, start):
    return token_table[token_ids] + jax.lax.dynamic_slice_in_dim(
        position_table, start, token_ids.shape[-1]
    )


def lookup_take(token_table, position_table, token_ids, start):
    rows = jnp.take(token_table, token_ids, axis=0)  # mode "fill": NaN for a bad id
    return rows + position_table[start : start + token_ids.shape[-1]]


def rope(x, positions):
    wide = jnp.float64 if x.dtype == jnp.float64 else jnp.float32
    dim = x.shape[-1]
    inverse = 1.0 / 10000.0 ** (jnp.arange(0, dim, 2, dtype=wide) / dim)
    angles = positions.astype(wide)[:, None] * inverse
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    a, b = jnp.split(x.astype(wide), 2, axis=-1)
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(x.dtype)


def gradient(token_table, token_ids, upstream):
    _, pull = jax.vjp(lambda table: table[token_ids], token_table)
    return pull(upstream)[0]
