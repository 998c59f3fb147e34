"""Resizes of a position table by libraries that take NumPy arrays: Pillow, OpenCV and
``scipy.ndimage.zoom`` (big_vision's ``resample_posemb``), each imported by the row that calls
it; and a NumPy stand-in for mlx-vlm's bicubic on a machine without Metal.

A resize is f(table, old_grid, new_grid, prefix_tokens) (the pos2d_resize kind): the prefix
rows kept aside, the grid's rows laid out (h0, w0, D), resized, laid back in raster order after
the prefix rows. Each library is handed the table in the dtype it comes in."""

import numpy as np


def _rejoined(table, prefix_tokens, resized):
    """The prefix rows, then the resized (h, w, D) grid in raster order."""
    return np.concatenate([table[:prefix_tokens], resized.reshape(-1, table.shape[-1])])


def _pillow(name: str):
    """f(...) by Pillow's Image.resize with filter ``name``: each column of the table a 2-D
    image (a float32 array is mode "F"), resized to (w, h) (Pillow's sizes are (width,
    height)). Pillow's BICUBIC is Keys' a = -0.5 and BILINEAR the triangle, each widened by
    the scale where an axis shrinks, over the grid only, renormalized."""

    def f(table, old_grid, new_grid, prefix_tokens):
        from PIL import Image

        grid = table[prefix_tokens:].reshape(*old_grid, -1)
        size = (new_grid[1], new_grid[0])
        columns = [
            np.asarray(Image.fromarray(grid[..., d]).resize(size, getattr(Image.Resampling, name)))
            for d in range(grid.shape[-1])
        ]
        return _rejoined(table, prefix_tokens, np.stack(columns, axis=-1))

    return f


pillow_bicubic = _pillow("BICUBIC")
pillow_bilinear = _pillow("BILINEAR")


def _opencv(name: str):
    """f(...) by cv2.resize with interpolation ``name``: the (h0, w0, D) grid an image of D
    channels (OpenCV takes up to 128), its size given (width, height). INTER_CUBIC is a =
    -0.75 with the edge replicated (as ATen's bicubic), INTER_LINEAR the triangle, both at
    half-pixel centres."""

    def f(table, old_grid, new_grid, prefix_tokens):
        import cv2

        grid = table[prefix_tokens:].reshape(*old_grid, -1)
        resized = cv2.resize(grid, (new_grid[1], new_grid[0]), interpolation=getattr(cv2, name))
        return _rejoined(table, prefix_tokens, resized.reshape(*new_grid, -1))

    return f


opencv_cubic = _opencv("INTER_CUBIC")
opencv_linear = _opencv("INTER_LINEAR")


def scipy_zoom(table, old_grid, new_grid, prefix_tokens):
    """big_vision's ``resample_posemb`` rule (google-research/big_vision
    ``big_vision/models/vit.py`` at 0127fb6b337ee2a27bf4e54dea79cff176527356):
    scipy.ndimage.zoom(grid, (h / h0, w / w0, 1), order=1), linear with the corners aligned
    (zoom's grid_mode=False). big_vision reads both grids as squares, sqrt(N) a side; the
    zoom is given each axis' factor here, so that a non-square grid is the rule's too."""
    from scipy import ndimage

    (h0, w0), (h, w) = old_grid, new_grid
    grid = table[prefix_tokens:].reshape(h0, w0, -1)
    resized = ndimage.zoom(grid, (h / h0, w / w0, 1), order=1)
    return _rejoined(table, prefix_tokens, resized)


# --- mlx-vlm's bicubic without Metal, in NumPy -------------------------------------------------
#
# A stand-in transcribed from Blaizzy/mlx-vlm mlx_vlm/models/kernels.py at
# 9b13f522a7f1d214f426c67bb292c9e1065e9108 (_bicubic_interpolate_mlx, which bicubic_interpolate
# calls where mx.metal.is_available() is False: Linux, and every CPU-only machine), as its
# models (kimi_vl/vision.py, kimi_k25/vision.py, deepseekocr/sam.py, lfm2_vl/vision.py) call it
# on a position table laid out (1, D, h0, w0). Every step in float32 as MLX computes it: the
# sample points (i + 0.5) / n_out * n_in - 0.5, five taps from floor(src - 2) + 1, the weights
# Keys' cubic at a = -0.75 (-0.5 with antialias), the taps off the grid given weight 0 and the
# rest divided by their sum + 1e-8, rows first, then columns; cast back to the input's dtype.


