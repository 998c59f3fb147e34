"""NumPy backend: plain arrays, a gather with ``np.take`` and in-place adds."""

from __future__ import annotations

import numpy as np

from backends import grid as grid_module
from backends import positional, quantized, resize, rope2d, validation
from backends.resize import check_kernel as check_resize_kernel

name = "numpy"

_CHUNK_BYTES = 1 << 20  # see __call__; 1 MiB measured best here among 64 KiB .. 4 MiB
_FEW_ROWS = 64  # up to this many ids, __call__ lets the gather allocate the result


class TokenPositionEmbedding:
    """Token rows plus position rows, as NumPy arrays.

    positions="learned": position_table (max_seq_len, dim) is given; "sinusoidal": the
    table is built here from max_seq_len, base and layout; "none": token rows only.
    padding_idx and scale_grad_by_freq shape the gradient only (see gradients). A
    ``quantized.QuantizedTable`` token table is kept as its bytes (a memory-mapped file's stay
    on disk) and a call decodes only the rows it reads.
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
        self._chunk_rows = max(1, _CHUNK_BYTES // max(self.dim * self.dtype.itemsize, 1))
        # Copies the layer owns, as the torch and JAX layers own theirs; a quantized table's
        # bytes as they are (it is frozen and its bytes are never written).
        quantized_table = isinstance(given, quantized.QuantizedTable)
        self.quantized = given.kind if quantized_table else None
        self.token_table = given if quantized_table else token_table.copy()
        self._token_bytes = given.blocks if quantized_table else self.token_table
        if positions == "sinusoidal":
            position_table = sinusoidal_table(
                self.max_seq_len, self.dim, base=base, layout=layout, dtype=self.dtype
            )
        self.position_table = None if position_table is None else position_table.copy()

    def __call__(self, token_ids, start: int = 0, *, out: np.ndarray | None = None) -> np.ndarray:
        """(T,) or (B, T) ids -> (T, dim) or (B, T, dim) token + position embeddings.

        out: a preallocated result to write into (C-contiguous, the layer's dtype), so
        that repeated calls allocate nothing.
        """
        token_ids, start = validation.check_call(
            token_ids, start, self.vocab_size, self.max_seq_len, self.tokenizer_size
        )
        if out is None and self.position_table is not None and token_ids.size <= _FEW_ROWS:
            # A decode step's few rows: the gather allocates the result, the add is in place.
            out = self._gather(token_ids)
            out += self.position_table[start : start + token_ids.shape[-1]]
            return out
        shape = (*token_ids.shape, self.dim)
        position_table = self.position_table
        if out is None:
            out = np.empty(shape, self.dtype)
        else:
            if not isinstance(out, np.ndarray):
                raise TypeError(f"out must be a NumPy array, got {type(out).__name__}")
            validation.check_out(out, out.dtype, out.flags.c_contiguous, shape, self.dtype)
            if np.may_share_memory(out, self._token_bytes) or (
                position_table is not None and np.may_share_memory(out, position_table)
            ):
                raise validation.out_overlaps_error()
        if position_table is None:
            return self._gather(token_ids, out=out)
        length = shape[-2]
        positions = position_table[start : start + length]  # (T, dim)
        rows = self._chunk_rows
        if length < rows or out.nbytes <= _CHUNK_BYTES:  # short sequences, or small
            self._gather(token_ids, out=out)  # (..., T, dim)
            out += positions  # broadcasts over the batch
            return out
        # Large results: gather about a megabyte of rows, then add their positions while the
        # rows are still in cache, instead of a second pass over the whole result in memory.
        for seq_ids, seq_out in zip(
            token_ids.reshape(-1, length), out.reshape(-1, length, self.dim), strict=True
        ):
            for t in range(0, length, rows):
                self._gather(seq_ids[t : t + rows], out=seq_out[t : t + rows])
                seq_out[t : t + rows] += positions[t : t + rows]
        return out

    def token_embeddings(self, token_ids) -> np.ndarray:
        """(..., T) ids -> (..., T, dim) rows of token_table."""
        return self._gather(
            validation.check_token_ids(
                validation.as_host(token_ids), self.vocab_size, self.tokenizer_size
            )
        )

    def position_embeddings(self, start: int, length: int) -> np.ndarray:
        """Rows start .. start + length - 1 of position_table, (length, dim)."""
        validation.check_has_positions(self.positions)
        start = validation.check_positions(start, length, self.max_seq_len)
        return self.position_table[start : start + length].copy()

    def _gather(self, token_ids: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        # mode="clip" writes straight into the result, where the default mode="raise"
        # buffers a copy; it never clips, because the ids were checked first. The method
        # ndarray.take skips np.take's Python wrapper: 0.16 µs against 0.7 µs for 4 rows.
        if self.quantized:
            return quantized.lookup(self.token_table, token_ids, out)
        return self.token_table.take(token_ids, 0, out, "clip")


def gradients(layer, token_ids, upstream, start: int = 0, *, sparse: bool = False) -> dict:
    """The backward pass, by hand: d(loss)/d(table) for each trainable table, given
    upstream = d(loss)/d(output), of the output's shape and dtype.

    {"token_table": (vocab_size, dim), "position_table": (max_seq_len, dim) when positions
    are learned}. With sparse=True the token gradient is (indices (K,), rows (K, dim)): the
    distinct ids in ascending order and each one's summed row.
    """
    upstream = validation.native(np.asarray(upstream))
    token_ids, start = validation.check_gradients(
        layer, validation.as_host(token_ids), start, upstream.shape, upstream.dtype, sparse
    )
    ids, rows = (
        token_ids.reshape(-1),
        upstream.reshape(len(token_ids.reshape(-1)), layer.dim),
    )  # (N,), (N, dim)
    if layer.scale_grad_by_freq:  # each term divided by its id's count, as torch does
        counts = validation.id_counts(ids, layer.vocab_size)[ids]
        compute = np.promote_types(rows.dtype, np.float32)  # counts above 256: not in bfloat16
        rows = (rows.astype(compute) / counts[:, None]).astype(layer.dtype)
    if layer.padding_idx is not None:  # the padding row never learns
        keep = ids != layer.padding_idx
        ids, rows = ids[keep], rows[keep]
    # A scatter-add: np.add.at adds every term, in order. `grad[ids] += rows` would not:
    # with a repeated id it keeps only the last row.
    if sparse:
        grads = {"token_table": summed_rows(ids, rows)}
    else:
        grads = {"token_table": np.zeros((layer.vocab_size, layer.dim), layer.dtype)}
        np.add.at(grads["token_table"], ids, rows)
    if layer.positions == "learned":  # position row start + t gets the batch's sum at t
        position = np.zeros((layer.max_seq_len, layer.dim), layer.dtype)
        length = token_ids.shape[-1]
        # added to the zeros, not written over them: a sum from +0.0, as torch's (-0.0 alone
        # gives +0.0)
        position[start : start + length] += upstream.sum(axis=0) if upstream.ndim == 3 else upstream
        grads["position_table"] = position
    return grads


# Passes of summed_rows before the rest goes to np.add.at: an id that occurs more often
# than this is rare in text, and each pass reads every id once.
MAX_PASSES = 8


def summed_rows(ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices (K,), sums (K, dim)): the distinct ids in ascending order, and each one's rows
    summed in their order from zero, bit for bit as ``np.add.at`` sums them, 3x faster.

    Sorted stably, an id's k-th occurrence has rank k. Pass k adds every id's k-th row at
    once: within a pass each id occurs once, so plain fancy indexing adds every row, and
    each id's rows are added in their original order. Ranks from MAX_PASSES on (an id that
    repeats that often) go to ``np.add.at`` together, in the same order. (A sum of two NaNs
    is a NaN here as there; which NaN, its sign and payload, follows the operand order of
    the machine's add, which IEEE leaves open and NumPy's own loops do not fix.)"""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    first = np.ones(len(ids), bool)
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=first[1:])
    slot = np.cumsum(first) - 1  # each sorted row's place in the result
    position = np.arange(len(ids))
    rank = position - np.maximum.accumulate(np.where(first, position, 0))
    # Pass 0 makes the result: every id's first row, plus zero, as np.add.at starts from a
    # zero (the same bits, except that -0.0 becomes +0.0 as 0.0 + -0.0 does).
    sums = np.take(rows, order[first], axis=0)
    sums += np.zeros((), sums.dtype)
    for k in range(1, min(int(rank.max(initial=-1)) + 1, MAX_PASSES)):
        chosen = rank == k
        sums[slot[chosen]] += rows[order[chosen]]
    rest = rank >= MAX_PASSES
    if rest.any():
        np.add.at(sums, slot[rest], rows[order[rest]])
    return sorted_ids[first], sums


