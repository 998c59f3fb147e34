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

from backends import grid as grid_module
from backends import positional, quantized, resize, rope2d, validation
from backends.resize import check_kernel as check_resize_kernel

name = "jax"


def init_params(token_table: np.ndarray, position_table: np.ndarray) -> dict[str, jax.Array]:
    """The params pytree of a learned-position layer.

    {"token_table": (vocab_size, dim), "position_table": (max_seq_len, dim)}, on the device.
    """
    token_table, position_table = validation.check_tables(token_table, position_table)
    return {"token_table": _to_device(token_table), "position_table": _to_device(position_table)}


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


@jax.jit
def _embed_arrays(token_table, position_table, token_ids, start) -> jax.Array:
    """embed() with the tables as two arguments: the layer's eager call. A dict argument
    costs jit's dispatch about 0.2 µs to flatten, 3% of a decode step's lookup here."""
    return embed({"token_table": token_table, "position_table": position_table}, token_ids, start)


@partial(jax.jit, donate_argnums=0, static_argnames="with_positions")
def embed_into(out, params, token_ids, start, *, with_positions: bool = True) -> jax.Array:
    """embed() (or embed_tokens() without positions), written over a donated ``out``.

    XLA reuses the donated buffer for the result, so no fresh output is allocated:
    a large fresh output costs a page fault per 4 KiB page on every call. ``out`` is
    invalid afterwards; use the returned array (the same memory).
    """
    x = embed(params, token_ids, start) if with_positions else embed_tokens(params, token_ids)
    return lax.dynamic_update_slice(out, x, (0,) * out.ndim)


# --- the checks inside a jitted step --------------------------------------------------

# What embed_checked found, the first entry of its status.
_OK, _BAD_ID, _NEGATIVE_START, _START_BEYOND = 0, 1, 2, 3
# The bad id travels as id // _SPLIT and id % _SPLIT: uint32 ids fit in int32 halves.
_SPLIT = 1 << 16


def embed_checked(tables, token_ids, start) -> tuple[jax.Array, jax.Array]:
    """embed() (or embed_tokens() without a position table) and, beside it, the layer's
    checks, for a step you jit: ``(y, status)``. Return ``status`` from the step and pass
    it to ``throw`` after the step, which raises what the eager layer raises for the same
    input (IndexError for an id, ValueError for a start, the same message)::

        @jax.jit
        def step(tables, ids, start):
            x, status = jax_backend.embed_checked(tables, ids, start)
            ...                                    # the rest of the model
            return out, status
        out, status = step(layer.tables, ids, start)   # ids, start: device arrays
        jax_backend.throw(status)                       # the one read: a few integers

    The eager layer reads the ids on the host to check them: on an accelerator that is a
    copy and a synchronisation per call. Here the checks are device ops on traced values,
    fused with the lookup into one small integer array: what was found first, the bad id
    and where it is, the start and the sizes, so that ``throw`` rebuilds the exact message
    from it. Until it is thrown, a bad id's rows are whatever JAX's gather gives (a negative
    id wraps, a large one is clamped): throw before using y. What is known at trace time
    raises at once, as the eager layer raises it: float or 3-D token_ids, a start that
    embed_checked sees as a number (closed over, or called outside jit), and more ids than
    positions; a traced start that is not an integer scalar is a TypeError.
    """
    if not jnp.issubdtype(token_ids.dtype, jnp.integer):
        raise validation.ids_dtype_error(token_ids.dtype)
    validation.check_ids_shape(token_ids.shape)
    vocab_size = tables["token_table"].shape[0]
    length = token_ids.shape[-1]
    positions = tables.get("position_table")
    max_seq_len = None if positions is None else positions.shape[0]
    wide = jax.dtypes.canonicalize_dtype(jnp.int64)  # int32 unless x64 is on
    what = jnp.asarray(_OK, wide)
    start_halves = (0, 0)  # a start known now is checked now: the status need not name it
    if not isinstance(start, jax.core.Tracer):  # a number: checked now, as the eager layer does
        validation.check_positions(start, length, max_seq_len)
    else:
        if not (jnp.issubdtype(start.dtype, jnp.integer) and start.shape == ()):
            raise TypeError(
                f"start must be an integer, got a traced {start.dtype} array of shape "
                f"{start.shape}: pass an integer scalar such as jnp.int32(start)"
            )
        if max_seq_len is not None:
            if length > max_seq_len:  # no start fits: known now
                raise ValueError(
                    f"T {length} exceeds max_seq_len {max_seq_len}: no start fits; use at most "
                    f"{max_seq_len} tokens, or a longer position table"
                )
            what = jnp.where(start > max_seq_len - length, _START_BEYOND, what)
        what = jnp.where(start < 0, _NEGATIVE_START, what)
        start_halves = _halves(start, wide)
    flat = token_ids.reshape(-1)
    first, id_halves = jnp.asarray(0, wide), (0, 0)  # the first bad id's place in flat, the id
    if flat.size:
        bad = flat < 0
        if vocab_size <= jnp.iinfo(flat.dtype).max:  # else every id of this dtype fits
            bad = bad | (flat >= vocab_size)
        first = jnp.min(jnp.where(bad, lax.iota(wide, flat.size), flat.size))
        what = jnp.where(first < flat.size, _BAD_ID, what)  # ids first, as the eager layer
        id_halves = _halves(flat[jnp.minimum(first, flat.size - 1)], wide)
    parts = (
        what,
        *id_halves,
        first,
        *start_halves,
        token_ids.ndim,
        length,
        -1 if max_seq_len is None else max_seq_len,
        vocab_size,
    )
    # One elementwise expression over the status's positions, which XLA fuses into one
    # small loop (a stack of the parts costs a kernel each, 0.5 µs apiece on the CPU).
    index = lax.iota(wide, len(parts))
    status = jnp.zeros(len(parts), wide)
    for k, part in enumerate(parts):
        status = jnp.where(index == k, part, status)
    # The lookup takes int32 ids, as the eager layer sends them: JAX's indexing of narrower
    # ids would wrap its own arithmetic (a negative id plus vocab_size, in int8).
    token_ids = token_ids.astype(jnp.int32)
    if positions is None:
        return embed_tokens(tables, token_ids), status
    return embed(tables, token_ids, start), status


