"""Positional schemes written once from their formulas, in float64 NumPy.

This is the oracle: every backend computes sinusoidal tables and rotary embeddings
natively, in its own framework, and is tested against these functions with the
tolerance below. The backends take only the precision policy (``compute_dtype``)
from here.

Sources: Vaswani et al. 2017, section 3.5 (sinusoidal); Su et al. 2021, RoFormer
(rotary, as complex multiplication); Hugging Face transformers,
``modeling_rope_utils.py`` (the "linear", "llama3" and "proportional" frequency rules and their
config names); Press et al. 2022, "Train Short, Test Long" (ALiBi), with the head-count
rule of Hugging Face's BLOOM ``build_alibi_tensor``; Raffel et al. 2020 (T5), with the
bucket rule of Hugging Face's ``T5Attention._relative_position_bucket``.

ALiBi and T5 put position into the attention scores rather than the vectors: a bias
(num_heads, q_len, k_len) added to q . k / sqrt(d) before the softmax. Query i of q_len
sits at position k_len - q_len + i (the last q_len of k_len positions, as in a decode step
with a cache); key j at position j.
"""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np

from backends import validation


def rope_permutation(dim: int) -> np.ndarray:
    """Index permutation from the interleaved layout to the half layout, for one head.

    Interleaved pairs dimensions (2i, 2i+1); half pairs (i, i + dim/2). So
    ``x_half = x_interleaved[..., perm]`` with perm = [0, 2, 4, ..., 1, 3, 5, ...]:

    - RoPE: ``apply_rope(x[..., perm], layout="half")`` equals
      ``apply_rope(x, layout="interleaved")[..., perm]``.
      To convert a model, permute the rows of each head's q and k projection
      (``w.reshape(n_heads, head_dim, -1)[:, perm].reshape(w.shape)``, the same
      reordering as Hugging Face's ``convert_llama_weights_to_hf.permute``); the
      attention scores q . k are unchanged, since both sides move together.
    - Sinusoidal: ``table(layout="concat") == table(layout="interleaved")[:, perm]``.
    """
    validation.check_even_dim(dim, "a layout permutation")
    return np.concatenate([np.arange(0, dim, 2), np.arange(1, dim, 2)])


# --- RoPE: one function per frequency rule, as Hugging Face's ROPE_INIT_FUNCTIONS ----------
#
# Each takes (dim, base, params, seq_len), dim the rotated width (rotary_dim), params the
# normalised scaling dict (``validation.check_rope_scaling``), and returns (w, attention_factor):
# the (dim/2,) float64 angular frequencies and the factor cos and sin are multiplied by.
# Transcribed from transformers 5.24 ``modeling_rope_utils.py``, in float64.


def _default(dim, base, params, seq_len):
    """w_i = base**(-2i/dim) (Su et al. 2021)."""
    return base ** -(np.arange(0, dim, 2, dtype=np.float64) / dim), 1.0


def _linear(dim, base, params, seq_len):
    """Position interpolation (kaiokendev; Chen et al. 2023): position p acts as p / factor."""
    return _default(dim, base, None, None)[0] / params["factor"], 1.0


