"""lookup: f(token_table, position_table, token_ids, start) -> x, token rows plus position rows;
bit for bit, and every bad id must raise."""

from __future__ import annotations

import math

import numpy as np

import backends
from backends import positional, validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import (
    BAD_IDS,
    DIM,
    MAX_SEQ_LEN,
    VOCAB,
    Case,
    Kind,
    T,
    differs,
)
from embedding_parity.conformance.numerics import FLOATS


def battery_tables(params: dict):
    return backends.shared_weights(
        VOCAB, DIM, MAX_SEQ_LEN, seed=params["seed"], dtype=params["dtype"]
    )


def battery_ids(params: dict) -> np.ndarray:
    if params.get("bad") is not None:
        bad = params["bad"]
        return (
            np.array([3, 1.5, 5], np.float32) if bad == "1.5" else np.array([3, bad, 5], np.int64)
        )
    rng = np.random.default_rng(params["seed"] + 1)
    # at most two of each id, so that the gradient's rows sum at most two terms
    ids = rng.permutation(np.repeat(np.arange(VOCAB), 2))[: math.prod(params["shape"])]
    return ids.reshape(params["shape"]).astype(np.int64)


class Lookup(Kind):
    name = "lookup"
    contract = (
        "f(token_table, position_table, token_ids, start) -> x, "
        "x[..., t, :] = token_table[token_ids[..., t]] + position_table[start + t]"
    )

    def cases(self, options):
        if options.get("embed_scale"):
            return _scaled_cases(options["embed_scale"])
        found = []
        for dtype in FLOATS:
            for shape in ((T,), (3, T)):
                for start in (0, MAX_SEQ_LEN - T):
                    found.append(
                        Case(
                            f"forward {dtype}",
                            f"{len(shape)}-D ids, start {start}",
                            {"dtype": dtype, "shape": shape, "start": start, "seed": len(found)},
                        )
                    )
        for label, bad in {**BAD_IDS, "non-integer (1.5)": "1.5"}.items():
            params = {"dtype": "float32", "shape": (3,), "start": 0, "seed": 0, "bad": bad}
            found.append(Case(f"bad id: {label}", f"token_ids [3, {bad}, 5]", params))
        return found

    def describe(self, options):
        if options.get("embed_scale"):
            return (
                "f(token_table, token_ids) -> token_table[token_ids] * s, s = sqrt(hidden_size) "
                "rounded to the table's dtype first (Gemma)"
            )
        return self.contract

    def argument_names(self, params):
        if params.get("scaled"):
            return ["token_table", "token_ids"]
        return super().argument_names(params)

    def arguments(self, params):
        if params.get("scaled"):
            table = np.random.default_rng(params["seed"]).standard_normal((VOCAB, params["scaled"]))
            return [table.astype(validation.resolve_dtype(params["dtype"])), battery_ids(params)]
        token_table, position_table = battery_tables(params)
        return [token_table, position_table, battery_ids(params), params["start"]]

    def reference(self, params, *, start=None, positions=True):
        if params.get("scaled"):
            return positional.scaled_embedding(*self.arguments(params)).astype(np.float64)
        token_table, position_table, ids, given = self.arguments(params)
        start = given if start is None else start
        x = token_table.astype(np.float64)[ids]
        if positions:
            x += position_table.astype(np.float64)[start : start + ids.shape[-1]]
        return x

    def mistakes(self, params):
        if params.get("scaled"):
            return _scale_mistakes(*self.arguments(params))
        start = params["start"]
        found = [("positions not added (token rows only)", self.reference(params, positions=False))]
        if start:
            found.append(
                (f"start ignored (positions from 0, not {start})", self.reference(params, start=0))
            )
        for k in (-1, 1):
            if 0 <= start + k <= MAX_SEQ_LEN - params["shape"][-1]:
                found.append(
                    (
                        f"position off by {k:+d} (start + {k})",
                        self.reference(params, start=start + k),
                    )
                )
        return found

    def classify_bad(self, params, actual):
        if params.get("scaled"):
            return differs(
                f"returns {actual.dtype.name} {actual.shape} for a bad id without raising"
            )
        token_table, position_table, _, start = self.arguments(params)
        if actual.shape != (3, DIM) or actual.dtype.name not in FLOATS:
            return differs(f"returns {actual.dtype.name} {actual.shape} without raising")
        row = actual[1]
        return differs(_bad_row(params["bad"], row, token_table, position_table[start + 1]))


def _bad_row(bad, row, token_table, position_row) -> str:
    """What a returned row for a bad id is: NaN, a clamped, wrapped or zero row, or other
    (each candidate rounded to the row's dtype, as the implementation adds)."""
    if np.isnan(np.asarray(row, np.float64)).any():
        return "fills NaN: a NaN row instead of an error"
    if bad == "1.5":
        candidates = {"truncates 1.5 to 1": 1, "rounds 1.5 to 2": 2}
    else:
        candidates = {
            f"clamps to row {min(max(bad, 0), VOCAB - 1)}": min(max(bad, 0), VOCAB - 1),
            f"wraps to row {bad % VOCAB}": bad % VOCAB,
        }
    position = position_row.astype(np.float64)
    for name, index in candidates.items():
        expected = numerics.rounded(
            token_table[index].astype(np.float64) + position, row.dtype.name
        )
        if numerics.same_bits(row, expected):
            return f"{name}: a silent wrong answer"
    if numerics.same_bits(row, numerics.rounded(position, row.dtype.name)):
        return "zero row (position only): a silent wrong answer"
    return "returns a row without raising (none of clamp, wrap, NaN, zero)"


# --- with a scaled configuration: Gemma's f(token_table, token_ids) ------------------------


def _scaled_cases(hidden: int) -> list[Case]:
    """Gemma's lookup f(token_table, token_ids) -> rows * sqrt(hidden), the scale rounded to
    the dtype first, over tables of the config's width."""
    found = []
    for dtype in FLOATS:
        for shape in ((T,), (3, T)):
            params = {"dtype": dtype, "shape": shape, "seed": len(found), "scaled": hidden}
            found.append(Case(f"scaled {dtype}", f"{len(shape)}-D ids, width {hidden}", params))
    for label, bad in BAD_IDS.items():
        params = {"dtype": "float32", "shape": (3,), "seed": 0, "bad": bad, "scaled": hidden}
        found.append(Case(f"bad id: {label}", f"token_ids [3, {bad}, 5]", params))
    return found


def _scale_mistakes(table, ids) -> list[tuple[str, np.ndarray]]:
    rows = table[ids].astype(np.float64)
    hidden, dtype = table.shape[1], table.dtype
    exact = math.sqrt(hidden)
    found = [
        (
            f"sqrt({hidden}) unrounded: the exact {exact:.6g}, not rounded to {dtype.name} first",
            rows * exact,
        )
    ]
    for other in FLOATS:
        scale = float(positional.embedding_scale(hidden, other))
        if other != dtype.name and scale != float(positional.embedding_scale(hidden, dtype)):
            found.append(
                (f"sqrt({hidden}) rounded to {other} ({scale:.6g}), not {dtype.name}", rows * scale)
            )
    found.append(("no scale (token rows as stored)", rows))
    return found
