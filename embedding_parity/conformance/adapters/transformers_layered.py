"""transformers' own rotary code for the models whose layers rotate differently, each layer
treated as the model's attention treats it: f(x, positions, layer), the rope kind's call for a
config with layer types; and for the multimodal models' M-RoPE, f(x, positions (3, T)).

The config is transformers' own config object, built from the bundled preset's fields (its
``from_dict`` and ``get_text_config``, nothing from the hub); the rotary module is the
model's (``Gemma3RotaryEmbedding(config)(x, position_ids, layer_type)`` keeps a buffer per
layer type); which layers rotate is the model's attention's own test, quoted beside each.
A fresh module per call, so that no call depends on the ones before it.
"""

import copy
import functools

import torch
from transformers import CONFIG_MAPPING
from transformers.models.cohere2.modeling_cohere2 import Cohere2RotaryEmbedding
from transformers.models.cohere2.modeling_cohere2 import (
    apply_rotary_pos_emb as apply_cohere2,
)
from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding
from transformers.models.gemma3.modeling_gemma3 import apply_rotary_pos_emb as apply_half
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding
from transformers.models.gemma4.modeling_gemma4 import apply_rotary_pos_emb as apply_gemma4
from transformers.models.glm4v.modeling_glm4v import Glm4vTextRotaryEmbedding
from transformers.models.glm4v.modeling_glm4v import apply_rotary_pos_emb as apply_glm4v
from transformers.models.llama4.modeling_llama4 import (
    Llama4TextRotaryEmbedding,
    apply_rotary_emb,
)
from transformers.models.modernbert.modeling_modernbert import ModernBertRotaryEmbedding
from transformers.models.modernbert.modeling_modernbert import (
    apply_rotary_pos_emb as apply_modernbert,
)
from transformers.models.olmo3.modeling_olmo3 import Olmo3RotaryEmbedding
from transformers.models.olmo3.modeling_olmo3 import apply_rotary_pos_emb as apply_olmo3
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLRotaryEmbedding
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
    apply_rotary_pos_emb as apply_qwen2_5_vl,
)
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding
from transformers.models.qwen3_5.modeling_qwen3_5 import apply_rotary_pos_emb as apply_qwen3_5
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding
from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb as apply_qwen3_vl
from transformers.models.smollm3.modeling_smollm3 import SmolLM3RotaryEmbedding
from transformers.utils import logging

from embedding_parity.configs.presets import PRESETS


def _config(preset: str):
    """transformers' text config object for the bundled ``preset`` (its warnings held back:
    Llama 4's equal low and high frequency factors are the file's, and valid)."""
    fields = copy.deepcopy(PRESETS[preset]["fields"])
    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        return CONFIG_MAPPING[fields["model_type"]].from_dict(fields).get_text_config()
    finally:
        logging.set_verbosity(level)


def _heads(x):
    """x (..., T, d) as (batch 1, heads, T, d), the models' q and k."""
    return x.reshape(-1, *x.shape[-2:])[None]


def _by_layer_type(module, apply, preset: str):
    """f(x, positions, layer): ``module``'s cos and sin for the layer's type, applied by the
    model's own apply_rotary_pos_emb (rotate_half: the half layout)."""
    config = _config(preset)

    def f(x, positions, layer):
        q = _heads(x)
        cos, sin = module(config)(q, positions[None], config.layer_types[layer])
        return apply(q, q, cos, sin)[0].reshape(x.shape)

    return f


gemma_3_4b = _by_layer_type(Gemma3RotaryEmbedding, apply_half, "gemma-3-4b")
modernbert_base = _by_layer_type(ModernBertRotaryEmbedding, apply_modernbert, "modernbert-base")
olmo_3_7b = _by_layer_type(Olmo3RotaryEmbedding, apply_olmo3, "olmo-3-7b")


def _smollm3():
    config = _config("smollm3-3b")

    def f(x, positions, layer):
        if not config.no_rope_layers[layer]:  # SmolLM3Attention: use_rope = no_rope_layers[i]
            return x
        q = _heads(x)
        cos, sin = SmolLM3RotaryEmbedding(config)(q, positions[None])
        return apply_half(q, q, cos, sin)[0].reshape(x.shape)

    return f


