"""The token table split across JAX devices: a ``Mesh`` of N devices, the table placed with
``NamedSharding``, and the lookup written out with ``jax.shard_map`` — or left to the compiler.

- ``"rows"``: each device holds ceil(V / N) rows (``PartitionSpec("shards", None)``); inside
  ``shard_map`` it masks the ids it does not own, gathers the rest from its rows, and
  ``lax.psum`` sums the devices' results (an all-reduce of B·T·dim values).
- ``"columns"``: each device holds every row and ceil(dim / N) columns
  (``PartitionSpec(None, "shards")``); it gathers all ids from its columns, and resharding
  the column-split result to every device (``jax.reshard``) is the all-gather (each device
  receives (N - 1)/N of the result).
- ``"compiler"``: the table placed as for ``"rows"``, and the plain gather under ``jax.jit``,
  ``table.at[ids].get(out_sharding=...)`` replicated (the mesh's axes are Explicit, JAX's default, so the
  result's sharding is named): XLA's SPMD partitioner chooses the communication itself.

On the CPU, N devices come from ``XLA_FLAGS=--xla_force_host_platform_device_count=N``, set
before JAX is imported. Ids are checked on the host against the *global* vocabulary before any
device sees them (see ``sharding.reference`` for why, and for the exactness argument).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from backends import validation
from embedding_parity import outputs
from embedding_parity.sharding import read_checkpoint_record, reference

AXIS = "shards"
STRATEGIES = ("rows", "columns", "compiler")
# One Adam step on the sharded table (ShardedEmbedding.adam_step), as optax names its settings.
ADAM = {"learning_rate": 0.01, "b1": 0.9, "b2": 0.999, "eps": 1e-8}
_SPECS = {"rows": P(AXIS, None), "columns": P(None, AXIS), "compiler": P(AXIS, None)}


def make_mesh(num_shards: int) -> jax.sharding.Mesh:
    """A one-axis mesh ("shards") over the first num_shards devices; across processes
    (jax.distributed), over every device of every process."""
    devices = jax.devices()
    if jax.process_count() > 1 and num_shards != len(devices):
        raise ValueError(
            f"{num_shards} shards over {jax.process_count()} processes with {len(devices)} "
            f"devices in all: use one shard per device, {len(devices)}"
        )
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
        validation.choice(strategy, STRATEGIES, "sharding strategy")
        if isinstance(token_table, reference.TableFile):
            position_table = token_table.check_positions(position_table)
        else:
            token_table, position_table = validation.check_tables(token_table, position_table)
        if token_table.dtype == np.float64:  # JAX would compute it in float32 without x64
            raise ValueError(
                "the sharded JAX layer takes float32, float16 or bfloat16 tables, got float64"
            )
        self.vocab_size, self.dim = token_table.shape
        self.max_seq_len = len(position_table)
        self.strategy = strategy
        split = "columns" if strategy == "columns" else "rows"
        axis = 1 if split == "columns" else 0
        size = token_table.shape[axis]
        self.num_shards = reference.check_shards(num_shards, size, split)
        self.mesh = make_mesh(self.num_shards)
        placed = NamedSharding(self.mesh, _SPECS[strategy])
        padded = list(token_table.shape)
        padded[axis] = reference.per_shard(size, self.num_shards) * self.num_shards
        read = reference.column_shard if split == "columns" else reference.row_shard
        width = padded[axis] // self.num_shards

        def shard(index):  # called for this process's own devices only
            return read(token_table, (index[axis].start or 0) // width, self.num_shards)

        # A TableFile is read shard by shard: a process reads its devices' part, no more.
        self.token_table = jax.make_array_from_callback(tuple(padded), placed, shard)
        self.position_table = jax.device_put(position_table, NamedSharding(self.mesh, P()))

    def __call__(self, token_ids, start: int = 0) -> jax.Array:
        token_ids, start = validation.check_call(
            token_ids, start, self.vocab_size, self.max_seq_len
        )  # global vocabulary, before any device sees an id
        lookup = _lookup(self.mesh, self.strategy, self.dim)
        return lookup(self.token_table, self.position_table, token_ids.astype(np.int32), start)

    def token_gradient(self, token_ids, upstream, start: int = 0) -> jax.Array:
        """d(loss)/d(token table) for upstream = d(loss)/d(output), by ``jax.vjp`` through the
        sharded lookup: the result has the table's sharding, so each row's gradient lives
        only on the device that owns the row. Padded: (rows * N, dim) or (V, cols * N)."""
        token_ids, start = validation.check_call(
            token_ids, start, self.vocab_size, self.max_seq_len
        )
        upstream = np.asarray(upstream)
        expected = (*token_ids.shape, self.dim)
        if upstream.shape != expected or upstream.dtype != self.token_table.dtype:
            raise ValueError(
                f"upstream must be {np.dtype(self.token_table.dtype)} of shape {expected} "
                f"(the output's), got {upstream.dtype} {upstream.shape}"
            )
        if not token_ids.size:  # no token, no gradient (and nothing for vjp to trace)
            return jnp.zeros_like(self.token_table)
        gradient = _gradient(self.mesh, self.strategy, self.dim)
        upstream = jax.device_put(upstream, NamedSharding(self.mesh, P()))
        return gradient(
            self.token_table, self.position_table, token_ids.astype(np.int32), start, upstream
        )

    def adam_step(self, token_ids, upstream, start: int = 0) -> jax.Array:
        """The token table after one Adam step (``optax.adam`` with ``ADAM``'s settings, a
        fresh state) on this batch's gradient. The gradient has the table's sharding and
        Adam is elementwise, so each device updates only its own shard: the result is
        sharded like the table (padded the same way), with no collective in the step."""
        import optax

        gradient = self.token_gradient(token_ids, upstream, start)
        optimizer = optax.adam(**ADAM)
        updates, _ = optimizer.update(gradient, optimizer.init(self.token_table), self.token_table)
        return optax.apply_updates(self.token_table, updates)

    def bytes_per_device(self) -> int:
        """The token table's bytes on each device (every device holds the same amount)."""
        return self.token_table.addressable_shards[0].data.nbytes


