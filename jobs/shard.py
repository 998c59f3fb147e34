"""The shard job: the seed's lookup with the token table split N ways, in NumPy (the
reference, over a list of shards), in JAX (one process, N devices) and in torch (N
processes), every result held to the unsharded layer bit for bit.

JAX makes its N CPU devices only when it is imported (``XLA_FLAGS``), so ``run`` sets the
flag itself when JAX is not imported yet, and refuses clearly when it is, with too few.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

import numpy as np

import backends
from backends import validation
from sharding import reference

SEED = {"vocab_size": 100, "dim": 10, "max_seq_len": 16, "tokens": (5, 10, 7, 21)}
# Per backend: its strategies, and the collective each one runs.
STRATEGIES = {
    "numpy": {"rows": "sum over shards", "columns": "concatenate"},
    "jax": {"rows": "psum (all-reduce)", "columns": "all-gather", "compiler": None},
    "torch": {"rows": "all_reduce", "columns": "all_gather", "dtensor": "all-reduce (DTensor)"},
}


@dataclass
class Row:
    backend: str
    strategy: str
    collective: str
    bytes_per_device: int
    output: np.ndarray
    max_abs_diff: float
    identical: bool


@dataclass
class Sharded:
    num_shards: int
    token_ids: np.ndarray
    start: int
    token_table: np.ndarray
    position_table: np.ndarray
    unsharded: np.ndarray
    rows: list[Row] = field(default_factory=list)

    @property
    def differing(self) -> list[Row]:
        return [r for r in self.rows if not r.identical]


def prepare(names, num_shards) -> int:
    """Check num_shards against the seed's table (every shard must own a row and a column)
    and, with JAX among names, make JAX see that many devices. Call before JAX is imported."""
    num_shards = reference.check_shards(num_shards, SEED["dim"], "columns")
    if "jax" in names:
        ensure_devices(num_shards)
    return num_shards


def ensure_devices(num_shards: int) -> None:
    """Make JAX see num_shards CPU devices: set XLA_FLAGS if JAX is not imported yet."""
    if "jax" not in sys.modules:
        flags = os.environ.get("XLA_FLAGS", "")
        flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags)
        os.environ["XLA_FLAGS"] = (
            f"{flags} --xla_force_host_platform_device_count={num_shards}".strip()
        )
        return
    import jax

    if jax.device_count() < num_shards:
        raise ValueError(
            f"JAX was imported with {jax.device_count()} devices, {num_shards} are needed: "
            f"run in a fresh process (XLA_FLAGS=--xla_force_host_platform_device_count="
            f"{num_shards})"
        )


def run(
    names,
    num_shards: int,
    *,
    tokens=None,
    batch: int | None = None,
    start: int = 0,
    dtype="float32",
    seed: int = 0,
) -> Sharded:
    """The seed's tables, split num_shards ways, every strategy of every backend in names.
    tokens: the ids (default: the seed's 5 10 7 21); batch: B random sequences of their
    length instead (drawn with seed)."""
    token_table, position_table = backends.shared_weights(
        SEED["vocab_size"], SEED["dim"], SEED["max_seq_len"], seed=seed, dtype=dtype
    )
    token_ids = np.array(SEED["tokens"] if tokens is None else tokens, dtype=np.int64)
    if batch is not None:
        batch = validation.integer(batch, "--batch")
        if batch < 1:
            raise ValueError(f"--batch must be at least 1, got {batch}")
        rng = np.random.default_rng(seed)
        token_ids = rng.integers(0, SEED["vocab_size"], (batch, len(token_ids)))
    token_ids, start = validation.check_call(
        token_ids, start, *map(len, (token_table, position_table))
    )
    num_shards = prepare(names, num_shards)
    unsharded = token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]
    done = Sharded(num_shards, token_ids, start, token_table, position_table, unsharded)
    for name in names:
        for strategy, collective in STRATEGIES[name].items():
            output, per_device, collective = _one(
                name,
                strategy,
                collective,
                num_shards,
                token_table,
                position_table,
                token_ids,
                start,
            )
            difference = np.abs(output.astype(np.float64) - unsharded.astype(np.float64))
            done.rows.append(
                Row(
                    name,
                    strategy,
                    collective,
                    per_device,
                    output,
                    float(difference.max(initial=0.0)),
                    output.dtype == unsharded.dtype and output.tobytes() == unsharded.tobytes(),
                )
            )
    return done


def _one(name, strategy, collective, num_shards, token_table, position_table, token_ids, start):
    """(output, token-table bytes per device, collective) of one backend and strategy."""
    vocab_size, dim = token_table.shape
    itemsize = token_table.dtype.itemsize
    rows = reference.per_shard(vocab_size, num_shards) * dim * itemsize
    columns = vocab_size * reference.per_shard(dim, num_shards) * itemsize
    per_device = columns if strategy == "columns" else rows
    if name == "numpy":
        output = reference.embed(
            token_table, position_table, token_ids, start, num_shards=num_shards, strategy=strategy
        )
        return output, per_device, collective
    if name == "jax":
        from sharding import jax_shards

        layer = jax_shards.ShardedEmbedding(
            token_table, position_table, num_shards=num_shards, strategy=strategy
        )
        if collective is None:  # the compiler's choice, read from the compiled program
            collective = "compiler: " + ", ".join(jax_shards.collectives(layer, token_ids, start))
        return np.asarray(layer(token_ids, start)), layer.bytes_per_device(), collective
    from sharding import torch_shards

    output = torch_shards.embed(
        token_table, position_table, token_ids, start, num_shards=num_shards, strategy=strategy
    )
    return output, per_device, collective
