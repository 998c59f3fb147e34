"""Each backend's output held to one reference, and what a parity job computed: the types
the parity jobs (seed, text) return and ``drawing.heatmaps`` draws."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Result:
    """One backend's output on the shared weights, held to a reference, as NumPy arrays."""

    backend: str
    panels: dict[str, np.ndarray]  # heading -> (..., T, dim), drawn left to right
    output: np.ndarray  # (..., T, dim), the array compared with the reference
    expected: np.ndarray  # the reference: same dtype (learned) or float64 (sinusoidal, rope)
    tolerance: float = 0.0  # 0: bit-identical required
    bound: np.ndarray | None = None  # a per-element tolerance (its largest is ``tolerance``)
    failures: list[str] = field(default_factory=list)  # what else differs, one line each
    diff: np.ndarray = field(init=False)  # |output - expected|, in float64

    def __post_init__(self):
        self.diff = np.abs(self.output.astype(np.float64) - self.expected.astype(np.float64))

    @property
    def max_abs_diff(self) -> float:
        return float(self.diff.max()) if self.diff.size else 0.0

    @property
    def bound_used(self) -> float:
        """The largest |diff| / bound over the elements with a bound; inf where a dim that
        passes through (bound 0) changed."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(self.diff == 0, 0.0, self.diff / self.bound)
        return float(ratio.max(initial=0))

    @property
    def bit_identical(self) -> bool:
        return same_bits(self.output, self.expected)

    @property
    def agrees(self) -> bool:
        if self.failures:
            return False
        if self.bound is not None:
            return bool(np.all(self.diff <= self.bound))
        return self.bit_identical if self.tolerance == 0 else self.max_abs_diff <= self.tolerance


@dataclass
class Run:
    """What one parity job computed, with what it takes to print and draw it."""

    results: list[Result]
    heading: str  # the expression that was run
    setting: str  # where the tables came from: sizes, dtype, seed or model
    labels: list[str]  # one per token of the first sequence, e.g. "king @ 2"
    token_ids: np.ndarray
    notes: list[str] = field(default_factory=list)  # printed under the setting
    scheme: dict = field(default_factory=dict)  # sinusoidal/RoPE settings, for their plots

    @property
    def exact(self) -> bool:
        """Held bit for bit (to the NumPy expression), rather than within a tolerance."""
        return all(r.tolerance == 0 for r in self.results)

    @property
    def reference_name(self) -> str:
        return "the NumPy expression" if self.exact else "the float64 reference"

    @property
    def differing(self) -> list[str]:
        return [r.backend for r in self.results if not r.agrees]

    @property
    def verdict(self) -> str:
        """The last line compare.py prints."""
        if self.differing:
            return f"DIFFERS from {self.reference_name}: {', '.join(self.differing)}"
        agreement = "bit-identical to" if self.exact else "within tolerance of"
        return f"{backends_run(self.results)} {agreement} {self.reference_name}"


def backends_run(results) -> str:
    """What a verdict speaks for: "all 3 backends", or "numpy (the only backend run)"."""
    if len(results) == 1:
        return f"{results[0].backend} (the only backend run)"
    return f"all {len(results)} backends"


def same_bits(actual: np.ndarray, expected: np.ndarray) -> bool:
    """The same dtype, shape and bytes: bit for bit, -0.0 and 0.0 told apart."""
    return (
        actual.dtype == expected.dtype
        and actual.shape == expected.shape
        and actual.tobytes() == expected.tobytes()
    )
