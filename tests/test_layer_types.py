"""Models whose layers rotate differently, read as transformers reads them and checked layer
type by layer type: Gemma 3's sliding and global layers, ModernBERT's and OLMo 3's, SmolLM3's
and Llama 4's NoPE layers (``no_rope_layers[i] == 1`` means the layer uses RoPE), Cohere2's
sliding-only RoPE. A correct port of each conforms; each mistake ports make is named.

The ports here are judged in this process (``Kind.judge`` on what they return); the command
line runs a few through the worker."""

import os
import re

import numpy as np
import pytest

import backends
import compare
from backends import positional
from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.configs import hf
from embedding_parity.conformance import api
from embedding_parity.conformance.kinds import KINDS, Outcome

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets", "configured.py")
ROPE = KINDS["rope"]
WHERE = "--config dir/config.json"
LINEAR_8 = {"rope_type": "linear", "factor": 8.0}
PROPORTIONAL = {"rope_type": "proportional", "partial_rotary_factor": 0.25}

# (fields, {layer type: (layers, rope_theta or None for NoPE, scaling)}): what transformers
# 5.24's config classes and attention code make of each encoding.
ENCODINGS = {
    "Gemma 3's hub file (text_config, its class's pattern of 6)": (
        {
            "model_type": "gemma3",
            "text_config": {
                "model_type": "gemma3_text",
                "num_hidden_layers": 12,
                "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            },
        },
        {
            "sliding_attention": ((0, 1, 2, 3, 4, 6, 7, 8, 9, 10), 10000.0, None),
            "full_attention": ((5, 11), 1e6, LINEAR_8),
        },
    ),
    "Gemma 3's rope_local_base_freq and sliding_window_pattern": (
        {
            "model_type": "gemma3_text",
            "num_hidden_layers": 4,
            "rope_theta": 1e6,
            "rope_local_base_freq": 20000,
            "sliding_window_pattern": 2,
        },
        {"sliding_attention": ((0, 2), 20000.0, None), "full_attention": ((1, 3), 1e6, None)},
    ),
    "transformers 5's rope_parameters keyed by layer type": (
        {
            "model_type": "olmo3",
            "num_hidden_layers": 3,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
            "rope_parameters": {
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            },
        },
        {"sliding_attention": ((0, 2), 1e4, None), "full_attention": ((1,), 1e6, LINEAR_8)},
    ),
    "ModernBERT's global and local bases, every third layer global": (
        {"model_type": "modernbert", "num_hidden_layers": 5, "global_rope_theta": 160000.0},
        {"full_attention": ((0, 3), 160000.0, None), "sliding_attention": ((1, 2, 4), 1e4, None)},
    ),
    "OLMo 3's rope_scaling on its full-attention layers only": (
        {"model_type": "olmo3", "num_hidden_layers": 4, "rope_scaling": LINEAR_8},
        {
            "sliding_attention": ((0, 1, 2), 500000.0, None),
            "full_attention": ((3,), 500000.0, LINEAR_8),
        },
    ),
    "SmolLM3's no_rope_layers (1: RoPE)": (
        {"model_type": "smollm3", "num_hidden_layers": 4, "no_rope_layers": [0, 1, 1, 0]},
        {"nope": ((0, 3), None, None), "rope": ((1, 2), 2e6, None)},
    ),
    "SmolLM3's no_rope_layer_interval": (
        {"model_type": "smollm3", "num_hidden_layers": 6, "no_rope_layer_interval": 3},
        {"rope": ((0, 1, 3, 4), 2e6, None), "nope": ((2, 5), None, None)},
    ),
    "Llama 4's empty no_rope_layers (a NoPE layer every 4), chunked RoPE layers": (
        {
            "model_type": "llama4",
            "text_config": {
                "model_type": "llama4_text",
                "num_hidden_layers": 8,
                "no_rope_layers": [],
            },
        },
        {
            "chunked_attention": ((0, 1, 2, 4, 5, 6), 500000.0, None),
            "full_attention": ((3, 7), None, None),
        },
    ),
    "Gemma 4's class defaults (a global layer every 6, proportional)": (
        {"model_type": "gemma4_text", "num_hidden_layers": 7},
        {
            "sliding_attention": ((0, 1, 2, 3, 4), 10000.0, None),
            "full_attention": ((5, 6), 1e6, PROPORTIONAL),
        },
    ),
    "Cohere2: RoPE on its sliding-window layers only": (
        {"model_type": "cohere2", "num_hidden_layers": 4, "sliding_window_pattern": 2},
        {"sliding_attention": ((0, 2), 10000.0, None), "full_attention": ((1, 3), None, None)},
    ),
    "SmolLM3 with every no_rope_layers 0: no layer rotated": (
        {"model_type": "smollm3", "num_hidden_layers": 2, "no_rope_layers": [0, 0]},
        {"nope": ((0, 1), None, None)},
    ),
}


def both(fields: dict) -> configs.Configuration:
    """The Configuration both readers give; they must agree."""
    kit, theirs = (
        hf.from_fields(fields, "case", WHERE, reader=r, hold=False) for r in ("kit", "transformers")
    )
    assert kit == theirs
    return kit


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_each_encoding_is_read_as_a_table_of_layers(encoding):
    fields, expected = ENCODINGS[encoding]
    config = both(fields)
    found = {t.name: (t.layers, t.rope_theta, t.scaling) for t in config.layer_types}
    assert found == expected
    shown = config.line().splitlines()
    rotates = any(theta is not None for _, theta, _ in expected.values())
    header = "RoPE by layer type" if rotates else "no layer rotated"
    assert len(shown) == 1 + len(expected) and header in shown[0]


@pytest.mark.parametrize(
    "fields, widths",
    [
        ({"model_type": "gemma4_text", "num_hidden_layers": 3}, {256: (0, 1), 512: (2,)}),
        (
            {
                "model_type": "gemma4",
                "text_config": {
                    "num_hidden_layers": 3,
                    "global_head_dim": 384,
                    "layer_types": ["sliding_attention"] * 3,  # the class makes the last full
                },
            },
            {256: (0, 1), 384: (2,)},
        ),
    ],
)
def test_gemma4_full_attention_layers_have_heads_of_their_own_width(fields, widths):
    config = both(fields)
    assert {t.head_dim: t.layers for t in config.layer_types} == widths
    assert config.head_dim == max(widths)  # the full-attention layers' rule is the config's
    said = config.line().splitlines()
    rule = "rope_theta 1e+06, proportional (partial_rotary_factor 0.25)"
    assert f"full_attention: layer 2: {rule}, head_dim {max(widths)}" in said[2]


def test_a_model_whose_layers_rotate_alike_has_no_table():
    # Gemma 2 alternates sliding and global layers, at one rotation
    assert (
        both(
            {
                "model_type": "gemma2",
                "num_hidden_layers": 2,
                "layer_types": ["sliding_attention", "full_attention"],
            }
        ).layer_types
        == ()
    )
    assert both({"model_type": "olmo3", "num_hidden_layers": 4}).layer_types == ()


SMALL_HEADS = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16}
# Configs whose layers are all one type: the fields, the transformers module that rotates them,
# the type they have not got (whose rule a port could mix up with theirs), and the kit's name
# for that mistake where it has one.
ONE_TYPE = {
    "Gemma 3, every layer full_attention": (
        {
            "model_type": "gemma3_text",
            **SMALL_HEADS,
            "layer_types": ["full_attention"] * 2,
            "rope_scaling": LINEAR_8,
        },
        ("gemma3", "Gemma3RotaryEmbedding"),
        "sliding_attention",
        None,  # two differences at once (base and scaling): the kit names neither alone
    ),
    "Gemma 3, sliding_window_pattern 1": (
        {"model_type": "gemma3_text", **SMALL_HEADS, "sliding_window_pattern": 1},
        ("gemma3", "Gemma3RotaryEmbedding"),
        "sliding_attention",
        "base 10000 instead of 1e+06",
    ),
    "Gemma 3, every layer sliding_attention": (
        {
            "model_type": "gemma3_text",
            **SMALL_HEADS,
            "layer_types": ["sliding_attention"] * 2,
            "rope_scaling": LINEAR_8,
        },
        ("gemma3", "Gemma3RotaryEmbedding"),
        "full_attention",
        None,
    ),
    "OLMo 3, every layer full_attention": (
        {
            "model_type": "olmo3",
            **SMALL_HEADS,
            "layer_types": ["full_attention"] * 2,
            "rope_scaling": LINEAR_8,
        },
        ("olmo3", "Olmo3RotaryEmbedding"),
        "sliding_attention",
        "linear scaling ignored",
    ),
    "ModernBERT, global_attn_every_n_layers 1": (
        {"model_type": "modernbert", **SMALL_HEADS, "global_attn_every_n_layers": 1},
        ("modernbert", "ModernBertRotaryEmbedding"),
        "sliding_attention",
        "base 10000 instead of 160000",
    ),
    "Gemma 4, every layer full_attention (its own head width)": (
        {
            "model_type": "gemma4_text",
            **SMALL_HEADS,
            "global_head_dim": 32,
            "layer_types": ["full_attention"] * 2,
        },
        ("gemma4", "Gemma4TextRotaryEmbedding"),
        "sliding_attention",
        None,
    ),
}


