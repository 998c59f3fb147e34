"""Pictures of the train job: loss, test accuracy and drift per scheme and backend; and the
learned position table before and after training."""

from __future__ import annotations

import numpy as np

from embedding_parity.drawing import pyplot, save, wrap
from embedding_parity.drawing.table import text_table
from embedding_parity.results.extrapolate import Extrapolation
from embedding_parity.results.train import Training

COLOURS = {"numpy": "tab:blue", "torch": "tab:orange", "jax": "tab:green"}


def summary(training: Training) -> list[str]:
    """The lines compare.py train prints: the final numbers per run, then how far the
    backends' losses drift apart per scheme (against the tolerance, in float64)."""
    rows = [("scheme", "backend", "final loss", "batch accuracy", "test accuracy")]
    rows += [
        (
            c.scheme,
            c.backend,
            f"{c.loss[-1]:.4g}",
            f"{c.accuracy[-1]:.3f}",
            f"{c.test_accuracy[-1]:.3f}",
        )
        for c in training.curves
    ]
    lines = text_table(rows, right_from=2).splitlines()
    tolerance, beyond = training.tolerance(), training.beyond()
    if len({c.backend for c in training.curves}) == 1:
        return [*lines, "one backend ran: no drift between backends to report"]
    for scheme, drift in training.drift.items():
        worst = float(drift.max())
        if tolerance is None:
            late = np.flatnonzero(drift > 1e-6)
            when = f", above 1e-6 from step {late[0] + 1}" if len(late) else ""
            lines.append(f"{scheme}: losses drift apart by at most {worst:.3g} (relative){when}")
        else:
            verdict = "BEYOND" if scheme in beyond else "within"
            lines.append(
                f"{scheme}: losses agree to {worst:.3g} (relative), {verdict} {tolerance:.3g}"
            )
    if beyond:
        lines.append(
            "BEYOND the tolerance: a backend computes differently, or these settings amplify "
            "rounding differences faster than the estimate assumes (a larger --lr, many more "
            "--steps); the defaults stay 4x inside it"
        )
    return lines


def curves(training: Training, path: str, *, show: bool = False) -> None:
    """One column per scheme: loss (log), test accuracy, and the loss drift between backends."""
    plt = pyplot(show)
    schemes = list(training.drift)
    fig, axes = plt.subplots(
        3,
        len(schemes),
        figsize=(4.2 * len(schemes), 9.5),
        sharex=True,
        squeeze=False,
        layout="constrained",
    )
    tolerance = training.tolerance()
    for col, scheme in enumerate(schemes):
        loss_ax, test_ax, drift_ax = axes[:, col]
        runs = [c for c in training.curves if c.scheme == scheme]
        steps = np.arange(1, len(runs[0].loss) + 1)
        for i, c in enumerate(runs):  # later backends drawn thinner, on top
            style = {"color": COLOURS.get(c.backend), "label": c.backend, "lw": 3 - i}
            loss_ax.plot(steps, c.loss, **style)
            test_ax.plot(steps, c.test_accuracy, **style)
            if i:  # relative to the first backend; a bit-identical step leaves a gap
                drift = np.abs(c.loss - runs[0].loss) / np.abs(runs[0].loss)
                drift_ax.plot(steps, np.where(drift > 0, drift, np.nan), **{**style, "lw": 1})
        loss_ax.set(title=f"position: {scheme}", yscale="log", ylabel="training loss")
        test_ax.set(ylim=(-0.02, 1.02), ylabel="test accuracy (unseen pairs)")
        test_ax.axhline(0.5, color="grey", ls=":", lw=1, label="chance between 2 nouns")
        drift_ax.set(yscale="log", xlabel="step", ylabel=f"|loss - {runs[0].backend}'s| / loss")
        if tolerance is not None:
            drift_ax.axhline(tolerance, color="red", ls="--", lw=1, label="tolerance")
        if drift_ax.get_legend_handles_labels()[0]:  # one backend, float32: nothing drawn
            drift_ax.legend(fontsize=7, loc="lower right")
    axes[0, -1].legend(fontsize=8, loc="upper right")
    axes[1, -1].legend(fontsize=8, loc="lower right")
    s = training.settings
    title = (
        f"the same model, weights and batches in every backend: {s['dtype']}, {s['steps']} "
        f"steps of Adam (lr {s['lr']:g}), batch {s['batch_size']}, dim {s['dim']}, "
        f"head {s['head_dim']} (where the curves agree they lie on top of each other)"
    )
    fig.suptitle(wrap(title, fig.get_figwidth()), fontsize=10)
    save(fig, path, show=show)


