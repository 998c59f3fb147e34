"""Pictures of the two demonstrations (jobs.demos): the similarity matrix, and two texts
without and with position."""

from __future__ import annotations

import numpy as np

from embedding_parity.drawing import pyplot, save, wrap
from embedding_parity.drawing.heatmaps import MAX_HEIGHT
from embedding_parity.results.demos import Order, Similarity

WORD_INCHES = 0.75  # per word of the similarity matrix, until the picture reaches MAX_HEIGHT
TOKEN_INCHES = 0.25  # per token row of the order picture (two rows of panels)


def similarity(found: Similarity, model_name: str, path: str, *, show: bool = False) -> None:
    """The cosine-similarity matrix with every value written in its cell."""
    plt = pyplot(show)
    words = found.words
    size = min(WORD_INCHES, (MAX_HEIGHT - 1.0) / len(words))  # inches per word
    fig, ax = plt.subplots(
        figsize=(2.6 + size * len(words), 1.0 + size * len(words)), layout="constrained"
    )
    image = ax.imshow(found.similarity, cmap="RdBu_r", vmin=-1, vmax=1)
    fontsize = 10 if size >= 0.4 else 6
    ax.set_xticks(range(len(words)), words, rotation=45, ha="right", fontsize=fontsize)
    ax.set_yticks(range(len(words)), words, fontsize=fontsize)
    if size >= 0.4:  # room to write each value in its cell; else the colours alone
        for (r, c), v in np.ndenumerate(found.similarity):
            colour = "white" if abs(v) > 0.6 else "black"
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=8, color=colour)
    fig.colorbar(image, ax=ax, label="cosine similarity")
    title = f"{model_name}: token-table rows, before any layer"
    ax.set_title(wrap(title, fig.get_figwidth() * 0.8), fontsize=10)
    save(fig, path, show=show)


def order(found: Order, model_name: str, backend: str, dims: slice, path: str, *, show=False):
    """Both texts, token rows only (top) and with position (bottom), as ``backend`` computed."""
    plt = pyplot(show)
    shown = found.found[backend]
    length = max(len(i) for i in shown["ids"])
    drawn = min(length, int((MAX_HEIGHT - 2.2) / TOKEN_INCHES))
    fig, axes = plt.subplots(
        2,
        2,
        figsize=(12, 2.2 + TOKEN_INCHES * drawn),
        layout="constrained",
        squeeze=False,
    )
    rows = [a[:drawn, dims] for a in shown["tokens"] + shown["positioned"]]
    vmax = max(float(np.abs(a).max(initial=0)) for a in rows) or 1.0
    kinds = (
        ("token rows only", shown["tokens"]),
        (f"token + {found.position}", shown["positioned"]),
    )
    for col, text in enumerate(found.texts):
        tokens = shown["labels"][col][:drawn]
        for row, (kind, arrays) in enumerate(kinds):
            # Without position a row is its token alone; with it, the token at its position.
            labels = [f"{t} @ {i}" for i, t in enumerate(tokens)] if row else list(tokens)
            ax = axes[row, col]
            image = ax.imshow(
                arrays[col][:drawn, dims],
                cmap="RdBu_r",
                vmin=-vmax,
                vmax=vmax,
                aspect="auto",
                interpolation="nearest",
                extent=(dims.start - 0.5, dims.stop - 0.5, len(labels) - 0.5, -0.5),
            )
            ax.set_yticks(range(len(labels)), labels, fontsize=8 if drawn <= 24 else 6)
            ax.set_title(f'"{text}": {kind}', fontsize=9)
            ax.set_xlabel("dim", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.8, label="value (0 = white)")
    same = "the same rows, reordered" if shown["same_without_position"] else "different rows"
    differ = "differ" if not shown["same_with_position"] else "are still the same rows"
    title = (
        f"{model_name}, {backend}: without position the two texts are {same}; "
        f"with {found.position} they {differ} (dims {dims.start}:{dims.stop}"
        + (f", first {drawn} of {length} tokens drawn)" if drawn < length else ")")
    )
    fig.suptitle(wrap(title, 12), fontsize=10)
    save(fig, path, show=show)
