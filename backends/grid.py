"""2-D positions (vision towers): fixed 2-D sin-cos tables, the prefix rows of a learned grid
table, patches in order, and the patch projection's reference and tolerance.

Being written for issue 56.
"""

from __future__ import annotations

import numpy as np

from backends import validation


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
