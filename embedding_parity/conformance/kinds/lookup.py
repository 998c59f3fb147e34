"""lookup: f(token_table, position_table, token_ids, start) -> x, token rows plus position rows;
bit for bit, and every bad id must raise.

The option ``table``, (vocab_size, dim, max_seq_len), sets the battery's tables to a port's own
shapes (a module built for its vocabulary), in place of the kit's (64, 8, 16); the bad ids then
count from that vocab_size, and Gemma's scaled lookup takes its vocab_size too.
"""

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
from embedding_parity.usage import UsageError

# The most values a ``table`` option's two tables may hold together (512 MiB in float64): they
# are built for every case, in the worker and again in the judge. GPT-2's are 39 million.
MOST_TABLE_VALUES = 2**26


def table_of(params: dict) -> tuple[int, int, int]:
    """(vocab_size, dim, max_seq_len) of the case's tables: the option's, else the kit's."""
    vocab, dim, length = params.get("table") or (VOCAB, DIM, MAX_SEQ_LEN)
    return vocab, dim, length


def battery_tables(params: dict):
    return backends.shared_weights(*table_of(params), seed=params["seed"], dtype=params["dtype"])


def neighbours(vocab: int) -> tuple[int, int]:
    """The valid ids on either side of a bad one: 3 and 5, or the last rows of a smaller table."""
    return min(3, vocab - 2), min(5, vocab - 1)


def battery_ids(params: dict) -> np.ndarray:
    if params.get("ids") is not None:  # the ids a case names (padding rows)
        return np.array(params["ids"], np.int64).reshape(params["shape"])
    vocab = table_of(params)[0]
    if params.get("bad") is not None:
        bad, (before, after) = params["bad"], neighbours(vocab)
        # [before, bad, after], repeated to the case's shape: along a path (--through) a bad
        # id is tried at every shape a valid case exports
        if bad == "1.5":
            return np.resize(np.array([before, 1.5, after], np.float32), params["shape"])
        return np.resize(np.array([before, bad, after], np.int64), params["shape"])
    rng = np.random.default_rng(params["seed"] + 1)
    # the table's ends, then at most two of each id, so that the gradient's rows sum at most
    # two terms (taken again in turn where a small vocabulary has fewer than the ids asked for)
    ends = table_ends(vocab)
    rest = np.concatenate([np.arange(vocab), np.setdiff1d(np.arange(vocab), ends)])
    ids = np.resize(np.concatenate([ends, rng.permutation(rest)]), math.prod(params["shape"]))
    return rng.permutation(ids).reshape(params["shape"]).astype(np.int64)


def table_ends(vocab: int) -> list[int]:
    """The rows every valid case reads, at both ends of a table of ``vocab`` rows: its first
    two and its last two. A fetch wrong only there (a bound off by one, row 0 or the last row
    taken for padding, a last tile or shard read wrong) is seen at any vocab_size, where a few
    random ids of a large table would almost never draw them."""
    return list(dict.fromkeys((0, 1, vocab - 2, vocab - 1)))


def bad_ids(vocab: int) -> dict:
    """BAD_IDS for a table of ``vocab`` rows."""
    return {**BAD_IDS, "vocab_size": vocab}


