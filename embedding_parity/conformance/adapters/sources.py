"""The implementations ports start from, as references a port is held to case by case
(``compare.py check --against``): ``make(source, kind, options)`` is what ``source`` computes
for ``kind`` at ``options``, the options the kind's cases take (a configuration's,
``configs.Configuration.options``, and the call's shape: rope's head_dim, batched and qk),
following the kind's contract with torch tensors in and out. Each is the source's own code,
wrapped only to the contract's shapes: where it departs from the float64 reference (a
rotation computed in float32, DeepSeek-V3's pairs laid out half), so does the reference it
gives. A piece a source does not have is refused in one line (UsageError), never stood in
for.

No library is imported until ``make`` builds a piece: ``SOURCES`` names them without torch."""

from embedding_parity.conformance.kinds import KINDS
from embedding_parity.usage import UsageError

SOURCES = {
    "hf": "Hugging Face transformers: the models' own modules, built from the config",
    "torchtune": "torchtune: RotaryPositionalEmbeddings, Llama3ScaledRoPE, GemmaNormEmbeddings",
}


def make(source: str, kind: str, options: dict):
    """f following ``kind``'s contract at ``options``, as ``source`` computes it; UsageError
    in one line where the source has no such piece or cannot take the configuration."""
    if source not in SOURCES:
        raise UsageError(f"no source {source!r}: the sources are {', '.join(SOURCES)}")
    pieces = PIECES[source]
    if kind not in pieces:
        raise UsageError(f"{source} has no {kind}: it has {', '.join(pieces)}")
    return pieces[kind](options)


def rotation(options: dict) -> dict:
    """The rotation the rope kind's cases are built at (a config's, or the textbook's at the
    options' base and head_dim, or the layer type --layer-type names); UsageError where the
    kind refuses the options, or where they name no one rotation: a source builds one."""
    chosen = options.get("layer_type")
    if options.get("layers") and chosen is None:
        names = ", ".join(t["name"] for t in options["layers"])
        raise UsageError(
            f"the config's layers rotate differently ({names}) and a source builds one "
            "rotation: name one with --layer-type or --layer"
        )
    rope = KINDS["rope"].cases(options)[0].params["rope"]
    if rope.get("nope"):
        raise UsageError(
            f"the {chosen} layers are not rotated (NoPE): there is no rotation to build; "
            "their contract is x returned as it is"
        )
    if rope.get("rotary_last"):  # a GGUF's MLA graph (configs.gguf.MLA)
        raise UsageError(
            f"llama.cpp rotates the last {rope['rotary_dim']} dims of each head, the sources' "
            "modules the first: check against the contract alone"
        )
    return rope


# --- hf: Hugging Face transformers ----------------------------------------------------------


def hf_rope(options):
    """LlamaRotaryEmbedding (every rope type), GPT-NeoX's for a partial rotation; applied as
    GPT-NeoX, DeepSeek-V3 (interleaved) or GLM (interleaved, partial) apply it; q and k in
    one call with the option qk, a batch of position rows (B, T) as the models pass them."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = rotation(options)
    kind = rope["scaling"] and rope["scaling"]["rope_type"]
    if kind and kind not in ROPE_INIT_FUNCTIONS:  # the kit's freq_factors: llama.cpp's, a GGUF's
        raise UsageError(
            f"hf has no {kind} rule (transformers' rope types: {', '.join(ROPE_INIT_FUNCTIONS)})"
            ": check against the contract alone"
        )
    # the models' modules only now: their import costs seconds a refusal need not pay
    from embedding_parity.conformance.adapters import transformers_configured

    return transformers_configured.rotary(rope, qk=bool(options.get("qk")))


def hf_lookup(options):
    """GPT-2's wte + wpe, or Gemma's GemmaTextScaledWordEmbedding with a Gemma config."""
    if options.get("embed_scale"):
        from embedding_parity.conformance.adapters.transformers_configured import (
            gemma_embedding,
        )

        return gemma_embedding
    from embedding_parity.conformance.adapters.transformers_layers import gpt2_embeddings

    return gpt2_embeddings


def hf_position_ids(options):
    """GPT-2's arange, OPT's, RoBERTa's (from the config's pad_token_id) or BART's rule."""
    from embedding_parity.conformance.adapters import transformers_configured as hf

    rule = options.get("position_rule", "arange")
    if rule == "roberta":
        pad = options.get("pad_token_id")
        return hf.roberta_positions_at(1 if pad is None else pad)  # the kind's cases' default
    rules = {"arange": hf.arange_positions, "opt": hf.opt_positions, "bart": hf.bart_positions}
    return rules[rule]


def hf_bert(options):
    """BertEmbeddings before its LayerNorm, its tables (type_vocab_size) the arguments'."""
    from embedding_parity.conformance.adapters.transformers_configured import bert_embeddings

    return bert_embeddings


def hf_alibi(options):
    """BLOOM's build_alibi_tensor."""
    from embedding_parity.conformance.adapters.transformers_layers import bloom_alibi_slopes

    return bloom_alibi_slopes


def hf_t5(options):
    """T5Attention._relative_position_bucket."""
    from embedding_parity.conformance.adapters.transformers_layers import t5_buckets

    return t5_buckets


# --- torchtune --------------------------------------------------------------------------------


def torchtune_rope(options):
    """RotaryPositionalEmbeddings, or Llama3ScaledRoPE for the llama3 rule: the whole head,
    in pairs (2i, 2i+1) whatever the config's layout (torchtune permutes Hugging Face's
    checkpoints to its layout instead)."""
    rope = rotation(options)
    head_dim, rotary_dim, scaling = rope["head_dim"], rope.get("rotary_dim"), rope["scaling"]
    if rotary_dim and rotary_dim < head_dim:
        raise UsageError(
            f"torchtune rotates the whole head, not the first {rotary_dim} of {head_dim} dims: "
            "it takes configs without a partial rotation (rotary_dim, partial_rotary_factor)"
        )
    if scaling and scaling["rope_type"] != "llama3":
        raise UsageError(
            f"torchtune has no {scaling['rope_type']} rule: it takes configs without "
            "rope_scaling (RotaryPositionalEmbeddings) or with rope_type llama3 (Llama3ScaledRoPE)"
        )
    from embedding_parity.conformance.adapters import torchtune_layers

    return torchtune_layers.rotary(head_dim, rope["base"], scaling, qk=bool(options.get("qk")))


def torchtune_lookup(options):
    """GemmaNormEmbeddings with a Gemma config; torchtune's decoders have no position table."""
    if not options.get("embed_scale"):
        raise UsageError(
            "torchtune has no lookup with a position table (its decoders add no learned "
            "positions): it has Gemma's scaled lookup, with a Gemma config"
        )
    from embedding_parity.conformance.adapters.torchtune_layers import gemma_embedding

    return gemma_embedding


PIECES = {
    "hf": {
        "rope": hf_rope,
        "lookup": hf_lookup,
        "position_ids": hf_position_ids,
        "bert": hf_bert,
        "alibi": hf_alibi,
        "t5": hf_t5,
    },
    "torchtune": {"rope": torchtune_rope, "lookup": torchtune_lookup},
}
