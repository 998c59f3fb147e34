"""The contract every backend module fulfils, stated once.

A backend is a module (``backends.numpy_backend``, ``backends.torch_backend``,
``backends.jax_backend``) with the same names in the same order:

``name``
    The framework's import name: ``"numpy"``, ``"torch"`` or ``"jax"``.
``TokenPositionEmbedding(token_table, position_table=None, *, positions="learned",
max_seq_len=None, base=10000.0, layout="interleaved", padding_idx=None,
scale_grad_by_freq=False, tokenizer_size=None)``
    The input layer of a transformer. ``token_table`` is (vocab_size, dim) and
    ``position_table`` (max_seq_len, dim): NumPy arrays of one dtype out of
    float64, float32, float16 and bfloat16 (``ml_dtypes.bfloat16``). The layer
    holds copies as the framework's own parameters. ``token_table`` may instead be a
    ``quantized.QuantizedTable``, a GGUF file's blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
    Q6_K): a call decodes only the rows it reads, bit-identical on every backend to
    ``gguf.quants.dequantize(table)[ids]`` rounded to the table's dtype; it is not trained.
    ``tokenizer_size``: the tokenizer's id count where the table has padding rows past it
    (Qwen's 151936 rows for 151665 ids): those ids are rows, and an id past the table is
    refused naming the table's bound. ``positions="sinusoidal"``
    builds the table natively instead (max_seq_len rows, ``base``, ``layout``);
    ``positions="none"`` adds no position at all (RoPE applies it later).
    ``padding_idx`` and ``scale_grad_by_freq`` mean what they mean for
    ``torch.nn.Embedding``: the padding row is returned as stored and never
    learns; each token row's gradient is divided by its id's count in the input.
``gradients(layer, token_ids, upstream, start=0, *, sparse=False)``
    The backward pass: {"token_table": ..., "position_table": ...} (the second
    only for learned positions), d(loss)/d(table) for upstream = d(loss)/d(output)
    of the output's shape and dtype, as the framework's arrays. NumPy by hand
    (``np.add.at``), torch by autograd, JAX by ``jax.vjp``. With sparse=True the
    token gradient is (indices (K,), rows (K, dim)): the distinct ids, ascending,
    and each one's summed row. Row v of the token gradient is the sum of
    upstream[..., t, :] over every position with id v; row start + t of the
    position gradient is the sum over the batch. Bit-identical across backends
    where a row has at most two terms; beyond that the frameworks sum in their own
    order and agree within n * eps * sum(|terms|) (tests/test_gradients.py).
``sinusoidal_table(num_positions, dim, *, base, layout, dtype)``
    The fixed (num_positions, dim) table, layout "interleaved" or "concat".
``apply_rope(x, positions, *, base, layout, scaling, rotary_dim, mrope)``
    Rotary embedding of x (..., T, dim) at integer positions (T,), layout
    "half" or "interleaved", scaling None or a rope dict ("linear", "dynamic", "yarn",
    "longrope", "llama3"), the first rotary_dim dims turned. mrope {"layout", "section"}:
    multimodal RoPE at positions (3, T), the t, h and w rows, each frequency slot turned by
    its row (chunked slots: Qwen2-VL; interleaved: Qwen3-VL).
``apply_layer_rope(x, positions, layer_type, *, layers)``
    A model whose layers rotate differently (Gemma 3's sliding and global layers, Gemma 4's
    proportional rule, SmolLM3's NoPE layers): ``layers`` maps each layer type's name to its
    ``apply_rope`` options ({"base", "layout", "scaling", "rotary_dim"}), or None for a type
    that is not rotated, whose x comes back as it is. torch's ``LayerTypesRotaryEmbedding``
    keeps a rotary module, with its ``inv_freq`` buffer, per type.
``scaled_inputs(token_table, token_ids=None, inputs_embeds=None, *, rule, value)``
    A model's input embeddings: the rows of token_ids, or inputs_embeds given instead, times
    the model's scale where its rule applies (``positional.SCALE_RULES``: Gemma's and
    MiniCPM's module scale, Granite's and Falcon-H1's multiplier in forward), rounded as
    transformers rounds it; bit-identical on every backend.
``alibi_slopes(num_heads, *, dtype)``
    ALiBi's (num_heads,) slopes 2**(-8i/n) (Press et al. 2022), with BLOOM's rule for a
    head count that is not a power of two.
``alibi_bias(num_heads, q_len, k_len=None, *, causal=True, dtype)``
    The (num_heads, q_len, k_len) bias -slope * distance to add to the attention scores;
    causal=True puts -inf on keys after the query. Queries are the last q_len of the
    k_len positions.
``t5_relative_buckets(relative_position, *, bidirectional=True, num_buckets=32, max_distance=128)``
    T5's integer bucket of each relative position (key - query).
``t5_bias(bias_table, q_len, k_len=None, *, bidirectional=True, max_distance=128)``
    The (num_heads, q_len, k_len) bias gathered from a learned (num_buckets, num_heads)
    table; differentiable in the table in torch and JAX.
``to_numpy(array)``
    The framework's array as a NumPy array of the same dtype and shape.
``PatchEmbedding(projection, position_table, *, patch_size, bias=None, cls_token=None,
registers=None, grid=None, resize=None, channels="first")``
    A vision tower's first layer: images (B, C, H, W), or (B, H, W, C) with channels="last",
    cut into an (h, w) grid of patch_size patches, projected by ``projection`` (D, C, p, p)
    (torch's conv weight order) and ``bias`` (D,), plus one row of ``position_table``
    (prefix + h*w, D) per patch in raster order -> (B, [1] + [R] + h*w, D): ``cls_token`` (D,)
    plus the table's row 0 where it has that row (big_vision's table has none), then
    ``registers`` (R, D) with no position (DINOv2's), then the patches. torch an ``nn.Conv2d``
    (stride = patch size) with CLS, registers and table as parameters; JAX a jitted
    ``lax.conv_general_dilated`` over ``patch_params``; NumPy patchify and a matmul. The
    projection is within ``grid.patch_projection``'s derived tolerance of the float64
    reference; the position rows are added exactly. ``grid`` (h, w): the table's grid (None:
    the square of its rows after CLS's). Images of another grid are refused naming both grids
    and the fix, or with ``resize=`` (a kernel of ``resize.KERNELS``) the table is resized on
    the host, the same bits on every backend.
``sincos2d_table(grid, dim, *, rule="mae", dtype="float32", prefix_tokens=0, **options)``
    A fixed 2-D sin-cos table (prefix_tokens zero rows, then h*w rows) by rule
    (``grid.SINCOS2D_RULES``: MAE's, big_vision's ``temperature``, timm's ``temperature``,
    diffusers' ``base_size`` and ``interpolation_scale``), each as its source computes it, in
    float64 rounded once: bit-identical on every backend.
``patchify(images, patch_size, *, channels="first")``
    (B, C, H, W) images -> (B, h*w, C*p*p) patch vectors in (C, p, p) order, raster tokens;
    (B, H, W, C) with channels="last" -> (p, p, C) order (flax's kernel). A reshape, exact.
``resize_positions(table, old_grid, new_grid, *, kernel, prefix_tokens=0, scale_factor=None,
compute_dtype=None, path="native")``
    A learned (prefix + h*w, dim) table resized to the (H, W) grid new_grid: (prefix + H*W,
    dim), the prefix rows (CLS) as they were. ``kernel`` names one owner's rule
    (``resize.KERNELS``: torch's bicubic, antialiased bicubic and bilinear, Keys' bicubic as
    JAX has it, bilinear, bilinear with corners aligned, DINOv2's offset); ``scale_factor``
    (h, w) or one number: torch's, whose inverse is the scale, floor(old * factor) = new;
    ``compute_dtype``: the dtype the source resizes in ("float32" for timm's and DINOv2's
    upcast; None: the table's). path "host": the float64 resize rounded once
    (``resize.resize_table``), bit-identical on every backend; "native": the framework's own
    (``F.interpolate``; ``jax.image.resize`` or ``scale_and_translate`` under jit; NumPy has
    none: its taps), within ``resize.tolerance`` of the float64 reference; "taps": host indices
    and float32 weights summed tap by tap, bit-identical on NumPy, torch and eager JAX (JAX's
    ``tap_resize`` under ``jax.jit`` contracts into FMAs: within the tolerance). A kernel the
    framework cannot say (torch: Keys' bicubic; an antialiased one in 16 bits or to one
    column) is a ValueError naming the fix.
``naflex_positions(table, old_grid, spatial_shapes, max_patches, *, path="native")``
    SigLIP2's NaFlex: the (h*w, dim) table resized per image to spatial_shapes (B, 2) by the
    antialiased bilinear kernel, raster order, padded to (B, max_patches, dim) with each
    image's (0, 0) row as Hugging Face pads. "host": ``resize.naflex_positions``, bit-identical
    everywhere; "native": Hugging Face's float32 weights (torch: its bits), big_vision's canvas
    of ``scale_and_translate`` (JAX), within the tolerance.
``apply_rope2d(x, positions, *, spec, grid=None)``
    2-D rotary embedding of x (..., N, head_dim) at positions (N, 2), each token's integer
    (row, column) and (-1, -1) for a prefix token, by ``spec``, a ``rope2d.Rope2D`` (its slot
    rule, first axis, layout, frequencies, coordinates and prefix rule; ``rope2d.SPECS`` names
    Pixtral's, Qwen2-VL's, Qwen2.5-VL's, Llama 4's, DINOv3's, MoonViT's, EVA-02's and Flux's);
    ``grid`` (h, w) for DINOv3's normalized coordinates and EVA-02's stretched ones. Computed
    natively (torch as Hugging Face's vision rotary modules, a ``VisionRotaryEmbedding`` with
    ``inv_freq`` and ``slot_axes`` buffers; JAX jitted), within ``rope2d.bound`` of the float64
    reference.
``raster_ids``, ``merge_ids``, ``window_ids``, ``flat_ids``
    The token order of a grid (h, w), (N, 2) (row, column) ids: ``raster_ids(grid, *,
    prefix=0, prefix_last=False)`` row-major, prefix rows (-1, -1) first or last (Llama 4
    appends its CLS); ``merge_ids(grid, *, merge=2)`` in Qwen2-VL's merge x merge blocks;
    ``window_ids(grid, *, merge=2, window=4)`` in Qwen2.5-VL's windows of window x window
    merged units; ``flat_ids(grid, *, max_width)``, Pixtral's (h*w,) row * max_width + column.
    Integer ops, the same values on every backend: int64, int32 on JAX (no int64 outside its x64
    mode).

Calling the layer::

    y = layer(token_ids, start=0)     # (T,) -> (T, dim);  (B, T) -> (B, T, dim)
    y = layer(token_ids, out=y)       # reuse a result: NumPy and torch write into it,
                                      # JAX donates it (its memory is reused, y is replaced)
    y[..., t, :] == token_table[token_ids[..., t]] + position_table[start + t]

``token_ids`` is an integer array, NumPy or the framework's own. The result is
the framework's own array, bit-identical on every backend to the NumPy
expression ``token_table[token_ids] + position_table[start:start + T]``: a
gather is exact and one IEEE addition is correctly rounded.
``layer.token_embeddings(token_ids)`` and ``layer.position_embeddings(start, T)``
return the two terms of that sum.

Bad input raises before the lookup, the same way on every backend (see
``backends.validation``; checked on the host, except torch ids on an
accelerator, checked there with one synchronisation): ``TypeError`` for non-integer ids,
``ValueError`` for ids that are not 1-D or 2-D and for positions outside
``[0, max_seq_len)``, ``IndexError`` for an id outside ``[0, vocab_size)``, and
``ValueError`` at construction for tables of the wrong rank, dtype or width.

ALiBi slopes and biases, T5 buckets and T5 biases are bit-identical on every backend:
the slopes are float64 constants rounded once (through float32 for 16-bit dtypes), the
distances are integers, and the bucket boundaries are found in exact integer arithmetic
(``backends.positional.t5_bucket_starts``).

Sinusoidal tables and rotations are computed natively too, so they are not
bit-identical across backends (sin, cos and pow differ in the last bits); they
agree with the float64 reference in ``backends.positional`` within its
``tolerance``.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Layer(Protocol):
    positions: str  # "learned", "sinusoidal" or "none"
    vocab_size: int
    dim: int
    max_seq_len: int | None  # None for positions="none": no table, no limit
    dtype: np.dtype
    padding_idx: int | None  # in [0, vocab_size), or None
    scale_grad_by_freq: bool

    def __call__(self, token_ids: Any, start: int = 0, *, out: Any = None) -> Any: ...

    def token_embeddings(self, token_ids: Any) -> Any: ...

    def position_embeddings(self, start: int, length: int) -> Any: ...


class Backend(Protocol):
    name: str

    def TokenPositionEmbedding(
        self, token_table: np.ndarray, position_table: np.ndarray
    ) -> Layer: ...

    def gradients(
        self, layer: Layer, token_ids: Any, upstream: Any, start: int = 0, *, sparse: bool = False
    ) -> dict[str, Any]: ...

    def to_numpy(self, array: Any) -> np.ndarray: ...
