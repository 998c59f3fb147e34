"""The model's own code as the oracle: what transformers' modeling code for a config does to a
query, layer by layer, established by running it, and the kit's reading held to it.

The kit reads a config.json by its own rules (``hf``, ``layers``): which dims pair, how wide
the rotation is, which layers are NoPE. Those rules are a transcription, and a transcription
falls behind the next model. So wherever transformers is installed, ``hold`` runs the owner's
code on the file before the kit judges anyone:

1. the config is built by transformers' config class, scaled down where only sizes that do
   not bear on the rotation change (one head of the same width, a hidden size of that width,
   tiny MLPs, vocabularies and expert counts; every layer and every rope field kept);
2. the text model is built from it (torch's meta device first: a model still too large is
   refused) and run once on positions 0 .. ``POSITIONS`` - 1, on one thread, with the modeling
   module's rotary functions (``apply_rotary_pos_emb`` and its kin) and its eager attention
   wrapped, so each layer's call is seen: whether the layer rotates, the query it turns with
   its cos and sin, and the query and softmax scale its attention then takes;
3. each rotating layer's function is called again on a basis of unit queries: the turn it
   applies at every position, a (T, D, D) stack, classified (``classify``) into its pairs (the
   layout), the rotated dims, each pair's frequency (unwrapped over the positions, read modulo
   2 pi) and the factor on cos and sin;
4. the kit's reading gives the same terms from ``backends.positional.rope_parameters``
   (``kit_turns``), and the two are compared: layout, rotated dims, frequencies, factor, NoPE
   layers, the query's scale per position after the rotation, the softmax scale.

The code is run when a kind that judges the rotation first asks (``hold`` leaves it on the
reading: ``Configuration.owners_answer``). A reading the code confirms says so on its line;
where the two disagree, or the code cannot be run or classified, those kinds refuse in one
line naming the model type and the difference: never a verdict on a reading the model's own
code does not confirm. ``compare`` gives the finding itself, for the sweep (``sweep``,
tests/test_owner_sweep.py, docs/owners.md).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import math
import re
import sys
from dataclasses import dataclass, field

import numpy as np

from backends import positional
from embedding_parity.configs.configuration import OWN_ATTENTION_SCALE, Configuration

# The positions the model is run at (0 .. T-1): long enough to tell the low frequencies of a
# base-1e6 rotation apart (at p = 127 the lowest turns 1.5e-4 rad, read to 1e-3 of itself in
# float32), short enough that a 128-layer model of one head runs in about a second.
POSITIONS = 128
# The sizes a scaled-down config takes: none bears on the rotation (the head width is kept).
SMALL = {"intermediate": 16, "vocab": 64, "experts": 2}
HEADS = (1, 2)  # the heads tried, fewest first
# The fields that bear on the rotation (or on which layers rotate): never scaled down.
KEPT = {
    *("head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "rotary_dim"),
    *("global_head_dim", "max_position_embeddings", "original_max_position_embeddings"),
    *("sliding_window", "sliding_window_pattern", "num_hidden_layers", "num_layers"),
    *("attention_chunk_size", "no_rope_layer_interval", "global_attn_every_n_layers"),
    *("floor_scale", "rope_theta", "hidden_size", "num_attention_heads", "num_key_value_heads"),
}
MOST_WEIGHTS = 50_000_000  # a scaled-down model's weights: 200 MB in float32
# Fields that carry sizes of the feed-forward and expert blocks, by the names configs use.
EXPERT_COUNTS = (
    "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts"
)
EXPERTS_PER_TOKEN = ("num_experts_per_tok", "moe_topk", "top_k", "moe_k", "num_experts_per_token")
# The sizes of hybrid models' state-space and linear-attention mixers and of MLA's low-rank
# projections, by the names their configs use (none bears on the rotation of the attention).
MIXERS = {
    **dict.fromkeys(("mamba_n_heads", "mamba_num_heads", "mamba_n_groups", "n_groups"), 1),
    **dict.fromkeys(("mamba_d_state", "ssm_state_size", "mamba_dt_rank"), 16),
    **dict.fromkeys(("linear_num_key_heads", "linear_num_value_heads"), 1),
    **dict.fromkeys(("linear_key_head_dim", "linear_value_head_dim"), 16),
    **dict.fromkeys(("q_lora_rank", "kv_lora_rank"), 16),
}


@dataclass(frozen=True)
class Turns:
    """A rotation in the kit's terms: how its dims pair, which turn, at what frequencies."""

    layout: str  # "half" or "interleaved" ("none": no dim turns)
    start: int  # the first rotated dim
    width: int  # the rotated width
    frequencies: np.ndarray  # (width/2,) per pair, radians per position
    factor: np.ndarray  # (width/2,) the factor on cos and sin
    reordered: bool = False  # the output's dims reordered after the turn (q . k unchanged)


