"""rope_invariance and lookup_invariance: one question asked of a target two ways, its two
answers held to each other. They catch a kernel without knowing it: a batch written only in
its first row (mlx #3494, #3949), positions not reset per packed document (OLMo-core PR #591),
one position row for a left-padded batch (unsloth #3699), chunked prefill counting its offset
twice (mlx-node PR #33), a strided input read as contiguous (llama.cpp PR #14580), a shared
cache that a call in another dtype recasts for later calls (vLLM's get_rope).

Each case is a plan: the calls to make (``plan``) and how their results compose into the one
call's shape (``compose``). The worker makes the calls, copying each answer as its call
returns (a target that answers in one reused buffer would otherwise give every call the last
one's answer), and returns the two answers stacked, (2, ...): the one call's first. They conform bit-identical, or within the kind's bound (a
rotation's per-element bound, ``positional.rope_bound``; a lookup's is 0: a gather and an add
are exact); else the verdict names the batch rows and positions where they differ.

They are asked with their kind by default (``check --kind rope``: ``runner.asked_twice``),
their checks part of its verdict: a kernel right once and wrong in a batch is wrong.
The target takes the contract of its kind (``rope``: f(x, positions), with the options
``batched`` and ``qk``; ``lookup``: f(token_table, position_table, token_ids, start)). A
lookup's positions are ``start`` + t, one run per call: its packed and left-padded
invariances are the rope kind's (a learned table's per-token positions are the position_ids
kind's).
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from backends import positional, validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.frameworks import Strided
from embedding_parity.conformance.kinds.base import Case, Kind, conforms, differs
from embedding_parity.conformance.kinds.lookup import battery_tables, table_of
from embedding_parity.conformance.kinds.rope import HEADS, _rope, left_padded
from embedding_parity.usage import UsageError

ROWS, LENGTH = 4, 16  # a batch of 4 rows; 16 tokens where a check has more than one
# decode at positions of different sequence lengths: one token per row
DECODE = np.array([[5], [17], [2], [300]])
# three documents packed in one row, each counting from 0
DOCUMENTS = (5, 7, 4)
OFFSET, CHUNKS = 100, (0, 6, 11, LENGTH)  # chunked prefill: tokens 0..5, 6..10, 11..15
PADS = (3, 0, 5, 1)  # left pads of each row of a padded batch
OTHER_DTYPE = "bfloat16"  # the call in another dtype between two float32 calls


def _starts(lengths) -> list[int]:
    return [0, *np.cumsum(lengths).tolist()]


class Invariance(Kind):
    """The invariances of ``of``'s contract (``rope`` or ``lookup``)."""

    exact = False

    def __init__(self, of: str):
        self.of = of
        self.name = f"{of}_invariance"
        self.contract = (
            "the rope kind's f(x, positions): the same rotation asked two ways gives the same "
            "answer (a batch and its rows, packed documents and each alone, a left-padded row "
            "and the row alone, chunks and one call, a strided x and a contiguous one, q and k "
            "in one call and in two, a call before and after one in another dtype)"
            if of == "rope"
            else "the lookup kind's f(token_table, position_table, token_ids, start): the same "
            "lookup asked two ways gives the same bits (a batch and its rows, chunks and one "
            "call, strided ids and contiguous ones, a call before and after one in another "
            "dtype)"
        )

    # --- the battery -------------------------------------------------------------------

    def cases(self, options):
        if self.of == "lookup":
            if options.get("embed_scale"):
                raise UsageError(
                    "lookup_invariance takes f(token_table, position_table, token_ids, start), "
                    "not Gemma's scaled f(token_table, token_ids)"
                )
            checks = LOOKUP_CHECKS
            given = {"table": options["table"]} if options.get("table") else {}
        else:
            rope = _rope(options)
            if options.get("layers") and options.get("layer_type") is None:
                raise UsageError(
                    "rope_invariance asks one rotation, f(x, positions): name one layer type "
                    "of a config whose layers rotate differently (--layer-type)"
                )
            if rope.get("mrope") or rope.get("nope"):
                raise UsageError(
                    "rope_invariance takes one rotation of positions (T,) or (B, T), not "
                    "M-RoPE's positions (3, T), nor a layer type that rotates nothing (NoPE)"
                )
            if rope.get("rotary_last"):
                raise UsageError(
                    "rope_invariance bounds a rotation of the first dims of each head, not "
                    f"llama.cpp's of the last {rope['rotary_dim']} (rotary_last)"
                )
            batched, qk = bool(options.get("batched")), bool(options.get("qk"))
            checks = [
                (check, where)
                for check, where in ROPE_CHECKS
                if (batched or check != "left-padded batch = each row alone")
                and (qk or check != "q and k in one call = two calls")
            ]
            given = {"rope": rope, "batched": batched, "qk": qk}
        return [
            Case(check, where, {"invariance": check, "dtype": "float32", "seed": i, **given})
            for i, (check, where) in enumerate(checks)
        ]

    def describe(self, options):
        return self.contract

    def argument_names(self, params):
        if self.of == "lookup":
            return ["token_table", "position_table", "token_ids", "start"]
        return ["q", "k", "positions"] if params.get("qk") else ["x", "positions"]

    def arguments(self, params):
        """The one call's arguments (the plan's first call)."""
        return [a.value if isinstance(a, Strided) else a for a in self.plan(params)[0][0]]

    def most_elements(self, params):
        """Both answers: the one call's result twice (x's shape, q's and k's; a lookup's ids
        each a row of the table's width)."""
        arguments = self.arguments(params)
        if self.of == "lookup":
            return 2 * int(np.size(arguments[2]) * arguments[0].shape[1])
        return 2 * int(sum(np.size(a) for a in arguments[: 2 if params.get("qk") else 1]))

    # --- the plan: the calls, and how their answers compose --------------------------------

    def plan(self, params) -> list[tuple[list, bool]]:
        """[(arguments, required)] of each call, the one call first; a call not required (the
        other dtype's) may raise: only what it leaves behind is judged."""
        return (self._lookup_plan if self.of == "lookup" else self._rope_plan)(params)

    def compose(self, params, results: list) -> tuple[np.ndarray, np.ndarray]:
        """(the one call's answer, the others' composed to its shape): results of the plan's
        calls in order (None for a call that raised and was not required)."""
        check, whole = params["invariance"], results[0]
        if check.startswith("batch"):
            axis = -4 if self.of == "rope" else -3
            if self.of == "rope" and params.get("batched"):  # rows called as (1, H, T, d)
                return whole, np.concatenate(results[1:], axis=axis)
            return whole, np.stack(results[1:], axis=axis)
        if check.startswith(("packed", "chunked")):
            return whole, np.concatenate(results[1:], axis=-2)
        if check.startswith("left-padded"):
            composed = np.array(whole, copy=True)  # padded slots: not compared
            for row, (pad, alone) in enumerate(zip(PADS, results[1:])):
                composed[..., row : row + 1, :, pad:, :] = alone
            return whole, composed
        if check.startswith("q and k"):
            return whole, np.stack([results[1][0], results[2][0]])
        if check.startswith("a call in another dtype"):
            return whole, results[2]
        return whole, results[1]  # strided

    def _rope_plan(self, params):
        rng = np.random.default_rng(params["seed"])
        check, head = params["invariance"], params["rope"]["head_dim"]
        dtype = validation.resolve_dtype(params["dtype"])
        batched, qk = params.get("batched"), params.get("qk")

        def x(*shape):
            return rng.standard_normal((*shape, head)).astype(dtype)

        def call(xs, positions):
            """The call's arguments: x alone, or q and k (the same x for both unless given)."""
            xs = xs if isinstance(xs, tuple) else (xs, xs)
            return ([*xs, positions] if qk else [xs[0], positions]), True

        rows = np.arange(ROWS)[:, None]
        if check.startswith("batch"):
            decode = "T = 1" in check
            if batched:  # positions (B, T): each row its own
                positions = DECODE if decode else np.arange(LENGTH) + 10 * rows
            else:  # positions (T,) shared by the rows of x (B, H, T, d)
                positions = DECODE[1] if decode else np.arange(LENGTH)
            xs = x(ROWS, HEADS, 1 if decode else LENGTH)
            alone = [
                call(xs[b : b + 1], positions[b : b + 1]) if batched else call(xs[b], positions)
                for b in range(ROWS)
            ]
            return [call(xs, positions), *alone]
        shape = (ROWS, HEADS, LENGTH) if batched else (HEADS, LENGTH)
        if check.startswith("packed"):
            xs, row = x(*shape), positional.packed_position_ids(DOCUMENTS)
            positions = np.tile(row, (ROWS, 1)) if batched else row
            starts = _starts(DOCUMENTS)
            alone = [
                call(np.ascontiguousarray(xs[..., s:e, :]), positions[..., s:e].copy())
                for s, e in pairwise(starts)
            ]
            return [call(xs, positions), *alone]
        if check.startswith("left-padded"):
            positions = left_padded(np.array([[0] * pad + [1] * (LENGTH - pad) for pad in PADS]))
            xs = x(ROWS, HEADS, LENGTH)
            alone = [
                call(
                    np.ascontiguousarray(xs[b : b + 1, :, pad:]), positions[b : b + 1, pad:].copy()
                )
                for b, pad in enumerate(PADS)
            ]
            return [call(xs, positions), *alone]
        if check.startswith("chunked"):
            xs = x(*shape)
            positions = OFFSET + np.arange(LENGTH) + (0 * rows if batched else 0)
            chunks = [
                call(np.ascontiguousarray(xs[..., s:e, :]), positions[..., s:e].copy())
                for s, e in pairwise(CHUNKS)
            ]
            return [call(xs, positions), *chunks]
        # the rest: rows at positions of their own where the call takes (B, T)
        positions = np.arange(LENGTH) + (10 * rows if batched else 0)
        if check.startswith("strided"):
            # x stored tokens before heads, (T, H, d) as a projection writes it, seen (H, T, d)
            stored = x(ROWS, LENGTH, HEADS) if batched else x(LENGTH, HEADS)
            seen = Strided(stored, (0, 2, 1, 3) if batched else (1, 0, 2))
            return [call(np.ascontiguousarray(seen.value), positions), call(seen, positions)]
        if check.startswith("q and k"):
            q, k = x(*shape), x(*shape)
            return [call((q, k), positions), call((q, q), positions), call((k, k), positions)]
        # a call in another dtype between two float32 calls, at long positions
        xs, positions = x(*shape), positions + 1000
        first, _ = call(xs, positions)
        middle, _ = call(xs.astype(validation.resolve_dtype(OTHER_DTYPE)), positions)
        return [(first, True), (middle, False), (list(first), True)]

    def _lookup_plan(self, params):
        token_table, position_table = battery_tables(params)
        vocab, _, length = table_of(params)
        rng = np.random.default_rng(params["seed"] + 1)
        check = params["invariance"]

        def ids(*shape):
            return rng.integers(0, vocab, shape).astype(np.int64)

        def call(token_ids, start):
            return [token_table, position_table, token_ids, start], True

        if check.startswith("batch"):
            width = 1 if "T = 1" in check else min(LENGTH, length)
            start = length - width if width == 1 else 0
            batch = ids(ROWS, width)
            return [call(batch, start), *(call(batch[b], start) for b in range(ROWS))]
        if check.startswith("chunked"):
            width = min(LENGTH, length)
            batch = ids(ROWS, width)
            cuts = [c for c in CHUNKS if c < width] + [width]
            chunks = [call(np.ascontiguousarray(batch[:, s:e]), s) for s, e in pairwise(cuts)]
            return [call(batch, 0), *chunks]
        if check.startswith("strided"):
            width = min(LENGTH, length)
            seen = Strided(ids(width, ROWS), (1, 0))  # ids stored tokens first, seen (B, T)
            return [call(np.ascontiguousarray(seen.value), 0), call(seen, 0)]
        # a call in another dtype between two float32 calls
        batch = ids(ROWS, min(LENGTH, length))
        other = validation.resolve_dtype(OTHER_DTYPE)
        first, _ = call(batch, 0)
        middle = [token_table.astype(other), position_table.astype(other), batch, 0]
        return [(first, True), (middle, False), (list(first), True)]

    # --- the judgement -----------------------------------------------------------------

    def reference(self, params):
        """No float64 answer: the one call's answer is what the others are held to."""
        raise NotImplementedError("an invariance holds a target to itself")

    def compare(self, params, actual):
        if actual.ndim < 1 or actual.shape[0] != 2:
            return differs(f"shape {actual.shape}: the plan's answers did not stack as (2, ...)")
        whole, composed = actual[0], actual[1]
        if numerics.same_bits(whole, composed):
            return conforms(f"bit-identical: {self._asked(params)}")
        bound = self._bound(params, whole)
        difference = np.abs(whole.astype(np.float64) - composed.astype(np.float64))
        apart = ~(difference <= bound)  # NaN apart too
        same_nan = np.isnan(whole.astype(np.float64)) & np.isnan(composed.astype(np.float64))
        apart &= ~same_nan
        # the largest difference where they differ (a NaN in both, in one place, is no difference)
        largest = float(np.where(same_nan, 0.0, np.nan_to_num(difference, nan=np.inf)).max())
        if not apart.any():
            return conforms(
                f"within the kind's bound: {self._asked(params)}, apart by at most "
                f"{largest:.2g} (bits differ)"
            )
        return differs(
            f"{self._asked(params)} differ: {self._where(params, apart)}; by up to {largest:.3g}"
        )

    def _asked(self, params) -> str:
        return ASKED[params["invariance"]]

    def _bound(self, params, whole):
        """The kind's per-element bound at the one call (0 for a lookup: it is exact)."""
        if self.of == "lookup":
            return 0.0
        rope = params["rope"]
        positions = np.asarray(self.arguments(params)[-1])

        def bound(xs, at):
            return positional.rope_bound(
                xs,
                at,
                base=rope["base"],
                layout=rope["layout"],
                scaling=rope["scaling"],
                rotary_dim=rope.get("rotary_dim"),
                dtype=params["dtype"],
            )

        def one(x):
            x = np.asarray(x, np.float64)
            if positions.ndim == 2:  # (B, T): each row at its own positions
                return np.stack([bound(x[b], positions[b]) for b in range(len(positions))])
            return bound(x, positions)

        arguments = self.arguments(params)
        if params.get("qk"):  # the answer is q and k stacked
            return 2 * np.stack([one(arguments[0]), one(arguments[1])])
        return 2 * one(arguments[0])  # each answer within the contract's bound: twice it apart

    def _where(self, params, apart) -> str:
        """The batch rows and the positions whose elements differ."""
        arguments = self.arguments(params)
        rope = self.of == "rope"
        positions = np.asarray(arguments[-1]) if rope else arguments[3] + np.arange(apart.shape[-2])
        token = apart.ndim - 2
        rowed = (
            positions.ndim == 2
            or params["invariance"].startswith("batch")
            or (not rope and apart.ndim >= 3)
        )
        row = apart.ndim - (4 if rope else 3) if rowed else None
        kept = tuple(a for a in (row, token) if a is not None)
        mask = apart.any(axis=tuple(a for a in range(apart.ndim) if a not in kept))  # (B?, T)
        said = []
        if row is not None:
            rows = np.flatnonzero(mask.any(axis=-1))
            said.append(f"batch rows {_listed(rows)} of {apart.shape[row]}")
        at = (
            positions[mask]
            if positions.ndim == 2
            else positions[mask.any(axis=0) if mask.ndim == 2 else mask]
        )
        said.append(f"positions {_listed(np.unique(at))}")
        return ", ".join(said)


