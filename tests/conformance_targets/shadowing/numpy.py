"""A target file named numpy.py: the kit imports it under a name of its own, so that it does
not become the kit's numpy (tests/test_hostile_targets.py)."""

import sys

NUMPY = sys.modules["numpy"]  # the real one: this file is not it


def lookup(token_table, position_table, token_ids, start):
    if NUMPY.asarray(token_ids).min() < 0 or NUMPY.asarray(token_ids).max() >= len(token_table):
        raise IndexError("token id out of range")
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]
