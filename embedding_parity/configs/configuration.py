"""What the kit understands of a model's input layer and rotation, whichever file it came from:
one ``Configuration``, and what it sets for each kind of the conformance kit."""

from __future__ import annotations

from dataclasses import dataclass

from embedding_parity.usage import UsageError


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
    owner: str = "transformers"  # whose rules read the file: "transformers" or "llama.cpp"
    note: str | None = None  # a choice the reading made that the file alone does not say

    @property
    def rope(self) -> bool:
        return self.head_dim is not None

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
            if self.embed_scale and self.owner == "llama.cpp":
                raise UsageError(
                    f"{flag}: llama.cpp scales {self.model_type}'s rows after the lookup, in "
                    f"float32 (rows of any table dtype times sqrtf({self.hidden_size})), where "
                    "the kit's lookup contract is transformers' (the scale rounded to the "
                    "table's dtype first): check the lookup at the model's config.json"
                )
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
        said = [f"config {self.name}" + (f" [{self.note}]" if self.note else "")]
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