def _listed(values, most: int = 8) -> str:
    values = [int(v) for v in values]
    shown = ", ".join(map(str, values[:most]))
    return f"[{shown}{', ...' if len(values) > most else ''}]"


ROPE_CHECKS = (
    (
        "batch = row by row, T = 1 (decode)",
        f"x ({ROWS}, {HEADS}, 1, d): the batch, then each row alone",
    ),
    (
        "batch = row by row, T > 1",
        f"x ({ROWS}, {HEADS}, {LENGTH}, d): the batch, then each row alone",
    ),
    (
        "packed documents = each document alone",
        f"documents of {', '.join(map(str, DOCUMENTS))} tokens in one row, positions restarting at 0",
    ),
    (
        "left-padded batch = each row alone",
        f"rows left-padded by {', '.join(map(str, PADS))}, positions cumsum(mask) - 1",
    ),
    (
        "chunked prefill = one call",
        f"positions {OFFSET}..{OFFSET + LENGTH - 1} in chunks of 6, 5 and 5 tokens",
    ),
    ("strided x = contiguous x", "x stored (T, H, d), seen (H, T, d) without a copy"),
    ("q and k in one call = two calls", "f(q, k) against f(q, q) and f(k, k)"),
    (
        "a call in another dtype leaves later calls unchanged",
        f"float32, then {OTHER_DTYPE}, then float32 again, at positions from 1000",
    ),
)
LOOKUP_CHECKS = (
    ("batch = row by row, T = 1 (decode)", f"ids ({ROWS}, 1): the batch, then each row alone"),
    ("batch = row by row, T > 1", f"ids ({ROWS}, {LENGTH}): the batch, then each row alone"),
    ("chunked prefill = one call", "ids in chunks of 6, 5 and 5 tokens, start at each chunk's"),
    ("strided ids = contiguous ids", "ids stored (T, B), seen (B, T) without a copy"),
    (
        "a call in another dtype leaves later calls unchanged",
        f"float32 tables, then {OTHER_DTYPE}, then float32 again",
    ),
)
ASKED = {
    "batch = row by row, T = 1 (decode)": "the batch and its rows alone",
    "batch = row by row, T > 1": "the batch and its rows alone",
    "packed documents = each document alone": "the packed row and its documents alone",
    "left-padded batch = each row alone": "the padded batch and each row alone (pads not compared)",
    "chunked prefill = one call": "one call and its chunks",
    "strided x = contiguous x": "a strided x and a contiguous copy",
    "strided ids = contiguous ids": "strided ids and a contiguous copy",
    "q and k in one call = two calls": "q and k in one call and in two",
    "a call in another dtype leaves later calls unchanged": (
        f"a float32 call before and after a {OTHER_DTYPE} call"
    ),
}
