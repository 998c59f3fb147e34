"""Pictures and text tables of what the jobs computed: they read ``embedding_parity.results``
and import no job (a job imports its picture). Matplotlib is imported only when a picture is
drawn, with the Agg backend unless a window was asked for.

- ``table``: the plain-text table formatter (compare.py's parity table, the benchmark's).
- ``heatmaps``: one row of heatmaps per backend, with the difference from the reference.
- ``schemes``: the sinusoidal table and RoPE's scores, drawn under the heatmaps.
- ``bias``: ALiBi's and T5's bias per head, the attention it makes, T5's buckets; its table.
- ``demos``: the similarity matrix and the word-order picture.
- ``training``: loss, accuracy and drift curves; the position table before and after training.
- ``sharding``: which rows each shard owns, and how a sequence's rows are assembled.
"""

from __future__ import annotations

import importlib.util

# The formats that every Matplotlib this project supports (3.7 and later) writes with its
# default canvases. A picture path in one of them is accepted without importing Matplotlib:
# half a second of CPU, which every rank of a sharded run spent checking its --out before any
# work. Another extension is looked up in the installed Matplotlib (3.10 adds gif and avif).
WRITTEN = frozenset("eps jpeg jpg pdf pgf png ps raw rgba svg svgz tif tiff webp".split())


def require() -> None:
    """ImportError, naming the extra to install, when Matplotlib is not installed: looked up,
    not imported, so that a command checks it before any work at no cost. A Matplotlib that is
    installed but cannot be imported (a broken dependency) raises its own error when the
    picture is drawn, after the work."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ImportError(
            "the pictures need Matplotlib, which is not installed: "
            "pip install 'embedding-parity[plot]'"
        )


def writes(extension: str) -> bool:
    """Whether Matplotlib writes pictures with this extension (lower case, no dot)."""
    if extension in WRITTEN:
        return True
    from matplotlib.figure import Figure

    return extension in Figure().canvas.get_supported_filetypes()


def pyplot(show: bool = False):
    """matplotlib.pyplot, headless (Agg) unless ``show``."""
    require()
    import matplotlib

    if not show:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: str, *, show: bool = False, dpi: int = 110) -> None:
    """Write ``fig`` to ``path``; with ``show`` also open it in a window."""
    import os

    from embedding_parity.outputs import replacing

    plt = pyplot(show)
    with replacing(path) as out:  # savefig to a file object needs the format named
        fig.savefig(out, dpi=dpi, format=os.path.splitext(path)[1].lstrip(".").lower())
    if show:
        plt.show()
    plt.close(fig)


def wrap(title: str, width_inches: float, fontsize: float = 10) -> str:
    """``title`` broken into lines that fit a figure ``width_inches`` wide (each line kept
    whole where it fits), so no title is clipped at the picture's edges."""
    import textwrap

    chars = max(20, int(width_inches * 72 / (0.55 * fontsize)))  # ~0.55 em per character
    return "\n".join(textwrap.fill(line, chars) for line in title.splitlines())
