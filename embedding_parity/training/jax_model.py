"""The model in JAX: a pure loss over a params pytree, jax.value_and_grad, optax.adam,
one jitted train step."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from backends import jax_backend as backend
from backends import validation
from embedding_parity.training.task import SUBJECT, Architecture, embedding_layer


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
        self.scheme, self.arch = scheme, arch
        layer = embedding_layer(backend, weights, scheme, arch.max_len)
        self.limits = (layer.vocab_size, layer.max_seq_len)  # for the host checks below
        self.constants = layer.constants  # the fixed sinusoidal table, if any
        trained = ("wq", "wk", "wv", "wo", "bo") + (("bias_table",) if scheme == "t5" else ())
        self.params = {
            **layer.params,
            **{k: jnp.asarray(weights[k]) for k in trained},
        }
        # Adam's settings, not an optax.adam: the betas and eps a static argument hashed by
        # their values, the rate an argument, so that models with the same betas and eps share
        # the compiled step whatever their rate.
        self.lr, self.adam = lr, (*betas, eps)
        self.state = _adam(lr, self.adam).init(self.params)

    def step(self, ids: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
        """One Adam step on a batch; the batch's loss and logits before the update."""
        validation.check_call(ids, 0, *self.limits)  # the pure functions below check nothing
        self.params, self.state, loss, logits = _train_step(
            self.params,
            self.state,
            self.constants,
            ids,
            targets,
            self.lr,
            self.scheme,
            self.arch,
            self.adam,
        )
        return float(loss), np.asarray(logits)

    def logits(self, ids: np.ndarray) -> np.ndarray:
        validation.check_call(ids, 0, *self.limits)
        return np.asarray(_logits(self.params, self.constants, ids, self.scheme, self.arch))

    def tables(self) -> dict:
        return {k: np.asarray(v) for k, v in self.params.items() if k.endswith("_table")}


@partial(jax.jit, static_argnames=("scheme", "arch"))
def _logits(params, constants, ids, scheme: str, arch: Architecture) -> jax.Array:
    tables = {**params, **constants}
    heads, length = arch.heads, ids.shape[1]
    if scheme in ("learned", "sinusoidal"):
        x = backend.embed(tables, ids, 0)  # (B, T, dim): the suite's pure function
    else:
        x = backend.embed_tokens(tables, ids)
    q, k, v = (_split(x @ params[w], heads) for w in ("wq", "wk", "wv"))  # (B, H, T, h)
    if scheme == "rope":
        positions = np.arange(length)
        q = backend.apply_rope(q, positions, layout="half")
        k = backend.apply_rope(k, positions, layout="half")
    scores = q @ jnp.swapaxes(k, -2, -1) * q.shape[-1] ** -0.5  # (B, H, T, T)
    if scheme == "alibi":  # the bias carries the causal mask
        scores = scores + backend.alibi_bias(heads, length, dtype=scores.dtype)
    elif arch.causal:
        later = np.triu(np.ones((length, length), bool), 1)
        scores = jnp.where(later, -jnp.inf, scores)
    if scheme == "t5":
        scores = scores + backend.t5_bias(
            params["bias_table"], length, bidirectional=not arch.causal
        )
    attention = jax.nn.softmax(scores, axis=-1)
    mixed = _merge(attention @ v)  # (B, T, H * h)
    out = mixed.mean(axis=1) if arch.pooled else mixed
    return out @ params["wo"] + params["bo"]  # (B, classes) or (B, T, classes)


def _loss(params, constants, ids, targets, scheme: str, arch: Architecture):
    logits = _logits(params, constants, ids, scheme, arch)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    return losses.mean(), logits


def _adam(lr, settings: tuple) -> optax.GradientTransformation:
    b1, b2, eps = settings
    return optax.adam(lr, b1=b1, b2=b2, eps=eps)


@partial(jax.jit, static_argnames=("scheme", "arch", "adam"))
def _train_step(params, state, constants, ids, targets, lr, scheme: str, arch, adam: tuple):
    grad_fn = jax.value_and_grad(_loss, has_aux=True)
    (loss, logits), grads = grad_fn(params, constants, ids, targets, scheme, arch)
    updates, state = _adam(lr, adam).update(grads, state, params)
    return optax.apply_updates(params, updates), state, loss, logits


def _split(x: jax.Array, heads: int) -> jax.Array:
    """(B, T, H * h) -> (B, H, T, h)."""
    batch, length, width = x.shape
    return x.reshape(batch, length, heads, width // heads).transpose(0, 2, 1, 3)


def _merge(x: jax.Array) -> jax.Array:
    """(B, H, T, h) -> (B, T, H * h)."""
    batch, heads, length, width = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * width)
