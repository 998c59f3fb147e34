"""Write the explorer: one self-contained HTML file that draws the suite interactively.

The page job runs the suite (the seed demo, the positional schemes, MiniLM's real tables, a
training run) and gathers what the page shows (``embedding_parity/page/``) as one JSON-ready
dict; the page recomputes the seed's sums in the browser and needs no network. The schema is
in docs/explorer.md. The training curves are read from docs/train-float32.json, the record
`make train` writes, when its settings and backends are the page's; otherwise trained afresh.
The conformance matrix is read from docs/conformance.json, the record `make conformance`
writes, trimmed to what its tab shows.

    compare.py page                            # explorer.html, about 4 s on 2 cores

Exit status: 0 written and every backend agrees, 1 written but a backend differs, 2 bad
arguments.

Float arrays are written so that they round-trip exactly: float32 as the hex of each value's
bits ({"dtype": "float32", "shape": [...], "hex": "3f800000..."}), float64 as JSON numbers,
which Python writes as the shortest decimal that reads back to the same double.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

import backends
from backends import positional, pretrained
from embedding_parity.jobs import bias, command, demos, seed, text, train, vision

COMMAND = "page"
# The training run `make train` records; the page reads it instead of training when it matches.
ROOT = Path(__file__).resolve().parents[2]
RECORDED_TRAINING = ROOT / "docs" / "train-float32.json"
# The matrix `make conformance` records; the page shows it and never runs the battery.
RECORDED_CONFORMANCE = ROOT / "docs" / "conformance.json"

PRESETS = (
    "the king and the queen drove a car",
    "dog bites man",
    "man bites dog",
)
SIMILARITY_WORDS = ("king", "queen", "man", "woman", "car", "truck", "paris", "london")
REAL_DIMS = 48  # columns of MiniLM's 384 the page carries and draws
SINUSOIDAL = {"positions": 128, "dim": 16, "base": 10000.0}
ROPE_POSITIONS = 48  # each axis of the q(m) . k(n) score map
VISION = {"grid": (14, 14), "to": (16, 16), "dim": 64}  # compare.py vision's defaults


def float32(array) -> dict:
    """A float32 array as the big-endian hex of each value's bits: exact, and compact."""
    array = np.ascontiguousarray(array, dtype=">f4")
    return {"dtype": "float32", "shape": list(array.shape), "hex": array.tobytes().hex()}


def float64(array) -> dict:
    array = np.asarray(array, dtype=np.float64)
    return {"dtype": "float64", "shape": list(array.shape), "values": array.ravel().tolist()}


def run(
    names,
    *,
    train_steps: int = train.DEFAULTS["steps"],
    real: bool = True,
    conformance: Path = RECORDED_CONFORMANCE,
) -> dict:
    """Everything the page shows; ``real`` False leaves out MiniLM (no package needed);
    ``conformance`` is the matrix's record the Conformance tab shows."""
    data = {
        "schema": 1,
        "backends": list(names),
        "seed": _seed(names),
        "schemes": _schemes(names),
        "training": _training(names, train_steps),
        "vision": _vision(),
        "conformance": recorded_conformance(conformance),
    }
    if real:
        data["real"] = _real(names)
    return data


def differing(data: dict) -> list[str]:
    """Where in the page's data a backend disagrees with the reference; empty when none."""
    found = [f"seed demo at start {r['start']}" for r in data["seed"]["runs"] if not r["agree"]]
    found += [
        data["schemes"][s]["summary"] for s in bias.SCHEMES if not data["schemes"][s]["agree"]
    ]
    if "real" in data:
        found += [f"MiniLM: {p['text']!r}" for p in data["real"]["presets"] if not p["agree"]]
    return found


