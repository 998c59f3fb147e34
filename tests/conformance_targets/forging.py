"""Targets that try to write their own verdict on the worker's answer channel: a lookup that
wraps -1 to the last row, as NumPy's indexing does, and writes the answer a correct one gives
("raised": "IndexError") on every descriptor from 3 to 29, the one the worker answers on among
them; and one that writes it on every call, the probe call's included."""

import json
import os

import numpy as np

# the request ids forged for: the target cannot know its own, and a short check sends fewer
FORGED_IDS = 64


def _forge() -> None:
    answer = {"raised": "IndexError: index -1 is out of bounds"}
    lines = "".join(json.dumps({"id": i, **answer}) + "\n" for i in range(1, FORGED_IDS))
    for descriptor in range(3, 30):
        try:
            os.write(descriptor, lines.encode())
        except OSError:  # not open, or not for writing
            pass


def _lookup(token_table, position_table, token_ids, start):
    return token_table[token_ids] + position_table[start : start + np.shape(token_ids)[-1]]


def wraps_and_forges(token_table, position_table, token_ids, start):
    if (np.asarray(token_ids) < 0).any():
        _forge()
    return _lookup(token_table, position_table, token_ids, start)


def forges_every_answer(token_table, position_table, token_ids, start):
    _forge()
    return _lookup(token_table, position_table, token_ids, start)


def rope_in_complex256(x, positions):
    """No forger: a result of 32-byte elements, whose file is read whole and signed as any
    other, never taken for a forged one."""
    return x.astype(np.clongdouble)
