"""rope2d: f(x, positions) -> x turned, a vision tower's 2-D rotary embedding, within the derived
per-element bound; rope2d_invariance: q . k asked of it at two placings of the same offsets.

The contract. x (..., N, head_dim) float, positions (N, 2) int64: each token's (row, column) of
its patch grid, (-1, -1) for a prefix token (CLS, registers), as Llama 4 marks its CLS. The
result is x turned as the model's rotary turns q and k (``backends.rope2d``: one record of
explicit fields, ``SPECS[spec]``), in x's dtype; a prefix token comes back bit for bit (the
model leaves it unturned: masked to angle 0, or left out of the rotation). Positions are
integers for every spec: what a port has in hand is the grid, never the angles. DINOv3's
coordinates, normalized by the grid's sides, and EVA-02's, stretched to its reference grid, are
computed by the port from them: the grid (h, w) is the positions' largest row and column + 1,
and every case whose spec needs the grid gives a whole grid of patches.

Options: ``spec`` (a ``rope2d.SPECS`` name, default "pixtral"; or {"name": NAME, field:
value}, the named spec with the fields a config sets, rope_theta as ``base``), ``head_dim``
(default 16; a spec of sections, the sections' sum), ``grid`` ([h, w] of the cases, default
[4, 6]: non-square, so that an h/w swap cannot hide) and ``prefix_tokens`` (the prefix rows of
a spec that has them, default 1: a CLS; DINOv3 ViT-L/16 has 1 + 4 registers).

The cases, in every dtype (float64, float32, float16, bfloat16): the grid in the model's token
order (Qwen2.5-VL's windows, Qwen2-VL's merge blocks, else raster), the grid transposed, the
grid with its prefix tokens where the spec has them (first, or last for Llama 4, which appends
its CLS), and long coordinates (rows and columns to 511, where bfloat16 no longer counts by one;
a 40 x 56 grid for a spec whose coordinates follow the grid).

Reference: ``rope2d.apply_rope2d`` in float64. Tolerance: ``rope2d.bound`` per element, the
derivation in its docstring (the frequency's, coordinate's and angle's roundings in the float32
compute dtype, then the rotation's, as ``positional.rope_bound``); 0 on prefix tokens.

Named mistakes, each the float64 result of the library at the spec with one field changed
(``dataclasses.replace``), most specific first:
- a prefix token turned: as the patch (0, 0), or at its mark (-1, -1) read as a coordinate;
- h and w swapped in a port's table of the grid (built over meshgrid(arange(w), arange(h)),
  read at row * w + column): right on a square grid, scrambled on a non-square one;
- 0-based coordinates for 1-based (Llama 4's +1) and back;
- the axes' order: the column's slots first (x-first: Llama 4, MoonViT) for the row's (y-first);
- the pairing layout: (2k, 2k+1), the complex form, for (k, k + head_dim/2), and back; Pixtral's
  Mistral checkpoint is complex and transformers' half, equal only through the conversion's
  q/k permutation: the layout mistake is that permutation missing;
- the slot assignment: another of blocks (Qwen2-VL, Llama 4, DINOv3), even_odd (Pixtral) and
  alternating (MoonViT);
- DINOv3's normalization: each axis by its own side ("separate"), or both by the longer
  ("max") or the shorter ("min");
- angles in bfloat16 (or float16): the coordinates, frequencies and their products rounded to
  it, as a port that builds its angle table in the input's dtype.

rope2d_invariance, asked after the contract's checks as rope_invariance is with rope, needs no
reference: for integer coordinates (not DINOv3's, not EVA-02's, which follow the grid) a
rotation by position makes q . k a function of the offset (dh, dw) alone. Two checks, x's q
and k stacked on its first axis: the patches of the grid, then the same patches moved by
(3, 7): every q . k must stay (a port's table of the grid with h and w swapped scrambles the
tokens differently at the two grids); and, where the spec has prefix tokens, a prefix token
turned by angle zero, so that its q . k with each patch is that of a patch at coordinate 0:
the same vectors with the prefix token standing as the patch (0, 0) and every patch moved by
the coordinate of (0, 0) (1 for Llama 4's 1-based), every q . k again the same (a CLS turned
shows). A consistent swap of the axes (x-first for y-first) is a rotation of another spec,
invisible to q . k: the contract's check names it.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from backends import positional, rope2d, validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import Case, Kind, conforms, differs
from embedding_parity.conformance.numerics import FLOATS
from embedding_parity.usage import UsageError

HEADS = 2  # x (HEADS, N, head_dim); the invariance's x (2, HEADS, N, head_dim): q and k
GRID = (4, 6)  # the default grid: non-square, and divisible into Qwen's 2 x 2 merge blocks
LONG_GRID = (40, 56)  # long coordinates for the specs whose coordinates follow the grid
# the rows and columns of the long case, paired every way: past 256, where bfloat16's spacing
# is 2, and to 511 (Qwen2.5-VL's largest images are 256 patches a side at 14 px)
LONG_AXIS = (0, 1, 63, 64, 127, 255, 256, 257, 511)
SHIFT = (3, 7)  # the invariance's move of every patch: unequal, so an h/w swap cannot hide
# The models' token order and where they put their prefix tokens (the library's id builders)
ORDER = {
    "qwen2.5-vl": (  # transformers 5.24 qwen2_5_vl: get_vision_window_index, window_size 112
        lambda grid: rope2d.window_ids(grid, merge=2, window=4),
        "Qwen2.5-VL's window order (merge blocks of 2 x 2, windows of 4 x 4 blocks)",
    ),
    "qwen2-vl": (  # transformers 5.24 vision_utils.get_vision_position_ids, merge 2
        lambda grid: rope2d.merge_ids(grid, merge=2),
        "Qwen2-VL's merge-block order (2 x 2)",
    ),
}
# transformers 5.24 llama4/modeling_llama4.py Llama4VisionModel.forward:
# torch.cat([hidden_state, class_embedding], dim=1): the CLS after the patches
PREFIX_LAST = {"llama-4"}


def spec_of(given) -> rope2d.Rope2D:
    """The Rope2D an option ``spec`` names: a SPECS name, or {"name": NAME, field: value}."""
    name, fields = (given, {}) if isinstance(given, str) else (given.get("name"), dict(given))
    fields.pop("name", None)
    if name not in rope2d.SPECS:
        raise UsageError(
            f"spec {name!r} is not one of rope2d.SPECS: {', '.join(rope2d.SPECS)} (or "
            '{"name": NAME, field: value} to change a field a config sets)'
        )
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    try:
        return dataclasses.replace(rope2d.SPECS[name], **fields)
    except (TypeError, ValueError) as error:
        raise UsageError(f"spec {given!r}: {error}") from None


def name_of(given) -> str:
    return given if isinstance(given, str) else given["name"]


def _setting(options) -> dict:
    """The call's setting from the options, each checked: spec, head_dim, grid, prefix."""
    given = options.get("spec", "pixtral")
    spec = spec_of(given)
    head_dim = options.get("head_dim") or (sum(spec.sections) if spec.sections else 16)
    grid = options.get("grid") or GRID
    prefix = options.get("prefix_tokens", 1) if spec.prefix != "none" else 0
    try:
        rope2d.slot_map(head_dim, spec)
        grid = validation.check_grid(grid, "grid")
        prefix = validation.integer(prefix, "prefix_tokens")
        if name_of(given) in ORDER:
            validation.check_id_grid(grid, merge=2)
    except (TypeError, ValueError) as error:
        raise UsageError(f"rope2d at spec {name_of(given)!r}: {error}") from None
    if prefix < 0:
        raise UsageError(f"prefix_tokens {prefix} must be 0 or more: the rows before the grid")
    return {"spec": given, "head_dim": int(head_dim), "grid": list(grid), "prefix": prefix}


