"""A config as a table of layers: which layers rotate by which rule, as transformers 5.24's
config classes and modeling code decide it.

Models of 2024-26 rotate their layers differently. Gemma 3 rotates its sliding-window layers
at base 10 000 unscaled and every sixth layer at base 1e6 with linear factor 8
(``rope_local_base_freq``, ``sliding_window_pattern``); ModernBERT its global layers at 160 000
and its local ones at 10 000 (``global_rope_theta``, ``local_rope_theta``,
``global_attn_every_n_layers``); OLMo 3 scales its full-attention layers only; transformers 5
writes any of them as ``rope_parameters`` keyed by layer type. Some layers are not rotated at
all (NoPE): SmolLM3's and Llama 4's where ``no_rope_layers[i]`` is 0 (1 means the layer *uses*
RoPE), Cohere2's and EXAONE 4's full-attention layers (their attention rotates the
sliding-window layers only: where sliding_window is null, Cohere2 no layer, EXAONE 4 every
one), and every layer of Granite 4.0-H (``position_embedding_type: "nope"``). Where no layer
rotates, the identity is the contract, one NoPE layer type.
Gemma 4's layers differ in width too: its full-attention layers have heads of
``global_head_dim`` (512) where the sliding ones have ``head_dim`` (256), and rotate a quarter of
their frequency slots by the "proportional" rule.

Each reader (``hf.transformers_reading``, ``hf.kit_reading``) gives ``layer_types``,
``no_rope_layers``, ``head_dims`` (each layer's head width, where layers differ in it) and the
rope dict (one, or one per layer type); ``table`` groups the layers by their rule. The kit's own
reading transcribes the classes' ``__post_init__`` and ``convert_rope_params_to_dict`` here
(``kit_layer_types``, ``kit_no_rope_layers``, ``kit_head_dims``, ``kit_rope_by_type``);
tests/test_config_reading.py holds it equal to transformers'.
"""

from __future__ import annotations

import copy

from embedding_parity.configs import checks
from embedding_parity.configs.configuration import LayerType

