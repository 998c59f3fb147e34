"""A vision tower's own code run (transformers' modeling modules, torch), where reading its
source cannot say what it does: SigLIP2's NaFlex resize, written as its own weights; a fixed
sin-cos table filled by its own method (ViT-MAE's), named as a backends.grid rule bit for bit;
the rotary modules of Pixtral, Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Llama 4 and DINOv3.

``PROBES`` holds how to call each rotary module (its class, its apply function, where its
token order comes from), not what it does: the answer, the ``rope2d.SPECS`` entry and the
``rope2d.ID_BUILDERS`` order, is what the run shows. A changed module classifies as another
spec or as none (refused in one line); a tower whose rotary module the kit cannot call is
refused, never given a hand-kept answer.
"""

from __future__ import annotations

import ast
import copy
import importlib
from dataclasses import dataclass

import numpy as np

from backends import resize, rope2d
from embedding_parity.usage import UsageError

# A table's probe: small, a fixed seed, unit magnitude (the tolerances' magnitude is its max).
SEED = 57
NAFLEX_SHAPES = ((3, 5), (5, 3))  # non-square both ways, resized from the config's grid
NAFLEX_LENGTH = 20  # max_patches: 15 rows of each image, then 5 padding rows
NAFLEX_WIDTH = 8
PROBE_GRID = (8, 12)  # at a merge of 2, windows of 4 merged units leave a partial window
SMALL_GRID = (3, 5)  # non-square: DINOv3's per-side normalization shows


@dataclass(frozen=True)
class Rotary:
    """What a tower's rotary code did: the spec it turns by, its head width, whether the grid
    changes the turn (normalized coordinates, a table built for one grid), the token order it
    builds and that order's settings, each with the words of its source."""

    spec: str
    head_dim: int
    head_said: str
    grid_matters: bool
    prefix: int  # tokens without a grid position (CLS, registers), where the spec keeps them
    builder: str
    settings: dict
    settings_sources: dict
    said: str
    ids_said: str


def _modeling(reading):
    import torch

    name = type(reading.config).__module__.replace(".configuration_", ".modeling_")
    return importlib.import_module(name), torch


def _vectors(count: int, width: int) -> np.ndarray:
    return np.random.default_rng(SEED).standard_normal((count, width)).astype(np.float32)


# --- SigLIP2's NaFlex resize ----------------------------------------------------------------


def naflex_class(source: str) -> str | None:
    """The class of a modeling file that resizes its table for NaFlex packing (SigLIP2's
    ``resize_positional_embeddings``), or None."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and any(
            isinstance(item, ast.FunctionDef) and item.name == "resize_positional_embeddings"
            for item in node.body
        ):
            return node.name
    return None


def hold_naflex(reading, file: str) -> str:
    """Run the tower's resize_positional_embeddings on a table of the config's grid and hold it
    to ``resize.naflex_positions`` (NaFlex: antialiased bilinear through float32, padding rows
    the (0, 0) position's); the words of the source, or UsageError where it does otherwise."""
    module, torch = _modeling(reading)
    name = naflex_class(reading.source)
    (h, w), count = reading.grid, len(NAFLEX_SHAPES)
    table = _vectors(h * w, NAFLEX_WIDTH)
    shapes = np.array(NAFLEX_SHAPES, dtype=np.int64)
    with torch.no_grad():
        got = getattr(module, name).resize_positional_embeddings(
            torch.from_numpy(table.reshape(h, w, -1)), torch.from_numpy(shapes), NAFLEX_LENGTH
        ).numpy()
    expected = resize.naflex_positions(table, (h, w), shapes, NAFLEX_LENGTH)
    magnitude = float(np.abs(table).max())
    bound = max(
        resize.tolerance(
            "antialiased-bilinear", (h, w), shape, magnitude=magnitude, dtype="float32",
            one_sum=True,
        )
        for shape in NAFLEX_SHAPES
    )
    said = (
        f"{name}.resize_positional_embeddings run on a {h} x {w} table to {count} images "
        f"{' and '.join(f'{a} x {b}' for a, b in NAFLEX_SHAPES)} padded to {NAFLEX_LENGTH} rows"
    )
    far = float(np.abs(got.astype(np.float64) - expected).max())
    if got.shape != expected.shape or not far <= bound:
        raise UsageError(
            f"{reading.model_type}'s code ({file}): {said} differs from resize.naflex_positions "
            f"(antialiased bilinear, padding rows at (0, 0)) by {far:.3g}, past the tolerance "
            f"{bound:.3g}: the kit will not judge a port against a rule its code does not confirm"
        )
    return f"model code: {file} {said}, held to resize.naflex_positions within {bound:.2g}"


# --- a fixed sin-cos table ------------------------------------------------------------------


def sincos_method(source: str, config_class: str) -> tuple[str, str] | None:
    """(class, method) of a modeling file's class taking ``config_class`` whose method fills
    its table by a 2-D sin-cos builder (ViT-MAE's initialize_weights), or None."""
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef) or not _takes(node, config_class):
            continue
        for item in node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            calls = [c for c in ast.walk(item) if isinstance(c, ast.Call)]
            names = {ast.unparse(c.func).lower() for c in calls}
            if any("sinusoidal" in n or "sincos" in n for n in names):
                return node.name, item.name
    return None


