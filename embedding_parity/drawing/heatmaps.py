"""One row of heatmaps per backend (its panels, then |backend - reference|), on one shared,
diverging colour scale centred at zero."""

from __future__ import annotations

import math

import numpy as np

from embedding_parity.drawing import pyplot, save, schemes, wrap
from embedding_parity.results.parity import Run

MAX_DRAWN_TOKENS = 32  # rows per heatmap at most; parity is checked on every token
MAX_HEIGHT = 16.0  # inches (1760 pixels at 110 dpi); fewer tokens are drawn to fit
TOKEN_INCHES, MIN_TOKEN_INCHES, PANEL_INCHES = 0.3, 0.16, 0.8  # per token row; axes and title
EXTRAS_INCHES = 3.4  # the scheme plots under the heatmaps
OUTLIER_RATIO = 2.0  # clip the scale when max |value| is over this times the 99th percentile


def columns(dims: tuple[int, int] | None, dim: int) -> slice:
    """The columns to draw: ``dims`` (first, stop), or by default all of a narrow table and
    the first 32 of a wide one."""
    if dims is None:
        return slice(0, 32) if dim > 64 else slice(0, dim)
    first, stop = dims
    if not 0 <= first < stop <= dim:
        raise ValueError(f"--dims {first}:{stop} must be a non-empty range within 0:{dim}")
    return slice(first, stop)


def colour_limit(arrays) -> tuple[float, bool]:
    """(limit, clipped): the largest |value|, unless a few outliers (a [CLS] row, say) are
    more than OUTLIER_RATIO times the 99th percentile of |value|, which would wash every
    other cell out to white: then the 99th percentile, and the cells beyond it are marked."""
    values = np.abs(np.concatenate([np.ravel(a) for a in arrays]).astype(np.float64))
    if not values.size:
        return 1.0, False
    top, p99 = float(values.max()), float(np.percentile(values, 99))
    if p99 > 0 and top > OUTLIER_RATIO * p99:
        return p99, True
    return top or 1.0, False


def rows_drawn(backends: int, length: int, extras_height: float = 0.0) -> tuple[int, float]:
    """(tokens drawn, inches per backend row): every token up to MAX_DRAWN_TOKENS, fewer (at
    least 4) where the picture would grow past MAX_HEIGHT."""
    room = (MAX_HEIGHT - 1.0 - extras_height) / backends - PANEL_INCHES  # for token rows
    drawn = min(length, MAX_DRAWN_TOKENS, max(4, math.floor(room / MIN_TOKEN_INCHES)))
    tokens_height = min(TOKEN_INCHES * max(drawn, 1), max(room, drawn * MIN_TOKEN_INCHES))
    return drawn, PANEL_INCHES + tokens_height


