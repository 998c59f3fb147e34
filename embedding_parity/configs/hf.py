"""A Hugging Face ``config.json``'s fields, read as transformers reads them: the
``Configuration`` they describe, or one line (``UsageError``) naming the file and the field."""

from __future__ import annotations

import numpy as np

from backends import validation
from embedding_parity.cli import UsageError
from embedding_parity.configs.configuration import Configuration

# Hugging Face model types whose learned positions follow a rule other than arange.
POSITION_RULES = {
    "opt": "opt",
    "roberta": "roberta",
    "xlm-roberta": "roberta",
    "camembert": "roberta",
    "bart": "bart",
    "mbart": "bart",
}
# Model types without RoPE: learned (or no) positions.
LEARNED = {"bert", "gpt2", "opt", "roberta", "xlm-roberta", "camembert", "bart", "mbart"}
# Rotations over pairs (2i, 2i+1): GPT-J, ChatGLM; DeepSeek-V3 says so with rope_interleave.
INTERLEAVED = {"gptj", "chatglm", "glm"}


def from_fields(fields: dict, name: str, where: str) -> Configuration:
    """The Configuration a config's fields describe; UsageError naming ``where`` and the field."""

    def refuse(message: str):
        raise UsageError(f"{where}: {message}")

    model_type = fields.get("model_type")
    kind = fields.get("position_embedding_type")
    if kind not in (None, "absolute"):
        refuse(f"position_embedding_type {kind!r} is not one the kit checks (only 'absolute')")
    if fields.get("scale_embedding"):
        refuse("scale_embedding (BART's sqrt(d_model) on the token rows) is not one the kit checks")
    hidden = fields.get("hidden_size", fields.get("n_embd", fields.get("d_model")))
    heads = fields.get("num_attention_heads", fields.get("n_head"))
    config = {
        "name": name,
        "model_type": model_type,
        "hidden_size": hidden,
        "max_position_embeddings": fields.get("max_position_embeddings", fields.get("n_positions")),
        "embed_scale": bool(model_type and model_type.startswith("gemma")),
        "position_rule": POSITION_RULES.get(model_type, "arange"),
        "pad_token_id": fields.get("pad_token_id"),
        "type_vocab_size": fields.get("type_vocab_size"),
        "layer_norm_eps": fields.get("layer_norm_eps"),
    }
    if config["position_rule"] == "roberta" and config["pad_token_id"] is None:
        refuse(
            f"{model_type} counts positions from pad_token_id + 1: the config has no pad_token_id"
        )
    if model_type in LEARNED:
        return Configuration(**config)
    head_dim = fields.get("qk_rope_head_dim") or fields.get("head_dim")
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
    if head_dim is None:
        refuse("no head_dim, and no hidden_size and num_attention_heads to derive it from")
    if "rope_local_base_freq" in fields:
        refuse(
            "rope_local_base_freq: Gemma 3's sliding-window layers rotate with another base "
            "than its global ones; give one layer type's config (without the field for the "
            "global layers, or with rope_theta set to it and no rope_scaling for the sliding ones)"
        )
    rope = dict(fields.get("rope_parameters") or {})
    if any(isinstance(v, dict) for v in rope.values()):
        refuse(f"rope_parameters per layer type ({', '.join(rope)}): give one layer type's config")
    rope.update({k: v for k, v in (fields.get("rope_scaling") or {}).items() if v is not None})
    theta = rope.pop("rope_theta", fields.get("rope_theta", fields.get("rotary_emb_base", 10000.0)))
    partial = rope.pop("partial_rotary_factor", None)
    partial = fields.get("partial_rotary_factor", fields.get("rotary_pct", partial))
    rotary_dim = fields.get("rotary_dim")
    if rotary_dim is None and partial is not None and partial != 1.0:
        rotary_dim = int(head_dim * partial)
    layout = "interleaved" if model_type in INTERLEAVED or fields.get("rope_interleave") else "half"
    scaling = _scaling(rope, fields, refuse)
    try:
        _, scaling, rotary_dim = validation.check_rope(
            (1, head_dim), np.zeros(1, np.int64), theta, layout, scaling, rotary_dim
        )
    except (TypeError, ValueError) as error:
        refuse(str(error))
    return Configuration(
        **config,
        head_dim=head_dim,
        rotary_dim=None if rotary_dim == head_dim else rotary_dim,
        layout=layout,
        rope_theta=float(theta),
        scaling=scaling,
    )


def _scaling(rope: dict, fields: dict, refuse) -> dict | None:
    """The rope_scaling dict in backends.positional's terms: Hugging Face's defaults filled in
    from the config (original_max_position_embeddings at the top level, YaRN's factor as the
    ratio of the lengths, dynamic NTK's and LongRoPE's max_position_embeddings)."""
    kind = rope.pop("rope_type", None) or rope.pop("type", None)
    rope.pop("type", None)
    if kind in (None, "default"):
        if rope:
            refuse(f"rope_scaling fields {sorted(rope)} without a rope_type")
        return None
    known = tuple(validation.ROPE_SCALINGS)
    if kind not in known:
        refuse(f"rope_type {kind!r} is not one the kit checks ({', '.join(known)})")
    longest = fields.get("max_position_embeddings")
    if kind in ("yarn", "longrope", "llama3") and "original_max_position_embeddings" not in rope:
        original = fields.get("original_max_position_embeddings")
        if original is None and kind != "llama3":
            original = longest
        if original is not None:
            rope["original_max_position_embeddings"] = original
    if kind == "yarn" and rope.get("factor") is None and longest:
        rope["factor"] = longest / rope["original_max_position_embeddings"]
    if kind in ("dynamic", "longrope") and longest is not None:
        rope.setdefault("max_position_embeddings", longest)
    return {"rope_type": kind, **rope}
