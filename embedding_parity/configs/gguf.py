"""A GGUF file's metadata, read as llama.cpp reads it: the ``Configuration`` it describes, or
one line (``UsageError``) naming the file and the key.

The rules are llama.cpp's at ``LLAMA_CPP``, transcribed from ``src/llama-model.cpp``
(``load_hparams``, ``llama_model_rope_type``, ``get_rope_factors``), ``src/llama-context.cpp``
(the context's rope parameters) and ggml's ``rope_yarn``:

- the pairs: by the architecture (``ROPE_TYPES``): NORM rotates (2i, 2i+1), the kit's
  "interleaved"; NEOX rotates (i, i + n_rot/2), "half";
- the width: head_dim is ``attention.key_length`` (DeepSeek-V2's ``key_length_mla`` where
  given), else ``embedding_length`` over ``attention.head_count`` (layer 0's where given per
  layer: ``hparams.n_head()``), and ``rope.dimension_count`` of it rotate (all of it when
  absent): the first dims, or the last for the MLA graphs (``MLA``);
- the angle of pair i at position p: p * base**(-2i/n_rot) / freq_factors[i] (the
  ``rope_freqs`` tensor, or Phi-3's ``rope_factors_long``/``_short``, where the architecture's
  loader creates it and its graph passes it: ``FACTOR_TENSORS_BY_ARCH``) times freq_scale =
  1 / ``rope.scaling.factor``; under YaRN (ext_factor 1) blended with the unscaled angle over
  the correction range (beta_fast 32, beta_slow 1, ``rope.scaling.original_context_length``);
- cos and sin times mscale = ``rope.scaling.attn_factor`` (1), and times 1 + 0.1 ln(factor)
  under YaRN.

Each is mapped onto one of the kit's rules (``backends.positional.ROPE_INIT_FUNCTIONS``)
only where it is the same maths; every other ``rope.`` key, value or tensor is refused, and so
is a base or a factor that turns a pair too fast for the rope kind's bound to tell a rotation
from none (``checks.checkable_scaling``, as for a config.json).
"""

from __future__ import annotations

import math
import os

import numpy as np

from backends import validation
from embedding_parity.configs import checks
from embedding_parity.configs.configuration import Configuration
from embedding_parity.usage import UsageError

# The llama.cpp whose rules are transcribed here: ggml-org/llama.cpp commit
# 00342301d01add50835550e8a916f12097d94517 (src/llama-model.cpp, src/llama-context.cpp).
LLAMA_CPP = "llama.cpp 00342301d01a"

