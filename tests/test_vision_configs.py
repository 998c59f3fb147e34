"""A vision tower's configuration: each preset's options for the vision kinds, a real config.json
of each family as the hub ships it giving its preset's contract, the line naming which source
decided each part, the refusals, and the rule read from the model's code (a changed interpolate
call, rotary module or NaFlex resize is read as changed, or refused), never from a kept list."""

from __future__ import annotations

import json
import re

import pytest

from embedding_parity import configs
from embedding_parity.configs import vision
from embedding_parity.configs.presets import VISION_PRESETS
from embedding_parity.usage import UsageError

RESIZE = "pos2d_resize"
BICUBIC = {"kernel": "torch-bicubic", "compute_dtype": None}
# Each preset's options, kind by kind (transformers 5.24's code; DINOv2's original's own rule).
EXPECTED = {
    "vit-b-16": {RESIZE: {**BICUBIC, "prefix_tokens": 1, "grid": [14, 14]}},
    "clip-vit-l-14": {RESIZE: {**BICUBIC, "prefix_tokens": 1, "grid": [16, 16]}},
    "siglip-so400m-14-384": {RESIZE: {**BICUBIC, "prefix_tokens": 0, "grid": [27, 27]}},
    "siglip2-naflex": {RESIZE: {"naflex": True, "prefix_tokens": 0, "grid": [16, 16]}},
    "dinov2-vit-l-14": {
        RESIZE: {"kernel": "torch-bicubic", "prefix_tokens": 1, "compute_dtype": "float32",
                 "grid": [37, 37]}
    },
    "dinov2-vit-l-14-original": {
        RESIZE: {"kernel": "dinov2-offset", "prefix_tokens": 1, "compute_dtype": "float32",
                 "grid": [37, 37]}
    },
    "dinov2-with-registers": {
        RESIZE: {"kernel": "antialiased-bicubic", "prefix_tokens": 1, "compute_dtype": "float32",
                 "grid": [37, 37]}
    },
    "dinov3-vit-l-16": {
        "rope2d": {"spec": "dinov3", "head_dim": 64, "prefix_tokens": 5, "grid": [14, 14]},
        "rope2d_ids": {"builder": "raster", "prefix": 5},
    },
    "pixtral-12b": {
        "rope2d": {"spec": "pixtral", "head_dim": 64},
        "rope2d_ids": {"builder": "raster"},
    },
    "qwen2.5-vl-7b-vision": {
        "rope2d": {"spec": "qwen2.5-vl", "head_dim": 80},
        "rope2d_ids": {"builder": "window", "merge": 2, "window": 4},
    },
    "llama-4-scout-vision": {
        "rope2d": {"spec": "llama-4", "head_dim": 88, "prefix_tokens": 1, "grid": [24, 24]},
        "rope2d_ids": {"builder": "llama-4"},
    },
}


def test_every_vision_preset_has_its_expected_options():
    assert set(EXPECTED) == set(VISION_PRESETS)


@pytest.mark.parametrize("name", list(VISION_PRESETS))
def test_each_preset_sets_its_kinds_and_refuses_the_others(name):
    config = configs.preset(name)
    for kind in vision.KINDS:
        if kind in EXPECTED[name]:
            assert config.options(kind, "--model") == EXPECTED[name][kind], kind
        else:
            with pytest.raises(UsageError, match="^--model: "):
                config.options(kind, "--model")


# --- real config.json files, as the hub ships them ---------------------------------------------

