"""A Hugging Face ``config.json``'s fields, read as transformers reads them: the
``Configuration`` they describe, or one line (``UsageError``) naming the file and the field.

Two readers give the same reading (the fields transformers' config object holds after its
defaults and its rope standardisation): transformers' own config classes where transformers is
installed (``hf_transformers``), else the kit's transcription of their rules
(``kit_reading``, over ``defaults.DEFAULTS``). One ``build`` then checks every field's type
and range and makes the ``Configuration``; ``tests/test_config_reading.py`` holds the two
readers equal.

transformers' rules (5.24, ``modeling_rope_utils.RotaryEmbeddingConfigMixin``): ``rope_scaling``
is taken whole over ``rope_parameters``; the rope dict's ``rope_theta`` and
``partial_rotary_factor`` win over the top level's; ``original_max_position_embeddings`` comes
from the rope dict (then ``max_position_embeddings``), except where the class has a field of
its own (Phi-3), which wins; a multimodal config is read through its ``text_config``.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import math

import numpy as np

from backends import validation
from embedding_parity.configs import checks, layers, owner, vision
from embedding_parity.configs.configuration import Configuration
from embedding_parity.configs.defaults import DEFAULTS, FLAT_TEXT, PLAIN, TEXT_TYPES
from embedding_parity.configs.hf_transformers import transformers_reading
from embedding_parity.configs.transformers_types import KNOWN_TO_TRANSFORMERS

# Hugging Face model types whose learned positions follow a rule other than arange.
POSITION_RULES = {
    "opt": "opt",
    "roberta": "roberta",
    "xlm-roberta": "roberta",
    "camembert": "roberta",
    "bart": "bart",
    "mbart": "bart",
}
# Model types without RoPE: learned (or no) positions.
LEARNED = {"bert", "gpt2", "opt", "roberta", "xlm-roberta", "camembert", "bart", "mbart"}
# Rotations over pairs (2i, 2i+1), whatever the config says (DeepSeek-V3 and its kin say so with
# rope_interleave, which their attention reads): transformers 5.24's text models whose
# apply_rotary_pos_emb turns x[..., ::2] with x[..., 1::2] (rotate_half or rotate_every_two of
# that form, cos and sin repeat_interleave'd; GLM-4's, ERNIE 4.5's and Moonshine's on the first
# int(head_dim * partial_rotary_factor) dims), views the pairs as complex numbers (Llama 4,
# DeepSeek-V2), or calls apply_rotary_pos_emb_interleave unconditionally. ChatGLM's remote code
# rotates so too. (ERNIE 4.5-VL's text model pairs (2i, 2i+1) over frequencies it reorders
# first: not this rule.)
INTERLEAVED = {
    *("gptj", "codegen", "roformer", "chatglm", "glm", "glm4", "glm4v_text", "glm_ocr_text"),
    *("ernie4_5", "ernie4_5_moe", "helium", "moonshine", "moonshine_streaming", "blt"),
    *("cohere", "cohere2", "cohere2_moe", "llama4_text", "deepseek_v2", "deepseek_v32"),
    *("deepseek_v4", "glm_moe_dsa", "longcat_flash", "bailing_hybrid", "axk2", "dots3_note_text"),
    *("mistral_large4_text", "hy_v4_vl_text", "openai_privacy_filter"),
}
# Model types whose rotation the kit's reading does not express, and what it leaves out: the
# kinds that judge the rotation refuse them with it (the lookup at the same file is checked).
# Held by the sweep (tests/test_owner_sweep.py): each is one the model's own code does not
# confirm as the kit would otherwise read it.
UNREAD = {
    "cohere2_moe": "its dense prefix layers rotate whatever their attention type (force_rope, "
    "where prefix_dense_sliding_window_pattern is 1)",
    "muse_glimmer_text": "a base per layer (layer_rope_theta, 0 for a NoPE layer)",
    "ernie4_5_vl_moe_text": "pairs (2i, 2i+1) over frequency slots reordered for its 3-D "
    "positions",
    "minimax_m3_vl_text": "its rotary module reads partial_rotary_factor from the rope dict "
    "alone, not beside it",
    "nanochat": "it turns each pair the other way round (x1 cos + x2 sin, x2 cos - x1 sin)",
}
# Multimodal RoPE (M-RoPE): the text model types whose rotary module turns each frequency slot by
# the t, h or w row of (3, T) position ids, how the three share the slots, and the section the
# class takes where the rope dict gives none (their recomposition_frequencies, transformers 5.24;
# the class decides the layout: Qwen3-VL's mrope_interleaved field is not read).
MROPE = {
    "qwen2_vl_text": ("chunked", (16, 24, 24)),
    "qwen2_5_vl_text": ("chunked", (16, 24, 24)),
    "glm4v_text": ("chunked", (8, 12, 12)),
    "qwen3_vl_text": ("interleaved", (24, 20, 20)),
    "qwen3_5_text": ("interleaved", (11, 11, 10)),
}
SCALED_LENGTH = ("llama3", "yarn", "longrope")  # rules with original_max_position_embeddings
# The rules a config.json can name (freq_factors is llama.cpp's, from a GGUF's tensors).
RULES = tuple(rule for rule in validation.ROPE_SCALINGS if rule != "freq_factors")


def from_fields(
    fields: dict, name: str, where: str, reader: str | None = None, *, hold: bool = True
) -> Configuration:
    """The Configuration a config's fields describe; UsageError naming ``where`` and the field.
    ``reader``: "transformers" or "kit" (default: transformers where it is installed). Read by
    transformers, a rotation is then held to the model's own code (``owner.hold``: the kinds
    that judge it refuse where the code does otherwise); ``hold=False`` for the sweep, which
    reports the two side by side."""
    if reader is None:
        reader = "transformers" if importlib.util.find_spec("transformers") else "kit"
    if vision.alone(fields, reader == "transformers"):  # a ViT's config.json: no text model
        tower = vision.Tower(name, fields, where, alone=True)
        tower.reading()  # read now: a file the kit cannot read is refused as it is given
        return Configuration(name=name, model_type=fields.get("model_type"), tower=tower)
    text, model_type = text_fields(fields, where)
    if reader == "transformers":
        reading = transformers_reading(fields, where)
    else:
        reading = kit_reading(text, model_type, where)
    reading["vision"] = _vision(fields, where)
    reading["vocab_size"] = text.get("vocab_size")  # the table's rows, where the file says
    configuration = build(reading, name, where)
    if isinstance(fields.get("vision_config"), dict):  # read when a vision kind asks
        tower = vision.Tower(name, fields, where, alone=False)
        configuration = dataclasses.replace(configuration, tower=tower)
    if configuration.rope and model_type in UNREAD:
        return dataclasses.replace(
            configuration,
            unconfirmed=f"model_type {model_type!r}: {UNREAD[model_type]}, which the kit does "
            "not read: it will not judge a port of this rotation",
        )
    known = model_type in KNOWN_TO_TRANSFORMERS  # else transformers has no code to run
    if reader == "transformers" and hold and configuration.rope and known:
        return owner.hold(configuration, fields)
    return configuration


# The position builders the kit checks (get_rope_index, transformers 5.24): the vision_config
# fields each reads, with its class's defaults, and how it numbers a video's frames
# (positional.MROPE_FRAMES: Qwen3-VL's, Qwen3.5's and GLM-4V's are one builder). Qwen2-VL's
# builder takes no seconds per grid: its own contract, not in the kit yet.
VISION = {
    "qwen2_5_vl": ({"spatial_merge_size": 2, "tokens_per_second": 4}, "whole"),
    "qwen3_vl": ({"spatial_merge_size": 2}, "split"),
    "qwen3_5": ({"spatial_merge_size": 2}, "split"),
    "glm4v": ({"spatial_merge_size": 2}, "split"),
}


def _vision(fields: dict, where: str) -> dict | None:
    """The position builder's settings: vision_config's fields over its class's defaults."""
    if fields.get("model_type") not in VISION:
        return None
    known, frames = VISION[fields["model_type"]]
    given = checks.mapping(fields.get("vision_config"), "vision_config", where) or {}
    vision = {key: given.get(key, default) for key, default in known.items()}
    for key, value in vision.items():
        try:  # the builder's own check (positional.mrope_position_ids), in its words
            validation.check_vision_setting(value, key)
        except (TypeError, ValueError) as error:
            checks.refuse(where, f"vision_config {error}")
    return {**vision, "frames": frames}


