"""torch's resizes of a position table, as ports write them: ``F.interpolate`` with each set of
options a ``backends.resize`` kernel names, DINOv2's own ``interpolate_pos_encoding`` (its
offset rule), and Mistral's complex form of Pixtral's 2-D rotary.

Each resize is f(table, old_grid, new_grid, prefix_tokens) (the pos2d_resize kind): the prefix
rows kept aside, the grid's rows laid out (1, D, h0, w0) as F.interpolate takes an image,
resized, laid back in raster order after the prefix rows."""

import math

import torch
import torch.nn.functional as F

import backends


def _interpolated(**options):
    """f(table, old_grid, new_grid, prefix_tokens) by F.interpolate(size=new_grid, **options)."""

    def f(table, old_grid, new_grid, prefix_tokens):
        dim = table.shape[-1]
        grid = table[prefix_tokens:].reshape(1, *old_grid, dim).permute(0, 3, 1, 2)
        resized = F.interpolate(grid, size=tuple(new_grid), **options)  # (1, D, h, w)
        return torch.cat([table[:prefix_tokens], resized.permute(0, 2, 3, 1).reshape(-1, dim)])

    return f


bicubic = _interpolated(mode="bicubic", align_corners=False)
bicubic_antialias = _interpolated(mode="bicubic", align_corners=False, antialias=True)
bilinear = _interpolated(mode="bilinear", align_corners=False)
bilinear_antialias = _interpolated(mode="bilinear", align_corners=False, antialias=True)
bilinear_align_corners = _interpolated(mode="bilinear", align_corners=True)


def dinov2_original(table, old_grid, new_grid, prefix_tokens):
    """DINOv2's own ``interpolate_pos_encoding``, transcribed from facebookresearch/dinov2
    ``dinov2/models/vision_transformer.py`` at b8931f7bf91576930313be2c6d6af376033b35f0 (its
    ViT-S/B/L/g: interpolate_offset 0.1, interpolate_antialias False): the table upcast to
    float32, its side M = sqrt(N) (it asserts a square), F.interpolate given the scale factors
    (n + 0.1) / M instead of a size, the CLS row put back first, cast back. Its (w, h) are the
    image's dims 2 and 3 (``B, nc, w, h = x.shape``): rows first, as here. The identity (as
    many patches as the table has, a square image) returns the table as it is."""
    h, w = new_grid
    n = table.shape[0] - 1  # N: the CLS row is the table's first
    if h * w == n and h == w:
        return table
    pos_embed = table[None].float()
    class_pos_embed, patch_pos_embed = pos_embed[:, 0], pos_embed[:, 1:]
    dim = table.shape[-1]
    side = int(math.sqrt(n))
    assert n == side * side
    patch_pos_embed = F.interpolate(
        patch_pos_embed.reshape(1, side, side, dim).permute(0, 3, 1, 2),
        mode="bicubic",
        antialias=False,
        scale_factor=(float(h + 0.1) / side, float(w + 0.1) / side),
    )
    assert (h, w) == patch_pos_embed.shape[-2:]
    patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
    return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1).to(table.dtype)[0]


# --- Pixtral's rotary as Mistral wrote it: complex pairs -------------------------------------
#
# Transcribed from mistralai/mistral-inference src/mistral_inference/rope.py at
# 4304e4f991a70050444cf4441ef0affb3caa8925 (precompute_freqs_cis_2d, apply_rotary_emb), which its
# vision encoder calls on q and k held (N, heads, head_dim).


def mistral_freqs_cis_2d(dim: int, height: int, width: int, theta: float) -> torch.Tensor:
    """(height, width, dim / 2) complex64: the rows' angles on the even frequencies of one
    ladder over the head, the columns' on the odd ones."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
    h = torch.arange(height, device=freqs.device)
    w = torch.arange(width, device=freqs.device)
    freqs_h = torch.outer(h, freqs[::2]).float()
    freqs_w = torch.outer(w, freqs[1::2]).float()
    freqs_2d = torch.cat(
        [freqs_h[:, None, :].repeat(1, width, 1), freqs_w[None, :, :].repeat(height, 1, 1)],
        dim=-1,
    )
    return torch.polar(torch.ones_like(freqs_2d), freqs_2d)


def mistral_rotated(xq, freqs_cis):
    """apply_rotary_emb for one tensor (N, heads, head_dim): pairs (2i, 2i+1) as complex
    numbers, turned in float32, cast back (``type_as``)."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    freqs_cis = freqs_cis[:, None, :]
    return torch.view_as_real(xq_ * freqs_cis).flatten(-2).type_as(xq)


def _mistral(theta: float, permuted: bool):
    """f(x, positions) by Mistral's complex form, each token's (row, column) read from its
    table of the grid (``freqs_cis[positions[:, 0], positions[:, 1]]``, as its encoder indexes
    it); ``permuted``: x in transformers' layout, each head's dims permuted back to the
    checkpoint's pairs before and forward after (``backends.rope_permutation``: the conversion
    to transformers permutes q's and k's rows so, pairs (2i, 2i+1) to (i, i + head_dim/2))."""

    def f(x, positions):
        dim = x.shape[-1]
        height, width = (int(n) + 1 for n in positions.max(dim=0).values)
        freqs_cis = mistral_freqs_cis_2d(dim, height, width, theta)
        freqs_cis = freqs_cis[positions[:, 0], positions[:, 1]]  # (N, dim / 2)
        order = torch.from_numpy(backends.rope_permutation(dim))
        q = x[..., torch.argsort(order)] if permuted else x
        held = q.movedim(-2, 0)  # (N, ..., head_dim)
        turned = mistral_rotated(held.reshape(len(held), -1, dim), freqs_cis)
        turned = turned.reshape(held.shape).movedim(0, -2)
        return turned[..., order] if permuted else turned

    return f


PIXTRAL_THETA = 10000.0  # Pixtral-12B's vision_encoder rope_theta (params.json; the preset's)
pixtral_mistral = _mistral(PIXTRAL_THETA, permuted=True)
pixtral_mistral_unpermuted = _mistral(PIXTRAL_THETA, permuted=False)
