"""Positions on a grid of patches, the vision tower's first layer: a seeded table on every
backend, along each path, and pictures of what the 2-D rules do.

    compare.py vision                             # a learned 14 x 14 table resized to 16 x 16
    compare.py vision --to 10 16 --kernel KERNEL  # another grid, another kernel
    compare.py vision --scheme sincos2d --rule big_vision
    compare.py vision --scheme rope2d --spec qwen2-vl
    compare.py vision --out docs/vision.png       # docs/vision-similarity.png, ...

--scheme learned resizes the table along the host path (float64, rounded once: every backend
holds the same bits), each framework's own call (within the derived tolerance of the float64
reference) and the tap-by-tap form (bit-identical across NumPy, torch and eager JAX);
sincos2d builds the fixed table on every backend (the host's bits); rope2d rotates random rows
at the grid's positions (within the derived tolerance). Four pictures are written beside
--out: OUT-similarity (the ViT paper's figure: each patch's cosine similarity to every other),
OUT-resize (one channel resized by torch's bicubic and by JAX's), OUT-sampling (where each
rule reads the old grid) and OUT-rope2d (which axis turns each dimension of a head).

Exit status: 0 every backend agrees on every path, 1 one differs, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import backends
from backends import grid as grids
from backends import resize, rope2d, validation
from embedding_parity.jobs import command
from embedding_parity.results.parity import Result
from embedding_parity.results.vision import Vision
from embedding_parity.usage import UsageError

COMMAND = "vision"

SCHEMES = ("learned", "sincos2d", "rope2d")
PICTURES = ("similarity", "resize", "sampling", "rope2d")
DEFAULTS = {"kernel": "torch-bicubic", "rule": "mae", "spec": "pixtral"}
# The similarity picture draws (h * w) squared cells: at most 40 patches a side (DINOv2's 518 px
# at patch 14 is 37) keeps it seconds of work (a 40 x 40 grid is a 1640 x 1640 mosaic).
MAX_SIDE = 40
# The job holds about a dozen tables of the two grids at once (the random table and its float64
# copy, the sin-cos table and its resized copy, each backend's results on each path): the two
# grids' rows together at most 2**22 values (32 MiB in float64 each).
MAX_TABLE_VALUES = 2**22


def run(
    names,
    *,
    scheme: str = "learned",
    grid=(14, 14),
    to=(16, 16),
    kernel: str = DEFAULTS["kernel"],
    rule: str = DEFAULTS["rule"],
    spec: str = DEFAULTS["spec"],
    dim: int = 64,
    dtype: str = "float32",
    seed: int = 0,
) -> Vision:
    """Every backend on one seeded (h*w, dim) table or set of rows, along each path of
    ``scheme``: learned (the table resized from ``grid`` to ``to`` by ``kernel``), sincos2d
    (the fixed table by ``rule``) or rope2d (``spec``'s rotation at the grid's positions)."""
    grid, to = tuple(grid), tuple(to)
    setting = f"grid {grid[0]} x {grid[1]}, dim {dim}, {dtype}, seed {seed}"
    if scheme == "learned":
        table = learned_table(grid, dim, seed=seed, dtype=dtype)
        paths, notes = _resized(names, table, grid, to, kernel)
        heading = f"resize(position_table, {grid} -> {to}, kernel {kernel!r})"
        used = f"{kernel}, as used by {resize.KERNELS[kernel].used_by}"
        return Vision(paths, heading, setting, [used, *notes])
    if scheme == "sincos2d":
        heading = f"sincos2d_table({grid}, {dim}, rule {rule!r})"
        return Vision(_sincos(names, grid, dim, rule, dtype), heading, setting)
    if scheme == "rope2d":
        chosen = rope2d_spec(spec)
        heading = f"apply_rope2d(rows, raster_ids({grid}), spec {spec!r})"
        line = (
            f"{spec}: slots {chosen.slots}, {chosen.first} first, {chosen.layout} layout, base "
            f"{chosen.base:g}, {chosen.coordinates} coordinates"
        )
        return Vision(_rotated(names, grid, dim, chosen, dtype, seed), heading, setting, [line])
    raise ValueError(f"unknown scheme {scheme!r}: use one of {', '.join(SCHEMES)}")


def rope2d_spec(name: str) -> rope2d.Rope2D:
    """A named model's spec; ValueError listing the names."""
    return rope2d.SPECS[backends.validation.choice(name, tuple(rope2d.SPECS), "rope2d spec")]


