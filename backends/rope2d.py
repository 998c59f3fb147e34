"""2-D rotary positions (vision towers), written once in float64 NumPy, with an explicit spec.

A vision tower rotates each query and key by its patch's (row, column): every frequency slot of
the head (head_dim / 2 of them, each turning one pair of dims) is given to one axis and turned by
that axis's coordinate times the slot's frequency. Models differ in every part of that sentence,
and a port that gets one part wrong still runs; so the rule is a record of explicit fields
(``Rope2D``), not a model switch:

- ``slots``: how the two axes share the slots (``SLOT_RULES``, one function each, as Hugging
  Face's ROPE_INIT_FUNCTIONS): ``blocks`` [first | second], each axis its own ladder
  base**(-2k/(head_dim/2)) (Qwen2-VL, Llama 4, EVA-02, DINOv3); ``even_odd``, one ladder over the
  head, its even frequencies to the first axis and its odd ones to the second (Pixtral);
  ``alternating``, slot 2i the first axis and 2i+1 the second (MoonViT); ``sections``, dims
  (t, first, second) each with its own ladder, t read at 0 for an image (Flux's [16, 56, 56]);
- ``first``: the axis whose slots come first, "h" (row) or "w" (column: Llama 4, MoonViT);
- ``layout``: which dims a slot turns, "half" (k, k + head_dim/2) or "interleaved" (2k, 2k+1;
  the complex form ``view_as_complex`` is this one);
- ``frequencies``: "inverse", w = 1 / base**(2k/d) (Su et al.), or "periods", w = 2 pi / period
  with period = base**(2k/d) or, given ``periods`` (min, max), min * (max/min)**(k/(n-1))
  (DINOv3);
- ``coordinates``: integer grid indices "0-based" or "1-based" (Llama 4), or DINOv3's centred
  normalized ones in [-1, 1]: 2 (i + 1/2) / S - 1 with S the axis's own side ("separate"), the
  longer side ("max") or the shorter ("min");
- ``reference_grid``: (h, w) the integer coordinates are stretched to, i / S * R per axis (S the
  grid's side, R the reference's): EVA's rule for another resolution (timm's ``ref_feat_shape``,
  (16, 16) for EVA-02, pretrained at 224 px / patch 14), so at 448 px (a 32 grid) row i turns by
  i / 2; None: the indices as they are;
- ``prefix``: what tokens without a grid position (CLS, registers) get: "none" (the model has
  none), "identity" (turned by angle 0: Llama 4's CLS, masked to 0) or "excluded" (left out of
  the rotation: DINOv3 and EVA-02 rotate only the last h*w tokens). Both leave the vector as it
  is; the spec records which the owner does.

Positions are (N, 2) integer (row, column) = (h, w) indices, one per token in token order, and a
prefix token's row is (-1, -1) (Llama 4 marks its CLS with a negative index, ``ID_CLS_TOKEN``).
The id builders decide that order: raster, Qwen2-VL's merge blocks, Qwen2.5-VL's windows,
Pixtral's flat ids; each backend builds them natively with integer ops, bit-identical.

Sources (transformers 5.24 unless named): ``pixtral/modeling_pixtral.py``
(PixtralVisionRotaryEmbedding), Mistral's ``precompute_freqs_cis_2d`` as vLLM's
``model_executor/models/pixtral.py`` carries it, ``qwen2_5_vl/modeling_qwen2_5_vl.py``
(Qwen2_5_VLVisionRotaryEmbedding) and ``vision_utils.py`` (get_vision_position_ids,
get_vision_window_index), ``llama4/modeling_llama4.py`` (Llama4VisionRotaryEmbedding,
vision_apply_rotary_emb), facebookresearch/dinov3 ``dinov3/layers/rope_position_encoding.py``,
mlx-vlm ``models/kimi_vl/vision.py`` (Rope2DPosEmb), timm ``layers/pos_embed_sincos.py``
(RotaryEmbeddingCat, used by ``models/eva.py``), diffusers
``models/transformers/transformer_flux.py`` (FluxPosEmbed) and ``pipelines/flux/pipeline_flux.py``
(_prepare_latent_image_ids).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np

from backends import positional, validation

H, W, NONE = 0, 1, -1  # a slot's axis: the row, the column, or none (Flux's t, 0 for an image)


@dataclasses.dataclass(frozen=True)
class Rope2D:
    """One model's 2-D rotary rule (the module docstring says what each field means)."""

    slots: str
    first: str = "h"
    layout: str = "half"
    base: float = 10000.0
    frequencies: str = "inverse"
    periods: tuple[float, float] | None = None
    coordinates: str = "0-based"
    reference_grid: tuple[int, int] | None = None
    prefix: str = "none"
    sections: tuple[int, int, int] | None = None
    sources: dict = dataclasses.field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        validation.check_rope2d_spec(self)