def checked_table(options: dict) -> list[int] | None:
    """The option ``table`` as [vocab_size, dim, max_seq_len] (JSON keeps lists), or None; a
    UsageError names a shape the battery cannot use, the limit and the fix."""
    table = options.get("table")
    if table is None:
        return None
    shaped = isinstance(table, list | tuple) and len(table) == 3
    if not shaped or any(isinstance(n, bool) or not isinstance(n, int | np.integer) for n in table):
        raise UsageError(
            f"table {table!r} is not (vocab_size, dim, max_seq_len): give three integers"
        )
    vocab, dim, length = (int(n) for n in table)
    if vocab < 3:
        raise UsageError(
            f"vocab_size {vocab} is under 3: a bad id's case looks up two valid ids beside it "
            "(and 1.5 truncates or rounds to rows 1 and 2); give at least 3 rows"
        )
    if dim < 1:
        raise UsageError(f"dim {dim} is under 1: give rows of at least one value")
    if length < T:
        raise UsageError(
            f"max_seq_len {length} is under {T}: the cases add {T} consecutive position rows; "
            f"give at least {T}"
        )
    if (vocab + length) * dim > MOST_TABLE_VALUES:
        raise UsageError(
            f"tables of (vocab_size {vocab} + max_seq_len {length}) * dim {dim} = "
            f"{(vocab + length) * dim} values are over the limit of {MOST_TABLE_VALUES}: the "
            "kit builds them again for every case; give a smaller vocab_size or dim"
        )
    return [vocab, dim, length]


def checked_tokenizer(options: dict, table) -> int | None:
    """The option ``tokenizer_size``, a table padded past its tokenizer: an integer in
    [1, vocab_size) of the option ``table``; UsageError otherwise."""
    tokenizer = options.get("tokenizer_size")
    if tokenizer is None:
        return None
    if table is None:
        raise UsageError("tokenizer_size goes with a table: the padding rows are the table's")
    if (
        isinstance(tokenizer, bool)
        or not isinstance(tokenizer, int)
        or not 1 <= tokenizer < table[0]
    ):
        raise UsageError(
            f"tokenizer_size {tokenizer!r} is not in [1, {table[0] - 1}]: padding rows lie past "
            f"the tokenizer's ids, inside the table's {table[0]} rows"
        )
    return tokenizer


