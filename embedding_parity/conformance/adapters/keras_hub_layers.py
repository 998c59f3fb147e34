"""keras-hub's layers under Keras 3, whichever backend KERAS_BACKEND names (one process each:
Keras picks its backend at import)."""

import numpy as np
from keras import ops
from keras_hub.layers import (
    AlibiBias,
    RotaryEmbedding,
    SinePositionEncoding,
    TokenAndPositionEmbedding,
)


def _dtype(array) -> str:
    return ops.convert_to_numpy(array).dtype.name


def token_and_position(token_table, position_table, token_ids, start):
    (vocab_size, dim), length = token_table.shape, position_table.shape[0]
    layer = TokenAndPositionEmbedding(vocab_size, length, dim, dtype=_dtype(token_table))
    layer.build((None, None))
    layer.token_embedding.embeddings.assign(token_table)
    layer.position_embedding.position_embeddings.assign(position_table)
    batched = token_ids if len(token_ids.shape) == 2 else token_ids[None]
    out = layer(batched, start_index=start)
    return out if len(token_ids.shape) == 2 else out[0]


def rotary(x, positions, base=10000.0):
    layer = RotaryEmbedding(max_wavelength=base, dtype=_dtype(x))
    batched = x if len(x.shape) == 3 else x[None]  # (batch, T, head_dim)
    out = layer(batched, positions=positions)
    return out if len(x.shape) == 3 else out[0]


def sine(num_positions, dim):
    return SinePositionEncoding(max_wavelength=10000.0)(
        np.zeros((1, num_positions, dim), np.float32)
    )[0]


def alibi_slopes(num_heads):
    scores = np.zeros((1, num_heads, 1, 2), np.float32)
    bias = AlibiBias()(scores)  # slope * (key - last key): -slope at key 0
    return -bias[0, :, 0, 0]
