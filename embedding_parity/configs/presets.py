"""Bundled model presets: the config.json fields that bear on the input layer and the rotation,
as each model's published configuration sets them, with where each value comes from.

A preset is read exactly as a config.json is (``embedding_parity.configs.from_fields``), so a
preset and the model's own file give the same contract. The values were read from copies of
each hub file in public repositories (``source`` names the hub file and, where the copy is
not the hub's own, the copy).
"""

HUB = "https://huggingface.co/{}/blob/main/config.json"

PHI3_LONG = [
    1.0700000524520874,
    1.1200000047683716,
    1.149999976158142,
    1.4199999570846558,
    1.5699999332427979,
    1.7999999523162842,
    2.129999876022339,
    2.129999876022339,
    3.009999990463257,
    5.910000324249268,
    6.950000286102295,
    9.070000648498535,
    9.930000305175781,
    10.710000038146973,
    11.130000114440918,
    14.609999656677246,
    15.409998893737793,
    19.809999465942383,
    37.279998779296875,
    38.279998779296875,
    38.599998474121094,
    40.12000274658203,
    46.20000457763672,
    50.940006256103516,
    53.66000747680664,
    54.9373893737793,
    56.89738845825195,
    57.28738784790039,
    59.98738479614258,
    60.86738586425781,
    60.887386322021484,
    61.71739196777344,
    62.91739273071289,
    62.957393646240234,
    63.41739273071289,
    63.8173942565918,
    63.83739471435547,
    63.897396087646484,
    63.93739700317383,
    64.06739807128906,
    64.11434936523438,
    64.12435150146484,
    64.15435028076172,
    64.19435119628906,
    64.24435424804688,
    64.57435607910156,
    64.69000244140625,
    64.76000213623047,
]
PHI3_SHORT = [
    1.1,
    1.1,
    1.1,
    1.3000000000000003,
    1.3500000000000003,
    1.3500000000000003,
    1.4000000000000004,
    1.5500000000000005,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.000000000000001,
    2.0500000000000007,
    2.0500000000000007,
    2.0500000000000007,
    2.0500000000000007,
    2.0500000000000007,
    2.0500000000000007,
    2.1000000000000005,
    2.1000000000000005,
    2.1500000000000004,
    2.25,
    2.25,
    2.25,
    2.25,
    2.25,
    2.3999999999999995,
    2.4499999999999993,
    2.499999999999999,
    2.6999999999999984,
    2.6999999999999984,
    2.7499999999999982,
    2.799999999999998,
    2.8999999999999977,
    3.049999999999997,
]

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
            "qk_nope_head_dim": 128,
            "max_position_embeddings": 163840,
            "rope_theta": 10000.0,
            # not in the hub file: transformers' DeepseekV3Config defaults it to True
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
    "deepseek-v2-lite": {
        "about": "DeepSeek-V2-Lite: YaRN factor 40, mscale_all_dim 0.707 (softmax x1.5896)",
        "fields": {
            "model_type": "deepseek_v2",
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "max_position_embeddings": 163840,
            "rope_theta": 10000,
            "rope_scaling": {
                "beta_fast": 32,
                "beta_slow": 1,
                "factor": 40,
                "mscale": 0.707,
                "mscale_all_dim": 0.707,
                "original_max_position_embeddings": 4096,
                "type": "yarn",
            },
        },
        "source": HUB.format("deepseek-ai/DeepSeek-V2-Lite"),
    },
    "phi-3-mini-128k": {
        "about": "Phi-3 mini 128k: LongRoPE, short factors to 4096 positions, long beyond",
        "fields": {
            "model_type": "phi3",
            "hidden_size": 3072,
            "num_attention_heads": 32,
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "rope_scaling": {
                "type": "longrope",
                "long_factor": PHI3_LONG,
                "short_factor": PHI3_SHORT,
            },
        },
        "source": HUB.format("microsoft/Phi-3-mini-128k-instruct")
        + " (after its July 2024 commit 10d25dfa, llama.cpp PR#8262); the lists as in "
        "t-pranavv/local-rollouts scripts/eval/long_context/eval_long_context.py LONGROPE_PARAMS, "
        "whose ends match the hub file's as quoted",
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
    "gemma-3-4b": {
        "about": "Gemma 3 4B: sliding layers at base 10000; every sixth at 1e6, linear factor 8",
        # the hub file as it is: a multimodal config whose text_config names few fields, the
        # rest (heads, head_dim, both bases, the pattern of 6) Gemma3TextConfig's defaults
        "fields": {
            "model_type": "gemma3",
            "text_config": {
                "hidden_size": 2560,
                "intermediate_size": 10240,
                "model_type": "gemma3_text",
                "num_hidden_layers": 34,
                "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                "sliding_window": 1024,
            },
        },
        "source": HUB.format("google/gemma-3-4b-it") + " (its text_config, vision_config left "
        "out), as quoted in public ports' tests of the file's shape",
    },
    "gemma-3-1b": {
        "about": "Gemma 3 1B: rope_local_base_freq 10000 on 5 of 6 layers, rope_theta 1e6",
        "fields": {
            "model_type": "gemma3_text",
            "hidden_size": 1152,
            "num_attention_heads": 4,
            "head_dim": 256,
            "num_hidden_layers": 26,
            "max_position_embeddings": 32768,
            "pad_token_id": 0,
            "rope_local_base_freq": 10000,
            "rope_scaling": None,
            "rope_theta": 1000000,
            "sliding_window": 512,
            "sliding_window_pattern": 6,
        },
        "source": HUB.format("google/gemma-3-1b-it") + ", as in Liwink/gemma-jax "
        "models/README.md and TensorRT-LLM's GEMMA3_1B_CONFIG test",
    },
    "gemma-4-e2b": {
        "about": "Gemma 4 E2B: heads of 256 at base 10000 on 4 of 5 layers; heads of 512 on "
        "every 5th, a quarter of their frequency slots turning (proportional, base 1e6)",
        "fields": {
            "model_type": "gemma4",
            "text_config": {
                "model_type": "gemma4_text",
                "hidden_size": 1536,
                "num_attention_heads": 8,
                "num_key_value_heads": 1,
                "head_dim": 256,
                "global_head_dim": 512,
                "num_hidden_layers": 35,
                "max_position_embeddings": 131072,
                "sliding_window": 512,
                "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
                "rope_parameters": {
                    "full_attention": {
                        "partial_rotary_factor": 0.25,
                        "rope_theta": 1000000.0,
                        "rope_type": "proportional",
                    },
                    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
                },
            },
        },
        "source": HUB.format("google/gemma-4-E2B-it") + " (text_config), as quoted in public "
        "ports' tests of its shape (larql's gemma4_e2b_arch, anna's Gemma 4 config test); the "
        "rotation per layer type as transformers 5.24's Gemma4TextConfig defaults it",
    },
    "llama-4-scout": {
        "about": "Llama 4 Scout: RoPE (llama3, factor 16) on 3 of 4 layers, NoPE on every 4th",
        "fields": {
            "model_type": "llama4",
            "text_config": {
                "model_type": "llama4_text",
                "hidden_size": 5120,
                "num_attention_heads": 40,
                "head_dim": 128,
                "num_hidden_layers": 48,
                "max_position_embeddings": 10485760,
                "rope_theta": 500000.0,
                "rope_scaling": {
                    "factor": 16.0,
                    "high_freq_factor": 1.0,
                    "low_freq_factor": 1.0,
                    "original_max_position_embeddings": 8192,
                    "rope_type": "llama3",
                },
                # [] in the file: Llama4TextConfig fills a NoPE layer every 4 layers in
                "no_rope_layers": [],
                "attention_chunk_size": 8192,
                "attn_temperature_tuning": True,
                "floor_scale": 8192,
                "attn_scale": 0.1,
            },
        },
        "source": HUB.format("meta-llama/Llama-4-Scout-17B-16E-Instruct") + " (text_config); "
        "rope_scaling and max_position_embeddings as public ports quote the Instruct file, the "
        "rest as the Scout base model's Llama4Config printout",
    },
    "smollm3-3b": {
        "about": "SmolLM3 3B: RoPE at 5e6 on 3 of 4 layers, NoPE on every 4th",
        "fields": {
            "model_type": "smollm3",
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "num_hidden_layers": 36,
            "max_position_embeddings": 65536,
            "pad_token_id": 128004,
            "rope_scaling": None,
            "rope_theta": 5000000.0,
            "no_rope_layer_interval": 4,
            "no_rope_layers": [1, 1, 1, 0] * 9,
            "sliding_window": None,
            "use_sliding_window": False,
        },
        "source": HUB.format("HuggingFaceTB/SmolLM3-3B") + ", as public ports copy its fields "
        "(no_rope_layers: 1 = RoPE, 0 = NoPE, every 4th layer)",
    },
    "command-r7b": {
        "about": "Command R7B (Cohere2): RoPE on the sliding layers only, NoPE on every 4th",
        "fields": {
            "model_type": "cohere2",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "max_position_embeddings": 132096,
            "rope_theta": 50000.0,
            "sliding_window": 4096,
            "sliding_window_pattern": 4,
            "layer_norm_eps": 1e-05,
        },
        "source": HUB.format("CohereForAI/c4ai-command-r7b-12-2024") + "; the fields as a "
        "public port's Command R7B preset table gives them (4096 wide, 32 layers and heads, "
        "head_dim 128, sliding_window_pattern 4, rope_theta 50000)",
    },
    "modernbert-base": {
        "about": "ModernBERT base: global layers (every 3rd) at 160000, local at 10000",
        "fields": {
            "model_type": "modernbert",
            "hidden_size": 768,
            "num_attention_heads": 12,
            "num_hidden_layers": 22,
            "max_position_embeddings": 8192,
            "global_attn_every_n_layers": 3,
            "global_rope_theta": 160000.0,
            "local_rope_theta": 10000.0,
            "local_attention": 128,
            "pad_token_id": 50283,
        },
        "source": HUB.format("answerdotai/ModernBERT-base") + "; the backbone fields as its "
        "fine-tunes' config.json files repeat them (gte-reranker-modernbert-base)",
    },
    "olmo-3-7b": {
        "about": "OLMo 3 7B: YaRN (factor 8) on its full-attention layers only",
        "fields": {
            "model_type": "olmo3",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "max_position_embeddings": 65536,
            "pad_token_id": 100277,
            "vocab_size": 100278,
            "rope_theta": 500000,
            "rope_scaling": {
                "attention_factor": 1.2079441541679836,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "yarn",
            },
            "sliding_window": 4096,
            "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 8,
        },
        "source": HUB.format("allenai/Olmo-3-7B-Think") + ", as public ports and tests copy "
        "it (rope_scaling as given; layer_types three sliding to one full)",
    },
    "qwen2.5-vl-7b": {
        "about": "Qwen2.5-VL 7B: M-RoPE, chunked frequency slots t 16, h 24, w 24",
        # its text fields at the top level, no text_config (Qwen2_5_VLConfig builds it)
        "fields": {
            "model_type": "qwen2_5_vl",
            "hidden_size": 3584,
            "num_attention_heads": 28,
            "num_hidden_layers": 28,
            "max_position_embeddings": 128000,
            "rope_theta": 1000000.0,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
            "vision_config": {
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "tokens_per_second": 2,
            },
        },
        "source": HUB.format("Qwen/Qwen2.5-VL-7B-Instruct") + ", as public ports and "
        "TensorRT-LLM's tests copy it (vision_config: its position fields only)",
    },
    "qwen3-vl-8b": {
        "about": "Qwen3-VL 8B: M-RoPE, interleaved frequency slots t 24, h 20, w 20",
        "fields": {
            "model_type": "qwen3_vl",
            "text_config": {
                "model_type": "qwen3_vl_text",
                "hidden_size": 4096,
                "num_hidden_layers": 36,
                "num_attention_heads": 32,
                "head_dim": 128,
                "max_position_embeddings": 262144,
                "rope_theta": 5000000,
                "rope_scaling": {
                    "mrope_interleaved": True,
                    "mrope_section": [24, 20, 20],
                    "rope_type": "default",
                },
            },
            "vision_config": {"spatial_merge_size": 2, "temporal_patch_size": 2},
        },
        "source": HUB.format("Qwen/Qwen3-VL-8B-Instruct") + " (its text_config, as a public "
        "port's test mirrors hub revision 0c351dd0; vision_config: its position fields only)",
    },
    "glm-4.1v-9b": {
        "about": "GLM-4.1V 9B: M-RoPE chunked t 8, h 12, w 12, GPT-J pairs over half the head",
        "fields": {
            "model_type": "glm4v",
            "text_config": {
                "model_type": "glm4v_text",
                "hidden_size": 4096,
                "num_hidden_layers": 40,
                "num_attention_heads": 32,
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "rope_scaling": {"rope_type": "default", "mrope_section": [8, 12, 12]},
            },
        },
        "source": HUB.format("zai-org/GLM-4.1V-9B-Thinking") + " (its text_config, as a "
        "public port's test of the file gives it)",
    },
    "qwen3.5-27b": {
        "about": "Qwen3.5: M-RoPE interleaved t 11, h 11, w 10 over a quarter of each head",
        # transformers 5.24's Qwen3_5TextConfig, whose defaults document Qwen/Qwen3.5-27B:
        # head_dim 256, partial_rotary_factor 0.25, mrope_section [11, 11, 10] interleaved
        "fields": {
            "model_type": "qwen3_5",
            "text_config": {
                "model_type": "qwen3_5_text",
                "head_dim": 256,
                "rope_parameters": {
                    "mrope_interleaved": True,
                    "mrope_section": [11, 11, 10],
                    "rope_type": "default",
                    "rope_theta": 10000.0,
                    "partial_rotary_factor": 0.25,
                },
            },
        },
        "source": "transformers 5.24 models/qwen3_5/configuration_qwen3_5.py (Qwen3_5TextConfig, "
        "auto_docstring checkpoint Qwen/Qwen3.5-27B) and modeling_qwen3_5.py's default section",
    },
    "llama-2-7b-dynamic": {
        "about": "Llama 2 7B with dynamic NTK scaling, factor 2 (a load-time setting)",
        "fields": {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "rope_scaling": {"type": "dynamic", "factor": 2.0},
        },
        # no model ships it in its config.json: users pass it to from_pretrained
        "source": HUB.format("meta-llama/Llama-2-7b-hf") + " with rope_scaling "
        '{"type": "dynamic", "factor": 2.0} as transformers PR#24653 (which added it) shows it',
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

# facebook/dinov2-large's config.json fields, which both DINOv2 presets read (the rule differs)
DINOV2_L14 = {
    "model_type": "dinov2",
    "hidden_size": 1024,
    "num_attention_heads": 16,
    "image_size": 518,
    "patch_size": 14,
}

# Vision towers (--kind pos2d_resize, rope2d, rope2d_ids): each the hub config.json's fields that
# bear on the tower's positions (its grid, head width, base, registers, merge and window), read
# by transformers' config class; what its code fixes (the resize kernel, the prefix rows, the
# rotation) is read from transformers' modeling file (configs.vision), except where "rule" holds
# a rule transformers does not have, with its source and how transformers' code differs.
VISION_PRESETS = {
    "vit-b-16": {
        "about": "ViT-B/16 at 224: a 14 x 14 table and its CLS row, bicubic to a new size",
        "fields": {
            "model_type": "vit",
            "hidden_size": 768,
            "num_attention_heads": 12,
            "image_size": 224,
            "patch_size": 16,
        },
        "source": HUB.format("google/vit-base-patch16-224"),
    },
    "clip-vit-l-14": {
        "about": "CLIP ViT-L/14 at 224: a 16 x 16 table and its CLS row, bicubic",
        "fields": {
            "model_type": "clip",
            "vision_config": {
                "model_type": "clip_vision_model",
                "hidden_size": 1024,
                "num_attention_heads": 16,
                "image_size": 224,
                "patch_size": 14,
            },
        },
        "source": HUB.format("openai/clip-vit-large-patch14") + " (its vision_config)",
    },
    "siglip-so400m-14-384": {
        "about": "SigLIP so400m/14 at 384: a 27 x 27 table, no CLS row, bicubic",
        "fields": {
            "model_type": "siglip",
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 1152,
                "num_attention_heads": 16,
                "image_size": 384,
                "patch_size": 14,
            },
        },
        "source": HUB.format("google/siglip-so400m-patch14-384") + " (its vision_config)",
    },
    "siglip2-naflex": {
        "about": "SigLIP2 so400m/16 NaFlex: a 16 x 16 table to each image's grid, padded",
        "fields": {
            "model_type": "siglip2",
            "vision_config": {
                "model_type": "siglip2_vision_model",
                "hidden_size": 1152,
                "num_attention_heads": 16,
                "num_patches": 256,
                "patch_size": 16,
            },
        },
        "source": HUB.format("google/siglip2-so400m-patch16-naflex") + " (its vision_config)",
    },
    "dinov2-vit-l-14": {
        "about": "DINOv2 ViT-L/14 as transformers runs it: 37 x 37 and CLS, bicubic size=, float32",
        "fields": DINOV2_L14,
        "source": HUB.format("facebook/dinov2-large"),
    },
    "dinov2-vit-l-14-original": {
        "about": "DINOv2 ViT-L/14 as its own code runs it: scale_factor (new + 0.1) / 37, float32",
        "fields": DINOV2_L14,
        "rule": {
            "kernel": "dinov2-offset",
            "prefix_tokens": 1,
            "compute_dtype": "float32",
            "source": "facebookresearch/dinov2 dinov2/models/vision_transformer.py "
            "interpolate_pos_encoding: pos_embed.float(), F.interpolate(mode='bicubic', "
            "antialias=False, scale_factor=((h0 + 0.1) / M, (w0 + 0.1) / M)) "
            "(interpolate_offset=0.1, interpolate_antialias=False: hubconf.py's vitl14)",
            "differs": "transformers' Dinov2Embeddings passes size=(h0, w0): the same output "
            "grid, sampled at (i + 0.5) * M / (h0 + 0.1) - 0.5 here, (i + 0.5) * M / h0 - 0.5 "
            "there (preset dinov2-vit-l-14)",
        },
        "source": HUB.format("facebook/dinov2-large") + " (the grid); the rule as noted",
    },
    "dinov2-with-registers": {
        "about": "DINOv2 ViT-L/14 with 4 registers: 37 x 37 and CLS, antialiased bicubic, float32",
        "fields": {
            "model_type": "dinov2_with_registers",
            "hidden_size": 1024,
            "num_attention_heads": 16,
            "image_size": 518,
            "patch_size": 14,
            "num_register_tokens": 4,
        },
        "source": HUB.format("facebook/dinov2-with-registers-large"),
    },
    "dinov3-vit-l-16": {
        "about": "DINOv3 ViT-L/16: 2-D RoPE at base 100 on coordinates in [-1, 1], CLS and 4 "
        "registers unturned",
        "fields": {
            "model_type": "dinov3_vit",
            "hidden_size": 1024,
            "num_attention_heads": 16,
            "image_size": 224,
            "patch_size": 16,
            "num_register_tokens": 4,
            "rope_theta": 100.0,
            # a training-time augmentation: its rotary applies it only in training (eval here)
            "pos_embed_rescale": 2.0,
        },
        "source": HUB.format("facebook/dinov3-vitl16-pretrain-lvd1689m"),
    },
    "pixtral-12b": {
        "about": "Pixtral-12B's tower: 2-D RoPE on head_dim 64, even frequencies to rows, odd to "
        "columns",
        "fields": {
            "model_type": "llava",
            "vision_config": {
                "model_type": "pixtral",
                "head_dim": 64,
                "image_size": 1024,
                "patch_size": 16,
                "rope_theta": 10000.0,
            },
        },
        "source": HUB.format("mistral-community/pixtral-12b") + " (its vision_config; "
        "hidden_size 1024 and 16 heads PixtralVisionConfig's defaults, as the file leaves them)",
    },
    "qwen2.5-vl-7b-vision": {
        "about": "Qwen2.5-VL 7B's tower: 2-D RoPE on head_dim 80, merge 2, windows of 4 units",
        "fields": {
            "model_type": "qwen2_5_vl",
            "vision_config": {
                "model_type": "qwen2_5_vl",
                "hidden_size": 1280,
                "num_heads": 16,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "window_size": 112,
            },
        },
        "source": HUB.format("Qwen/Qwen2.5-VL-7B-Instruct") + " (its vision_config)",
    },
    "llama-4-scout-vision": {
        "about": "Llama 4 Scout's tower: 2-D RoPE on head_dim 88 over 24 x 24, its CLS last",
        "fields": {
            "model_type": "llama4",
            "vision_config": {
                "model_type": "llama4_vision_model",
                "hidden_size": 1408,
                "num_attention_heads": 16,
                "image_size": 336,
                "patch_size": 14,
                "rope_theta": 10000,
            },
        },
        "source": HUB.format("meta-llama/Llama-4-Scout-17B-16E-Instruct") + " (its vision_config)",
    },
}
