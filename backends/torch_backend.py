"""PyTorch backend: a ``torch.nn.Module`` holding two ``nn.Embedding`` tables."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch
from torch import nn

from backends import validation

name = "torch"

_INTEGER_DTYPES = {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                   torch.uint16, torch.uint32, torch.uint64}  # fmt: skip


class TokenPositionEmbedding(nn.Module):
    """token_table (vocab_size, dim) and position_table (max_seq_len, dim) as two nn.Embedding."""

    def __init__(self, token_table: np.ndarray, position_table: np.ndarray):
        super().__init__()
        token_table, position_table = validation.check_tables(token_table, position_table)
        # Trainable (freeze=False), like a model's own embeddings.
        self.token = nn.Embedding.from_pretrained(_from_numpy(token_table), freeze=False)
        self.position = nn.Embedding.from_pretrained(_from_numpy(position_table), freeze=False)
        self.vocab_size, self.dim = token_table.shape
        self.max_seq_len = position_table.shape[0]
        self.dtype = token_table.dtype

    def forward(self, token_ids, start: int = 0) -> torch.Tensor:
        """(T,) or (B, T) ids -> (T, dim) or (B, T, dim) token + position embeddings."""
        token_ids, start = validation.check_call(
            _host_ids(token_ids), start, self.vocab_size, self.max_seq_len
        )
        positions = torch.arange(
            start, start + token_ids.shape[-1], device=self.token.weight.device
        )
        return self.token(self._to_device(token_ids)) + self.position(positions)  # (..., T, dim)

    def token_embeddings(self, token_ids) -> torch.Tensor:
        """(..., T) ids -> (..., T, dim) rows of the token table."""
        token_ids = validation.check_token_ids(_host_ids(token_ids), self.vocab_size)
        return self.token(self._to_device(token_ids))

    def position_embeddings(self, start: int, length: int) -> torch.Tensor:
        """Rows start .. start + length - 1 of the position table, (length, dim)."""
        start = validation.check_positions(start, length, self.max_seq_len)
        return self.position(
            torch.arange(start, start + length, device=self.position.weight.device)
        )

    def _to_device(self, token_ids: np.ndarray) -> torch.Tensor:
        # nn.Embedding takes int32 or int64 ids; the checked ids fit either.
        if token_ids.dtype not in (np.int32, np.int64):
            token_ids = token_ids.astype(np.int64)
        return torch.from_numpy(token_ids).to(self.token.weight.device)


def _host_ids(token_ids) -> np.ndarray:
    """Ids as a NumPy array for the shared checks (a view for CPU tensors)."""
    if isinstance(token_ids, torch.Tensor):
        # bfloat16 and other torch-only dtypes have no NumPy twin: refuse them here.
        if token_ids.dtype not in _INTEGER_DTYPES:
            raise validation.ids_dtype_error(token_ids.dtype)
        return token_ids.detach().cpu().numpy()
    return np.asarray(token_ids)


def _from_numpy(table: np.ndarray) -> torch.Tensor:
    """A copy the layer owns (from_numpy alone would share the caller's memory)."""
    # torch.from_numpy has no bfloat16 (ml_dtypes is unknown to it): reinterpret the bits.
    if table.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(table.view(np.int16)).view(torch.bfloat16).clone()
    return torch.from_numpy(table).clone()


def to_numpy(array: torch.Tensor) -> np.ndarray:
    array = array.detach().cpu()
    if array.dtype == torch.bfloat16:
        return array.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return array.numpy()
