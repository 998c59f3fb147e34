"""Sinusoidal tables and RoPE: every backend against the float64 reference, and the
properties that make each scheme what it is.

Bitwise equality across backends is not promised here (sin, cos and pow differ in
the last bits between libraries); every comparison with the reference uses
backends.positional.tolerance, whose docstring derives it.
"""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from backends import positional
from tests.conftest import native

DTYPES = list(backends.DTYPES)
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,  # small, so a 64-wide head sees all three regimes
}
# Gemma 4's global layers: a quarter of the head's frequency slots turn, the rest stand still.
PROPORTIONAL = {"rope_type": "proportional", "partial_rotary_factor": 0.25}
SCALINGS = [None, {"type": "linear", "factor": 4.0}, LLAMA3, PROPORTIONAL]
SCALING_IDS = ["none", "linear", "llama3", "proportional"]


def f64(backend, array):
    return backend.to_numpy(array).astype(np.float64)


def assert_within(actual, expected, tol):
    """|actual - expected| <= tol everywhere, tol from positional.tolerance."""
    err = float(np.max(np.abs(actual - expected))) if actual.size else 0.0
    assert err <= tol, f"max |diff| {err:.3g} exceeds the derived tolerance {tol:.3g}"


# --- sinusoidal -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["interleaved", "concat"])
@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_sinusoidal_matches_the_reference(backend, dtype, layout, base):
    table = backend.sinusoidal_table(1000, 64, base=base, layout=layout, dtype=dtype)
    assert backend.to_numpy(table).dtype == backends.DTYPES[dtype]
    expected = positional.sinusoidal_table(1000, 64, base=base, layout=layout)
    assert_within(f64(backend, table), expected, positional.tolerance(dtype, 999, base=base))


def test_float64_sinusoidal_agrees_to_1e12(backend):
    table = f64(backend, backend.sinusoidal_table(2048, 128, dtype="float64"))
    assert_within(table, positional.sinusoidal_table(2048, 128), 1e-12)


def test_sinusoidal_follows_the_formula_literally():
    # PE[p, 2i] = sin(p / 10000**(2i/dim)), PE[p, 2i+1] = cos(...), checked at a few points.
    table = positional.sinusoidal_table(50, 8)
    for p, i in [(0, 0), (1, 0), (7, 1), (49, 3)]:
        angle = p / 10000 ** (2 * i / 8)
        assert table[p, 2 * i] == np.sin(angle) and table[p, 2 * i + 1] == np.cos(angle)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sinusoidal_layouts_are_one_permutation_apart_exactly(backend, dtype):
    interleaved = backend.to_numpy(backend.sinusoidal_table(40, 16, dtype=dtype))
    concat = backend.to_numpy(backend.sinusoidal_table(40, 16, layout="concat", dtype=dtype))
    np.testing.assert_array_equal(concat, interleaved[:, backends.rope_permutation(16)])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sinusoidal_pairs_have_unit_norm(backend, dtype):
    table = f64(backend, backend.sinusoidal_table(500, 32, dtype=dtype))
    norms = np.hypot(table[:, 0::2], table[:, 1::2])
    # |sin|^2 + |cos|^2 from values each within tol of the truth: the norm is within 2 tol.
    assert_within(norms, np.ones_like(norms), 2 * positional.tolerance(dtype, 499))


