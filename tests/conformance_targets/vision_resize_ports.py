"""Ports of a vision tower's 2-D position tables, each with one thing wrong but the correct ones.

compare.py check --kind pos2d_resize: a learned table resized, f(table, old_grid, new_grid,
prefix_tokens) -> table (NaFlex's, SigLIP2's: f(table, old_grid, spatial_shapes,
max_patches)); two correct ports (NumPy, and torch as Hugging Face ViT's
interpolate_pos_encoding does it), one port per named mistake. The NumPy ports build their
weights from the cubic's formula themselves, in float64, and sum in float32, as a hand port
does.

compare.py check --kind pos2d_table: a fixed 2-D sin-cos table, f(grid, dim) -> (h*w, dim):
MAE's code in NumPy and timm's in torch, correct, and one port per named mistake."""

import math

import numpy as np
import torch
import torch.nn.functional as F


# --- NumPy --------------------------------------------------------------------------------


def _keys(a, x):
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _axis(n_in, n_out, a, edges):
    """(n_out, n_in) weights of one axis: half-pixel centres, taps floor(src) - 1 .. + 2."""
    src = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
    taps = np.floor(src)[:, None] + np.arange(-1, 3)
    weights = _keys(a, src[:, None] - taps)
    matrix = np.zeros((n_out, n_in))
    for i in range(n_out):
        for tap, weight in zip(taps[i].astype(int), weights[i]):
            if edges == "replicated":
                matrix[i, min(max(tap, 0), n_in - 1)] += weight
            elif 0 <= tap < n_in:
                matrix[i, tap] += weight
    if edges == "renormalized":
        matrix /= matrix.sum(axis=1, keepdims=True)
    return matrix


def _numpy(table, old_grid, new_grid, prefix_tokens, *, a=-0.75, edges="replicated"):
    (h0, w0), (h, w) = old_grid, new_grid
    if len(table) != prefix_tokens + h0 * w0:
        raise ValueError(f"{len(table)} rows are not {prefix_tokens} + {h0} * {w0}")
    if (h0, w0) == (h, w):
        return table
    grid = table[prefix_tokens:].astype(np.float32).reshape(h0, w0, -1)
    rows = _axis(h0, h, a, edges).astype(np.float32)
    columns = _axis(w0, w, a, edges).astype(np.float32)
    resized = np.einsum("Ww,Hwd->HWd", columns, np.einsum("Hh,hwd->Hwd", rows, grid))
    resized = resized.reshape(h * w, -1).astype(table.dtype)
    return np.concatenate([table[:prefix_tokens], resized])


def numpy_resize(table, old_grid, new_grid, prefix_tokens):
    """Correct: torch's bicubic (a = -0.75, edges replicated), summed in float32."""
    return _numpy(table, old_grid, new_grid, prefix_tokens)


def keys_renormalized(table, old_grid, new_grid, prefix_tokens):
    """a = -0.5 with renormalized edges: jax.image.resize's 'bicubic' without antialias."""
    return _numpy(table, old_grid, new_grid, prefix_tokens, a=-0.5, edges="renormalized")


def keys_replicated(table, old_grid, new_grid, prefix_tokens):
    """a = -0.5, edges replicated: Keys' coefficient in torch's kernel."""
    return _numpy(table, old_grid, new_grid, prefix_tokens, a=-0.5)


def edges_renormalized(table, old_grid, new_grid, prefix_tokens):
    """a = -0.75 over the grid only, renormalized: mlx-vlm's non-Metal bicubic."""
    return _numpy(table, old_grid, new_grid, prefix_tokens, edges="renormalized")


def square(table, old_grid, new_grid, prefix_tokens):
    """The pretrained grid's side taken as sqrt(rows), as a port written for square grids."""
    side = math.isqrt(len(table) - prefix_tokens)
    return _numpy(table, (side, side), new_grid, prefix_tokens)


def prefix_in_grid(table, old_grid, new_grid, prefix_tokens):
    """The grid sliced from row 0 (table[:h0 * w0]), not after the prefix rows."""
    h0, w0 = old_grid
    shifted = np.concatenate([table[:prefix_tokens], table[: h0 * w0]])
    return _numpy(shifted, old_grid, new_grid, prefix_tokens)


def prefix_dropped(table, old_grid, new_grid, prefix_tokens):
    """The grid resized and returned alone."""
    return _numpy(table, old_grid, new_grid, prefix_tokens)[prefix_tokens:]