@dataclass
class Layer:
    """What the owner's code did in one layer: its ``rotation`` of a query, classified (None:
    the layer did not rotate; a str: why it could not be classified), where the rotated part
    sits in the query the attention takes (``offset``), the query's scale per position after
    the rotation, the softmax scale."""

    attends: bool = False
    rotation: Turns | str | None = None
    offset: int = 0
    query_scale: np.ndarray | None = None
    softmax_scale: float | None = None
    calls: list = field(default_factory=list)
    query: object = None  # the query the attention took (torch), until the layer is classified


@dataclass(frozen=True)
class Finding:
    """The oracle's answer for one config: ``kind`` "agrees" (the kit's reading is the code's),
    "differs" (the kit reads it otherwise: ``said`` names the first difference), "unread" (the
    code applies a scale the kit has no field for) or "unrunnable" (the code could not be run
    or its rotation classified: ``said`` names why)."""

    model_type: str
    kind: str
    said: str
    layers: int = 0
    rotating: int = 0

    @property
    def agrees(self) -> bool:
        return self.kind == "agrees"

    @property
    def line(self) -> str:
        return f"model_type {self.model_type!r}: {self.said}"


# The refusal's words for each way the oracle cannot confirm a reading.
REFUSALS = {
    "differs": "the model's own code (transformers) and the kit's reading disagree",
    "unread": "the model's own code (transformers) applies what the kit does not read",
    "unrunnable": "the kit cannot establish what the model's own code (transformers) does",
}


def hold(configuration: Configuration, fields: dict) -> Configuration:
    """``configuration`` with the owner's code to run on ``fields`` when a kind that judges the
    rotation first asks (``Configuration.owners_answer``): what the code confirmed, or why not
    (the kinds refuse with it, in one line naming the model type and the difference or what
    could not be established); a lookup at the same file never builds the model."""
    return dataclasses.replace(configuration, oracle=lambda: answer(configuration, fields))


def answer(configuration: Configuration, fields: dict) -> tuple[str | None, str | None]:
    """(held, refusal) of the owner's code for ``fields`` against ``configuration``."""
    finding = compare(configuration, fields)
    if finding.agrees:
        return f"{finding.said.removeprefix('agrees: ')}, as read", None
    return None, (
        f"{REFUSALS[finding.kind]}: {finding.line}; the kit will not judge a port against a "
        "reading its owner's code does not confirm"
    )


def compare(configuration: Configuration, fields: dict) -> Finding:
    """The owner's code for ``fields`` run and held to the kit's ``configuration``."""
    model_type = configuration.model_type or "?"
    try:
        layers = observe(json.dumps(fields, sort_keys=True))
    except Unrunnable as error:
        return Finding(model_type, "unrunnable", f"its code could not be run: {error}")
    attending = sum(layer.attends for layer in layers)
    rotating = sum(layer.rotation is not None for layer in layers)
    kind, said = _difference(configuration, layers) or (
        "agrees", f"agrees: {rotating} of {attending} attention layers rotate"
    )
    return Finding(model_type, kind, said, attending, rotating)


