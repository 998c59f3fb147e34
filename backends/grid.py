"""2-D positions (vision towers), the grid side: fixed 2-D sin-cos tables by name (with their
zero prefix rows), patches in order, and the patch projection's float64 reference and
tolerance. Float64 NumPy; no framework is imported here.

A vision tower's first layer cuts an image into an (h, w) grid of p x p patches, projects
each patch to ``dim`` (a strided conv, or a matmul over flattened patches), and adds one
position row per patch, tokens in raster order (row i, column j is token i * w + j). The
position rows are a learned table or a fixed 2-D sin-cos table; a learned table may hold a
prefix row before the grid (CLS's position, row 0). DINOv2's registers (Darcet et al. 2024,
``dinov2/models/vision_transformer.py``: ``torch.cat((x[:, :1], register_tokens, x[:, 1:]))``
after the add) are tokens of their own placed after CLS and carry no position: they are never
rows of the table. How a learned table's rows split into prefix and grid is checked once for
every backend, in ``validation.check_patch_layer``.

Sin-cos tables: one plain function per rule, each computed as its source computes it
(``SINCOS2D_RULES``, as Hugging Face's ``ROPE_INIT_FUNCTIONS``), in float64 and rounded once
(``sincos2d_table``): every backend holds the same bits. Every rule spends D/4 columns on each
of sin and cos of each axis; they differ in the quarters' order, the frequency exponent's
divisor, the grid's meshgrid order and the positions:

- "mae": MAE, ``util/pos_embed.py`` ``get_2d_sincos_pos_embed`` (facebookresearch/mae, commit
  be47fef): ``np.meshgrid(grid_w, grid_h)`` ('xy', "here w goes first") so the half it names
  ``emb_h`` encodes the column: quarters [sin w, cos w, sin h, cos h]; w_k = 10000**(-k/(D/4)),
  ``np.float`` (float64) frequencies. Square grids only there; (h, w) here as diffusers does.
- "big_vision": ``big_vision/models/vit.py`` ``posemb_sincos_2d`` ("Follows the MoCo v3
  logic"): ``y, x = jnp.mgrid[:h, :w]``, [sin x, cos x, sin y, cos y] (MAE's order),
  w_k = temperature**(-k/(D/4 - 1)): the lowest frequency is exactly 1/temperature.
- "timm": ``timm/layers/pos_embed_sincos.py`` ``build_sincos2d_pos_embed`` (defaults
  ``reverse_coord=False``, ``interleave_sin_cos=False``): ``ndgrid`` ('ij') over (H, W),
  quarters h first [sin h, sin w, cos h, cos w]; w_k = temperature**(-k/(D/4)), MAE's.
- "diffusers": ``diffusers/models/embeddings.py`` ``get_2d_sincos_pos_embed`` (DiT, PixArt,
  SD3): MAE's table at positions i / (n / base_size) / interpolation_scale per axis, divided
  in float32 as diffusers divides them (``np.arange(n, dtype=np.float32) / ...``); with
  ``base_size`` the grid's side and ``interpolation_scale=1`` it is MAE's table bit for bit.

MAE and diffusers compute in float64 and store float32 (MAE copies into a float32 parameter,
diffusers a ``.float()`` buffer). big_vision computes in float32 (jnp's default) and timm too
(``torch.float32`` grids and bands): their own tables differ from the rounded float64 table
here by a few float32 ulps of an angle (tests/test_grid2d.py measures it: within
``positional.tolerance``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from backends import positional, validation


# --- fixed 2-D sin-cos tables: one function per rule ----------------------------------------
#
# Each takes (h, w, dim) and the rule's options (validation.SINCOS2D_RULES names them) and
# returns the (h * w, dim) float64 table, rows in raster order.


def _mae_1d(dim: int, positions: np.ndarray) -> np.ndarray:
    """MAE's ``get_1d_sincos_pos_embed_from_grid``: [sin, cos] of positions * w_k, (M, dim)."""
    omega = 1.0 / 10000.0 ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2.0))  # (dim/2,)
    angles = np.outer(positions.reshape(-1), omega)  # (M, dim/2)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def _mae_2d(dim: int, grid_h: np.ndarray, grid_w: np.ndarray) -> np.ndarray:
    """MAE's ``get_2d_sincos_pos_embed``: meshgrid(grid_w, grid_h) ('xy'), so its ``grid[0]``,
    the half it calls ``emb_h``, is the column: [sin w, cos w, sin h, cos h]."""
    columns, rows = np.meshgrid(grid_w, grid_h)  # (h, w) each
    return np.concatenate([_mae_1d(dim // 2, columns), _mae_1d(dim // 2, rows)], axis=1)


def _mae(h: int, w: int, dim: int) -> np.ndarray:
    return _mae_2d(dim, np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32))


def _big_vision(h: int, w: int, dim: int, *, temperature: float = 10000.0) -> np.ndarray:
    y, x = np.mgrid[:h, :w]  # (h, w) each: row and column indices
    omega = 1.0 / temperature ** (np.arange(dim // 4) / (dim // 4 - 1))  # (dim/4,)
    y, x = np.outer(y.ravel(), omega), np.outer(x.ravel(), omega)  # (h*w, dim/4)
    return np.concatenate([np.sin(x), np.cos(x), np.sin(y), np.cos(y)], axis=1)


def _timm(h: int, w: int, dim: int, *, temperature: float = 10000.0) -> np.ndarray:
    bands = 1.0 / temperature ** (np.arange(dim // 4) / (dim // 4))  # (dim/4,)
    rows, columns = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")  # (h, w) each
    grid = np.stack([rows.ravel(), columns.ravel()], axis=1)  # (h*w, 2): (row, column)
    angles = grid[:, :, None] * bands  # (h*w, 2, dim/4)
    # stack on axis 1 then flatten: [sin h, sin w, cos h, cos w]
    return np.stack([np.sin(angles), np.cos(angles)], axis=1).reshape(h * w, dim)


def _diffusers(
    h: int, w: int, dim: int, *, base_size: float = 16, interpolation_scale: float = 1.0
) -> np.ndarray:
    # NumPy >= 2 divides a float32 array by a Python float in float32 (NEP 50), as diffusers'
    # torch version (float32 tensors) does: the positions are float32, the rest float64.
    grid_h = np.arange(h, dtype=np.float32) / (h / base_size) / interpolation_scale
    grid_w = np.arange(w, dtype=np.float32) / (w / base_size) / interpolation_scale
    return _mae_2d(dim, grid_h, grid_w)


SINCOS2D_RULES = {
    "mae": _mae,
    "big_vision": _big_vision,
    "timm": _timm,
    "diffusers": _diffusers,
}


def sincos2d_table(
    grid, dim: int, *, rule: str = "mae", dtype="float64", prefix_tokens: int = 0, **options
) -> np.ndarray:
    """(prefix_tokens + h*w, dim) fixed 2-D sin-cos table of an (h, w) grid, by ``rule``.

    Rows in raster order after ``prefix_tokens`` zero rows (MAE's ``cls_token=True``,
    diffusers' ``extra_tokens``). ``options``: the rule's own (``temperature`` for big_vision
    and timm, ``base_size`` and ``interpolation_scale`` for diffusers). Computed in float64
    and rounded once to ``dtype``, through float32 for the 16-bit dtypes (the sources store a
    float32 table, which a 16-bit model then casts).
    """
    dtype = validation.resolve_dtype(dtype)
    (h, w), dim, prefix_tokens, options = validation.check_sincos2d(
        grid, dim, rule, prefix_tokens, options
    )
    rows = SINCOS2D_RULES[rule](h, w, dim, **options)  # (h*w, dim)
    table = np.concatenate([np.zeros((prefix_tokens, dim)), rows])
    return table.astype(positional.compute_dtype(dtype)).astype(dtype)


# --- patches in order ---------------------------------------------------------------------


def patchify(images: np.ndarray, patch_size: int, *, channels: str = "first") -> np.ndarray:
    """Images -> (B, h*w, C*p*p) patch vectors in raster order, a pure reshape (exact).

    channels="first": images (B, C, H, W), each vector in (C, p, p) order, the order of
    torch's ``nn.Conv2d`` weight (D, C, p, p). channels="last": images (B, H, W, C), each
    vector in (p, p, C) order, as flax's ``nn.Conv`` kernel (p, p, C, D) and big_vision
    flatten it.
    """
    images = validation.native(images)
    h, w = validation.check_patches(images.shape, patch_size, channels)
    batch, p = images.shape[0], patch_size
    if channels == "first":
        c = images.shape[1]
        x = images.reshape(batch, c, h, p, w, p).transpose(0, 2, 4, 1, 3, 5)  # (B, h, w, C, p, p)
    else:
        c = images.shape[3]
        x = images.reshape(batch, h, p, w, p, c).transpose(0, 1, 3, 2, 4, 5)  # (B, h, w, p, p, C)
    return x.reshape(batch, h * w, c * p * p)


def flat_projection(projection: np.ndarray, channels: str = "first") -> np.ndarray:
    """torch's conv weight (D, C, p, p) as the (D, K) matrix that multiplies ``patchify``'s
    vectors of that channel order, K = C*p*p."""
    if channels == "last":
        projection = projection.transpose(0, 2, 3, 1)  # (D, p, p, C), flax's (p, p, C, D) order
    return projection.reshape(len(projection), -1)


# --- the patch projection: reference and tolerance -----------------------------------------


def patch_projection(images, projection, bias=None, *, channels: str = "first"):
    """The float64 projection of every patch, (B, h*w, D), and its tolerance, (B, h*w, D).

    projection (D, C, p, p), torch's conv weight order; bias (D,) or None; images in the
    layer's dtype. The tolerance is the most a correct conv or matmul may differ from the
    reference at each element, derived as for any dot product (Higham, "Accuracy and
    Stability of Numerical Algorithms", 2nd ed., 3.1): K = C*p*p products and the bias summed
    in any order in a compute dtype of unit roundoff u (float32 for the 16-bit dtypes, the
    dtype itself otherwise) err by at most gamma_{K+1} * S, where S = sum_k |w_k| |x_k| + |b|
    and gamma_n = n u / (1 - n u); a 16-bit layer then rounds to its dtype (unit roundoff
    u_d): u_d * (|y| + gamma_{K+1} * S) more. A framework that accumulated in the 16-bit dtype
    itself, or in TF32, would exceed it: JAX's layer asks for Precision.HIGHEST; torch's cuDNN
    convolutions use TF32 on Ampere and later GPUs unless ``torch.backends.cudnn.allow_tf32``
    is False (measured here on CPUs only).
    """
    images, projection = np.asarray(images), np.asarray(projection)
    dtype = np.dtype(images.dtype)
    patches = patchify(images.astype(np.float64), projection.shape[-1], channels=channels)
    weight = flat_projection(projection.astype(np.float64), channels)  # (D, K)
    bias = np.zeros(len(weight)) if bias is None else np.asarray(bias, np.float64)
    reference = patches @ weight.T + bias  # (B, h*w, D)
    magnitude = np.abs(patches) @ np.abs(weight).T + np.abs(bias)  # S, (B, h*w, D)
    compute = positional.compute_dtype(dtype)
    n, u = weight.shape[1] + 1, float(ml_dtypes.finfo(compute).eps) / 2
    accumulated = n * u / (1 - n * u) * magnitude
    if dtype == compute:
        return reference, accumulated
    rounded = float(ml_dtypes.finfo(dtype).eps) / 2 * (np.abs(reference) + accumulated)
    return reference, accumulated + rounded
