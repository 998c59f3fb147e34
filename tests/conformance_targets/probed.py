"""Targets whose framework only a call tells (tests/test_framework_probe.py): this module
imports neither torch nor jax."""

import numpy as np


def lookup_any(token_table, position_table, token_ids, start):
    """Plain indexing: takes any framework's arrays, and returns the kind it is given."""
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def lookup_into_torch(token_table, position_table, token_ids, start):
    """NumPy arrays in, a torch tensor out: torch.from_numpy takes no tensor, so it rejects
    torch's arrays. torch is imported in the call, and a probe still tries it after."""
    import torch

    rows = token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]
    return torch.from_numpy(rows)


def lookup_not_numpy(token_table, position_table, token_ids, start):
    """Takes torch's and JAX's arrays, not NumPy's: no one framework's, by its imports either."""
    if isinstance(token_table, np.ndarray):
        raise TypeError("NumPy arrays are not taken")
    return lookup_any(token_table, position_table, token_ids, start)


def lookup_raising(token_table, position_table, token_ids, start):
    """Raises on every input, printing what must not reach the report raw."""
    raise ValueError("\x1b[2J not the kit's to print")