def _seed(names) -> dict:
    """The seed demo, and every backend's sums at every start the seed tokens fit."""
    from embedding_parity.drawing import table

    runs = [seed.run(names, start=start) for start in range(16 - len(seed.SEED_TOKENS) + 1)]
    done = runs[0]  # the seed demo itself: start 0
    token_table, position_table = backends.shared_weights(100, 10, 16)
    found = {
        "vocab_size": 100,
        "dim": 10,
        "max_seq_len": 16,
        "dtype": "float32",
        "seed": 0,
        "token_ids": [int(i) for i in done.token_ids],
        "start": 0,
        "token_table": float32(token_table),
        "position_table": float32(position_table),
        "parity": "\n".join(
            [done.heading, f"{done.setting}, token_ids shape {done.token_ids.shape}"]
            + done.notes
            + [table.parity_table(done.results), done.verdict]
        ),
    }
    for r in done.results:
        found[f"sum_{r.backend}"] = float32(r.output)
    found["runs"] = [
        {
            "token_ids": found["token_ids"],
            "start": start,
            "sums": {r.backend: float32(r.output) for r in at.results},
            "agree": not at.differing,
        }
        for start, at in enumerate(runs)
    ]
    return found


def _schemes(names) -> dict:
    s = SINUSOIDAL
    numpy_backend = backends.get("numpy")
    token_table, _ = backends.shared_weights(100, 10, 16)
    rope_dim = token_table.shape[1]
    positions = np.arange(ROPE_POSITIONS)
    q_id, k_id = seed.SEED_TOKENS[:2]

    def rotated(token_id):  # (P, dim): the token's row at every position, by the suite's RoPE
        rows = np.repeat(token_table[[token_id]], len(positions), axis=0)
        return numpy_backend.apply_rope(rows, positions, layout="half").astype(np.float64)

    biases = {}
    for scheme in bias.SCHEMES:
        done = bias.run(names, scheme=scheme)
        checked = done.checked[0]
        biases[scheme] = {
            "num_heads": done.num_heads,
            "window": done.window,
            "bias": float32(checked.bias["window"]),
            "attention": float32(checked.attention["window"]),
            "summary": done.summary(),
            "agree": not done.differing,
        }
        if scheme == "alibi":
            biases[scheme]["slopes"] = numpy_backend.alibi_slopes(done.num_heads).tolist()
    return {
        "sinusoidal": {
            **s,
            "table": float64(positional.sinusoidal_table(s["positions"], s["dim"], base=s["base"])),
            "frequencies": positional.frequencies(s["dim"], s["base"]).tolist(),
        },
        "rope": {
            "dim": rope_dim,
            "token_ids": [q_id, k_id],
            "q_row": float32(token_table[q_id]),
            "k_row": float32(token_table[k_id]),
            "frequencies": positional.frequencies(rope_dim).tolist(),
            "scores": float64(rotated(q_id) @ rotated(k_id).T),
        },
        **biases,
    }


def _vision() -> dict:
    """The vision job's pictures at its defaults, as data: the three tables of the similarity
    maps in float32 (the browser computes a patch's map), channel 0 and its two bicubics (each
    kernel's rule in float64), the kernels, each rule's sample points and the slot maps."""
    grid, to, dim = VISION["grid"], VISION["to"], VISION["dim"]
    learned = vision.learned_table(grid, dim)
    panels = vision.similarity_panels(
        learned, grid, to, kernel=vision.DEFAULTS["kernel"], rule=vision.DEFAULTS["rule"]
    )
    channel, resized, curves, taps = vision.resize_panels(learned, grid, to)

    def lines(found):  # (label, offsets, weights) of the kernels' lines or stems
        return [{"label": n, "offsets": x.tolist(), "weights": y.tolist()} for n, x, y in found]

    return {
        **VISION,
        "tables": [{"name": n, "grid": list(g), "table": float32(t)} for n, t, g in panels],
        "resize": {
            "channel": float64(channel),
            "resized": [{"name": name, "values": float64(v)} for name, v in resized],
            "curves": lines(curves),
            "taps": lines(taps),
        },
        "sampling": {
            "old": grid[1],
            "new": to[1],
            "rules": [
                {"label": label, "coordinates": c.tolist()}
                for label, c in vision.sampling_rules(grid[1], to[1])
            ],
        },
        "slots": [
            {"label": label, "axes": list(axes), "pairs": pairs.tolist(), "frequencies": f.tolist()}
            for label, axes, pairs, f in vision.slot_rows(dim)
        ],
    }


