"""The conformance matrix's picture: phase error against position for every rope and
sinusoidal row, the error that grows with position when angles are formed in low precision."""

from __future__ import annotations

import numpy as np

from embedding_parity.drawing import pyplot, save

PANELS = (
    ("rope", "long positions float32", "RoPE, float32 inputs: x turned at positions to 131071"),
    ("sinusoidal", "positions to 131071", "sinusoidal table: the largest error in each octave"),
)
FLOOR = 1e-9  # exact angles are drawn here: a log axis has no zero


def phase_errors(matrix: dict, path: str, *, show: bool = False) -> None:
    plt = pyplot(show)
    fig, axes = plt.subplots(1, 2, figsize=(14, 9), sharey=True, layout="constrained")
    for ax, (kind, check, title) in zip(axes, PANELS):
        rows = [r for r in matrix["rows"] if r["kind"] == kind and "report" in r]
        for number, row in enumerate(rows):
            found = next((c for c in row["report"]["checks"] if c["check"] == check), None)
            if not found or not found["phase"] or "layout" in found["detail"]:
                continue  # another layout pairs other columns: its phase means nothing
            positions = np.array(found["phase"]["positions"], dtype=float)
            radians = np.maximum(np.array(found["phase"]["radians"]), FLOOR)
            style = "-" if found["status"] == "conforms" else "--"
            mark = "ok" if found["status"] == "conforms" else "differs"
            ax.plot(
                np.maximum(positions, 0.5),
                radians,
                style,
                marker="os^vD<>p*h"[number % 10],
                markersize=4,
                label=f"{row['name']} ({mark})",
            )
        _for_scale(ax, kind)
        _bound(ax, kind)
        ax.set(xscale="log", yscale="log", xlabel="position (0 drawn at 0.5)", title=title)
        ax.axhline(FLOOR, color="grey", lw=0.6)
        ax.grid(True, which="major", alpha=0.3)
        # below the plot, in two columns: the matrix has dozens of rows
        ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    axes[0].set_ylabel("largest phase error over frequencies (radians)")
    fig.suptitle(
        "Phase error against position: the angle each pair was turned by, read back, minus "
        "p * base**(-2i/d); dashed: the row differs; rows of another layout left out",
        fontsize=10,
    )
    save(fig, path, show=show)


def _for_scale(ax, kind: str) -> None:
    """The phase error of angles formed in bfloat16 and float16, the mistake the battery looks
    for, drawn in grey for scale (computed here, not measured on a row)."""
    from backends import positional
    from embedding_parity.conformance import kinds, numerics

    dim = kinds.ROPE_DIM if kind == "rope" else 16
    positions = kinds.LONG.astype(np.float64)
    frequencies = positional.frequencies(dim)
    for low, style in (("bfloat16", ":"), ("float16", "-.")):
        with np.errstate(over="ignore", invalid="ignore"):
            angles = kinds.low_precision_angles(positions, frequencies, low)
            error = np.abs(numerics.wrapped(angles - positions[:, None] * frequencies)).max(axis=1)
        shown = np.isfinite(error)
        ax.plot(
            np.maximum(positions[shown], 0.5),
            np.maximum(error[shown], FLOOR),
            style,
            color="grey",
            label=f"angles formed in {low} (a mistake, for scale)",
        )


def _bound(ax, kind: str) -> None:
    """The bound the float32 rows are judged by (``positional.phase_bound``), in black: a
    correct row stays below it; the matrix's JSON has each row's share of it ("ratio")."""
    from backends import positional
    from embedding_parity.conformance import kinds

    dim = kinds.ROPE_DIM if kind == "rope" else 16
    positions = np.unique(np.geomspace(1, kinds.LONG.max(), 64).round())
    bound = positional.phase_bound(positions, dim, dtype="float32", table=kind == "sinusoidal")
    what = f"rotation of head_dim {dim}" if kind == "rope" else f"table of dim {dim}"
    ax.plot(positions, bound, "k-", lw=2.5, alpha=0.6, label=f"the bound: a correct float32 {what}")
