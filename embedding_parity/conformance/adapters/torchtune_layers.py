"""torchtune's RotaryPositionalEmbeddings, Llama3ScaledRoPE and GemmaNormEmbeddings, loaded
from their own files.

``import torchtune`` imports the whole package (datasets, torchao, omegaconf); the modules that
define the layers import torch alone, so they are loaded by path from the installed package."""

import torch

from embedding_parity.conformance.adapters import load_file

_INSTALL = "pip install --no-deps torchtune"
RotaryPositionalEmbeddings = load_file(
    "torchtune", "modules", "position_embeddings.py", install=_INSTALL
).RotaryPositionalEmbeddings
Llama3ScaledRoPE = load_file(
    "torchtune", "models", "llama3_1", "_position_embeddings.py", install=_INSTALL
).Llama3ScaledRoPE
GemmaNormEmbeddings = load_file(
    "torchtune", "models", "gemma", "gemma_norm_embedding.py", install=_INSTALL
).GemmaNormEmbeddings


def rotary(head_dim: int, base: float, scaling: dict | None = None, *, qk: bool = False):
    """f(x, positions) with torchtune's rotation of head_dim dims, or with ``qk`` f(q, k,
    positions) -> (q_rotated, k_rotated), one layer for both as torchtune's attention calls it:
    RotaryPositionalEmbeddings, or Llama3ScaledRoPE for a llama3 ``scaling`` (the kit's
    normalised dict); a fresh layer per call, its cache max(positions) + 1 long, so that no
    call depends on the ones before it.

    x (..., T, head_dim) with positions (T,), or x (B, H, T, head_dim) with positions (B, T)."""

    def layer(max_seq_len: int):
        if scaling is None:
            return RotaryPositionalEmbeddings(head_dim, max_seq_len=max_seq_len, base=base)
        return Llama3ScaledRoPE(
            head_dim,
            max_seq_len=max_seq_len,
            base=base,
            scale_factor=scaling["factor"],
            low_freq_factor=scaling["low_freq_factor"],
            high_freq_factor=scaling["high_freq_factor"],
            old_context_len=scaling["original_max_position_embeddings"],
        )

    def turn(rotate, x, positions):
        if positions.ndim == 2:  # torchtune's layers take (B, T, H, head_dim)
            return rotate(x.transpose(1, 2), input_pos=positions).transpose(1, 2)
        length = x.shape[-2]
        heads = x.reshape(-1, length, 1, head_dim)  # (batch, T, heads, head_dim)
        rotated = rotate(heads, input_pos=positions[None].expand(heads.shape[0], length))
        return rotated.reshape(x.shape)

    def rotated(q, k, positions):
        rotate = layer(int(positions.max()) + 1)
        return turn(rotate, q, positions), turn(rotate, k, positions)

    def f(x, positions):
        return turn(layer(int(positions.max()) + 1), x, positions)

    return rotated if qk else f


def rope(x, positions, base=10000.0):
    return rotary(x.shape[-1], base)(x, positions)


def llama3_scaled_rope(x, positions):
    """Llama3ScaledRoPE at Llama 3.2 1B's configuration, its scale_factor given (default 8)."""
    from embedding_parity import configs

    config = configs.preset("llama-3.2-1b")
    return rotary(config.head_dim, config.rope_theta, config.scaling)(x, positions)


def gemma_embedding(token_table, token_ids):
    """Gemma's lookup, token rows times sqrt(embedding_dim) (torchtune rounds it to the rows'
    dtype straight from float64)."""
    layer = GemmaNormEmbeddings(*token_table.shape)
    with torch.no_grad():
        layer.weight.data = token_table.clone()
        return layer(token_ids)
