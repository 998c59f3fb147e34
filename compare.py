"""Run every installed backend on the same weights and show that they agree.

    python compare.py                       # the seed demo: tokens 5 10 7 21, vocab 100, dim 10
    python compare.py --dtype bfloat16 --batch 3 --start 5
    python compare.py --scheme sinusoidal --layout concat
    python compare.py --scheme rope

Prints a parity table and writes a PNG of each backend's embeddings. With learned
positions (the default) every backend must be bit-identical to the NumPy expression
``token_table[token_ids] + position_table[start:start + T]``; with sinusoidal
positions or RoPE, within the derived tolerance of the float64 reference
(backends.positional). Exit status: 0 when every backend agrees, 1 when any
differs, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

import numpy as np

import backends
from backends import positional, pretrained, validation

SEED_TOKENS = (5, 10, 7, 21)
DEMO_WORDS = ("king", "queen", "man", "woman", "car", "truck", "paris", "france")
SCHEMES = ("learned", "sinusoidal", "rope")
MAX_DRAWN_TOKENS = 32  # rows per heatmap; parity is checked on every token


@dataclass
class Result:
    """One backend's output on the shared weights, held to a reference, as NumPy arrays."""

    backend: str
    panels: dict[str, np.ndarray]  # heading -> (..., T, dim), drawn left to right
    output: np.ndarray  # (..., T, dim), the array compared with the reference
    expected: np.ndarray  # the reference: same dtype (learned) or float64 (sinusoidal, rope)
    tolerance: float = 0.0  # 0: bit-identical required
    diff: np.ndarray = field(init=False)  # |output - expected|, in float64

    def __post_init__(self):
        self.diff = np.abs(self.output.astype(np.float64) - self.expected.astype(np.float64))

    @property
    def max_abs_diff(self) -> float:
        return float(self.diff.max()) if self.diff.size else 0.0

    @property
    def bit_identical(self) -> bool:
        return (
            self.output.dtype == self.expected.dtype
            and self.output.shape == self.expected.shape
            and self.output.tobytes() == self.expected.tobytes()
        )

    @property
    def agrees(self) -> bool:
        return self.bit_identical if self.tolerance == 0 else self.max_abs_diff <= self.tolerance


def reference(token_table, position_table, token_ids, start: int) -> np.ndarray:
    """The seed's expression, the oracle every backend is held to."""
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def run(names, token_table, position_table, token_ids, start: int = 0) -> list[Result]:
    """Learned positions: each backend's layer on the same tables and ids, held bitwise."""
    # The same checks the layers make, so the NumPy expression never wraps a negative id.
    validation.check_tables(token_table, position_table)
    validation.check_call(token_ids, start, len(token_table), len(position_table))
    expected = reference(token_table, position_table, token_ids, start)
    results = []
    for name in names:
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(token_table, position_table)
        panels = {
            "token embeddings": be.to_numpy(layer.token_embeddings(token_ids)),
            "position embeddings": be.to_numpy(
                layer.position_embeddings(start, token_ids.shape[-1])
            ),
            "token + position": be.to_numpy(layer(token_ids, start=start)),
        }
        results.append(Result(name, panels, panels["token + position"], expected))
    return results


def run_sinusoidal(
    names, token_table, token_ids, start: int, max_seq_len: int, *, layout: str, base: float
) -> list[Result]:
    """Sinusoidal positions: each backend builds its own table; held to the float64 sum."""
    # Built first: the layers check every argument before the reference is formed.
    options = {
        "positions": "sinusoidal",
        "max_seq_len": max_seq_len,
        "layout": layout,
        "base": base,
    }
    layers = [
        (name, backends.get(name).TokenPositionEmbedding(token_table, **options)) for name in names
    ]
    length = token_ids.shape[-1]
    validation.check_call(token_ids, start, len(token_table), max_seq_len)
    table = positional.sinusoidal_table(max_seq_len, token_table.shape[1], base=base, layout=layout)
    expected = token_table[token_ids].astype(np.float64) + table[start : start + length]
    tolerance = positional.sum_tolerance(
        token_table.dtype, start + length - 1, float(np.abs(expected).max(initial=0)), base=base
    )
    results = []
    for name, layer in layers:
        be = backends.get(name)
        panels = {
            "token embeddings": be.to_numpy(layer.token_embeddings(token_ids)),
            "sinusoidal position embeddings": be.to_numpy(layer.position_embeddings(start, length)),
            "token + position": be.to_numpy(layer(token_ids, start=start)),
        }
        results.append(Result(name, panels, panels["token + position"], expected, tolerance))
    return results