class Unrunnable(Exception):
    """The owner's code could not be built or run at a config (the reason, in a few words)."""


@functools.lru_cache(maxsize=64)
def observe(fields_json: str) -> tuple[Layer, ...]:
    """Each decoder layer of the owner's model for a config.json's fields, as ``Layer``s."""
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as error:
        raise Unrunnable(f"{error.name} is not installed") from None
    from embedding_parity.configs.hf_transformers import _quiet, _text_config

    fields = json.loads(fields_json)
    torch.manual_seed(0)  # the model's weights: its answer, to the digit, each time
    with _quiet(), torch.no_grad(), _one_thread(torch):
        for heads in HEADS:  # a class that splits its heads in two (DiffLlama) needs two
            try:
                config = _small(_text_config(fields), heads)
                return _run(_model(config), config, torch)
            except Unrunnable as error:
                failed = error
            except Exception as error:
                failed = Unrunnable(f"building it failed ({_said(error)})")
        raise failed


@contextlib.contextmanager
def _one_thread(torch):
    """torch on one thread while the tiny model runs: its ops are too small to share, and on a
    busy machine two threads made a forward pass 20 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _said(error: Exception) -> str:
    """An error in a few words: its first line, a file's path as the file's name (the same
    words on every machine)."""
    line = (str(error).strip().splitlines() or [""])[0]
    line = re.sub(r"(['\"])/[^'\"]*/([^/'\"]+)\1", r"\1\2\1", line)
    return f"{type(error).__name__}: {line[:160]}"


def _head_dim(config) -> int:
    width = getattr(config, "head_dim", None)
    if isinstance(width, int) and width > 0:
        return width
    return config.hidden_size // config.num_attention_heads


def _small(config, heads: int):
    """A copy of ``config`` whose sizes that do not bear on the rotation are tiny: ``heads``
    query and key heads of the same width, a hidden size of those heads (and every other size
    the file gives as the hidden size), small MLPs, vocabularies and expert counts; every layer,
    rope field and layer type kept."""
    config = copy.deepcopy(config)
    if getattr(config, "is_heterogeneous", False):
        config.allow_global_per_layer_attribute_access = True
    width, hidden = _head_dim(config), config.hidden_size
    longest = getattr(config, "max_position_embeddings", None)
    if isinstance(longest, int) and longest < POSITIONS:
        raise Unrunnable(f"max_position_embeddings {longest} is below the {POSITIONS} positions")
    for name, value in list(vars(config).items()):
        if name in KEPT or name.endswith("_token_id"):
            continue
        if value is None and name in (*EXPERTS_PER_TOKEN, "n_group", "topk_group"):
            value = 1  # a class whose default leaves routing to the checkpoint
        small = _smaller(name, value, hidden, width * heads, heads)
        if small is not None:
            setattr(config, name, small)
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(getattr(config, name, None), int):
            setattr(config, name, 0)
    config.num_attention_heads = heads
    if hasattr(config, "num_key_value_heads"):
        config.num_key_value_heads = heads
    if "head_dim" in vars(config) or hasattr(type(config), "head_dim"):
        config.head_dim = width
    config.hidden_size = width * heads
    _mixer_heads(config)
    config._attn_implementation = "eager"
    config.use_cache = False
    return config


def _smaller(name: str, value, hidden: int, small_hidden: int, heads: int):
    """A size field's small value (a list of sizes, one per layer, elementwise), or None."""
    if isinstance(value, list) and value and all(_integer(v) for v in value):
        smaller = [_smaller(name, v, hidden, small_hidden, heads) for v in value]
        return None if None in smaller else smaller
    if not _integer(value) or value <= 0:
        return None
    if "vocab_size" in name:  # Gemma 3n's per-layer tables too
        return min(value, SMALL["vocab"])
    if any(part in name for part in ("intermediate_size", "ffn_dim", "ffn_hidden_size")):
        return SMALL["intermediate"]
    if name in EXPERT_COUNTS:
        return min(value, SMALL["experts"])
    if name in (*EXPERTS_PER_TOKEN, "n_group", "topk_group", "n_shared_experts"):
        return 1
    if name in MIXERS:
        return min(value, MIXERS[name])
    if "heads" in name:
        return min(value, heads)
    if value == hidden:  # another name for the model's width (an LRU's, an expert's)
        return small_hidden
    return None


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mixer_heads(config) -> None:
    """A Mamba-2 mixer's one head as wide as its inner size (expand * hidden_size), as the
    hybrid models' classes require."""
    expand = getattr(config, "mamba_expand", getattr(config, "expand", None))
    if not isinstance(expand, int):
        return
    inner = expand * config.hidden_size
    for field in ("mamba_d_head", "mamba_head_dim"):
        if isinstance(getattr(config, field, None), int):
            setattr(config, field, inner)
    if isinstance(getattr(config, "mamba_d_ssm", None), int):
        config.mamba_d_ssm = inner


