"""Each config field checked for its type and range where it is read: a wrong one is refused
in one line (``UsageError``) naming the file, the field, the value, the limit and why."""

from __future__ import annotations

import math
import numbers

from embedding_parity.usage import UsageError

MOST_HEAD_DIM = 1 << 16  # the rope kind's cap (kinds/rope.py MOST_HEAD_DIM, as --head-dim)
MOST_TYPE_VOCAB = 1 << 16  # type rows; models have 1 (RoBERTa) to a few (BERT 2)
# Token ids: vocabularies reach 262144 (Gemma 3); RoBERTa counts positions from pad_token_id + 1,
# which must stay an int32 in every backend.
MOST_TOKEN_ID = 1 << 24
MOST_LAYERS = 4096  # decoder layers; the deepest models have about 128
MOST_INT = 2**31 - 1  # widths, lengths and token ids fit an int32 in every backend
SHOWN = 60  # characters of a refused value quoted in the message


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
