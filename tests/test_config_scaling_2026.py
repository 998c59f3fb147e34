"""Two 2025 models' scaling fields, read as their owners' code reads them, at their real
config.json: Ministral 3's llama_4_scaling_beta, which scales every layer's query after a YaRN
rotation (transformers 5.24 modeling_ministral3.py: get_llama_4_attn_scale), and Hunyuan's
"dynamic" rope dict with an alpha, a fixed NTK base rope_theta * alpha ** (d / (d - 2))
(modeling_hunyuan_v1_dense.py: compute_ntk_alpha_rope_parameters). The owner's own modules
conform, a float64 port conforms, and the wrong ports are told they differ, by name.

The ports are judged in this process; the rope checks are the rotation's two (float32, the
dtype transformers' rotary computes its angles in)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from backends import positional
from embedding_parity.cli import UsageError
from embedding_parity.conformance import api
from embedding_parity.configs import hf

# mistralai/Ministral-3-8B-Instruct-2512's config.json (its quantization_config left out: it
# says how the weights are stored, nothing of the input layer).
MINISTRAL_3 = {
    "architectures": ["Mistral3ForConditionalGeneration"],
    "image_token_index": 10,
    "model_type": "mistral3",
    "multimodal_projector_bias": False,
    "projector_hidden_act": "gelu",
    "spatial_merge_size": 2,
    "text_config": {
        "attention_dropout": 0.0,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 14336,
        "max_position_embeddings": 262144,
        "model_type": "ministral3",
        "num_attention_heads": 32,
        "num_hidden_layers": 34,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05,
        "rope_parameters": {
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 16.0,
            "llama_4_scaling_beta": 0.1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 16384,
            "rope_theta": 1000000.0,
            "rope_type": "yarn",
            "type": "yarn",
        },
        "sliding_window": None,
        "use_cache": True,
        "vocab_size": 131072,
    },
    "tie_word_embeddings": False,
    "vision_config": {
        "attention_dropout": 0.0,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 1024,
        "image_size": 1540,
        "intermediate_size": 4096,
        "model_type": "pixtral",
        "num_attention_heads": 16,
        "num_channels": 3,
        "num_hidden_layers": 24,
        "patch_size": 14,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    },
    "vision_feature_layer": -1,
}
# tencent/Hunyuan-7B-Instruct's config.json.
HUNYUAN_7B = {
    "architectures": ["HunYuanDenseV1ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attention_head_dim": 128,
    "bos_token_id": 1,
    "cla_share_factor": 2,
    "eod_token_id": 127967,
    "eos_token_id": 127960,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "mlp_bias": False,
    "model_type": "hunyuan_v1_dense",
    "norm_type": "rms",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pad_id": 127961,
    "pad_token_id": 127961,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "alpha": 1000.0,
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 1.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "type": "dynamic",
    },
    "rope_theta": 10000.0,
    "sep_token_id": 127962,
    "tie_word_embeddings": False,
    "use_cache": True,
    "use_cla": False,
    "use_qk_norm": True,
    "use_rotary_pos_emb": True,
    "vocab_size": 128167,
}
WHERE = "--config dir/config.json"
ROTATION = ["rotation float32", "long positions float32"]
# Hunyuan's base as compute_ntk_alpha_rope_parameters writes it: rope_theta * alpha ** (dim /
# (dim - 2)), Python floats
HUNYUAN_BASE = 10000.0 * 1000.0 ** (128 / 126)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{name: path} of the two config.json files, as a user passes them."""
    found = {}
    for name, fields in (("ministral3", MINISTRAL_3), ("hunyuan", HUNYUAN_7B)):
        path = tmp_path_factory.mktemp(name) / "config.json"
        path.write_text(json.dumps(fields))
        found[name] = str(path)
    return found


def read(fields: dict):
    return hf.from_fields(fields, "case", WHERE, reader="transformers")


def rope_port(base, scaling=None):
    """f(x, positions): the half-layout rotation at ``base`` and ``scaling``, in float64
    rounded once."""

    def f(x, positions):
        rotated = positional.apply_rope(x, positions, base=base, layout="half", scaling=scaling)
        return rotated.astype(x.dtype)

    return f


def transformers_rotary(model: str, rotary: str, config):
    """f(x, positions): the model's own rotary module, built from its config object, applied by
    its own apply_rotary_pos_emb."""
    import importlib

    import torch

    module = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    built = getattr(module, rotary)(config)

    def f(x, positions):
        q = torch.from_numpy(x).reshape(-1, *x.shape[-2:])[None]  # (1, heads, T, d)
        cos, sin = built(q, torch.from_numpy(positions)[None])
        return module.apply_rotary_pos_emb(q, q, cos, sin)[0].reshape(x.shape).numpy()

    return f


