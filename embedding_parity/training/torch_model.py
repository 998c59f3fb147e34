"""The model in PyTorch: an nn.Module around the suite's layer, autograd, torch.optim.Adam."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from backends import torch_backend as backend
from embedding_parity.training.task import SUBJECT, Architecture, embedding_layer


class Net(nn.Module):
    def __init__(self, weights: dict, scheme: str, arch: Architecture):
        super().__init__()
        self.scheme, self.arch = scheme, arch
        self.embedding = embedding_layer(backend, weights, scheme, arch.max_len)  # an nn.Module
        names = ("wq", "wk", "wv", "wo", "bo") + (("bias_table",) if scheme == "t5" else ())
        for name in names:  # x @ w, as in the other two
            self.register_parameter(name, nn.Parameter(torch.from_numpy(weights[name].copy())))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        heads, length = self.arch.heads, ids.shape[1]
        x = self.embedding(ids)  # (B, T, dim)
        q, k, v = (_split(x @ w, heads) for w in (self.wq, self.wk, self.wv))  # (B, H, T, h)
        if self.scheme == "rope":
            positions = np.arange(length)
            q = backend.apply_rope(q, positions, layout="half")
            k = backend.apply_rope(k, positions, layout="half")
        scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5  # (B, H, T, T)
        if self.scheme == "alibi":  # the bias carries the causal mask
            scores = scores + backend.alibi_bias(heads, length, dtype=_numpy_dtype(scores))
        elif self.arch.causal:
            later = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(later, -torch.inf)
        if self.scheme == "t5":
            scores = scores + backend.t5_bias(
                self.bias_table, length, bidirectional=not self.arch.causal
            )
        attention = torch.softmax(scores, dim=-1)
        mixed = _merge(attention @ v)  # (B, T, H * h)
        out = mixed.mean(dim=1) if self.arch.pooled else mixed
        return out @ self.wo + self.bo  # (B, classes) or (B, T, classes)


class Model:
    def __init__(
        self,
        weights: dict,
        scheme: str,
        *,
        lr: float,
        arch: Architecture = SUBJECT,
        betas=(0.9, 0.999),
        eps=1e-8,
    ):
        self.net = Net(weights, scheme, arch)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr, betas=betas, eps=eps)

    def step(self, ids: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
        """One Adam step on a batch; the batch's loss and logits before the update."""
        logits = self.net(torch.from_numpy(ids))
        loss = F.cross_entropy(logits.flatten(0, -2), torch.from_numpy(targets).flatten())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item(), logits.detach().numpy()

    def logits(self, ids: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.net(torch.from_numpy(ids)).numpy()

    def tables(self) -> dict:
        embedding = self.net.embedding
        tables = {"token_table": embedding.token.weight.detach().numpy().copy()}
        if embedding.positions == "learned":
            tables["position_table"] = embedding.position.weight.detach().numpy().copy()
        if self.net.scheme == "t5":
            tables["bias_table"] = self.net.bias_table.detach().numpy().copy()
        return tables


def _split(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, H * h) -> (B, H, T, h)."""
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, h) -> (B, T, H * h)."""
    return x.transpose(1, 2).flatten(-2)


def _numpy_dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")
