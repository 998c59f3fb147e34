"""Time a quantized token table's lookup, decoded in place, beside llama.cpp's ggml_get_rows.

    python -m benchmarks.quantized                      # gpt2 and llama shapes, Q8_0, Q4_0, Q4_K
    python -m benchmarks.quantized --json docs/bench-quantized.json --png docs/bench-quantized.png

For each shape (``benchmarks.lookup_add.SHAPES``: gpt2 50257 x 768 with 8 x 1024 ids, llama
32000 x 4096 with 2048) and each format, in one process and in interleaved rounds (method:
shared/BENCHMARKING.md and ``benchmarks.lookup_add``):

- ``copy``: ``np.copyto`` of the bytes the lookup must read (the ids' rows of the quantized
  table, already gathered): the floor no lookup of those rows can beat;
- ``float32 gather``: ``np.take`` of the same ids from the float32 table, into a
  preallocated result: what a lookup costs once the whole table is decoded;
- ``ggml_get_rows``: llama.cpp's own lookup of the same ids in the same bytes (ggml's CPU
  library, as the conformance extra builds it), one thread, its context and graph built once
  and only the compute timed; without ggml built, one line says why the row is missing;
- each backend's layer on the ``QuantizedTable`` (``positions="none"``).

Each lookup (ggml's and the backends') is checked bit for bit against
``gguf.quants.dequantize(table)[ids]`` before it is timed, and each variant's time is also given
as a ratio to ggml's and to the float32 gather's (medians of per-round ratios).

``copy_fraction`` is the copy's time over the variant's, the median of per-round ratios: the
share of a copy's speed the variant reaches while reading the same bytes (it also decodes and
writes float32 rows four to eight times their size). Peak memory is each form's in a fresh
process (the peak resident size, VmHWM, reset through /proc/self/clear_refs once the bytes
exist, over the resident size then): the
quantized table looked up in place, against ``gguf.quants.dequantize`` of the whole table and
the float32 layer built from it, the path the suite took before.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time

import numpy as np

import backends
import benchmarks
from backends import quantized
from benchmarks.lookup_add import SHAPES, Shape, _cpu_model, configure_threads
from embedding_parity import outputs
from embedding_parity.drawing.table import text_table

KINDS = ("Q8_0", "Q4_0", "Q4_K")  # the targets: within 1.5x of ggml_get_rows
BENCH_SHAPES = ("gpt2", "llama")
SAMPLE_SECONDS = 2e-3
GGML = "ggml_get_rows"
GATHER = "float32 gather"


def ids_of(shape: Shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + 1).integers(
        0, shape.vocab_size, (shape.batch, shape.length)
    )


def ggml_missing() -> str | None:
    """Why ggml's row cannot be measured here (one line), or None when ggml is built."""
    try:
        from embedding_parity.conformance.adapters import ggml_layers  # noqa: F401
    except ImportError as missing:
        return str(missing)
    return None


def variants(names, table: quantized.QuantizedTable, ids: np.ndarray, held) -> dict:
    """name -> one call returning its (finished) result; ggml's context, when ggml is built,
    kept open until ``held`` (a contextlib.ExitStack) closes."""
    read = table.blocks.take(ids.reshape(-1), 0)  # the bytes the lookup reads
    copy = np.empty_like(read)
    floats = quantized.dequantize(table)
    gathered = np.empty((*ids.shape, table.dim), np.float32)
    found = {
        "copy": lambda: np.copyto(copy, read),
        GATHER: lambda: floats.take(ids, 0, gathered, "clip"),
    }
    if ggml_missing() is None:
        from embedding_parity.conformance.adapters import ggml_layers

        found[GGML] = held.enter_context(ggml_layers.QuantizedRows(table.blocks, table.kind, ids))
    for name in names:
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(table, positions="none")
        if name == "numpy":
            out = np.empty((*ids.shape, table.dim), np.float32)
            found["numpy"] = lambda layer=layer, out=out: layer(ids, out=out)
        elif name == "torch":
            import torch

            ids_t = torch.from_numpy(ids)
            out_t = torch.empty((*ids.shape, table.dim), dtype=torch.float32)

            def call(layer=layer, ids_t=ids_t, out_t=out_t):
                # into a result allocated once, as every other row: a fresh 33.5 MB tensor is
                # mapped anew by glibc at each call (8,193 page faults at the llama shape)
                with torch.inference_mode():
                    return layer(ids_t, out=out_t)

            found["torch"] = call
        else:
            import jax

            ids_d = jax.device_put(ids.astype(np.int32))
            donated = [layer(ids_d)]  # y = layer(ids, out=y): its memory reused, no page faults

            def call(layer=layer, ids_d=ids_d, donated=donated):
                donated[0] = layer(ids_d, out=donated[0])
                return donated[0].block_until_ready()

            found["jax"] = call
    return found