@pytest.mark.parametrize("shift", [1, 5, 37])
def test_a_shift_is_a_fixed_rotation(backend, shift):
    # PE[p + k] = R(k) PE[p] for every p: each (sin, cos) pair turns by k * w_i,
    # the property the paper chose the scheme for (relative positions are linear maps).
    dim, n = 16, 200
    table = f64(backend, backend.sinusoidal_table(n + shift, dim, dtype="float64"))
    turn = shift * positional.frequencies(dim)  # (dim/2,)
    sin, cos = table[:n, 0::2], table[:n, 1::2]
    turned_sin = sin * np.cos(turn) + cos * np.sin(turn)
    turned_cos = cos * np.cos(turn) - sin * np.sin(turn)
    tol = 3 * positional.tolerance("float64", n + shift)
    assert_within(turned_sin, table[shift:, 0::2], tol)
    assert_within(turned_cos, table[shift:, 1::2], tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sinusoidal_layer_is_lookup_plus_its_own_table_exactly(backend, dtype):
    token_table, _ = backends.shared_weights(50, 12, 1, dtype=dtype)
    layer = backend.TokenPositionEmbedding(
        token_table, positions="sinusoidal", max_seq_len=20, layout="concat"
    )
    table = backend.to_numpy(backend.sinusoidal_table(20, 12, layout="concat", dtype=dtype))
    token_ids = np.array([[3, 49, 0], [7, 7, 1]])
    expected = token_table[token_ids] + table[5:8]
    np.testing.assert_array_equal(backend.to_numpy(layer(token_ids, start=5)), expected)
    np.testing.assert_array_equal(backend.to_numpy(layer.position_embeddings(5, 3)), table[5:8])


def test_no_positions_layer_is_the_lookup_alone(backend):
    token_table, _ = backends.shared_weights(50, 12, 1)
    layer = backend.TokenPositionEmbedding(token_table, positions="none")
    token_ids = np.array([4, 8, 15, 16, 23, 42])
    np.testing.assert_array_equal(
        backend.to_numpy(layer(token_ids, start=1000)), token_table[token_ids]
    )
    with pytest.raises(ValueError, match='positions="none"'):
        layer.position_embeddings(0, 2)


# --- RoPE ---------------------------------------------------------------------------


def rope_problem(dtype, shape=(2, 300, 64), seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(backends.DTYPES[dtype])
    positions = np.random.default_rng(seed + 1).permutation(1000)[: shape[-2]]
    # magnitude in the tolerance: the largest |a| + |b| over rotation pairs, bounded by 2 max|x|.
    magnitude = 2 * float(np.abs(x.astype(np.float64)).max())
    return x, positions, magnitude


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("scaling", SCALINGS, ids=SCALING_IDS)
def test_rope_matches_the_reference(backend, dtype, layout, scaling):
    x, positions, magnitude = rope_problem(dtype)
    y = backend.apply_rope(x, positions, layout=layout, scaling=scaling)
    assert backend.to_numpy(y).dtype == x.dtype
    expected = positional.apply_rope(x, positions, layout=layout, scaling=scaling)
    tol = positional.tolerance(dtype, positions.max(), magnitude=magnitude)
    assert_within(f64(backend, y), expected, tol)


def test_float64_rope_agrees_to_1e12(backend):
    x, positions, _ = rope_problem("float64")
    y = f64(backend, backend.apply_rope(x, positions, base=500000.0, scaling=LLAMA3))
    assert_within(y, positional.apply_rope(x, positions, base=500000.0, scaling=LLAMA3), 1e-12)


def test_rope_takes_native_arrays(backend):
    x, positions, magnitude = rope_problem("float32", shape=(5, 8))
    y = backend.apply_rope(native(backend, x), native(backend, positions))
    tol = positional.tolerance("float32", positions.max(), magnitude=magnitude)
    assert_within(f64(backend, y), positional.apply_rope(x, positions), tol)


def test_position_zero_is_the_identity(backend):
    x, _, _ = rope_problem("float32", shape=(3, 6, 32))
    y = backend.apply_rope(x, np.zeros(6, dtype=np.int64), layout="interleaved")
    np.testing.assert_array_equal(backend.to_numpy(y), x)  # cos 0 = 1 and sin 0 = 0 exactly


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_preserves_norms(backend, layout):
    x, positions, magnitude = rope_problem("float32", shape=(4, 100, 32))
    y = f64(backend, backend.apply_rope(x, positions, layout=layout))
    x = x.astype(np.float64)
    tol = positional.tolerance("float32", positions.max(), magnitude=magnitude)
    # Each coordinate is within tol, so a vector's norm moves by at most sqrt(dim) * tol.
    assert_within(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), np.sqrt(32) * tol)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(0, 5000),
    n=st.integers(0, 5000),
    shift=st.integers(0, 5000),
    seed=st.integers(0, 2**32 - 1),
    layout=st.sampled_from(["half", "interleaved"]),
)
def test_scores_depend_only_on_the_distance(backend, m, n, shift, seed, layout):
    q, k = np.random.default_rng(seed).standard_normal((2, 1, 32))

    def score(a, b):
        rotated_q = f64(backend, backend.apply_rope(q, [a], layout=layout))
        rotated_k = f64(backend, backend.apply_rope(k, [b], layout=layout))
        return float(rotated_q[0] @ rotated_k[0])

    # float64 rotations, each coordinate within tol, make a score move by at most
    # 2 * sum(|q| + |k|) * tol; the angles are up to m + n + 2 * shift.
    tol = positional.tolerance(
        "float64", m + n + 2 * shift, magnitude=2 * max(np.abs(q).max(), np.abs(k).max())
    )
    bound = 2 * (np.abs(q).sum() + np.abs(k).sum()) * tol
    assert abs(score(m, n) - score(m + shift, n + shift)) <= bound


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scaling", SCALINGS, ids=SCALING_IDS)
def test_layouts_convert_exactly_with_rope_permutation(backend, dtype, scaling):
    # Converting interleaved q/k rows with rope_permutation gives the same rotated vectors,
    # permuted the same way, bit for bit; so every score q . k is unchanged.
    x, positions, _ = rope_problem(dtype, shape=(3, 40, 16))
    perm = backends.rope_permutation(16)
    interleaved = backend.to_numpy(
        backend.apply_rope(x, positions, layout="interleaved", scaling=scaling)
    )
    half = backend.to_numpy(
        backend.apply_rope(x[..., perm], positions, layout="half", scaling=scaling)
    )
    np.testing.assert_array_equal(half, interleaved[..., perm])
    q, k = interleaved[0].astype(np.float64), interleaved[1].astype(np.float64)
    q_half, k_half = half[0].astype(np.float64), half[1].astype(np.float64)
    # The same products summed in another order: at most dim * eps * sum |q_i k_i| apart.
    bound = 16 * np.finfo(np.float64).eps * (np.abs(q) @ np.abs(k).T)
    assert np.all(np.abs(q_half @ k_half.T - q @ k.T) <= bound)


