"""What the ALiBi and T5 job (jobs.bias) returns and ``drawing.bias`` draws: every backend's
token rows, bias and bias-only attention, held to their references; T5's bucket settings,
which the job runs and the picture draws."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embedding_parity.results.parity import Result, backends_run

T5_BUCKETS = 32  # T5's relative_attention_num_buckets
T5_MAX_DISTANCE = 128  # T5's relative_attention_max_distance


@dataclass
class Checked:
    """One backend's arrays on every call, as NumPy, held to the references."""

    backend: str
    x: Result  # the token rows, held bit for bit to token_table[token_ids]
    bias: dict[str, np.ndarray]  # call -> (num_heads, q_len, k_len), in the tables' dtype
    attention: dict[str, np.ndarray]  # call -> (num_heads, q_len, k_len), compute dtype
    bias_identical: bool  # on every call, bit-identical to the NumPy backend's bias
    max_abs_diff: float  # attention against the float64 reference, over every call
    tolerance: float

    @property
    def agrees(self) -> bool:
        return not self.failures()

    def failures(self) -> list[str]:
        """What differs from its reference, in words; empty when everything agrees."""
        return [
            what
            for what, fails in (
                ("token rows not bit-identical", not self.x.agrees),
                ("bias not bit-identical to NumPy's", not self.bias_identical),
                ("attention beyond tolerance", not self.max_abs_diff <= self.tolerance),
            )
            if fails
        ]


@dataclass
class BiasRun:
    """What the job computed, with what it takes to print and draw it."""

    scheme: str  # "alibi" or "t5"
    num_heads: int
    token_ids: np.ndarray  # (T,)
    start: int
    window: int  # positions drawn: queries and keys 0 .. window - 1
    checked: list[Checked]
    masked: dict[str, np.ndarray]  # call -> (q_len, k_len) bool: keys after the query
    bias_table: np.ndarray | None  # T5: (T5_BUCKETS, num_heads), random, not trained
    heading: list[str]  # what was run
    setting: str  # sizes, dtype, seed, positions

    @property
    def differing(self) -> list[str]:
        return [c.backend for c in self.checked if not c.agrees]

    def summary(self) -> str:
        if self.differing:
            return "DIFFERS: " + "; ".join(
                f"{c.backend} ({', '.join(c.failures())})" for c in self.checked if not c.agrees
            )
        who = backends_run(self.checked)
        if len(self.checked) > 1:
            who += f" agree ({', '.join(c.backend for c in self.checked)})"
        return (
            f"{who}: token rows and bias "
            "bit-identical, attention within tolerance of the float64 reference"
        )