def learned_table(grid, dim: int, *, seed: int = 0, dtype="float32") -> np.ndarray:
    """The seeded (h*w, dim) learned table: standard normal, as ``backends.shared_weights``
    draws a position table."""
    return backends.shared_weights(1, dim, grid[0] * grid[1], seed=seed, dtype=dtype)[1]


def _resized(names, table, grid, to, kernel):
    """The host path (bit-identical to the reference rounded once), each framework's own call
    (within resize.tolerance of the float64 reference) and the tap form (bit-identical to
    NumPy's taps); a framework that cannot express the kernel is a note, not a row."""
    options = {"kernel": kernel}
    host = resize.resize_table(table, grid, to, **options)
    reference = resize.resize_table(table.astype(np.float64), grid, to, **options)
    magnitude = float(np.abs(table.astype(np.float64)).max(initial=0))
    tolerance = resize.tolerance(kernel, grid, to, magnitude=magnitude, dtype=table.dtype)
    taps = backends.get("numpy").resize_positions(table, grid, to, path="taps", **options)
    paths = {"host path": [], "framework path": [], "tap form": []}
    notes = []
    for name in names:
        be = backends.get(name)

        def run_path(path, be=be):
            return be.to_numpy(be.resize_positions(table, grid, to, path=path, **options))

        paths["host path"].append(_row(name, run_path("host"), host))
        try:
            native = run_path("native")
        except ValueError as refused:  # the kernel has no form in this framework's own call
            notes.append(f"{name}: {refused}")
        else:
            paths["framework path"].append(_row(name, native, reference, tolerance))
        paths["tap form"].append(_row(name, run_path("taps"), taps))
    described = {
        "host path": "host path: float64 weights, rounded once; every backend holds its bits",
        "framework path": "framework path: each framework's own call, held to the float64 "
        "reference (F.interpolate, jax.image.resize; NumPy has none: its taps)",
        "tap form": "tap form: host indices and float32 weights summed tap by tap, held to "
        "NumPy's bits",
    }
    return {described[k]: v for k, v in paths.items() if v}, notes


def _row(name, output, expected, tolerance: float = 0.0, bound=None) -> Result:
    return Result(name, {}, output, expected, tolerance, bound)


def _sincos(names, grid, dim, rule, dtype):
    """Each backend's table, held to the host's bits."""
    host = grids.sincos2d_table(grid, dim, rule=rule, dtype=dtype)
    results = []
    for name in names:
        be = backends.get(name)
        output = be.to_numpy(be.sincos2d_table(grid, dim, rule=rule, dtype=dtype))
        results.append(_row(name, output, host))
    return {"host path: the float64 table rounded once; every backend holds its bits": results}


def _rotated(names, grid, dim, spec, dtype, seed):
    """Random (h*w, dim) rows rotated at the grid's raster positions, held per element to
    rope2d.bound of the float64 rotation."""
    rows = learned_table(grid, dim, seed=seed, dtype=dtype)  # (h*w, head_dim)
    positions = rope2d.raster_ids(grid)  # (h*w, 2)
    expected = rope2d.apply_rope2d(rows, positions, spec=spec, grid=grid)
    bound = rope2d.bound(rows, positions, spec=spec, grid=grid)
    results = []
    for name in names:
        be = backends.get(name)
        output = be.to_numpy(be.apply_rope2d(rows, positions, spec=spec, grid=grid))
        results.append(_row(name, output, expected, float(bound.max(initial=0)), bound))
    return {"framework path: each framework's rotation, held to the float64 rotation": results}


def picture_paths(out: str) -> dict[str, str]:
    """Each picture's file: OUT-similarity.png, ... beside --out (its extension kept)."""
    stem, extension = os.path.splitext(out)
    return {name: f"{stem}-{name}{extension}" for name in PICTURES}


# --- the pictures' data ---------------------------------------------------------------------