def text_fields(fields: dict, where: str) -> tuple[dict, str | None]:
    """The fields that describe the text model (a multimodal config's ``text_config``) and its
    model type, after the checks both readers share (types transformers would take silently or
    read past)."""
    outer = checks.text(fields.get("model_type"), "model_type", where)
    inner = checks.mapping(fields.get("text_config"), "text_config", where)
    if inner is not None or (outer in TEXT_TYPES and outer not in FLAT_TEXT):
        fields = inner or {}
        where = f"{where} text_config"
    model_type = checks.text(fields.get("model_type"), "model_type", where)
    if inner is None and outer in FLAT_TEXT:  # Qwen2-VL's text fields at the top level
        model_type = TEXT_TYPES[outer]
    model_type = model_type or TEXT_TYPES.get(outer) or (None if inner is not None else outer)
    for field in ("rope_scaling", "rope_parameters"):
        checks.mapping(fields.get(field), field, where)
    layers.check_owned(fields, model_type, where)
    layers.check_keyed(fields, model_type, where)
    layers.check_lists(fields, where)
    _check_given(fields, model_type, where)
    return fields, model_type


def _at_least(least: int):
    return lambda value, field, where: checks.integer(value, field, where, least)


# Each field's check, under each name a config.json gives it: run on the fields the file gives,
# before either reader, so that both refuse a wrong one with the same line (transformers would
# take most of them silently, or fail deep inside with a message naming no field). Only fields
# the kit reads: one that bears on neither the input layer nor the rotation is the model's
# business (Granite 4.0-H 350M's num_local_experts is 0: it has no routed experts).
GIVEN = {
    **dict.fromkeys(["hidden_size", "n_embd", "d_model"], _at_least(1)),
    **dict.fromkeys(["num_attention_heads", "n_head", "encoder_attention_heads"], _at_least(1)),
    **dict.fromkeys(["max_position_embeddings", "n_positions"], _at_least(1)),
    "original_max_position_embeddings": _at_least(1),
    **dict.fromkeys(
        ["head_dim", "qk_rope_head_dim", "rotary_dim", "global_head_dim"], checks.head_dim
    ),
    "qk_nope_head_dim": _at_least(0),
    "floor_scale": _at_least(1),
    "attn_scale": checks.positive,
    "attn_temperature_tuning": checks.flag,
    **dict.fromkeys(
        ["rope_theta", "rotary_emb_base", "rope_local_base_freq", "global_rope_theta"], checks.base
    ),
    "local_rope_theta": checks.base,
    **dict.fromkeys(["global_attn_every_n_layers", "no_rope_layer_interval"], _at_least(1)),
    "attention_chunk_size": _at_least(1),
    **dict.fromkeys(["partial_rotary_factor", "rotary_pct"], checks.share),
    "rope_interleave": checks.flag,
    "pad_token_id": lambda v, f, w: checks.integer(v, f, w, 0, checks.MOST_TOKEN_ID),
    "type_vocab_size": lambda v, f, w: checks.integer(v, f, w, 1, checks.MOST_TYPE_VOCAB),
    "layer_norm_eps": checks.positive,
    # transformers builds a list per layer (layer_types) as it reads: 30 million layers ran
    # for minutes, where the deepest models have about 128
    **dict.fromkeys(
        ["num_hidden_layers", "n_layer", "num_layers"],
        lambda v, f, w: checks.integer(v, f, w, 1, checks.MOST_LAYERS),
    ),
}
# The numbers of a rope dict that transformers does arithmetic with (the rest are checked by
# backends.validation once the rule is known).
GIVEN_ROPE = {
    "rope_theta": checks.base,
    "partial_rotary_factor": checks.share,
    "original_max_position_embeddings": _at_least(1),
    **dict.fromkeys(["factor", "low_freq_factor", "high_freq_factor"], checks.positive),
    **dict.fromkeys(["beta_fast", "beta_slow", "mscale", "mscale_all_dim"], checks.positive),
    # cos and sin times it, judged in float16 too (YaRN's is 1 + 0.1 ln factor, LongRoPE's alike)
    "attention_factor": lambda v, f, w: checks.multiplier(v, f, w, "about 1 to 1.5"),
}


