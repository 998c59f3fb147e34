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


def max_error(actual: np.ndarray, reference: np.ndarray, *, nan_matches: bool = False) -> float:
    """Largest |actual - reference| in float64; NaN anywhere counts as infinite (unless
    ``nan_matches``: NaN in both at the same place counts as no difference)."""
    difference = _differences(actual, reference, nan_matches)
    return float(difference.max()) if difference.size else 0.0


def worst_ratio(actual: np.ndarray, reference: np.ndarray, bound) -> tuple[float, tuple]:
    """(largest |actual - reference| / bound, where), bound a number or one per element; NaN
    in actual counts as infinitely far unless the reference has NaN there too."""
    difference = _differences(actual, reference, True)
    if not difference.size:
        return 0.0, ()
    bound = np.broadcast_to(np.asarray(bound, np.float64), difference.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(difference == 0, 0.0, difference / bound)
    where = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return float(ratio[where]), tuple(int(i) for i in where)


def _differences(actual, reference, nan_matches: bool) -> np.ndarray:
    actual, reference = np.asarray(actual, np.float64), np.asarray(reference, np.float64)
    with np.errstate(invalid="ignore"):
        difference = np.abs(actual - reference)
    both = np.isnan(actual) & np.isnan(reference) if nan_matches else False
    return np.where(both, 0.0, np.where(np.isnan(difference), np.inf, difference))


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


def rotation_phase_error(x, rotated, positions, w, *, layout: str = "half") -> np.ndarray:
    """Per position, the largest angle error (radians) of a rotation: the turn of each rotated
    pair, read back from the result, against p * w_k (w: the (pairs,) frequencies; the first
    2 * pairs dims rotated, in ``layout``)."""
    x, y = np.asarray(x, np.float64), np.asarray(rotated, np.float64)
    pairs = len(w)
    if layout == "interleaved":
        a, b = x[..., 0 : 2 * pairs : 2], x[..., 1 : 2 * pairs : 2]
        c, d = y[..., 0 : 2 * pairs : 2], y[..., 1 : 2 * pairs : 2]
    else:
        a, b = x[..., :pairs], x[..., pairs : 2 * pairs]
        c, d = y[..., :pairs], y[..., pairs : 2 * pairs]
    with np.errstate(invalid="ignore"):
        measured = np.arctan2(a * d - b * c, a * c + b * d)  # arg((c + id) / (a + ib))
    expected = np.asarray(positions, np.float64)[:, None] * np.asarray(w, np.float64)
    error = np.abs(wrapped(measured - expected))  # (..., T, pairs)
    error = np.where(np.isnan(error), np.pi, error)
    return error.reshape(-1, *error.shape[-2:]).max(axis=(0, 2))


def bits(value, dtype) -> str:
    """The element's bits in ``dtype``, as hex ("0x3f800000" for float32's 1.0)."""
    array = np.asarray(value, dtype=validation.resolve_dtype(dtype)).reshape(1)
    width = array.dtype.itemsize
    return f"0x{int(array.view(f'u{width}')[0]):0{2 * width}x}"


def shown_value(value, dtype) -> str:
    """A float as a person reads it, its bits beside it, and what the number alone hides: the
    sign of a zero, a NaN's payload."""
    value = np.asarray(value, dtype=validation.resolve_dtype(dtype)).reshape(1)[0]
    wide = float(value)
    hex_bits = bits(value, dtype)
    if wide == 0:
        negative = math.copysign(1.0, wide) < 0
        return f"{'-' if negative else '+'}0.0 ({hex_bits}, a {'negative' if negative else 'positive'} zero)"
    if math.isnan(wide):
        word, width = int(hex_bits, 16), 8 * value.dtype.itemsize
        quiet = 1 << (ml_dtypes.finfo(value.dtype).nmant - 1)  # the significand's top bit
        sign = "negative, " if word >> (width - 1) else ""
        kind = "quiet" if word & quiet else "signalling"
        return f"nan ({hex_bits}, {sign}{kind}, payload 0x{word & (quiet - 1):x})"
    return f"{wide!r} ({hex_bits})"


def mismatch(actual: np.ndarray, expected: np.ndarray, dtype, at: tuple | None = None) -> dict:
    """The first element where ``actual`` and ``expected`` (both in ``dtype``) differ in their
    bits, or the element ``at`` (the worst, said as such): its index, both values as numbers
    and bits, the ulps between them (at the expected value's magnitude)."""
    which = "worst" if at is not None else "first"
    if at is None:
        width = actual.dtype.itemsize
        a = np.ascontiguousarray(actual).view(f"u{width}")
        e = np.ascontiguousarray(expected).view(f"u{width}")
        found = np.argwhere(a != e)
        if not found.size:
            return {}
        at = tuple(int(i) for i in found[0])
    size, _ = ulps(actual[at].reshape(1), np.float64(expected[at]).reshape(1), dtype)
    return {
        "which": which,
        "index": [int(i) for i in at],
        "actual": shown_value(actual[at], dtype),
        "expected": shown_value(expected[at], dtype),
        "ulps": size,
    }
