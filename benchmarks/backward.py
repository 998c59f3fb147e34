"""Time one training step of the token table at the gpt2 shape: the backward pass of the
lookup and an SGD update, dense against row-sparse, in every backend.

- dense: the whole (vocab_size, dim) gradient (zeroed, then the scatter-add), then the
  whole table updated: what ``loss.backward(); optimizer.step()`` does by default.
- sparse: only the rows the batch used: NumPy ``np.add.at`` straight into the table, a
  sort and ``np.add.reduceat``, or a sort and one fancy-indexed pass per repeat count; torch ``nn.Embedding(sparse=True)`` with ``torch.optim.SGD``
  (and ``SparseAdam``); JAX ``table.at[ids].add(-lr * upstream)`` on a donated table.

Same method as the forward benchmark (``benchmarks.lookup_add``): pinned threads,
interleaved rounds, medians, and each variant first checked: one step from the same table
must land within float32 rounding of the float64 step. Reported per variant: median ms per
step, the speed-up over that backend's dense step (median of per-round ratios), and the
bytes the algorithm must touch per step (reads + writes, counted from the shapes).

Beside the hand-written routes, the public API: ``gradients(layer, ids, upstream)`` and
``gradients(..., sparse=True)`` of each backend's layer (learned positions), the gradient
alone, the sparse one timed against the dense one.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

import backends
import benchmarks
from benchmarks.lookup_add import SHAPES, Shape, configure_threads, header
from embedding_parity import outputs
from embedding_parity.drawing.table import text_table

LR = 0.01


@dataclass
class Record:
    backend: str
    variant: str
    shape: str
    median_ms: float
    iqr_ms: float
    speedup_vs_dense: float
    bytes_touched: int
    gbps: float
    rounds: int


# The public API's rows: ``be.gradients(layer, ids, upstream)`` alone, dense and sparse,
# timed against each other (the others are timed against the backend's dense step).
API = ("gradients()", "gradients(sparse=True)")


def bytes_touched(variant: str, shape: Shape, itemsize: int = 4) -> int:
    """What a step must read and write. dense: zero the gradient table (V*d), scatter N
    rows into it (read N*d upstream, read and write N*d gradient rows), then read the table
    and the gradient and write the table (3*V*d). sparse: read N*d upstream and read and
    write N*d table rows (3*N*d); Adam's state adds 4 reads and writes of N*d. gradients():
    the dense gradient without the update (V*d + 3*N*d); gradients(sparse=True): read N*d
    upstream and write at most N*d sums (2*N*d)."""
    table = shape.vocab_size * shape.dim * itemsize
    rows = shape.batch * shape.length * shape.dim * itemsize
    if variant == API[0]:
        return table + 3 * rows
    if variant == API[1]:
        return 2 * rows
    if variant.startswith("dense"):
        return table + 3 * rows + 3 * table
    return 3 * rows + (4 * rows if variant.endswith("adam") else 0)


def steps(backend: str, table: np.ndarray, ids: np.ndarray, upstream: np.ndarray) -> dict:
    """name -> step(): one step from the backend's own copy of ``table``; ``result()``
    returns that copy as NumPy (for the check). The API's rows compute the gradient alone;
    their ``result()`` takes the SGD step from the last one, in NumPy, untimed."""
    found = {"numpy": _numpy, "torch": _torch, "jax": _jax}[backend](table, ids, upstream)
    return {**found, **_api(backend, table, ids, upstream)}


def _api(backend, table, ids, upstream):
    be = backends.get(backend)
    positions = np.zeros((ids.shape[-1], table.shape[1]), table.dtype)  # a learned table
    layer = be.TokenPositionEmbedding(table, positions)
    found = {}
    for name, sparse in zip(API, (False, True), strict=True):
        last = {}

        def step(sparse=sparse, last=last):
            grads = be.gradients(layer, ids, upstream, sparse=sparse)
            if backend == "jax":
                import jax

                jax.block_until_ready(grads)
            last["token_table"] = grads["token_table"]

        def result(sparse=sparse, last=last):
            token = last["token_table"]
            stepped = table.copy()
            if sparse:
                indices, rows = (be.to_numpy(part) for part in token)
                stepped[indices] -= np.float32(LR) * rows
            else:
                stepped -= np.float32(LR) * be.to_numpy(token)
            return stepped

        found[name] = (step, result)
    return found


def _numpy(table, ids, upstream):
    flat, rows = ids.reshape(-1), upstream.reshape(-1, table.shape[1])
    names = ("dense", "sparse_add_at", "sparse_reduceat", "sparse_passes")
    tables = {name: table.copy() for name in names}
    grad = np.empty_like(table)

    def dense():
        grad[:] = 0
        np.add.at(grad, flat, rows)
        np.multiply(grad, LR, out=grad)
        tables["dense"] -= grad

    def sparse_add_at():  # straight into the table: each row once per occurrence
        np.add.at(tables["sparse_add_at"], flat, rows * -LR)

    def sparse_reduceat():  # sort, sum each id's rows in one pass, update each row once
        order = np.argsort(flat, kind="stable")
        sorted_ids = flat[order]
        starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
        sums = np.add.reduceat(rows[order], starts, axis=0)
        tables["sparse_reduceat"][sorted_ids[starts]] -= LR * sums

    def sparse_passes():
        # Sorted (stably), each id's k-th occurrence has rank k: one pass per rank, and
        # within a pass every id occurs once, so plain fancy indexing adds every row. The
        # rows of an id are added in their original order, as np.add.at adds them.
        order = np.argsort(flat, kind="stable")
        sorted_ids = flat[order]
        first = np.r_[True, sorted_ids[1:] != sorted_ids[:-1]]
        index = np.arange(len(flat))
        rank = index - np.maximum.accumulate(np.where(first, index, 0))
        target = tables["sparse_passes"]
        for r in range(rank.max(initial=-1) + 1):
            chosen = order[rank == r]
            target[flat[chosen]] -= LR * rows[chosen]

    calls = {
        "dense": dense,
        "sparse_add_at": sparse_add_at,
        "sparse_reduceat": sparse_reduceat,
        "sparse_passes": sparse_passes,
    }
    return {name: (call, lambda n=name: tables[n]) for name, call in calls.items()}


def _torch(table, ids, upstream):
    import torch
    from torch import nn

    ids_t, up = torch.from_numpy(ids), torch.from_numpy(upstream)
    found = {}
    for name, sparse, optimizer in (
        ("dense", False, torch.optim.SGD),
        ("sparse", True, torch.optim.SGD),
        ("sparse_adam", True, torch.optim.SparseAdam),
    ):
        embedding = nn.Embedding.from_pretrained(
            torch.from_numpy(table.copy()), freeze=False, sparse=sparse
        )
        opt = optimizer(embedding.parameters(), lr=LR)

        def step(embedding=embedding, opt=opt):
            embedding(ids_t).backward(up)
            opt.step()
            opt.zero_grad(set_to_none=True)

        found[name] = (step, lambda e=embedding: e.weight.detach().numpy())
    return found


def _jax(table, ids, upstream):
    from functools import partial

    import jax
    import jax.numpy as jnp

    ids_d, up = jax.device_put(ids.astype(np.int32)), jax.device_put(upstream)

    @partial(jax.jit, donate_argnums=0)
    def dense(table, ids, up):
        grad = jax.grad(lambda t: jnp.vdot(t[ids], up))(table)  # the vjp: a scatter-add
        return table - LR * grad

    @partial(jax.jit, donate_argnums=0)
    def sparse(table, ids, up):
        return table.at[ids].add(-LR * up)

    tables = {"dense": jnp.array(table), "sparse": jnp.array(table)}
    found = {}
    for name, fn in (("dense", dense), ("sparse", sparse)):

        def step(name=name, fn=fn):
            tables[name] = fn(tables[name], ids_d, up).block_until_ready()

        found[name] = (step, lambda n=name: np.asarray(tables[n]))
    return found


def check(name: str, result: np.ndarray, table, ids, upstream) -> None:
    """One step from ``table`` must be the float64 step, within float32 rounding: SGD, or
    for SparseAdam its first step lr * g / (|g| + eps / sqrt(1 - b2)), g each row's summed
    gradient. SparseAdam adds eps to sqrt(v) before the bias correction (torch/optim/
    sparse_adam.py), so its eps acts 1 / sqrt(1 - b2**t) times larger than torch.optim.Adam's
    and optax.adam's, which add it after."""
    rows = upstream.reshape(-1, table.shape[1]).astype(np.float64)
    grad, magnitude = np.zeros(table.shape), np.zeros(table.shape)
    np.add.at(grad, ids.reshape(-1), rows)
    np.add.at(magnitude, ids.reshape(-1), np.abs(rows))
    step = grad / (np.abs(grad) + 1e-8 / np.sqrt(1 - 0.999)) if name.endswith("adam") else grad
    exact = table - LR * step
    # Each of the n terms added to a row, and the update itself, rounds once in float32:
    # (n + 2) * eps * (|table| + lr * sum|terms|), or lr for Adam's unit-sized first step.
    counts = np.bincount(ids.reshape(-1), minlength=len(table))[:, None]
    size = LR * (np.ones_like(magnitude) if name.endswith("adam") else magnitude)
    bound = (counts + 2) * np.finfo(np.float32).eps * (np.abs(exact) + size)
    if not np.all(np.abs(result - exact) <= bound):
        raise RuntimeError(f"{name}: one step is not the float64 step")


