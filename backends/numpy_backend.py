"""NumPy backend: plain arrays, a gather with ``np.take`` and an in-place add."""

from __future__ import annotations

import numpy as np

from backends import validation

name = "numpy"


class TokenPositionEmbedding:
    """token_table (vocab_size, dim) and position_table (max_seq_len, dim) as NumPy arrays."""

    def __init__(self, token_table: np.ndarray, position_table: np.ndarray):
        token_table, position_table = validation.check_tables(token_table, position_table)
        # Copies the layer owns, as the torch and JAX layers own theirs.
        self.token_table, self.position_table = token_table.copy(), position_table.copy()
        self.vocab_size, self.dim = self.token_table.shape
        self.max_seq_len = self.position_table.shape[0]
        self.dtype = self.token_table.dtype

    def __call__(self, token_ids, start: int = 0) -> np.ndarray:
        """(T,) or (B, T) ids -> (T, dim) or (B, T, dim) token + position embeddings."""
        token_ids, start = validation.check_call(
            np.asarray(token_ids), start, self.vocab_size, self.max_seq_len
        )
        x = self._gather(token_ids)  # (..., T, dim), a fresh array
        x += self.position_table[start : start + token_ids.shape[-1]]  # (T, dim) broadcasts over B
        return x

    def token_embeddings(self, token_ids) -> np.ndarray:
        """(..., T) ids -> (..., T, dim) rows of token_table."""
        return self._gather(validation.check_token_ids(np.asarray(token_ids), self.vocab_size))

    def position_embeddings(self, start: int, length: int) -> np.ndarray:
        """Rows start .. start + length - 1 of position_table, (length, dim)."""
        start = validation.check_positions(start, length, self.max_seq_len)
        return self.position_table[start : start + length].copy()

    def _gather(self, token_ids: np.ndarray) -> np.ndarray:
        # mode="clip" writes straight into the result, where the default mode="raise"
        # buffers a copy; it never clips, because the ids were checked first.
        return np.take(self.token_table, token_ids, axis=0, mode="clip")


def to_numpy(array) -> np.ndarray:
    return np.asarray(array)
