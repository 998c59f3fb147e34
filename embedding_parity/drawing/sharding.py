"""The shard job's picture: which rows of the vocabulary each shard owns, and how the first
sequence's output rows are assembled from them (row-parallel)."""

from __future__ import annotations

import numpy as np

from embedding_parity.drawing import save, wrap
from embedding_parity.results.shard import Sharded
from embedding_parity.sharding import reference

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999"]


def ownership(done: Sharded, path: str, *, show: bool = False) -> None:
    from matplotlib.patches import ConnectionPatch

    from embedding_parity.drawing import pyplot

    plt = pyplot(show)
    vocab_size = len(done.token_table)
    rows = reference.per_shard(vocab_size, done.num_shards)
    ids = done.token_ids if done.token_ids.ndim == 1 else done.token_ids[0]
    output = done.unsharded if done.unsharded.ndim == 2 else done.unsharded[0]
    colour = [OKABE_ITO[k % len(OKABE_ITO)] for k in range(done.num_shards)]
    fig, (vocab, out) = plt.subplots(
        1, 2, figsize=(11, 5.2), width_ratios=[1, 2.4], layout="constrained"
    )
    for k in range(done.num_shards):  # the vocabulary, top to bottom, in the shards' colours
        first, last = k * rows, min((k + 1) * rows, vocab_size) - 1
        vocab.axhspan(first - 0.5, last + 0.5, color=colour[k], alpha=0.55, lw=0)
        vocab.text(
            0.5,
            (first + last) / 2,
            f"shard {k}\nrows {first}–{last}",
            ha="center",
            va="center",
            fontsize=9,
        )
    padding = rows * done.num_shards - vocab_size
    if padding:
        vocab.axhspan(
            vocab_size - 0.5, vocab_size + padding - 0.5, color="white", hatch="//", ec="grey", lw=0
        )
    vocab.set_xlim(0, 1)
    vocab.set_ylim(rows * done.num_shards - 0.5, -0.5)
    vocab.set_xticks([])
    vocab.set_ylabel("token id (row of the token table)")
    vocab.set_title(
        f"{vocab_size} rows over {done.num_shards} shards ({rows} each"
        + (f", {padding} padding" if padding else "")
        + ")",
        fontsize=10,
    )
    limit = float(np.abs(output.astype(np.float32)).max(initial=1.0))
    out.imshow(output.astype(np.float32), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    owners = ids // rows
    out.set_yticks(
        range(len(ids)),
        [f"t={t}: id {i}, shard {k}" for t, (i, k) in enumerate(zip(ids, owners, strict=True))],
        fontsize=9,
    )
    for t, (token, owner) in enumerate(zip(ids, owners, strict=True)):
        vocab.plot([0.05, 0.95], [token, token], color="black", lw=1.5)
        out.add_patch(plt.Rectangle((-0.5, t - 0.5), 0.35, 1, color=colour[owner], clip_on=False))
        fig.add_artist(
            ConnectionPatch(
                (0.95, token),
                (-0.5, t),
                "data",
                "data",
                axesA=vocab,
                axesB=out,
                color=colour[owner],
                lw=1.2,
                alpha=0.9,
            )
        )
    out.set_xlabel("dimension")
    out.set_title(
        wrap(
            "the output rows: each from its owner shard (the others add zeros; the "
            "all-reduce sums them), plus the position row",
            7,
        ),
        fontsize=10,
    )
    fig.suptitle(
        wrap(
            f"Row-parallel embedding, {done.num_shards} shards, "
            f"{done.token_table.dtype}: every backend bit-identical to one device"
            if not done.differing
            else "Row-parallel embedding",
            11,
        ),
        fontsize=11,
    )
    save(fig, path, show=show)
