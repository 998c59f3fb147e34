"""Each config field checked for its type and range where it is read: a wrong one is refused
in one line (``UsageError``) naming the file, the field, the value, the limit and why."""

from __future__ import annotations

import math
import numbers

import ml_dtypes
import numpy as np

from backends import positional, validation
from embedding_parity.usage import UsageError

MOST_HEAD_DIM = 1 << 16  # the rope kind's cap (kinds/rope.py MOST_HEAD_DIM, as --head-dim)
MOST_TYPE_VOCAB = 1 << 16  # type rows; models have 1 (RoBERTa) to a few (BERT 2)
# Token ids: vocabularies reach 262144 (Gemma 3); RoBERTa counts positions from pad_token_id + 1,
# which must stay an int32 in every backend.
MOST_TOKEN_ID = 1 << 24
MOST_LAYERS = 4096  # decoder layers; the deepest models have about 128
MOST_INT = 2**31 - 1  # widths, lengths and token ids fit an int32 in every backend
SHOWN = 60  # characters of a refused value quoted in the message
# The dtype whose check's bound is the widest: the largest epsilon of those the kit checks.
LOOSEST = max(validation.DTYPES, key=lambda name: ml_dtypes.finfo(validation.DTYPES[name]).eps)
# The last position of each of the rope kind's checks (kinds/rope.py: "rotation" at 0..15,
# "long positions" to 131071, kinds/base.py LONG; tests/test_config_bounds.py holds them equal).
CHECKED_POSITIONS = (15, (1 << 17) - 1)


def shown(value) -> str:
    """``value``'s repr, cut short: a refusal stays one readable line whatever the file holds."""
    text = repr(value)
    if len(text) <= SHOWN:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
    return f"{text[:SHOWN]}... ({size})"


def refuse(where: str, message: str):
    raise UsageError(f"{where}: {message}")


def integer(value, field: str, where: str, least: int, most: int = MOST_INT) -> int:
    """An int (not a bool, not 2.0) in [least, most]."""
    span = f"in [{least}, {most}]" if most < MOST_INT else f"of at least {least}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        refuse(where, f"{field} must be an integer {span}, got {shown(value)}")
    if not least <= value <= most:
        refuse(where, f"{field} {value} must be an integer {span}")
    return int(value)


def optional_integer(value, field: str, where: str, least: int, most: int = MOST_INT):
    return None if value is None else integer(value, field, where, least, most)


def head_dim(value, field: str, where: str) -> int:
    """An even int in [2, MOST_HEAD_DIM]: RoPE turns pairs, and the battery builds x in float64."""
    value = integer(value, field, where, 2, MOST_HEAD_DIM)
    if value % 2:
        refuse(where, f"{field} {value} is odd: RoPE turns pairs of dims; a head_dim is even")
    return value