def transformers_rotary(fields: dict, modeling: tuple[str, str]):
    """f(x, positions): transformers' own rotary module, built from ``fields`` by its config
    class, at the one layer type every layer has, applied by its model's
    apply_rotary_pos_emb (Gemma 4's takes one tensor)."""
    import importlib

    import torch
    from transformers import CONFIG_MAPPING

    module = importlib.import_module(f"transformers.models.{modeling[0]}.modeling_{modeling[0]}")
    config = CONFIG_MAPPING[fields["model_type"]].from_dict(dict(fields))
    (layer_type,) = set(config.layer_types)
    rotary = getattr(module, modeling[1])(config)

    def f(x, positions):
        q = torch.from_numpy(x).reshape(-1, *x.shape[-2:])[None]  # (1, heads, T, d)
        cos, sin = rotary(q, torch.from_numpy(positions)[None], layer_type)
        apply = module.apply_rotary_pos_emb
        rotated = apply(q, cos, sin) if modeling[0] == "gemma4" else apply(q, q, cos, sin)[0]
        return rotated.reshape(x.shape).numpy()

    return f, config


@pytest.mark.parametrize("name", list(ONE_TYPE))
def test_a_config_of_one_layer_type_keeps_that_types_rule(name):
    """transformers' rotary built from the file conforms, and so does --against hf; a port of
    the other type's rule (the one the class does not build for these layers) differs."""
    import torch

    from embedding_parity.conformance.adapters import sources

    fields, modeling, other, named = ONE_TYPE[name]
    options = both(fields).options("rope")
    theirs, config = transformers_rotary(fields, modeling)
    hf = sources.make("hf", "rope", options)
    for right in (theirs, lambda x, positions: hf(*map(torch.from_numpy, (x, positions))).numpy()):
        found = judged(right, options, ["float32"])  # both compute their angles in float32
        assert all(status == "conforms" for status, _ in found.values()), found
    other_rule = dict(config.rope_parameters[other])
    base, kind = other_rule.pop("rope_theta"), other_rule["rope_type"]
    wrong = {"base": base, "layout": "half", "scaling": None if kind == "default" else other_rule}
    found = judged(port(lambda layer: wrong), options, ["float32"])
    status, detail = found["rotation float32"]
    assert status == "differs" and (named is None or named in detail), detail


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"model_type": "smollm3", "num_hidden_layers": 3, "no_rope_layers": [1, 0]},
            "no_rope_layers has 2 entries for num_hidden_layers 3",
        ),
        (
            {"model_type": "smollm3", "num_hidden_layers": 2, "no_rope_layers": [1, 2]},
            "no_rope_layers holds [2]: 1 (RoPE) or 0 (NoPE) per layer",
        ),
        (  # LlamaRotaryEmbedding rotates every layer at the top-level rule, these unread
            {
                "model_type": "llama",
                "num_hidden_layers": 2,
                "layer_types": ["sliding_attention", "full_attention"],
                "rope_parameters": {"full_attention": {"rope_theta": 1e6}},
            },
            (
                "rope_parameters keyed by layer type (full_attention): model_type 'llama''s "
                "rotary module rotates every layer by one rule, and transformers passes these "
                "entries over"
            ),
        ),
        (  # one flat dict where the class reads one per layer type
            {"model_type": "gemma4_text", "rope_parameters": {"rope_theta": 1e4}},
            (
                "rope_parameters: gemma4_text rotates by a rule per layer type, so its "
                "rope_parameters is keyed by layer type (sliding_attention, full_attention), "
                "not one flat dict"
            ),
        ),
        (  # Gemma4TextRotaryEmbedding would fail on its first type with a KeyError
            {
                "model_type": "gemma4_text",
                "rope_parameters": {"chunked_attention": {"rope_theta": 1e6}},
            },
            (
                "rope_parameters keyed by layer type (chunked_attention) where the config's "
                "layer_types are ['full_attention', 'sliding_attention']"
            ),
        ),
        (
            {"model_type": "llama", "rope_local_base_freq": 10000.0},
            "rope_local_base_freq: read by the classes of gemma3_text, gemma3n_text, t5gemma2_text, "
            "t5gemma2_decoder only, not model_type 'llama''s",
        ),
        (
            {"model_type": "llama", "no_rope_layers": [1, 0]},
            "no_rope_layers: read by the classes of smollm3, llama4_text, mistral_large4_text only",
        ),
        (
            {"model_type": "gemma3_text", "rope_local_base_freq": 0.5},
            "rope_local_base_freq 0.5 must be above 1",
        ),
    ],
)
@pytest.mark.parametrize("reader", ["kit", "transformers"])
def test_a_layer_field_the_kit_cannot_honour_is_one_line(fields, message, reader):
    with pytest.raises(UsageError) as info:
        hf.from_fields(fields, "case", WHERE, reader=reader)
    assert message in str(info.value) and "\n" not in str(info.value)


