"""The model in NumPy: the suite's layer for the embedding, every other gradient by hand,
and Adam by hand as an (init, update) pair, the shape optax gives it."""

from __future__ import annotations

import numpy as np

from backends import numpy_backend as backend
from training.task import LENGTH, embedding_layer

POSITIONS = np.arange(LENGTH)


class Model:
    """token (+ position) -> one attention head (q, k, v; RoPE on q and k for "rope") ->
    mean over positions -> linear readout -> cross-entropy, trained with Adam."""

    def __init__(self, weights: dict, scheme: str, *, lr: float, betas=(0.9, 0.999), eps=1e-8):
        self.scheme = scheme
        self.embedding = embedding_layer(backend, weights, scheme)
        self.params = {k: weights[k].copy() for k in ("wq", "wk", "wv", "wo", "bo")}
        self.params["token_table"] = self.embedding.token_table  # the layer's own, updated in place
        if scheme == "learned":
            self.params["position_table"] = self.embedding.position_table
        self.hyper = {"lr": lr, "b1": betas[0], "b2": betas[1], "eps": eps}
        self.state = adam_init(self.params)

    def step(self, ids: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
        """One Adam step on a batch; the batch's loss and logits before the update."""
        logits, cache = self._forward(ids)
        loss, d_logits = _cross_entropy(logits, targets)
        grads = self._backward(ids, d_logits, cache)
        adam_update(self.params, grads, self.state, **self.hyper)
        return loss, logits

    def logits(self, ids: np.ndarray) -> np.ndarray:
        return self._forward(ids)[0]

    def tables(self) -> dict:
        return {k: v.copy() for k, v in self.params.items() if k.endswith("_table")}

    def _forward(self, ids):
        p = self.params
        x = self.embedding(ids)  # (B, T, dim): token rows (+ position rows)
        q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]  # (B, T, h) each
        if self.scheme == "rope":
            q, k = (
                backend.apply_rope(q, POSITIONS, layout="half"),
                backend.apply_rope(k, POSITIONS, layout="half"),
            )
        scale = np.asarray(q.shape[-1] ** -0.5, q.dtype)
        attention = _softmax(q @ k.transpose(0, 2, 1) * scale)  # (B, T, T)
        pooled = (attention @ v).mean(axis=1)  # (B, h)
        return pooled @ p["wo"] + p["bo"], (x, q, k, v, attention, pooled, scale)

    def _backward(self, ids, d_logits, cache) -> dict:
        p = self.params
        x, q, k, v, attention, pooled, scale = cache
        grads = {"wo": pooled.T @ d_logits, "bo": d_logits.sum(axis=0)}
        d_out = np.repeat((d_logits @ p["wo"].T)[:, None, :] / LENGTH, LENGTH, axis=1)  # (B, T, h)
        d_attention = d_out @ v.transpose(0, 2, 1)
        d_v = attention.transpose(0, 2, 1) @ d_out
        # softmax backward: a * (da - sum(da * a)) row by row
        d_scores = attention * (d_attention - (d_attention * attention).sum(-1, keepdims=True))
        d_scores *= scale
        d_q, d_k = d_scores @ k, d_scores.transpose(0, 2, 1) @ q
        if self.scheme == "rope":  # the rotation's transpose
            d_q, d_k = _rope_transpose(d_q), _rope_transpose(d_k)
        for name, d in (("wq", d_q), ("wk", d_k), ("wv", d_v)):
            grads[name] = np.einsum("btd,bth->dh", x, d)
        d_x = d_q @ p["wq"].T + d_k @ p["wk"].T + d_v @ p["wv"].T  # (B, T, dim)
        grads.update(backend.gradients(self.embedding, ids, d_x))  # the suite's backward
        return grads


def adam_init(params: dict) -> dict:
    return {
        "step": 0,
        "m": {k: np.zeros_like(v) for k, v in params.items()},
        "v": {k: np.zeros_like(v) for k, v in params.items()},
    }


def adam_update(params, grads, state, *, lr, b1, b2, eps) -> None:
    """Adam (Kingma and Ba 2015), in place, as torch.optim.Adam and optax.adam write it:
    p -= lr * m_hat / (sqrt(v_hat) + eps), eps outside the square root."""
    state["step"] += 1
    t = state["step"]
    for name, g in grads.items():
        m, v = state["m"][name], state["v"][name]
        m *= b1
        m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        params[name] -= (lr * m_hat / (np.sqrt(v_hat) + eps)).astype(params[name].dtype)


def _softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _cross_entropy(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy and its gradient with respect to the logits."""
    probs = _softmax(logits)
    rows = np.arange(len(targets))
    loss = float(-np.log(probs[rows, targets]).mean())
    probs[rows, targets] -= 1
    return loss, probs / len(targets)


def _rope_transpose(g: np.ndarray) -> np.ndarray:
    """R(theta)^T g for layout "half": negate the second half, rotate, negate it again
    (a rotation by -theta), exactly, with the suite's own apply_rope."""
    half = g.shape[-1] // 2
    flip = np.concatenate([np.ones(half, g.dtype), -np.ones(half, g.dtype)])
    return backend.apply_rope(g * flip, POSITIONS, layout="half") * flip
