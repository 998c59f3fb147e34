"""ALiBi and T5 relative bias: position added to the attention scores.

Slopes, biases and buckets are exact where the maths allows, so every backend is held to
the NumPy backend bit for bit, and to the float64 reference in backends.positional within
the rounding derived beside each comparison.
"""

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from backends import numpy_backend, positional
from tests.conftest import backend_or_skip, native

DTYPES = list(backends.DTYPES)
T5_SETTINGS = [(32, 128), (32, 64), (64, 256), (16, 32), (8, 16), (4, 5), (2, 3), (128, 1024)]
RELATIVE = np.arange(-1000, 1001)


def bits(array: np.ndarray) -> np.ndarray:
    """The raw bytes: equal bits, not just equal values (-0.0 and 0.0 differ here)."""
    return np.ascontiguousarray(array).view(np.uint8)


def assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(bits(actual), bits(expected))


def exact_slopes(num_heads: int) -> list[Decimal]:
    """The slopes to 60 digits, from the rule as Press et al. and BLOOM state it."""
    getcontext().prec = 60
    closest = 2 ** math.floor(math.log2(num_heads))
    powers = [Decimal(-8 * i) / closest for i in range(1, closest + 1)]
    powers += [Decimal(-8 * j) / (2 * closest) for j in range(1, 2 * (num_heads - closest), 2)]
    return [Decimal(2) ** p for p in powers]


def bloom_slopes(num_heads: int) -> np.ndarray:
    """Hugging Face BLOOM's build_alibi_tensor slopes, transcribed (float32 torch.pow)."""
    import torch

    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(
            2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float32
        )
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes.numpy()


