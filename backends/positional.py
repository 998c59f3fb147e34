"""Positional schemes written once from their formulas, in float64 NumPy.

This is the oracle: every backend computes sinusoidal tables and rotary embeddings
natively, in its own framework, and is tested against these functions with the
tolerance below. The backends take only the precision policy (``compute_dtype``)
from here.

Sources: Vaswani et al. 2017, section 3.5 (sinusoidal); Su et al. 2021, RoFormer
(rotary, as complex multiplication); Hugging Face transformers,
``modeling_rope_utils.py`` (the "linear" and "llama3" frequency rules and their
config names).
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