# llama_model_rope_type (src/llama-model.cpp at LLAMA_CPP), each LLM_ARCH_* by its GGUF name
# (src/llama-arch.cpp's LLM_ARCH_NAMES, which gguf-py's MODEL_ARCH_NAMES repeats); held, with
# WHOLE_HEAD and SWA_BASE_10000, to the engine's newer llama.cpp (FACTOR_SOURCE below) by
# tests/test_gguf_owner.py. That one knows 54 architectures more, refused here until their
# graphs are read: a rope type alone does not say their per-layer widths, NoPE layers, query
# scales, own YaRN factors or sliding-window bases, which no table below holds.
ROPE_TYPES = {
    **dict.fromkeys(
        (
            "clip gpt2 gptj mpt refact bloom mamba mamba2 jamba jina-bert-v2 t5 t5encoder jais "
            "rwkv6 rwkv6qwen2 rwkv7 arwkv7 wavtokenizer-dec nemotron_h"
        ).split(),
        "NONE",
    ),
    **dict.fromkeys(
        (
            "llama llada llama4 deci baichuan starcoder internlm2 minicpm xverse command-r cohere2 "
            "olmo arctic deepseek deepseek2 plm chatglm glm4 granite granitemoe granitehybrid "
            "chameleon bailingmoe neo-bert smollm3 arcee ernie4_5 ernie4_5-moe"
        ).split(),
        "NORM",
    ),
    **dict.fromkeys(
        (
            "falcon falcon-h1 grok dbrx bert jina-bert-v3 nomic-bert nomic-bert-moe stablelm "
            "bitnet qwen qwen2 dream qwen2moe qwen3 qwen3moe qwen3next llada-moe olmo2 olmoe phi2 "
            "phi3 phimoe plamo plamo2 gemma gemma2 gemma3 gemma3n gemma-embedding starcoder2 "
            "openelm gptneox codeshell orion nemotron exaone exaone4 minicpm3 bailingmoe2 dots1 "
            "hunyuan-moe gpt-oss hunyuan-dense lfm2 lfm2moe smallthinker glm4moe seed_oss grovemoe "
            "apertus"
        ).split(),
        "NEOX",
    ),
    "qwen2vl": "MROPE",
}
LAYOUTS = {"NORM": "interleaved", "NEOX": "half"}
# llama.cpp checks n_rot == head_dim for these (load_hparams: "invalid n_rot"; and for
# llama-embed, which the reader refuses).
WHOLE_HEAD = ("llama", "deci", "falcon")
# Their sliding-window layers rotate at base 10000 whatever rope.freq_base says, unscaled: their
# graphs rotate those layers by rope_freq_base_train_swa and _scale_train_swa, which their
# load_arch_hparams leaves at llama_hparams' defaults, 10000 and 1 (rope.freq_base_swa where the
# file gives it); every other architecture's graph rotates them as the rest, or copies the rest's.
SWA_BASE_10000 = ("gemma3", "gemma3n", "gemma-embedding")
# The scaling types llama.cpp knows (LLAMA_ROPE_SCALING_TYPES); absent means linear.
SCALING_TYPES = ("none", "linear", "yarn", "longrope")
# YaRN's tuning keys, which load_hparams reads for some architectures only: honoured at the
# value llama.cpp takes without them (ext_factor: 1 under YaRN, 0 otherwise), refused else.
YARN_KEYS = {
    "rope.scaling.yarn_ext_factor": None,
    "rope.scaling.yarn_attn_factor": 1.0,
    "rope.scaling.yarn_beta_fast": 32.0,
    "rope.scaling.yarn_beta_slow": 1.0,
    "rope.scaling.yarn_log_multiplier": 0.0,
}
READ = (
    "rope.freq_base",
    "rope.dimension_count",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scale_linear",  # the factor's older name
    "rope.scaling.original_context_length",
    "rope.scaling.attn_factor",
    "rope.scaling.finetuned",  # a flag the rotation does not read
    "rope.freq_base_swa",
    *YARN_KEYS,
)
REFUSED = {
    "rope.dimension_sections": "M-RoPE's sections (a position per section, multimodal models): "
    "the kit checks one position per token",
    "rope.dimension_count_swa": "the sliding-window layers rotate another width than the "
    "others: the kit checks one rotation",
}
# The tensors that change the angle: Llama 3.x's llama3 rule, Phi-3's LongRoPE lists.
FACTOR_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")
FACTOR_SOURCE = "llama.cpp 0c1e57098, llama-cpp-python 0.3.36's"
# The next two tables are llama.cpp 0c1e57098's, as llama-cpp-python 0.3.36 vendors it (the
# conformance install's engine, conformance/engines.py): src/models/<arch>.cpp, each
# architecture's load_arch_tensors and the freq_factors operand its graph hands ggml_rope_ext;
# held to those sources, with MLA below, by tests/test_gguf_owner.py.
# The factor tensors each loader creates, (under rope.scaling.type longrope, otherwise); a
# factor tensor it does not create fails its load ("wrong number of tensors"). Every other
# architecture of ROPE_TYPES creates none.
_PAIR = ("rope_factors_long.weight", "rope_factors_short.weight")
FACTOR_TENSORS_BY_ARCH = {
    **dict.fromkeys(
        ("llama", "deci", "granite", "granitemoe", "minicpm", "apertus"),
        (_PAIR, ("rope_freqs.weight",)),
    ),
    **dict.fromkeys(
        ("arcee", "exaone", "exaone4", "granitehybrid", "llama4", "falcon-h1", "llada"),
        (("rope_freqs.weight",),) * 2,
    ),
    **dict.fromkeys(("phi3", "phimoe", "minicpm3"), (_PAIR,) * 2),
}
# Their graphs pass nullptr, not model.get_rope_factors(): the tensor is loaded, never applied.
FACTORS_UNUSED = ("falcon-h1", "llada")
# MLA: the graph splits each head of q (n_embd_head_k wide) into q_nope and q_pe, the view at
# offset n_embd_head_k - n_rot, and rotates q_pe: each head's last n_rot dims (src/models/
# deepseek2.cpp, minicpm3.cpp, plm.cpp; deepseek2's n_embd_head_k_mla(), key_length_mla).
MLA = ("deepseek2", "minicpm3", "plm")
FACTOR_TYPES = {0: "<f4", 1: "<f2"}  # GGML_TYPE_F32, GGML_TYPE_F16; GGUF is little-endian


