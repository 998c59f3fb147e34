"""JAX's resizes of a position table: ``jax.image.resize`` with each method and antialias
setting, and big_vision's NaFlex resize (``jax.image.scale_and_translate``).

A resize is f(table, old_grid, new_grid, prefix_tokens) (the pos2d_resize kind): the prefix
rows kept aside, the grid's rows laid out (h0, w0, D), resized over the two spatial axes, laid
back in raster order after the prefix rows."""

import jax
import jax.numpy as jnp


def _resized(method: str, antialias: bool):
    """f(table, old_grid, new_grid, prefix_tokens) by jax.image.resize(method, antialias)."""

    def f(table, old_grid, new_grid, prefix_tokens):
        dim = table.shape[-1]
        grid = table[prefix_tokens:].reshape(*old_grid, dim)
        resized = jax.image.resize(grid, (*new_grid, dim), method=method, antialias=antialias)
        return jnp.concatenate([table[:prefix_tokens], resized.reshape(-1, dim)])

    return f


bicubic = _resized("bicubic", antialias=True)  # jax.image.resize's default antialias
bicubic_no_antialias = _resized("bicubic", antialias=False)
cubic_pytorch = _resized("cubic-pytorch", antialias=False)  # it refuses antialias=True
linear = _resized("linear", antialias=True)
linear_no_antialias = _resized("linear", antialias=False)


def big_vision_naflex(table, old_grid, spatial_shapes, max_patches):
    """big_vision's NaFlex position embeddings, transcribed from google-research/big_vision
    ``big_vision/models/proj/image_text/naflex_vit.py`` at
    0127fb6b337ee2a27bf4e54dea79cff176527356 (``_pos_emb_resize``, called from ``_Model``): per
    image, the (h0, w0, D) table scaled by (h, w) / (h0, w0) onto an l x l canvas
    (``scale_and_translate``, antialiased bilinear, no translation), then gathered at each
    token's (row, column): the image's patches in raster order, its padding tokens at (0, 0)
    (their coordinates, as the packed batch gives a padding token). l is the largest side, the
    canvas the source sizes statically (its ``posemb_grid_size``, 64 by default)."""
    dim = table.shape[-1]
    grid = table.reshape(*old_grid, dim)
    side = int(spatial_shapes.max())
    out = []
    for h, w in spatial_shapes.tolist():
        rows, cols = jnp.meshgrid(jnp.arange(h), jnp.arange(w), indexing="ij")
        coords = jnp.stack([rows.ravel(), cols.ravel()], axis=-1)  # (h * w, 2)
        coords = jnp.pad(coords, [[0, max_patches - h * w], [0, 0]])  # padding at (0, 0)
        emb = jax.image.scale_and_translate(
            grid,
            shape=(side, side, dim),
            spatial_dims=(0, 1),
            scale=jnp.asarray([h, w]) / jnp.asarray(grid.shape[:2]),
            translation=jnp.asarray([0, 0]),
            method="bilinear",
            antialias=True,
        )
        gather_dim = jax.lax.GatherDimensionNumbers(
            offset_dims=(1,), collapsed_slice_dims=(0, 1), start_index_map=(0, 1, 2)
        )
        out.append(
            jax.lax.gather(
                emb, jnp.pad(coords, [[0, 0], [0, 1]]), gather_dim, [1, 1, dim], mode="fill"
            )
        )
    return jnp.stack(out)  # (B, max_patches, D)
