"""Bad usage, said the same way at every layer: the error raised for bad arguments or input
(the command line prints it as one line and exits 2), and the argparse types of values that
layers below the jobs parse too (a process launched with flags of its own)."""

from __future__ import annotations

import argparse
import math

LONGEST_WAIT = 86400.0  # seconds: a day, past which a time limit is a typo, not a limit


class UsageError(ValueError):
    """Bad arguments or input: the CLI prints the message as one line and exits 2."""


def positive_finite(text: str) -> float:
    """An argparse type: a float that is positive and finite."""
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be positive and finite, got {value:g}")
    return value


positive_finite.__name__ = "float"


def seconds(text: str) -> float:
    """An argparse type: a time limit, positive and at most a day (1e300 would overflow the
    clocks that the waits use, late in the run)."""
    value = positive_finite(text)
    if value > LONGEST_WAIT:
        raise argparse.ArgumentTypeError(
            f"{value:g} seconds: give at most {LONGEST_WAIT:g} (a day)"
        )
    return value


seconds.__name__ = "float"
