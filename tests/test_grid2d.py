"""2-D positions, the grid side: fixed 2-D sin-cos tables, patches in order and the vision
tower's first layer (PatchEmbedding) on every backend.

The sin-cos tables and patchify are bit-identical across backends (one host table; a
reshape); each rule is held to its owner's code, copied here as the owner wrote it. The
patch projection is a conv or a matmul, held to the float64 reference within
backends.grid.patch_projection's derived tolerance; the position rows are added exactly.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from backends import grid, positional, resize
from tests.conftest import BACKENDS, native

DTYPES = ["float32", "float16", "bfloat16"]
RULES = list(grid.SINCOS2D_RULES)
rng = np.random.default_rng(56)


def on_every_backend(make):
    """make(backend) on each installed backend, as NumPy arrays by backend name."""
    return {name: backends.get(name).to_numpy(make(backends.get(name))) for name in BACKENDS}


# --- the owners' code, as they wrote it (long lines wrapped) ---------------------------------
#
# MAE, facebookresearch/mae util/pos_embed.py (commit be47fef), with one change: NumPy 1.24
# removed np.float, which MAE's get_1d_sincos_pos_embed_from_grid passes as the dtype; it was
# Python's float (float64), written here as `float`.


def mae_get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False):
    """
    grid_size: int of the grid height and width
    return:
    pos_embed: [grid_size*grid_size, embed_dim] or [1+grid_size*grid_size, embed_dim] (w/ or
    w/o cls_token)
    """
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid_w = np.arange(grid_size, dtype=np.float32)
    grid = np.meshgrid(grid_w, grid_h)  # here w goes first
    grid = np.stack(grid, axis=0)

    grid = grid.reshape([2, 1, grid_size, grid_size])
    pos_embed = mae_get_2d_sincos_pos_embed_from_grid(embed_dim, grid)
    if cls_token:
        pos_embed = np.concatenate([np.zeros([1, embed_dim]), pos_embed], axis=0)
    return pos_embed


def mae_get_2d_sincos_pos_embed_from_grid(embed_dim, grid):
    assert embed_dim % 2 == 0

    # use half of dimensions to encode grid_h
    emb_h = mae_get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0])  # (H*W, D/2)
    emb_w = mae_get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1])  # (H*W, D/2)

    emb = np.concatenate([emb_h, emb_w], axis=1)  # (H*W, D)
    return emb


def mae_get_1d_sincos_pos_embed_from_grid(embed_dim, pos):
    """
    embed_dim: output dimension for each position
    pos: a list of positions to be encoded: size (M,)
    out: (M, D)
    """
    assert embed_dim % 2 == 0
    omega = np.arange(embed_dim // 2, dtype=float)  # MAE: dtype=np.float
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000**omega  # (D/2,)

    pos = pos.reshape(-1)  # (M,)
    out = np.einsum("m,d->md", pos, omega)  # (M, D/2), outer product

    emb_sin = np.sin(out)  # (M, D/2)
    emb_cos = np.cos(out)  # (M, D/2)

    emb = np.concatenate([emb_sin, emb_cos], axis=1)  # (M, D)
    return emb


# diffusers, src/diffusers/models/embeddings.py (commit 0002117, the NumPy version; its 1-D
# helper is MAE's with np.float64): get_2d_sincos_pos_embed.
def diffusers_get_2d_sincos_pos_embed(
    embed_dim, grid_size, cls_token=False, extra_tokens=0, interpolation_scale=1.0, base_size=16
):
    if isinstance(grid_size, int):
        grid_size = (grid_size, grid_size)

    grid_h = (
        np.arange(grid_size[0], dtype=np.float32) / (grid_size[0] / base_size) / interpolation_scale
    )
    grid_w = (
        np.arange(grid_size[1], dtype=np.float32) / (grid_size[1] / base_size) / interpolation_scale
    )
    grid = np.meshgrid(grid_w, grid_h)  # here w goes first
    grid = np.stack(grid, axis=0)

    grid = grid.reshape([2, 1, grid_size[1], grid_size[0]])
    pos_embed = mae_get_2d_sincos_pos_embed_from_grid(embed_dim, grid)
    if cls_token and extra_tokens > 0:
        pos_embed = np.concatenate([np.zeros([extra_tokens, embed_dim]), pos_embed], axis=0)
    return pos_embed


# big_vision, big_vision/models/vit.py (commit 0b73d7b): computed in JAX, float32.
def big_vision_posemb_sincos_2d(h, w, width, temperature=10_000.0, dtype=None):
    import jax.numpy as jnp

    dtype = dtype or jnp.float32
    y, x = jnp.mgrid[:h, :w]

    assert width % 4 == 0, "Width must be mult of 4 for sincos posemb"
    omega = jnp.arange(width // 4) / (width // 4 - 1)
    omega = 1.0 / (temperature**omega)
    y = jnp.einsum("m,d->md", y.flatten(), omega)
    x = jnp.einsum("m,d->md", x.flatten(), omega)
    pe = jnp.concatenate([jnp.sin(x), jnp.cos(x), jnp.sin(y), jnp.cos(y)], axis=1)
    return jnp.asarray(pe, dtype)[None, :, :]


# timm, timm/layers/pos_embed_sincos.py (commit 0647e28): freq_bands and
# build_sincos2d_pos_embed (ndgrid is torch.meshgrid(..., indexing="ij")), torch float32.
def timm_freq_bands(num_bands, temperature=10000.0, step=2, device=None):
    import torch

    exp = (
        torch.arange(0, num_bands, step, dtype=torch.int64, device=device).to(torch.float32)
        / num_bands
    )
    bands = 1.0 / (temperature**exp)
    return bands


def timm_build_sincos2d_pos_embed(
    feat_shape, dim=64, temperature=10000.0, reverse_coord=False, interleave_sin_cos=False,
    device=None, dtype=None,
):
    import torch

    dtype = dtype or torch.float32
    assert dim % 4 == 0, (
        "Embed dimension must be divisible by 4 for sin-cos 2D position embedding"
    )
    pos_dim = dim // 4
    bands = timm_freq_bands(pos_dim, temperature=temperature, step=1, device=device)

    if reverse_coord:
        feat_shape = feat_shape[::-1]  # stack W, H instead of H, W
    grid = torch.stack(torch.meshgrid(*[
        torch.arange(s, device=device, dtype=torch.int64).to(torch.float32)
        for s in feat_shape
    ], indexing="ij")).flatten(1).transpose(0, 1)
    pos2 = grid.unsqueeze(-1) * bands.unsqueeze(0)

    # stack sin, cos, sin, cos  instead of sin sin cos cos
    stack_dim = 2 if interleave_sin_cos else 1
    pos_emb = torch.stack([torch.sin(pos2), torch.cos(pos2)], dim=stack_dim).flatten(1)
    return pos_emb.to(dtype=dtype)


# --- sin-cos tables ---------------------------------------------------------------------------

GRIDS = st.tuples(st.integers(1, 6), st.integers(1, 6))  # (h, w): square and non-square


@settings(max_examples=20, deadline=None)
@given(
    grid_=GRIDS, quarter=st.integers(2, 8), rule=st.sampled_from(RULES),
    dtype=st.sampled_from(DTYPES), prefix=st.integers(0, 1),
)
def test_sincos2d_tables_are_bit_identical_on_every_backend(grid_, quarter, rule, dtype, prefix):
    dim = 4 * quarter
    expected = grid.sincos2d_table(grid_, dim, rule=rule, dtype=dtype, prefix_tokens=prefix)
    assert expected.shape == (prefix + grid_[0] * grid_[1], dim)
    assert expected.dtype == backends.DTYPES[dtype]
    tables = on_every_backend(
        lambda b: b.sincos2d_table(grid_, dim, rule=rule, dtype=dtype, prefix_tokens=prefix)
    )
    for table in tables.values():
        np.testing.assert_array_equal(table, expected)
    np.testing.assert_array_equal(expected[:prefix], 0)  # MAE's cls_token=True: a zero row


@pytest.mark.parametrize("grid_size", [1, 2, 7, 14])
@pytest.mark.parametrize("dim", [4, 64, 768])
def test_mae_is_mae_as_its_owner_wrote_it(grid_size, dim):
    owner = mae_get_2d_sincos_pos_embed(dim, grid_size, cls_token=True)
    ours = grid.sincos2d_table((grid_size, grid_size), dim, rule="mae", prefix_tokens=1)
    np.testing.assert_array_equal(ours, owner)  # float64, bit for bit


@pytest.mark.parametrize("grid_", [(3, 5), (5, 3), (6, 6)])
@pytest.mark.parametrize("base_size", ["grid", 16])
@pytest.mark.parametrize("interpolation_scale", [1.0, 2.0])
def test_diffusers_is_diffusers_as_its_owner_wrote_it(grid_, base_size, interpolation_scale):
    base_size = grid_[0] if base_size == "grid" else base_size
    owner = diffusers_get_2d_sincos_pos_embed(
        32, grid_, interpolation_scale=interpolation_scale, base_size=base_size
    )
    ours = grid.sincos2d_table(
        grid_, 32, rule="diffusers", base_size=base_size, interpolation_scale=interpolation_scale
    )
    np.testing.assert_array_equal(ours, owner)


def test_diffusers_with_the_grid_as_base_size_is_mae_and_otherwise_rescales_it():
    mae = grid.sincos2d_table((14, 14), 64, rule="mae")
    at_grid = grid.sincos2d_table((14, 14), 64, rule="diffusers", base_size=14)
    np.testing.assert_array_equal(at_grid, mae)
    # diffusers' default base_size=16 on a 14 grid spreads the positions by 16/14.
    default = grid.sincos2d_table((14, 14), 64, rule="diffusers")
    assert np.abs(default - mae).max() > 1.0


def timm_to_mae(table: np.ndarray) -> np.ndarray:
    """timm's quarters [sin h, sin w, cos h, cos w] in MAE's order [sin w, cos w, sin h, cos h]."""
    sin_h, sin_w, cos_h, cos_w = np.split(table, 4, axis=1)
    return np.concatenate([sin_w, cos_w, sin_h, cos_h], axis=1)


@pytest.mark.parametrize("grid_", [(3, 5), (5, 3), (14, 14)])
def test_timm_is_mae_with_its_quarters_reordered(grid_):
    timm = grid.sincos2d_table(grid_, 64, rule="timm")
    mae = grid.sincos2d_table(grid_, 64, rule="mae")
    np.testing.assert_array_equal(timm_to_mae(timm), mae)  # one frequency rule, float64
    assert np.abs(timm - mae).max() > 0.5  # but not the same table: its own quarter order


QUARTER_AXES = {"mae": "wwhh", "big_vision": "wwhh", "diffusers": "wwhh", "timm": "hwhw"}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("grid_", [(3, 5), (5, 3)])
def test_each_rule_encodes_each_axis_in_its_quarters(rule, grid_):
    """On a non-square grid each quarter varies along one axis only: the column (w) first
    for MAE, big_vision and diffusers, the row (h) first for timm. A swapped port fails."""
    h, w = grid_
    quarters = np.split(grid.sincos2d_table(grid_, 16, rule=rule).reshape(h, w, 16), 4, axis=-1)
    for quarter, axis in zip(quarters, QUARTER_AXES[rule]):
        along = 1 if axis == "w" else 0  # the grid axis this quarter encodes
        assert np.ptp(quarter, axis=1 - along).max() == 0, (rule, axis)
        assert np.ptp(quarter, axis=along).max() > 0, (rule, axis)


def test_big_vision_and_mae_differ_in_the_frequency_divisor():
    """Both w-first; big_vision divides the exponent by D/4 - 1 (lowest frequency exactly
    1/temperature), MAE by D/4: at D = 64 on 14x14 the tables are far apart."""
    big_vision = grid.sincos2d_table((14, 14), 64, rule="big_vision")
    mae = grid.sincos2d_table((14, 14), 64, rule="mae")
    assert np.abs(big_vision - mae).max() > 0.1
    columns = np.arange(14.0)[None, :].repeat(14, 0).reshape(-1)  # raster order: i * w + j
    np.testing.assert_allclose(big_vision[:, 15], np.sin(columns * 1e-4), rtol=0, atol=1e-15)


def test_float32_sources_are_within_the_sinusoidal_tolerance_of_the_rounded_table():
    """big_vision (JAX) and timm (torch) compute their tables in float32: their own tables
    are not the rounded float64 table bit for bit, but within positional.tolerance (float32
    angles up to max(h, w) - 1 times the highest frequency, 1). A non-square grid: a port
    with h and w swapped would be far outside."""
    grid_ = (3, 5)
    import jax

    max_angle = max(grid_) - 1
    tol = positional.tolerance("float32", max_angle)
    owners = {
        # jitted, as inside big_vision's model (and one compilation, not one per op)
        "big_vision": np.asarray(
            jax.jit(big_vision_posemb_sincos_2d, static_argnums=(0, 1, 2))(*grid_, 64)
        )[0],
        "timm": timm_build_sincos2d_pos_embed(list(grid_), 64).numpy(),
    }
    for rule, owner in owners.items():
        ours = grid.sincos2d_table(grid_, 64, rule=rule, dtype="float32")
        gap = np.abs(owner.astype(np.float64) - ours).max()
        assert gap <= tol, (rule, gap, tol)
        # and far from the other rules: the owner's table is this rule's
        other = grid.sincos2d_table(grid_, 64, rule="mae" if rule == "timm" else "timm")
        assert np.abs(owner - other).max() > 100 * tol


# --- patches in order -------------------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(
    batch=st.integers(1, 2), channels_=st.integers(1, 3), patch=st.integers(1, 3), grid_=GRIDS,
    dtype=st.sampled_from(DTYPES), channels=st.sampled_from(["first", "last"]),
)
def test_patchify_is_a_reshape_bit_identical_on_every_backend(
    batch, channels_, patch, grid_, dtype, channels
):
    h, w = grid_
    first = rng.standard_normal((batch, channels_, h * patch, w * patch)).astype(dtype)
    images = first if channels == "first" else first.transpose(0, 2, 3, 1).copy()
    patches = grid.patchify(images, patch, channels=channels)
    assert patches.shape == (batch, h * w, channels_ * patch * patch)
    for i, j in [(0, 0), (h - 1, w - 1), (h - 1, 0)]:  # token i * w + j is patch (i, j)
        pixels = first[:, :, i * patch : (i + 1) * patch, j * patch : (j + 1) * patch]
        if channels == "last":
            pixels = pixels.transpose(0, 2, 3, 1)  # (B, p, p, C): flax's kernel order
        np.testing.assert_array_equal(patches[:, i * w + j], pixels.reshape(batch, -1))
    for name, got in on_every_backend(
        lambda b: b.patchify(native(b, images), patch, channels=channels)
    ).items():
        np.testing.assert_array_equal(got, patches, err_msg=name)


# --- the first layer --------------------------------------------------------------------------

D, C, P = 8, 3, 4  # dim, image channels, patch size: K = C * P * P = 48 terms a token


def tower(dtype, grid_, *, cls=True, registers=0, table_rows=None):
    """Seeded weights and images of one small vision tower."""
    h, w = grid_
    draw = lambda *shape: rng.standard_normal(shape).astype(dtype)  # noqa: E731
    return {
        "projection": draw(D, C, P, P),
        "bias": draw(D),
        "position_table": draw(table_rows or int(cls) + h * w, D),
        "cls_token": draw(D) if cls else None,
        "registers": draw(registers, D) if registers else None,
        "images": draw(2, C, h * P, w * P),
        "grid": grid_,
    }


def ones(*shape):
    return np.ones(shape, np.float32)


def layer_output(backend, weights, *, channels="first", **options):
    images = weights["images"]
    if channels == "last":
        images = images.transpose(0, 2, 3, 1).copy()
    arrays = {k: v for k, v in weights.items() if k != "images"}
    layer = backend.PatchEmbedding(patch_size=P, channels=channels, **arrays, **options)
    return backend.to_numpy(layer(native(backend, images)))


# (dtype, grid, prefix tokens): non-square grids both ways, with and without CLS and registers
CASES = [
    ("float32", (2, 3), "none"),
    ("float32", (3, 2), "cls"),
    ("bfloat16", (3, 2), "cls+registers"),
    ("float16", (2, 3), "cls+registers"),
]


@pytest.mark.parametrize("dtype, grid_, prefix", CASES)
def test_patch_embedding_is_cls_registers_then_patches(backend, dtype, grid_, prefix):
    """Output = [cls + pos[0], registers, projection(patches) + pos[1:]]: the prefix rows and
    the position add exact, the projection within its derived tolerance."""
    registers = 2 if prefix == "cls+registers" else 0
    weights = tower(dtype, grid_, cls=prefix != "none", registers=registers)
    got = layer_output(backend, weights)
    table, cls = weights["position_table"], weights["cls_token"]
    first = int(cls is not None) + registers  # tokens before the patches
    assert got.shape == (2, first + grid_[0] * grid_[1], D) and got.dtype == np.dtype(table.dtype)
    if cls is not None:  # one IEEE add, exact in float64, rounded once
        expected = (cls.astype(np.float64) + table[0]).astype(dtype)
        np.testing.assert_array_equal(got[:, 0], np.broadcast_to(expected, (2, D)))
    if registers:
        expected = np.broadcast_to(weights["registers"], (2, registers, D))
        np.testing.assert_array_equal(got[:, 1:first], expected)
    # The projection alone: the same layer with a zero table.
    zero = dict(weights, position_table=np.zeros_like(table))
    projected = layer_output(backend, zero)[:, first:]
    reference, tol = grid.patch_projection(
        weights["images"], weights["projection"], weights["bias"]
    )
    assert np.all(np.abs(projected.astype(np.float64) - reference) <= tol)
    # ... and the positions added to it exactly.
    expected = (projected.astype(np.float64) + table[int(cls is not None) :]).astype(dtype)
    np.testing.assert_array_equal(got[:, first:], expected)


def test_channels_last_images_give_the_channels_first_result(backend):
    weights = tower("float32", (3, 2))
    np.testing.assert_array_equal(
        layer_output(backend, weights, channels="last"), layer_output(backend, weights)
    )


def test_another_grid_takes_the_host_resized_table(backend):
    """Images of a grid other than the table's, with resize=<kernel>: the same output as a
    layer given resize.resize_table's table for that grid; of the table's own grid, the table
    as it is (Hugging Face's skip rule)."""
    weights = tower("float32", (3, 2))  # CASES[1]'s shapes: its compiled JAX function
    bigger = dict(weights, images=rng.standard_normal((2, C, 2 * P, 4 * P)).astype(np.float32))
    resized = resize.resize_table(
        weights["position_table"], (3, 2), (2, 4), kernel="torch-bicubic", prefix_tokens=1
    )
    np.testing.assert_array_equal(
        layer_output(backend, bigger, resize="torch-bicubic"),
        layer_output(backend, dict(bigger, position_table=resized, grid=(2, 4))),
    )
    np.testing.assert_array_equal(
        layer_output(backend, weights, resize="torch-bicubic"), layer_output(backend, weights)
    )


@pytest.mark.parametrize(
    "rows, cls, grid_",
    [(1 + 16, True, (4, 4)), (16, True, (4, 4)), (16, False, (4, 4)), (1, False, (1, 1))],
)
def test_without_grid_the_table_is_a_square_after_cls(rows, cls, grid_):
    """Hugging Face's ViT reads num_positions = rows - 1 and its square root; big_vision's
    table (CLS concatenated after the add) has no CLS row. Shared validation: one backend."""
    layer = backends.get("numpy").PatchEmbedding(
        ones(D, C, P, P), ones(rows, D), patch_size=P, cls_token=ones(D) if cls else None
    )
    assert (layer.grid, layer.prefix_tokens) == (grid_, rows - grid_[0] * grid_[1])


def test_a_cls_token_without_a_table_row_has_no_position(backend):
    """big_vision's "tok" pooling: CLS is concatenated after the add, the table is the grid's."""
    weights = tower("float32", (2, 2), cls=False)
    cls = rng.standard_normal(D).astype(np.float32)
    got = layer_output(backend, dict(weights, cls_token=cls))
    np.testing.assert_array_equal(got[:, 0], np.broadcast_to(cls, (2, D)))
    np.testing.assert_array_equal(got[:, 1:], layer_output(backend, weights))


@pytest.fixture(scope="module")
def measured():
    """Per dtype (the last case of each in CASES): each backend's projection error (the layer
    with a zero table) against the float64 reference, its tolerance, and the NumPy layer's
    patch rows with the right table and with its h and w swapped."""
    out = {}
    for dtype, ((h, w), prefix) in {dtype: case for dtype, *case in CASES}.items():
        registers = 2 * prefix.endswith("registers")
        weights = tower(dtype, (h, w), cls=prefix != "none", registers=registers)
        table = weights["position_table"]
        first = len(table) - h * w  # the table's CLS row, if any
        zero = dict(weights, position_table=np.zeros_like(table))
        reference, tol = grid.patch_projection(
            weights["images"], weights["projection"], weights["bias"]
        )
        swapped = table.copy()
        swapped[first:] = table[first:].reshape(h, w, D).transpose(1, 0, 2).reshape(h * w, D)
        patches = slice(-h * w, None)
        out[dtype] = {
            "tolerance": tol,
            "projection": {
                b: layer_output(backends.get(b), zero)[:, patches].astype(np.float64) - reference
                for b in BACKENDS
            },
            "right": layer_output(backends.get("numpy"), weights)[:, patches].astype(np.float64),
            "swapped": layer_output(
                backends.get("numpy"), dict(weights, position_table=swapped)
            )[:, patches].astype(np.float64),
        }
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_projection_tolerance_holds_is_tight_and_has_teeth(measured, dtype):
    """torch's conv, JAX's conv and NumPy's matmul all lie within the derived tolerance of
    the float64 reference and of each other; the worst of them uses more than 1/100 of it
    (the bound is not vacuous); a table with h and w swapped lies far outside it."""
    m = measured[dtype]
    tol = m["tolerance"]
    worst = max(np.max(np.abs(error) / tol) for error in m["projection"].values())
    assert worst <= 1
    assert worst > 0.01, f"the bound is {1 / worst:.0f} times the worst error"
    errors = list(m["projection"].values())
    for a in errors:
        for b in errors:
            assert np.all(np.abs(a - b) <= 2 * tol)  # conv against matmul
    assert np.max(np.abs(m["swapped"] - m["right"]) / tol) > 100


# --- bad input ----------------------------------------------------------------------------------


BAD_INPUT = {
    "image grid is not the table's": lambda b: b.PatchEmbedding(
        ones(D, C, P, P), ones(1 + 4, D), patch_size=P, cls_token=ones(D)
    )(native(b, ones(1, C, 3 * P, 2 * P))),
    "table rows are not the grid's": lambda b: b.PatchEmbedding(
        ones(D, C, P, P), ones(10, D), patch_size=P, grid=(4, 4)
    ),
    "two rows before the grid": lambda b: b.PatchEmbedding(
        ones(D, C, P, P), ones(2 + 6, D), patch_size=P, grid=(2, 3), cls_token=ones(D)
    ),
    "a CLS row without cls_token": lambda b: b.PatchEmbedding(
        ones(D, C, P, P), ones(1 + 6, D), patch_size=P, grid=(2, 3)
    ),
    "zero grid side": lambda b: b.sincos2d_table((0, 3), 16),
    "negative grid side": lambda b: b.sincos2d_table((4, -1), 16),
    "negative prefix": lambda b: b.sincos2d_table((2, 2), 16, prefix_tokens=-1),
    "zero patch size": lambda b: b.patchify(native(b, ones(1, C, 4, 4)), 0),
    "image not divisible by the patch": lambda b: b.patchify(native(b, ones(1, C, 10, 8)), 4),
    "patch size not the projection's": lambda b: b.PatchEmbedding(
        ones(D, C, P, P), ones(4, D), patch_size=P + 1
    ),
    "unknown rule": lambda b: b.sincos2d_table((2, 2), 16, rule="moco"),
    "an option the rule does not read": lambda b: b.sincos2d_table((2, 2), 16, temperature=100.0),
    "dim not a multiple of 4": lambda b: b.sincos2d_table((2, 2), 10),
    "unknown resize kernel": lambda b: b.PatchEmbedding(
        ones(D, C, P, P), ones(4, D), patch_size=P, resize="bicubic"
    ),
    "channels of the wrong count": lambda b: b.PatchEmbedding(
        ones(D, C, P, P), ones(4, D), patch_size=P
    )(native(b, ones(1, C + 1, 2 * P, 2 * P))),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_refused_alike_on_every_backend_in_one_line(case):
    raised = {}
    for name in BACKENDS:
        with pytest.raises((ValueError, TypeError)) as info:
            BAD_INPUT[case](backends.get(name))
        raised[name] = (type(info.value), str(info.value))
    assert len(set(raised.values())) == 1, raised  # the same exception, the same words
    kind, message = raised["numpy"]
    assert kind is ValueError and "\n" not in message and ": " in message, message  # value: fix