def from_gguf(path: str) -> Configuration:
    """The Configuration llama.cpp runs a GGUF file at; UsageError in one line naming the file
    and the key or tensor it cannot honour."""
    from backends import pretrained

    def refuse(message: str):
        raise UsageError(f"--config {path}: {message}")

    try:
        metadata, tensors = pretrained.read_gguf(path)
    except OSError as error:
        refuse(error.strerror or str(error))
    except ValueError as error:
        raise UsageError(f"--config {error}") from None
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        refuse(f"general.architecture is {checks.shown(arch)}: a GGUF file names its architecture")
    reader = _Reader(metadata, arch, refuse)
    name = os.path.basename(path)
    config = {
        "name": name,
        "model_type": arch,
        "hidden_size": reader.integer("embedding_length", optional=True),
        "max_position_embeddings": reader.integer("context_length", optional=True),
        # llama.cpp scales Gemma's token rows by sqrt(n_embd) too (its graph's ggml_scale, in
        # float32 rows: the kit's lookup contract is transformers', rounded to the dtype)
        "embed_scale": arch.startswith("gemma"),
        "owner": "llama.cpp",
    }
    if arch not in ROPE_TYPES:
        refuse(
            f"architecture {checks.shown(arch)} is not in llama_model_rope_type ({LLAMA_CPP}): the "
            "kit cannot tell which pairs it rotates"
        )
    if "position_embd.weight" in tensors or ROPE_TYPES[arch] == "NONE":
        return _learned(reader, tensors, config, refuse)
    if ROPE_TYPES[arch] not in LAYOUTS:
        refuse(
            f"architecture {arch} rotates with llama.cpp's {ROPE_TYPES[arch]} (multimodal "
            "positions, a section each): the kit checks one position per token"
        )
    head_dim, rotary = _widths(reader, config["hidden_size"], refuse)
    theta = _base(reader)
    context = config["max_position_embeddings"]
    scaling, chosen = _scaling(reader, tensors, rotary, theta, context, refuse)
    _one_rotation(reader, theta, scaling, refuse)
    config["note"] = chosen  # said in the line the kit prints: config NAME [...]
    try:
        scaling = validation.check_rope_scaling(scaling, rotary)
    except (TypeError, ValueError) as error:
        refuse(str(error))
    return Configuration(
        **config,
        head_dim=head_dim,
        rotary_dim=None if rotary == head_dim else rotary,
        rotary_last=arch in MLA and rotary < head_dim,
        layout=LAYOUTS[ROPE_TYPES[arch]],
        rope_theta=theta,
        scaling=scaling,
    )


class _Reader:
    """The {arch}.* keys, each checked for its type and range where it is read; every rope.
    key checked against what llama.cpp reads."""

    def __init__(self, metadata: dict, arch: str, refuse):
        self.metadata, self.arch, self.refuse = metadata, arch, refuse
        prefix = f"{arch}.rope."
        for key in metadata:
            if not key.startswith(prefix):
                continue
            short = key[len(arch) + 1 :]
            if short in REFUSED:
                refuse(f"key {key}: {REFUSED[short]}")
            if short not in READ:
                refuse(
                    f"key {checks.shown(key)}: a RoPE key the kit does not honour (not among "
                    f"those {LLAMA_CPP} reads for every architecture): refused, not read past"
                )

    def key(self, short: str) -> str:
        return f"{self.arch}.{short}"

    def get(self, short: str):
        return self.metadata.get(self.key(short))

    def integer(self, short: str, *, optional=False, low=1, high=None) -> int | None:
        value = self.get(short)
        if value is None and optional:
            return None
        if type(value) is not int or value < low or (high is not None and value > high):
            upper = f" and at most {high}" if high is not None else ""
            self.refuse(
                f"key {self.key(short)} is {checks.shown(value)}: an integer of {low}{upper}"
            )
        return value

    def positive(self, short: str, default: float | None = None) -> float | None:
        value = self.get(short)
        if value is None:
            return default
        if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
            self.refuse(f"key {self.key(short)} is {checks.shown(value)}: a positive finite number")
        return float(value)


