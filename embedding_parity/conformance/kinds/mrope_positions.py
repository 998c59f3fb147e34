"""mrope_positions: f(input_ids, mm_token_type_ids, image_grid_thw, video_grid_thw,
second_per_grid_ts, attention_mask) -> (position_ids (3, B, T), rope_deltas (B, 1)), exact.

The position builder of a multimodal model (``get_rope_index``): the t, h and w rows M-RoPE
turns each token by, and each row's decode delta. Text counts on; an image or video grid of
(t, h, w) patches, merged by spatial_merge_size, numbers its tokens t = start + floor(frame *
tokens_per_second * second_per_grid_t), h = start + row, w = start + column; padding is
skipped. Integers, so the verdict is exact. Two builders: Qwen2.5-VL's numbers a video as one
grid of frames; Qwen3-VL's, Qwen3.5's and GLM-4V's (one code in transformers 5.24) split it into
a grid per frame, each between its timestamp's text, numbered as an image (the cases follow the
config's). The reference is transformers 5.24's rule (``backends.positional.mrope_position_ids``);
Qwen2.5-VL's rule in 4.57.1, which differs in four places, is named where a port matches it. A
port returns the pair as transformers does; the kit reads it back as one integer array, the
position ids' elements then the deltas.
"""

from __future__ import annotations

import numpy as np

from backends import positional
from embedding_parity.conformance.kinds.base import (
    Case,
    Kind,
    differs,
    exact_integers,
)

# Qwen2-VL's token ids (the tokenizer's <|vision_start|>, <|image_pad|>, <|video_pad|>): a port
# that finds the grids from input_ids, as transformers 4.x did, finds them here too.
VISION_START, IMAGE, VIDEO, TEXT = 151652, 151655, 151656, 100
# Each case: (check, what it tries, rows of (kind, count) runs, image grids, video grids,
# seconds per video grid, left pads per row). A grid's tokens: t * (h / 2) * (w / 2).
CASES = (
    (
        "image and text",
        "an image between text in each row, one 4 x 6 and one 6 x 4 patch grid",
        ([(0, 3), (1, 6), (0, 3)], [(0, 2), (1, 6), (0, 4)]),
        [[1, 4, 6], [1, 6, 4]],
        [],
        [],
        (0, 0),
    ),
    (
        "video at half-second steps",
        "3 frames of 4 x 4 at second_per_grid_t 0.5: temporal steps of tokens_per_second * 0.5",
        ([(0, 2), (2, 12), (0, 2)], [(0, 16)]),
        [],
        [[3, 4, 4]],
        [0.5],
        (0, 0),
    ),
    (
        "video then text",
        "3 frames of 4 x 4 at 2 s a grid, then text: where the text after a video resumes",
        ([(0, 1), (2, 12), (0, 3)], [(0, 2), (1, 4), (0, 10)]),
        [[1, 4, 4]],
        [[3, 4, 4]],
        [2.0],
        (0, 0),
    ),
    (
        "left padding",
        "row 0 padded by 3 on the left: padded slots, and each row's decode delta",
        ([(0, 2), (1, 6), (0, 2)], [(0, 1), (2, 8), (0, 4)]),
        [[1, 4, 6]],
        [[2, 4, 4]],
        [1.0],
        (3, 0),
    ),
)


# The builder that splits a video into frames: each case's video tokens are runs of one frame
# (h / 2 * w / 2 tokens) with the frame's timestamp text between them.
SPLIT_CASES = (
    CASES[0],
    (
        "video frames between timestamps",
        "3 frames of 4 x 4, a timestamp token before each: each frame numbered as an image",
        ([(0, 1), (2, 4), (0, 1), (2, 4), (0, 1), (2, 4), (0, 3)], [(0, 18)]),
        [],
        [[3, 4, 4]],
        [],
        (0, 0),
    ),
    (
        "video then image",
        "2 frames of 4 x 4 between timestamps, then text and a 4 x 4 image",
        ([(0, 1), (2, 4), (0, 1), (2, 4), (0, 2), (1, 4), (0, 1)], [(0, 3), (1, 4), (0, 10)]),
        [[1, 4, 4], [1, 4, 4]],
        [[2, 4, 4]],
        [],
        (0, 0),
    ),
    (
        "left padding",
        "row 0 padded by 3 on the left: padded slots, and each row's decode delta",
        ([(0, 2), (1, 6), (0, 2)], [(0, 1), (2, 4), (0, 1), (2, 4), (0, 3)]),
        [[1, 4, 6]],
        [[2, 4, 4]],
        [],
        (3, 0),
    ),
)
BUILDERS = {"whole": CASES, "split": SPLIT_CASES}

