"""What the vision job computed: each path's rows (one results.parity.Result per backend),
held as the seed demo holds its backends."""

from __future__ import annotations

from dataclasses import dataclass, field

from embedding_parity.results.parity import Result, backends_run


@dataclass
class Vision:
    """Every backend on one seeded grid, along each path that was run."""

    paths: dict[str, list[Result]]  # what a path is and what it is held to -> a row per backend
    heading: str  # the expression that was run
    setting: str  # the grid, the table's width, dtype and seed
    notes: list[str] = field(default_factory=list)  # printed under the setting

    @property
    def differing(self) -> list[str]:
        return [
            f"{r.backend} ({path.split(':')[0]})"
            for path, results in self.paths.items()
            for r in results
            if not r.agrees
        ]

    @property
    def verdict(self) -> str:
        """The last line compare.py vision prints."""
        if self.differing:
            return f"DIFFERS: {', '.join(self.differing)}"
        first = next(iter(self.paths.values()))
        return f"{backends_run(first)} agree on every path run"