def _check_given(fields: dict, model_type, where: str) -> None:
    for field, check in GIVEN.items():
        if fields.get(field) is not None:
            check(fields[field], field, where)
    # a class lays its layers out by (i + 1) % sliding_window_pattern; EXAONE 4's files give
    # it in letters ("LLLG") beside the layer_types it spells, which the kit reads instead
    pattern = fields.get("sliding_window_pattern")
    if pattern is not None and (model_type in layers.PATTERNED or not isinstance(pattern, str)):
        checks.integer(pattern, "sliding_window_pattern", where, 1)
    for rope_field in ("rope_scaling", "rope_parameters"):
        rope = fields.get(rope_field) or {}
        nested = {key: value for key, value in rope.items() if isinstance(value, dict)}
        for named, given in [(rope_field, rope)] + [
            (f"{rope_field}[{key!r}]", value) for key, value in nested.items()
        ]:
            for field, value in given.items():
                if field in GIVEN_ROPE and value is not None:
                    GIVEN_ROPE[field](value, f"{named} {field}", where)


def kit_reading(fields: dict, model_type: str | None, where: str) -> dict:
    """What transformers' config object for ``model_type`` would hold, by the kit's own rules:
    the file's fields over the class's defaults (``defaults.DEFAULTS``), the rope dict
    standardised as ``RotaryEmbeddingConfigMixin.convert_rope_params_to_dict`` does. A model
    type without an entry there is refused: its class's defaults (Qwen3's head_dim 128, GLM's
    partial rotation) would decide what the file leaves out, and the kit cannot know them; a
    type transformers has no class for is read from the file's fields alone, as transformers'
    ``PretrainedConfig`` reads it."""
    if model_type in KNOWN_TO_TRANSFORMERS and model_type not in DEFAULTS:
        checks.refuse(
            where,
            f"model_type {checks.shown(model_type)}: transformers' {model_type} class fills in "
            "what the file leaves out, and without transformers the kit knows the defaults of "
            f"{', '.join(sorted(DEFAULTS))} only; install transformers to read it as "
            "transformers does",
        )
    if fields.get("per_layer_config") is not None:
        checks.refuse(
            where,
            "per_layer_config: the kit's own reading takes a layer's head width from "
            "global_head_dim alone; install transformers to read per-layer overrides",
        )
    known = DEFAULTS.get(model_type, {})
    aliases = known.get("aliases", {})

    def get(key):
        for name in (key, aliases.get(key)):
            if name in fields:
                return fields[name]
        return known.get(key)

    reading = {key: get(key) for key in PLAIN}
    reading["model_type"] = model_type
    no_rope = model_type in LEARNED or known.get("no_rope")
    count = reading["num_hidden_layers"]
    count = count if isinstance(count, int) and 0 < count <= checks.MOST_LAYERS else 0
    reading["no_rope_layers"] = layers.kit_no_rope_layers(fields, model_type, count)
    reading["layer_types"] = layers.kit_layer_types(
        fields, model_type, count, reading["no_rope_layers"]
    )
    reading["head_dims"] = layers.kit_head_dims(
        fields, model_type, reading["head_dim"], reading["layer_types"]
    )
    by_type = layers.kit_rope_by_type(fields, model_type, reading["layer_types"])
    if no_rope:
        reading["rope"] = None
    elif by_type is not None:
        reading["rope"] = {
            name: _standardised(rope, fields, known, get, nested=True)
            for name, rope in by_type.items()
        }
    else:
        reading["rope"] = _kit_rope(fields, model_type, known, get)
    return reading


