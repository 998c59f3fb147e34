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
    value, where). NaN counts as infinitely far. Where the reference is about 0
    (``about_zero``) the units are those of its largest magnitude: a count at the value itself
    would measure nothing there."""
    error = _ulps_each(actual, reference, dtype).ravel()
    if error.size == 0:
        return 0.0, ()
    furthest = np.flatnonzero(error == error.max())
    if furthest.size > 1:
        # A tie: where the reference lies on a midpoint, its correct rounding and the value one
        # ulp past it are both half an ulp away. Name an element that is not the rounding.
        rounded = np.asarray(reference, np.float64).astype(validation.resolve_dtype(dtype))
        wrong = np.asarray(actual).ravel()[furthest] != rounded.ravel()[furthest]
        furthest = furthest[wrong] if wrong.any() else furthest
    where = np.unravel_index(int(furthest[0]), np.shape(reference))
    return float(error[furthest[0]]), tuple(int(i) for i in where)


def _ulps_each(actual, reference, dtype) -> np.ndarray:
    """``ulps`` of each element."""
    info = ml_dtypes.finfo(validation.resolve_dtype(dtype))
    reference = np.asarray(reference, dtype=np.float64)
    magnitude = np.where(about_zero(reference, dtype), _largest(reference), np.abs(reference))
    exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    exponent = np.maximum(np.where(magnitude > 0, exponent, info.minexp), info.minexp)
    spacing = np.exp2(exponent - info.nmant)
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN results are reported
        error = np.abs(np.asarray(actual, dtype=np.float64) - reference) / spacing
    return np.where(np.isnan(error), np.inf, error)


def about_zero(reference: np.ndarray, dtype) -> np.ndarray:
    """Where ``reference`` is about 0 for a count of ulps: below one ulp of its largest finite
    magnitude (``dtype``'s eps times it), or below ``dtype``'s smallest normal number.

    A count of ulps at the reference's own value is its relative error, which means nothing
    near 0. Below the smallest normal the spacing stops shrinking (1.4e-45 in float32), so an
    error of the case's own size reads as 1e44 ulps; and a value below one ulp of the case's
    largest is one that the rounding of values of the case's size cannot tell from 0 (the
    remainder of a cancellation, a quantized 0 plus a min), so a count there reads that
    rounding as millions of ulps. There the difference itself says how far, beside the
    case's scale (``distance``)."""
    info = ml_dtypes.finfo(validation.resolve_dtype(dtype))
    reference = np.asarray(reference, dtype=np.float64)
    floor = max(float(info.eps) * _largest(reference), float(info.smallest_normal))
    return np.abs(reference) < floor


def _largest(reference: np.ndarray) -> float:
    """The largest finite magnitude of ``reference`` (0 for none)."""
    magnitude = np.abs(reference[np.isfinite(reference)])
    return float(magnitude.max(initial=0.0))


def distance(actual: np.ndarray, reference: np.ndarray, dtype, named="the reference") -> str:
    """Where ``actual`` is furthest from ``reference`` and how far, in words: "3 ulp at [1, 2]";
    where the reference is about 0 there (``about_zero``), the difference itself and the
    reference's scale instead of a count: "0.51 at [4, 25], where the reference is 0 (its
    values reach 2.3)". ``named``: what the reference is called."""
    size, where = ulps(actual, reference, dtype)
    reference = np.asarray(reference, dtype=np.float64)
    if not where or not about_zero(reference, dtype)[where]:
        return f"{size:.3g} ulp at {list(where)}"
    value = float(reference[where])
    error = abs(float(np.asarray(actual, np.float64)[where]) - value)
    scale = f"its values reach {_largest(reference):.3g}"
    said = f"0 ({scale})" if value == 0 else f"{value:.3g} (about 0: {scale})"
    return f"{error:.3g} at {list(where)}, where {named} is {said}"


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
    and bits, the ulps between them (``ulps``': where the expected value is about 0, of the
    largest magnitude, which ``scale`` gives)."""
    which = "worst" if at is not None else "first"
    if at is None:
        width = actual.dtype.itemsize
        a = np.ascontiguousarray(actual).view(f"u{width}")
        e = np.ascontiguousarray(expected).view(f"u{width}")
        found = np.argwhere(a != e)
        if not found.size:
            return {}
        at = tuple(int(i) for i in found[0])
    found = {
        "which": which,
        "index": [int(i) for i in at],
        "actual": shown_value(actual[at], dtype),
        "expected": shown_value(expected[at], dtype),
        "ulps": float(_ulps_each(actual, expected, dtype)[at]),
    }
    wide = np.asarray(expected, np.float64)
    if about_zero(wide, dtype)[at]:
        found["scale"] = _largest(wide)
    return found
