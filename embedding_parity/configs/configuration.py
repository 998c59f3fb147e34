"""What the kit understands of a model's input layer and rotation, whichever file it came from:
one ``Configuration``, and what it sets for each kind of the conformance kit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from embedding_parity.usage import UsageError

# The conformance kit's kinds that a vision tower's configuration sets (configs.vision).
VISION_KINDS = ("pos2d_resize", "pos2d_table", "rope2d", "rope2d_ids")

# Model types whose attention scales q . k by a field of their own, not head_dim**-0.5
# (transformers 5.24's modeling code): refused by the attention_scale kind.
# Held to the modeling code by the sweep (tests/test_owner_sweep.py): every other type's
# attention is seen to scale q . k by head_dim**-0.5.
OWN_ATTENTION_SCALE = {
    "gemma2": "its own field query_pre_attn_scalar",
    "gemma3_text": "its own field query_pre_attn_scalar",
    **dict.fromkeys(
        ("gemma4_text", "gemma4_unified_text", "gemma3n_text", "embedding_gemma2_text"),
        "1 (its q and k are RMS-normalised instead)",
    ),
    **dict.fromkeys(
        ("granite", "granitemoe", "granitemoeshared", "granitemoehybrid", "granite_swa"),
        "its own field attention_multiplier",
    ),
    **dict.fromkeys(
        ("granitemoe_swa", "granite4_vision_text", "granite_docling_text"),
        "its own field attention_multiplier",
    ),
}


@dataclass(frozen=True)
class LayerType:
    """Layers that rotate alike: a name (transformers' layer type where it tells them apart,
    else "rope" or "nope"), their indices, their rotation (``rope_theta`` None: NoPE, the
    identity), and the config fields that set it (``why``, quoted when a port mixes them up)."""

    name: str
    layers: tuple[int, ...]
    rope_theta: float | None = None
    scaling: dict | None = None
    rotary_dim: int | None = None
    head_dim: int | None = None  # None: the config's; Gemma 4's full-attention layers' own
    why: str = ""

    @property
    def rotates(self) -> bool:
        return self.rope_theta is not None

    def rule(self) -> str:
        """Its rotation in a few words: "rope_theta 10000, no scaling", "NoPE (not rotated)"."""
        if not self.rotates:
            return "NoPE (not rotated)"
        width = f", head_dim {self.head_dim}" if self.head_dim else ""
        return f"rope_theta {self.rope_theta:g}, {scaling_words(self.scaling)}{width}"

    def brief(self) -> str:
        """Its rotation in a legend's few words: "base 10000, linear, head_dim 512", "NoPE"."""
        if not self.rotates:
            return "NoPE"
        rule = "no scaling" if self.scaling is None else self.scaling["rope_type"]
        width = f", head_dim {self.head_dim}" if self.head_dim else ""
        return f"base {self.rope_theta:g}, {rule}{width}"

    def line(self) -> str:
        count = len(self.layers)
        return (
            f"{self.name}: {'layers' if count > 1 else 'layer'} {spans(self.layers)}"
            + (f" ({count} layers)" if count > 1 else "")
            + f": {self.rule()}"
            + (f" [{self.why}]" if self.why else "")
        )


def spans(layers) -> str:
    """Layer indices as runs: (0, 1, 2, 4, 5) -> "0-2, 4-5"."""
    runs, start = [], None
    for i, layer in enumerate(layers):
        if start is None:
            start = layer
        if i + 1 == len(layers) or layers[i + 1] != layer + 1:
            runs.append(f"{start}" if start == layer else f"{start}-{layer}")
            start = None
    return ", ".join(runs)


def scaling_words(scaling: dict | None) -> str:
    """A scaling rule in words: "no scaling", "linear (factor 8)"."""
    if scaling is None:
        return "no scaling"
    shown = {k: v for k, v in scaling.items() if k != "rope_type"}
    shown = {k: (f"{len(v)} values" if isinstance(v, tuple) else v) for k, v in shown.items()}
    said = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in shown.items())
    return f"{scaling['rope_type']} ({said})" if said else scaling["rope_type"]


