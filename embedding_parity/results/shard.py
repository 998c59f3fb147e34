"""What the shard job (jobs.shard) returns and ``drawing.sharding`` draws: every strategy of
every backend, held bit for bit to one device's lookup."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Row:
    """One strategy of one backend: its output, and how it compares with one device's."""

    backend: str
    strategy: str
    collective: str
    bytes_per_device: int
    output: np.ndarray
    max_abs_diff: float
    identical: bool
    memory: np.ndarray | None = None  # torch from a file: per rank (peak bytes, bytes read)


@dataclass
class Sharded:
    """The table split num_shards ways, and every row run on it."""

    num_shards: int
    token_ids: np.ndarray
    start: int
    token_table: np.ndarray  # or a sharding.reference.TableFile: the rows read from a file
    position_table: np.ndarray
    unsharded: np.ndarray
    rows: list[Row] = field(default_factory=list)

    @property
    def differing(self) -> list[Row]:
        return [r for r in self.rows if not r.identical]
