"""The ALiBi and T5 picture (jobs.bias): per head, the bias over the window and the attention
it alone makes; under them how the bias depends on distance (T5: through its buckets); and
every backend's verdict. Also the text table compare.py prints."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from backends import numpy_backend, positional
from embedding_parity.drawing import pyplot, save, wrap
from embedding_parity.drawing.table import text_table
from embedding_parity.results.bias import T5_BUCKETS, T5_MAX_DISTANCE, BiasRun

# Okabe-Ito: distinguishable with every common colour-vision deficiency; yellow, faint on
# white, last.
LINES = ["#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#000000", "#F0E442"]
MAX_DRAWN_HEADS = 8  # columns of heatmaps at most; parity is checked on every head
HEAD_INCHES = 2.5  # width and height of one head's heatmap
MIN_ATTENTION = 1e-3  # the attention colour scale's floor (log scale); lower weights clipped
MASKED = "0.7"  # grey: keys after the query, masked
TOKENS_BOX = "#D55E00"  # Okabe-Ito vermillion: the tokens' call, outlined in the window
# T5's bucket map needs distances past max_distance to show its logarithmic buckets and the
# last one beyond: drawn over this many positions even when the window is smaller.
T5_POSITIONS = T5_MAX_DISTANCE + T5_MAX_DISTANCE // 4


def table(done: BiasRun) -> str:
    """One row per backend: the token rows and the bias (bit for bit), the attention
    (against the float64 reference, within the derived tolerance)."""
    first = done.checked[0]
    shapes = " and ".join(str(first.bias[c].shape) for c in first.bias)
    rows = [
        (
            "backend",
            f"x {first.x.output.shape}",
            f"bias {shapes}",
            "attention max |diff| vs float64",
            "tolerance",
            "agrees",
        )
    ]
    for c in done.checked:
        rows.append(
            (
                c.backend,
                "bit-identical" if c.x.agrees else "NO",
                "bit-identical to NumPy" if c.bias_identical else "NO",
                f"{c.max_abs_diff:.3g}",
                f"{c.tolerance:.3g}",
                "yes" if c.agrees else "NO",
            )
        )
    return text_table(rows)


def plot(done: BiasRun, path: str, *, show: bool = False) -> None:
    """Heatmaps of the first backend's window (heads across, bias over attention), the
    scheme's distance plots below, and one verdict line per backend."""
    plt = pyplot(show)
    drawn = done.checked[0]
    heads = min(done.num_heads, MAX_DRAWN_HEADS)
    width = max(11.0, HEAD_INCHES * heads + 2.0)
    verdict_height = 0.3 + 0.22 * len(done.checked)
    fig = plt.figure(
        layout="constrained", figsize=(width, 2 * HEAD_INCHES + 3.4 + verdict_height + 1.2)
    )
    top, below, verdicts = fig.subfigures(
        3, 1, height_ratios=[2 * HEAD_INCHES + 0.5, 3.4, verdict_height]
    )
    spare = width - (HEAD_INCHES * heads + 2.0)  # few heads: centre them
    if spare > 0:
        _, top, _ = top.subfigures(1, 3, width_ratios=[spare / 2, width - spare, spare / 2])
    _heatmaps(plt, top, done, drawn, heads)
    if done.scheme == "alibi":
        _alibi_distance(below, done, drawn, heads)
    else:
        _t5_buckets(plt, below, done, heads)
    _verdicts(verdicts, done)
    left_out = ""
    if heads < done.num_heads:
        left_out = f", first {heads} of {done.num_heads} heads drawn (parity checked on all)"
    title = "\n".join(
        [*done.heading, done.setting + left_out, f"heatmaps: {drawn.backend}'s arrays"]
    )
    fig.suptitle(wrap(title, width), fontsize=10)
    save(fig, path, show=show)