# The bicubics the resize picture compares: what F.interpolate and jax.image.resize call bicubic.
BICUBICS = (
    ("torch's bicubic", "torch-bicubic"),  # F.interpolate(mode="bicubic")
    ("JAX's bicubic", "antialiased-bicubic"),  # jax.image.resize(method="bicubic")
)
# The rules the sampling picture draws: where an output patch reads the old grid.
SAMPLING = (
    ("align_corners=False (half-pixel centres):\ntorch, JAX, PIL, timm, HF", "bilinear"),
    ("align_corners=True: big_vision's zoom,\nQwen3-VL's linspace", "bilinear-corners"),
    ("DINOv2's offset: scale_factor\n(W + 0.1) / w, not size=", "dinov2-offset"),
)


def similarity_panels(table, grid, to, *, kernel: str, rule: str) -> list:
    """(name, table, grid) of each mosaic: the learned table, the float64 2-D sin-cos table of
    its grid and width by ``rule``, and that table resized to ``to`` by ``kernel``."""
    sincos = grids.sincos2d_table(grid, table.shape[1], rule=rule)  # (h*w, dim) float64
    resized = resize.resize_table(sincos, grid, to, kernel=kernel)  # (H*W, dim)
    return [
        ("a learned table (random)", table, grid),
        (f"the 2-D sin-cos table ({rule})", sincos, grid),
        (f"that table resized by {kernel}", resized, to),
    ]