def _learned(reader: _Reader, tensors: dict, config: dict, refuse) -> Configuration:
    """A model without RoPE: learned positions (its position_embd tensor), or refused."""
    if "position_embd.weight" not in tensors:
        refuse(
            f"architecture {reader.arch}: llama.cpp rotates nothing (LLAMA_ROPE_TYPE_NONE) and "
            "the file has no position_embd tensor: no position scheme the kit checks"
        )
    return Configuration(**config)


def _widths(reader: _Reader, hidden: int | None, refuse) -> tuple[int, int]:
    """(head_dim, rotated width), as load_hparams sets n_embd_head_k (DeepSeek-V2's graph:
    n_embd_head_k_mla(), key_length_mla where the file gives it) and n_rot."""
    head_dim = reader.integer("attention.key_length", optional=True, high=checks.MOST_HEAD_DIM)
    if reader.arch == "deepseek2" and reader.get("attention.key_length_mla") is not None:
        head_dim = reader.integer("attention.key_length_mla", high=checks.MOST_HEAD_DIM)
    if head_dim is None:
        heads = _heads(reader, refuse)
        if hidden is None:
            refuse(f"no key {reader.key('embedding_length')} to take head_dim from")
        head_dim = hidden // heads
        if not 1 <= head_dim <= checks.MOST_HEAD_DIM:
            refuse(
                f"head_dim {head_dim} ({reader.key('embedding_length')} {hidden} // "
                f"{heads} heads) is not in [1, {checks.MOST_HEAD_DIM}]"
            )
    rotary = reader.integer("rope.dimension_count", optional=True, low=2, high=head_dim)
    rotary = head_dim if rotary is None else rotary
    if rotary % 2:
        refuse(
            f"{reader.key('rope.dimension_count')} (or head_dim) is {rotary}: RoPE turns pairs "
            "of dims, the rotated width must be even"
        )
    if reader.arch in WHOLE_HEAD and rotary != head_dim:
        refuse(
            f"key {reader.key('rope.dimension_count')} is {rotary}, not head_dim {head_dim}: "
            f"llama.cpp refuses it for {reader.arch} (invalid n_rot)"
        )
    return head_dim, rotary


def _heads(reader: _Reader, refuse) -> int:
    """attention.head_count: one count, or one per layer of which llama.cpp's n_head() takes
    layer 0's."""
    key, counts = reader.key("attention.head_count"), reader.get("attention.head_count")
    if isinstance(counts, list | np.ndarray):  # read_gguf's arrays: numbers in an ndarray
        counts = np.asarray(counts)
        if not counts.size or counts.dtype.kind not in "iu" or counts.min() < 0:
            refuse(f"key {key} is {checks.shown(counts)}: one head count per layer (integers)")
        counts = int(counts[0])
    if type(counts) is not int or counts < 1:
        refuse(
            f"key {key} is {checks.shown(counts)}: layer 0 needs attention heads for llama.cpp to "
            "give it a RoPE width (n_rot is 0 without them)"
        )
    return counts


def _base(reader: _Reader) -> float:
    """rope.freq_base (10000 when absent): above 1, or no pair turns slower than the first."""
    theta = reader.positive("rope.freq_base", 10000.0)
    if theta <= 1.0:
        reader.refuse(
            f"key {reader.key('rope.freq_base')} is {theta:g}: RoPE's base must be above 1 (pair "
            "i turns at base**(-2i/d), falling from 1; models' are 10000 to 1e6): convert the "
            "model again"
        )
    return theta