def _takes(cls: ast.ClassDef, config_class: str) -> bool:
    """Whether a class's __init__ takes ``config: <config_class>``."""
    methods = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    init = methods[0] if methods else None
    return init is not None and any(
        arg.annotation is not None and ast.unparse(arg.annotation) == config_class
        for arg in init.args.args
    )


def sincos_rule(reading, file: str, found: tuple[str, str]) -> tuple[str, int, str]:
    """Build the tower's embeddings at its config, fill its table by its own method, and name
    the backends.grid rule whose float32 table it is bit for bit: (rule, prefix rows, words);
    UsageError where it is none."""
    from backends import grid as grids

    module, torch = _modeling(reading)
    name, method = found
    (h, w), dim = reading.grid, reading.config.hidden_size
    with torch.no_grad():
        embeddings = getattr(module, name)(reading.config)
        getattr(embeddings, method)()
        table = embeddings.position_embeddings.detach().reshape(-1, dim).numpy()
    prefix = len(table) - h * w
    said = f"{name}.{method} run at dim {dim} on its {h} x {w} grid"
    rules = [
        rule
        for rule in grids.SINCOS2D_RULES
        if prefix >= 0
        and np.array_equal(
            table,
            grids.sincos2d_table((h, w), dim, rule=rule, dtype="float32", prefix_tokens=prefix),
        )
    ]
    if len(rules) != 1:
        raise UsageError(
            f"{reading.model_type}'s code ({file}): {said} gives a table that is "
            f"{'none' if not rules else 'more than one'} of backends.grid's rules "
            f"({', '.join(grids.SINCOS2D_RULES)}) bit for bit in float32"
        )
    return rules[0], prefix, (
        f"model code: {file} {said}: rows {prefix} to {len(table) - 1} the {rules[0]!r} "
        f"table bit for bit, {prefix} zero row(s) before them"
    )


# --- the rotary modules -------------------------------------------------------------------


# How to run one tower's rotary module, by its class: ``run(module, reading, torch)`` -> (x
# (N, D) float32, its rotation (N, D), positions (N, 2) in the token order its code builds, the
# grid, the words of where that order came from).


def _pixtral(module, reading, torch):
    """Pixtral: its tower's forward builds the ids (a small tower of the config's class run
    once on a 3 x 5 image of patches, its rotary's input recorded), then the config's own
    rotary turns a query at them (apply_rotary_pos_emb)."""
    config = reading.config
    small = copy.deepcopy(config)
    for name, value in (("hidden_size", 16), ("num_attention_heads", 1), ("head_dim", 16)):
        setattr(small, name, value)
    small.num_hidden_layers, small.intermediate_size, small.patch_size = 1, 8, 2
    small._attn_implementation = "eager"
    tower = module.PixtralVisionModel(small).eval()
    seen, rotary = {}, tower.patch_positional_embedding
    original = rotary.forward

    def record(x, position_ids):
        seen["ids"] = position_ids.clone()
        return original(x, position_ids)

    rotary.forward = record
    h, w = SMALL_GRID
    tower(torch.zeros(1, 3, 2 * h, 2 * w))
    positions = seen["ids"].numpy().astype(np.int64)
    float32 = torch.zeros(1)  # its forward reads x's device and dtype alone
    cos, sin = module.PixtralVisionRotaryEmbedding(config)(float32, torch.from_numpy(positions))
    x = _vectors(len(positions), cos.shape[-1])  # the width its rotary turns
    q = torch.from_numpy(x)
    turned, _ = module.apply_rotary_pos_emb(q, q, cos, sin, unsqueeze_dim=0)
    return x, turned.numpy(), positions, SMALL_GRID, "PixtralVisionModel.forward's ids"


