"""alibi: f(num_heads) -> slopes, BLOOM's rule for any head count, bit for bit."""

from __future__ import annotations

import numpy as np

from backends import positional
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import (
    Case,
    Kind,
)
from embedding_parity.conformance.numerics import FLOATS


class Alibi(Kind):
    name = "alibi"
    contract = "f(num_heads) -> slopes (num_heads,), BLOOM's rule for any head count"

    def cases(self, options):
        return [
            Case(
                "slopes, 1 to 128 heads",
                f"{n} heads" + ("" if n & (n - 1) == 0 else " (not a power of two)"),
                {"num_heads": n},
            )
            for n in range(1, 129)
        ]

    def arguments(self, params):
        return [params["num_heads"]]

    def reference(self, params):
        return positional.alibi_slopes(params["num_heads"])

    def expected_dtype(self, params, actual):
        return actual.dtype.name if actual.dtype.name in FLOATS else "float32"

    def mistakes(self, params):
        n = params["num_heads"]
        return [
            (
                f"the power-of-two formula 2**(-8i/n) applied to {n} heads",
                2.0 ** (-8 * np.arange(1, n + 1) / n),
            )
        ]

    def diagnose(self, params, actual, dtype, tolerance, error):
        found = super().diagnose(params, actual, dtype, tolerance, error)
        if found:
            return found
        size, _ = numerics.ulps(actual, self.reference(params), dtype)
        if size <= 4:
            return f"slopes off by up to {size:.0f} ulp: powers computed in {dtype}, not rounded once from exact values"
        return ""