# --- the rope kind, layer type by layer type ----------------------------------------------


def port(rule_of_layer):
    """A port that rotates each layer by ``rule_of_layer(layer)`` (a rope dict of the kind's
    options, or None for NoPE), in float64 rounded once: right wherever its rule is."""

    def f(x, positions, layer=None):
        rope = rule_of_layer(layer)
        if rope is None or rope.get("nope"):
            return x.copy()
        rotated = positional.apply_rope(
            x,
            positions,
            base=rope["base"],
            layout=rope["layout"],
            scaling=rope["scaling"],
            rotary_dim=rope.get("rotary_dim"),
        )
        return rotated.astype(x.dtype)

    return f


def judged(function, options, dtypes=None) -> dict:
    """{check: (status, detail)}: the first difference of each check, else its verdict (of
    the cases in ``dtypes``, default every one)."""
    found = {}
    for case in ROPE.cases(options):
        if dtypes is not None and case.params["dtype"] not in dtypes:
            continue
        array = np.asarray(function(*ROPE.arguments(case.params)))
        verdict = ROPE.judge(case, Outcome(array=array))
        detail = f"{case.label}: {verdict.detail}"
        if case.check not in found or found[case.check][0] == "conforms":
            found[case.check] = (verdict.status, detail)
    return found