def run_rope(
    names, token_table, token_ids, start: int, *, layout: str, base: float
) -> list[Result]:
    """RoPE: token rows (no position added) rotated at positions start .. start + T - 1."""
    validation.check_call(token_ids, start, len(token_table), None)
    validation.check_even_dim(token_table.shape[1], "RoPE")
    positions = np.arange(start, start + token_ids.shape[-1])
    rows = token_table[token_ids]
    expected = positional.apply_rope(rows, positions, base=base, layout=layout)
    magnitude = 2 * float(np.abs(rows.astype(np.float64)).max(initial=0))  # max |a| + |b|
    tolerance = positional.tolerance(
        token_table.dtype, float(positions.max(initial=0)), base=base, magnitude=magnitude
    )
    results = []
    for name in names:
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(token_table, positions="none")
        x = layer(token_ids)  # (..., T, dim): position enters through the rotation
        rotated = be.to_numpy(be.apply_rope(x, positions, base=base, layout=layout))
        panels = {"token embeddings": be.to_numpy(x), f"after RoPE ({layout})": rotated}
        results.append(Result(name, panels, rotated, expected, tolerance))
    return results


def format_table(results: list[Result]) -> str:
    exact = all(r.tolerance == 0 for r in results)
    if exact:
        rows = [("backend", "shape", "dtype", "max |diff| vs NumPy", "bit-identical")]
    else:
        rows = [("backend", "shape", "dtype", "max |diff| vs float64", "tolerance", "within")]
    for r in results:
        row = [r.backend, str(tuple(r.output.shape)), str(r.output.dtype), f"{r.max_abs_diff:.3g}"]
        row += [] if exact else [f"{r.tolerance:.3g}"]
        rows.append((*row, "yes" if r.agrees else "NO"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def plot(results, labels, title, path, *, dims=slice(None), extras=None, show=False):
    """One row per backend: its panels, then |backend - reference|.

    ``labels`` name the rows of the first sequence. The panels share one diverging
    colour scale centred at zero; the difference column says "bit-identical" instead
    of drawing a scale when the difference is zero. ``extras(subfigure)`` draws
    scheme-specific plots below. Only the first sequence of a batch, its first
    MAX_DRAWN_TOKENS tokens and the columns ``dims`` are drawn.
    """
    import matplotlib

    if not show:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seq = labels = labels[:MAX_DRAWN_TOKENS]
    dim = results[0].output.shape[-1]
    first_dim, stop_dim, _ = dims.indices(dim)
    extent = (first_dim - 0.5, stop_dim - 0.5, len(seq) - 0.5, -0.5)  # x axis: real dim numbers

    def first(a):  # (..., T, dim) -> (T', dims): sequence 0, drawn tokens and dims, float32
        return (a if a.ndim == 2 else a[0])[: len(seq), dims].astype(np.float32)

    n_panels = len(results[0].panels)
    row_height = 0.8 + 0.3 * max(len(seq), 1)
    fig = plt.figure(
        layout="constrained",
        figsize=(3.6 * n_panels + 3.8, 1.0 + len(results) * row_height + (3.4 if extras else 0)),
    )
    grid, below = (
        fig.subfigures(2, 1, height_ratios=[len(results) * row_height, 3.4])
        if extras
        else (fig, None)
    )
    axes = grid.subplots(
        len(results), n_panels + 1, squeeze=False, width_ratios=[1] * n_panels + [0.8]
    )
    vmax = max(
        (float(np.abs(first(p)).max()) for r in results for p in r.panels.values() if p.size),
        default=1.0,
    )
    reference_name = "NumPy" if all(r.tolerance == 0 for r in results) else "float64 reference"
    for row, r in enumerate(results):
        for col, (heading, array) in enumerate(r.panels.items()):
            ax = axes[row, col]
            image = ax.imshow(
                first(array),
                cmap="RdBu_r",
                vmin=-vmax,
                vmax=vmax,
                aspect="auto",
                interpolation="nearest",
                extent=extent,
            )
            _label(ax, labels if col == 0 else None, len(seq))
            ax.set_title(f"{r.backend}: {heading}", fontsize=9)
        ax = axes[row, n_panels]
        ax.set_title(f"{r.backend}: |backend - {reference_name}|", fontsize=9)
        if r.bit_identical:
            ax.set_axis_off()
            ax.text(
                0.5,
                0.5,
                "bit-identical\nmax |diff| = 0",
                ha="center",
                va="center",
                fontsize=11,
                color="darkgreen",
                transform=ax.transAxes,
            )
            continue
        shown = ax.imshow(
            first(r.diff),
            cmap="magma",
            vmin=0,
            aspect="auto",
            interpolation="nearest",
            extent=extent,
        )
        _label(ax, None, len(seq))
        verdict = f"max {r.max_abs_diff:.2g}" + (
            f", tolerance {r.tolerance:.2g}" if r.tolerance else ""
        )
        ax.set_xlabel(f"dim\n{verdict}" + ("" if r.agrees else "  EXCEEDED"), fontsize=8)
        grid.colorbar(shown, ax=ax, label="|diff|", format="%.1e")
    grid.colorbar(
        image, ax=axes[:, :n_panels], label="value (one scale for all, 0 = white)", shrink=0.9
    )
    grid.suptitle(title, fontsize=10)
    if extras:
        extras(below)
    fig.savefig(path, dpi=110)
    if show:
        plt.show()
    plt.close(fig)


def _label(ax, labels, rows: int):
    ax.set_yticks(range(rows), labels if labels else [""] * rows, fontsize=8)
    ax.set_xlabel("dim", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)


def sinusoidal_extras(dim: int, layout: str, base: float, num_positions: int = 128):
    """The classic picture: the whole table (positions x dims) and a few of its columns."""

    def draw(subfigure):
        table = positional.sinusoidal_table(num_positions, dim, base=base, layout=layout)
        left, right = subfigure.subplots(1, 2, width_ratios=[1.3, 1])
        image = left.imshow(
            table.T, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest"
        )
        left.set(
            xlabel="position",
            ylabel="dim",
            title=f"sinusoidal table, layout {layout!r}, base {base:g}",
        )
        subfigure.colorbar(image, ax=left)
        for column in range(min(dim, 4)):
            is_sin = column % 2 == 0 if layout == "interleaved" else column < dim // 2
            kind = "sin" if is_sin else "cos"
            right.plot(table[:, column], label=f"dim {column} ({kind})")
        right.set(
            xlabel="position",
            ylabel="value",
            title="a few columns: one frequency per (sin, cos) pair",
        )
        right.legend(fontsize=7, loc="lower left")

    return draw


def rope_extras(results, token_table, token_ids, layout: str, base: float, num_positions: int):
    """Scores q(m) . k(n) of two tokens rotated to every pair of the first num_positions
    positions (at most 64, to keep the scatter readable): constant along diagonals,
    because they depend only on m - n."""
    seq = token_ids if token_ids.ndim == 1 else token_ids[0]
    q_id, k_id = seq[0], seq[min(1, len(seq) - 1)]
    num_positions = min(num_positions, 64)
    positions = np.arange(num_positions)

    def at_every_position(be, token_id):  # (P, dim): the token's row rotated to 0 .. P-1
        rows = np.repeat(token_table[[token_id]], num_positions, axis=0)
        rotated = be.apply_rope(rows, positions, base=base, layout=layout)
        return be.to_numpy(rotated).astype(np.float64)

    def draw(subfigure):
        left, right = subfigure.subplots(1, 2, width_ratios=[1, 1.4])
        m, n = np.meshgrid(positions, positions, indexing="ij")
        for i, r in enumerate(results):
            be = backends.get(r.backend)
            scores = at_every_position(be, q_id) @ at_every_position(be, k_id).T  # [m, n]
            size = 3 + 2 * (len(results) - i)  # later backends drawn smaller, on top
            right.plot((m - n).ravel(), scores.ravel(), "o", ms=size, alpha=0.5, label=r.backend)
            if i == 0:
                top = np.abs(scores).max()
                image = left.imshow(scores, cmap="RdBu_r", vmin=-top, vmax=top)
                subfigure.colorbar(image, ax=left)
                title = f"{r.backend}: q(m) . k(n), token #{q_id} vs #{k_id}"
                left.set(xlabel="key position n", ylabel="query position m", title=title)
        title = "every (m, n) pair: one score per distance m - n"
        right.set(xlabel="m - n", ylabel="score", title=title)
        right.legend(fontsize=7, loc="upper right")

    return draw


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run the token + position embedding in every installed backend on the same "
        "weights, print a parity table against a reference and draw the embeddings.",
        epilog="Exit status: 0 all backends agree, 1 a backend differs, 2 bad arguments.",
    )
    add = parser.add_argument
    add(
        "--scheme",
        choices=SCHEMES,
        default="learned",
        help="how position enters: a learned table, the sinusoidal table, or rotary (RoPE) "
        "(default: %(default)s)",
    )
    add(
        "--layout",
        help="sinusoidal: interleaved (default) or concat; rope: half (default) or interleaved",
    )
    add(
        "--base",
        type=float,
        default=10000.0,
        help="sinusoidal and rope frequency base (default: %(default)g)",
    )
    add(
        "--tokens",
        type=int,
        nargs="+",
        default=list(SEED_TOKENS),
        metavar="ID",
        help="token ids of one sequence (default: %(default)s)",
    )
    add("--vocab-size", type=int, default=100, help="rows of token_table (default: %(default)s)")
    add("--dim", type=int, default=10, help="embedding width (default: %(default)s)")
    add(
        "--max-seq-len",
        type=int,
        default=16,
        help="rows of the position table; for rope, positions in the score plot (up to 64) "
        "(default: %(default)s)",
    )
    add("--start", type=int, default=0, help="position of the first token (default: %(default)s)")
    add(
        "--batch",
        type=int,
        metavar="B",
        help="instead of --tokens, a random (B, T) batch, T = how many --tokens were given",
    )
    add(
        "--seed", type=int, default=0, help="seed of the weights and --batch (default: %(default)s)"
    )
    add(
        "--dtype",
        choices=list(backends.DTYPES),
        default="float32",
        help="dtype of the tables (default: %(default)s)",
    )
    add(
        "--backends",
        nargs="+",
        metavar="NAME",
        help=f"backends to run (default: every installed one: {' '.join(backends.names())})",
    )
    real = parser.add_argument_group("real text and tables (offline, from installed packages)")
    real.add_argument("--text", help='text to tokenize and embed, e.g. "dog bites man"')
    real.add_argument(
        "--weights",
        metavar="minilm|smollm2|PATH",
        help="real tables: a packaged model, or a .safetensors/.npz file (default: minilm)",
    )
    real.add_argument(
        "--tokenizer",
        choices=pretrained.TOKENIZERS,
        help="bert (WordPiece) or gpt2 (byte-level BPE); default: the model's own",
    )
    real.add_argument("--token-key", help="name of the token table in a --weights file")
    real.add_argument("--position-key", help="name of the position table in a --weights file")
    real.add_argument(
        "--dims", metavar="A:B", help="columns to draw (default: 0:32 for tables wider than 64)"
    )
    real.add_argument(
        "--truncate", action="store_true", help="cut a text longer than the model's positions"
    )
    real.add_argument(
        "--save-arrays", metavar="OUT.npz", help="also save ids and every backend's arrays"
    )
    real.add_argument(
        "--demo",
        choices=("similarity", "order"),
        help="similarity: cosine similarity of token rows; order: why position matters",
    )
    real.add_argument(
        "--words", nargs="+", help=f"words for --demo similarity (default: {' '.join(DEMO_WORDS)})"
    )
    real.add_argument(
        "--texts",
        nargs=2,
        metavar="TEXT",
        help='two texts for --demo order (default: "dog bites man" "man bites dog")',
    )
    add("--out", default="compare.png", help="where to write the PNG (default: %(default)s)")
    add(
        "--show",
        action="store_true",
        help="also open the picture in a window, if there is a display",
    )
    return parser.parse_args(argv)


@dataclass
class Run:
    """What one invocation computed, ready to print and draw."""

    results: list[Result]
    heading: str
    setting: str
    labels: list[str]  # rows of the first sequence
    token_ids: np.ndarray
    dims: slice = field(default_factory=lambda: slice(None))
    extras: object = None
    notes: list[str] = field(default_factory=list)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        _check_out_path(args.out)
        names = args.backends or backends.names()
        if len(set(names)) != len(names):
            raise ValueError(f"--backends lists a backend twice: {' '.join(names)}")
        for name in names:
            backends.get(name)  # unknown or missing frameworks fail here, before any work
        if args.words and args.demo != "similarity" or args.texts and args.demo != "order":
            raise ValueError("--words goes with --demo similarity, --texts with --demo order")
        if args.save_arrays:
            if args.text is None:
                raise ValueError("--save-arrays goes with --text")
            folder = os.path.dirname(os.path.abspath(args.save_arrays))
            if not args.save_arrays.endswith(".npz"):
                raise ValueError(f"--save-arrays {args.save_arrays!r} must end in .npz")
            if not os.path.isdir(folder):
                raise ValueError(
                    f"--save-arrays {args.save_arrays!r}: folder {folder} does not exist"
                )
        if args.demo is not None:
            return _demo(args, names)
        done = _run_text(args, names) if args.text is not None else _run_random(args, names)
    except pretrained.MissingPackage as error:
        print(f"compare.py: {error}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, IndexError, ImportError, OverflowError, MemoryError) as error:
        print(f"compare.py: error: {error}", file=sys.stderr)
        return 2

    print(done.heading)
    print(f"{done.setting}, token_ids shape {done.token_ids.shape}")
    for note in done.notes:
        print(note)
    print(format_table(done.results))
    drawn = ""
    if done.token_ids.ndim == 2:
        drawn += f", sequence 0 of {done.token_ids.shape[0]}"
    if done.token_ids.shape[-1] > MAX_DRAWN_TOKENS:
        drawn += f", first {MAX_DRAWN_TOKENS} of {done.token_ids.shape[-1]} tokens drawn"
    dim = done.results[0].output.shape[-1]
    first_dim, stop_dim, _ = done.dims.indices(dim)
    if (first_dim, stop_dim) != (0, dim):
        drawn += f", dims {first_dim}:{stop_dim} of {dim} drawn (parity checked on all)"
    show = args.show and _has_display()
    if args.show and not show:
        print("--show: no display found, only writing the file")
    try:
        title = f"{done.heading}\n{done.setting}{drawn}"
        plot(
            done.results,
            done.labels,
            title,
            args.out,
            dims=done.dims,
            extras=done.extras,
            show=show,
        )
        if args.save_arrays:
            save_arrays(args.save_arrays, done)
    except OSError as error:  # an unwritable --out, say
        print(f"compare.py: error: cannot write: {error}", file=sys.stderr)
        return 2
    print(f"picture: {os.path.abspath(args.out)}")
    if args.save_arrays:
        print(f"arrays: {os.path.abspath(args.save_arrays)}")
    differing = [r.backend for r in done.results if not r.agrees]
    exact = all(r.tolerance == 0 for r in done.results)
    reference_name = "the NumPy expression" if exact else "the float64 reference"
    if differing:
        print(f"DIFFERS from {reference_name}: {', '.join(differing)}")
        return 1
    agreement = "bit-identical to" if exact else "within tolerance of"
    print(f"all {len(done.results)} backends {agreement} {reference_name}")
    return 0


def _run_random(args, names) -> Run:
    """The seed demo and its variations: random tables from --seed."""
    if args.seed < 0:
        raise ValueError(f"--seed must be at least 0, got {args.seed}")
    for flag in ("vocab_size", "dim", "max_seq_len"):
        if getattr(args, flag) < 1:
            option = "--" + flag.replace("_", "-")
            raise ValueError(f"{option} must be at least 1, got {getattr(args, flag)}")
    token_table, position_table = backends.shared_weights(
        args.vocab_size, args.dim, args.max_seq_len, seed=args.seed, dtype=args.dtype
    )
    token_ids = np.array(args.tokens, dtype=np.int64)
    if args.batch is not None:
        if args.batch < 1:
            raise ValueError(f"--batch must be at least 1, got {args.batch}")
        rng = np.random.default_rng(args.seed)
        token_ids = rng.integers(0, args.vocab_size, size=(args.batch, len(args.tokens)))
    results, heading, extras = _run_scheme(args, names, token_table, position_table, token_ids)
    setting = (
        f"vocab_size {args.vocab_size}, dim {args.dim}, max_seq_len {args.max_seq_len}, "
        f"{args.dtype}, seed {args.seed}"
    )
    seq = token_ids if token_ids.ndim == 1 else token_ids[0]
    labels = [f"token #{t} @ pos {args.start + i}" for i, t in enumerate(seq)]
    return Run(results, heading, setting, labels, token_ids, _dims(args, args.dim), extras)


def _run_text(args, names) -> Run:
    """--text on real tables: --weights minilm, smollm2 or a .safetensors/.npz path."""
    if args.scheme != "learned" or args.batch is not None or args.start:
        raise ValueError(
            "--text runs the model's own positions: leave out --scheme, --batch, --start"
        )
    model = _load_weights(args)
    token_ids = np.array(model.tokenizer.encode(args.text), dtype=np.int64)
    notes = []
    if len(token_ids) > model.max_seq_len:
        if not args.truncate:
            raise ValueError(
                f"the text is {len(token_ids)} tokens but {model.name} has {model.max_seq_len} "
                "positions: shorten it or pass --truncate"
            )
        notes.append(f"truncated from {len(token_ids)} to {model.max_seq_len} tokens (--truncate)")
        token_ids = token_ids[: model.max_seq_len]
    dtype = validation.resolve_dtype(args.dtype)
    token_table = model.token_table.astype(dtype, copy=False)
    labels = [f"{label} @ {i}" for i, label in enumerate(model.tokenizer.labels(token_ids))]
    source = model.metadata.get("source", model.name)
    setting = (
        f"{source}: vocab_size {token_table.shape[0]}, dim {token_table.shape[1]}, {dtype.name}"
    )
    if model.position_table is not None:
        position_table = model.position_table.astype(dtype, copy=False)
        results = run(names, token_table, position_table, token_ids, 0)
        heading = f'x = token_table[ids] + position_table[0:{len(token_ids)}], text "{args.text}"'
    else:
        results = run_tokens(names, token_table, token_ids)
        heading = f'x = token_table[ids], text "{args.text}"'
        if model.rope:
            notes.append(
                f"{model.name} has no position table: position enters later, by RoPE on each "
                f"attention head's q and k (base {model.rope['base']:g}, "
                f"head dim {model.rope['head_dim']})"
            )
        else:
            notes.append(f"{model.name} has no position table: token rows only")
    dims = _dims(args, token_table.shape[1])
    return Run(results, heading, setting, labels, token_ids, dims, None, notes)


def _load_weights(args) -> pretrained.Pretrained:
    weights = args.weights or "minilm"
    if weights in ("minilm", "smollm2"):
        if args.tokenizer is not None:
            raise ValueError(
                f"{weights} has its own tokenizer: --tokenizer goes with --weights PATH"
            )
        return pretrained.load_pretrained(weights)
    if args.tokenizer is None:
        raise ValueError("--weights PATH needs --tokenizer bert or gpt2 to turn the text into ids")
    token_table, position_table = pretrained.load_tables(weights, args.token_key, args.position_key)
    tokenizer = pretrained.load_tokenizer(args.tokenizer)
    if tokenizer.vocab_size != len(token_table):
        raise ValueError(
            f"tokenizer {args.tokenizer} has {tokenizer.vocab_size} tokens but the token table has "
            f"{len(token_table)} rows: use the tokenizer the model was trained with"
        )
    max_seq_len = len(position_table) if position_table is not None else 2**31
    return pretrained.Pretrained(
        os.path.basename(weights), token_table, position_table, max_seq_len, tokenizer
    )


def _dims(args, dim: int) -> slice:
    """--dims A:B as a slice; by default all of a narrow table, the first 32 of a wide one."""
    if args.dims is None:
        return slice(0, 32) if dim > 64 else slice(None)
    try:
        first, stop = (int(part) for part in args.dims.split(":"))
    except ValueError:
        raise ValueError(f"--dims must look like 0:32, got {args.dims!r}") from None
    if not 0 <= first < stop <= dim:
        raise ValueError(f"--dims {args.dims} must be a non-empty range within 0:{dim}")
    return slice(first, stop)


def run_tokens(names, token_table, token_ids) -> list[Result]:
    """A model without a position table (RoPE): each backend's token lookup, held bitwise."""
    validation.check_token_ids(token_ids, len(token_table))
    expected = token_table[token_ids]
    results = []
    for name in names:
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(token_table, positions="none")
        panels = {"token embeddings": be.to_numpy(layer(token_ids))}
        results.append(Result(name, panels, panels["token embeddings"], expected))
    return results


def save_arrays(path: str, done: Run) -> None:
    """token_ids and, per backend, token_/position_/sum_<backend> as one .npz (no pickles).

    bfloat16 is stored as float32 (exactly), since .npz has no bfloat16 without pickling.
    """
    arrays = {"token_ids": done.token_ids}
    names = {"token embeddings": "token", "position embeddings": "position"}
    for r in done.results:
        for heading, array in r.panels.items():
            if heading in names:
                arrays[f"{names[heading]}_{r.backend}"] = array
        arrays[f"sum_{r.backend}"] = r.output
    arrays = {
        k: v.astype(np.float32) if v.dtype.name == "bfloat16" else v for k, v in arrays.items()
    }
    np.savez(path, **arrays)


def _run_scheme(args, names, token_table, position_table, token_ids):
    """(results, heading, extras) for --scheme."""
    stop = args.start + token_ids.shape[-1]
    if args.scheme == "learned":
        if args.layout is not None or args.base != 10000.0:
            raise ValueError("--layout and --base apply to --scheme sinusoidal or rope")
        results = run(names, token_table, position_table, token_ids, args.start)
        return results, f"x = token_table[token_ids] + position_table[{args.start}:{stop}]", None
    if args.scheme == "sinusoidal":
        layout = args.layout or "interleaved"
        results = run_sinusoidal(
            names,
            token_table,
            token_ids,
            args.start,
            args.max_seq_len,
            layout=layout,
            base=args.base,
        )
        heading = (
            f"x = token_table[token_ids] + sinusoidal_table[{args.start}:{stop}]"
            f"  (layout {layout}, base {args.base:g})"
        )
        return results, heading, sinusoidal_extras(args.dim, layout, args.base)
    layout = args.layout or "half"
    results = run_rope(names, token_table, token_ids, args.start, layout=layout, base=args.base)
    heading = (
        f"x = rope(token_table[token_ids], positions {args.start}..{stop - 1})"
        f"  (layout {layout}, base {args.base:g})"
    )
    return (
        results,
        heading,
        rope_extras(results, token_table, token_ids, layout, args.base, args.max_seq_len),
    )


def _check_out_path(path: str) -> None:
    """--out must name a picture format matplotlib writes, in a folder that exists."""
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    extension = os.path.splitext(path)[1].lstrip(".").lower()
    if extension not in formats:
        raise ValueError(f"--out {path!r} needs an extension, one of .png .svg .pdf .jpg ...")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--out {path!r}: folder {folder} does not exist")


def _demo(args, names) -> int:
    """--demo similarity or order: print the numbers, draw the picture; exit 1 if a claim fails."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = _load_weights(args)
    if args.demo == "similarity":
        words = args.words or list(DEMO_WORDS)
        ids = [pretrained.single_token(model.tokenizer, len(model.token_table), w) for w in words]
        similarity = pretrained.cosine_similarities(model.token_table, ids)
        width = max(len(w) for w in words)
        print(
            f"cosine similarity of raw token-table rows, {model.metadata.get('source', model.name)}"
        )
        print(" " * width + "".join(f"{w:>8}" for w in words))
        for word, row in zip(words, similarity, strict=True):
            print(f"{word:>{width}}" + "".join(f"{v:8.3f}" for v in row))
        for word, token_id in zip(words, ids, strict=True):
            near = pretrained.nearest(model.token_table, token_id)
            print(
                f"nearest to {word}: "
                + ", ".join(f"{model.tokenizer.labels([i])[0].strip()} {s:.3f}" for i, s in near)
            )
        fig, ax = plt.subplots(
            figsize=(1.0 + 0.75 * len(words), 0.6 + 0.65 * len(words)), layout="constrained"
        )
        image = ax.imshow(similarity, cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xticks(range(len(words)), words, rotation=45, ha="right")
        ax.set_yticks(range(len(words)), words)
        for (r, c), v in np.ndenumerate(similarity):
            ax.text(
                c,
                r,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if abs(v) > 0.6 else "black",
            )
        fig.colorbar(image, ax=ax, label="cosine similarity")
        ax.set_title(f"{model.name}: token-table rows, before any layer", fontsize=10)
        fig.savefig(args.out, dpi=110)
        plt.close(fig)
        print(f"picture: {os.path.abspath(args.out)}")
        return 0
    text_a, text_b = args.texts or ("dog bites man", "man bites dog")
    verdicts, shown = [], None
    for name in names:
        found = pretrained.order_demo(backends.get(name), model, text_a, text_b)
        shown = shown or found
        ok = found["same_without_position"] and not found["same_with_position"]
        verdicts.append(ok)
        if shown is found and sorted(found["ids"][0].tolist()) != sorted(found["ids"][1].tolist()):
            print(
                "note: the two texts do not tokenize to the same tokens "
                f"({found['labels'][0]} vs {found['labels'][1]}); with a byte-level BPE, "
                "give every word its leading space, e.g. ' dog bites man' ' man bites dog'"
            )
        print(
            f"{name}: token rows only: {_same(found['same_without_position'])}; "
            f"token + position: {_same(found['same_with_position'])}"
            f"{'' if ok else '  <- the claim fails'}"
        )
    dims = _dims(args, model.token_table.shape[1])
    fig, axes = plt.subplots(
        2,
        2,
        figsize=(12, 2.2 + 0.5 * max(len(i) for i in shown["ids"])),
        layout="constrained",
        squeeze=False,
    )
    vmax = max(float(np.abs(a[:, dims]).max()) for a in shown["tokens"] + shown["positioned"])
    for col, text in enumerate((text_a, text_b)):
        labels = [f"{label} @ {i}" for i, label in enumerate(shown["labels"][col])]
        for row, (kind, arrays) in enumerate(
            (("token rows only", shown["tokens"]), ("token + position", shown["positioned"]))
        ):
            ax = axes[row, col]
            image = ax.imshow(
                arrays[col][:, dims],
                cmap="RdBu_r",
                vmin=-vmax,
                vmax=vmax,
                aspect="auto",
                interpolation="nearest",
            )
            ax.set_yticks(range(len(labels)), labels, fontsize=8)
            ax.set_title(f'"{text}": {kind}', fontsize=9)
            ax.set_xlabel("dim", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.8)
    same = "the same rows, reordered" if shown["same_without_position"] else "different rows"
    fig.suptitle(
        f"{model.name}, {names[0]}: without position the two texts are {same}; "
        "with position they differ"
        f" (dims {dims.start or 0}:{dims.stop or model.token_table.shape[1]})",
        fontsize=10,
    )
    fig.savefig(args.out, dpi=110)
    plt.close(fig)
    print(f"picture: {os.path.abspath(args.out)}")
    return 0 if all(verdicts) else 1


def _same(same: bool) -> str:
    return "the same rows (reordered)" if same else "different rows"


def _has_display() -> bool:
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


if __name__ == "__main__":
    sys.exit(main())
