"""Time ``out = token_table[ids] + position_table[start:start + T]`` in every backend.

Per backend, several ways to say it (``variants``): what a tutorial writes
(``idiomatic``), the suite's own layer (``suite``, validation included) and the
fastest ways found; plus, in the same process and the same rounds, a ``copy`` of
a buffer the output's size and a plain ``gather`` into a preallocated buffer, the
two reference lines. Method (see also shared/BENCHMARKING.md):

- single thread by default: the process is pinned to the first N cores, torch runs
  ``torch.set_num_threads(N)`` and, for one thread, XLA gets
  ``--xla_cpu_multi_thread_eigen=false`` before jax is imported (XLA's CPU client has
  no thread-count flag; the affinity mask bounds it);
- every variant's output is checked bitwise against the NumPy expression before it
  is timed; warm-up calls first; compile time (jax.jit, torch.compile) is the first
  call, reported apart and never inside per-call times;
- variants are timed in interleaved rounds (A B C A B C ...); each sample is a batch
  of calls lasting about 2 ms; JAX calls block_until_ready inside the timed region;
- reported: median and IQR over rounds; GB/s of one fused pass (gathered rows read +
  position rows read + output written); copy_fraction = that rate divided by the
  copy's rate, the median of per-round ratios; minor page faults per call
  (getrusage).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

import backends
from embedding_parity import outputs
from embedding_parity.drawing.table import text_table

SAMPLE_SECONDS = 2e-3  # each timed sample is a batch of calls at least this long
CHUNK_BYTES = 1 << 20  # chunked NumPy variant: gather ~1 MiB of rows, add while in cache


@dataclass(frozen=True)
class Shape:
    vocab_size: int
    dim: int
    batch: int
    length: int

    def out_bytes(self, itemsize: int) -> int:
        return self.batch * self.length * self.dim * itemsize

    def fused_bytes(self, itemsize: int) -> int:
        """One pass: gathered rows read + position rows read + output written."""
        return (2 * self.batch + 1) * self.length * self.dim * itemsize


SHAPES = {
    "seed": Shape(vocab_size=100, dim=10, batch=1, length=4),
    "small": Shape(vocab_size=1000, dim=64, batch=1, length=128),
    "gpt2": Shape(vocab_size=50257, dim=768, batch=8, length=1024),
    "llama": Shape(vocab_size=32000, dim=4096, batch=1, length=2048),
}
QUICK_SHAPES = ("seed", "small")


@dataclass(eq=False)  # hashed by identity: a key in per-variant tallies
class Variant:
    backend: str  # a backend name, or "baseline"
    name: str
    call: Callable[[], object]  # one call, returning its output (finished, for JAX)
    reference: bool = False  # copy, gather, empty: not held to the NumPy expression
    compiled: bool = False  # the first call compiles (jax.jit, torch.compile)
    compile_s: float | None = None  # that first call, timed by measure()


@dataclass
class Record:
    backend: str
    variant: str
    shape: str
    dtype: str
    threads: int
    median_us: float
    iqr_us: float
    gbps: float | None
    copy_fraction: float | None
    faults_per_call: float
    compile_s: float | None
    calls_per_sample: int
    rounds: int


def configure_threads(threads: int, names) -> None:
    """Pin to the first ``threads`` cores and cap the pool of each framework in ``names``
    (the backends this process times; torch is imported only if it is one); call before
    torch or jax is imported (XLA reads its flags once, at import). XLA's CPU client
    has no thread-count flag: with one thread Eigen's pool is turned off, and the
    affinity mask bounds the rest."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(min(threads, os.cpu_count() or 1))))
    if threads == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    if "torch" in names:
        import torch

        torch.set_num_threads(threads)