def _model(config):
    """The text model transformers builds for ``config``: AutoModel's class for its type, else
    the modeling module's base model class for its config class (a multimodal model's text
    tower); first on torch's meta device, to refuse a model still too large scaled down."""
    import importlib

    import torch
    from transformers import AutoModel, PreTrainedModel

    if type(config) in AutoModel._model_mapping:
        build = AutoModel._model_mapping[type(config)]
    else:
        modeling = importlib.import_module(
            type(config).__module__.replace(".configuration_", ".modeling_")
        )
        found = [
            value
            for value in vars(modeling).values()
            if isinstance(value, type)
            and issubclass(value, PreTrainedModel)
            and getattr(value, "config_class", None) is type(config)
            and value.__name__.endswith("Model")
        ]
        if not found:
            raise Unrunnable(f"transformers has no model class for {type(config).__name__}")
        build = min(found, key=lambda cls: len(cls.__name__))
    with torch.device("meta"):
        size = sum(weight.numel() for weight in build(config).parameters())
    if size > MOST_WEIGHTS:
        raise Unrunnable(f"scaled down, it still has {size:,} weights (at most {MOST_WEIGHTS:,})")
    return build(config).float().eval()


def _decoder_layers(model, count: int):
    """The model's ModuleList of ``count`` decoder layers."""
    import torch

    found = [
        module
        for module in model.modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) == count
    ]
    if not found:
        raise Unrunnable(f"no list of {count} decoder layers in {type(model).__name__}")
    return found[0]


@contextlib.contextmanager
def _wrapped(module, names, make):
    """``module``'s functions ``names`` replaced by ``make(name, original)`` while inside."""
    originals = {name: getattr(module, name) for name in names}
    for name, original in originals.items():
        setattr(module, name, make(name, original))
    try:
        yield originals
    finally:
        for name, original in originals.items():
            setattr(module, name, original)