def resize_panels(table, grid, to):
    """Channel 0 of the table as an (h, w) array; the two bicubics' (H, W) results (each
    kernel's rule in float64: the host path); each bicubic's weight as a function of the
    distance to the sample; and the taps of one output, h -> H and, antialiased, h -> 5h/7
    (where H is larger)."""
    channel = table[:, :1].astype(np.float64)  # (h*w, 1)
    resized = [
        (label, resize.resize_table(channel, grid, to, kernel=kernel).reshape(to))
        for label, kernel in BICUBICS
    ]
    (_, torch_kernel), (_, jax_kernel) = BICUBICS
    curves = [("torch's: a = -0.75", *kernel_curve(torch_kernel)),
              ("JAX's: a = -0.5", *kernel_curve(jax_kernel))]  # fmt: skip
    taps = [
        (f"torch's taps, {grid[0]} -> {to[0]}", *kernel_taps(torch_kernel, grid[0], to[0])),
        (f"JAX's taps, {grid[0]} -> {to[0]}", *kernel_taps(jax_kernel, grid[0], to[0])),
    ]
    smaller = max(1, grid[0] * 5 // 7)  # the 14 -> 10, unless the run downsamples as far
    if to[0] > smaller:
        widened = f"JAX's taps, {grid[0]} -> {smaller}: widened by {grid[0] / smaller:.2g}"
        taps.append((widened, *kernel_taps(jax_kernel, grid[0], smaller)))
    return channel.reshape(grid), resized, curves, taps


def kernel_curve(kernel: str) -> tuple[np.ndarray, np.ndarray]:
    """(input position - sample position, weight) of an upsampling kernel traced finely: the
    weights one input gets from 450 outputs sampling 9 inputs (the middle input: no edge)."""
    weights = resize.weight_matrix(kernel, 9, 450)  # (450, 9)
    offsets = 4 - resize.sample_points(kernel, 9, 450)
    near = np.abs(offsets) <= 2.5
    return offsets[near], weights[near, 4]


def kernel_taps(kernel: str, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """(input position - sample position, weight) of the taps of one output near the middle,
    the one whose sample falls nearest half-way between two inputs (the kernels differ most)."""
    weights = resize.weight_matrix(kernel, n_in, n_out)  # (n_out, n_in)
    samples = resize.sample_points(kernel, n_in, n_out)
    middle = np.arange(n_out // 4, max(3 * n_out // 4, n_out // 4 + 1))
    i = middle[np.argmin(np.abs(samples[middle] % 1 - 0.5))]
    taps = np.flatnonzero(weights[i])
    return taps - samples[i], weights[i, taps]


def sampling_rules(old: int, new: int) -> list:
    return [(label, resize.sample_points(kernel, old, new)) for label, kernel in SAMPLING]


# rope2d's slot axes as the slot-map picture names them: Flux's third axis is time, 0 for an image
AXIS_NAMES = {rope2d.H: "h", rope2d.W: "w", rope2d.NONE: "t"}
# The slot maps' head: --dim with --scheme rope2d (at most MAX_HEAD_DIM, each dim a bar's cell),
# else 64 (Pixtral's 1024 / 16 heads, DINOv3 ViT-L's and EVA-02 L's 1024 / 16).
SLOT_HEAD_DIM, MAX_HEAD_DIM = 64, 512


def slot_rows(head_dim: int) -> list:
    """(names, axes, pairs, frequencies) per distinct spec of rope2d.SPECS: each head dim's
    axis and frequency, at ``head_dim`` (Flux at its sections' sum)."""
    rows = {}
    for name, spec in rope2d.SPECS.items():
        rows.setdefault(spec, []).append(name)  # specs equal but for their sources: one row
    found = []
    for spec, names in rows.items():
        dim = sum(spec.sections) if spec.slots == "sections" else head_dim
        slots = rope2d.slot_map(dim, spec)
        axes, frequencies = np.empty(dim, dtype=object), np.empty(dim)
        for column in (0, 1):
            axes[slots.dims[:, column]] = [AXIS_NAMES[a] for a in slots.axis]
            frequencies[slots.dims[:, column]] = slots.frequency
        label = f"{' = '.join(names)}\n{spec.slots}, {spec.layout}"
        found.append((label, axes, slots.dims, frequencies))
    return found


# --- the command ---------------------------------------------------------------------------


def grid_side(text: str) -> int:
    """An argparse type: a grid's side, 1 to MAX_SIDE patches."""
    side = command.at_least(1)(text)
    if side > MAX_SIDE:
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_SIDE} patches (the similarity picture draws (h*w)^2 cells), "
            f"got {side}"
        )
    return side


grid_side.__name__ = "int"


def add_arguments(parser) -> None:
    add = parser.add_argument
    add(
        "--scheme",
        choices=SCHEMES,
        default="learned",
        help="what the parity table checks: a learned table resized (host, framework and tap "
        "paths), a fixed 2-D sin-cos table, or 2-D RoPE (default: %(default)s); the pictures "
        "are drawn for every scheme",
    )
    add(
        "--grid",
        type=grid_side,
        nargs=2,
        default=[14, 14],
        metavar=("H", "W"),
        help=f"the table's grid: H rows of W patches, 1 to {MAX_SIDE} each (default: 14 14)",
    )
    add("--to", type=grid_side, nargs=2, default=[16, 16], metavar=("H", "W"),
        help="the grid it is resized to (default: 16 16)")  # fmt: skip
    add("--kernel", choices=tuple(resize.KERNELS), default=DEFAULTS["kernel"],
        help="the resize's kernel (default: %(default)s)")  # fmt: skip
    add("--rule", choices=tuple(grids.SINCOS2D_RULES), default=DEFAULTS["rule"],
        help="the 2-D sin-cos table's rule (default: %(default)s)")  # fmt: skip
    add(
        "--spec",
        choices=tuple(rope2d.SPECS),
        help=f"with --scheme rope2d, the model whose rotation runs (default: {DEFAULTS['spec']})",
    )
    add("--dim", type=command.at_least(1), default=64,
        help="the table's width, or the rotated head's (default: %(default)s)")  # fmt: skip
    add("--seed", type=command.at_least(0), default=0,
        help="seed of the random table and rows (default: %(default)s)")  # fmt: skip
    add("--dtype", choices=list(backends.DTYPES), default="float32",
        help="(default: %(default)s)")  # fmt: skip
    command.add_backends(parser)
    command.add_picture(
        parser, "vision.png", "where the four pictures go: OUT-similarity.png, OUT-resize.png, "
        "OUT-sampling.png, OUT-rope2d.png"
    )  # fmt: skip
    parser.set_defaults(run=main)


def main(args) -> int:
    """1 if a backend differs on a path."""
    from embedding_parity.drawing import table

    _check(args)
    names = command.chosen_backends(args.backends)
    grid, to = tuple(args.grid), tuple(args.to)
    learned = learned_table(grid, args.dim, seed=args.seed, dtype=args.dtype)
    # the pictures' data first: a --rule or --dim they cannot use is refused before any output
    head_dim = args.dim if args.scheme == "rope2d" else SLOT_HEAD_DIM
    drawn = (
        similarity_panels(learned, grid, to, kernel=args.kernel, rule=args.rule),
        resize_panels(learned, grid, to),
        slot_rows(head_dim),
    )
    done = run(names, scheme=args.scheme, grid=grid, to=to, kernel=args.kernel, rule=args.rule,
               spec=args.spec or DEFAULTS["spec"], dim=args.dim, dtype=args.dtype,
               seed=args.seed)  # fmt: skip
    print(done.heading)
    print(done.setting)
    for note in done.notes:
        print(note)
    for path, results in done.paths.items():
        print(f"\n{path}")
        print(table.parity_table(results))
    paths = picture_paths(args.out)
    _draw(paths, grid, to, head_dim, *drawn, show=command.show(args))
    print()
    for path in paths.values():
        print(f"picture: {os.path.abspath(path)}")
    print(done.verdict)
    return 1 if done.differing else 0


def _draw(paths, grid, to, head_dim, panels, resized, slots, *, show: bool) -> None:
    from embedding_parity.drawing import vision as pictures

    size = f"{grid[0]} x {grid[1]}"
    pictures.similarity(
        panels,
        f"Each patch's position row against every other's (cosine similarity), the ViT paper's "
        f"figure 7: one small map per patch, laid out on the {size} grid. A random table has no "
        "structure; the sin-cos rows are all alike (their slow columns barely turn across the "
        "grid), yet each map peaks at its own patch and falls off along its row and column",
        paths["similarity"],
        show=show,
    )
    pictures.resize(
        *resized,
        f"Channel 0 of the learned table resized {size} -> {to[0]} x {to[1]}: there is no single "
        "bicubic. torch: a = -0.75, edges replicated, no antialias; JAX: a = -0.5, edges "
        "renormalized, antialiased (wider when downsampling). Each kernel's rule in float64 (the "
        "host path); F.interpolate and jax.image.resize agree with it within resize.tolerance",
        paths["resize"],
        show=show,
    )
    pictures.sampling(
        sampling_rules(grid[1], to[1]),
        grid[1],
        to[1],
        f"Where each rule samples the old grid: {to[1]} new columns read from {grid[1]} old ones",
        paths["sampling"],
        show=show,
    )
    pictures.slot_maps(
        slots,
        f"2-D RoPE: which axis turns each dimension of a head of {head_dim} (Flux: 128), and how "
        "fast, by model",
        paths["rope2d"],
        show=show,
    )


def _check(args) -> None:
    """The flags that go together; each picture's folder; the table's size."""
    if args.spec is not None and args.scheme != "rope2d":
        raise UsageError("--spec goes with --scheme rope2d")
    sections = rope2d.SPECS[args.spec or DEFAULTS["spec"]].sections
    if args.scheme == "rope2d" and sections and sum(sections) != args.dim:
        raise UsageError(
            f"--spec {args.spec} rotates a head of {sum(sections)} dims (sections "
            f"{', '.join(map(str, sections))}), not --dim {args.dim}: pass --dim {sum(sections)}"
        )
    if args.scheme == "rope2d" and args.dim > MAX_HEAD_DIM:
        raise UsageError(
            f"--dim {args.dim} is over {MAX_HEAD_DIM} for --scheme rope2d: it is a head's width, "
            "and the slot map draws each of its dims"
        )
    if args.scheme == "rope2d":  # the head's width, checked before any picture reads --dim
        try:
            validation.check_rope2d_head(args.dim, rope2d.SPECS[args.spec or DEFAULTS["spec"]])
        except ValueError as error:
            raise UsageError(f"--dim {args.dim}: {error}") from None
    command.check_picture(args.out)  # its extension and folder are the pictures'
    for path in picture_paths(args.out).values():
        command.check_picture(path)
    (h, w), (new_h, new_w) = args.grid, args.to
    count = (h * w + new_h * new_w) * args.dim
    if count > MAX_TABLE_VALUES:
        raise UsageError(
            f"the tables: (--grid {h} {w} + --to {new_h} {new_w} patches) x --dim {args.dim} = "
            f"{count} values is over the limit of {MAX_TABLE_VALUES}: lower --dim or the grids"
        )
