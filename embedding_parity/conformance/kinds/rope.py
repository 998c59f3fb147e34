"""rope: f(x, positions) -> x rotated, the half layout, within the derived bound."""

from __future__ import annotations

import numpy as np

from backends import positional, validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import (
    LONG,
    OTHER_BASES,
    ROPE_DIM,
    Case,
    Kind,
    _phase_record,
    _with_phase,
    low_precision_angles,
)
from embedding_parity.conformance.numerics import FLOATS


class Rope(Kind):
    name = "rope"
    contract = (
        "f(x, positions) -> rotated, x (..., T, head_dim), positions (T,) integers; pairs "
        "(i, i + head_dim/2) turned by positions * base**(-2i/head_dim) (the half layout)"
    )
    exact = False

    def cases(self, options):
        base = options.get("base", 10000.0)
        found = []
        for dtype in FLOATS:
            found.append(
                Case(
                    f"rotation {dtype}",
                    "x (3, 16, 16), positions 0..15",
                    {"dtype": dtype, "long": False, "base": base, "seed": len(found)},
                )
            )
            found.append(
                Case(
                    f"long positions {dtype}",
                    "x (3, 14, 16), positions to 131071",
                    {"dtype": dtype, "long": True, "base": base, "seed": len(found)},
                )
            )
        return found

    def arguments(self, params):
        positions = LONG if params["long"] else np.arange(16)
        rng = np.random.default_rng(params["seed"])
        x = rng.standard_normal((3, len(positions), ROPE_DIM)).astype(
            validation.resolve_dtype(params["dtype"])
        )
        return [x, positions.astype(np.int64)]

    def reference(self, params, *, layout="half", offset=0, base=None):
        x, positions = self.arguments(params)
        return positional.apply_rope(
            x, positions + offset, base=base or params["base"], layout=layout
        )

    def tolerance(self, params, dtype):
        x, positions = self.arguments(params)
        x = np.abs(x.astype(np.float64))
        magnitude = float((x[..., : ROPE_DIM // 2] + x[..., ROPE_DIM // 2 :]).max())
        return positional.tolerance(
            dtype, float(positions.max()), base=params["base"], magnitude=magnitude
        )

    def mistakes(self, params):
        x, positions = self.arguments(params)
        base = params["base"]
        found = [
            (
                (
                    "interleaved layout (pairs 2i, 2i+1: GPT-J, Meta's LLaMA) where half is expected, "
                    "it conforms as f(x[..., inv])[..., perm], perm = backends.rope_permutation(head_dim), "
                    "inv = argsort(perm)"
                ),
                self.reference(params, layout="interleaved"),
            )
        ]
        found += [
            (f"positions off by {k:+d}", self.reference(params, offset=k))
            for k in (1, -1)
            if positions.min() + k >= 0
        ]
        found += [
            (f"base {b:g} instead of {base:g}", self.reference(params, base=b))
            for b in OTHER_BASES
            if b != base
        ]
        wide = x.astype(np.float64)
        half = ROPE_DIM // 2
        a, b = wide[..., :half], wide[..., half:]
        frequencies = positional.frequencies(ROPE_DIM, base)
        angles = {
            low: low_precision_angles(positions.astype(np.float64), frequencies, low)
            for low in ("bfloat16", "float16", "float32")
        }
        angles["the other way (sin with the wrong sign)"] = -positions[:, None] * frequencies
        for name, angle in angles.items():
            cos, sin = np.cos(angle), np.sin(angle)
            turned = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
            found.append(
                (name if name.startswith("the other") else f"angles computed in {name}", turned)
            )
        return found

    def phase(self, params, actual):
        x, positions = self.arguments(params)
        if actual.shape != x.shape:
            return None
        error = numerics.rotation_phase_error(x, actual, positions, params["base"])
        return _phase_record(positions, error)

    def diagnose(self, params, actual, dtype, tolerance, error):
        found = super().diagnose(params, actual, dtype, tolerance, error)
        if dtype == "float64" and error <= self.tolerance(params, "float32"):
            found = "computed in float32: within float32's tolerance, not float64's"
        return _with_phase(found, self.phase(params, actual))
