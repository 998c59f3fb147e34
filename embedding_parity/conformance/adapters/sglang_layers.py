"""SGLang's rotary embeddings (sglang/srt/layers/rotary_embedding, 0.5.23), run on the CPU
through ``forward_native``: the path SGLang's operator dispatch takes on a CPU without AMX (this
machine's kind: AVX-512 BF16, no AMX) and the reference its kernels are held to.

SGLang's wheel brings its server; the rotary package is Python over torch. Its files come from
the pinned wheel (``engines``), loaded as the package ``sglang.srt.layers.rotary_embedding``
beside stand-ins for what they import: the platform (a CPU without AMX), the environment's
two rope settings at their defaults (the cos and sin cache in the model's dtype, grown in steps
of 128), the operator base class with forward as forward_native, and the Triton kernels of its
multimodal classes (defined, never called). The rows run in a worker of their own.

``get_rope`` is SGLang's own factory, called as its models call it: (head_size, rotary_dim,
max_position, base, is_neox_style, rope_scaling, dtype); a fresh instance per call (its cache
cleared first), built for the call's dtype, max_position 131072 (the battery's longest + 1)."""

from __future__ import annotations

import sys
import types

import torch
from torch import nn

from embedding_parity import configs
from embedding_parity.conformance.adapters import load_engine_package

SERVED = 131072  # max_position: the battery's longest position + 1
PACKAGE = "sglang.srt.layers.rotary_embedding"
ENVIRONMENT = {"SGLANG_ROPE_CACHE_FP32": False, "SGLANG_ROPE_CACHE_ALIGN": 128}


class BaseFusedOp(nn.Module):
    """SGLang's operator on a CPU without AMX: forward is forward_native."""

    def forward(self, *arguments, **keywords):
        return self.forward_native(*arguments, **keywords)


class _Setting:
    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value


class _Environment:
    def __getattr__(self, name):
        if name not in ENVIRONMENT:
            raise AttributeError(f"{name}: not a setting the rotary code reads")
        return _Setting(ENVIRONMENT[name])


def _not_on_a_cpu(name):
    def kernel(*arguments, **keywords):
        raise NotImplementedError(f"{name} is a GPU kernel, never called on the CPU")

    return kernel


def _stand_ins() -> dict:
    def module(name, **attributes):
        made = types.ModuleType(name)
        made.__dict__.update(attributes)
        return made

    def package(name):
        return module(name, __path__=[])

    devices = ("cuda", "hip", "npu", "xpu", "musa", "mps")
    utils = {f"is_{d}": (lambda: False) for d in devices} | {
        "is_cpu": lambda: True,
        "cpu_has_amx_support": lambda: False,
        "get_bool_env_var": lambda name, default="false": str(default).lower() in ("true", "1"),
        "get_compiler_backend": lambda mode=None: "inductor",
        "get_device": lambda *a: "cpu",
        "support_triton": lambda backend: False,
    }
    kernels = ("triton_ernie45_rope_fused_inplace", "triton_mrope_fused")
    return {
        "sglang": package("sglang"),
        "sglang.kernels": package("sglang.kernels"),
        "sglang.kernels.fused_op": module("sglang.kernels.fused_op", BaseFusedOp=BaseFusedOp),
        "sglang.kernels.ops": package("sglang.kernels.ops"),
        "sglang.kernels.ops.attention": package("sglang.kernels.ops.attention"),
        "sglang.kernels.ops.attention.rotary_triton": module(
            "sglang.kernels.ops.attention.rotary_triton",
            **{name: _not_on_a_cpu(name) for name in kernels},
        ),
        "sglang.kernels.ops.attention.mrope": module(
            "sglang.kernels.ops.attention.mrope",
            apply_interleaved_rope_triton=_not_on_a_cpu("apply_interleaved_rope_triton"),
        ),
        "sglang.srt": package("sglang.srt"),
        "sglang.srt.layers": package("sglang.srt.layers"),
        "sglang.srt.environ": module("sglang.srt.environ", envs=_Environment()),
        "sglang.srt.platforms": module(
            "sglang.srt.platforms",
            current_platform=types.SimpleNamespace(is_out_of_tree=lambda: False),
        ),
        "sglang.srt.runtime_context": module(
            "sglang.srt.runtime_context",
            get_exec=lambda: None,
            publish_role=lambda: None,
            attention_backends=lambda: (None, None),
        ),
        "sglang.srt.utils": module("sglang.srt.utils", **utils),
    }


