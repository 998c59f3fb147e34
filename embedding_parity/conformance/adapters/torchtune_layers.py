"""torchtune's RotaryPositionalEmbeddings, loaded from its own file.

``import torchtune`` imports the whole package (datasets, torchao, omegaconf); the module that
defines the layer imports torch alone, so it is loaded by path from the installed package."""

import importlib.util
import os

_package = importlib.util.find_spec("torchtune")
if _package is None:
    raise ImportError("torchtune is not installed: pip install --no-deps torchtune")
_path = os.path.join(_package.submodule_search_locations[0], "modules", "position_embeddings.py")
_spec = importlib.util.spec_from_file_location("torchtune_position_embeddings", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
RotaryPositionalEmbeddings = _module.RotaryPositionalEmbeddings
_path = os.path.join(
    _package.submodule_search_locations[0], "models", "llama3_1", "_position_embeddings.py"
)
_spec = importlib.util.spec_from_file_location("torchtune_llama3_1_position_embeddings", _path)
_scaled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_scaled)
Llama3ScaledRoPE = _scaled.Llama3ScaledRoPE


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