def measure(shape_name: str, names, *, rounds: int) -> list[Record]:
    shape = SHAPES[shape_name]
    rng = np.random.default_rng(0)
    table = rng.standard_normal((shape.vocab_size, shape.dim)).astype(np.float32)
    ids = rng.integers(0, shape.vocab_size, (shape.batch, shape.length))
    upstream = rng.standard_normal((shape.batch, shape.length, shape.dim)).astype(np.float32)
    found = {}
    for backend in names:
        for name, (step, result) in steps(backend, table, ids, upstream).items():
            step()  # compiles, and is the step checked
            check(f"{backend}/{name}", result(), table, ids, upstream)
            step()  # warm
            found[backend, name] = step
    seconds = {key: [] for key in found}
    for _ in range(rounds):
        for key, step in found.items():  # interleaved: every variant once per round
            started = time.perf_counter()
            step()
            seconds[key].append(time.perf_counter() - started)
    records = []
    for (backend, name), times in seconds.items():
        times = np.array(times)
        dense = np.array(seconds[backend, API[0] if name in API else "dense"])
        q25, q50, q75 = np.percentile(times, [25, 50, 75])
        moved = bytes_touched(name, shape)
        records.append(
            Record(
                backend,
                name,
                shape_name,
                q50 * 1e3,
                (q75 - q25) * 1e3,
                float(np.median(dense / times)),
                moved,
                moved / q50 / 1e9,
                rounds,
            )
        )
    return records