# Model types whose layers rotate where no_rope_layers[i] is 1 (modeling_smollm3.py,
# modeling_llama4.py, modeling_mistral_large4.py: ``self.use_rope =
# config.no_rope_layers[layer_idx]``).
NO_ROPE_LAYERS = ("smollm3", "llama4_text", "mistral_large4_text")
# Model types that rotate only their sliding-window layers, and which layers they rotate where
# the config's sliding_window is null:
# - "none": modeling_cohere2.py, modeling_flint.py: a layer keeps config.sliding_window if it
#   is a sliding one, and ``if self.sliding_window is not None: apply_rotary_pos_emb``: with no
#   window no layer rotates;
# - "every": modeling_exaone4.py (EXAONE 4.5's text model is one), modeling_exaone_moe.py,
#   modeling_kolibri1.py: ``if self.sliding_window is None or self.is_sliding``, the config's
#   window: with none every layer rotates;
# - "types": modeling_lara_mini.py passes the rotation to the layers whose layer type is
#   sliding_attention, modeling_afmoe.py rotates where is_local_attention, window or none.
SLIDING_ONLY = (
    {"cohere2": "none", "flint": "none", "lara_mini": "types", "afmoe": "types"}
    | dict.fromkeys(("exaone4", "exaone_moe", "kolibri1"), "every")
)
# Model types whose text attention has no rotary embedding at all, though their modeling file
# defines apply_rotary_pos_emb: Jamba's and Nemotron-H's attention layers sit beside Mamba
# layers unrotated, Inkling 2's rotation is its vision tower's. Every layer is NoPE.
NO_ROTARY = ("jamba", "nemotron_h", "inkling2_text")
# Model types whose model builds its rotary module only where position_embedding_type names it
# (modeling_granitemoehybrid.py: ``GraniteMoeHybridRotaryEmbedding(config) if
# config.position_embedding_type == "rope" else None``): any other value, null (the class's
# default) included, rotates no layer. Granite 4.0-H's files say "nope".
ROTARY_NAMED = {"granitemoehybrid": "rope"}
# Model types whose layer types the kit's own reading lays out by sliding_window_pattern.
PATTERNED = ("gemma3_text", "cohere2")
# Model types whose full-attention layers have heads of their own width: the field, its class
# default (Gemma4TextConfig.__post_init__: per_layer_config {layer: {"head_dim": global_head_dim}}
# on each full_attention layer).
LAYER_HEAD_DIM = dict.fromkeys(
    ("gemma4_text", "gemma4_unified_text", "diffusion_gemma_text", "embedding_gemma2_text"),
    ("global_head_dim", 512),
)
# The rotation per layer type a class takes where the file gives no rope_parameters
# (Gemma4TextConfig.__post_init__'s default_rope_params).
ROPE_BY_TYPE = {
    "gemma4_text": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        "full_attention": {
            "rope_type": "proportional",
            "partial_rotary_factor": 0.25,
            "rope_theta": 1_000_000.0,
        },
    },
}
# Model types whose class makes the last layer full attention whatever the file says
# (Gemma4TextConfig.__post_init__, with a warning).
LAST_FULL = ("gemma4_text",)
# Model types whose rotary module keeps a rule per layer type (transformers 5.24: its forward
# takes the layer_type), so rope_parameters keyed by layer type is read; every other class
# rotates each layer by one rule and passes such entries over.
KEYED_ROPE = (
    *("gemma3_text", "gemma3n_text", "gemma4_text", "gemma4_unified_text", "modernbert"),
    *("modernbert-decoder", "olmo3", "beam", "cohere_compass_text", "deepseek_v4", "dory"),
    *("diffusion_gemma_text", "dots3_note_text", "embedding_gemma2_text", "esm", "evolla"),
    *("laguna", "lfm3", "mellum", "mimo_v2_flash", "neomme", "step3p5", "step3p7"),
    *("t5gemma2_text", "t5gemma2_decoder", "ultrabert", "zaya"),
)
# Fields that set a layer's rotation in these model types' classes alone (another class takes
# them silently and rotates every layer alike: a file that gives one is refused there).
OWNERS = {
    "rope_local_base_freq": ("gemma3_text", "gemma3n_text", "t5gemma2_text", "t5gemma2_decoder"),
    "global_rope_theta": ("modernbert", "modernbert-decoder"),
    "local_rope_theta": ("modernbert", "modernbert-decoder"),
    "global_attn_every_n_layers": ("modernbert", "modernbert-decoder", "afmoe"),
    "no_rope_layers": NO_ROPE_LAYERS,
    "no_rope_layer_interval": NO_ROPE_LAYERS,
    "global_head_dim": tuple(LAYER_HEAD_DIM),
}
# Where each class puts a config.json's rope_scaling and its bases, per layer type
# (its convert_rope_params_to_dict): {type: (scaled, {layer type: (theta field, default)})}.
BY_TYPE = {
    "gemma3_text": (
        ("full_attention",),
        {
            "full_attention": ("rope_theta", 1_000_000.0),
            "sliding_attention": ("rope_local_base_freq", 10_000.0),
        },
    ),
    "modernbert": (
        ("full_attention", "sliding_attention"),
        {
            "full_attention": ("global_rope_theta", 160_000.0),
            "sliding_attention": ("local_rope_theta", 10_000.0),
        },
    ),
    "olmo3": (
        ("full_attention",),
        {
            "full_attention": ("rope_theta", 500_000.0),
            "sliding_attention": ("rope_theta", 500_000.0),
        },
    ),
}