class Lookup(Kind):
    name = "lookup"
    contract = (
        "f(token_table, position_table, token_ids, start) -> x, "
        "x[..., t, :] = token_table[token_ids[..., t]] + position_table[start + t]"
    )

    def cases(self, options):
        table = checked_table(options)
        given = {"table": table} if table else {}
        if options.get("embed_scale"):
            return _scaled_cases(options["embed_scale"], given)
        tokenizer = checked_tokenizer(options, table)
        vocab, _, length = table_of(given)
        found = []
        for dtype in FLOATS:
            for shape in ((T,), (3, T)):
                for start in dict.fromkeys((0, length - T)):  # one start if T fills the table
                    params = {"dtype": dtype, "shape": shape, "start": start, "seed": len(found)}
                    label = f"{len(shape)}-D ids, start {start}"
                    found.append(Case(f"forward {dtype}", label, params | given))
        if tokenizer is not None:  # the ids past the tokenizer, inside the table: rows
            ids = [tokenizer - 1, tokenizer, vocab - 1]
            params = {"dtype": "float32", "shape": (3,), "start": 0, "seed": len(found)}
            params |= {"ids": ids, "tokenizer_size": tokenizer}
            label = f"token_ids {ids}: past the tokenizer's {tokenizer} ids, in the table's {vocab}"
            found.append(Case("padding rows", label, params | given))
        for label, bad in {**bad_ids(vocab), "non-integer (1.5)": "1.5"}.items():
            params = {"dtype": "float32", "shape": (3,), "start": 0, "seed": 0, "bad": bad}
            found.append(Case(f"bad id: {label}", _bad_label(vocab, bad), params | given))
        return found

    def judge(self, case, outcome):
        tokenizer = case.params.get("tokenizer_size")
        if tokenizer is not None and outcome.raised:
            return differs(
                f"raises {outcome.raised} for ids past the tokenizer's {tokenizer} but inside "
                "the table: padding rows are rows (the ids bounded by the tokenizer's size, "
                "not the table's)"
            )
        return super().judge(case, outcome)

    def describe(self, options):
        table = checked_table(options)
        if options.get("embed_scale"):
            said = (
                "f(token_table, token_ids) -> token_table[token_ids] * s, s = sqrt(hidden_size) "
                "rounded to the table's dtype first (Gemma)"
            )
            return f"{said}; token_table ({table[0]}, {table[1]})" if table else said
        if table:
            vocab, dim, length = table
            said = (
                f"{self.contract}; token_table ({vocab}, {dim}), position_table ({length}, {dim})"
            )
            tokenizer = checked_tokenizer(options, table)
            if tokenizer is not None:
                said += f"; rows {tokenizer} to {vocab - 1} padding past the tokenizer's ids"
            return said
        return self.contract

    def argument_names(self, params):
        if params.get("scaled"):
            return ["token_table", "token_ids"]
        return super().argument_names(params)

    def arguments(self, params):
        if params.get("scaled"):
            shape = (table_of(params)[0], params["scaled"])  # (vocab_size, hidden_size)
            table = np.random.default_rng(params["seed"]).standard_normal(shape)
            return [table.astype(validation.resolve_dtype(params["dtype"])), battery_ids(params)]
        token_table, position_table = battery_tables(params)
        return [token_table, position_table, battery_ids(params), params["start"]]

    def reference(self, params):
        if params.get("scaled"):
            return positional.scaled_embedding(*self.arguments(params)).astype(np.float64)
        return _summed(*self.arguments(params))

    def mistakes(self, params):
        if params.get("scaled"):
            return _scale_mistakes(*self.arguments(params))
        token_table, position_table, ids, start = self.arguments(params)

        def summed(at=start, positions=True):
            return _summed(token_table, position_table, ids, at, positions=positions)

        found = [("positions not added (token rows only)", summed(positions=False))]
        if token_table.dtype == np.float64:  # the tables rounded to float32 and summed there
            narrow = _summed(
                token_table.astype(np.float32), position_table.astype(np.float32), ids, start
            )
            found.append(
                (
                    "computed in float32 (the float64 tables rounded to it)",
                    narrow.astype(np.float32).astype(np.float64),
                )
            )
        if start:
            found.append((f"start ignored (positions from 0, not {start})", summed(0)))
        for k in (-1, 1):
            if 0 <= start + k <= len(position_table) - ids.shape[-1]:
                found.append((f"position off by {k:+d} (start + {k})", summed(start + k)))
        return found

    def classify_bad(self, params, actual):
        if params.get("scaled"):
            return differs(
                f"returns {actual.dtype.name} {actual.shape} for a bad id without raising"
            )
        token_table, position_table, ids, start = self.arguments(params)
        if actual.shape != (*ids.shape, token_table.shape[1]) or actual.dtype.name not in FLOATS:
            return differs(f"returns {actual.dtype.name} {actual.shape} without raising")
        row = actual.reshape(-1, token_table.shape[1])[1]  # the first bad id, at start + 1
        return differs(_bad_row(params["bad"], row, token_table, position_table[start + 1]))


def _summed(token_table, position_table, ids, start, *, positions=True) -> np.ndarray:
    """float64 (..., T, dim): the token rows of ids, plus the position rows from start."""
    x = token_table.astype(np.float64)[ids]
    if positions:
        x += position_table.astype(np.float64)[start : start + ids.shape[-1]]
    return x


def _bad_label(vocab: int, bad) -> str:
    before, after = neighbours(vocab)
    return f"token_ids [{before}, {bad}, {after}]"


