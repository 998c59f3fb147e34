"""Hugging Face transformers at the configurations models ship: each model's own rotary
embedding built from its config class at a bundled preset (``embedding_parity.configs``),
Gemma's scaled embedding, OPT's, RoBERTa's and BART's position ids and BERT's embeddings
module (built from MiniLM's packaged config.json). Nothing is downloaded."""

import os

import torch
from transformers import BertConfig, LlamaConfig
from transformers.models.bert.modeling_bert import BertEmbeddings
from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave
from transformers.models.gemma.modeling_gemma import GemmaTextScaledWordEmbedding
from transformers.models.gpt_neox.modeling_gpt_neox import (
    GPTNeoXRotaryEmbedding,
    apply_rotary_pos_emb,
)
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.opt.modeling_opt import OPTLearnedPositionalEmbedding
from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

from backends import pretrained
from embedding_parity import configs


def _rotary_at(preset: str):
    """f(x, positions) with the preset's rotary embedding: LlamaRotaryEmbedding (every rope
    type, through ROPE_INIT_FUNCTIONS and dynamic_rope_update), GPTNeoXRotaryEmbedding for a
    partial rotation (Llama's makes cos and sin for the whole head); a fresh module per call
    so that no call depends on the ones before it; GPT-NeoX's apply, DeepSeek-V3's for its
    interleaved pairs."""
    config = configs.preset(preset)
    rotary = config.rotary_dim or config.head_dim
    rope = {"rope_type": "default", **(config.scaling or {}), "rope_theta": config.rope_theta}
    rope.pop("max_position_embeddings", None)
    rope["partial_rotary_factor"] = rotary / config.head_dim
    hf = LlamaConfig(
        hidden_size=config.head_dim,
        num_attention_heads=1,
        head_dim=config.head_dim,
        max_position_embeddings=config.max_position_embeddings,
        rope_parameters=rope,
    )

    def f(x, positions):
        q = x.reshape(-1, 1, *x.shape[-2:])  # (batch, heads, T, head_dim)
        module = GPTNeoXRotaryEmbedding if rotary < config.head_dim else LlamaRotaryEmbedding
        cos, sin = module(config=hf)(q, positions[None])
        if config.layout == "interleaved":
            rotated, _ = apply_rotary_pos_emb_interleave(q, q, cos, sin)
        else:  # GPT-NeoX's: the first cos.shape[-1] dims rotated, the rest passed through
            rotated, _ = apply_rotary_pos_emb(q, q, cos, sin)
        return rotated.reshape(x.shape)

    return f


llama_3_1_8b = _rotary_at("llama-3.1-8b")
llama_3_2_1b = _rotary_at("llama-3.2-1b")
qwen2_5_7b = _rotary_at("qwen2.5-7b")
deepseek_v3 = _rotary_at("deepseek-v3")
gpt_oss_20b = _rotary_at("gpt-oss-20b")
phi_3_mini_128k = _rotary_at("phi-3-mini-128k")
gpt_neox_20b = _rotary_at("gpt-neox-20b")
gemma_3_4b = _rotary_at("gemma-3-4b")
llama_2_7b_dynamic = _rotary_at("llama-2-7b-dynamic")
phi_2 = _rotary_at("phi-2")


def gemma_embedding(token_table, token_ids):
    vocab_size, hidden = token_table.shape
    layer = GemmaTextScaledWordEmbedding(vocab_size, hidden, 0, embed_scale=hidden**0.5)
    with torch.no_grad():
        layer.weight.data = token_table.clone()
        return layer(token_ids)


def opt_positions(input_ids, attention_mask, past_length):
    # the layer returns rows of its table: a table whose row i holds i gives the ids back
    layer = OPTLearnedPositionalEmbedding(4096, 1)
    layer.weight.data = torch.arange(4098, dtype=torch.float64)[:, None]
    return layer(attention_mask, past_length).squeeze(-1).long()


def roberta_positions(input_ids, attention_mask, past_length):
    padding_idx = configs.preset("roberta-base").pad_token_id
    return RobertaEmbeddings.create_position_ids_from_input_ids(input_ids, padding_idx, past_length)


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
