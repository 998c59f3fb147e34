"""Ports for the kit's Python API, plugin and --against: NumPy RoPEs of the half layout that
compute in float32 (a float64 case is then "computed in float32"), one of them a float32
element one ulp off, and lookups whose float32 results differ by a sign of zero or a NaN."""

import numpy as np


def rope(x, positions):
    """Hugging Face's recipe in NumPy: inv_freq and angles in float32, cos and sin in float32."""
    dim = x.shape[-1]
    inv_freq = (1.0 / 10000.0 ** (np.arange(0, dim, 2, dtype=np.int64) / dim)).astype(np.float32)
    angles = positions.astype(np.float32)[:, None] * inv_freq
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = np.split(x.astype(np.float32), 2, axis=-1)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(x.dtype)


def rope_same(x, positions):
    """The same arithmetic, said another way: bit-identical to rope."""
    half = x.shape[-1] // 2
    inv_freq = (1.0 / 10000.0 ** (np.arange(half, dtype=np.int64) * 2 / x.shape[-1])).astype(
        np.float32
    )
    turn = np.float32(1) * np.outer(positions.astype(np.float32), inv_freq)
    cos, sin = np.cos(turn), np.sin(turn)
    a, b = x[..., :half].astype(np.float32), x[..., half:].astype(np.float32)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(x.dtype)


def rope_one_ulp(x, positions):
    """rope, with one float32 element one ulp up: at [1, 2, 3] of x (3, 16, head_dim)."""
    rotated = rope(x, positions)
    if rotated.dtype == np.float32 and rotated.shape[-2] == 16:
        rotated[1, 2, 3] = np.nextafter(rotated[1, 2, 3], np.float32(np.inf))
    return rotated


def lookup(token_table, position_table, token_ids, start):
    if ((token_ids < 0) | (token_ids >= len(token_table))).any():
        raise IndexError(f"token id out of range [0, {len(token_table)})")
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def lookup_negative_zero(token_table, position_table, token_ids, start):
    """A float32 element of the result replaced by -0.0."""
    x = lookup(token_table, position_table, token_ids, start)
    if x.dtype == np.float32:
        x[..., 0, 0] = -0.0
    return x


def lookup_nan(token_table, position_table, token_ids, start):
    """A float32 element of the result replaced by a NaN of payload 0x123."""
    x = lookup(token_table, position_table, token_ids, start)
    if x.dtype == np.float32:
        x[..., 0, 0] = np.uint32(0x7FC00123).view(np.float32)
    return x


def lookup_one_ulp(token_table, position_table, token_ids, start):
    """lookup, with a float32 element of the result one ulp up: at [1, 2] of 2-D ids."""
    x = lookup(token_table, position_table, token_ids, start)
    if x.dtype == np.float32 and x.ndim == 3:
        x[1, 2, 3] = np.nextafter(x[1, 2, 3], np.float32(np.inf))
    return x


def rope_off_by_one(x, positions):
    """rope, turned by positions + 1: wrong in every dtype."""
    return rope(x, positions + 1)


def rope_batched(x, positions):
    """rope for x (B, H, T, head_dim) at positions (B, T), as Hugging Face's
    apply_rotary_pos_emb takes them: cos and sin (B, T, head_dim) put on every head."""
    dim = x.shape[-1]
    inv_freq = (1.0 / 10000.0 ** (np.arange(0, dim, 2, dtype=np.int64) / dim)).astype(np.float32)
    angles = positions.astype(np.float32)[..., None] * inv_freq  # (B, T, dim/2)
    cos, sin = np.cos(angles)[:, None], np.sin(angles)[:, None]  # (B, 1, T, dim/2)
    a, b = np.split(x.astype(np.float32), 2, axis=-1)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(x.dtype)


def rope_qk(q, k, positions):
    """q and k rotated in one call."""
    return rope_batched(q, positions), rope_batched(k, positions)


def rope_float32_only(x, positions):
    """rope, refusing every dtype but float32 (as a float32 kernel would)."""
    if x.dtype != np.float32:
        raise TypeError(f"only float32, not {x.dtype}")
    return rope(x, positions)


def rope_wrong_in_float16(x, positions):
    """rope, but turned by positions + 1 in float16."""
    return rope(x, positions + 1 if x.dtype == np.float16 else positions)


def lookup_signed_zero(token_table, position_table, token_ids, start):
    """lookup, a +0.0 of a float32 result turned -0.0: at [2] of its first row."""
    x = lookup(token_table, position_table, token_ids, start)
    if x.dtype == np.float32:
        x[..., 0, 2] = 0.0
    return x


def lookup_negative_signed_zero(token_table, position_table, token_ids, start):
    x = lookup_signed_zero(token_table, position_table, token_ids, start)
    if x.dtype == np.float32:
        x[..., 0, 2] = -0.0
    return x


def positions_int32(input_ids, attention_mask, past_length):
    """Position ids as int32 (JAX's default integers), HF's rule for a left-padded batch."""
    mask = np.asarray(attention_mask)
    return (np.cumsum(mask, axis=-1) * mask - 1 + mask * past_length + (1 - mask)).astype(np.int32)


def positions_int64(input_ids, attention_mask, past_length):
    return positions_int32(input_ids, attention_mask, past_length).astype(np.int64)


def rope_complex(x, positions):
    return rope(x, positions).astype(np.complex64)


def rope_dies_in_float64(x, positions):
    if x.dtype == np.float64:
        import os

        os._exit(3)
    return rope(x, positions)
