"""position_ids: f(input_ids, attention_mask, past_length) -> position ids (B, T), exact.

The rows of the position table each token reads, by the model's rule (``--config`` or
``--model``; ``backends.positional.position_ids``): arange by default, OPT's padding-aware
count offset by 2, RoBERTa's count from padding_idx + 1 with pads on padding_idx, BART's
offset of 2. attention_mask covers the cached tokens too: (B, past_length + T). Integers,
so the verdict is exact.
"""

from __future__ import annotations

import numpy as np

from backends import positional
from embedding_parity.conformance.kinds.base import Case, Kind, integer_verdict

# (label, left pads per row, right pads per row, past_length)
BATCHES = (
    ("no padding", (0, 0), (0, 0), 0),
    ("left padding", (3, 0), (0, 0), 0),
    ("left padding after a cache of 4", (2, 0), (0, 0), 4),
    ("right padding", (0, 0), (0, 2), 0),
)
T = 8


class PositionIds(Kind):
    name = "position_ids"
    contract = (
        "f(input_ids (B, T), attention_mask (B, past_length + T), past_length) -> the (B, T) "
        "integer rows of the position table, by the config's rule (default: arange)"
    )

    def cases(self, options):
        rule = options.get("position_rule", "arange")
        pad = options.get("pad_token_id")
        pad = 1 if pad is None else pad
        return [
            Case(
                f"position ids, {label}",
                f"2 x {T} ids, {rule} rule",
                {"rule": rule, "pad": pad, "left": left, "right": right, "past": past},
            )
            for label, left, right, past in BATCHES
        ]

    def arguments(self, params):
        rng = np.random.default_rng(len(params["left"]) + params["past"])
        pad = params["pad"]
        ids = rng.integers(pad + 3, pad + 60, (2, T))
        mask = np.ones((2, params["past"] + T), np.int64)
        for row, (left, right) in enumerate(zip(params["left"], params["right"])):
            ids[row, :left] = pad
            ids[row, T - right :] = pad
            mask[row, params["past"] : params["past"] + left] = 0
            mask[row, mask.shape[1] - right :] = 0
        return [ids.astype(np.int64), mask, params["past"]]

    def reference(self, params, rule=None, past=None):
        ids, mask, given = self.arguments(params)
        if past is not None:  # as if the cache were not there: the mask without its columns
            mask = mask[:, given - past :]
        return positional.position_ids(
            ids,
            mask,
            rule=rule or params["rule"],
            padding_idx=params["pad"],
            past_length=given if past is None else past,
        )

    def mistakes(self, params):
        past = params["past"]
        rule, pad = params["rule"], params["pad"]
        arange = self.reference(params, rule="arange")
        found = []
        if rule == "opt":
            found += [
                ("OPT's offset 2 missing", self.reference(params) - 2),
                ("OPT's padding ignored (arange + 2)", arange + 2),
            ]
        if rule == "roberta":
            found += [
                ("RoBERTa's positions from 0 (arange: padding_idx + 1 not added)", arange),
                (
                    f"RoBERTa's pads not skipped (arange + padding_idx + 1 = {pad + 1})",
                    arange + pad + 1,
                ),
            ]
        if rule == "bart":
            found.append(("BART's offset 2 missing", arange))
        if past:
            found.append((f"past_length {past} ignored", self.reference(params, past=0)))
        return found

    def compare(self, params, actual):
        expected = self.reference(params)

        def where(wrong):
            row, col = (int(i) for i in np.argwhere(wrong)[0])
            return (
                f"{int(wrong.sum())} ids differ, first at [{row}, {col}]: "
                f"{int(actual[row, col])} where {int(expected[row, col])} is expected"
            )

        return integer_verdict(actual, expected, where, self.mistakes(params))
