"""How far a result is from the reference: rounding a float64 reference once to a dtype, ulps,
bits, and the phase (angle) a sinusoidal table or a rotation carries."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from backends import positional, validation

FLOATS = ("float64", "float32", "float16", "bfloat16")


def rounded(reference: np.ndarray, dtype) -> np.ndarray:
    """The float64 reference in ``dtype`` as the suite rounds it: once, through float32 for the
    16-bit dtypes (the frameworks' compute dtype; exact for a lookup's sums)."""
    dtype = validation.resolve_dtype(dtype)
    return np.asarray(reference).astype(positional.compute_dtype(dtype)).astype(dtype)


def same_bits(actual: np.ndarray, expected: np.ndarray) -> bool:
    return (
        actual.dtype == expected.dtype
        and actual.shape == expected.shape
        and actual.tobytes() == expected.tobytes()
    )


def ulps(actual: np.ndarray, reference: np.ndarray, dtype) -> tuple[float, tuple]:
    """(largest |actual - reference| in units in the last place of ``dtype`` at the reference's
    value, where). NaN counts as infinitely far."""
    info = ml_dtypes.finfo(validation.resolve_dtype(dtype))
    reference = np.asarray(reference, dtype=np.float64)
    magnitude = np.abs(reference)
    exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    exponent = np.maximum(np.where(magnitude > 0, exponent, info.minexp), info.minexp)
    spacing = np.exp2(exponent - info.nmant)
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN results are reported
        error = np.abs(np.asarray(actual, dtype=np.float64) - reference) / spacing
    error = np.where(np.isnan(error), np.inf, error)
    if error.size == 0:
        return 0.0, ()
    where = np.unravel_index(int(np.argmax(error)), error.shape)
    return float(error[where]), tuple(int(i) for i in where)


def ulps_at_scale(error: float, reference: np.ndarray, dtype) -> float:
    """``error`` in units in the last place of ``dtype`` at the reference's largest magnitude:
    the measure for tables and rotations, whose tolerance is absolute (an error of 3e-8 where
    the reference is 1e-12 is many ulps of that value, and half an ulp of the table)."""
    info = ml_dtypes.finfo(validation.resolve_dtype(dtype))
    largest = float(np.abs(np.asarray(reference, np.float64)).max(initial=0.0))
    exponent = max(math.floor(math.log2(largest)) if largest > 0 else info.minexp, info.minexp)
    return error / 2.0 ** (exponent - info.nmant)


def max_error(actual: np.ndarray, reference: np.ndarray) -> float:
    """Largest |actual - reference| in float64; NaN anywhere counts as infinite."""
    difference = np.abs(np.asarray(actual, np.float64) - np.asarray(reference, np.float64))
    if difference.size == 0:
        return 0.0
    return math.inf if np.isnan(difference).any() else float(difference.max())


def wrapped(angle: np.ndarray) -> np.ndarray:
    """Angles folded into [-pi, pi]."""
    return (angle + np.pi) % (2 * np.pi) - np.pi


def table_phase_error(table: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """Per position, the largest angle error (radians) of an interleaved sinusoidal table:
    each (sin, cos) column pair read back with atan2, against p * w_i in float64."""
    table = np.asarray(table, dtype=np.float64)
    dim = table.shape[-1]
    measured = np.arctan2(table[:, 0::2], table[:, 1::2])
    expected = positions[:, None] * positional.frequencies(dim, base)
    return np.abs(wrapped(measured - expected)).max(axis=-1)


def rotation_phase_error(x: np.ndarray, rotated: np.ndarray, positions, base: float):
    """Per position, the largest angle error (radians) of a half-layout rotation: the turn of
    each pair (x_i, x_{i+d/2}) read back from the rotated pair, against p * w_i."""
    x, y = np.asarray(x, np.float64), np.asarray(rotated, np.float64)
    half = x.shape[-1] // 2
    a, b, c, d = x[..., :half], x[..., half:], y[..., :half], y[..., half:]
    measured = np.arctan2(a * d - b * c, a * c + b * d)  # arg((c + id) / (a + ib))
    expected = np.asarray(positions, np.float64)[:, None] * positional.frequencies(2 * half, base)
    error = np.abs(wrapped(measured - expected))  # (..., T, half)
    return error.reshape(-1, *error.shape[-2:]).max(axis=(0, 2))
