"""The matrix: the battery run on the implementations people use, each row in its own worker.

Every row names its library's installed version (read from the package metadata, without
importing it). Rows whose library is not installed, or whose kind's reference needs a package
that is not (gguf for quantized_lookup), are reported as missing, never dropped: each names the
package and what adds it, and the other rows run."""

from __future__ import annotations

import contextlib
import fnmatch
import re
from dataclasses import dataclass, field, replace

from embedding_parity import configs, outputs
from embedding_parity.conformance import runner
from embedding_parity.conformance.kinds import KINDS
from embedding_parity.conformance.kinds.scaled_inputs import MODELS
from embedding_parity.conformance.paths import PATHS
from embedding_parity.conformance.process import Worker
from embedding_parity.conformance.report import ACCEPTED
from embedding_parity.conformance.versions import missing, not_installed, versions
from embedding_parity.usage import UsageError

ADAPTERS = "embedding_parity.conformance.adapters"


@dataclass(frozen=True)
class Row:
    name: str
    packages: tuple[str, ...]  # whose versions the row reports
    target: str  # module:function under ADAPTERS
    kind: str
    framework: str
    env: dict = field(default_factory=dict, hash=False)
    preset: str | None = None  # the bundled model configuration the kind's cases follow
    through: str | None = None  # the production path it runs along (paths.PATHS); None: eager
    only: tuple[str, ...] = ()  # the checks it runs, by name or prefix; () for all
    layer: str | None = None  # the preset's layer type it rotates as (rope); None: every type
    options: dict | None = None  # the kind's options where no preset gives them


def _keras(backend: str) -> dict:
    """Keras's backend; on TensorFlow its C++ log off too (each gather that raises logs a
    warning), so that TensorFlow's own rows and Keras's on it share one worker."""
    quiet = {"TF_CPP_MIN_LOG_LEVEL": "3"} if backend == "tensorflow" else {}
    return {"KERAS_BACKEND": backend, **quiet}


def _suite(backend: str) -> dict:
    return {"EMBEDDING_PARITY_BACKEND": backend}


# The models whose input scaling the matrix checks, by rule (kinds.scaled_inputs.MODELS)
SCALED_MODELS = {
    "granite": "GraniteModel",
    "falcon_h1": "FalconH1Model",
    "minicpm": "MiniCPM3Model",
    "gemma": "Gemma3TextModel",
}


def _scaled(rule: str) -> dict:
    return {"embedding_scale": {"rule": rule, "value": MODELS[rule]["value"]}}


def _configured(name: str, target: str, kind: str, preset: str, packages=("transformers", "torch")):
    return Row(name, packages, target, kind, "torch", preset=preset)