def _qwen(rotary_class: str):
    def run(module, reading, torch):
        """Qwen-VL: vision_utils' ids (and, where the tower calls it, its window index) for an
        8 x 12 grid, the config's rotary turning a query at them (apply_rotary_pos_emb_vision)."""
        from transformers import vision_utils

        config = reading.config
        merge = config.spatial_merge_size
        grid = (PROBE_GRID[0] * merge // 2, PROBE_GRID[1] * merge // 2)  # whole merge blocks
        grid_thw = torch.tensor([[1, *grid]])
        ids = vision_utils.get_vision_position_ids(grid_thw, merge)
        said = "vision_utils.get_vision_position_ids"
        if calls(reading.source, "get_vision_window_index"):
            index, _ = vision_utils.get_vision_window_index(
                grid_thw,
                spatial_merge_size=merge,
                window_size=config.window_size,
                patch_size=config.patch_size,
            )
            ids = ids.reshape(-1, merge * merge, 2)[index].reshape(-1, 2)
            said += " permuted by get_vision_window_index"
        positions = ids.numpy().astype(np.int64)
        cos, sin = getattr(module, rotary_class)(config)(torch.zeros(1), ids)  # x: its dtype
        x = _vectors(len(positions), cos.shape[-1])  # the width its rotary turns
        q = torch.from_numpy(x)
        turned, _ = module.apply_rotary_pos_emb_vision(q[:, None], q[:, None], cos, sin)
        return x, turned[:, 0].numpy(), positions, grid, said

    return run


def calls(source: str, name: str) -> bool:
    """Whether a modeling file's code calls ``name`` (a Qwen tower that orders its tokens by
    windows calls get_vision_window_index)."""
    return any(
        isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == name
        for node in ast.walk(ast.parse(source))
    )


def _llama4(module, reading, torch):
    """Llama 4: its rotary builds its own table for the config's grid (image_size //
    patch_size a side) and its CLS token; a query turned by vision_apply_rotary_emb."""
    config = reading.config
    side = config.image_size // config.patch_size
    positions = rope2d.raster_ids((side, side), prefix=1, prefix_last=True)
    freqs = module.Llama4VisionRotaryEmbedding(config)(torch.zeros(1))  # (N, 1, D/2) complex
    x = _vectors(len(positions), 2 * freqs.shape[-1])  # the width its rotary turns
    q = torch.from_numpy(x)[None, :, None]  # (1, N, heads, head_dim) as its tower holds q
    turned, _ = module.vision_apply_rotary_emb(q, q, freqs)
    said = "Llama4VisionRotaryEmbedding's own table (its CLS the last token)"
    return x, turned[0, :, 0].numpy(), positions, (side, side), said


def _dinov3(module, reading, torch):
    """DINOv3: its rotary's cos and sin for a 3 x 5 image of patches, applied past the CLS and
    register tokens by its apply_rotary_pos_emb."""
    config = reading.config
    prefix = 1 + config.num_register_tokens
    patch = config.patch_size if isinstance(config.patch_size, int) else config.patch_size[0]
    positions = rope2d.raster_ids(SMALL_GRID, prefix=prefix)
    rotary = module.DINOv3ViTRopePositionEmbedding(config).eval()  # no training jitter
    cos, sin = rotary(torch.zeros(1, 3, patch * SMALL_GRID[0], patch * SMALL_GRID[1]))
    x = _vectors(len(positions), cos.shape[-1])  # the width its rotary turns
    q = torch.from_numpy(x)
    turned, _ = module.apply_rotary_pos_emb(q, q, cos, sin)
    said = f"apply_rotary_pos_emb leaving the first {prefix} tokens (CLS, registers) unturned"
    return x, turned.numpy(), positions, SMALL_GRID, said


PROBES = {
    "PixtralVisionRotaryEmbedding": _pixtral,
    "Qwen2VLVisionRotaryEmbedding": _qwen("Qwen2VLVisionRotaryEmbedding"),
    "Qwen2_5_VLVisionRotaryEmbedding": _qwen("Qwen2_5_VLVisionRotaryEmbedding"),
    "Qwen3VLVisionRotaryEmbedding": _qwen("Qwen3VLVisionRotaryEmbedding"),
    "Llama4VisionRotaryEmbedding": _llama4,
    "DINOv3ViTRopePositionEmbedding": _dinov3,
}


def _probe(reading) -> str:
    """The rotary class, of those PROBES runs, that the tower's modeling file defines."""
    classes = {
        node.name
        for node in ast.parse(reading.source or "").body
        if isinstance(node, ast.ClassDef)
    }
    known = [name for name in PROBES if name in classes]
    if len(known) != 1:
        families = ", ".join(name.split("Vision")[0].split("ViT")[0] for name in PROBES)
        raise UsageError(
            f"{reading.model_type}'s modeling file defines "
            f"{'no rotary module' if not known else 'several rotary modules'} the kit runs "
            f"(those of {families}): its positions are not a 2-D rotation the kit can ask of "
            "its code (a learned table's: --kind pos2d_resize)"
        )
    return known[0]


def classify(x, turned, positions, grid) -> list[str]:
    """The rope2d.SPECS entries whose float64 turn of x at positions is within rope2d.bound of
    ``turned`` (every element; a prefix token exactly as it was)."""
    found = []
    exact = np.asarray(x, dtype=np.float64)
    for name, spec in rope2d.SPECS.items():
        try:
            reference = rope2d.apply_rope2d(exact, positions, spec=spec, grid=grid)
            bound = rope2d.bound(x, positions, spec=spec, grid=grid)
        except ValueError:  # a head width or a prefix the spec does not take
            continue
        if np.all(np.abs(turned.astype(np.float64) - reference) <= bound):
            found.append(name)
    return found


def rotary(reading, file: str) -> Rotary:
    """Run the tower's rotary code at its config and name what it does; UsageError where it
    turns as no spec, or the kit cannot call it."""
    rotary_class = _probe(reading)
    module, torch = _modeling(reading)
    config = reading.config
    with torch.no_grad():
        try:
            x, turned, positions, grid, order = PROBES[rotary_class](module, reading, torch)
        except Exception as error:  # noqa: BLE001 - the owner's code failed: said in one line
            said = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
            raise UsageError(
                f"{reading.model_type}'s code ({file}): running {rotary_class} failed "
                f"({type(error).__name__}: {said})"
            ) from None
    width = x.shape[-1]
    base = _base(config)
    run = f"{rotary_class} run at head_dim {width}, base {base:g} on a {grid[0]} x {grid[1]} grid"
    found = classify(x, turned, positions, grid)
    specs = {rope2d.SPECS[name] for name in found}
    if len(specs) != 1:
        raise UsageError(
            f"{reading.model_type}'s code ({file}): {run} turns as "
            f"{'no spec' if not found else 'several specs: ' + ', '.join(found)} of "
            f"rope2d.SPECS ({', '.join(rope2d.SPECS)}) within rope2d.bound: the kit will not "
            "judge a port against a rotation it cannot name"
        )
    own = [name for name in found if file.split("/")[-2] + "/" in str(rope2d.SPECS[name].sources)]
    spec = (own or found)[0]
    same = [name for name in found if name != spec]  # equal rules under other names
    builder, settings, sources = _order(positions, grid, config)
    head = reading.head_source if width == reading.head_dim else (
        f"model code: {file} {rotary_class} turns {width} dims a head"
    )
    said = f"model code: {file} {run} (eval mode): turns as rope2d.SPECS[{spec!r}]" + (
        f" (the same rule as {', '.join(same)})" if same else ""
    ) + " within rope2d.bound"
    ids_said = f"model code: {file} {order}, on a {grid[0]} x {grid[1]} grid"
    grid_matters = spec == "llama-4" or rope2d.SPECS[spec].coordinates not in (
        "0-based",
        "1-based",
    )
    prefix = int((positions[:, 0] < 0).sum())
    return Rotary(
        spec, width, head, grid_matters, prefix, builder, settings, sources, said, ids_said
    )


def _base(config) -> float:
    rope = getattr(config, "rope_parameters", None) or {}
    return float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def _order(positions, grid, config) -> tuple[str, dict, dict]:
    """The id builder (rope2d.ID_BUILDERS, and the kit's "llama-4": raster, its CLS last) that
    gives the code's token order, its settings from the config, their sources."""
    merge = getattr(config, "spatial_merge_size", None)
    prefix = int((positions[:, 0] < 0).sum())
    candidates = [("raster", {"prefix": prefix} if prefix else {}, {})]
    candidates.append(("llama-4", {}, {}))
    registers = getattr(config, "num_register_tokens", None)
    if prefix and registers == prefix - 1:
        candidates[0][2]["prefix"] = f"config: num_register_tokens {registers} + the CLS"
    if merge is not None:
        merged = {"merge": f"config: spatial_merge_size {merge}"}
        candidates.append(("merge", {"merge": merge}, merged))
        window_size = getattr(config, "window_size", None)
        if window_size is not None:
            window = window_size // (merge * config.patch_size)
            said = (
                f"config: window_size {window_size} // (spatial_merge_size {merge} * "
                f"patch_size {config.patch_size}) = {window} merged units"
            )
            settings = {"merge": merge, "window": window}
            candidates.append(("window", settings, {**merged, "window": said}))
    for builder, settings, sources in candidates:
        if np.array_equal(_ids(builder, grid, settings), positions):
            return builder, settings, sources
    raise UsageError(
        f"{type(config).__name__}'s code orders its tokens as none of the kit's id builders "
        f"({', '.join(b for b, _, _ in candidates)})"
    )


def _ids(builder: str, grid, settings: dict) -> np.ndarray:
    if builder == "llama-4":
        return rope2d.raster_ids(grid, prefix=1, prefix_last=True)
    try:
        return rope2d.ID_BUILDERS[builder](grid, **settings)
    except ValueError:  # a grid the settings do not divide
        return np.zeros((0, 2), np.int64)
