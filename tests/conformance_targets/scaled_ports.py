"""Ports of a model's input scaling, for compare.py check --kind scaled_inputs: each gets one
rule wrong. Torch's rounding of a Python float (the product in float32) is the model's."""

import numpy as np
import torch

from embedding_parity.conformance.kinds.scaled_inputs import MODELS

GRANITE, FALCON_H1 = MODELS["granite"]["value"], MODELS["falcon_h1"]["value"]


def _rows(token_table, token_ids, inputs_embeds):
    if inputs_embeds is not None:
        return inputs_embeds
    return torch.nn.functional.embedding(token_ids, token_table)


def granite_twice(token_table, token_ids, inputs_embeds):
    """Granite's multiplier in the embedding module and again in forward."""
    return _rows(token_table, token_ids, inputs_embeds) * GRANITE * GRANITE


def granite_given_unscaled(token_table, token_ids, inputs_embeds):
    """The multiplier on the looked-up rows only (Falcon-H1's rule), not on given ones."""
    if inputs_embeds is not None:
        return inputs_embeds
    return _rows(token_table, token_ids, None) * GRANITE


def falcon_h1_given_scaled(token_table, token_ids, inputs_embeds):
    """Falcon-H1's multiplier on given embeddings too (Granite's rule)."""
    return _rows(token_table, token_ids, inputs_embeds) * FALCON_H1


def falcon_h1_missing(token_table, token_ids, inputs_embeds):
    return _rows(token_table, token_ids, inputs_embeds)


def falcon_h1_in_the_rows_dtype(token_table, token_ids, inputs_embeds):
    """The multiplier made a tensor of the rows' dtype first (as JAX's weak-typed scalar is)."""
    rows = _rows(token_table, token_ids, inputs_embeds)
    if inputs_embeds is not None:
        return rows
    return rows * torch.tensor(FALCON_H1, dtype=rows.dtype)


def numpy_falcon_h1(token_table, token_ids, inputs_embeds):
    """A correct NumPy port: the float32 product of a 16-bit row, then its dtype."""
    if inputs_embeds is not None:
        return inputs_embeds
    if token_ids.min() < 0 or token_ids.max() >= len(token_table):
        raise IndexError(f"token id out of range for {len(token_table)} rows")
    rows = token_table[token_ids]
    compute = np.float64 if rows.dtype == np.float64 else np.float32
    return (rows.astype(compute) * compute(FALCON_H1)).astype(rows.dtype)
