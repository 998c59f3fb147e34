"""Vision towers' 2-D rotary embeddings for compare.py check --kind rope2d and rope2d_ids, as
porters write them: each model's rotary in NumPy from its owner's formula (float32, float64 for a
float64 x), transformers' own modules driven from torch, Mistral's complex form of Pixtral with
the conversion's q/k permutation; and each with one natural mistake, named after it.

f(x, positions): x (..., N, head_dim), positions (N, 2) (row, column), (-1, -1) a prefix token;
the grid is the positions' largest row and column + 1. f(grid): the (N, 2) ids of a grid.
"""

import functools
import math

import ml_dtypes
import numpy as np

BASE = 10000.0  # rope_theta of Pixtral-12B, Qwen2.5-VL and Llama 4's vision towers
DINOV3_BASE = 100.0  # DINOv3's RopePositionEmbedding base


def _compute(x):
    return np.float64 if x.dtype == np.float64 else np.float32


def _turn(x, angles, layout):
    """x turned by angles (N, head_dim/2) in the compute dtype, back in x's dtype."""
    dtype = _compute(x)
    wide, angles = x.astype(dtype), angles.astype(dtype)
    cos, sin = np.cos(angles), np.sin(angles)
    if layout == "interleaved":
        a, b = wide[..., 0::2], wide[..., 1::2]
        out = np.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(x.shape)
    else:
        half = x.shape[-1] // 2
        a, b = wide[..., :half], wide[..., half:]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    return out.astype(x.dtype)


def _grid(positions):
    return positions[positions[:, 0] >= 0].max(axis=0) + 1


def _ladder(dim, dtype, base=BASE):
    """1 / base**(2k/dim), k < dim / 2, formed in float64 and rounded once to ``dtype``."""
    return (1.0 / base ** (np.arange(0, dim, 2) / dim)).astype(dtype)


