"""Targets that hang, die or print on some cases, and a name that is not callable."""

import os
import tempfile
import time

import numpy as np

NOT_CALLABLE = 3


def _lookup(token_table, position_table, token_ids, start):
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def hangs_on_bad_ids(token_table, position_table, token_ids, start):
    if np.asarray(token_ids).min() < 0 or np.asarray(token_ids).max() >= len(token_table):
        # a mark in the run's private folder (its TMPDIR): a test knows the worker is in here
        open(os.path.join(tempfile.gettempdir(), "hanging"), "w").close()
        time.sleep(3600)
    return _lookup(token_table, position_table, token_ids, start)


def hangs_always(token_table, position_table, token_ids, start):
    time.sleep(3600)


def dies_on_bad_ids(token_table, position_table, token_ids, start):
    if np.asarray(token_ids).min() < 0 or np.asarray(token_ids).max() >= len(token_table):
        os._exit(7)
    return _lookup(token_table, position_table, token_ids, start)


def prints(num_heads):
    print("a target that prints cannot garble the worker's answers")
    from backends import positional

    return positional.alibi_slopes(num_heads)


def refuses_odd_heads(num_heads):
    if num_heads & (num_heads - 1):
        raise ValueError(f"{num_heads} heads: only powers of two")
    return 2.0 ** (-8 * np.arange(1, num_heads + 1) / num_heads)


def rope_of_nans(x, positions):
    return np.full_like(x, np.nan)
