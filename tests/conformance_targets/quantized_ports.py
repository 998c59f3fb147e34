"""Ports of a quantized token table's fetch, for compare.py check --kind quantized_lookup: one
correct, and one for each mistake the kit names. Every port refuses a bad id, so only its rows
are judged."""

import gguf
import ml_dtypes
import numpy as np

from backends import quantized


def _checked(blocks, token_ids):
    token_ids = np.asarray(token_ids)
    if token_ids.min() < 0 or token_ids.max() >= len(blocks):
        raise IndexError(f"token id out of range for {len(blocks)} rows")
    return token_ids


def _dim(blocks, format):
    block_size, type_size = quantized.BLOCKS[format]
    return blocks.shape[1] // type_size * block_size


def correct(blocks, format, token_ids):
    """The ids' byte rows gathered first, then gguf.quants' dequantize of those alone."""
    token_ids = _checked(blocks, token_ids)
    rows = blocks[token_ids.reshape(-1)]
    values = gguf.quants.dequantize(rows, gguf.GGMLQuantizationType[format])
    return values.reshape(*token_ids.shape, _dim(blocks, format))


def bytes_as_floats(blocks, format, token_ids):
    """F.embedding on the packed table: each byte of the ids' rows as a value."""
    return blocks[_checked(blocks, token_ids)].astype(np.float32)


class _BFloat16Scales(type(quantized.NUMPY)):
    @staticmethod
    def float16(pair):
        return np.ascontiguousarray(pair).view(ml_dtypes.bfloat16).astype(np.float32)


def scale_as_bfloat16(blocks, format, token_ids):
    """Every float16 scale's two bytes read as a bfloat16."""
    token_ids = _checked(blocks, token_ids)
    values = quantized.decode(_BFloat16Scales(), format, blocks[token_ids.reshape(-1)])
    return values.reshape(*token_ids.shape, -1)


def offset_in_elements(blocks, format, token_ids):
    """Row i's bytes read from byte i * dim of the table, as if a value took one byte."""
    token_ids = _checked(blocks, token_ids)
    dim, row_bytes, flat = _dim(blocks, format), blocks.shape[1], blocks.reshape(-1)
    rows = np.stack([flat[i * dim : i * dim + row_bytes] for i in token_ids.reshape(-1)])
    values = gguf.quants.dequantize(rows, gguf.GGMLQuantizationType[format])
    return values.reshape(*token_ids.shape, dim)


def nibbles_swapped(blocks, format, token_ids):
    """The high nibble of each byte taken as the first value, the low one as the second."""
    token_ids = _checked(blocks, token_ids)
    rows = blocks[token_ids.reshape(-1)].reshape(-1, quantized.BLOCKS[format][1]).copy()
    if format in quantized.NIBBLES:
        first, last = quantized.NIBBLES[format]
        rows[:, first:last] = (rows[:, first:last] >> 4) | (rows[:, first:last] << 4)
    values = gguf.quants.dequantize(rows, gguf.GGMLQuantizationType[format])
    return values.reshape(*token_ids.shape, _dim(blocks, format))


def k_scales_ignored(blocks, format, token_ids):
    """A K format's values as d * q - dmin (Q4_K) or d * q (Q6_K): the sub-block scales and
    mins never read."""
    token_ids = _checked(blocks, token_ids)
    rows = blocks[token_ids.reshape(-1)].reshape(-1, quantized.BLOCKS[format][1]).copy()
    if format == "Q4_K":
        rows[:, 4:8], rows[:, 8:12], rows[:, 12:16] = 1, 1, 0x11  # every 6-bit scale, min 1
    elif format == "Q6_K":
        rows[:, 192:208] = 1
    values = gguf.quants.dequantize(rows, gguf.GGMLQuantizationType[format])
    return values.reshape(*token_ids.shape, _dim(blocks, format))
