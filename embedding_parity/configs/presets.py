"""Bundled model presets: the config.json fields that bear on the input layer and the rotation,
as each model's published configuration sets them, with where each value comes from.

A preset is read exactly as a config.json is (``embedding_parity.configs.from_fields``), so a
preset and the model's own file give the same contract. Phi-3-mini-128k is left out: its
48-value short_factor and long_factor lists could not be sourced from this machine, and a
preset must not carry numbers without a source.
"""

HUB = "https://huggingface.co/{}/blob/main/config.json"

PRESETS = {
    "llama-3.1-8b": {
        "about": "Llama 3.1 8B: llama3 rule, factor 8",
        "fields": {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "head_dim": 128,
            "max_position_embeddings": 131072,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        },
        "source": HUB.format("meta-llama/Llama-3.1-8B"),
    },
    "llama-3.2-1b": {
        "about": "Llama 3.2 1B: llama3 rule, factor 32",
        "fields": {
            "model_type": "llama",
            "hidden_size": 2048,
            "num_attention_heads": 32,
            "head_dim": 64,
            "max_position_embeddings": 131072,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        },
        "source": HUB.format("meta-llama/Llama-3.2-1B"),
    },
    "qwen2.5-7b": {
        "about": "Qwen2.5 7B Instruct with YaRN factor 4, as its model card adds for 128k",
        "fields": {
            "model_type": "qwen2",
            "hidden_size": 3584,
            "num_attention_heads": 28,
            "max_position_embeddings": 32768,
            "rope_theta": 1000000.0,
            # the model card's "Processing Long Texts" block, added to config.json
            "rope_scaling": {
                "type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
            },
        },
        "source": HUB.format("Qwen/Qwen2.5-7B-Instruct")
        + "; rope_scaling: https://huggingface.co/Qwen/Qwen2.5-7B-Instruct#processing-long-texts",
    },
    "deepseek-v3": {
        "about": "DeepSeek-V3: YaRN factor 40 with mscale = mscale_all_dim, interleaved pairs",
        "fields": {
            "model_type": "deepseek_v3",
            "hidden_size": 7168,
            "num_attention_heads": 128,
            "qk_rope_head_dim": 64,
            "max_position_embeddings": 163840,
            "rope_theta": 10000.0,
            "rope_interleave": True,
            "rope_scaling": {
                "type": "yarn",
                "factor": 40.0,
                "beta_fast": 32,
                "beta_slow": 1,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "original_max_position_embeddings": 4096,
            },
        },
        "source": HUB.format("deepseek-ai/DeepSeek-V3"),
    },
    "gpt-oss-20b": {
        "about": "gpt-oss 20B: YaRN factor 32 with truncate false",
        "fields": {
            "model_type": "gpt_oss",
            "hidden_size": 2880,
            "num_attention_heads": 64,
            "head_dim": 64,
            "max_position_embeddings": 131072,
            "rope_theta": 150000.0,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "original_max_position_embeddings": 4096,
                "truncate": False,
            },
        },
        "source": HUB.format("openai/gpt-oss-20b"),
    },
    "gpt-neox-20b": {
        "about": "GPT-NeoX 20B: the first quarter of each head rotated (rotary_pct 0.25)",
        "fields": {
            "model_type": "gpt_neox",
            "hidden_size": 6144,
            "num_attention_heads": 64,
            "max_position_embeddings": 2048,
            "rotary_emb_base": 10000,
            "rotary_pct": 0.25,
        },
        "source": HUB.format("EleutherAI/gpt-neox-20b"),
    },
    "phi-2": {
        "about": "Phi-2: the first 0.4 of each head rotated",
        "fields": {
            "model_type": "phi",
            "hidden_size": 2560,
            "num_attention_heads": 32,
            "max_position_embeddings": 2048,
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.4,
        },
        "source": HUB.format("microsoft/phi-2"),
    },
    "gpt-j-6b": {
        "about": "GPT-J 6B: the first 64 of 256 dims rotated, interleaved pairs",
        "fields": {
            "model_type": "gptj",
            "n_embd": 4096,
            "n_head": 16,
            "n_positions": 2048,
            "rotary_dim": 64,
        },
        "source": HUB.format("EleutherAI/gpt-j-6b"),
    },
    "gemma-2-2b": {
        "about": "Gemma 2 2B: token rows times sqrt(2304) = 48 (exact in every dtype)",
        "fields": {
            "model_type": "gemma2",
            "hidden_size": 2304,
            "num_attention_heads": 8,
            "head_dim": 256,
            "max_position_embeddings": 8192,
            "rope_theta": 10000.0,
        },
        "source": HUB.format("google/gemma-2-2b"),
    },
    "gemma-7b": {
        "about": "Gemma 7B: token rows times sqrt(3072), 55.5 in bfloat16",
        "fields": {
            "model_type": "gemma",
            "hidden_size": 3072,
            "num_attention_heads": 16,
            "head_dim": 256,
            "max_position_embeddings": 8192,
            "rope_theta": 10000.0,
        },
        "source": HUB.format("google/gemma-7b"),
    },
    "opt-125m": {
        "about": "OPT 125M: padding-aware learned positions, offset 2",
        "fields": {
            "model_type": "opt",
            "hidden_size": 768,
            "num_attention_heads": 12,
            "max_position_embeddings": 2048,
            "pad_token_id": 1,
        },
        "source": HUB.format("facebook/opt-125m"),
    },
    "roberta-base": {
        "about": "RoBERTa base: positions from padding_idx + 1, pads on padding_idx",
        "fields": {
            "model_type": "roberta",
            "hidden_size": 768,
            "num_attention_heads": 12,
            "max_position_embeddings": 514,
            "pad_token_id": 1,
            "type_vocab_size": 1,
            "layer_norm_eps": 1e-05,
            "position_embedding_type": "absolute",
        },
        "source": HUB.format("FacebookAI/roberta-base"),
    },
    "bart-base": {
        "about": "BART base: learned positions offset by 2",
        "fields": {
            "model_type": "bart",
            "d_model": 768,
            "max_position_embeddings": 1024,
            "pad_token_id": 1,
            "scale_embedding": False,
        },
        "source": HUB.format("facebook/bart-base"),
    },
    "bert-base-uncased": {
        "about": "BERT base: (word + token type) + position, then LayerNorm",
        "fields": {
            "model_type": "bert",
            "hidden_size": 768,
            "num_attention_heads": 12,
            "max_position_embeddings": 512,
            "pad_token_id": 0,
            "type_vocab_size": 2,
            "layer_norm_eps": 1e-12,
            "position_embedding_type": "absolute",
        },
        "source": HUB.format("google-bert/bert-base-uncased"),
    },
}