def check_owned(fields: dict, model_type, where: str) -> None:
    """A field of OWNERS refused in a model type whose class does not read it."""
    for field, owners in OWNERS.items():
        if fields.get(field) is not None and model_type not in owners:
            checks.refuse(
                where,
                f"{field}: read by the classes of {', '.join(owners)} only, not model_type "
                f"{checks.shown(model_type)}'s, whose transformers class would pass it over "
                "and rotate every layer alike; remove it, or name the model_type that reads it",
            )


def check_keyed(fields: dict, model_type, where: str) -> None:
    """A class that takes its rotation per layer type alone (ROPE_BY_TYPE: no older fields,
    no flat dict) refuses a rope_parameters that is not keyed by layer type: its rotary module
    would fail on the first type's missing entry."""
    rope = fields.get("rope_parameters")
    if model_type in ROPE_BY_TYPE and rope and not all(isinstance(v, dict) for v in rope.values()):
        types = ", ".join(ROPE_BY_TYPE[model_type])
        checks.refuse(
            where,
            f"rope_parameters: {model_type} rotates by a rule per layer type, so its "
            f"rope_parameters is keyed by layer type ({types}), not one flat dict",
        )


def check_lists(fields: dict, where: str) -> None:
    """The per-layer lists a file gives, checked before either reader (transformers fails deep
    inside on a short no_rope_layers, with "list index out of range")."""
    count = fields.get("num_hidden_layers")
    count = count if isinstance(count, int) and not isinstance(count, bool) else None
    for field, kind in (("layer_types", str), ("no_rope_layers", int)):
        if fields.get(field):  # Llama 4 reads an empty no_rope_layers as "the default"
            _check_list(fields[field], field, where, count, kind)


def kit_no_rope_layers(fields: dict, model_type, count: int) -> list | None:
    """SmolLM3Config's and Llama4TextConfig's no_rope_layers: the file's, else a NoPE layer
    every no_rope_layer_interval (4) layers, the interval's last (Llama 4 also fills in an
    empty list)."""
    if model_type not in NO_ROPE_LAYERS:
        return None
    given = fields.get("no_rope_layers")
    if given or (given is not None and model_type == "smollm3"):
        return list(given)
    interval = fields.get("no_rope_layer_interval", 4)
    return [int((i + 1) % interval != 0) for i in range(count)]


def kit_layer_types(fields: dict, model_type, count: int, no_rope: list | None) -> list | None:
    """The class's layer_types: the file's, else its own rule from the older fields (Gemma 4's
    last layer made full attention either way)."""
    found = _kit_layer_types(fields, model_type, count, no_rope)
    if found and model_type in LAST_FULL:
        found[-1] = "full_attention"
    return found


def _kit_layer_types(fields: dict, model_type, count: int, no_rope: list | None) -> list | None:
    if fields.get("layer_types") is not None:
        return list(fields["layer_types"])
    if model_type in (*PATTERNED, "gemma4_text"):
        default = 4 if model_type == "cohere2" else 6  # Gemma 4's is fixed: no field sets it
        pattern = (
            fields.get("sliding_window_pattern", default) if model_type in PATTERNED else default
        )
        return [_sliding((i + 1) % pattern) for i in range(count)]
    if model_type == "modernbert":
        every = fields.get("global_attn_every_n_layers", 3)
        return [_sliding(i % every) for i in range(count)]
    if model_type == "olmo3":
        return [_sliding((i + 1) % 4) for i in range(count)]
    if model_type == "smollm3":
        windowed = fields.get("use_sliding_window") and fields.get("sliding_window") is not None
        return [_sliding(windowed and not rope) for rope in no_rope]
    if model_type == "llama4_text":
        chunked = fields.get("attention_chunk_size", 8192) is not None
        return ["chunked_attention" if rope and chunked else "full_attention" for rope in no_rope]
    return None