def _llama4():
    config = _config("llama-4-scout")

    def f(x, positions, layer):
        if not config.no_rope_layers[layer]:  # Llama4TextAttention: use_rope = no_rope_layers[i]
            return x
        q = _heads(x).transpose(1, 2)  # (1, T, heads, d): Llama 4 rotates before its transpose
        freqs_cis = Llama4TextRotaryEmbedding(config)(q, positions[None])
        return apply_rotary_emb(q, q, freqs_cis)[0].transpose(1, 2).reshape(x.shape)

    return f


def _cohere2():
    config = _config("command-r7b")

    def f(x, positions, layer):
        # Cohere2Attention: sliding_window set on sliding layers, "if self.sliding_window is
        # not None: apply_rotary_pos_emb"
        if config.layer_types[layer] != "sliding_attention":
            return x
        q = _heads(x)
        cos, sin = Cohere2RotaryEmbedding(config)(q, positions[None])
        return apply_cohere2(q, q, cos, sin)[0].reshape(x.shape)

    return f


def _gemma4():
    """Gemma 4: a buffer per layer type, built at the type's own head width
    (config.per_layer_config[layer_type]: 512 on the full-attention layers), applied to one
    tensor at a time (its apply_rotary_pos_emb takes x alone)."""
    config = _config("gemma-4-e2b")

    def f(x, positions, layer):
        q = _heads(x)
        cos, sin = Gemma4TextRotaryEmbedding(config)(q, positions[None], config.layer_types[layer])
        return apply_gemma4(q, cos, sin).reshape(x.shape)

    return f


gemma_4_e2b = _gemma4()
smollm3_3b = _smollm3()
llama_4_scout = _llama4()
command_r7b = _cohere2()


# --- multimodal RoPE: f(x, positions (3, T)), the t, h and w rows ---------------------------


def _multimodal(module, apply, preset: str):
    """f(x, positions): the model's text rotary module at position ids (3, batch 1, T), its
    frequency slots recomposed from the three rows (recomposition_frequencies), applied by the
    model's own apply_rotary_pos_emb."""
    config = _config(preset)

    def f(x, positions):
        q = _heads(x)
        cos, sin = module(config)(q, positions[:, None, :])
        return apply(q, q, cos, sin)[0].reshape(x.shape)

    return f


qwen2_5_vl_7b = _multimodal(Qwen2_5_VLRotaryEmbedding, apply_qwen2_5_vl, "qwen2.5-vl-7b")
qwen3_vl_8b = _multimodal(Qwen3VLTextRotaryEmbedding, apply_qwen3_vl, "qwen3-vl-8b")
glm_4_1v_9b = _multimodal(Glm4vTextRotaryEmbedding, apply_glm4v, "glm-4.1v-9b")
qwen3_5_27b = _multimodal(Qwen3_5TextRotaryEmbedding, apply_qwen3_5, "qwen3.5-27b")


# --- the position builder: f(input_ids, mm_token_type_ids, image_grid_thw, video_grid_thw,
# second_per_grid_ts, attention_mask) -> (position_ids, rope_deltas) -------------------------


@functools.cache
def _qwen2_5_vl_model():
    """A Qwen2_5_VLModel whose position fields are the qwen2.5-vl-7b preset's (its
    vision_config's spatial_merge_size and tokens_per_second) and whose layers are tiny: the
    builder reads only those two."""
    from transformers import Qwen2_5_VLConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    vision = PRESETS["qwen2.5-vl-7b"]["fields"]["vision_config"]
    tiny = {"hidden_size": 16, "intermediate_size": 16, "num_attention_heads": 2}
    config = Qwen2_5_VLConfig(
        text_config={**tiny, "num_key_value_heads": 1, "num_hidden_layers": 1},
        vision_config={
            **tiny,
            "depth": 1,
            "num_heads": 2,
            "out_hidden_size": 16,
            "spatial_merge_size": vision["spatial_merge_size"],
            "tokens_per_second": vision["tokens_per_second"],
        },
    )
    return Qwen2_5_VLModel(config).eval()


def qwen2_5_vl_rope_index(input_ids, types, images, videos, seconds, mask):
    """Qwen2_5_VLModel.get_rope_index, the grids and seconds None where the batch has none."""
    return _qwen2_5_vl_model().get_rope_index(
        input_ids,
        types,
        images if len(images) else None,
        videos if len(videos) else None,
        seconds if len(seconds) else None,
        mask,
    )