def rules(preset: str):
    """(options, {layer type: rope}, layer -> its type's rope) at a preset."""
    options = configs.preset(preset).options("rope")
    by_name = {t["name"]: t["rope"] for t in options["layers"]}
    of_layer = {i: t["rope"] for t in options["layers"] for i in t["layers"]}
    return options, by_name, of_layer.get


@pytest.mark.parametrize(
    "preset",
    [
        "gemma-3-4b",
        "gemma-3-1b",
        "llama-4-scout",
        "smollm3-3b",
        "command-r7b",
        "modernbert-base",
        "olmo-3-7b",
        "gemma-4-e2b",
    ],
)
def test_a_correct_port_of_each_layer_type_conforms(preset):
    options, _, of_layer = rules(preset)
    found = judged(port(of_layer), options)
    names = {t["name"] for t in options["layers"]}
    assert {check.rsplit(" ", 1)[0] for check in found} >= {f"rotation {n}" for n in names}
    assert "layer map float32" in found
    assert all(status == "conforms" for status, _ in found.values()), found


def test_gemma3_one_rule_for_both_layer_types_is_named():
    options, by_name, _ = rules("gemma-3-4b")
    found = judged(port(lambda layer: by_name["full_attention"]), options)
    assert found["rotation full_attention float32"][0] == "conforms"
    status, detail = found["rotation sliding_attention float32"]
    assert status == "differs"
    assert (
        "the full_attention layers' rule (base 1e+06, linear) on a sliding_attention layer"
        in detail
    )
    assert "swapped, or one rule for both" in detail


