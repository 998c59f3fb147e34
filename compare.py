"""Run every installed backend on the same weights and show that they agree.

    python compare.py                       # the seed demo: tokens 5 10 7 21, vocab 100, dim 10
    python compare.py --dtype bfloat16 --batch 3 --start 5

Prints a parity table against the NumPy expression
``token_table[token_ids] + position_table[start:start + T]`` and writes a PNG of the
token, position and summed embeddings for each backend. Exit status: 0 when every
backend is bit-identical to that expression, 1 when any differs, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np

import backends
from backends import validation

SEED_TOKENS = (5, 10, 7, 21)


@dataclass
class Result:
    """One backend's output on the shared weights, as NumPy arrays."""

    backend: str
    token: np.ndarray  # (..., T, dim) token rows
    position: np.ndarray  # (T, dim) position rows
    total: np.ndarray  # (..., T, dim) token + position, from one layer call
    diff: np.ndarray  # (..., T, dim) |total - NumPy expression|, in float64
    bit_identical: bool

    @property
    def max_abs_diff(self) -> float:
        return float(self.diff.max()) if self.diff.size else 0.0


def reference(token_table, position_table, token_ids, start: int) -> np.ndarray:
    """The seed's expression, the oracle every backend is held to."""
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def run(names, token_table, position_table, token_ids, start: int = 0) -> list[Result]:
    """Build each backend's layer from the same tables and run it on the same ids."""
    # The same checks the layers make, so the NumPy expression never wraps a negative id.
    validation.check_tables(token_table, position_table)
    validation.check_call(token_ids, start, len(token_table), len(position_table))
    expected = reference(token_table, position_table, token_ids, start)
    results = []
    for name in names:
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(token_table, position_table)
        total = be.to_numpy(layer(token_ids, start=start))
        results.append(
            Result(
                backend=name,
                token=be.to_numpy(layer.token_embeddings(token_ids)),
                position=be.to_numpy(layer.position_embeddings(start, token_ids.shape[-1])),
                total=total,
                diff=np.abs(total.astype(np.float64) - expected.astype(np.float64)),
                bit_identical=total.dtype == expected.dtype
                and total.shape == expected.shape
                and total.tobytes() == expected.tobytes(),
            )
        )
    return results


def format_table(results: list[Result]) -> str:
    rows = [("backend", "shape", "dtype", "max |diff| vs NumPy", "bit-identical")]
    rows += [
        (r.backend, str(tuple(r.total.shape)), str(r.total.dtype), f"{r.max_abs_diff:.3g}",
         "yes" if r.bit_identical else "NO")
        for r in results
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def plot(results: list[Result], token_ids, start: int, title: str, path: str, show: bool = False):
    """One row per backend: token | position | token + position | |backend - NumPy|.

    The first three columns share one diverging colour scale centred at zero; the
    last says "bit-identical" instead of drawing a scale when the difference is zero.
    Only the first sequence of a batch is drawn.
    """
    import matplotlib

    if not show:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seq = token_ids if token_ids.ndim == 1 else token_ids[0]
    labels = [f"token #{t} @ pos {start + i}" for i, t in enumerate(seq)]

    def first(a):  # (..., T, dim) -> (T, dim) of sequence 0, as float32 for drawing
        return (a if a.ndim == 2 else a[0]).astype(np.float32)

    panels = [(first(r.token), first(r.position), first(r.total)) for r in results]
    vmax = max((float(np.abs(p).max()) for row in panels for p in row if p.size), default=1.0)
    fig, axes = plt.subplots(
        len(results), 4, squeeze=False, layout="constrained", width_ratios=[1, 1, 1, 0.7],
        figsize=(14.5, 1.0 + len(results) * (0.8 + 0.3 * max(len(seq), 1))),
    )  # fmt: skip
    headings = ["token embeddings", "position embeddings", "token + position", "|backend - NumPy|"]
    for row, (r, arrays) in enumerate(zip(results, panels, strict=True)):
        for col, array in enumerate(arrays):
            ax = axes[row, col]
            image = ax.imshow(array, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto",
                              interpolation="nearest")  # fmt: skip
            _label(ax, labels if col == 0 else None, len(seq))
            ax.set_title(f"{r.backend}: {headings[col]}", fontsize=9)
        ax = axes[row, 3]
        ax.set_title(f"{r.backend}: {headings[3]}", fontsize=9)
        if r.bit_identical:
            ax.set_axis_off()
            ax.text(0.5, 0.5, "bit-identical\nmax |diff| = 0", ha="center", va="center",
                    fontsize=11, color="darkgreen", transform=ax.transAxes)  # fmt: skip
        else:
            shown = ax.imshow(first(r.diff), cmap="magma", aspect="auto", interpolation="nearest")
            _label(ax, None, len(seq))
            fig.colorbar(shown, ax=ax, label="|diff|")
    fig.colorbar(image, ax=axes[:, :3], label="value (one scale for all, 0 = white)", shrink=0.9)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=120)
    if show:
        plt.show()
    plt.close(fig)


def _label(ax, labels, rows: int):
    ax.set_yticks(range(rows), labels if labels else [""] * rows, fontsize=8)
    ax.set_xlabel("dim", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run the token + position embedding in every installed backend on the same "
        "weights, print a parity table against the NumPy expression and draw the embeddings.",
        epilog="Exit status: 0 all backends bit-identical, 1 a backend differs, 2 bad arguments.",
    )
    add = parser.add_argument
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
    add("--max-seq-len", type=int, default=16, help="rows of position_table (default: %(default)s)")
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
        help="dtype of both tables (default: %(default)s)",
    )
    add(
        "--backends",
        nargs="+",
        metavar="NAME",
        help=f"backends to run (default: every installed one: {' '.join(backends.names())})",
    )
    add("--out", default="compare.png", help="where to write the PNG (default: %(default)s)")
    add(
        "--show",
        action="store_true",
        help="also open the picture in a window, if there is a display",
    )
    return parser.parse_args(argv)  # fmt: skip


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        names = args.backends or backends.names()
        for name in names:
            backends.get(name)  # unknown or missing frameworks fail here, before any work
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
        results = run(names, token_table, position_table, token_ids, args.start)
    except (ValueError, TypeError, IndexError, ImportError) as error:
        print(f"compare.py: error: {error}", file=sys.stderr)
        return 2

    stop = args.start + token_ids.shape[-1]
    setting = (
        f"vocab_size {args.vocab_size}, dim {args.dim}, max_seq_len {args.max_seq_len}, "
        f"{args.dtype}, seed {args.seed}"
    )
    print(f"x = token_table[token_ids] + position_table[{args.start}:{stop}]")
    print(f"{setting}, token_ids shape {token_ids.shape}")
    print(format_table(results))
    batch_note = f", sequence 0 of {token_ids.shape[0]}" if token_ids.ndim == 2 else ""
    title = (
        f"x = token_table[token_ids] + position_table[{args.start}:{stop}]\n{setting}{batch_note}"
    )
    show = args.show and _has_display()
    if args.show and not show:
        print("--show: no display found, only writing the file")
    plot(results, token_ids, args.start, title, args.out, show=show)
    print(f"picture: {os.path.abspath(args.out)}")
    differing = [r.backend for r in results if not r.bit_identical]
    if differing:
        print(f"DIFFERS from the NumPy expression: {', '.join(differing)}")
        return 1
    print(f"all {len(results)} backends bit-identical to the NumPy expression")
    return 0


def _has_display() -> bool:
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


if __name__ == "__main__":
    sys.exit(main())