_HF = "transformers 5.24 "
SPECS = {
    "pixtral": Rope2D(
        "even_odd",
        sources={
            "slots": _HF + "pixtral/modeling_pixtral.py: inv_freq_2d = cat(inv[0::2], inv[1::2])",
            "layout": _HF + "pixtral/modeling_pixtral.py: rotate_half (Mistral's own code is "
            "complex; the conversion permutes q and k)",
            "coordinates": _HF + "pixtral/modeling_pixtral.py: meshgrid(arange(h), arange(w))",
        },
    ),
    "qwen2.5-vl": Rope2D(
        "blocks",
        sources={
            "slots": _HF + "qwen2_5_vl/modeling_qwen2_5_vl.py: recomposition_frequencies "
            "cat([freq_h, freq_w]), inv_freq over head_dim // 2",
            "layout": _HF + "qwen2_5_vl/modeling_qwen2_5_vl.py: apply_rotary_pos_emb_vision",
            "coordinates": _HF + "vision_utils.py: get_vision_position_ids",
        },
    ),
    "llama-4": Rope2D(
        "blocks",
        first="w",
        layout="interleaved",
        coordinates="1-based",
        prefix="identity",
        sources={
            "slots": _HF + "llama4/modeling_llama4.py: cat([freqs_x, freqs_y])[..., ::2], "
            "rope_freq over freq_dim = head_dim // 2",
            "layout": _HF + "llama4/modeling_llama4.py: vision_apply_rotary_emb, view_as_complex",
            "coordinates": _HF + "llama4/modeling_llama4.py: (frequencies_x + 1)",
            "prefix": _HF + "llama4/modeling_llama4.py: img_idx[-1, -1] = -2, masked_fill 0",
        },
    ),
    "dinov3": Rope2D(
        "blocks",
        base=100.0,
        frequencies="periods",
        coordinates="separate",
        prefix="excluded",
        sources={
            "slots": "dinov3/layers/rope_position_encoding.py: angles [HW, 2, D/4].flatten(1, 2)",
            "layout": "dinov3/layers/rope_position_encoding.py: tile(2), rope_rotate_half",
            "base": "dinov3/layers/rope_position_encoding.py: base=100.0, "
            "periods = base ** (2 * arange(D/4) / (D/2)), angles = 2 pi coords / periods",
            "coordinates": "dinov3/layers/rope_position_encoding.py: normalize_coords='separate'",
            "prefix": "dinov3/layers/attention.py: rope applied to q[:, :, prefix:]",
        },
    ),
    "moonvit": Rope2D(
        "alternating",
        first="w",
        layout="interleaved",
        sources={
            "slots": "mlx-vlm models/kimi_vl/vision.py Rope2DPosEmb: stack([x_cis, y_cis], -1), "
            "freqs = 1 / theta ** (arange(0, dim, 4) / dim)",
            "layout": "mlx-vlm models/kimi_vl/vision.py: complex pairs (view_as_complex)",
        },
    ),
    "eva-02": Rope2D(
        "blocks",
        layout="interleaved",
        reference_grid=(16, 16),
        prefix="excluded",
        sources={
            "slots": "timm layers/pos_embed_sincos.py RotaryEmbeddingCat: meshgrid 'ij', "
            "freq_bands(dim // 4, temperature, step=1)",
            "layout": "timm layers/pos_embed_sincos.py: repeat_interleave(2), "
            "rope_rotate_half=False",
            "reference_grid": "timm models/eva.py: ref_feat_shape=(16, 16) for every eva02_* "
            "model; layers/pos_embed_sincos.py build_fourier_pos_embed: t = t / feat * ref",
            "prefix": "timm models/eva.py: apply_rot_embed_cat to q[:, :, npt:]",
        },
    ),
    "flux": Rope2D(
        "sections",
        layout="interleaved",
        sections=(16, 56, 56),
        sources={
            "slots": "diffusers models/transformers/transformer_flux.py FluxPosEmbed: "
            "axes_dim [16, 56, 56], each get_1d_rotary_pos_embed(d_i)",
            "layout": "diffusers models/embeddings.py: repeat_interleave_real=True",
            "coordinates": "diffusers pipelines/flux/pipeline_flux.py _prepare_latent_image_ids: "
            "(0, row, col)",
        },
    ),
}
SPECS["qwen2-vl"] = Rope2D(  # Qwen2.5-VL's rule; its tower adds only the window order
    "blocks",
    sources={
        "slots": _HF + "qwen2_vl/modeling_qwen2_vl.py Qwen2VLVisionRotaryEmbedding: "
        "recomposition_frequencies cat([freq_h, freq_w]), inv_freq over head_dim // 2",
        "layout": _HF + "qwen2_vl/modeling_qwen2_vl.py: apply_rotary_pos_emb_vision",
        "coordinates": _HF + "vision_utils.py: get_vision_position_ids (merge-block order)",
    },
)


