"""A GGUF file's metadata, read as llama.cpp reads it: the ``Configuration`` it describes, or
one line (``UsageError``) naming the file and the key."""

from __future__ import annotations

import os

from embedding_parity.cli import UsageError
from embedding_parity.configs.configuration import Configuration  # noqa: F401
from embedding_parity.configs.hf import from_fields

# GGUF architectures llama.cpp rotates in adjacent pairs (LLAMA_ROPE_TYPE_NORM).
GGUF_INTERLEAVED = {"llama", "baichuan", "starcoder", "orion", "internlm2", "minicpm", "deci"}


def from_gguf(path: str) -> Configuration:
    """llama.cpp's metadata names for the same fields (``{arch}.rope.freq_base`` ...)."""
    from backends import pretrained

    try:
        metadata, _ = pretrained.read_gguf(path)
    except (OSError, ValueError) as error:
        raise UsageError(f"--config {path}: {error}") from None
    arch = metadata.get("general.architecture")

    def get(key):
        return metadata.get(f"{arch}.{key}")

    fields = {
        "model_type": arch,
        # llama.cpp rotates llama's pairs (2i, 2i+1) (its converter permutes q and k to match)
        "rope_interleave": arch in GGUF_INTERLEAVED,
        "hidden_size": get("embedding_length"),
        "num_attention_heads": get("attention.head_count"),
        "max_position_embeddings": get("context_length"),
        "rope_theta": get("rope.freq_base"),
    }
    if get("rope.dimension_count") is not None and fields["hidden_size"]:
        head_dim = fields["hidden_size"] // fields["num_attention_heads"]
        fields["head_dim"] = get("key_length") or head_dim
        if get("rope.dimension_count") != fields["head_dim"]:
            fields["rotary_dim"] = get("rope.dimension_count")
    kind = get("rope.scaling.type")
    if kind not in (None, "none"):
        fields["rope_scaling"] = {
            "rope_type": kind,
            "factor": get("rope.scaling.factor"),
            "original_max_position_embeddings": get("rope.scaling.original_context_length"),
        }
    return from_fields(
        {k: v for k, v in fields.items() if v is not None},
        os.path.basename(path),
        f"--config {path}",
    )
