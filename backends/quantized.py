"""Token tables as GGUF files ship them: quantized blocks, looked up in place.

A GGUF token table (llama.cpp's ``token_embd.weight``) is stored in blocks: each row of
``dim`` values is ``dim / block_size`` blocks of ``type_size`` bytes, and a block holds small
integers q with one or more float16 scales. A value is ``scale * q`` (Q8_0, Q4_0, Q5_0, Q6_K),
``scale * q + min`` (Q4_1, Q5_1) or ``scale * q - min`` (Q4_K), in float32, exactly as
``gguf.quants.dequantize`` computes it. :class:`QuantizedTable` holds the bytes; a layer given
one reads only the rows a batch asks for and decodes those, as llama.cpp's ``get_rows`` does,
instead of a float32 copy of the whole table (2.1 GB for Llama 3's, where Q8_0 holds 0.55 GB).

Each format is one function below, written once against a small array namespace ``ops``
(NumPy, torch and jax.numpy spell slicing, ``>>``, ``&``, ``|``, reshape and broadcasting
alike; each backend supplies the few calls they do not share: the bit casts, stack and
concatenate, the cast to float32); NumPy's lookup runs its own in-place versions of the same
arithmetic (``_INTO``: each block decoded into the result, no array the size of the result but
it). Every product ``scale * q`` is exact in float32 (an 11-bit
float16 significand times a sub-block scale of at most 7 significant bits, Q6_K's int8, times an
integer of at most 5, or Q8_0's int8 of 7 without a sub-block scale, fits in 24 bits), so the one rounding of each value is its addition of the min, and a fused
multiply-add (XLA may contract one) rounds it the same: the decoded rows are bit-identical on
every backend to ``gguf.quants.dequantize(table)[ids]``.

Block layouts (ggml's ``ggml-common.h``; ``gguf.quants`` is the reference):

========  ==========  =========  ===================================================
format    block_size  type_size  bytes of a block
========  ==========  =========  ===================================================
Q8_0      32          34         d (f16), q[32] (int8)
Q4_0      32          18         d (f16), qs[16]: q = nibble - 8, low nibbles first
Q4_1      32          20         d, m (f16), qs[16]: q = nibble; value d*q + m
Q5_0      32          22         d, qh[4] (bit j of q_j), qs[16]: q = (nibble | h<<4) - 16
Q5_1      32          24         d, m, qh[4], qs[16]: value d*q + m
Q4_K      256         144        d, dmin (f16), scales[12] (8 6-bit scales and mins),
                                 qs[128]: value (d*sc)*q - dmin*m per 32 values
Q6_K      256         210        ql[128], qh[64], scales[16] (int8), d (f16):
                                 q = (4 low | 2 high bits) - 32, value (d*sc)*q per 16
========  ==========  =========  ===================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from backends import validation

# format name -> (block_size, type_size), as gguf.constants.GGML_QUANT_SIZES gives them
BLOCKS = {
    "Q8_0": (32, 34),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q5_0": (32, 22),
    "Q5_1": (32, 24),
    "Q4_K": (256, 144),
    "Q6_K": (256, 210),
}
KINDS = tuple(BLOCKS)
WRITTEN = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")  # the formats gguf.quants.quantize writes
CHUNK_VALUES = 1 << 17  # values a chunk of NumPy's lookup decodes: 512 KiB of float32, in L2
FLOAT16_MAX = 65504.0  # a block's scales and mins are float16: past this they are inf
# Where a block keeps its float16 scales (and mins): (first byte, past the last)
SCALES = {
    "Q8_0": ((0, 2),),
    "Q4_0": ((0, 2),),
    "Q4_1": ((0, 2), (2, 4)),
    "Q5_0": ((0, 2),),
    "Q5_1": ((0, 2), (2, 4)),
    "Q4_K": ((0, 2), (2, 4)),
    "Q6_K": ((208, 210),),
}
# Where a block keeps the bytes whose nibbles are values (Q6_K: the low four bits of each)
NIBBLES = {
    "Q4_0": (2, 18),
    "Q4_1": (4, 20),
    "Q5_0": (6, 22),
    "Q5_1": (8, 24),
    "Q4_K": (16, 144),
    "Q6_K": (0, 128),
}


@dataclass(frozen=True, eq=False)
class QuantizedTable:
    """A (vocab_size, dim) token table in one of the GGUF formats of ``KINDS``.

    ``blocks``: the bytes, (vocab_size, dim / block_size * type_size) uint8, one row per token
    (a GGUF file's tensor data, memory-mapped, as ``backends.pretrained.read_gguf`` gives it).
    ``dtype``: the float dtype a lookup returns, the float32 rows rounded once to it.
    """

    kind: str
    blocks: np.ndarray
    dim: int
    dtype: Any = "float32"  # a name from validation.DTYPES or a NumPy dtype; kept as the dtype

    def __post_init__(self):
        kind = self.kind
        if kind not in BLOCKS:
            raise ValueError(
                f"quantized format {kind!r} is not one the layer decodes ({', '.join(KINDS)}): "
                "dequantize the table with gguf.quants.dequantize and pass its float32 rows"
            )
        blocks = np.asarray(self.blocks)
        dim = check_width(kind, validation.integer(self.dim, "dim"))
        block_size, type_size = BLOCKS[kind]
        row_bytes = dim // block_size * type_size
        if blocks.dtype != np.uint8 or blocks.ndim != 2 or blocks.shape[1] != row_bytes:
            raise ValueError(
                f"blocks must be (vocab_size, {row_bytes}) uint8 for {kind} rows of {dim} "
                f"values ({dim // block_size} blocks of {type_size} bytes), got "
                f"{blocks.dtype} {blocks.shape}: pass the tensor's bytes, one row per token"
            )
        if len(blocks) < 1:
            raise ValueError("blocks has no rows: a token table needs at least one")
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "dim", dim)
        object.__setattr__(self, "dtype", validation.resolve_dtype(self.dtype))

    def __len__(self) -> int:  # rows, as an array's len
        return len(self.blocks)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.blocks), self.dim)

    @property
    def vocab_size(self) -> int:
        return len(self.blocks)

    @property
    def nbytes(self) -> int:
        """The bytes the table holds in memory, as stored."""
        return self.blocks.nbytes

    def with_dtype(self, dtype) -> QuantizedTable:
        """The same bytes, looked up as ``dtype``."""
        return QuantizedTable(self.kind, self.blocks, self.dim, dtype)


def check_width(kind: str, dim: int) -> int:
    """``dim``, if a ``kind`` row of that many values is whole blocks; else ValueError."""
    block_size = BLOCKS[kind][0]
    if dim < block_size or dim % block_size:
        raise ValueError(
            f"dim {dim} is not a multiple of {kind}'s block of {block_size} values: a "
            f"{kind} row is whole blocks; give a dim that {block_size} divides"
        )
    return dim


def quantize(table, kind: str, *, dtype=None) -> QuantizedTable:
    """``table`` (vocab_size, dim) of floats quantized to ``kind`` with ``gguf.quants.quantize``
    (the formats it writes, ``WRITTEN``; the K formats are only read). ValueError for another
    format, a table that is not float rows of whole blocks, or a value that is not finite or
    past float16's range, where the block's scale is kept (gguf would write an inf scale, and
    a NaN's bytes are the machine's)."""
    import gguf

    if kind not in WRITTEN:
        writes = f"give one of {', '.join(WRITTEN)}"
        if kind in KINDS:
            raise ValueError(
                f"gguf.quants cannot write {kind} (it only reads the K formats): quantize with "
                f"llama.cpp's llama-quantize, or {writes}"
            )
        raise ValueError(f"quantized format {kind!r} is not one gguf.quants writes: {writes}")
    table, _ = validation.check_tables(table, table)
    check_width(kind, table.shape[1])
    values = table.astype(np.float32)
    bad = ~(np.abs(values) <= FLOAT16_MAX)  # NaN too
    if bad.any():
        row, column = np.unravel_index(int(np.argmax(bad)), bad.shape)
        raise ValueError(
            f"token_table[{row}, {column}] is {table[row, column]}: every value must be finite "
            f"and within +-{FLOAT16_MAX:g} (a {kind} block keeps its scale in float16); mend "
            "or scale down the table, or keep it in float"
        )
    blocks = gguf.quants.quantize(values, gguf.GGMLQuantizationType[kind])
    return QuantizedTable(kind, blocks, table.shape[1], dtype or np.float32)


def random_blocks(kind: str, vocab_size: int, dim: int, *, seed: int = 0) -> np.ndarray:
    """(vocab_size, row_bytes) random bytes of a ``kind`` table (for tests, benchmarks and the
    kit): every byte drawn, then each float16 scale made finite and under 2 in magnitude (its
    exponent's top bit cleared), as the scales of a table a model ships are."""
    block_size, type_size = BLOCKS[kind]
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (vocab_size, dim // block_size, type_size), dtype=np.uint8)
    for first, last in SCALES[kind]:
        half = data[..., first:last].copy().view(np.uint16)
        half &= np.uint16(0xBFFF)
        data[..., first:last] = half.view(np.uint8)
    return data.reshape(vocab_size, dim // block_size * type_size)


def finite_scales(table: QuantizedTable) -> bool:
    """Whether every float16 scale and min of ``table`` is finite, as in any table a model
    ships: a float16 is NaN or infinite where its five exponent bits, 0x7c of its high (second,
    little-endian) byte, are all set."""
    blocks = table.blocks.reshape(len(table), -1, BLOCKS[table.kind][1])
    return not any(((blocks[..., last - 1] & 0x7C) == 0x7C).any() for _, last in SCALES[table.kind])


def dequantize(table: QuantizedTable) -> np.ndarray:
    """The whole (vocab_size, dim) float32 table (what the lookup avoids forming)."""
    with np.errstate(invalid="ignore"):  # a NaN or infinite scale's 0 * inf: the file's NaN
        return decode(NUMPY, table.kind, table.blocks)


def lookup(table: QuantizedTable, token_ids: np.ndarray, out: np.ndarray | None = None):
    """(..., T) checked ids -> (..., T, dim) rows in table.dtype, decoding only those rows;
    written into ``out`` (C-contiguous, that shape and dtype) when it is given.

    NumPy's way: the ids in chunks of ``CHUNK_VALUES`` values, each chunk's bytes gathered and
    decoded block-wise straight into the result (a float32 one; another dtype through one
    chunk of float32, rounded once), so that the bytes, the small integers and the values of a
    chunk stay in cache between the passes over them."""
    ids = token_ids.reshape(-1)
    if out is None:
        out = np.empty((*token_ids.shape, table.dim), table.dtype)
    result = out.reshape(-1, table.dim)  # (N, dim)
    step = max(1, CHUNK_VALUES // table.dim)  # rows a chunk
    rows = np.empty((min(step, len(ids)), table.blocks.shape[1]), np.uint8)
    direct = result.dtype == np.float32
    values = result if direct else np.empty((len(rows), table.dim), np.float32)
    into = _INTO[table.kind]
    # NaN and infinite scales decode to NaN (0 * inf), and a value past float16's range
    # rounds to inf, as in every framework: the file's values, without a warning
    with np.errstate(invalid="ignore", over="ignore"):
        for first in range(0, len(ids), step):
            chunk = ids[first : first + step]
            read = table.blocks.take(chunk, 0, rows[: len(chunk)], "clip")  # ids checked
            if direct:
                into(read, values[first : first + step])
            else:
                into(read, values[: len(chunk)])
                result[first : first + step] = values[: len(chunk)]  # rounded once
    return out


def layer_tables(token_table, position_table, positions, max_seq_len, base, layout):
    """validation.check_layer for a layer whose token table may be a QuantizedTable: the
    position table and options are checked against a zero-stride stand-in of the table's
    shape and dtype (nothing is allocated). Returns check_layer's three values, the stand-in
    in place of a quantized table."""
    if not isinstance(token_table, QuantizedTable):
        return validation.check_layer(
            token_table, position_table, positions, max_seq_len, base, layout
        )
    stand_in = np.broadcast_to(np.zeros((), token_table.dtype), token_table.shape)
    return validation.check_layer(stand_in, position_table, positions, max_seq_len, base, layout)


def owner_rows(table: QuantizedTable, token_ids) -> np.ndarray:
    """The rows of token_ids as the format's owner reads them: ``gguf.quants.dequantize`` of
    those rows' bytes (a row's values depend on its bytes alone, so this is dequantize-then-
    gather without the whole table), float32 rounded once to table.dtype: the reference a
    lookup is held to, bit for bit. ``token_ids`` must be checked already."""
    import gguf

    token_ids = np.asarray(token_ids)
    rows = table.blocks[token_ids.reshape(-1)]
    with np.errstate(invalid="ignore", over="ignore"):
        values = gguf.quants.dequantize(rows, gguf.GGMLQuantizationType[table.kind])
        return values.reshape(*token_ids.shape, table.dim).astype(table.dtype)


def as_dtype(table, dtype):
    """A float table cast to ``dtype`` (no copy when it is already), or a QuantizedTable
    looked up as ``dtype``."""
    if isinstance(table, QuantizedTable):
        return table.with_dtype(dtype)
    return table.astype(dtype, copy=False)


def decode(ops, kind: str, rows):
    """(N, row_bytes) uint8 rows of a ``kind`` table -> (N, dim) float32, in ``ops``'s arrays."""
    block_size, type_size = BLOCKS[kind]
    count, row_bytes = rows.shape
    blocks = rows.reshape(count * (row_bytes // type_size), type_size)  # (n, type_size)
    values = _FORMATS[kind](ops, blocks)  # (n, block_size)
    return values.reshape(count, row_bytes // type_size * block_size)


# --- the formats, one function each: (n, type_size) uint8 blocks -> (n, block_size) float32 --


def _q8_0(ops, b):
    return ops.float32(ops.int8(b[:, 2:])) * ops.float16(b[:, 0:2])  # (n, 32) * (n, 1)


def _q4_0(ops, b):
    return ops.float16(b[:, 0:2]) * (ops.float32(_nibbles(ops, b[:, 2:18])) - 8.0)


def _q4_1(ops, b):
    values = ops.float16(b[:, 0:2]) * ops.float32(_nibbles(ops, b[:, 4:20]))
    return ops.add(values, ops.float16(b[:, 2:4]))


def _q5_0(ops, b):
    q = _nibbles(ops, b[:, 6:22]) | (_bits(ops, b[:, 2:6]) << 4)
    return ops.float16(b[:, 0:2]) * (ops.float32(q) - 16.0)


def _q5_1(ops, b):
    q = _nibbles(ops, b[:, 8:24]) | (_bits(ops, b[:, 4:8]) << 4)
    return ops.add(ops.float16(b[:, 0:2]) * ops.float32(q), ops.float16(b[:, 2:4]))


def _q4_k(ops, b):
    n = b.shape[0]
    d, dmin, s = ops.float16(b[:, 0:2]), ops.float16(b[:, 2:4]), b[:, 4:16]
    # 8 six-bit scales and mins in 12 bytes: bytes 0-3 hold scales 0-3 (and the high bits of
    # scales 4-7), bytes 4-7 mins 0-3 (and of mins 4-7), bytes 8-11 the low bits of both 4-7
    low, mid, top = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    scales = ops.concat([low & 63, (top & 15) | ((low >> 2) & 48)])  # (n, 8)
    mins = ops.concat([mid & 63, (top >> 4) | ((mid >> 2) & 48)])  # (n, 8)
    qs = b[:, 16:144].reshape(n, 4, 32)
    q = ops.stack([qs & 15, qs >> 4], 2).reshape(n, 8, 32)  # sub-blocks 2g, 2g + 1: nibbles of g
    scale = (d * ops.float32(scales)).reshape(n, 8, 1)
    offset = (dmin * ops.float32(mins)).reshape(n, 8, 1)
    return ops.subtract(scale * ops.float32(q), offset).reshape(n, 256)


def _q6_k(ops, b):
    n = b.shape[0]
    ql, qh = b[:, 0:128].reshape(n, 2, 64), b[:, 128:192].reshape(n, 2, 32)
    low = ops.stack([ql & 15, ql >> 4], 2).reshape(n, 8, 32)  # (half, nibble, 64 bytes)
    high = ops.stack([(qh >> k) & 3 for k in (0, 2, 4, 6)], 2).reshape(n, 8, 32)
    q = ops.float32(low | (high << 4)) - 32.0  # (n, 8, 32)
    scale = (ops.float16(b[:, 208:210]) * ops.float32(ops.int8(b[:, 192:208]))).reshape(n, 16, 1)
    return (scale * q.reshape(n, 16, 16)).reshape(n, 256)


def _nibbles(ops, qs):
    """(n, 16) bytes -> (n, 32): the 16 low nibbles, then the 16 high ones."""
    return ops.concat([qs & 15, qs >> 4])


def _bits(ops, qh):
    """(n, 4) bytes, one little-endian 32-bit word -> (n, 32): bit j of the word."""
    return ops.stack([(qh >> k) & 1 for k in range(8)], 2).reshape(qh.shape[0], 32)


_FORMATS = {
    "Q8_0": _q8_0,
    "Q4_0": _q4_0,
    "Q4_1": _q4_1,
    "Q5_0": _q5_0,
    "Q5_1": _q5_1,
    "Q4_K": _q4_k,
    "Q6_K": _q6_k,
}


class _NumPyOps:
    """What the formats need beyond operators, in NumPy: views for the bit casts, and the sum
    and difference of a value and a block's min, whose NaN is the value's where both are NaN
    (the first operand's, as NumPy's loops and gguf.quants give it: IEEE leaves it open)."""

    add = staticmethod(np.add)
    subtract = staticmethod(np.subtract)

    @staticmethod
    def float16(pair: np.ndarray) -> np.ndarray:  # (n, 2) bytes -> (n, 1) float32
        return np.ascontiguousarray(pair).view(np.float16).astype(np.float32)

    @staticmethod
    def int8(values: np.ndarray) -> np.ndarray:
        return values.view(np.int8)

    @staticmethod
    def float32(values: np.ndarray) -> np.ndarray:
        return values.astype(np.float32)

    @staticmethod
    def stack(arrays: list, axis: int) -> np.ndarray:
        return np.stack(arrays, axis)

    @staticmethod
    def concat(arrays: list) -> np.ndarray:
        return np.concatenate(arrays, -1)


NUMPY: Any = _NumPyOps()


# --- NumPy's lookup: each format decoded in place, (c, row_bytes) uint8 rows into (c, dim) ----
# float32 (the same arithmetic as the formats above, operand for operand, so the same bits).
# A block's float16 scales are read through a float16 view of the bytes (every scale sits at an
# even offset of a block of even size), the small integers are cast into the result, and the
# scales multiply it in place, broadcast over each block's values.


def _scale(b: np.ndarray, first: int) -> np.ndarray:
    """(n, type_size) blocks -> (n, 1) float32: the float16 at bytes first, first + 1."""
    return b.view(np.float16)[:, first // 2, None].astype(np.float32)


def _q8_0_into(rows, out):
    b, v = rows.reshape(-1, 34), out.reshape(-1, 32)
    v[...] = b[:, 2:].view(np.int8)
    v *= _scale(b, 0)


def _q4_0_into(rows, out):
    b, v = rows.reshape(-1, 18), out.reshape(-1, 32)
    v[...] = _nibbles_u8(b[:, 2:18])  # one pass over the chunk, no block boundaries
    v -= 8.0
    np.multiply(_scale(b, 0), v, out=v)  # the scale first, as the formats' d * q


def _q4_1_into(rows, out):
    b, v = rows.reshape(-1, 20), out.reshape(-1, 32)
    v[...] = _nibbles_u8(b[:, 4:20])
    v *= _scale(b, 0)
    v += _scale(b, 2)


def _q5_0_into(rows, out):
    b, v = rows.reshape(-1, 22), out.reshape(-1, 32)
    v[...] = _fifth_bits(b[:, 2:6], _nibbles_u8(b[:, 6:22]))
    v -= 16.0
    np.multiply(_scale(b, 0), v, out=v)


def _q5_1_into(rows, out):
    b, v = rows.reshape(-1, 24), out.reshape(-1, 32)
    v[...] = _fifth_bits(b[:, 4:8], _nibbles_u8(b[:, 8:24]))
    v *= _scale(b, 0)
    v += _scale(b, 2)


def _q4_k_into(rows, out):
    b = rows.reshape(-1, 144)
    n = len(b)
    # the 12 bytes of scales and mins as three little-endian words, each four bytes at once
    # (the masks keep every shift inside its byte): the unpacking of _q4_k, a word at a time
    low, mid, top = (b.view(np.uint32)[:, k] for k in (1, 2, 3))
    packed = np.empty((n, 4), np.uint32)  # scales 0-3, 4-7, mins 0-3, 4-7: a byte each
    np.bitwise_and(low, 0x3F3F3F3F, out=packed[:, 0])
    np.bitwise_or(top & 0x0F0F0F0F, (low >> 2) & 0x30303030, out=packed[:, 1])
    np.bitwise_and(mid, 0x3F3F3F3F, out=packed[:, 2])
    np.bitwise_or((top >> 4) & 0x0F0F0F0F, (mid >> 2) & 0x30303030, out=packed[:, 3])
    d = b.view(np.float16)[:, 0:2, None, None].astype(np.float32)  # (n, 2, 1, 1): d, dmin
    # (n, 8, 1) each: d * scale, dmin * min, exact
    scale, offset = np.moveaxis(d * packed.view(np.uint8).reshape(n, 2, 8, 1), 1, 0)
    qs, v = b[:, 16:144].reshape(n, 4, 1, 32), out.reshape(n, 4, 2, 32)
    np.bitwise_and(qs, 15, out=v[:, :, :1])  # sub-block 2g: the low nibbles of g's bytes
    np.right_shift(qs, 4, out=v[:, :, 1:])  # 2g + 1: the high ones
    v = v.reshape(n, 8, 32)
    np.multiply(scale, v, out=v)  # (n, 8, 1) * (n, 8, 32)
    v -= offset


def _q6_k_into(rows, out):
    b = rows.reshape(-1, 210)
    n = len(b)
    q = _q6_k_integers(b)  # (n, 16, 16) uint8
    v = out.reshape(n, 16, 16)
    v[...] = q
    v -= 32.0
    scale = (_scale(b, 208) * b[:, 192:208].view(np.int8)).reshape(n, 16, 1)
    np.multiply(scale, v, out=v)


def _q6_k_integers(b):
    n = len(b)
    ql, qh = b[:, 0:128].reshape(n, 2, 64), b[:, 128:192].reshape(n, 2, 32)
    low = np.stack([ql & 15, ql >> 4], 2).reshape(n, 8, 32)
    high = np.stack([(qh >> k) & 3 for k in (0, 2, 4, 6)], 2).reshape(n, 8, 32)
    return (low | (high << 4)).reshape(n, 16, 16)


def _nibbles_u8(qs):
    """(n, 16) bytes -> (n, 32) uint8: the 16 low nibbles, then the 16 high ones (into bytes:
    NumPy casts a whole chunk into the result in one pass, where a cast block by block costs a
    buffered loop per block)."""
    q = np.empty((len(qs), 32), np.uint8)
    np.bitwise_and(qs, 15, out=q[:, :16])
    np.right_shift(qs, 4, out=q[:, 16:])
    return q


def _fifth_bits(qh, q):
    """q (n, 32) nibbles with bit j of the 4 bytes qh (a little-endian word) as their fifth."""
    high = np.unpackbits(qh, axis=1, bitorder="little")  # (n, 32): bit j of the word at j
    high <<= 4
    q |= high
    return q


_INTO = {
    "Q8_0": _q8_0_into,
    "Q4_0": _q4_0_into,
    "Q4_1": _q4_1_into,
    "Q5_0": _q5_0_into,
    "Q5_1": _q5_1_into,
    "Q4_K": _q4_k_into,
    "Q6_K": _q6_k_into,
}


def lookup_words(table, ids: str = "token_ids") -> str:
    """The lookup as a heading says it: a quantized table's held to its owner's reading."""
    if isinstance(table, QuantizedTable):
        return f"dequantize(token_table)[{ids}] (gguf.quants), only those rows decoded"
    return f"token_table[{ids}]"


def describe(table: QuantizedTable) -> str:
    """One line: the format, the shape, the bytes held and those of a float32 copy."""
    vocab, dim = table.shape
    return (
        f"{table.kind} ({vocab}, {dim}) looked up in place: {table.nbytes / 1e6:.1f} MB in "
        f"memory, where float32 would hold {vocab * dim * 4 / 1e6:.1f} MB"
    )