# --- the slots: one function per rule, each (pairs, spec) -> (axis, exponent index, ladder width)
#
# Slot k of a rule turns by axis[k]'s coordinate times the ladder's k'-th frequency,
# base**(-2 k' / d): the functions return (axis (pairs,), k' (pairs,), d (pairs,)).


def _blocks(pairs, spec):
    half = pairs // 2  # each axis its own ladder over head_dim / 2 = pairs
    axis = np.repeat([_axis(spec.first), 1 - _axis(spec.first)], half)
    return axis, np.tile(np.arange(half), 2), np.full(pairs, pairs)


def _even_odd(pairs, spec):
    half = pairs // 2  # one ladder over the head: its even entries to the first axis
    axis = np.repeat([_axis(spec.first), 1 - _axis(spec.first)], half)
    index = np.concatenate([np.arange(0, pairs, 2), np.arange(1, pairs, 2)])
    return axis, index, np.full(pairs, 2 * pairs)


def _alternating(pairs, spec):
    axis = np.tile([_axis(spec.first), 1 - _axis(spec.first)], pairs // 2)
    return axis, np.repeat(np.arange(pairs // 2), 2), np.full(pairs, pairs)


def _sections(pairs, spec):
    t, a, b = (n // 2 for n in spec.sections)  # dims to slots; each section its own ladder
    first = _axis(spec.first)
    axis = np.repeat([NONE, first, 1 - first], [t, a, b])
    index = np.concatenate([np.arange(t), np.arange(a), np.arange(b)])
    return axis, index, np.repeat(2 * np.array([t, a, b]), [t, a, b])


SLOT_RULES = {
    "blocks": _blocks,
    "even_odd": _even_odd,
    "alternating": _alternating,
    "sections": _sections,
}


def _axis(name: str) -> int:
    return H if name == "h" else W


class Slots(NamedTuple):
    """What each frequency slot of a head does: ``axis`` (pairs,) H, W or NONE; ``frequency``
    (pairs,) float64, the angle per unit of the axis's coordinate; ``dims`` (pairs, 2) the two
    head dims the slot turns (its pair)."""

    axis: np.ndarray
    frequency: np.ndarray
    dims: np.ndarray


def slot_map(head_dim: int, spec: Rope2D) -> Slots:
    """The slots of a head of ``head_dim`` under ``spec`` (for the rotation and its picture)."""
    validation.check_rope2d_head(head_dim, spec)
    pairs = head_dim // 2
    axis, index, width = SLOT_RULES[spec.slots](pairs, spec)
    k = np.arange(pairs)
    dims = np.stack([2 * k, 2 * k + 1] if spec.layout == "interleaved" else [k, k + pairs], -1)
    return Slots(axis, _frequency(index, width, spec), dims)


def _frequency(index: np.ndarray, width: np.ndarray, spec: Rope2D) -> np.ndarray:
    """(pairs,) float64 angular frequency of ladder entry ``index`` of a ladder of ``width``."""
    exponent = 2 * index / width
    if spec.frequencies == "inverse":
        return spec.base**-exponent
    if spec.periods is None:
        return 2 * math.pi / spec.base**exponent
    low, high = spec.periods  # DINOv3: base = max/min, periods = base**linspace(0, 1) / base * max
    steps = width // 2  # the ladder's length
    fraction = index / np.maximum(steps - 1, 1)  # linspace(0, 1, steps)
    return 2 * math.pi / (low * (high / low) ** fraction)


def coordinates(positions, spec: Rope2D, grid=None) -> np.ndarray:
    """(N, 2) float64 coordinates (row, column) the slots multiply; 0 for prefix rows."""
    positions = np.asarray(positions)
    prefix = positions[:, 0] < 0
    if spec.coordinates in ("0-based", "1-based"):
        at = positions + (spec.coordinates == "1-based")
        if spec.reference_grid is not None:  # timm: t / feat * ref
            at = at / np.asarray(grid, dtype=np.float64) * np.asarray(spec.reference_grid)
    else:
        sides = np.asarray(grid, dtype=np.float64)
        scale = {"separate": sides, "max": sides.max(), "min": sides.min()}[spec.coordinates]
        at = 2 * (positions + 0.5) / scale - 1
    return np.where(prefix[:, None], 0.0, at.astype(np.float64))


def angles(positions, head_dim: int, spec: Rope2D, grid=None) -> np.ndarray:
    """(N, head_dim / 2) float64 angle of each token's slots; 0 for prefix tokens and for slots
    of no axis."""
    slots = slot_map(head_dim, spec)
    at = coordinates(positions, spec, grid)
    return np.where(slots.axis == NONE, 0.0, at[:, slots.axis.clip(0)] * slots.frequency)


def apply_rope2d(x, positions, *, spec: Rope2D, grid=None) -> np.ndarray:
    """float64 2-D rotary embedding of x (..., N, head_dim) at positions (N, 2), as complex
    multiplication (``positional``'s rotation, each slot at its own angle)."""
    x = np.asarray(x, dtype=np.float64)
    positions, grid = validation.check_rope2d(x.shape, np.asarray(positions), spec, grid)
    return positional.turn(x, angles(positions, x.shape[-1], spec, grid), 1.0, spec.layout)


# --- token order: the id builders -----------------------------------------------------------


def raster_ids(grid, *, prefix: int = 0, prefix_last: bool = False) -> np.ndarray:
    """(prefix + h*w, 2) int64 (row, column) in raster order, row-major as ``meshgrid(...,
    "ij")`` flattens; ``prefix`` rows (-1, -1) first (CLS and registers: DINOv3, EVA-02) or, with
    ``prefix_last``, after the patches (Llama 4 appends its CLS)."""
    (h, w), prefix = validation.check_id_grid(grid, prefix=prefix)
    prefix_last = validation.flag(prefix_last, "prefix_last")
    rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    patches = np.stack([rows.ravel(), cols.ravel()], axis=-1)  # (h*w, 2)
    marks = np.full((prefix, 2), -1, dtype=np.int64)
    return np.concatenate([patches, marks] if prefix_last else [marks, patches])


def merge_ids(grid, *, merge: int = 2) -> np.ndarray:
    """(h*w, 2) int64 in Qwen2-VL's merge-block order: each merge x merge square of patches
    (the ones its merger folds into one token) row-major, the squares row-major
    (``vision_utils.get_vision_position_ids``)."""
    (h, w), merge = validation.check_id_grid(grid, merge=merge)
    rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    block = (h // merge, merge, w // merge, merge)
    return np.stack(
        [rows.reshape(block).swapaxes(1, 2).ravel(), cols.reshape(block).swapaxes(1, 2).ravel()],
        axis=-1,
    )


def window_index(grid, *, merge: int = 2, window: int = 4) -> np.ndarray:
    """(h*w / merge**2,) int64 Qwen2.5-VL's order of the merged units: window x window squares
    of them (112 px / merge 2 / patch 14 = 4), each read row-major, the windows row-major; the
    windows at the right and bottom edges hold what is left (``get_vision_window_index``)."""
    (h, w), merge, window = validation.check_id_grid(grid, merge=merge, window=window)
    units_h, units_w = h // merge, w // merge
    index = np.arange(units_h * units_w).reshape(units_h, units_w)
    pad_h, pad_w = -units_h % window, -units_w % window
    padded = np.pad(index, ((0, pad_h), (0, pad_w)), constant_values=-1)
    windows = (units_h + pad_h) // window, window, (units_w + pad_w) // window, window
    order = padded.reshape(windows).swapaxes(1, 2).ravel()
    return order[order >= 0]


def window_ids(grid, *, merge: int = 2, window: int = 4) -> np.ndarray:
    """(h*w, 2) int64: Qwen2.5-VL's tokens, the merge-block ids permuted by its window index, as
    the vision tower permutes both the patches and cos/sin (``permute_input_for_window_attn``)."""
    units = merge_ids(grid, merge=merge).reshape(-1, merge * merge, 2)  # (units, merge², 2)
    return units[window_index(grid, merge=merge, window=window)].reshape(-1, 2)


def flat_ids(grid, *, max_width: int) -> np.ndarray:
    """(h*w,) int64 Pixtral's flat ids row * max_width + column into a (max_height * max_width)
    table (Mistral's and vLLM's form, and transformers' before PR #48105):
    ``divmod(ids, max_width)`` gives raster_ids(grid) back."""
    (h, w), max_width = validation.check_id_grid(grid, max_width=max_width)
    return (np.arange(h)[:, None] * max_width + np.arange(w)).ravel()


ID_BUILDERS = {
    "raster": raster_ids,
    "merge": merge_ids,
    "window": window_ids,
    "flat": flat_ids,
}


# --- the tolerance ----------------------------------------------------------------------------


def bound(x, positions, *, spec: Rope2D, grid=None, dtype=None) -> np.ndarray:
    """Per element of x (..., N, head_dim), the largest |result - float64 reference| a correct
    implementation of apply_rope2d in ``dtype`` (default: x's) can show; 0 for prefix tokens.

    ``positional.rope_bound``'s derivation, slot by slot (c = eps of the compute dtype, d = eps
    of dtype; slot k of frequency w_k at coordinate u, pair z = a + ib):
    - the frequency, formed natively (1 / base**(2k/d) or exp), is off by e_k =
      ``positional.frequency_error`` (|ln w_k| c + 1.5 c); "periods" add 2 pi's and the
      division's roundings (c), and from (min, max) the pow of max/min (|ln(max/min)| c);
    - a coordinate is exact for integers (below 2**24); a normalized one, 2 (i + 1/2) / S - 1,
      rounds the quotient q (c q / 2, doubled) and the difference (c |u| / 2): du = c (q + |u|/2);
      one stretched to a reference grid, i / S * R, the quotient and the product: du = c |u|;
    - the angle u w_k one rounding more (c / 2): dt = |u| w_k (e_k + c/2) + w_k du;
    - the rotation, as rope_bound's: |z| (dt + d/2) + (|a| + |b|) (2c + d).
    """
    c, d = positional.epsilons(np.asarray(x).dtype if dtype is None else dtype)
    x = np.asarray(x, dtype=np.float64)
    positions, grid = validation.check_rope2d(x.shape, np.asarray(positions), spec, grid)
    slots = slot_map(x.shape[-1], spec)
    e = positional.frequency_error(slots.frequency, c, False)
    if spec.frequencies == "periods":  # 2 pi's rounding and the division's, and min * ratio**f
        e = e + c
        if spec.periods is not None:
            e = e + math.log(spec.periods[1] / spec.periods[0]) * c
    at = np.abs(coordinates(positions, spec, grid))[:, slots.axis.clip(0)]  # (N, pairs)
    at = np.where(slots.axis == NONE, 0.0, at)
    du = 0.0
    if spec.coordinates not in ("0-based", "1-based"):
        du = c * ((at + 1) / 2 + at / 2)  # q = (u + 1) / 2 <= (|u| + 1) / 2
    elif spec.reference_grid is not None:
        du = c * at
    angle_error = at * slots.frequency * (e + c / 2) + slots.frequency * du
    a, b = x[..., slots.dims[:, 0]], x[..., slots.dims[:, 1]]
    pair = np.hypot(a, b) * (angle_error + d / 2) + (np.abs(a) + np.abs(b)) * (2 * c + d)
    pair = np.where(positions[:, :1] < 0, 0.0, pair)  # prefix tokens come back as they are
    out = np.empty_like(x)
    out[..., slots.dims[:, 0]], out[..., slots.dims[:, 1]] = pair, pair
    return out
