"""The token table split across JAX devices: a ``Mesh`` of N devices, the table placed with
``NamedSharding``, and the lookup written out with ``jax.shard_map`` — or left to the compiler.

- ``"rows"``: each device holds ceil(V / N) rows (``PartitionSpec("shards", None)``); inside
  ``shard_map`` it masks the ids it does not own, gathers the rest from its rows, and
  ``lax.psum`` sums the devices' results (an all-reduce of B·T·dim values).
- ``"columns"``: each device holds every row and ceil(dim / N) columns
  (``PartitionSpec(None, "shards")``); it gathers all ids from its columns and
  ``lax.all_gather`` concatenates them (each device receives (N - 1)/N of the result).
- ``"compiler"``: the table placed as for ``"rows"``, and the plain gather under ``jax.jit``,
  ``table.at[ids].get(out_sharding=...)`` replicated (the mesh's axes are Explicit, JAX's default, so the
  result's sharding is named): XLA's SPMD partitioner chooses the communication itself.

On the CPU, N devices come from ``XLA_FLAGS=--xla_force_host_platform_device_count=N``, set
before JAX is imported. Ids are checked on the host against the *global* vocabulary before any
device sees them (see ``sharding.reference`` for why, and for the exactness argument).
"""

from __future__ import annotations

from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from backends import validation
from sharding import reference

AXIS = "shards"
STRATEGIES = ("rows", "columns", "compiler")
_SPECS = {"rows": P(AXIS, None), "columns": P(None, AXIS), "compiler": P(AXIS, None)}


def make_mesh(num_shards: int) -> jax.sharding.Mesh:
    """A one-axis mesh ("shards") over the first num_shards devices."""
    devices = jax.devices()
    if num_shards > len(devices):
        raise ValueError(
            f"{num_shards} shards need {num_shards} devices, but JAX sees {len(devices)}: on the "
            f"CPU, set XLA_FLAGS=--xla_force_host_platform_device_count={num_shards} before "
            "jax is imported"
        )
    return jax.make_mesh((num_shards,), (AXIS,), devices=devices[:num_shards])


class ShardedEmbedding:
    """``token_table[ids] + position_table[start:start + T]`` with the token table split over
    num_shards devices; the position table is replicated on each of them."""

    def __init__(self, token_table, position_table, *, num_shards: int, strategy: str = "rows"):
        validation._choice(strategy, STRATEGIES, "sharding strategy")
        token_table, position_table = validation.check_tables(token_table, position_table)
        self.vocab_size, self.dim = token_table.shape
        self.max_seq_len = len(position_table)
        self.strategy = strategy
        split = reference.split_columns if strategy == "columns" else reference.split_rows
        shards = split(token_table, num_shards)  # checks num_shards against the table
        self.num_shards = len(shards)
        self.mesh = make_mesh(self.num_shards)
        padded = np.concatenate(shards, axis=1 if strategy == "columns" else 0)
        self.token_table = jax.device_put(padded, NamedSharding(self.mesh, _SPECS[strategy]))
        self.position_table = jax.device_put(position_table, NamedSharding(self.mesh, P()))

    def __call__(self, token_ids, start: int = 0) -> jax.Array:
        token_ids, start = validation.check_call(
            token_ids, start, self.vocab_size, self.max_seq_len
        )  # global vocabulary, before any device sees an id
        lookup = _lookup(self.mesh, self.strategy, self.dim)
        return lookup(self.token_table, self.position_table, token_ids.astype(np.int32), start)

    def bytes_per_device(self) -> int:
        """The token table's bytes on each device (every device holds the same amount)."""
        return self.token_table.addressable_shards[0].data.nbytes


@cache
def _lookup(mesh, strategy: str, dim: int):
    """The jitted sharded lookup plus positions for one mesh and strategy."""
    replicated = P()
    if strategy == "compiler":

        def tokens(table, ids):  # the mesh's axes are Explicit: name the result's sharding
            return table.at[ids].get(out_sharding=NamedSharding(mesh, replicated))
    else:
        per_device = _rows if strategy == "rows" else _columns
        tokens = jax.shard_map(
            per_device,
            mesh=mesh,
            in_specs=(_SPECS[strategy], replicated),
            out_specs=replicated,
            # psum's result is known to be the same on every device; all_gather's is too,
            # but this JAX cannot infer it (it has no all_gather_invariant): say so.
            check_vma=strategy == "rows",
        )

    @jax.jit
    def lookup(table, positions, ids, start):
        x = tokens(table, ids)[..., :dim]  # columns: drop the padding
        return x + lax.dynamic_slice_in_dim(positions, start, ids.shape[-1])

    return lookup


def _rows(local, ids):
    """One device: its rows for the ids it owns, zero for the others; then the all-reduce."""
    rows = local.shape[0]
    local_ids = ids - lax.axis_index(AXIS) * rows
    owned = (local_ids >= 0) & (local_ids < rows)
    out = jnp.where(owned[..., None], local[jnp.where(owned, local_ids, 0)], 0)
    return lax.psum(out, AXIS)


def _columns(local, ids):
    """One device: its columns of every id; then the all-gather along the last axis."""
    return lax.all_gather(local[ids], AXIS, axis=ids.ndim, tiled=True)
