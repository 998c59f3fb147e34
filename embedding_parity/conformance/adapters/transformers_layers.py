"""Hugging Face transformers (PyTorch): GPT-2's wte + wpe, Llama's rotary embedding, BLOOM's
ALiBi tensor, T5's relative-position buckets, built from configs (nothing downloaded), and
the data collator that packs documents into one row."""

import torch
from transformers import DataCollatorWithFlattening, GPT2Config, GPT2Model, LlamaConfig
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.t5.modeling_t5 import T5Attention


def gpt2_embeddings(token_table, position_table, token_ids, start):
    vocab_size, dim = token_table.shape
    config = GPT2Config(
        vocab_size=vocab_size,
        n_embd=dim,
        n_positions=len(position_table),
        n_layer=1,
        n_head=1,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2Model(config).to(token_table.dtype).eval()
    with torch.no_grad():
        model.wte.weight.copy_(token_table)
        model.wpe.weight.copy_(position_table)
        positions = torch.arange(start, start + token_ids.shape[-1])
        return model.wte(token_ids) + model.wpe(positions)  # GPT2Model.forward's first line


def llama_rope(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    config = LlamaConfig(
        hidden_size=head_dim,
        num_attention_heads=1,
        head_dim=head_dim,
        # a constant, as a model's config holds it (the default rule does not read it): an
        # exporter traces this module, and a length read from the positions is data it cannot
        max_position_embeddings=1 << 17,
        rope_parameters={"rope_type": "default", "rope_theta": base},
    )
    rotary = LlamaRotaryEmbedding(config=config)
    q = x.reshape(-1, 1, *x.shape[-2:])  # (batch, heads, T, head_dim)
    cos, sin = rotary(q, positions[None])
    rotated, _ = apply_rotary_pos_emb(q, q, cos, sin, unsqueeze_dim=1)
    return rotated.reshape(x.shape)


def bloom_alibi_slopes(num_heads):
    mask = torch.ones(1, 2)
    alibi = build_alibi_tensor(mask, num_heads, torch.float32)  # (heads, 1, 2): slope * key
    return alibi[:, 0, 1]


def t5_buckets(relative_position, bidirectional, num_buckets, max_distance):
    return T5Attention._relative_position_bucket(
        relative_position,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )


def flattening_collator(lengths, start):
    """DataCollatorWithFlattening(return_position_ids=True): documents of ``lengths`` tokens
    packed into one row, its position ids (it takes no start: it numbers each from 0)."""
    features = [{"input_ids": list(range(10, 10 + int(n)))} for n in lengths]
    batch = DataCollatorWithFlattening(return_position_ids=True, return_tensors="np")(features)
    return batch["position_ids"][0]


def gguf_embedding(blocks, format, token_ids):
    """transformers' GgufEmbedding (5.24: a GGUF model's nn.Embedding whose table stays as its
    blocks; forward gathers the ids' rows and unpacks them with its torch dequantizer), on the
    CPU: its hub kernel (an accelerator's) is set absent, so nothing is fetched."""
    from transformers.integrations.gguf import kernels
    from transformers.integrations.gguf.dequant import GGML_BLOCK, GGML_NAME
    from transformers.integrations.gguf.utils import GgufEmbedding

    kernels._gguf_kernel = False  # no hub lookup: the CPU path unpacks in torch
    types = {name: number for number, name in GGML_NAME.items()}
    if format not in types:
        raise ValueError(
            f"transformers' GGUF reader has no {format}: it reads {', '.join(sorted(types))}"
        )
    block_size, type_size = GGML_BLOCK[types[format]]
    dim = blocks.shape[1] // type_size * block_size
    layer = GgufEmbedding(blocks.shape[0], dim, types[format], dtype=torch.float32)
    layer.weight.data = blocks
    return layer(token_ids)


def _model_inputs(rule: str):
    """f(token_table, token_ids, inputs_embeds) by transformers' own model of ``rule``'s family
    (kinds.scaled_inputs.MODELS: its scale), built with no decoder layers and its final norm
    replaced by the identity, so that its last_hidden_state is the input embeddings as its
    forward scales them."""
    from torch import nn
    from transformers import (
        FalconH1Config,
        FalconH1Model,
        Gemma3TextConfig,
        Gemma3TextModel,
        GraniteConfig,
        GraniteModel,
        MiniCPM3Config,
        MiniCPM3Model,
    )

    from embedding_parity.conformance.kinds.scaled_inputs import MODELS

    value = MODELS[rule]["value"]
    classes = {
        "granite": (GraniteConfig, GraniteModel, {"embedding_multiplier": value}),
        "falcon_h1": (FalconH1Config, FalconH1Model, {"embedding_multiplier": value}),
        "minicpm": (MiniCPM3Config, MiniCPM3Model, {"scale_emb": value}),
        "gemma": (Gemma3TextConfig, Gemma3TextModel, {"head_dim": 16}),
    }
    config_class, model_class, fields = classes[rule]

    def f(token_table, token_ids, inputs_embeds):
        vocab, hidden = token_table.shape  # Gemma scales by sqrt(hidden_size): the width
        config = config_class(
            vocab_size=vocab,
            hidden_size=hidden,
            num_hidden_layers=0,
            num_attention_heads=4,
            num_key_value_heads=4,
            intermediate_size=hidden,
            **fields,
        )
        module = model_class(config).to(token_table.dtype).eval()
        module.embed_tokens.weight.data = token_table
        for norm in ("norm", "final_layernorm"):
            if hasattr(module, norm):
                setattr(module, norm, nn.Identity())
        with torch.no_grad():
            if inputs_embeds is None:
                return module(
                    input_ids=token_ids.reshape(-1, token_ids.shape[-1])
                ).last_hidden_state.reshape(*token_ids.shape, hidden)
            return module(
                inputs_embeds=inputs_embeds.reshape(-1, *inputs_embeds.shape[-2:])
            ).last_hidden_state.reshape(inputs_embeds.shape)

    return f


granite_inputs = _model_inputs("granite")
falcon_h1_inputs = _model_inputs("falcon_h1")
minicpm_inputs = _model_inputs("minicpm")
gemma_inputs = _model_inputs("gemma")