# --- torch, as Hugging Face ViT's interpolate_pos_encoding --------------------------------


def _torch(table, old_grid, new_grid, prefix_tokens, upcast=False, **interpolate):
    """Split the prefix rows, (h0 * w0, D) -> (1, D, h0, w0), interpolate, back to rows."""
    (h0, w0), (h, w) = old_grid, new_grid
    if (h0, w0) == (h, w) and not interpolate.pop("always", False):
        return table
    head, grid = table[:prefix_tokens], table[prefix_tokens:]
    grid = grid.reshape(1, h0, w0, -1).permute(0, 3, 1, 2)  # (1, D, h0, w0)
    if upcast:
        grid = grid.float()
    options = {"mode": "bicubic", "align_corners": False} | interpolate
    if "scale_factor" not in options:
        options["size"] = (h, w)
    resized = F.interpolate(grid, **options).to(table.dtype)
    return torch.cat([head, resized.permute(0, 2, 3, 1).reshape(h * w, -1)])


def torch_resize(table, old_grid, new_grid, prefix_tokens):
    """Correct: F.interpolate(size=, mode='bicubic', align_corners=False)."""
    return _torch(table, old_grid, new_grid, prefix_tokens)


def torch_dinov2(table, old_grid, new_grid, prefix_tokens):
    """Correct for DINOv2's own rule: scale_factor (n + 0.1)/n_in, in float32, no resize at a
    square grid of the same count."""
    (h0, w0), (h, w) = old_grid, new_grid
    factors = ((h + 0.1) / h0, (w + 0.1) / w0)
    return _torch(table, old_grid, new_grid, prefix_tokens, upcast=True, scale_factor=factors)


def antialias_on(table, old_grid, new_grid, prefix_tokens):
    """antialias=True (timm's default), computed in float32 as CPU torch needs."""
    return _torch(table, old_grid, new_grid, prefix_tokens, upcast=True, antialias=True)


def corners_aligned(table, old_grid, new_grid, prefix_tokens):
    return _torch(table, old_grid, new_grid, prefix_tokens, align_corners=True)


def with_offset(table, old_grid, new_grid, prefix_tokens):
    """DINOv2's scale_factor (n + 0.1)/n_in where the rule passes size=."""
    (h0, w0), (h, w) = old_grid, new_grid
    factors = ((h + 0.1) / h0, (w + 0.1) / w0)
    return _torch(table, old_grid, new_grid, prefix_tokens, scale_factor=factors)


def bilinear(table, old_grid, new_grid, prefix_tokens):
    return _torch(table, old_grid, new_grid, prefix_tokens, mode="bilinear")


def transposed(table, old_grid, new_grid, prefix_tokens):
    """Both grids read as (w, h): (height, width) taken from an image's (width, height)."""
    return _torch(table, old_grid[::-1], new_grid[::-1], prefix_tokens)


def new_transposed(table, old_grid, new_grid, prefix_tokens):
    """size=(w, h): the new grid's sides swapped, the result read as (h, w)."""
    return _torch(table, old_grid, new_grid[::-1], prefix_tokens)


def in_bfloat16(table, old_grid, new_grid, prefix_tokens):
    """The table cast to bfloat16 for the resize (a model loaded in bfloat16), then back."""
    resized = _torch(table.to(torch.bfloat16), old_grid, new_grid, prefix_tokens)
    return resized.to(table.dtype)


