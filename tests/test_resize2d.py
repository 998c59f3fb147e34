"""Resizing a learned 2-D position table (backends.resize): the host path and the tap form
bit-identical on every backend; each framework's own resize within the derived tolerance of
the float64 reference, the tolerance with teeth; each kernel held to its owner's library
(torch's F.interpolate, jax.image.resize, Pillow, scipy's zoom, Hugging Face's SigLIP2
NaFlex); bad input refused alike."""

import jax
import numpy as np
import pytest
import scipy.ndimage
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from transformers import Siglip2VisionConfig
from transformers.models.siglip2.modeling_siglip2 import Siglip2VisionEmbeddings

import backends
from backends import resize

KERNELS = tuple(resize.KERNELS)
NAMES = ("numpy", "torch", "jax")
LOW = ("float32", "float16", "bfloat16")
OLD = (6, 8)  # non-square: a square grid hides an h/w swap
NEW = ((8, 10), (4, 5), (4, 10), (10, 4))  # up, down, mixed, and the sides' roles swapped


def table(grid, dim=8, prefix=0, dtype="float32", seed=0) -> np.ndarray:
    rows = prefix + grid[0] * grid[1]
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(backends.DTYPES[dtype])


def on(name: str, array) -> np.ndarray:
    return backends.get(name).to_numpy(array)


def reference(x: np.ndarray, old, new, kernel: str, **options) -> np.ndarray:
    """The float64 resize, unrounded."""
    return resize.resize_table(x.astype(np.float64), old, new, kernel=kernel, **options)


def magnitude(x) -> float:
    return float(np.abs(np.asarray(x, np.float64)).max())


# --- bits: the host path and the taps -------------------------------------------------------

grids = st.tuples(st.integers(1, 7), st.integers(1, 7))


@settings(max_examples=12, deadline=None)
@given(
    old=grids,
    new=grids,
    prefix=st.integers(0, 2),
    kernel=st.sampled_from(KERNELS),
    dtype=st.sampled_from(LOW),
    compute=st.sampled_from((None, "float32")),
)
def test_the_host_path_is_bit_identical_on_every_backend(old, new, prefix, kernel, dtype, compute):
    x = table(old, prefix=prefix, dtype=dtype)
    options = {"kernel": kernel, "prefix_tokens": prefix, "compute_dtype": compute}
    expected = resize.resize_table(x, old, new, **options)
    assert expected.dtype == x.dtype and expected.shape == (prefix + new[0] * new[1], 8)
    np.testing.assert_array_equal(expected[:prefix], x[:prefix])  # the prefix rows as they were
    for name in NAMES:
        y = backends.get(name).resize_positions(x, old, new, path="host", **options)
        np.testing.assert_array_equal(on(name, y), expected)


@settings(max_examples=15, deadline=None)
@given(old=grids, new=grids, kernel=st.sampled_from(KERNELS))
def test_transposing_the_grid_transposes_the_result(old, new, kernel):
    # In float64, to its last bits: the transposed grid's sums run in another order (rounded to
    # float32, a bilinear midpoint's tie can then round either way).
    x = table(old, dtype="float64")
    transposed = x.reshape(*old, -1).transpose(1, 0, 2).reshape(x.shape)
    y = resize.resize_table(x, old, new, kernel=kernel).reshape(*new, -1)
    y_t = resize.resize_table(transposed, old[::-1], new[::-1], kernel=kernel)
    bound = resize.tolerance(kernel, old, new, magnitude=magnitude(x), dtype="float64")
    assert np.abs(y_t.reshape(*new[::-1], -1) - y.transpose(1, 0, 2)).max() <= bound


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k != "dinov2-offset"])
def test_the_identity_resize_returns_the_table_bit_for_bit(kernel):
    x = table(OLD, prefix=1)
    paths = [("numpy", path) for path in resize.PATHS] + [("jax", "host"), ("jax", "taps")]
    paths += [("torch", "host"), ("torch", "taps")]
    if resize.KERNELS[kernel].torch:  # the others refused: test_a_kernel_torch_cannot_say_...
        paths.append(("torch", "native"))
    for name, path in paths:  # (JAX's native path: a compilation per kernel, left out for time)
        y = backends.get(name).resize_positions(
            x, OLD, OLD, kernel=kernel, prefix_tokens=1, path=path
        )
        np.testing.assert_array_equal(on(name, y), x)


