"""Implementations of the configurations models ship, right and wrong, in NumPy: the kit must
pass the right ones at their config and name each mistake."""

import math

import numpy as np

from backends import numpy_backend, positional

LLAMA32 = {
    "rope_type": "llama3",
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def llama32_rope(x, positions):
    return numpy_backend.apply_rope(x, positions, base=500000.0, scaling=LLAMA32)


def llama32_rope_factor_8(x, positions):
    return numpy_backend.apply_rope(x, positions, base=500000.0, scaling={**LLAMA32, "factor": 8.0})


def rope_in_place(x, positions):
    x[...] = numpy_backend.apply_rope(x, positions)
    return x


def lookup_in_place(token_table, position_table, token_ids, start):
    rows = position_table[start : start + token_ids.shape[-1]]
    rows += token_table[token_ids]  # a view of the caller's position table, changed
    return np.broadcast_to(rows, (*token_ids.shape, rows.shape[-1])).copy()


def gemma_lookup(token_table, token_ids):
    return numpy_backend.ScaledWordEmbedding(token_table)(token_ids)


def gemma_lookup_exact_scale(token_table, token_ids):
    rows = token_table[token_ids].astype(np.float64) * math.sqrt(token_table.shape[1])
    return rows.astype(positional.compute_dtype(token_table.dtype)).astype(token_table.dtype)


def opt_positions(input_ids, attention_mask, past_length):
    return numpy_backend.position_ids(
        input_ids, attention_mask, rule="opt", past_length=past_length
    )


def opt_positions_no_offset(input_ids, attention_mask, past_length):
    return opt_positions(input_ids, attention_mask, past_length) - 2


def bert(word_table, type_table, position_table, input_ids, token_type_ids, start):
    return numpy_backend.BertEmbeddings(word_table, type_table, position_table)(
        input_ids, token_type_ids, start
    )


def bert_other_order(word_table, type_table, position_table, input_ids, token_type_ids, start):
    rows = position_table[start : start + input_ids.shape[-1]]
    numpy_backend.validation.check_token_type_ids(token_type_ids, input_ids.shape, len(type_table))
    return word_table[input_ids] + (type_table[token_type_ids] + rows)


# Gemma 3 4B (the gemma-3-4b preset): every sixth layer (5, 11, ...) global, rope_theta 1e6
# with linear factor 8; the others sliding-window layers at 10000, unscaled.
GEMMA3_GLOBAL = {"base": 1e6, "scaling": {"rope_type": "linear", "factor": 8.0}}
GEMMA3_SLIDING = {"base": 10000.0, "scaling": None}


def gemma3_rope(x, positions, layer):
    rule = GEMMA3_GLOBAL if (layer + 1) % 6 == 0 else GEMMA3_SLIDING
    return numpy_backend.apply_rope(x, positions, **rule)


def gemma3_sliding_rope(x, positions):
    return numpy_backend.apply_rope(x, positions, **GEMMA3_SLIDING)


def gemma3_one_rule(x, positions, layer):
    return numpy_backend.apply_rope(x, positions, **GEMMA3_GLOBAL)


def qwen2_5_vl_positions(input_ids, types, images, videos, seconds, mask):
    """Qwen2.5-VL's position builder (the qwen2.5-vl-7b preset: merge 2, 2 tokens a second)."""
    return positional.mrope_position_ids(
        types, images, videos, seconds, mask, spatial_merge_size=2, tokens_per_second=2
    )