def _kit_rope(fields: dict, model_type, known: dict, get) -> dict:
    chosen = fields.get("rope_scaling") or fields.get("rope_parameters")
    rope = copy.deepcopy(chosen or known.get("rope_parameters") or {})
    if model_type in MROPE and rope.get("type") == "mrope":  # Qwen2-VL's: the default rule
        rope.setdefault("rope_type", "default")
    rope = _standardised(rope, fields, known, get, nested=False)
    if model_type == "phi3" and rope["rope_type"] in ("su", "yarn"):
        rope["rope_type"] = "longrope"  # Phi3Config reads both as LongRoPE
    return rope


def _standardised(rope: dict, fields: dict, known: dict, get, *, nested: bool) -> dict:
    """A rope dict as ``standardize_rope_params`` leaves it: the base and the rotated share
    from the top level where it gives none, its rope_type, and the length the length rules
    scale from (an original_max_position_embeddings beside a flat dict wins over its own)."""
    theta_key = known.get("rope_theta_key", "rope_theta")
    partial_key = known.get("partial_key", "partial_rotary_factor")
    rope.setdefault("rope_theta", fields.get(theta_key, known.get("rope_theta", 10000.0)))
    partial = fields.get(partial_key, known.get("partial_rotary_factor"))
    if partial is not None:
        rope.setdefault("partial_rotary_factor", partial)
    rope.setdefault("rope_type", rope.get("type", "default"))
    if rope["rope_type"] in SCALED_LENGTH:
        # as standardize_rope_params runs again when the rotary module is built: an
        # original_max_position_embeddings beside the flat dict (Phi-3's class field, or any
        # file's) wins over the dict's own
        own = get("original_max_position_embeddings")
        if own is not None and not nested:
            rope["original_max_position_embeddings"] = own
        else:
            rope.setdefault("original_max_position_embeddings", get("max_position_embeddings"))
    return rope