def measure(shape_name: str, kind: str, names, *, rounds: int) -> list[dict]:
    shape = SHAPES[shape_name]
    table = quantized.QuantizedTable(
        kind, quantized.random_blocks(kind, shape.vocab_size, shape.dim), shape.dim
    )
    ids = ids_of(shape)
    expected = quantized.owner_rows(table, ids)
    with contextlib.ExitStack() as held:
        calls = variants(names, table, ids, held)
        seconds = timed(calls, expected, rounds)
    copy = np.array(seconds["copy"])
    records = []
    for name, times in seconds.items():
        times = np.array(times)
        records.append(
            {
                "shape": shape_name,
                "kind": kind,
                "variant": name,
                "median_ms": float(np.median(times) * 1e3),
                "iqr_ms": float(np.subtract(*np.percentile(times, [75, 25])) * 1e3),
                "copy_fraction": float(np.median(copy / times)),
                # None where ggml is not built
                "per_ggml": _ratio(times, seconds.get(GGML)),
                "per_gather": _ratio(times, seconds[GATHER]),
                "bytes_read": int(ids.size * table.blocks.shape[1]),
            }
        )
    return records


def timed(calls: dict, expected: np.ndarray, rounds: int) -> dict:
    """name -> seconds per call in each of ``rounds`` interleaved rounds; every lookup held to
    ``expected`` (gguf.quants') bit for bit before it is timed."""
    repeat = {}
    for name, call in calls.items():
        if name == GGML or name in backends.names():
            out = np.asarray(call()) if name == GGML else backends.get(name).to_numpy(call())
            if out.tobytes() != expected.tobytes():
                raise RuntimeError(f"{name} differs from gguf.quants' dequantize-then-gather")
        for _ in range(2):
            call()
        started = time.perf_counter()
        call()
        repeat[name] = max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - started, 1e-9)))
    seconds = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():  # interleaved
            started = time.perf_counter()
            for _ in range(repeat[name]):
                call()
            seconds[name].append((time.perf_counter() - started) / repeat[name])
    return seconds


def _ratio(times: np.ndarray, reference) -> float | None:
    """The median of per-round ratios of ``times`` to ``reference``'s (None without one)."""
    return None if reference is None else float(np.median(times / np.array(reference)))


# --- peak memory, each form in a fresh process -----------------------------------------------


def probe(shape_name: str, kind: str, form: str, backend: str) -> dict:
    """Build one form of the table in this process and look up the shape's ids once; the
    peak resident memory over what the process held before (the bytes, as a file's)."""
    shape = SHAPES[shape_name]
    be = backends.get(backend)
    table = quantized.QuantizedTable(
        kind, quantized.random_blocks(kind, shape.vocab_size, shape.dim), shape.dim
    )
    ids = ids_of(shape)
    be.to_numpy(be.TokenPositionEmbedding(table, positions="none")(ids[:, :4]))  # warm
    with open("/proc/self/clear_refs", "w") as refs:  # the peak (VmHWM) starts again from here
        refs.write("5")
    before = _status("VmRSS")
    if form == "quantized":
        layer = be.TokenPositionEmbedding(table, positions="none")
    else:  # the whole table decoded first, as the suite did before
        import gguf

        floats = gguf.quants.dequantize(table.blocks, gguf.GGMLQuantizationType[kind])
        layer = be.TokenPositionEmbedding(floats, positions="none")
        del floats
    be.to_numpy(layer(ids))
    return {"peak_mb": (_status("VmHWM") - before) / 1e6, "table_mb": _table_mb(table, form)}


def _table_mb(table: quantized.QuantizedTable, form: str) -> float:
    vocab, dim = table.shape
    return (table.nbytes if form == "quantized" else vocab * dim * 4) / 1e6


