"""quantized_lookup: f(blocks, format, token_ids) -> rows, a GGUF-quantized token table's rows
fetched from its bytes; bit for bit ``gguf.quants.dequantize(blocks, format)[token_ids]``.

``blocks`` is the table as a GGUF file stores it, (vocab_size, row_bytes) uint8, one row per
token; ``format`` its ggml type's name (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K:
``backends.quantized``); the result is float32, (..., T, dim). Every value is a float16 scale
times a small integer (exact in float32), plus or minus a min (one rounding), so there is no
tolerance. The battery's tables hold random bytes with finite scales, 64 rows, and each
format is asked three ways: ids from the table's first half, its first two rows among them, in
rows of two blocks (so that a port which counts its row offset in elements stays inside the
bytes and its answer can be named); ids from both halves and both ends (the first two rows and
the last two); and rows of three blocks (an odd count: a pairwise loop that forgets its tail
drops the last). A port may refuse a format it does not read, its error
naming the format: that row says so; any other error on a valid case is a valid input refused,
and it may never return another table's values.

The mistakes (vLLM PR #30424, llama.cpp #13839, defenseclaw PR #679): the bytes read as
floats, the float16 scale read as another type, the row offset counted in elements instead of
blocks, the nibbles in the wrong order, a K format's sub-block scales ignored.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from backends import quantized
from embedding_parity.conformance import numerics, versions
from embedding_parity.conformance.kinds.base import (
    BAD_IDS,
    VOCAB,
    Case,
    Kind,
    T,
    Verdict,
    differs,
    names,
)
from embedding_parity.conformance.kinds.lookup import table_ends
from embedding_parity.usage import UsageError

BAD_FORMATS = ("Q8_0", "Q4_K")  # one of each block size tries the bad ids
# (shape of the ids, blocks per row, the rows they fetch): each format's cases
FIRST_HALF, EVERYWHERE = "the first half, rows 0 and 1 among them", "both halves and both ends"
ASKED = (((T,), 2, FIRST_HALF), ((3, T), 2, EVERYWHERE), ((T,), 3, EVERYWHERE))


class QuantizedLookup(Kind):
    name = "quantized_lookup"
    contract = (
        "f(blocks, format, token_ids) -> rows (..., T, dim) float32, blocks (vocab_size, "
        "row_bytes) uint8 as a GGUF file stores the table: gguf.quants.dequantize(blocks, "
        "format)[token_ids], for format Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K"
    )
    packages = ("gguf",)  # the reference: gguf.quants.dequantize

    def cases(self, options):
        absent = versions.missing(self.packages)
        if absent:
            said = versions.not_installed(absent)
            raise UsageError(f"{self.name}'s reference is gguf.quants.dequantize: {said}")
        found = []
        for kind in quantized.KINDS:
            for shape, blocks, rows in ASKED:
                params = {"format": kind, "shape": shape, "blocks": blocks, "rows": rows}
                params |= {"seed": len(found), "dtype": "float32"}
                label = f"{len(shape)}-D ids from {rows}, {_width(kind, blocks)}"
                found.append(Case(f"{kind} rows", label, params))
        for kind in BAD_FORMATS:
            for label, bad in BAD_IDS.items():
                params = {"format": kind, "shape": (3,), "blocks": 2, "seed": 0, "dtype": "float32"}
                params["bad"] = bad
                found.append(Case(f"bad id: {label}", f"{kind}, token_ids [3, {bad}, 5]", params))
        return found

    def argument_names(self, params):
        return ["blocks", "format", "token_ids"]

    def arguments(self, params):
        kind = params["format"]
        blocks = quantized.random_blocks(kind, VOCAB, _dim(params), seed=params["seed"])
        if params.get("bad") is not None:
            ids = np.resize(np.array([3, params["bad"], 5], np.int64), params["shape"])
        else:
            ids = _ids(params)
        return [blocks, kind, ids]

    def reference(self, params):
        blocks, kind, ids = self.arguments(params)
        table = quantized.QuantizedTable(kind, blocks, _dim(params))
        return quantized.owner_rows(table, ids).astype(np.float64)

    def expected_dtype(self, params, actual):
        return "float32"

    def mistakes(self, params):
        blocks, kind, ids = self.arguments(params)
        dim = _dim(params)

        def read(rows, ops=quantized.NUMPY):
            values = quantized.decode(ops, kind, rows).astype(np.float64)
            return values.reshape(*ids.shape, dim)

        rows = blocks[ids.reshape(-1)]
        found = [
            ("the float16 scale read as bfloat16", read(rows, _ScaleAs(ml_dtypes.bfloat16))),
            ("the float16 scale read as an integer (uint16)", read(rows, _ScaleAs(np.uint16))),
        ]
        if kind in quantized.NIBBLES:
            first, last = quantized.NIBBLES[kind]
            swapped = _blockwise(rows, kind).copy()
            part = swapped[:, first:last]
            swapped[:, first:last] = (part >> 4) | (part << 4)
            name = "the nibbles in the wrong order (high before low)"
            found.append((name, read(swapped.reshape(rows.shape))))
        if kind.endswith("_K"):
            plain = _blockwise(rows, kind).copy()
            if kind == "Q4_K":  # every 6-bit scale and min 1: d * q - dmin
                plain[:, 4:8], plain[:, 8:12], plain[:, 12:16] = 1, 1, 0x11
            else:  # every int8 scale 1: d * q
                plain[:, 192:208] = 1
            name = "the sub-block scales ignored (the super-block's d and dmin alone)"
            found.append((name, read(plain.reshape(rows.shape))))
        flat, row_bytes = blocks.reshape(-1), blocks.shape[1]
        starts = ids.reshape(-1) * dim  # the row's bytes from id * dim, counted in elements
        if (starts + row_bytes <= flat.size).all():
            shifted = np.stack([flat[s : s + row_bytes] for s in starts])
            found.append(
                ("the row offset counted in elements (id * dim), not blocks", read(shifted))
            )
        return found

    def compare(self, params, actual):
        blocks, _, ids = self.arguments(params)
        if actual.shape == (*ids.shape, blocks.shape[1]):
            raw = blocks[ids]
            for name, values in (("uint8", raw), ("int8", raw.view(np.int8))):
                if np.array_equal(actual.astype(np.float64), values.astype(np.float64)):
                    return differs(
                        f"shape {actual.shape}: quantized bytes read as floats, each byte a value "
                        f"({name}): the table's bytes looked up as if they were its rows "
                        "(F.embedding on the packed weight, vLLM PR #30424)"
                    )
        return super().compare(params, actual)

    def raised_on_valid(self, params, raised):
        """A format the target does not read, where its error names it (float32 is the only
        dtype here); any other error on a valid case is a valid input refused."""
        kind = params["format"]
        if names(raised, (kind,)):
            return Verdict("rejected", f"rejects {kind}: {raised}")
        return differs(
            f"raises {raised} on a valid input (an error that does not name {kind} is no "
            "refusal of the format)"
        )

    def classify_bad(self, params, actual):
        blocks, kind, ids = self.arguments(params)
        dim = _dim(params)
        if actual.shape != (*ids.shape, dim):
            return differs(f"returns {actual.dtype.name} {actual.shape} without raising")
        row = actual.reshape(-1, dim)[1].astype(np.float64)
        bad = params["bad"]
        clamped, wrapped = min(max(bad, 0), VOCAB - 1), bad % VOCAB
        table = quantized.QuantizedTable(kind, blocks, dim)
        for name, index in {
            f"clamps to row {clamped}": clamped,
            f"wraps to row {wrapped}": wrapped,
        }.items():
            expected = quantized.owner_rows(table, np.array([index]))[0].astype(np.float64)
            if numerics.same_bits(row, expected):
                return differs(f"{name}: a silent wrong answer")
        return differs("a row that is no table row without raising: a silent wrong answer")


def _dim(params: dict) -> int:
    return quantized.BLOCKS[params["format"]][0] * params["blocks"]


def _ids(params: dict) -> np.ndarray:
    """A valid case's ids: the table's first two rows and more from its first half; or both its
    ends and as many more from each half (a fetch wrong past half the table, or near either of
    its ends, is seen)."""
    rng = np.random.default_rng(params["seed"] + 1)
    size = int(np.prod(params["shape"]))
    ends = table_ends(VOCAB)
    if params["rows"] == FIRST_HALF:
        ends = [i for i in ends if i < VOCAB // 2]
        drawn = rng.integers(0, VOCAB // 2, size - len(ends))
    else:
        lower = (size - len(ends)) // 2
        drawn = np.concatenate(
            [
                rng.integers(0, VOCAB // 2, lower),
                rng.integers(VOCAB // 2, VOCAB, size - len(ends) - lower),
            ]
        )
    ids = rng.permutation(np.concatenate([ends, drawn]))
    return ids.reshape(params["shape"]).astype(np.int64)


def _width(kind: str, blocks: int) -> str:
    dim, type_size = quantized.BLOCKS[kind][0] * blocks, quantized.BLOCKS[kind][1]
    return f"table ({VOCAB}, {dim}), rows of {blocks} blocks of {type_size} bytes"


def _blockwise(rows: np.ndarray, kind: str) -> np.ndarray:
    return rows.reshape(-1, quantized.BLOCKS[kind][1])


class _ScaleAs(type(quantized.NUMPY)):
    """NumPy's decoding, with every float16 scale's two bytes read as ``dtype`` instead."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)

    def float16(self, pair):
        return np.ascontiguousarray(pair).view(self.dtype).astype(np.float32)
