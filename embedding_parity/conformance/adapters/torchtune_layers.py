"""torchtune's RotaryPositionalEmbeddings, loaded from its own file.

``import torchtune`` imports the whole package (datasets, torchao, omegaconf); the module that
defines the layer imports torch alone, so it is loaded by path from the installed package."""

from embedding_parity.conformance.adapters import load_file

_INSTALL = "pip install --no-deps torchtune"
RotaryPositionalEmbeddings = load_file(
    "torchtune", "modules", "position_embeddings.py", install=_INSTALL
).RotaryPositionalEmbeddings
Llama3ScaledRoPE = load_file(
    "torchtune", "models", "llama3_1", "_position_embeddings.py", install=_INSTALL
).Llama3ScaledRoPE


def rope(x, positions, base=10000.0):
    head_dim, length = x.shape[-1], x.shape[-2]
    layer = RotaryPositionalEmbeddings(head_dim, max_seq_len=int(positions.max()) + 1, base=base)
    heads = x.reshape(-1, length, 1, head_dim)  # (batch, T, heads, head_dim)
    batch = heads.shape[0]
    rotated = layer(heads, input_pos=positions[None].expand(batch, length))
    return rotated.reshape(x.shape)


def llama3_scaled_rope(x, positions):
    """Llama3ScaledRoPE at Llama 3.2 1B's configuration, its scale_factor given (default 8)."""
    from embedding_parity import configs

    config = configs.preset("llama-3.2-1b")
    scaling = config.scaling
    head_dim, length = x.shape[-1], x.shape[-2]
    layer = Llama3ScaledRoPE(
        head_dim,
        max_seq_len=int(positions.max()) + 1,
        base=config.rope_theta,
        scale_factor=scaling["factor"],
        low_freq_factor=scaling["low_freq_factor"],
        high_freq_factor=scaling["high_freq_factor"],
        old_context_len=scaling["original_max_position_embeddings"],
    )
    heads = x.reshape(-1, length, 1, head_dim)  # (batch, T, heads, head_dim)
    rotated = layer(heads, input_pos=positions[None].expand(heads.shape[0], length))
    return rotated.reshape(x.shape)
