"""Resizing a learned 2-D position table to another grid, written once from each rule in float64.

A vision tower trained at a 14x14 grid of patches meets a 16x16 image: its (prefix + h*w, dim)
table is resized, the prefix rows (CLS) kept aside and re-attached untouched. There is no
single "bicubic": each named kernel below is one owner's exact rule, a record with its 1-D
weights (an (n_out, n_in) matrix, the resize separable: rows, then columns) and how torch and
JAX say it. Two paths:

- the **host path** (``resize_table``): the float64 weights applied in float64 and rounded
  once to the table's dtype (through the computation dtype where the source upcasts: DINOv2
  and timm resize a bfloat16 table in float32 and cast back). Every backend holds these bits,
  so it is bit-identical everywhere; timm's ``checkpoint_filter_fn``, big_vision's loader and
  keras-hub resize once at load this way.
- the **framework path**: ``F.interpolate`` or ``jax.image.scale_and_translate``, each
  computing its own weights and sums in float32; held to the float64 reference within
  ``tolerance``. Its explicit twin, the **tap form** (``taps``: host indices, float32 weights,
  summed element-wise tap by tap, rows then columns), is bit-identical in NumPy, torch and
  eager JAX; under ``jax.jit`` XLA contracts each multiply-add into an FMA (one rounding, not
  two), so jitted taps differ in the last bits, within the same tolerance.

``scale`` below is torch's and JAX's inverse scale, input pixels per output pixel: n_in/n_out
for ``size=``, 1/scale_factor for ``scale_factor=`` (``area_pixel_compute_scale``). An output
pixel i samples the input at src = (i + 0.5) * scale - 0.5 (half-pixel centres), or at
i * (n_in - 1)/(n_out - 1) with corners aligned.

Sources (read for each rule; paths as each owner names them): ATen
``aten/src/ATen/native/UpSample.h`` (``upsample_bicubic2d``, ``_compute_indices_weights_aa``);
JAX ``jax/_src/image/scale.py`` (``compute_weight_mat``, jax 0.10.2); Pillow
``src/libImaging/Resample.c``; scipy ``ndimage.zoom``; Hugging Face transformers 5.24
``models/vit/modeling_vit.py``, ``models/dinov2/modeling_dinov2.py``,
``models/dinov2_with_registers/modeling_dinov2_with_registers.py``,
``models/siglip2/modeling_siglip2.py``, ``models/qwen3_vl/modeling_qwen3_vl.py``;
DINOv2 ``dinov2/models/vision_transformer.py`` (``interpolate_pos_encoding``); timm
``timm/layers/pos_embed.py`` (``resample_abs_pos_embed``); big_vision
``big_vision/models/vit.py`` (``resample_posemb``),
``big_vision/models/proj/image_text/naflex_vit.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import ml_dtypes
import numpy as np

from backends import validation


def _cubic(a: float) -> Callable[[np.ndarray], np.ndarray]:
    """Keys' cubic convolution kernel of parameter a, of |x| in input pixels (support 2)."""

    def kernel(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x < 1, near, np.where(x < 2, far, 0.0))

    return kernel


def _triangle(x: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, 1 - np.abs(x))


_TORCH_CUBIC = _cubic(-0.75)  # ATen's upsample_bicubic2d, as OpenCV's INTER_CUBIC
_KEYS_CUBIC = _cubic(-0.5)  # ATen's antialiased path, JAX, Pillow, TensorFlow


def _half_pixel(n_in: int, n_out: int, scale: float) -> np.ndarray:
    return (np.arange(n_out) + 0.5) * scale - 0.5


def _corners(n_in: int, n_out: int, scale: float) -> np.ndarray:
    step = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0  # torch: scale 0 for one output
    return np.arange(n_out) * step