CONFIGURED = [
    *(
        _configured(
            f"transformers rotary at {preset}",
            f"transformers_configured:{function}",
            "rope",
            preset,
        )
        for preset, function in (
            ("llama-3.1-8b", "llama_3_1_8b"),
            ("llama-3.2-1b", "llama_3_2_1b"),
            ("qwen2.5-7b", "qwen2_5_7b"),
            ("deepseek-v3", "deepseek_v3"),
            ("gpt-oss-20b", "gpt_oss_20b"),
            ("phi-3-mini-128k", "phi_3_mini_128k"),
            ("gpt-neox-20b", "gpt_neox_20b"),
            ("phi-2", "phi_2"),
            ("llama-2-7b-dynamic", "llama_2_7b_dynamic"),
        )
    ),
    # the models whose layers rotate differently: each layer as the model's attention rotates it
    *(
        _configured(
            f"transformers {module} at {preset}",
            f"transformers_layered:{function}",
            "rope",
            preset,
        )
        for module, preset, function in (
            ("Gemma3RotaryEmbedding", "gemma-3-4b", "gemma_3_4b"),
            ("ModernBertRotaryEmbedding", "modernbert-base", "modernbert_base"),
            ("Olmo3RotaryEmbedding", "olmo-3-7b", "olmo_3_7b"),
            ("SmolLM3 rotary and no_rope_layers", "smollm3-3b", "smollm3_3b"),
            ("Llama 4 rotary and no_rope_layers", "llama-4-scout", "llama_4_scout"),
            ("Cohere2 rotary on sliding layers", "command-r7b", "command_r7b"),
            ("Gemma4TextRotaryEmbedding", "gemma-4-e2b", "gemma_4_e2b"),
            # M-RoPE: f(x, positions (3, T))
            ("Qwen2_5_VLRotaryEmbedding", "qwen2.5-vl-7b", "qwen2_5_vl_7b"),
            ("Qwen3VLTextRotaryEmbedding", "qwen3-vl-8b", "qwen3_vl_8b"),
            ("Glm4vTextRotaryEmbedding", "glm-4.1v-9b", "glm_4_1v_9b"),
            ("Qwen3_5TextRotaryEmbedding", "qwen3.5-27b", "qwen3_5_27b"),
        )
    ),
    _configured(
        "torchtune Llama3ScaledRoPE at llama-3.2-1b",
        "torchtune_layers:llama3_scaled_rope",
        "rope",
        "llama-3.2-1b",
        ("torchtune", "torch"),
    ),
    Row(
        "keras-hub RotaryEmbedding linear at gemma-3-4b full_attention (jax)",
        ("keras-hub", "keras"),
        "keras_hub_layers:rotary_linear_gemma_3_4b",
        "rope",
        "jax",
        _keras("jax"),
        "gemma-3-4b",
        layer="full_attention",
    ),
    Row(
        "keras-hub Gemma3Backbone's layers at gemma-3-4b (jax)",
        ("keras-hub", "keras", "transformers"),  # its converter reads transformers' config
        "keras_hub_layers:gemma3_backbone_gemma_3_4b",
        "rope",
        "jax",
        _keras("jax"),
        "gemma-3-4b",
    ),
    *(
        Row(
            f"keras-hub {layer} at {preset} (jax)",
            ("keras-hub", "keras"),
            f"keras_hub_layers:{function}",
            "rope",
            "jax",
            _keras("jax"),
            preset,
        )
        for layer, preset, function in (
            ("RotaryEmbedding dynamic", "llama-2-7b-dynamic", "rotary_dynamic_llama_2_7b"),
            ("RotaryEmbedding yarn", "qwen2.5-7b", "rotary_yarn_qwen2_5_7b"),
            ("LlamaRotaryEmbedding", "llama-3.2-1b", "llama3_rotary"),
            ("Phi3SuScaledRotaryEmbedding", "phi-3-mini-128k", "phi3_rotary"),
            (
                "Phi3SuScaledRotaryEmbedding from a start",
                "phi-3-mini-128k",
                "phi3_rotary_from_start",
            ),
        )
    ),
    Row("MLX nn.RoPE (mx.fast.rope)", ("mlx", "mlx-cpu"), "mlx_layers:rope", "rope", "numpy"),
    *(
        Row(
            f"mlx-lm initialize_rope at {preset}",
            ("mlx-lm", "mlx"),
            f"mlx_layers:{function}",
            "rope",
            "numpy",
            preset=preset,
        )
        for preset, function in (
            ("llama-3.2-1b", "llama_3_2_1b"),
            ("qwen2.5-7b", "qwen2_5_7b"),
            ("gpt-oss-20b", "gpt_oss_20b"),
            ("phi-3-mini-128k", "phi_3_mini_128k"),
            ("llama-2-7b-dynamic", "llama_2_7b_dynamic"),
            ("gpt-neox-20b", "gpt_neox_20b"),
        )
    ),
    Row(
        "mlx-lm initialize_rope at gemma-3-4b full_attention",
        ("mlx-lm", "mlx"),
        "mlx_layers:gemma_3_4b",
        "rope",
        "numpy",
        preset="gemma-3-4b",
        layer="full_attention",
    ),
    # mlx-lm's model files: each layer's rotation as its Attention builds it
    *(
        Row(
            f"mlx-lm {model} Attention rope at {preset}",
            ("mlx-lm", "mlx"),
            f"mlx_layers:{function}",
            "rope",
            "numpy",
            preset=preset,
        )
        for model, preset, function in (
            ("gemma3_text", "gemma-3-4b", "gemma_3_4b_layers"),
            ("gemma4_text", "gemma-4-e2b", "gemma_4_e2b"),
            ("llama4", "llama-4-scout", "llama_4_scout"),
            ("qwen3_vl (its text model)", "qwen3-vl-8b", "qwen3_vl_8b"),
        )
    ),
    # the position builders and the scalars around the rotation, each the model's own code
    *(
        _configured(
            f"transformers {what} at {preset}", f"transformers_layered:{function}", kind, preset
        )
        for what, kind, preset, function in (
            (
                "Qwen2_5_VLModel.get_rope_index",
                "mrope_positions",
                "qwen2.5-vl-7b",
                "qwen2_5_vl_rope_index",
            ),
            (
                "Qwen3VLModel.get_rope_index",
                "mrope_positions",
                "qwen3-vl-8b",
                "qwen3_vl_rope_index",
            ),
            ("Glm4vModel.get_rope_index", "mrope_positions", "glm-4.1v-9b", "glm4v_rope_index"),
            ("DeepSeek softmax scale", "attention_scale", "deepseek-v3", "deepseek_v3_scale"),
            (
                "DeepSeek softmax scale",
                "attention_scale",
                "deepseek-v2-lite",
                "deepseek_v2_lite_scale",
            ),
            (
                "Llama4TextAttention temperature",
                "attention_scale",
                "llama-4-scout",
                "llama_4_scout_scale",
            ),
        )
    ),
    _configured(
        "transformers Gemma scaled embedding at gemma-7b",
        "transformers_configured:gemma_embedding",
        "lookup",
        "gemma-7b",
    ),
    _configured(
        "transformers OPT position ids",
        "transformers_configured:opt_positions",
        "position_ids",
        "opt-125m",
    ),
    Row(
        "transformers DataCollatorWithFlattening at roberta-base",
        ("transformers",),
        "transformers_layers:flattening_collator",
        "packed_positions",
        "numpy",
        preset="roberta-base",
    ),
    _configured(
        "transformers RoBERTa position ids",
        "transformers_configured:roberta_positions",
        "position_ids",
        "roberta-base",
    ),
    _configured(
        "transformers BART position ids",
        "transformers_configured:bart_positions",
        "position_ids",
        "bart-base",
    ),
    _configured(
        "transformers BertEmbeddings (MiniLM's config)",
        "transformers_configured:bert_embeddings",
        "bert",
        "bert-base-uncased",
    ),
]

