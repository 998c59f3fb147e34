"""PyTorch's nn.Embedding (a module per table) and F.embedding, forward and autograd."""

import torch
from torch import nn
from torch.nn import functional as F


def _positions(start, token_ids):
    return torch.arange(start, start + token_ids.shape[-1])


def nn_embedding(token_table, position_table, token_ids, start):
    token = nn.Embedding.from_pretrained(token_table)
    position = nn.Embedding.from_pretrained(position_table)
    with torch.no_grad():
        return token(token_ids) + position(_positions(start, token_ids))


def f_embedding(token_table, position_table, token_ids, start):
    return F.embedding(token_ids, token_table) + F.embedding(
        _positions(start, token_ids), position_table
    )


def nn_embedding_gradient(token_table, token_ids, upstream):
    token = nn.Embedding.from_pretrained(token_table, freeze=False)
    token(token_ids).backward(upstream)
    return token.weight.grad


def nn_embedding_sparse_gradient(token_table, token_ids, upstream):
    token = nn.Embedding.from_pretrained(token_table, freeze=False, sparse=True)
    token(token_ids).backward(upstream)
    return token.weight.grad.to_dense()
