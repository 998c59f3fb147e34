"""The model in NumPy: the suite's layer for the embedding, every other gradient by hand,
and Adam by hand as an (init, update) pair, the shape optax gives it."""

from __future__ import annotations

import numpy as np

from backends import numpy_backend as backend
from backends import positional
from embedding_parity.training.task import SUBJECT, T5_BUCKETS, Architecture, embedding_layer


class Model:
    """token (+ position) -> one attention layer (q, k, v per head; RoPE on q and k, or an
    ALiBi or T5 bias on the scores) -> the mean over positions, or every position ->
    linear readout -> cross-entropy, trained with Adam."""

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
        self.scheme, self.arch = scheme, arch
        self.embedding = embedding_layer(backend, weights, scheme, arch.max_len)
        self.params = {k: weights[k].copy() for k in ("wq", "wk", "wv", "wo", "bo")}
        self.params["token_table"] = self.embedding.token_table  # the layer's own, updated in place
        if scheme == "learned":
            self.params["position_table"] = self.embedding.position_table
        if scheme == "t5":
            self.params["bias_table"] = weights["bias_table"].copy()
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
        p, heads = self.params, self.arch.heads
        x = self.embedding(ids)  # (B, T, dim): token rows (+ position rows)
        length = ids.shape[1]
        q, k, v = (_split(x @ p[w], heads) for w in ("wq", "wk", "wv"))  # (B, H, T, h) each
        if self.scheme == "rope":
            positions = np.arange(length)
            q = backend.apply_rope(q, positions, layout="half")
            k = backend.apply_rope(k, positions, layout="half")
        scale = np.asarray(q.shape[-1] ** -0.5, q.dtype)
        scores = q @ k.transpose(0, 1, 3, 2) * scale  # (B, H, T, T)
        if self.scheme == "alibi":  # the bias carries the causal mask
            scores += backend.alibi_bias(heads, length, dtype=scores.dtype)
        elif self.arch.causal:
            scores[..., np.triu(np.ones((length, length), bool), 1)] = -np.inf  # later keys
        if self.scheme == "t5":
            scores += backend.t5_bias(p["bias_table"], length, bidirectional=not self.arch.causal)
        attention = _softmax(scores)  # (B, H, T, T)
        mixed = _merge(attention @ v)  # (B, T, H * h)
        out = mixed.mean(axis=1) if self.arch.pooled else mixed  # (B, H * h) or (B, T, H * h)
        return out @ p["wo"] + p["bo"], (x, q, k, v, attention, out, scale)

    def _backward(self, ids, d_logits, cache) -> dict:
        p, heads = self.params, self.arch.heads
        x, q, k, v, attention, out, scale = cache
        length = ids.shape[1]
        grads = {
            "wo": out.reshape(-1, out.shape[-1]).T @ d_logits.reshape(-1, d_logits.shape[-1]),
            "bo": d_logits.reshape(-1, d_logits.shape[-1]).sum(axis=0),
        }
        d_out = d_logits @ p["wo"].T  # (B, H * h) or (B, T, H * h)
        if self.arch.pooled:  # the mean's gradient: an equal share to every position
            d_out = np.repeat(d_out[:, None, :] / length, length, axis=1)
        d_out = _split(d_out, heads)  # (B, H, T, h)
        d_attention = d_out @ v.transpose(0, 1, 3, 2)
        d_v = attention.transpose(0, 1, 3, 2) @ d_out
        # softmax backward: a * (da - sum(da * a)) row by row
        d_scores = attention * (d_attention - (d_attention * attention).sum(-1, keepdims=True))
        if self.scheme == "t5":  # the bias is bias_table[bucket]: scatter back per bucket
            buckets = backend.t5_relative_buckets(
                positional.relative_positions(length, length),
                bidirectional=not self.arch.causal,
                num_buckets=T5_BUCKETS,
            )  # (T, T)
            grads["bias_table"] = np.zeros_like(p["bias_table"])
            np.add.at(grads["bias_table"], buckets, d_scores.sum(axis=0).transpose(1, 2, 0))
        d_scores *= scale
        d_q, d_k = d_scores @ k, d_scores.transpose(0, 1, 3, 2) @ q
        if self.scheme == "rope":  # the rotation's transpose
            d_q, d_k = _rope_transpose(d_q), _rope_transpose(d_k)
        d_q, d_k, d_v = _merge(d_q), _merge(d_k), _merge(d_v)  # (B, T, H * h)
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


def _split(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, T, H * h) -> (B, H, T, h)."""
    batch, length, width = x.shape
    return x.reshape(batch, length, heads, width // heads).transpose(0, 2, 1, 3)


def _merge(x: np.ndarray) -> np.ndarray:
    """(B, H, T, h) -> (B, T, H * h)."""
    batch, heads, length, width = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * width)


def _softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _cross_entropy(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy over every prediction (sequence or position) and its gradient
    with respect to the logits."""
    probs = _softmax(logits).reshape(-1, logits.shape[-1])
    rows, targets = np.arange(len(probs)), targets.reshape(-1)
    loss = float(-np.log(probs[rows, targets]).mean())
    probs[rows, targets] -= 1
    return loss, (probs / len(targets)).reshape(logits.shape)


def _rope_transpose(g: np.ndarray) -> np.ndarray:
    """R(theta)^T g for layout "half": negate the second half, rotate, negate it again
    (a rotation by -theta), exactly, with the suite's own apply_rope."""
    half = g.shape[-1] // 2
    flip = np.concatenate([np.ones(half, g.dtype), -np.ones(half, g.dtype)])
    return backend.apply_rope(g * flip, np.arange(g.shape[-2]), layout="half") * flip
