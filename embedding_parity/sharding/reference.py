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
    if len(shards) == 1:
        return shard_rows_lookup(shards[0], 0, token_ids)
    total = np.zeros((*token_ids.shape, shards[0].shape[1]), shards[0].dtype)
    for index, shard in enumerate(shards):
        total += shard_rows_lookup(shard, index, token_ids)
    return total


def lookup_columns(shards, token_ids, vocab_size: int, dim: int) -> np.ndarray:
    """Column-parallel: every shard's columns for every id, concatenated (the all-gather)."""
    token_ids = validation.check_token_ids(validation.as_host(token_ids), vocab_size)
    return np.concatenate([shard[token_ids] for shard in shards], axis=-1)[..., :dim]


def embed(token_table, position_table, token_ids, start=0, *, num_shards: int, strategy="rows"):
    """The sharded layer: ``token_table[ids] + position_table[start:start + T]`` computed from
    num_shards shards of the token table; bit-identical to the unsharded layer."""
    validation.choice(strategy, STRATEGIES, "sharding strategy")
    token_table, position_table = validation.check_tables(token_table, position_table)
    vocab_size, dim = token_table.shape
    token_ids, start = validation.check_call(token_ids, start, vocab_size, len(position_table))
    if strategy == "rows":
        x = lookup_rows(split_rows(token_table, num_shards), token_ids, vocab_size)
    else:
        x = lookup_columns(split_columns(token_table, num_shards), token_ids, vocab_size, dim)
    return x + position_table[start : start + token_ids.shape[-1]]