def plot(done: Run, path: str, *, dims: slice, show: bool = False) -> None:
    """One row per backend: its panels, then |backend - reference|; scheme plots below.

    Only the first sequence of a batch, the tokens that fit MAX_HEIGHT (at most
    MAX_DRAWN_TOKENS) and the columns ``dims`` are drawn; the title says what was left out.
    The difference column says "bit-identical" instead of drawing a scale when it is zero.
    """
    plt = pyplot(show)
    results, n_panels = done.results, len(done.results[0].panels)
    extras = schemes.plots(done)
    extras_height = EXTRAS_INCHES if extras else 0.0
    drawn, row_height = rows_drawn(len(results), done.token_ids.shape[-1], extras_height)
    labels = done.labels[:drawn]
    extent = (dims.start - 0.5, dims.stop - 0.5, drawn - 0.5, -0.5)  # x axis: real dim numbers

    def first(a):  # (..., T, dim) -> (drawn, dims): sequence 0, float64
        return (a if a.ndim == 2 else a[0])[:drawn, dims].astype(np.float64)

    width = 3.6 * n_panels + 3.8
    fig = plt.figure(
        layout="constrained", figsize=(width, 1.0 + len(results) * row_height + extras_height)
    )
    grid, below = (
        fig.subfigures(2, 1, height_ratios=[len(results) * row_height, extras_height])
        if extras
        else (fig, None)
    )
    axes = grid.subplots(
        len(results), n_panels + 1, squeeze=False, width_ratios=[1] * n_panels + [0.8]
    )
    shown = [first(p) for r in results for p in r.panels.values() if p.size]
    vmax, clipped = colour_limit(shown)
    fontsize = 8 if drawn <= 16 else 7
    for row, r in enumerate(results):
        for col, (heading, array) in enumerate(r.panels.items()):
            ax = axes[row, col]
            cells = first(array)
            image = ax.imshow(
                cells,
                cmap="RdBu_r",
                vmin=-vmax,
                vmax=vmax,
                aspect="auto",
                interpolation="nearest",
                extent=extent,
            )
            if clipped:
                beyond_row, beyond_col = np.nonzero(np.abs(cells) > vmax)
                ax.plot(dims.start + beyond_col, beyond_row, "x", color="yellow", ms=4, mew=1)
            _label(ax, labels if col == 0 else None, drawn, fontsize)
            ax.set_title(f"{r.backend}: {heading}", fontsize=9)
        _difference(grid, axes[row, n_panels], r, first, extent, drawn, done.reference_name)
    scale = "value (one scale for all, 0 = white)"
    if clipped:
        scale = f"value; scale clipped at ±{vmax:.3g},\nthe 99th percentile of |value| (× beyond)"
    grid.colorbar(image, ax=axes[:, :n_panels], label=scale, shrink=0.9)
    fig.suptitle(wrap(title(done, drawn, dims), width), fontsize=10)
    if extras:
        extras(below)
    save(fig, path, show=show)


def title(done: Run, drawn: int, dims: slice) -> str:
    """What was run, on what, and what the picture leaves out."""
    length, dim = done.token_ids.shape[-1], done.results[0].output.shape[-1]
    left_out = ""
    if done.token_ids.ndim == 2:
        left_out += f", sequence 0 of {done.token_ids.shape[0]}"
    if drawn < length:
        left_out += f", first {drawn} of {length} tokens drawn"
    if (dims.start, dims.stop) != (0, dim):
        left_out += f", dims {dims.start}:{dims.stop} of {dim} drawn"
    if left_out:
        left_out += " (parity checked on all)"
    return f"{done.heading}\n{done.setting}{left_out}"


def _difference(grid, ax, r, first, extent, drawn, reference_name):
    """|backend - reference|, or "bit-identical" where it is zero everywhere."""
    reference_name = "NumPy" if reference_name == "the NumPy expression" else "float64 reference"
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
        return
    if r.tolerance == 0 and r.max_abs_diff == 0:  # equal values, yet not the same bytes
        ax.set_axis_off()
        ax.text(
            0.5,
            0.5,
            f"NOT bit-identical:\n{r.output.dtype} {r.output.shape},\n"
            f"expected {r.expected.dtype} {r.expected.shape}",
            ha="center",
            va="center",
            fontsize=10,
            color="darkred",
            transform=ax.transAxes,
        )
        return
    shown = ax.imshow(
        first(r.diff),
        cmap="magma",
        vmin=0,
        vmax=r.max_abs_diff or None,  # over every token, drawn or not, as the label says
        aspect="auto",
        interpolation="nearest",
        extent=extent,
    )
    _label(ax, None, drawn, 8)
    verdict = f"max {r.max_abs_diff:.2g}" + (
        f", tolerance {r.tolerance:.2g}" if r.tolerance else ""
    )
    ax.set_xlabel(f"dim\n{verdict}" + ("" if r.agrees else "  EXCEEDED"), fontsize=8)
    grid.colorbar(shown, ax=ax, label="|diff|", format="%.1e")


def _label(ax, labels, rows: int, fontsize: int):
    ax.set_yticks(range(rows), labels if labels else [""] * rows, fontsize=fontsize)
    ax.set_xlabel("dim", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