# The serving engines' own code (engines.py): each in a worker of its own, where the engine's
# stand-in modules live
VLLM = {"EMBEDDING_PARITY_ENGINE": "vllm"}
SGLANG = {"EMBEDDING_PARITY_ENGINE": "sglang"}
GGML = {"GGML_NO_BACKTRACE": "1"}
ENGINES = [
    Row("vLLM get_rope", ("vllm", "torch"), "vllm_layers:rope", "rope", "torch", VLLM),
    *(
        Row(
            f"vLLM get_rope at {preset}",
            ("vllm", "torch"),
            f"vllm_layers:{function}",
            "rope",
            "torch",
            VLLM,
            preset,
        )
        for preset, function in (
            ("llama-3.2-1b", "llama_3_2_1b"),
            ("qwen2.5-7b", "qwen2_5_7b"),
            ("gpt-oss-20b", "gpt_oss_20b"),
            ("deepseek-v3", "deepseek_v3"),
            ("phi-3-mini-128k", "phi_3_mini_128k"),
            ("gpt-neox-20b", "gpt_neox_20b"),
            ("phi-2", "phi_2"),
            ("gpt-j-6b", "gpt_j_6b"),
            ("llama-2-7b-dynamic", "llama_2_7b_dynamic"),
            ("qwen2.5-vl-7b", "qwen2_5_vl_7b"),
            ("qwen3-vl-8b", "qwen3_vl_8b"),
        )
    ),
    Row(
        "vLLM get_rope at gemma-4-e2b full_attention",
        ("vllm", "torch"),
        "vllm_layers:gemma_4_e2b_full",
        "rope",
        "torch",
        VLLM,
        "gemma-4-e2b",
        layer="full_attention",
    ),
    Row("SGLang get_rope", ("sglang", "torch"), "sglang_layers:rope", "rope", "torch", SGLANG),
    *(
        Row(
            f"SGLang get_rope at {preset}",
            ("sglang", "torch"),
            f"sglang_layers:{function}",
            "rope",
            "torch",
            SGLANG,
            preset,
        )
        for preset, function in (
            ("llama-3.2-1b", "llama_3_2_1b"),
            ("qwen2.5-7b", "qwen2_5_7b"),
            ("gpt-oss-20b", "gpt_oss_20b"),
            ("phi-3-mini-128k", "phi_3_mini_128k"),
            ("gpt-neox-20b", "gpt_neox_20b"),
            ("gpt-j-6b", "gpt_j_6b"),
            ("llama-2-7b-dynamic", "llama_2_7b_dynamic"),
            ("qwen2.5-vl-7b", "qwen2_5_vl_7b"),
            ("qwen3-vl-8b", "qwen3_vl_8b"),
        )
    ),
    Row(
        "SGLang get_rope at gemma-4-e2b full_attention",
        ("sglang", "torch"),
        "sglang_layers:gemma_4_e2b_full",
        "rope",
        "torch",
        SGLANG,
        "gemma-4-e2b",
        layer="full_attention",
    ),
    Row(
        "SGLang get_rope at base 10000, head_dim 16, one shared float32 instance (as its models "
        "call it)",
        ("sglang", "torch"),
        "sglang_layers:rope_shared",
        "rope_invariance",
        "torch",
        SGLANG,
    ),
    # llama.cpp's ggml through ctypes (its aborts print no gdb backtrace first)
    Row(
        "llama.cpp ggml_rope_ext", ("llama-cpp-python",), "ggml_layers:rope", "rope", "numpy", GGML
    ),
    *(
        Row(
            f"llama.cpp ggml_rope_ext at {preset}",
            ("llama-cpp-python",),
            f"ggml_layers:{function}",
            "rope",
            "numpy",
            GGML,
            preset,
        )
        for preset, function in (
            ("gpt-neox-20b", "gpt_neox_20b"),
            ("phi-2", "phi_2"),
            ("gpt-j-6b", "gpt_j_6b"),
        )
    ),
    Row(
        "llama.cpp ggml_get_rows + ggml_add",
        ("llama-cpp-python",),
        "ggml_layers:get_rows",
        "lookup",
        "numpy",
        GGML,
    ),
    Row(
        "llama.cpp ggml_get_rows on a quantized table",
        ("llama-cpp-python",),
        "ggml_layers:get_quantized_rows",
        "quantized_lookup",
        "numpy",
        GGML,
    ),
    Row(
        "llama.cpp ggml_rope_ext: invariances",
        ("llama-cpp-python",),
        "ggml_layers:rope",
        "rope_invariance",
        "numpy",
        GGML,
    ),
    Row(
        "vLLM get_rope at base 10000, head_dim 16, a fresh instance per call",
        ("vllm", "torch"),
        "vllm_layers:rope",
        "rope_invariance",
        "torch",
        VLLM,
    ),
    Row(
        "vLLM get_rope at base 10000, head_dim 16, one shared float32 instance (as its models "
        "call it)",
        ("vllm", "torch"),
        "vllm_layers:rope_shared",
        "rope_invariance",
        "torch",
        VLLM,
    ),
]

# --- the vision towers' positions (pos2d_resize, rope2d): resizes of a learned table by the
# libraries ports use, each judged at the rule (backends.resize.KERNELS) its options name; the
# models' own resizes and rotaries at their presets


def _resize(name, packages, target, framework, options=None, preset=None, env=None):
    return Row(
        name, packages, target, "pos2d_resize", framework, env or {}, preset, options=options
    )


def _kernel(kernel: str, **more) -> dict:
    return {"kernel": kernel, **more}