def test_dinov2_s_offset_moves_every_sample_even_at_its_own_grid():
    # scale_factor (n + 0.1)/n, not 1: what Hugging Face's size= no longer reproduces.
    x = table(OLD)
    assert not np.array_equal(resize.resize_table(x, OLD, OLD, kernel="dinov2-offset"), x)
    assert np.all(resize.sample_points("dinov2-offset", 8, 8) < np.arange(8))


@settings(max_examples=5, deadline=None)  # each new shape and dtype compiles JAX's eager ops: 0.4 s
@given(
    new=st.sampled_from(((4, 10), (10, 4))),
    prefix=st.integers(0, 1),
    kernel=st.sampled_from(KERNELS),
    dtype=st.sampled_from(LOW),
)
def test_the_taps_are_bit_identical_on_every_backend(new, prefix, kernel, dtype):
    x = table(OLD, prefix=prefix, dtype=dtype)
    options = {"kernel": kernel, "prefix_tokens": prefix, "path": "taps"}
    expected = backends.get("numpy").resize_positions(x, OLD, new, **options)
    assert expected.dtype == x.dtype
    for name in ("torch", "jax"):
        np.testing.assert_array_equal(
            on(name, backends.get(name).resize_positions(x, OLD, new, **options)), expected
        )


@pytest.mark.parametrize("dtype, compute", [("float64", "float32"), ("float16", "float64")])
def test_the_taps_keep_their_bits_across_a_computation_dtype(dtype, compute):
    # JAX needs x64 for a float64 table summed in float32; torch casts float64 to float16
    # through float32 where NumPy rounds directly: the plan's casts say one way for all.
    x = table(OLD, prefix=1, dtype=dtype)
    options = {"kernel": "bilinear", "prefix_tokens": 1, "compute_dtype": compute, "path": "taps"}
    expected = backends.get("numpy").resize_positions(x, OLD, (4, 10), **options)
    for name in ("torch", "jax"):
        y = on(name, backends.get(name).resize_positions(x, OLD, (4, 10), **options))
        assert y.dtype == x.dtype
        np.testing.assert_array_equal(y, expected)


def test_the_taps_under_jit_are_within_the_tolerance():
    # XLA contracts a multiply and an add into an FMA under jit: the last bits differ.
    jax_backend = backends.get("jax")
    x = table(OLD)
    for kernel in ("torch-bicubic", "antialiased-bilinear"):
        plan = resize.taps(x, OLD, (4, 10), kernel=kernel)
        grid = x.reshape(*OLD, -1)
        eager = jax_backend.tap_resize(grid, plan.rows, plan.columns)
        jitted = jax.jit(jax_backend.tap_resize)(grid, plan.rows, plan.columns)
        bound = resize.tolerance(kernel, OLD, (4, 10), magnitude=magnitude(x), dtype="float32")
        assert np.abs(np.asarray(jitted, np.float64) - np.asarray(eager)).max() <= bound


# --- the framework path: within the tolerance, which has teeth ------------------------------


# torch's refusal of Keys' kernel where an axis shrinks:
# test_a_kernel_torch_cannot_say_is_refused_with_the_fix
NATIVE = [
    # rows down (widened when antialiased), columns up: one JAX compilation; torch's Keys'
    # kernel (its antialiased one, which no axis shrinking leaves unwidened) up both ways
    (name, kernel, (4, 10) if name == "jax" or resize.KERNELS[kernel].torch_shrinks else (8, 10))
    for name in ("torch", "jax")
    for kernel in KERNELS
    if getattr(resize.KERNELS[kernel], name) is not None
]


