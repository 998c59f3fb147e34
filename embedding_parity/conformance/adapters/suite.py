"""This suite's own three backends, the control rows: they must conform everywhere."""

import os

import numpy as np

import backends
from backends import positional, quantized
from embedding_parity import configs
from embedding_parity.conformance.kinds.scaled_inputs import MODELS

_BACKEND = backends.get(os.environ["EMBEDDING_PARITY_BACKEND"])


def lookup(token_table, position_table, token_ids, start):
    layer = _BACKEND.TokenPositionEmbedding(
        _BACKEND.to_numpy(token_table), _BACKEND.to_numpy(position_table)
    )
    return layer(token_ids, start=start)


def quantized_lookup(blocks, format, token_ids):
    table = quantized.QuantizedTable(format, _BACKEND.to_numpy(blocks), _dim(blocks, format))
    return _BACKEND.TokenPositionEmbedding(table, positions="none")(token_ids)


def _dim(blocks, format: str) -> int:
    block_size, type_size = quantized.BLOCKS[format]
    return blocks.shape[1] // type_size * block_size


def sinusoidal(num_positions, dim):
    return _BACKEND.sinusoidal_table(num_positions, dim, dtype="float32")


def rope(x, positions):
    return _BACKEND.apply_rope(x, positions)


def packed_positions(lengths, start):
    return positional.packed_position_ids(lengths, start=start)  # host-side, every backend's


def alibi(num_heads):
    return _BACKEND.alibi_slopes(num_heads)


def t5(relative_position, bidirectional, num_buckets, max_distance):
    return _BACKEND.t5_relative_buckets(
        relative_position,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )


def gradient(token_table, token_ids, upstream):
    table = _BACKEND.to_numpy(token_table)
    positions = np.zeros((token_ids.shape[-1], table.shape[1]), table.dtype)  # not asked for
    layer = _BACKEND.TokenPositionEmbedding(table, positions)
    return _BACKEND.gradients(layer, token_ids, upstream)["token_table"]


# --- at the configurations models ship (the rows "... at PRESET") -------------------------


def _rope_at(preset: str):
    options = configs.preset(preset).rope_options()

    def rope(x, positions):
        return _BACKEND.apply_rope(x, positions, **options)

    return rope


rope_llama_3_2_1b = _rope_at("llama-3.2-1b")
rope_gpt_neox_20b = _rope_at("gpt-neox-20b")


def gemma_lookup(token_table, token_ids):
    return _BACKEND.ScaledWordEmbedding(_BACKEND.to_numpy(token_table))(token_ids)


def opt_positions(input_ids, attention_mask, past_length):
    return _BACKEND.position_ids(input_ids, attention_mask, rule="opt", past_length=past_length)


def bert(word_table, type_table, position_table, input_ids, token_type_ids, start):
    tables = [_BACKEND.to_numpy(t) for t in (word_table, type_table, position_table)]
    return _BACKEND.BertEmbeddings(*tables)(input_ids, token_type_ids, start)


def scaled_inputs(rule: str):
    """The backend's scaled_inputs at one of the matrix's models (kinds.scaled_inputs.MODELS)."""
    value = MODELS[rule]["value"]

    def f(token_table, token_ids, inputs_embeds):
        embeds = None if inputs_embeds is None else _BACKEND.to_numpy(inputs_embeds)
        return _BACKEND.scaled_inputs(
            _BACKEND.to_numpy(token_table), token_ids, embeds, rule=rule, value=value
        )

    return f


granite_inputs = scaled_inputs("granite")
falcon_h1_inputs = scaled_inputs("falcon_h1")
minicpm_inputs = scaled_inputs("minicpm")
gemma_inputs = scaled_inputs("gemma")