HUB_FILES = {
    "vit-b-16": {
        "_name_or_path": "google/vit-base-patch16-224",
        "architectures": ["ViTForImageClassification"],
        "attention_probs_dropout_prob": 0.0,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": 768,
        "id2label": {"0": "tench, Tinca tinca", "1": "goldfish, Carassius auratus"},
        "image_size": 224,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "label2id": {"tench, Tinca tinca": 0, "goldfish, Carassius auratus": 1},
        "layer_norm_eps": 1e-12,
        "model_type": "vit",
        "num_attention_heads": 12,
        "num_channels": 3,
        "num_hidden_layers": 12,
        "patch_size": 16,
        "qkv_bias": True,
        "transformers_version": "4.13.0.dev0",
    },
    "clip-vit-l-14": {
        "_name_or_path": "openai/clip-vit-large-patch14",
        "architectures": ["CLIPModel"],
        "initializer_factor": 1.0,
        "logit_scale_init_value": 2.6592,
        "model_type": "clip",
        "projection_dim": 768,
        "text_config": {
            "hidden_size": 768,
            "intermediate_size": 3072,
            "max_position_embeddings": 77,
            "model_type": "clip_text_model",
            "num_attention_heads": 12,
            "num_hidden_layers": 12,
            "projection_dim": 768,
            "vocab_size": 49408,
        },
        "torch_dtype": "float32",
        "transformers_version": "4.16.0.dev0",
        "vision_config": {
            "dropout": 0.0,
            "hidden_act": "quick_gelu",
            "hidden_size": 1024,
            "image_size": 224,
            "intermediate_size": 4096,
            "layer_norm_eps": 1e-05,
            "model_type": "clip_vision_model",
            "num_attention_heads": 16,
            "num_hidden_layers": 24,
            "patch_size": 14,
            "projection_dim": 768,
        },
    },
    "siglip-so400m-14-384": {
        "architectures": ["SiglipModel"],
        "initializer_factor": 1.0,
        "model_type": "siglip",
        "text_config": {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "model_type": "siglip_text_model",
            "num_attention_heads": 16,
            "num_hidden_layers": 27,
        },
        "torch_dtype": "float32",
        "transformers_version": "4.37.0.dev0",
        "vision_config": {
            "hidden_size": 1152,
            "image_size": 384,
            "intermediate_size": 4304,
            "model_type": "siglip_vision_model",
            "num_attention_heads": 16,
            "num_hidden_layers": 27,
            "patch_size": 14,
        },
    },
    "siglip2-naflex": {
        "architectures": ["Siglip2Model"],
        "initializer_factor": 1.0,
        "model_type": "siglip2",
        "text_config": {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "model_type": "siglip2_text_model",
            "num_attention_heads": 16,
            "num_hidden_layers": 27,
        },
        "torch_dtype": "float32",
        "transformers_version": "4.49.0.dev0",
        "vision_config": {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "model_type": "siglip2_vision_model",
            "num_attention_heads": 16,
            "num_hidden_layers": 27,
            "num_patches": 256,
            "patch_size": 16,
        },
    },
    "dinov2-vit-l-14": {
        "architectures": ["Dinov2Model"],
        "attention_probs_dropout_prob": 0.0,
        "drop_path_rate": 0.0,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": 1024,
        "image_size": 518,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-06,
        "layerscale_value": 1.0,
        "mlp_ratio": 4,
        "model_type": "dinov2",
        "num_attention_heads": 16,
        "num_channels": 3,
        "num_hidden_layers": 24,
        "patch_size": 14,
        "qkv_bias": True,
        "torch_dtype": "float32",
        "transformers_version": "4.31.0.dev0",
        "use_swiglu_ffn": False,
    },
    "dinov2-with-registers": {
        "architectures": ["Dinov2WithRegistersModel"],
        "hidden_act": "gelu",
        "hidden_size": 1024,
        "image_size": 518,
        "layer_norm_eps": 1e-06,
        "layerscale_value": 1.0,
        "mlp_ratio": 4,
        "model_type": "dinov2_with_registers",
        "num_attention_heads": 16,
        "num_hidden_layers": 24,
        "num_register_tokens": 4,
        "patch_size": 14,
        "qkv_bias": True,
        "torch_dtype": "float32",
        "use_swiglu_ffn": False,
    },
    "dinov3-vit-l-16": {
        "architectures": ["DINOv3ViTModel"],
        "attention_dropout": 0.0,
        "drop_path_rate": 0.0,
        "hidden_act": "gelu",
        "hidden_size": 1024,
        "image_size": 224,
        "initializer_range": 0.02,
        "intermediate_size": 4096,
        "key_bias": False,
        "layer_norm_eps": 1e-05,
        "layerscale_value": 1.0,
        "mlp_bias": True,
        "model_type": "dinov3_vit",
        "num_attention_heads": 16,
        "num_channels": 3,
        "num_hidden_layers": 24,
        "num_register_tokens": 4,
        "patch_size": 16,
        "pos_embed_jitter": None,
        "pos_embed_rescale": 2.0,
        "pos_embed_shift": None,
        "proj_bias": True,
        "query_bias": True,
        "rope_theta": 100.0,
        "torch_dtype": "float32",
        "use_gated_mlp": False,
        "value_bias": True,
    },
    "pixtral-12b": {
        "architectures": ["LlavaForConditionalGeneration"],
        "image_seq_length": 1,
        "image_token_index": 10,
        "model_type": "llava",
        "projector_hidden_act": "gelu",
        "text_config": {
            "hidden_size": 5120,
            "head_dim": 128,
            "intermediate_size": 14336,
            "max_position_embeddings": 1024000,
            "model_type": "mistral",
            "num_hidden_layers": 40,
            "num_key_value_heads": 8,
            "rms_norm_eps": 1e-05,
            "rope_theta": 1000000000.0,
            "sliding_window": None,
            "vocab_size": 131072,
        },
        "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0.dev0",
        "vision_config": {
            "head_dim": 64,
            "hidden_act": "silu",
            "image_size": 1024,
            "model_type": "pixtral",
            "patch_size": 16,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
        },
        "vision_feature_layer": -1,
        "vision_feature_select_strategy": "full",
    },
    "qwen2.5-vl-7b-vision": {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "hidden_size": 3584,
        "max_position_embeddings": 128000,
        "model_type": "qwen2_5_vl",
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "rope_theta": 1000000.0,
        "vision_config": {
            "depth": 32,
            "hidden_act": "silu",
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "in_chans": 3,
            "out_hidden_size": 3584,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "spatial_patch_size": 14,
            "window_size": 112,
            "fullatt_block_indexes": [7, 15, 23, 31],
            "tokens_per_second": 2,
            "temporal_patch_size": 2,
        },
        "vocab_size": 152064,
    },
    "llama-4-scout-vision": {
        "architectures": ["Llama4ForConditionalGeneration"],
        "model_type": "llama4",
        "text_config": {"model_type": "llama4_text", "hidden_size": 5120, "head_dim": 128},
        "vision_config": {
            "attention_dropout": 0.0,
            "hidden_act": "gelu",
            "hidden_size": 1408,
            "image_size": 336,
            "initializer_range": 0.02,
            "intermediate_size": 5632,
            "model_type": "llama4_vision_model",
            "multi_modal_projector_bias": False,
            "norm_eps": 1e-05,
            "num_attention_heads": 16,
            "num_channels": 3,
            "num_hidden_layers": 34,
            "patch_size": 14,
            "pixel_shuffle_ratio": 0.5,
            "projector_dropout": 0.0,
            "projector_input_dim": 4096,
            "projector_output_dim": 4096,
            "rope_theta": 10000,
            "vision_feature_layer": -1,
            "vision_feature_select_strategy": "default",
            "vision_output_dim": 4096,
        },
    },
}
HUB_FILES["dinov2-vit-l-14-original"] = HUB_FILES["dinov2-vit-l-14"]  # one file, two rules