VISION = [
    *(
        _resize(
            f"torch F.interpolate {said}",
            ("torch",),
            f"vision_torch:{function}",
            "torch",
            _kernel(kernel),
        )
        for said, function, kernel in (
            ("bicubic", "bicubic", "torch-bicubic"),
            ("bicubic antialias=True", "bicubic_antialias", "antialiased-bicubic"),
            ("bilinear", "bilinear", "bilinear"),
            ("bilinear antialias=True", "bilinear_antialias", "antialiased-bilinear"),
            ("bilinear align_corners=True", "bilinear_align_corners", "bilinear-corners"),
        )
    ),
    *(
        _resize(
            f"jax.image.resize {said}", ("jax",), f"vision_jax:{function}", "jax", _kernel(kernel)
        )
        for said, function, kernel in (
            ("cubic-pytorch", "cubic_pytorch", "torch-bicubic"),
            ("bicubic", "bicubic", "antialiased-bicubic"),
            ("bicubic antialias=False", "bicubic_no_antialias", "keys-bicubic"),
            ("linear", "linear", "antialiased-bilinear"),
            ("linear antialias=False", "linear_no_antialias", "bilinear"),
        )
    ),
    _resize(
        "Pillow Image.resize BICUBIC",
        ("pillow",),
        "vision_numpy:pillow_bicubic",
        "numpy",
        _kernel("antialiased-bicubic"),
    ),
    _resize(
        "Pillow Image.resize BILINEAR",
        ("pillow",),
        "vision_numpy:pillow_bilinear",
        "numpy",
        _kernel("antialiased-bilinear"),
    ),
    _resize(
        "OpenCV cv2.resize INTER_CUBIC",
        ("opencv-python-headless",),
        "vision_numpy:opencv_cubic",
        "numpy",
        _kernel("torch-bicubic"),
    ),
    _resize(
        "OpenCV cv2.resize INTER_LINEAR",
        ("opencv-python-headless",),
        "vision_numpy:opencv_linear",
        "numpy",
        _kernel("bilinear"),
    ),
    _resize(
        "scipy.ndimage.zoom order=1 (big_vision's resample_posemb)",
        ("scipy",),
        "vision_numpy:scipy_zoom",
        "numpy",
        _kernel("bilinear-corners", prefix_tokens=0),
    ),
    # SigLIP2's NaFlex grid (16 x 16), resized in the table's dtype as big_vision does (a
    # scale_and_translate of the parameter as it is), where Hugging Face's upcasts to float32
    _resize(
        "big_vision NaFlex _pos_emb_resize (transcribed)",
        ("jax",),
        "vision_jax:big_vision_naflex",
        "jax",
        {"naflex": True, "grid": [16, 16], "compute_dtype": None},
    ),
    # one call of Keras, each backend's own bicubic, held to Hugging Face ViT's rule (a Keras
    # port of its interpolate_pos_encoding)
    *(
        _resize(
            f"Keras ops.image.resize bicubic ({b})",
            ("keras",),
            "keras_image:bicubic",
            b,
            _kernel("torch-bicubic"),
            env=_keras(b),
        )
        for b in ("jax", "torch", "numpy", "tensorflow")
    ),
    _resize(
        "timm resample_abs_pos_embed",
        ("timm", "torch"),
        "timm_layers:resample",
        "torch",
        _kernel("antialiased-bicubic", compute_dtype="float32"),
    ),
    _resize(
        "timm resample_abs_pos_embed at vit-b-16",
        ("timm", "torch"),
        "timm_layers:resample",
        "torch",
        preset="vit-b-16",
    ),
    _resize(
        "mlx-vlm bicubic_interpolate without Metal (a NumPy stand-in)",
        ("numpy",),
        "vision_numpy:mlx_vlm_bicubic",
        "numpy",
        _kernel("torch-bicubic"),
    ),
    *(
        _resize(
            f"DINOv2's own interpolate_pos_encoding (transcribed) at {preset}",
            ("torch",),
            "vision_torch:dinov2_original",
            "torch",
            preset=preset,
        )
        for preset in ("dinov2-vit-l-14-original", "dinov2-vit-l-14")
    ),
    _resize(
        "transformers ViTEmbeddings.interpolate_pos_encoding, a 4 x 9 table",
        ("transformers", "torch"),
        "transformers_vision:vit_interpolate_pos_encoding",
        "torch",
        _kernel("torch-bicubic"),
    ),
    *(
        _resize(
            f"transformers {module}.interpolate_pos_encoding at {preset}",
            ("transformers", "torch"),
            f"transformers_vision:{function}",
            "torch",
            preset=preset,
        )
        for module, preset, function in (
            ("ViTEmbeddings", "vit-b-16", "vit_interpolate_pos_encoding"),
            ("CLIPVisionEmbeddings", "clip-vit-l-14", "clip_interpolate_pos_encoding"),
            ("SiglipVisionEmbeddings", "siglip-so400m-14-384", "siglip_interpolate_pos_encoding"),
            ("Dinov2Embeddings", "dinov2-vit-l-14", "dinov2_interpolate_pos_encoding"),
            ("Dinov2Embeddings", "dinov2-vit-l-14-original", "dinov2_interpolate_pos_encoding"),
            (
                "Dinov2WithRegistersEmbeddings",
                "dinov2-with-registers",
                "dinov2_with_registers_interpolate_pos_encoding",
            ),
        )
    ),
    _resize(
        "transformers Siglip2VisionEmbeddings.resize_positional_embeddings at siglip2-naflex",
        ("transformers", "torch"),
        "transformers_vision:siglip2_naflex",
        "torch",
        preset="siglip2-naflex",
    ),
    *(
        _configured(f"{what} at {preset}", target, "rope2d", preset, packages)
        for what, preset, target, packages in (
            (
                "transformers PixtralVisionRotaryEmbedding",
                "pixtral-12b",
                "transformers_vision:pixtral_rotary",
                ("transformers", "torch"),
            ),
            (
                "Mistral's complex rotary (transcribed), q and k permuted as the conversion does,",
                "pixtral-12b",
                "vision_torch:pixtral_mistral",
                ("torch",),
            ),
            (
                "Mistral's complex rotary (transcribed), unpermuted,",
                "pixtral-12b",
                "vision_torch:pixtral_mistral_unpermuted",
                ("torch",),
            ),
            (
                "transformers Qwen2_5_VLVisionRotaryEmbedding",
                "qwen2.5-vl-7b-vision",
                "transformers_vision:qwen2_5_vl_rotary",
                ("transformers", "torch"),
            ),
            (
                "transformers Llama4VisionRotaryEmbedding",
                "llama-4-scout-vision",
                "transformers_vision:llama_4_rotary",
                ("transformers", "torch"),
            ),
            (
                "transformers DINOv3ViTRopePositionEmbedding",
                "dinov3-vit-l-16",
                "transformers_vision:dinov3_rotary",
                ("transformers", "torch"),
            ),
        )
    ),
]

