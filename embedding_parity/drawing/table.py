"""Plain-text tables, the one formatter for compare.py's parity table and the benchmark's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from embedding_parity.results.parity import same_bits


def text_table(rows: Sequence[Sequence[str]], *, right_from: int | None = None) -> str:
    """``rows[0]`` is the header; columns padded to their widest cell, a dashed rule under
    the header. Columns from index ``right_from`` on are right-aligned (numbers)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(row):
        cells = zip(row, widths, strict=True)
        padded = [
            cell.rjust(w) if right_from is not None and i >= right_from else cell.ljust(w)
            for i, (cell, w) in enumerate(cells)
        ]
        return "  ".join(padded).rstrip()

    lines = [line(row) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def parity_table(results) -> str:
    """One row per backend (results.parity.Result): shape, dtype, max |diff| and the verdict,
    with the tolerance column when the reference is float64 rather than bitwise. Then, for
    more than one backend, each backend against the others: within tolerance of float64 does
    not say whether two backends rounded alike, and where they did they are bit-identical."""
    exact = all(r.tolerance == 0 for r in results)
    if exact:
        rows = [("backend", "shape", "dtype", "max |diff| vs NumPy", "bit-identical")]
    else:
        rows = [("backend", "shape", "dtype", "max |diff| vs float64", "tolerance", "within")]
    for r in results:
        row = [r.backend, str(tuple(r.output.shape)), str(r.output.dtype), f"{r.max_abs_diff:.3g}"]
        within = "yes" if r.agrees else "NO"
        if r.bound is not None:  # a bound per element: its largest, and the share used
            row += [f"per element, up to {r.tolerance:.3g}"]
            used = r.bound_used
            within += (
                f" ({used:.0%} of its bound at worst)"
                if used <= 1
                else f" ({used:.3g} times its bound at worst)"
            )
        else:
            row += [] if exact else [f"{r.tolerance:.3g}"]
        rows.append((*row, within))
    if exact or len(results) == 1:  # bit-identical to one array: to each other too
        return text_table(rows)
    between = [("max |diff| between", *(r.backend for r in results))]
    between += [(r.backend, *(_against(r, other) for other in results)) for r in results]
    return f"{text_table(rows)}\n\n{text_table(between)}"


def _against(r, other) -> str:
    """One backend's output against another's: "bit-identical", else their max |diff|."""
    if other is r:
        return "-"
    if same_bits(r.output, other.output):
        return "bit-identical"
    diff = np.abs(r.output.astype(np.float64) - other.output.astype(np.float64))
    return f"{diff.max(initial=0):.3g}"