def follows_grid(spec: rope2d.Rope2D) -> bool:
    """Whether the spec's coordinates depend on the grid's sides (DINOv3's, EVA-02's)."""
    return spec.coordinates not in ("0-based", "1-based") or spec.reference_grid is not None


def token_positions(name: str, grid, prefix: int) -> np.ndarray:
    """(prefix + h*w, 2) int64: the grid's patches in the model's order, its prefix tokens'
    (-1, -1) first, or last where the model appends them."""
    patches = ORDER[name][0](grid) if name in ORDER else rope2d.raster_ids(grid)
    marks = np.full((prefix, 2), -1, np.int64)
    return np.concatenate([patches, marks] if name in PREFIX_LAST else [marks, patches])


def grid_of(positions) -> tuple[int, int]:
    """The grid the positions span: their largest row and column + 1."""
    patches = positions[positions[:, 0] >= 0]
    return tuple(int(n) + 1 for n in patches.max(axis=0))


def positions_of(params) -> np.ndarray:
    if params["tokens"] == "long":
        return np.array(list(itertools.product(LONG_AXIS, LONG_AXIS[::-1])), np.int64)
    return token_positions(name_of(params["spec"]), params["grid"], params.get("prefix", 0))


def inputs(params, shape=()) -> np.ndarray:
    """x (*shape, HEADS, N, head_dim) in the case's dtype, seeded by the case."""
    rng = np.random.default_rng(params["seed"])
    n = len(positions_of(params))
    x = rng.standard_normal((*shape, HEADS, n, params["head_dim"]))
    return x.astype(validation.resolve_dtype(params["dtype"]))