def write(tmp_path, fields: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    return str(path)


@pytest.mark.parametrize("name", [n for n in VISION_PRESETS if n != "dinov2-vit-l-14-original"])
def test_a_hub_config_json_gives_its_presets_contract(tmp_path, name):
    config = configs.read(write(tmp_path, HUB_FILES[name]))
    for kind, options in EXPECTED[name].items():
        assert config.options(kind) == options, kind


def test_the_original_dinov2_and_transformers_differ_by_the_named_rule():
    """One grid, two rules: the preset for DINOv2's own code names the offset rule and how
    transformers' code differs; the hub file read by transformers' code gives its size=."""
    original = configs.preset("dinov2-vit-l-14-original")
    hf = configs.preset("dinov2-vit-l-14")
    assert original.options(RESIZE)["kernel"] == "dinov2-offset"
    assert hf.options(RESIZE)["kernel"] == "torch-bicubic"
    line = original.line()
    assert "[preset dinov2-vit-l-14-original: facebookresearch/dinov2" in line
    assert "transformers' Dinov2Embeddings passes size=(h0, w0)" in line


def test_a_multimodal_configs_tower_beside_its_text_reading(tmp_path):
    """Qwen2.5-VL's file: its text model's M-RoPE position builder read as before, its
    vision_config's tower read only when a vision kind asks, and the line then the tower's."""
    config = configs.read(write(tmp_path, HUB_FILES["qwen2.5-vl-7b-vision"]))
    assert config.options("mrope_positions")["spatial_merge_size"] == 2
    assert not config.tower.asked and "M-RoPE" in config.line()
    assert config.options("rope2d_ids") == EXPECTED["qwen2.5-vl-7b-vision"]["rope2d_ids"]
    assert config.line().startswith("config qwen2_5_vl (") and "vision tower" in config.line()


def test_qwen3_vl_s_tower_reads_its_helper_call_and_its_rotary(tmp_path):
    fields = {
        "model_type": "qwen3_vl",
        "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096, "head_dim": 128},
        "vision_config": {
            "deepstack_visual_indexes": [8, 16, 24],
            "depth": 27,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 1152,
            "in_channels": 3,
            "intermediate_size": 4304,
            "model_type": "qwen3_vl",
            "num_heads": 16,
            "num_position_embeddings": 2304,
            "out_hidden_size": 4096,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
    }
    fields["vision_config"]["spatial_merge_size"] = 3  # the merge comes from the config
    config = configs.read(write(tmp_path, fields))
    assert config.options(RESIZE) == {
        "kernel": "bilinear-corners", "prefix_tokens": 0, "compute_dtype": "float32",
        "merge": 3, "grid": [48, 48],
    }
    assert config.options("rope2d_ids") == {"builder": "merge", "merge": 3}
    assert config.options("rope2d")["head_dim"] == 72
    # the kit's raster order against the model's merge blocks, said on the line
    assert (
        "merge 3 [config: spatial_merge_size 3; the kit asks for the rows in raster order, "
        "where qwen3_vl_vision's code emits them in 3 x 3 merge-block order"
    ) in config.line()


def test_the_line_names_the_source_of_each_part():
    config = configs.preset("vit-b-16")
    config.options(RESIZE, "--model")
    head, *parts = config.line().splitlines()
    assert head == "config vit-b-16: vision tower vit (ViTConfig, read by transformers)"
    resize = next(x for x in parts if x.startswith(f"  {RESIZE}:"))
    code = "[model code: models/vit/modeling_vit.py ViTEmbeddings.interpolate_pos_encoding: "
    decided = "kernel torch-bicubic, prefix_tokens 1, compute_dtype the table's own dtype "
    assert decided + code in resize
    assert "; grid 14 x 14 [config: image_size 224 // patch_size 16]" in resize


# --- refusals, each one line ---------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, kind, message",
    [
        ({**HUB_FILES["vit-b-16"], "image_size": [224, 448]}, RESIZE, "reshapes its table as a"),
        (  # transformers' own check, quoted
            {**HUB_FILES["vit-b-16"], "patch_size": "16"},
            RESIZE,
            "transformers refuses it: TypeError: Field 'patch_size'",
        ),
        ({**HUB_FILES["vit-b-16"], "image_size": 8}, RESIZE, "smaller than patch_size"),
        ({**HUB_FILES["vit-b-16"]}, "rope2d", "no rotary module the kit runs"),
        ({**HUB_FILES["vit-b-16"]}, "pos2d_table", "not a fixed 2-D sin-cos table"),
        ({**HUB_FILES["vit-b-16"]}, "rope", "it sets --kind pos2d_resize"),
        (HUB_FILES["dinov3-vit-l-16"], RESIZE, "its positions are not a resized table"),
        (
            {"model_type": "siglip2", "vision_config": {"num_patches": 200, "patch_size": 16}},
            RESIZE,
            "num_patches 200 is not a square",
        ),
        (  # a base no spec of the kit's turns at: refused, never judged at the wrong one
            {"model_type": "pixtral", "head_dim": 64, "rope_theta": 1e6, "patch_size": 16},
            "rope2d",
            "turns as no spec of rope2d.SPECS",
        ),
        (
            {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4},
            RESIZE,
            "has no vision tower",
        ),
    ],
)
def test_a_field_the_kit_cannot_honour_is_refused_in_one_line(tmp_path, fields, kind, message):
    path = write(tmp_path, fields)
    with pytest.raises(UsageError, match=message) as refused:
        configs.read(path).options(kind)
    assert "\n" not in str(refused.value)


def test_a_vision_preset_is_named_in_the_listing_and_a_wrong_name_lists_them():
    assert "dinov2-vit-l-14-original" in configs.listing()
    with pytest.raises(UsageError, match="vit-b-16"):
        configs.preset("vit-b-17")


# --- the rule is read from the model's code: a changed call is read as changed --------------


def dinov2_source() -> str:
    return vision.read(VISION_PRESETS["dinov2-vit-l-14"]["fields"], "here").source


@pytest.mark.parametrize(
    "old, new, kernel",
    [
        ('mode="bicubic",', 'mode="bilinear",', "bilinear"),
        ("align_corners=False,", "align_corners=False, antialias=True,", "antialiased-bicubic"),
        ('mode="bicubic",', 'mode="bilinear", antialias=True,', "antialiased-bilinear"),
        ('mode="bicubic",\n            align_corners=False,',
         'mode="bilinear",\n            align_corners=True,', "bilinear-corners"),
    ],
)
def test_a_changed_interpolate_call_is_read_as_changed(old, new, kernel):
    source = dinov2_source()
    assert source.count(old) == 1
    rule = vision.interpolation(source.replace(old, new), "Dinov2Config")
    assert rule["kernel"] == kernel


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("align_corners=False,", "align_corners=True,", "is no kernel of the kit's"),
        ('mode="bicubic",', 'mode="nearest",', "is no kernel of the kit's"),
        ("size=(new_height, new_width)", "scale_factor=2", "scale_factor"),
        ("size=(new_height, new_width)", "size=(new_width, new_height)", r"not \(height, width\)"),
        ('mode="bicubic",', "mode=self.mode,", "mode=self.mode is"),
        ("align_corners=False,", "**options,", "kwargs"),
        ("patch_pos_embed.to(torch.float32)", "patch_pos_embed.half()", "cast to half"),
        ("patch_pos_embed = self.position_embeddings[:, 1:]",
         "patch_pos_embed = self.position_embeddings[:, 1:]\n        x = self.cls[:, 2:]",
         r"sliced from \[1, 2\]"),
    ],
)
def test_a_call_the_kit_cannot_map_is_refused_naming_what_it_says(old, new, message):
    source = dinov2_source()
    assert source.count(old) == 1
    said = vision.interpolation(source.replace(old, new), "Dinov2Config")
    assert isinstance(said, str) and re.search(message, said), said


