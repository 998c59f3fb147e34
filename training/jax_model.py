"""The model in JAX: a pure loss over a params pytree, jax.value_and_grad, optax.adam,
one jitted train step."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from backends import jax_backend as backend
from training.task import LENGTH, embedding_layer

POSITIONS = np.arange(LENGTH)


class Model:
    def __init__(self, weights: dict, scheme: str, *, lr: float, betas=(0.9, 0.999), eps=1e-8):
        self.scheme = scheme
        layer = embedding_layer(backend, weights, scheme)
        self.constants = layer.constants  # the fixed sinusoidal table, if any
        self.params = {
            **layer.params,
            **{k: jnp.asarray(weights[k]) for k in ("wq", "wk", "wv", "wo", "bo")},
        }
        self.optimizer = optax.adam(lr, b1=betas[0], b2=betas[1], eps=eps)
        self.state = self.optimizer.init(self.params)

    def step(self, ids: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
        """One Adam step on a batch; the batch's loss and logits before the update."""
        self.params, self.state, loss, logits = _train_step(
            self.params, self.state, self.constants, ids, targets, self.scheme, self.optimizer
        )
        return float(loss), np.asarray(logits)

    def logits(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(_logits(self.params, self.constants, ids, self.scheme))

    def tables(self) -> dict:
        return {k: np.asarray(v) for k, v in self.params.items() if k.endswith("_table")}


@partial(jax.jit, static_argnames="scheme")
def _logits(params, constants, ids, scheme: str) -> jax.Array:
    tables = {**params, **constants}
    if scheme in ("learned", "sinusoidal"):
        x = backend.embed(tables, ids, 0)  # (B, T, dim): the suite's pure function
    else:
        x = backend.embed_tokens(tables, ids)
    q, k, v = x @ params["wq"], x @ params["wk"], x @ params["wv"]  # (B, T, h) each
    if scheme == "rope":
        q, k = (
            backend.apply_rope(q, POSITIONS, layout="half"),
            backend.apply_rope(k, POSITIONS, layout="half"),
        )
    attention = jax.nn.softmax(q @ k.transpose(0, 2, 1) * q.shape[-1] ** -0.5, axis=-1)
    return (attention @ v).mean(axis=1) @ params["wo"] + params["bo"]  # (B, classes)


def _loss(params, constants, ids, targets, scheme: str):
    logits = _logits(params, constants, ids, scheme)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean(), logits


@partial(jax.jit, static_argnames=("scheme", "optimizer"))
def _train_step(params, state, constants, ids, targets, scheme: str, optimizer):
    grad_fn = jax.value_and_grad(_loss, has_aux=True)
    (loss, logits), grads = grad_fn(params, constants, ids, targets, scheme)
    updates, state = optimizer.update(grads, state, params)
    return optax.apply_updates(params, updates), state, loss, logits