def test_rope_permutation_is_hugging_faces_permute():
    # transformers' convert_llama_weights_to_hf.permute: view(heads, dim/2, 2, d).transpose(1, 2)
    heads, head_dim, d_model = 3, 8, 5
    w = np.arange(heads * head_dim * d_model).reshape(heads * head_dim, d_model)
    hf = w.reshape(heads, head_dim // 2, 2, d_model).transpose(0, 2, 1, 3).reshape(w.shape)
    ours = w.reshape(heads, head_dim, d_model)[:, backends.rope_permutation(head_dim)].reshape(
        w.shape
    )
    np.testing.assert_array_equal(ours, hf)


@pytest.mark.parametrize("factor", [4.0, 2.5])
def test_linear_scaling_is_position_interpolation(backend, factor):
    # Factor s at position s * p rotates like no scaling at position p.
    x, _, magnitude = rope_problem("float32", shape=(20, 32))
    positions = np.arange(0, 400, 20)  # even, so 2.5 * p is a whole position too
    scaling = {"rope_type": "linear", "factor": factor}
    scaled = f64(
        backend, backend.apply_rope(x, (positions * factor).astype(np.int64), scaling=scaling)
    )
    plain = f64(backend, backend.apply_rope(x, positions))
    # Both are within tol of the same float64 truth; the angles reach positions.max().
    tol = positional.tolerance("float32", positions.max(), magnitude=magnitude)
    assert_within(scaled, plain, 2 * tol)


def test_llama3_rule_keeps_short_and_slows_long_wavelengths():
    w = positional.frequencies(64, 10000.0)
    scaled = positional.frequencies(64, 10000.0, LLAMA3)
    wavelength = 2 * np.pi / w
    short, long = wavelength < 64 / 4, wavelength > 64 / 1
    assert short.any() and long.any() and (~short & ~long).any()
    np.testing.assert_array_equal(scaled[short], w[short])
    np.testing.assert_allclose(scaled[long], w[long] / 8, rtol=1e-15)
    between = ~short & ~long
    assert np.all((scaled[between] < w[between]) & (scaled[between] > w[between] / 8))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_proportional_turns_a_share_of_the_heads_slots_and_stands_the_rest(backend, layout):
    # Head 32: 16 slots, the first int(0.25 * 32 // 2) = 4 at base**(-2i/32), the denominator
    # the head's; the other 12 at frequency 0 come back bit for bit (cos 0 = 1, sin 0 = 0).
    w = positional.frequencies(32, 1e6, PROPORTIONAL)
    np.testing.assert_array_equal(w[:4], positional.frequencies(32, 1e6)[:4])
    np.testing.assert_array_equal(w[4:], 0.0)
    x, positions, _ = rope_problem("float32", shape=(3, 40, 32))
    y = backend.to_numpy(
        backend.apply_rope(x, positions, base=1e6, layout=layout, scaling=PROPORTIONAL)
    )
    slot = np.arange(32) % 16 if layout == "half" else np.arange(32) // 2
    np.testing.assert_array_equal(y[..., slot >= 4], x[..., slot >= 4])
    assert not np.array_equal(y[..., slot < 4], x[..., slot < 4])


# --- bad input, the same on every backend -------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"dim": 7}, ValueError, "needs an even dim, got 7"),
        (
            {"layout": "half"},
            ValueError,
            "unknown sinusoidal layout 'half': valid ones are interleaved, concat",
        ),
        ({"num_positions": -1}, ValueError, "num_positions must be in [0, 16777216], got -1"),
        ({"base": 0.0}, ValueError, "base must be positive"),
        ({"dtype": "int32"}, ValueError, "unsupported dtype 'int32'"),
    ],
)
def test_bad_sinusoidal_arguments(backend, kwargs, error, message):
    arguments = {"num_positions": 10, "dim": 8, **kwargs}
    with pytest.raises(error) as info:
        backend.sinusoidal_table(arguments.pop("num_positions"), arguments.pop("dim"), **arguments)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "x_shape, positions, kwargs, error, message",
    [
        ((4, 7), np.arange(4), {}, ValueError, "RoPE needs an even dim, got 7"),
        ((4, 8), np.arange(4.0), {}, TypeError, "positions must be integers, got dtype float64"),
        ((4, 8), np.array([0, 1, -2, 3]), {}, ValueError, "position -2 at positions[2] is outside"),
        ((4, 8), np.arange(5), {}, ValueError, "positions must have shape (T,) = (4,)"),
        ((4, 8), np.zeros((1, 4), dtype=int), {}, ValueError, "got (1, 4)"),
        ((4, 8), np.array([0, 1, 2, 2**24]), {}, ValueError, "position 16777216 at positions[3]"),
        ((8,), np.arange(1), {}, ValueError, "x must be (..., T, dim), got shape (8,)"),
        (
            (4, 8),
            np.arange(4),
            {"layout": "concat"},
            ValueError,
            "unknown RoPE layout 'concat': valid ones are half, interleaved",
        ),
        (
            (4, 8),
            np.arange(4),
            {"scaling": {"rope_type": "ntk", "factor": 4.0}},
            ValueError,
            "unknown RoPE scaling type 'ntk': valid ones are linear, dynamic, yarn, longrope, llama3",
        ),
        (
            (4, 8),
            np.arange(4),
            {"scaling": {"rope_type": "yarn", "factor": 4.0}},
            ValueError,
            "missing: ['original_max_position_embeddings']",
        ),
        (
            (4, 8),
            np.arange(4),
            {"rotary_dim": 3},
            ValueError,
            "rotary_dim 3 must be even and in [2, 8]",
        ),
        (
            (4, 8),
            np.arange(4),
            {
                "scaling": {
                    "rope_type": "longrope",
                    "short_factor": [1.0] * 3,
                    "long_factor": [1.0] * 4,
                    "original_max_position_embeddings": 4,
                    "factor": 2.0,
                }
            },
            ValueError,
            "short_factor has 3 factors; a rotated width of 8 has 4 pairs",
        ),
        ((4, 8), np.arange(4), {"scaling": {"type": "linear"}}, ValueError, "missing: ['factor']"),
        (
            (4, 8),
            np.arange(4),
            {"scaling": {"type": "linear", "factor": 2.0, "beta": 1}},
            ValueError,
            "unexpected: ['beta']",
        ),
        (
            (4, 8),
            np.arange(4),
            {"scaling": {"type": "linear", "factor": -2.0}},
            ValueError,
            "factor must be positive",
        ),
        (
            (4, 8),
            np.arange(4),
            {"scaling": {"rope_type": "proportional", "partial_rotary_factor": 1.5}},
            ValueError,
            "partial_rotary_factor 1.5 must be in (0, 1]: the share of the head's frequency slots",
        ),
        ((4, 8), np.arange(4), {"scaling": "linear"}, TypeError, "scaling must be None or a dict"),
    ],
)
def test_bad_rope_arguments(backend, x_shape, positions, kwargs, error, message):
    x = np.ones(x_shape, dtype=np.float32)
    with pytest.raises(error) as info:
        backend.apply_rope(x, positions, **kwargs)
    assert message in str(info.value)
    with pytest.raises(error) as native_info:
        backend.apply_rope(native(backend, x), native(backend, positions), **kwargs)
    # Native arrays get the same message (JAX without x64 makes float64 float32, hence the sub).
    same_but_dtype = re.sub(r"dtype \w+", "dtype", str(native_info.value))
    assert same_but_dtype == re.sub(r"dtype \w+", "dtype", str(info.value))