def test_the_upcast_and_the_prefix_rows_come_from_the_code():
    source = dinov2_source()
    plain = vision.interpolation(source.replace("patch_pos_embed.to(torch.float32)",
                                                "patch_pos_embed"), "Dinov2Config")
    assert plain["compute_dtype"] is None
    two = vision.interpolation(source.replace("[:, 1:]", "[:, 2:]"), "Dinov2Config")
    assert two["prefix_tokens"] == 2


def test_a_preset_is_read_through_its_modeling_files_code(monkeypatch):
    """The kernel of a preset comes from the file its config class's modeling module is: a file
    that says bilinear makes the preset's kernel bilinear."""
    real = vision._modeling

    def changed(config_class):
        path, source = real(config_class)
        return path, source.replace('mode="bicubic"', 'mode="bilinear"')

    monkeypatch.setattr(vision, "_modeling", changed)
    assert configs.preset("vit-b-16").options(RESIZE, "--model")["kernel"] == "bilinear"


def test_a_changed_rotary_module_is_refused(monkeypatch):
    """Pixtral's apply function turning interleaved pairs: no spec is that rule at its slots."""
    from transformers.models.pixtral import modeling_pixtral

    def interleaved(x):
        pairs = x.unflatten(-1, (-1, 2))
        return pairs.flip(-1).mul(pairs.new_tensor([-1.0, 1.0])).flatten(-2)

    monkeypatch.setattr(modeling_pixtral, "rotate_half", interleaved)
    with pytest.raises(UsageError, match="turns as no spec of rope2d.SPECS"):
        configs.preset("pixtral-12b").options("rope2d", "--model")