def kit_head_dims(fields: dict, model_type, head_dim, layer_types: list | None) -> list | None:
    """Each layer's head width where the class gives some layers their own (Gemma 4's
    global_head_dim on its full-attention layers), else None."""
    if model_type not in LAYER_HEAD_DIM or not layer_types:
        return None
    field, default = LAYER_HEAD_DIM[model_type]
    wide = fields.get(field, default)
    if wide == head_dim:  # one width after all: transformers' config is not heterogeneous
        return None
    return [wide if kind == "full_attention" else head_dim for kind in layer_types]


def _sliding(sliding) -> str:
    return "sliding_attention" if sliding else "full_attention"


def kit_rope_by_type(fields: dict, model_type, layer_types: list | None) -> dict | None:
    """The rope dict per layer type, as the class's convert_rope_params_to_dict lays the file's
    rope_scaling, rope_parameters and bases out (before standardize_rope_params); None where
    the class keeps one dict for every layer."""
    rope = copy.deepcopy(fields.get("rope_parameters"))
    if model_type in ROPE_BY_TYPE:  # a class without older fields: the file's, else its own
        return rope or copy.deepcopy(ROPE_BY_TYPE[model_type])
    if model_type in BY_TYPE:
        scaled, bases = BY_TYPE[model_type]
        rope = rope if any(name in (rope or {}) for name in bases) else {}
        for name in bases:  # an entry the file leaves out: the class's default
            rope[name] = rope.get(name) or {"rope_type": "default"}
        for name in scaled:
            rope[name].update(fields.get("rope_scaling") or {})
        for name, (field, default) in bases.items():
            rope[name] = rope.get(name) or {"rope_type": "default"}
            rope[name].setdefault("rope_theta", fields.get(field, default))
        return rope
    rope = copy.deepcopy(fields.get("rope_scaling")) or rope
    if isinstance(rope, dict) and any(key in (layer_types or ()) for key in rope):
        return rope
    return None


def table(reading: dict, model_type, rotation, where: str) -> tuple[LayerType, ...]:
    """The layers grouped by their rotation: one group where every layer rotates alike (the
    rule of the one layer type a file gives, Gemma 3 with every layer full_attention: the full
    layers' rule, not the first entry of its rope dict), or () where the config has no rule per
    layer (every layer rotates by the top-level rope dict). ``rotation(rope_dict, head_dim)``
    gives a rope dict's (rope_theta, scaling, rotary_dim) at a head width (None: the
    config's), checked."""
    layer_types, no_rope = reading["layer_types"], reading["no_rope_layers"]
    head_dims = reading.get("head_dims")
    rope = reading["rope"] or {}
    nested = layer_types and any(key in layer_types for key in rope)
    count = checks.optional_integer(reading["num_hidden_layers"], "num_hidden_layers", where, 1)
    if layer_types is not None:
        _check_list(layer_types, "layer_types", where, count, str)
        count = len(layer_types)
    if no_rope is not None:
        _check_list(no_rope, "no_rope_layers", where, count, int)
        count = len(no_rope)
    if head_dims is not None:
        head_dims = [checks.head_dim(h, "head_dim of a layer", where) for h in head_dims]
    own_rule = model_type in (*SLIDING_ONLY, *ROTARY_NAMED, *NO_ROTARY)
    if count is None or not (nested or no_rope is not None or own_rule):
        return ()
    attention = layer_types or ["full_attention"] * count
    rules, kinds, whys, members = {}, {}, {}, {}
    for i, kind in enumerate(attention):
        nested_rope = rope if nested else None
        width = None if head_dims is None else head_dims[i]
        why = _not_rotated(kind, reading, model_type)
        if why:
            rule = (None,) * 4
        else:
            rule, why = _layer_rule(
                i, kind, nested_rope, no_rope, model_type, rotation, width, where
            )
        key = repr(rule)  # the scaling dict makes the rule unhashable
        rules.setdefault(key, rule)
        kinds.setdefault(key, []).append(kind)
        whys.setdefault(key, why)
        members.setdefault(key, []).append(i)
    names = _names(kinds, {key: rule[0] is None for key, rule in rules.items()})
    return tuple(
        LayerType(names[key], tuple(members[key]), *rule, why=whys[key])
        for key, rule in rules.items()
    )