def build(reading: dict, name: str, where: str) -> Configuration:
    """The Configuration of a reading, each field checked for its type and range."""
    model_type = checks.text(reading["model_type"], "model_type", where)
    kind = reading["position_embedding_type"]  # BERT's family's: others' classes pass it over
    if model_type in LEARNED and kind not in (None, "absolute"):
        checks.refuse(
            where,
            f"position_embedding_type {checks.shown(kind)} is not one the kit checks "
            "(only 'absolute')",
        )
    if reading["scale_embedding"]:
        checks.refuse(
            where,
            "scale_embedding (BART's sqrt(d_model) on the token rows) is not one the kit checks",
        )
    hidden = checks.optional_integer(reading["hidden_size"], "hidden_size", where, 1)
    config = {
        "name": name,
        "model_type": model_type,
        "hidden_size": hidden,
        "max_position_embeddings": checks.optional_integer(
            reading["max_position_embeddings"], "max_position_embeddings", where, 1
        ),
        "embed_scale": bool(model_type and model_type.startswith("gemma")),
        "position_rule": POSITION_RULES.get(model_type, "arange"),
        "pad_token_id": checks.optional_integer(
            reading["pad_token_id"], "pad_token_id", where, 0, checks.MOST_TOKEN_ID
        ),
        "type_vocab_size": checks.optional_integer(
            reading["type_vocab_size"], "type_vocab_size", where, 1, checks.MOST_TYPE_VOCAB
        ),
        "layer_norm_eps": _optional(
            checks.positive, reading["layer_norm_eps"], "layer_norm_eps", where
        ),
        "vision": reading.get("vision"),
    }
    if config["embed_scale"] and hidden is None:
        checks.refuse(
            where, f"{model_type} scales its token rows by sqrt(hidden_size): no hidden_size"
        )
    config["embedding_scale"] = _embedding_scale(reading, model_type, hidden, where)
    config["vocab_size"] = checks.optional_integer(
        reading.get("vocab_size"), "vocab_size", where, 1, checks.MOST_TOKEN_ID
    )
    if config["position_rule"] == "roberta" and config["pad_token_id"] is None:
        checks.refuse(
            where,
            f"{model_type} counts positions from pad_token_id + 1: the config has no pad_token_id",
        )
    if model_type in LEARNED:
        return Configuration(**config)
    return Configuration(**config, **_rotation(reading, model_type, where))


# The model types whose input embeddings are scaled, by rule (backends.positional.SCALE_RULES),
# and the config field that holds the number (Gemma's is sqrt(hidden_size)).
SCALED = {
    "granite": ("granite", "embedding_multiplier"),
    "granitemoe": ("granite", "embedding_multiplier"),
    "granitemoeshared": ("granite", "embedding_multiplier"),
    "granitemoehybrid": ("granite", "embedding_multiplier"),
    "falcon_h1": ("falcon_h1", "embedding_multiplier"),
    "minicpm3": ("minicpm", "scale_emb"),
}


def _embedding_scale(reading: dict, model_type, hidden, where: str) -> tuple | None:
    """(rule, value) of a model that scales its input embeddings, or None."""
    if model_type and model_type.startswith("gemma"):
        return ("gemma", math.sqrt(hidden))
    if model_type not in SCALED:
        return None
    rule, field = SCALED[model_type]
    return (rule, checks.multiplier(reading[field], field, where))


def _optional(check, value, field: str, where: str):
    return None if value is None else check(value, field, where)


