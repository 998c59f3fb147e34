"""pos2d_resize: f(table, old_grid, new_grid, prefix_tokens) -> table, a learned 2-D position
table resized to another grid of patches, within the derived bound; the identity bit for bit.

Contract. ``table`` (prefix_tokens + h0 * w0, D) in float32, float16 or bfloat16: the prefix
rows (CLS) first, then the (h0, w0) grid's rows in raster order (row i, column j is row
prefix_tokens + i * w0 + j); ``old_grid`` (h0, w0) and ``new_grid`` (h, w) tuples of ints;
``prefix_tokens`` an int. Returns (prefix_tokens + h * w, D) in the table's dtype: the prefix
rows as they are, then the grid resized by the model's rule, in raster order of (h, w). The
rule (options; default Hugging Face ViT's, ``interpolate_pos_encoding``): ``kernel``, one of
``backends.resize.KERNELS`` (its coefficient, antialiasing, edges, alignment, size= or
DINOv2's scale factor with its offset), ``prefix_tokens`` (1: CLS; DINOv2's registers carry no
position; SigLIP has none), ``grid`` (the pretrained table's (h0, w0); default 4 x 9, not
square, its 36 patches a square number so that a port taking sqrt(rows) as a side runs and is
named), ``compute_dtype`` (None, or "float32" where DINOv2 and timm upcast a 16-bit table),
``merge`` (default 2: the side of the blocks a merge-block order is named by; a Qwen3-VL
config's spatial_merge_size).
Resizing a table to its own grid returns it bit for bit (Hugging Face and DINOv2 skip the
resize there). A table whose rows are not prefix_tokens + h0 * w0 must be refused (raise).

NaFlex (``naflex``, SigLIP2): f(table, old_grid, spatial_shapes, max_patches) -> (B,
max_patches, D): image b's rows are the table (h0 * w0, D), no prefix, resized to
spatial_shapes[b] = (h, w) by the rule (antialiased bilinear, in float32: Hugging Face's
``resize_positional_embeddings``), then padding rows up to max_patches, each the (0, 0)
position's row (``backends.resize.naflex_positions``). An image of more than max_patches
patches must be refused.

Reference: the rule's weights (``resize.weight_matrix``, float64) applied in float64 to the
table as the rule's computation dtype holds it, rounded once by the kit. Tolerance:
``resize.tolerance`` at the case's grids, dtype and computation dtype, derived from a correct
float32 (or 16-bit) computation's roundings (its docstring), with the largest |value| of the
grid rows as magnitude; the prefix rows must come back bit for bit. Measured (unit-variance
tables, D = 8): torch's F.interpolate at 0.09 to 0.17 of it, a NumPy port summing in float32
at 0.02 to 0.09; a torch port computing a 16-bit table in its dtype where the rule upcasts to
float32 (Hugging Face ViT's code at DINOv2's rule) at 0.54, inside: that mistake has no
float64 result of its own and is not named.

Named mistakes (float64 results from the library's weights; most specific first; a mistake
whose result equals the contract's at a case is not offered there):
- the kernel: antialias on or off; a = -0.5 for -0.75 and back (edges replicated, or
  renormalized as jax.image.resize and Keras on JAX and NumPy do); edges renormalized instead
  of replicated (a = -0.75 over the grid only: mlx-vlm's non-Metal bicubic); align_corners;
  DINOv2's scale_factor (n + 0.1)/n_in against size=, both ways; bilinear for bicubic and back;
  the table resized at its own grid where the rule returns it;
- the layout: h and w transposed (both grids read as (w, h), the new grid alone, the old grid
  alone); a non-square grid treated as square (side sqrt(h0 * w0)); the prefix row read as the
  grid's first patch (table[:h0 * w0]); the prefix rows dropped (named by the result's shape);
  the rows in merge-block order (Qwen3-VL's fast_pos_embed_interpolate emits them so; named
  where both new sides divide by ``merge``);
- the dtype: resized in bfloat16 (a float32 or float16 table cast to bfloat16 and back);
- NaFlex: padding rows zeros, or the table's own (0, 0) row unresized, not the resized (0, 0)
  row; antialias off; align_corners; h and w transposed.
Each is over 300 times the float32 bound at every case it is offered at (the least: mlx-vlm's
renormalized edges, a difference at the border rows alone, 308 times at a 37 x 37 grid; the
others 1900 times and more, at grids of 4 x 9, 14 x 14, 37 x 37 and DINOv2's offset); in
bfloat16 that one is inside the bound at three of those (0.81 to 0.97 of it), the others 2
times and more.

``pos2d_resize_invariance`` asks the properties that need no model of the same call: the
identity resize returns the table bit for bit, and transposing both grids (the table's grid
rows transposed with them) transposes the result, which catches an h/w swap that square grids
hide. It is asked with ``--kind pos2d_resize`` by default, as rope's invariances are.
"""

from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np