def _bad_row(bad, row, token_table, position_row) -> str:
    """What a returned row for a bad id is: NaN, a clamped, wrapped or zero row, or other
    (each candidate rounded to the row's dtype, as the implementation adds)."""
    if np.isnan(np.asarray(row, np.float64)).any():
        return "fills NaN: a NaN row instead of an error"
    vocab = len(token_table)
    if bad == "1.5":
        candidates = {"truncates 1.5 to 1": 1, "rounds 1.5 to 2": 2}
    else:
        clamped, wrapped = min(max(bad, 0), vocab - 1), bad % vocab
        candidates = {f"clamps to row {clamped}": clamped, f"wraps to row {wrapped}": wrapped}
        if clamped == wrapped:  # 2**31 - 33 where vocab_size divides 2**31 - 32 (32, say)
            candidates = {f"clamps or wraps to row {clamped} (the same row here)": clamped}
    position = position_row.astype(np.float64)
    for name, index in candidates.items():
        expected = numerics.rounded(
            token_table[index].astype(np.float64) + position, row.dtype.name
        )
        if numerics.same_bits(row, expected):
            return f"{name}: a silent wrong answer"
    if numerics.same_bits(row, numerics.rounded(position, row.dtype.name)):
        return "zero row (position only): a silent wrong answer"
    return "a row that is no table row (none of clamp, wrap, NaN, zero): a silent wrong answer"


# --- with a scaled configuration: Gemma's f(token_table, token_ids) ------------------------


def _scaled_cases(hidden: int, given: dict) -> list[Case]:
    """Gemma's lookup f(token_table, token_ids) -> rows * sqrt(hidden), the scale rounded to
    the dtype first, over tables of the config's width (and ``given``'s vocab_size)."""
    vocab, dim, _ = table_of(given)
    if given and dim != hidden:
        raise UsageError(
            f"table dim {dim} where the config's hidden_size is {hidden}: Gemma's table is "
            f"that wide; give a table of dim {hidden}, or leave the table out"
        )
    width = f"table ({vocab}, {hidden})" if given else f"width {hidden}"
    found = []
    for dtype in FLOATS:
        for shape in ((T,), (3, T)):
            params = {"dtype": dtype, "shape": shape, "seed": len(found), "scaled": hidden}
            found.append(Case(f"scaled {dtype}", f"{len(shape)}-D ids, {width}", params | given))
    for label, bad in bad_ids(vocab).items():
        params = {"dtype": "float32", "shape": (3,), "seed": 0, "bad": bad, "scaled": hidden}
        found.append(Case(f"bad id: {label}", _bad_label(vocab, bad), params | given))
    return found


def _scale_mistakes(table, ids) -> list[tuple[str, np.ndarray]]:
    rows = table[ids].astype(np.float64)
    hidden, dtype = table.shape[1], table.dtype
    exact = math.sqrt(hidden)
    buffer = float(np.float32(exact))
    scale = float(positional.embedding_scale(hidden, dtype))
    older = (
        "the rule of transformers before 5.4, google/gemma_pytorch and torchtune (torch.tensor("
        f"sqrt(h), dtype)), where transformers 5.4 and later keep it as a float32 buffer "
        f"({buffer:.9g}) cast to {dtype.name}"
    )
    if dtype == np.float64:  # the exact value is float64's: the older rule's
        first = f"sqrt({hidden}) as float64's {exact:.9g}: {older}"
    else:
        first = f"sqrt({hidden}) unrounded: the exact {exact:.6g}, the product rounded once"
    straight = float(dtype.type(exact))
    found = [
        (first, rows * exact),
        *(
            [
                (
                    f"sqrt({hidden}) rounded straight to {dtype.name} ({straight:.6g}): {older}",
                    rows * straight,
                )
            ]
            if straight != scale and dtype != np.float64
            else []
        ),
        (
            (
                f"the scale applied twice (x {scale:.6g}, then again): since transformers 5.4 it "
                "lives in the embedding module, and a port that also scales in forward doubles it "
                "(TransformerLens PR #1315)"
            ),
            (rows * scale).astype(dtype).astype(np.float64) * scale,
        ),
    ]
    for other in FLOATS:
        scale = float(positional.embedding_scale(hidden, other))
        if other != dtype.name and scale != float(positional.embedding_scale(hidden, dtype)):
            found.append(
                (f"sqrt({hidden}) rounded to {other} ({scale:.6g}), not {dtype.name}", rows * scale)
            )
    found.append(("no scale (token rows as stored)", rows))
    return found