def _vocabulary_words(vocab_size: int, tokenizer_size: int) -> str:
    if tokenizer_size == vocab_size:
        return f"vocab_size {vocab_size}, as many as the tokenizer's ids"
    if tokenizer_size < vocab_size:
        return (
            f"vocab_size {vocab_size} beside the tokenizer's {tokenizer_size} ids: rows "
            f"{tokenizer_size} to {vocab_size - 1} are padding, legal rows no text makes"
        )
    return (
        f"vocab_size {vocab_size} but the tokenizer has {tokenizer_size} ids: ids "
        f"{vocab_size} and up have no row (is the tokenizer this model's?)"
    )


@dataclass(frozen=True)
class Configuration:
    name: str
    model_type: str | None = None
    hidden_size: int | None = None
    head_dim: int | None = None
    rotary_dim: int | None = None  # None: the whole head
    rotary_last: bool = False  # the head's last rotary_dim dims rotate (llama.cpp's MLA q_pe)
    layout: str = "half"
    rope_theta: float = 10000.0
    scaling: dict | None = None  # normalised, as backends.positional takes it
    max_position_embeddings: int | None = None
    embed_scale: bool = False  # Gemma: rows times sqrt(hidden_size), rounded first
    # (rule, value): how the model scales its input embeddings (positional.SCALE_RULES), or None
    embedding_scale: tuple | None = None
    vocab_size: int | None = None  # the token table's rows, where the file states them
    tokenizer_size: int | None = None  # the ids of the tokenizer.json beside it, where there is one
    position_rule: str = "arange"
    pad_token_id: int | None = None
    type_vocab_size: int | None = None
    layer_norm_eps: float | None = None
    owner: str = "transformers"  # whose rules read the file: "transformers" or "llama.cpp"
    # Layers that rotate differently (Gemma 3's sliding and global, SmolLM3's NoPE layers), or
    # () where every layer rotates alike; the rope fields above are then the full-attention
    # layers' rule (the first that rotates where those are NoPE).
    layer_types: tuple[LayerType, ...] = ()
    # Multimodal RoPE: (layout, section), positions (3, T), frequency slots shared by the t, h
    # and w rows in ``section`` counts, "chunked" (Qwen2-VL) or "interleaved" (Qwen3-VL)
    mrope: tuple | None = None
    # the position builder's spatial_merge_size and tokens_per_second (Qwen2-VL, Qwen2.5-VL)
    vision: dict | None = None
    # what scales q . k before the softmax: {"qk_head_dim"}, DeepSeek's {"mscale": {factor,
    # mscale_all_dim, mscale}}, Llama 4's NoPE layers' {"temperature": {floor_scale, attn_scale}},
    # Ministral 3's every layer's {"llama_4_scaling": {beta, original_max_position_embeddings}}
    attention: dict | None = None
    note: str | None = None  # a choice the reading made that the file alone does not say
    # Why the kit will not judge this rotation (a rotation its reading does not express), which
    # the kinds that judge the rotation refuse with (a lookup at the same file is still checked)
    unconfirmed: str | None = None
    # The model's own code, to be run on the file when a kind that judges the rotation first
    # asks (configs.owner.hold): () -> (what it confirmed, or None; why not, or None)
    oracle: Callable[[], tuple[str | None, str | None]] | None = field(
        default=None, compare=False, repr=False
    )
    _answer: dict = field(default_factory=dict, compare=False, repr=False)
    # The vision tower's configuration (a vision config, or a multimodal config's vision_config),
    # read when a vision kind first asks; the readers compare their text readings alone
    tower: object = field(default=None, compare=False)  # a configs.vision.Tower

    def owners_answer(self) -> tuple[str | None, str | None]:
        """(held, refusal): what the model's own code confirmed ("24 of 32 attention layers
        rotate, as read"), or why it did not confirm the reading; run once, when first asked."""
        if self.oracle is None:
            return None, None
        if "answer" not in self._answer:
            self._answer["answer"] = self.oracle()
        return self._answer["answer"]

    @property
    def rope(self) -> bool:
        return self.head_dim is not None

    def padding_rows(self) -> int:
        """Rows of the token table past its tokenizer's ids (0 where either is unknown)."""
        if self.vocab_size is None or self.tokenizer_size is None:
            return 0
        return max(self.vocab_size - self.tokenizer_size, 0)

    def rope_options(self) -> dict:
        """What ``apply_rope`` takes; UsageError for a rotation of the head's last dims, which
        apply_rope does not make, or one the model's own code did not confirm."""
        self.confirmed()
        if self.rotary_last:
            raise UsageError(
                f"{self.name}: llama.cpp rotates the last {self.rotary_dim} dims of each head "
                "(MLA's q_pe), the backends' apply_rope the first: check the rotation with "
                "--kind rope"
            )
        return self._rotation()

    def confirmed(self, flag: str | None = None) -> None:
        """UsageError where the model's own code did not confirm the rotation as read."""
        refusal = self.unconfirmed or self.owners_answer()[1]
        if refusal:
            raise UsageError(f"{flag or self.name}: {refusal}")

    def _rotation(self) -> dict:
        """The rotation's fields, as apply_rope and the rope kind name them."""
        options = {
            "base": self.rope_theta,
            "layout": self.layout,
            "scaling": self.scaling,
            "rotary_dim": self.rotary_dim,
        }
        if self.mrope:
            options["mrope"] = {"layout": self.mrope[0], "section": list(self.mrope[1])}
        return options

    def options(self, kind: str, flag: str = "--config", layer: int | str | None = None) -> dict:
        """What this configuration sets for the conformance kit's ``kind``; UsageError where
        it sets nothing (``flag`` names where the configuration came from). ``layer``: a layer's
        index or a layer type's name, for a model whose layers rotate differently: the rope
        kind checks that type alone (else every type, the call told the layer)."""
        if kind.endswith("_invariance"):  # the base kind's question, asked two ways
            if self.rotary_last:
                raise UsageError(
                    f"{flag}: {self.name} rotates the last {self.rotary_dim} dims of each head, "
                    "whose invariances the kit does not build: try --kind rope"
                )
            options = self.options(kind.removesuffix("_invariance"), flag, layer)
            if "embed_scale" in options:
                raise UsageError(
                    f"{flag}: {self.name}'s lookup is Gemma's scaled f(token_table, token_ids), "
                    "whose invariances the kit does not build: try --kind lookup"
                )
            return options
        if layer is not None and kind != "rope":
            raise UsageError(f"--layer and --layer-type go with --kind rope, not {kind}")
        if kind in VISION_KINDS or (self.tower is not None and self.tower.alone):
            if self.tower is None:
                raise UsageError(
                    f"{flag}: {self.name} has no vision tower: --kind {kind} reads a vision "
                    "config (ViT, CLIP, SigLIP, DINOv2, Pixtral, a multimodal vision_config)"
                )
            return self.tower.options(kind, flag)
        if kind in ("rope", "attention_scale"):
            self.confirmed(flag)
        if kind == "rope":
            if not self.rope:
                raise UsageError(
                    f"{flag}: {self.name} has learned positions, no RoPE: "
                    "try --kind position_ids or bert"
                )
            rope = {**self._rotation(), "head_dim": self.head_dim}
            rope |= {"rotary_last": True} if self.rotary_last else {}
            rope |= {"owner": self.owner} if self.owner != "transformers" else {}
            options = {"rope": {**rope, "max_position_embeddings": self.max_position_embeddings}}
            if not self.layer_types:
                if layer is not None:
                    raise UsageError(
                        f"{flag}: every layer of {self.name} rotates alike: leave out --layer "
                        "and --layer-type"
                    )
                return options
            options["layers"] = [self.layer_rope(t) for t in self.layer_types]
            if layer is not None:
                options["layer_type"] = self.layer_type(layer, flag).name
            return options
        if kind == "lookup":
            if self.embed_scale and self.owner == "llama.cpp":
                raise UsageError(
                    f"{flag}: llama.cpp scales {self.model_type}'s rows after the lookup, in "
                    f"float32 (rows of any table dtype times sqrtf({self.hidden_size})), where "
                    "the kit's lookup contract is transformers' (the scale rounded to the "
                    "table's dtype first): check the lookup at the model's config.json"
                )
            if not self.embed_scale and self.padding_rows():
                # the model's own vocabulary: its padding rows must be rows, ids past it errors
                return {"table": [self.vocab_size, 8, 16], "tokenizer_size": self.tokenizer_size}
            if not self.embed_scale:
                raise UsageError(
                    f"{flag}: {self.name} does not scale its token rows and its table has no "
                    "padding rows past a tokenizer.json beside it: its lookup is the plain "
                    "--kind lookup, without a config"
                )
            return {"embed_scale": self.hidden_size}
        if kind == "scaled_inputs":
            if self.owner == "llama.cpp":
                raise UsageError(
                    f"{flag}: a GGUF file is read by llama.cpp's rules, which scale after the "
                    "lookup in float32; the kit's scaled_inputs holds transformers' rules: "
                    "check it at the model's config.json"
                )
            if self.embedding_scale is None:
                raise UsageError(
                    f"{flag}: {self.name} does not scale its input embeddings (the models that "
                    "do: Gemma, MiniCPM, Granite, Falcon-H1)"
                )
            rule, value = self.embedding_scale
            return {"embedding_scale": {"rule": rule, "value": value}}
        if kind == "position_ids":
            return {"position_rule": self.position_rule, "pad_token_id": self.pad_token_id}
        if kind == "bert":
            return {"type_vocab_size": self.type_vocab_size}
        if kind == "packed_positions":  # where each packed document's positions start
            if self.position_rule in ("opt", "bart"):
                raise UsageError(
                    f"{flag}: {self.name}'s positions come from its attention mask with an "
                    f"offset of 2 ({self.position_rule}'s rule), not from packed position ids"
                )
            roberta = self.position_rule == "roberta"
            return {"packed_start": self.pad_token_id + 1 if roberta else 0}
        if kind == "attention_scale":
            if not self.rope:
                raise UsageError(f"{flag}: {self.name} has learned positions: no RoPE attention")
            if self.model_type in OWN_ATTENTION_SCALE:
                raise UsageError(
                    f"{flag}: {self.model_type} scales q . k by "
                    f"{OWN_ATTENTION_SCALE[self.model_type]}, which the kit does not check yet"
                )
            options = {"attention": self.attention or {"qk_head_dim": self.head_dim}}
            if self.layer_types:
                options["layers"] = [self.layer_rope(t) for t in self.layer_types]
            return options
        if kind == "mrope_positions":
            if self.vision is None:
                raise UsageError(
                    f"{flag}: the kit checks the position builders (get_rope_index) of "
                    f"Qwen2.5-VL, Qwen3-VL, Qwen3.5 and GLM-4V, not {self.name}'s"
                )
            if self.vision["spatial_merge_size"] != 2:
                raise UsageError(
                    f"{flag}: spatial_merge_size {self.vision['spatial_merge_size']}: the "
                    "battery's grids are sized for a merge of 2, as Qwen2.5-VL ships"
                )
            return dict(self.vision)
        raise UsageError(
            f"{flag} goes with --kind rope, lookup, position_ids, bert, packed_positions, "
            f"mrope_positions or attention_scale, not {kind}"
        )

    def layer_rope(self, layer_type: LayerType) -> dict:
        """A layer type as the rope kind takes it: its name, layers, the fields that set it,
        and its rotation (``{"nope": True}`` for a NoPE layer's identity)."""
        if layer_type.rotates:
            rope = {
                **self.rope_options(),
                "base": layer_type.rope_theta,
                "scaling": layer_type.scaling,
                "rotary_dim": layer_type.rotary_dim,
            }
        else:
            rope = {"nope": True, "layout": self.layout}
        rope |= {
            "head_dim": layer_type.head_dim or self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
        }
        named = {"name": layer_type.name, "layers": list(layer_type.layers)}
        return {**named, "why": layer_type.why, "rope": rope}

    def rope_by_layer_type(self) -> dict:
        """The backends' ``apply_layer_rope`` layers: each layer type's apply_rope options, None
        for a type that is not rotated (its head width: ``LayerType.head_dim`` or head_dim)."""
        return {
            t.name: (
                {
                    "base": t.rope_theta,
                    "layout": self.layout,
                    "scaling": t.scaling,
                    "rotary_dim": t.rotary_dim,
                }
                if t.rotates
                else None
            )
            for t in self.layer_types
        }

    def layer_head_dims(self) -> dict:
        """Each layer type's head width ({name: head_dim}): Gemma 4's full-attention layers' own,
        the config's head_dim elsewhere (``LayerTypesRotaryEmbedding``'s head_dim)."""
        return {t.name: t.head_dim or self.head_dim for t in self.layer_types}

    def layer_type(self, layer: int | str, flag: str = "--config") -> LayerType:
        """The layer type of a layer's index or a type's name; UsageError naming the choices."""
        names = ", ".join(t.name for t in self.layer_types)
        if isinstance(layer, str):
            for layer_type in self.layer_types:
                if layer_type.name == layer:
                    return layer_type
            raise UsageError(f"--layer-type {layer!r}: {self.name}'s layer types are {names}")
        count = sum(len(t.layers) for t in self.layer_types)
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < count:
            raise UsageError(
                f"--layer {layer!r}: {self.name} has layers 0 to {count - 1}; or name a layer "
                f"type with --layer-type ({names})"
            )
        return next(t for t in self.layer_types if layer in t.layers)

    def line(self) -> str:
        """What was understood: one line, and a line per layer type where layers differ (a
        vision tower's lines, where a vision kind asked)."""
        if self.tower is not None and (self.tower.alone or self.tower.asked):
            return self.tower.line()
        said = [f"config {self.name}" + (f" [{self.note}]" if self.note else "")]
        if self.layer_types:
            own = any(t.head_dim for t in self.layer_types)  # each type says its head_dim
            width = "" if own else f", head_dim {self.head_dim}"
            rope = any(t.rotates for t in self.layer_types)
            rule = f"RoPE by layer type (below){width} ({self.layout} layout)"
            said.append(rule if rope else f"no layer rotated (below){width}: x as it is")
        elif self.rope:
            rule = scaling_words(self.scaling)
            rotated = self.rotary_dim or self.head_dim
            said.append(
                f"RoPE {rule}, rope_theta {self.rope_theta:g}, head_dim {self.head_dim}, "
                f"rotating {'its last ' if self.rotary_last else ''}{rotated} dims "
                f"({self.layout} layout)"
            )
            if self.mrope:
                t, h, w = self.mrope[1]
                said.append(
                    f"M-RoPE over positions (3, T), {self.mrope[0]} frequency slots t {t}, h {h}, "
                    f"w {w}"
                )
        else:
            said.append(f"learned positions ({self.position_rule} rule)")
        if self.embed_scale:
            said.append(f"token rows times sqrt({self.hidden_size}) rounded to the dtype first")
        elif self.embedding_scale:
            rule, value = self.embedding_scale
            given = " (given embeddings too)" if rule == "granite" else ""
            said.append(f"input embeddings times {value:.9g} ({rule}'s rule{given})")
        if self.vocab_size and self.tokenizer_size:
            said.append(_vocabulary_words(self.vocab_size, self.tokenizer_size))
        elif self.vocab_size:
            said.append(f"vocab_size {self.vocab_size}")
        if self.max_position_embeddings:
            said.append(f"max_position_embeddings {self.max_position_embeddings}")
        if self.pad_token_id is not None:
            said.append(f"pad_token_id {self.pad_token_id}")
        if self.type_vocab_size:
            said.append(f"type_vocab_size {self.type_vocab_size}")
        if self.vision:
            read = [f"{k} {v}" for k, v in self.vision.items() if k != "frames"]
            if self.vision["frames"] == "split":
                read.append("each video frame a grid of its own")
            said.append(", ".join(read))
        said += _attention_words(self.attention)
        held, refusal = self._answer.get("answer", (None, None))  # only once it was asked
        if held:
            said.append(f"held to transformers' modeling code: {held}")
        elif self.unconfirmed or refusal:
            said.append(f"not confirmed: {self.unconfirmed or refusal}")
        line = ": ".join(said[:2]) + ("; " + "; ".join(said[2:]) if said[2:] else "")
        return "\n".join([line, *(f"  layer type {t.line()}" for t in self.layer_types)])


def _attention_words(attention: dict | None) -> list[str]:
    """What the line says of the scale of q . k, where it is more than 1 / sqrt(head_dim)."""
    said = []
    if attention and "mscale" in attention:
        m = attention["mscale"]
        said.append(
            f"softmax scale qk_head_dim {attention['qk_head_dim']}**-0.5 times "
            f"mscale(factor {m['factor']:g}, mscale_all_dim {m['mscale_all_dim']:g}) squared"
        )
    if attention and "temperature" in attention:
        t = attention["temperature"]
        said.append(
            f"NoPE layers' query temperature 1 + {t['attn_scale']:g} log1p(floor((p + 1) / "
            f"{t['floor_scale']}))"
        )
    if attention and "llama_4_scaling" in attention:
        s = attention["llama_4_scaling"]
        said.append(
            f"every layer's query scale 1 + {s['beta']:g} ln(1 + floor(p / "
            f"{s['original_max_position_embeddings']}))"
        )
    return said
