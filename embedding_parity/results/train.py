"""What the train job (jobs.train) returns and ``drawing.training`` draws: every (scheme,
backend) run's curves and tables, how far the backends drift apart, and the float64
tolerance they are held to."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embedding_parity.training import task as tasks


@dataclass
class Curve:
    scheme: str
    backend: str
    loss: np.ndarray  # (steps,) the batch's loss before each update
    accuracy: np.ndarray  # (steps,) the batch's accuracy before each update
    test_accuracy: np.ndarray  # (steps,) on the held-out pairs, after each update
    tables: dict  # the trained token (and learned position) tables


@dataclass
class Training:
    settings: dict
    curves: list[Curve]
    initial: dict  # the shared initial weights
    words: tuple[str, ...]
    drift: dict = field(default_factory=dict)  # scheme -> (steps,) max relative loss difference

    def tolerance(self) -> float | None:
        """For float64: how far the backends' losses may drift apart, relative to the loss.

        Every loss is a chain of sums no longer than n = dim + head_dim + T + head_dim +
        classes + batch_size terms, so one step's rounding error is about n * eps relative
        (first order); the weights then carry each step's difference into the next, so after
        S steps the losses may differ by about S * n * eps. That assumes differences grow
        about linearly, which holds at the default settings (measured: 4x below it for alibi,
        10x for the others); a larger learning rate or many more steps can amplify them
        faster. float32 gets no tolerance: its drift is measured and drawn instead.
        """
        s = self.settings
        if s["dtype"] != "float64":
            return None
        n = s["dim"] + 2 * s["head_dim"] + tasks.LENGTH + len(tasks.NOUNS) + s["batch_size"]
        return s["steps"] * n * float(np.finfo(np.float64).eps)

    def beyond(self) -> list[str]:
        """The schemes whose float64 losses drift past the tolerance (a NaN counts)."""
        tolerance = self.tolerance()
        if tolerance is None:
            return []
        return [s for s, d in self.drift.items() if not np.all(d <= tolerance)]

    def curve(self, scheme: str, backend: str) -> Curve:
        return next(c for c in self.curves if (c.scheme, c.backend) == (scheme, backend))