@pytest.mark.parametrize("name, kernel, new", NATIVE)
def test_the_native_path_is_within_the_tolerance_of_the_float64_reference(name, kernel, new):
    backend = backends.get(name)
    for dtype, compute in (("float32", None), ("bfloat16", "float32")):
        x = table(OLD, prefix=1, dtype=dtype)
        options = {"kernel": kernel, "prefix_tokens": 1, "compute_dtype": compute}
        y = on(name, backend.resize_positions(x, OLD, new, **options))
        bound = resize.tolerance(
            kernel, OLD, new, magnitude=magnitude(x), dtype=dtype, compute_dtype=compute
        )
        assert y.dtype == x.dtype
        assert np.abs(y.astype(np.float64) - reference(x, OLD, new, **options)).max() <= bound


@pytest.mark.parametrize(
    "old, new",
    [((14, 14), (16, 16)), ((14, 14), (10, 10)), ((14, 14), (10, 16)), ((12, 16), (9, 20))],
)
def test_the_tolerance_has_teeth(old, new):
    x = table(old)
    bound = resize.tolerance("torch-bicubic", old, new, magnitude=magnitude(x), dtype="float32")
    torch_bicubic = reference(x, old, new, "torch-bicubic")
    mistakes = {
        "a = -0.5 for -0.75": reference(x, old, new, "antialiased-bicubic"),
        "Keys' edges for replicated ones": reference(x, old, new, "keys-bicubic"),
    }
    if old != old[::-1] or new != new[::-1]:  # a square grid hides a swap
        mistakes["h and w swapped"] = reference(x, old[::-1], new[::-1], "torch-bicubic")
    for mistake, y in mistakes.items():
        assert np.abs(y - torch_bicubic).max() > 100 * bound, mistake
    if new[0] < old[0]:  # antialiasing widens the kernel only when downsampling
        antialiased = reference(x, old, new, "antialiased-bilinear")
        assert np.abs(antialiased - reference(x, old, new, "bilinear")).max() > 100 * bound


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_the_tolerance_is_tight(name):
    # The vision job's default, 14 x 14 -> 16 x 16: the scale 0.875 and every sample point exact
    # in binary, the weights exact in float32, so the bound is the sums' and the last rounding's
    # alone, and F.interpolate and jax.image.resize reach 1/8 to 1/11 of it (seeds 0 to 7; the
    # old bound's coordinate term, there where no coordinate rounds, made it 1/200).
    x = table((14, 14), dim=64)
    y = on(name, backends.get(name).resize_positions(x, (14, 14), (16, 16), kernel="torch-bicubic"))
    worst = np.abs(y - reference(x, (14, 14), (16, 16), "torch-bicubic")).max()
    bound = resize.tolerance(
        "torch-bicubic", (14, 14), (16, 16), magnitude=magnitude(x), dtype="float32"
    )
    assert bound / 20 < worst <= bound


@pytest.mark.parametrize("old, new", [((1, 8), (4, 10)), ((6, 1), (8, 3)), ((1, 1), (3, 2))])
@pytest.mark.parametrize("name", ["torch", "jax"])
def test_a_one_pixel_axis_is_within_the_tolerance(name, old, new):
    # Across a one-pixel axis torch's bicubic reads the one input through all four taps, their
    # weights of l1 norm up to 1.375 where the merged matrix holds a single 1: the bound counts
    # the taps as they are summed.
    x = 1000 * table(old, dim=64, seed=4)
    y = on(name, backends.get(name).resize_positions(x, old, new, kernel="torch-bicubic"))
    bound = resize.tolerance("torch-bicubic", old, new, magnitude=magnitude(x), dtype="float32")
    assert np.abs(y - reference(x, old, new, "torch-bicubic")).max() <= bound


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_a_float16_table_near_underflow_is_within_the_tolerance(name):
    # Below float16's 2**-14 a rounding errs by half its smallest subnormal, 2**-25, not by a
    # fraction of the value: the bound's absolute term (torch and JAX reach 2**-25 and 2**-24).
    x = (3e-6 * table(OLD)).astype(np.float16)
    for kernel in ("torch-bicubic", "bilinear"):
        y = on(name, backends.get(name).resize_positions(x, OLD, (8, 10), kernel=kernel))
        bound = resize.tolerance(kernel, OLD, (8, 10), magnitude=magnitude(x), dtype="float16")
        error = np.abs(y.astype(np.float64) - reference(x, OLD, (8, 10), kernel)).max()
        assert 2.0**-25 <= error <= bound, kernel


