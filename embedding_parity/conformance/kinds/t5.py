"""t5: f(relative_position, bidirectional, num_buckets, max_distance) -> buckets, exact."""

from __future__ import annotations

import math

import numpy as np

from backends import numpy_backend, positional
from embedding_parity.conformance.kinds.base import (
    Case,
    Kind,
    differs,
    exact_integers,
    integer_mismatch,
)


class T5(Kind):
    name = "t5"
    contract = (
        "f(relative_position, bidirectional, num_buckets, max_distance) -> buckets, T5's rule"
    )

    CONFIGS = ((True, 32, 128), (False, 32, 128), (True, 64, 256), (False, 128, 1000))

    def cases(self, options):
        return [
            Case(
                f"buckets {'bidirectional' if b else 'causal'}, {n} buckets, max distance {d}",
                "relative positions -2000..2000",
                {"bidirectional": b, "num_buckets": n, "max_distance": d},
            )
            for b, n, d in self.CONFIGS
        ]

    def arguments(self, params):
        return [
            np.arange(-2000, 2001, dtype=np.int64),
            params["bidirectional"],
            params["num_buckets"],
            params["max_distance"],
        ]

    def reference(self, params):
        relative, bidirectional, n, d = self.arguments(params)
        return numpy_backend.t5_relative_buckets(
            relative, bidirectional=bidirectional, num_buckets=n, max_distance=d
        )

    def compare(self, params, actual):
        reference = self.reference(params)
        verdict, wrong = exact_integers(actual, reference)
        if verdict:
            return verdict
        first = integer_mismatch(actual, reference, wrong)
        wrong = np.flatnonzero(wrong)
        relative = self.arguments(params)[0]
        shown = ", ".join(str(int(r)) for r in relative[wrong][:6]) + (
            ", ..." if wrong.size > 6 else ""
        )
        detail = f"{wrong.size} buckets differ, at relative positions {shown}"
        for name, result in self.mistakes(params):
            if np.array_equal(actual, result):
                return differs(f"{detail}; {name}", mismatch=first)
        starts = positional.t5_bucket_starts(
            params["num_buckets"], params["max_distance"], bidirectional=params["bidirectional"]
        )
        distance = np.abs(relative[wrong])
        if (
            np.isin(distance, np.r_[starts, starts - 1]).all()
            and np.abs(actual[wrong] - reference[wrong]).max() == 1
        ):
            listed = ", ".join(map(str, starts[:8])) + (", ..." if len(starts) > 8 else "")
            detail += f"; off by one at bucket boundaries (buckets start at distances {listed})"
        return differs(detail, mismatch=first)

    def mistakes(self, params):
        relative, bidirectional, n, d = self.arguments(params)
        return [
            (
                "the log in float32, as Hugging Face's T5 computes it",
                _float_log_buckets(relative, bidirectional, n, d, np.float32),
            ),
            (
                "the log in float64 (the published formula)",
                _float_log_buckets(relative, bidirectional, n, d, np.float64),
            ),
        ]


def _float_log_buckets(relative, bidirectional, num_buckets, max_distance, dtype):
    """T5's published bucket rule with its log in ``dtype``."""
    buckets = np.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0) * num_buckets
        distance = np.abs(relative)
    else:
        distance = -np.minimum(relative, 0)
    exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = np.log(distance.astype(dtype) / dtype(exact)) / dtype(
            math.log(max_distance / exact)
        )
    large = exact + (large * dtype(num_buckets - exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return buckets + np.where(distance < exact, distance, large)