def _status(field: str) -> int:
    """A size from /proc/self/status, in bytes (VmRSS: resident now; VmHWM: its peak)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def memory(shape_name: str, kind: str, names) -> list[dict]:
    found = []
    for backend in names:
        for form in ("quantized", "float32"):
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.quantized",
                    "--probe",
                    shape_name,
                    kind,
                    form,
                    backend,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            found.append(
                {"shape": shape_name, "kind": kind, "backend": backend, "form": form}
                | json.loads(result.stdout.splitlines()[-1])
            )
    return found


# --- report ------------------------------------------------------------------------------------


def format_tables(records: list[dict], peaks: list[dict]) -> str:
    timed = [
        ("shape", "format", "variant", "median ms", "IQR ms", "x ggml", "x gather", "copy_fraction")
    ]
    timed += [
        (
            r["shape"],
            r["kind"],
            r["variant"],
            f"{r['median_ms']:.3g}",
            f"{r['iqr_ms']:.2g}",
            "-" if r["per_ggml"] is None else f"{r['per_ggml']:.2f}",
            f"{r['per_gather']:.2f}",
            f"{r['copy_fraction']:.3f}",
        )
        for r in records
    ]
    held = [("shape", "format", "backend", "form", "table MB", "peak MB")]
    held += [
        (
            p["shape"],
            p["kind"],
            p["backend"],
            p["form"],
            f"{p['table_mb']:.1f}",
            f"{p['peak_mb']:.0f}",
        )
        for p in peaks
    ]
    return text_table(timed, right_from=3) + "\n\n" + text_table(held, right_from=4)


def chart(records: list[dict], peaks: list[dict], path: str, title: str) -> None:
    """Left: copy_fraction of every variant, a group per (shape, format); right: peak memory
    of each form, per backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys((r["shape"], r["kind"]) for r in records))
    names = [n for n in dict.fromkeys(r["variant"] for r in records) if n != "copy"]
    colours = {
        GATHER: "grey",
        GGML: "black",
        "numpy": "tab:blue",
        "torch": "tab:orange",
        "jax": "tab:green",
    }
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [
            next(
                r["copy_fraction"]
                for r in records
                if (r["shape"], r["kind"]) == g and r["variant"] == name
            )
            for g in groups
        ]
        bars = left.bar(
            np.arange(len(groups)) + i * width, values, width, label=name, color=colours.get(name)
        )
        left.bar_label(bars, fmt="%.3f", fontsize=7, padding=1)
    left.axhline(1.0, color="black", lw=1, label="copy of the bytes read (1.0)")
    left.set_yscale("log")  # the copy moves a quarter to an eighth of what a lookup writes
    left.set_xticks(
        np.arange(len(groups)) + width * (len(names) - 1) / 2, [f"{s} {k}" for s, k in groups]
    )
    left.set_ylabel("copy_fraction: copy's time / the variant's (log; higher is faster)")
    left.set_title("lookup of the batch's rows, against a copy of the bytes they hold", fontsize=10)
    left.legend(fontsize=8)
    labels = [
        f"{p['shape']} {p['kind']}\n{p['backend']}" for p in peaks if p["form"] == "quantized"
    ]
    y = np.arange(len(labels))
    for offset, form, colour in ((-0.2, "quantized", "tab:purple"), (0.2, "float32", "grey")):
        values = [p["peak_mb"] for p in peaks if p["form"] == form]
        bars = right.barh(y + offset, values, 0.4, color=colour, label=f"{form} table")
        right.bar_label(bars, fmt="%.0f", fontsize=7, padding=2)
    right.set_yticks(y, labels, fontsize=8)
    right.invert_yaxis()
    right.set_xlabel("peak memory over the process's before the table (MB)")
    right.set_title(
        "building the layer and one lookup: in place, or the whole table decoded", fontsize=10
    )
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    with outputs.replacing(path) as out:
        fig.savefig(out, dpi=100, format="png")
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.quantized", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--shapes", nargs="+", choices=BENCH_SHAPES, default=list(BENCH_SHAPES))
    parser.add_argument("--kinds", nargs="+", choices=quantized.KINDS, default=list(KINDS))
    parser.add_argument(
        "--repeats", type=int, default=15, help="interleaved rounds (default: %(default)s)"
    )
    parser.add_argument(
        "--backends", nargs="+", choices=backends.names(), default=list(backends.names())
    )
    parser.add_argument("--json", metavar="OUT.json")
    parser.add_argument("--png", metavar="OUT.png")
    parser.add_argument(
        "--probe", nargs=4, metavar=("SHAPE", "KIND", "FORM", "BACKEND"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.probe:
        configure_threads(1, [args.probe[3]])
        print(json.dumps(probe(*args.probe)))
        return 0
    configure_threads(1, args.backends)
    missing = ggml_missing()
    records, peaks = [], []
    for shape in args.shapes:
        for kind in args.kinds:
            print(f"{shape} {kind} ...", file=sys.stderr, flush=True)
            records += measure(shape, kind, args.backends, rounds=args.repeats)
            peaks += memory(shape, kind, args.backends)
    print(format_tables(records, peaks))
    if missing:
        print(f"\n{GGML}: not measured: {missing}")
    title = f"quantized token tables, one thread ({_cpu_model()}, 2-core VM)"
    if args.json:
        with outputs.replacing(args.json, "w") as f:
            json.dump(
                {
                    "cpu": _cpu_model(),
                    "threads": 1,
                    "rounds": args.repeats,
                    "ggml_missing": missing,
                    "timed": records,
                    "memory": peaks,
                },
                f,
                indent=1,
            )
    if args.png:
        chart(records, peaks, args.png, title)
    return 0


if __name__ == "__main__":
    benchmarks.run(main)
