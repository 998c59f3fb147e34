"""Validation shared by every backend: written once, run on the host before any framework op.

Raw frameworks disagree on bad input (NumPy wraps negative ids, JAX clamps or fills
NaN, torch raises), so every backend calls these functions first and the suite
raises the same exception, with the same message, whatever the framework.
"""

from __future__ import annotations

import operator

import ml_dtypes
import numpy as np

# The four dtypes the parity contract covers, by name.
DTYPES = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}


def resolve_dtype(dtype) -> np.dtype:
    """Map a dtype name or NumPy dtype to one of DTYPES, or raise ValueError."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}: use one of {', '.join(DTYPES)}")
    return DTYPES[name]


def check_tables(token_table, position_table) -> tuple[np.ndarray, np.ndarray]:
    """Return both tables as NumPy arrays after checking they fit together.

    token_table (vocab_size, dim) and position_table (max_seq_len, dim) must be
    2-D, of one floating dtype from DTYPES and of the same dim. Raises ValueError.
    """
    tables = {"token_table": np.asarray(token_table), "position_table": np.asarray(position_table)}
    for name, table in tables.items():
        if table.ndim != 2:
            raise ValueError(
                f"{name} must be 2-D (rows, dim), got shape {table.shape}: "
                "pass one row per token (or position) and one column per dimension"
            )
        if table.dtype not in DTYPES.values():
            raise ValueError(
                f"{name} has dtype {table.dtype}, but the tables must be floating point, "
                f"one of {', '.join(DTYPES)}: convert with .astype(np.float32), say"
            )
    token_table, position_table = tables.values()
    if token_table.shape[1] != position_table.shape[1]:
        raise ValueError(
            f"token_table has dim {token_table.shape[1]} but position_table has dim "
            f"{position_table.shape[1]}: both tables need the same number of columns"
        )
    if token_table.dtype != position_table.dtype:
        raise ValueError(
            f"token_table is {token_table.dtype} but position_table is {position_table.dtype}: "
            "cast both to one dtype so the sum is rounded once, the same way on every backend"
        )
    return token_table, position_table


def ids_dtype_error(dtype) -> TypeError:
    """The error for token_ids that are not integers (shared so native dtypes get it too)."""
    return TypeError(
        f"token_ids must be integers, got dtype {dtype}: "
        "cast to an integer dtype such as int64, after making sure every value is a whole number"
    )


def check_token_ids(token_ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """Check host-side token_ids: integer dtype, 1-D or 2-D, every id in [0, vocab_size).

    Raises TypeError, ValueError or IndexError; returns token_ids unchanged.
    Cost: one min and one max over the ids, nothing per embedding element.
    """
    if not np.issubdtype(token_ids.dtype, np.integer):
        raise ids_dtype_error(token_ids.dtype)
    if token_ids.ndim not in (1, 2):
        raise ValueError(
            f"token_ids must be 1-D (T,) or 2-D (B, T), got shape {token_ids.shape}: "
            "reshape to (batch, sequence length)"
        )
    if token_ids.size and (token_ids.min() < 0 or token_ids.max() >= vocab_size):
        bad = (token_ids < 0) | (token_ids >= vocab_size)
        where = np.unravel_index(int(np.flatnonzero(bad)[0]), token_ids.shape)
        index = ", ".join(str(int(i)) for i in where)
        raise IndexError(
            f"token id {int(token_ids[where])} at token_ids[{index}] is out of range for "
            f"vocab_size {vocab_size}: ids must be in [0, {vocab_size - 1}]; "
            "check that the tokenizer matches the token table"
        )
    return token_ids


def check_positions(start, length: int, max_seq_len: int) -> int:
    """Check that positions start .. start + length - 1 exist in the position table.

    Returns start as a Python int. Raises TypeError for a non-integer start and
    ValueError for start < 0 or start + length > max_seq_len.
    """
    if isinstance(start, bool):
        raise TypeError(f"start must be an integer, got {start!r}")
    try:
        start = operator.index(start)
    except TypeError:
        raise TypeError(f"start must be an integer, got {start!r}") from None
    if start < 0:
        raise ValueError(
            f"start {start} is negative (T {length}, max_seq_len {max_seq_len}): "
            "positions count from 0"
        )
    if start + length > max_seq_len:
        raise ValueError(
            f"start {start} + T {length} = {start + length} exceeds max_seq_len {max_seq_len}: "
            f"use at most {max(max_seq_len - start, 0)} tokens from start {start}, "
            "or a longer position table"
        )
    return start


def check_call(
    token_ids: np.ndarray, start, vocab_size: int, max_seq_len: int
) -> tuple[np.ndarray, int]:
    """Everything a layer call checks, ids first: returns (token_ids, start as int)."""
    token_ids = check_token_ids(token_ids, vocab_size)
    return token_ids, check_positions(start, token_ids.shape[-1], max_seq_len)