def real(value, field: str, where: str) -> float:
    """A finite number (not a bool, not a string)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        refuse(where, f"{field} must be a number, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int of 400 digits
        refuse(where, f"{field} {shown(value)} must be finite: it is past float64's range")
    if not math.isfinite(number):
        refuse(where, f"{field} must be finite, got {value}")
    return number


def base(value, field: str, where: str) -> float:
    """RoPE's base: finite and above 1. The frequencies base**(-2i/d) fall from 1 only above 1;
    at 1 every pair turns alike and YaRN's correction range divides by log(base) = 0; below 1
    they grow as 1/base (1e-300 overflows float32 and the float64 angles lose every digit)."""
    number = real(value, field, where)
    if not number > 1:
        refuse(
            where,
            f"{field} {value!r} must be above 1: the frequencies base**(-2i/head_dim) fall "
            "from 1 only for a base above 1 (models use 10000 to 1e7)",
        )
    return number


def share(value, field: str, where: str) -> float:
    """A number in (0, 1]: the share of each head that is rotated."""
    number = real(value, field, where)
    if not 0 < number <= 1:
        refuse(where, f"{field} {value!r} must be in (0, 1]: the share of each head rotated")
    return number


def positive(value, field: str, where: str) -> float:
    number = real(value, field, where)
    if not number > 0:
        refuse(where, f"{field} {value!r} must be positive")
    return number


def mapping(value, field: str, where: str) -> dict | None:
    """A JSON object or null."""
    if value is not None and not isinstance(value, dict):
        refuse(where, f"{field} must be an object (or null), got {shown(value)}")
    return value


def text(value, field: str, where: str) -> str | None:
    """A string or null."""
    if value is not None and not isinstance(value, str):
        refuse(where, f"{field} must be a string, got {shown(value)}")
    return value


def flag(value, field: str, where: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        refuse(where, f"{field} must be true or false, got {shown(value)}")
    return value


# float16's normal numbers (the narrowest of the dtypes the checks run): a value of magnitude 1
# times a multiplier outside them is infinite, or loses its digits to the subnormal spacing
NORMAL = (
    max(float(ml_dtypes.finfo(d).tiny) for d in validation.DTYPES.values()),
    min(float(ml_dtypes.finfo(d).max) for d in validation.DTYPES.values()),
)


def multiplier(value, field: str, where: str, usual: str = "about 1 to 100") -> float:
    """An input embedding multiplier whose scaled rows the scaled_inputs check can judge (bit
    for bit): rows of magnitude 1 times it must stay normal numbers in every dtype the check
    runs. Past the narrowest dtype's largest finite number the rows are infinite, and an
    infinite answer equals them (a Granite embedding_multiplier of 1e308 passed a target that
    returns infinities); below its smallest normal number they lose their digits to the
    subnormal spacing, down to 0, and zeros pass. Also a rope rule's attention factor, which
    scales cos and sin (``usual``: what models' are)."""
    number = positive(value, field, where)
    least, most = NORMAL
    if not least <= number <= most:
        refuse(
            where,
            f"{field} {value!r} must be in [{least:.3g}, {most:g}] (float16's normal numbers): "
            "the scaled values leave the range the check runs them in, where an infinite or "
            f"zero answer equals them; models' are {usual}",
        )
    return number


def checkable_scaling(theta: float, scaling: dict | None, rotary_dim: int, where: str) -> None:
    """A scaling rule whose rope check can tell a rotation from none; else refused, naming the
    factor, the smallest that keeps the check's teeth, and why.

    The rope kind's bound (``positional.rope_bound``, in LOOSEST: the check must keep its teeth
    in every dtype) on a pair (1, 0) turned to position p is s (dt + d/2 + 2c + d), its
    angle error dt = p w (e(w) + c/2) growing with the pair's frequency w; the values it bounds
    are the turned pair, of size s. A factor that divides w by a tiny number (a config.json's
    linear factor 1e-300: w = 1e300; a GGUF's rope_freqs of 1e-30, read as freq_factors) makes
    the bound larger than those values at the positions the kind checks, and any answer of
    their size, the pair not turned at all, is within it. So at the
    last position of each check the bound must stay below the values, for every pair; the
    smallest factor that keeps it there comes from bisecting the same formula."""
    ratios = _ratios(theta, scaling, rotary_dim)
    at, pair = np.unravel_index(np.argmax(ratios), ratios.shape)
    if ratios[at, pair] < 1:
        return
    position = CHECKED_POSITIONS[at]
    field, index = _divisor(scaling, position, int(pair))
    given = scaling[field] if index is None else scaling[field][index]

    def ratio_at(factor) -> float:
        """The largest ratio with the factor changed (a listed one: its own pair's)."""
        if index is None:
            return float(_ratios(theta, {**scaling, field: factor}, rotary_dim).max())
        changed = list(scaling[field])
        changed[index] = factor
        found = _ratios(theta, {**scaling, field: tuple(changed)}, rotary_dim)
        return float(found[:, index].max())

    which = "" if index is None else f"[{index}]"
    refuse(
        where,
        f"{scaling['rope_type']} scaling {field}{which} {given:g} turns pair {pair} too fast: at "
        f"position {position} the rope check's bound is {ratios[at, pair]:.2g} times the values "
        "it bounds, so a target that does not rotate would conform; give a factor of at least "
        f"{_least(ratio_at, given):.3g}",
    )


def _ratios(theta: float, scaling, rotary_dim: int) -> np.ndarray:
    """(positions, pairs): the ratio of the rope check's bound in LOOSEST to the values it
    bounds, a pair (1, 0) turned (half layout) to each of CHECKED_POSITIONS."""
    x = np.zeros((1, rotary_dim))
    x[:, : rotary_dim // 2] = 1.0
    found = []
    with np.errstate(over="ignore", invalid="ignore"):  # a frequency of 1e300 times 131071
        for position in CHECKED_POSITIONS:
            at = np.array([position])
            bound = positional.rope_bound(
                x, at, base=theta, scaling=scaling, rotary_dim=rotary_dim, dtype=LOOSEST
            )[0, : rotary_dim // 2]
            _, attention = positional.rope_parameters(rotary_dim, theta, scaling, position + 1)
            found.append(np.nan_to_num(bound / attention, nan=math.inf, posinf=math.inf))
    return np.array(found)


def _divisor(scaling: dict, position: int, pair: int) -> tuple[str, int | None]:
    """(field, index): the factor that divides ``pair``'s frequency at ``position``: each
    pair's own in a GGUF's factor tensor (freq_factors' factors) and in LongRoPE's short_factor
    or long_factor, else the rule's factor."""
    if scaling["rope_type"] == "freq_factors":
        return "factors", pair
    if scaling["rope_type"] != "longrope":
        return "factor", None
    longer = position + 1 > scaling["original_max_position_embeddings"]
    return ("long_factor" if longer else "short_factor"), pair


def _least(ratio_at, given: float) -> float:
    """The smallest factor at which ``ratio_at`` falls below 1, bisected in log space between
    ``given`` (where it is 1 or more) and 1 (where it is below: a factor of 1 turns no pair
    faster than 1 radian a position), rounded up to three digits."""
    low, high = math.log(given), 0.0
    for _ in range(64):
        middle = (low + high) / 2
        low, high = (middle, high) if ratio_at(math.exp(middle)) >= 1 else (low, middle)
    least = math.exp(high)
    step = 10 ** (math.floor(math.log10(least)) - 2)
    return math.ceil(least / step) * step