def _real(names) -> dict:
    model = text.load_model("minilm")
    presets = []
    for sentence in PRESETS:
        done = text.run(names, sentence, model)
        first = done.results[0].panels
        presets.append(
            {
                "text": sentence,
                "labels": done.labels,
                "token_ids": [int(i) for i in done.token_ids],
                "token_rows": float32(first["token embeddings"][:, :REAL_DIMS]),
                "position_rows": float32(first["position embeddings"][:, :REAL_DIMS]),
                "sums": {r.backend: float32(r.output[:, :REAL_DIMS]) for r in done.results},
                "agree": not done.differing,
            }
        )
    found = demos.similarity(model, SIMILARITY_WORDS)
    return {
        "model": "minilm",
        "dim": int(model.token_table.shape[1]),
        "dims_shown": REAL_DIMS,
        "presets": presets,
        "similarity": {"labels": list(found.words), "matrix": float64(found.similarity)},
    }


def _training(names, steps: int) -> dict:
    recorded = recorded_training(names, steps)
    if recorded is not None:
        return recorded
    done = train.run(names, dtype="float32", steps=steps)
    return {
        "settings": done.settings,
        "curves": [
            {
                "scheme": c.scheme,
                "backend": c.backend,
                "loss": c.loss.tolist(),
                "test_accuracy": c.test_accuracy.tolist(),
            }
            for c in done.curves
        ],
    }


def recorded_training(names, steps: int) -> dict | None:
    """The curves of docs/train-float32.json, as _training gives them, if that record holds
    every scheme for exactly these backends at the default settings with ``steps``."""
    try:
        record = json.loads(RECORDED_TRAINING.read_text())
        runs = {(r["scheme"], r["backend"]): r for r in record["runs"]}
    except (OSError, ValueError, KeyError, TypeError):  # missing or malformed: train afresh
        return None
    settings = {**train.DEFAULTS, "steps": steps, "dtype": "float32"}
    wanted = [(scheme, name) for scheme in train.tasks.SCHEMES for name in names]
    if record["settings"] != settings or set(runs) != set(wanted):
        return None
    curves = [
        {k: runs[key][k] for k in ("scheme", "backend", "loss", "test_accuracy")} for key in wanted
    ]
    return {"settings": record["settings"], "curves": curves, "recorded": RECORDED_TRAINING.name}


# What a row of the matrix found, in the order the tab's filter lists them; a row may have several.
FINDINGS = (
    "conforms",
    "bad ids answered silently",
    "values differ",
    "rejects a dtype",
    "failed",
    "not run",
)


def recorded_conformance(path: Path = RECORDED_CONFORMANCE) -> dict:
    """The matrix of ``path`` as the Conformance tab shows it: each row's cells worded by
    known.cells, with the checks behind each cell, and the row's findings. A record that cannot
    be read gives {"source", "missing": why, in one line} instead: the page is still written."""
    from embedding_parity.conformance import known

    path = Path(path)
    source = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    try:
        matrix = json.loads(path.read_text(encoding="utf-8"))
        rows = [_matrix_row(record) for record in matrix["rows"]]
        versions = {f"{p} {v}" for r in matrix["rows"] for p, v in r["versions"].items() if v}
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        why = error.strerror if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
        missing = f"{source} could not be read ({why}); `make conformance` writes it"
        return {"source": str(source), "missing": missing}
    return {
        "source": str(source),
        "columns": list(known.COLUMNS),
        "findings": list(FINDINGS),
        "versions": sorted(versions),
        "rows": rows,
    }