def test_gemma3_swapped_layer_types_are_named_on_both():
    options, by_name, _ = rules("gemma-3-4b")
    other = {"full_attention": "sliding_attention", "sliding_attention": "full_attention"}
    name_of = {i: t["name"] for t in options["layers"] for i in t["layers"]}
    found = judged(port(lambda layer: by_name[other[name_of[layer]]]), options)
    for name, theirs in other.items():
        assert f"the {theirs} layers' rule" in found[f"long positions {name} bfloat16"][1]


def test_gemma3_global_scaling_on_the_sliding_layers_is_named():
    options, by_name, of_layer = rules("gemma-3-4b")
    scaled = {**by_name["sliding_attention"], "scaling": LINEAR_8}
    found = judged(
        port(
            lambda layer: (
                scaled if of_layer(layer) is by_name["sliding_attention"] else of_layer(layer)
            )
        ),
        options,
    )
    assert found["rotation full_attention float32"][0] == "conforms"
    assert (
        "the full_attention layers' linear scaling applied to a sliding_attention layer too "
        "(it rotates unscaled, at base 10000)"
    ) in found["rotation sliding_attention float32"][1]


def _gemma4_global(change):
    """A Gemma 4 port right on its sliding layers whose global layers rotate x by ``change``
    (a function of x, positions and the layer type's rope dict)."""
    options, _, of_layer = rules("gemma-4-e2b")

    def f(x, positions, layer=None):
        rope = of_layer(layer)
        if rope["scaling"] is None:
            return port(of_layer)(x, positions, layer)
        return change(x, positions, rope).astype(x.dtype)

    return judged(f, options)


def _turned_by(w, x, positions):
    return positional.turn(x, positions[:, None] * w, 1.0, "half")


@pytest.mark.parametrize(
    "change, named",
    [
        (  # neuronx PR #106: base**(-2i/128)
            lambda x, p, rope: _turned_by(
                np.concatenate([positional.frequencies(128, rope["base"]), np.zeros(192)]), x, p
            ),
            (
                "proportional with the rotated width as the exponent's denominator, "
                "base**(-2i/128), where it is the head's, base**(-2i/512)"
            ),
        ),
        (  # Megatron-Bridge #4195: the 64 right frequencies, paired within the first 128 dims
            lambda x, p, rope: _turned_by(positional.frequencies(512, rope["base"])[:64], x, p),
            (
                "proportional as 64 slots for 256: a partial rotation of the first 128 dims, "
                "pairs (i, i + 64), where the head keeps 256 slots"
            ),
        ),
        (
            lambda x, p, rope: positional.apply_rope(x, p, base=rope["base"], rotary_dim=128),
            "partial_rotary_factor read as GPT-NeoX's rotary width: the first 128 dims",
        ),
        (
            lambda x, p, rope: positional.apply_rope(x, p, base=rope["base"]),
            "proportional scaling ignored (the plain rotation)",
        ),
        (
            lambda x, p, rope: positional.apply_rope(x, p),
            (
                "the sliding_attention layers' rule (base 10000, no scaling) on a full_attention "
                "layer: the two layer types' rules swapped, or one rule for both"
            ),
        ),
    ],
    ids=["rotary-width-denominator", "64-slots-for-256", "neox-partial", "plain", "sliding-rule"],
)
def test_gemma4_proportional_mistakes_are_named(change, named):
    found = _gemma4_global(change)
    assert found["rotation sliding_attention float32"][0] == "conforms"
    status, detail = found["rotation full_attention float32"]
    assert status == "differs" and named in detail, detail


