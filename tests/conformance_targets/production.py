"""Lookups for `check --through`: what production paths make of them.

The right ones in each framework, one deliberately wrong (it clamps bad ids: every path keeps
that), one that no exporter can trace (a length read from the ids) and a JAX one that reads
its arguments on the host (jax.jit cannot trace it)."""

import jax.numpy as jnp
import numpy as np
import torch
from torch.nn import functional as F


def embedding(token_table, position_table, token_ids, start):
    positions = torch.arange(start, start + token_ids.shape[-1])
    return F.embedding(token_ids, token_table) + F.embedding(positions, position_table)


def clamped(token_table, position_table, token_ids, start):
    ids = token_ids.clamp(0, token_table.shape[0] - 1)
    return embedding(token_table, position_table, ids, start)


def data_dependent(token_table, position_table, token_ids, start):
    rows = int(token_ids.max()) + 1  # a length from the data: fine eagerly, untraceable
    return embedding(token_table[:rows], position_table, token_ids, start)


def taken(token_table, position_table, token_ids, start):
    positions = jnp.arange(start, start + token_ids.shape[-1])
    return jnp.take(token_table, token_ids, axis=0, mode="clip") + position_table[positions]


def host_checked(token_table, position_table, token_ids, start):
    ids = np.asarray(token_ids)  # eager JAX hands it over; a tracer cannot be read
    if ids.min() < 0 or ids.max() >= token_table.shape[0]:
        raise IndexError(f"token id out of range [0, {token_table.shape[0]})")
    return taken(token_table, position_table, token_ids, start)


def guarded(token_table, position_table, token_ids, start):
    """A port's fix for ONNX: ONNX's Gather takes [-V, V-1], so -1 is sent past the end, where
    ONNX Runtime's bounds check raises (eager torch raises for it as before)."""
    past_the_end = torch.full_like(token_ids, token_table.shape[0])
    ids = torch.where(token_ids < 0, past_the_end, token_ids)
    return embedding(token_table, position_table, ids, start)