def _run(model, config, torch) -> tuple[Layer, ...]:
    count = config.num_hidden_layers
    layers = [Layer() for _ in range(count)]
    current = [None]
    for i, layer in enumerate(_decoder_layers(model, count)):
        layer.register_forward_pre_hook(lambda _m, _a, i=i: current.__setitem__(0, i))
    modeling = sys.modules[type(model).__module__]
    rotary = [
        name
        for name, value in vars(modeling).items()
        if callable(value) and name.startswith("apply_rotary") and not isinstance(value, type)
    ]
    attention = [name for name in ("eager_attention_forward",) if hasattr(modeling, name)]

    def rotation(name, original):
        def recorded(*args, **kwargs):
            out = original(*args, **kwargs)
            if current[0] is not None:
                layers[current[0]].calls.append((original, args, kwargs, out))
            return out

        return recorded

    def attend(name, original):
        def recorded(module, query, *args, **kwargs):
            # eager_attention_forward(module, query, key, value, attention_mask, scaling, ...)
            if current[0] is not None:
                seen = layers[current[0]]
                seen.attends = True
                seen.softmax_scale = kwargs.get("scaling", args[3] if len(args) > 3 else None)
                seen.query = query.detach().double()
            return original(module, query, *args, **kwargs)

        return recorded

    ids = 1 + torch.arange(POSITIONS).remainder(SMALL["vocab"] - 1)[None]  # 0 is padding
    positions = torch.arange(POSITIONS)[None]
    with _wrapped(modeling, rotary, rotation), _wrapped(modeling, attention, attend):
        try:
            model(input_ids=ids, position_ids=positions)
        except Exception as error:
            raise Unrunnable(f"running it failed ({_said(error)})") from None
    if not any(layer.attends for layer in layers):
        raise Unrunnable("no layer attended through its eager attention at this config")
    _classify_layers(layers, torch)
    return tuple(layers)


def _classify_layers(layers, torch) -> None:
    """Each rotating layer's turns, from its first rotation call re-run on unit queries (layers
    whose call took the same cos and sin share the answer)."""
    seen = []  # (the call's arguments past q and k, rotation)
    for layer in layers:
        query, layer.query = layer.query, None
        if not layer.calls:
            continue
        original, args, kwargs, out = layer.calls[0]
        layer.calls = []
        rest = [a for a in args[2:] if isinstance(a, torch.Tensor)]
        for other, rotation in seen:
            if len(other) == len(rest) and all(
                a.shape == b.shape and torch.equal(a, b) for a, b in zip(other, rest)
            ):
                layer.rotation = rotation
                break
        else:
            try:
                layer.rotation = classify(_turns(original, args, kwargs, torch))
            except Unrunnable as error:
                layer.rotation = str(error)
            seen.append((rest, layer.rotation))
        axis = _position_axis(args[0].shape)
        layer.offset, layer.query_scale = _placed(out[0].detach().double(), query, axis)


def _turns(original, args, kwargs, torch) -> np.ndarray:
    """(T, D, D) float64: the rotation call's turn of each unit query e_j at each position
    (column j of R_t), the call re-run with q = e_j everywhere: the D units at once along the
    batch axis where the call broadcasts its cos and sin over it, else one by one."""
    q = args[0]
    width, axis = q.shape[-1], _position_axis(q.shape)
    units = torch.eye(width, dtype=q.dtype)
    if q.shape[0] == 1 and axis != 0:
        probe = torch.zeros((width, *q.shape[1:]), dtype=q.dtype)
        probe[..., :] = units.reshape(width, *[1] * (q.dim() - 2), width)
        try:
            turned = original(probe, *args[1:], **kwargs)[0]
        except RuntimeError:  # cos and sin do not broadcast over the batch
            turned = None
        if turned is not None and turned.shape == probe.shape:
            columns = turned.movedim(axis, 1).reshape(width, POSITIONS, -1, width)[:, :, 0]
            return columns.permute(1, 2, 0).double().numpy()
    columns = []
    for unit in units:
        probe = torch.zeros_like(q)
        probe[..., :] = unit
        turned = original(probe, *args[1:], **kwargs)[0]
        columns.append(turned.movedim(axis, 0).reshape(POSITIONS, -1, width)[:, 0])
    return torch.stack(columns, -1).double().numpy()


def _position_axis(shape) -> int:
    axes = [axis for axis, size in enumerate(shape[:-1]) if size == POSITIONS]
    if len(axes) != 1:
        raise Unrunnable(f"cannot tell the position axis of a query of shape {tuple(shape)}")
    return axes[0]