def sinusoidal_table(
    num_positions: int,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype="float32",
) -> np.ndarray:
    """(num_positions, dim) sinusoidal position table (Vaswani et al. 2017).

    layout "interleaved": PE[p, 2i] = sin(p * w_i), PE[p, 2i+1] = cos(p * w_i);
    layout "concat": sines in the first dim/2 columns, cosines in the last; w_i = base**(-2i/dim).
    """
    dtype = validation.resolve_dtype(dtype)
    num_positions, dim, base = validation.check_sinusoidal(num_positions, dim, base, layout)
    compute = positional.compute_dtype(dtype)
    w = 1.0 / base ** (np.arange(0, dim, 2, dtype=compute) / dim)  # (dim/2,)
    angles = np.arange(num_positions, dtype=compute)[:, None] * w  # (P, dim/2)
    sin, cos = np.sin(angles), np.cos(angles)
    if layout == "interleaved":
        table = np.stack([sin, cos], axis=-1).reshape(num_positions, dim)  # sin0 cos0 sin1 cos1 ...
    else:
        table = np.concatenate([sin, cos], axis=-1)  # sin0 sin1 ... cos0 cos1 ...
    return table.astype(dtype)


def apply_rope(
    x,
    positions,
    *,
    base: float = 10000.0,
    layout: str = "half",
    scaling=None,
    rotary_dim=None,
    mrope=None,
) -> np.ndarray:
    """Rotary position embedding of x (..., T, head_dim) at integer positions (T,).

    layout "half" rotates dimension i with i + rotary_dim/2 (GPT-NeoX, Hugging Face LLaMA);
    "interleaved" rotates pairs (2i, 2i+1) (GPT-J, RoFormer, Meta's LLaMA code). The first
    ``rotary_dim`` dims (default: all) are rotated, the rest pass through. scaling: None or a
    Hugging Face rope_scaling dict: "linear", "dynamic", "yarn", "longrope" or "llama3".
    mrope: {"layout", "section"} for multimodal RoPE, positions (3, T): frequency slot k turned
    by the row positional.mrope_axes gives it.
    """
    x = validation.native(np.asarray(x))
    dtype = validation.check_float_dtype(x.dtype.name, "x")
    positions = validation.as_host(positions)
    if mrope is None:
        positions, scaling, rotary_dim = validation.check_rope(
            x.shape, positions, base, layout, scaling, rotary_dim
        )
        at = positions[:, None]  # (T, 1): every pair at the token's position
    else:
        positions, rotary_dim, slots, section = validation.check_mrope_rope(
            x.shape, positions, base, layout, scaling, rotary_dim, mrope
        )
        at = positions[positional.mrope_axes(rotary_dim // 2, section, slots)].T  # (T, pairs)
    compute = positional.compute_dtype(dtype)
    w, attention = positional.rope_parameters(  # float64 constants, like a model's inv_freq
        rotary_dim, base, scaling, positional.length(positions)
    )
    angles = at.astype(compute) * w.astype(compute)  # (T, rotary_dim/2)
    cos = (np.cos(angles) * compute.type(attention)).astype(dtype)
    sin = (np.sin(angles) * compute.type(attention)).astype(dtype)
    rotated, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if layout == "half":
        a, b = np.split(rotated, 2, axis=-1)  # pairs (i, i + rotary_dim/2)
        turned = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        a, b = rotated[..., 0::2], rotated[..., 1::2]  # pairs (2i, 2i+1)
        turned = np.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(rotated.shape)
    return np.concatenate([turned, rest], axis=-1) if rest.shape[-1] else turned


def apply_layer_rope(x, positions, layer_type: str, *, layers: dict) -> np.ndarray:
    """x (..., T, head_dim) rotated by its layer type's rule: ``layers`` maps each type to its
    apply_rope options, None for a type that is not rotated (x returned as it is, its
    arguments checked as a rotation's)."""
    rope = validation.check_layer_rope(layers, layer_type)
    if rope is None:
        x = validation.native(np.asarray(x))
        validation.check_float_dtype(x.dtype.name, "x")
        validation.check_nope(x.shape, validation.as_host(positions))
        return x
    return apply_rope(x, positions, **rope)


def alibi_slopes(num_heads: int, *, dtype="float32") -> np.ndarray:
    """(num_heads,) ALiBi slopes 2**(-8i/n), with BLOOM's rule for n not a power of two."""
    dtype = validation.resolve_dtype(dtype)
    slopes = positional.alibi_slopes(num_heads)  # float64 constants, as the weights are
    return slopes.astype(positional.compute_dtype(dtype)).astype(dtype)


def alibi_bias(
    num_heads: int, q_len: int, k_len: int | None = None, *, causal: bool = True, dtype="float32"
) -> np.ndarray:
    """(num_heads, q_len, k_len) ALiBi bias, -slope * distance, to add to the scores.

    causal=True: distance = query - key, and -inf for keys after the query (the mask);
    causal=False: distance = |query - key|. Queries are the last q_len of k_len positions.
    """
    dtype = validation.resolve_dtype(dtype)
    num_heads, q_len, k_len = validation.check_lengths(num_heads, q_len, k_len)
    causal = validation.flag(causal, "causal")
    compute = positional.compute_dtype(dtype)
    relative = positional.relative_positions(q_len, k_len)  # (q, k): key - query
    slopes = alibi_slopes(num_heads, dtype=compute)[:, None, None]  # (H, 1, 1)
    if not causal:
        return (slopes * (-np.abs(relative)).astype(compute)).astype(dtype)
    bias = slopes * relative.astype(compute)  # (H, q, k); integers: exact in compute
    bias[:, relative > 0] = -np.inf
    return bias.astype(dtype)


def t5_relative_buckets(
    relative_position, *, bidirectional: bool = True, num_buckets: int = 32, max_distance=128
) -> np.ndarray:
    """T5's bucket of each relative position (key - query), int64, same shape.

    Distances below n/2 (n buckets per direction) get a bucket each, longer ones share
    logarithmically wider buckets up to max_distance and the last bucket beyond.
    """
    relative = validation.check_relative_positions(validation.as_host(relative_position))
    n, max_distance = validation.check_t5_buckets(bidirectional, num_buckets, max_distance)
    starts = positional.t5_bucket_starts(num_buckets, max_distance, bidirectional=bidirectional)
    relative = relative.astype(np.int64)
    if bidirectional:
        direction = np.where(relative > 0, n, 0)  # keys after the query: the upper half
        distance = np.abs(relative)
    else:
        direction = 0
        distance = -np.minimum(relative, 0)  # keys after the query count as distance 0
    exact = n // 2
    logarithmic = exact + np.searchsorted(starts, distance, side="right")
    return direction + np.where(distance < exact, distance, logarithmic)


def t5_bias(
    bias_table, q_len: int, k_len: int | None = None, *, bidirectional=True, max_distance=128
) -> np.ndarray:
    """(num_heads, q_len, k_len) T5 bias: bias_table (num_buckets, num_heads) at each
    query-key pair's bucket."""
    bias_table = validation.native(np.asarray(bias_table))
    num_buckets = validation.check_t5_table(bias_table.shape, bias_table.dtype.name)
    _, q_len, k_len = validation.check_t5_lengths(bias_table.shape, q_len, k_len)
    buckets = t5_relative_buckets(
        positional.relative_positions(q_len, k_len),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )  # (q, k)
    return bias_table[buckets].transpose(2, 0, 1)  # (q, k, H) -> (H, q, k)


# --- the configurations models ship: position ids, Gemma's scale, BERT's input layer -------

position_ids = positional.position_ids  # integer rules: NumPy is the reference itself


def scaled_inputs(token_table, token_ids=None, inputs_embeds=None, *, rule: str, value):
    """A model's input embeddings (``positional.SCALE_RULES``): the rows of token_ids, or
    inputs_embeds given instead, times the model's scale where its rule applies; a "buffer"
    rule's factor in the rows' dtype, one product; a "scalar" rule's in the compute dtype."""
    validation.choice(rule, tuple(positional.SCALE_RULES), "embedding scale rule")
    token_table = validation.native(np.asarray(token_table))
    ids, given = validation.check_scaled_inputs(token_table, token_ids, inputs_embeds, rule, value)
    x = token_table[ids] if given is None else given.copy()
    scale = positional.SCALE_RULES[rule]
    if given is not None and not scale["given"]:
        return x  # the model passes given embeddings on as they are
    factor = positional.scale_factor(rule, value, token_table.dtype)
    if scale["rounding"] == "buffer":
        return x * factor  # a 16-bit product is formed in float32, exactly, and rounded once
    return (x.astype(factor.dtype) * factor).astype(token_table.dtype)


class ScaledWordEmbedding:
    """Gemma's token lookup: rows times sqrt(dim), the scale rounded to the table's dtype
    first (``positional.embedding_scale``), then one product in that dtype."""

    def __init__(self, token_table: np.ndarray):
        token_table = validation.native(np.asarray(token_table))
        self.dtype = validation.check_float_dtype(token_table.dtype.name, "token_table")
        self.token_table = token_table.copy()
        self.embed_scale = positional.embedding_scale(token_table.shape[1], self.dtype)

    def __call__(self, token_ids) -> np.ndarray:
        ids = validation.check_token_ids(validation.as_host(token_ids), len(self.token_table))
        rows = self.token_table[ids]  # (..., T, dim)
        rows *= self.embed_scale
        return rows


class BertEmbeddings:
    """BERT's input layer: (word + token type) + position, each add in the tables' dtype,
    then LayerNorm if ``layer_norm`` = (gamma, beta, eps) is given."""

    def __init__(self, word_table, type_table, position_table, *, layer_norm=None):
        tables = [
            validation.native(np.asarray(t)) for t in (word_table, type_table, position_table)
        ]
        self.dtype = validation.check_bert_tables(*tables)
        self.word_table, self.type_table, self.position_table = (t.copy() for t in tables)
        self.layer_norm = layer_norm

    def __call__(self, input_ids, token_type_ids, start: int = 0) -> np.ndarray:
        ids = validation.check_token_ids(validation.as_host(input_ids), len(self.word_table))
        types = validation.check_token_type_ids(
            validation.as_host(token_type_ids), ids.shape, len(self.type_table)
        )
        start = validation.check_positions(start, ids.shape[-1], len(self.position_table))
        x = self.word_table[ids]  # (..., T, hidden)
        x += self.type_table[types]
        x += self.position_table[start : start + ids.shape[-1]]
        if self.layer_norm is None:
            return x
        gamma, beta, eps = self.layer_norm
        compute = positional.compute_dtype(self.dtype)
        wide = x.astype(compute)
        mean = wide.mean(axis=-1, keepdims=True)
        variance = ((wide - mean) ** 2).mean(axis=-1, keepdims=True)
        normed = (wide - mean) / np.sqrt(variance + compute.type(eps))
        return (normed * gamma.astype(compute) + beta.astype(compute)).astype(self.dtype)


def to_numpy(array) -> np.ndarray:
    return np.asarray(array)


# --- 2-D positions: grid tables and patches (vision towers) --------------------------------


class PatchEmbedding:
    """A vision tower's first layer, as NumPy arrays: images -> patches -> projection (a
    matmul over the flattened patches, in float32 for 16-bit layers) -> + position rows.

    projection (D, C, p, p) in torch's conv weight order; position_table (prefix + h*w, D);
    bias and cls_token (D,), registers (R, D). Output (B, [1] + [R] + h*w, D): CLS plus the
    table's row 0 (when the table has that row), the registers (no position), then each patch
    plus its row. Images of another grid need ``resize``, a kernel of ``backends.resize``: the
    table is then resized on the host, bit-identical on every backend.
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
        weight = grid_module.flat_projection(arrays["projection"])  # (D, K), K = C*p*p
        self.projection = weight.T.copy()  # (K, D): patches @ projection
        self.position_table = arrays["position_table"].copy()
        self.bias, self.cls_token, self.registers = (
            None if name not in arrays else arrays[name].copy()
            for name in ("bias", "cls_token", "registers")
        )

    def __call__(self, images) -> np.ndarray:
        """(B, C, H, W) images (or (B, H, W, C) with channels="last") -> (B, tokens, D)."""
        images = validation.native(np.asarray(images))
        image_grid = validation.check_images(
            images.shape,
            images.dtype.name,
            self.patch_size,
            self.channels,
            self.in_channels,
            self.dtype,
        )
        positions = self._grid_rows(image_grid)  # (prefix + h*w, D)
        compute = positional.compute_dtype(self.dtype)
        if self.channels == "last":
            images = images.transpose(0, 3, 1, 2)  # (B, C, H, W): the projection's (C, p, p)
        patches = patchify(images, self.patch_size)  # (B, h*w, K)
        x = patches.astype(compute) @ self.projection.astype(compute)  # (B, h*w, D)
        if self.bias is not None:
            x += self.bias.astype(compute)
        x = x.astype(self.dtype)
        x += positions[self.prefix_tokens :]
        prefix = []
        if self.cls_token is not None:
            cls = self.cls_token + positions[0] if self.prefix_tokens else self.cls_token
            prefix.append(np.broadcast_to(cls, (len(x), 1, self.dim)))
        if self.registers is not None:
            prefix.append(np.broadcast_to(self.registers, (len(x), *self.registers.shape)))
        return np.concatenate([*prefix, x], axis=1)

    def _grid_rows(self, image_grid: tuple[int, int]) -> np.ndarray:
        """The position rows for images of ``image_grid``: the table, or the table resized on
        the host (``resize.resize_table``) where the grids differ and a kernel is given."""
        if image_grid == self.grid:
            return self.position_table
        if self.resize is None:
            raise validation.grid_mismatch(image_grid, self.grid, self.patch_size)
        return resize.resize_table(
            self.position_table,
            self.grid,
            image_grid,
            kernel=self.resize,
            prefix_tokens=self.prefix_tokens,
        )



def sincos2d_table(
    grid, dim: int, *, rule: str = "mae", dtype="float32", prefix_tokens: int = 0, **options
) -> np.ndarray:
    """(prefix_tokens + h*w, dim) fixed 2-D sin-cos table of an (h, w) grid by ``rule``
    (``backends.grid.SINCOS2D_RULES``): the host table, bit-identical on every backend."""
    return grid_module.sincos2d_table(
        grid, dim, rule=rule, dtype=dtype, prefix_tokens=prefix_tokens, **options
    )


def patchify(images, patch_size: int, *, channels: str = "first") -> np.ndarray:
    """(B, C, H, W) or (B, H, W, C) images -> (B, h*w, C*p*p) patch vectors (a reshape)."""
    return grid_module.patchify(images, patch_size, channels=channels)  # the reference itself


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
) -> np.ndarray:
    """A learned (prefix + h*w, dim) table resized to new_grid (H, W): (prefix + H*W, dim).

    path "host": ``resize.resize_table``'s bits. "native" and "taps": the tap form, NumPy
    having no resize op of its own: host indices and float32 weights, summed tap by tap by
    ``tap_resize``, rows then columns, bit-identical to torch's and eager JAX's taps (for
    normal-range values: XLA's CPU runtime flushes float32 and float64 subnormals to zero).
    """
    validation.choice(path, resize.PATHS, "resize path")
    options = {"kernel": kernel, "prefix_tokens": prefix_tokens, "scale_factor": scale_factor,
               "compute_dtype": compute_dtype}  # fmt: skip
    if path == "host":
        return resize.resize_table(table, old_grid, new_grid, **options)
    plan = resize.taps(table, old_grid, new_grid, **options)
    grid = plan.table[plan.prefix :].reshape(*plan.old, -1)  # (h, w, dim)
    for dtype in plan.inward:
        grid = grid.astype(dtype)
    grid = tap_resize(grid, plan.rows, plan.columns)  # (H, W, dim)
    for dtype in plan.outward:
        grid = grid.astype(dtype)
    return np.concatenate([plan.table[: plan.prefix], grid.reshape(-1, grid.shape[-1])])


def tap_resize(grid: np.ndarray, rows, columns) -> np.ndarray:
    """(h, w, dim) -> (H, W, dim): rows = (indices (H, T), weights (H, T)) from the host, then
    columns likewise; each output the sum over t of weight * input, one product and one sum at
    a time in the order of t."""
    for axis, (indices, weights) in enumerate((rows, columns)):
        shape = [1, 1, 1]
        shape[axis] = len(indices)
        out = weights[:, 0].reshape(shape) * np.take(grid, indices[:, 0], axis=axis)
        for tap in range(1, indices.shape[1]):
            out += weights[:, tap].reshape(shape) * np.take(grid, indices[:, tap], axis=axis)
        grid = out
    return grid


def naflex_positions(table, old_grid, spatial_shapes, max_patches: int, *, path: str = "native"):
    """SigLIP2 NaFlex: the (h*w, dim) table resized per image to spatial_shapes[b] = (h, w),
    the antialiased bilinear kernel, padded to (B, max_patches, dim) with each image's
    (0, 0) row. path "host": ``resize.naflex_positions``'s bits; "native": Hugging Face's
    float32 weights (``Siglip2VisionEmbeddings.resize_positional_embeddings``, a padding row
    weighted as (0, 0)) times the table, NumPy's matmul summing in its own order: not torch's
    bits (nor, in the last bit, always row 0's for a padding row), within
    ``resize.tolerance(..., one_sum=True)`` (one sum over every tap)."""
    validation.choice(path, ("host", "native"), "NaFlex path")
    if path == "host":
        return resize.naflex_positions(table, old_grid, spatial_shapes, max_patches)
    table, old, shapes, max_patches = resize.check_naflex(
        table, old_grid, spatial_shapes, max_patches
    )
    sizes = shapes.astype(np.float32)[:, None]  # (B, 1, 2)
    positions = np.arange(max_patches, dtype=np.float32)[None, :, None]  # (1, P, 1)
    rows = np.floor(positions / sizes[..., 1:])
    index = np.concatenate([rows, positions - rows * sizes[..., 1:]], axis=-1)  # (B, P, 2)
    index *= positions < sizes.prod(-1, keepdims=True)  # padding: position (0, 0)
    scale = np.asarray(old, np.float32) / sizes  # (B, 1, 2)
    support = np.maximum(scale, np.float32(1))
    center = (index + np.float32(0.5)) * scale - np.float32(0.5)
    weights = []
    for axis, side in enumerate(old):
        distance = np.abs(np.arange(side, dtype=np.float32) - center[..., axis, None])
        axis_weights = np.maximum(1 - distance / support[..., axis, None], np.float32(0))
        weights.append(axis_weights / axis_weights.sum(-1, keepdims=True))  # (B, P, side)
    weights = (weights[0][..., :, None] * weights[1][..., None, :]).reshape(*index.shape[:2], -1)
    return (weights @ table.astype(np.float32)).astype(table.dtype)  # (B, P, dim)


# --- 2-D positions: rope2d (vision towers) ------------------------------------------------


def apply_rope2d(x, positions, *, spec, grid=None) -> np.ndarray:
    """2-D rotary embedding of x (..., N, head_dim) at positions (N, 2), each token's (row,
    column) and (-1, -1) for a prefix token, by ``spec`` (``rope2d.Rope2D``); ``grid`` (h, w)
    for the normalized coordinates (DINOv3's)."""
    x = validation.native(np.asarray(x))
    dtype = validation.check_float_dtype(x.dtype.name, "x")
    positions, grid = validation.check_rope2d(x.shape, validation.as_host(positions), spec, grid)
    slots = rope2d.slot_map(x.shape[-1], spec)  # float64 constants, like a model's inv_freq
    compute = positional.compute_dtype(dtype)
    at = _coordinates(positions, spec, grid, compute)[:, slots.axis.clip(0)]
    angles = np.where(slots.axis == rope2d.NONE, 0, at * slots.frequency.astype(compute))
    cos, sin = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)  # (N, head_dim/2)
    if spec.layout == "half":
        a, b = np.split(x, 2, axis=-1)  # pairs (i, i + head_dim/2)
        turned = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        a, b = x[..., 0::2], x[..., 1::2]  # pairs (2i, 2i+1)
        turned = np.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(x.shape)
    if spec.prefix == "excluded":  # DINOv3 and EVA-02 rotate only the patches
        return np.where(positions[:, :1] < 0, x, turned)
    return turned


def _coordinates(positions, spec, grid, compute) -> np.ndarray:
    """(N, 2) coordinates in the compute dtype: the indices (+ 1 for "1-based"; stretched to a
    reference grid, i / S * R, as timm's EVA), or DINOv3's 2 (i + 1/2) / S - 1; 0 for prefix
    tokens (their angle is 0)."""
    rule = spec.coordinates
    if rule in ("0-based", "1-based"):
        at = positions.astype(compute) + (rule == "1-based")
        if spec.reference_grid is not None:
            at = at / np.array(grid, dtype=compute) * np.array(spec.reference_grid, compute)
    else:
        sides = np.array(grid, dtype=compute)
        side = {"separate": sides, "max": sides.max(), "min": sides.min()}[rule]
        at = (positions.astype(compute) + compute.type(0.5)) / side * 2 - 1
    return np.where(positions[:, :1] < 0, 0, at).astype(compute)


def raster_ids(grid, *, prefix: int = 0, prefix_last: bool = False) -> np.ndarray:
    """(prefix + h*w, 2) (row, column) row-major, prefix rows (-1, -1) first or last."""
    return rope2d.raster_ids(grid, prefix=prefix, prefix_last=prefix_last)  # NumPy's is the rule


def merge_ids(grid, *, merge: int = 2) -> np.ndarray:
    """(h*w, 2) in Qwen2-VL's merge-block order."""
    return rope2d.merge_ids(grid, merge=merge)


def window_ids(grid, *, merge: int = 2, window: int = 4) -> np.ndarray:
    """(h*w, 2) in Qwen2.5-VL's window order."""
    return rope2d.window_ids(grid, merge=merge, window=window)


def flat_ids(grid, *, max_width: int) -> np.ndarray:
    """(h*w,) Pixtral's flat ids row * max_width + column."""
    return rope2d.flat_ids(grid, max_width=max_width)
