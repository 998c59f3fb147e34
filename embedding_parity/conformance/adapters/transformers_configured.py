"""Hugging Face transformers at the configurations models ship: the models' own rotary
embedding built from a config class at any rope configuration (``rotary``; the bundled
presets' below), Gemma's scaled embedding, GPT-2's, OPT's, RoBERTa's and BART's position ids
and BERT's embeddings module (built from MiniLM's packaged config.json). Nothing is
downloaded."""

import os

import torch
from transformers import BertConfig, LlamaConfig
from transformers.models.bert.modeling_bert import BertEmbeddings
from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave
from transformers.models.gemma.modeling_gemma import GemmaTextScaledWordEmbedding
from transformers.models.glm.modeling_glm import apply_rotary_pos_emb as apply_glm_rotary_pos_emb
from transformers.models.gpt_neox.modeling_gpt_neox import (
    GPTNeoXRotaryEmbedding,
    apply_rotary_pos_emb,
)
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.opt.modeling_opt import OPTLearnedPositionalEmbedding
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

from backends import pretrained
from embedding_parity import configs


def rotary(rope: dict, *, qk: bool = False):
    """f(x, positions) with transformers' rotation at ``rope`` (the rope kind's rotation:
    head_dim, base, layout, scaling, rotary_dim, max_position_embeddings), or with ``qk``
    f(q, k, positions) -> (q_rotated, k_rotated), one cos and sin for both as the models do.
    LlamaRotaryEmbedding (every rope type, through ROPE_INIT_FUNCTIONS and
    dynamic_rope_update), GPTNeoXRotaryEmbedding for a partial rotation (Llama's makes cos and
    sin for the whole head); a fresh module per call so that no call depends on the ones
    before it. Applied as GPT-NeoX does for the half layout, as DeepSeek-V3 does for
    interleaved pairs over the whole head, and as GLM does for a partial interleaved rotation
    (GPT-J's, ChatGLM's) or for a GGUF's (``owner`` llama.cpp: ggml's NORM mode turns the
    pairs in place, where DeepSeek-V3's lays them out half).

    x (..., T, head_dim) with positions (T,), or x (B, H, T, head_dim) with positions (B, T)
    as the models call it."""
    head_dim = rope["head_dim"]
    rotary_dim = rope.get("rotary_dim") or head_dim
    parameters = {"rope_type": "default", **(rope.get("scaling") or {})}
    # the config's own length, as the models read it; the scaling dict's where it has none
    longest = parameters.pop("max_position_embeddings", None)
    longest = rope.get("max_position_embeddings") or longest
    parameters["rope_theta"] = rope["base"]
    if parameters["rope_type"] != "proportional":  # its own factor: a share of the head's slots
        parameters["partial_rotary_factor"] = rotary_dim / head_dim
    # as a config.json gives them (transformers warns otherwise): LongRoPE's lists, int lengths
    parameters |= {k: list(v) for k, v in parameters.items() if isinstance(v, tuple)}
    if "original_max_position_embeddings" in parameters:
        parameters["original_max_position_embeddings"] = int(
            parameters["original_max_position_embeddings"]
        )
    hf = LlamaConfig(
        hidden_size=head_dim,
        num_attention_heads=1,
        head_dim=head_dim,
        rope_parameters=parameters,
        **({"max_position_embeddings": longest} if longest else {}),
    )
    module = GPTNeoXRotaryEmbedding if rotary_dim < head_dim else LlamaRotaryEmbedding
    if rope.get("layout", "half") == "half":  # GPT-NeoX's: the first cos.shape[-1] dims turned
        apply = apply_rotary_pos_emb
    elif rotary_dim == head_dim and rope.get("owner") != "llama.cpp":
        apply = apply_rotary_pos_emb_interleave
    else:  # pairs (2i, 2i+1) turned in place: GLM's, and ggml's NORM mode at a GGUF
        apply = apply_glm_rotary_pos_emb

    def rotated(q, k, positions):
        if positions.ndim == 2:  # (B, T) with q (B, H, T, head_dim): the models' own call
            cos, sin = module(config=hf)(q, positions)
            return apply(q, k, cos, sin)
        q4, k4 = (x.reshape(-1, 1, *x.shape[-2:]) for x in (q, k))  # (batch, heads, T, d)
        cos, sin = module(config=hf)(q4, positions[None])
        q4, k4 = apply(q4, k4, cos, sin)
        return q4.reshape(q.shape), k4.reshape(k.shape)

    def f(x, positions):
        return rotated(x, x, positions)[0]

    return rotated if qk else f


