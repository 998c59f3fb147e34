"""Lookups of a table padded past its tokenizer (12 rows, a tokenizer of 10 ids), for
compare.py check --kind lookup --config (a config.json of vocab_size 12 beside that
tokenizer.json): one right, one that bounds the ids by the tokenizer's size."""

import numpy as np

TOKENIZER_SIZE = 10


def lookup(token_table, position_table, token_ids, start):
    if token_ids.min() < 0 or token_ids.max() >= len(token_table):
        raise IndexError(f"token id out of range for the table's {len(token_table)} rows")
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def bounded_by_the_tokenizer(token_table, position_table, token_ids, start):
    if token_ids.min() < 0 or token_ids.max() >= TOKENIZER_SIZE:
        raise IndexError(f"token id out of range for the tokenizer's {TOKENIZER_SIZE} ids")
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]