def verdicts(report) -> dict:
    return {check.check: (check.status, check.detail) for check in report.checks}


# --- Hunyuan: alpha, a fixed base ---------------------------------------------------------


@pytest.mark.parametrize("model_type", ["hunyuan_v1_dense", "hunyuan_v1_moe"])
def test_hunyuan_alpha_is_a_fixed_base_and_the_line_says_where_it_came_from(model_type):
    config = read({**HUNYUAN_7B, "model_type": model_type})
    assert config.rope_theta == HUNYUAN_BASE
    assert config.scaling is None  # no dynamic stretching: the module's rule is "ntk_alpha"
    assert "rope_theta 11158839.9 = 10000 * alpha 1000 ** (128 / 126)" in config.line()


@pytest.mark.parametrize(
    "model, rotary",
    [
        ("hunyuan_v1_dense", "HunYuanDenseV1RotaryEmbedding"),
        ("hunyuan_v1_moe", "HunYuanMoEV1RotaryEmbedding"),
    ],
)
def test_hunyuans_own_rotary_conforms_at_its_config(model, rotary):
    """Past max_position_embeddings (32768) too: the long positions reach 131071, where a
    dynamic rule would stretch the base again."""
    from transformers import CONFIG_MAPPING

    fields = {**HUNYUAN_7B, "model_type": model}
    theirs = transformers_rotary(model, rotary, CONFIG_MAPPING[model].from_dict(fields))
    report = api.check(theirs, "rope", config=read(fields), framework="numpy", checks=ROTATION)
    assert report.conforms, report.lines()


def test_a_float64_port_of_hunyuans_base_conforms_at_its_config_json(files):
    report = api.check(
        rope_port(HUNYUAN_BASE), "rope", config=files["hunyuan"], framework="numpy", checks=ROTATION
    )
    assert report.conforms, report.lines()


@pytest.mark.parametrize(
    "base, named",
    [
        # alpha ignored, or "dynamic" read as dynamic NTK (factor 1: the base unchanged)
        (10000.0, "base 10000 instead of 1.11588e+07"),
        # rope_theta * alpha, the exponent d / (d - 2) left out: the kit has no name for it
        (10000.0 * 1000.0, None),
    ],
)
def test_hunyuan_ports_of_another_base_differ(files, base, named):
    report = api.check(
        rope_port(base), "rope", config=files["hunyuan"], framework="numpy", checks=ROTATION
    )
    status, detail = verdicts(report)["rotation float32"]
    assert status == "differs", detail
    assert named is None or named in detail, detail


@pytest.mark.parametrize(
    "alpha, message",
    [
        (-1000.0, "alpha -1000.0 must be positive"),
        ("1000", "alpha must be a number"),
        (1e-9, "the base rope_theta * alpha ** (head_dim / (head_dim - 2)) = 10000 * 1e-09 "),
    ],
)
def test_a_hunyuan_alpha_the_kit_cannot_use_is_one_line(alpha, message):
    rope = {"type": "dynamic", "factor": 1.0, "alpha": alpha}  # transformers needs the factor
    with pytest.raises(UsageError, match=f"^{WHERE}: {re.escape(message)}"):
        read({**HUNYUAN_7B, "rope_scaling": rope})


def test_hunyuan_alpha_without_head_dim_is_refused():
    """transformers' compute_ntk_alpha_rope_parameters reads config.head_dim alone."""
    fields = {key: value for key, value in HUNYUAN_7B.items() if key != "head_dim"}
    with pytest.raises(UsageError, match="from the config's head_dim, and the config gives none"):
        read(fields)


# --- Ministral 3: YaRN, and every layer's query scaled --------------------------------------


def test_ministral3_reads_yarn_and_a_query_scale_on_every_layer():
    config = read(MINISTRAL_3)
    assert config.scaling["rope_type"] == "yarn"
    assert "llama_4_scaling_beta" not in config.scaling  # the rotary passes it over
    assert config.attention["llama_4_scaling"] == {
        "beta": 0.1,
        "original_max_position_embeddings": 16384,
        "max_position_embeddings": 262144,
    }
    assert "every layer's query scale 1 + 0.1 ln(1 + floor(p / 16384))" in config.line()


def test_ministral3s_own_rotary_conforms_at_its_config():
    from transformers import CONFIG_MAPPING

    text = CONFIG_MAPPING["mistral3"].from_dict(MINISTRAL_3).text_config
    theirs = transformers_rotary("ministral3", "Ministral3RotaryEmbedding", text)
    report = api.check(theirs, "rope", config=read(MINISTRAL_3), framework="numpy", checks=ROTATION)
    assert report.conforms, report.lines()