def test_a_changed_naflex_resize_is_refused(monkeypatch):
    """SigLIP2's padding rows zeroed instead of its first position's: held to
    resize.naflex_positions, the run is refused."""
    from transformers.models.siglip2 import modeling_siglip2

    embeddings = modeling_siglip2.Siglip2VisionEmbeddings
    real = embeddings.resize_positional_embeddings

    def zero_padded(table, shapes, length):
        out = real(table, shapes, length)
        for image, (h, w) in enumerate(shapes.tolist()):
            out[image, h * w :] = 0
        return out

    monkeypatch.setattr(embeddings, "resize_positional_embeddings", staticmethod(zero_padded))
    with pytest.raises(UsageError, match="differs from resize.naflex_positions"):
        configs.preset("siglip2-naflex").options(RESIZE, "--model")



def test_what_the_file_leaves_out_is_its_classs_default(tmp_path):
    """A config.json naming its model type alone is a vision tower's where transformers' class
    for it has a patch size, its grid the class's defaults (Dinov2Config: 224 // 14)."""
    config = configs.read(write(tmp_path, {"model_type": "dinov2"}))
    assert config.options(RESIZE)["grid"] == [16, 16]


MAE = {
    "architectures": ["ViTMAEForPreTraining"],
    "decoder_hidden_size": 512,
    "decoder_intermediate_size": 2048,
    "decoder_num_attention_heads": 16,
    "decoder_num_hidden_layers": 8,
    "hidden_size": 768,
    "image_size": 224,
    "mask_ratio": 0.75,
    "model_type": "vit_mae",
    "norm_pix_loss": False,
    "num_attention_heads": 12,
    "patch_size": 16,
    "torch_dtype": "float32",
}