def _placed(turned, query, axis: int):
    """Where the rotated part sits in the query the attention takes, and the query's scale per
    position after the rotation: (offset, (T,) scale), or (0, None) where it cannot be seen."""
    if query is None or turned.numel() == 0:
        return 0, None
    turned = turned.movedim(axis, 0).reshape(POSITIONS, -1, turned.shape[-1])
    query_axis = _position_axis(query.shape)
    query = query.movedim(query_axis, 0).reshape(POSITIONS, -1, query.shape[-1])
    if query.shape[1] != turned.shape[1]:
        return 0, None
    width = turned.shape[-1]
    for offset in sorted({0, query.shape[-1] - width}):
        part = query[..., offset : offset + width]
        norm = (turned * turned).sum((1, 2))
        scale = (part * turned).sum((1, 2)) / norm.clamp_min(1e-300)
        scale[norm == 0] = float("nan")  # a zero query says nothing of its scale
        fit = (scale[:, None, None] * turned).nan_to_num()
        if np.allclose(part.numpy(), fit.numpy(), rtol=1e-5, atol=1e-6):
            return offset, _unnormalized(scale.numpy(), norm.sqrt().numpy())
    return 0, None


def _unnormalized(scale: np.ndarray, norm: np.ndarray) -> np.ndarray | None:
    """The scale per position, or None where it is the rotated query's norm taken off (a
    qk-norm after the rotation: Llama 4's, Hunyuan's), which depends on the query, not on the
    position, and leaves the rotation the kit checks as it is."""
    known = ~np.isnan(scale)
    seen, product = scale[known], (scale * norm)[known]
    if not np.allclose(seen, seen[0], rtol=1e-5) and np.allclose(product, product[0], rtol=1e-4):
        return None
    return scale


# --- classification: a (T, D, D) stack of turns in the kit's terms ---------------------------


def classify(turns: np.ndarray) -> Turns:
    """The pairing, width, frequencies and factor of a (T, D, D) stack of 2-D turns."""
    t, dim, _ = turns.shape
    turns, reordered = _unreordered(turns)
    # which dims move, and with which: at positions 1, 2 and T-1 every pair has turned
    moved = np.zeros((dim, dim), bool)
    for p in (1, 2, t - 1):
        moved |= np.abs(turns[p] - np.eye(dim)) > 1e-6
    rotated = np.flatnonzero(moved.any(0))
    if rotated.size == 0:
        return Turns("none", 0, 0, np.zeros(0), np.zeros(0), reordered)
    partner = {}
    for j in rotated:
        others = np.flatnonzero(moved[:, j])
        others = others[others != j]
        if others.size != 1:
            raise Unrunnable(f"dim {j} is mixed with {others.size} others: not a rotation of pairs")
        partner[int(j)] = int(others[0])
    lows = sorted(j for j, k in partner.items() if j < k)
    gaps = {partner[j] - j for j in lows}
    if len(gaps) != 1:
        raise Unrunnable(f"dims pair at {len(gaps)} distances: neither layout")
    gap, start, count = gaps.pop(), lows[0], len(lows)
    if gap == 1 and lows == list(range(start, start + 2 * count, 2)):
        layout, width = "interleaved", 2 * count
    elif gap >= count and lows == list(range(start, start + count)):
        # (i, i + gap): the half layout over 2 * gap dims; pairs past the moving ones turn at
        # frequency 0 (Gemma 4's proportional rule rotates a quarter of its frequency slots)
        layout, width = "half", 2 * gap
    else:
        raise Unrunnable(f"dims pair as {sorted(partner.items())[:4]} ...: neither layout")
    cos = turns[:, lows, lows]  # (T, pairs)
    sin = turns[:, [partner[j] for j in lows], lows]
    factor = np.hypot(cos, sin).mean(0)
    angles = np.unwrap(np.arctan2(sin, cos), axis=0)
    positions = np.arange(t, dtype=np.float64)
    frequencies = (angles * positions[:, None]).sum(0) / (positions**2).sum()
    still = width // 2 - count  # pairs of the block that do not turn
    frequencies = np.concatenate([frequencies, np.zeros(still)])
    factor = np.concatenate([factor, np.full(still, factor.mean())])
    return Turns(layout, start, width, frequencies, factor, reordered)


