"""What train short, test long (jobs.extrapolate) returns and ``drawing.training`` draws:
every (scheme, backend) run's training loss and its test loss at each length, the
Bayes-optimal floor, and how far the backends drift apart."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embedding_parity.training import language

FACTORS = (1, 2, 4, 8)  # evaluation lengths, in multiples of the training length


@dataclass
class Run:
    scheme: str
    backend: str
    loss: np.ndarray  # (steps,) the batch's loss before each update
    test: dict[int, float | str]  # evaluation length -> loss, or the layer's error message


@dataclass
class Extrapolation:
    settings: dict
    runs: list[Run]
    optimal: dict[int, float]  # evaluation length -> the Bayes-optimal loss on the same text
    drift: dict[str, float] = field(default_factory=dict)  # scheme -> max relative difference

    @property
    def lengths(self) -> list[int]:
        return list(self.optimal)

    def run(self, scheme: str, backend: str) -> Run:
        return next(r for r in self.runs if (r.scheme, r.backend) == (scheme, backend))

    def tolerance(self) -> float | None:
        """For float64: how far the backends' losses (training and test) may drift apart,
        relative to the loss: S steps of rounding in sums no longer than n terms, as in
        results.train.Training.tolerance, with n = dim + head_dim + 8L + heads * head_dim +
        vocabulary + batch_size * L (the longest sums: projections, scores, the attention
        mix over up to 8L keys, the readout, the softmax and the mean over a batch)."""
        s = self.settings
        if s["dtype"] != "float64":
            return None
        n = (
            s["dim"]
            + s["head_dim"]
            + FACTORS[-1] * s["length"]
            + s["heads"] * s["head_dim"]
            + language.VOCAB
            + s["batch_size"] * s["length"]
        )
        return s["steps"] * n * float(np.finfo(np.float64).eps)

    def beyond(self) -> list[str]:
        tolerance = self.tolerance()
        if tolerance is None:
            return []
        return [s for s, d in self.drift.items() if not d <= tolerance]
