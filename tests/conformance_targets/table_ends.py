"""Ports wrong only at a table's end, which the lookup and quantized_lookup batteries read only
by chance until every case read both ends; and quantized ports that read Q4_K alone. Every
port raises for a bad id, so only its rows are judged."""

import numpy as np
from numpy_targets import _checked
from quantized_ports import correct


def first_row_as_padding(token_table, position_table, token_ids, start):
    """A pad token taken to be id 0, its token row masked to zero: the position row alone for
    id 0, where the contract adds the table's row 0 as any other."""
    return _masked(token_table, position_table, token_ids, start, 0)


def last_row_as_padding(token_table, position_table, token_ids, start):
    """A pad token taken to be the table's last row (appended after the vocabulary), masked
    the same way at id vocab_size - 1."""
    return _masked(token_table, position_table, token_ids, start, len(token_table) - 1)


def _masked(token_table, position_table, token_ids, start, pad):
    token_ids = _checked(token_ids, len(token_table))
    rows = token_table[token_ids]
    rows[token_ids == pad] = 0
    return rows + position_table[start : start + token_ids.shape[-1]]


def q4_k_only(blocks, format, token_ids):
    """Right, for Q4_K alone: every other format refused by name."""
    if format != "Q4_K":
        raise NotImplementedError(f"format {format} is not read here: Q4_K only")
    return correct(blocks, format, token_ids)


def q4_k_tail_as_last_row(blocks, format, token_ids):
    """Q4_K alone, with the rows just before the last (vocab_size - 3 and - 2) clamped to it:
    right at the last row and everywhere else."""
    token_ids = _checked(token_ids, len(blocks))
    tail = (token_ids >= len(blocks) - 3) & (token_ids < len(blocks) - 1)
    return q4_k_only(blocks, format, np.where(tail, len(blocks) - 1, token_ids))


def q6_k_only(blocks, format, token_ids):
    """Right, for Q6_K alone: a format the battery's bad ids are not tried in."""
    if format != "Q6_K":
        raise NotImplementedError(f"format {format} is not read here: Q6_K only")
    return correct(blocks, format, token_ids)


def bound_named_by_format(blocks, format, token_ids):
    """Right in every format; its error for a bad id names the table's format."""
    token_ids = np.asarray(token_ids)
    if token_ids.min() < 0 or token_ids.max() >= len(blocks):
        raise IndexError(f"token id out of range of the {format} table's {len(blocks)} rows")
    return correct(blocks, format, token_ids)