def _unreordered(turns: np.ndarray) -> tuple[np.ndarray, bool]:
    """The stack with a fixed reordering of the output dims taken off (DeepSeek-V3's
    rope_interleave path turns pairs (2i, 2i+1) and writes them to (i, i + d/2): q . k is
    unchanged, since q and k are reordered alike); at position 0 every pair is unturned, so
    what remains there is the reordering, each rotated dim times the rule's factor on cos and
    sin (a partial rotation's other dims times 1)."""
    first = turns[0]
    kept = np.abs(first) > 1e-6 * np.abs(first).max(0)
    if not ((kept.sum(0) == 1).all() and (kept.sum(1) == 1).all() and (first[kept] > 0).all()):
        raise Unrunnable("at position 0 it neither leaves the query as it is nor reorders it")
    order = kept.astype(np.float64)
    if (order == np.eye(len(order))).all():
        return turns, False
    return np.einsum("ji,tjk->tik", order, turns), True


# --- the kit's reading, in the same terms ----------------------------------------------------


def _kit_layer(configuration: Configuration, index: int):
    """(rotates, rope_theta, scaling, rotary_dim, head_dim, why) of layer ``index``."""
    for group in configuration.layer_types:
        if index in group.layers:
            return (group.rotates, group.rope_theta, group.scaling, group.rotary_dim,
                    group.head_dim or configuration.head_dim, group.why)
    return (True, configuration.rope_theta, configuration.scaling, configuration.rotary_dim,
            configuration.head_dim, "")


def kit_turns(configuration: Configuration, index: int) -> Turns | None:
    """Layer ``index``'s rotation as the kit's reading has it, in ``classify``'s terms."""
    rotates, theta, scaling, rotary_dim, head_dim, _ = _kit_layer(configuration, index)
    if not rotates:
        return None
    width = rotary_dim or head_dim
    w, attention = positional.rope_parameters(width, theta, scaling, POSITIONS)
    start = head_dim - width if configuration.rotary_last else 0
    return Turns(configuration.layout, start, width, w, np.full(w.shape, attention))


def _frequency_bound(frequencies: np.ndarray) -> np.ndarray:
    """How far a correct float32 rotation's read frequencies may lie from float64's: its angle
    p * w rounded (eps32 * p * w) and its cos and sin rounded (eps32), read by the least-squares
    fit over p = 0 .. T-1 (an error e at the last position moves w by about e / T), times 8."""
    eps = float(np.finfo(np.float32).eps)
    last = POSITIONS - 1
    return 8 * eps * (np.abs(frequencies) + 1.0 / last)


def _difference(configuration: Configuration, layers) -> tuple[str, str] | None:
    """(kind, words) of the first way the owner's layers differ from the kit's reading."""
    for index, layer in enumerate(layers):
        if not layer.attends:
            continue
        rotates, *_, why = _kit_layer(configuration, index)
        where = f"layer {index}"
        if layer.rotation is None and rotates:
            return "differs", f"{where}: its code does not rotate the query (NoPE), the kit does"
        if layer.rotation is None:
            continue
        if not rotates:
            return "differs", f"{where}: its code rotates the query, the kit reads NoPE [{why}]"
        if isinstance(layer.rotation, str):
            return "unrunnable", f"{where}: its rotation could not be classified ({layer.rotation})"
        said = _turns_differ(configuration, index, layer.rotation, layer.offset)
        if said:
            return "differs", f"{where}: {said}"
    return _scales_differ(configuration, layers)