ROWS = [
    Row("NumPy: table[ids] + positions", ("numpy",), "numpy_idioms:lookup", "lookup", "numpy"),
    Row("torch nn.Embedding", ("torch",), "torch_idioms:nn_embedding", "lookup", "torch"),
    Row("torch F.embedding", ("torch",), "torch_idioms:f_embedding", "lookup", "torch"),
    Row("JAX x[ids]", ("jax",), "jax_idioms:indexing", "lookup", "jax"),
    Row("JAX jnp.take", ("jax",), "jax_idioms:take", "lookup", "jax"),
    *(
        Row(
            f"transformers {model} input embeddings",
            ("transformers", "torch"),
            f"transformers_layers:{rule}_inputs",
            "scaled_inputs",
            "torch",
            options=_scaled(rule),
        )
        for rule, model in SCALED_MODELS.items()
    ),
    Row(
        "gguf.quants dequantize, then [ids]",
        ("gguf",),
        "gguf_layers:dequantize_then_gather",
        "quantized_lookup",
        "numpy",
    ),
    Row(
        "transformers GgufEmbedding",
        ("transformers", "torch"),
        "transformers_layers:gguf_embedding",
        "quantized_lookup",
        "torch",
    ),
    Row(
        "transformers GPT-2 wte + wpe",
        ("transformers", "torch"),
        "transformers_layers:gpt2_embeddings",
        "lookup",
        "torch",
    ),
    *(
        Row(
            f"keras-hub TokenAndPositionEmbedding ({b})",
            ("keras-hub", "keras"),
            "keras_hub_layers:token_and_position",
            "lookup",
            b,
            _keras(b),
        )
        for b in ("jax", "torch", "numpy", "tensorflow")
    ),
    Row("flax nnx.Embed", ("flax", "jax"), "flax_layers:embed", "lookup", "jax"),
    # Paddle writes ~/.cache/paddle on import, whatever XDG_CACHE_HOME says: its worker's
    # home is its private folder
    Row(
        "PaddlePaddle nn.Embedding",
        ("paddlepaddle",),
        "paddle_layers:nn_embedding",
        "lookup",
        "numpy",
        {"HOME": "{private}/home"},
    ),
    Row("equinox nn.Embedding", ("equinox", "jax"), "equinox_layers:embedding", "lookup", "jax"),
    Row(
        "transformers Llama rotary + apply_rotary_pos_emb",
        ("transformers", "torch"),
        "transformers_layers:llama_rope",
        "rope",
        "torch",
    ),
    Row(
        "torchtune RotaryPositionalEmbeddings",
        ("torchtune", "torch"),
        "torchtune_layers:rope",
        "rope",
        "torch",
    ),
    *(
        Row(
            f"keras-hub RotaryEmbedding ({b})",
            ("keras-hub", "keras"),
            "keras_hub_layers:rotary",
            "rope",
            b,
            _keras(b),
        )
        for b in ("jax", "torch", "numpy", "tensorflow")
    ),
    *(
        Row(
            f"keras-hub SinePositionEncoding ({b})",
            ("keras-hub", "keras"),
            "keras_hub_layers:sine",
            "sinusoidal",
            b,
            _keras(b),
        )
        for b in ("jax", "torch", "numpy", "tensorflow")
    ),
    Row(
        "transformers BLOOM build_alibi_tensor",
        ("transformers", "torch"),
        "transformers_layers:bloom_alibi_slopes",
        "alibi",
        "torch",
    ),
    *(
        Row(
            f"keras-hub AlibiBias ({b})",
            ("keras-hub", "keras"),
            "keras_hub_layers:alibi_slopes",
            "alibi",
            b,
            _keras(b),
        )
        for b in ("jax", "torch", "numpy", "tensorflow")
    ),
    Row(
        "transformers T5 _relative_position_bucket",
        ("transformers", "torch"),
        "transformers_layers:t5_buckets",
        "t5",
        "torch",
    ),
    Row(
        "transformers DataCollatorWithFlattening",
        ("transformers",),
        "transformers_layers:flattening_collator",
        "packed_positions",
        "numpy",
    ),
    Row(
        "embedding-parity (packed_positions)",
        ("embedding-parity", "numpy"),
        "suite:packed_positions",
        "packed_positions",
        "numpy",
        _suite("numpy"),
    ),
    Row("NumPy np.add.at", ("numpy",), "numpy_idioms:gradient", "gradient", "numpy"),
    Row(
        "torch nn.Embedding autograd",
        ("torch",),
        "torch_idioms:nn_embedding_gradient",
        "gradient",
        "torch",
    ),
    Row(
        "torch nn.Embedding sparse=True",
        ("torch",),
        "torch_idioms:nn_embedding_sparse_gradient",
        "gradient",
        "torch",
    ),
    Row("JAX jax.vjp of x[ids]", ("jax",), "jax_idioms:indexing_gradient", "gradient", "jax"),
    # TensorFlow's own lookups and Keras's Embedding on it, in keras-hub on TensorFlow's worker
    # (importing TensorFlow takes about 3 s)
    *(
        Row(
            name,
            packages,
            f"tensorflow_idioms:{function}",
            kind,
            "tensorflow",
            _keras("tensorflow"),
        )
        for name, packages, function, kind in (
            ("TensorFlow tf.gather", ("tensorflow-cpu",), "gather", "lookup"),
            (
                "TensorFlow tf.nn.embedding_lookup",
                ("tensorflow-cpu",),
                "embedding_lookup",
                "lookup",
            ),
            (
                "TensorFlow tf.gather under XLA (jit_compile=True)",
                ("tensorflow-cpu",),
                "gather_xla",
                "lookup",
            ),
            (
                "Keras Embedding (tensorflow)",
                ("keras", "tensorflow-cpu"),
                "keras_embedding",
                "lookup",
            ),
            (
                "TensorFlow tf.GradientTape of tf.gather",
                ("tensorflow-cpu",),
                "gather_gradient",
                "gradient",
            ),
        )
    ),
    *(
        Row(
            f"embedding-parity {b} ({kind})",
            ("embedding-parity", b),
            f"suite:{kind}",
            kind,
            b,
            _suite(b),
        )
        for kind in ("lookup", "quantized_lookup", "sinusoidal", "rope", "alibi", "t5", "gradient")
        for b in ("numpy", "torch", "jax")
    ),
    *CONFIGURED,
    *ENGINES,
    *VISION,
    *(
        Row(
            f"embedding-parity {b} (scaled_inputs, {model})",
            ("embedding-parity", b),
            f"suite:{rule}_inputs",
            "scaled_inputs",
            b,
            _suite(b),
            options=_scaled(rule),
        )
        for rule, model in SCALED_MODELS.items()
        for b in ("numpy", "torch", "jax")
    ),
    *(
        Row(
            f"embedding-parity {b} ({kind} at {preset})",
            ("embedding-parity", b),
            f"suite:{function}",
            kind,
            b,
            _suite(b),
            preset,
        )
        for kind, preset, function in (
            ("rope", "llama-3.2-1b", "rope_llama_3_2_1b"),
            ("rope", "gpt-neox-20b", "rope_gpt_neox_20b"),
            ("lookup", "gemma-7b", "gemma_lookup"),
            ("position_ids", "opt-125m", "opt_positions"),
            ("bert", "bert-base-uncased", "bert"),
        )
        for b in ("numpy", "torch", "jax")
    ),
]

# The invariances (kinds/invariance.py) of rows above: the same question asked two ways
INVARIANT = (
    "NumPy: table[ids] + positions",
    "torch nn.Embedding",
    "JAX x[ids]",
    "transformers Llama rotary + apply_rotary_pos_emb",
    "torchtune RotaryPositionalEmbeddings",
    "MLX nn.RoPE (mx.fast.rope)",
    "keras-hub RotaryEmbedding (jax)",
    *(
        f"embedding-parity {b} ({kind})"
        for kind in ("lookup", "rope")
        for b in ("numpy", "torch", "jax")
    ),
    # the vision properties (the identity, the grids transposed; q . k by offset alone)
    "torch F.interpolate bicubic",
    "transformers ViTEmbeddings.interpolate_pos_encoding, a 4 x 9 table",
    "transformers PixtralVisionRotaryEmbedding at pixtral-12b",
    "transformers Llama4VisionRotaryEmbedding at llama-4-scout-vision",
)
ROWS += [
    replace(row, name=f"{row.name}: invariances", kind=f"{row.kind}_invariance")
    for row in ROWS
    if row.name in INVARIANT
]

# --- rows run along the production paths (paths.py) --------------------------------------

TORCH_PATHS, JAX_PATHS = ("torch.compile", "torch.export", "onnx"), ("jax.jit", "jax.export")
OPENVINO_PATHS = ("openvino", "openvino-f32")  # its CPU plugin's default precision hint, and f32
EXECUTORCH_PATHS = ("executorch", "executorch-xnnpack")  # its portable kernels, and XNNPACK
# Inductor compiles each signature of the battery to C++ (a second or two each, 16 s for the
# first of a process): its rows run the checks where it differs from eager torch if at all,
# float32 and bfloat16 (its precision casts), and the bad ids.
COMPILED = {
    "lookup": ("forward float32", "forward bfloat16", "bad id"),
    "rope": ("rotation float32", "rotation bfloat16", "long positions float32"),
    "sinusoidal": ("table 64 x 16", "positions to"),
    "gradient": ("gradient float32", "gradient bfloat16", "gradient, bad id"),
}


