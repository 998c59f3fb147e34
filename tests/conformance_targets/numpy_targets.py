"""Implementations for compare.py check, in NumPy: each correct one, and each with one natural
mistake, named after it."""

import math

import numpy as np


def _checked(token_ids, vocab_size):
    token_ids = np.asarray(token_ids)
    if token_ids.dtype.kind not in "iu":
        raise TypeError(f"token_ids must be integers, got {token_ids.dtype}")
    if token_ids.size and (token_ids.min() < 0 or token_ids.max() >= vocab_size):
        raise IndexError(f"token ids must be in [0, {vocab_size})")
    return token_ids


def lookup(token_table, position_table, token_ids, start):
    token_ids = _checked(token_ids, len(token_table))
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def lookup_clamps(token_table, position_table, token_ids, start):
    rows = np.take(token_table, np.asarray(token_ids).astype(np.int64), axis=0, mode="clip")
    return rows + position_table[start : start + np.shape(token_ids)[-1]]


def lookup_start_off_by_one(token_table, position_table, token_ids, start):
    token_ids = _checked(token_ids, len(token_table))
    stop = start + 1 + token_ids.shape[-1]
    return token_table[token_ids] + position_table[start + 1 : stop]


def sinusoidal(num_positions, dim):
    angles = np.arange(num_positions)[:, None] / 10000.0 ** (np.arange(0, dim, 2) / dim)
    table = np.empty((num_positions, dim))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table.astype(np.float32)


def sinusoidal_concat(num_positions, dim):
    angles = np.arange(num_positions)[:, None] / 10000.0 ** (np.arange(0, dim, 2) / dim)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


def _rope(x, positions, *, interleaved=False, angle_dtype=np.float64):
    dim = x.shape[-1]
    inverse = (1.0 / 10000.0 ** (np.arange(0, dim, 2) / dim)).astype(angle_dtype)
    angles = (np.asarray(positions).astype(angle_dtype)[:, None] * inverse).astype(np.float64)
    cos, sin = np.cos(angles), np.sin(angles)
    wide = x.astype(np.float64)
    if interleaved:
        a, b = wide[..., 0::2], wide[..., 1::2]
        out = np.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(x.shape)
    else:
        a, b = wide[..., : dim // 2], wide[..., dim // 2 :]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    return out.astype(x.dtype)


def rope(x, positions):
    return _rope(x, positions)


def rope_interleaved(x, positions):
    return _rope(x, positions, interleaved=True)


def alibi(num_heads):
    closest = 2 ** math.floor(math.log2(num_heads))
    exponents = [-8 * i / closest for i in range(1, closest + 1)]
    exponents += [-8 * j / (2 * closest) for j in range(1, 2 * (num_heads - closest), 2)]
    return np.array([2.0**e for e in exponents], dtype=np.float32)


def alibi_paper(num_heads):
    return (2.0 ** (-8 * np.arange(1, num_heads + 1) / num_heads)).astype(np.float32)


def t5(relative_position, bidirectional, num_buckets, max_distance):
    from backends import numpy_backend

    return numpy_backend.t5_relative_buckets(
        relative_position,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )


def t5_boundary_off_by_one(relative_position, bidirectional, num_buckets, max_distance):
    buckets = t5(relative_position, bidirectional, num_buckets, max_distance)
    shifted = t5(
        np.asarray(relative_position) - np.sign(relative_position),
        bidirectional,
        num_buckets,
        max_distance,
    )
    # distances >= n/2 one further on: every logarithmic bucket starts one late
    n = num_buckets // 2 if bidirectional else num_buckets
    distance = np.abs(relative_position) if bidirectional else -np.minimum(relative_position, 0)
    return np.where(distance > n // 2, shifted, buckets)


def gradient(token_table, token_ids, upstream):
    token_ids = _checked(token_ids, len(token_table))
    grad = np.zeros_like(token_table)
    np.add.at(grad, token_ids.reshape(-1), upstream.reshape(-1, token_table.shape[1]))
    return grad


def gradient_assigns(token_table, token_ids, upstream):
    token_ids = _checked(token_ids, len(token_table))
    grad = np.zeros_like(token_table)
    grad[token_ids] += upstream  # a repeated id keeps one of its terms
    return grad