def _halves(value, wide) -> tuple:
    """A traced integer as value // _SPLIT and value % _SPLIT in ``wide``: any int32 or
    uint32 fits in two int32 halves, and any int64 or uint64 in two int64 ones (x64)."""
    if jnp.issubdtype(value.dtype, jnp.unsignedinteger):
        value = value.astype(jnp.promote_types(value.dtype, jnp.uint32))
    else:
        value = value.astype(wide)
    return (value // _SPLIT).astype(wide), (value % _SPLIT).astype(wide)


def throw(status) -> None:
    """Raise what ``embed_checked`` found: IndexError for an id, ValueError for a start,
    each with the eager layer's message; nothing when all was well. ``status`` is its second
    result (or a tuple, list or dict of several, from several lookups in one step). Reading
    it is one transfer to the host of a few integers: do it once per step."""
    if isinstance(status, (tuple, list, dict)):
        for part in status.values() if isinstance(status, dict) else status:
            throw(part)
        return
    found = np.asarray(status)  # the one read; np.asarray is the cheapest (bool() is 8 µs)
    if found[0] == _OK:
        return
    what, high, low, first, start_high, start_low, ndim, length, max_seq_len, vocab_size = (
        found.tolist()
    )
    if what == _BAD_ID:
        where = f"{first // length}, {first % length}" if ndim == 2 else str(first)
        raise validation.id_out_of_range(high * _SPLIT + low, where, vocab_size)
    start = start_high * _SPLIT + start_low
    if what == _NEGATIVE_START:
        raise ValueError(validation.negative_start_message(start))
    validation.check_positions(start, length, max_seq_len)  # raises the eager ValueError


class TokenPositionEmbedding:
    """Holds the tables and calls the jitted pure functions above after host-side checks.

    positions="learned": ``params`` holds both tables; "sinusoidal": ``params`` holds the
    token table and the fixed sinusoidal table sits beside it in ``constants``; "none":
    token rows only. padding_idx and scale_grad_by_freq shape the gradient only (see
    gradients). A ``quantized.QuantizedTable`` token table sits in ``constants`` as its
    bytes, "token_blocks" (uint8, not a parameter), and ``embed_quantized`` decodes the rows
    a call reads.
    """

    def __init__(
        self,
        token_table: np.ndarray,
        position_table: np.ndarray | None = None,
        *,
        positions: str = "learned",
        max_seq_len: int | None = None,
        base: float = 10000.0,
        layout: str = "interleaved",
        padding_idx: int | None = None,
        scale_grad_by_freq: bool = False,
        tokenizer_size: int | None = None,
    ):
        given = token_table
        token_table, position_table, self.max_seq_len = quantized.layer_tables(
            token_table, position_table, positions, max_seq_len, base, layout
        )
        self.positions = positions
        self.vocab_size, self.dim = token_table.shape
        self.dtype = token_table.dtype
        self.padding_idx = validation.check_embedding_options(
            padding_idx, scale_grad_by_freq, self.vocab_size
        )
        self.scale_grad_by_freq = bool(scale_grad_by_freq)
        self.tokenizer_size = validation.check_tokenizer_size(tokenizer_size, self.vocab_size)
        self.quantized = given.kind if isinstance(given, quantized.QuantizedTable) else None
        # Most calls need neither x64 mode nor a choice of function (see __call__).
        self._plain = positions != "none" and self.dtype != np.float64 and not self.quantized
        # A quantized table's calls in one program (see embed_quantized): its static arguments
        # made once, the call skipping embed_quantized's and the x64 context's Python (about
        # 1.5 µs of a decode step's 17, one thread)
        self._one_program = None
        if self.quantized and self.dtype != np.float64:
            if positions == "none" or np.dtype(self.dtype).itemsize >= 4:
                self._one_program = self._decoding
        self.params, self.constants = {}, {}
        if self.quantized:
            self.constants["token_blocks"] = _to_device(given.blocks)
        else:
            self.params["token_table"] = _to_device(token_table)
        if positions == "learned":
            self.params["position_table"] = _to_device(position_table)
        elif positions == "sinusoidal":
            self.constants["position_table"] = sinusoidal_table(
                self.max_seq_len, self.dim, base=base, layout=layout, dtype=self.dtype
            )

    def __call__(self, token_ids, start: int = 0, *, out: jax.Array | None = None) -> jax.Array:
        """(T,) or (B, T) ids -> (T, dim) or (B, T, dim) token + position embeddings.

        out: a previous result to reuse. JAX arrays are immutable, so ``out`` is donated:
        the result is written into its memory and returned, and ``out`` itself becomes
        invalid. Write ``y = layer(ids, out=y)``.
        """
        host_ids, start = validation.check_call(
            token_ids, start, self.vocab_size, self.max_seq_len, self.tokenizer_size
        )
        ids = _device_ids(token_ids, host_ids)
        if out is None and self._plain:
            tables = self.tables
            return _embed_arrays(tables["token_table"], tables["position_table"], ids, start)
        if out is None and self._one_program:
            return _embed_quantized(self.tables, ids, start, **self._one_program)
        with _precision(self.dtype):
            if out is not None:
                if not isinstance(out, jax.Array):
                    raise TypeError(
                        f"out must be a jax.Array (it is donated), got {type(out).__name__}"
                    )
                if out.is_deleted():
                    raise ValueError(
                        "out was donated to an earlier call and is no longer valid: "
                        "pass the array that call returned (y = layer(ids, out=y))"
                    )
                shape = (*host_ids.shape, self.dim)
                validation.check_out(out, np.dtype(out.dtype), True, shape, self.dtype)
                with_positions = self.positions != "none"
                if self.quantized:
                    return embed_quantized_into(out, self.tables, ids, start, **self._decoding)
                return embed_into(out, self.tables, ids, start, with_positions=with_positions)
            if self.quantized:
                return embed_quantized(self.tables, ids, start, **self._decoding)
            if self.positions == "none":
                return embed_tokens(self.params, ids)
            return embed(self.tables, ids, start)

    def token_embeddings(self, token_ids) -> jax.Array:
        """(..., T) ids -> (..., T, dim) rows of the token table."""
        host_ids = validation.check_token_ids(
            validation.as_host(token_ids), self.vocab_size, self.tokenizer_size
        )
        ids = _device_ids(token_ids, host_ids)
        with _precision(self.dtype):
            if self.quantized:
                decoding = {**self._decoding, "with_positions": False}
                return embed_quantized(self.tables, ids, 0, **decoding)
            return embed_tokens(self.params, ids)

    @property
    def _decoding(self) -> dict:
        """embed_quantized's static arguments."""
        return {
            "kind": self.quantized,
            "dtype": self.dtype,
            "with_positions": self.positions != "none",
        }

    def position_embeddings(self, start: int, length: int) -> jax.Array:
        """Rows start .. start + length - 1 of the position table, (length, dim)."""
        validation.check_has_positions(self.positions)
        start = validation.check_positions(start, length, self.max_seq_len)
        with _precision(self.dtype):
            return embed_positions(self.tables, start, length)

    @property
    def tables(self) -> dict[str, jax.Array]:
        """What the pure functions take: ``params`` plus any fixed table (sinusoidal)."""
        return {**self.params, **self.constants} if self.constants else self.params


def embed_quantized(tables, token_ids, start, *, kind: str, dtype, with_positions: bool):
    """Token rows decoded from a quantized table's bytes, tables["token_blocks"]
    (vocab_size, row_bytes) uint8: only the rows of token_ids are gathered and decoded
    (``quantized.decode`` in jax.numpy), float32 then ``dtype``; plus the position rows."""
    if with_positions and np.dtype(dtype).itemsize < 4:
        # two programs: in one, XLA on the CPU keeps float32 across the cast to float16 or
        # bfloat16 and the add after it, rounding the sum once where the contract rounds the
        # row first (neither an optimization barrier nor its excess-precision flag stops it)
        x = _decode_rows(tables, token_ids, kind=kind, dtype=dtype)
        return _add_positions(x, tables["position_table"], start)
    decoding = {"kind": kind, "dtype": dtype, "with_positions": with_positions}
    return _embed_quantized(tables, token_ids, start, **decoding)


@partial(jax.jit, static_argnames=("kind", "dtype"))
def _decode_rows(tables, token_ids, *, kind: str, dtype) -> jax.Array:
    """(..., T) ids -> (..., T, dim) rows decoded in float32, then ``dtype``."""
    # the ids were checked on the host: no clamping needed (as embed_tokens)
    rows = tables["token_blocks"].at[token_ids.reshape(-1)].get(mode="promise_in_bounds")
    values = quantized.decode(JAX_OPS, kind, rows)  # (N, dim) float32
    return values.astype(dtype).reshape(*token_ids.shape, values.shape[-1])


@jax.jit
def _add_positions(x, position_table, start) -> jax.Array:
    return x + lax.dynamic_slice_in_dim(position_table, start, x.shape[-2])


@partial(jax.jit, static_argnames=("kind", "dtype", "with_positions"))
def _embed_quantized(tables, token_ids, start, *, kind: str, dtype, with_positions: bool):
    """embed_quantized in one program, where the cast cannot change the sum (float32 rows, or
    no position rows)."""
    x = _decode_rows(tables, token_ids, kind=kind, dtype=dtype)
    return _add_positions(x, tables["position_table"], start) if with_positions else x


def embed_quantized_into(out, tables, token_ids, start, *, kind, dtype, with_positions):
    """embed_quantized, written over a donated ``out`` (as embed_into): the decode writes the
    rows into out's memory (XLA updates the donated buffer in place, in the decode's loop),
    so no fresh result is allocated (33.5 MB at LLaMA's shape: 8,192 page faults a call,
    seven times the decode's time)."""
    if with_positions and np.dtype(dtype).itemsize < 4:  # two programs, as embed_quantized
        x = _decode_rows_into(out, tables, token_ids, kind=kind, dtype=dtype)
        return _add_positions_into(x, tables["position_table"], start)
    decoding = {"kind": kind, "dtype": dtype, "with_positions": with_positions}
    return _embed_quantized_into(out, tables, token_ids, start, **decoding)


@partial(jax.jit, donate_argnums=0, static_argnames=("kind", "dtype"))
def _decode_rows_into(out, tables, token_ids, *, kind: str, dtype) -> jax.Array:
    x = _decode_rows(tables, token_ids, kind=kind, dtype=dtype)
    return lax.dynamic_update_slice(out, x, (0,) * out.ndim)


@partial(jax.jit, donate_argnums=0)
def _add_positions_into(x, position_table, start) -> jax.Array:
    return _add_positions(x, position_table, start)


@partial(jax.jit, donate_argnums=0, static_argnames=("kind", "dtype", "with_positions"))
def _embed_quantized_into(out, tables, token_ids, start, *, kind, dtype, with_positions):
    decoding = {"kind": kind, "dtype": dtype, "with_positions": with_positions}
    x = _embed_quantized(tables, token_ids, start, **decoding)
    return lax.dynamic_update_slice(out, x, (0,) * out.ndim)


class _JaxOps:
    """What quantized.decode needs beyond operators, in jax.numpy: lax's bit casts; a value
    plus or minus a block's min as NumPy's (XLA on the CPU keeps the first operand's NaN too)."""

    add = staticmethod(jnp.add)
    subtract = staticmethod(jnp.subtract)

    @staticmethod
    def float16(pair: jax.Array) -> jax.Array:  # (n, 2) bytes -> (n, 1) float32
        return lax.bitcast_convert_type(pair, jnp.float16).astype(jnp.float32)[:, None]

    @staticmethod
    def int8(values: jax.Array) -> jax.Array:
        return lax.bitcast_convert_type(values, jnp.int8)

    @staticmethod
    def float32(values: jax.Array) -> jax.Array:
        return values.astype(jnp.float32)

    @staticmethod
    def stack(arrays: list, axis: int) -> jax.Array:
        return jnp.stack(arrays, axis)

    @staticmethod
    def concat(arrays: list) -> jax.Array:
        return jnp.concatenate(arrays, -1)


JAX_OPS = _JaxOps()


def gradients(layer, token_ids, upstream, start: int = 0, *, sparse: bool = False) -> dict:
    """``jax.vjp`` of the pure forward function with respect to the layer's tables.

    {"token_table": (vocab_size, dim), "position_table": (max_seq_len, dim) when positions
    are learned}, as JAX arrays. The vjp of a gather is a scatter-add. scale_grad_by_freq
    divides each upstream row by its id's count before the vjp adds it, as torch scales each
    term; padding_idx zeroes its row. With sparse=True the token gradient is (indices (K,),
    rows (K, dim)), summed with ``jax.ops.segment_sum`` over the distinct ids, which the host
    finds (shapes are static), and no (vocab_size, dim) array is formed.
    """
    if not isinstance(upstream, jax.Array):
        upstream = validation.native(np.asarray(upstream))
    host_ids, start = validation.check_gradients(
        layer,
        validation.as_host(token_ids),
        start,
        upstream.shape,
        np.dtype(upstream.dtype).name,
        sparse,
    )
    ids = _device_ids(token_ids, host_ids)
    with _precision(layer.dtype):
        # The dense gradient returns at once (dispatch is asynchronous), so it works on a copy
        # of a NumPy upstream. The sparse one reads its sums back on the host and waits for
        # every result before it returns, so it may read the caller's memory as it is
        # (device_put keeps NumPy memory without a copy on the CPU; jnp.asarray copies).
        upstream = jax.device_put(upstream) if sparse else jnp.asarray(upstream)
        grads = {}
        if layer.positions == "learned":  # the position table alone: no token gradient formed
            grads["position_table"] = _vjp(layer, "position_table", ids, start, upstream)
        if layer.scale_grad_by_freq:
            counts = validation.id_counts(host_ids, layer.vocab_size)[host_ids]  # (..., T)
            upstream = _divide_rows(upstream, counts.astype(np.float32))
        if sparse:
            token = _sparse_token_gradient(host_ids, upstream, layer.padding_idx)
            jax.block_until_ready(grads)  # the position gradient too: upstream is the caller's
        else:
            token = _vjp(layer, "token_table", ids, start, upstream)
            if layer.padding_idx is not None:
                token = token.at[layer.padding_idx].set(0)
        return {"token_table": token, **grads}


def _vjp(layer, table: str, ids, start, upstream) -> jax.Array:
    """The gradient of one of the layer's tables; the others are held fixed."""
    fixed = {k: v for k, v in layer.tables.items() if k != table}
    with_positions = layer.positions != "none"
    return _backward({table: layer.params[table]}, fixed, ids, start, upstream, with_positions)


@partial(jax.jit, static_argnames="with_positions")
def _backward(params, fixed, token_ids, start, upstream, with_positions: bool):
    def forward(params):  # the layer's output as a pure function of the tables differentiated
        tables = {**params, **fixed}
        if with_positions:
            return embed(tables, token_ids, start)
        return embed_tokens(tables, token_ids)

    _, pullback = jax.vjp(forward, params)
    (grads,) = pullback(upstream)
    [(name, grad)] = grads.items()
    if name == "position_table" or token_ids.size == 1:  # where a sum can have one term
        grad = _from_zero(grad)
    return grad


def _from_zero(grad: jax.Array) -> jax.Array:
    """A gradient is a sum from +0.0 (np.add.at's and torch's): a -0.0 term alone gives +0.0.
    XLA folds a sum of one term (a scatter of one row, a batch of one, a slice's transpose)
    to the term itself, -0.0 included; this puts the +0.0 back."""
    return jnp.where(grad == 0, jnp.zeros_like(grad), grad)


@jax.jit
def _divide_rows(upstream: jax.Array, counts: jax.Array) -> jax.Array:
    """upstream[..., t, :] / counts[..., t], in float32 (float64 for float64) and rounded once
    to upstream's dtype: counts above 256 are not all exact in bfloat16."""
    compute = jnp.promote_types(upstream.dtype, jnp.float32)
    return (upstream.astype(compute) / counts.astype(compute)[..., None]).astype(upstream.dtype)


def _sparse_token_gradient(host_ids: np.ndarray, upstream, padding_idx) -> tuple:
    """(indices (K,), rows (K, dim)): the distinct ids, ascending, and each one's summed
    upstream rows, by ``jax.ops.segment_sum`` (a scatter-add: each id's rows added in their
    order, from zero).

    Only the host knows K, and a K-row array formed on the device would compile once per K,
    so on nearly every batch of a training run (about 50 ms each on this CPU). So the sum has N segments
    (N = the number of ids, fixed by the batch's shape: one compilation), and the first K
    rows are taken on the host: on the CPU a view of the device's buffer, which
    ``device_put`` keeps as it is, with no copy (``jnp.asarray`` would copy it)."""
    flat = host_ids.reshape(-1)
    indices, inverse = np.unique(flat, return_inverse=True)
    summed = np.asarray(_segment_sum(upstream, inverse.astype(np.int32)))[: len(indices)]
    if padding_idx is not None:  # the padding row never learns
        keep = indices != padding_idx
        indices, summed = indices[keep], summed[keep]
    return jax.device_put(indices.astype(np.int32)), jax.device_put(summed)  # nothing compiled


@jax.jit
def _segment_sum(upstream, segment_ids) -> jax.Array:
    """upstream's rows (..., dim) summed by segment: (N, dim), N = segment_ids.size."""
    rows = upstream.reshape(segment_ids.size, upstream.shape[-1])
    summed = jax.ops.segment_sum(rows, segment_ids, num_segments=segment_ids.size)
    return _from_zero(summed) if segment_ids.size == 1 else summed


def sinusoidal_table(
    num_positions: int,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype="float32",
) -> jax.Array:
    """(num_positions, dim) sinusoidal position table (Vaswani et al. 2017).

    layout "interleaved": PE[p, 2i] = sin(p * w_i), PE[p, 2i+1] = cos(p * w_i);
    layout "concat": sines in the first dim/2 columns, cosines in the last; w_i = base**(-2i/dim).
    """
    dtype = validation.resolve_dtype(dtype)
    num_positions, dim, base = validation.check_sinusoidal(num_positions, dim, base, layout)
    with _precision(dtype):
        return _sinusoidal_table(num_positions, dim, base, layout, dtype)


@partial(jax.jit, static_argnames=("num_positions", "dim", "layout", "dtype"))
def _sinusoidal_table(num_positions: int, dim: int, base, layout: str, dtype) -> jax.Array:
    compute = positional.compute_dtype(dtype)
    w = 1.0 / base ** (jnp.arange(0, dim, 2, dtype=compute) / dim)  # (dim/2,)
    angles = jnp.outer(jnp.arange(num_positions, dtype=compute), w)  # (P, dim/2)
    sin, cos = jnp.sin(angles), jnp.cos(angles)
    if layout == "interleaved":
        table = jnp.stack([sin, cos], axis=-1).reshape(num_positions, dim)  # sin0 cos0 sin1 ...
    else:
        table = jnp.concatenate([sin, cos], axis=-1)  # sin0 sin1 ... cos0 cos1 ...
    return table.astype(dtype)


def rope_params(rotary_dim: int, base: float, scaling, positions) -> dict:
    """{"inv_freq", "attention_factor"}: the rule's float64 constants for these positions (the
    length rules take max(positions) + 1), a pytree for the jitted rotation."""
    w, attention = positional.rope_parameters(
        rotary_dim, base, scaling, positional.length(positions)
    )
    return {"inv_freq": w, "attention_factor": np.float64(attention)}


def apply_rope(
    x,
    positions,
    *,
    base: float = 10000.0,
    layout: str = "half",
    scaling=None,
    rotary_dim=None,
    mrope=None,
) -> jax.Array:
    """Rotary position embedding of x (..., T, head_dim) at integer positions (T,).

    layout "half" rotates dimension i with i + rotary_dim/2 (GPT-NeoX, Hugging Face LLaMA);
    "interleaved" rotates pairs (2i, 2i+1) (GPT-J, RoFormer, Meta's LLaMA code). The first
    ``rotary_dim`` dims (default: all) are rotated, the rest pass through. scaling: None or a
    Hugging Face rope_scaling dict: "linear", "dynamic", "yarn", "longrope" or "llama3".
    mrope: {"layout", "section"} for multimodal RoPE, positions (3, T): frequency slot k turned
    by the row positional.mrope_axes gives it.
    """
    if not isinstance(x, jax.Array):
        x = validation.native(np.asarray(x))
    dtype = validation.check_float_dtype(np.dtype(x.dtype).name, "x")
    positions = validation.as_host(positions)
    if mrope is None:
        positions, scaling, rotary_dim = validation.check_rope(
            x.shape, positions, base, layout, scaling, rotary_dim
        )
        axes = None
    else:
        positions, rotary_dim, slots, section = validation.check_mrope_rope(
            x.shape, positions, base, layout, scaling, rotary_dim, mrope
        )
        axes = positional.mrope_axes(rotary_dim // 2, section, slots)
    compute = positional.compute_dtype(dtype)
    params = jax.tree.map(
        lambda v: v.astype(compute), rope_params(rotary_dim, base, scaling, positions)
    )
    if axes is not None:
        params["mrope_axes"] = axes  # (rotary_dim/2,) int: each frequency slot's row
    with _precision(dtype):
        return _rope(params, jnp.asarray(x), positions.astype(np.int32), layout)  # < 2**24


@partial(jax.jit, static_argnames="layout")
def _rope(params, x: jax.Array, positions: jax.Array, layout: str) -> jax.Array:
    w = params["inv_freq"]
    rotary_dim = 2 * w.shape[0]
    if "mrope_axes" in params:  # positions (3, T): each slot at its row's position
        at = positions[params["mrope_axes"]].T.astype(w.dtype)
    else:
        at = positions.astype(w.dtype)[:, None]
    angles = at * w  # (T, rotary_dim/2)
    cos = (jnp.cos(angles) * params["attention_factor"]).astype(x.dtype)
    sin = (jnp.sin(angles) * params["attention_factor"]).astype(x.dtype)
    rotated, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if layout == "half":
        a, b = jnp.split(rotated, 2, axis=-1)  # pairs (i, i + rotary_dim/2)
        turned = jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        a, b = rotated[..., 0::2], rotated[..., 1::2]  # pairs (2i, 2i+1)
        turned = jnp.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(rotated.shape)
    return jnp.concatenate([turned, rest], axis=-1)


def apply_layer_rope(x, positions, layer_type: str, *, layers: dict) -> jax.Array:
    """x (..., T, head_dim) rotated by its layer type's rule: ``layers`` maps each type to its
    apply_rope options (each type's constants a params pytree of its own for the jitted
    rotation), None for a type that is not rotated (returned as it is)."""
    rope = validation.check_layer_rope(layers, layer_type)
    if rope is None:
        if not isinstance(x, jax.Array):
            x = validation.native(np.asarray(x))
        validation.check_float_dtype(np.dtype(x.dtype).name, "x")
        validation.check_nope(x.shape, validation.as_host(positions))
        return jnp.asarray(x)
    return apply_rope(x, positions, **rope)


def alibi_slopes(num_heads: int, *, dtype="float32") -> jax.Array:
    """(num_heads,) ALiBi slopes 2**(-8i/n), with BLOOM's rule for n not a power of two."""
    dtype = validation.resolve_dtype(dtype)
    slopes = positional.alibi_slopes(num_heads)  # float64 constants, as the weights are
    # rounded on the host, as constants are (through float32 for the 16-bit dtypes): one
    # transfer, no conversion compiled for each head count (jnp.asarray would compile a copy)
    with _precision(dtype):
        return jax.device_put(slopes.astype(positional.compute_dtype(dtype)).astype(dtype))


def alibi_bias(
    num_heads: int, q_len: int, k_len: int | None = None, *, causal: bool = True, dtype="float32"
) -> jax.Array:
    """(num_heads, q_len, k_len) ALiBi bias, -slope * distance, to add to the scores.

    causal=True: distance = query - key, and -inf for keys after the query (the mask);
    causal=False: distance = |query - key|. Queries are the last q_len of k_len positions.
    """
    dtype = validation.resolve_dtype(dtype)
    num_heads, q_len, k_len = validation.check_lengths(num_heads, q_len, k_len)
    causal = validation.flag(causal, "causal")
    compute = positional.compute_dtype(dtype)
    with _precision(dtype):
        slopes = alibi_slopes(num_heads, dtype=compute)
        return _alibi_bias(slopes, q_len, k_len, causal, dtype)


@partial(jax.jit, static_argnames=("q_len", "k_len", "causal", "dtype"))
def _alibi_bias(slopes, q_len: int, k_len: int, causal: bool, dtype) -> jax.Array:
    relative = jnp.arange(k_len) - jnp.arange(k_len - q_len, k_len)[:, None]  # key - query
    slopes = slopes[:, None, None]  # (H, 1, 1)
    if not causal:
        return (slopes * (-jnp.abs(relative)).astype(slopes.dtype)).astype(dtype)
    bias = slopes * relative.astype(slopes.dtype)  # (H, q, k); integers: exact in compute
    return jnp.where(relative > 0, -jnp.inf, bias).astype(dtype)


def t5_relative_buckets(
    relative_position, *, bidirectional: bool = True, num_buckets: int = 32, max_distance=128
) -> jax.Array:
    """T5's bucket of each relative position (key - query), int32, same shape.

    Distances below n/2 (n buckets per direction) get a bucket each, longer ones share
    logarithmically wider buckets up to max_distance and the last bucket beyond.
    """
    relative = validation.check_relative_positions(validation.as_host(relative_position))
    n, max_distance = validation.check_t5_buckets(bidirectional, num_buckets, max_distance)
    starts = positional.t5_bucket_starts(num_buckets, max_distance, bidirectional=bidirectional)
    # Checked within +-2**24, so int32 (JAX's integer without x64) holds every value.
    return _t5_buckets(relative.astype(np.int32), starts.astype(np.int32), n, bidirectional)


@partial(jax.jit, static_argnames=("n", "bidirectional"))
def _t5_buckets(relative, starts, n: int, bidirectional: bool) -> jax.Array:
    if bidirectional:
        direction = jnp.where(relative > 0, n, 0)  # keys after the query: the upper half
        distance = jnp.abs(relative)
    else:
        direction = 0
        distance = -jnp.minimum(relative, 0)  # keys after the query count as distance 0
    exact = n // 2
    logarithmic = exact + jnp.searchsorted(starts, distance, side="right").astype(jnp.int32)
    return direction + jnp.where(distance < exact, distance, logarithmic)


def t5_bias(
    bias_table, q_len: int, k_len: int | None = None, *, bidirectional=True, max_distance=128
) -> jax.Array:
    """(num_heads, q_len, k_len) T5 bias: bias_table (num_buckets, num_heads) at each
    query-key pair's bucket; differentiable in bias_table, and usable inside jit."""
    if not isinstance(bias_table, jax.Array):
        bias_table = validation.native(np.asarray(bias_table))
    dtype = np.dtype(bias_table.dtype)
    num_buckets = validation.check_t5_table(tuple(bias_table.shape), dtype.name)
    _, q_len, k_len = validation.check_t5_lengths(bias_table.shape, q_len, k_len)
    with _precision(dtype):
        buckets = t5_relative_buckets(
            positional.relative_positions(q_len, k_len),
            bidirectional=bidirectional,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )  # (q, k), computed from the lengths alone: a constant under jit
        return jnp.asarray(bias_table)[buckets].transpose(2, 0, 1)  # (H, q, k)


# --- the configurations models ship: position ids, Gemma's scale, BERT's input layer -------


def position_ids(
    input_ids, attention_mask=None, *, rule: str = "arange", padding_idx=None, past_length=0
) -> jax.Array:
    """(B, T) int32 rows of the position table, by a model's rule (``positional.position_ids``),
    as a jitted pure function of the ids and the mask."""
    host_ids, host_mask, past_length = validation.check_position_ids(
        validation.as_host(input_ids),
        None if attention_mask is None else validation.as_host(attention_mask),
        rule,
        padding_idx,
        past_length,
    )
    mask = None if host_mask is None else jnp.asarray(host_mask.astype(np.int32))
    pad = -1 if padding_idx is None else int(padding_idx)
    return _position_ids(jnp.asarray(host_ids.astype(np.int32)), mask, past_length, pad, rule)


@partial(jax.jit, static_argnames=("past_length", "padding_idx", "rule"))
def _position_ids(ids, mask, past_length: int, padding_idx: int, rule: str) -> jax.Array:
    batch, length = ids.shape
    counted = past_length + jnp.arange(length, dtype=jnp.int32)
    if rule in ("arange", "bart"):
        return jnp.broadcast_to(counted + (2 if rule == "bart" else 0), (batch, length))
    if rule == "opt":
        return (jnp.cumsum(mask, axis=1) * mask - 1)[:, past_length:] + 2
    real = (ids != padding_idx).astype(jnp.int32)
    return (jnp.cumsum(real, axis=1) + past_length) * real + padding_idx


def scaled_inputs(token_table, token_ids=None, inputs_embeds=None, *, rule: str, value):
    """A model's input embeddings (``positional.SCALE_RULES``): the rows of token_ids, or
    inputs_embeds given instead, times the scale where the rule applies, in ``_scale``; the
    checks on the host first (JAX would clamp a bad id)."""
    validation.choice(rule, tuple(positional.SCALE_RULES), "embedding scale rule")
    table = validation.native(np.asarray(token_table))
    given = np.asarray(inputs_embeds) if isinstance(inputs_embeds, jax.Array) else inputs_embeds
    ids, given = validation.check_scaled_inputs(table, token_ids, given, rule, value)
    scale = positional.SCALE_RULES[rule]
    with _precision(table.dtype):
        x = jnp.asarray(table)[_device_ids(token_ids, ids)] if given is None else jnp.asarray(given)
        if given is not None and not scale["given"]:
            return x
        factor = jnp.asarray(positional.scale_factor(rule, value, table.dtype))
        return _scale(x, factor)


@jax.jit
def _scale(x: jax.Array, factor: jax.Array) -> jax.Array:
    """x times factor, formed in factor's dtype (the rows' own, or their compute dtype) and
    rounded to x's."""
    return (x.astype(factor.dtype) * factor).astype(x.dtype)


@jax.jit
def embed_scaled(params, token_ids: jax.Array) -> jax.Array:
    """Gemma's lookup: rows times the scale, both in the table's dtype."""
    return params["token_table"][token_ids] * params["embed_scale"]


class ScaledWordEmbedding:
    """Gemma's token lookup: ``embed_scaled`` over {"token_table", "embed_scale"}, the scale
    sqrt(dim) rounded to the table's dtype first; ids checked on the host (JAX would clamp)."""

    def __init__(self, token_table: np.ndarray):
        token_table = validation.native(np.asarray(token_table))
        self.dtype = validation.check_float_dtype(token_table.dtype.name, "token_table")
        self.vocab_size = token_table.shape[0]
        with _precision(self.dtype):
            self.params = {
                "token_table": _to_device(token_table),
                "embed_scale": jnp.asarray(
                    positional.embedding_scale(token_table.shape[1], self.dtype)
                ),
            }

    def __call__(self, token_ids) -> jax.Array:
        host_ids = validation.check_token_ids(validation.as_host(token_ids), self.vocab_size)
        with _precision(self.dtype):
            return embed_scaled(self.params, _device_ids(token_ids, host_ids))


@partial(jax.jit, static_argnames="length")
def bert_embed(params, input_ids, token_type_ids, start, length: int) -> jax.Array:
    """(word + token type) + position, each add in the tables' dtype; LayerNorm when params
    holds "gamma" and "beta" (statistics in float32 for 16-bit tables, as torch's)."""
    x = params["word_table"][input_ids] + params["type_table"][token_type_ids]
    x = x + lax.dynamic_slice_in_dim(params["position_table"], start, length)
    if "gamma" not in params:
        return x
    wide = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    mean = wide.mean(axis=-1, keepdims=True)
    variance = ((wide - mean) ** 2).mean(axis=-1, keepdims=True)
    normed = (wide - mean) * lax.rsqrt(variance + params["eps"].astype(wide.dtype))
    gamma, beta = params["gamma"].astype(wide.dtype), params["beta"].astype(wide.dtype)
    return (normed * gamma + beta).astype(x.dtype)


class BertEmbeddings:
    """BERT's input layer: ``bert_embed`` over the three tables (and LayerNorm's gamma, beta,
    eps when ``layer_norm`` is given), every id and position checked on the host first."""

    def __init__(self, word_table, type_table, position_table, *, layer_norm=None):
        tables = [
            validation.native(np.asarray(t)) for t in (word_table, type_table, position_table)
        ]
        self.dtype = validation.check_bert_tables(*tables)
        self.sizes = [len(t) for t in tables]
        with _precision(self.dtype):
            self.params = {
                name: _to_device(t)
                for name, t in zip(("word_table", "type_table", "position_table"), tables)
            }
            if layer_norm is not None:
                gamma, beta, eps = layer_norm
                self.params["gamma"] = _to_device(np.asarray(gamma, self.dtype))
                self.params["beta"] = _to_device(np.asarray(beta, self.dtype))
                self.params["eps"] = jnp.asarray(np.float32(eps))

    def __call__(self, input_ids, token_type_ids, start: int = 0) -> jax.Array:
        host_ids = validation.check_token_ids(validation.as_host(input_ids), self.sizes[0])
        host_types = validation.check_token_type_ids(
            validation.as_host(token_type_ids), host_ids.shape, self.sizes[1]
        )
        length = host_ids.shape[-1]
        start = validation.check_positions(start, length, self.sizes[2])
        with _precision(self.dtype):
            return bert_embed(
                self.params,
                host_ids.astype(np.int32),
                host_types.astype(np.int32),
                start,
                length,
            )


def _to_device(table: np.ndarray) -> jax.Array:
    # Copied onto the device once (passing NumPy tables to a jitted function would copy
    # them on every call). copy=True: on the CPU, device_put may alias the caller's memory.
    with _precision(table.dtype):
        return jnp.array(table, copy=True)


_INT32 = np.dtype(np.int32)


def _device_ids(token_ids, host_ids: np.ndarray):
    """Checked ids as int32, keeping a JAX array that is already int32 where it is."""
    # NumPy's built-in dtypes are singletons; another int32 (byte-swapped) takes the copy.
    if host_ids.dtype is _INT32 and isinstance(token_ids, jax.Array):
        return token_ids
    # Convert on the host: without x64 JAX would truncate int64 ids to int32 with only a warning.
    return host_ids.astype(np.int32)


def _precision(dtype: np.dtype):
    """float64 needs JAX's x64 mode: enable it for this call only (a thread-local context),
    so importing the suite changes nothing for float32 users."""
    return jax.enable_x64(True) if dtype == np.float64 else contextlib.nullcontext()


def to_numpy(array: jax.Array) -> np.ndarray:
    return np.asarray(array)


# --- 2-D positions: grid tables and patches (vision towers) --------------------------------


def patch_params(projection, position_table, bias=None, cls_token=None, registers=None) -> dict:
    """The params pytree of ``embed_patches``: the projection as flax's ``nn.Conv`` kernel
    (p, p, C, D), from torch's (D, C, p, p); the others as given. Checked arrays only."""
    params = {"projection": _to_device(projection.transpose(2, 3, 1, 0))}  # (p, p, C, D)
    given = {
        "position_table": position_table,
        "bias": bias,
        "cls_token": cls_token,
        "registers": registers,
    }
    params.update({name: _to_device(a) for name, a in given.items() if a is not None})
    return params


@partial(jax.jit, static_argnames="channels")
def embed_patches(params, images, positions, *, channels: str) -> jax.Array:
    """(B, C, H, W) or (B, H, W, C) images -> (B, tokens, D): the strided conv (flax's
    nn.Conv, big_vision's "embedding"), + positions (prefix + h*w, D), CLS and registers first.

    The conv accumulates in float32 for 16-bit images (preferred_element_type) and at
    Precision.HIGHEST (no TF32 or bf16 passes on an accelerator), the contract's tolerance.
    """
    kernel = params["projection"]  # (p, p, C, D)
    p, compute = kernel.shape[0], jnp.promote_types(kernel.dtype, jnp.float32)
    x = lax.conv_general_dilated(
        images,
        kernel,
        (p, p),
        "VALID",
        dimension_numbers=("NCHW" if channels == "first" else "NHWC", "HWIO", "NHWC"),
        precision=lax.Precision.HIGHEST,
        preferred_element_type=compute,
    )  # (B, h, w, D)
    if "bias" in params:
        x = x + params["bias"].astype(compute)
    batch, h, w, dim = x.shape
    x = x.astype(kernel.dtype).reshape(batch, h * w, dim) + positions[-h * w :]
    prefix = []
    if "cls_token" in params:
        cls = params["cls_token"]
        cls = cls + positions[0] if len(positions) > h * w else cls  # the table's CLS row
        prefix.append(jnp.broadcast_to(cls, (batch, 1, dim)))
    if "registers" in params:
        prefix.append(jnp.broadcast_to(params["registers"], (batch, *params["registers"].shape)))
    return jnp.concatenate([*prefix, x], axis=1)


class PatchEmbedding:
    """Holds ``patch_params`` and calls the jitted ``embed_patches`` after host-side checks.

    Arguments as ``numpy_backend.PatchEmbedding``. Where the images' grid differs from the
    table's, ``resize`` resizes the table on the host (the same bits as every backend's) and
    passes it as the call's positions.
    """

    def __init__(
        self,
        projection: np.ndarray,
        position_table: np.ndarray,
        *,
        patch_size: int,
        bias: np.ndarray | None = None,
        cls_token: np.ndarray | None = None,
        registers: np.ndarray | None = None,
        grid: tuple[int, int] | None = None,
        resize: str | None = None,
        channels: str = "first",
    ):
        arrays, self.grid, self.prefix_tokens = validation.check_patch_layer(
            projection, position_table, patch_size, bias, cls_token, registers, grid
        )
        self.channels = validation.choice(channels, validation.CHANNELS, "channels")
        self.resize = check_resize_kernel(resize)  # the argument hides the module
        self.patch_size = patch_size
        self.dim, self.in_channels = arrays["projection"].shape[:2]
        self.dtype = arrays["projection"].dtype
        with _precision(self.dtype):
            self.params = patch_params(**arrays)

    def __call__(self, images) -> jax.Array:
        """(B, C, H, W) images (or (B, H, W, C) with channels="last") -> (B, tokens, D)."""
        if not isinstance(images, jax.Array):
            images = validation.native(np.asarray(images))
        image_grid = validation.check_images(
            images.shape,
            images.dtype.name,
            self.patch_size,
            self.channels,
            self.in_channels,
            self.dtype,
        )
        with _precision(self.dtype):
            positions = self._grid_rows(image_grid)  # (prefix + h*w, D)
            return embed_patches(self.params, images, positions, channels=self.channels)

    def _grid_rows(self, image_grid: tuple[int, int]) -> jax.Array:
        if image_grid == self.grid:
            return self.params["position_table"]
        if self.resize is None:
            raise validation.grid_mismatch(image_grid, self.grid, self.patch_size)
        table = resize.resize_table(
            to_numpy(self.params["position_table"]),
            self.grid,
            image_grid,
            kernel=self.resize,
            prefix_tokens=self.prefix_tokens,
        )
        return jnp.asarray(table)



def sincos2d_table(
    grid, dim: int, *, rule: str = "mae", dtype="float32", prefix_tokens: int = 0, **options
) -> jax.Array:
    """(prefix_tokens + h*w, dim) fixed 2-D sin-cos table of an (h, w) grid by ``rule``: the
    host table (``backends.grid``) as a JAX array, bit-identical on every backend."""
    table = grid_module.sincos2d_table(
        grid, dim, rule=rule, dtype=dtype, prefix_tokens=prefix_tokens, **options
    )
    with _precision(table.dtype):
        return jnp.asarray(table)


def patchify(images, patch_size: int, *, channels: str = "first") -> jax.Array:
    """(B, C, H, W) or (B, H, W, C) images -> (B, h*w, C*p*p) patch vectors (a reshape)."""
    h, w = validation.check_patches(jnp.shape(images), patch_size, channels)
    return _patchify(jnp.asarray(images), h, w, patch_size, channels)


@partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _patchify(images, h: int, w: int, p: int, channels: str) -> jax.Array:
    if channels == "first":
        b, c = images.shape[:2]
        x = images.reshape(b, c, h, p, w, p).transpose(0, 2, 4, 1, 3, 5)  # (B, h, w, C, p, p)
    else:
        b, c = images.shape[0], images.shape[3]
        x = images.reshape(b, h, p, w, p, c).transpose(0, 1, 3, 2, 4, 5)  # (B, h, w, p, p, C)
    return x.reshape(b, h * w, c * p * p)


# --- 2-D positions: resize (vision towers) -------------------------------------------------


def resize_positions(
    table,
    old_grid,
    new_grid,
    *,
    kernel: str,
    prefix_tokens: int = 0,
    scale_factor=None,
    compute_dtype=None,
    path: str = "native",
) -> jax.Array:
    """A learned (prefix + h*w, dim) table resized to new_grid (H, W): (prefix + H*W, dim).

    path "host": ``resize.resize_table``'s bits. "native": ``jax.image.resize`` under
    ``jax.jit`` with the kernel's method and antialias ("cubic-pytorch" for torch's bicubic),
    ``scale_and_translate`` for a scale factor or corners aligned (as its docstring says, scale
    (H - 1)/(h - 1) and translation 0.5 * (1 - scale)), in the computation dtype
    (``compute_dtype``, or the table's) and cast back. "taps": host indices and float32 weights
    summed tap by tap by ``tap_resize``, eagerly (each op on its own), bit-identical to NumPy's
    and torch's for normal-range values (XLA's CPU runtime flushes float32 and float64
    subnormals to zero, where NumPy and torch keep them); ``jax.jit(tap_resize)`` lets XLA
    contract each multiply-add into an FMA (one rounding instead of two), which differs in the
    last bits, within ``resize.tolerance``.
    """
    validation.choice(path, resize.PATHS, "resize path")
    table = to_numpy(table) if isinstance(table, jax.Array) else table
    options = {"kernel": kernel, "prefix_tokens": prefix_tokens, "scale_factor": scale_factor,
               "compute_dtype": compute_dtype}  # fmt: skip
    if path == "host":
        return _to_device(resize.resize_table(table, old_grid, new_grid, **options))
    if path == "taps":
        plan = resize.taps(table, old_grid, new_grid, **options)
        with _precision(_widest(*plan.inward, plan.table.dtype)):
            grid = jnp.asarray(plan.table[plan.prefix :].reshape(*plan.old, -1))  # (h, w, dim)
            for dtype in plan.inward:
                grid = grid.astype(dtype)
            grid = tap_resize(grid, plan.rows, plan.columns)  # (H, W, dim)
            for dtype in plan.outward:
                grid = grid.astype(dtype)
            return jnp.concatenate(
                [jnp.asarray(plan.table[: plan.prefix]), grid.reshape(-1, grid.shape[-1])]
            )
    table, old, new, prefix, factors = resize.check_table(
        table, old_grid, new_grid, kernel=kernel, prefix_tokens=prefix_tokens,
        scale_factor=scale_factor,
    )  # fmt: skip
    rule = resize.KERNELS[kernel]
    if rule.jax is None:
        raise validation.no_framework_form(kernel, "JAX", "(no scale_and_translate method)")
    compute = resize.computation_dtype(table.dtype, compute_dtype)
    with _precision(_widest(table.dtype, compute)):
        grid = jnp.asarray(table[prefix:].astype(compute)).reshape(*old, -1)  # (h, w, dim)
        if factors[0] is None and not rule.align_corners:  # a size, half-pixel centres
            resized = _resize(grid, shape=new, **rule.jax)  # (H, W, dim)
        else:
            scale, translation = zip(*(
                _corner_scale(n_in, n_out) if rule.align_corners else (factor, 0.0)
                for n_in, n_out, factor in zip(old, new, factors)
            ))  # fmt: skip
            resized = _scale_and_translate(
                grid, jnp.asarray(scale), jnp.asarray(translation), shape=new, **rule.jax
            )  # (H, W, dim)
        resized = resized.reshape(new[0] * new[1], -1).astype(table.dtype)
        return jnp.concatenate([jnp.asarray(table[:prefix]), resized])


def _widest(*dtypes) -> np.dtype:
    """float64 where any of ``dtypes`` is (x64 mode for the whole computation), else the last."""
    return np.dtype(np.float64) if np.float64 in dtypes else dtypes[-1]


def _corner_scale(n_in: int, n_out: int) -> tuple[float, float]:
    """scale_and_translate's (scale, translation) sampling output i at i * (n_in - 1)/(n_out - 1)
    (its docstring's emulation of align_corners; one input or one output: any sample hits)."""
    if n_in == 1 or n_out == 1:
        return (1.0, 0.0) if n_out == 1 else (float(n_out), 0.0)
    scale = (n_out - 1) / (n_in - 1)
    return scale, 0.5 * (1 - scale)


@partial(jax.jit, static_argnames=("shape", "method", "antialias"))
def _resize(grid, *, shape, method, antialias) -> jax.Array:
    """(h, w, dim) -> (*shape, dim) by ``jax.image.resize`` (its scale n_out/n_in a Python float,
    inverted in float64: ``scale_and_translate`` would take it as a float32 array, and its
    inverse's last bit moves every sample)."""
    return jax.image.resize(grid, (*shape, grid.shape[-1]), method, antialias=antialias)


@partial(jax.jit, static_argnames=("shape", "method", "antialias"))
def _scale_and_translate(grid, scale, translation, *, shape, method, antialias) -> jax.Array:
    """(h, w, dim) -> (*shape, dim) by JAX's own resize."""
    return jax.image.scale_and_translate(
        grid, (*shape, grid.shape[-1]), (0, 1), scale, translation, method=method,
        antialias=antialias,
    )  # fmt: skip


def tap_resize(grid, rows, columns) -> jax.Array:
    """(h, w, dim) -> (H, W, dim): rows = (indices (H, T), weights (H, T)) from the host, then
    columns likewise; each output the sum over t of weight * input, one product and one sum at
    a time in the order of t. Pure: call it eagerly for NumPy's bits, or under ``jax.jit``."""
    for axis, (indices, weights) in enumerate((rows, columns)):
        shape = [1, 1, 1]
        shape[axis] = len(indices)
        out = weights[:, 0].reshape(shape) * jnp.take(grid, indices[:, 0], axis=axis)
        for tap in range(1, indices.shape[1]):
            out = out + weights[:, tap].reshape(shape) * jnp.take(grid, indices[:, tap], axis=axis)
        grid = out
    return grid


def naflex_positions(table, old_grid, spatial_shapes, max_patches: int, *, path: str = "native"):
    """SigLIP2 NaFlex: the (h*w, dim) table resized per image to spatial_shapes[b] = (h, w),
    the antialiased bilinear kernel, padded to (B, max_patches, dim) with each image's (0, 0)
    row. path "host": ``resize.naflex_positions``'s bits; "native": big_vision's
    ``_pos_emb_resize`` (``proj/image_text/naflex_vit.py``): each image's resize by
    ``scale_and_translate`` onto a square canvas of the longest side, read at its patches'
    (row, column), under ``jax.jit``, in float32 (Hugging Face's computation dtype)."""
    validation.choice(path, ("host", "native"), "NaFlex path")
    table = to_numpy(table) if isinstance(table, jax.Array) else table
    if path == "host":
        return _to_device(resize.naflex_positions(table, old_grid, spatial_shapes, max_patches))
    table, old, shapes, max_patches = resize.check_naflex(
        table, old_grid, spatial_shapes, max_patches
    )
    positions = np.arange(max_patches)
    real = positions < shapes.prod(-1, keepdims=True)  # (B, P): padding reads position (0, 0)
    rows = np.where(real, positions // shapes[:, 1:], 0).astype(np.int32)
    columns = np.where(real, positions % shapes[:, 1:], 0).astype(np.int32)
    grid = table.astype(np.float32).reshape(*old, -1)  # (h, w, dim)
    resized = _naflex(
        grid, shapes.astype(np.float32), rows, columns, canvas=int(shapes.max())
    )  # (B, P, dim)
    with _precision(table.dtype):
        return resized.astype(table.dtype)


@partial(jax.jit, static_argnames="canvas")
def _naflex(grid, sizes, rows, columns, *, canvas: int) -> jax.Array:
    def one_image(size, rows, columns):
        scale = size / jnp.asarray(grid.shape[:2], jnp.float32)
        resized = jax.image.scale_and_translate(
            grid, (canvas, canvas, grid.shape[-1]), (0, 1), scale, jnp.zeros(2), method="linear"
        )  # (canvas, canvas, dim), antialiased by default
        return resized[rows, columns]  # (P, dim)

    return jax.vmap(one_image)(sizes, rows, columns)


# --- 2-D positions: rope2d (vision towers) ------------------------------------------------


def apply_rope2d(x, positions, *, spec, grid=None) -> jax.Array:
    """2-D rotary embedding of x (..., N, head_dim) at positions (N, 2), each token's (row,
    column) and (-1, -1) for a prefix token, by ``spec`` (``rope2d.Rope2D``); ``grid`` (h, w)
    for the normalized coordinates (DINOv3's). The spec's constants a params pytree for the
    jitted rotation."""
    if not isinstance(x, jax.Array):
        x = validation.native(np.asarray(x))
    dtype = validation.check_float_dtype(np.dtype(x.dtype).name, "x")
    positions, grid = validation.check_rope2d(x.shape, validation.as_host(positions), spec, grid)
    slots = rope2d.slot_map(x.shape[-1], spec)
    compute = positional.compute_dtype(dtype)
    params = {
        "inv_freq": slots.frequency.astype(compute),  # float64 constants, like inv_freq
        "slot_axes": slots.axis.astype(np.int32),
        "sides": np.array(grid or (1, 1), dtype=compute),
        "reference": np.array(spec.reference_grid or (1, 1), dtype=compute),
    }
    rule = (spec.coordinates, spec.reference_grid is not None, spec.layout, spec.prefix)
    with _precision(dtype):
        return _rope2d(params, jnp.asarray(x), positions.astype(np.int32), rule)  # < 2**24


@partial(jax.jit, static_argnames="rule")
def _rope2d(params, x: jax.Array, positions: jax.Array, rule: tuple) -> jax.Array:
    coordinates, stretched, layout, prefix_rule = rule
    w, axes = params["inv_freq"], params["slot_axes"]
    prefix = positions[:, :1] < 0  # (N, 1): (-1, -1) marks a prefix token
    at = positions.astype(w.dtype)
    if coordinates == "1-based":
        at = at + 1
    if stretched:  # timm's EVA: t / feat * ref
        at = at / params["sides"] * params["reference"]
    elif coordinates in validation.NORMALIZED_COORDINATES:  # DINOv3's 2 (i + 1/2) / S - 1
        sides = params["sides"]
        side = {"separate": sides, "max": sides.max(), "min": sides.min()}[coordinates]
        at = (at + 0.5) / side * 2 - 1
    at = jnp.where(prefix, 0, at)  # a prefix token's angle is 0
    angles = jnp.where(axes < 0, 0, at[:, jnp.maximum(axes, 0)] * w)  # (N, head_dim/2)
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    if layout == "half":
        a, b = jnp.split(x, 2, axis=-1)  # pairs (i, i + head_dim/2)
        turned = jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        a, b = x[..., 0::2], x[..., 1::2]  # pairs (2i, 2i+1)
        turned = jnp.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(x.shape)
    if prefix_rule == "excluded":  # DINOv3 and EVA-02 rotate only the patches
        return jnp.where(prefix, x, turned)
    return turned


def raster_ids(grid, *, prefix: int = 0, prefix_last: bool = False) -> jax.Array:
    """(prefix + h*w, 2) (row, column) row-major, prefix rows (-1, -1) first or last. int32, as
    every id builder here: JAX holds no int64 outside x64 mode (int64 in it)."""
    grid, prefix = validation.check_id_grid(grid, prefix=prefix)
    return _raster_ids(grid, prefix, validation.flag(prefix_last, "prefix_last"))


@partial(jax.jit, static_argnums=(0, 1, 2))
def _raster_ids(grid: tuple, prefix: int, prefix_last: bool) -> jax.Array:
    rows, cols = jnp.meshgrid(jnp.arange(grid[0]), jnp.arange(grid[1]), indexing="ij")
    patches = jnp.stack([rows.ravel(), cols.ravel()], axis=-1)  # (h*w, 2)
    marks = jnp.full((prefix, 2), -1, dtype=patches.dtype)
    return jnp.concatenate([patches, marks] if prefix_last else [marks, patches])


def merge_ids(grid, *, merge: int = 2) -> jax.Array:
    """(h*w, 2) int32 in Qwen2-VL's merge-block order."""
    return _merge_ids(*validation.check_id_grid(grid, merge=merge))


@partial(jax.jit, static_argnums=(0, 1))
def _merge_ids(grid: tuple, merge: int) -> jax.Array:
    h, w = grid
    rows, cols = jnp.meshgrid(jnp.arange(h), jnp.arange(w), indexing="ij")
    block = (h // merge, merge, w // merge, merge)
    return jnp.stack(
        [rows.reshape(block).swapaxes(1, 2).ravel(), cols.reshape(block).swapaxes(1, 2).ravel()],
        axis=-1,
    )


def window_ids(grid, *, merge: int = 2, window: int = 4) -> jax.Array:
    """(h*w, 2) int32 in Qwen2.5-VL's window order."""
    return _window_ids(*validation.check_id_grid(grid, merge=merge, window=window))


@partial(jax.jit, static_argnums=(0, 1, 2))
def _window_ids(grid: tuple, merge: int, window: int) -> jax.Array:
    units_h, units_w = grid[0] // merge, grid[1] // merge
    index = jnp.arange(units_h * units_w).reshape(units_h, units_w)
    pad_h, pad_w = -units_h % window, -units_w % window
    padded = jnp.pad(index, ((0, pad_h), (0, pad_w)), constant_values=-1)
    windows = (units_h + pad_h) // window, window, (units_w + pad_w) // window, window
    order = padded.reshape(windows).swapaxes(1, 2).ravel()
    # The padding dropped: under jit a shape is static, and units_h * units_w are kept.
    (kept,) = jnp.nonzero(order >= 0, size=units_h * units_w)
    units = _merge_ids(grid, merge).reshape(-1, merge * merge, 2)
    return units[order[kept]].reshape(-1, 2)


def flat_ids(grid, *, max_width: int) -> jax.Array:
    """(h*w,) int32 Pixtral's flat ids row * max_width + column."""
    return _flat_ids(*validation.check_id_grid(grid, max_width=max_width))


@partial(jax.jit, static_argnums=(0, 1))
def _flat_ids(grid: tuple, max_width: int) -> jax.Array:
    return (jnp.arange(grid[0])[:, None] * max_width + jnp.arange(grid[1])).ravel()