def _pixtral_angles(positions, head_dim, dtype, slots="even_odd"):
    """transformers' PixtralVisionRotaryEmbedding: one ladder over the head, its even entries to
    the row and its odd ones to the column (slots "blocks": Qwen's two ladders instead)."""
    rows, cols = positions.T.astype(dtype)
    if slots == "blocks":
        inverse = _ladder(head_dim // 2, dtype)
        h, w = inverse, inverse
    else:
        inverse = _ladder(head_dim, dtype)
        h, w = inverse[0::2], inverse[1::2]
    return np.concatenate([rows[:, None] * h, cols[:, None] * w], axis=-1)


def _qwen_angles(positions, head_dim, dtype, x_first=False):
    """Qwen2_5_VLVisionRotaryEmbedding: each axis its own ladder over head_dim / 2, [h | w]."""
    rows, cols = positions.T.astype(dtype)
    inverse = _ladder(head_dim // 2, dtype)
    first, second = (cols, rows) if x_first else (rows, cols)
    return np.concatenate([first[:, None] * inverse, second[:, None] * inverse], axis=-1)


def _llama_4_angles(positions, head_dim, dtype, one=1, cls_rotated=False):
    """Llama4VisionRotaryEmbedding: (column + 1, row + 1) on [x | y] ladders over head_dim / 2,
    the CLS (marked negative) masked to angle 0."""
    rope_freq = _ladder(head_dim // 2, dtype)
    marked = positions[:, 0] < 0
    at = np.where(marked[:, None], 0, positions) if cls_rotated else positions
    rows, cols = (at + one).T.astype(dtype)
    angles = np.concatenate([cols[:, None] * rope_freq, rows[:, None] * rope_freq], axis=-1)
    return angles if cls_rotated else np.where(marked[:, None], 0, angles)


def _dinov3_angles(positions, head_dim, dtype, normalize="separate"):
    """DINOv3's RopePositionEmbedding: patch centres normalized to [-1, 1], periods base**(2k /
    (head_dim/2)), angles 2 pi coords / periods, [h | w]."""
    sides = _grid(positions).astype(dtype)
    scale = {"separate": sides, "max": sides.max(), "min": sides.min()}[normalize]
    coords = 2 * (positions.astype(dtype) + dtype(0.5)) / scale - dtype(1)  # (N, 2)
    periods = (DINOV3_BASE ** (2 * np.arange(head_dim // 4) / (head_dim // 2))).astype(dtype)
    turns = (coords[:, :, None] * dtype(2 * math.pi)) / periods
    return turns.reshape(len(positions), -1)


def _port(name, model, *, angle_dtype=None, table_swapped=False, **wrong):
    """f(x, positions) for ``model``, called ``name``, with the mistakes ``wrong`` names."""
    angles_of, layout = {
        "pixtral": (_pixtral_angles, "half"),
        "qwen2.5-vl": (_qwen_angles, "half"),
        "llama-4": (_llama_4_angles, "interleaved"),
        "dinov3": (_dinov3_angles, "half"),
    }[model]

    def f(x, positions):
        x, positions = np.asarray(x), np.asarray(positions)
        if table_swapped:  # the grid's table over meshgrid(arange(w), arange(h)), read row-major
            h, w = _grid(positions)
            rows, cols = np.meshgrid(np.arange(w), np.arange(h), indexing="ij")
            table = np.stack([rows.ravel(), cols.ravel()], axis=-1)
            positions = table[positions[:, 0] * w + positions[:, 1]]
        angles = angles_of(positions, x.shape[-1], angle_dtype or _compute(x), **wrong)
        if model == "dinov3":  # only the patches turn: the prefix tokens come first, as they are
            prefix = int((positions[:, 0] < 0).sum())
            turned = _turn(x[..., prefix:, :], angles[prefix:].astype(np.float64), layout)
            return np.concatenate([x[..., :prefix, :], turned], axis=-2)
        return _turn(x, angles.astype(np.float64), layout)

    f.__name__ = f.__qualname__ = name
    return f


pixtral = _port("pixtral", "pixtral")
qwen2_5_vl = _port("qwen2_5_vl", "qwen2.5-vl")
llama_4 = _port("llama_4", "llama-4")
dinov3 = _port("dinov3", "dinov3")

pixtral_blocks = _port("pixtral_blocks", "pixtral", slots="blocks")  # Qwen's ladders
pixtral_angles_in_bfloat16 = _port(
    "pixtral_angles_in_bfloat16", "pixtral", angle_dtype=ml_dtypes.bfloat16
)
qwen2_5_vl_x_first = _port("qwen2_5_vl_x_first", "qwen2.5-vl", x_first=True)
qwen2_5_vl_table_swapped = _port("qwen2_5_vl_table_swapped", "qwen2.5-vl", table_swapped=True)
llama_4_zero_based = _port("llama_4_zero_based", "llama-4", one=0)
# the CLS's mark clipped to the patch (0, 0): turned as that patch
llama_4_cls_rotated = _port("llama_4_cls_rotated", "llama-4", cls_rotated=True)
dinov3_max = _port("dinov3_max", "dinov3", normalize="max")


# --- torch: transformers' modules, Mistral's complex form -----------------------------------


@functools.cache
def _pixtral_rotary(head_dim):
    from transformers.models.pixtral import modeling_pixtral
    from transformers.models.pixtral.configuration_pixtral import PixtralVisionConfig

    config = PixtralVisionConfig(hidden_size=4 * head_dim, num_attention_heads=4, head_dim=head_dim)
    return modeling_pixtral.PixtralVisionRotaryEmbedding(config)


def pixtral_torch(x, positions):
    """transformers' PixtralVisionRotaryEmbedding and apply_rotary_pos_emb (the half layout:
    the checkpoint's q and k rows were permuted by the conversion)."""
    from transformers.models.pixtral import modeling_pixtral

    cos, sin = _pixtral_rotary(x.shape[-1])(x, positions)
    return modeling_pixtral.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)[0]


def _mistral(x, positions):
    """Mistral's precompute_freqs_cis_2d (as vLLM's pixtral.py carries it) at each token's
    (row, column), applied as complex pairs (2i, 2i+1) in float32."""
    import torch

    dim = x.shape[-1]
    freqs = 1.0 / (BASE ** (torch.arange(0, dim, 2).float() / dim))
    freqs_h = torch.outer(positions[:, 0].float(), freqs[::2])
    freqs_w = torch.outer(positions[:, 1].float(), freqs[1::2])
    angles = torch.cat([freqs_h, freqs_w], dim=-1)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * freqs_cis).flatten(-2).type_as(x)


def pixtral_mistral(x, positions):
    """Mistral's complex form on transformers' layout: q's dims permuted back to the checkpoint's
    pairs (2i, 2i+1), turned, and permuted forward again, as the conversion permutes q and k."""
    import torch

    dim = x.shape[-1]
    perm = torch.cat([torch.arange(0, dim, 2), torch.arange(1, dim, 2)])
    return _mistral(x[..., torch.argsort(perm)], positions)[..., perm]


def pixtral_mistral_unpermuted(x, positions):
    """Mistral's complex form on transformers' half layout, the q/k permutation missing."""
    return _mistral(x, positions)


@functools.cache
def _qwen_rotary(head_dim):
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig

    config = Qwen2_5_VLVisionConfig(hidden_size=4 * head_dim, num_heads=4, depth=1)
    return modeling_qwen2_5_vl.Qwen2_5_VLVisionRotaryEmbedding(config)


def qwen2_5_vl_torch(x, positions):
    """transformers' Qwen2_5_VLVisionRotaryEmbedding on the (N, 2) ids, and
    apply_rotary_pos_emb_vision on q held (N, heads, head_dim) as its attention holds it."""
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl

    cos, sin = _qwen_rotary(x.shape[-1])(x, positions)
    q = x.transpose(-2, -3)
    turned = modeling_qwen2_5_vl.apply_rotary_pos_emb_vision(q, q, cos, sin)[0]
    return turned.transpose(-2, -3)


@functools.cache
def _llama_4_rotary(head_dim, side):
    from transformers.models.llama4 import modeling_llama4
    from transformers.models.llama4.configuration_llama4 import Llama4VisionConfig

    config = Llama4VisionConfig(
        hidden_size=4 * head_dim, num_attention_heads=4, image_size=14 * side, patch_size=14
    )
    return modeling_llama4.Llama4VisionRotaryEmbedding(config)


def llama_4_torch(x, positions):
    """transformers' Llama4VisionRotaryEmbedding, its square table (side max(h, w), the CLS its
    last row) read at each token's row * side + column, and vision_apply_rotary_emb."""
    from transformers.models.llama4 import modeling_llama4

    side = int(positions.max()) + 1
    table = _llama_4_rotary(x.shape[-1], side).freqs_ci  # (side**2 + 1, 1, head_dim / 2)
    rows = positions[:, 0] * side + positions[:, 1]
    rows = rows.where(positions[:, 0] >= 0, side * side)
    q = x.reshape(-1, *x.shape[-2:]).transpose(0, 1)[None]  # (1, N, heads, head_dim) as held
    turned = modeling_llama4.vision_apply_rotary_emb(q, q, table[rows])[0]
    return turned[0].transpose(0, 1).reshape(x.shape)


@functools.cache
def _dinov3_rotary(head_dim):
    from transformers.models.dinov3_vit import modeling_dinov3_vit
    from transformers.models.dinov3_vit.configuration_dinov3_vit import DINOv3ViTConfig

    config = DINOv3ViTConfig(hidden_size=4 * head_dim, num_attention_heads=4, patch_size=1)
    return modeling_dinov3_vit.DINOv3ViTRopePositionEmbedding(config).eval()


def dinov3_torch(x, positions):
    """transformers' DINOv3ViTRopePositionEmbedding at the grid (its cos and sin in raster order,
    read at each patch), and its apply_rotary_pos_emb, which skips the prefix tokens before."""
    import torch
    from transformers.models.dinov3_vit import modeling_dinov3_vit

    patches = positions[positions[:, 0] >= 0]
    h, w = (int(n) + 1 for n in patches.max(dim=0).values)
    cos, sin = _dinov3_rotary(x.shape[-1])(torch.zeros(1, 3, h, w))
    rows = patches[:, 0] * w + patches[:, 1]
    turned, _ = modeling_dinov3_vit.apply_rotary_pos_emb(x, x, cos[rows], sin[rows])
    return turned.to(x.dtype)


# --- the id builders: f(grid) -> (N, 2) -------------------------------------------------------


def _raster(h, w):
    rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    return np.stack([rows.ravel(), cols.ravel()], axis=-1)


def raster_ids(grid):
    return _raster(*grid)


def raster_ids_x_first(grid):
    """(column, row) for each patch: the pair in the other order."""
    return _raster(*grid)[:, ::-1]


def raster_ids_transposed(grid):
    """meshgrid(arange(w), arange(h)): the grid read as w rows of h."""
    h, w = grid
    return _raster(w, h)


def merge_ids(grid, merge=2):
    """Qwen2-VL's order: each merge x merge block of patches row-major, the blocks row-major."""
    h, w = grid
    return (
        _raster(h, w)
        .reshape(h // merge, merge, w // merge, merge, 2)
        .swapaxes(1, 2)
        .reshape(-1, 2)
    )


def window_ids(grid, merge=2, window=4):
    """Qwen2.5-VL's order: the merge blocks read window by window (window x window blocks each,
    the right and bottom windows what is left)."""
    h, w = grid
    units = merge_ids(grid, merge).reshape(h // merge, w // merge, merge * merge, 2)
    order = [
        units[r : r + window, c : c + window].reshape(-1, 2)
        for r in range(0, h // merge, window)
        for c in range(0, w // merge, window)
    ]
    return np.concatenate(order)


def merge_ids_as_raster(grid):
    return raster_ids(grid)


def window_ids_unpermuted(grid):
    """The merge blocks in their own order: the window permutation missing."""
    return merge_ids(grid)


def llama_4_ids(grid):
    """The patches in raster order, then the CLS's (-1, -1), as Llama 4 appends it."""
    return np.concatenate([_raster(*grid), [[-1, -1]]])


def llama_4_ids_cls_first(grid):
    return np.concatenate([[[-1, -1]], _raster(*grid)])


def flat_ids(grid, max_width=64):
    """Pixtral's flat ids, row * max_width + column (max_width: 1024 px / 16 px patches)."""
    h, w = grid
    return (np.arange(h)[:, None] * max_width + np.arange(w)).ravel()


def flat_ids_grid_width(grid):
    """row * w: the grid's own width where the table's is max_width."""
    return flat_ids(grid, max_width=grid[1])