# The mistakes' names (the first three are transformers 4.57.1's rule, one change at a time)
CAST = (
    "second_per_grid_t cast to an integer before the multiply (transformers 4.57.1; PR "
    "#48669): steps of 0.5 s collapse every frame to one temporal id"
)
ADVANCE = (
    "the text after a video resumes at the grid's largest position + 1, its frames included "
    "(transformers 4.57.1), where 5.24 advances by max(h, w) / merge"
)
DELTA = (
    "each row's delta counted over the padded row (transformers 4.57.1), where 5.24 counts the "
    "row's tokens: a left-padded row decodes at the wrong position"
)
TEXT_ONLY = (
    "every token numbered as text, 0, 1, 2, ... (vLLM #14790's GLM-4V: [0..9] where the "
    "builder gives the grid its t, h and w rows)"
)
OLDER = (
    "transformers 4.57.1's rule (the step cast to an integer first, the text after a video at "
    "the grid's largest position + 1, padded slots 1, the delta over the padded row): the port "
    "matches that version, not 5.24"
)


class MropePositions(Kind):
    name = "mrope_positions"
    contract = (
        "f(input_ids, mm_token_type_ids, image_grid_thw, video_grid_thw, second_per_grid_ts, "
        "attention_mask) -> (position_ids (3, B, T), rope_deltas (B, 1)): Qwen2.5-VL's "
        "get_rope_index (or, with a Qwen3-VL, Qwen3.5 or GLM-4V config, theirs), exact integers"
    )

    def cases(self, options):
        frames = options.get("frames", "whole")
        params = {"merge": options.get("spatial_merge_size", 2), "frames": frames}
        if frames == "whole":
            params["tokens_per_second"] = options.get("tokens_per_second", 2)
        return [
            Case(check, f"{tried}; {_setting(params)}", {"case": n, **params})
            for n, (check, tried, *_) in enumerate(BUILDERS[frames])
        ]

    def describe(self, options):
        frames = options.get("frames", "whole")
        params = {"merge": options.get("spatial_merge_size", 2), "frames": frames}
        if frames == "whole":
            params["tokens_per_second"] = options.get("tokens_per_second", 2)
            return f"{self.contract}, {_setting(params)} (transformers 5.24's rule)"
        return (
            "f(input_ids, mm_token_type_ids, image_grid_thw, video_grid_thw, second_per_grid_ts, "
            "attention_mask) -> (position_ids (3, B, T), rope_deltas (B, 1)): Qwen3-VL's, "
            f"Qwen3.5's and GLM-4V's get_rope_index, {_setting(params)} (transformers 5.24's "
            "rule; second_per_grid_ts unread), exact integers"
        )

    def result_form(self, options):
        return (
            "the pair as one int64 array: position_ids (3, B, T) flattened, then rope_deltas "
            "(B, 1) flattened (3 * B * T + B integers), as the kit reads a returned pair"
        )

    def arguments(self, params):
        _, _, rows, images, videos, seconds, pads = _case(params)
        types = _types(rows, pads)
        ids = np.where(types == 1, IMAGE, np.where(types == 2, VIDEO, TEXT))
        starts = (types[:, 1:] != 0) & (types[:, :-1] == 0)  # the token before each grid
        ids[:, :-1][starts] = VISION_START
        mask = np.ones_like(types)
        for row, pad in enumerate(pads):
            mask[row, :pad] = 0
        return [
            ids.astype(np.int64),
            types.astype(np.int64),
            np.asarray(images, np.int64).reshape(-1, 3),
            np.asarray(videos, np.int64).reshape(-1, 3),
            np.asarray(seconds, np.float32),
            mask.astype(np.int64),
        ]

    def reference(self, params, **changes):
        """The position ids then the deltas, one integer array (as a port's pair is read)."""
        _, types, images, videos, seconds, mask = self.arguments(params)
        rule = {**positional.MROPE_POSITION_RULES["transformers 5.24"], **changes}
        positions, deltas = positional.mrope_positions_by(
            types,
            images,
            videos,
            seconds,
            mask,
            spatial_merge_size=params["merge"],
            tokens_per_second=params.get("tokens_per_second", 1),
            frames=params.get("frames", "whole"),
            **rule,
        )
        return _packed(positions, deltas)

    def compare(self, params, actual):
        expected = self.reference(params)
        verdict, wrong = exact_integers(actual, expected)
        if verdict is not None:
            if actual.shape != expected.shape:
                return differs(_shape_words(actual, expected, self._shape(params)))
            return verdict
        where = self._where(params, int(np.flatnonzero(wrong.ravel())[0]))
        first = (
            f"{where}: {actual.ravel()[wrong.ravel()][0]} where {expected[wrong][0]} is expected"
        )
        named = next(
            (name for name, result in self.mistakes(params) if np.array_equal(actual, result)),
            None,
        )
        return differs(f"{first}; {named}" if named else first)

    def mistakes(self, params):
        padded, delta = (
            (
                "padded slots hold 1, where 5.24 leaves them 0",
                self.reference(params, padded=1),
            ),
            (DELTA, self.reference(params, delta_counts="row")),
        )
        found = [
            ("row 0's decode delta for every row (mlx-vlm PR #1095)", self._one_delta(params)),
            (TEXT_ONLY, self._as_text(params)),
        ]
        if params.get("frames", "whole") == "split":  # the version notes are Qwen2.5-VL's
            delta = (DELTA.replace(" (transformers 4.57.1)", ""), delta[1])
            found += [padded, delta]
        else:
            old = positional.MROPE_POSITION_RULES["transformers 4.57.1"]
            found += [
                (CAST, self.reference(params, step_cast_first=True)),
                (ADVANCE, self.reference(params, advance="grid max + 1")),
                (padded[0].replace(",", " (transformers 4.57.1),", 1), padded[1]),
                delta,
                ("constant temporal ids (transformers 5.3.0, #45381)", self._constant_t(params)),
                (OLDER, self.reference(params, **old)),
            ]
        expected = self.reference(params)
        return [(name, result) for name, result in found if not np.array_equal(result, expected)]

    def _as_text(self, params):
        """Every token numbered as text: 0, 1, 2, ... along the row's tokens, deltas 0."""
        _, types, *_, mask = self.arguments(params)
        positions = np.zeros((3, *types.shape), np.int64)
        for row in range(types.shape[0]):
            kept = mask[row].astype(bool)
            positions[:, row, kept] = np.arange(int(kept.sum()))
        return _packed(positions, np.zeros((types.shape[0], 1), np.int64))

    def _constant_t(self, params):
        """Every frame of a grid at the grid's start (its temporal row never advancing)."""
        positions, deltas = self._unpacked(params, self.reference(params))
        _, types, *_ = self.arguments(params)
        for row in range(types.shape[0]):
            vision = types[row] != 0
            starts = np.flatnonzero(vision & ~np.r_[False, vision[:-1]])
            for start in starts:
                run = start + np.flatnonzero(np.cumprod(vision[start:]))
                positions[0, row, run] = positions[0, row, start]
        return _packed(positions, deltas)

    def _one_delta(self, params):
        positions, deltas = self._unpacked(params, self.reference(params))
        return _packed(positions, np.broadcast_to(deltas[:1], deltas.shape))

    def _shape(self, params):
        """(B, T): the batch's shape."""
        return tuple(self.arguments(params)[0].shape)

    def _unpacked(self, params, packed):
        batch, length = self._shape(params)
        split = 3 * batch * length
        return packed[:split].reshape(3, batch, length).copy(), packed[split:].reshape(batch, 1)

    def _where(self, params, index: int) -> str:
        batch, length = self._shape(params)
        if index < 3 * batch * length:
            axis, row, token = np.unravel_index(index, (3, batch, length))
            return f"position_ids[{'thw'[axis]} row {axis}, batch row {row}, token {token}]"
        return f"rope_deltas[{index - 3 * batch * length}]"

    def most_elements(self, params):
        return int(np.size(self.reference(params)))


def _case(params) -> tuple:
    return BUILDERS[params.get("frames", "whole")][params["case"]]


def _setting(params) -> str:
    said = f"spatial_merge_size {params['merge']}"
    if params["frames"] == "split":
        return f"{said}, each video frame a grid of its own"
    return f"{said}, tokens_per_second {params['tokens_per_second']}"


def _types(rows, pads) -> np.ndarray:
    """(B, T) token types: each row's runs of (kind, count) after its left pads."""
    made = [
        [0] * pad + [kind for kind, count in runs for _ in range(count)]
        for runs, pad in zip(rows, pads)
    ]
    length = max(len(row) for row in made)
    assert all(len(row) == length for row in made), "the cases' rows are one length"
    return np.array(made)


def _packed(positions, deltas) -> np.ndarray:
    """The pair as the kit reads a port's back: position ids' elements, then the deltas."""
    return np.concatenate([np.asarray(positions).ravel(), np.asarray(deltas).ravel()])


def _shape_words(actual, expected, shape) -> str:
    batch, length = shape
    return (
        f"returns {actual.size} integers where (position_ids (3, {batch}, {length}), "
        f"rope_deltas ({batch}, 1)) hold {expected.size}: return the pair as transformers' "
        "get_rope_index does"
    )