def _matrix_row(record: dict) -> dict:
    from embedding_parity.conformance import known

    row = {
        "name": record["name"],
        "kind": record["kind"],
        "framework": record["framework"],
        "path": record.get("path", "eager"),  # records written before paths were run: eager
        "versions": ", ".join(f"{p} {v}" for p, v in record["versions"].items() if v),
        "findings": _findings(record),
    }
    if "missing" in record:
        return {**row, "missing": record["missing"]}
    # Only the checks some cell shows, each once; a cell holds their indices.
    shown = [
        c
        for c in record["report"]["checks"]
        if any(known.in_column(k, c, record["kind"]) for k in known.COLUMNS)
    ]
    words = known.cells(record)
    row["cells"] = [
        {
            "text": words[k],
            "checks": [i for i, c in enumerate(shown) if known.in_column(k, c, record["kind"])],
        }
        for k in known.COLUMNS
    ]
    row["checks"] = [_check(c) for c in shown]
    bits = (record["report"].get("through") or {}).get("bits", {})
    for check in row["checks"]:  # along a path: which bits differ from eager's
        if check["check"] in bits:
            check["eager"] = bits[check["check"]]
    return row


def _check(check: dict) -> dict:
    from embedding_parity.conformance import known

    shown = {k: check[k] for k in ("check", "status", "detail", "ulps")}
    if "bad id" in check["check"]:
        shown["answer"] = known.bad_id_answer(check)
    # In another layout the angles pair other columns: their phase means nothing.
    if check.get("phase") and "layout" not in check["detail"]:
        shown["phase"] = check["phase"]
    return shown


def _findings(record: dict) -> list[str]:
    if "missing" in record:
        return ["not run"]
    report = record["report"]
    statuses = {("bad id" in c["check"], c["status"]) for c in report["checks"]}
    found = {
        "conforms": report["conforms"],
        "bad ids answered silently": (True, "differs") in statuses,
        "values differ": (False, "differs") in statuses,
        "rejects a dtype": any(status == "rejected" for _, status in statuses),
        "failed": any(status == "failed" for _, status in statuses),
    }
    return [f for f in FINDINGS if found.get(f)]


# --- the command ---------------------------------------------------------------------------


MAX_TRAIN_STEPS = 10_000


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="explorer.html", help="the page (default: %(default)s)")
    command.add_backends(parser)
    parser.add_argument(
        "--train-steps",
        type=command.at_least(1),
        default=train.DEFAULTS["steps"],
        help="steps of the training run the page draws (default: %(default)s, read from "
        "docs/train-float32.json when it holds that run)",
    )
    parser.set_defaults(run=main)


def main(args) -> int:
    """1 if a backend differs anywhere in what the page shows."""
    from embedding_parity.page import render

    if args.train_steps > MAX_TRAIN_STEPS:
        raise command.UsageError(
            f"--train-steps {args.train_steps} is over {MAX_TRAIN_STEPS}: the page holds every "
            "step of every curve (about 0.7 MB per 1000 steps); train longer with "
            "`compare.py train --steps N --json PATH`"
        )
    names = command.chosen_backends(args.backends)
    command.check_file("--out", args.out, ".html")
    try:
        pretrained.package_dir("minilm")
        real = True
    except pretrained.MissingPackage as missing:
        print(f"page: without the real tables: {missing}")
        real = False
    data = run(names, train_steps=args.train_steps, real=real)
    recorded = data["training"].get("recorded")
    print(f"training curves: {'read from docs/' + recorded if recorded else 'trained afresh'}")
    matrix = data["conformance"]
    shown = matrix.get("missing") or f"read from {matrix['source']} ({len(matrix['rows'])} rows)"
    print(f"conformance matrix: {shown}")
    size = render.write(data, args.out)
    print(f"page: {os.path.abspath(args.out)} ({size / 1e6:.2f} MB, {', '.join(names)})")
    differing_ = differing(data)
    for line in differing_:
        print(f"DIFFERS: {line}")
    return 1 if differing_ else 0