def _turns_differ(configuration: Configuration, index: int, owner: Turns, offset: int):
    kit = kit_turns(configuration, index)
    # an MLA query is [nope | rope] (DeepSeek): the kit's head is its rope part, at the end
    mla = (configuration.attention or {}).get("qk_head_dim", configuration.head_dim)
    owner_start = owner.start + offset - (mla - configuration.head_dim)
    if owner.layout != kit.layout:
        return f"its code pairs dims in the {owner.layout} layout, the kit reads {kit.layout}"
    if (owner_start, owner.width) != (kit.start, kit.width):
        return (
            f"its code rotates dims {owner_start} to {owner_start + owner.width - 1}, the kit "
            f"dims {kit.start} to {kit.start + kit.width - 1}"
        )
    # at integer positions w and w + 2 pi turn alike: the code's w is read modulo 2 pi
    apart = np.remainder(owner.frequencies - kit.frequencies + np.pi, 2 * np.pi) - np.pi
    far = np.abs(apart) > _frequency_bound(kit.frequencies)
    if far.any():
        k = int(np.flatnonzero(far)[0])
        return (
            f"its code turns pair {k} by {owner.frequencies[k]:.6g} rad per position, the "
            f"kit's reading by {kit.frequencies[k]:.6g} (base or scaling rule)"
        )
    eps = float(np.finfo(np.float32).eps)
    if np.abs(owner.factor - kit.factor).max() > 8 * eps * kit.factor.max():
        return (
            f"its code multiplies cos and sin by {owner.factor.max():.6g}, the kit by "
            f"{kit.factor.max():.6g} (the rule's attention factor)"
        )
    return None


def _scales_differ(configuration: Configuration, layers) -> tuple[str, str] | None:
    """The query's scale after the rotation and the softmax scale, held to the kit's: "differs"
    where the kit reads a rule for it, "unread" where it reads none."""
    attention = configuration.attention or {}
    expected = _expected_softmax(attention, configuration.head_dim)
    wanted = expected_query_scale(configuration)
    for index, layer in enumerate(layers):
        scale = layer.query_scale
        if layer.rotation is not None and scale is not None:
            off = np.flatnonzero(~np.isnan(scale) & ~np.isclose(scale, wanted, rtol=1e-5))
            if off.size:
                t = int(off[0])
                kind = "differs" if "llama_4_scaling" in attention else "unread"
                return kind, (
                    f"layer {index}: its code scales the rotated query by {scale[t]:.6g} at "
                    f"position {t}, the kit by {wanted[t]:.6g}"
                )
        softmax = layer.softmax_scale
        own = configuration.model_type in OWN_ATTENTION_SCALE
        if layer.attends and not own and isinstance(softmax, int | float):
            if not math.isclose(softmax, expected, rel_tol=1e-6):
                kind = "differs" if "mscale" in attention else "unread"
                return kind, (
                    f"layer {index}: its attention scales q . k by {softmax:.6g}, the kit by "
                    f"{expected:.6g}"
                )
    return None


def _expected_softmax(attention: dict, head_dim) -> float:
    scale = attention.get("qk_head_dim", head_dim) ** -0.5
    mscale = attention.get("mscale")
    if mscale:
        factor = positional.yarn_mscale(mscale["factor"], mscale["mscale_all_dim"])
        scale *= factor * factor
    return scale


def expected_query_scale(configuration: Configuration) -> np.ndarray:
    """The kit's scale on a rotating layer's query after the rotation, per position: Ministral
    3's 1 + beta ln(1 + floor(p / original_max_position_embeddings)), else 1 (Llama 4's
    temperature is its NoPE layers')."""
    scaling = (configuration.attention or {}).get("llama_4_scaling")
    if scaling is None:
        return np.ones(POSITIONS)
    steps = np.floor(np.arange(POSITIONS) / scaling["original_max_position_embeddings"])
    return 1 + scaling["beta"] * np.log1p(steps)