def test_subnormal_taps_are_kept_by_numpy_and_torch_and_flushed_by_xla():
    # XLA's CPU runtime flushes float32 subnormals to zero (denormals-are-zero, flush-to-zero);
    # NumPy and torch keep them. The tap form is bit-identical for normal-range values only.
    x = table(OLD) * np.float32(2.0**-130)  # every value below float32's 2**-126
    plan = resize.taps(x, OLD, (4, 10), kernel="torch-bicubic")
    grid = x.reshape(*OLD, -1)
    held = {"numpy": grid, "torch": torch.from_numpy(grid), "jax": grid}
    ours = {
        name: on(name, backends.get(name).tap_resize(held[name], plan.rows, plan.columns))
        for name in NAMES
    }
    np.testing.assert_array_equal(ours["numpy"], ours["torch"])
    assert np.count_nonzero(ours["numpy"]) > 0 and np.count_nonzero(ours["jax"]) == 0


def test_torch_s_bicubic_and_jax_s_differ_by_the_kernel_not_the_arithmetic():
    # The 0.33 (14 -> 16): F.interpolate's default against jax.image.resize's, both native.
    x = table(OLD, prefix=1)
    options = {"prefix_tokens": 1}
    torch_y = on(
        "torch",
        backends.get("torch").resize_positions(x, OLD, (4, 10), kernel="torch-bicubic", **options),
    )
    jax_y = on(
        "jax",
        backends.get("jax").resize_positions(
            x, OLD, (4, 10), kernel="antialiased-bicubic", **options
        ),
    )
    bound = resize.tolerance("torch-bicubic", OLD, (4, 10), magnitude=magnitude(x), dtype="float32")
    assert np.abs(torch_y - jax_y).max() > 1000 * bound


# --- each kernel held to its owner's library -------------------------------------------------


def _torch_options(kernel: str, old, new) -> dict:
    rule = resize.KERNELS[kernel]
    if rule.offset is None:
        return {"size": new, **rule.torch}
    return {"scale_factor": tuple((b + rule.offset) / a for a, b in zip(old, new)), **rule.torch}


@pytest.mark.parametrize("kernel", [k for k in KERNELS if resize.KERNELS[k].torch])
def test_each_torch_kernel_is_f_interpolate(kernel):
    x = table(OLD, dtype="float64")
    nchw = torch.from_numpy(x.reshape(*OLD, -1)).permute(2, 0, 1)[None]
    for new in NEW:
        if not resize.KERNELS[kernel].torch_shrinks and (new[0] < OLD[0] or new[1] < OLD[1]):
            continue  # test_a_kernel_torch_cannot_say_is_refused_with_the_fix
        theirs = torch.nn.functional.interpolate(nchw, **_torch_options(kernel, OLD, new))
        theirs = theirs[0].permute(1, 2, 0).reshape(new[0] * new[1], -1).numpy()
        bound = resize.tolerance(kernel, OLD, new, magnitude=magnitude(x), dtype="float64")
        assert np.abs(theirs - reference(x, OLD, new, kernel)).max() <= bound
        ours = backends.get("torch").resize_positions(x.astype(np.float32), OLD, new, kernel=kernel)
        theirs = torch.nn.functional.interpolate(nchw.float(), **_torch_options(kernel, OLD, new))
        theirs = theirs[0].permute(1, 2, 0).reshape(new[0] * new[1], -1).numpy()
        np.testing.assert_array_equal(on("torch", ours), theirs)