def test_gemma3_a_pattern_off_by_one_is_caught_at_the_layer_it_moves():
    options, by_name, _ = rules("gemma-3-4b")
    # global at 0, 6, 12, ...: i % 6 == 0 where transformers says (i + 1) % 6 == 0
    shifted = port(
        lambda layer: by_name["full_attention" if layer % 6 == 0 else "sliding_attention"]
    )
    status, detail = judged(shifted, options)["layer map float32"]
    assert status == "differs" and detail.startswith("layer 0 (sliding_attention)")
    assert "the full_attention layers' rule" in detail


@pytest.mark.parametrize("preset", ["smollm3-3b", "llama-4-scout"])
def test_no_rope_layers_read_inverted_is_named(preset):
    options, by_name, of_layer = rules(preset)
    rotating = next(rope for rope in by_name.values() if not rope.get("nope"))
    inverted = port(lambda layer: None if not of_layer(layer).get("nope") else rotating)
    found = judged(inverted, options)
    nope = next(name for name, rope in by_name.items() if rope.get("nope"))
    status, detail = found[f"rotation {nope} float32"]
    assert (
        status == "differs"
        and "on a NoPE layer [no_rope_layers[i] = 0 (1 means the layer uses RoPE)]" in detail
    )
    assert "no_rope_layers read inverted" in detail
    rope = next(name for name in by_name if name != nope)
    assert "not rotated, as the" in found[f"rotation {rope} float32"][1]


def test_rope_on_every_layer_fails_only_the_nope_layers():
    options, by_name, _ = rules("command-r7b")
    found = judged(port(lambda layer: by_name["sliding_attention"]), options)
    assert found["rotation sliding_attention float16"][0] == "conforms"
    status, detail = found["rotation full_attention float16"]
    assert (
        status == "differs"
        and "on a NoPE layer [cohere2 rotates its sliding-window layers only]" in detail
    )
    assert found["rotation full_attention float32"] != found["rotation sliding_attention float32"]


def test_a_nope_layer_must_return_x_bit_for_bit():
    options, _, _ = rules("smollm3-3b")
    rounded = port(lambda layer: None)  # NoPE everywhere, but through float32 for float64
    options = {**options, "layer_type": "nope"}

    def through_float32(x, positions):
        return rounded(x, positions).astype(np.float32).astype(x.dtype)

    found = judged(through_float32, options)
    assert found["rotation nope float32"] == ("conforms", found["rotation nope float32"][1])
    assert "bit-identical: x returned as it is" in found["rotation nope float32"][1]
    assert found["rotation nope float64"][0] == "differs"


def test_one_layer_type_alone_is_called_without_the_layer():
    config = configs.preset("gemma-3-4b")
    options = config.options("rope", "--model", layer=5)
    assert options["layer_type"] == "full_attention"
    cases = ROPE.cases(options)
    assert {c.check.split()[-2] for c in cases} == {"full_attention"}
    assert all(len(ROPE.arguments(c.params)) == 2 for c in cases)
    assert "f(x, positions) -> rotated" in ROPE.describe(options)
    report = api.check(
        port(lambda layer: configs.preset("gemma-3-4b").layer_rope(config.layer_types[1])["rope"]),
        "rope",
        config="gemma-3-4b",
        layer="full_attention",
    )
    assert report.conforms