def test_vit_mae_s_fixed_table_is_named_from_its_own_code(tmp_path, monkeypatch):
    """facebook/vit-mae-base's file: its embeddings fill their table by their own method, the
    'mae' rule's float32 table bit for bit after a zero CLS row; a builder at another
    temperature is none of backends.grid's tables, and refused."""
    from transformers.models.vit_mae import modeling_vit_mae

    path = write(tmp_path, MAE)
    assert configs.read(path).options("pos2d_table") == {
        "rule": "mae", "dim": 768, "grid": [14, 14]
    }
    real = modeling_vit_mae.build_2d_sinusoidal_position_embedding

    def warmer(*args, **kwargs):
        return real(*args, **{**kwargs, "temperature": 100.0})

    monkeypatch.setattr(modeling_vit_mae, "build_2d_sinusoidal_position_embedding", warmer)
    with pytest.raises(UsageError, match="none of backends.grid's rules"):
        configs.read(path).options("pos2d_table")


def test_the_seed_run_refuses_a_vision_preset_in_one_line(capsys):
    import compare

    assert compare.main(["--model", "vit-b-16"]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        "compare.py: error: --model: vit-b-16 is a vision tower's configuration, not a text "
        "model's: check a port at it with compare.py check --kind pos2d_resize, pos2d_table, "
        "rope2d or rope2d_ids"
    ]


@pytest.mark.parametrize(
    "kind, model, refusal",
    [
        ("rope2d", "vit-b-16", "vit's modeling file defines no rotary module the kit runs"),
        ("pos2d_resize", "pixtral-12b", "no class taking PixtralVisionConfig resizes a"),
    ],
)
def test_a_kind_a_preset_refuses_is_said_once(kind, model, refusal, capsys):
    """The config line says what was read; the refusal is the error's alone, as a text
    preset's is."""
    import compare

    assert compare.main(["check", "x.py:f", "--kind", kind, "--model", model]) == 2
    out, err = capsys.readouterr()
    assert out.startswith(f"config {model}: vision tower ") and refusal not in out, out
    assert err.count(refusal) == 1 and err.startswith("compare.py check: error: --model: "), err


def test_qwen2_vl_s_head_width_is_its_rotary_s_not_its_output_width(tmp_path):
    """Qwen2-VL's vision_config names the tower's width embed_dim (1280) and the merger's
    output hidden_size (3584): the head width is what its rotary module turns, 1280 / 16."""
    fields = {
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "vision_config": {
            "depth": 32,
            "embed_dim": 1280,
            "hidden_size": 3584,
            "in_chans": 3,
            "mlp_ratio": 4,
            "num_heads": 16,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "spatial_patch_size": 14,
            "temporal_patch_size": 2,
        },
    }
    config = configs.read(write(tmp_path, fields))
    assert config.options("rope2d") == {"spec": "qwen2-vl", "head_dim": 80}
    assert config.options("rope2d_ids") == {"builder": "merge", "merge": 2}
    assert "head_dim 80 [model code: models/qwen2_vl/modeling_qwen2_vl.py" in config.line()


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"model_type": "vit"}, True),
        ({"model_type": "dinov2", "image_size": 518}, True),
        # text models that patch their input (BLT's bytes, NeoMME's): a vocabulary, no tower
        ({"model_type": "blt"}, False),
        ({"model_type": "neomme"}, False),
        ({"model_type": "vit", "patch_size": 16, "vocab_size": 100}, False),
    ],
)
def test_a_vision_tower_alone_is_a_patch_size_without_a_vocabulary(fields, expected):
    assert vision.alone(fields, True) is expected