def _rotary_at(preset: str):
    """f(x, positions) with the rotation of the bundled ``preset``."""
    return rotary(configs.preset(preset).options("rope")["rope"])


llama_3_1_8b = _rotary_at("llama-3.1-8b")
llama_3_2_1b = _rotary_at("llama-3.2-1b")
qwen2_5_7b = _rotary_at("qwen2.5-7b")
deepseek_v3 = _rotary_at("deepseek-v3")
gpt_oss_20b = _rotary_at("gpt-oss-20b")
phi_3_mini_128k = _rotary_at("phi-3-mini-128k")
gpt_neox_20b = _rotary_at("gpt-neox-20b")
llama_2_7b_dynamic = _rotary_at("llama-2-7b-dynamic")
phi_2 = _rotary_at("phi-2")


def gemma_embedding(token_table, token_ids):
    vocab_size, hidden = token_table.shape
    layer = GemmaTextScaledWordEmbedding(vocab_size, hidden, 0, embed_scale=hidden**0.5)
    with torch.no_grad():
        layer.weight.data = token_table.clone()
        return layer(token_ids)


def arange_positions(input_ids, attention_mask, past_length):
    # GPT2Model.forward's: one row of past_length + t, which the model broadcasts over the batch
    positions = torch.arange(input_ids.shape[1]) + past_length
    return positions.unsqueeze(0).expand(input_ids.shape)


def opt_positions(input_ids, attention_mask, past_length):
    # the layer returns rows of its table: a table whose row i holds i gives the ids back
    layer = OPTLearnedPositionalEmbedding(4096, 1)
    layer.weight.data = torch.arange(4098, dtype=torch.float64)[:, None]
    return layer(attention_mask, past_length).squeeze(-1).long()


def roberta_positions_at(padding_idx: int):
    """f(input_ids, attention_mask, past_length) by RoBERTa's rule, counting from padding_idx."""

    def f(input_ids, attention_mask, past_length):
        return RobertaEmbeddings.create_position_ids_from_input_ids(
            input_ids, padding_idx, past_length
        )

    return f


roberta_positions = roberta_positions_at(configs.preset("roberta-base").pad_token_id)


def bart_positions(input_ids, attention_mask, past_length):
    from transformers.models.bart.modeling_bart import BartLearnedPositionalEmbedding

    layer = BartLearnedPositionalEmbedding(4096, 1)
    layer.weight.data = torch.arange(4098, dtype=torch.float64)[:, None]
    return layer(input_ids, past_length).squeeze(-1).long()


def _minilm_config() -> BertConfig:
    path = os.path.join(pretrained.package_dir("minilm"), "model", "config.json")
    return BertConfig.from_json_file(path)


def bert_embeddings(word_table, type_table, position_table, input_ids, token_type_ids, start):
    """MiniLM's BertEmbeddings with the battery's tables, its LayerNorm left out (the
    contract is the sum before it)."""
    config = _minilm_config()
    config.vocab_size, config.hidden_size = word_table.shape
    config.type_vocab_size, config.max_position_embeddings = len(type_table), len(position_table)
    layer = BertEmbeddings(config).eval().to(word_table.dtype)
    layer.LayerNorm = torch.nn.Identity()
    with torch.no_grad():
        layer.word_embeddings.weight.copy_(word_table)
        layer.token_type_embeddings.weight.copy_(type_table)
        layer.position_embeddings.weight.copy_(position_table)
        batched = input_ids.reshape(-1, input_ids.shape[-1])  # BertEmbeddings takes (B, T)
        positions = torch.arange(start, start + input_ids.shape[-1]).expand(batched.shape)
        found = layer(batched, token_type_ids.reshape(batched.shape), positions)
        return found.reshape(*input_ids.shape, -1)
