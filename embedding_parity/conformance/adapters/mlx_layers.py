"""MLX's CPU build: ``mlx.nn.RoPE`` (``mx.fast.rope``), and mlx-lm's rotary layers from its
``initialize_rope`` at the presets' configurations, loaded from mlx_lm/models/rope_utils.py
(``import mlx_lm`` imports its whole generation stack: transformers, sentencepiece, jinja2;
that module imports mlx alone).

MLX rotates the contiguous positions offset, offset + 1, ... of one call. Each row is rotated in
a call of its own at offset p; for the rules that depend on the length (dynamic, longrope), x's
rows are placed at their positions in one sequence 0 .. max(positions) instead, rotated in one
call (whose length is then max(positions) + 1, what Hugging Face's rules see) and read back; the
battery's positions are distinct. Arrays cross as float32 (float64 for float64), exact for every dtype, and come
back in the dtype MLX returned."""

import ml_dtypes
import mlx.core as mx
import mlx.nn
import numpy as np

from embedding_parity import configs
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
