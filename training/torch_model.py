"""The model in PyTorch: an nn.Module around the suite's layer, autograd, torch.optim.Adam."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from backends import torch_backend as backend
from training.task import LENGTH, embedding_layer

POSITIONS = np.arange(LENGTH)


class Net(nn.Module):
    def __init__(self, weights: dict, scheme: str):
        super().__init__()
        self.scheme = scheme
        self.embedding = embedding_layer(backend, weights, scheme)  # an nn.Module itself
        for name in ("wq", "wk", "wv", "wo", "bo"):  # x @ w, as in the other two
            self.register_parameter(name, nn.Parameter(torch.from_numpy(weights[name].copy())))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids)  # (B, T, dim)
        q, k, v = x @ self.wq, x @ self.wk, x @ self.wv  # (B, T, h) each
        if self.scheme == "rope":
            q, k = (
                backend.apply_rope(q, POSITIONS, layout="half"),
                backend.apply_rope(k, POSITIONS, layout="half"),
            )
        attention = torch.softmax(q @ k.transpose(1, 2) * q.shape[-1] ** -0.5, dim=-1)
        return (attention @ v).mean(dim=1) @ self.wo + self.bo  # (B, classes)


class Model:
    def __init__(self, weights: dict, scheme: str, *, lr: float, betas=(0.9, 0.999), eps=1e-8):
        self.net = Net(weights, scheme)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr, betas=betas, eps=eps)

    def step(self, ids: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
        """One Adam step on a batch; the batch's loss and logits before the update."""
        logits = self.net(torch.from_numpy(ids))
        loss = F.cross_entropy(logits, torch.from_numpy(targets))
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
        return tables
