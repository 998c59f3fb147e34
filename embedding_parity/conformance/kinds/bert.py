"""bert: f(word_table, type_table, position_table, input_ids, token_type_ids, start) -> x,
BERT's input layer before its LayerNorm, bit for bit.

x = (word_table[input_ids] + type_table[token_type_ids]) + position_table[start + t]: two
additions in that order, each rounded to the tables' dtype, as transformers'
``BertEmbeddings`` adds (a defined sequence of IEEE operations, so the reference is that
sequence, not a float64 sum rounded once). The LayerNorm after it is each framework's own op
and outside the contract (``backends.positional.bert_embeddings`` has it, for the library).
"""

from __future__ import annotations

import math

import numpy as np

import backends
from backends import positional
from embedding_parity.conformance.kinds.base import (
    DIM,
    MAX_SEQ_LEN,
    VOCAB,
    Case,
    Kind,
    T,
    differs,
)
from embedding_parity.conformance.numerics import FLOATS


class Bert(Kind):
    name = "bert"
    contract = (
        "f(word_table, type_table, position_table, input_ids, token_type_ids, start) -> "
        "(word_table[input_ids] + type_table[token_type_ids]) + position_table[start + t], "
        "each add in the tables' dtype (before the LayerNorm)"
    )

    def cases(self, options):
        types = options.get("type_vocab_size") or 2
        found = []
        for dtype in FLOATS:
            for shape in ((T,), (3, T)):
                for start in (0, MAX_SEQ_LEN - T):
                    params = {"dtype": dtype, "shape": shape, "start": start, "types": types}
                    params["seed"] = len(found)
                    found.append(Case(f"sum {dtype}", f"{len(shape)}-D ids, start {start}", params))
        params = {"dtype": "float32", "shape": (3,), "start": 0, "types": types, "seed": 0}
        found.append(
            Case("bad token type id", f"token_type_ids [0, {types}, 0]", {**params, "bad": types})
        )
        return found

    def arguments(self, params):
        word, position = backends.shared_weights(
            VOCAB, DIM, MAX_SEQ_LEN, seed=params["seed"], dtype=params["dtype"]
        )
        rng = np.random.default_rng(params["seed"] + 3)
        # type rows of the words' scale, so that the three-term sum rounds at every add
        types = rng.standard_normal((params["types"], DIM)).astype(word.dtype)
        ids = rng.integers(0, VOCAB, math.prod(params["shape"])).reshape(params["shape"])
        type_ids = rng.integers(0, params["types"], ids.shape)
        if params.get("bad") is not None:  # [0, bad, 0] repeated to any shape (--through)
            type_ids = np.resize(np.array([0, params["bad"], 0]), ids.shape)
        return [word, types, position, ids, type_ids, params["start"]]

    def reference(self, params):
        return positional.bert_embeddings(*self.arguments(params)).astype(np.float64)

    def mistakes(self, params):
        word, types, position, ids, type_ids, start = self.arguments(params)
        dtype = word.dtype
        w = word[ids].astype(np.float64)
        t = types[type_ids].astype(np.float64)
        p = position[start : start + ids.shape[-1]].astype(np.float64)

        def rounded(values):
            return values.astype(positional.compute_dtype(dtype)).astype(dtype).astype(np.float64)

        return [
            ("summed in another order: word + (type + position)", w + rounded(t + p)),
            ("summed in another order: (word + position) + type", rounded(w + p) + t),
            ("summed once in float64 and rounded once (not BERT's two additions)", w + t + p),
            ("token types not added", w + p),
            ("positions not added", w + t),
        ]

    def classify_bad(self, params, actual):
        return differs(
            f"returns {actual.dtype.name} {actual.shape} for a bad token type id without raising"
        )