def _scaling(reader: _Reader, tensors: dict, rotary: int, theta, context: int | None, refuse):
    """(the scaling rule in backends.positional's terms (None: no scaling), which of Phi-3's
    factor tensors it takes and why, or None)."""
    kind = reader.get("rope.scaling.type")
    if kind is None:
        kind = "linear"  # load_hparams' default
    if kind not in SCALING_TYPES:
        refuse(
            f"key {reader.key('rope.scaling.type')} is {checks.shown(kind)}: llama.cpp knows "
            f"{', '.join(SCALING_TYPES)}"
        )
    factor = reader.positive("rope.scaling.factor") or reader.positive("rope.scale_linear")
    factor = 1.0 if kind == "none" or factor is None else factor
    attention = reader.positive("rope.scaling.attn_factor", 1.0)
    least, most = checks.NORMAL  # checks.multiplier's bound on a config.json's attention_factor
    if not least <= attention <= most:
        refuse(
            f"key {reader.key('rope.scaling.attn_factor')} is {attention:g}: it must be in "
            f"[{least:.3g}, {most:g}] (float16's normal numbers): cos and sin times it leave the "
            "range the check runs them in, where an infinite or zero answer equals them; "
            "models' are about 1"
        )
    flag = reader.get("rope.scaling.finetuned")
    if flag is not None and type(flag) is not bool:
        refuse(f"key {reader.key('rope.scaling.finetuned')} is {checks.shown(flag)}: true or false")
    _yarn_keys(reader, kind, refuse)
    factors, source, chosen = _factors(reader, tensors, kind, rotary, context, refuse)
    if factors is not None:
        if factor != 1.0 or kind == "yarn":
            refuse(
                f"tensor {source} with {kind} scaling by factor {factor:g}: llama.cpp applies "
                "both, the kit checks one rule at a time"
            )
        scaling = {"rope_type": "freq_factors", "factors": factors}
        scaling |= {"attention_factor": attention} if attention != 1.0 else {}
        _checkable(theta, scaling, rotary, f"tensor {source}.weight", refuse)
        return scaling, chosen
    if kind == "yarn":
        return _yarn(reader, factor, attention, context, refuse), chosen
    if kind == "longrope":
        refuse(
            f"{reader.key('rope.scaling.type')} is longrope without rope_factors_long and "
            "rope_factors_short tensors: no per-pair factors to scale by"
        )
    if attention != 1.0:
        refuse(
            f"key {reader.key('rope.scaling.attn_factor')} {attention:g} on cos and sin with "
            f"{kind} scaling: the kit's {kind} rule has no attention factor"
        )
    if factor == 1.0:
        return None, chosen
    named = "rope.scaling.factor" if reader.get("rope.scaling.factor") else "rope.scale_linear"
    scaling = {"rope_type": "linear", "factor": factor}
    _checkable(theta, scaling, rotary, f"key {reader.key(named)}", refuse)
    return scaling, chosen


def _yarn_keys(reader: _Reader, kind: str, refuse) -> None:
    for short, neutral in YARN_KEYS.items():
        value = reader.positive(short) if short.endswith(("fast", "slow")) else reader.get(short)
        if value is None:
            continue
        if type(value) not in (int, float):
            refuse(f"key {reader.key(short)} is {checks.shown(value)}: a number")
        if neutral is None:
            neutral = 1.0 if kind == "yarn" else 0.0
        if value != neutral:
            refuse(
                f"key {reader.key(short)} is {value:g}: {LLAMA_CPP} reads it for some "
                f"architectures only, and the kit honours it only at {neutral:g}, its value "
                "when absent"
            )


def _yarn(reader: _Reader, factor: float, attention: float, context: int | None, refuse):
    """YaRN as ggml's rope_yarn computes it with ext_factor 1: Hugging Face's yarn rule (the
    same ramp over the same floored and ceiled correction range) with its attention factor
    attn_factor * (1 + 0.1 ln(factor))."""
    if reader.arch in ("deepseek2", "grok"):
        refuse(
            f"{reader.arch} with YaRN: llama.cpp's {reader.arch} graph sets its own YaRN "
            "attention factor or beta_fast, which the kit does not transcribe"
        )
    if factor < 1.0:
        refuse(f"key {reader.key('rope.scaling.factor')} {factor:g}: YaRN stretches, by >= 1")
    original = reader.integer("rope.scaling.original_context_length", optional=True)
    original = original or context
    if original is None:
        refuse(
            f"YaRN without {reader.key('rope.scaling.original_context_length')} or "
            f"{reader.key('context_length')}: no original context to correct from"
        )
    return {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": original,
        "attention_factor": attention * (1 + 0.1 * math.log(factor)),
    }