def _not_rotated(kind: str, reading: dict, model_type) -> str | None:
    """Why a layer of attention type ``kind`` is not rotated by its model's own rule
    (NO_ROTARY, ROTARY_NAMED, SLIDING_ONLY), or None."""
    if model_type in NO_ROTARY:
        return f"{model_type}'s text attention has no rotary embedding"
    named = reading["position_embedding_type"]
    if model_type in ROTARY_NAMED and named != ROTARY_NAMED[model_type]:
        return (
            f"position_embedding_type {checks.shown(named)}: {model_type} rotates only where it "
            f"is {ROTARY_NAMED[model_type]!r}"
        )
    if model_type not in SLIDING_ONLY:
        return None
    when_null = SLIDING_ONLY[model_type]
    if reading["sliding_window"] is None and when_null != "types":
        null = f"{model_type} rotates its sliding-window layers only, and sliding_window is null"
        return null if when_null == "none" else None
    if kind != "sliding_attention":
        if when_null == "every":
            said = "only where sliding_window is set (every layer where it is null)"
            return f"{model_type} rotates its sliding-window layers {said}"
        return f"{model_type} rotates its sliding-window layers only"
    return None


def _layer_rule(i, kind, nested, no_rope, model_type, rotation, head_dim, where):
    """(rope_theta, scaling, rotary_dim, head_dim) of layer i (head_dim None: the config's), or
    Nones for NoPE; and why."""
    if no_rope is not None and not no_rope[i]:
        return (None,) * 4, "no_rope_layers[i] = 0 (1 means the layer uses RoPE)"
    if nested is None:
        why = "no_rope_layers[i] = 1: the layer uses RoPE" if no_rope is not None else ""
        return (*rotation(None, head_dim), head_dim), why
    if kind not in nested:
        checks.refuse(where, f"rope_parameters has no entry for layer type {kind!r}")
    why = f"rope_parameters[{kind!r}]"
    if head_dim is not None and model_type in LAYER_HEAD_DIM:
        why += f", {LAYER_HEAD_DIM[model_type][0]}" if kind == "full_attention" else ", head_dim"
    return (*rotation(nested[kind], head_dim), head_dim), why


def _names(kinds: dict, nope: dict) -> dict:
    """Each rule's name: the attention type its layers share where that tells the rules apart,
    else rope or nope (nope where no layer rotates)."""
    kinds = {key: set(found) for key, found in kinds.items()}
    if all(len(k) == 1 for k in kinds.values()) and not all(nope.values()):
        names = {key: next(iter(k)) for key, k in kinds.items()}
        if len(set(names.values())) == len(names):
            return names
    if len(kinds) <= 2 and any(nope.values()):
        return {key: "nope" if nope[key] else "rope" for key in kinds}
    return {key: f"rule{n}" for n, key in enumerate(kinds)}


def _check_list(values, field: str, where: str, count, kind) -> None:
    """A list of ``kind`` (str, or 0/1 ints), one per layer."""
    if not isinstance(values, list) or not all(
        isinstance(v, kind) and not isinstance(v, bool) for v in values
    ):
        checks.refuse(
            where,
            f"{field} must be a list, one {kind.__name__} per layer, got {checks.shown(values)}",
        )
    if kind is int and not set(values) <= {0, 1}:
        checks.refuse(
            where, f"{field} holds {sorted(set(values) - {0, 1})}: 1 (RoPE) or 0 (NoPE) per layer"
        )
    if not values or len(values) > checks.MOST_LAYERS:
        checks.refuse(where, f"{field} holds {len(values)} layers: 1 to {checks.MOST_LAYERS}")
    if count is not None and len(values) != count:
        checks.refuse(where, f"{field} has {len(values)} entries for num_hidden_layers {count}")