def positions(training: Training, path: str, *, show: bool = False) -> None:
    """The learned position table before and after training (first backend), what training
    changed, and the cosine similarity of its rows."""
    plt = pyplot(show)
    learned = next(c for c in training.curves if c.scheme == "learned")
    before = training.initial["position_table"].astype(np.float64)
    after = learned.tables["position_table"].astype(np.float64)
    fig, axes = plt.subplots(
        3, 2, figsize=(12, 7), width_ratios=[3, 1.4], layout="constrained", squeeze=False
    )
    top = float(max(np.abs(before).max(), np.abs(after).max()))
    for row, (when, table) in enumerate((("before", before), ("after", after))):
        image = axes[row, 0].imshow(
            table, cmap="RdBu_r", vmin=-top, vmax=top, aspect="auto", interpolation="nearest"
        )
        axes[row, 0].set(
            title=f"learned position table {when} training ({learned.backend})",
            ylabel="position",
            yticks=range(len(table)),
        )
        unit = table / np.linalg.norm(table, axis=1, keepdims=True)
        similarity = unit @ unit.T
        shown = axes[row, 1].imshow(similarity, cmap="RdBu_r", vmin=-1, vmax=1)
        for (r, c), v in np.ndenumerate(similarity):
            axes[row, 1].text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=8)
        axes[row, 1].set(
            title=f"cosine of rows, {when}", xticks=range(len(table)), yticks=range(len(table))
        )
    fig.colorbar(image, ax=axes[:2, 0], label="value")
    fig.colorbar(shown, ax=axes[:2, 1], label="cosine")
    change = after - before
    edge = float(np.abs(change).max()) or 1.0
    moved = axes[2, 0].imshow(
        change, cmap="PuOr_r", vmin=-edge, vmax=edge, aspect="auto", interpolation="nearest"
    )
    axes[2, 0].set(
        title="what training changed: after - before (its own scale)",
        xlabel="dim",
        ylabel="position",
        yticks=range(len(change)),
    )
    fig.colorbar(moved, ax=axes[2, 0], label="change")
    axes[2, 1].set_axis_off()
    save(fig, path, show=show)


SCHEME_COLOURS = {  # Okabe-Ito: distinguishable with any colour vision
    "none": "#000000",
    "learned": "#E69F00",
    "sinusoidal": "#56B4E9",
    "rope": "#009E73",
    "alibi": "#D55E00",
    "t5": "#CC79A7",
}
MARKERS = {"numpy": "o", "torch": "s", "jax": "^"}


def extrapolation_summary(done: Extrapolation) -> list[str]:
    """The lines compare.py train --extrapolate prints: test loss per length, scheme and
    backend (or the layer's refusal), the Bayes-optimal floor, what grew, and how far the
    backends drift apart."""
    lengths = done.lengths
    rows = [
        ("scheme", "backend", *(f"T={n}" for n in lengths), f"growth {lengths[0]}->{lengths[-1]}")
    ]
    for r in done.runs:
        cells = [f"{v:.4f}" if isinstance(v, float) else "error" for v in r.test.values()]
        first, last = r.test[lengths[0]], r.test[lengths[-1]]
        growth = f"{last - first:+.4f}" if isinstance(last, float) else "-"
        rows.append((r.scheme, r.backend, *cells, growth))
    optimal = [f"{v:.4f}" for v in done.optimal.values()]
    rows.append(
        (
            "Bayes-optimal",
            "",
            *optimal,
            f"{done.optimal[lengths[-1]] - done.optimal[lengths[0]]:+.4f}",
        )
    )
    lines = text_table(rows, right_from=2).splitlines()
    refusals = [r.test[n] for n in lengths for r in done.runs if isinstance(r.test[n], str)]
    lines += [f"error: {message}" for message in dict.fromkeys(refusals)]  # once each, by T
    lines += _verdict(done)
    tolerance, beyond = done.tolerance(), done.beyond()
    if len({r.backend for r in done.runs}) == 1:
        return [*lines, "one backend ran: no drift between backends to report"]
    for scheme, drift in done.drift.items():
        if tolerance is None:
            lines.append(f"{scheme}: backends' losses differ by at most {drift:.3g} (relative)")
        else:
            verdict = "BEYOND" if scheme in beyond else "within"
            lines.append(
                f"{scheme}: losses agree to {drift:.3g} (relative), {verdict} {tolerance:.3g}"
            )
    return lines


