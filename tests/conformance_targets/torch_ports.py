"""A torch port of Llama's rotary embedding, for --against hf: Hugging Face's arithmetic for
the plain rotation (inv_freq in float32, the angles as a float32 matmul, cos and sin in
float32, then x's dtype), with Llama 3's scaling rule left out."""

import torch


def llama_rope_unscaled(x, positions, base=500000.0):
    dim = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    freqs = (inv_freq[None, :, None] @ positions[None, None, :].float()).transpose(1, 2)[0]
    angles = torch.cat((freqs, freqs), dim=-1)  # (T, dim)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    half = torch.cat((-x[..., dim // 2 :], x[..., : dim // 2]), dim=-1)
    return x * cos + half * sin