def problem(shape: Shape, dtype: str, seed: int = 0):
    """Shared weights, ids and start for one shape (start leaves room for T positions)."""
    token_table, position_table = backends.shared_weights(
        shape.vocab_size, shape.dim, shape.length + 3, seed=seed, dtype=dtype
    )
    ids = np.random.default_rng(seed + 1).integers(0, shape.vocab_size, (shape.batch, shape.length))
    return token_table, position_table, ids, 3


def variants(backend: str, token_table, position_table, ids, start: int) -> list[Variant]:
    """Every way this benchmark says the lookup-add in ``backend`` ("baseline": copy, gather)."""
    makers = {"baseline": _baseline, "numpy": _numpy, "torch": _torch, "jax": _jax}
    return makers[backend](token_table, position_table, ids, start)


def _baseline(token_table, position_table, ids, start):
    source = np.take(token_table, ids, axis=0)
    copy, gather = np.empty_like(source), np.empty_like(source)

    def gather_only():
        return np.take(token_table, ids, axis=0, mode="clip", out=gather)

    return [
        Variant("baseline", "copy", lambda: np.copyto(copy, source), reference=True),
        Variant("baseline", "gather", gather_only, reference=True),
    ]


def _numpy(token_table, position_table, ids, start):
    layer = backends.get("numpy").TokenPositionEmbedding(token_table, position_table)
    length = ids.shape[-1]
    positions = position_table[start : start + length]
    shape = ids.shape + token_table.shape[1:]
    whole, chunked, suite = (np.empty(shape, token_table.dtype) for _ in range(3))
    tiny = np.zeros(1, token_table.dtype)

    def take_out_add():
        np.take(token_table, ids, axis=0, mode="clip", out=whole)
        return np.add(whole, positions, out=whole)

    rows = max(1, CHUNK_BYTES // (token_table.shape[1] * token_table.itemsize))

    def take_out_chunked():  # gather a chunk, add while its rows are still in cache
        for row in range(ids.shape[0]):
            for t in range(0, length, rows):
                part = chunked[row, t : t + rows]
                np.take(token_table, ids[row, t : t + rows], axis=0, mode="clip", out=part)
                part += positions[t : t + rows]
        return chunked

    return [
        Variant(
            "numpy", "idiomatic", lambda: token_table[ids] + position_table[start : start + length]
        ),
        Variant("numpy", "take_out", take_out_add),
        Variant("numpy", "take_out_chunked", take_out_chunked),
        Variant("numpy", "suite", lambda: layer(ids, start, out=suite)),
        Variant("numpy", "empty", lambda: np.add(tiny, tiny, out=tiny), reference=True),
    ]


def _torch(token_table, position_table, ids, start):
    import torch

    be = backends.get("torch")
    layer = be.TokenPositionEmbedding(token_table, position_table)
    token, position = layer.token, layer.position  # two nn.Embedding, as a tutorial has them
    weights, pweights = token.weight.detach(), position.weight.detach()
    ids_t = torch.from_numpy(ids)
    length = ids.shape[-1]
    shape = ids.shape + token_table.shape[1:]
    select_out, suite = (torch.empty(shape, dtype=weights.dtype) for _ in range(2))
    tiny = torch.zeros(1, dtype=weights.dtype)

    def idiomatic():  # a forward pass as written in a tutorial: autograd records
        return token(ids_t) + position(torch.arange(start, start + length))

    def index_select_out():
        with torch.inference_mode():
            torch.index_select(weights, 0, ids_t.view(-1), out=select_out.view(-1, shape[-1]))
            return select_out.add_(pweights[start : start + length])

    compiled = torch.compile(lambda t, p, i, s: t[i] + p[s : s + i.shape[-1]], dynamic=False)

    def compile_call():
        with torch.inference_mode():
            return compiled(weights, pweights, ids_t, start)

    def suite_call():
        with torch.inference_mode():
            return layer(ids_t, start, out=suite)

    def empty():
        with torch.inference_mode():
            return torch.add(tiny, tiny, out=tiny)

    return [
        Variant("torch", "idiomatic", idiomatic),
        Variant("torch", "index_select_out", index_select_out),
        Variant("torch", "compile", compile_call, compiled=True),
        Variant("torch", "suite", suite_call),
        Variant("torch", "empty", empty, reference=True),
    ]


def _jax(token_table, position_table, ids, start):
    import jax
    import jax.numpy as jnp

    be = backends.get("jax")
    layer = be.TokenPositionEmbedding(token_table, position_table)
    params = layer.params  # already on the device: no per-call copy of the tables
    ids_d = jax.device_put(ids.astype(np.int32))
    tiny = jnp.zeros(1, token_table.dtype)

    # What a tutorial writes: jnp indexing, start static, tables as jit arguments.
    idiomatic = jax.jit(lambda t, p, i, s: t[i] + p[s : s + i.shape[-1]], static_argnums=3)
    identity = jax.jit(lambda x: x)
    tables = params["token_table"], params["position_table"]
    # Donated results, reused call after call (y = f(..., out=y)): no fresh output.
    donated = {"raw": be.embed(params, ids_d, start), "suite": be.embed(params, ids_d, start)}

    def donate():  # the suite's jitted functions, unchecked
        donated["raw"] = be.embed_into(donated["raw"], params, ids_d, start)
        return donated["raw"].block_until_ready()

    def suite():
        donated["suite"] = layer(ids_d, start, out=donated["suite"])
        return donated["suite"].block_until_ready()

    return [
        Variant(
            "jax",
            "idiomatic",
            lambda: idiomatic(*tables, ids_d, start).block_until_ready(),
            compiled=True,
        ),
        # promise_in_bounds gather + dynamic slice, a fresh output per call
        Variant(
            "jax",
            "promise_in_bounds",
            lambda: be.embed(params, ids_d, start).block_until_ready(),
            compiled=True,
        ),
        Variant("jax", "donate", donate, compiled=True),
        Variant("jax", "suite", suite, compiled=True),
        Variant(
            "jax",
            "empty",
            lambda: identity(tiny).block_until_ready(),
            reference=True,
            compiled=True,
        ),
    ]


def _first_call_seconds(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def check(variant: Variant, expected: np.ndarray) -> None:
    """Refuse to time a variant whose output is not the NumPy expression, bit for bit."""
    if variant.reference:
        return
    out = backends.get(variant.backend).to_numpy(variant.call())
    if (
        out.dtype != expected.dtype
        or out.shape != expected.shape
        or out.tobytes() != expected.tobytes()
    ):
        raise RuntimeError(f"{variant.backend}/{variant.name} differs from the NumPy expression")


def measure(
    shape_name: str, shape: Shape, names, *, dtype: str, threads: int, rounds: int, progress
):
    """Records for every backend's variants and the baselines at one shape."""
    token_table, position_table, ids, start = problem(shape, dtype)
    expected = token_table[ids] + position_table[start : start + shape.length]
    found = [
        v
        for name in ("baseline", *names)
        for v in variants(name, token_table, position_table, ids, start)
    ]
    calls = {}
    for v in found:
        if v.compiled:
            v.compile_s = _first_call_seconds(v.call)
        check(v, expected)
        for _ in range(3):  # warm-up
            v.call()
        calls[v] = max(1, int(SAMPLE_SECONDS / max(_first_call_seconds(v.call), 1e-9)))
    seconds = {v: [] for v in found}
    faults = {v: 0 for v in found}
    for _ in range(rounds):
        for v in found:  # interleaved: every variant once per round
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            started = time.perf_counter()
            for _ in range(calls[v]):
                v.call()
            seconds[v].append((time.perf_counter() - started) / calls[v])
            faults[v] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        progress.update(1)
    itemsize = token_table.dtype.itemsize
    copy = next(v for v in found if v.name == "copy")
    records = []
    for v in found:
        moved = None
        if v.name in ("copy", "gather"):
            moved = 2 * shape.out_bytes(itemsize)  # read + write of the output's size
        elif v.name != "empty":
            moved = shape.fused_bytes(itemsize)
        per_round = np.array(seconds[v])
        copy_rate = 2 * shape.out_bytes(itemsize) / np.array(seconds[copy])
        q25, q50, q75 = np.percentile(per_round, [25, 50, 75])
        records.append(
            Record(
                backend=v.backend,
                variant=v.name,
                shape=shape_name,
                dtype=dtype,
                threads=threads,
                median_us=q50 * 1e6,
                iqr_us=(q75 - q25) * 1e6,
                gbps=None if moved is None else moved / q50 / 1e9,
                copy_fraction=None
                if moved is None
                else float(np.median(moved / per_round / copy_rate)),
                faults_per_call=faults[v] / (rounds * calls[v]),
                compile_s=v.compile_s,
                calls_per_sample=calls[v],
                rounds=rounds,
            )
        )
    return records


def header(args, names, shapes=None) -> dict:
    """Machine, versions and settings for a JSON file; shapes: name -> Shape (default SHAPES)."""
    shapes = SHAPES if shapes is None else shapes
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for name in names:
        if name != "numpy":  # from the package's metadata: importing torch costs 1.4 s
            versions[name] = importlib.metadata.version(name)
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpu": _cpu_model(), "cpus": os.cpu_count()},
        "versions": versions,
        "settings": {
            "threads": args.threads,
            "dtype": args.dtype,
            "rounds": args.repeats,
            "sample_seconds": SAMPLE_SECONDS,
            "shapes": {n: asdict(shapes[n]) for n in args.shapes},
            "affinity": sorted(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else None,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        },
    }


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def format_table(records: list[Record]) -> str:
    def num(value, spec):
        return "-" if value is None else format(value, spec)

    rows = [
        (
            "backend",
            "variant",
            "shape",
            "median µs",
            "IQR µs",
            "GB/s",
            "copy_fraction",
            "faults/call",
            "compile s",
        )
    ]
    rows += [
        (
            r.backend,
            r.variant,
            r.shape,
            f"{r.median_us:.3g}",
            f"{r.iqr_us:.2g}",
            num(r.gbps, ".3g"),
            num(r.copy_fraction, ".3f"),
            f"{r.faults_per_call:.3g}",
            num(r.compile_s, ".2f"),
        )
        for r in records
    ]
    return text_table(rows, right_from=3)  # text columns left, numbers right


def chart(records: list[Record], path: str, title: str) -> None:
    """copy_fraction of every variant, one panel per shape, with the copy and gather lines."""
    fig = chart_figure(records, title)
    with outputs.replacing(path) as out:
        fig.savefig(out, dpi=100, format="png")
    import matplotlib.pyplot as plt

    plt.close(fig)


def chart_figure(records: list[Record], title: str):
    """The chart as a figure: one panel per shape (two per row), one bar per variant, and
    one legend under the panels, where it covers no bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys(r.shape for r in records))
    colours = {"numpy": "tab:blue", "torch": "tab:orange", "jax": "tab:green"}
    columns = min(2, len(shapes))
    rows = -(-len(shapes) // columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(7.5 * columns, 5.5 * rows + 0.8),
        sharex=True,
        layout="constrained",
        squeeze=False,
    )
    for ax in axes.flat[len(shapes) :]:
        ax.set_axis_off()
    for ax, shape in zip(axes.flat, shapes, strict=False):
        timed = [
            r
            for r in records
            if r.shape == shape and r.backend != "baseline" and r.copy_fraction is not None
        ]
        y = np.arange(len(timed))
        bars = ax.barh(
            y,
            [r.copy_fraction for r in timed],
            color=[colours.get(r.backend, "grey") for r in timed],
        )
        ax.bar_label(bars, fmt="%.2f", fontsize=8, padding=2)
        ax.set_yticks(y, [f"{r.backend} {r.variant}" for r in timed], fontsize=9)
        ax.invert_yaxis()
        gather = next(r for r in records if r.shape == shape and r.variant == "gather")
        ax.axvline(1.0, color="black", lw=1, label="copy (1.0)")
        ax.axvline(gather.copy_fraction, color="grey", ls="--", lw=1, label="plain gather")
        s = SHAPES[shape]
        ax.set_title(
            f"{shape}: vocab {s.vocab_size}, dim {s.dim}, B {s.batch}, T {s.length}"
            f"  (plain gather {gather.copy_fraction:.2f})",
            fontsize=10,
        )
        ax.set_xlabel("copy_fraction (higher is faster)")
        ax.set_xlim(0, max(1.15, max((r.copy_fraction for r in timed), default=0) * 1.15))
    finish_chart(fig, axes, colours, title)
    return fig


def finish_chart(fig, axes, colours: dict, title: str) -> None:
    """One legend under the panels (the first panel's lines, then a patch per backend's
    colour), where it covers no bar, and the title."""
    import matplotlib.patches

    handles, labels = axes.flat[0].get_legend_handles_labels()
    handles += [matplotlib.patches.Patch(color=c) for c in colours.values()]
    labels += list(colours)
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9)
    fig.suptitle(title, fontsize=11)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time token_table[ids] + position_table[start:start+T] in every backend "
        "against a copy of the output's size, measured in the same process.",
    )
    add = parser.add_argument
    add(
        "--shapes",
        nargs="+",
        choices=list(SHAPES),
        default=list(SHAPES),
        help="shapes to run (default: all)",
    )
    add(
        "--quick",
        action="store_true",
        help=f"only {' and '.join(QUICK_SHAPES)}, 5 rounds: a smoke run",
    )
    add("--repeats", type=int, help="rounds per shape (default: 15, or 5 with --quick)")
    add(
        "--threads",
        type=int,
        default=1,
        help="threads per framework, and cores pinned (default: 1)",
    )
    add(
        "--dtype",
        choices=list(backends.DTYPES),
        default="float32",
        help="table dtype (default: float32)",
    )
    add(
        "--backends",
        nargs="+",
        choices=backends.names(),
        default=list(backends.names()),
        help="backends to time (default: every installed one)",
    )
    add("--json", default="bench.json", help="where to write the records (default: %(default)s)")
    add("--png", default="bench.png", help="where to draw the chart (default: %(default)s)")
    return checked_args(parser, argv, QUICK_SHAPES, quick_repeats=5)


def checked_args(parser, argv, quick_shapes, *, quick_repeats: int) -> argparse.Namespace:
    """A benchmark's arguments, with --quick applied and the checks every benchmark shares."""
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes = [s for s in args.shapes if s in quick_shapes] or list(quick_shapes)
    args.repeats = args.repeats or (quick_repeats if args.quick else 15)
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be at least 1")
    for path in (args.json, args.png):
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            parser.error(f"the folder of {path} does not exist")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    configure_threads(args.threads, args.backends)
    from tqdm import tqdm

    records = []
    with tqdm(
        total=len(args.shapes) * args.repeats, desc="rounds", disable=not sys.stderr.isatty()
    ) as progress:
        for shape_name in args.shapes:
            progress.set_postfix_str(shape_name)
            shape = SHAPES[shape_name]
            records += measure(
                shape_name,
                shape,
                args.backends,
                dtype=args.dtype,
                threads=args.threads,
                rounds=args.repeats,
                progress=progress,
            )
    print(format_table(records))
    with outputs.replacing(args.json, "w") as out:
        json.dump(
            {**header(args, args.backends), "records": [asdict(r) for r in records]}, out, indent=1
        )
    title = f"{args.dtype}, {args.threads} thread(s), median of {args.repeats} interleaved rounds"
    chart(records, args.png, title)
    print(f"records: {os.path.abspath(args.json)}\nchart: {os.path.abspath(args.png)}")
    return 0
