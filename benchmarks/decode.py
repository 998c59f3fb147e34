"""Time one decode step's lookup, ``token_table[ids] + position_table[start:start + T]``
with a few rows, where the fixed costs of a call (converting ids, checks, dispatch) are
nearly all of it; and hold the suite's layer to the line a user would write instead.

Shapes: ``seed`` (vocab 100, dim 10, B 1, T 4, 16 positions) and ``decode-b1``,
``decode-b8``, ``decode-b32``: GPT-2's table (50257 x 768, 1024 positions), one new token
per sequence (T 1) for B 1, 8, 32; and ``prefill-b8``, the same table with B 8, T 128. As in a decode loop, ``start`` advances by T every
call and every call gets ids it has not seen: fresh arrays, made before each timed batch
(a JAX array keeps its host copy once it has been read, which would flatter a repeated one).

Each backend gets its framework's own ids (NumPy int64 arrays, torch int64 tensors, JAX
int32 arrays on the device) and a Python int start. Variants:

- ``idiomatic``: the seed's NumPy line; two ``nn.Embedding`` modules; jnp indexing plus
  ``lax.dynamic_slice_in_dim`` under ``jax.jit`` (a traced start: a static one would
  compile once per step).
- ``suite``: ``layer(ids, start)``, every check included.
- ``suite_out``: ``layer(ids, start, out=y)`` (NumPy and torch write into y; JAX donates it).
- ``jit_unchecked`` (JAX): ``jax.jit(jax_backend.embed)(tables, ids, start)``, the suite's
  pure function jitted as a step, no check.
- ``jit_checked`` (JAX): ``jax.jit(jax_backend.embed_checked)`` and
  ``jax_backend.throw(status)`` after every call. In a real step the status is thrown once
  per step, however many lookups the step holds; here the step is the lookup alone. Its
  ``vs_unchecked`` is the median per-round ratio to ``jit_unchecked`` (target: 1.2).

torch runs every variant under ``torch.inference_mode()``, entered once per timed batch,
as a decode loop enters it once. Method as in ``benchmarks.lookup_add``: one pinned core
and one thread by default; every variant's output checked bit for bit against the NumPy
expression first; warm-up; variants timed in interleaved rounds, each sample a batch of
calls lasting about 2 ms (JAX calls end in ``block_until_ready()``), its ids freed and the
garbage collected after it, outside the timing (freeing a thousand JAX arrays slowed the
variant timed next by up to 18%). Reported: median and
IQR of µs per call, and ``vs_idiomatic``, the median over rounds of the per-round ratio
to the same backend's idiomatic line. Each backend runs in a fresh process: a ratio compares
variants of one framework, and in a shared process one framework's leftovers (threads,
allocations) slowed the next one's calls unevenly across its variants.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import gc
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

import backends
import benchmarks
from backends import validation
from benchmarks.lookup_add import checked_args, configure_threads, finish_chart, header
from embedding_parity import outputs
from embedding_parity.drawing.table import text_table

SAMPLE_SECONDS = 2e-3  # each timed sample is a batch of calls at least this long
MAX_CALLS = 3000  # fresh ids are made for every call of a sample: bound that set-up
TARGET = 1.3  # suite / idiomatic, the goal of issue 10
CHECKED_TARGET = 1.2  # jit_checked / jit_unchecked, the goal of issue 22
CHART_LIMIT = 2.0  # the chart's x axis: longer bars are cut there and marked


@dataclass(frozen=True)
class Step:
    vocab_size: int
    dim: int
    batch: int
    length: int
    max_seq_len: int


SHAPES = {
    "seed": Step(vocab_size=100, dim=10, batch=1, length=4, max_seq_len=16),
    "decode-b1": Step(vocab_size=50257, dim=768, batch=1, length=1, max_seq_len=1024),
    "decode-b8": Step(vocab_size=50257, dim=768, batch=8, length=1, max_seq_len=1024),
    "decode-b32": Step(vocab_size=50257, dim=768, batch=32, length=1, max_seq_len=1024),
    # a prompt's worth of ids: where the fixed costs of a call stop mattering
    "prefill-b8": Step(vocab_size=50257, dim=768, batch=8, length=128, max_seq_len=1024),
}
QUICK_SHAPES = ("seed", "decode-b1")


@dataclass(eq=False)  # hashed by identity: a key in per-variant tallies
class Variant:
    backend: str
    name: str
    call: Callable  # (ids, start) -> the output, finished
    ids: Callable  # NumPy int64 ids -> this framework's ids
    context: Callable = field(default=contextlib.nullcontext)  # entered once per batch
    checked: bool = True  # False: a step of the suite's call (profile), not a whole lookup


@dataclass
class Record:
    backend: str
    variant: str
    shape: str
    median_us: float
    iqr_us: float
    vs_idiomatic: float
    calls_per_sample: int
    rounds: int
    vs_unchecked: float | None = None  # jit_checked over jit_unchecked


def variants(backend: str, token_table, position_table, shape: Step) -> list[Variant]:
    makers = {"numpy": _numpy, "torch": _torch, "jax": _jax}
    return makers[backend](token_table, position_table, shape)


def _numpy(token_table, position_table, shape):
    layer = backends.get("numpy").TokenPositionEmbedding(token_table, position_table)
    y = np.empty((shape.batch, shape.length, shape.dim), token_table.dtype)

    def idiomatic(ids, start):
        return token_table[ids] + position_table[start : start + ids.shape[-1]]

    def same(ids):
        return ids

    return [
        Variant("numpy", "idiomatic", idiomatic, same),
        Variant("numpy", "suite", layer, same),
        Variant("numpy", "suite_out", lambda ids, start: layer(ids, start, out=y), same),
    ]


def _torch(token_table, position_table, shape):
    import torch

    layer = backends.get("torch").TokenPositionEmbedding(token_table, position_table)
    token, position = layer.token, layer.position  # two nn.Embedding, as a tutorial has them
    y = torch.empty((shape.batch, shape.length, shape.dim), dtype=token.weight.dtype)

    def idiomatic(ids, start):
        return token(ids) + position(torch.arange(start, start + ids.shape[-1]))

    def made(name, call):
        return Variant("torch", name, call, torch.from_numpy, torch.inference_mode)

    return [
        made("idiomatic", idiomatic),
        made("suite", layer),
        made("suite_out", lambda ids, start: layer(ids, start, out=y)),
    ]


def _jax(token_table, position_table, shape):
    import jax
    from jax import lax

    be = backends.get("jax")
    layer = be.TokenPositionEmbedding(token_table, position_table)
    tables = layer.tables
    table, positions = tables["token_table"], tables["position_table"]

    @jax.jit
    def lookup(table, positions, ids, start):  # what a user writes: the tables as arguments
        return table[ids] + lax.dynamic_slice_in_dim(positions, start, ids.shape[-1])

    unchecked = jax.jit(be.embed)
    checked = jax.jit(be.embed_checked)
    held = {"y": layer(np.zeros((shape.batch, shape.length), np.int32))}  # donated each call

    def suite_out(ids, start):
        held["y"] = layer(ids, start, out=held["y"])
        return held["y"].block_until_ready()

    def jit_checked(ids, start):
        y, status = checked(tables, ids, start)
        y = y.block_until_ready()
        be.throw(status)
        return y

    def on_device(ids):
        return jax.device_put(ids.astype(np.int32))

    return [
        Variant(
            "jax",
            "idiomatic",
            lambda ids, start: lookup(table, positions, ids, start).block_until_ready(),
            on_device,
        ),
        Variant(
            "jax", "suite", lambda ids, start: layer(ids, start).block_until_ready(), on_device
        ),
        Variant("jax", "suite_out", suite_out, on_device),
        Variant(
            "jax",
            "jit_unchecked",
            lambda ids, start: unchecked(tables, ids, start).block_until_ready(),
            on_device,
        ),
        Variant("jax", "jit_checked", jit_checked, on_device),
    ]


def steps(backend: str, token_table, position_table, shape: Step) -> list[Variant]:
    """The idiomatic line, the suite's call, and each step of that call timed alone, in
    the order the call runs them (the profile: where the time goes)."""
    whole = {v.name: v for v in variants(backend, token_table, position_table, shape)}
    layer = whole["suite"].call
    vocab_size, max_seq_len = shape.vocab_size, shape.max_seq_len

    def checks(host):  # validation.check_call: dtype, shape, id range, start
        return lambda ids, start: validation.check_call(host(ids), start, vocab_size, max_seq_len)

    def step(name, call, ids=whole["idiomatic"].ids, context=whole["idiomatic"].context):
        return Variant(backend, name, call, ids, context, checked=False)

    found = [whole["idiomatic"], whole["suite"]]
    if backend == "numpy":
        table, positions = layer.token_table, layer.position_table

        def gather_add(ids, start):
            x = table.take(ids, 0)
            x += positions[start : start + ids.shape[-1]]
            return x

        return found + [step("checks", checks(np.asarray)), step("gather + add", gather_add)]
    if backend == "torch":
        import torch

        table, positions = layer.token.weight, layer.position.weight

        def embedding_add(ids, start):
            x = torch.embedding(table, ids)
            x += positions[start : start + ids.shape[-1]]
            return x

        return found + [
            step("checks (zero-copy view)", checks(lambda ids: ids.numpy())),
            step("embedding + add", embedding_add),
        ]
    import jax
    import jax.numpy as jnp

    be = backends.get("jax")
    layer = be.TokenPositionEmbedding(token_table, position_table)
    tables = layer.tables
    # The floor of any check that reports to the host once per call: the jitted lookup with
    # one more output, as large as embed_checked's status, read on the host; no check at all.
    reporting = jax.jit(lambda tables, ids, start: (be.embed(tables, ids, start), jnp.zeros(9)))

    def lookup_and_read(ids, start):
        y, extra = reporting(tables, ids, start)
        y = y.block_until_ready()
        np.asarray(extra)
        return y

    return found + [
        whole["jit_unchecked"],
        whole["jit_checked"],
        step("host read of the ids", lambda ids, start: np.asarray(ids)),
        step("host read + checks", checks(np.asarray)),
        step("jitted lookup", lambda ids, start: be.embed(tables, ids, start).block_until_ready()),
        step("jitted lookup + 9 numbers read, no check", lookup_and_read),
    ]


def _timed(variant: Variant, inputs, starts) -> float:
    """Seconds per call over one batch of calls."""
    call = variant.call
    with variant.context():
        began = time.perf_counter()
        for ids, start in zip(inputs, starts, strict=True):
            call(ids, start)
        return (time.perf_counter() - began) / len(inputs)


def check(variant: Variant, shape: Step, token_table, position_table, rng) -> None:
    """Refuse to time a variant whose output is not the NumPy expression, bit for bit
    (at the last start the table allows, the edge a clamp would hide)."""
    ids = rng.integers(0, shape.vocab_size, (shape.batch, shape.length))
    start = shape.max_seq_len - shape.length
    expected = token_table[ids] + position_table[start:]
    with variant.context():
        out = variant.call(variant.ids(ids), start)
    out = backends.get(variant.backend).to_numpy(out)
    if out.dtype != expected.dtype or out.tobytes() != expected.tobytes():
        raise RuntimeError(f"{variant.backend}/{variant.name} differs from the NumPy expression")


def measure(shape_name: str, names, *, rounds: int, make=variants) -> list[Record]:
    """Records for every variant (make=variants) or step (make=steps) of every backend."""
    shape = SHAPES[shape_name]
    token_table, position_table = backends.shared_weights(
        shape.vocab_size, shape.dim, shape.max_seq_len, seed=0
    )
    rng = np.random.default_rng(1)
    found = [v for name in names for v in make(name, token_table, position_table, shape)]
    walk = shape.max_seq_len - shape.length + 1  # the starts a decode loop walks through
    calls = {}
    for v in found:
        if v.checked:
            check(v, shape, token_table, position_table, rng)
        ids = [v.ids(rng.integers(0, shape.vocab_size, (shape.batch, shape.length)))] * 50
        _timed(v, ids, [0] * 50)  # warm-up (and compilation)
        per_call = _timed(v, ids, [0] * 50)
        calls[v] = int(np.clip(SAMPLE_SECONDS / per_call, 50, MAX_CALLS))
    seconds = {v: [] for v in found}
    for name in names:  # one backend at a time: each is compared with its own idiomatic line
        mine = [v for v in found if v.backend == name]
        for round_ in range(rounds):
            host = rng.integers(0, shape.vocab_size, (MAX_CALLS, shape.batch, shape.length))
            starts = [(round_ + k) * shape.length % walk for k in range(MAX_CALLS)]
            for v in mine:  # interleaved: every variant once per round
                n = calls[v]
                inputs = [v.ids(a) for a in host[:n]]
                seconds[v].append(_timed(v, inputs, starts[:n]))
                del inputs
                gc.collect()

    records = []
    for v in found:
        times = np.array(seconds[v])
        idiomatic = next(u for u in found if u.backend == v.backend and u.name == "idiomatic")
        unchecked = [u for u in found if u.backend == v.backend and u.name == "jit_unchecked"]
        q25, q50, q75 = np.percentile(times, [25, 50, 75])
        records.append(
            Record(
                backend=v.backend,
                variant=v.name,
                shape=shape_name,
                median_us=q50 * 1e6,
                iqr_us=(q75 - q25) * 1e6,
                vs_idiomatic=float(np.median(times / np.array(seconds[idiomatic]))),
                calls_per_sample=calls[v],
                rounds=rounds,
                vs_unchecked=float(np.median(times / np.array(seconds[unchecked[0]])))
                if v.name == "jit_checked" and unchecked
                else None,
            )
        )
    return records


def format_table(records: list[Record]) -> str:
    rows = [("backend", "variant", "shape", "median µs", "IQR µs", "vs idiomatic", "vs unchecked")]
    rows += [
        (
            r.backend,
            r.variant,
            r.shape,
            f"{r.median_us:.3g}",
            f"{r.iqr_us:.2g}",
            f"{r.vs_idiomatic:.2f}",
            "" if r.vs_unchecked is None else f"{r.vs_unchecked:.2f}",
        )
        for r in records
    ]
    return text_table(rows, right_from=3)


def chart_figure(records: list[Record], title: str):
    """One panel per shape: every variant's time over its backend's idiomatic line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys(r.shape for r in records))
    colours = {"numpy": "tab:blue", "torch": "tab:orange", "jax": "tab:green"}
    columns = min(2, len(shapes))
    rows = -(-len(shapes) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(7 * columns, 4.2 * rows + 0.8), layout="constrained", squeeze=False
    )
    for ax in axes.flat[len(shapes) :]:
        ax.set_axis_off()
    for ax, name in zip(axes.flat, shapes, strict=False):
        shown = [r for r in records if r.shape == name and r.variant != "idiomatic"]
        y = np.arange(len(shown))
        # Bars past the axis are cut at its edge and say so, so that the ratios near 1 stay
        # readable.
        bars = ax.barh(
            y,
            [min(r.vs_idiomatic, CHART_LIMIT) for r in shown],
            color=[colours[r.backend] for r in shown],
            hatch=["//" if r.vs_idiomatic > CHART_LIMIT else "" for r in shown],
        )
        labels = [
            f"{r.vs_idiomatic:.2f} ({r.median_us:.3g} µs)"
            + (" →" if r.vs_idiomatic > CHART_LIMIT else "")
            for r in shown
        ]
        for bar, label, r in zip(bars, labels, shown, strict=True):
            beyond = r.vs_idiomatic > CHART_LIMIT
            ax.text(
                CHART_LIMIT - 0.03 if beyond else bar.get_width() + 0.03,
                bar.get_y() + bar.get_height() / 2,
                label,
                ha="right" if beyond else "left",
                va="center",
                fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
            )
        ax.set_yticks(y, [f"{r.backend} {r.variant}" for r in shown], fontsize=9)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", lw=1, label="idiomatic (1.0)")
        ax.axvline(TARGET, color="grey", ls="--", lw=1, label=f"target ({TARGET})")
        s = SHAPES[name]
        ax.set_title(f"{name}: vocab {s.vocab_size}, dim {s.dim}, B {s.batch}, T {s.length}")
        ax.set_xlabel("time per call / the backend's idiomatic line (lower is faster)")
        ax.set_xlim(0, CHART_LIMIT)
    finish_chart(fig, axes, colours, title)
    return fig


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.decode",
        description="Time a decode step's lookup-add (a few rows per call) in every backend: "
        "the suite's layer against the idiomatic line, in the same process.",
    )
    add = parser.add_argument
    add("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES), help="default: all")
    add("--quick", action="store_true", help=f"only {' and '.join(QUICK_SHAPES)}, 3 rounds")
    add("--repeats", type=int, help="rounds per shape (default: 15, or 3 with --quick)")
    add("--threads", type=int, default=1, help="threads per framework, cores pinned (default: 1)")
    add(
        "--backends",
        nargs="+",
        choices=backends.names(),
        default=list(backends.names()),
        help="backends to time (default: every installed one)",
    )
    add(
        "--profile",
        action="store_true",
        help="also time each step of the suite's call alone (where the time goes)",
    )
    add("--json", default="bench-decode.json", help="default: %(default)s")
    add("--png", default="bench-decode.png", help="default: %(default)s")
    return checked_args(parser, argv, QUICK_SHAPES, quick_repeats=3)


def measure_backend(name: str, shapes, *, rounds: int, threads: int, profile: bool):
    """Every shape for one backend, in this process: (records, profile records)."""
    configure_threads(threads, [name])
    records, steps_found = [], []
    for shape in shapes:
        records += measure(shape, [name], rounds=rounds)
        if profile:
            steps_found += measure(shape, [name], rounds=rounds, make=steps)
    return records, steps_found


def main(argv=None) -> int:
    args = parse_args(argv)
    from tqdm import tqdm

    # Each backend in a fresh process: a ratio compares variants of one framework, and one
    # framework's threads and allocations left in the process slowed the next one's calls
    # by up to 25% (torch after NumPy and JAX at decode-b32), unevenly across variants.
    spawn = multiprocessing.get_context("spawn")
    records, profile = [], []
    for name in tqdm(args.backends, desc="backends", disable=not sys.stderr.isatty()):
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
            found, steps_found = pool.submit(
                measure_backend,
                name,
                args.shapes,
                rounds=args.repeats,
                threads=args.threads,
                profile=args.profile,
            ).result()
        records += found
        profile += steps_found
    order = {name: i for i, name in enumerate(args.shapes)}  # by shape, then backend
    records.sort(key=lambda r: order[r.shape])
    profile.sort(key=lambda r: order[r.shape])
    print(format_table(records))
    if profile:
        print("\nwhere the time goes: each step of the suite's call timed alone")
        print(format_table(profile))
    args.dtype = "float32"  # what header() records
    with outputs.replacing(args.json, "w") as out:
        json.dump(
            {
                **header(args, args.backends, SHAPES),
                "records": [asdict(r) for r in records],
                "profile": [asdict(r) for r in profile],
            },
            out,
            indent=1,
        )
    title = (
        f"decode-step lookup, float32, {args.threads} thread(s): "
        f"median of {args.repeats} interleaved rounds"
    )
    fig = chart_figure(records, title)
    with outputs.replacing(args.png) as out:
        fig.savefig(out, dpi=100, format="png")
    print(f"records: {os.path.abspath(args.json)}\nchart: {os.path.abspath(args.png)}")
    return 0


if __name__ == "__main__":
    benchmarks.run(main)