def _mlx_cubic_weight(t, a):
    at = np.abs(t)
    at2 = at * at
    at3 = at2 * at
    w1 = (a + np.float32(2.0)) * at3 - (a + np.float32(3.0)) * at2 + np.float32(1.0)
    w2 = a * at3 - np.float32(5.0) * a * at2 + np.float32(8.0) * a * at - np.float32(4.0) * a
    return np.where(at <= 1.0, w1, np.where(at < 2.0, w2, np.zeros_like(t)))


def _mlx_weights_1d(coords, in_size, fs, support, antialias):
    start = np.floor(coords - np.float32(support)).astype(np.int32) + 1  # (out,)
    n_taps = int(2 * support + 1)
    pix = start[:, None] + np.arange(n_taps, dtype=np.int32)[None, :]  # (out, taps)
    dist = coords[:, None] - pix.astype(np.float32)
    a = np.float32(-0.5 if antialias else -0.75)
    w = _mlx_cubic_weight(dist / np.float32(fs), a)
    w = w * ((pix >= 0) & (pix < in_size))
    pix = np.clip(pix, 0, in_size - 1)
    return pix, w / (np.sum(w, axis=-1, keepdims=True) + np.float32(1e-8))


def _mlx_bicubic(x, out_h, out_w, antialias=False):
    """_bicubic_interpolate_mlx(x, out_h, out_w, align_corners=False, antialias) on x (B, C,
    in_h, in_w)."""
    batch, channels, in_h, in_w = x.shape
    input_dtype = x.dtype
    x = x.astype(np.float32)
    scale_h, scale_w = out_h / in_h, out_w / in_w
    y_out = (np.arange(out_h, dtype=np.float32) + 0.5) / out_h * in_h - 0.5
    x_out = (np.arange(out_w, dtype=np.float32) + 0.5) / out_w * in_w - 0.5
    y_out, x_out = y_out.astype(np.float32), x_out.astype(np.float32)
    fs_h = (1.0 / scale_h) if (antialias and scale_h < 1.0) else 1.0
    fs_w = (1.0 / scale_w) if (antialias and scale_w < 1.0) else 1.0
    pix_y, wy = _mlx_weights_1d(y_out, in_h, fs_h, 2.0 * fs_h, antialias)  # (oh, taps_h)
    pix_x, wx = _mlx_weights_1d(x_out, in_w, fs_w, 2.0 * fs_w, antialias)  # (ow, taps_w)
    gathered_y = x[:, :, pix_y.reshape(-1), :].reshape(batch, channels, out_h, -1, in_w)
    tmp = np.sum(gathered_y * wy[None, None, :, :, None], axis=3)  # (B, C, oh, in_w)
    gathered_x = tmp[:, :, :, pix_x.reshape(-1)].reshape(batch, channels, out_h, out_w, -1)
    result = np.sum(gathered_x * wx[None, None, None, :, :], axis=4)  # (B, C, oh, ow)
    return result.astype(input_dtype)


def mlx_vlm_bicubic(table, old_grid, new_grid, prefix_tokens):
    """f(...) by the stand-in for mlx-vlm's bicubic_interpolate(x, size=new_grid) without
    Metal, the grid laid out (1, D, h0, w0) as its models lay a position table."""
    dim = table.shape[-1]
    grid = table[prefix_tokens:].reshape(1, *old_grid, dim).transpose(0, 3, 1, 2)
    resized = _mlx_bicubic(grid, *new_grid)  # (1, D, h, w)
    return _rejoined(table, prefix_tokens, resized.transpose(0, 2, 3, 1))