@pytest.mark.parametrize("kernel", ["torch-bicubic", "antialiased-bilinear"])
def test_a_scale_factor_is_torch_s_one_over_scale(kernel):
    # floor(6 * 0.7) = 4 rows and floor(8 * 1.3) = 10 columns, sampled at (i + 0.5) / factor - 0.5.
    x = table(OLD, dtype="float64")
    nchw = torch.from_numpy(x.reshape(*OLD, -1)).permute(2, 0, 1)[None]
    options = {"kernel": kernel, "scale_factor": (0.7, 1.3)}
    theirs = torch.nn.functional.interpolate(
        nchw, scale_factor=(0.7, 1.3), **resize.KERNELS[kernel].torch
    )
    expected = reference(x, OLD, (4, 10), **options)
    assert not np.allclose(expected, reference(x, OLD, (4, 10), kernel=kernel))  # not size=
    bound = resize.tolerance(
        kernel, OLD, (4, 10), magnitude=magnitude(x), dtype="float64", scale_factor=(0.7, 1.3)
    )
    assert np.abs(theirs[0].permute(1, 2, 0).reshape(40, -1).numpy() - expected).max() <= bound
    bound = resize.tolerance(
        kernel, OLD, (4, 10), magnitude=magnitude(x), dtype="float32", scale_factor=(0.7, 1.3)
    )
    for name in ("torch", "jax"):
        y = backends.get(name).resize_positions(x.astype(np.float32), OLD, (4, 10), **options)
        assert np.abs(on(name, y) - expected).max() <= bound, name


@pytest.mark.parametrize("kernel", ["keys-bicubic", "antialiased-bicubic"])
def test_keys_and_the_antialiased_bicubic_are_jax_image_resize(kernel):
    # The antialiased bilinear kernel is big_vision's scale_and_translate: the NaFlex test.
    x = table(OLD, dtype="float64")
    rule = resize.KERNELS[kernel].jax
    resize_jax = jax.jit(jax.image.resize, static_argnums=(1, 2), static_argnames="antialias")
    with jax.enable_x64(True):
        theirs = resize_jax(x.reshape(*OLD, -1), (4, 10, 8), "bicubic", antialias=rule["antialias"])
    bound = resize.tolerance(kernel, OLD, (4, 10), magnitude=magnitude(x), dtype="float64")
    assert (
        np.abs(np.asarray(theirs).reshape(-1, 8) - reference(x, OLD, (4, 10), kernel)).max()
        <= bound
    )


@pytest.mark.parametrize(
    "kernel, pil",
    [("antialiased-bicubic", Image.BICUBIC), ("antialiased-bilinear", Image.BILINEAR)],
)
def test_the_antialiased_kernels_are_pillow_s(kernel, pil):
    x = table(OLD, dim=1)
    for new in NEW:
        theirs = np.asarray(Image.fromarray(x.reshape(OLD), mode="F").resize(new[::-1], pil))
        bound = resize.tolerance(kernel, OLD, new, magnitude=magnitude(x), dtype="float32")
        assert np.abs(theirs.reshape(-1, 1) - reference(x, OLD, new, kernel)).max() <= bound


def test_corners_aligned_is_big_vision_s_zoom():
    # big_vision resample_posemb: scipy.ndimage.zoom(posemb, (new/old, new/old, 1), order=1).
    x = table(OLD, dtype="float64")
    for new in NEW:
        zoom = (new[0] / OLD[0], new[1] / OLD[1], 1)
        theirs = scipy.ndimage.zoom(x.reshape(*OLD, -1), zoom, order=1, grid_mode=False)
        bound = resize.tolerance(
            "bilinear-corners", OLD, new, magnitude=magnitude(x), dtype="float64"
        )
        assert (
            np.abs(theirs.reshape(-1, 8) - reference(x, OLD, new, "bilinear-corners")).max()
            <= bound
        )


@pytest.fixture(scope="module")
def siglip2():
    """Hugging Face's NaFlex position embeddings, a tiny tower's (an 8x8 table of width 8)."""
    config = Siglip2VisionConfig(hidden_size=8, num_patches=64, patch_size=2, num_channels=1)
    return Siglip2VisionEmbeddings(config)