def test_rope_refuses_integer_x(backend):
    with pytest.raises(
        TypeError, match="x must be one of float64, float32, float16, bfloat16, got dtype int64"
    ):
        backend.apply_rope(np.ones((2, 4), dtype=np.int64), [0, 1])


def test_default_rope_type_means_no_scaling(backend):
    x, positions, _ = rope_problem("float64", shape=(6, 8))
    np.testing.assert_array_equal(
        backend.to_numpy(backend.apply_rope(x, positions, scaling={"rope_type": "default"})),
        backend.to_numpy(backend.apply_rope(x, positions)),
    )


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((), {}, 'positions="learned" needs a position_table'),
        (
            (),
            {"positions": "rotary"},
            "unknown positions scheme 'rotary': valid ones are learned, sinusoidal, none",
        ),
        ((), {"positions": "sinusoidal"}, 'positions="sinusoidal" needs max_seq_len'),
        (
            (np.zeros((4, 6), np.float32),),
            {"positions": "sinusoidal", "max_seq_len": 4},
            "takes no position_table",
        ),
        ((), {"positions": "none", "max_seq_len": 4}, "no max_seq_len"),
        (
            (np.zeros((4, 6), np.float32),),
            {"max_seq_len": 5},
            "max_seq_len 5 does not match position_table's 4 rows",
        ),
        (
            (),
            {"positions": "sinusoidal", "max_seq_len": 4, "layout": "half"},
            "unknown sinusoidal layout 'half'",
        ),
    ],
)
def test_bad_layer_schemes(backend, args, kwargs, message):
    with pytest.raises(ValueError) as info:
        backend.TokenPositionEmbedding(np.zeros((10, 6), np.float32), *args, **kwargs)
    assert message in str(info.value)


