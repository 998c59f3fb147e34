"""Four 2025 models whose config.json the kit read by Llama's rules, read as their owners'
code reads them (transformers 5.24):

- GLM-4-0414 (``glm4``) and ERNIE 4.5 (``ernie4_5``) pair dims (2i, 2i+1): their
  apply_rotary_pos_emb repeat_interleaves cos and sin and turns x[..., ::2] with x[..., 1::2],
  GLM-4's on the first int(head_dim * partial_rotary_factor) dims;
- EXAONE 4 (``exaone4``) rotates its sliding-window layers only where sliding_window is set
  (``if self.sliding_window is None or self.is_sliding``): the 32B's full-attention layers, one
  in four, are NoPE; with sliding_window null every layer rotates, where Cohere2 rotates none;
- Granite 4.0-H (``granitemoehybrid``) builds its rotary module only for
  ``position_embedding_type: "rope"``: its files say "nope", and no layer rotates. Its 350M's
  ``num_local_experts: 0`` bears on neither the input layer nor the rotation.

At each real config.json a correct port conforms (the owner's own rotary module where the
model has one) and the port the kit used to pass is told it differs, by the mistake's name.
The ports are judged in this process, at the rotation's float32 checks (the dtype transformers'
rotary computes its angles in)."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from backends import positional
from embedding_parity.cli import UsageError
from embedding_parity.configs import hf
from embedding_parity.conformance import api

# THUDM/GLM-4-9B-0414's config.json.
GLM_4_9B_0414 = {
    "architectures": ["Glm4ForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": [151329, 151336, 151338],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 13696,
    "max_position_embeddings": 32768,
    "model_type": "glm4",
    "num_attention_heads": 32,
    "num_hidden_layers": 40,
    "num_key_value_heads": 2,
    "pad_token_id": 151329,
    "partial_rotary_factor": 0.5,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.3",
    "use_cache": True,
    "vocab_size": 151552,
}
# baidu/ERNIE-4.5-0.3B-PT's config.json.
ERNIE_4_5_0_3B = {
    "architectures": ["Ernie4_5ForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "max_position_embeddings": 131072,
    "model_type": "ernie4_5",
    "num_attention_heads": 16,
    "num_hidden_layers": 18,
    "num_key_value_heads": 2,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "use_bias": False,
    "use_cache": False,
    "vocab_size": 103424,
}
# LGAI-EXAONE/EXAONE-4.0-32B's config.json: three sliding-window layers, then a global one
# (its sliding_window_pattern "LLLG" spells layer_types).
EXAONE_4_32B = {
    "architectures": ["Exaone4ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 361,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "initializer_range": 0.02,
    "intermediate_size": 27392,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
    * 16,
    "max_position_embeddings": 131072,
    "model_type": "exaone4",
    "num_attention_heads": 40,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 16.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 1000000,
    "sliding_window": 4096,
    "sliding_window_pattern": "LLLG",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.54.0.dev0",
    "use_cache": True,
    "vocab_size": 102400,
}


def _hybrid(count: int, attention: tuple[int, ...]) -> list[str]:
    """Granite 4.0-H's layer_types: Mamba-2 layers, attention at ``attention``."""
    return ["attention" if i in attention else "mamba" for i in range(count)]