@functools.cache
def _split_frames_model(name: str):
    """Qwen3VLModel or Glm4vModel with tiny layers and their class's vision_config (the presets
    give none): the builder reads only spatial_merge_size."""
    from transformers import Glm4vConfig, Qwen3VLConfig
    from transformers.models.glm4v.modeling_glm4v import Glm4vModel
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

    config_class, model_class = {
        "qwen3_vl": (Qwen3VLConfig, Qwen3VLModel),
        "glm4v": (Glm4vConfig, Glm4vModel),
    }[name]
    tiny = {"hidden_size": 16, "intermediate_size": 16, "num_attention_heads": 2}
    text = {**tiny, "num_key_value_heads": 1, "num_hidden_layers": 1}
    vision = {**tiny, "depth": 1, "num_heads": 2, "out_hidden_size": 16}
    if name == "qwen3_vl":  # its deepstack taps no layer of the tiny tower
        text["head_dim"] = 8
        text["rope_parameters"] = {"rope_type": "default", "mrope_section": [2, 1, 1]}
        vision["deepstack_visual_indexes"] = []
    return model_class(config_class(text_config=text, vision_config=vision)).eval()


def _split_frames_rope_index(name: str):
    """The model's get_rope_index (no second_per_grid_ts: it splits each video into frames)."""

    def f(input_ids, types, images, videos, seconds, mask):
        return _split_frames_model(name).get_rope_index(
            input_ids,
            types,
            images if len(images) else None,
            videos if len(videos) else None,
            mask,
        )

    return f


qwen3_vl_rope_index = _split_frames_rope_index("qwen3_vl")
glm4v_rope_index = _split_frames_rope_index("glm4v")


# --- the scale of q . k: f(positions, layer) -> (T,) float64 ---------------------------------


def _deepseek_scale(preset: str):
    """DeepSeek's softmax scale, as its attention sets it: yarn_apply_mscale(rope_parameters,
    qk_head_dim**-0.5), the same at every position and layer."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    config = _config(preset)
    width = config.qk_nope_head_dim + config.qk_rope_head_dim
    scale = yarn_apply_mscale(config.rope_parameters, width ** (-0.5))

    def f(positions, layer):
        return torch.full(positions.shape, scale, dtype=torch.float64)

    return f


class _Seen:
    """A cache that has seen ``count`` tokens: what Llama 4's attention counts positions from
    (arange(T) + cache.get_seq_length()), keys and values passed through."""

    def __init__(self, count: int):
        self.count = count

    def get_seq_length(self, layer_idx=0):
        return self.count

    def update(self, key, value, layer_idx, **kwargs):
        return key, value


def _llama4_scale():
    """Llama 4's factor of q . k at a position and layer, from Llama4TextAttention itself: the
    query and ``scaling`` its forward hands the attention function (captured through a
    registered one), the query with temperature tuning on divided by the same with it off (an
    identity q_proj on ones: the ratio is the temperature as the module computes it, 1 where it
    does not tune). One token a call, after a cache of p tokens: the position the module gives
    it. The projections' widths, which the scale does not read, made one head wide."""
    from transformers import AttentionInterface
    from transformers.models.llama4.modeling_llama4 import Llama4TextAttention

    captured = {}

    def capture(module, query, key, value, attention_mask, scaling=None, **kwargs):
        captured["query"], captured["scaling"] = query.detach().clone(), scaling
        return torch.zeros_like(query).transpose(1, 2), None

    AttentionInterface.register("embedding_parity_capture", capture)
    config = _config("llama-4-scout")
    config.hidden_size, config.num_attention_heads = config.head_dim, 1
    config.num_key_value_heads = 1
    config._attn_implementation = "embedding_parity_capture"

    def query(attention, position, tuned):
        attention.attn_temperature_tuning = tuned
        ones = torch.ones(1, 1, config.head_dim)
        turn = torch.ones(1, 1, config.head_dim // 2, dtype=torch.complex64)  # RoPE at angle 0
        attention(ones, turn, None, cache=_Seen(position))
        return captured["query"][0, 0, 0, 0].item()

    def f(positions, layer):
        attention = Llama4TextAttention(config, int(layer))
        with torch.no_grad():
            attention.q_proj.weight.copy_(torch.eye(config.head_dim))
            scales = [
                query(attention, int(p), True) / query(attention, int(p), False) for p in positions
            ]
        return torch.tensor(scales, dtype=torch.float64) * captured["scaling"]

    return f


llama_4_scout_scale = _llama4_scale()
deepseek_v3_scale = _deepseek_scale("deepseek-v3")
deepseek_v2_lite_scale = _deepseek_scale("deepseek-v2-lite")
