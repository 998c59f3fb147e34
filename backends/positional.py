"""Positional schemes written once from their formulas, in float64 NumPy.

This is the oracle: every backend computes sinusoidal tables and rotary embeddings
natively, in its own framework, and is tested against these functions with the
tolerance below. The backends take only the precision policy (``compute_dtype``)
from here.

Sources: Vaswani et al. 2017, section 3.5 (sinusoidal); Su et al. 2021, RoFormer
(rotary, as complex multiplication); Hugging Face transformers,
``modeling_rope_utils.py`` (the "linear" and "llama3" frequency rules and their
config names); Press et al. 2022, "Train Short, Test Long" (ALiBi), with the head-count
rule of Hugging Face's BLOOM ``build_alibi_tensor``; Raffel et al. 2020 (T5), with the
bucket rule of Hugging Face's ``T5Attention._relative_position_bucket``.

ALiBi and T5 put position into the attention scores rather than the vectors: a bias
(num_heads, q_len, k_len) added to q . k / sqrt(d) before the softmax. Query i of q_len
sits at position k_len - q_len + i (the last q_len of k_len positions, as in a decode step
with a cache); key j at position j.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from backends import validation


def rope_permutation(dim: int) -> np.ndarray:
    """Index permutation from the interleaved layout to the half layout, for one head.

    Interleaved pairs dimensions (2i, 2i+1); half pairs (i, i + dim/2). So
    ``x_half = x_interleaved[..., perm]`` with perm = [0, 2, 4, ..., 1, 3, 5, ...]:

    - RoPE: ``apply_rope(x[..., perm], layout="half")`` equals
      ``apply_rope(x, layout="interleaved")[..., perm]``.
      To convert a model, permute the rows of each head's q and k projection
      (``w.reshape(n_heads, head_dim, -1)[:, perm].reshape(w.shape)``, the same
      reordering as Hugging Face's ``convert_llama_weights_to_hf.permute``); the
      attention scores q . k are unchanged, since both sides move together.
    - Sinusoidal: ``table(layout="concat") == table(layout="interleaved")[:, perm]``.
    """
    validation.check_even_dim(dim, "a layout permutation")
    return np.concatenate([np.arange(0, dim, 2), np.arange(1, dim, 2)])


def frequencies(dim: int, base: float = 10000.0, scaling: dict | None = None) -> np.ndarray:
    """(dim/2,) float64 angular frequencies w_i = base**(-2i/dim), after a scaling rule."""
    validation.check_even_dim(dim, "RoPE")
    scaling = validation.check_rope_scaling(scaling)
    w = np.array([base ** (-2 * i / dim) for i in range(dim // 2)], dtype=np.float64)
    if scaling is None:
        return w
    factor = scaling["factor"]
    if scaling["rope_type"] == "linear":  # position interpolation: position p acts as p / factor
        return w / factor
    # llama3 (Llama 3.1): long wavelengths slowed by factor, short ones kept, a blend between.
    context = scaling["original_max_position_embeddings"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    out = []
    for wi in w:
        wavelength = 2 * math.pi / wi
        if wavelength < context / high:
            out.append(wi)
        elif wavelength > context / low:
            out.append(wi / factor)
        else:
            smooth = (context / wavelength - low) / (high - low)
            out.append((1 - smooth) * wi / factor + smooth * wi)
    return np.array(out, dtype=np.float64)


def sinusoidal_table(
    num_positions: int, dim: int, *, base: float = 10000.0, layout: str = "interleaved"
):
    """(num_positions, dim) float64: PE[p, 2i] = sin(p / base**(2i/dim)), PE[p, 2i+1] = cos(...)
    for layout "interleaved"; sines in the first half and cosines in the second for "concat"."""
    validation.check_sinusoidal(num_positions, dim, base, layout)
    angles = np.arange(num_positions, dtype=np.float64)[:, None] / base ** (
        np.arange(0, dim, 2) / dim
    )
    table = np.empty((num_positions, dim), dtype=np.float64)
    if layout == "interleaved":
        table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    else:
        table[:, : dim // 2], table[:, dim // 2 :] = np.sin(angles), np.cos(angles)
    return table


def apply_rope(x, positions, *, base: float = 10000.0, layout: str = "half", scaling=None):
    """float64 RoPE of x (..., T, dim) at integer positions (T,), as complex multiplication.

    Each pair (a, b) is the complex number a + ib, turned by exp(i * p * w_k):
    layout "interleaved" pairs (2k, 2k+1), layout "half" pairs (k, k + dim/2).
    """
    x = np.asarray(x, dtype=np.float64)
    positions, scaling = validation.check_rope(
        x.shape, np.asarray(positions), base, layout, scaling
    )
    dim = x.shape[-1]
    turn = np.exp(1j * positions.astype(np.float64)[:, None] * frequencies(dim, base, scaling))
    if layout == "interleaved":
        z = (x[..., 0::2] + 1j * x[..., 1::2]) * turn
        return np.stack([z.real, z.imag], axis=-1).reshape(x.shape)
    z = (x[..., : dim // 2] + 1j * x[..., dim // 2 :]) * turn
    return np.concatenate([z.real, z.imag], axis=-1)


def alibi_slopes(num_heads: int) -> np.ndarray:
    """(num_heads,) float64 ALiBi slopes, the rule of BLOOM's ``build_alibi_tensor``.

    For n heads with n a power of two: 2**(-8 i / n), i = 1..n. Otherwise the n' = largest
    power of two below n get those, and the remaining n - n' heads take every other slope
    of 2n' heads: 2**(-8 j / 2n') for j = 1, 3, 5, ... The exponents are exact in float64
    (dyadic fractions), so each slope is 2**e rounded once by ``pow``.
    """
    num_heads, _, _ = validation.check_lengths(num_heads, 1, None)
    closest = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= n
    exponents = [-8 * i / closest for i in range(1, closest + 1)]
    exponents += [-8 * j / (2 * closest) for j in range(1, 2 * (num_heads - closest), 2)]
    return np.array([2.0**e for e in exponents], dtype=np.float64)


def alibi_bias(num_heads: int, q_len: int, k_len: int | None = None, *, causal: bool = True):
    """(num_heads, q_len, k_len) float64: -slope * distance, the distance form.

    causal=True: distance = query position - key position, and keys after the query get
    -inf (the causal mask, folded in). causal=False: distance = |query - key|, the
    symmetric form used by bidirectional encoders. BLOOM adds slope * key position instead,
    which differs from the causal form by slope * query position along each row: a
    per-row constant, which softmax ignores.
    """
    num_heads, q_len, k_len = validation.check_lengths(num_heads, q_len, k_len)
    relative = relative_positions(q_len, k_len)  # (q, k): key - query, -distance when causal
    slopes = alibi_slopes(num_heads)[:, None, None]
    if not causal:
        return slopes * -np.abs(relative)
    return np.where(relative <= 0, slopes * relative, -np.inf)


def t5_bucket_starts(num_buckets: int, max_distance: int, *, bidirectional: bool) -> np.ndarray:
    """The smallest distance of each logarithmic T5 bucket, in exact integer arithmetic.

    Per direction there are n buckets (num_buckets, or half of it when bidirectional):
    distances below m = n // 2 get a bucket each, and distance d >= m gets
    m + min(floor((n - m) * log(d / m) / log(max_distance / m)), n - 1 - m).
    floor(...) >= k exactly when (d / m)**(n - m) >= (max_distance / m)**k, an integer
    comparison, so bucket m + k starts at the smallest such d. Returns (n - 1 - m,) int64.
    """
    n, max_distance = validation.check_t5_buckets(bidirectional, num_buckets, max_distance)
    m = n // 2
    starts = []
    for k in range(1, n - m):
        d = max(m, math.floor(m * (max_distance / m) ** (k / (n - m))) - 1)  # float guess, low
        while d ** (n - m) * m**k < max_distance**k * m ** (n - m):
            d += 1
        starts.append(d)
    return np.array(starts, dtype=np.int64)


def t5_relative_buckets(
    relative_position, *, bidirectional: bool = True, num_buckets: int = 32, max_distance=128
) -> np.ndarray:
    """T5's bucket of each relative position (key - query), with the log in float64.

    A direct transcription of the published rule (Hugging Face
    ``T5Attention._relative_position_bucket``, which computes it in float32). Where the
    rule's real value is an exact integer a float log can land on either side; the
    backends use ``t5_bucket_starts`` and are exact.
    """
    relative_position = validation.check_relative_positions(
        validation.as_host(relative_position)
    ).astype(np.int64)
    n, max_distance = validation.check_t5_buckets(bidirectional, num_buckets, max_distance)
    buckets = np.zeros_like(relative_position)
    if bidirectional:
        buckets += (relative_position > 0) * n  # keys after the query: the second half
        distance = np.abs(relative_position)
    else:
        distance = -np.minimum(relative_position, 0)  # keys after the query count as 0
    m = n // 2
    if m == 0:  # one bucket per direction (num_buckets=2, bidirectional): no log at all
        return buckets
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) where distance < m: unused
        large = np.log(distance / m) / math.log(max_distance / m) * (n - m)
        large = m + np.minimum(large, n - 1 - m).astype(np.int64)
    return buckets + np.where(distance < m, distance, large)


def t5_bias(
    bias_table, q_len: int, k_len: int | None = None, *, bidirectional=True, max_distance=128
):
    """(num_heads, q_len, k_len): bias_table[bucket(key - query)], transposed to heads first."""
    bias_table = validation.native(np.asarray(bias_table))
    num_buckets = validation.check_t5_table(bias_table.shape, bias_table.dtype.name)
    _, q_len, k_len = validation.check_t5_lengths(bias_table.shape, q_len, k_len)
    relative = relative_positions(q_len, k_len)  # (q, k)
    buckets = t5_relative_buckets(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    return bias_table[buckets].transpose(2, 0, 1)


def relative_positions(q_len: int, k_len: int) -> np.ndarray:
    """(q_len, k_len) int64 key position - query position, queries the last q_len positions
    (integers, so negating them never makes a -0.0 bias)."""
    return np.arange(k_len) - np.arange(k_len - q_len, k_len)[:, None]


def compute_dtype(dtype) -> np.dtype:
    """Angles are formed in float64 for float64 results and in float32 otherwise: never in
    float16 or bfloat16, where position 257 would round to 256."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def tolerance(dtype, max_angle: float, *, base: float = 10000.0, magnitude: float = 1.0) -> float:
    """Largest |backend - float64 reference| allowed for a table or rotation in ``dtype``.

    Derivation, with c = eps of the compute dtype (float32, or float64 for float64
    results) and d = eps of ``dtype``:
    - w = base**(-2i/dim): the exponent is rounded (relative c/2), which ``pow`` turns
      into a relative error of ln(base) * c/2 in w; pow adds up to 2 ulp (2c) and the
      product p * w one rounding (c/2): an angle error below
      (ln(base)/2 + 4) * c * max_angle, with max_angle = largest position x highest
      frequency (a scaling rule adds one more rounding, inside the 4).
    - sin and cos have slope at most 1, so they pass that error on unamplified and add
      about one ulp of a value <= 1: + c.
    - The result is rounded to ``dtype``: a sinusoidal table adds d/2. A rotation
      y = a cos - b sin rounds cos and sin to ``dtype``, both products and the difference:
      at most 2d relative to |a| + |b|. ``magnitude`` is that bound, max(|a| + |b|),
      and 1 for a table.
    """
    c = float(ml_dtypes.finfo(compute_dtype(dtype)).eps)
    d = float(ml_dtypes.finfo(np.dtype(dtype)).eps)  # knows bfloat16
    angle_error = (math.log(base) / 2 + 4) * c * max(max_angle, 1.0)
    return magnitude * (angle_error + c + 2 * d)


def sum_tolerance(dtype, max_angle: float, max_abs_sum: float, *, base: float = 10000.0) -> float:
    """Largest |token row + sinusoidal row - float64 sum| allowed in ``dtype``.

    The token row is exact and the table row within ``tolerance(dtype, max_angle)``;
    rounding their sum to ``dtype`` adds half an ulp of a value of at most
    max_abs_sum (+ that tolerance), below eps * max_abs_sum / 2 + the same again as slack.
    """
    table = tolerance(dtype, max_angle, base=base)
    return table + float(ml_dtypes.finfo(np.dtype(dtype)).eps) * (max_abs_sum + table)
