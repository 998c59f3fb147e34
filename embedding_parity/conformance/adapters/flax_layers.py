"""Flax's nnx.Embed: one module per table, the rows given."""

import jax.numpy as jnp
from flax import nnx


def _embed(table):
    return nnx.Embed(
        table.shape[0],
        table.shape[1],
        dtype=table.dtype,
        param_dtype=table.dtype,
        embedding_init=lambda key, shape, dtype: jnp.asarray(table, dtype),
        rngs=nnx.Rngs(0),
    )


def embed(token_table, position_table, token_ids, start):
    positions = jnp.arange(start, start + token_ids.shape[-1])
    return _embed(token_table)(token_ids) + _embed(position_table)(positions)