from backends import resize, rope2d, validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import Case, Kind, conforms, differs
from embedding_parity.conformance.numerics import FLOATS
from embedding_parity.usage import UsageError

DIM = 8  # the table's width: the rule acts on each column alike
GRID = (4, 9)  # the default pretrained grid: not square, h0 * w0 = 36 = 6 * 6
MOST_SIDE = 64  # the largest grid side the battery builds (DINOv2's is 37)
DTYPES = ("float32", "float16", "bfloat16")
MERGE = 2  # the merge-block side named where no config gives one (Qwen2/2.5/3-VL's)


def _cubic(a: float, x: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution kernel of parameter a at |x| (resize's, written for the
    variants resize.KERNELS does not name)."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def cubic_weights(n_in, n_out, *, a, edges, corners=False, scale=None) -> np.ndarray:
    """(n_out, n_in) float64 weights of a bicubic resize that ``resize.KERNELS`` does not name.

    Keys' kernel of parameter ``a`` at the samples: half-pixel centres, (i + 0.5) * scale - 0.5
    with ``scale`` input pixels per output (n_in / n_out unless given), or i * (n_in - 1) /
    (n_out - 1) with ``corners`` aligned (ATen's align_corners=True); taps floor(src) - 1 ..
    floor(src) + 2. ``edges``: "replicated", the taps' indices clamped to the grid (ATen's
    upsample_bicubic2d), or "renormalized", the taps off the grid dropped and the rest divided
    by their sum (mlx-vlm's non-Metal bicubic). With a = -0.75 replicated these are
    ``resize.weight_matrix("torch-bicubic")``, with a = -0.5 renormalized "keys-bicubic"'s
    (tests/test_pos2d_kinds.py holds them to it)."""
    i = np.arange(n_out, dtype=np.float64)
    if corners:
        src = i * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = (i + 0.5) * (n_in / n_out if scale is None else scale) - 0.5
    taps = np.floor(src)[:, None] + np.arange(-1, 3)  # (n_out, 4)
    weights = _cubic(a, src[:, None] - taps)
    rows = np.broadcast_to(np.arange(n_out)[:, None], taps.shape)
    matrix = np.zeros((n_out, n_in))
    if edges == "replicated":
        np.add.at(matrix, (rows, np.clip(taps, 0, n_in - 1).astype(np.int64)), weights)
        return matrix
    inside = (taps >= 0) & (taps < n_in)
    np.add.at(matrix, (rows[inside], taps[inside].astype(np.int64)), weights[inside])
    return matrix / matrix.sum(axis=1, keepdims=True)


def _scale(kernel: str, n_in: int, n_out: int) -> float:
    """The rule's input pixels per output pixel: n_in / n_out for size=, n_in / (n_out + 0.1)
    for DINOv2's scale factor."""
    offset = resize.KERNELS[kernel].offset
    return n_in / (n_out + (offset or 0.0))


def _library(name: str, *, own_scale: bool = False):
    """One axis' weights by ``name`` of resize.KERNELS, at the contract's scale (DINOv2's
    offset kept where the contract has it), or at ``name``'s own (``own_scale``)."""

    def weights(kernel, n_in, n_out):
        scale = None if own_scale else _scale(kernel, n_in, n_out)
        return resize.weight_matrix(name, n_in, n_out, scale=scale)

    weights.bounded_by = name  # the kernel whose tolerance bounds a port of it
    return weights


def _variant(**rule):
    """One axis' weights by ``cubic_weights`` of ``rule``, at the contract's scale."""

    def weights(kernel, n_in, n_out):
        return cubic_weights(n_in, n_out, scale=_scale(kernel, n_in, n_out), **rule)

    # a cubic's taps and slope, as torch's bicubic (its tolerance bounds a port of it)
    weights.bounded_by = "torch-bicubic"
    return weights


ANTIALIAS_ON = (
    "antialias on (antialias=True, timm's default: Keys' a = -0.5, edges renormalized, the "
    "kernel widened where an axis shrinks), where the rule's is off"
)
ANTIALIAS_OFF = (
    "antialias off (antialias=False, Hugging Face ViT's: a = -0.75, edges replicated, never "
    "widened), where the rule's is on"
)
KEYS = (
    "a = -0.5 for -0.75, edges renormalized (jax.image.resize 'bicubic' with antialias=False; "
    "Keras ops.image.resize on JAX and NumPy)"
)
HALF = "a = -0.5 for -0.75 (Keys' coefficient), edges replicated"
BICUBIC_HALF_PIXEL = (
    "bicubic, half-pixel (F.interpolate's bicubic, align_corners=False), for bilinear with "
    "corners aligned"
)
RENORMALIZED = (
    "edges renormalized instead of replicated (a = -0.75 over the grid only, divided by the "
    "weights' sum: mlx-vlm's non-Metal bicubic)"
)
CORNERS = "align_corners=True (samples at i * (n_in - 1)/(n_out - 1)), where the rule's is False"
WITH_OFFSET = (
    "scale_factor (n + 0.1)/n_in (DINOv2's interpolate_offset), where the rule passes size="
)
WITHOUT_OFFSET = (
    "size= where DINOv2's rule passes scale_factor (n + 0.1)/n_in (Hugging Face's "
    "Dinov2Model against the original's interpolate_offset)"
)
BILINEAR = "bilinear for bicubic"
# The kernel's mistakes, by the contract's kernel: (name, weights(kernel, n_in, n_out)).
_TORCH_CUBIC = (
    (ANTIALIAS_ON, _library("antialiased-bicubic")),
    (KEYS, _library("keys-bicubic")),
    (HALF, _variant(a=-0.5, edges="replicated")),
    (RENORMALIZED, _variant(a=-0.75, edges="renormalized")),
    (CORNERS, _variant(a=-0.75, edges="replicated", corners=True)),
    (BILINEAR, _library("bilinear")),
)
KERNEL_MISTAKES = {
    "torch-bicubic": (
        *_TORCH_CUBIC,
        (WITH_OFFSET, _library("dinov2-offset", own_scale=True)),
    ),
    "dinov2-offset": (
        (WITHOUT_OFFSET, _library("torch-bicubic", own_scale=True)),
        *_TORCH_CUBIC,
    ),
    "antialiased-bicubic": (
        (ANTIALIAS_OFF, _library("torch-bicubic")),
        (
            "not widened where an axis shrinks (a = -0.5 without antialiasing: "
            "jax.image.resize 'bicubic' with antialias=False)",
            _library("keys-bicubic"),
        ),
        (f"{BILINEAR} (antialiased)", _library("antialiased-bilinear")),
    ),
    "keys-bicubic": (
        (
            "a = -0.75 for Keys' -0.5, edges replicated (F.interpolate's bicubic; Keras on "
            "torch)",
            _library("torch-bicubic"),
        ),
        (
            "antialias on (the kernel widened where an axis shrinks)",
            _library("antialiased-bicubic"),
        ),
        (
            "edges replicated instead of renormalized (a = -0.5)",
            _variant(a=-0.5, edges="replicated"),
        ),
        (BILINEAR, _library("bilinear")),
    ),
    "bilinear": (
        ("antialias on, where the rule's is off", _library("antialiased-bilinear")),
        ("align_corners=True, where the rule's is False", _library("bilinear-corners")),
        ("bicubic for bilinear", _library("torch-bicubic")),
    ),
    "antialiased-bilinear": (
        ("antialias off, where the rule's is on", _library("bilinear")),
        (
            "align_corners=True without antialias, where the rule's is False",
            _library("bilinear-corners"),
        ),
        ("bicubic for bilinear (antialiased)", _library("antialiased-bicubic")),
    ),
    "bilinear-corners": (
        (
            "align_corners=False (half-pixel centres), where the rule's is True (Qwen3-VL's "
            "True shipped as False)",
            _library("bilinear"),
        ),
        ("antialias on, corners not aligned", _library("antialiased-bilinear")),
        (
            "bicubic for bilinear, corners aligned",
            _variant(a=-0.75, edges="replicated", corners=True),
        ),
        # its own name: at 16 bits the nearest rule would call it corners-aligned bicubic
        (BICUBIC_HALF_PIXEL, _library("torch-bicubic")),
    ),
}
OWN_GRID = "the table resized to its own grid, where the rule returns it as it is"
BOTH = "h and w transposed: both grids read as (w, h)"
NEW = "h and w transposed in the new grid: size=(w, h), the result read as (h, w)"
OLD = "h and w transposed in the old grid: the table read as a (w0, h0) grid"
SQUARE = "a non-square grid treated as square: the table read as a sqrt(h0 * w0)-sided grid"
MERGE_ORDER = (
    "rows in merge-block order (Qwen3-VL's fast_pos_embed_interpolate emits them so; the "
    "contract is raster order: permute back with rope2d.merge_ids's order)"
)
PREFIX_IN = (
    "the prefix row read as the grid's first patch: table[:h0 * w0] resized, where "
    "table[prefix_tokens:] is the grid"
)
BFLOAT16 = "resized in bfloat16: the table cast to bfloat16 for the resize, then back"
PADDING_ZEROS = "NaFlex padding rows zeros, not the (0, 0) position's row"
PADDING_UNRESIZED = (
    "NaFlex padding rows the table's own (0, 0) row, unresized, not the resized image's"
)


def options_of(options: dict) -> dict:
    """The rule the cases hold a port to, checked: UsageError in one line for an option it
    cannot take."""
    naflex = options.get("naflex", False)
    if not isinstance(naflex, bool):
        raise UsageError(f"naflex {naflex!r}: True (SigLIP2's packed form) or False")
    kernel = options.get("kernel", "antialiased-bilinear" if naflex else "torch-bicubic")
    if kernel not in resize.KERNELS:
        raise UsageError(f"kernel {kernel!r} is no resize kernel: {', '.join(resize.KERNELS)}")
    prefix = options.get("prefix_tokens", 0 if naflex else 1)
    if not isinstance(prefix, int) or isinstance(prefix, bool) or not 0 <= prefix <= 16:
        raise UsageError(
            f"prefix_tokens {prefix!r}: the rows before the grid, 0 to 16 (1 for a CLS row)"
        )
    if naflex and prefix:
        raise UsageError(
            f"prefix_tokens {prefix} with naflex: SigLIP2's NaFlex table has no prefix rows"
        )
    grid = tuple(options.get("grid", GRID))
    if len(grid) != 2 or not all(
        isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MOST_SIDE for n in grid
    ):
        raise UsageError(f"grid {list(grid)!r}: the pretrained (h0, w0), 1 to {MOST_SIDE} a side")
    compute = options.get("compute_dtype", "float32" if naflex else None)
    if compute is not None and compute not in FLOATS:
        raise UsageError(f"compute_dtype {compute!r}: None or one of {', '.join(FLOATS)}")
    merge = options.get("merge", MERGE)
    if not isinstance(merge, int) or isinstance(merge, bool) or not 1 <= merge <= MOST_SIDE:
        raise UsageError(
            f"merge {merge!r}: the side of the squares a merge-block order reads (Qwen3-VL's "
            f"spatial_merge_size), 1 to {MOST_SIDE}"
        )
    rule = {"kernel": kernel, "prefix": prefix, "old": list(grid), "compute": compute}
    return rule | ({"naflex": True} if naflex else {"merge": merge})


def new_grids(old) -> dict:
    """The cases' new grids from the pretrained (h0, w0): two more a side (14 -> 16, 224 to
    256 pixels), five sevenths (14 -> 10: a downsample), and a non-square pair both ways."""
    h, w = old
    down = [max(1, round(n * 5 / 7)) for n in (h, w)]
    return {
        "upsample": [h + 2, w + 2],
        "downsample": down,
        "non-square": [h + 3, w + 1],
        "non-square transposed": [w + 1, h + 3],
    }


def naflex_shapes(old) -> list:
    """A NaFlex batch's images: the pretrained grid, a downsample, and a non-square pair."""
    grids = new_grids(old)
    return [list(old), grids["downsample"], grids["non-square"], grids["non-square transposed"]]


def _table(params, rows: int) -> np.ndarray:
    rng = np.random.default_rng(params["seed"])
    values = rng.standard_normal((rows, DIM))  # unit variance, as the tolerance was measured
    return values.astype(validation.resolve_dtype(params["dtype"]))


def _apply(grid: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """float64 (H * W, D): grid (h, w, D) resized by rows (H, h) and columns (W, w)."""
    return np.einsum("Hh,Ww,hwd->HWd", rows, columns, grid).reshape(-1, grid.shape[-1])


def _weights(kernel: str, old, new) -> tuple[np.ndarray, np.ndarray]:
    """The rule's (rows, columns) weights from grid ``old`` to ``new``."""
    return tuple(resize.weight_matrix(kernel, n_in, n_out) for n_in, n_out in zip(old, new))


def _held(values: np.ndarray, compute) -> np.ndarray:
    """float64 of the values as the rule's computation dtype holds them."""
    if compute is None:
        return values.astype(np.float64)
    return values.astype(validation.resolve_dtype(compute)).astype(np.float64)


class Pos2dResize(Kind):
    name = "pos2d_resize"
    contract = (
        "f(table, old_grid, new_grid, prefix_tokens) -> table (prefix_tokens + h*w, D): the "
        "prefix rows as they are, then the (h0, w0) grid's rows resized to (h, w) by the "
        "model's rule, raster order, the table's dtype"
    )
    exact = False

    def cases(self, options):
        rule = options_of(options)
        if rule.get("naflex"):
            return self._naflex_cases(rule)
        old, found = rule["old"], []
        for dtype in DTYPES:
            for label, new in new_grids(old).items():
                params = rule | {"new": new, "dtype": dtype, "seed": len(found)}
                found.append(Case(f"resize {dtype}", f"{label}: {_grids(old, new)}", params))
            params = rule | {"new": list(old), "dtype": dtype, "seed": len(found)}
            found.append(Case(f"identity {dtype}", f"{_grids(old, old)}: the table back", params))
        h, w = old
        for bad, label in (
            ({"given": [h + 1, w]}, f"old_grid {(h + 1, w)} for a table of a {h}x{w} grid"),
            ({"prefix_given": rule["prefix"] + 1}, "prefix_tokens one more than the table's"),
        ):
            params = rule | {"new": new_grids(old)["upsample"], "dtype": "float32", "seed": 0}
            found.append(Case(f"bad grid: {label}", label, params | {"bad": bad}))
        return found

    def _naflex_cases(self, rule):
        old, found = rule["old"], []
        shapes = naflex_shapes(old)
        most = max(h * w for h, w in shapes) + 3  # every image has padding rows
        for dtype in DTYPES:
            params = rule | {"shapes": shapes, "max_patches": most, "dtype": dtype}
            label = f"{old[0]}x{old[1]} to {', '.join(f'{h}x{w}' for h, w in shapes)}"
            found.append(Case(f"naflex {dtype}", label, params | {"seed": len(found)}))
        big = [old[0] + 1, old[1] + 1]
        params = rule | {"shapes": [big], "max_patches": big[0] * big[1] - 1, "dtype": "float32"}
        label = f"an image of {big[0]}x{big[1]} patches, max_patches one fewer"
        found.append(Case("naflex, bad shapes", label, params | {"seed": 0, "bad": "patches"}))
        return found

    def describe(self, options):
        rule = options_of(options)
        said = f"kernel {rule['kernel']} ({resize.KERNELS[rule['kernel']].used_by})"
        computed = f", computed in {rule['compute']}" if rule["compute"] else ""
        old = f"{rule['old'][0]}x{rule['old'][1]}"
        if rule.get("naflex"):
            return (
                "f(table, old_grid, spatial_shapes, max_patches) -> (B, max_patches, D): image "
                f"b's rows the {old} table resized to spatial_shapes[b] by {said}{computed}, "
                "then padding rows, each the resized (0, 0) row (SigLIP2's NaFlex)"
            )
        return (
            f"{self.contract}; {said}{computed}; prefix_tokens {rule['prefix']}, a pretrained "
            f"{old} grid; the identity resize bit for bit; a grid that is not the table's raises"
        )

    def argument_names(self, params):
        if params.get("naflex"):
            return ["table", "old_grid", "spatial_shapes", "max_patches"]
        return ["table", "old_grid", "new_grid", "prefix_tokens"]

    def arguments(self, params):
        old, prefix = params["old"], params["prefix"]
        table = _table(params, prefix + old[0] * old[1])
        if params.get("naflex"):
            shapes = np.array(params["shapes"], np.int64)  # (B, 2)
            return [table, tuple(old), shapes, params["max_patches"]]
        bad = params.get("bad") or {}
        given = tuple(bad.get("given", old))
        return [table, given, tuple(params["new"]), bad.get("prefix_given", prefix)]

    def _grid(self, params, rows=None):
        """float64 (h0, w0, D): the table's grid rows (or ``rows`` of it) as the rule holds them."""
        table = self.arguments(params)[0]
        prefix, old = params["prefix"], params["old"]
        picked = table[prefix:] if rows is None else table[rows]
        return _held(picked, params["compute"]).reshape(*old, -1)

    def reference(self, params, **changes):
        if params.get("naflex"):
            return self._naflex(params, **changes)
        table = self.arguments(params)[0]
        old, new = params["old"], params["new"]
        if old == new:  # the rule returns the table as it is at its own grid
            return table.astype(np.float64)
        resized = _apply(self._grid(params), *_weights(params["kernel"], old, new))
        return np.concatenate([table[: params["prefix"]].astype(np.float64), resized])

    def _naflex(self, params, *, weights=None, padding="resized", swap=False):
        """float64 (B, max_patches, D), by the rule or a mistake's ``weights(n_in, n_out)``,
        ``padding`` rows the "resized" (0, 0) row, "unresized" the table's, or "zeros"."""
        weights = weights or functools.partial(resize.weight_matrix, params["kernel"])
        table = self.arguments(params)[0]
        old = params["old"]
        grid = _held(table, params["compute"]).reshape(*old, -1)  # (h0, w0, D)
        out = np.zeros((len(params["shapes"]), params["max_patches"], DIM))
        for image, (h, w) in enumerate(params["shapes"]):
            new = (w, h) if swap else (h, w)
            rows, columns = (weights(n_in, n_out) for n_in, n_out in zip(old, new))
            resized = _apply(grid, rows, columns)  # (h * w, D)
            out[image, : h * w] = resized
            if padding == "resized":
                out[image, h * w :] = resized[0]
            elif padding == "unresized":
                out[image, h * w :] = grid[0, 0]
        return out

    def exact_for(self, params):
        return not params.get("naflex") and params["old"] == params["new"]

    def _bound(self, params, dtype, *, kernel=None, new=None, old=None) -> float:
        """resize.tolerance of one resize of the case's table (by ``kernel``, from ``old`` to
        ``new``: the case's own unless given), its largest |value| the magnitude."""
        table = self.arguments(params)[0]
        values = _held(table[params["prefix"] :], params["compute"])
        return resize.tolerance(
            kernel or params["kernel"],
            old or params["old"],
            new or params["new"],
            magnitude=float(np.abs(values).max()),
            dtype=dtype,
            compute_dtype=params["compute"] if dtype == params["dtype"] else None,
        )

    def tolerance(self, params, dtype):
        """resize.tolerance of the case, per element: 0 at the prefix rows (copied), each
        image's bound at its rows (NaFlex's padding rows copy its (0, 0) row)."""
        if params.get("naflex"):
            each = [self._bound(params, dtype, new=shape) for shape in params["shapes"]]
            return np.broadcast_to(np.array(each)[:, None, None], self.reference(params).shape)
        tolerance = np.full(self.reference(params).shape, self._bound(params, dtype))
        tolerance[: params["prefix"]] = 0.0
        return tolerance

    def most_elements(self, params):
        """The reference's, a bad grid's case too: a port that does not refuse it answers with
        a table of the valid case's size or near it, to be judged, not only described."""
        if params.get("naflex"):  # an image of more patches than max_patches: its rows
            rows = max(params["max_patches"], *(h * w for h, w in params["shapes"]))
            return 2 * len(params["shapes"]) * rows * DIM
        table = self.arguments(params)[0]
        return 2 * int(max(np.size(table), np.size(self.reference(params))))

    def compare(self, params, actual):
        reference = self.reference(params)
        if actual.shape != reference.shape:
            return differs(self._shape_words(params, actual, reference))
        if actual.dtype.name != params["dtype"]:
            return super().compare(params, actual)
        table, dtype = self.arguments(params)[0], params["dtype"]
        prefix = 0 if params.get("naflex") else params["prefix"]
        if self.exact_for(params):
            if numerics.same_bits(actual, table):
                return conforms("bit-identical: the table returned as it is", ulps=0.0)
            found = "resized to its own grid, the table must come back bit for bit: "
            found += numerics.distance(actual, reference, dtype)
        elif prefix and not numerics.same_bits(actual[:prefix], table[:prefix]):
            found = "the prefix rows must come back as they are: "
            found += numerics.distance(actual[:prefix], reference[:prefix], dtype)
        else:
            return super().compare(params, actual)
        error = numerics.max_error(actual, reference)
        named = self.diagnose(params, actual, dtype, self.tolerance(params, dtype), error)
        return differs(
            f"{found}{'; ' + named if named else ''}",
            mismatch=numerics.mismatch(actual, self.rounded(reference, dtype), dtype) or None,
        )

    def _shape_words(self, params, actual, reference) -> str:
        said = f"shape {actual.shape} where {reference.shape} is expected"
        prefix = 0 if params.get("naflex") else params["prefix"]
        if prefix and actual.shape == (len(reference) - prefix, DIM):
            return (
                f"{said}: the prefix rows dropped (the table's prefix rows, {prefix}, come back "
                "first, as they are, then the resized grid)"
            )
        return said

    def diagnose(self, params, actual, dtype, tolerance, error):
        """The mistake the result lies within the bound of (each mistake's own: its resize's
        grids and kernel, bfloat16's for the bfloat16 resize), else the base's nearest."""
        for name, result, bound in self._named(params, dtype):
            if result.shape != actual.shape:
                continue
            if numerics.worst_ratio(actual, result, bound)[0] <= 1:
                return name
        return super().diagnose(params, actual, dtype, tolerance, error)

    def mistakes(self, params):
        return [(name, result) for name, result, _ in self._named(params, params["dtype"])]

    def _named(self, params, dtype) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(name, float64 result, its bound per element) of each mistake, most specific first,
        those equal to the contract's result left out, equal ones named together."""
        if params.get("naflex"):
            return _distinct(self._naflex_mistakes(params, dtype), self.reference(params))
        table = self.arguments(params)[0]
        kernel, prefix = params["kernel"], params["prefix"]
        (h0, w0), (h, w) = params["old"], params["new"]
        grid = self._grid(params)  # (h0, w0, D)

        def resized(values, old, new, *, weights=None, bounded_by=None, head=None, low=None):
            """The table's ``values`` read as an ``old`` grid, resized to ``new``, the prefix
            rows (``head``) before them, and the bound of that resize (in bfloat16: ``low``)."""
            weights = weights or functools.partial(resize.weight_matrix, kernel)
            rows, columns = (weights(n_in, n_out) for n_in, n_out in zip(old, new))
            head = table[:prefix].astype(np.float64) if head is None else head
            result = np.concatenate([head, _apply(values.reshape(*old, -1), rows, columns)])
            bound = np.full(result.shape, self._bound(
                params, low or dtype, kernel=bounded_by, old=old, new=new
            ))
            bound[:prefix] = 0.0
            return result, bound

        found = [
            (name, *resized(
                grid, (h0, w0), (h, w), weights=functools.partial(weights, kernel),
                bounded_by=weights.bounded_by,
            ))
            for name, weights in KERNEL_MISTAKES[kernel]
        ]
        found += [
            (OWN_GRID, *resized(grid, (h0, w0), (h, w))),
            (BOTH, *resized(grid, (w0, h0), (w, h))),
            (NEW, *resized(grid, (h0, w0), (w, h))),
            (OLD, *resized(grid, (w0, h0), (h, w))),
        ]
        merge = params.get("merge", MERGE)
        if merge > 1 and h % merge == 0 and w % merge == 0:
            reference = self.reference(params)
            ids = rope2d.merge_ids((h, w), merge=merge)  # (h * w, 2): (row, column) in blocks
            order = np.concatenate([np.arange(prefix), prefix + ids[:, 0] * w + ids[:, 1]])
            bound = np.full(reference.shape, self._bound(params, dtype))
            bound[: None if self.exact_for(params) else prefix] = 0.0
            found.append((MERGE_ORDER, reference[order], bound))
        side = math.isqrt(h0 * w0)
        if side * side == h0 * w0 and h0 != w0:
            found.append((SQUARE, *resized(grid, (side, side), (h, w))))
        if prefix:
            first = self._grid(params, slice(0, h0 * w0))
            found.append((PREFIX_IN, *resized(first, (h0, w0), (h, w))))
        if dtype != "bfloat16":  # every row through bfloat16, the resize's too
            low = table.astype(ml_dtypes.bfloat16).astype(np.float64)
            result, bound = resized(
                low[prefix:], (h0, w0), (h, w), head=low[:prefix], low="bfloat16"
            )
            if (h0, w0) == (h, w):
                result, bound = low, np.zeros(low.shape)
            found.append((BFLOAT16, numerics.rounded(result, "bfloat16").astype(np.float64), bound))
        return _distinct(found, self.reference(params))

    def _naflex_mistakes(self, params, dtype):
        kernel = params["kernel"]

        def bound(bounded_by=None):
            each = [
                self._bound(params, dtype, kernel=bounded_by, new=shape)
                for shape in params["shapes"]
            ]
            return np.broadcast_to(np.array(each)[:, None, None], self.reference(params).shape)

        found = [
            (PADDING_ZEROS, self._naflex(params, padding="zeros"), bound()),
            (PADDING_UNRESIZED, self._naflex(params, padding="unresized"), bound()),
            (BOTH, self._naflex(params, swap=True), bound()),
        ]
        found += [
            (
                name,
                self._naflex(params, weights=functools.partial(weights, kernel)),
                bound(weights.bounded_by),
            )
            for name, weights in KERNEL_MISTAKES[kernel]
        ]
        return found

    def classify_bad(self, params, actual):
        if params.get("naflex"):
            return differs(
                f"returns {actual.dtype.name} {actual.shape} for an image of more patches than "
                "max_patches: a silent answer; refuse it (raise)"
            )
        table, given, _, prefix = self.arguments(params)
        return differs(
            f"returns {actual.dtype.name} {actual.shape} for a table of {len(table)} rows "
            f"given old_grid {given} and prefix_tokens {prefix} ({prefix + given[0] * given[1]} "
            "rows): a silent answer; a grid that is not the table's must raise"
        )


def _distinct(found, reference) -> list:
    """The mistakes whose results differ from the contract's; one whose result equals an
    earlier one's is named with it ("antialias on", where no axis shrinks, is Keys' a = -0.5
    with renormalized edges)."""
    kept = []
    for name, result, bound in found:
        if result.shape == reference.shape and np.array_equal(result, reference):
            continue
        same = [i for i, (_, r, _) in enumerate(kept) if np.array_equal(r, result)]
        if same:
            first, earlier, its = kept[same[0]]
            kept[same[0]] = (f"{first} (at this grid the same as: {name})", earlier, its)
            continue
        kept.append((name, result, bound))
    return kept


def _grids(old, new) -> str:
    return f"{old[0]}x{old[1]} -> {new[0]}x{new[1]}"


TRANSPOSED = "transposed grids = the result transposed"
IDENTITY = "identity = the table"


class Pos2dResizeInvariance(Kind):
    """The properties of pos2d_resize's call that hold whatever the kernel: each case a plan
    of calls (kinds/invariance.py's form), the answers stacked (2, ...) and held together."""

    name = "pos2d_resize_invariance"
    contract = (
        "the pos2d_resize kind's f(table, old_grid, new_grid, prefix_tokens), asked two ways "
        "with no model's rule: a table resized to its own grid is the table, bit for bit; the "
        "grids transposed, the table's grid rows with them, give the result transposed (an h "
        "and w swap that a square grid hides shows on a non-square one)"
    )
    exact = False

    def cases(self, options):
        rule = options_of(options)
        if rule.get("naflex"):
            raise UsageError(
                "pos2d_resize_invariance asks f(table, old_grid, new_grid, prefix_tokens), not "
                "NaFlex's f(table, old_grid, spatial_shapes, max_patches)"
            )
        old = rule["old"]
        params = rule | {"dtype": "float32", "invariance": IDENTITY}
        found = [Case(IDENTITY, f"{_grids(old, old)}", params | {"new": list(old), "seed": 0})]
        for label, new in new_grids(old).items():
            params = rule | {"new": new, "dtype": "float32", "invariance": TRANSPOSED}
            where = f"{label}: {_grids(old, new)} and {_grids(old[::-1], new[::-1])}"
            found.append(Case(TRANSPOSED, where, params | {"seed": len(found)}))
        return found

    def argument_names(self, params):
        return ["table", "old_grid", "new_grid", "prefix_tokens"]

    def arguments(self, params):
        """The one call's arguments (the plan's first call)."""
        return self.plan(params)[0][0]

    def most_elements(self, params):
        rows = params["prefix"] + max(params["new"][0] * params["new"][1], np.prod(params["old"]))
        return 2 * int(rows) * DIM

    def plan(self, params) -> list[tuple[list, bool]]:
        """[(arguments, required)]: the one call, then the transposed one (none for the
        identity, whose other answer is the table itself)."""
        table = _table(params, params["prefix"] + int(np.prod(params["old"])))
        old, new, prefix = tuple(params["old"]), tuple(params["new"]), params["prefix"]
        if params["invariance"] == IDENTITY:
            return [([table, old, old, prefix], True)]
        grid = table[prefix:].reshape(*old, -1).transpose(1, 0, 2).reshape(-1, DIM)  # (w0, h0)
        flipped = np.concatenate([table[:prefix], grid])
        return [([table, old, new, prefix], True), ([flipped, old[::-1], new[::-1], prefix], True)]

    def compose(self, params, results: list) -> tuple[np.ndarray, np.ndarray]:
        """(the one call's answer, the other composed to its shape): the table itself, or the
        transposed call's answer with its (w, h) grid rows transposed back."""
        whole, prefix = results[0], params["prefix"]
        h, w = params["new"]
        for which, answer in zip(("the one call", "the transposed call"), results):
            if answer.shape != (prefix + h * w, DIM):
                raise ValueError(
                    f"{which} returns shape {answer.shape} where ({prefix + h * w}, {DIM}) is "
                    f"expected: prefix_tokens {prefix} + {h} * {w} rows"
                )
        if params["invariance"] == IDENTITY:
            return whole, self.plan(params)[0][0][0]
        other = results[1]
        grid = other[prefix:].reshape(w, h, -1).transpose(1, 0, 2).reshape(h * w, -1)
        return whole, np.concatenate([other[:prefix], grid])

    def reference(self, params):
        raise NotImplementedError("an invariance holds a target to itself")

    def compare(self, params, actual):
        if actual.ndim < 1 or actual.shape[0] != 2:
            return differs(f"shape {actual.shape}: the plan's answers did not stack as (2, ...)")
        whole, composed = actual[0], actual[1]
        if numerics.same_bits(whole, composed):
            return conforms(f"bit-identical: {_asked(params)}")
        if params["invariance"] == IDENTITY:
            found = numerics.distance(whole, composed.astype(np.float64), params["dtype"])
            return differs(f"resized to its own grid, the table does not come back: {found}")
        # each answer within the contract's bound of the float64 result: twice it apart
        bound = 2 * resize.tolerance(
            params["kernel"],
            params["old"],
            params["new"],
            magnitude=float(np.abs(self.arguments(params)[0][params["prefix"] :]).max()),
            dtype=params["dtype"],
            compute_dtype=params["compute"],
        )
        whole, composed = whole.astype(np.float64), composed.astype(np.float64)
        unordered = [
            name
            for name, answer in (("the result", whole), (OTHER, composed))
            if not np.isfinite(answer).all()
        ]
        if unordered:
            return differs(
                f"{'; '.join(unordered)}: NaN or infinity, the two cannot be compared"
            )
        prefix = params["prefix"]
        said = []
        if not numerics.same_bits(actual[0][:prefix], actual[1][:prefix]):
            head = float(np.abs(whole[:prefix] - composed[:prefix]).max())
            said.append(
                f"the prefix rows differ by up to {head:.3g} (the same rows, copied by both "
                "calls: bit for bit)"
            )
        apart = np.abs(whole[prefix:] - composed[prefix:])
        largest = float(apart.max(initial=0.0))
        if largest > bound:
            rows = np.flatnonzero((apart > bound).any(axis=-1))
            w = params["new"][1]
            where = ", ".join(f"({r // w}, {r % w})" for r in rows[:4])
            said.append(
                f"{OTHER}, differs from the result by up to {largest:.3g} (twice the bound: "
                f"{bound:.2g}) in {len(rows)} grid rows, first (row, column) {where}; one "
                "cause, for instance: h and w taken one for the other (a square grid hides it)"
            )
        if not said:
            return conforms(
                f"within twice the kind's bound: {OTHER}, and the result apart by at most "
                f"{largest:.2g} <= {bound:.2g} (bits differ)"
            )
        return differs("; ".join(said))


OTHER = "the transposed call's result, transposed back"


def _asked(params) -> str:
    if params["invariance"] == IDENTITY:
        return "the table resized to its own grid and the table"
    return "the result and the transposed call's, transposed back"
