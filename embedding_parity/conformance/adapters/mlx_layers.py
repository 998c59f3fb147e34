"""MLX's CPU build: ``mlx.nn.RoPE`` (``mx.fast.rope``), and mlx-lm's rotary layers from its
``initialize_rope`` at the presets' configurations, loaded from mlx_lm/models/rope_utils.py
(``import mlx_lm`` imports its whole generation stack: transformers, sentencepiece, jinja2;
that module imports mlx alone). For the models whose layers rotate differently, and the
multimodal ones, the rotation is the one mlx-lm's own model file builds: its ``Attention(args,
layer_idx).rope`` (or none, where that attention does not rotate), the model files imported
with their sibling modules (mlx alone) as a package of their own.

MLX rotates the contiguous positions offset, offset + 1, ... of one call. Each row is rotated in
a call of its own at offset p; for the rules that depend on the length (dynamic, longrope), x's
rows are placed at their positions in one sequence 0 .. max(positions) instead, rotated in one
call (whose length is then max(positions) + 1, what Hugging Face's rules see) and read back; the
battery's positions are distinct. Arrays cross as float32 (float64 for float64), exact for every dtype, and come
back in the dtype MLX returned."""

import functools
import importlib
import importlib.util
import os
import sys
import types

import ml_dtypes
import mlx.core as mx
import mlx.nn
import numpy as np

from embedding_parity import configs
from embedding_parity.configs.presets import PRESETS
from embedding_parity.conformance.adapters import load_file

rope_utils = load_file("mlx_lm", "models", "rope_utils.py", install="pip install --no-deps mlx-lm")

_MLX = {
    "float64": mx.float64,
    "float32": mx.float32,
    "float16": mx.float16,
    "bfloat16": mx.bfloat16,
}
_NUMPY = {
    mx.float64: np.float64,
    mx.float32: np.float32,
    mx.float16: np.float16,
    mx.bfloat16: ml_dtypes.bfloat16,
}


def _to_mlx(x: np.ndarray) -> mx.array:
    wide = np.float64 if x.dtype == np.float64 else np.float32
    return mx.array(x.astype(wide)).astype(_MLX[x.dtype.name])


def _to_numpy(a: mx.array) -> np.ndarray:
    wide = mx.float64 if a.dtype == mx.float64 else mx.float32
    return np.array(a.astype(wide)).astype(_NUMPY[a.dtype])


def in_one_call(rotate, x, positions):
    """rotate(sequence) over x's rows placed at their (distinct) positions of one sequence
    0 .. max(positions), read back at them: a layer that takes a start, not positions."""
    positions = np.asarray(positions)
    sequence = np.zeros((*x.shape[:-2], int(positions.max()) + 1, x.shape[-1]), x.dtype)
    sequence[..., positions, :] = x
    return rotate(sequence)[..., positions, :]


def _by_position(layer, x, positions, *, one_call=False) -> np.ndarray:
    x = np.asarray(x)
    if one_call:
        return in_one_call(lambda s: _to_numpy(layer(_to_mlx(s), offset=0)), x, positions)
    a = _to_mlx(x)
    rows = [layer(a[..., t : t + 1, :], offset=int(p)) for t, p in enumerate(positions)]
    return _to_numpy(mx.concatenate(rows, axis=-2))


def rope(x, positions, base=10000.0):
    return _by_position(mlx.nn.RoPE(x.shape[-1], base=base), x, positions)


def _initialized_at(preset: str):
    """f(x, positions): initialize_rope with the preset's rotated width, base, layout and
    scaling config (Hugging Face's keys, as mlx-lm's models pass them)."""
    config = configs.preset(preset)
    scaling = config.scaling and {
        k: list(v) if isinstance(v, tuple) else v for k, v in config.scaling.items()
    }
    layer = rope_utils.initialize_rope(
        config.rotary_dim or config.head_dim,
        config.rope_theta,
        config.layout == "interleaved",
        scaling,
        config.max_position_embeddings,
    )

    one_call = bool(scaling) and scaling["rope_type"] in ("dynamic", "longrope")

    def f(x, positions):
        return _by_position(layer, x, positions, one_call=one_call)

    return f


