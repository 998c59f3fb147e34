"""A model's configuration, as the kit understands it: what a Hugging Face ``config.json`` (or
a GGUF file's metadata, or a bundled preset) says about the input layer and the rotation.

``read(path)`` and ``preset(name)`` return a ``Configuration``; a field that bears on the
input layer or the rotation and that the kit cannot honour is refused with one line
(``UsageError``), never ignored. Fields that bear on neither (the MLP, dropout, the
tokenizer) are not read at all.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from backends import validation
from embedding_parity.cli import UsageError

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
# GGUF architectures llama.cpp rotates in adjacent pairs (LLAMA_ROPE_TYPE_NORM).
GGUF_INTERLEAVED = {"llama", "baichuan", "starcoder", "orion", "internlm2", "minicpm", "deci"}


@dataclass(frozen=True)
class Configuration:
    name: str
    model_type: str | None = None
    hidden_size: int | None = None
    head_dim: int | None = None
    rotary_dim: int | None = None  # None: the whole head
    layout: str = "half"
    rope_theta: float = 10000.0
    scaling: dict | None = None  # normalised, as backends.positional takes it
    max_position_embeddings: int | None = None
    embed_scale: bool = False  # Gemma: rows times sqrt(hidden_size), rounded first
    position_rule: str = "arange"
    pad_token_id: int | None = None
    type_vocab_size: int | None = None
    layer_norm_eps: float | None = None

    @property
    def rope(self) -> bool:
        return self.model_type not in LEARNED and self.head_dim is not None

    def rope_options(self) -> dict:
        """What ``apply_rope`` and the rope kind take."""
        return {
            "base": self.rope_theta,
            "layout": self.layout,
            "scaling": self.scaling,
            "rotary_dim": self.rotary_dim,
        }

    def options(self, kind: str, flag: str = "--config") -> dict:
        """What this configuration sets for the conformance kit's ``kind``; UsageError where
        it sets nothing (``flag`` names where the configuration came from)."""
        if kind == "rope":
            if not self.rope:
                raise UsageError(
                    f"{flag}: {self.name} has learned positions, no RoPE: "
                    "try --kind position_ids or bert"
                )
            rope = {**self.rope_options(), "head_dim": self.head_dim}
            return {"rope": {**rope, "max_position_embeddings": self.max_position_embeddings}}
        if kind == "lookup":
            if not self.embed_scale:
                raise UsageError(
                    f"{flag}: {self.name} does not scale its token rows: its lookup is the "
                    "plain --kind lookup, without a config"
                )
            return {"embed_scale": self.hidden_size}
        if kind == "position_ids":
            return {"position_rule": self.position_rule, "pad_token_id": self.pad_token_id}
        if kind == "bert":
            return {"type_vocab_size": self.type_vocab_size}
        raise UsageError(f"{flag} goes with --kind rope, lookup, position_ids or bert, not {kind}")

    def line(self) -> str:
        """What was understood, in one line."""
        said = [f"config {self.name}"]
        if self.rope:
            rule = "no scaling" if self.scaling is None else self.scaling["rope_type"]
            if self.scaling:
                shown = {k: v for k, v in self.scaling.items() if k != "rope_type"}
                shown = {
                    k: (f"{len(v)} values" if isinstance(v, tuple) else v) for k, v in shown.items()
                }
                rule += (
                    " ("
                    + ", ".join(
                        f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in shown.items()
                    )
                    + ")"
                )
            rotated = self.rotary_dim or self.head_dim
            said.append(
                f"RoPE {rule}, rope_theta {self.rope_theta:g}, head_dim {self.head_dim}, "
                f"rotating {rotated} dims ({self.layout} layout)"
            )
        else:
            said.append(f"learned positions ({self.position_rule} rule)")
        if self.embed_scale:
            said.append(f"token rows times sqrt({self.hidden_size}) rounded to the dtype first")
        if self.max_position_embeddings:
            said.append(f"max_position_embeddings {self.max_position_embeddings}")
        if self.pad_token_id is not None:
            said.append(f"pad_token_id {self.pad_token_id}")
        if self.type_vocab_size:
            said.append(f"type_vocab_size {self.type_vocab_size}")
        return ": ".join(said[:2]) + ("; " + "; ".join(said[2:]) if said[2:] else "")


def read(path: str) -> Configuration:
    """A config.json (Hugging Face) or a .gguf file's metadata; UsageError in one line."""
    if path.endswith(".gguf"):
        return from_gguf(path)
    try:
        with open(path, encoding="utf-8") as file:
            fields = json.load(file)
    except OSError as error:
        raise UsageError(f"--config {path}: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"--config {path}: not a JSON file ({error})") from None
    if not isinstance(fields, dict):
        raise UsageError(
            f"--config {path}: a config.json holds one object, got {type(fields).__name__}"
        )
    return from_fields(
        fields, os.path.basename(os.path.dirname(os.path.abspath(path))) or path, f"--config {path}"
    )


def preset(name: str) -> Configuration:
    from embedding_parity.configs.presets import PRESETS

    if name not in PRESETS:
        raise UsageError(f"--model {name!r}: no such preset; the presets are {', '.join(PRESETS)}")
    return from_fields(PRESETS[name]["fields"], name, f"--model {name}")


def listing() -> str:
    """The presets, one line each (``--model list``)."""
    from embedding_parity.configs.presets import PRESETS

    return "\n".join(f"{name:<20} {p['about']}" for name, p in PRESETS.items())


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
