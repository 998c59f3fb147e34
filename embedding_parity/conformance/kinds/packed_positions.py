"""packed_positions: f(lengths, start) -> the position ids (T,) of documents packed in one row,
each counting from ``start``; exact (``backends.positional.packed_position_ids``).

Training packs documents into one row; their positions restart at each document, from 0, or
from padding_idx + 1 for RoBERTa-style models (``--model roberta-base``: every case at that
start; otherwise the battery tries 0 and 2). A port that numbers the row as one sequence
gives every document after the first the wrong rotation or position row (OLMo-core PR #591).
Documents of 130 and 32770 tokens tell a port that holds its positions in int8 or int16, or
sums the documents' offsets in int16, where the count wraps.
"""

from __future__ import annotations

import numpy as np

from backends import positional
from embedding_parity.conformance.kinds.base import Case, Kind, integer_verdict

# (label, document lengths)
PACKS = (
    ("documents of 5, 7 and 4 tokens", (5, 7, 4)),
    ("one token each", (1, 1, 1, 1)),
    ("one document", (16,)),
    ("documents of 3, 1, 9, 2 and 1 tokens", (3, 1, 9, 2, 1)),
    ("a document of 130 tokens, then 5", (130, 5)),  # past int8's 127
    ("a document of 32770 tokens, then 3", (32770, 3)),  # past int16's 32767
)


class PackedPositions(Kind):
    name = "packed_positions"
    contract = (
        "f(lengths, start) -> position ids (T,) integers, T = sum(lengths): each document's "
        "tokens numbered start, start + 1, ... (start 0, or padding_idx + 1 for RoBERTa-style "
        "models)"
    )

    def cases(self, options):
        starts = (options["packed_start"],) if "packed_start" in options else (0, 2)
        return [
            Case(
                f"packed positions from {start}",
                f"{label}, start {start}",
                {"lengths": list(lengths), "start": start},
            )
            for start in starts
            for label, lengths in PACKS
        ]

    def argument_names(self, params):
        return ["lengths", "start"]

    def arguments(self, params):
        return [np.array(params["lengths"], np.int64), params["start"]]

    def reference(self, params, start=None):
        lengths, given = self.arguments(params)
        return positional.packed_position_ids(lengths, start=given if start is None else start)

    def mistakes(self, params):
        lengths, start = self.arguments(params)
        whole = int(lengths.sum())
        found = [("not reset: the row numbered as one sequence", start + np.arange(whole))]
        if start:
            found.append(
                (f"start ignored: each document from 0, not {start}", self.reference(params, 0))
            )
        found.append(("each document from start + 1", self.reference(params) + 1))
        for small in (np.int8, np.int16):
            name = f"positions held in {np.dtype(small).name}: they wrap past {np.iinfo(small).max}"
            found.append((name, self.reference(params).astype(small)))
        ends = np.cumsum(lengths.astype(np.int16), dtype=np.int16)  # wraps past 32767
        offsets = np.repeat(np.concatenate([[0], ends[:-1]]).astype(np.int64), lengths)
        found.append(
            (
                "the documents' offsets summed in int16: they wrap past 32767",
                start + np.arange(whole) - offsets,
            )
        )
        return found

    def compare(self, params, actual):
        expected = self.reference(params)

        def where(wrong):
            slot = int(np.flatnonzero(wrong)[0])
            return (
                f"{int(wrong.sum())} of {expected.size} ids differ, first at token {slot}: "
                f"{int(actual[slot])} where {int(expected[slot])} is expected"
            )

        return integer_verdict(actual, expected, where, self.mistakes(params))