def _factors(reader: _Reader, tensors: dict, kind: str, rotary: int, context, refuse):
    """(factors, the tensor, why that one or None): the per-pair divisors llama.cpp's
    get_rope_factors hands ggml_rope_ext. rope_freqs if the file has it; else Phi-3's
    rope_factors_long when the context llama.cpp runs at exceeds the original context,
    rope_factors_short otherwise. That context is a run's, not the file's: the kit takes
    n_ctx 0 (-c 0: the file's context_length, one sequence) and says so. (None, None, None)
    without such a tensor, or where the architecture's graph passes none. Refused where the
    architecture's loader refuses the file: a factor tensor it does not create."""
    for name in tensors:
        if "rope" in name and name not in FACTOR_TENSORS:
            refuse(
                f"tensor {checks.shown(name)}: a RoPE tensor the kit does not read (it reads "
                f"{', '.join(FACTOR_TENSORS)})"
            )
    longrope, other = FACTOR_TENSORS_BY_ARCH.get(reader.arch, ((), ()))
    created = longrope if kind == "longrope" else other
    for name in FACTOR_TENSORS:
        if name in tensors and name not in created:
            which = f"under rope.scaling.type {kind} " if longrope != other else ""
            refuse(
                f"tensor {name}: llama.cpp's {reader.arch} loader creates "
                f"{' and '.join(created) or 'no factor tensor'} {which}and refuses a file with "
                f"another (wrong number of tensors; {FACTOR_SOURCE})"
            )
    if reader.arch in FACTORS_UNUSED and any(n in tensors for n in created):
        unused = f"{' and '.join(n for n in created if n in tensors)} not applied: llama.cpp's "
        return None, None, f"{unused}{reader.arch} graph passes no factors"
    if "rope_freqs.weight" in tensors:
        return _factor_tensor(tensors, "rope_freqs.weight", rotary, refuse), "rope_freqs", None
    present = [n for n in FACTOR_TENSORS[1:] if n in tensors]
    if not present:
        return None, None, None
    if len(present) == 1:
        refuse(f"tensor {present[0]} without its pair: Phi-3 GGUFs carry long and short")
    long, short = (_factor_tensor(tensors, n, rotary, refuse) for n in present)
    if long == short:
        return long, "rope_factors_long", None
    original = reader.integer("rope.scaling.original_context_length", optional=True) or context
    if original is None or context is None:
        refuse(
            "rope_factors_long and _short differ and the file gives no context_length and "
            "original_context_length to choose between them"
        )
    chosen, other = ("long", "short") if context > original else ("short", "long")
    why = (
        f"rope_factors_{chosen}: llama.cpp's at n_ctx {context}, the file's context_length "
        f"(-c 0); -c {'at most' if chosen == 'long' else 'above'} {original} takes "
        f"rope_factors_{other}"
    )
    return (long if chosen == "long" else short), f"rope_factors_{chosen}", why


def _factor_tensor(tensors: dict, name: str, rotary: int, refuse) -> tuple[float, ...]:
    """One positive finite float per rotated pair, from an F32 or F16 tensor."""
    kind, rows = tensors[name]
    if kind not in FACTOR_TYPES:
        refuse(f"tensor {name} is ggml type {kind}: the kit reads factors stored as F32 or F16")
    values = np.asarray(rows).reshape(-1).view(FACTOR_TYPES[kind]).astype(np.float64)
    if values.size != rotary // 2:
        refuse(
            f"tensor {name} has {values.size} factors; a rotated width of {rotary} has "
            f"{rotary // 2} pairs"
        )
    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
        refuse(f"tensor {name} holds factors that are not positive and finite")
    return tuple(values.tolist())


def _checkable(theta: float, scaling: dict, rotary: int, named: str, refuse) -> None:
    """checks.checkable_scaling, the config.json reader's rule, its line naming the tensor or
    key the factor came from."""
    try:
        checks.checkable_scaling(theta, scaling, rotary, named)
    except UsageError as error:
        refuse(str(error))


def _one_rotation(reader: _Reader, theta: float, scaling: dict | None, refuse) -> None:
    """Refused where llama.cpp rotates the sliding-window layers otherwise than the rest."""
    swa = reader.positive("rope.freq_base_swa")
    window = reader.integer("attention.sliding_window", optional=True, low=0)
    if swa is None and reader.arch in SWA_BASE_10000 and window:
        swa = 10000.0
    unscaled = bool(scaling) and reader.arch in SWA_BASE_10000  # freq_scale_swa 1 for them
    if swa is None or (swa == theta and not unscaled):
        return
    refuse(
        f"the sliding-window layers rotate at base {swa:g}"
        + (" unscaled" if unscaled else "")
        + f", the others at {theta:g}"
        + (f" with {scaling['rope_type']} scaling" if unscaled else "")
        + ": the kit checks one rotation"
    )
