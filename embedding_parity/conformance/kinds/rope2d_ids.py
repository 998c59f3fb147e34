"""rope2d_ids: f(grid) -> the (N, 2) int (row, column) of each token a vision tower turns by,
in its token order, exact.

The contract: grid (h, w), two Python ints; the result one row per token, the model's order:
``builder`` "raster" (row-major, as meshgrid(arange(h), arange(w), indexing="ij") flattens;
``prefix`` rows (-1, -1) first: CLS and registers), "llama-4" (raster, its CLS's (-1, -1) last:
Llama 4 appends it), "merge" (Qwen2-VL's merge blocks: each ``merge`` x ``merge`` square of
patches row-major, the squares row-major), "window" (Qwen2.5-VL's: the merge blocks read window
by window, ``window`` x ``window`` blocks each, the right and bottom windows what is left), or
"flat" (Pixtral's flat ids, row * ``max_width`` + column, one int per token: (h*w,)). The
reference is ``backends.rope2d``'s builder; integers, so the verdict is exact.

Options: ``builder`` (default "raster"), ``merge`` (2: Qwen2.5-VL's spatial_merge_size),
``window`` (4 blocks: Qwen2.5-VL's window_size 112 px / patch 14 / merge 2), ``prefix`` (0; 1
for "llama-4"), ``max_width`` (64: PixtralVisionConfig's image_size 1024 / patch_size 16),
``grid`` ([h, w] of the cases; default [4, 6], and [12, 20] for "window", where windows of 4
blocks leave some partial). Cases: the grid and the grid transposed (non-square: an h/w swap
cannot hide).

Named mistakes, most specific first: raster order where the model's merge blocks are (Qwen2-VL),
the window permutation missing (Qwen2.5-VL's merge blocks in their own order), the prefix tokens
first where last (Llama 4) and back, each pair (column, row) (x-first), the grid transposed
(meshgrid(arange(w), arange(h)): w rows of h), and for flat ids the grid's width for max_width.
"""

from __future__ import annotations

import numpy as np

from backends import rope2d, validation
from embedding_parity.conformance.kinds.base import Case, Kind, integer_verdict
from embedding_parity.usage import UsageError

BUILDERS = ("raster", "llama-4", "merge", "window", "flat")
GRID, WINDOW_GRID = (4, 6), (12, 20)
MERGE = 2  # transformers 5.24 Qwen2_5_VLVisionConfig: spatial_merge_size 2
WINDOW = 4  # Qwen2_5_VLVisionConfig: window_size 112 / patch_size 14 / merge 2
MAX_WIDTH = 64  # transformers 5.24 PixtralVisionConfig: image_size 1024 / patch_size 16


def _setting(options) -> dict:
    """The builder and its settings from the options, each checked (UsageError, one line)."""
    builder = options.get("builder", "raster")
    if builder not in BUILDERS:
        raise UsageError(f"builder {builder!r} is not one of {', '.join(BUILDERS)}")
    grid = options.get("grid") or (WINDOW_GRID if builder == "window" else GRID)
    setting = {"builder": builder}
    if builder in ("merge", "window"):
        setting["merge"] = options.get("merge", MERGE)
    if builder == "window":
        setting["window"] = options.get("window", WINDOW)
    if builder in ("raster", "llama-4"):
        setting["prefix"] = options.get("prefix", int(builder == "llama-4"))
    if builder == "flat":
        setting["max_width"] = options.get("max_width", MAX_WIDTH)
    try:
        h, w = validation.check_grid(grid)
        for sides in ((h, w), (w, h)):  # both the grid and its transpose are cases
            values = {k: v for k, v in setting.items() if k not in ("builder", "prefix")}
            validation.check_id_grid(sides, **values)
        if "prefix" in setting:
            validation.check_id_grid((h, w), prefix=setting["prefix"])
    except (TypeError, ValueError) as error:
        raise UsageError(f"rope2d_ids, builder {builder!r}: {error}") from None
    return {**setting, "grid": [h, w]}