def _heatmaps(plt, subfigure, done: BiasRun, drawn, heads: int) -> None:
    """Row 1 the bias, row 2 the attention, one column per head; masked cells grey. The
    attention on a log scale: ALiBi's log weight falls in a straight line with distance."""
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.ticker import MaxNLocator

    masked = done.masked["window"]
    bias = [
        np.ma.masked_where(masked, drawn.bias["window"][h].astype(np.float64)) for h in range(heads)
    ]
    attention = [np.ma.masked_where(masked, drawn.attention["window"][h]) for h in range(heads)]
    limit = max(float(np.abs(b).max()) for b in bias) or 1.0
    extent = (-0.5, done.window - 0.5, done.window - 0.5, -0.5)  # cells centred on positions
    axes = subfigure.subplots(2, heads, squeeze=False, sharex=True, sharey=True)
    stop = done.start + len(done.token_ids)
    for h in range(heads):
        for row, (cells, cmap, norm) in enumerate(
            (
                (bias[h], "RdBu_r", Normalize(-limit, limit)),
                (attention[h], "viridis", LogNorm(MIN_ATTENTION, 1.0, clip=True)),
            )
        ):
            ax = axes[row, h]
            image = ax.imshow(
                cells,
                cmap=plt.get_cmap(cmap).with_extremes(bad=MASKED),
                norm=norm,
                interpolation="nearest",
                extent=extent,
            )
            ax.add_patch(
                plt.Rectangle(
                    (-0.5, done.start - 0.5),
                    stop,
                    len(done.token_ids),
                    fill=False,
                    ec=TOKENS_BOX,
                    lw=1.5,
                    ls="--",
                )
            )
            if row == 0:
                ax.set_title(_head_title(done, h), fontsize=9)
            if h == 0:
                ax.set_ylabel(f"{('bias', 'attention')[row]}\nquery position", fontsize=9)
            if row == 1:
                ax.set_xlabel("key position", fontsize=9)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            if h == heads - 1:
                label = "bias (0 = white)" if row == 0 else "attention weight (log scale)"
                extend = "neither" if row == 0 else "min"
                subfigure.colorbar(image, ax=axes[row, :], label=label, shrink=0.9, extend=extend)
    subfigure.suptitle(
        f"the window, positions 0..{done.window - 1}: grey = key after the query (masked); "
        f"dashed box = the tokens' call (queries {done.start}..{stop - 1}, keys 0..{stop - 1})",
        fontsize=9,
    )


def _head_title(done: BiasRun, h: int) -> str:
    if done.scheme == "t5":
        return f"head {h}"
    return f"head {h}: slope {_slope(positional.alibi_slopes(done.num_heads)[h])}"


def _slope(slope: float) -> str:
    """1/4 for a power of two, else three digits."""
    exact = Fraction(slope)
    return f"1/{exact.denominator}" if exact.numerator == 1 else f"{slope:.3g}"


def _alibi_distance(subfigure, done: BiasRun, drawn, heads: int) -> None:
    """The last query of the window: its bias and its attention against distance, per head."""
    left, right = subfigure.subplots(1, 2)
    last = done.window - 1
    distance = np.arange(done.window)
    for h in range(heads):
        label = f"head {h}: slope {_slope(positional.alibi_slopes(done.num_heads)[h])}"
        colour = LINES[h]
        bias_row = drawn.bias["window"][h, last, ::-1].astype(np.float64)  # by distance 0, 1, ..
        left.plot(distance, bias_row, "o-", ms=3, color=colour, label=label)
        right.plot(distance, drawn.attention["window"][h, last, ::-1], "o-", ms=3, color=colour)
    left.set(
        xlabel="distance query - key",
        ylabel="bias",
        title="bias = -slope x distance: a straight line per head",
    )
    right.set(
        xlabel="distance query - key",
        ylabel="attention weight",
        title=f"query {last}'s attention: decays as exp(-slope x distance)",
    )
    left.legend(fontsize=8)


