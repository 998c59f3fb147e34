"""Implementations for compare.py check, in PyTorch."""

import torch
import torch.nn.functional as F


def lookup(token_table, position_table, token_ids, start):
    positions = torch.arange(start, start + token_ids.shape[-1])
    return F.embedding(token_ids, token_table) + F.embedding(positions, position_table)


def _inverse_frequencies(dim, dtype=torch.float32):
    return 1.0 / 10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim).to(dtype)


def rope_interleaved(x, positions):
    angles = positions.float()[:, None] * _inverse_frequencies(x.shape[-1])
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
    turned = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles))
    return turned.flatten(-2).to(x.dtype)


def rope_angles_in_bfloat16(x, positions):
    # the angles formed in bfloat16, as a model cast to bfloat16 whole would form them
    angles = positions.to(torch.bfloat16)[:, None] * _inverse_frequencies(
        x.shape[-1], torch.bfloat16
    )
    cos, sin = angles.float().cos(), angles.float().sin()
    a, b = x.float().chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1).to(x.dtype)


def gradient(token_table, token_ids, upstream):
    table = token_table.clone().requires_grad_(True)
    F.embedding(token_ids, table).backward(upstream)
    return table.grad


def gradient_index_put(token_table, token_ids, upstream):
    grad = torch.zeros_like(token_table)
    grad[token_ids] += upstream  # index_put_ without accumulate: a repeated id keeps one term
    return grad
