"""What transformers' config class for each model type the kit names takes when a config.json
leaves a field out: the kit's own reading (``hf.kit_reading``, where transformers is not
installed) fills a missing field from here, as the class's defaults would.

Transcribed from transformers 5.24.0, ``src/transformers/models/<type>/configuration_<type>.py``
(the class named beside each entry); ``tests/test_config_reading.py`` holds every entry equal
to the class's own defaults wherever transformers is installed. A model type not listed is
refused by the kit's reading (its class's defaults would decide what the file leaves out).

Besides the fields themselves: ``aliases`` (the class's ``attribute_map``: the file's name for
a field), ``rope_theta_key`` and ``partial_key`` (the file's names for the base and the rotated
share where the class reads others than ``rope_theta`` and ``partial_rotary_factor``),
``rope_parameters`` (the class's rotation when the file gives none), ``no_rope`` (the class
keeps no rope settings: the model rotates at a fixed base 10000).
"""

# The fields a reading holds besides model_type and rope (the rope dict, standardised): what
# the kit reads off transformers' config object, or fills from here.
PLAIN = (
    "hidden_size",
    "num_attention_heads",
    "head_dim",
    "qk_rope_head_dim",
    "rotary_dim",
    "rope_interleave",
    "max_position_embeddings",
    "pad_token_id",
    "type_vocab_size",
    "layer_norm_eps",
    "position_embedding_type",
    "scale_embedding",
    "num_hidden_layers",
    "qk_nope_head_dim",  # DeepSeek: q . k over nope + rope dims, its softmax scale's width
    "attn_temperature_tuning",  # Llama 4: its NoPE layers' query temperature
    "floor_scale",
    "attn_scale",
    "sliding_window",  # Cohere2 rotates its sliding-window layers: none where it is null
    "embedding_multiplier",  # Granite, Falcon-H1: the input embeddings' scale
    "scale_emb",  # MiniCPM: the token rows' scale
)

GPT2_NAMES = {  # GPT2Config's and GPTJConfig's attribute_map
    "hidden_size": "n_embd",
    "num_attention_heads": "n_head",
    "max_position_embeddings": "n_positions",
}
ROBERTA = {  # RobertaConfig, XLMRobertaConfig, CamembertConfig: the same defaults
    "hidden_size": 768,
    "num_attention_heads": 12,
    "max_position_embeddings": 512,
    "pad_token_id": 1,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
}
BART = {  # BartConfig, MBartConfig
    "hidden_size": 1024,
    "num_attention_heads": 16,
    "max_position_embeddings": 1024,
    "pad_token_id": 1,
    "scale_embedding": False,
    "aliases": {"hidden_size": "d_model", "num_attention_heads": "encoder_attention_heads"},
}

QWEN2_VL = {  # Qwen2VLTextConfig, Qwen2_5_VLTextConfig: the same defaults
    "hidden_size": 8192,
    "num_attention_heads": 64,
    "max_position_embeddings": 32768,
    "num_hidden_layers": 80,
    "rope_theta": 1000000.0,
}