def test_naflex_is_hugging_face_s_resize_positional_embeddings(siglip2):
    x = table((8, 8))
    shapes = np.array([[6, 10], [5, 5], [12, 3], [8, 8]])  # up, down, mixed, the table's own
    with torch.no_grad():
        siglip2.position_embedding.weight.copy_(torch.from_numpy(x))
        weight = siglip2.position_embedding.weight.reshape(8, 8, -1)
        theirs = siglip2.resize_positional_embeddings(weight, torch.from_numpy(shapes), 64).numpy()
    assert np.array_equal(theirs[1, 25:], np.repeat(theirs[1, :1], 39, axis=0))  # padding: (0, 0)
    ours = {
        name: on(name, backends.get(name).naflex_positions(x, (8, 8), shapes, 64)) for name in NAMES
    }
    np.testing.assert_array_equal(ours["torch"], theirs)  # Hugging Face's computation, op for op
    host = resize.naflex_positions(x, (8, 8), shapes, 64)
    for name in NAMES:
        y = backends.get(name).naflex_positions(x, (8, 8), shapes, 64, path="host")
        np.testing.assert_array_equal(on(name, y), host)
    for image, (h, w) in enumerate(shapes.tolist()):  # the host path, padding included, is HF's
        bound = resize.tolerance(
            "antialiased-bilinear", (8, 8), (h, w), magnitude=magnitude(x), dtype="float32"
        )
        assert np.abs(host[image] - theirs[image]).max() <= bound, (h, w)
    for image, (h, w) in enumerate(shapes.tolist()):
        padding = np.repeat(host[image, :1], 64 - h * w, axis=0)
        np.testing.assert_array_equal(host[image, h * w :], padding)
        exact = reference(x, (8, 8), (h, w), "antialiased-bilinear")
        exact = np.concatenate([exact, np.repeat(exact[:1], 64 - h * w, axis=0)])  # padding: (0, 0)
        for y, one_sum in ((theirs, False), (ours["numpy"], True), (ours["jax"], False)):
            bound = resize.tolerance(  # NumPy's matmul: one sum over the 2-D weights
                "antialiased-bilinear",
                (8, 8),
                (h, w),
                magnitude=magnitude(x),
                dtype="float32",
                one_sum=one_sum,
            )
            # each padding row computed at (0, 0), as Hugging Face's: a matmul may round it
            # apart from row 0 in the last bit (NumPy's BLAS does, its tail rows summed apart)
            assert np.abs(y[image] - exact).max() <= bound


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rows, old, new, options, error, message",
    [
        (
            48,
            (6, 6),
            (4, 4),
            {},
            ValueError,
            "table has 48 rows but 0 prefix rows and a 6x6 grid make 36",
        ),
        (
            49,
            (6, 8),
            (4, 4),
            {},
            ValueError,
            "table has 49 rows but 0 prefix rows and a 6x8 grid make 48",
        ),
        (48, (0, 8), (4, 4), {}, ValueError, "old_grid (0, 8) must have h >= 1 and w >= 1"),
        (48, (6, 8), (4, -2), {}, ValueError, "new_grid (4, -2) must have h >= 1 and w >= 1"),
        (48, (6, 8), (4, 4.5), {}, TypeError, "new_grid must be an integer, got 4.5"),
        (
            48,
            (6, 8),
            (4, 4),
            {"prefix_tokens": 50},
            ValueError,
            "prefix_tokens 50 must be in [0, 48]",
        ),
        (
            48,
            (6, 8),
            (4, 4),
            {"kernel": "bicubic"},
            ValueError,
            "unknown resize kernel 'bicubic': valid ones are torch-bicubic",
        ),
        (
            48,
            (6, 8),
            (4, 4),
            {"path": "fast"},
            ValueError,
            "unknown resize path 'fast': valid ones are host, native, taps",
        ),
        (
            48,
            (6, 8),
            (9, 12),
            {"scale_factor": 1.4},
            ValueError,
            "scale_factor 1.4 makes floor(6 * 1.4) = 8",
        ),
        (
            48,
            (6, 8),
            (4, 4),
            {"scale_factor": 0},
            ValueError,
            "scale_factor must be positive and finite, got 0",
        ),
        (
            48,
            (6, 8),
            (4, 4),
            {"kernel": "dinov2-offset", "scale_factor": 0.7},
            ValueError,
            "takes no scale_factor",
        ),
    ],
)
@pytest.mark.parametrize("path", resize.PATHS)
def test_bad_input_is_refused_the_same_way_on_every_backend(
    rows, old, new, options, error, message, path
):
    options = {"kernel": "torch-bicubic", "path": path, **options}
    for name in NAMES:
        with pytest.raises(error) as raised:
            backends.get(name).resize_positions(table((rows, 1)), old, new, **options)
        assert message in str(raised.value) and "\n" not in str(raised.value), name


