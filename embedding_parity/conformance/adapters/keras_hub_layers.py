"""keras-hub's layers under Keras 3, whichever backend KERAS_BACKEND names (one process each:
Keras picks its backend at import); its RotaryEmbedding at each rope_type it has (linear,
dynamic, yarn), its Llama 3 and Phi-3 rotary layers, at the presets' configurations; and
Gemma 3's layers as its backbone rotates them."""

import functools

import numpy as np
from keras import ops
from keras_hub.layers import (
    AlibiBias,
    RotaryEmbedding,
    SinePositionEncoding,
    TokenAndPositionEmbedding,
)
from keras_hub.src.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding
from keras_hub.src.models.phi3.phi3_rotary_embedding import Phi3SuScaledRotaryEmbedding

from embedding_parity import configs
from embedding_parity.configs.presets import PRESETS


def _dtype(array) -> str:
    return ops.convert_to_numpy(array).dtype.name


def token_and_position(token_table, position_table, token_ids, start):
    (vocab_size, dim), length = token_table.shape, position_table.shape[0]
    layer = TokenAndPositionEmbedding(vocab_size, length, dim, dtype=_dtype(token_table))
    layer.build((None, None))
    layer.token_embedding.embeddings.assign(token_table)
    layer.position_embedding.position_embeddings.assign(position_table)
    batched = token_ids if len(token_ids.shape) == 2 else token_ids[None]
    out = layer(batched, start_index=start)
    return out if len(token_ids.shape) == 2 else out[0]


def rotary(x, positions, base=10000.0):
    return _rotate(RotaryEmbedding(max_wavelength=base, dtype=_dtype(x)), x, positions)


def _rotate(layer, x, positions):
    batched = x if len(x.shape) == 3 else x[None]  # (batch, T, head_dim)
    out = layer(batched, positions=positions)
    return out if len(x.shape) == 3 else out[0]


def _rope_type_at(preset: str):
    """f(x, positions): RotaryEmbedding with the preset's rope_type and factor (and YaRN's
    original length, betas and truncate, keras-hub's defaults being Hugging Face's)."""
    config = configs.preset(preset)
    scaling = config.scaling
    options = {
        "max_wavelength": config.rope_theta,
        "rope_type": scaling["rope_type"],
        "scaling_factor": scaling["factor"],
    }
    if scaling["rope_type"] == "yarn":
        options["original_max_position_embeddings"] = scaling["original_max_position_embeddings"]
        options.update(
            {k: scaling[k] for k in ("beta_fast", "beta_slow", "truncate") if k in scaling}
        )

    def f(x, positions):
        return _rotate(RotaryEmbedding(**options, dtype=_dtype(x)), x, positions)

    return f


@functools.cache
def _gemma3_ropes(preset: str) -> list:
    """(max_wavelength, scaling_factor) of each layer's rotation, as keras-hub builds Gemma 3
    from a checkpoint's config.json: its convert_backbone_config (keras_hub's transformers
    converter) on the preset's text config as transformers 5.24 writes it (save_pretrained's
    to_dict: every field, the rotation keyed by layer type), then Gemma3Backbone; the widths,
    which the rotation does not read, made small."""
    from keras_hub.src.models.gemma3.gemma3_backbone import Gemma3Backbone
    from keras_hub.src.utils.transformers.convert_gemma3 import convert_backbone_config
    from transformers import CONFIG_MAPPING

    fields = PRESETS[preset]["fields"]
    written = CONFIG_MAPPING[fields["model_type"]].from_dict(fields).get_text_config().to_dict()
    small = {"hidden_dim": 8, "intermediate_dim": 8, "num_query_heads": 1}
    small |= {"num_key_value_heads": 1, "vocabulary_size": 16}
    backbone = Gemma3Backbone(**{**convert_backbone_config(written), **small})
    ropes = [block.attention.rope_layer for block in backbone.transformer_layers]
    return [(rope.max_wavelength, rope.scaling_factor) for rope in ropes]


def gemma3_backbone_gemma_3_4b(x, positions, layer):
    """f(x, positions, layer): layer's rotation as Gemma3Attention makes it,
    RotaryEmbedding(max_wavelength, scaling_factor) in x's dtype."""
    wavelength, factor = _gemma3_ropes("gemma-3-4b")[int(layer)]
    rope = RotaryEmbedding(max_wavelength=wavelength, scaling_factor=factor, dtype=_dtype(x))
    return _rotate(rope, x, positions)


rotary_linear_gemma_3_4b = _rope_type_at("gemma-3-4b")
rotary_dynamic_llama_2_7b = _rope_type_at("llama-2-7b-dynamic")
rotary_yarn_qwen2_5_7b = _rope_type_at("qwen2.5-7b")


def llama3_rotary(x, positions):
    """LlamaRotaryEmbedding (keras-hub's Llama 3.1+ layer) at llama-3.2-1b."""
    scaling = configs.preset("llama-3.2-1b").scaling
    layer = LlamaRotaryEmbedding(
        max_wavelength=configs.preset("llama-3.2-1b").rope_theta,
        frequency_adjustment_factor=scaling["factor"],
        low_freq_factor=scaling["low_freq_factor"],
        high_freq_factor=scaling["high_freq_factor"],
        pretraining_sequence_length=scaling["original_max_position_embeddings"],
        dtype=_dtype(x),
    )
    return _rotate(layer, x, positions)


def _phi3(x):
    config = configs.preset("phi-3-mini-128k")
    scaling = config.scaling
    return Phi3SuScaledRotaryEmbedding(
        list(scaling["short_factor"]),
        list(scaling["long_factor"]),
        max_sequence_length=config.max_position_embeddings,
        pretraining_sequence_length=scaling["original_max_position_embeddings"],
        max_wavelength=config.rope_theta,
        dtype=_dtype(x),
    )


def phi3_rotary(x, positions):
    """Phi3SuScaledRotaryEmbedding (keras-hub's Phi-3 LongRoPE layer) at phi-3-mini-128k, given
    the positions as RotaryEmbedding's ``positions`` argument."""
    return _rotate(_phi3(x), x, positions)


def phi3_rotary_from_start(x, positions):
    """The same layer called as Phi3Attention calls it, with ``start_index``: x's rows placed at
    their positions in one sequence from 0, rotated in one call (the short/long switch then
    sees max(positions) + 1, as Hugging Face's) and read back."""
    layer = _phi3(x)
    x = ops.convert_to_numpy(x)
    batched = x if x.ndim == 3 else x[None]
    length = int(np.max(positions)) + 1
    sequence = np.zeros((batched.shape[0], length, batched.shape[-1]), batched.dtype)
    sequence[:, np.asarray(positions)] = batched
    out = ops.convert_to_numpy(layer(sequence, start_index=0))[:, np.asarray(positions)]
    return out if x.ndim == 3 else out[0]


def sine(num_positions, dim):
    return SinePositionEncoding(max_wavelength=10000.0)(
        np.zeros((1, num_positions, dim), np.float32)
    )[0]


def alibi_slopes(num_heads):
    scores = np.zeros((1, num_heads, 1, 2), np.float32)
    bias = AlibiBias()(scores)  # slope * (key - last key): -slope at key 0
    return -bias[0, :, 0, 0]