def _through(name: str, paths: tuple[str, ...]) -> list[Row]:
    row = next(r for r in ROWS if r.name == name)
    return [
        replace(
            row,
            name=f"{name} through {path}",
            packages=tuple(dict.fromkeys((*row.packages, *PATHS[path].packages))),
            through=path,
            only=COMPILED[row.kind] if path == "torch.compile" else (),
        )
        for path in paths
    ]


# The lookup with its learned positions, RoPE plain and at a scaled configuration, the
# sinusoidal table, and the gradient where the path has one: an export is of inference (torch's
# gradient rows call backward() inside the function, which no exporter or compiled graph
# holds); a JAX gradient is a function like any other.
ROWS += [
    *_through("torch nn.Embedding", TORCH_PATHS),
    *_through("JAX x[ids]", JAX_PATHS),
    *_through("transformers Llama rotary + apply_rotary_pos_emb", TORCH_PATHS),
    *_through("transformers rotary at llama-3.2-1b", TORCH_PATHS),
    *_through("torch nn.Embedding", OPENVINO_PATHS),
    *_through("transformers rotary at llama-3.2-1b", OPENVINO_PATHS),
    *_through("torch nn.Embedding", EXECUTORCH_PATHS),
    *_through("transformers rotary at llama-3.2-1b", EXECUTORCH_PATHS),
    *_through("keras-hub SinePositionEncoding (jax)", JAX_PATHS),
    *_through("JAX jax.vjp of x[ids]", JAX_PATHS),
    # a resize exported (its Resize nodes checked against eager's rule) and jitted
    *_through("torch F.interpolate bicubic", ("onnx",)),
    *_through("torch F.interpolate bicubic antialias=True", ("onnx",)),
    *_through("transformers ViTEmbeddings.interpolate_pos_encoding at vit-b-16", ("onnx",)),
    *_through("jax.image.resize cubic-pytorch", ("jax.jit",)),
    *_through("jax.image.resize bicubic", ("jax.jit",)),
    *(
        row
        for kind in ("lookup", "rope", "sinusoidal", "gradient")
        for row in (
            *_through(
                f"embedding-parity torch ({kind})",
                TORCH_PATHS[:1] if kind == "gradient" else TORCH_PATHS,
            ),
            *_through(f"embedding-parity jax ({kind})", JAX_PATHS),
        )
    ),
]


def chosen(patterns) -> list[Row]:
    """The rows ``patterns`` name, in the matrix's order: a row's exact name names that row
    alone; any other pattern every row whose name it matches as a glob (``*``, ``?``,
    ``[...]``) or holds, ignoring case. UsageError for a pattern that names none."""
    named = set()
    for pattern in patterns:
        found = _named(pattern)
        if not found:
            raise UsageError(f"--rows {pattern!r} {_names_none()}")
        named |= found
    return [r for r in ROWS if r.name in named]


def _named(pattern: str) -> set[str]:
    names = {r.name for r in ROWS}
    if pattern in names:
        return {pattern}
    low = pattern.lower()
    return {n for n in names if fnmatch.fnmatchcase(n.lower(), low) or low in n.lower()}


def _names_none() -> str:
    every = "; ".join(repr(r.name) for r in ROWS)
    return f"names no row (a row's name, a glob or part of one, in any case); the rows are {every}"


def held_to(pattern: str, rows: list[Row]) -> tuple[Row, list[Row]]:
    """(the row ``pattern`` names, the rows of ``rows`` that can be held to it): those other
    than it of its kind at its configuration, eagerly, whose cases are its cases (a row along
    a production path is held to eager by its own report). UsageError where the pattern
    names no row or several, where the row's package is not installed, or where no row of
    ``rows`` can be held to it."""
    found = _named(pattern)
    if len(found) != 1:
        several = "; ".join(repr(r.name) for r in ROWS if r.name in found)
        why = _names_none() if not found else f"names {len(found)} rows ({several}): name one"
        raise UsageError(f"--against {pattern!r} {why}")
    other = next(r for r in ROWS if r.name in found)
    absent = _absent(other)
    if absent:
        raise UsageError(f"--against {other.name!r}: {not_installed(absent)}")
    if other.through:
        raise UsageError(
            f"--against {other.name!r} runs along {other.through}, which its own report holds "
            "to eager: hold a row to an eager row"
        )
    alike = [r for r in rows if r != other and _setting(r) == _setting(other)]
    if not alike:
        raise UsageError(
            f"--against {other.name!r} runs {_said(other)}, and no other row chosen does: a "
            "row is held to another of its kind at its configuration (choose them with --rows)"
        )
    return other, alike


def _holding(other: Row, alike: list[Row], left_out: int) -> str:
    """The line that says which rows are held to ``other``, and how."""
    rows = f"{len(alike)} row{'s' if len(alike) > 1 else ''}"
    out = f"; {left_out} other rows chosen run another kind or configuration" if left_out else ""
    shown = ", ".join(f"{p} {v}" for p, v in versions(other.packages).items())
    return (
        f"held to {other.name} ({_said(other)}; {shown}), each case bit for bit in its dtype: "
        f"{rows}{out}"
    )


def _setting(row: Row) -> tuple:
    """What makes two rows' cases the same: the kind, what sets its options and the path
    (read without building them: a preset's options may run the model's code)."""
    return row.kind, row.preset, row.layer, row.options, row.through


def _said(row: Row) -> str:
    """ "rope at gemma-3-4b full_attention": the row's kind at its configuration."""
    at = f" at {row.preset}" + (f" {row.layer}" if row.layer else "") if row.preset else ""
    return row.kind + at


def run(
    names=None,
    *,
    timeout: float = 60.0,
    progress=None,
    only: dict | None = None,
    against: str | None = None,
) -> dict:
    """{"rows": [...]} with each row's versions and report (or why it could not run).
    ``names``: the rows to run, each a row's name or a pattern (``chosen``); ``only``: {row
    name: the names (or prefixes) of the checks to run}; other rows run all. ``against``: a
    row (its name or a pattern naming one) that each row of ``names`` of its kind and
    configuration is held to case by case instead (``held_to``), each record naming it."""
    rows = chosen(names) if names else ROWS
    other = None
    if against is not None:
        other, alike = held_to(against, rows)
        if progress:
            progress(_holding(other, alike, len(rows) - len(alike) - (other in rows)))
        rows = alike
    matrix = []
    workers = {}  # one worker process per environment: a library is imported once
    stopped = None  # Ctrl-C or an error: workers still importing are killed, not waited for
    try:
        # every worker started at once, importing its first row's library (the imports overlap)
        for row in [*rows, *([other] if other else [])]:
            key = _environment(row)
            if key in workers or _absent(row):
                continue
            workers[key] = Worker(row.env)
            with contextlib.suppress(UsageError):  # a preset refused: said by the row itself
                workers[key].begin(_target(row), row.kind, row.framework, _options(row))
        for row in rows:
            checks = tuple((only or {}).get(row.name, ())) or row.only or None
            matrix.append(_run_row(row, workers, timeout, progress, checks, other))
    except BaseException as error:
        stopped = type(error)
        raise
    finally:
        for worker in workers.values():
            worker.__exit__(stopped)
    return {"rows": matrix}


