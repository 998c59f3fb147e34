"""PyTorch backend: a ``torch.nn.Module`` holding ``nn.Embedding`` tables."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import torch
from torch import nn

from backends import grid as grid_module
from backends import positional, quantized, resize, rope2d, validation
from backends.resize import check_kernel as check_resize_kernel

name = "torch"

# torch 2.13's CPU sin and cos: the first multi-threaded float64 call in a process returned
# an element 6.8e-9 off (sin(183.728...) = 0.99849675700 for 0.99849676382) in about one
# process in three on this project's 2-core VM, far outside float64's derived tolerance; every
# call after any first one is exact (measured: 40 calls each in 4 processes). One call on a
# throwaway tensor large enough to be split across threads takes that first call here.
(
    torch.sin(torch.ones(1 << 16, dtype=torch.float64)),
    torch.cos(torch.ones(1 << 16, dtype=torch.float64)),
)

_INDEX_DTYPES = (torch.int64, torch.int32)  # what nn.Embedding and index_select take
_INTEGER_DTYPES = {
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
}


class TokenPositionEmbedding(nn.Module):
    """Token rows plus position rows, as a torch module.

    positions="learned": two trainable nn.Embedding tables; "sinusoidal": a trainable
    token nn.Embedding and a fixed sinusoidal buffer built here from max_seq_len, base
    and layout; "none": the token nn.Embedding only. padding_idx and scale_grad_by_freq are
    nn.Embedding's own options on the token table. A ``quantized.QuantizedTable`` token
    table becomes a ``QuantizedEmbedding`` (its bytes a uint8 buffer, decoded per lookup).
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
        super().__init__()
        given = token_table
        token_table, position_table, self.max_seq_len = quantized.layer_tables(
            token_table, position_table, positions, max_seq_len, base, layout
        )
        self.positions = positions
        self.vocab_size, self.dim = token_table.shape
        padding_idx = validation.check_embedding_options(
            padding_idx, scale_grad_by_freq, self.vocab_size
        )
        self.tokenizer_size = validation.check_tokenizer_size(tokenizer_size, self.vocab_size)
        self.quantized = None
        if isinstance(given, quantized.QuantizedTable):
            self.quantized = given.kind
            self._padding = (padding_idx, bool(scale_grad_by_freq))  # no gradient to shape
            self.token = QuantizedEmbedding(given)
        else:
            # Trainable (freeze=False), like a model's own embeddings. from_pretrained keeps
            # the padding row as stored; nn.Embedding's backward keeps its gradient at zero.
            self.token = nn.Embedding.from_pretrained(
                _from_numpy(token_table),
                freeze=False,
                padding_idx=padding_idx,
                scale_grad_by_freq=bool(scale_grad_by_freq),
            )
        if positions == "learned":
            self.position = nn.Embedding.from_pretrained(_from_numpy(position_table), freeze=False)
        elif positions == "sinusoidal":
            table = sinusoidal_table(
                self.max_seq_len, self.dim, base=base, layout=layout, dtype=token_table.dtype
            )
            self.register_buffer("position_table", table, persistent=False)  # fixed, not trained

    @property
    def padding_idx(self) -> int | None:
        return self._padding[0] if self.quantized else self.token.padding_idx

    @property
    def scale_grad_by_freq(self) -> bool:
        return self._padding[1] if self.quantized else self.token.scale_grad_by_freq

    @property
    def dtype(self) -> np.dtype:
        """The tables' dtype, as NumPy names it (follows .to(), .half() and the like)."""
        if self.quantized:
            return self.token.dtype
        return validation.DTYPES[str(self.token.weight.dtype).removeprefix("torch.")]

    def forward(
        self, token_ids, start: int = 0, *, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(T,) or (B, T) ids -> (T, dim) or (B, T, dim) token + position embeddings.

        When autograd records (grad enabled, trainable tables) this is the nn.Embedding
        lookup plus the position rows. Otherwise, under torch.no_grad() or
        torch.inference_mode(), the rows are gathered straight into one result (``out``,
        if given: a preallocated contiguous tensor, so repeated calls allocate nothing)
        and the positions added in place. Both give the same bits.

        Checks, before the lookup: int32/int64 tensors already on the tables' device are used
        as they are. On the CPU they are read through a zero-copy NumPy view; on an
        accelerator a reduction on the device checks them and one synchronisation reads
        its flag (see _check_on_device). Anything else (NumPy arrays, lists, other integer
        dtypes, another device) is checked on the host and then copied to the device.
        """
        if self.quantized:
            return self._quantized_forward(token_ids, start, out)
        weight, positions = self._tables()
        if (
            isinstance(token_ids, torch.Tensor)
            and token_ids.dtype in _INDEX_DTYPES
            and token_ids.device == weight.device
        ):
            ids = token_ids
            if _readable_on_host(ids):
                _, start = validation.check_call(
                    ids.numpy(), start, self.vocab_size, self.max_seq_len, self.tokenizer_size
                )
            else:
                start = _check_on_device(
                    ids, start, self.vocab_size, self.max_seq_len, self.tokenizer_size
                )
        else:
            host_ids, start = validation.check_call(
                _host_ints(token_ids), start, self.vocab_size, self.max_seq_len, self.tokenizer_size
            )
            ids = self._to_device(token_ids, host_ids)
        length = ids.shape[-1]
        if torch.is_grad_enabled() and (
            weight.requires_grad or (self.positions == "learned" and positions.requires_grad)
        ):
            if out is not None:
                raise ValueError(
                    "out= cannot record gradients: call under torch.no_grad() or "
                    "torch.inference_mode(), or leave out= unset"
                )
            x = self.token(ids)  # (..., T, dim)
            return x if positions is None else x + self._position_rows(start, length)
        if out is None:
            x = torch.embedding(weight, ids)  # what nn.Embedding runs, without the module call
            if positions is not None:
                x += positions[start : start + length]  # (T, dim) broadcasts over the batch
            return x
        shape = (*ids.shape, self.dim)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
        validation.check_out(out, out.dtype, out.is_contiguous(), shape, weight.dtype)
        storage = out.untyped_storage().data_ptr()
        if any(
            t is not None and storage == t.untyped_storage().data_ptr() for t in (weight, positions)
        ):
            raise validation.out_overlaps_error()
        # index_select is what nn.Embedding runs on dim 0; out= skips the allocation.
        rows = ids.numel()
        torch.index_select(weight, 0, ids.reshape(rows), out=out.view(rows, self.dim))
        if positions is not None:
            out.add_(positions.narrow(0, start, length))  # (T, dim) broadcasts
        return out

    def _quantized_forward(self, token_ids, start, out) -> torch.Tensor:
        """forward for a quantized token table: the rows decoded into the result (``out``, if
        given), then the positions added there (learned positions by their nn.Embedding, as
        the float layer adds them, where autograd records them)."""
        host_ids, start = validation.check_call(
            _host_ints(token_ids), start, self.vocab_size, self.max_seq_len, self.tokenizer_size
        )
        token = self._modules["token"]  # what nn.Module.__getattr__ reads, without its cost
        ids = self._to_device(token_ids, host_ids)
        length, positions = ids.shape[-1], None
        recorded = (
            self.positions == "learned"
            and torch.is_grad_enabled()
            and self.position.weight.requires_grad
        )
        if recorded:  # looked up, so gradients reach the rows
            positions = self._position_rows(start, length)
        elif self.positions != "none":  # the rows as a view, as the float layer adds them
            table = (
                _weight(self._modules["position"])
                if self.positions == "learned"
                else self._buffers["position_table"]
            )
            positions = table.narrow(0, start, length)
        if out is not None:
            if recorded:  # as the float layer refuses it
                raise ValueError(
                    "out= cannot record gradients: call under torch.no_grad() or "
                    "torch.inference_mode(), or leave out= unset"
                )
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
            shape = (*ids.shape, self.dim)
            validation.check_out(out, out.dtype, out.is_contiguous(), shape, token.torch_dtype)
            storage = out.untyped_storage().data_ptr()
            if any(
                t is not None and storage == t.untyped_storage().data_ptr()
                for t in (token._buffers["blocks"], positions)
            ):
                raise validation.out_overlaps_error()
        x = token.forward(ids, out=out)  # (..., T, dim); no hooks to run: not nn.Module's call
        if positions is None:
            return x
        return x + positions if recorded else x.add_(positions)  # (T, dim) broadcasts

    def token_embeddings(self, token_ids) -> torch.Tensor:
        """(..., T) ids -> (..., T, dim) rows of the token table."""
        host_ids = validation.check_token_ids(
            _host_ints(token_ids), self.vocab_size, self.tokenizer_size
        )
        return self.token(self._to_device(token_ids, host_ids))

    def position_embeddings(self, start: int, length: int) -> torch.Tensor:
        """Rows start .. start + length - 1 of the position table, (length, dim)."""
        validation.check_has_positions(self.positions)
        start = validation.check_positions(start, length, self.max_seq_len)
        return self._position_rows(start, length)

    def _position_rows(self, start: int, length: int) -> torch.Tensor:
        if self.positions == "learned":  # looked up like tokens, so gradients reach the rows
            return self.position(torch.arange(start, start + length, device=self._device()))
        return self.position_table[start : start + length]

    def _tables(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(token table, position table or None), read from the module's own dicts: what
        nn.Module.__getattr__ reads, without its cost (0.9 µs for self.token.weight, a
        tenth of a decode step's lookup)."""
        weight = _weight(self._modules["token"])
        if self.positions == "learned":
            return weight, _weight(self._modules["position"])
        return weight, self._buffers.get("position_table")

    def _device(self) -> torch.device:
        token = self._modules["token"]  # what nn.Module.__getattr__ reads, without its cost
        return token._buffers["blocks"].device if self.quantized else _weight(token).device

    def _to_device(self, token_ids, host_ids: np.ndarray) -> torch.Tensor:
        """Checked ids as int32 or int64 (what nn.Embedding takes), on the tables' device."""
        device = self._device()
        if isinstance(token_ids, torch.Tensor) and token_ids.dtype in (torch.int32, torch.int64):
            return token_ids if token_ids.device == device else token_ids.to(device)
        if host_ids.dtype not in (np.int32, np.int64):
            host_ids = host_ids.astype(np.int64)  # the checked ids fit
        ids = _as_tensor(host_ids)
        return ids if device.type == "cpu" else ids.to(device)


def gradients(layer, token_ids, upstream, start: int = 0, *, sparse: bool = False) -> dict:
    """Autograd: the module's output, then ``backward(upstream)``; the tables' ``.grad``.

    {"token_table": (vocab_size, dim), "position_table": (max_seq_len, dim) when positions
    are learned}, as tensors. With sparse=True the token table is looked up as
    nn.Embedding(sparse=True) does, and its sparse COO gradient, coalesced, is returned as
    (indices (K,), rows (K, dim)). Frozen tables (requires_grad=False) get no entry. The
    layer is left as it was: its sparse flag, and any .grad a caller has accumulated.
    """
    if not isinstance(upstream, torch.Tensor):
        upstream = _as_tensor(np.asarray(upstream))
    _, start = validation.check_gradients(
        layer,
        _host_ints(token_ids),
        start,
        upstream.shape,
        str(upstream.dtype).removeprefix("torch."),  # torch's names are NumPy's, bfloat16 too
        sparse,
    )
    weight = layer.token.weight
    tables = {"token_table": weight}
    if layer.positions == "learned":
        tables["position_table"] = layer.position.weight
    tables = {k: t for k, t in tables.items() if t.requires_grad}  # frozen tables have none
    if not tables:
        raise ValueError("every table of this layer is frozen (requires_grad=False): no gradients")
    saved = {k: t.grad for k, t in tables.items()}  # a caller's accumulated .grad, kept
    was_sparse = layer.token.sparse
    layer.token.sparse = sparse  # read by nn.Embedding.forward on each call
    try:
        for t in tables.values():
            t.grad = None
        # inference_mode(False): a caller's torch.inference_mode() would forbid the graph.
        with torch.inference_mode(False), torch.enable_grad():
            layer(token_ids, start).backward(upstream.to(weight.device))
        grads = {k: t.grad for k, t in tables.items()}
    finally:
        layer.token.sparse = was_sparse
        for k, t in tables.items():
            t.grad = saved[k]
    if sparse and "token_table" in grads:
        coalesced = grads["token_table"].coalesce()  # sums a repeated id's rows, sorts the ids
        indices, rows = coalesced.indices()[0], coalesced.values()
        if layer.dim == 0:  # torch keeps no entries of width 0; the contract lists every id
            ids = _host_ints(token_ids).reshape(-1)
            indices = torch.as_tensor(np.unique(ids[ids != layer.padding_idx]).astype(np.int64))
            rows = rows.new_zeros((len(indices), 0))
        grads["token_table"] = (indices.to(weight.device), rows)
    return grads


def sinusoidal_table(
    num_positions: int,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype="float32",
) -> torch.Tensor:
    """(num_positions, dim) sinusoidal position table (Vaswani et al. 2017).

    layout "interleaved": PE[p, 2i] = sin(p * w_i), PE[p, 2i+1] = cos(p * w_i);
    layout "concat": sines in the first dim/2 columns, cosines in the last; w_i = base**(-2i/dim).
    """
    dtype = validation.resolve_dtype(dtype)
    num_positions, dim, base = validation.check_sinusoidal(num_positions, dim, base, layout)
    compute = _torch_dtype(positional.compute_dtype(dtype))
    w = 1.0 / base ** (torch.arange(0, dim, 2, dtype=compute) / dim)  # (dim/2,)
    angles = torch.outer(torch.arange(num_positions, dtype=compute), w)  # (P, dim/2)
    sin, cos = torch.sin(angles), torch.cos(angles)
    if layout == "interleaved":
        table = torch.stack([sin, cos], dim=-1).flatten(-2)  # sin0 cos0 sin1 cos1 ...
    else:
        table = torch.cat([sin, cos], dim=-1)  # sin0 sin1 ... cos0 cos1 ...
    return table.to(_torch_dtype(dtype))


class RotaryEmbedding(nn.Module):
    """Rotary position embedding in Hugging Face's shape: the frequencies an ``inv_freq``
    buffer (float64 constants of the rule, cast to the compute dtype in forward), cos and sin
    scaled by ``attention_scaling``; the first ``rotary_dim`` dims rotated, the rest passed
    through. For the length rules (dynamic, longrope) the buffer is recomputed from each
    call's max(positions) + 1, so a call never depends on the ones before it. With ``mrope``
    (multimodal RoPE, positions (3, T)) an ``mrope_axes`` buffer says which row turns each
    frequency slot, as Qwen2-VL's recomposition_frequencies does."""

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        scaling=None,
        rotary_dim: int | None = None,
        mrope: dict | None = None,
    ):
        super().__init__()
        _, self.scaling, self.rotary_dim = validation.check_rope(
            (1, head_dim), np.zeros(1, np.int64), base, layout, scaling, rotary_dim
        )
        self.head_dim, self.base, self.layout, self.mrope = head_dim, base, layout, mrope
        w, self.attention_scaling = positional.rope_parameters(self.rotary_dim, base, self.scaling)
        self.register_buffer("inv_freq", torch.from_numpy(w), persistent=False)
        if mrope is not None:
            _, _, slots, section = validation.check_mrope_rope(
                (1, head_dim), np.zeros((3, 1), np.int64), base, layout, scaling, rotary_dim, mrope
            )
            axes = positional.mrope_axes(self.rotary_dim // 2, section, slots)
            self.register_buffer("mrope_axes", torch.from_numpy(axes), persistent=False)

    def forward(self, x: torch.Tensor, positions) -> torch.Tensor:
        dtype = validation.check_float_dtype(str(x.dtype).removeprefix("torch."), "x")
        positions = _host_ints(positions, "positions")
        if self.mrope is None:
            positions, _, _ = validation.check_rope(
                tuple(x.shape), positions, self.base, self.layout, self.scaling, self.rotary_dim
            )
        else:
            positions, *_ = validation.check_mrope_rope(
                tuple(x.shape),
                positions,
                self.base,
                self.layout,
                self.scaling,
                self.rotary_dim,
                self.mrope,
            )
        w, attention = self.inv_freq, self.attention_scaling
        if self.scaling and self.scaling["rope_type"] in positional.LENGTH_RULES:
            w, attention = positional.rope_parameters(
                self.rotary_dim, self.base, self.scaling, positional.length(positions)
            )
            w = torch.from_numpy(w)
        compute = _torch_dtype(positional.compute_dtype(dtype))
        at = _as_tensor(positions).to(x.device, compute)
        if self.mrope is None:
            at = at[:, None]  # (T, 1): every pair at the token's position
        else:
            at = at[self.mrope_axes.to(x.device)].T  # (T, rotary_dim/2): each slot's row
        angles = at * w.to(x.device, compute)
        cos = (angles.cos() * attention).to(x.dtype)  # (T, rotary_dim/2)
        sin = (angles.sin() * attention).to(x.dtype)
        rotated, rest = x[..., : self.rotary_dim], x[..., self.rotary_dim :]
        if self.layout == "half":
            a, b = rotated.chunk(2, dim=-1)  # pairs (i, i + rotary_dim/2)
            turned = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
        else:
            a, b = rotated[..., 0::2], rotated[..., 1::2]  # pairs (2i, 2i+1)
            turned = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
        return torch.cat([turned, rest], dim=-1) if rest.shape[-1] else turned


def apply_rope(
    x,
    positions,
    *,
    base: float = 10000.0,
    layout: str = "half",
    scaling=None,
    rotary_dim=None,
    mrope=None,
) -> torch.Tensor:
    """Rotary position embedding of x (..., T, head_dim) at integer positions (T,).

    layout "half" rotates dimension i with i + rotary_dim/2 (GPT-NeoX, Hugging Face LLaMA);
    "interleaved" rotates pairs (2i, 2i+1) (GPT-J, RoFormer, Meta's LLaMA code). The first
    ``rotary_dim`` dims (default: all) are rotated, the rest pass through. scaling: None or a
    Hugging Face rope_scaling dict: "linear", "dynamic", "yarn", "longrope" or "llama3".
    mrope: {"layout", "section"} for multimodal RoPE, positions (3, T): frequency slot k turned
    by the row positional.mrope_axes gives it.
    """
    if isinstance(x, torch.Tensor):
        validation.check_float_dtype(str(x.dtype).removeprefix("torch."), "x")
    else:
        x = np.asarray(x)
        validation.check_float_dtype(x.dtype.name, "x")
        x = _as_tensor(x)
    if x.dim() < 2:
        raise ValueError(
            f"x must be (..., T, dim), got shape {tuple(x.shape)}: add a sequence axis"
        )
    rope = RotaryEmbedding(
        x.shape[-1], base=base, layout=layout, scaling=scaling, rotary_dim=rotary_dim, mrope=mrope
    )
    return rope(x, positions)


class LayerTypesRotaryEmbedding(nn.Module):
    """A rotation per layer type, as transformers' Gemma3RotaryEmbedding keeps an inv_freq
    buffer per type: a RotaryEmbedding for each rotating type (its buffer
    ``rotations[type].inv_freq``), forward(x, positions, layer_type); a type that is not
    rotated (None in ``layers``) returns x as it is. ``head_dim``: one width, or each type's
    (Gemma 4's full-attention heads are 512 where its sliding ones are 256)."""

    def __init__(self, head_dim: int | dict, layers: dict):
        super().__init__()
        widths = head_dim if isinstance(head_dim, dict) else dict.fromkeys(layers, head_dim)
        rules = {name: validation.check_layer_rope(layers, name) for name in layers}
        missing = [name for name, rope in rules.items() if rope is not None and name not in widths]
        if missing:
            raise ValueError(
                f"head_dim gives no width for the layer types {missing}: give one width, or "
                "one per rotating type"
            )
        self.layers = dict(layers)
        self.rotations = nn.ModuleDict(
            {
                name: RotaryEmbedding(widths[name], **rope)
                for name, rope in rules.items()
                if rope is not None
            }
        )

    def forward(self, x: torch.Tensor, positions, layer_type: str) -> torch.Tensor:
        if validation.check_layer_rope(self.layers, layer_type) is None:
            validation.check_float_dtype(str(x.dtype).removeprefix("torch."), "x")
            validation.check_nope(tuple(x.shape), _host_ints(positions, "positions"))
            return x
        return self.rotations[layer_type](x, positions)


def apply_layer_rope(x, positions, layer_type: str, *, layers: dict) -> torch.Tensor:
    """x (..., T, head_dim) rotated by its layer type's rule (``LayerTypesRotaryEmbedding``):
    ``layers`` maps each type to its apply_rope options, None for a type not rotated."""
    validation.check_layer_rope(layers, layer_type)
    if not isinstance(x, torch.Tensor):
        x = np.asarray(x)
        validation.check_float_dtype(x.dtype.name, "x")
        x = _as_tensor(x)
    only = {layer_type: layers[layer_type]}  # the other types' widths may differ from x's
    return LayerTypesRotaryEmbedding(x.shape[-1], only)(x, positions, layer_type)


def alibi_slopes(num_heads: int, *, dtype="float32") -> torch.Tensor:
    """(num_heads,) ALiBi slopes 2**(-8i/n), with BLOOM's rule for n not a power of two."""
    dtype = validation.resolve_dtype(dtype)
    slopes = torch.from_numpy(positional.alibi_slopes(num_heads))  # float64 constants
    return slopes.to(_torch_dtype(positional.compute_dtype(dtype))).to(_torch_dtype(dtype))


def alibi_bias(
    num_heads: int, q_len: int, k_len: int | None = None, *, causal: bool = True, dtype="float32"
) -> torch.Tensor:
    """(num_heads, q_len, k_len) ALiBi bias, -slope * distance, to add to the scores.

    causal=True: distance = query - key, and -inf for keys after the query (the mask);
    causal=False: distance = |query - key|. Queries are the last q_len of k_len positions.
    """
    dtype = validation.resolve_dtype(dtype)
    num_heads, q_len, k_len = validation.check_lengths(num_heads, q_len, k_len)
    causal = validation.flag(causal, "causal")
    compute = _torch_dtype(positional.compute_dtype(dtype))
    # On torch's default device, as a factory function's result is (the slopes come from NumPy).
    device = torch.get_default_device()
    relative = _as_tensor(positional.relative_positions(q_len, k_len)).to(device)  # key - query
    slopes = alibi_slopes(num_heads, dtype=positional.compute_dtype(dtype)).to(device)
    slopes = slopes[:, None, None]  # (H, 1, 1)
    if not causal:
        return (slopes * (-relative.abs()).to(compute)).to(_torch_dtype(dtype))
    bias = slopes * relative.to(compute)  # (H, q, k); integers: exact in compute
    return bias.masked_fill(relative > 0, -math.inf).to(_torch_dtype(dtype))


def t5_relative_buckets(
    relative_position, *, bidirectional: bool = True, num_buckets: int = 32, max_distance=128
) -> torch.Tensor:
    """T5's bucket of each relative position (key - query), int64, same shape and device.

    Distances below n/2 (n buckets per direction) get a bucket each, longer ones share
    logarithmically wider buckets up to max_distance and the last bucket beyond.
    """
    host = validation.check_relative_positions(_host_ints(relative_position, "relative_position"))
    n, max_distance = validation.check_t5_buckets(bidirectional, num_buckets, max_distance)
    starts = positional.t5_bucket_starts(num_buckets, max_distance, bidirectional=bidirectional)
    device = relative_position.device if isinstance(relative_position, torch.Tensor) else None
    relative = _as_tensor(host).to(device, torch.int64)
    if bidirectional:
        direction = (relative > 0).long() * n  # keys after the query: the upper half
        distance = relative.abs()
    else:
        direction = 0
        distance = -relative.clamp(max=0)  # keys after the query count as distance 0
    exact = n // 2
    logarithmic = exact + torch.bucketize(distance, torch.from_numpy(starts).to(device), right=True)
    return direction + torch.where(distance < exact, distance, logarithmic)


def t5_bias(
    bias_table, q_len: int, k_len: int | None = None, *, bidirectional=True, max_distance=128
) -> torch.Tensor:
    """(num_heads, q_len, k_len) T5 bias: bias_table (num_buckets, num_heads) at each
    query-key pair's bucket; differentiable in bias_table (an nn.Embedding weight in T5)."""
    if not isinstance(bias_table, torch.Tensor):
        bias_table = _as_tensor(np.asarray(bias_table))
    dtype_name = str(bias_table.dtype).removeprefix("torch.")
    num_buckets = validation.check_t5_table(tuple(bias_table.shape), dtype_name)
    _, q_len, k_len = validation.check_t5_lengths(bias_table.shape, q_len, k_len)
    buckets = t5_relative_buckets(
        _as_tensor(positional.relative_positions(q_len, k_len)).to(bias_table.device),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )  # (q, k)
    return nn.functional.embedding(buckets, bias_table).permute(2, 0, 1)  # (H, q, k)


# --- the configurations models ship: position ids, Gemma's scale, BERT's input layer -------


def position_ids(
    input_ids, attention_mask=None, *, rule: str = "arange", padding_idx=None, past_length=0
) -> torch.Tensor:
    """(B, T) int64 rows of the position table, by a model's rule (``positional.position_ids``),
    in transformers' own torch expressions."""
    host_ids, host_mask, past_length = validation.check_position_ids(
        _host_ints(input_ids, "input_ids"),
        None if attention_mask is None else _host_ints(attention_mask, "attention_mask"),
        rule,
        padding_idx,
        past_length,
    )
    ids = _as_tensor(host_ids)
    batch, length = ids.shape
    if rule in ("arange", "bart"):
        counted = torch.arange(past_length, past_length + length, dtype=torch.long)
        return (counted + (2 if rule == "bart" else 0)).expand(batch, -1).clone()
    if rule == "opt":  # OPTLearnedPositionalEmbedding
        mask = _as_tensor(host_mask).long()
        return (torch.cumsum(mask, dim=1) * mask - 1)[:, past_length:] + 2
    mask = ids.ne(padding_idx).int()  # create_position_ids_from_input_ids
    return ((torch.cumsum(mask, dim=1).type_as(mask) + past_length) * mask).long() + padding_idx


class QuantizedEmbedding(nn.Module):
    """A GGUF-quantized token table (``quantized.QuantizedTable``) as a module: its bytes a
    (vocab_size, row_bytes) uint8 buffer; forward gathers the byte rows of the ids and decodes
    those alone, float32 then the table's dtype, into one result.

    Where every scale is finite (as in any table a model ships) each format is decoded by its
    function in ``_DECODERS``, in chunks of about ``CHUNK_VALUES`` values so that the passes
    over a chunk stay in cache: the integers of a chunk converted into the result by one
    ``copy_``, then scaled in place by the blocks' scales broadcast (``mul_``, ``add_``,
    ``sub_``), each product exact and the one rounding where gguf.quants rounds; no temporary
    the size of the result (a float32 chunk where the result is another dtype). A table with a
    NaN or infinite scale is decoded by ``quantized.decode`` with NumPy's NaN rules
    (``NAN_OPS``, a few passes more)."""

    def __init__(self, table: quantized.QuantizedTable):
        super().__init__()
        self.kind, self.dim, self.dtype = table.kind, table.dim, table.dtype
        self.torch_dtype = _torch_dtype(table.dtype)
        self._finite = quantized.finite_scales(table)
        # a copy (np.array): torch refuses to share a read-only, memory-mapped file's bytes
        self.register_buffer("blocks", torch.from_numpy(np.array(table.blocks)))
        # the widest integer a row's bytes divide into: index_select copies rows of uint8
        # element by element when it allocates (2.3 ms for 2048 Q4_K rows of 4096, 0.13 ms
        # as int64 rows into a buffer given)
        row_bytes = table.blocks.shape[1]
        words = (torch.int64, torch.int32, torch.int16)  # a block is an even number of bytes
        self._word = next(t for t in words if row_bytes % t.itemsize == 0)
        self._block, self._decode = quantized.BLOCKS[self.kind], _DECODERS[self.kind]
        self._q8_0_views = None  # (blocks, quants, scales): see _q8_0_few

    @property
    def _words(self) -> torch.Tensor:
        """The table's bytes as (vocab_size, row_bytes / itemsize) words, read from the
        module's own buffers (what nn.Module.__getattr__ reads, without its cost)."""
        return self._buffers["blocks"].view(self._word)

    def forward(self, token_ids: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """(..., T) ids -> (..., T, dim) rows in the table's dtype, written into ``out`` (that
        shape and dtype, contiguous) when it is given."""
        if not self._finite:
            rows = self._decoded_with_nan_rules(token_ids)
            return rows if out is None else out.copy_(rows)
        ids = token_ids.reshape(-1)
        count, dim = ids.numel(), self.dim
        if self.kind == "Q8_0" and count * dim <= SMALL_VALUES:
            return self._q8_0_few(ids, out).view(*token_ids.shape, dim)
        words = self._words
        device, (block_size, type_size) = words.device, self._block
        if out is None:
            out = torch.empty((count, dim), dtype=self.torch_dtype, device=device)
        result = out.view(count, dim)
        if count * dim <= CHUNK_VALUES:  # one chunk (a decode step's few rows): no slicing
            rows = torch.empty((count, words.shape[1]), dtype=self._word, device=device)
            torch.index_select(words, 0, ids, out=rows)
            values = result if self.torch_dtype == torch.float32 else torch.empty_like(
                result, dtype=torch.float32
            )
            self._decode(rows.view(torch.uint8).view(-1, type_size), values.view(-1, block_size))
            if values is not result:
                result.copy_(values)  # rounded once to the table's dtype
            return result.view(*token_ids.shape, dim)
        size = max(1, min(count, CHUNK_VALUES // dim))  # rows a chunk
        gathered = torch.empty((size, words.shape[1]), dtype=self._word, device=device)
        floats = None  # float32 values, where the result is another dtype
        if self.torch_dtype != torch.float32:
            floats = torch.empty((size, dim), device=device)
        decode = self._decode
        for first in range(0, count, size):
            chunk = ids[first : first + size]
            n = len(chunk)
            rows = torch.index_select(words, 0, chunk, out=gathered[:n])
            values = result[first : first + n] if floats is None else floats[:n]  # (n, dim)
            decode(rows.view(torch.uint8).view(-1, type_size), values.view(-1, block_size))
            if floats is not None:
                result[first : first + n].copy_(values)  # rounded once to the table's dtype
        return result.view(*token_ids.shape, dim)

    def _q8_0_few(self, ids: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        """Q8_0's few rows (a decode step's): each op costs about 1 µs here whatever its size,
        so the quants and the scales are gathered from two views of the table made once, and
        decoded by a copy_ and a mul_ (as _q8_0, the same bits): 8 operations, not 13."""
        blocks = self._buffers["blocks"]
        if self._q8_0_views is None or self._q8_0_views[0] is not blocks:
            rows = blocks.view(blocks.shape[0], -1, 34)  # (vocab_size, blocks a row, 34)
            quants, scales = rows[:, :, 2:].view(torch.int8), rows[:, :, :2].view(torch.float16)
            self._q8_0_views = (blocks, quants, scales)
        _, quants, scales = self._q8_0_views
        q, d = torch.index_select(quants, 0, ids), torch.index_select(scales, 0, ids)
        if out is not None and self.torch_dtype == torch.float32:
            values = out.view(q.shape)
        else:  # float32 values: the result, or rounded once into it
            values = torch.empty(q.shape, device=q.device)
        values.copy_(q).mul_(d.float())  # (n, blocks, 32) * (n, blocks, 1)
        if self.torch_dtype == torch.float32:
            return values
        return values.to(self.torch_dtype) if out is None else out.view(q.shape).copy_(values)

    def _apply(self, fn, *args, **kwargs):
        self._q8_0_views = None  # views of the bytes before .to() and the like: not kept
        return super()._apply(fn, *args, **kwargs)

    def _decoded_with_nan_rules(self, token_ids: torch.Tensor) -> torch.Tensor:
        rows = self.blocks.index_select(0, token_ids.reshape(-1))  # (N, row_bytes)
        values = quantized.decode(NAN_OPS, self.kind, rows)  # (N, dim) float32
        rounded = values.to(self.torch_dtype)
        if self.torch_dtype == torch.bfloat16:
            # torch's CPU kernel rounds every NaN to 0xffff; NumPy (ml_dtypes, Eigen's rule) and
            # XLA give the quiet NaN of its sign, 0xffc0 or 0x7fc0: the top half of the float32's
            # bits (sign-extended), its low 6 bits cleared (& -64) and 0x7fc0 set
            quiet = ((values.view(torch.int32) >> 16) & -64 | 0x7FC0).to(torch.int16)
            rounded = torch.where(values.isnan(), quiet.view(torch.bfloat16), rounded)
        return rounded.reshape(*token_ids.shape, self.dim)


# values a chunk of the quantized decode holds: 2 MB of float32, its passes in the caches
# (measured, one thread, Q4_0 and Q4_K at 4096 and 768 values a row: 2**19 and 2**20 within
# 5 % of each other, 2**17 1.2 to 1.7 times slower, its operations' fixed costs 4 times over)
CHUNK_VALUES = 1 << 19
# values up to which Q8_0 gathers from strided views of its table (_q8_0_few): measured, one
# thread, 768 values a row, 8 rows 9.3 µs against 13.3, 64 rows even, 128 rows 1.14 times
# slower (a strided gather's cost a value outgrows the operations it saves)
SMALL_VALUES = 1 << 15


# --- the formats for finite scales, one function each: (n, type_size) uint8 blocks decoded
# into values (n, block_size) float32. Each q is formed as a byte in a uint8 buffer, in the
# order of the values, from whole words of the block (a nibble of every byte of a word at
# once: the mask and the shift act on each byte alike, whatever the byte order), converted to
# float32 by one contiguous copy_, then scaled in place by the blocks' scales broadcast; each
# product of float16 scales and q is exact, so each value is rounded where gguf.quants rounds
# it, by the same operation (d * (q - 8), not d * q - 8 * d: the sign of a zero)


def _q8_0(b, values):
    values.copy_(b[:, 2:].view(torch.int8)).mul_(_half(b, 0))  # (n, 32) * (n, 1)


def _q4_0(b, values):
    q = _nibbles(b[:, 2:18], torch.int16).sub_(8)  # wrapped: read as int8, nibble - 8
    values.copy_(q.view(torch.int8).view(-1, 32)).mul_(_half(b, 0))


def _q4_1(b, values):
    values.copy_(_nibbles(b[:, 4:20], torch.int32).view(-1, 32))
    values.mul_(_half(b, 0)).add_(_half(b, 2))


def _q5_0(b, values):
    q = _nibbles(b[:, 6:22], torch.int16).view(-1, 32)
    q.bitwise_or_(_high_bits(b[:, 2:6])).sub_(16)  # wrapped: read as int8, q - 16
    values.copy_(q.view(torch.int8)).mul_(_half(b, 0))


def _q5_1(b, values):
    q = _nibbles(b[:, 8:24], torch.int64).view(-1, 32)
    values.copy_(q.bitwise_or_(_high_bits(b[:, 4:8])))
    values.mul_(_half(b, 0)).add_(_half(b, 2))


def _q4_k(b, values):
    n = b.shape[0]
    # 8 six-bit scales and 8 mins in 12 bytes, a word of 4 at a time (as quantized._q4_k
    # reads them): words low and mid the low 6 bits of scales 0-3 and mins 0-3, and in their
    # top 2 bits the high bits of 4-7, whose low 4 bits are word top's low and high nibbles
    low, mid, top = (b[:, i : i + 4].view(torch.int32) for i in (4, 8, 12))  # (n, 1) each
    six = torch.empty((2, n, 2), dtype=torch.int32, device=b.device)  # scales, mins: bytes
    torch.bitwise_and(low, 0x3F3F3F3F, out=six[0, :, 0:1])
    torch.bitwise_and(mid, 0x3F3F3F3F, out=six[1, :, 0:1])
    high = (low >> 2).bitwise_and_(0x30303030)
    torch.bitwise_or(high, top & 0x0F0F0F0F, out=six[0, :, 1:2])
    high = (mid >> 2).bitwise_and_(0x30303030)
    torch.bitwise_or(high, (top >> 4).bitwise_and_(0x0F0F0F0F), out=six[1, :, 1:2])
    pairs = six.view(torch.uint8).float()  # (2, n, 8)
    scale, offset = pairs[0].mul_(_half(b, 0)), pairs[1].mul_(_half(b, 2))  # exact
    # sub-blocks 2g, 2g + 1: the low, then the high nibbles of qs[g], 32 bytes
    q = _nibbles(b[:, 16:144].view(n, 4, 32), torch.int64)  # (n, 4, 2, 32)
    values.copy_(q.view(n, 256))
    values.view(n, 8, 32).mul_(scale[..., None]).sub_(offset[..., None])


def _q6_k(b, values):
    n = b.shape[0]
    q = _nibbles(b[:, 0:128].view(n, 2, 64), torch.int16)  # (n, 2, 2, 64): half, nibble
    qh = b[:, 128:192].view(torch.int16).view(n, 2, 1, 16)  # 2 bits of 4 values a byte
    high = torch.empty((n, 2, 4, 16), dtype=torch.int16, device=b.device)
    for k, shift in enumerate((4, 2, 0)):  # bits 2k, 2k + 1 of each byte to bits 4 and 5
        torch.bitwise_left_shift(qh, shift, out=high[:, :, k : k + 1])
    torch.bitwise_right_shift(qh, 2, out=high[:, :, 3:4])
    q = q.view(n, 2, 4, 32).bitwise_or_(high.bitwise_and_(0x3030).view(torch.uint8))
    values.copy_(q.sub_(32).view(torch.int8).view(n, 256))  # wrapped: q - 32
    scale = _half(b, 208) * b[:, 192:208].view(torch.int8).float()  # (n, 16)
    values.view(n, 16, 16).mul_(scale[..., None])


def _half(b: torch.Tensor, first: int) -> torch.Tensor:
    """(n, 1) float32: each block's float16 at byte ``first``."""
    return b[:, first : first + 2].view(torch.float16).float()


_LOW_NIBBLES = {torch.int16: 0x0F0F, torch.int32: 0x0F0F0F0F, torch.int64: 0x0F0F0F0F0F0F0F0F}


def _nibbles(qs: torch.Tensor, word: torch.dtype) -> torch.Tensor:
    """(..., k) bytes -> (..., 2, k) uint8: their low nibbles, then their high ones; each plane
    computed on whole ``word``s of the bytes in one contiguous pass (a right shift's sign bits
    fall in the high nibbles, masked), then the two stacked (a loop over words 4 or 8 to a
    block's 32 bytes ran 2.5 times slower)."""
    words, mask = qs.view(word), _LOW_NIBBLES[word]
    low = (words & mask).view(torch.uint8)
    high = (words >> 4).bitwise_and_(mask).view(torch.uint8)
    return torch.stack([low, high], -2)


def _high_bits(qh: torch.Tensor) -> torch.Tensor:
    """(n, 4) bytes, one little-endian 32-bit word -> (n, 32) uint8: bit j of the word, as 16."""
    shifts = torch.arange(8, dtype=torch.uint8, device=qh.device)
    return (((qh[:, :, None] >> shifts) & 1) << 4).view(-1, 32)  # (n, 4, 8) -> (n, 32)


_DECODERS = {
    "Q8_0": _q8_0,
    "Q4_0": _q4_0,
    "Q4_1": _q4_1,
    "Q5_0": _q5_0,
    "Q5_1": _q5_1,
    "Q4_K": _q4_k,
    "Q6_K": _q6_k,
}


class _NaNOps:
    """What quantized.decode needs beyond operators, in torch, for a table with a NaN scale,
    its NaNs decoded with NumPy's signs and payloads: a float16 NaN converted as IEEE says
    (torch's scalar conversion, past its last vector, makes each 0x7fffffff), and a value plus
    or minus a block's min keeping the value's NaN where both are NaN, as NumPy's loops do
    (torch's add kernel, an fma of the second operand, keeps the second's)."""

    @staticmethod
    def float16(pair: torch.Tensor) -> torch.Tensor:  # (n, 2) bytes -> (n, 1) float32
        bits = pair.contiguous().view(torch.int16)
        value = bits.view(torch.float16).float()
        # the half's bits sign-extended and shifted up by 13 put its sign, its exponent's ones
        # and its payload in place; | 0x7fc00000 the rest, quieted
        nan = (bits.int() << 13) | 0x7FC00000
        return torch.where(value.isnan(), nan.view(torch.float32), value)

    @staticmethod
    def add(values: torch.Tensor, mins: torch.Tensor) -> torch.Tensor:
        return torch.where(values.isnan(), values, values + mins)

    @staticmethod
    def subtract(values: torch.Tensor, mins: torch.Tensor) -> torch.Tensor:
        return torch.where(values.isnan(), values, values - mins)

    @staticmethod
    def int8(values: torch.Tensor) -> torch.Tensor:
        return values.view(torch.int8)

    @staticmethod
    def float32(values: torch.Tensor) -> torch.Tensor:
        return values.float()

    @staticmethod
    def stack(tensors: list, axis: int) -> torch.Tensor:
        return torch.stack(tensors, axis)

    @staticmethod
    def concat(tensors: list) -> torch.Tensor:
        return torch.cat(tensors, -1)


NAN_OPS = _NaNOps()


def scaled_inputs(token_table, token_ids=None, inputs_embeds=None, *, rule: str, value):
    """A model's input embeddings as transformers computes them (``positional.SCALE_RULES``):
    F.embedding, or inputs_embeds given instead, then ``x * embed_scale.to(x.dtype)`` (a
    float32 buffer: Gemma, MiniCPM) or ``x * multiplier`` (a Python float: Granite, Falcon-H1)
    where the rule applies."""
    validation.choice(rule, tuple(positional.SCALE_RULES), "embedding scale rule")
    table = validation.native(np.asarray(token_table))
    host_ids = None if token_ids is None else _host_ints(token_ids)
    given = to_numpy(inputs_embeds) if isinstance(inputs_embeds, torch.Tensor) else inputs_embeds
    ids, given = validation.check_scaled_inputs(table, host_ids, given, rule, value)
    if ids is None:
        x = inputs_embeds if isinstance(inputs_embeds, torch.Tensor) else _from_numpy(given)
    else:
        x = nn.functional.embedding(_as_tensor(ids.astype(np.int64)), _as_tensor(table))
    scale = positional.SCALE_RULES[rule]
    if ids is None and not scale["given"]:
        return x
    if scale["rounding"] == "buffer":
        return x * torch.tensor(value, dtype=torch.float32).to(x.dtype)
    return x * float(value)


class ScaledWordEmbedding(nn.Embedding):
    """Gemma's token lookup (transformers ``GemmaTextScaledWordEmbedding``): an nn.Embedding
    whose rows are multiplied by a float32 ``embed_scale`` buffer cast to the weights' dtype."""

    def __init__(self, token_table: np.ndarray):
        token_table = validation.native(np.asarray(token_table))
        validation.check_float_dtype(token_table.dtype.name, "token_table")
        super().__init__(*token_table.shape, _weight=_from_numpy(token_table))
        scale = torch.tensor(math.sqrt(token_table.shape[1]), dtype=torch.float32)
        self.register_buffer("embed_scale", scale, persistent=False)

    def forward(self, token_ids) -> torch.Tensor:
        validation.check_token_ids(_host_ints(token_ids), self.num_embeddings)
        ids = (
            token_ids if isinstance(token_ids, torch.Tensor) else _as_tensor(_host_ints(token_ids))
        )
        return super().forward(ids) * self.embed_scale.to(self.weight.dtype)


class BertEmbeddings(nn.Module):
    """BERT's input layer as transformers writes it: word, token-type and position
    nn.Embedding tables, ``(word + token_type) + position``, then an nn.LayerNorm if
    ``layer_norm`` = (gamma, beta, eps) is given."""

    def __init__(self, word_table, type_table, position_table, *, layer_norm=None):
        super().__init__()
        tables = [
            validation.native(np.asarray(t)) for t in (word_table, type_table, position_table)
        ]
        validation.check_bert_tables(*tables)
        self.word_embeddings, self.token_type_embeddings, self.position_embeddings = (
            nn.Embedding.from_pretrained(_from_numpy(t), freeze=False) for t in tables
        )
        self.LayerNorm = None
        if layer_norm is not None:
            gamma, beta, eps = layer_norm
            hidden = tables[0].shape[1]
            self.LayerNorm = nn.LayerNorm(hidden, eps=eps, dtype=_torch_dtype(tables[0].dtype))
            with torch.no_grad():
                self.LayerNorm.weight.copy_(_as_tensor(np.asarray(gamma, tables[0].dtype)))
                self.LayerNorm.bias.copy_(_as_tensor(np.asarray(beta, tables[0].dtype)))

    def forward(self, input_ids, token_type_ids, start: int = 0) -> torch.Tensor:
        host_ids = validation.check_token_ids(
            _host_ints(input_ids, "input_ids"), self.word_embeddings.num_embeddings
        )
        host_types = validation.check_token_type_ids(
            _host_ints(token_type_ids, "token_type_ids"),
            host_ids.shape,
            self.token_type_embeddings.num_embeddings,
        )
        length = host_ids.shape[-1]
        start = validation.check_positions(start, length, self.position_embeddings.num_embeddings)
        embeddings = self.word_embeddings(_as_tensor(host_ids))
        embeddings = embeddings + self.token_type_embeddings(_as_tensor(host_types))
        embeddings = embeddings + self.position_embeddings(torch.arange(start, start + length))
        return embeddings if self.LayerNorm is None else self.LayerNorm(embeddings)


def _weight(embedding: nn.Embedding) -> torch.Tensor:
    """embedding.weight; from its parameter dict when it is there (a parametrization, such
    as torch.nn.utils.parametrize, computes it instead: then through the attribute)."""
    weight = embedding._parameters.get("weight")
    return embedding.weight if weight is None else weight


def _readable_on_host(tensor: torch.Tensor) -> bool:
    """Whether the host can read the tensor in place (a CPU tensor: a zero-copy view)."""
    return tensor.is_cpu


def _check_on_device(ids: torch.Tensor, start, vocab_size: int, max_seq_len, tokenizer_size) -> int:
    """validation.check_call for int32/int64 ids on an accelerator, without copying them.

    Shape and start are metadata, checked on the host. The range is one reduction on the
    device, and reading its one-element flag is the call's only synchronisation (one
    ``aten::_local_scalar_dense``). Only when the flag is set are the ids copied to the
    host, to name the first bad one in the usual IndexError. Returns start as an int.
    """
    validation.check_ids_shape(ids.shape)
    if ids.numel() and bool(((ids < 0) | (ids >= vocab_size)).any()):
        validation.check_token_ids(ids.cpu().numpy(), vocab_size, tokenizer_size)  # raises
    return validation.check_positions(start, ids.shape[-1], max_seq_len)


def _host_ints(array, what: str = "token_ids") -> np.ndarray:
    """Ids or positions as a NumPy array for the shared checks (a view for CPU tensors)."""
    if isinstance(array, torch.Tensor):
        # bfloat16 and other torch-only dtypes have no NumPy twin: refuse them here.
        if array.dtype not in _INTEGER_DTYPES:
            raise validation.ids_dtype_error(str(array.dtype).removeprefix("torch."), what)
        return array.numpy() if array.is_cpu else array.detach().cpu().numpy()
    return validation.as_host(array)


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return getattr(torch, np.dtype(dtype).name)  # float64 float32 float16 bfloat16 share names


def _as_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing the array's memory where torch can (C order, writable, native)."""
    if not (array.flags.c_contiguous and array.flags.writeable and array.dtype.isnative):
        # torch.from_numpy refuses negative strides and warns on read-only arrays.
        array = np.array(array, dtype=array.dtype.newbyteorder("="), order="C")
    # torch.from_numpy knows no ml_dtypes.bfloat16: reinterpret the bits instead.
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _from_numpy(table: np.ndarray) -> torch.Tensor:
    """A copy the layer owns (from_numpy alone would share the caller's memory)."""
    return _as_tensor(table).clone()


def to_numpy(array: torch.Tensor) -> np.ndarray:
    array = array.detach().cpu()
    if array.dtype == torch.bfloat16:
        return array.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return array.numpy()


# --- 2-D positions: grid tables and patches (vision towers) --------------------------------


class PatchEmbedding(nn.Module):
    """A vision tower's first layer, as a torch module: ``nn.Conv2d(stride=patch_size)`` over
    the image, flattened to (B, h*w, D) as Hugging Face's ViTPatchEmbeddings does, + position
    rows; CLS, registers and the table are ``nn.Parameter``s.

    Arguments as ``numpy_backend.PatchEmbedding``. Where the images' grid differs from the
    table's, ``resize`` resizes the table on the host (the same bits as every backend's): that
    table is a constant of the call, so no gradient reaches the position table through it.
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
        super().__init__()
        arrays, self.grid, self.prefix_tokens = validation.check_patch_layer(
            projection, position_table, patch_size, bias, cls_token, registers, grid
        )
        self.channels = validation.choice(channels, validation.CHANNELS, "channels")
        self.resize = check_resize_kernel(resize)  # the argument hides the module
        self.patch_size = patch_size
        dim, in_channels = arrays["projection"].shape[:2]
        # skip_init: the weights come from outside, so torch's random init is never run.
        self.projection = nn.utils.skip_init(
            nn.Conv2d,
            in_channels,
            dim,
            patch_size,
            stride=patch_size,
            bias="bias" in arrays,
            dtype=_torch_dtype(arrays["projection"].dtype),
        )
        self.projection.weight = nn.Parameter(_from_numpy(arrays["projection"]))
        if "bias" in arrays:
            self.projection.bias = nn.Parameter(_from_numpy(arrays["bias"]))
        self.position_table = nn.Parameter(_from_numpy(arrays["position_table"]))
        for name in ("cls_token", "registers"):
            setattr(self, name, nn.Parameter(_from_numpy(arrays[name])) if name in arrays else None)

    @property
    def dtype(self) -> np.dtype:
        """The layer's dtype, as NumPy names it (follows .to(), .half() and the like)."""
        return validation.DTYPES[str(self.position_table.dtype).removeprefix("torch.")]

    def forward(self, images) -> torch.Tensor:
        """(B, C, H, W) images (or (B, H, W, C) with channels="last") -> (B, tokens, D)."""
        if not isinstance(images, torch.Tensor):
            images = _as_tensor(validation.native(np.asarray(images)))
        image_grid = validation.check_images(
            tuple(images.shape),
            str(images.dtype).removeprefix("torch."),
            self.patch_size,
            self.channels,
            self.projection.in_channels,
            self.dtype,
        )
        if self.channels == "last":
            # (B, C, H, W), contiguous: a channels_last-strided input would run another conv
            # kernel (another summation order) than the same image given channels first.
            images = images.permute(0, 3, 1, 2).contiguous()
        x = self.projection(images).flatten(2).transpose(1, 2)  # (B, D, h, w) -> (B, h*w, D)
        positions = self._grid_rows(image_grid)  # (prefix + h*w, D)
        x = x + positions[self.prefix_tokens :]
        prefix = []
        if self.cls_token is not None:
            cls = self.cls_token + positions[0] if self.prefix_tokens else self.cls_token
            prefix.append(cls.expand(len(x), 1, -1))  # (B, 1, D)
        if self.registers is not None:
            prefix.append(self.registers.expand(len(x), -1, -1))  # (B, R, D)
        return torch.cat([*prefix, x], dim=1)

    def _grid_rows(self, image_grid: tuple[int, int]) -> torch.Tensor:
        if image_grid == self.grid:
            return self.position_table
        if self.resize is None:
            raise validation.grid_mismatch(image_grid, self.grid, self.patch_size)
        table = resize.resize_table(
            to_numpy(self.position_table),
            self.grid,
            image_grid,
            kernel=self.resize,
            prefix_tokens=self.prefix_tokens,
        )
        return _as_tensor(table).to(self.position_table.device)



def sincos2d_table(
    grid, dim: int, *, rule: str = "mae", dtype="float32", prefix_tokens: int = 0, **options
) -> torch.Tensor:
    """(prefix_tokens + h*w, dim) fixed 2-D sin-cos table of an (h, w) grid by ``rule``: the
    host table (``backends.grid``) as a tensor, bit-identical on every backend."""
    table = grid_module.sincos2d_table(
        grid, dim, rule=rule, dtype=dtype, prefix_tokens=prefix_tokens, **options
    )
    return _as_tensor(table)


def patchify(images: torch.Tensor, patch_size: int, *, channels: str = "first") -> torch.Tensor:
    """(B, C, H, W) or (B, H, W, C) images -> (B, h*w, C*p*p) patch vectors (a reshape)."""
    if not isinstance(images, torch.Tensor):
        images = _as_tensor(validation.native(images))
    h, w = validation.check_patches(tuple(images.shape), patch_size, channels)
    p = patch_size
    if channels == "first":
        b, c = images.shape[:2]
        x = images.reshape(b, c, h, p, w, p).permute(0, 2, 4, 1, 3, 5)  # (B, h, w, C, p, p)
    else:
        b, c = images.shape[0], images.shape[3]
        x = images.reshape(b, h, p, w, p, c).permute(0, 1, 3, 2, 4, 5)  # (B, h, w, p, p, C)
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
) -> torch.Tensor:
    """A learned (prefix + h*w, dim) table resized to new_grid (H, W): (prefix + H*W, dim).

    path "host": ``resize.resize_table``'s bits. "native": ``F.interpolate`` with the kernel's
    mode, antialias and align_corners, and size= (or the scale factor DINOv2's rule or the
    caller gives), in the computation dtype (``compute_dtype``, or the table's) and cast back.
    "taps": host indices and float32 weights summed tap by tap by ``tap_resize``, bit-identical
    to NumPy's (for normal-range values: XLA's CPU flushes subnormals, NumPy and torch keep them).
    """
    validation.choice(path, resize.PATHS, "resize path")
    table = to_numpy(table) if isinstance(table, torch.Tensor) else table
    options = {"kernel": kernel, "prefix_tokens": prefix_tokens, "scale_factor": scale_factor,
               "compute_dtype": compute_dtype}  # fmt: skip
    if path == "host":
        return _as_tensor(resize.resize_table(table, old_grid, new_grid, **options))
    if path == "taps":
        plan = resize.taps(table, old_grid, new_grid, **options)
        table = _as_tensor(plan.table)
        grid = table[plan.prefix :].reshape(*plan.old, -1)  # (h, w, dim)
        for dtype in plan.inward:
            grid = grid.to(_torch_dtype(dtype))
        grid = tap_resize(grid, plan.rows, plan.columns)  # (H, W, dim)
        for dtype in plan.outward:
            grid = grid.to(_torch_dtype(dtype))
        return torch.cat([table[: plan.prefix], grid.reshape(-1, grid.shape[-1])])
    table, old, new, prefix, factors = resize.check_table(
        table, old_grid, new_grid, kernel=kernel, prefix_tokens=prefix_tokens,
        scale_factor=scale_factor,
    )  # fmt: skip
    rule = resize.KERNELS[kernel]
    compute = resize.computation_dtype(table.dtype, compute_dtype)
    if not rule.torch_shrinks and any(n_out < n_in for n_in, n_out in zip(old, new)):
        raise validation.no_framework_form(
            kernel, "torch", "when downsampling (F.interpolate's a = -0.5 comes only with "
            "antialias, which then widens the kernel)",
        )  # fmt: skip
    if rule.torch["antialias"] and compute.itemsize == 2:
        raise validation.no_framework_form(
            kernel, "torch", f"in {compute} (ATen's antialiased resize has no 16-bit CPU kernel)",
            "compute_dtype='float32' (as timm and DINOv2 resize), ",
        )  # fmt: skip
    if rule.torch["antialias"] and new[1] == 1 and new[0] not in (1, old[0]):
        raise validation.no_framework_form(
            kernel, "torch", "to one column (torch 2.13's antialiased resize gives every row of "
            "an (H, 1) output the first row's value, unless H is 1 or the input's height)",
        )  # fmt: skip
    table = _as_tensor(table)
    grid = table[prefix:].to(_torch_dtype(compute)).reshape(*old, -1).permute(2, 0, 1)
    size = {"size": new} if factors[0] is None else {"scale_factor": factors}
    resized = nn.functional.interpolate(grid[None], **rule.torch, **size)[0]  # (dim, H, W)
    resized = resized.permute(1, 2, 0).reshape(new[0] * new[1], -1).to(table.dtype)
    return torch.cat([table[:prefix], resized])


def tap_resize(grid: torch.Tensor, rows, columns) -> torch.Tensor:
    """(h, w, dim) -> (H, W, dim): rows = (indices (H, T), weights (H, T)) from the host, then
    columns likewise; each output the sum over t of weight * input, one product and one sum at
    a time in the order of t (NumPy's order)."""
    for dim, (indices, weights) in enumerate((rows, columns)):
        shape = [1, 1, 1]
        shape[dim] = len(indices)
        indices, weights = torch.as_tensor(indices), torch.as_tensor(weights)
        out = weights[:, 0].reshape(shape) * grid.index_select(dim, indices[:, 0])
        for tap in range(1, indices.shape[1]):
            out = out + weights[:, tap].reshape(shape) * grid.index_select(dim, indices[:, tap])
        grid = out
    return grid


def naflex_positions(table, old_grid, spatial_shapes, max_patches: int, *, path: str = "native"):
    """SigLIP2 NaFlex: the (h*w, dim) table resized per image to spatial_shapes[b] = (h, w),
    the antialiased bilinear kernel, padded to (B, max_patches, dim) with each image's (0, 0)
    row. path "host": ``resize.naflex_positions``'s bits; "native": Hugging Face's own
    computation (``Siglip2VisionEmbeddings.resize_positional_embeddings``, transformers 5.24),
    its float32 weights along each axis, their outer product times the table."""
    validation.choice(path, ("host", "native"), "NaFlex path")
    table = to_numpy(table) if isinstance(table, torch.Tensor) else table
    if path == "host":
        return _as_tensor(resize.naflex_positions(table, old_grid, spatial_shapes, max_patches))
    table, old, shapes, max_patches = resize.check_naflex(
        table, old_grid, spatial_shapes, max_patches
    )
    sizes = torch.from_numpy(shapes).float()[:, None]  # (B, 1, 2)
    positions = torch.arange(max_patches, dtype=torch.float32)[None, :, None]  # (1, P, 1)
    rows = torch.div(positions, sizes[..., 1:], rounding_mode="floor")
    index = torch.cat([rows, positions - rows * sizes[..., 1:]], dim=-1)  # (B, P, 2)
    index = index * (positions < sizes.prod(-1, keepdim=True))  # padding: position (0, 0)
    scale = torch.tensor(old, dtype=torch.float32) / sizes
    support = scale.clamp(min=1)
    center = (index + 0.5) * scale - 0.5
    weights = []
    for axis, side in enumerate(old):
        source = torch.arange(side, dtype=torch.float32)
        distance = (source - center[..., axis, None]).abs() / support[..., axis, None]
        axis_weights = (1 - distance).clamp(min=0)
        weights.append(axis_weights / axis_weights.sum(-1, keepdim=True))  # (B, P, side)
    weights = (weights[0][..., :, None] * weights[1][..., None, :]).flatten(-2)
    table = _as_tensor(table)
    return (weights @ table.float()).to(table.dtype)  # (B, P, dim)


# --- 2-D positions: rope2d (vision towers) ------------------------------------------------


class VisionRotaryEmbedding(nn.Module):
    """2-D rotary embedding in Hugging Face's vision shape (PixtralVisionRotaryEmbedding,
    Qwen2_5_VLVisionRotaryEmbedding): an ``inv_freq`` buffer, each frequency slot's float64
    constant (``rope2d.slot_map``) cast to the compute dtype in forward, and a ``slot_axes``
    buffer, the axis each slot reads (0 row, 1 column, -1 none: Flux's t, 0 for an image).
    forward(x, positions, grid) -> (N, head_dim/2) angles in the compute dtype, for positions
    already checked (``apply_rope2d`` checks them)."""

    def __init__(self, head_dim: int, spec):
        super().__init__()
        self.spec = spec
        slots = rope2d.slot_map(head_dim, spec)
        self.register_buffer("inv_freq", torch.from_numpy(slots.frequency), persistent=False)
        self.register_buffer("slot_axes", torch.from_numpy(slots.axis), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, grid=None) -> torch.Tensor:
        dtype = validation.check_float_dtype(str(x.dtype).removeprefix("torch."), "x")
        compute = _torch_dtype(positional.compute_dtype(dtype))
        prefix = positions[:, :1] < 0  # (N, 1): (-1, -1) marks a prefix token
        at = positions.to(x.device, compute)
        if self.spec.coordinates == "1-based":  # Llama 4: (frequencies_x + 1)
            at = at + 1
        if self.spec.reference_grid is not None:  # timm's EVA: t / feat * ref
            sides = torch.tensor(grid, dtype=compute, device=x.device)
            at = at / sides * torch.tensor(self.spec.reference_grid, dtype=compute, device=x.device)
        elif self.spec.coordinates in validation.NORMALIZED_COORDINATES:  # DINOv3's coords
            sides = torch.tensor(grid, dtype=compute, device=x.device)
            side = {"separate": sides, "max": sides.max(), "min": sides.min()}
            at = (at + 0.5) / side[self.spec.coordinates] * 2.0 - 1.0
        at = at.masked_fill(prefix.to(x.device), 0)  # a prefix token's angle is 0
        freqs = at[:, self.slot_axes.clamp(min=0)] * self.inv_freq.to(x.device, compute)
        return freqs.masked_fill(self.slot_axes < 0, 0)  # (N, head_dim/2)


def apply_rope2d(x, positions, *, spec, grid=None) -> torch.Tensor:
    """2-D rotary embedding of x (..., N, head_dim) at positions (N, 2), each token's (row,
    column) and (-1, -1) for a prefix token, by ``spec`` (``rope2d.Rope2D``); ``grid`` (h, w)
    for the normalized coordinates (DINOv3's). Layout "half" as Pixtral's apply_rotary_pos_emb
    (cos and sin in x's dtype); "interleaved" as Mistral's and Llama 4's complex product, in the
    compute dtype, cast back (``type_as``)."""
    if isinstance(x, torch.Tensor):
        validation.check_float_dtype(str(x.dtype).removeprefix("torch."), "x")
    else:
        x = np.asarray(x)
        validation.check_float_dtype(x.dtype.name, "x")
        x = _as_tensor(x)
    host, grid = validation.check_rope2d(
        tuple(x.shape), _host_ints(positions, "positions"), spec, grid
    )
    positions = _as_tensor(host)
    freqs = VisionRotaryEmbedding(x.shape[-1], spec).to(x.device)(x, positions, grid)
    if spec.layout == "half":
        cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        turned = x * torch.cat([cos, cos], -1) + _rotate_half(x) * torch.cat([sin, sin], -1)
    else:
        pairs = torch.view_as_complex(x.to(freqs.dtype).reshape(*x.shape[:-1], -1, 2))
        cis = torch.polar(torch.ones_like(freqs), freqs)  # (N, head_dim/2)
        turned = torch.view_as_real(pairs * cis).flatten(-2).type_as(x)
    if spec.prefix == "excluded":  # DINOv3 and EVA-02 rotate only the patches
        return torch.where(positions[:, :1].to(x.device) < 0, x, turned)
    return turned


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Hugging Face's rotate_half: (a, b) -> (-b, a), the halves of the last axis."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def raster_ids(grid, *, prefix: int = 0, prefix_last: bool = False) -> torch.Tensor:
    """(prefix + h*w, 2) (row, column) row-major (``meshgrid(..., indexing="ij")``), prefix
    rows (-1, -1) first or last."""
    (h, w), prefix = validation.check_id_grid(grid, prefix=prefix)
    prefix_last = validation.flag(prefix_last, "prefix_last")
    hpos_ids, wpos_ids = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    patches = torch.stack([hpos_ids.flatten(), wpos_ids.flatten()], dim=-1)
    marks = torch.full((prefix, 2), -1, dtype=torch.long)
    return torch.cat([patches, marks] if prefix_last else [marks, patches])


def merge_ids(grid, *, merge: int = 2) -> torch.Tensor:
    """(h*w, 2) in Qwen2-VL's merge-block order, as ``get_vision_position_ids`` builds it."""
    (h, w), merge = validation.check_id_grid(grid, merge=merge)
    hpos_ids, wpos_ids = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    block_shape = (h // merge, merge, w // merge, merge)
    hpos_ids = hpos_ids.reshape(block_shape).transpose(1, 2).flatten()
    wpos_ids = wpos_ids.reshape(block_shape).transpose(1, 2).flatten()
    return torch.stack([hpos_ids, wpos_ids], dim=-1)


def window_ids(grid, *, merge: int = 2, window: int = 4) -> torch.Tensor:
    """(h*w, 2) in Qwen2.5-VL's window order: the merge blocks permuted by the window index as
    ``get_vision_window_index`` builds it (padding with -100, dropped)."""
    (h, w), merge, window = validation.check_id_grid(grid, merge=merge, window=window)
    units_h, units_w = h // merge, w // merge
    index = torch.arange(units_h * units_w).reshape(units_h, units_w)
    pad_h, pad_w = window - units_h % window, window - units_w % window
    index_padded = nn.functional.pad(index, (0, pad_w, 0, pad_h), "constant", -100)
    windows_h, windows_w = (units_h + pad_h) // window, (units_w + pad_w) // window
    index_padded = index_padded.reshape(windows_h, window, windows_w, window).permute(0, 2, 1, 3)
    index_padded = index_padded.reshape(-1)
    window_index = index_padded[index_padded != -100]
    units = merge_ids((h, w), merge=merge).reshape(-1, merge * merge, 2)
    return units[window_index].reshape(-1, 2)


def flat_ids(grid, *, max_width: int) -> torch.Tensor:
    """(h*w,) Pixtral's flat ids row * max_width + column."""
    (h, w), max_width = validation.check_id_grid(grid, max_width=max_width)
    return (torch.arange(h)[:, None] * max_width + torch.arange(w)).flatten()