def turned_at(x, coordinates, spec) -> np.ndarray:
    """float64 x turned at given (N, 2) coordinates (row, column), the spec's slots and layout:
    for a mistake whose coordinates are no grid position's."""
    slots = rope2d.slot_map(x.shape[-1], spec)
    angles = np.where(slots.axis == rope2d.NONE, 0.0, coordinates[:, slots.axis.clip(0)])
    return positional.turn(np.asarray(x, np.float64), angles * slots.frequency, 1.0, spec.layout)


class Rope2d(Kind):
    name = "rope2d"
    contract = (
        "f(x, positions) -> x turned, x (..., N, head_dim), positions (N, 2) int64 (row, column) "
        "per token, (-1, -1) a prefix token's (left as it is); the grid is the positions' "
        "largest row and column + 1: as the spec's 2-D rotary (backends.rope2d.SPECS) turns q "
        "and k"
    )
    exact = False

    def cases(self, options):
        setting = _setting(options)
        spec, name = spec_of(setting["spec"]), name_of(setting["spec"])
        h, w = setting["grid"]
        order = ORDER[name][1] if name in ORDER else "raster order"
        checks = [(f"grid {h} x {w}", {"tokens": "grid", "prefix": 0}, order)]
        if h != w:
            transposed = {"tokens": "grid", "grid": [w, h], "prefix": 0}
            checks.append((f"grid {w} x {h}", transposed, f"{order}, the grid transposed"))
        else:  # a square grid hides an h/w swap: the kit's non-square one too
            other = {"tokens": "grid", "grid": list(GRID), "prefix": 0}
            said = f"{order}, non-square (a square grid hides an h/w swap)"
            checks.append((f"grid {GRID[0]} x {GRID[1]}", other, said))
        prefix = setting["prefix"]
        if prefix:
            where = "after the patches" if name in PREFIX_LAST else "before the patches"
            checks.append(
                (
                    f"grid {h} x {w} with prefix tokens",
                    {"tokens": "grid", "prefix": prefix},
                    f"{order}, {prefix} prefix token(s) (-1, -1) {where}",
                )
            )
        if follows_grid(spec):
            lh, lw = LONG_GRID
            long = {"tokens": "grid", "grid": [lh, lw], "prefix": 0}
            checks.append(("long coordinates", long, f"a {lh} x {lw} grid, raster order"))
        else:
            said = f"rows and columns of {{{', '.join(map(str, LONG_AXIS))}}} paired every way"
            checks.append(("long coordinates", {"tokens": "long", "prefix": 0}, said))
        found = []
        for dtype in FLOATS:
            for check, shaped, where in checks:
                params = {**setting, **shaped, "dtype": dtype, "seed": len(found)}
                n = len(positions_of(params))
                label = f"x ({HEADS}, {n}, {setting['head_dim']}), {where}"
                found.append(Case(f"{check} {dtype}", label, params))
        return found

    def describe(self, options):
        setting = _setting(options)
        spec = spec_of(setting["spec"])
        fields = ", ".join(
            f"{f.name} {getattr(spec, f.name)!r}"
            for f in dataclasses.fields(spec)
            if f.name != "sources" and getattr(spec, f.name) is not None
        )
        name, head_dim = name_of(setting["spec"]), setting["head_dim"]
        return f"{self.contract}; spec {name} ({fields}), head_dim {head_dim}"

    def arguments(self, params):
        return [inputs(params), positions_of(params)]

    def _operands(self, params):
        x, positions = self.arguments(params)
        return x, positions, grid_of(positions), spec_of(params["spec"])

    def reference(self, params):
        x, positions, grid, spec = self._operands(params)
        return rope2d.apply_rope2d(x, positions, spec=spec, grid=grid)

    def expected_dtype(self, params, actual):
        return params["dtype"]

    def tolerance(self, params, dtype):
        x, positions, grid, spec = self._operands(params)
        return rope2d.bound(x, positions, spec=spec, grid=grid, dtype=dtype)

    def diagnose(self, params, actual, dtype, tolerance, error):
        found = super().diagnose(params, actual, dtype, tolerance, error)
        if found or dtype != "float64":
            return found
        at_float32 = self.tolerance(params, "float32")
        if numerics.worst_ratio(actual, self.reference(params), at_float32)[0] <= 1:
            return (
                "computed in float32: within float32's tolerance, not float64's (transformers' "
                "vision rotaries form their angles in float32 whatever x's dtype)"
            )
        return ""

    def mistakes(self, params):
        x, positions, grid, spec = self._operands(params)
        reference = rope2d.apply_rope2d(x, positions, spec=spec, grid=grid)
        found = []
        for name, result in self._mistakes(params, x, positions, grid, spec):
            if not np.array_equal(result, reference) and not any(
                np.array_equal(result, other) for _, other in found
            ):
                found.append((name, result))
        return found

    def _mistakes(self, params, x, positions, grid, spec):
        """(name, float64 result) of each mistake, most specific first (some may equal the
        reference at this spec and case: ``mistakes`` drops those)."""

        def at(wrong=spec, moved=positions, sides=grid):
            return rope2d.apply_rope2d(x, moved, spec=wrong, grid=sides)

        marked = positions[:, 0] < 0
        if marked.any():
            yield (
                f"a prefix token turned as the patch (0, 0), where the spec leaves it as it is "
                f"(prefix {spec.prefix!r}: the CLS rotated)",
                at(moved=np.where(marked[:, None], 0, positions)),
            )
            unit = rope2d.coordinates(np.array([[0, 0], [1, 1]]), spec, grid)
            mark = 2 * unit[0] - unit[1]  # the affine rule at -1
            coordinates = rope2d.coordinates(positions, spec, grid)
            coordinates[marked] = mark
            yield (
                "a prefix token turned at its mark (-1, -1) read as a coordinate (the CLS "
                f"rotated), where the spec leaves it as it is (prefix {spec.prefix!r})",
                turned_at(x, coordinates, spec),
            )
        h, w = grid
        if h != w:
            flat = positions[:, 0] * w + positions[:, 1]
            scrambled = np.stack([flat // h, flat % h], axis=-1)
            yield (
                "h and w swapped in the port's table of the grid (built over "
                f"meshgrid(arange(w), arange(h)), read at row * w + column): right on a square "
                f"grid, on this {h} x {w} one the patches turn at others' angles",
                at(moved=np.where(marked[:, None], positions, scrambled), sides=(w, h)),
            )
        if spec.coordinates in ("0-based", "1-based"):
            other = "1-based" if spec.coordinates == "0-based" else "0-based"
            said = " (Llama 4's frequencies_x + 1)" if other == "1-based" else ""
            yield (
                f"{other} coordinates{said} where the spec's are {spec.coordinates}",
                at(dataclasses.replace(spec, coordinates=other)),
            )
        first = "w" if spec.first == "h" else "h"
        yield (
            f"{_first_words(first)} where the spec turns {_first_words(spec.first, 'its')}: the "
            "rows and columns swapped",
            at(dataclasses.replace(spec, first=first)),
        )
        layout = "interleaved" if spec.layout == "half" else "half"
        yield (
            f"{_layout_words(layout)} where the spec pairs {_layout_words(spec.layout)}: a "
            "checkpoint converted between the forms needs each head's q and k rows permuted, "
            "as transformers' conversion of Pixtral and MoonViT does (f(x[..., inv])[..., perm], "
            "perm = backends.rope_permutation(head_dim)); the permutation is missing",
            at(dataclasses.replace(spec, layout=layout)),
        )
        if spec.slots != "sections":
            for slots in ("blocks", "even_odd", "alternating"):
                if slots != spec.slots:
                    yield (
                        f"slots {_slots_words(slots)} where the spec's are "
                        f"{_slots_words(spec.slots)}",
                        at(dataclasses.replace(spec, slots=slots)),
                    )
        if not spec.coordinates.endswith("based"):
            for rule in ("separate", "max", "min"):
                if rule != spec.coordinates:
                    yield (
                        f"coordinates normalized {NORMALIZED[rule]} where DINOv3's spec "
                        f"normalizes {NORMALIZED[spec.coordinates]}",
                        at(dataclasses.replace(spec, coordinates=rule)),
                    )
        for low in ("bfloat16", "float16"):
            yield (
                f"angles in {low}: the coordinates, frequencies and their products rounded to "
                "it, as a port that builds its angle table in the input's dtype",
                _low_angles(x, positions, grid, spec, low),
            )


NORMALIZED = {
    "separate": "by each axis's own side ('separate')",
    "max": "by the longer side ('max')",
    "min": "by the shorter side ('min')",
}


def _first_words(first: str, whose: str = "the") -> str:
    if first == "w":
        return f"{whose} column's slots first (x-first: Llama 4's and MoonViT's order)"
    return f"{whose} row's slots first (y-first: Pixtral's, Qwen2-VL's, DINOv3's order)"


def _layout_words(layout: str) -> str:
    if layout == "interleaved":
        return "dims (2k, 2k+1), the complex form (Mistral's, Llama 4's view_as_complex)"
    return "dims (k, k + head_dim/2), the half layout (rotate_half)"


def _slots_words(slots: str) -> str:
    return {
        "blocks": "'blocks' (the row's ladder, then the column's: Qwen2-VL, Llama 4, DINOv3)",
        "even_odd": "'even_odd' (one ladder, its even frequencies to the row: Pixtral)",
        "alternating": "'alternating' (slot 2i the row, 2i+1 the column: MoonViT)",
    }[slots]


def _low_angles(x, positions, grid, spec, low) -> np.ndarray:
    """x turned at angles formed in ``low``: each coordinate, frequency and product rounded."""
    dtype = validation.resolve_dtype(low)
    slots = rope2d.slot_map(x.shape[-1], spec)
    coordinates = rope2d.coordinates(positions, spec, grid).astype(dtype)
    frequency = slots.frequency.astype(dtype)
    angles = (coordinates[:, slots.axis.clip(0)] * frequency).astype(np.float64)
    angles = np.where(slots.axis == rope2d.NONE, 0.0, angles)
    return positional.turn(np.asarray(x, np.float64), angles, 1.0, spec.layout)


# --- rope2d_invariance: q . k by offset alone -------------------------------------------------

SHIFTED = "q . k by offset alone"
ORIGIN = "prefix tokens at angle zero"


class Rope2dInvariance(Kind):
    name = "rope2d_invariance"
    contract = (
        "the rope2d kind's f(x, positions): for integer coordinates q . k depends on the "
        "offset (dh, dw) alone (every patch moved by one shift, every q . k the same), and a "
        "prefix token turns by angle zero (its q . k with each patch that of a patch at "
        "coordinate 0)"
    )
    exact = False

    def cases(self, options):
        setting = _setting(options)
        spec, name = spec_of(setting["spec"]), name_of(setting["spec"])
        if follows_grid(spec):
            rule = (
                f"normalized by the grid's sides ({spec.coordinates!r})"
                if spec.reference_grid is None
                else f"stretched to the reference grid {spec.reference_grid}"
            )
            raise UsageError(
                f"rope2d_invariance asks q . k of integer coordinates, where one shift moves "
                f"every offset alike; {name}'s are {rule}, so a shift changes every angle: "
                "check --kind rope2d alone"
            )
        h, w = setting["grid"]
        checks = [
            (
                SHIFTED,
                {"prefix": 0},
                f"the {h} x {w} grid's patches, then the same moved by {SHIFT}",
            )
        ]
        if setting["prefix"]:
            base = int(spec.coordinates == "1-based")
            checks.append(
                (
                    ORIGIN,
                    {"prefix": setting["prefix"]},
                    f"the {h} x {w} grid with {setting['prefix']} prefix token(s), then the "
                    f"prefix standing as the patch (0, 0) and every patch moved by ({base}, "
                    f"{base}), the coordinate of (0, 0)",
                )
            )
        return [
            Case(
                check,
                where,
                {
                    **setting,
                    **shaped,
                    "invariance": check,
                    "tokens": "grid",
                    "dtype": "float32",
                    "seed": i,
                },
            )
            for i, (check, shaped, where) in enumerate(checks)
        ]

    def describe(self, options):
        return self.contract

    def argument_names(self, params):
        return ["x", "positions"]

    def plan(self, params) -> list[tuple[list, bool]]:
        """The two calls: x (2, HEADS, N, head_dim), q and k stacked, at the positions, then at
        the positions moved (every patch by SHIFT; or the prefix at (0, 0), the patches by the
        coordinate of (0, 0))."""
        x, positions = inputs(params, (2,)), positions_of(params)
        marked = positions[:, 0] < 0
        if params["invariance"] == SHIFTED:
            moved = positions + np.array(SHIFT)
        else:
            base = int(spec_of(params["spec"]).coordinates == "1-based")
            moved = np.where(marked[:, None], 0, positions + base)
        return [([x, positions], True), ([x, moved], True)]

    def arguments(self, params):
        return self.plan(params)[0][0]

    def most_elements(self, params):
        return 2 * int(np.size(self.arguments(params)[0]))

    def compose(self, params, results):
        return results[0], results[1]

    def reference(self, params):
        raise NotImplementedError("an invariance holds a target to itself")

    def compare(self, params, actual):
        x = self.arguments(params)[0]
        if actual.shape != (2, *x.shape):
            return differs(f"shape {actual.shape[1:]} where x's {x.shape} is expected")
        spec = spec_of(params["spec"])
        dots, slack = [], []
        for (_, positions), turned in zip((call[0] for call in self.plan(params)), actual):
            bound = rope2d.bound(x, positions, spec=spec, grid=grid_of(positions), dtype="float32")
            dot, allowed = _dots(turned.astype(np.float64), bound)
            dots.append(dot)
            slack.append(allowed)
        apart = np.abs(dots[0] - dots[1])
        wrong = ~(apart <= slack[0] + slack[1])  # a NaN is apart too
        if not wrong.any():
            return conforms(
                f"q . k the same at both placings: apart by at most {float(apart.max()):.2g}, "
                f"within the bound ({float((slack[0] + slack[1]).min()):.2g} or more)"
            )
        return differs(self._where(params, wrong, dots, slack))

    def _where(self, params, wrong, dots, slack) -> str:
        """The first token pair whose q . k moved, both placings of it, and how many did."""
        (first_call, _), (second_call, _) = self.plan(params)
        head, i, j = (int(n) for n in np.argwhere(wrong)[0])
        before, after = first_call[1], second_call[1]
        pairs = int(wrong.any(axis=0).sum())
        said = (
            f"q . k of tokens {i} at {tuple(before[i].tolist())} and {j} at "
            f"{tuple(before[j].tolist())} is {dots[0][head, i, j]:.6g}; at "
            f"{tuple(after[i].tolist())} and {tuple(after[j].tolist())} it is "
            f"{dots[1][head, i, j]:.6g} (apart by {abs(dots[0] - dots[1])[head, i, j]:.2g}, the "
            f"bound {(slack[0] + slack[1])[head, i, j]:.2g}); {pairs} of {wrong[0].size} pairs "
            "moved"
        )
        if params["invariance"] == SHIFTED:
            return (
                f"{said}: q . k follows more than the offset, so the angles are not the "
                "coordinates times fixed frequencies (formed in a low precision, say, or read "
                "from a table of the grid built with h and w swapped)"
            )
        return f"{said}: a prefix token turned by an angle other than zero (the CLS rotated)"


def _dots(turned, bound) -> tuple[np.ndarray, np.ndarray]:
    """(q . k of every token pair (HEADS, N, N), the most it can be off): the answer's q and k
    (turned[0], turned[1]) each within its bound (b_q, b_k: bound[0], bound[1]) of the exact
    rotation, so that |q'.k' - exact| <= |q'|.b_k + b_q.|k'| + b_q.b_k, and the float64 dot's
    own rounding, head_dim eps sum |q' k'|."""
    (q, k), (b_q, b_k) = turned, bound

    def dot(a, b):
        return a @ b.swapaxes(-1, -2)

    allowed = dot(np.abs(q), b_k) + dot(b_q, np.abs(k)) + dot(b_q, b_k)
    allowed += q.shape[-1] * np.finfo(np.float64).eps * dot(np.abs(q), np.abs(k))
    return dot(q, k), allowed