def _run_row(row: Row, workers: dict, timeout: float, progress, only, other=None) -> dict:
    record = {
        "name": row.name,
        "kind": row.kind,
        "framework": row.framework,
        "path": row.through or "eager",
        "versions": versions(row.packages),
    }
    held, lines = {}, []
    if other is not None:
        record["against"] = other.name
        held = {"against": _target(other), "against_framework": other.framework}
        held["against_worker"] = workers[_environment(other)]
    absent = _absent(row)
    if absent:
        record["missing"] = not_installed(absent)
    else:
        key = _environment(row)
        if key not in workers:
            workers[key] = Worker(row.env)
        try:
            report = runner.run(
                _target(row),
                row.kind,
                framework=row.framework,
                options=_options(row),
                timeout=timeout,
                only=only,
                through=row.through,
                worker=workers[key],
                **held,
            )
            record["report"] = report.record()
            lines = report.lines() if other is not None else []  # held: each check, as check says
        except UsageError as error:
            record["missing"] = str(error)
    if progress:
        progress(_progress_line(record))
        for line in lines:
            progress(f"    {line}")
    return record


def _environment(row: Row) -> tuple:
    return tuple(sorted(row.env.items()))


def _absent(row: Row) -> str | None:
    """The first package the row needs that is not installed: its own, or its kind's."""
    return missing((*row.packages, *KINDS[row.kind].packages))


def _target(row: Row) -> str:
    return f"{ADAPTERS}.{row.target}"


def _options(row: Row) -> dict:
    """The kind's options at the row's preset (none without one); UsageError if refused."""
    if row.options is not None:
        return row.options
    if not row.preset:
        return {}
    return configs.preset(row.preset).options(row.kind, "--model", layer=row.layer)


def _progress_line(record) -> str:
    if "missing" in record:
        return f"  --   {record['name']}: {record['missing']}"
    report = record["report"]
    name = record["name"] + (f", held to {record['against']}" if "against" in record else "")
    line = f"  {'ok' if report['conforms'] else 'NO':<4} {name} ({report['seconds']:.1f} s)"
    return line if report["conforms"] else f"{line}: {what_failed(report)}"


SAID_FAILING = 3  # the groups of failing checks a row's line names; the rest are counted


def what_failed(report: dict) -> str:
    """Why a row's report does not conform, in a few words: its failing checks, those that the
    matrix's cells say alike grouped ("rotation float64, long positions float64: computed in
    float32"), or its verdict where none fails (no valid case answered)."""
    groups: dict[str, list[str]] = {}
    for check in report["checks"]:
        if check["status"] not in (*ACCEPTED, "fixed"):
            groups.setdefault(_failing_words(check), []).append(check["check"])
    if not groups:
        return report["verdict"].lower()
    said = [f"{', '.join(checks)}: {words}" for words, checks in groups.items()]
    rest = sum(len(checks) for checks in list(groups.values())[SAID_FAILING:])
    return "; ".join(said[:SAID_FAILING]) + (f"; {rest} more failing" if rest else "")


def _failing_words(check: dict) -> str:
    """A failing check's few words, as its cell says them."""
    if "bad id" in check["check"]:
        return bad_id_answer(check)
    own, eager = split_path(check["detail"])
    said = _short(own)
    if ", and as wrong: " in own:  # held to a row (against.py): its answer, and as wrong
        said = f"the same bits, as wrong ({said})"
    said = said if check["status"] == "differs" else f"failed: {said}"
    return said + (f" (eager {_eager_mark(eager)})" if eager else "")


def controls_conform(matrix: dict) -> bool:
    """The suite's own eager rows all conform (the matrix's exit status): along a production
    path a difference of theirs is the path's, named in the report and docs/conformance.md."""
    return all(
        r.get("report", {}).get("conforms", False)
        for r in matrix["rows"]
        if r["name"].startswith("embedding-parity ") and r.get("path", "eager") == "eager"
    )


# --- the matrix as text ------------------------------------------------------------------

COLUMNS = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "long positions",
    "layout",
    "bad ids",
    "values",
)


# The kinds whose every check is of values (no dtypes, positions or layouts): the "values" cell.
VALUE_KINDS = (
    "mrope_positions",
    "attention_scale",
    "packed_positions",
    "rope_invariance",
    "lookup_invariance",
)


def cells(record: dict) -> dict:
    """The row's cell in each column: ✓ or ✗ and a few words, "—" where the column does not apply."""
    if "missing" in record:
        return {c: "not run" for c in COLUMNS}
    checks = record["report"]["checks"]
    out = {}
    for column in (*COLUMNS[:5], "values"):
        out[column] = _cell([c for c in checks if in_column(column, c, record["kind"])])
    if record["kind"].endswith("_invariance"):  # which invariances fail, by name
        failing = [c["check"] for c in checks if c["status"] != "conforms"]
        out["values"] = "✗ " + "; ".join(failing) if failing else out["values"]
    layout = [c for c in checks if in_column("layout", c)]
    if record["kind"] in ("rope", "sinusoidal"):
        shown = re.search(r"(interleaved|concat) layout", layout[0]["detail"]) if layout else None
        paired = "(2i, 2i+1)" in record["report"].get("contract", "")  # a config's pairs
        expected = "✓ half" if record["kind"] == "rope" and not paired else "✓ interleaved"
        some_conform = any(c["status"] == "conforms" for c in checks)
        out["layout"] = f"✗ {shown.group(1)}" if shown else expected if some_conform else "—"
    else:
        out["layout"] = "—"
    out["bad ids"] = _bad_ids([c for c in checks if in_column("bad ids", c)])
    return {c: out[c] for c in COLUMNS}