@pytest.mark.parametrize(
    "layer, message",
    [
        (34, "--layer 34: gemma-3-4b has layers 0 to 33"),
        (
            "local",
            "--layer-type 'local': gemma-3-4b's layer types are sliding_attention, full_attention",
        ),
    ],
)
def test_a_layer_the_config_does_not_have_is_refused(layer, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        configs.preset("gemma-3-4b").options("rope", "--model", layer=layer)


def test_a_layer_on_a_model_whose_layers_rotate_alike_is_refused():
    with pytest.raises(UsageError, match="every layer of llama-3.2-1b rotates alike"):
        configs.preset("llama-3.2-1b").options("rope", "--model", layer=0)


# --- the command line ----------------------------------------------------------------------


def test_check_prints_the_layer_types_and_checks_each(capsys):
    argv = ["check", f"{TARGETS}:gemma3_rope", "--kind", "rope", "--model", "gemma-3-4b"]
    assert compare.main(argv) == 0
    out = capsys.readouterr().out
    assert "layer type full_attention: layers 5, 11, 17, 23, 29 (5 layers): rope_theta 1e+06" in out
    assert "rotation sliding_attention float32" in out and "layer map float32" in out


def test_check_names_one_rule_for_both_and_exits_one(capsys):
    argv = ["check", f"{TARGETS}:gemma3_one_rule", "--kind", "rope", "--model", "gemma-3-4b"]
    argv += ["--dtypes", "float32"]
    assert compare.main(argv) == 1
    assert "one rule for both" in capsys.readouterr().out


def test_check_one_layer_type_with_layer_type(capsys):
    argv = ["check", f"{TARGETS}:gemma3_sliding_rope", "--kind", "rope", "--model", "gemma-3-4b"]
    assert compare.main([*argv, "--layer-type", "sliding_attention"]) == 0
    assert compare.main([*argv, "--layer", "5", "--dtypes", "float32"]) == 1
    assert "the sliding_attention layers' rule" in capsys.readouterr().out


@pytest.mark.parametrize(
    "preset, layer, message",
    [
        ("gemma-3-4b", None, "name one with --layer-type or --layer"),
        ("smollm3-3b", "nope", "there is no rotation to build"),
    ],
)
def test_a_source_builds_one_rotation(preset, layer, message):
    """--against hf builds one rotation: a layer type that rotates, named."""
    from embedding_parity.conformance.adapters import sources

    options = configs.preset(preset).options("rope", "--model", layer=layer)
    with pytest.raises(UsageError, match=message):
        sources.rotation(options)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--layer", "1"], "--layer and --layer-type go with --config or --model"),
        (
            ["--model", "gemma-3-4b", "--layer", "1", "--layer-type", "x"],
            "give --layer or --layer-type, not both",
        ),
    ],
)
def test_check_refuses_a_layer_flag_that_does_not_fit(extra, message, capsys):
    argv = ["check", f"{TARGETS}:gemma3_sliding_rope", "--kind", "rope", *extra]
    assert compare.main(argv) == 2
    assert message in capsys.readouterr().err


def test_qk_calls_reach_the_layer_map_too():
    options = {**configs.preset("gemma-3-1b").options("rope"), "qk": True}
    names = {tuple(ROPE.argument_names(c.params)) for c in ROPE.cases(options)}
    assert names == {("q", "k", "positions", "layer")}


@pytest.mark.parametrize(
    "rope_parameters",
    [
        {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},  # flat: the class nests it
        {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},  # one type given
    ],
)
def test_gemma3_rope_parameters_the_class_completes(rope_parameters):
    both({"model_type": "gemma3_text", "num_hidden_layers": 6, "rope_parameters": rope_parameters})


# --- the library: each layer type's rule on every backend ---------------------------------

