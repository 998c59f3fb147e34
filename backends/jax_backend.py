"""JAX backend: pure functions over a params pytree, compiled with ``jax.jit``.

The tables are arguments of the jitted functions, never closed over (a closed-over
table would be baked into the compiled program as a constant). JAX indexing never
raises: out-of-range ids are clamped by ``table[ids]``, filled with NaN by
``jnp.take`` and a too-late ``start`` is clamped by ``lax.dynamic_slice``. So the
layer checks ids and positions on the host first, with the shared validation.
"""

from __future__ import annotations

import contextlib
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from backends import validation

name = "jax"


def init_params(token_table: np.ndarray, position_table: np.ndarray) -> dict[str, jax.Array]:
    """The params pytree.

    {"token_table": (vocab_size, dim), "position_table": (max_seq_len, dim)}, on the device.
    """
    token_table, position_table = validation.check_tables(token_table, position_table)
    with _precision(token_table.dtype):
        # Copied onto the device once (passing NumPy tables to a jitted function would copy
        # them on every call). copy=True: on the CPU, device_put may alias the caller's memory.
        return {
            "token_table": jnp.array(token_table, copy=True),
            "position_table": jnp.array(position_table, copy=True),
        }


@jax.jit
def embed_tokens(params, token_ids: jax.Array) -> jax.Array:
    """(..., T) ids -> (..., T, dim). The ids must already be checked: nothing here raises."""
    # Same rows as params["token_table"][token_ids]; "promise_in_bounds" drops the
    # clamping code, which only ever hid bad ids, and the host has checked them.
    return params["token_table"].at[token_ids].get(mode="promise_in_bounds")


@partial(jax.jit, static_argnames="length")
def embed_positions(params, start: jax.Array, length: int) -> jax.Array:
    """Rows start .. start + length - 1 of the position table, (length, dim).

    start is traced, so one compiled program serves every start for a given length.
    """
    return lax.dynamic_slice_in_dim(params["position_table"], start, length, axis=0)


@jax.jit
def embed(params, token_ids: jax.Array, start: jax.Array) -> jax.Array:
    """(T,) or (B, T) ids -> (T, dim) or (B, T, dim): token rows plus position rows.

    XLA fuses the gather, the slice and the add into one loop.
    """
    return embed_tokens(params, token_ids) + embed_positions(params, start, token_ids.shape[-1])


class TokenPositionEmbedding:
    """Holds ``params`` and calls the jitted pure functions above after host-side checks."""

    def __init__(self, token_table: np.ndarray, position_table: np.ndarray):
        self.params = init_params(token_table, position_table)
        self.vocab_size, self.dim = self.params["token_table"].shape
        self.max_seq_len = self.params["position_table"].shape[0]
        self.dtype = np.dtype(self.params["token_table"].dtype)

    def __call__(self, token_ids, start: int = 0) -> jax.Array:
        """(T,) or (B, T) ids -> (T, dim) or (B, T, dim) token + position embeddings."""
        host_ids, start = validation.check_call(
            np.asarray(token_ids), start, self.vocab_size, self.max_seq_len
        )
        with _precision(self.dtype):
            return embed(self.params, _device_ids(token_ids, host_ids), start)

    def token_embeddings(self, token_ids) -> jax.Array:
        """(..., T) ids -> (..., T, dim) rows of the token table."""
        host_ids = validation.check_token_ids(np.asarray(token_ids), self.vocab_size)
        with _precision(self.dtype):
            return embed_tokens(self.params, _device_ids(token_ids, host_ids))

    def position_embeddings(self, start: int, length: int) -> jax.Array:
        """Rows start .. start + length - 1 of the position table, (length, dim)."""
        start = validation.check_positions(start, length, self.max_seq_len)
        with _precision(self.dtype):
            return embed_positions(self.params, start, length)


def _device_ids(token_ids, host_ids: np.ndarray):
    """Checked ids as int32, keeping a JAX array that is already int32 where it is."""
    if isinstance(token_ids, jax.Array) and token_ids.dtype == jnp.int32:
        return token_ids
    # Convert on the host: without x64 JAX would truncate int64 ids to int32 with only a warning.
    return host_ids.astype(np.int32)


def _precision(dtype: np.dtype):
    """float64 needs JAX's x64 mode: enable it for this call only (a thread-local context),
    so importing the suite changes nothing for float32 users."""
    return jax.enable_x64(True) if dtype == np.float64 else contextlib.nullcontext()


def to_numpy(array: jax.Array) -> np.ndarray:
    return np.asarray(array)