def test_a_kernel_torch_cannot_say_is_refused_with_the_fix():
    # F.interpolate's a = -0.5 is its antialiased bicubic: Keys' kernel until an axis shrinks,
    # then widened by the scale, far from Keys' (which test_the_tolerance_has_teeth measures).
    x = table(OLD)
    nchw = torch.from_numpy(x.reshape(*OLD, -1)).permute(2, 0, 1)[None]
    shrunk = torch.nn.functional.interpolate(nchw, size=(4, 10), mode="bicubic", antialias=True)
    shrunk = shrunk[0].permute(1, 2, 0).reshape(40, -1).numpy()
    bound = resize.tolerance("keys-bicubic", OLD, (4, 10), magnitude=magnitude(x), dtype="float32")
    assert np.abs(shrunk - reference(x, OLD, (4, 10), "keys-bicubic")).max() > 100 * bound
    with pytest.raises(
        ValueError,
        match=r"kernel 'keys-bicubic' has no torch form when downsampling .* pass path='taps'",
    ):
        backends.get("torch").resize_positions(x, OLD, (4, 10), kernel="keys-bicubic")
    with pytest.raises(ValueError, match="in bfloat16 .* pass compute_dtype='float32'"):
        backends.get("torch").resize_positions(
            table(OLD, dtype="bfloat16"), OLD, (4, 5), kernel="antialiased-bilinear"
        )


def test_torch_s_antialiased_resize_to_one_column_is_refused_since_it_repeats_the_first_row():
    x = table(OLD)
    nchw = torch.from_numpy(x.reshape(*OLD, -1)).permute(2, 0, 1)[None]
    theirs = torch.nn.functional.interpolate(nchw, size=(4, 1), mode="bilinear", antialias=True)
    assert torch.equal(theirs[..., 1:, :], theirs[..., :1, :].expand(-1, -1, 3, -1))  # torch 2.13
    assert not np.array_equal(*reference(x, OLD, (4, 1), "antialiased-bilinear")[:2])
    with pytest.raises(ValueError, match="to one column .* pass path='taps'"):
        backends.get("torch").resize_positions(x, OLD, (4, 1), kernel="antialiased-bilinear")


@pytest.mark.parametrize(
    "shapes, max_patches, message",
    [
        ([[6, 10]], 50, "spatial_shapes[0] = (6, 10) has 60 patches, more than max_patches 50"),
        ([[6, 0]], 64, "spatial_shapes[0] (6, 0) must have h >= 1 and w >= 1"),
        ([6, 10], 64, "spatial_shapes must be integers (B, 2)"),
        (np.zeros((0, 2), np.int64), 64, "spatial_shapes has no images (B = 0)"),
    ],
)
def test_bad_naflex_input_is_refused_the_same_way_on_every_backend(shapes, max_patches, message):
    for name in NAMES:
        for path in ("host", "native"):
            with pytest.raises(ValueError) as raised:
                backends.get(name).naflex_positions(
                    table((8, 8)), (8, 8), shapes, max_patches, path=path
                )
            assert message in str(raised.value), name