rotary_embedding = load_engine_package("sglang", PACKAGE, _stand_ins)
factory = sys.modules[f"{PACKAGE}.factory"]


def rope_scaling(rope: dict) -> dict | None:
    """rope_scaling as an SGLang model hands it to get_rope, from the kit's rotation."""
    scaling = dict(rope.get("scaling") or {})
    if not scaling and not rope.get("mrope"):
        return None
    scaling.pop("max_position_embeddings", None)
    scaling = {k: list(v) if isinstance(v, tuple) else v for k, v in scaling.items()}
    if rope.get("mrope"):
        scaling |= {
            "rope_type": "default",
            "mrope_section": list(rope["mrope"]["section"]),
            "mrope_interleaved": rope["mrope"]["layout"] == "interleaved",
        }
    if "original_max_position_embeddings" in scaling:
        scaling["original_max_position_embeddings"] = int(
            scaling["original_max_position_embeddings"]
        )
    return scaling


def rotary(rope: dict, *, shared: bool = False):
    """f(x, positions) by SGLang's get_rope at ``rope``: tokens first, (tokens, heads *
    head_dim) at positions (tokens,), a fresh instance per call built for the call's dtype;
    ``shared``: get_rope's one instance, built for float32, as its models share it."""
    head = rope["head_dim"]
    rotary_dim = rope.get("rotary_dim") or head
    longest = SERVED

    def f(x, positions):
        if not shared:
            factory._ROPE_DICT.clear()
        layer = factory.get_rope(
            head,
            rotary_dim,
            longest,
            rope["base"],
            rope["layout"] == "half",
            rope_scaling(rope),
            torch.float32 if shared else x.dtype,
            # Gemma 4's share of the head's slots, as its model hands it over
            partial_rotary_factor=(rope.get("scaling") or {}).get("partial_rotary_factor", 1.0),
        )
        length = x.shape[-2]
        moved = x.movedim(-2, 0)  # (T, ..., d)
        tokens = moved.reshape(length, -1)
        at = positions if rope.get("mrope") else positions.reshape(-1)  # M-RoPE's: (3, T)
        rotated, _ = layer(at, tokens, tokens.clone())
        return rotated.reshape(moved.shape).movedim(0, -2)

    return f


def rope(x, positions):
    """The textbook's rotation: get_rope at base 10000, the half (NeoX) layout."""
    return rotary({"head_dim": x.shape[-1], "base": 10000.0, "layout": "half"})(x, positions)


def rope_shared(x, positions):
    """get_rope as SGLang's models call it: one instance per configuration, shared."""
    textbook = {"head_dim": x.shape[-1], "base": 10000.0, "layout": "half"}
    return rotary(textbook, shared=True)(x, positions)


def _at(preset: str, *, layer: str | None = None):
    return rotary(configs.preset(preset).options("rope", "--model", layer=layer)["rope"])


llama_3_2_1b = _at("llama-3.2-1b")
qwen2_5_7b = _at("qwen2.5-7b")
gpt_oss_20b = _at("gpt-oss-20b")
phi_3_mini_128k = _at("phi-3-mini-128k")
gpt_neox_20b = _at("gpt-neox-20b")
gpt_j_6b = _at("gpt-j-6b")
llama_2_7b_dynamic = _at("llama-2-7b-dynamic")
gemma_4_e2b_full = _at("gemma-4-e2b", layer="full_attention")  # proportional, heads of 512
qwen2_5_vl_7b = _at("qwen2.5-vl-7b")  # M-RoPE: positions (3, T), chunked sections
qwen3_vl_8b = _at("qwen3-vl-8b")  # M-RoPE, interleaved sections