def collectives(layer: ShardedEmbedding, token_ids, start: int = 0) -> list[str]:
    """The collectives in the compiled program of layer's lookup (all-reduce, all-gather, ...)."""
    token_ids = np.asarray(token_ids).astype(np.int32)
    lookup = _lookup(layer.mesh, layer.strategy, layer.dim)
    text = lookup.lower(layer.token_table, layer.position_table, token_ids, start).compile()
    found = re.findall(
        r"\b(all-reduce|all-gather|all-to-all|collective-permute|reduce-scatter)\b",
        text.as_text(),
    )
    return sorted(set(found)) or ["none"]


@cache
def _lookup(mesh, strategy: str, dim: int):
    """The jitted sharded lookup plus positions for one mesh and strategy."""
    replicated = P()
    if strategy == "compiler":

        def tokens(table, ids):  # the mesh's axes are Explicit: name the result's sharding
            return table.at[ids].get(out_sharding=NamedSharding(mesh, replicated))
    elif strategy == "rows":
        tokens = jax.shard_map(
            _rows, mesh=mesh, in_specs=(_SPECS["rows"], replicated), out_specs=replicated
        )
    else:

        def tokens(table, ids):
            # Each device gathers its columns; the result stays split by columns, and
            # resharding it to every device is the all-gather. (An all_gather inside
            # shard_map gives the same forward, but its replicated output cannot be declared
            # in this JAX, and the unchecked transpose scales the gradient by N and back by
            # 1/N: not exact for N = 3.)
            by_columns = P(*([None] * ids.ndim), AXIS)
            local = jax.shard_map(
                _columns, mesh=mesh, in_specs=(_SPECS["columns"], replicated), out_specs=by_columns
            )(table, ids)
            return jax.reshard(local, NamedSharding(mesh, replicated))

    @jax.jit
    def lookup(table, positions, ids, start):
        x = tokens(table, ids)[..., :dim]  # columns: drop the padding
        return x + lax.dynamic_slice_in_dim(positions, start, ids.shape[-1])

    return lookup


@cache
def _gradient(mesh, strategy: str, dim: int):
    """The jitted d(loss)/d(token table) of the lookup, by ``jax.vjp``: one program per shape,
    where the vjp of the jitted lookup alone compiled its forward and its transpose apart."""
    lookup = _lookup(mesh, strategy, dim)

    @jax.jit
    def gradient(table, positions, ids, start, upstream):
        _, pullback = jax.vjp(lambda t: lookup(t, positions, ids, start), table)
        return pullback(upstream)[0]

    return gradient


def _rows(local, ids):
    """One device: its rows for the ids it owns, zero for the others; then the all-reduce."""
    rows = local.shape[0]
    local_ids = ids - lax.axis_index(AXIS) * rows
    owned = (local_ids >= 0) & (local_ids < rows)
    out = jnp.where(owned[..., None], local[jnp.where(owned, local_ids, 0)], 0)
    return lax.psum(out, AXIS)


def _columns(local, ids):
    """One device: its columns of every id."""
    return local[ids]


# --- checkpoints that change N --------------------------------------------------------------