def query_scale(*, beta=0.1, length=16384, step=0, floor=True):
    """f(positions, layer): 128**-0.5 times get_llama_4_attn_scale's 1 + beta * ln(1 +
    floor(p / length)) in float64 on every layer; ``step`` 1: Llama 4's floor((p + 1) / ...)."""

    def f(positions, layer):
        steps = (positions + step) / length
        return 128**-0.5 * (1 + beta * np.log(1 + (np.floor(steps) if floor else steps)))

    return f


def llama4_temperature(positions, layer):
    """Llama 4's rule ported whole: its temperature on NoPE layers only (Ministral 3 has none),
    so every layer's factor is 128**-0.5."""
    return np.full(len(positions), 128**-0.5)


def transformers_query_scale(positions, layer):
    """Ministral 3's own get_llama_4_attn_scale, as its attention calls it: float32."""
    import torch
    from transformers.models.ministral3.modeling_ministral3 import get_llama_4_attn_scale

    scale = get_llama_4_attn_scale(torch.from_numpy(positions)[None], 0.1, 16384)
    return 128**-0.5 * scale.reshape(-1).double().numpy()


@pytest.mark.parametrize(
    "port, named",
    [
        pytest.param(query_scale(), None, id="right"),
        pytest.param(
            llama4_temperature,
            "no query scale (llama_4_scaling_beta ignored, or kept to the NoPE",
            id="Llama 4's NoPE-only rule",
        ),
        pytest.param(query_scale(beta=0.0), "no query scale", id="beta ignored"),
        pytest.param(
            query_scale(step=1), "Llama 4's step floor((p + 1) / 16384)", id="Llama 4's step"
        ),
        pytest.param(query_scale(floor=False), "without the floor", id="no floor"),
        pytest.param(
            query_scale(length=262144),
            "max_position_embeddings (262144) where original_max",
            id="max_position_embeddings",
        ),
        pytest.param(
            transformers_query_scale,
            "computed in float32 (transformers' position_ids / length",
            id="transformers' own, float32",
        ),
    ],
)
def test_ministral3_query_scale_at_its_config_json(files, port, named):
    report = api.check(port, "attention_scale", config=files["ministral3"], framework="numpy")
    if named is None:
        assert report.conforms, report.lines()
    else:
        (status, detail), *_ = verdicts(report).values()
        assert status == "differs" and named in detail, detail


def test_ministral3_query_scale_is_its_owners_function_in_float64(files):
    """The kind's reference against get_llama_4_attn_scale run in float64: within 4 ulps of
    the value (the two logarithms within an ulp each, two roundings on either side)."""
    import torch
    from transformers.models.ministral3.modeling_ministral3 import get_llama_4_attn_scale

    from embedding_parity.conformance.kinds import KINDS

    kind = KINDS["attention_scale"]
    case = kind.cases(read(MINISTRAL_3).options("attention_scale"))[0]
    positions, _ = kind.arguments(case.params)
    theirs = get_llama_4_attn_scale(torch.from_numpy(positions).double()[None], 0.1, 16384)
    expected = 128**-0.5 * theirs.reshape(-1).numpy()
    ours = kind.reference(case.params)
    assert 16384 in positions and 32768 in positions  # either side of the first two steps
    np.testing.assert_allclose(ours, expected, rtol=4 * np.finfo(np.float64).eps, atol=0)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"llama_4_scaling_beta": None}, "no llama_4_scaling_beta in the rope dict"),
        ({"llama_4_scaling_beta": -0.1}, "llama_4_scaling_beta -0.1 must be 0 or more"),
        ({"llama_4_scaling_beta": "0.1"}, "llama_4_scaling_beta must be a number"),
    ],
)
def test_a_ministral3_query_scale_the_kit_cannot_use_is_one_line(change, message):
    text = MINISTRAL_3["text_config"]
    rope = {k: v for k, v in {**text["rope_parameters"], **change}.items() if v is not None}
    fields = {**MINISTRAL_3, "text_config": {**text, "rope_parameters": rope}}
    with pytest.raises(UsageError, match=f"^{WHERE}: {re.escape(message)}"):
        read(fields)


@pytest.mark.parametrize("fields", [MINISTRAL_3, HUNYUAN_7B])
def test_without_transformers_the_kit_still_refuses_them(fields):
    """The kit's own transcription knows neither class's defaults."""
    with pytest.raises(UsageError, match="install transformers to read it as transformers does"):
        hf.from_fields(fields, "case", WHERE, reader="kit")