def _t5_buckets(plt, subfigure, done: BiasRun, heads: int) -> None:
    """The bucket of every (query, key) pair; the bucket of each distance; and each head's
    bias against distance, the table's column read through the buckets."""
    axes = subfigure.subplot_mosaic(
        [["map", "bucket"], ["map", "bias"]], width_ratios=[1, 1.8], gridspec_kw={"hspace": 0.1}
    )
    positions = max(T5_POSITIONS, done.window)
    relative = positional.relative_positions(positions, positions)
    options = {"bidirectional": False, "num_buckets": T5_BUCKETS, "max_distance": T5_MAX_DISTANCE}
    buckets = numpy_backend.t5_relative_buckets(relative, **options)
    image = axes["map"].imshow(
        np.ma.masked_where(relative > 0, buckets),
        cmap=plt.get_cmap("viridis").with_extremes(bad=MASKED),
        interpolation="nearest",
    )
    axes["map"].add_patch(
        plt.Rectangle((-0.5, -0.5), done.window, done.window, fill=False, ec="black", lw=1.5)
    )
    axes["map"].set(
        xlabel="key position",
        ylabel="query position",
        title=f"bucket of each pair, positions 0..{positions - 1}\n(box: the window)",
    )
    subfigure.colorbar(image, ax=axes["map"], label="bucket", shrink=0.8)
    distance = np.arange(positions)
    by_distance = numpy_backend.t5_relative_buckets(-distance, **options)  # (positions,)
    exact = T5_BUCKETS // 2  # one-way: the first half of the buckets hold one distance each
    top = axes["bucket"]
    top.plot(distance, by_distance, drawstyle="steps-mid", color="black")
    last = int(np.argmax(by_distance == T5_BUCKETS - 1))  # where the last bucket starts
    for x, text, side in (
        (exact, f" from {exact} on: logarithmic buckets", "left"),
        (last, f"from {last} on: the last bucket ", "right"),  # before max_distance
    ):
        top.axvline(x - 0.5, color="black", ls=":", lw=1)
        top.text(x - 0.5, 2, text, fontsize=8, va="bottom", ha=side)
    top.axvspan(-0.5, done.window - 0.5, color="grey", alpha=0.25)
    top.set(ylabel="bucket", xlim=(-0.5, positions - 0.5), title="each distance's bucket and bias")
    top.tick_params(labelbottom=False)
    column = done.bias_table[by_distance, :heads].T.astype(np.float64)  # (heads, positions)
    limit = float(np.abs(column).max()) or 1.0
    shown = axes["bias"].imshow(
        column,
        cmap="RdBu_r",
        vmin=-limit,
        vmax=limit,
        aspect="auto",
        interpolation="nearest",
        extent=(-0.5, positions - 0.5, heads - 0.5, -0.5),
    )
    axes["bias"].set_yticks(range(heads), [f"head {h}" for h in range(heads)], fontsize=8)
    axes["bias"].set(xlabel="distance query - key (shaded above: the window's distances)")
    subfigure.colorbar(shown, ax=[top, axes["bias"]], label="bias_table[bucket, head]")


def _verdicts(subfigure, done: BiasRun) -> None:
    """One line per backend, green where it agrees."""
    ax = subfigure.subplots()
    ax.set_axis_off()
    lines = len(done.checked)
    for i, c in enumerate(done.checked):
        within = "within" if c.max_abs_diff <= c.tolerance else "EXCEEDED"
        text = (
            f"{c.backend}: token rows {'bit-identical' if c.x.agrees else 'DIFFER'}; "
            f"bias {'bit-identical to NumPy' if c.bias_identical else 'DIFFERS from NumPy'} "
            f"(tokens and window); attention max |diff| {c.max_abs_diff:.2g} vs float64, "
            f"tolerance {c.tolerance:.2g}: {within}"
        )
        ax.text(
            0.5,
            1 - (i + 0.5) / lines,
            text,
            ha="center",
            va="center",
            fontsize=9,
            color="darkgreen" if c.agrees else "darkred",
            transform=ax.transAxes,
        )