def _replicated(src: np.ndarray, n_in: int, kernel, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """ATen's non-antialiased resize: per output the taps floor(src) - radius + 1 .. floor(src)
    + radius, their indices clamped to the grid (the edge replicated: there several taps read
    one input, each a product ATen sums), the weights not renormalized (a cubic's sum to 1
    anyway). Returns (indices, weights), (n_out, 2 * radius) each."""
    index = np.floor(src)[:, None] + np.arange(1 - radius, radius + 1)  # (n_out, 2 * radius)
    return np.clip(index, 0, n_in - 1).astype(np.int64), kernel(src[:, None] - index)


def _normalized(src: np.ndarray, n_in: int, kernel, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Weights kernel(|src - j| / width) over the grid's j only, renormalized to sum 1 (JAX's
    ``compute_weight_mat``, ATen's ``_compute_indices_weights_aa``): (indices, weights), (n_out,
    n_in) each. JAX also gives a sample outside [-0.5, n_in - 0.5] no weight: a resize's never is
    (the last one is at (floor(n_in * factor) - 0.5) / factor - 0.5 < n_in - 0.5)."""
    weights = kernel((src[:, None] - np.arange(n_in)[None, :]) / width)  # (n_out, n_in)
    indices = np.broadcast_to(np.arange(n_in), weights.shape)
    return indices, weights / weights.sum(axis=1, keepdims=True)


def _matrix(taps: tuple[np.ndarray, np.ndarray], n_in: int) -> np.ndarray:
    """(n_out, n_in) weights: the taps reading one input summed, in the order of the taps."""
    indices, weights = taps
    matrix = np.zeros((len(indices), n_in))
    np.add.at(matrix, (np.arange(len(indices))[:, None], indices), weights)
    return matrix


def _torch_bicubic(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    return _replicated(_half_pixel(n_in, n_out, scale), n_in, _TORCH_CUBIC, 2)


def _antialiased_bicubic(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    # Downsampling widens the kernel by the scale: a low-pass filter before sampling.
    return _normalized(_half_pixel(n_in, n_out, scale), n_in, _KEYS_CUBIC, max(scale, 1.0))


def _keys_bicubic(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    return _normalized(_half_pixel(n_in, n_out, scale), n_in, _KEYS_CUBIC, 1.0)


def _bilinear(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    # ATen clamps a linear kernel's source at 0 (area_pixel_compute_source_index), and the
    # upper neighbour at the last row: the same weights as renormalizing at the edges.
    src = np.maximum(_half_pixel(n_in, n_out, scale), 0.0)
    return _replicated(src, n_in, _triangle, 1)


def _antialiased_bilinear(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    return _normalized(_half_pixel(n_in, n_out, scale), n_in, _triangle, max(scale, 1.0))


def _bilinear_corners(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    return _replicated(_corners(n_in, n_out, scale), n_in, _triangle, 1)


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A named resize rule: its taps, its sample points, how torch and JAX say it, who uses it.

    ``taps(n_in, n_out, scale)``: one axis' taps as torch sums them, (indices, float64 weights),
    (n_out, T) each (at a replicated edge several read one input; ``weight_matrix`` sums
    those). ``torch``: ``F.interpolate``'s options, or None where no options reproduce the
    rule (``torch_shrinks``: whether they do where an axis shrinks); ``jax``:
    ``jax.image.resize``'s (corners aligned: ``scale_and_translate``'s scale and translation
    emulate it), or None. ``offset``: DINOv2's ``interpolate_offset``, the
    scale factor (new + offset)/old the rule passes instead of a size. ``scale_factor``: whether
    the rule takes a caller's scale factor (torch's 1/scale_factor rule). ``align_corners``: the
    first and last samples on the first and last inputs' centres. ``slope``: for
    ``tolerance``, how far a sample moved by one pixel can move an output, per unit of the
    table (max over x of the sum over k of |K'(x - k)|: 3 for Keys' cubic at a = -0.5 and
    -0.75, 2 for the triangle; widened by antialiasing, less). ``support``: the kernel's
    half-width in input pixels before antialiasing widens it.
    """

    taps: Callable[[int, int, float], tuple[np.ndarray, np.ndarray]]
    sample: Callable[[int, int, float], np.ndarray]
    torch: dict | None
    jax: dict | None
    used_by: str
    slope: float  # the largest sum over the taps of |d weight / d src|: 3 for the cubics, 2 linear
    support: float  # 2 for the cubics, 1 for the triangle
    offset: float | None = None
    scale_factor: bool = True
    align_corners: bool = False
    torch_shrinks: bool = True


KERNELS = {
    "torch-bicubic": Kernel(
        _torch_bicubic,
        _half_pixel,
        torch={"mode": "bicubic", "antialias": False, "align_corners": False},
        jax={"method": "cubic-pytorch", "antialias": False},
        used_by="HF ViT, CLIP, SigLIP, DINOv2 interpolate_pos_encoding (vit/modeling_vit.py, "
        "dinov2/modeling_dinov2.py: size=); mlx-vlm MoonViT (kimi_vl/vision.py); HF Kimi-K2.5 "
        "(vision_utils.py)",
        slope=3,
        support=2,
    ),
    "antialiased-bicubic": Kernel(
        _antialiased_bicubic,
        _half_pixel,
        torch={"mode": "bicubic", "antialias": True, "align_corners": False},
        jax={"method": "cubic", "antialias": True},
        used_by="timm resample_abs_pos_embed and checkpoint_filter_fn (layers/pos_embed.py); HF "
        "DINOv2-with-registers (dinov2_with_registers/modeling_dinov2_with_registers.py); DINOv2 "
        "_reg hub models; jax.image.resize 'bicubic' (its default antialias=True); Pillow BICUBIC",
        slope=3,
        support=2,
    ),
    "keys-bicubic": Kernel(
        _keys_bicubic,
        _half_pixel,
        # ATen's a = -0.5 comes only with antialias, which widens the kernel by the scale where
        # an axis shrinks (_compute_indices_weights_aa): Keys' bicubic wherever none does.
        torch={"mode": "bicubic", "antialias": True, "align_corners": False},
        jax={"method": "cubic", "antialias": False},
        used_by="jax.image.resize 'bicubic' with antialias=False; Keras ops.image.resize on "
        "JAX and NumPy (keras/src/backend/*/image.py, antialias=False default), keras-hub DINOv2",
        slope=3,
        support=2,
        torch_shrinks=False,
    ),
    "bilinear": Kernel(
        _bilinear,
        _half_pixel,
        torch={"mode": "bilinear", "antialias": False, "align_corners": False},
        jax={"method": "linear", "antialias": False},
        used_by="timm's npz loader _load_weights (models/vision_transformer.py); HF PaddleOCR-VL, "
        "Muse Glimmer (vision_utils.py)",
        slope=2,
        support=1,
    ),
    "antialiased-bilinear": Kernel(
        _antialiased_bilinear,
        _half_pixel,
        torch={"mode": "bilinear", "antialias": True, "align_corners": False},
        jax={"method": "linear", "antialias": True},
        used_by="HF SigLIP2 NaFlex resize_positional_embeddings (siglip2/modeling_siglip2.py); "
        "big_vision NaFlex _pos_emb_resize and FlexiViT (proj/image_text/naflex_vit.py, "
        "proj/flexi/vit.py); jax.image.resize 'linear' (default); Pillow BILINEAR",
        slope=2,
        support=1,
    ),
    "bilinear-corners": Kernel(
        _bilinear_corners,
        _corners,
        torch={"mode": "bilinear", "antialias": False, "align_corners": True},
        jax={"method": "linear", "antialias": False},
        used_by="big_vision resample_posemb (models/vit.py: scipy.ndimage.zoom order=1, "
        "grid_mode=False); HF Qwen3-VL fast_pos_embed_interpolate (qwen3_vl/modeling_qwen3_vl.py: "
        "linspace(0, side - 1, size))",
        slope=2,
        support=1,
        scale_factor=False,  # corners aligned: the scale is (n_in - 1)/(n_out - 1), whatever asked
        align_corners=True,
    ),
    "dinov2-offset": Kernel(
        _torch_bicubic,
        _half_pixel,
        torch={"mode": "bicubic", "antialias": False, "align_corners": False},
        jax={"method": "cubic-pytorch", "antialias": False},
        used_by="DINOv2's own ViT-S/B/L/g (dinov2/models/vision_transformer.py "
        "interpolate_pos_encoding: interpolate_offset=0.1, interpolate_antialias=False); HF "
        "Dinov2Model passes size= instead (torch-bicubic) and differs",
        slope=3,
        support=2,
        offset=0.1,
        scale_factor=False,
    ),
}

PATHS = ("host", "native", "taps")


def check_kernel(kernel: str | None) -> str | None:
    """A kernel's name, or None (no resize): a ``PatchEmbedding``'s ``resize=``."""
    if kernel is None:
        return None
    return validation.choice(kernel, tuple(KERNELS), "resize kernel")


def check_table(table, old_grid, new_grid, *, kernel, prefix_tokens=0, scale_factor=None):
    """The arguments of every resize, checked once for every backend: returns (the table as a
    NumPy array, old (h, w), new (h, w), prefix_tokens, the (row, column) scale factors as torch
    is given them, or (None, None) for a size).

    Raises ValueError naming the value and the fix; TypeError for a non-integer size."""
    validation.choice(kernel, tuple(KERNELS), "resize kernel")
    table = validation.native(np.asarray(table))
    if table.ndim != 2 or table.dtype not in validation.DTYPES.values():
        raise ValueError(
            f"a position table must be 2-D (prefix + h*w, dim) of one of "
            f"{', '.join(validation.DTYPES)}, got {table.dtype} of shape {table.shape}: "
            "reshape an (h, w, dim) table to (h * w, dim)"
        )
    validation.check_grid(old_grid, "old_grid")
    old, prefix_tokens = validation.check_grid_rows(len(table), old_grid, prefix_tokens, "table")
    new = validation.check_grid(new_grid, "new_grid")
    return (
        table,
        old,
        new,
        prefix_tokens,
        _scale_factors(KERNELS[kernel], kernel, old, new, scale_factor),
    )


def _scale_factors(rule: Kernel, kernel: str, old, new, scale_factor) -> tuple:
    """The (row, column) scale factors torch is given, or (None, None) for a size."""
    if scale_factor is not None and not rule.scale_factor:
        raise ValueError(
            f"kernel {kernel!r} takes no scale_factor (it sets its own scale): pass new_grid alone"
        )
    if rule.offset is not None:  # DINOv2: float(w0 + interpolate_offset) / M, per axis
        return tuple((n_out + rule.offset) / n_in for n_in, n_out in zip(old, new))
    if scale_factor is None:
        return None, None
    return validation.check_scale_factor(scale_factor, old, new)


def _scale(n_in: int, n_out: int, factor: float | None) -> float:
    """Input pixels per output pixel: torch's area_pixel_compute_scale without corners."""
    return n_in / n_out if factor is None else 1.0 / factor


def weight_matrix(kernel: str, n_in: int, n_out: int, *, scale: float | None = None):
    """The (n_out, n_in) float64 weights of one axis; scale: input pixels per output pixel
    (None: the kernel's own, n_in / n_out as torch's size= or DINOv2's offset)."""
    rule, scale = _axis(kernel, n_in, n_out, scale)
    return _matrix(rule.taps(n_in, n_out, scale), n_in)


def sample_points(kernel: str, n_in: int, n_out: int, *, scale: float | None = None):
    """Where each of n_out outputs samples the old axis, in input pixels (0 .. n_in - 1 are the
    old patches' centres), before any edge rule: for pictures of the rules."""
    rule, scale = _axis(kernel, n_in, n_out, scale)
    return rule.sample(n_in, n_out, scale)


def _axis(kernel: str, n_in, n_out, scale) -> tuple[Kernel, float]:
    """One axis' kernel and scale, checked."""
    validation.choice(kernel, tuple(KERNELS), "resize kernel")
    n_in, n_out = validation.check_grid((n_in, n_out), "(n_in, n_out)")
    rule = KERNELS[kernel]
    if scale is None:
        factor = None if rule.offset is None else (n_out + rule.offset) / n_in
        scale = _scale(n_in, n_out, factor)
    return rule, scale


def _matrices(kernel: str, old, new, factors) -> tuple[np.ndarray, np.ndarray]:
    """The rows' (H, h) and the columns' (W, w) float64 weights, at torch's scale factors (None:
    a size)."""
    return tuple(
        _matrix(KERNELS[kernel].taps(n_in, n_out, _scale(n_in, n_out, factor)), n_in)
        for n_in, n_out, factor in zip(old, new, factors)
    )


def computation_dtype(dtype, compute_dtype) -> np.dtype:
    """The dtype a resize is computed in: the source's (compute_dtype), or the table's."""
    return validation.resolve_dtype(dtype if compute_dtype is None else compute_dtype)


def resize_table(
    table,
    old_grid,
    new_grid,
    *,
    kernel: str,
    prefix_tokens=0,
    scale_factor=None,
    compute_dtype=None,
) -> np.ndarray:
    """The host path: (prefix + h*w, dim) -> (prefix + H*W, dim), in the table's dtype.

    The table is cast to the computation dtype (``compute_dtype``: "float32" for DINOv2's and
    timm's upcast; None: the table's own), resized in float64 and rounded once to the
    computation dtype, then cast back. The prefix rows are returned as they are.
    """
    table, old, new, prefix, factors = check_table(
        table,
        old_grid,
        new_grid,
        kernel=kernel,
        prefix_tokens=prefix_tokens,
        scale_factor=scale_factor,
    )
    compute = computation_dtype(table.dtype, compute_dtype)
    rows, columns = _matrices(kernel, old, new, factors)
    grid = table[prefix:].astype(compute).astype(np.float64).reshape(*old, -1)  # (h, w, dim)
    resized = np.einsum("Hh,Ww,hwd->HWd", rows, columns, grid).reshape(new[0] * new[1], -1)
    resized = resized.astype(compute).astype(table.dtype)  # (H*W, dim)
    return np.concatenate([table[:prefix], resized])


def tap_table(weights: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """A weight matrix (n_out, n_in) as taps: per output, its inputs' indices (n_out, T) int64,
    ascending, and their weights (n_out, T) rounded once to ``dtype``; an output with fewer taps
    padded with index 0 and weight 0 (0 * x adds nothing to a finite sum)."""
    count = max(1, int((weights != 0).sum(axis=1).max()))
    order = np.argsort(weights == 0, axis=1, kind="stable")[:, :count]  # nonzero ones first
    values = np.take_along_axis(weights, order, axis=1)
    return np.where(values != 0, order, 0), values.astype(dtype)


@dataclasses.dataclass(frozen=True)
class Taps:
    """The tap form of one resize, made on the host: the checked table, its prefix rows, the
    grids, each axis' (indices, weights), and the dtypes the grid is cast through on its way in
    (``inward``: the computation dtype, then the sums', float32 or float64 for float64) and the
    sums on their way out (``outward``: the computation dtype, then the table's; from float64 to
    16 bits through float32, as NumPy, torch and JAX each round the same way only so)."""

    table: np.ndarray
    prefix: int
    old: tuple[int, int]
    new: tuple[int, int]
    rows: tuple[np.ndarray, np.ndarray]  # (H, T_r) indices into the old rows, weights
    columns: tuple[np.ndarray, np.ndarray]  # (W, T_c) into the old columns
    inward: tuple[np.dtype, ...]
    outward: tuple[np.dtype, ...]


def taps(
    table,
    old_grid,
    new_grid,
    *,
    kernel: str,
    prefix_tokens=0,
    scale_factor=None,
    compute_dtype=None,
) -> Taps:
    """The tap form of a resize: the host's indices and weights, for any backend to sum."""
    table, old, new, prefix, factors = check_table(
        table,
        old_grid,
        new_grid,
        kernel=kernel,
        prefix_tokens=prefix_tokens,
        scale_factor=scale_factor,
    )
    compute = computation_dtype(table.dtype, compute_dtype)
    accumulate = np.dtype(np.float64) if compute == np.float64 else np.dtype(np.float32)
    rows, columns = (tap_table(m, accumulate) for m in _matrices(kernel, old, new, factors))
    # torch casts float64 to float16 through float32; NumPy and JAX directly: say one way.
    narrow = (np.dtype(np.float32),) if compute == np.float64 and table.itemsize == 2 else ()
    outward = (compute, *narrow, table.dtype)
    return Taps(table, prefix, old, new, rows, columns, (compute, accumulate), outward)


def tolerance(
    kernel: str,
    old_grid,
    new_grid,
    *,
    magnitude: float,
    dtype,
    compute_dtype=None,
    scale_factor=None,
    one_sum: bool = False,
) -> float:
    """Largest |framework path - float64 reference| for a table of largest |value| ``magnitude``
    (the framework computing in ``compute_dtype``, or the table's ``dtype``; ``one_sum``: each
    output one sum over 2-D weights, as the NumPy NaFlex matmul, not rows then columns).

    Derivation, with u = half the eps of the computation dtype (its unit roundoff), v = half
    the table dtype's, w = float32's (float64's for a float64 computation), and per axis at
    most T taps of weights of l1 norm at most L (T_r, L_r: the rows; T_c, L_c: the columns),
    the taps as torch sums them (``Kernel.taps``: at a replicated edge, and across a one-pixel
    axis, several taps read one input, each a product of its own: torch sums 4 of weights of
    l1 norm up to 1.375 where the merged matrix holds one weight of 1):
    - sums: products and sums in float32 for a 16-bit or float32 computation (ATen's opmath,
      XLA's dots of 16-bit inputs), float64 for float64. A sum of n products errs by at most
      n * w times the sum of |terms| (Higham, Accuracy and Stability, 3.1, to first order).
      torch, JAX's einsum and the taps sum the rows, then the columns: T_r * w * L_r, carried
      by the columns' L_c, then T_c * w of terms summing to L_r * L_c; ``one_sum`` sums T_r *
      T_c products of 2-D weights, each a rounded product of two: w * (T_r + T_c) * L_r * L_c,
      or w * (T_r * T_c + 1) * L_r * L_c.
    - weights: computed in float32 (``_weight_error``): per axis E, the largest sum over an
      output's taps of |float32 weight - exact|, in units of w: 4 a tap at inexact points
      (the kernel's polynomial and the normalization's division), L (the division alone) at
      points exact in binary, 0 where every weight is then exact too (14 -> 16):
      w * (E_r * L_c + E_c * L_r). A 16-bit computation then rounds every weight to it (ATen
      keeps a 16-bit resize's weights in its dtype, JAX casts its weight matrices to the
      image's), each off by u of itself, and stores the pass between the rows and the columns
      in it (JAX's two contractions): 3u * L_r * L_c.
    - coordinates (``_coordinate_error``): per axis the largest distance d between a sample
      point as torch or JAX computes it in float32 and the reference's, emulated bit for bit
      (with and without a fused multiply-add; plus an antialiased kernel's width, rounded);
      a sample moved by d moves an output by at most d * S * magnitude * (the other axis' L),
      S the largest sum over the taps of |d weight / d src| (``Kernel.slope``):
      S * (d_r * L_c + d_c * L_r). It is zero where the scale and the points are exact in
      binary (14 -> 16: 0.875); 14 -> 10 (1.4), DINOv2's offset (0.1) and corners aligned
      (13/15) are where it shows. In float64: three roundings of values below n_in, 3w * n_in.
    - rounding: the result in the computation dtype, then in the table's where that differs:
      (u + v) times an output of at most L_r * L_c * magnitude.
    - underflow, an absolute term: rounding a value below a dtype's normal range errs by up to
      half its smallest subnormal s, not u of itself (sums are exact there, Higham 2.1): s_w/2
      a product of the arithmetic, T_r * L_c + T_c of them (``one_sum``: T_r * T_c); s_u/2 the
      result in the computation dtype (a 16-bit one: also L_c times the middle pass, and s_u/2
      of each weight times magnitude, T_r * L_c + T_c * L_r of them), s_v/2 in the table's. A
      float16 table of magnitude 3e-6 errs by 2**-25 in every correct implementation. XLA's CPU
      runtime flushes float32 subnormals to zero: JAX leaves the bound where float32 values
      fall below 2**-126 (a float32 or bfloat16 table of magnitude below about 1e-37).
    Measured (a 14x14x64 standard normal table, seed 0, to 16x16, 10x10 and 10x16, and to 5, 7,
    9, 12, 13, 15, 21, 28 a side, 20x9 and 5x28; every kernel torch or JAX has, the worse of
    the two): in float32 the worst case is 1/3 to 1/15 of this at 14 -> 16, 10x10 and 10x16
    (torch's bicubic at 14 -> 16, where only the sums and the last rounding remain: 1/8 to
    1/11 over seeds 0 to 7), 1/7.5 the median of all 91, and 1/24 to 1/106 only where
    antialiasing widens the kernel most (14 -> 9, 7 and 5: 6 to 12 taps). What remains is the
    sums' and the weights' worst case, every rounding at its extreme and of one sign, which
    grows with the taps where a random table's errors grow about as their square root. In
    bfloat16: 1/2.6 to 1/15; a bfloat16 table computed in float32: 1/1.8 to 1/11 (its one
    last rounding dominates); in float64, 1/10 to 1/200 (its coordinate term bounded, not
    emulated). Two different kernels differ by 7000 times it and more.
    """
    old = validation.check_grid(old_grid, "old_grid")
    new = validation.check_grid(new_grid, "new_grid")
    rule = KERNELS[validation.choice(kernel, tuple(KERNELS), "resize kernel")]
    factors = _scale_factors(rule, kernel, old, new, scale_factor)
    dtype = validation.resolve_dtype(dtype)
    compute = computation_dtype(dtype, compute_dtype)
    arithmetic = np.dtype(np.float64 if compute == np.float64 else np.float32)
    (u, s_u), (v, s_v), (w, s_w) = (
        (float(ml_dtypes.finfo(t).eps) / 2, float(ml_dtypes.finfo(t).smallest_subnormal) / 2)
        for t in (compute, dtype, arithmetic)
    )
    norms, counts, moves, errors = [], [], [], []
    for n_in, n_out, factor in zip(old, new, factors):
        scale = _scale(n_in, n_out, factor)
        _, taps = rule.taps(n_in, n_out, scale)  # (n_out, T)
        norms.append(float(np.abs(taps).sum(axis=1).max()))
        counts.append(int((taps != 0).sum(axis=1).max()))
        if compute == np.float64:
            moves.append(3 * w * n_in)
        else:
            moves.append(_coordinate_error(rule, n_in, n_out, factor))
        errors.append(_weight_error(rule, taps, n_in, scale, moves[-1] > 0))
    (l_r, l_c), (t_r, t_c), (d_r, d_c), (e_r, e_c) = norms, counts, moves, errors
    narrow = compute != arithmetic  # a 16-bit computation's weights and middle pass
    sums = w * (t_r * t_c + 1 if one_sum else t_r + t_c) * l_r * l_c
    weights = w * (e_r * l_c + e_c * l_r)
    if narrow:
        weights += 3 * u * l_r * l_c + s_u * (t_r * l_c + t_c * l_r)
    coordinates = rule.slope * (d_r * l_c + d_c * l_r)
    rounding = (u + (v if dtype != compute else 0.0)) * l_r * l_c
    products = t_r * t_c if one_sum else t_r * l_c + t_c
    underflow = products * s_w + (l_c * s_u if narrow else 0.0) + s_u
    underflow += s_v if dtype != compute else 0.0
    return magnitude * (sums + weights + coordinates + rounding) + underflow


def _coordinate_error(rule: Kernel, n_in: int, n_out: int, factor) -> float:
    """The largest |sample point torch or JAX computes in float32 - the reference's| of one
    axis, in input pixels. An antialiased kernel widened by the scale adds its width's
    rounding times its support (every tap's distance scaled by the width's relative error:
    torch multiplies by float32(1 / scale), JAX divides by its float32 scale)."""
    if n_in == 1:  # every output reads the one input, whatever its point
        return 0.0
    scale = _scale(n_in, n_out, factor)
    exact = rule.sample(n_in, n_out, scale)
    i = np.arange(n_out, dtype=np.float64)
    if rule.align_corners:
        points = _corner_points(n_in, n_out, i)
    else:
        points = [p for s in _float32_scales(n_in, n_out, factor) for p in _half_pixel_points(s, i)]
    error = max(float(np.abs(p - exact).max()) for p in points)
    if rule.jax["antialias"] and scale > 1:
        torch_scale, jax_scale = _float32_scales(n_in, n_out, factor)
        widths = (1 / float(np.float32(1) / np.float32(torch_scale)), jax_scale)
        error += rule.support * max(abs(width - scale) for width in widths)
    return error


def _weight_error(rule: Kernel, weights: np.ndarray, n_in: int, scale: float, moved: bool) -> float:
    """The largest sum over one output's taps of |float32 weight - exact|, in units of float32's
    unit roundoff w. At moved or inexact points: 4w a tap (the kernel's polynomial, at most
    three roundings of terms below 2, and the normalization's division). At exact points
    that are multiples of 2**-5 kernel widths, the width a power of two (dividing by it exact),
    every intermediate of a cubic's Horner form (|x| < 3, coefficients of two fractional bits)
    is a multiple of 2**-17 below 16, exact in float32's 24 bits: only the normalization's
    division rounds, w of each weight (L of them all), and not even that where every weight is
    a multiple of 2**-17 (14 -> 16 at 0.875; 14 -> 7, widened by 2)."""
    count = int((weights != 0).sum(axis=1).max())
    width = max(scale, 1.0) if rule.jax["antialias"] else 1.0
    n_out = len(weights)
    exact = np.log2(width).is_integer() and _multiples(
        rule.sample(n_in, n_out, scale), width * 2.0**-5
    )
    if moved or not exact:
        return 4.0 * count
    return 0.0 if _multiples(weights, 2.0**-17) else float(np.abs(weights).sum(axis=1).max())


def _multiples(x: np.ndarray, step: float) -> bool:
    return bool(np.all(np.mod(x, step) == 0))


def _float32(x) -> np.ndarray:
    """x rounded once to float32, held in float64: where x is a product or a difference of a
    few float32 values, exact in float64, this is float32 arithmetic's one rounding."""
    return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)


def _float32_scales(n_in: int, n_out: int, factor) -> tuple[float, float]:
    """Input pixels per output pixel as torch and JAX hold them, in float32: torch's
    ``compute_scales_value`` (ATen ``UpSample.h``: float(n_in) / n_out, or float(1.0 / factor)),
    JAX's ``_resize`` (``jax/_src/image/scale.py``: 1. / (n_out / n_in) in Python, then
    float32) or ``compute_weight_mat``'s 1. / scale of a float32 factor, in float32."""
    if factor is None:
        return float(np.float32(n_in) / np.float32(n_out)), float(np.float32(1.0 / (n_out / n_in)))
    return float(np.float32(1.0 / factor)), float(np.float32(1) / np.float32(factor))


def _half_pixel_points(scale: float, i: np.ndarray) -> list[np.ndarray]:
    """(i + 0.5) * scale - 0.5 in float32, each way torch and JAX may round it: the product
    and the difference each rounded, or fused into one rounding (an FMA, which XLA contracts
    where it can), or the difference left exact (torch's antialiased taps, at
    j - float32((i + 0.5) * scale) + 0.5)."""
    product = (i + 0.5) * scale
    return [_float32(_float32(product) - 0.5), _float32(product - 0.5), _float32(product) - 0.5]


def _corner_points(n_in: int, n_out: int, i: np.ndarray) -> list[np.ndarray]:
    """i * (n_in - 1)/(n_out - 1) as torch computes it (float32 scale, one product) and as
    ``scale_and_translate`` does for ``jax_backend``'s corners (float32 scale s = (n_out - 1) /
    (n_in - 1) and translation 0.5 * (1 - s), sampled at (i + 0.5)/s - translation/s - 0.5),
    each product rounded or fused into the difference."""
    step = np.float32(n_in - 1) / np.float32(n_out - 1) if n_out > 1 else 0.0
    scale = (n_out - 1) / (n_in - 1) if n_out > 1 else 1.0
    inverse = float(np.float32(1) / np.float32(scale))
    shift = float(np.float32(0.5 * (1 - scale))) * inverse
    points = [_float32(float(step) * i)]
    for product in ((i + 0.5) * inverse, _float32((i + 0.5) * inverse)):
        for subtracted in (shift, _float32(shift)):
            points.append(_float32(_float32(product - subtracted) - 0.5))
    return points


def check_naflex(table, old_grid, spatial_shapes, max_patches):
    """SigLIP2 NaFlex's arguments: (the table, its (h, w) grid, spatial_shapes (B, 2) int64,
    max_patches), each image's grid positive and of at most max_patches patches."""
    table, old, _, _, _ = check_table(table, old_grid, old_grid, kernel="antialiased-bilinear")
    shapes = np.asarray(spatial_shapes)
    if shapes.ndim != 2 or shapes.shape[1] != 2 or shapes.dtype.kind not in "iu":
        raise ValueError(
            f"spatial_shapes must be integers (B, 2), each image's (h, w) grid, got "
            f"{shapes.dtype} of shape {shapes.shape}"
        )
    if len(shapes) == 0:
        raise ValueError(
            "spatial_shapes has no images (B = 0): give at least one image's (h, w) grid"
        )
    max_patches = validation.integer(max_patches, "max_patches")
    for index, grid in enumerate(shapes.tolist()):
        h, w = validation.check_grid(grid, f"spatial_shapes[{index}]")
        if h * w > max_patches:
            raise ValueError(
                f"spatial_shapes[{index}] = {(h, w)} has {h * w} patches, more than max_patches "
                f"{max_patches}: pad to at least {h * w} patches, or give a smaller grid"
            )
    return table, old, shapes.astype(np.int64), max_patches


def naflex_positions(table, old_grid, spatial_shapes, max_patches) -> np.ndarray:
    """SigLIP2 NaFlex, the host path: (h*w, dim) -> (B, max_patches, dim) in the table's dtype.

    Image b's rows are the table resized to its spatial_shapes[b] = (h, w) by the antialiased
    bilinear kernel (the weights Hugging Face writes out in ``resize_positional_embeddings``),
    raster order, then padding up to max_patches: every padding row is the image's first row,
    the (0, 0) position's (HF gives a padding position the output index (0, 0)). Computed in
    float64 and rounded once through float32, Hugging Face's computation dtype.
    """
    table, old, shapes, max_patches = check_naflex(table, old_grid, spatial_shapes, max_patches)
    out = np.empty((len(shapes), max_patches, table.shape[1]), table.dtype)
    for image, (h, w) in enumerate(shapes.tolist()):
        resized = resize_table(
            table, old, (h, w), kernel="antialiased-bilinear", compute_dtype="float32"
        )  # (h*w, dim)
        out[image, : h * w] = resized
        out[image, h * w :] = resized[0]
    return out