llama_3_2_1b = _initialized_at("llama-3.2-1b")
qwen2_5_7b = _initialized_at("qwen2.5-7b")
gpt_oss_20b = _initialized_at("gpt-oss-20b")
phi_3_mini_128k = _initialized_at("phi-3-mini-128k")
gemma_3_4b = _initialized_at("gemma-3-4b")
llama_2_7b_dynamic = _initialized_at("llama-2-7b-dynamic")
gpt_neox_20b = _initialized_at("gpt-neox-20b")


# --- mlx-lm's model files: each layer's rotation as its Attention builds it -----------------

MODELS = "mlx_lm_models"  # mlx_lm/models as a package, without mlx_lm/__init__.py
# The projections' widths, which the rotation does not read, made small (Llama 4 Scout's
# 48 attentions would hold 12 GB of weights at its own), and the fields mlx-lm's Llama 4
# arguments require that bear on neither the rotation nor which layers rotate.
SMALL = {"hidden_size": 64, "num_attention_heads": 1, "num_key_value_heads": 1}
REQUIRED = {"intermediate_size": 64, "rms_norm_eps": 1e-5, "vocab_size": 16}
LLAMA4_REQUIRED = {
    **REQUIRED,
    "attention_bias": False,
    "interleave_moe_layer_step": 1,
    "intermediate_size_mlp": 64,
    "num_experts_per_tok": 1,
    "num_local_experts": 1,
    "use_qk_norm": False,
}
QWEN3_REQUIRED = {**REQUIRED, "tie_word_embeddings": False}


def _model_file(name: str):
    """mlx_lm/models/<name>.py, its relative imports (base, cache, rope_utils) resolved in
    mlx_lm/models."""
    if MODELS not in sys.modules:
        found = importlib.util.find_spec("mlx_lm")
        package = types.ModuleType(MODELS)
        package.__path__ = [os.path.join(found.submodule_search_locations[0], "models")]
        sys.modules[MODELS] = package
    return importlib.import_module(f"{MODELS}.{name}")


def _by_layer(name: str, preset: str, args_class: str = "ModelArgs", extra=None):
    """f(x, positions, layer): mlx-lm's ``<name>.Attention(args, layer).rope`` at the preset's
    text config, x as it is where that attention has no rope (or ``use_rope`` 0)."""
    module = _model_file(name)
    fields = PRESETS[preset]["fields"]
    args = getattr(module, args_class).from_dict(
        {**fields.get("text_config", fields), **SMALL, **(extra or {})}
    )

    @functools.cache
    def rope_of(layer):
        attention = module.Attention(args, layer)
        return attention.rope if getattr(attention, "use_rope", True) else None

    def f(x, positions, layer):
        rope = rope_of(int(layer))
        return np.asarray(x) if rope is None else _by_position(rope, x, positions)

    return f


def _text_only(name: str, preset: str):
    """f(x, positions (3, T)): mlx-lm's text model for a multimodal preset, which takes one
    position per token (its cache offset); given the t row, as a text-only port is."""
    module = _model_file(name)
    text = module.ModelArgs.from_dict(PRESETS[preset]["fields"]).text_config
    language = _model_file("qwen3").ModelArgs.from_dict({**QWEN3_REQUIRED, **text, **SMALL})
    rope = _model_file("qwen3").Attention(language).rope

    def f(x, positions):
        return _by_position(rope, x, np.asarray(positions)[0])

    return f


gemma_3_4b_layers = _by_layer("gemma3_text", "gemma-3-4b")
gemma_4_e2b = _by_layer("gemma4_text", "gemma-4-e2b")
llama_4_scout = _by_layer("llama4", "llama-4-scout", "TextArgs", LLAMA4_REQUIRED)
qwen3_vl_8b = _text_only("qwen3_vl", "qwen3-vl-8b")