def _dynamic(dim, base, params, seq_len):
    """Dynamic NTK (bloc97, emozilla): past max_position_embeddings L, the base grows with the
    length n = max(seq_len, L): base * (factor * n / L - (factor - 1)) ** (dim / (dim - 2))."""
    longest = params["max_position_embeddings"]
    n = max(seq_len or 0, longest)
    factor = params["factor"]
    grown = base * (factor * n / longest - (factor - 1)) ** (dim / (dim - 2))
    return _default(dim, grown, None, None)[0], 1.0


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention scale 0.1 * mscale * ln(scale) + 1, and 1 for scale <= 1."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_correction_range(dim, base, params) -> tuple[float, float]:
    """The pairs between which YaRN blends (Peng et al. 2023, eq. 17-18): the dimension that
    turns beta_fast (32) and beta_slow (1) times over the original context, floored and ceiled
    unless ``truncate`` is False, then clamped to [0, dim - 1]."""
    original = params["original_max_position_embeddings"]

    def dimension(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dimension(params.get("beta_fast", 32)), dimension(params.get("beta_slow", 1))
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def yarn_attention_factor(params) -> float:
    """``attention_factor`` if given; else mscale(factor, mscale) / mscale(factor, mscale_all_dim)
    when both are set (DeepSeek-V3), else mscale(factor) = 0.1 ln(factor) + 1."""
    if params.get("attention_factor") is not None:
        return params["attention_factor"]
    factor = params["factor"]
    if params.get("mscale") and params.get("mscale_all_dim"):
        return yarn_mscale(factor, params["mscale"]) / yarn_mscale(factor, params["mscale_all_dim"])
    return yarn_mscale(factor)


def _yarn(dim, base, params, seq_len):
    """YaRN (Peng et al. 2023): interpolated (w / factor) below the correction range, kept above
    it, a linear ramp between; cos and sin scaled by the attention factor."""
    w = _default(dim, base, None, None)[0]
    low, high = yarn_correction_range(dim, base, params)
    if low == high:
        high += 0.001  # as Hugging Face: no singular ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    kept = 1.0 - ramp  # the share of the original frequency
    return w / params["factor"] * (1.0 - kept) + w * kept, yarn_attention_factor(params)


def longrope_factor(params) -> float:
    """LongRoPE's factor: as given, else max_position_embeddings / original."""
    if params.get("factor") is not None:
        return params["factor"]
    return params["max_position_embeddings"] / params["original_max_position_embeddings"]


def _longrope(dim, base, params, seq_len):
    """LongRoPE (Ding et al. 2024; Phi-3): w_i / long_factor[i] when the length (max position + 1)
    exceeds original_max_position_embeddings, else w_i / short_factor[i]; cos and sin scaled by
    attention_factor, else sqrt(1 + ln(factor) / ln(original)) (1 for factor <= 1)."""
    original = params["original_max_position_embeddings"]
    chosen = "long_factor" if seq_len and seq_len > original else "short_factor"
    w = _default(dim, base, None, None)[0] / np.asarray(params[chosen], np.float64)
    factor = longrope_factor(params)
    attention = params.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    return w, attention


def _llama3(dim, base, params, seq_len):
    """Llama 3.1: wavelengths above original / low_freq_factor slowed by factor, those below
    original / high_freq_factor kept, a smooth blend between (none where the two factors are
    equal, as Llama 4's are: a step at original / low_freq_factor)."""
    w = _default(dim, base, None, None)[0]
    context = params["original_max_position_embeddings"]
    factor, low, high = params["factor"], params["low_freq_factor"], params["high_freq_factor"]
    wavelength = 2 * math.pi / w
    if high == low:  # no band between the two: the blend is never taken
        blended = w
    else:
        smooth = (context / wavelength - low) / (high - low)
        blended = (1 - smooth) * w / factor + smooth * w
    slowed = np.where(wavelength > context / low, w / factor, blended)
    return np.where(wavelength < context / high, w, slowed), 1.0


def _proportional(dim, base, params, seq_len):
    """Gemma 4's global layers: every pair of the head (dim = head_dim) keeps its slot, the
    first int(partial_rotary_factor * dim // 2) turning at base**(-2i/dim), the denominator the
    head and not the rotated width, and the rest at frequency 0 (passed through); all divided by
    factor (1 unless given)."""
    turning = int(params.get("partial_rotary_factor", 1.0) * dim // 2)
    w = np.zeros(dim // 2, dtype=np.float64)
    w[:turning] = _default(dim, base, None, None)[0][:turning]
    return w / params.get("factor", 1.0), 1.0


def _freq_factors(dim, base, params, seq_len):
    """llama.cpp's freq_factors (ggml_rope_ext's third operand: the rope_freqs tensor Llama 3.x
    GGUF files carry their llama3 rule in, Phi-3's rope_factors_long or _short): each pair's
    frequency divided by its factor, w_i = base**(-2i/dim) / factors[i]; cos and sin times
    attention_factor (1 unless given)."""
    w = _default(dim, base, None, None)[0] / np.asarray(params["factors"], np.float64)
    return w, params.get("attention_factor", 1.0)


ROPE_INIT_FUNCTIONS = {
    "default": _default,
    "linear": _linear,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "longrope": _longrope,
    "llama3": _llama3,
    "proportional": _proportional,
    "freq_factors": _freq_factors,
}
# The rules whose frequencies depend on the length: Hugging Face's max(position_ids) + 1.
LENGTH_RULES = ("dynamic", "longrope")


def rope_parameters(
    dim: int, base: float = 10000.0, scaling: dict | None = None, seq_len: int | None = None
) -> tuple[np.ndarray, float]:
    """(w, attention_factor): the (dim/2,) float64 frequencies of a rotation of width ``dim``
    (the rotated part of a head) under a scaling rule, and the factor on cos and sin.
    ``seq_len``: the length, for the rules that depend on it (``LENGTH_RULES``)."""
    validation.check_even_dim(dim, "RoPE")
    scaling = validation.check_rope_scaling(scaling, dim)
    kind = "default" if scaling is None else scaling["rope_type"]
    return ROPE_INIT_FUNCTIONS[kind](dim, base, scaling, seq_len)


def length(positions) -> int:
    """The length the length rules see: max(positions) + 1 (Hugging Face's rule), 0 if none."""
    return int(np.max(positions)) + 1 if np.size(positions) else 0


def frequencies(dim: int, base: float = 10000.0, scaling: dict | None = None, seq_len=None):
    """(dim/2,) float64 angular frequencies w_i = base**(-2i/dim), after a scaling rule."""
    return rope_parameters(dim, base, scaling, seq_len)[0]


def sinusoidal_table(
    num_positions: int, dim: int, *, base: float = 10000.0, layout: str = "interleaved"
):
    """(num_positions, dim) float64: PE[p, 2i] = sin(p / base**(2i/dim)), PE[p, 2i+1] = cos(...)
    for layout "interleaved"; sines in the first half and cosines in the second for "concat"."""
    validation.check_sinusoidal(num_positions, dim, base, layout)
    angles = np.arange(num_positions, dtype=np.float64)[:, None] / base ** (
        np.arange(0, dim, 2) / dim
    )
    table = np.empty((num_positions, dim), dtype=np.float64)
    if layout == "interleaved":
        table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    else:
        table[:, : dim // 2], table[:, dim // 2 :] = np.sin(angles), np.cos(angles)
    return table


def apply_rope(
    x, positions, *, base: float = 10000.0, layout: str = "half", scaling=None, rotary_dim=None
):
    """float64 RoPE of x (..., T, head_dim) at integer positions (T,), as complex multiplication.

    The first ``rotary_dim`` dims (all by default; GPT-NeoX rotates a quarter) are turned and
    the rest pass through. Each pair (a, b) is the complex number a + ib, turned by
    exp(i * p * w_k) and scaled by the rule's attention factor: layout "interleaved" pairs
    (2k, 2k+1), layout "half" pairs (k, k + rotary_dim/2).
    """
    x = np.asarray(x, dtype=np.float64)
    positions, scaling, rotary_dim = validation.check_rope(
        x.shape, np.asarray(positions), base, layout, scaling, rotary_dim
    )
    w, attention = rope_parameters(rotary_dim, base, scaling, length(positions))
    return turn(x, positions.astype(np.float64)[:, None] * w, attention, layout)


def turn(x, angles, attention, layout):
    """x's first 2 * pairs dims turned by angles (T, pairs) as complex numbers, times
    ``attention``, paired by ``layout``; the rest passed through."""
    rotary_dim = 2 * angles.shape[-1]
    turn = attention * np.exp(1j * angles)
    rotated, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if layout == "interleaved":
        z = (rotated[..., 0::2] + 1j * rotated[..., 1::2]) * turn
        turned = np.stack([z.real, z.imag], axis=-1).reshape(rotated.shape)
    else:
        half = rotary_dim // 2
        z = (rotated[..., :half] + 1j * rotated[..., half:]) * turn
        turned = np.concatenate([z.real, z.imag], axis=-1)
    return np.concatenate([turned, rest], axis=-1)


def mrope_axes(pairs: int, section, mrope_layout: str = "chunked") -> np.ndarray:
    """(pairs,) int: which position row (0 t, 1 h, 2 w) turns each frequency slot of
    multimodal RoPE. "chunked" (Qwen2-VL, Qwen2.5-VL, GLM-4V: ``freq.split(mrope_section)``,
    chunk i read from row i % 3): section[0] slots of t, then h's, then w's. "interleaved"
    (Qwen3-VL, Qwen3.5: ``apply_interleaved_mrope``): slot j reads h where j % 3 == 1 and
    j < 3 * section[1], w where j % 3 == 2 and j < 3 * section[2], else t."""
    section = validation.check_mrope(section, mrope_layout, 2 * pairs)
    if mrope_layout == "chunked":
        return np.repeat(np.arange(3), section)
    j = np.arange(pairs)
    axes = np.zeros(pairs, dtype=np.int64)
    axes[(j % 3 == 1) & (j < 3 * section[1])] = 1
    axes[(j % 3 == 2) & (j < 3 * section[2])] = 2
    return axes


def apply_mrope(
    x,
    positions,
    *,
    section,
    mrope_layout: str = "chunked",
    base: float = 10000.0,
    layout: str = "half",
    rotary_dim=None,
):
    """float64 multimodal RoPE of x (..., T, head_dim) at positions (3, T): the t, h and w rows
    (equal for text tokens, where it is plain RoPE). Frequency slot k of the first rotary_dim
    dims is turned by positions[axis_k] * w_k (``mrope_axes``), paired by ``layout``."""
    x = np.asarray(x, dtype=np.float64)
    mrope = {"layout": mrope_layout, "section": section}
    positions, rotary_dim, _, section = validation.check_mrope_rope(
        x.shape, np.asarray(positions), base, layout, None, rotary_dim, mrope
    )
    axes = mrope_axes(rotary_dim // 2, section, mrope_layout)
    angles = positions.astype(np.float64)[axes].T * frequencies(rotary_dim, base)  # (T, pairs)
    return turn(x, angles, 1.0, layout)


# The rules of the multimodal position builder (Qwen2-VL's and Qwen2.5-VL's get_rope_index), named
# by the transformers version that has them (each checked bit for bit against that version's
# code): what 5.24 changed from 4.57.1 is the float multiply of the temporal step, the advance
# after a video, the padded slots and the length the decode delta counts.
MROPE_POSITION_RULES = {
    "transformers 5.24": {
        "step_cast_first": False,  # floor(i * tokens_per_second * second), the product in float32
        "advance": "max(h, w)",  # the text after a grid: start + max(h, w) / merge
        "padded": 0,  # what padded slots hold
        "delta_counts": "tokens",  # the delta's length: the row's tokens, padding left out
    },
    "transformers 4.57.1": {
        "step_cast_first": True,  # torch.as_tensor(second_per_grid_t, dtype=int64): 0.5 s is 0
        "advance": "grid max + 1",  # the grid's largest position + 1, a video's frames included
        "padded": 1,
        "delta_counts": "row",  # the padded row's length
    },
}


# How a model's builder numbers a video: "whole", one grid of t frames (Qwen2-VL, Qwen2.5-VL);
# "split", each frame a grid (1, h, w) of its own, the frames apart in the text between them
# (Qwen3-VL, Qwen3.5 and GLM-4V put a timestamp before each: their get_rope_index, 5.24).
MROPE_FRAMES = ("whole", "split")


def mrope_position_ids(
    mm_token_type_ids,
    image_grid_thw,
    video_grid_thw,
    second_per_grid_ts=None,
    attention_mask=None,
    *,
    spatial_merge_size: int = 2,
    tokens_per_second: int = 1,
    rule: str = "transformers 5.24",
    frames: str = "whole",
):
    """((3, B, T) int64 position ids, (B, 1) int64 decode deltas): the t, h and w rows of a
    batch of text (type 0), image (1) and video (2) tokens, by Qwen2.5-VL's ``get_rope_index``
    (Qwen2-VL's with tokens_per_second 1). Exact integers.

    Text counts on from the position before it; a grid (t, h, w) of patches, merged by
    spatial_merge_size, gives its tokens t = start + floor(i * step) (step 1 for an image,
    tokens_per_second * second_per_grid_t for a video, in float32 as the models' tensors are),
    h = start + row, w = start + column. Padding (attention_mask 0) is skipped. The delta of a
    row is max(position) + 1 - its length: a decode step's position is the count of tokens
    before it plus the delta. ``rule``: one of MROPE_POSITION_RULES (how 4.57.1 differs).
    ``frames`` "split" (Qwen3-VL, Qwen3.5, GLM-4V): a video grid (t, h, w) is t grids (1, h, w),
    one per run of video tokens, each frame numbered as an image (second_per_grid_ts unread)."""
    return mrope_positions_by(
        mm_token_type_ids,
        image_grid_thw,
        video_grid_thw,
        second_per_grid_ts,
        attention_mask,
        spatial_merge_size=spatial_merge_size,
        tokens_per_second=tokens_per_second,
        frames=validation.choice(frames, MROPE_FRAMES, "frames rule"),
        **MROPE_POSITION_RULES[validation.choice(rule, tuple(MROPE_POSITION_RULES), "rule")],
    )


def mrope_positions_by(
    mm_token_type_ids,
    image_grid_thw,
    video_grid_thw,
    second_per_grid_ts,
    attention_mask,
    *,
    spatial_merge_size,
    tokens_per_second,
    step_cast_first,
    advance,
    padded,
    delta_counts,
    frames="whole",
):
    """mrope_position_ids by the choices a rule makes (MROPE_POSITION_RULES' keys, and
    ``frames``): the versions' and models' rules, and the mistakes ports make, are these
    choices."""
    types, images, videos, seconds, mask, spatial_merge_size, tokens_per_second = (
        validation.check_mrope_positions(
            mm_token_type_ids,
            image_grid_thw,
            video_grid_thw,
            second_per_grid_ts,
            attention_mask,
            spatial_merge_size,
            tokens_per_second,
            split=frames == "split",
        )
    )
    batch, length = types.shape
    if frames == "split":  # each frame its own grid (1, h, w)
        videos = np.repeat(videos, videos[:, 0], axis=0)
        videos[:, 0] = 1
    grids = {1: iter(images), 2: iter(videos)}
    seconds = iter(() if seconds is None else seconds)  # None: a split video reads none
    position_ids = np.full((3, batch, length), padded, dtype=np.int64)
    deltas = np.zeros((batch, 1), dtype=np.int64)
    for row in range(batch):
        kept = mask[row]
        pieces, current = [], 0
        for kind, run in itertools.groupby(types[row][kept].tolist()):
            count = len(list(run))
            if kind == 0:
                pieces.append(np.tile(current + np.arange(count), (3, 1)))
                current += count
                continue
            t, h, w = (int(n) for n in next(grids[kind]))
            h, w = h // spatial_merge_size, w // spatial_merge_size
            if count != t * h * w:
                raise ValueError(
                    f"{count} {'image' if kind == 1 else 'video'} tokens in a row where the grid "
                    f"({t}, {h * spatial_merge_size}, {w * spatial_merge_size}) merged by "
                    f"{spatial_merge_size} has {t * h * w}: one grid per run of its tokens "
                    "(a vision_start token between two grids)"
                )
            step = np.float32(1.0)  # an image's frames count by one (a split video's frame too)
            if kind == 2 and frames == "whole":
                second = next(seconds)  # float32
                second = np.float32(int(second)) if step_cast_first else second
                step = np.float32(tokens_per_second) * second
            temporal = (np.arange(t, dtype=np.float32) * step).astype(np.int64)
            tt, hh, ww = np.meshgrid(temporal, np.arange(h), np.arange(w), indexing="ij")
            grid = current + np.stack([tt.ravel(), hh.ravel(), ww.ravel()])
            pieces.append(grid)
            current = int(grid.max()) + 1 if advance == "grid max + 1" else current + max(h, w)
        positions = np.concatenate(pieces, axis=1) if pieces else np.zeros((3, 0), np.int64)
        position_ids[:, row, kept] = positions
        counted = int(kept.sum()) if delta_counts == "tokens" else length
        deltas[row, 0] = (int(positions.max()) + 1 if positions.size else 0) - counted
    return position_ids, deltas


# --- the embedding side: position ids, Gemma's scale, BERT's three-term sum --------------


PACKED_RULES = {
    # transformers 5.24, masking_utils.find_packed_sequence_indices (the SDPA and eager masks)
    "mask": "a document starts wherever a position does not follow the one before it by 1",
    # transformers 5.24, prepare_fa_kwargs_from_position_ids (flash attention's varlen call)
    "flash": "a document starts at each position equal to the smallest of the batch",
}


def packed_position_ids(lengths, *, start: int = 0) -> np.ndarray:
    """(T,) int64: the position ids of documents of ``lengths`` packed in one row, each
    counting from ``start`` (0; RoBERTa-style models' padding_idx + 1). T = sum(lengths)."""
    lengths = validation.check_packed_lengths(lengths, start)
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)  # each token's document's first slot
    return np.arange(int(lengths.sum()), dtype=np.int64) - first + start


def packed_documents(position_ids, *, rule: str) -> np.ndarray:
    """(B, T) int64: the document each token of packed ``position_ids`` (B, T) belongs to, as
    transformers infers it by ``rule`` (``PACKED_RULES``), numbered from 0 in each row for
    "mask"; for "flash", over the batch flattened, as its varlen call reads it, with -1 for
    the tokens before the first start, which no document holds (they are dropped).

    They agree where every document starts at the same smallest position; they disagree on a
    document that continues one from an earlier chunk: for [3, 4, 5, 0, 1] "mask" sees two
    documents, "flash" one, of the last two tokens."""
    if rule not in PACKED_RULES:
        raise ValueError(f"rule {rule!r} is not one of {', '.join(PACKED_RULES)}")
    position_ids = validation.check_packed_position_ids(validation.as_host(position_ids))
    if rule == "mask":
        steps = np.diff(position_ids, axis=-1, prepend=position_ids[:, :1] - 1)
        return np.cumsum(steps != 1, axis=-1).astype(np.int64)
    flat = position_ids.reshape(-1)
    documents = np.cumsum(flat == flat.min()) - 1  # -1 before the first start
    return documents.reshape(position_ids.shape).astype(np.int64)


def position_ids(
    input_ids, attention_mask=None, *, rule: str = "arange", padding_idx=None, past_length=0
) -> np.ndarray:
    """(B, T) int64: the row of the position table each token of input_ids (B, T) reads, by a
    model's rule (transformers 5.24). past_length tokens came before (a cache).

    - "arange" (GPT-2, Llama): past_length + t; padding plays no part.
    - "opt" (OPT, ``OPTLearnedPositionalEmbedding``): from attention_mask (B, past_length + T),
      the count of real tokens up to and including this one, minus 1, plus the offset 2;
      padding reads row 1, so left padding does not move the first real token off row 2.
    - "roberta" (RoBERTa, XLM-R, ``create_position_ids_from_input_ids``): from input_ids, real
      tokens count from padding_idx + 1 (past_length further on), padding reads padding_idx.
    - "bart" (BART, ``BartLearnedPositionalEmbedding``): past_length + t + 2.
    Integers throughout: every backend is exact.
    """
    input_ids, attention_mask, past_length = validation.check_position_ids(
        validation.as_host(input_ids),
        None if attention_mask is None else validation.as_host(attention_mask),
        rule,
        padding_idx,
        past_length,
    )
    batch, length = input_ids.shape
    counted = past_length + np.arange(length, dtype=np.int64)
    if rule == "arange":
        return np.broadcast_to(counted, (batch, length)).copy()
    if rule == "bart":
        return np.broadcast_to(counted + 2, (batch, length)).copy()
    if rule == "opt":
        mask = attention_mask.astype(np.int64)
        return (np.cumsum(mask, axis=1) * mask - 1)[:, past_length:] + 2
    real = (input_ids != padding_idx).astype(np.int64)
    return (np.cumsum(real, axis=1) + past_length) * real + padding_idx


def embedding_scale(hidden_size: int, dtype) -> np.ndarray:
    """Gemma's normalizer, sqrt(hidden_size) *rounded to the model's dtype first*: transformers
    5.24 ``GemmaTextScaledWordEmbedding`` keeps it as a float32 buffer and casts it to the
    weights' dtype, so it is float32(sqrt(h)) then that dtype: 55.5 for 3072 in bfloat16, where
    sqrt(3072) = 55.43 (transformers PR#29402). In float64 that is float32's 55.425625, not
    float64's sqrt (google/gemma_pytorch rounds straight to the dtype: the same but in float64)."""
    hidden_size = validation.integer(hidden_size, "hidden_size")
    if hidden_size < 1:
        raise ValueError(f"hidden_size must be at least 1, got {hidden_size}")
    return np.float32(math.sqrt(hidden_size)).astype(validation.resolve_dtype(dtype))


def scaled_embedding(token_table, token_ids) -> np.ndarray:
    """Gemma's lookup: token_table[token_ids] * embedding_scale(dim), one rounded product.

    The product of two values of the table's dtype is exact in float64 up to float32 (and
    the float32 step of a 16-bit product exact too), so rounding it once is the IEEE product."""
    token_table = validation.native(np.asarray(token_table))
    dtype = validation.check_float_dtype(token_table.dtype.name, "token_table")
    token_ids = validation.check_token_ids(validation.as_host(token_ids), token_table.shape[0])
    scale = embedding_scale(token_table.shape[1], dtype).astype(np.float64)
    return _round(token_table[token_ids].astype(np.float64) * scale, dtype)


# How a model scales its input embeddings, as transformers 5.24 writes it. ``field``: the
# config's number (Gemma's is sqrt(hidden_size)); ``given``: whether embeddings the caller
# passes (inputs_embeds) are scaled too; ``rounding``: "buffer", a float32 tensor cast to the
# rows' dtype and one product (a module's embed_scale), or "scalar", a Python float times the
# rows (torch computes a 16-bit product in float32 with the float rounded to float32 there,
# then rounds the result to the dtype).
SCALE_RULES = {
    "gemma": {
        "field": "sqrt(hidden_size)",
        "given": False,
        "rounding": "buffer",
        "source": "models/gemma3/modeling_gemma3.py, Gemma3TextScaledWordEmbedding (in the "
        "module since transformers 5.4: the forward no longer scales)",
    },
    "minicpm": {
        "field": "scale_emb",
        "given": False,
        "rounding": "buffer",
        "source": "models/minicpm3/modeling_minicpm3.py, MiniCPM3ScaledWordEmbedding",
    },
    "granite": {
        "field": "embedding_multiplier",
        "given": True,
        "rounding": "scalar",
        "source": "models/granite/modeling_granite.py, GraniteModel.forward: inputs_embeds * "
        "self.embedding_multiplier, after the lookup or on the embeddings given",
    },
    "falcon_h1": {
        "field": "embedding_multiplier",
        "given": False,
        "rounding": "scalar",
        "source": "models/falcon_h1/modeling_falcon_h1.py, FalconH1Model.forward: "
        "embed_tokens(input_ids) * self.embedding_multiplier, only when no inputs_embeds",
    },
}


def scale_factor(rule: str, value: float, dtype) -> np.ndarray:
    """The number a rule multiplies by, as the rows' arithmetic sees it: "buffer" rules keep a
    float32 tensor cast to the rows' dtype; "scalar" rules a Python float, which torch rounds
    to the compute dtype (float32 for 16-bit rows, float64 for float64)."""
    validation.choice(rule, tuple(SCALE_RULES), "embedding scale rule")
    dtype = validation.resolve_dtype(dtype)
    if SCALE_RULES[rule]["rounding"] == "buffer":
        return np.float32(value).astype(dtype)
    return np.asarray(value).astype(compute_dtype(dtype))


def scaled_inputs(
    token_table, token_ids=None, inputs_embeds=None, *, rule: str, value
) -> np.ndarray:
    """A model's input embeddings: the rows of ``token_ids``, or ``inputs_embeds`` (B, T, dim)
    given instead, times the model's scale where its rule applies (``SCALE_RULES``), rounded
    as the model rounds it: a "buffer" product of two values of the dtype rounded once (exact
    in float64 up to float32); a "scalar" product formed in the compute dtype and rounded
    there, then to the dtype."""
    validation.choice(rule, tuple(SCALE_RULES), "embedding scale rule")
    token_table = validation.native(np.asarray(token_table))
    token_ids, given = validation.check_scaled_inputs(
        token_table, token_ids, inputs_embeds, rule, value
    )
    dtype = token_table.dtype
    rows = token_table[token_ids] if given is None else given
    if given is not None and not SCALE_RULES[rule]["given"]:
        return rows.copy()
    factor = scale_factor(rule, value, dtype).astype(np.float64)
    product = rows.astype(np.float64) * factor
    if SCALE_RULES[rule]["rounding"] == "buffer":
        return product.astype(dtype)  # one rounding: the product is exact in float64
    compute = compute_dtype(dtype)
    return (rows.astype(compute) * factor.astype(compute)).astype(dtype)


def bert_embeddings(
    word_table, type_table, position_table, input_ids, token_type_ids, start=0, *, layer_norm=None
) -> np.ndarray:
    """BERT's input layer: (word_table[input_ids] + type_table[token_type_ids]) +
    position_table[start + t], in that order, each addition rounded to the tables' dtype
    (as transformers ``BertEmbeddings`` adds), then, if layer_norm = (gamma, beta, eps) is
    given, LayerNorm over the last axis in float64, rounded once."""
    word_table, type_table, position_table = (
        validation.native(np.asarray(t)) for t in (word_table, type_table, position_table)
    )
    dtype = validation.check_bert_tables(word_table, type_table, position_table)
    input_ids = validation.check_token_ids(validation.as_host(input_ids), word_table.shape[0])
    token_type_ids = validation.check_token_type_ids(
        validation.as_host(token_type_ids), input_ids.shape, type_table.shape[0]
    )
    start = validation.check_positions(start, input_ids.shape[-1], position_table.shape[0])
    rows = position_table[start : start + input_ids.shape[-1]].astype(np.float64)
    summed = _round(word_table[input_ids].astype(np.float64) + type_table[token_type_ids], dtype)
    summed = _round(summed.astype(np.float64) + rows, dtype)
    if layer_norm is None:
        return summed
    gamma, beta, eps = layer_norm
    x = summed.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed = (x - mean) / np.sqrt(variance + eps)
    return _round(normed * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64), dtype)


def _round(values: np.ndarray, dtype) -> np.ndarray:
    """float64 values in ``dtype`` as the frameworks round an operation's result: through
    float32 for the 16-bit dtypes (their compute dtype)."""
    return values.astype(compute_dtype(dtype)).astype(dtype)


def alibi_slopes(num_heads: int) -> np.ndarray:
    """(num_heads,) float64 ALiBi slopes, the rule of BLOOM's ``build_alibi_tensor``.

    For n heads with n a power of two: 2**(-8 i / n), i = 1..n. Otherwise the n' = largest
    power of two below n get those, and the remaining n - n' heads take every other slope
    of 2n' heads: 2**(-8 j / 2n') for j = 1, 3, 5, ... The exponents are exact in float64
    (dyadic fractions), so each slope is 2**e rounded once by ``pow``.
    """
    num_heads, _, _ = validation.check_lengths(num_heads, 1, None)
    closest = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= n
    exponents = [-8 * i / closest for i in range(1, closest + 1)]
    exponents += [-8 * j / (2 * closest) for j in range(1, 2 * (num_heads - closest), 2)]
    return np.array([2.0**e for e in exponents], dtype=np.float64)


def alibi_bias(num_heads: int, q_len: int, k_len: int | None = None, *, causal: bool = True):
    """(num_heads, q_len, k_len) float64: -slope * distance, the distance form.

    causal=True: distance = query position - key position, and keys after the query get
    -inf (the causal mask, folded in). causal=False: distance = |query - key|, the
    symmetric form used by bidirectional encoders. BLOOM adds slope * key position instead,
    which differs from the causal form by slope * query position along each row: a
    per-row constant, which softmax ignores.
    """
    num_heads, q_len, k_len = validation.check_lengths(num_heads, q_len, k_len)
    relative = relative_positions(q_len, k_len)  # (q, k): key - query, -distance when causal
    slopes = alibi_slopes(num_heads)[:, None, None]
    if not causal:
        return slopes * -np.abs(relative)
    return np.where(relative <= 0, slopes * relative, -np.inf)


def t5_bucket_starts(num_buckets: int, max_distance: int, *, bidirectional: bool) -> np.ndarray:
    """The smallest distance of each logarithmic T5 bucket, in exact integer arithmetic.

    Per direction there are n buckets (num_buckets, or half of it when bidirectional):
    distances below m = n // 2 get a bucket each, and distance d >= m gets
    m + min(floor((n - m) * log(d / m) / log(max_distance / m)), n - 1 - m).
    floor(...) >= k exactly when (d / m)**(n - m) >= (max_distance / m)**k, an integer
    comparison, so bucket m + k starts at the smallest such d. Returns (n - 1 - m,) int64.
    """
    n, max_distance = validation.check_t5_buckets(bidirectional, num_buckets, max_distance)
    m = n // 2
    starts = []
    for k in range(1, n - m):
        d = max(m, math.floor(m * (max_distance / m) ** (k / (n - m))) - 1)  # float guess, low
        while d ** (n - m) * m**k < max_distance**k * m ** (n - m):
            d += 1
        starts.append(d)
    return np.array(starts, dtype=np.int64)


def t5_relative_buckets(
    relative_position, *, bidirectional: bool = True, num_buckets: int = 32, max_distance=128
) -> np.ndarray:
    """T5's bucket of each relative position (key - query), with the log in float64.

    A direct transcription of the published rule (Hugging Face
    ``T5Attention._relative_position_bucket``, which computes it in float32). Where the
    rule's real value is an exact integer a float log can land on either side; the
    backends use ``t5_bucket_starts`` and are exact.
    """
    relative_position = validation.check_relative_positions(
        validation.as_host(relative_position)
    ).astype(np.int64)
    n, max_distance = validation.check_t5_buckets(bidirectional, num_buckets, max_distance)
    buckets = np.zeros_like(relative_position)
    if bidirectional:
        buckets += (relative_position > 0) * n  # keys after the query: the second half
        distance = np.abs(relative_position)
    else:
        distance = -np.minimum(relative_position, 0)  # keys after the query count as 0
    m = n // 2
    if m == 0:  # one bucket per direction (num_buckets=2, bidirectional): no log at all
        return buckets
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) where distance < m: unused
        large = np.log(distance / m) / math.log(max_distance / m) * (n - m)
        large = m + np.minimum(large, n - 1 - m).astype(np.int64)
    return buckets + np.where(distance < m, distance, large)


def t5_bias(
    bias_table, q_len: int, k_len: int | None = None, *, bidirectional=True, max_distance=128
):
    """(num_heads, q_len, k_len): bias_table[bucket(key - query)], transposed to heads first."""
    bias_table = validation.native(np.asarray(bias_table))
    num_buckets = validation.check_t5_table(bias_table.shape, bias_table.dtype.name)
    _, q_len, k_len = validation.check_t5_lengths(bias_table.shape, q_len, k_len)
    relative = relative_positions(q_len, k_len)  # (q, k)
    buckets = t5_relative_buckets(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    return bias_table[buckets].transpose(2, 0, 1)


def relative_positions(q_len: int, k_len: int) -> np.ndarray:
    """(q_len, k_len) int64 key position - query position, queries the last q_len positions
    (integers, so negating them never makes a -0.0 bias)."""
    return np.arange(k_len) - np.arange(k_len - q_len, k_len)[:, None]


def compute_dtype(dtype) -> np.dtype:
    """Angles are formed in float64 for float64 results and in float32 otherwise: never in
    float16 or bfloat16, where position 257 would round to 256."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def tolerance(dtype, max_angle: float, *, base: float = 10000.0, magnitude: float = 1.0) -> float:
    """Largest |backend - float64 reference| allowed for a table or rotation in ``dtype``.

    Derivation, with c = eps of the compute dtype (float32, or float64 for float64
    results) and d = eps of ``dtype``:
    - w = base**(-2i/dim): the exponent is rounded (relative c/2), which ``pow`` turns
      into a relative error of ln(base) * c/2 in w; pow adds up to 2 ulp (2c) and the
      product p * w one rounding (c/2): an angle error below
      (ln(base)/2 + 4) * c * max_angle, with max_angle = largest position x highest
      frequency (a scaling rule adds one more rounding, inside the 4).
    - sin and cos have slope at most 1, so they pass that error on unamplified and add
      about one ulp of a value <= 1: + c.
    - The result is rounded to ``dtype``: a sinusoidal table adds d/2. A rotation
      y = a cos - b sin rounds cos and sin to ``dtype``, both products and the difference:
      at most 2d relative to |a| + |b|. ``magnitude`` is that bound, max(|a| + |b|),
      and 1 for a table.
    """
    c = float(ml_dtypes.finfo(compute_dtype(dtype)).eps)
    d = float(ml_dtypes.finfo(np.dtype(dtype)).eps)  # knows bfloat16
    angle_error = (math.log(base) / 2 + 4) * c * max(max_angle, 1.0)
    return magnitude * (angle_error + c + 2 * d)


def frequency_error(w: np.ndarray, c: float, scaled: bool) -> np.ndarray:
    """Relative error of each frequency as a correct implementation computes it natively in a
    compute dtype of epsilon c. Formed as 1 / base**(2k/d): the exponent rounded (c/2, which pow
    turns into |ln w| c/2), pow's ulp and the reciprocal's half ulp (1.5 c); formed as
    exp(-2k ln(base)/d) (PyTorch's tutorial, MLX's kernel): the constant and its product rounded
    (|ln w| c) and exp's ulp (c). Both are below |ln w| c + 1.5 c (none for w = 1, which
    both give exactly), and 2 c more for a scaling rule's divisions and blends. A slot the
    proportional rule stops (w = 0) turns by exactly nothing: its angle carries no error."""
    exact = (w == 1.0) & (not scaled)
    log_w = np.abs(np.log(w, where=w > 0, out=np.zeros_like(w)))
    return (log_w + np.where(exact, 0.0, 1.5) + (2.0 if scaled else 0.0)) * c


def epsilons(dtype) -> tuple[float, float]:
    """(c, d): epsilon of the compute dtype and of ``dtype``."""
    dtype = validation.resolve_dtype(dtype)
    return float(ml_dtypes.finfo(compute_dtype(dtype)).eps), float(ml_dtypes.finfo(dtype).eps)


def rope_bound(
    x,
    positions,
    *,
    base=10000.0,
    layout="half",
    scaling=None,
    rotary_dim=None,
    dtype=None,
    pair_positions=None,
) -> np.ndarray:
    """Per element of x (..., T, head_dim), the largest |result - float64 reference| a correct
    implementation of apply_rope in ``dtype`` (default: x's) can show: 0 where dims pass through.

    Derivation, c = eps of the compute dtype (float32; float64 for float64), d = eps of dtype,
    for pair k at position p, z = a + ib the pair, s the attention factor:
    - the frequency w_k carries a relative error e_k (``frequency_error``) and the angle p * w_k
      one rounding more (c/2): an angle error dt = p * w_k * (e_k + c/2); the rotation turns z
      by it, an error of |z| * dt;
    - cos and sin add an ulp each (at most c of a value <= 1), the attention factor's product c;
    - cos and sin rounded to dtype, both products and the difference rounded: d relative to
      |a| + |b|, and d/2 of the result (at most s |z|);
    - an attention factor s != 1 may scale x in dtype before the rotation (mlx-lm does) rather
      than cos and sin: d/2 more relative to |a| + |b|.
    Total s * (|z| * (dt + d/2) + (|a| + |b|) * (2c + d + [s != 1] d/2)): the measured errors
    of correct implementations sit within a small factor of it (docs/conformance.md gives the
    ratios). ``pair_positions`` (T, rotary_dim/2): each pair's own position (M-RoPE's, where a
    slot reads the t, h or w row), in place of positions[:, None].
    """
    x = np.asarray(x, dtype=np.float64)
    positions, scaling, rotary_dim = validation.check_rope(
        x.shape, np.asarray(positions), base, layout, scaling, rotary_dim
    )
    c, d = epsilons(dtype)
    w, attention = rope_parameters(rotary_dim, base, scaling, length(positions))
    at = positions[:, None] if pair_positions is None else np.asarray(pair_positions)
    angle_error = (
        at.astype(np.float64) * w * (frequency_error(w, c, scaling is not None) + c / 2)
    )  # (T, rotary_dim/2)
    rotated = x[..., :rotary_dim]
    if layout == "interleaved":
        a, b = rotated[..., 0::2], rotated[..., 1::2]
    else:
        a, b = rotated[..., : rotary_dim // 2], rotated[..., rotary_dim // 2 :]
    pair = attention * (
        np.hypot(a, b) * (angle_error + d / 2)
        + (np.abs(a) + np.abs(b)) * (2 * c + d + (d / 2 if attention != 1 else 0.0))
    )
    both = (
        np.stack([pair, pair], axis=-1).reshape(rotated.shape)
        if layout == "interleaved"
        else np.concatenate([pair, pair], axis=-1)
    )
    return np.concatenate([both, np.zeros(x[..., rotary_dim:].shape)], axis=-1)


def table_bound(num_positions: int, dim: int, *, base=10000.0, layout="interleaved", dtype):
    """Per element of sinusoidal_table(num_positions, dim), the largest |result - float64
    reference| a correct implementation in ``dtype`` can show.

    Derivation, c = eps of the compute dtype (float32; float64 for float64), d = eps of dtype,
    for the column pair k at position p with frequency w_k = base**(-2k/dim):
    - w_k carries |ln w_k| c + 1.5 c, formed as 1 / base**(2k/dim) or as the tutorial's
      exp(-2k ln(base)/dim) (``frequency_error``, as a rotation's);
    - the angle p * w_k one rounding more (c/2); sin and cos pass the angle's error on with
      slope at most 1 and add an ulp of a value <= 1 (c); the result rounded to dtype (d/2).
    Total p * w_k * (|ln w_k| + 2) c + c + d/2 (at k = 0, where w = 1 and p * w is exact, the
    angle's c/2 is kept: slack).
    """
    validation.check_sinusoidal(num_positions, dim, base, layout)
    c, d = epsilons(dtype)
    w = base ** -(np.arange(0, dim, 2) / dim)
    pair = np.arange(num_positions, dtype=np.float64)[:, None] * w * _table_angle_error(w, c)
    pair += c + d / 2
    bound = np.empty((num_positions, dim))
    if layout == "interleaved":
        bound[:, 0::2], bound[:, 1::2] = pair, pair
    else:
        bound[:, : dim // 2], bound[:, dim // 2 :] = pair, pair
    return bound


def _table_angle_error(w: np.ndarray, c: float) -> np.ndarray:
    """Relative error of a table's angle p * w_k: its frequency's and the product's rounding."""
    return frequency_error(w, c, False) + c / 2


def phase_bound(positions, dim: int, *, base=10000.0, scaling=None, dtype, table=False):
    """(P,) the largest phase error (radians, over the pairs) at each position that the bound
    of a correct implementation allows: rope_bound, or with ``table`` table_bound, divided by
    the pair's magnitude. A rotation: p * w_k * (e_k + c/2) + d/2 + sqrt(2) (2c + d (+ d/2)), as
    (|a| + |b|) <= sqrt(2) |z|; a table: p * w_k * its angle error + sqrt(2) (c + d/2), an
    error e in both sin and cos moving the angle read back by at most sqrt(2) e."""
    c, d = epsilons(dtype)
    positions = np.asarray(positions, dtype=np.float64)[:, None]
    if table:
        w = base ** -(np.arange(0, dim, 2) / dim)
        return (positions * w * _table_angle_error(w, c)).max(axis=1) + math.sqrt(2) * (c + d / 2)
    w, attention = rope_parameters(dim, base, scaling, length(positions))
    angle = positions * w * (frequency_error(w, c, scaling is not None) + c / 2)
    scaled_x = d / 2 if attention != 1 else 0.0  # rope_bound's attention factor on x
    return angle.max(axis=1) + d / 2 + math.sqrt(2) * (2 * c + d + scaled_x)


def sum_tolerance(dtype, max_angle: float, max_abs_sum: float, *, base: float = 10000.0) -> float:
    """Largest |token row + sinusoidal row - float64 sum| allowed in ``dtype``.

    The token row is exact and the table row within ``tolerance(dtype, max_angle)``;
    rounding their sum to ``dtype`` adds half an ulp of a value of at most
    max_abs_sum (+ that tolerance), below eps * max_abs_sum / 2 + the same again as slack.
    """
    table = tolerance(dtype, max_angle, base=base)
    return table + float(ml_dtypes.finfo(np.dtype(dtype)).eps) * (max_abs_sum + table)
