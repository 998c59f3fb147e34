"""The two ways to split a token table across N devices, written once in NumPy over a list of
shards: the readable reference the framework versions are held to, bit for bit.

Row-parallel (vocabulary-parallel, Megatron-LM's ``VocabParallelEmbedding``): shard k holds
rows [k * rows, (k + 1) * rows) of the table, ``rows = ceil(vocab_size / N)``; the last shard
is padded with zero rows so that every shard has the same shape. Every shard sees every id,
looks up the ids it owns, and writes the additive identity for the others; summing the
shards' results (an all-reduce) gives each token's row.

Column-parallel (embedding-dimension-parallel): shard k holds every row and columns
[k * cols, (k + 1) * cols), ``cols = ceil(dim / N)``, zero-padded likewise; each shard looks
up all ids, and concatenating the shards' columns (an all-gather) gives the rows.

Exactness. Column-parallel only moves values. Row-parallel adds N terms per element, all
but one of them an exact zero, so the sum is the owner's value: bit for bit, in any order and
any dtype, with one exception, the sign of a zero. The all-reduces of XLA and gloo start
from +0.0, and -0.0 + +0.0 == +0.0 in IEEE arithmetic, so an owner's -0.0 comes back as +0.0
(equal as a value; the bits differ) once there are two shards or more (one shard's
all-reduce is a copy). The reference sums the same way, so that it and the frameworks agree
bit for bit everywhere; the unsharded layer differs from all of them
only where a token row holds -0.0 and the position added to it is -0.0 too (or there is no
position table). The positions are added after the sum, as the unsharded layer adds them:
one rounding.

Ids are checked against the *global* vocabulary before any shard looks at them. Megatron's
masking would otherwise turn an id >= vocab_size into a zero vector on every shard: a silently
wrong result.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from backends import validation

STRATEGIES = ("rows", "columns")


def check_shards(num_shards, size: int, what: str) -> int:
    """num_shards as an int such that every shard of ceil(size / N) rows (or columns) owns
    at least one: N in [1, size] and (N - 1) * ceil(size / N) < size."""
    num_shards = validation.integer(num_shards, "the number of shards")
    if not _fits(num_shards, size):
        valid = valid_counts(size)
        shown = ", ".join(map(str, valid)) + (f", ..., {size}" if valid[-1] < size else "")
        raise ValueError(
            f"cannot split {size} {what} into {num_shards} shards of ceil({size}/N) each with "
            f"every shard owning at least one: use one of {shown}"
        )
    return num_shards


def valid_counts(size: int, first: int = 12) -> list[int]:
    """The first few shard counts that fit ``size``. Every N with N(N - 1) < size fits
    (ceil(size / N)(N - 1) <= (size / N + 1)(N - 1) < size), so past a handful of rows the
    first counts are 1, 2, 3, ... and the search stops after ``first`` of them, whatever
    the size: no loop over every count up to it. ``size`` itself always fits."""
    found = []
    for n in range(1, max(size, 1) + 1):
        if _fits(n, size):
            found.append(n)
            if len(found) == first:
                break
    return found


def _fits(num_shards: int, size: int) -> bool:
    return 1 <= num_shards <= max(size, 1) and (num_shards - 1) * per_shard(size, num_shards) < max(
        size, 1
    )


def per_shard(size: int, num_shards: int) -> int:
    """Rows (or columns) per shard: ceil(size / num_shards); the last shard is padded."""
    return -(-size // num_shards)


def split_rows(table: np.ndarray, num_shards: int) -> list[np.ndarray]:
    """num_shards arrays of shape (ceil(V / N), dim): shard k holds rows k * rows onwards,
    the last one padded with zero rows (never looked up: ids are checked first)."""
    vocab_size, dim = table.shape
    num_shards = check_shards(num_shards, vocab_size, "rows")
    rows = per_shard(vocab_size, num_shards)
    padded = np.zeros((rows * num_shards, dim), table.dtype)
    padded[:vocab_size] = table
    return list(padded.reshape(num_shards, rows, dim))


def split_columns(table: np.ndarray, num_shards: int) -> list[np.ndarray]:
    """num_shards arrays of shape (V, ceil(dim / N)), zero-padded on the right."""
    vocab_size, dim = table.shape
    num_shards = check_shards(num_shards, dim, "columns")
    cols = per_shard(dim, num_shards)
    padded = np.zeros((vocab_size, cols * num_shards), table.dtype)
    padded[:, :dim] = table
    return [padded[:, k * cols : (k + 1) * cols] for k in range(num_shards)]


def row_shard(table, rank: int, num_shards: int) -> np.ndarray:
    """Shard ``rank`` of split_rows(table, num_shards), read alone: from an array, or from a
    ``TableFile`` without reading the other rows."""
    vocab_size, dim = table.shape
    rows = per_shard(vocab_size, check_shards(num_shards, vocab_size, "rows"))
    first, stop = rank * rows, min(vocab_size, (rank + 1) * rows)
    shard = np.zeros((rows, dim), table.dtype)  # the last shard padded with zero rows
    if isinstance(table, TableFile):
        table.rows(first, stop, out=shard[: stop - first])  # read in place: no second copy
    else:
        shard[: stop - first] = table[first:stop]
    return shard


def column_shard(table, rank: int, num_shards: int) -> np.ndarray:
    """Shard ``rank`` of split_columns(table, num_shards), read alone (as row_shard)."""
    vocab_size, dim = table.shape
    cols = per_shard(dim, check_shards(num_shards, dim, "columns"))
    first, stop = rank * cols, min(dim, (rank + 1) * cols)
    part = table.columns(first, stop) if isinstance(table, TableFile) else table[:, first:stop]
    if stop - first == cols:
        return np.ascontiguousarray(part)
    shard = np.zeros((vocab_size, cols), table.dtype)  # the last shard, padded
    shard[:, : stop - first] = part
    return shard


# safetensors' dtype names, as NumPy dtypes
_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}


@dataclass(frozen=True)
class TableFile:
    """A token table left in its .safetensors file: a shard reads only its own rows or
    columns into an array of its own size, never the whole table, so a rank's memory holds
    1/N of it from the start. The file is read with plain reads at the offsets its header
    gives (not memory-mapped: mapped pages would count as the rank's resident memory too).
    ``read`` counts the table bytes this process read."""

    path: str
    key: str
    shape: tuple[int, int]
    dtype: np.dtype
    offset: int  # where the table's bytes start in the file
    read: list = field(default_factory=lambda: [0], compare=False)

    # rows read at a time for a column shard: its memory beyond the shard itself
    CHUNK_BYTES = 4 * 2**20

    @classmethod
    def open(cls, path: str, key: str) -> TableFile:
        import json
        import struct

        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
        entry = header.get(key)
        if entry is None:
            raise ValueError(f"{path} has no tensor {key!r}")
        shape, name = tuple(entry["shape"]), entry["dtype"]
        if len(shape) != 2 or name not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: {key!r} is {name} of shape {shape}, not a 2-D float table")
        dtype = validation.DTYPES[_SAFETENSORS_DTYPES[name]]
        begin, stop = entry["data_offsets"]
        if stop - begin != shape[0] * shape[1] * dtype.itemsize:
            raise ValueError(f"{path}: {key!r} has {stop - begin} bytes for shape {shape}")
        # absolute: the ranks that read it may run in another folder
        return cls(os.path.abspath(path), key, shape, dtype, 8 + size + begin)

    def rows(self, first: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """Rows [first, stop): one read of their bytes, straight into ``out`` (C-contiguous,
        of their shape) or a new array."""
        if out is None:
            out = np.empty((stop - first, self.shape[1]), self.dtype)
        with open(self.path, "rb") as f:
            f.seek(self.offset + first * self.shape[1] * self.dtype.itemsize)
            f.readinto(_bytes(out))
        self.read[0] += out.nbytes
        return out

    def columns(self, first: int, stop: int) -> np.ndarray:
        """Columns [first, stop) of every row, a block of rows at a time."""
        vocab_size, dim = self.shape
        out = np.empty((vocab_size, stop - first), self.dtype)
        step = max(1, self.CHUNK_BYTES // (dim * self.dtype.itemsize))
        for begin in range(0, vocab_size, step):
            block = self.rows(begin, min(vocab_size, begin + step))
            self.read[0] -= block.nbytes - block[:, first:stop].nbytes  # count the shard's
            out[begin : begin + len(block)] = block[:, first:stop]
        return out

    def whole(self) -> np.ndarray:
        return self.rows(0, self.shape[0])

    def take(self, token_ids) -> np.ndarray:
        """``table[token_ids]`` for checked ids: only the rows they name, one read each."""
        token_ids = np.asarray(token_ids)
        unique, inverse = np.unique(token_ids, return_inverse=True)
        found = np.empty((len(unique), self.shape[1]), self.dtype)
        row_bytes = self.shape[1] * self.dtype.itemsize
        with open(self.path, "rb") as f:
            for k, index in enumerate(unique.tolist()):
                f.seek(self.offset + index * row_bytes)
                f.readinto(_bytes(found[k]))
        self.read[0] += found.nbytes
        return found[inverse.reshape(token_ids.shape)]

    def check_positions(self, position_table) -> np.ndarray:
        """The position table checked against this token table (width, dtype), as
        ``validation.check_tables`` would check the two."""
        row = np.zeros((1, self.shape[1]), self.dtype)
        return validation.check_tables(row, position_table)[1]

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.dtype.itemsize


def _bytes(array: np.ndarray) -> np.ndarray:
    """A C-contiguous array's memory as bytes, to read into (memoryview(...).cast("B") does
    not take ml_dtypes' bfloat16, which has no buffer format)."""
    return array.view(np.uint8).reshape(-1)


def shard_rows_lookup(shard: np.ndarray, index: int, token_ids: np.ndarray) -> np.ndarray:
    """What shard ``index`` contributes for the (checked) ids: its own rows, zero elsewhere."""
    rows = len(shard)
    local = token_ids - index * rows
    owned = (local >= 0) & (local < rows)
    out = shard[np.where(owned, local, 0)]  # (..., T, dim); a masked id reads row 0,
    out[~owned] = 0  # then becomes a zero row
    return out


def lookup_rows(shards, token_ids, vocab_size: int) -> np.ndarray:
    """Row-parallel: every shard's contribution, summed from +0.0 as the all-reduces of XLA
    and gloo sum; one shard's is returned as it is (their one-device all-reduce is a copy)."""
    token_ids = validation.check_token_ids(validation.as_host(token_ids), vocab_size)
    # Shards may come one at a time (a generator): none is kept once looked up. (Counted by
    # hand: enumerate's reused result tuple would hold a shard while the next is read.)
    first = total = None
    index = 0
    for shard in shards:
        part = shard_rows_lookup(shard, index, token_ids)
        del shard  # before the next is read
        index += 1
        if first is None:
            first = part
            continue
        if total is None:
            total = np.zeros_like(first)
            total += first
        total += part
    return first if total is None else total


def lookup_columns(shards, token_ids, vocab_size: int, dim: int) -> np.ndarray:
    """Column-parallel: every shard's columns for every id, concatenated (the all-gather)."""
    token_ids = validation.check_token_ids(validation.as_host(token_ids), vocab_size)
    parts = []
    for shard in shards:  # shards may come one at a time (a generator): none kept
        parts.append(shard[token_ids])
        del shard  # before the next is read
    return np.concatenate(parts, axis=-1)[..., :dim]


def embed(token_table, position_table, token_ids, start=0, *, num_shards: int, strategy="rows"):
    """The sharded layer: ``token_table[ids] + position_table[start:start + T]`` computed from
    num_shards shards of the token table; bit-identical to the unsharded layer."""
    validation.choice(strategy, STRATEGIES, "sharding strategy")
    if isinstance(token_table, TableFile):
        position_table = token_table.check_positions(position_table)
    else:
        token_table, position_table = validation.check_tables(token_table, position_table)
    vocab_size, dim = token_table.shape
    token_ids, start = validation.check_call(token_ids, start, vocab_size, len(position_table))
    if isinstance(token_table, TableFile):  # one shard read at a time, never the whole table
        shard, size = (row_shard, vocab_size) if strategy == "rows" else (column_shard, dim)
        count = check_shards(num_shards, size, strategy)
        shards = (shard(token_table, k, count) for k in range(count))
    else:
        split = split_rows if strategy == "rows" else split_columns
        shards = split(token_table, num_shards)
    if strategy == "rows":
        x = lookup_rows(shards, token_ids, vocab_size)
    else:
        x = lookup_columns(shards, token_ids, vocab_size, dim)
    return x + position_table[start : start + token_ids.shape[-1]]