LAYERS = {  # Gemma 4's two rules and a NoPE type
    "sliding_attention": {"base": 10000.0},
    "full_attention": {"base": 1e6, "scaling": PROPORTIONAL},
    "nope": None,
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_apply_layer_rope_runs_each_types_rule_on_every_backend(backend, dtype):
    rng = np.random.default_rng(7)
    positions = rng.permutation(4000)[:12]
    for layer_type, width in (("sliding_attention", 32), ("full_attention", 64), ("nope", 16)):
        x = rng.standard_normal((3, 12, width)).astype(backends.DTYPES[dtype])
        y = backend.to_numpy(backend.apply_layer_rope(x, positions, layer_type, layers=LAYERS))
        assert y.dtype == x.dtype
        if LAYERS[layer_type] is None:  # NoPE: x as it is, bit for bit
            np.testing.assert_array_equal(y, x)
            continue
        rope = LAYERS[layer_type]
        expected = positional.apply_rope(x, positions, **rope)
        bound = positional.rope_bound(x, positions, **rope, dtype=dtype)
        assert np.all(np.abs(y.astype(np.float64) - expected) <= bound), layer_type


def test_apply_layer_rope_refuses_a_type_the_model_lacks_alike_everywhere(backend):
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(
        ValueError,
        match="layer type 'chunked_attention' is not one of this "
        "model's: sliding_attention, full_attention, nope",
    ):
        backend.apply_layer_rope(x, np.arange(2), "chunked_attention", layers=LAYERS)
    with pytest.raises(ValueError, match=r"layers\['nope'\] has \['theta'\]"):
        backend.apply_layer_rope(x, np.arange(2), "nope", layers={"nope": {"theta": 1.0}})


@pytest.mark.parametrize(
    "x, positions, error, message",
    [
        (np.zeros(8, np.float32), np.arange(1), ValueError, "x must be (..., T, dim)"),
        (np.zeros((3, 8), np.float32), np.arange(2), ValueError, "positions must have shape"),
        (np.zeros((3, 8), np.float32), np.arange(3.0), TypeError, "positions must be integers"),
        (np.zeros((3, 8), np.int64), np.arange(3), TypeError, "x must be one of float64"),
    ],
)
def test_a_nope_layers_call_is_checked_as_a_rotations_is(backend, x, positions, error, message):
    with pytest.raises(error, match=re.escape(message)):
        backend.apply_layer_rope(x, positions, "nope", layers=LAYERS)
    with pytest.raises(error, match=re.escape(message)):
        backend.apply_layer_rope(x, positions, "sliding_attention", layers=LAYERS)


def test_torchs_module_keeps_a_buffer_per_rotating_layer_type():
    import torch

    module = backends.get("torch").LayerTypesRotaryEmbedding(
        {"sliding_attention": 256, "full_attention": 512, "nope": 64}, LAYERS
    )
    buffers = dict(module.named_buffers())
    assert set(buffers) == {
        "rotations.sliding_attention.inv_freq",
        "rotations.full_attention.inv_freq",
    }
    full = buffers["rotations.full_attention.inv_freq"]
    assert full.shape == (256,) and int(torch.count_nonzero(full)) == 64
    x = torch.randn(2, 5, 64)
    assert module(x, torch.arange(5), "nope") is x


def test_the_hf_source_builds_gemma4s_proportional_rule_as_its_own():
    # --against hf: LlamaRotaryEmbedding at rope_type proportional keeps the rule's own
    # partial_rotary_factor (a share of the head's slots), not rotary_dim / head_dim
    import torch

    from embedding_parity.conformance.adapters import sources

    options, _, _ = rules("gemma-4-e2b")
    options = {**options, "layer_type": "full_attention"}
    hf = sources.make("hf", "rope", options)
    for case in ROPE.cases(options):
        if case.params["dtype"] == "float32":
            x, positions = ROPE.arguments(case.params)
            array = hf(torch.from_numpy(x), torch.from_numpy(positions)).numpy()
            verdict = ROPE.judge(case, Outcome(array=array))
            assert verdict.status == "conforms", (case.check, verdict.detail)
