"""Write the explorer: one self-contained HTML file that draws the suite interactively.

The page job runs the suite (the seed demo, the positional schemes, MiniLM's real tables, a
training run) and gathers what the page shows (``embedding_parity/page/``) as one JSON-ready
dict; the page recomputes the seed's sums in the browser and needs no network. The schema is
in docs/explorer.md. The training curves are read from docs/train-float32.json, the record
`make train` writes, when its settings and backends are the page's; otherwise trained afresh.

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
from embedding_parity.jobs import bias, command, demos, seed, text, train

COMMAND = "page"
# The training run `make train` records; the page reads it instead of training when it matches.
RECORDED_TRAINING = Path(__file__).resolve().parents[2] / "docs" / "train-float32.json"

PRESETS = (
    "the king and the queen drove a car",
    "dog bites man",
    "man bites dog",
)
SIMILARITY_WORDS = ("king", "queen", "man", "woman", "car", "truck", "paris", "london")
REAL_DIMS = 48  # columns of MiniLM's 384 the page carries and draws
SINUSOIDAL = {"positions": 128, "dim": 16, "base": 10000.0}
ROPE_POSITIONS = 48  # each axis of the q(m) . k(n) score map


def float32(array) -> dict:
    """A float32 array as the big-endian hex of each value's bits: exact, and compact."""
    array = np.ascontiguousarray(array, dtype=">f4")
    return {"dtype": "float32", "shape": list(array.shape), "hex": array.tobytes().hex()}


def float64(array) -> dict:
    array = np.asarray(array, dtype=np.float64)
    return {"dtype": "float64", "shape": list(array.shape), "values": array.ravel().tolist()}


def run(names, *, train_steps: int = train.DEFAULTS["steps"], real: bool = True) -> dict:
    """Everything the page shows; ``real`` False leaves out MiniLM (no package needed)."""
    data = {
        "schema": 1,
        "backends": list(names),
        "seed": _seed(names),
        "schemes": _schemes(names),
        "training": _training(names, train_steps),
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
    size = render.write(data, args.out)
    print(f"page: {os.path.abspath(args.out)} ({size / 1e6:.2f} MB, {', '.join(names)})")
    differing_ = differing(data)
    for line in differing_:
        print(f"DIFFERS: {line}")
    return 1 if differing_ else 0