def hf_t5_buckets(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """Hugging Face T5Attention._relative_position_bucket, transcribed (float32 torch.log)."""
    import torch

    relative_position = torch.from_numpy(relative_position)
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets.numpy()


# --- ALiBi slopes ------------------------------------------------------------------------


@pytest.mark.parametrize("num_heads", range(1, 65))
def test_float64_slopes_are_the_exact_values_rounded_once(num_heads):
    assert positional.alibi_slopes(num_heads).tolist() == [
        float(s) for s in exact_slopes(num_heads)
    ]


def test_slopes_follow_the_paper():
    # Press et al.: 8 heads get 1/2, 1/4, ..., 1/256; 16 heads interleave the square roots.
    np.testing.assert_array_equal(positional.alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    np.testing.assert_array_equal(positional.alibi_slopes(16)[1::2], 2.0 ** -np.arange(1, 9))
    # 12 heads: the 8 of n=8, then every other slope of 16 heads: 2**-0.5, 2**-1.5, ...
    np.testing.assert_array_equal(positional.alibi_slopes(12)[8:], 2.0 ** -(np.arange(4) + 0.5))


@pytest.mark.parametrize("num_heads", range(1, 17))
def test_slopes_match_blooms_rule(num_heads):
    """BLOOM rounds the base to float32 and raises it to the p-th power in float32: the
    base's rounding (eps/2 relative) grows p-fold and pow adds at most 1 ulp, so
    |bloom - exact| <= (p/2 + 1) * eps * slope. Where the base is a power of two
    (2**-8/n' with n' <= 8) both are exact and equal."""
    ours = numpy_backend.alibi_slopes(num_heads)
    bloom = bloom_slopes(num_heads)
    closest = 2 ** math.floor(math.log2(num_heads))
    powers = np.r_[np.arange(1, closest + 1), np.arange(1, 2 * (num_heads - closest), 2)]
    exact_base = np.r_[np.full(closest, closest <= 8), np.full(num_heads - closest, closest <= 4)]
    np.testing.assert_array_equal(bloom[exact_base], ours[exact_base])
    eps = float(np.finfo(np.float32).eps)
    assert np.all(np.abs(bloom.astype(np.float64) - ours) <= (powers / 2 + 1) * eps * ours)


@pytest.mark.parametrize("dtype", DTYPES)
def test_slopes_are_bit_identical_across_backends(backend, dtype):
    for num_heads in range(1, 65):
        expected = numpy_backend.alibi_slopes(num_heads, dtype=dtype)
        assert_same_bits(backend.to_numpy(backend.alibi_slopes(num_heads, dtype=dtype)), expected)
        # The exact values rounded to float64, then to the dtype (through float32 for the
        # 16-bit dtypes, the suite's compute dtype):
        exact = np.array([float(s) for s in exact_slopes(num_heads)])
        assert_same_bits(expected, exact.astype(positional.compute_dtype(dtype)).astype(dtype))


# --- ALiBi bias --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("num_heads, q_len, k_len", [(1, 1, 1), (3, 7, 7), (8, 5, 12), (16, 1, 40)])
def test_alibi_bias_matches_the_reference_and_numpy(
    backend, dtype, causal, num_heads, q_len, k_len
):
    """The slope is rounded to the compute dtype (c/2 relative), the product slope * distance
    once more (c/2; the integer distance is exact), the result to ``dtype`` (d/2):
    |bias - exact| <= (c + d) * |exact|. -inf (the causal mask) must sit exactly where the
    reference has it."""
    bias = backend.to_numpy(backend.alibi_bias(num_heads, q_len, k_len, causal=causal, dtype=dtype))
    assert bias.shape == (num_heads, q_len, k_len) and bias.dtype == backends.DTYPES[dtype]
    assert_same_bits(
        bias, numpy_backend.alibi_bias(num_heads, q_len, k_len, causal=causal, dtype=dtype)
    )
    reference = positional.alibi_bias(num_heads, q_len, k_len, causal=causal)
    masked = np.isinf(reference)
    np.testing.assert_array_equal(np.isinf(bias), masked)
    assert np.all(bias[masked] < 0)
    c = float(np.finfo(positional.compute_dtype(dtype)).eps)
    d = float(backends.validation.ml_dtypes.finfo(backends.DTYPES[dtype]).eps)
    error = np.abs(bias[~masked].astype(np.float64) - reference[~masked])
    assert np.all(error <= (c + d) * np.abs(reference[~masked]))


@pytest.mark.parametrize("num_heads", [1, 2, 4, 8, 6])
def test_power_of_two_slopes_give_an_exact_bias(backend, num_heads):
    # Slopes 2**-k times integer distances below 2**24: exact in float32, no rounding at all.
    bias = backend.to_numpy(backend.alibi_bias(num_heads, 64, 300))
    np.testing.assert_array_equal(bias, positional.alibi_bias(num_heads, 64, 300))


def test_alibi_bias_is_minus_slope_times_distance():
    bias = numpy_backend.alibi_bias(2, 3, 5)  # slopes 1/16, 1/256; queries at positions 2..4
    np.testing.assert_array_equal(bias[0, 2], [-4 / 16, -3 / 16, -2 / 16, -1 / 16, 0])
    np.testing.assert_array_equal(bias[0, 0], [-2 / 16, -1 / 16, 0, -np.inf, -np.inf])
    assert not np.signbit(bias[:, [0, 1, 2], [2, 3, 4]]).any()  # a zero distance is +0.0
    symmetric = numpy_backend.alibi_bias(1, 3, causal=False)
    np.testing.assert_array_equal(
        symmetric[0], -np.abs(np.subtract.outer(range(3), range(3))) / 256
    )


@pytest.mark.parametrize("num_heads, length", [(4, 9), (12, 33)])
def test_softmax_cannot_tell_the_distance_form_from_blooms(backend, num_heads, length):
    """BLOOM adds slope * key position; the distance form adds slope * (key - query): the two
    differ by slope * query along each row, which softmax ignores. Each form's float32
    bias is within eps/2 * |bias| of its real value (plus the shared slope's rounding, the same
    in both, so it shifts each row by a constant too); a logit perturbation of at most
    delta moves every probability by at most (exp(2 delta) - 1) * p <= 2.01 delta, so the
    softmaxes agree to 2.01 * eps * max|bias| + float64 noise."""
    rng = np.random.default_rng(length)
    scores = rng.standard_normal((num_heads, length, length))
    ours = backend.to_numpy(backend.alibi_bias(num_heads, length)).astype(np.float64)
    slopes = numpy_backend.alibi_slopes(num_heads)[:, None, None]
    keys = np.arange(length, dtype=np.float32)
    causal = np.triu(np.ones((length, length), bool), k=1)
    bloom = np.where(causal, -np.inf, slopes * keys).astype(np.float64)  # (H, q, k)

    def softmax(z):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    largest = float(np.max(np.abs(slopes))) * length
    tolerance = 2.01 * float(np.finfo(np.float32).eps) * largest + 1e-15
    np.testing.assert_allclose(
        softmax(scores + ours), softmax(scores + bloom), rtol=0, atol=tolerance
    )
    assert not np.allclose(ours[..., :1], bloom[..., :1])  # the biases themselves do differ


# --- T5 buckets ---------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", T5_SETTINGS)
def test_buckets_match_the_published_rule(backend, bidirectional, num_buckets, max_distance):
    backend_or_skip("torch")  # the transcription is torch code
    options = {
        "bidirectional": bidirectional,
        "num_buckets": num_buckets,
        "max_distance": max_distance,
    }
    got = backend.to_numpy(backend.t5_relative_buckets(native(backend, RELATIVE), **options))
    if not (bidirectional and num_buckets == 2):  # there HF divides by max_exact = 0
        np.testing.assert_array_equal(got, hf_t5_buckets(RELATIVE, **options))
    np.testing.assert_array_equal(got, positional.t5_relative_buckets(RELATIVE, **options))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", T5_SETTINGS + [(40, 1000), (20, 1000)])
def test_bucket_starts_satisfy_the_rule_exactly(bidirectional, num_buckets, max_distance):
    """Bucket m + k starts at the smallest d with floor((n - m) log(d/m) / log(D/m)) >= k,
    i.e. (d/m)**(n-m) >= (D/m)**k, checked here with exact fractions for every d up to D."""
    from fractions import Fraction

    n = num_buckets // 2 if bidirectional else num_buckets
    m = n // 2
    starts = positional.t5_bucket_starts(num_buckets, max_distance, bidirectional=bidirectional)
    assert len(starts) == max(n - 1 - m, 0)
    for k, start in enumerate(starts, 1):
        holds = [
            Fraction(d, m) ** (n - m) >= Fraction(max_distance, m) ** k
            for d in range(m, 2 * max_distance)
        ]
        assert m + holds.index(True) == start


def test_buckets_have_t5s_shape():
    buckets = numpy_backend.t5_relative_buckets(RELATIVE)  # bidirectional, 32 buckets, 128
    before, after = buckets[RELATIVE <= 0][::-1], buckets[RELATIVE > 0]  # by distance 0, 1, ...
    np.testing.assert_array_equal(before[:8], np.arange(8))  # exact below 8
    np.testing.assert_array_equal(after[:7], 16 + np.arange(1, 8))  # the upper half
    assert np.all(np.diff(before) >= 0) and np.all(np.diff(after) >= 0)
    assert set(before[128:]) == {15} and set(after[127:]) == {31}  # capped from max_distance
    one_way = numpy_backend.t5_relative_buckets(RELATIVE, bidirectional=False)
    assert set(one_way[RELATIVE >= 0]) == {0}  # the future is distance 0
    assert one_way.max() == 31


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_float32_formula_lands_on_the_exact_buckets_at_t5s_settings(framework):
    """Where the rule's real value is an integer (distance 16, 32, 64 at T5's defaults:
    8 + 8 log(d/8)/log(16) = 10, 12, 14), a float32 formula could fall just below it and
    move the distance down a bucket. At T5's own settings none of the three frameworks'
    float32 formulas (Hugging Face's, op by op) does, over every relative position from -1000
    to 1000 (the float64 reference and the exact bucket starts agree too)."""
    backend_or_skip(framework)
    for bidirectional in (True, False):
        n = 16 if bidirectional else 32
        distance = np.abs(RELATIVE) if bidirectional else -np.minimum(RELATIVE, 0)
        ratio = float32_formula(framework, distance, n // 2, 128, n - n // 2)
        large = n // 2 + np.minimum(np.nan_to_num(ratio, neginf=0).astype(np.int64), n - 1 - n // 2)
        formula = np.where(distance < n // 2, distance, large) + bidirectional * n * (RELATIVE > 0)
        np.testing.assert_array_equal(
            formula, numpy_backend.t5_relative_buckets(RELATIVE, bidirectional=bidirectional)
        )


def float32_formula(framework, distance, max_exact: int, max_distance: int, scale: int):
    """log(distance / max_exact) / log(max_distance / max_exact) * scale in float32, op by
    op in the framework (as Hugging Face writes it, with a Python float for the second log)."""
    x = distance.astype(np.float32)
    denominator = math.log(max_distance / max_exact)
    with np.errstate(divide="ignore"):
        if framework == "numpy":
            return np.log(x / max_exact) / denominator * scale
        if framework == "torch":
            import torch

            return (torch.log(torch.from_numpy(x) / max_exact) / denominator * scale).numpy()
        import jax.numpy as jnp

        return np.asarray(jnp.log(jnp.asarray(x) / max_exact) / denominator * scale)


@settings(max_examples=40, deadline=None)
@given(
    relative=st.lists(st.integers(-(2**24), 2**24), min_size=1, max_size=20),
    bidirectional=st.booleans(),
    num_buckets=st.integers(1, 40).map(lambda b: 2 * b),
    extra_distance=st.integers(1, 500),
)
def test_buckets_agree_across_backends_anywhere(
    backend, relative, bidirectional, num_buckets, extra_distance
):
    n = num_buckets // 2 if bidirectional else num_buckets
    options = {
        "bidirectional": bidirectional,
        "num_buckets": num_buckets,
        "max_distance": n // 2 + extra_distance,
    }
    relative = np.array(relative, dtype=np.int64)
    expected = numpy_backend.t5_relative_buckets(relative, **options)
    got = backend.to_numpy(backend.t5_relative_buckets(native(backend, relative), **options))
    np.testing.assert_array_equal(got, expected)
    assert np.all((0 <= expected) & (expected < num_buckets))


# --- T5 bias -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_gathers_the_table(backend, dtype, bidirectional):
    table = backends.shared_weights(32, 6, 1, dtype=dtype)[0]  # (num_buckets, num_heads)
    bias = backend.to_numpy(backend.t5_bias(table, 5, 300, bidirectional=bidirectional))
    assert bias.shape == (6, 5, 300)
    expected = positional.t5_bias(table, 5, 300, bidirectional=bidirectional)
    assert_same_bits(bias, expected)
    buckets = positional.t5_relative_buckets(
        positional.relative_positions(5, 300), bidirectional=bidirectional
    )
    assert_same_bits(bias[:, 2, 7], table[buckets[2, 7]])  # head h: table[bucket, h]


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_t5_bias_is_differentiable_in_the_table(framework):
    """d(sum(bias * upstream))/d(table) is the upstream summed per bucket and head (NumPy has
    no autograd: training/numpy_model.py writes this scatter by hand). The upstream holds
    small integers, so every sum is exact in any order: bit-identical."""
    backend = backend_or_skip(framework)
    table = backends.shared_weights(16, 3, 1)[0]
    upstream = np.random.default_rng(1).integers(-4, 5, (3, 6, 9)).astype(np.float32)
    buckets = numpy_backend.t5_relative_buckets(positional.relative_positions(6, 9), num_buckets=16)
    expected = np.zeros_like(table)
    np.add.at(expected, buckets, upstream.transpose(1, 2, 0))
    if framework == "torch":
        import torch

        weight = torch.from_numpy(table.copy()).requires_grad_()
        (backend.t5_bias(weight, 6, 9) * torch.from_numpy(upstream)).sum().backward()
        got = weight.grad.numpy()
    else:
        import jax

        got = np.asarray(jax.grad(lambda t: (backend.t5_bias(t, 6, 9) * upstream).sum())(table))
    np.testing.assert_array_equal(got, expected)
    assert np.count_nonzero(expected) > 16  # many buckets and heads receive a gradient


def test_torch_builds_the_bias_on_its_default_device():
    """Like a torch factory function: the bias lands where torch.arange would (checked on
    the "meta" device, which every machine has)."""
    torch_backend = backend_or_skip("torch")
    import torch

    torch.set_default_device("meta")
    try:
        assert torch_backend.alibi_bias(4, 3).device.type == "meta"
    finally:
        torch.set_default_device("cpu")
