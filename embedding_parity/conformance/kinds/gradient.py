"""gradient: f(token_table, token_ids, upstream) -> d_token_table, rows of at most two terms
bit for bit, a sixteen-term row within n * eps * sum|terms|; bad ids must raise."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from backends import validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import (
    BAD_IDS,
    DIM,
    VOCAB,
    Case,
    Kind,
    T,
    conforms,
    differs,
)
from embedding_parity.conformance.kinds.lookup import battery_ids, battery_tables
from embedding_parity.conformance.numerics import FLOATS


class Gradient(Kind):
    """Rows of at most two terms are exact (one rounding); the sixteen-term row is not."""

    name = "gradient"
    contract = (
        "f(token_table, token_ids, upstream) -> d_token_table (the table's shape): "
        "row r sums upstream[..., t, :] over every t with token_ids[..., t] == r"
    )

    def cases(self, options):
        padding = options.get("padding_idx")
        found = []
        for dtype in FLOATS:
            for shape in ((T,), (3, T)):
                found.append(
                    Case(
                        f"gradient {dtype}",
                        f"{len(shape)}-D ids, each id at most twice",
                        {
                            "dtype": dtype,
                            "shape": shape,
                            "seed": len(found),
                            "padding_idx": padding,
                        },
                    )
                )
            found.append(
                Case(
                    f"gradient {dtype}",
                    "id 7 sixteen times",
                    {
                        "dtype": dtype,
                        "shape": (16,),
                        "seed": len(found),
                        "repeat": 16,
                        "padding_idx": padding,
                    },
                )
            )
        for label, bad in BAD_IDS.items():
            params = {
                "dtype": "float32",
                "shape": (3,),
                "seed": 0,
                "bad": bad,
                "padding_idx": padding,
            }
            found.append(Case(f"gradient, bad id: {label}", f"token_ids [3, {bad}, 5]", params))
        return found

    def arguments(self, params):
        token_table, _ = battery_tables(params)
        ids = np.full(params["shape"], 7, np.int64) if params.get("repeat") else battery_ids(params)
        rng = np.random.default_rng(params["seed"] + 2)
        upstream = rng.standard_normal((*ids.shape, DIM)).astype(token_table.dtype)
        return [token_table, ids, upstream]

    def reference(self, params, *, padding=True):
        token_table, ids, upstream = self.arguments(params)
        grad = np.zeros(token_table.shape, np.float64)
        np.add.at(grad, ids.reshape(-1), upstream.reshape(-1, DIM).astype(np.float64))
        if padding and params.get("padding_idx") is not None:
            grad[params["padding_idx"]] = 0.0
        return grad

    def compare(self, params, actual):
        if not params.get("repeat"):
            return super().compare(params, actual)
        # Sixteen terms in one row: each framework adds in its own order and precision, so the
        # row is held to n * eps * sum |terms| (every partial sum rounded once, eps of the dtype).
        reference = self.reference(params)
        if actual.shape != reference.shape or actual.dtype.name != params["dtype"]:
            return super().compare(params, actual)
        bound = self.tolerance(params, params["dtype"])
        error = numerics.max_error(actual, reference)
        size, _ = numerics.ulps(actual, reference, params["dtype"])
        if error <= bound:
            return conforms(
                f"within tolerance, inside its bound n * eps * sum|terms|: {error:.2g} <= "
                f"{bound:.2g} ({error / bound if bound else 0.0:.2f} of the bound); {size:.3g} "
                "ulp of an element's own value",
                ulps=size,
            )
        diagnosis = self.diagnose(params, actual, params["dtype"], bound, error)
        return differs(
            f"{error:.2g} > {bound:.2g}{'; ' + diagnosis if diagnosis else ''}", ulps=size
        )

    def exact_for(self, params):
        return not params.get("repeat")

    def tolerance(self, params, dtype):
        """A repeated id's row: n * eps * sum |terms| (every partial sum rounded once)."""
        if not params.get("repeat"):
            return 0.0
        _, _, upstream = self.arguments(params)
        eps = float(ml_dtypes.finfo(validation.resolve_dtype(dtype)).eps)
        return params["repeat"] * eps * np.abs(upstream.astype(np.float64)).sum(axis=0).max()

    def mistakes(self, params):
        token_table, ids, upstream = self.arguments(params)
        found = []
        for name, order in (("last", 1), ("first", -1)):
            grad = np.zeros(token_table.shape, np.float64)
            flat_ids, rows = (
                ids.reshape(-1)[::order],
                upstream.reshape(-1, DIM)[::order].astype(np.float64),
            )
            grad[flat_ids] = rows  # NumPy keeps the last write of a repeated index
            found.append((f"repeated ids summed once (W[ids] += g: the {name} term kept)", grad))
        if params.get("padding_idx") is not None:
            found.append(
                (
                    f"the padding row {params['padding_idx']} learns",
                    self.reference(params, padding=False),
                )
            )
        return found

    def classify_bad(self, params, actual):
        token_table, ids, upstream = self.arguments(params)
        if actual.shape != token_table.shape:
            return differs(f"returns shape {actual.shape} without raising")
        actual = actual.astype(np.float64)
        bad = params["bad"]
        flat, rows = ids.reshape(-1), upstream.reshape(-1, DIM).astype(np.float64)
        good = np.zeros(token_table.shape)
        np.add.at(good, flat[flat != bad], rows[flat != bad])
        if np.isnan(actual).any():
            return differs("fills NaN: a NaN gradient instead of an error")
        for name, row in (
            (f"clamps to row {min(max(bad, 0), VOCAB - 1)}", min(max(bad, 0), VOCAB - 1)),
            (f"wraps to row {bad % VOCAB}", bad % VOCAB),
        ):
            moved = good.copy()
            np.add.at(moved, np.full(int((flat == bad).sum()), row), rows[flat == bad])
            if np.array_equal(actual, _in(moved, upstream.dtype)):
                return differs(f"{name}: its upstream row trains another token, silently")
        if np.array_equal(actual, _in(good, upstream.dtype)):
            return differs("drops it: its upstream row is lost, silently")
        return differs("returns a gradient without raising (none of clamp, wrap, drop)")


def _in(grad: np.ndarray, dtype) -> np.ndarray:
    """A float64 gradient as the implementation returns it: rounded to its dtype (a row of
    several terms, where a bad id repeats in longer ids, sums to one rounding)."""
    return grad.astype(dtype).astype(np.float64)
