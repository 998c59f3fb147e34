"""Pictures of the vision job (jobs.vision): positions on a grid of patches.

- ``similarity``: the ViT paper's figure 7 (centre): each patch's cosine similarity to every
  other, one small map per patch laid out on the grid, for several tables side by side.
- ``resize``: what a resize does to one channel: the table, two kernels' results, their
  difference, and a 1-D slice of the kernels' weights.
- ``sampling``: where each rule samples the old grid along one axis.
- ``slot_maps``: which axis turns each dimension of a head under each model's 2-D RoPE, with
  the pairs that rotate together drawn as arcs.

Each takes arrays and names, not a job's result, so that a test can draw from its own data.
"""

from __future__ import annotations

import numpy as np

from backends import pretrained
from embedding_parity.drawing import pyplot, save, wrap

GAP = 1  # blank cells between two patches' maps in the similarity mosaic


def mosaic(table: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """The similarity mosaic of a (h*w, dim) table of raster-ordered patches: an h x w layout of
    h x w maps, the map at (i, j) patch (i, j)'s cosine similarity to every patch, NaN between
    the maps. Shape (h * (h + GAP) - GAP, w * (w + GAP) - GAP)."""
    h, w = grid
    similarity = pretrained.cosine_similarities(table, np.arange(h * w))  # (h*w, h*w)
    tiles = similarity.reshape(h, w, h, w)  # (patch row, patch col, row, col)
    out = np.full((h * (h + GAP) - GAP, w * (w + GAP) - GAP), np.nan)
    for i in range(h):
        for j in range(w):
            out[i * (h + GAP) : i * (h + GAP) + h, j * (w + GAP) : j * (w + GAP) + w] = tiles[i, j]
    return out


def similarity(panels, title: str, path: str, *, show: bool = False) -> None:
    """One mosaic per (name, table, grid) of ``panels``, side by side on one scale, -1 to 1;
    under each, its middle patch's map drawn large (the mosaic's maps are a few pixels wide)."""
    plt = pyplot(show)
    fig, axes = plt.subplots(
        2,
        len(panels),
        figsize=(4.6 * len(panels) + 0.8, 9.6),
        height_ratios=[1.25, 1],
        layout="constrained",
        squeeze=False,
    )
    for top, below, (name, table, grid) in zip(axes[0], axes[1], panels, strict=True):
        shown = mosaic(table, grid)
        image = top.imshow(shown, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        h, w = grid
        top.set_xticks([(w - 1) / 2 + j * (w + GAP) for j in range(w)], range(w), fontsize=6)
        top.set_yticks([(h - 1) / 2 + i * (h + GAP) for i in range(h)], range(h), fontsize=6)
        top.set_xlabel("patch column")
        top.set_ylabel("patch row")
        low = float(np.nanmin(shown))
        top.set_title(
            f"{name}\n({h * w}, {table.shape[1]}) table, {h} x {w} grid; from {low:.2f} to 1",
            fontsize=9,
        )
        top.tick_params(length=0)
        i, j = h // 2, w // 2
        tile = shown[i * (h + GAP) : i * (h + GAP) + h, j * (w + GAP) : j * (w + GAP) + w]
        below.imshow(tile, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        below.plot(j, i, "k+", ms=10)
        below.set(xlabel="patch column", ylabel="patch row")
        below.set_title(f"patch ({i}, {j}) against every patch (+: itself)", fontsize=9)
    fig.colorbar(image, ax=axes, shrink=0.6, label="cosine similarity")
    fig.suptitle(wrap(title, fig.get_figwidth()), fontsize=10)
    save(fig, path, show=show)


def border_and_inside(diff: np.ndarray) -> tuple[float, float]:
    """The largest |diff| on the outermost ring of cells, and inside it (0 if no inside)."""
    inside = np.abs(diff[1:-1, 1:-1])
    ring = np.abs(diff).copy()
    ring[1:-1, 1:-1] = 0
    return float(ring.max(initial=0)), float(inside.max(initial=0))


def resize(channel, resized, curves, taps, title: str, path: str, *, show=False) -> None:
    """One channel (h, w) of a table; ``resized``: two (name, (H, W) array) pairs, the channel
    as two kernels resize it; their difference, with its largest value on the border and
    inside (an edge rule's difference stays on the border, a kernel's is everywhere), or
    "bit-identical"; then the kernels: ``curves`` (label, offsets, weights) as lines, and
    ``taps`` (label, offsets, weights) as stems, the i-th of each in one colour. Offsets are
    input position - sample position, in input patches."""
    from matplotlib.ticker import MaxNLocator

    plt = pyplot(show)
    fig = plt.figure(figsize=(17, 4.6), layout="constrained")
    axes = fig.subplots(1, 5, width_ratios=[1, 1, 1, 1, 1.6])
    limit = max(float(np.abs(a).max(initial=0)) for a in [channel, *(r for _, r in resized)])
    panels = [("the channel", channel), *resized]
    for n, (ax, (name, values)) in enumerate(zip(axes, panels)):
        image = ax.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
        ax.set_title(f"{name}, {values.shape[0]} x {values.shape[1]}", fontsize=9)
        ax.set_xlabel("patch column")
        if n == 0:
            ax.set_ylabel("patch row")
    fig.colorbar(image, ax=axes[:3], shrink=0.8, label="value (one scale, 0 = white)")
    (first, a), (second, b) = resized
    _difference(fig, axes[3], a.astype(np.float64) - b.astype(np.float64), first, second)
    for ax in axes[:4]:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    right = axes[4]
    for n, (label, offsets, weights) in enumerate(curves):
        order = np.argsort(offsets)
        right.plot(offsets[order], weights[order], color=f"C{n}", lw=1.5, label=label)
    for n, (label, offsets, weights) in enumerate(taps):
        stems = right.stem(offsets, weights, linefmt=f"C{n}:", markerfmt=f"C{n}o", basefmt=" ",
                           label=label)  # fmt: skip
        stems.markerline.set_markersize(4)
    right.axhline(0, color="grey", lw=0.8)
    right.set_xlabel("input position - sample position (input patches)")
    right.set_ylabel("weight")
    right.set_title("the kernels (lines) and one output's taps (stems)", fontsize=9)
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.suptitle(wrap(title, fig.get_figwidth()), fontsize=10)
    save(fig, path, show=show)


def _difference(fig, ax, diff, first: str, second: str) -> None:
    title = f"{first} - {second}"
    if not np.any(diff):
        ax.set_title(title, fontsize=9)
        ax.set_axis_off()
        ax.text(0.5, 0.5, "bit-identical\nmax |diff| = 0", ha="center", va="center",
                fontsize=11, color="darkgreen", transform=ax.transAxes)  # fmt: skip
        return
    border, inside = border_and_inside(diff)
    top = float(np.abs(diff).max())
    shown = ax.imshow(diff, cmap="RdBu_r", vmin=-top, vmax=top, interpolation="nearest")
    ax.set_title(f"{title}\nmax |diff|: border {border:.3g}, inside {inside:.3g}", fontsize=9)
    ax.set_xlabel("patch column")
    fig.colorbar(shown, ax=ax, shrink=0.8, label="difference")


def sampling(rules, old: int, new: int, title: str, path: str, *, show: bool = False) -> None:
    """Where each rule reads the old grid along one axis: ``rules`` is (label, coordinates)
    pairs, the (new,) source coordinates of the new samples in old-grid units (cell k covers
    k - 0.5 .. k + 0.5). The old cells are drawn as boxes, their centres as ticks."""
    plt = pyplot(show)
    fig, ax = plt.subplots(figsize=(11, 0.9 + 0.55 * len(rules)), layout="constrained")
    for k in range(old):
        ax.axvspan(k - 0.5, k + 0.5, color="0.93" if k % 2 else "0.86", lw=0, zorder=0)
    for row, (label, coordinates) in enumerate(rules):
        y = len(rules) - 1 - row
        ax.plot(coordinates, np.full(new, y), "o", color=f"C{row}", ms=5)
        ax.plot(coordinates[[0, -1]], [y, y], "-", color=f"C{row}", lw=0.8)
    ax.set_yticks(range(len(rules)), [label for label, _ in reversed(rules)], fontsize=8)
    ax.set_xticks(range(old))
    ax.set_xlim(-1, old)
    ax.set_ylim(-0.6, len(rules) - 0.4)
    ax.set_xlabel(f"old grid: {old} patches (cell k spans k - 0.5 to k + 0.5; shaded)")
    ax.set_title(wrap(title, fig.get_figwidth()), fontsize=10)
    save(fig, path, show=show)


# One colour per axis, as the M-RoPE picture colours t, h and w (drawing.schemes).
AXIS_COLOURS = {"t": "C0", "h": "C1", "w": "C2"}


def slot_maps(rows, title: str, path: str, *, show: bool = False) -> None:
    """One bar per model over its head's dimensions, each dimension coloured by the axis whose
    coordinate turns it, an arc above the bar joining each pair that rotates together, and a
    strip under it of how fast the dimension turns (log10 of its angle per unit of the
    coordinate). ``rows``: (label, axes, pairs, frequencies): axes (head_dim,) of "h", "w" or
    "t"; pairs (head_dim / 2, 2) dimension indices; frequencies (head_dim,)."""
    from matplotlib.colors import Normalize
    from matplotlib.patches import Arc, Patch, Rectangle

    plt = pyplot(show)
    widest = max(len(axes) for _, axes, _, _ in rows)
    logs = np.concatenate([np.log10(f[f > 0]) for _, _, _, f in rows])
    norm = Normalize(float(logs.min()), float(logs.max()))
    fig, ax = plt.subplots(figsize=(13, 1.0 + 0.95 * len(rows)), layout="constrained")
    for row, (_, axes, pairs, frequencies) in enumerate(rows):
        y = len(rows) - 1 - row
        for d, axis in enumerate(axes):
            ax.add_patch(Rectangle((d, y + 0.12), 1, 0.3, color=AXIS_COLOURS[axis], lw=0))
        strip = np.log10(np.where(frequencies > 0, frequencies, np.nan))[None, :]
        image = ax.imshow(strip, extent=(0, len(axes), y, y + 0.1), cmap="Greys_r", norm=norm,
                          aspect="auto", interpolation="nearest")  # fmt: skip
        for a, b in np.sort(pairs, axis=1):
            span = b - a
            height = 0.06 + 0.38 * span / (len(axes) / 2)  # half a bar's pairs reach the top
            ax.add_patch(
                Arc((a + 0.5 + span / 2, y + 0.42), span, 2 * height, theta1=0, theta2=180,
                    lw=0.6, color="0.3")
            )  # fmt: skip
    ax.set_xlim(0, widest)
    ax.set_ylim(-0.1, len(rows) - 0.1)
    ax.set_yticks([len(rows) - 1 - r + 0.25 for r in range(len(rows))], [r[0] for r in rows],
                  fontsize=8)  # fmt: skip
    ax.set_xlabel("dimension of the head (arcs join the two dimensions one rotation turns)")
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    used = {axis for _, axes, _, _ in rows for axis in axes}
    names = {"t": "t (time; 0 for an image)", "h": "h (row)", "w": "w (column)"}
    handles = [Patch(color=AXIS_COLOURS[a], label=names[a]) for a in names if a in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    label = "log10 angle per unit of coordinate\n(the strip under each bar)"
    fig.colorbar(image, ax=ax, shrink=0.5, location="right", label=label)
    ax.set_title(wrap(title, fig.get_figwidth()), fontsize=10)
    save(fig, path, show=show)
