"""sinusoidal: f(num_positions, dim) -> the interleaved table, within the derived bound."""

from __future__ import annotations

import numpy as np

from backends import positional
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import (
    OTHER_BASES,
    Case,
    Kind,
    _phase_record,
    _with_phase,
    low_precision_angles,
)
from embedding_parity.conformance.numerics import FLOATS


class Sinusoidal(Kind):
    name = "sinusoidal"
    contract = (
        "f(num_positions, dim) -> table (num_positions, dim), interleaved: "
        "table[p, 2i] = sin(p / base**(2i/dim)), table[p, 2i+1] = cos(...)"
    )
    exact = False

    def cases(self, options):
        base = options.get("base", 10000.0)
        return [
            Case(
                "table 64 x 16",
                "64 positions, dim 16",
                {"num_positions": 64, "dim": 16, "base": base},
            ),
            Case(
                "table 64 x 64",
                "64 positions, dim 64",
                {"num_positions": 64, "dim": 64, "base": base},
            ),
            Case(
                "positions to 131071",
                "131072 positions, dim 16",
                {"num_positions": 131072, "dim": 16, "base": base},
            ),
        ]

    def arguments(self, params):
        return [params["num_positions"], params["dim"]]

    def most_elements(self, params):
        return params["num_positions"] * params["dim"]  # the table's, without building it

    def reference(self, params, **changes):
        p = {**params, **changes}
        table = positional.sinusoidal_table(
            p["num_positions"] + p.get("offset", 0),
            p["dim"],
            base=p["base"],
            layout=p.get("layout", "interleaved"),
        )
        return table[p.get("offset", 0) :]

    def expected_dtype(self, params, actual):
        return actual.dtype.name if actual.dtype.name in FLOATS else "float32"

    def tolerance(self, params, dtype):
        return positional.table_bound(
            params["num_positions"], params["dim"], base=params["base"], dtype=dtype
        )

    def mistakes(self, params):
        positions = np.arange(params["num_positions"], dtype=np.float64)
        found = [
            (
                (
                    "concat layout (all sines, then all cosines), the contract's table is "
                    "table[:, argsort(backends.rope_permutation(dim))]"
                ),
                self.reference(params, layout="concat"),
            ),
            ("positions start at 1", self.reference(params, offset=1)),
        ]
        swapped = self.reference(params).copy()
        swapped[:, 0::2], swapped[:, 1::2] = swapped[:, 1::2].copy(), swapped[:, 0::2].copy()
        found.append(("sin and cos swapped (cos at even columns)", swapped))
        dim, base = params["dim"], params["base"]
        column = np.arange(0, dim, 2)
        for name, angles in (
            (
                "frequency exponent i/dim where 2i/dim is meant",
                positions[:, None] / base ** (column / 2 / dim),
            ),
            *(
                (
                    f"base {other:g} instead of {base:g}",
                    positions[:, None] / other ** (column / dim),
                )
                for other in OTHER_BASES
                if other != base
            ),
            *(
                (
                    f"angles computed in {low}",
                    low_precision_angles(positions, positional.frequencies(dim, base), low),
                )
                for low in ("bfloat16", "float16", "float32")
            ),
        ):
            table = np.empty((len(positions), dim))
            table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
            found.append((name, table))
        return found

    def phase(self, params, actual):
        if actual.ndim != 2 or actual.shape[1] % 2:
            return None
        positions = np.arange(actual.shape[0], dtype=np.float64)
        error = numerics.table_phase_error(actual, positions, params["base"])
        # the largest error in each octave of positions (0, 1, 2-3, 4-7, ...): the envelope
        edges = [0, *(2**k for k in range(int(np.log2(max(len(positions) - 1, 1))) + 1))]
        starts = [e for e in edges if e < len(positions)]
        stops = [*starts[1:], len(positions)]
        return _phase_record(
            np.array(starts), np.array([error[a:b].max() for a, b in zip(starts, stops)])
        )

    def diagnose(self, params, actual, dtype, tolerance, error):
        found = super().diagnose(params, actual, dtype, tolerance, error)
        phase = self.phase(params, actual)
        return _with_phase(found, phase)