# ibm-granite/granite-4.0-h-tiny's config.json: 40 layers, four of them attention.
GRANITE_4_H_TINY = {
    "architectures": ["GraniteMoeHybridForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attention_multiplier": 0.0078125,
    "bos_token_id": 100257,
    "embedding_multiplier": 12,
    "eos_token_id": 100257,
    "hidden_act": "silu",
    "hidden_size": 1536,
    "initializer_range": 0.1,
    "intermediate_size": 512,
    "layer_types": _hybrid(40, (5, 15, 25, 35)),
    "logits_scaling": 6,
    "mamba_chunk_size": 256,
    "mamba_conv_bias": True,
    "mamba_d_conv": 4,
    "mamba_d_head": 64,
    "mamba_d_state": 128,
    "mamba_expand": 2,
    "mamba_n_groups": 1,
    "mamba_n_heads": 48,
    "mamba_proj_bias": False,
    "max_position_embeddings": 131072,
    "model_type": "granitemoehybrid",
    "normalization_function": "rmsnorm",
    "num_attention_heads": 12,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 40,
    "num_key_value_heads": 4,
    "num_local_experts": 64,
    "output_router_logits": False,
    "pad_token_id": 100256,
    "position_embedding_type": "nope",
    "residual_multiplier": 0.22,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000,
    "router_aux_loss_coef": 0.0,
    "shared_intermediate_size": 1024,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 100352,
}
# ibm-granite/granite-4.0-h-350m's config.json: no routed experts (num_local_experts 0), a
# shared MLP.
GRANITE_4_H_350M = {
    "architectures": ["GraniteMoeHybridForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attention_multiplier": 0.015625,
    "bos_token_id": 100257,
    "embedding_multiplier": 12,
    "eos_token_id": 100257,
    "hidden_act": "silu",
    "hidden_size": 768,
    "initializer_range": 0.1,
    "intermediate_size": 2048,
    "layer_types": _hybrid(32, (10, 13, 17, 27)),
    "logits_scaling": 3,
    "mamba_chunk_size": 256,
    "mamba_conv_bias": True,
    "mamba_d_conv": 4,
    "mamba_d_head": 32,
    "mamba_d_state": 128,
    "mamba_expand": 2,
    "mamba_n_groups": 1,
    "mamba_n_heads": 48,
    "mamba_proj_bias": False,
    "max_position_embeddings": 32768,
    "model_type": "granitemoehybrid",
    "normalization_function": "rmsnorm",
    "num_attention_heads": 12,
    "num_experts_per_tok": 0,
    "num_hidden_layers": 32,
    "num_key_value_heads": 4,
    "num_local_experts": 0,
    "output_router_logits": False,
    "pad_token_id": 100256,
    "position_embedding_type": "nope",
    "residual_multiplier": 0.246,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000,
    "router_aux_loss_coef": 0.0,
    "shared_intermediate_size": 2048,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 100352,
}
FILES = {
    "glm-4-9b-0414": GLM_4_9B_0414,
    "ernie-4.5-0.3b": ERNIE_4_5_0_3B,
    "exaone-4.0-32b": EXAONE_4_32B,
    "granite-4.0-h-tiny": GRANITE_4_H_TINY,
    "granite-4.0-h-350m": GRANITE_4_H_350M,
}
WHERE = "--config dir/config.json"
HALF_NAMED = "half layout (pairs i, i + d/2) where the config's interleaved pairs are expected"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{name: path} of each config.json, as a user passes it."""
    found = {}
    for name, fields in FILES.items():
        path = tmp_path_factory.mktemp(name) / "config.json"
        path.write_text(json.dumps(fields))
        found[name] = str(path)
    return found


def read(fields: dict, reader: str = "transformers"):
    return hf.from_fields(fields, "case", WHERE, reader=reader)


def rotation(*layer_types: str) -> list[str]:
    """The float32 rotation checks, of the whole config or of each layer type named."""
    named = [f" {name}" for name in layer_types] or [""]
    return [f"{check}{name} float32" for name in named for check in ("rotation", "long positions")]


def checked(function, path: str, checks: list[str]):
    """The rope report of ``function`` at the config.json ``path``, of these checks."""
    return api.check(function, "rope", config=path, framework="numpy", checks=checks)


def verdicts(report) -> dict:
    return {check.check: (check.status, check.detail) for check in report.checks}


def owners_rotary(model: str, fields: dict):
    """f(x, positions): the model's own rotary module, built by its config class from
    ``fields``, applied by its own apply_rotary_pos_emb."""
    import torch
    from transformers import CONFIG_MAPPING

    module = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    rotary = next(getattr(module, name) for name in dir(module) if name.endswith("RotaryEmbedding"))
    built = rotary(CONFIG_MAPPING[model].from_dict(fields))

    def f(x, positions, layer=None):
        q = torch.from_numpy(x).reshape(-1, *x.shape[-2:])[None]  # (1, heads, T, d)
        cos, sin = built(q, torch.from_numpy(positions)[None])
        return module.apply_rotary_pos_emb(q, q, cos, sin)[0].reshape(x.shape).numpy()

    return f


def port(layout: str, base: float, scaling=None, rotary_dim=None):
    """f(x, positions): RoPE at these settings, in float64 rounded once."""

    def f(x, positions, layer=None):
        rotated = positional.apply_rope(
            x, positions, base=base, layout=layout, scaling=scaling, rotary_dim=rotary_dim
        )
        return rotated.astype(x.dtype)

    return f


# --- GLM-4-0414 and ERNIE 4.5: pairs (2i, 2i+1) -------------------------------------------


@pytest.mark.parametrize(
    "name, rotated, base", [("glm-4-9b-0414", 64, 10000.0), ("ernie-4.5-0.3b", None, 500000.0)]
)
def test_glm4_and_ernie45_pair_2i_with_2i_plus_1(name, rotated, base):
    config = read(FILES[name])
    assert (config.layout, config.head_dim, config.rotary_dim) == ("interleaved", 128, rotated)
    assert (config.rope_theta, config.scaling, config.layer_types) == (base, None, ())


@pytest.mark.parametrize("name, model", [("glm-4-9b-0414", "glm4"), ("ernie-4.5-0.3b", "ernie4_5")])
def test_the_owners_rotary_conforms_and_a_half_layout_port_is_named(files, name, model):
    report = checked(owners_rotary(model, FILES[name]), files[name], rotation())
    assert report.conforms, report.lines()
    config = read(FILES[name])
    half = port("half", config.rope_theta, rotary_dim=config.rotary_dim)
    status, detail = verdicts(checked(half, files[name], rotation()))["rotation float32"]
    assert status == "differs" and HALF_NAMED in detail, detail


# --- EXAONE 4: its sliding-window layers only --------------------------------------------


def test_exaone4_32b_rotates_its_sliding_window_layers_only():
    config = read(EXAONE_4_32B)
    found = {t.name: (t.layers, t.rope_theta) for t in config.layer_types}
    assert found == {
        "sliding_attention": (tuple(i for i in range(64) if i % 4 != 3), 1e6),
        "full_attention": (tuple(range(3, 64, 4)), None),
    }
    assert config.scaling["rope_type"] == "llama3"


def exaone_port(rotates):
    """EXAONE 4's own rotary module, applied on the layers where ``rotates(layer)``."""
    theirs = owners_rotary("exaone4", EXAONE_4_32B)
    return lambda x, positions, layer: theirs(x, positions) if rotates(layer) else x.copy()


def test_exaone4_the_owners_rotation_on_its_sliding_layers_conforms(files):
    sliding = exaone_port(lambda layer: EXAONE_4_32B["layer_types"][layer] == "sliding_attention")
    checks = [*rotation("sliding_attention", "full_attention"), "layer map float32"]
    report = checked(sliding, files["exaone-4.0-32b"], checks)
    assert report.conforms, report.lines()


def test_exaone4_every_layer_rotated_is_named_on_its_full_attention_layers(files):
    every = exaone_port(lambda layer: True)
    checks = rotation("sliding_attention", "full_attention")
    found = verdicts(checked(every, files["exaone-4.0-32b"], checks))
    assert found["rotation sliding_attention float32"][0] == "conforms"
    status, detail = found["rotation full_attention float32"]
    assert status == "differs" and "on a NoPE layer [exaone4 rotates its sliding-window" in detail
    assert "or every layer rotated" in detail, detail


@pytest.mark.parametrize(
    "model_type, reader, rotated",
    [
        # self.sliding_window is None: every layer rotates, by one rule (no table)
        ("exaone4", "transformers", {}),
        # self.sliding_window is not None: no layer (transformers' own Cohere2 model cannot run
        # without a window, so only the kit's transcription reads this file)
        ("cohere2", "kit", {"nope": (0, 1, 2, 3)}),
    ],
)
def test_with_sliding_window_null_exaone4_rotates_every_layer_and_cohere2_none(
    model_type, reader, rotated
):
    # no window: every layer full attention (transformers' masks refuse a sliding layer then)
    fields = {"model_type": model_type, "num_hidden_layers": 4, "sliding_window": None}
    config = read({**fields, "layer_types": ["full_attention"] * 4}, reader)
    assert {t.name: t.layers for t in config.layer_types} == rotated


# --- Granite 4.0-H: no rotation anywhere ---------------------------------------------------


@pytest.mark.parametrize("name", ["granite-4.0-h-tiny", "granite-4.0-h-350m"])
def test_granite4_h_rotates_no_layer_the_identity_conforms(files, name):
    config = read(FILES[name])
    assert [(t.name, t.rotates) for t in config.layer_types] == [("nope", False)]
    assert "position_embedding_type 'nope'" in config.layer_types[0].why
    assert "no layer rotated (below), head_dim" in config.line()
    report = checked(lambda x, positions: x.copy(), files[name], rotation("nope"))
    assert report.conforms, report.lines()


def test_granite4_h_a_rotating_port_is_named(files):
    rotating = port("half", 10000.0)  # the file's rope_theta, which the model never reads
    report = checked(rotating, files["granite-4.0-h-tiny"], rotation("nope"))
    status, detail = verdicts(report)["rotation nope float32"]
    assert status == "differs" and "where no layer of the model rotates" in detail, detail


def test_granitemoehybrid_with_rope_named_rotates_every_layer():
    """Granite 4.0 (not -H) is the same class with position_embedding_type "rope"."""
    config = read({**GRANITE_4_H_350M, "position_embedding_type": "rope"})
    assert (config.layer_types, config.rope_theta, config.layout) == ((), 10000.0, "half")


# --- the kit's own reading, without transformers: refused as before --------------------------


@pytest.mark.parametrize("name", list(FILES))
def test_without_transformers_these_model_types_are_refused_in_one_line(name):
    model_type = FILES[name]["model_type"]
    with pytest.raises(UsageError) as refused:
        read(FILES[name], reader="kit")
    message = str(refused.value)
    assert f"model_type '{model_type}': transformers' {model_type} class fills in" in message
    assert "\n" not in message