def format_table(records: list[Record]) -> str:
    rows = [
        ("backend", "variant", "shape", "median ms", "IQR ms", "vs dense", "MB touched", "GB/s")
    ]
    rows += [
        (
            r.backend,
            r.variant,
            r.shape,
            f"{r.median_ms:.3g}",
            f"{r.iqr_ms:.2g}",
            f"{r.speedup_vs_dense:.2f}x",
            f"{r.bytes_touched / 1e6:.3g}",
            f"{r.gbps:.3g}",
        )
        for r in records
    ]
    return text_table(rows, right_from=3)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.backward",
        description="Time the backward pass and SGD update of the token table, dense "
        "against row-sparse, in every backend.",
    )
    parser.add_argument("--shape", choices=list(SHAPES), default="gpt2", help="default: gpt2")
    parser.add_argument("--repeats", type=int, default=9, help="rounds (default: 9)")
    parser.add_argument("--threads", type=int, default=1, help="default: 1")
    parser.add_argument("--backends", nargs="+", choices=backends.names(), default=backends.names())
    parser.add_argument("--json", default="bench-backward.json", help="default: %(default)s")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be at least 1")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        parser.error(f"the folder of {args.json} does not exist")
    configure_threads(args.threads, args.backends)
    records = measure(args.shape, args.backends, rounds=args.repeats)
    print(format_table(records))
    args.shapes, args.dtype = [args.shape], "float32"  # what header() records
    with outputs.replacing(args.json, "w") as out:
        json.dump(
            {**header(args, args.backends), "lr": LR, "records": [asdict(r) for r in records]},
            out,
            indent=1,
        )
    print(f"records: {os.path.abspath(args.json)}")
    return 0


if __name__ == "__main__":
    benchmarks.run(main)
