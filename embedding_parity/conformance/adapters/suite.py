"""This suite's own three backends, the control rows: they must conform everywhere."""

import os

import numpy as np

import backends

_BACKEND = backends.get(os.environ["EMBEDDING_PARITY_BACKEND"])


def lookup(token_table, position_table, token_ids, start):
    layer = _BACKEND.TokenPositionEmbedding(
        _BACKEND.to_numpy(token_table), _BACKEND.to_numpy(position_table)
    )
    return layer(token_ids, start=start)


def sinusoidal(num_positions, dim):
    return _BACKEND.sinusoidal_table(num_positions, dim, dtype="float32")


def rope(x, positions):
    return _BACKEND.apply_rope(x, positions)


def alibi(num_heads):
    return _BACKEND.alibi_slopes(num_heads)


def t5(relative_position, bidirectional, num_buckets, max_distance):
    return _BACKEND.t5_relative_buckets(
        relative_position,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )


def gradient(token_table, token_ids, upstream):
    table = _BACKEND.to_numpy(token_table)
    positions = np.zeros((token_ids.shape[-1], table.shape[1]), table.dtype)  # not asked for
    layer = _BACKEND.TokenPositionEmbedding(table, positions)
    return _BACKEND.gradients(layer, token_ids, upstream)["token_table"]