def in_column(column: str, check: dict, kind: str | None = None) -> bool:
    """Whether ``check`` (a report's record of one, of a row of ``kind``) is one the matrix reads
    for ``column``."""
    name = check["check"]
    if kind in VALUE_KINDS:
        return column == "values"
    if column in COLUMNS[:4]:
        return name.endswith(" " + column) and not name.startswith("long")
    if column == "long positions":
        return name.startswith(("long positions", "positions to"))
    if column == "layout":
        return "layout" in check["detail"]
    if column == "bad ids":
        return "bad id" in name
    # values: a table, slopes, buckets, position ids, a quantized format's rows
    return name.startswith(("slopes", "buckets", "table", "position ids")) or name.endswith(" rows")


def split_path(detail: str) -> tuple[str, str | None]:
    """(what the path did, what eager did) of a check whose verdict a production path changed
    ("through onnx: token_ids ...: wraps to row 63; eager: raises IndexError"); else
    (detail, None)."""
    if detail.startswith("through ") and "; eager: " in detail:
        head, _, eager = detail.rpartition("; eager: ")
        return head.split(": ", 1)[1], eager
    return detail, None


def _cell(checks) -> str:
    if not checks:
        return "—"
    for status, mark in (("differs", "✗"), ("failed", "✗ failed"), ("rejected", "rejected")):
        bad = [c for c in checks if c["status"] == status]
        if bad and status == "rejected" and all(c["check"].endswith(" rows") for c in bad):
            return "rejects " + ", ".join(c["check"].removesuffix(" rows") for c in bad)
        if bad:
            own, eager = split_path(bad[0]["detail"])
            said = f"{mark} {_short(own)}".strip()
            return said + (f" (eager {_eager_mark(eager)})" if eager else "")
    exact = all("bit-identical" in c["detail"] or c["detail"].startswith("exact") for c in checks)
    if exact:
        return (
            "✓ bit-identical" if any("bit-identical" in c["detail"] for c in checks) else "✓ exact"
        )
    ulps = max((case["ulps"] or 0.0) for c in checks for case in c["cases"])
    return f"✓ within tolerance ({ulps:.2g} ulp)"


def _short(detail: str) -> str:
    """A cell's few words: the diagnosis without its explanations, else the size of the error;
    a valid case that raised, "raises TypeError". "2 heads: 1 ulp at [1]; slopes off by ..."
    keeps its label "2 heads". A mistake's name may hold "; " in its parentheses ("(jax's
    'bicubic'; Keras on JAX)"): only the diagnosis's own separators split it."""
    label, _, rest = detail.partition(": ")
    last = _outside_parentheses(rest or label)[-1]
    if last.startswith("raises ") or ": raises " in last:
        return "raises " + last.split("raises ", 1)[1].split(":")[0].split(" on a valid")[0]
    words = last.split(" (")[0].split(": ")[0]
    if "(at this grid the same as: " in last:  # two mistakes the case cannot tell apart
        words += " ≡ " + last.split("(at this grid the same as: ", 1)[1].split(" (")[0]
    words = words.replace("nearest to ", "≈ ")
    return f"{label}: {words}" if label.endswith(("heads", "heads (not a power of two)")) else words


def _outside_parentheses(text: str, separator: str = "; ") -> list[str]:
    """``text`` split at each ``separator`` that no parenthesis encloses."""
    parts, depth, start = [], 0, 0
    for at, character in enumerate(text):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if depth == 0 and text.startswith(separator, at):
            parts.append(text[start:at])
            start = at + len(separator)
    return [*parts, text[start:]]


def _eager_mark(eager: str) -> str:
    """Eager's verdict in a cell's words: "raises", "✓" or "✗"."""
    if eager.startswith("raises"):
        return "raises"
    return "✓" if eager.startswith(("bit-identical", "within", "exact")) else "✗"


def bad_id_answer(check: dict) -> str:
    """What a bad id got, in a few words: "raises"; "refused" (a production path made no
    program of it); the silent answer ("wraps to row 63"); or "failed". Where a path changed
    it, eager's beside it: "wraps to row 63 (eager raises)"."""
    own, eager = split_path(check["detail"])
    if check["status"] == "conforms":
        said = "refused" if own.startswith("refused") else "raises"
    elif check["status"] == "differs" and own.count(": ") >= 2:
        said = own.split(": ")[1]  # "token_ids [3, -1, 5]: wraps to row 63: a silent ..."
    elif check["status"] == "failed" and "died (signal 6)" in own:  # abort(): ggml's asserts
        said = "aborts the process (SIGABRT)"
    else:
        said = check["status"]
    return said + (f" (eager {_eager_mark(eager)})" if eager else "")


def _bad_ids(checks) -> str:
    if not checks:
        return "—"
    answers = [(c["check"].split(": ", 1)[1], bad_id_answer(c)) for c in checks]
    if all(c["status"] == "conforms" for c in checks):
        refused = [what for what, answer in answers if answer == "refused"]
        return "✓ raises" + "".join(f"; {what}: refused" for what in refused)
    return "✗ " + "; ".join(f"{what}: {answer}" for what, answer in answers)


def summary(matrix: dict) -> list[str]:
    lines = [
        "",
        "| implementation | versions | kind | " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * (len(COLUMNS) + 3),
    ]
    for record in matrix["rows"]:
        shown = ", ".join(f"{p} {v}" for p, v in record["versions"].items() if v)
        row = cells(record)
        lines.append(
            f"| {record['name']} | {shown} | {record['kind']} | "
            + " | ".join(row[c] for c in COLUMNS)
            + " |"
        )
    return lines


START, END = "<!-- matrix: written by make conformance -->", "<!-- end of the matrix -->"


MARKDOWN_LIMIT = 1 << 22  # docs/conformance.md is about 80 kB


def check_markdown(path: str) -> str:
    """The page's text; UsageError if it has no section between the markers to rewrite."""
    try:
        text = outputs.read_text(path, MARKDOWN_LIMIT)
    except outputs.Unreadable as why:
        raise UsageError(f"--markdown {path} {why}") from None
    if START not in text or END not in text:
        raise UsageError(f"--markdown {path}: no {START} ... {END} section to rewrite")
    return text


def write_markdown(matrix: dict, path: str) -> None:
    """Replace the matrix between the markers in ``path`` (the page keeps its own prose)."""
    before, rest = check_markdown(path).split(START, 1)
    _, after = rest.split(END, 1)
    table = "\n".join(summary(matrix)[1:])
    outputs.write_text(path, before + START + "\n" + table + "\n" + END + after)