def merge_order(table, old_grid, new_grid, prefix_tokens, merge=2):
    """Qwen3-VL's rule (bilinear, corners aligned, in float32) with its rows as the model's
    fast_pos_embed_interpolate emits them: each merge x merge block's rows together."""
    (h, w), resized = new_grid, _torch(
        table, old_grid, new_grid, prefix_tokens, upcast=True, mode="bilinear",
        align_corners=True,
    )
    head, grid = resized[:prefix_tokens], resized[prefix_tokens:]
    blocks = grid.reshape(h // merge, merge, w // merge, merge, -1).transpose(1, 2)
    return torch.cat([head, blocks.reshape(h * w, -1)])


# --- NaFlex (SigLIP2), as Hugging Face's resize_positional_embeddings --------------------


def _naflex(table, old_grid, spatial_shapes, max_patches, *, padding="resized", **interpolate):
    grid = table.reshape(1, *old_grid, -1).permute(0, 3, 1, 2).float()  # (1, D, h0, w0)
    out = torch.empty(len(spatial_shapes), max_patches, table.shape[-1], dtype=table.dtype)
    options = {"mode": "bilinear", "align_corners": False, "antialias": True} | interpolate
    for image, (h, w) in enumerate(spatial_shapes.tolist()):
        if h * w > max_patches:
            raise ValueError(f"{h} x {w} patches are more than max_patches {max_patches}")
        resized = F.interpolate(grid, size=(h, w), **options)
        resized = resized.reshape(table.shape[-1], h * w).T.to(table.dtype)
        out[image, : h * w] = resized
        out[image, h * w :] = resized[0] if padding == "resized" else 0
    return out


def naflex(table, old_grid, spatial_shapes, max_patches):
    """Correct: antialiased bilinear in float32, padding rows the resized (0, 0) row."""
    return _naflex(table, old_grid, spatial_shapes, max_patches)


def naflex_padding_zeros(table, old_grid, spatial_shapes, max_patches):
    return _naflex(table, old_grid, spatial_shapes, max_patches, padding="zeros")


def naflex_antialias_off(table, old_grid, spatial_shapes, max_patches):
    return _naflex(table, old_grid, spatial_shapes, max_patches, antialias=False)



# --- fixed 2-D sin-cos tables (pos2d_table) ---------------------------------------------


def _sincos(positions, dim, omega_denominator=None):
    """MAE's get_1d_sincos_pos_embed_from_grid: [sin, cos] of positions * omega, float64."""
    omega = np.arange(dim // 2, dtype=np.float64)
    omega = 1.0 / 10000 ** (omega / (omega_denominator or dim / 2.0))
    angles = np.einsum("m,d->md", positions.reshape(-1), omega)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def _mae(grid, dim, *, order="wh", indexing="xy", omega_denominator=None):
    h, w = grid
    grid_h, grid_w = np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32)
    first, second = np.meshgrid(grid_w, grid_h, indexing=indexing)  # MAE: w goes first
    if order == "hw":
        first, second = second, first
    halves = [_sincos(g, dim // 2, omega_denominator) for g in (first, second)]
    return np.concatenate(halves, axis=1).astype(np.float32)


def mae_table(grid, dim):
    """Correct for MAE's rule: its get_2d_sincos_pos_embed, float64, stored float32."""
    return _mae(grid, dim)


def mae_h_first(grid, dim):
    """The halves in (h, w) order: quarters [sin h, cos h, sin w, cos w]."""
    return _mae(grid, dim, order="hw")


def mae_ij(grid, dim):
    """meshgrid with indexing='ij' (torch.meshgrid's default) where MAE's np.meshgrid is 'xy'."""
    return _mae(grid, dim, indexing="ij")


def mae_sides_swapped(grid, dim):
    """np.meshgrid(grid_h, grid_w): the table of the (w, h) grid."""
    return _mae(grid[::-1], dim)


def mae_denominator(grid, dim):
    """omega's exponent over D/4 - 1 (big_vision's) where MAE's is D/4."""
    return _mae(grid, dim, omega_denominator=dim // 4 - 1)


def mae_in_float32(grid, dim):
    """MAE's table computed in torch's float32 (the positions, omega and angles)."""
    h, w = grid
    omega = 1.0 / 10000 ** (torch.arange(dim // 4, dtype=torch.float32) / (dim / 4))
    rows, columns = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    halves = []
    for positions in (columns, rows):
        angles = positions.reshape(-1, 1).float() * omega
        halves += [torch.sin(angles), torch.cos(angles)]
    return torch.cat(halves, dim=1)


def timm_table(grid, dim, temperature=10000.0):
    """Correct for timm's rule: build_sincos2d_pos_embed, in torch's float32."""
    bands = 1.0 / temperature ** (torch.arange(dim // 4, dtype=torch.float32) / (dim // 4))
    rows, columns = torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing="ij")
    positions = torch.stack([rows, columns]).flatten(1).transpose(0, 1).float()  # (h*w, 2)
    angles = positions.unsqueeze(-1) * bands  # (h*w, 2, dim/4)
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=1).flatten(1)


def timm_default_temperature(grid, dim):
    """timm's table at temperature 10000 whatever the model's is."""
    return timm_table(grid, dim)


def timm_at_100(grid, dim):
    """Correct for timm's rule at a temperature of 100 (a config's)."""
    return timm_table(grid, dim, temperature=100.0)