def _verdict(done: Extrapolation) -> list[str]:
    """Which scheme is best at the longest length and how each one's excess over the floor
    grew: computed from the numbers, for the reader to hold against the paper's claim."""
    first, last = done.lengths[0], done.lengths[-1]
    backend = done.runs[0].backend
    excess = {}
    for r in done.runs:
        if r.backend == backend and isinstance(r.test[last], float):
            excess[r.scheme] = (
                r.test[first] - done.optimal[first],
                r.test[last] - done.optimal[last],
            )
    if not excess:
        return []
    best = min(excess, key=lambda s: excess[s][1])
    lines = [f"excess over the Bayes-optimal loss, T={first} -> T={last} ({backend}):"]
    lines += [
        f"  {s}: {a:.4f} -> {b:.4f}" for s, (a, b) in sorted(excess.items(), key=lambda i: i[1][1])
    ]
    lines.append(
        f"lowest loss at T={last} ({done.lengths[-1] // first}x the training length): {best}"
    )
    return lines


def extrapolation(done: Extrapolation, path: str, *, show: bool = False) -> None:
    """Test loss against evaluation length (one colour per scheme, one marker per backend),
    the Bayes-optimal floor, and the excess over it; refusals marked as such."""
    plt = pyplot(show)
    fig, (loss_ax, excess_ax) = plt.subplots(1, 2, figsize=(12.5, 5.2), layout="constrained")
    lengths = done.lengths
    backends = list(dict.fromkeys(r.backend for r in done.runs))
    for r in done.runs:
        size = 9 - 2.5 * backends.index(r.backend)  # later backends drawn smaller, on top
        style = {
            "color": SCHEME_COLOURS.get(r.scheme),
            "marker": MARKERS.get(r.backend, "o"),
            "ms": size,
            "mec": "white" if backends.index(r.backend) else SCHEME_COLOURS.get(r.scheme),
            "lw": 2 if r.backend == backends[0] else 0,
            "label": r.scheme if r.backend == backends[0] else None,
        }
        shown = [n for n in lengths if isinstance(r.test[n], float)]
        loss_ax.plot(shown, [r.test[n] for n in shown], **style)
        excess_ax.plot(shown, [r.test[n] - done.optimal[n] for n in shown], **style)
        for n in lengths:
            if isinstance(r.test[n], str) and r.backend == backends[0]:
                excess_ax.annotate(
                    "error",
                    (n, 0),
                    xytext=(0, 4),
                    textcoords="offset points",
                    ha="center",
                    color=SCHEME_COLOURS.get(r.scheme),
                    fontsize=8,
                )
    loss_ax.plot(lengths, list(done.optimal.values()), "k--", lw=1, label="Bayes-optimal")
    for ax in (loss_ax, excess_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [f"{n}\n({n // lengths[0]}x)" for n in lengths])
        ax.axvline(lengths[0], color="grey", ls=":", lw=1)
        ax.set_xlabel("evaluation length (tokens; training length dotted)")
    loss_ax.set(ylabel="test loss (nats per token)", title="test loss against length")
    excess_ax.set(
        ylabel="test loss - Bayes-optimal loss",
        ylim=(0, None),
        title='excess over the floor ("error": learned positions stop at their table)',
    )
    # One legend for both panels, below them: inside either it would cover points.
    handles, labels = loss_ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncol=len(labels))
    markers = ", ".join(f"{MARKERS.get(b, 'o')} {b}" for b in backends)
    s = done.settings
    title = (
        f"train at {s['length']} tokens, test up to {lengths[-1]}: {s['steps']} steps of Adam "
        f"(lr {s['lr']:g}), batch {s['batch_size']}, dim {s['dim']}, {s['heads']} heads of "
        f"{s['head_dim']}, {s['dtype']}; markers {markers} (they coincide where backends agree)"
    )
    fig.suptitle(wrap(title, fig.get_figwidth()), fontsize=10)
    save(fig, path, show=show)
