"""PaddlePaddle's ``paddle.nn.Embedding`` (3.3.1, its CPU build), as a model writes the input
layer: one embedding for the tokens, one for the positions start .. start + T - 1, summed.

Paddle is none of the kit's frameworks: the adapter takes and returns NumPy arrays, and the
tables cross exactly (bfloat16 through float32, which holds every bfloat16 value)."""

import ml_dtypes
import numpy as np
import paddle


def _tensor(array: np.ndarray):
    if array.dtype == ml_dtypes.bfloat16:
        return paddle.to_tensor(array.astype(np.float32)).cast("bfloat16")
    return paddle.to_tensor(array)


def _embedding(table: np.ndarray):
    """nn.Embedding over ``table``, its default padding_idx=None (which Paddle keeps as -1)."""
    layer = paddle.nn.Embedding(*table.shape)
    layer.to(dtype=table.dtype.name)  # Paddle names its dtypes as NumPy does
    layer.weight.set_value(_tensor(table))
    return layer


def nn_embedding(token_table, position_table, token_ids, start):
    tokens, positions = _embedding(token_table), _embedding(position_table)
    length = token_ids.shape[-1]
    at = paddle.arange(start, start + length, dtype="int64")
    x = tokens(paddle.to_tensor(token_ids)) + positions(at)
    if token_table.dtype == ml_dtypes.bfloat16:
        return x.cast("float32").numpy().astype(ml_dtypes.bfloat16)
    return x.numpy()