DEFAULTS = {
    # models/llama/configuration_llama.py, LlamaConfig
    "llama": {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 2048},
    # models/qwen2/configuration_qwen2.py, Qwen2Config
    "qwen2": {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 32768},
    # models/deepseek_v3/configuration_deepseek_v3.py, DeepseekV3Config (head_dim is
    # qk_rope_head_dim there)
    "deepseek_v3": {
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "rope_interleave": True,
        "max_position_embeddings": 4096,
    },
    # models/deepseek_v2/configuration_deepseek_v2.py, DeepseekV2Config (pairs (2i, 2i+1):
    # its apply_rotary_emb views them as complex numbers)
    "deepseek_v2": {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "max_position_embeddings": 2048,
    },
    # models/phi3/configuration_phi3.py, Phi3Config: its own original_max_position_embeddings
    # field wins over the rope dict's; "yarn" and "su" are read as "longrope"
    "phi3": {
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 4096,
        "partial_rotary_factor": 1.0,
        "pad_token_id": 32000,
    },
    # models/gpt_oss/configuration_gpt_oss.py, GptOssConfig
    "gpt_oss": {
        "hidden_size": 2880,
        "num_attention_heads": 64,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
        "rope_theta": 150000.0,
    },
    # models/gpt_neox/configuration_gpt_neox.py, GPTNeoXConfig
    "gpt_neox": {
        "hidden_size": 6144,
        "num_attention_heads": 64,
        "max_position_embeddings": 2048,
        "layer_norm_eps": 1e-05,
        "partial_rotary_factor": 0.25,
        "rope_theta_key": "rotary_emb_base",
        "partial_key": "rotary_pct",
    },
    # models/phi/configuration_phi.py, PhiConfig
    "phi": {
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "layer_norm_eps": 1e-05,
        "partial_rotary_factor": 0.5,
    },
    # models/gptj/configuration_gptj.py, GPTJConfig (modeling_gptj.py rotates at base 10000)
    "gptj": {
        "hidden_size": 4096,
        "num_attention_heads": 16,
        "rotary_dim": 64,
        "max_position_embeddings": 2048,
        "aliases": GPT2_NAMES,
        "no_rope": True,
    },
    # models/gemma/configuration_gemma.py, GemmaConfig
    "gemma": {
        "hidden_size": 3072,
        "num_attention_heads": 16,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "pad_token_id": 0,
    },
    # models/gemma2/configuration_gemma2.py, Gemma2Config
    "gemma2": {
        "hidden_size": 2304,
        "num_attention_heads": 8,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "pad_token_id": 0,
    },
    # models/gemma3/configuration_gemma3.py, Gemma3TextConfig (its bases, per layer type, are
    # in layers.BY_TYPE, as are ModernBERT's and OLMo 3's)
    "gemma3_text": {
        "hidden_size": 2304,
        "num_attention_heads": 8,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "pad_token_id": 0,
        "num_hidden_layers": 26,
    },
    # models/gemma4/configuration_gemma4.py, Gemma4TextConfig (its global_head_dim and its
    # rotation per layer type are in layers.LAYER_HEAD_DIM and layers.ROPE_BY_TYPE)
    "gemma4_text": {
        "hidden_size": 2304,
        "num_attention_heads": 8,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "pad_token_id": 0,
        "num_hidden_layers": 30,
    },
    # models/smollm3/configuration_smollm3.py, SmolLM3Config
    "smollm3": {
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "max_position_embeddings": 32768,
        "pad_token_id": 128004,
        "num_hidden_layers": 36,
        "rope_theta": 2000000.0,
    },
    # models/llama4/configuration_llama4.py, Llama4TextConfig
    "llama4_text": {
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "num_hidden_layers": 48,
        "rope_theta": 500000.0,
        "attn_temperature_tuning": True,
        "floor_scale": 8192,
        "attn_scale": 0.1,
    },
    # models/cohere2/configuration_cohere2.py, Cohere2Config (head_dim always hidden_size //
    # num_attention_heads: its __post_init__ sets it over the file's)
    "cohere2": {
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "max_position_embeddings": 8192,
        "pad_token_id": 0,
        "layer_norm_eps": 1e-05,
        "num_hidden_layers": 40,
        "sliding_window": 4096,
    },
    # models/modernbert/configuration_modernbert.py, ModernBertConfig
    "modernbert": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "max_position_embeddings": 8192,
        "pad_token_id": 50283,
        "num_hidden_layers": 22,
    },
    # models/olmo3/configuration_olmo3.py, Olmo3Config
    "olmo3": {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "pad_token_id": 1,
        "num_hidden_layers": 32,
    },
    # The multimodal models' text configs (hf.MROPE: their rotation of (3, T) positions):
    # models/qwen2_vl/configuration_qwen2_vl.py, Qwen2VLTextConfig
    "qwen2_vl_text": QWEN2_VL,
    # models/qwen2_5_vl/configuration_qwen2_5_vl.py, Qwen2_5_VLTextConfig
    "qwen2_5_vl_text": QWEN2_VL,
    # models/qwen3_vl/configuration_qwen3_vl.py, Qwen3VLTextConfig
    "qwen3_vl_text": {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 128000,
        "num_hidden_layers": 32,
        "rope_theta": 500000.0,
    },
    # models/glm4v/configuration_glm4v.py, Glm4vTextConfig
    "glm4v_text": {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 32768,
        "num_hidden_layers": 40,
    },
    # models/qwen3_5/configuration_qwen3_5.py, Qwen3_5TextConfig
    "qwen3_5_text": {
        "hidden_size": 4096,
        "num_attention_heads": 16,
        "head_dim": 256,
        "max_position_embeddings": 32768,
        "num_hidden_layers": 32,
        "partial_rotary_factor": 0.25,
    },
    # models/opt/configuration_opt.py, OPTConfig
    "opt": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "max_position_embeddings": 2048,
        "pad_token_id": 1,
    },
    # models/roberta/, xlm_roberta/, camembert/configuration_*.py
    "roberta": ROBERTA,
    "xlm-roberta": ROBERTA,
    "camembert": ROBERTA,
    # models/bart/, mbart/configuration_*.py
    "bart": BART,
    "mbart": BART,
    # models/bert/configuration_bert.py, BertConfig
    "bert": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "max_position_embeddings": 512,
        "pad_token_id": 0,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
    },
    # models/gpt2/configuration_gpt2.py, GPT2Config
    "gpt2": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "max_position_embeddings": 1024,
        "aliases": GPT2_NAMES,
    },
}

# Multimodal model types whose text_config, without a model_type of its own, is read as this
# text model type's (models/gemma3/configuration_gemma3.py, Gemma3Config; models/llama4/
# configuration_llama4.py, Llama4Config).
TEXT_TYPES = {
    "gemma3": "gemma3_text",
    "gemma4": "gemma4_text",
    "llama4": "llama4_text",
    "qwen2_vl": "qwen2_vl_text",
    "qwen2_5_vl": "qwen2_5_vl_text",
    "qwen3_vl": "qwen3_vl_text",
    "glm4v": "glm4v_text",
    "qwen3_5": "qwen3_5_text",
}
# Of those, the ones whose config.json may give the text model's fields at its top level, with
# no text_config (Qwen2VLConfig, Qwen2_5_VLConfig build it from them).
FLAT_TEXT = ("qwen2_vl", "qwen2_5_vl")