def test_odd_dim_sinusoidal_layer(backend):
    with pytest.raises(ValueError, match="needs an even dim, got 5"):
        backend.TokenPositionEmbedding(
            np.zeros((10, 5), np.float32), positions="sinusoidal", max_seq_len=4
        )


@pytest.mark.parametrize(
    "num_positions, dim, base, error, message",
    [
        (10.0, 8, 10000.0, TypeError, "num_positions must be an integer, got 10.0"),
        (True, 8, 10000.0, TypeError, "num_positions must be an integer, got True"),
        (10, -2, 10000.0, ValueError, "needs dim >= 2, got -2"),
        (10, 8, float("inf"), ValueError, "base must be positive and finite, got inf"),
        (10, 8, "10000", TypeError, "base must be a number"),
        (10, 8, 1.0, ValueError, "base must be above 1, got 1.0"),
        (10, 8, 1e-300, ValueError, "base must be above 1, got 1e-300"),
    ],
)
def test_sinusoidal_sizes_and_base_are_checked(backend, num_positions, dim, base, error, message):
    with pytest.raises(error) as info:
        backend.sinusoidal_table(num_positions, dim, base=base)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"scaling": {"type": "linear", "factor": float("nan")}},
            "factor must be positive and finite, got nan",
        ),
        (
            {"scaling": {"type": "linear", "factor": float("inf")}},
            "factor must be positive and finite, got inf",
        ),
        ({"base": float("inf")}, "base must be positive and finite, got inf"),
        ({"base": -1.0}, "base must be positive and finite, got -1.0"),
        # below 1 the frequencies grow: at 1e-300 they overflow and every row was NaN
        ({"base": 1e-300}, "base must be above 1, got 1e-300: the frequencies"),
        ({"base": 0.5}, "base must be above 1, got 0.5"),
    ],
)
def test_rope_numbers_must_be_finite(backend, kwargs, message):
    with pytest.raises(ValueError) as info:
        backend.apply_rope(np.ones((2, 4), np.float32), [0, 1], **kwargs)
    assert message in str(info.value)


def test_timedelta_positions_are_a_type_error(backend):
    with pytest.raises(TypeError, match="positions must be integers"):
        backend.apply_rope(np.ones((2, 4), np.float32), np.array([0, 1], dtype="m8[s]"))


def test_rope_takes_strided_and_list_inputs(backend):
    x, positions, magnitude = rope_problem("float32", shape=(6, 8))
    strided = x[::-1]
    y = f64(backend, backend.apply_rope(strided, list(positions)))
    tol = positional.tolerance("float32", positions.max(), magnitude=magnitude)
    assert_within(y, positional.apply_rope(strided, positions), tol)