def save_checkpoint(layer: ShardedEmbedding, folder: str) -> None:
    """Write the sharded token table to ``folder`` (which must not exist) with Orbax, each
    device's shard as it lies, padding included: ``folder/orbax`` in Orbax's own format and
    ``folder/table.json`` with the table's logical sizes, dtype, strategy and shard count.
    Written into a temporary folder beside it and renamed: a failure (a full disk) leaves no
    ``folder``, and is one OSError line."""
    import orbax.checkpoint as ocp

    with outputs.new_folder(folder) as partial:
        try:
            # Orbax's synchronous checkpointer: the asynchronous one (StandardCheckpointer)
            # leaves a worker idle on a failure, which _orbax_quiet would wait for
            tree = ocp.args.StandardSave({"token_table": layer.token_table})
            with _orbax_quiet(), ocp.Checkpointer(ocp.StandardCheckpointHandler()) as checkpointer:
                checkpointer.save(os.path.join(partial, "orbax"), args=tree)
        except (ValueError, OSError) as error:  # TensorStore's, a full disk say
            raise OSError(f"Orbax could not write {folder}: {_orbax_error(error)}") from None
        record = {
            "framework": "jax",
            "format": "orbax",
            "vocab_size": layer.vocab_size,
            "dim": layer.dim,
            "dtype": np.dtype(layer.token_table.dtype).name,
            "strategy": layer.strategy,
            "num_shards": layer.num_shards,
        }
        outputs.write_text(os.path.join(partial, "table.json"), json.dumps(record, indent=1))


def load_checkpoint(
    folder: str, position_table, *, num_shards: int, strategy: str = "rows", vocab_size=None,
    dim=None,
) -> ShardedEmbedding:  # fmt: skip
    """A ShardedEmbedding whose token table is restored from ``folder`` onto num_shards
    devices with ``strategy``, whatever count and strategy wrote it: Orbax reads each new
    shard's part and pads (or drops) the zero rows that padding added. ValueError when the
    checkpoint's vocabulary or dim is not vocab_size or dim (when given)."""
    import orbax.checkpoint as ocp

    folder = os.path.abspath(folder)
    record = read_checkpoint_record(folder, "jax", vocab_size, dim)
    validation.choice(strategy, STRATEGIES, "sharding strategy")
    dtype = validation.DTYPES[record["dtype"]]
    vocab_size, dim = record["vocab_size"], record["dim"]
    _, position_table = validation.check_tables(np.zeros((1, dim), dtype), position_table)
    num_shards = reference.check_shards(
        num_shards, dim if strategy == "columns" else vocab_size, strategy
    )
    mesh = make_mesh(num_shards)
    if strategy == "columns":
        padded = (vocab_size, reference.per_shard(dim, num_shards) * num_shards)
    else:
        padded = (reference.per_shard(vocab_size, num_shards) * num_shards, dim)
    target = NamedSharding(mesh, _SPECS[strategy])
    restore = {
        "token_table": ocp.ArrayRestoreArgs(sharding=target, global_shape=padded, strict=False)
    }
    try:
        with _orbax_quiet():
            restored = ocp.PyTreeCheckpointer().restore(
                os.path.join(folder, "orbax"), args=ocp.args.PyTreeRestore(restore_args=restore)
            )
    except Exception as error:
        raise ValueError(f"Orbax could not restore {folder}: {_orbax_error(error)}") from None
    layer = ShardedEmbedding.__new__(ShardedEmbedding)  # the table is already on its devices
    layer.vocab_size, layer.dim, layer.max_seq_len = vocab_size, dim, len(position_table)
    layer.strategy, layer.num_shards, layer.mesh = strategy, num_shards, mesh
    layer.token_table = restored["token_table"]
    layer.position_table = jax.device_put(position_table, NamedSharding(mesh, P()))
    return layer


@contextlib.contextmanager
def _orbax_quiet(seconds: float = 30.0):
    """Orbax silent while it runs, and the threads it starts finished (for at most ``seconds``)
    before the block ends; its errors arrive as the exception it raises, in one line. On a
    full disk it logs each background thread's error with a traceback to absl's logger (about
    270 lines), and TensorStore, finishing a write after Orbax closed its event loop, prints
    another traceback itself (sometimes); those threads go on writing into the folder the
    caller then removes. (A successful save or restore prints nothing.)"""
    logger = logging.getLogger("absl")
    disabled, logger.disabled = logger.disabled, True
    before = set(threading.enumerate())
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # the file, not sys.stderr: TensorStore's own threads print there too
    os.close(devnull)
    try:
        yield
    except BaseException:
        # TensorStore's own C++ threads finish the failed save's other writes after Orbax
        # raised, and nothing says when (half a second: ten full-disk runs, none left a line).
        time.sleep(0.5)
        raise
    finally:
        deadline = time.monotonic() + seconds
        for thread in set(threading.enumerate()) - before:
            thread.join(max(0.0, deadline - time.monotonic()))
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        logger.disabled = disabled


def _orbax_error(error: BaseException) -> str:
    """The first line of the innermost cause: TensorStore's message naming the file (Orbax's
    own wraps it in a dump of the TensorStore spec)."""
    while error.__cause__ is not None or error.__context__ is not None:
        error = error.__cause__ or error.__context__
    return "".join(str(error).strip().splitlines()[:1]) or type(error).__name__