def _head_dim(reading: dict, where: str) -> int:
    """qk_rope_head_dim (DeepSeek), else head_dim, else hidden_size // num_attention_heads."""
    for field in ("qk_rope_head_dim", "head_dim"):
        if reading[field] is not None:
            return checks.head_dim(reading[field], field, where)
    hidden, heads = reading["hidden_size"], reading["num_attention_heads"]
    if hidden is None or heads is None:
        checks.refuse(
            where, "no head_dim, and no hidden_size and num_attention_heads to derive it from"
        )
    heads = checks.integer(heads, "num_attention_heads", where, 1)
    return checks.head_dim(hidden // heads, "hidden_size // num_attention_heads", where)


def _rotation(reading: dict, model_type, where: str) -> dict:
    """The Configuration's rope fields: head_dim, layout, and the rotation (rope_theta, scaling,
    rotary_dim) of every layer, or, where layers rotate differently, of the full-attention
    layers (the first layer type that rotates where those are NoPE) and the layer types."""
    head_dim = _head_dim(reading, where)
    interleave = checks.flag(reading["rope_interleave"], "rope_interleave", where)
    layout = "interleaved" if model_type in INTERLEAVED or interleave else "half"
    longest = reading["max_position_embeddings"]
    rope = reading["rope"] or {}
    nested = reading["layer_types"] and any(key in reading["layer_types"] for key in rope)
    keyed = [key for key, value in rope.items() if isinstance(value, dict)]
    if keyed and model_type not in layers.KEYED_ROPE:
        checks.refuse(
            where,
            f"rope_parameters keyed by layer type ({', '.join(map(str, keyed))}): model_type "
            f"{checks.shown(model_type)}'s rotary module rotates every layer by one rule, and "
            "transformers passes these entries over; the kit reads them for the classes whose "
            "rotary keeps a rule per layer type (Gemma 3 and 4, ModernBERT, OLMo 3, ...)",
        )
    if keyed and not nested:
        checks.refuse(
            where,
            f"rope_parameters keyed by layer type ({', '.join(map(str, keyed))}) where the "
            f"config's layer_types are {sorted(set(reading['layer_types'] or [])) or 'not given'}: "
            "give layer_types beside it, or one rope dict for every layer",
        )

    def rotation(layer_rope, width=None):
        """(rope_theta, scaling, rotary_dim) of a rope dict at a head width (None: head_dim).
        The proportional rule keeps its partial_rotary_factor: it turns a share of the head's
        frequency slots, where every other rule rotates a share of the head's dims."""
        width = width or head_dim
        layer_rope = dict(rope if layer_rope is None else layer_rope)
        _pop_mrope(layer_rope, model_type, where)
        theta = checks.base(layer_rope.pop("rope_theta", 10000.0), "rope_theta", where)
        theta = _pop_ntk_alpha(layer_rope, theta, reading["head_dim"], model_type, where)
        rotary_dim = _optional(checks.head_dim, reading["rotary_dim"], "rotary_dim", where)
        if layer_rope.get("rope_type") != "proportional":
            partial = layer_rope.pop("partial_rotary_factor", None)
            partial = _optional(checks.share, partial, "partial_rotary_factor", where)
            if rotary_dim is None and partial is not None and partial != 1.0:
                rotary_dim = int(width * partial)
        scaling = _scaling(layer_rope, longest, model_type, where)
        try:
            _, scaling, rotary_dim = validation.check_rope(
                (1, width), np.zeros(1, np.int64), theta, layout, scaling, rotary_dim
            )
        except (TypeError, ValueError) as error:
            checks.refuse(where, str(error))
        checks.checkable_scaling(theta, scaling, rotary_dim, where)
        return theta, scaling, None if rotary_dim == width else rotary_dim

    types = layers.table(reading, model_type, rotation, where)
    rotating = [t for t in types if t.rotates]
    if rotating:
        main = next((t for t in rotating if t.name == "full_attention"), rotating[0])
        theta, scaling, rotary_dim = main.rope_theta, main.scaling, main.rotary_dim
        head_dim = main.head_dim or head_dim
    elif types:  # no layer rotates: the identity is the contract, the rope dict unread
        theta, scaling, rotary_dim = Configuration.rope_theta, None, None
    else:
        theta, scaling, rotary_dim = rotation(None)
    return {
        "head_dim": head_dim,
        "rotary_dim": rotary_dim,
        "layout": layout,
        "rope_theta": theta,
        "scaling": scaling,
        # one rotating group: every layer alike, by the rope fields above
        "layer_types": types if len(types) > 1 or not rotating else (),
        "mrope": _mrope(rope, model_type, rotary_dim or head_dim, scaling, where),
        "attention": _attention(reading, model_type, head_dim, scaling, where),
        "note": _ntk_alpha_note(reading, model_type, theta),
    }


# The rotary modules that read a rope dict of rope_type "dynamic" with an alpha as a fixed NTK
# base, rope_theta * alpha ** (head_dim / (head_dim - 2)), and pass over the rest of it
# (transformers 5.24, modeling_hunyuan_v1_dense.py and modeling_hunyuan_v1_moe.py:
# compute_ntk_alpha_rope_parameters). They rename the rule "ntk_alpha", which
# dynamic_rope_update leaves alone: nothing changes with the sequence length.
NTK_ALPHA = ("hunyuan_v1_dense", "hunyuan_v1_moe")


def _ntk_alpha(rope: dict, model_type) -> bool:
    """Whether the model type's rotary reads this rope dict as a fixed base from its alpha."""
    dynamic = rope.get("rope_type") == "dynamic"
    return model_type in NTK_ALPHA and dynamic and bool(rope.get("alpha"))


def _pop_ntk_alpha(rope: dict, theta: float, head_dim, model_type, where: str) -> float:
    """The base of a rope dict its rotary reads as a fixed NTK base, computed as transformers
    computes it (Python floats, before its inv_freq), the dict emptied; else ``theta``."""
    if not _ntk_alpha(rope, model_type):
        return theta
    alpha = checks.positive(rope["alpha"], "alpha", where)
    if head_dim is None:
        checks.refuse(
            where,
            f"alpha: {model_type}'s rotary makes its base rope_theta * alpha ** (head_dim / "
            "(head_dim - 2)) from the config's head_dim, and the config gives none",
        )
    head_dim = checks.integer(head_dim, "head_dim", where, 4)  # head_dim - 2 divides
    rope.clear()
    return checks.base(
        theta * alpha ** (head_dim / (head_dim - 2)),
        f"the base rope_theta * alpha ** (head_dim / (head_dim - 2)) = {theta:g} * {alpha:g} "
        f"** ({head_dim} / {head_dim - 2}) =",
        where,
    )


def _ntk_alpha_note(reading: dict, model_type, theta: float) -> str | None:
    """Where a base made from alpha came from, for the line the kit prints."""
    rope = reading["rope"] or {}
    if not _ntk_alpha(rope, model_type):
        return None
    d = reading["head_dim"]
    return (
        f"rope_theta {theta:.9g} = {rope['rope_theta']:g} * alpha {rope['alpha']:g} ** "
        f"({d} / {d - 2}): {model_type}'s fixed NTK base (transformers' ntk_alpha), no scaling"
    )


# The models whose attention multiplies its softmax scale by YaRN's mscale(factor,
# mscale_all_dim) squared (modeling_deepseek_v3.py, modeling_deepseek_v2.py: yarn_apply_mscale).
SOFTMAX_MSCALE = ("deepseek_v2", "deepseek_v3")
# The models whose NoPE layers scale the query by a temperature growing with the position
# (modeling_llama4.py: attn_temperature_tuning, floor_scale, attn_scale).
TEMPERATURE = ("llama4_text",)
# The models whose attention scales every layer's query, after the rotation, by
# get_llama_4_attn_scale(position_ids, llama_4_scaling_beta, original_max_position_embeddings),
# both read from the rope dict, which their rotary passes over (modeling_ministral3.py).
# Mistral 4's attention does too; the kit does not read its MLA heads, and refuses its file.
LLAMA_4_SCALING = ("ministral3",)


def _attention(reading: dict, model_type, head_dim: int, scaling, where: str) -> dict:
    """What scales q . k before the softmax: the width of q . k (DeepSeek's nope and rope dims
    together: qk_head_dim), DeepSeek's mscale where its attention applies it, Llama 4's query
    temperature on its NoPE layers, Ministral 3's query scale on every layer."""
    nope = checks.optional_integer(reading["qk_nope_head_dim"], "qk_nope_head_dim", where, 0)
    attention = {"qk_head_dim": head_dim + (nope or 0)}
    if model_type in SOFTMAX_MSCALE and scaling and scaling.get("mscale_all_dim"):
        attention["mscale"] = {
            "factor": scaling["factor"],
            "mscale_all_dim": scaling["mscale_all_dim"],
            "mscale": scaling.get("mscale", 1.0),
        }
    tuning = checks.flag(reading["attn_temperature_tuning"], "attn_temperature_tuning", where)
    if model_type in TEMPERATURE and tuning:
        attention["temperature"] = {
            "floor_scale": checks.integer(reading["floor_scale"], "floor_scale", where, 1),
            "attn_scale": checks.positive(reading["attn_scale"], "attn_scale", where),
        }
    if model_type in LLAMA_4_SCALING:
        attention["llama_4_scaling"] = _llama_4_scaling(
            reading["rope"] or {}, reading["max_position_embeddings"], model_type, where
        )
    return attention


def _llama_4_scaling(rope: dict, longest, model_type, where: str) -> dict:
    """The query scale's beta and length, from the rope dict as the attention reads them (it
    fails without either); the model's max_position_embeddings beside them, for the mistake of
    taking it for the length."""
    for field in ("llama_4_scaling_beta", "original_max_position_embeddings"):
        if rope.get(field) is None:
            checks.refuse(
                where,
                f"no {field} in the rope dict: {model_type}'s attention scales the query by "
                "1 + llama_4_scaling_beta * ln(1 + floor(p / original_max_position_embeddings)) "
                "on every layer, and cannot run without it",
            )
    beta = checks.real(rope["llama_4_scaling_beta"], "llama_4_scaling_beta", where)
    if beta < 0:
        checks.refuse(
            where,
            f"llama_4_scaling_beta {beta:g} must be 0 or more: the query scale 1 + beta * "
            "ln(1 + floor(p / original_max_position_embeddings)) would fall towards 0 and below "
            "it at long positions (Ministral 3's beta is 0.1)",
        )
    field = "original_max_position_embeddings"
    return {
        "beta": beta,
        field: checks.integer(rope[field], field, where, 1),
        "max_position_embeddings": longest,
    }


def _pop_mrope(rope: dict, model_type, where: str) -> None:
    """M-RoPE's fields taken out of a rope dict before its scaling rule is read (Qwen2-VL's
    older "type": "mrope" stands for the default rule), or refused where the model type's
    rotary module does not read them."""
    given = [key for key in ("mrope_section", "mrope_interleaved") if key in rope]
    if model_type not in MROPE and (given or rope.get("type") == "mrope"):
        checks.refuse(
            where,
            f"{(given or ['type mrope'])[0]}: M-RoPE is read by the rotary modules of "
            f"{', '.join(MROPE)} only, not model_type {checks.shown(model_type)}'s",
        )
    for key in given:
        rope.pop(key)
    if rope.get("type") == "mrope":
        rope.pop("type")


def _mrope(rope: dict, model_type, rotary_dim: int, scaling, where: str):
    """(layout, section) of an M-RoPE model type (the rope dict's section, else its class's)."""
    if model_type not in MROPE:
        return None
    layout, section = MROPE[model_type]
    section = rope.get("mrope_section", section)
    if scaling is not None:
        checks.refuse(
            where,
            f"{scaling['rope_type']} scaling with M-RoPE: the kit checks M-RoPE at the default "
            "rule only",
        )
    try:
        return layout, validation.check_mrope(section, layout, rotary_dim)
    except ValueError as error:
        checks.refuse(where, str(error))


def _scaling(rope: dict, longest, model_type, where: str) -> dict | None:
    """The standardised rope dict in backends.positional's terms: dynamic NTK's and LongRoPE's
    max_position_embeddings from the config (a YaRN dict without its factor is refused, as
    transformers 5.24 refuses it); the query scale's beta left to the attention that reads it."""
    if model_type in LLAMA_4_SCALING:
        rope.pop("llama_4_scaling_beta", None)
        # Ministral3Config's default dict carries the model's length too, which its class
        # passes over (ignore_keys_at_rope_validation) and YaRN reads from the config
        rope.pop("max_position_embeddings", None)
    kind = checks.text(rope.pop("rope_type", None), "rope_type", where)
    older = checks.text(rope.pop("type", None), "type", where)
    if kind in (None, "default"):  # Qwen2-VL's "mrope" stays "type" under a "default" rope_type
        kind = older or kind
    elif older not in (None, kind):
        checks.refuse(where, f"type {older!r} where rope_type is {kind!r}: the kit checks one rule")
    if kind in (None, "default"):
        if rope:
            checks.refuse(where, f"fields {sorted(rope)} without a rope_type")
        return None
    if kind not in RULES:
        checks.refuse(where, f"rope_type {kind!r} is not one the kit checks ({', '.join(RULES)})")
    field = "original_max_position_embeddings"
    if rope.get(field) is not None:
        rope[field] = checks.integer(rope[field], field, where, 1)
    if kind in ("dynamic", "longrope") and longest is not None:
        rope.setdefault("max_position_embeddings", longest)
    return {"rope_type": kind, **rope}