def build(params, grid=None, **changes) -> np.ndarray:
    """The builder's ids at ``grid`` (the case's unless given), its settings changed."""
    p = {**params, **changes}
    grid = tuple(grid or p["grid"])
    builder = p["builder"]
    if builder in ("raster", "llama-4"):
        last = p.get("prefix_last", builder == "llama-4")
        return rope2d.raster_ids(grid, prefix=p["prefix"], prefix_last=last)
    if builder == "merge":
        return rope2d.merge_ids(grid, merge=p["merge"])
    if builder == "window":
        return rope2d.window_ids(grid, merge=p["merge"], window=p["window"])
    return rope2d.flat_ids(grid, max_width=p["max_width"])


class Rope2dIds(Kind):
    name = "rope2d_ids"
    contract = (
        "f(grid) -> (N, 2) int (row, column) per token in the model's order, grid (h, w): "
        "raster (prefix rows (-1, -1) first), llama-4 (the CLS last), Qwen2-VL's merge blocks, "
        "Qwen2.5-VL's windows; or Pixtral's flat ids (h*w,) row * max_width + column; exact"
    )

    def cases(self, options):
        setting = _setting(options)
        h, w = setting["grid"]
        said = ", ".join(f"{k} {v}" for k, v in setting.items() if k not in ("builder", "grid"))
        grids = [[h, w]] + ([[w, h]] if h != w else [])
        return [
            Case(
                f"{setting['builder']} ids {a} x {b}",
                f"grid ({a}, {b}){', ' + said if said else ''}",
                {**setting, "grid": [a, b]},
            )
            for a, b in grids
        ]

    def describe(self, options):
        setting = _setting(options)
        said = ", ".join(f"{k} {v}" for k, v in setting.items() if k != "grid")
        return f"{self.contract}; {said}"

    def arguments(self, params):
        return [tuple(params["grid"])]

    def reference(self, params):
        return build(params)

    def most_elements(self, params):
        return int(np.size(build(params)))

    def mistakes(self, params):
        builder, (h, w) = params["builder"], params["grid"]
        found = []
        if builder in ("merge", "window"):
            found.append(
                (
                    "raster order where the model's are merge blocks (Qwen2-VL's "
                    "get_vision_position_ids: each merge x merge square together)",
                    build(params, builder="raster", prefix=0),
                )
            )
        if builder == "window":
            found.append(
                (
                    "the window permutation missing: the merge blocks in their own order, where "
                    "Qwen2.5-VL reads them window by window (get_vision_window_index)",
                    build(params, builder="merge"),
                )
            )
        if params.get("prefix"):
            last = builder == "llama-4"
            found.append(
                (
                    "the prefix tokens first where Llama 4 appends its CLS last"
                    if last
                    else "the prefix tokens (CLS, registers) last where they come first",
                    build(params, prefix_last=not last),
                )
            )
        if builder == "flat":
            found.append(
                (
                    f"row * w ({w}, the grid's width) where Pixtral's flat ids are row * "
                    f"max_width ({params['max_width']})",
                    build(params, max_width=w),
                )
            )
            found.append(
                (
                    "column * max_width + row: the axes swapped (x-first)",
                    (np.arange(w)[None, :] * params["max_width"] + np.arange(h)[:, None]).ravel(),
                )
            )
        else:
            ids = build(params)
            found.append(("each pair (column, row): the axes swapped (x-first)", ids[:, ::-1]))
            if builder != "window" and h != w:
                transposed = build(params, grid=(w, h))
                found.append(
                    (
                        f"the grid transposed: meshgrid(arange(w), arange(h)), {w} rows of {h}",
                        transposed,
                    )
                )
        expected = self.reference(params)
        return [(name, result) for name, result in found if not np.array_equal(result, expected)]

    def compare(self, params, actual):
        expected = self.reference(params)

        def where(wrong):
            rows = wrong.reshape(len(wrong), -1).any(axis=1)
            token = int(np.flatnonzero(rows)[0])
            got, want = actual[token].tolist(), expected[token].tolist()
            return (
                f"{int(rows.sum())} of {len(expected)} tokens differ, the first token {token}: "
                f"{got} where {want} is expected"
            )

        return integer_verdict(actual, expected, where, self.mistakes(params))
