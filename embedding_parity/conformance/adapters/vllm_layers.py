"""vLLM's rotary embeddings (vllm/model_executor/layers/rotary_embedding, 0.33.0), run on the
CPU through ``forward_native``: the PyTorch code vLLM runs where no custom kernel is enabled
(``CustomOp.enabled()`` is false under its default compilation config), and the code its CUDA
and CPU kernels are tested against.

vLLM's wheel is built for a GPU and asks another torch; the rotary package is Python over torch
alone. Its files come from the release's source archive (``engines``, fetched by ``make
install-conformance``), loaded as the package ``vllm.model_executor.layers.rotary_embedding``
beside stand-ins for the few vLLM modules they import: a logger, the platform (a CPU), the
CustomOp registry (forward is forward_native), Triton's decorators (its kernels are only
defined, never launched on the CPU), and the config that LongRoPE reads max_model_len from.
Nothing else of vLLM is imported; the rows run in a worker of their own (the ``vllm`` name
is the stand-in's there).

``get_rope`` is vLLM's own factory: rope_parameters as a model's config gives them to it, a
model's ``max_position`` (the length it serves: here 131072, the battery's longest position
+ 1, whatever the config's: a table's rows depend on their own position alone, and the YaRN
and dynamic rules read the original length, not this one). It caches one instance per configuration and dtype, shared
by every layer and call; the rows build a fresh one per call (the cache cleared first), except
the row named shared, which calls it as vLLM's models do."""

from __future__ import annotations

import logging
import types

import torch
from torch import nn

from embedding_parity import configs
from embedding_parity.conformance.adapters import load_engine_package

SERVED = 131072  # max_position: the battery's longest position + 1
PACKAGE = "vllm.model_executor.layers.rotary_embedding"


class _Logger(logging.LoggerAdapter):
    def warning_once(self, *arguments, **keywords):
        self.warning(*arguments, **keywords)

    info_once = debug_once = warning_once


class _Platform:
    """A CPU: every ``is_<device>()`` but is_cpu() is false."""

    device_type = "cpu"

    def __getattr__(self, name):
        if name.startswith("is_"):
            return lambda *a, **k: name == "is_cpu"
        raise AttributeError(name)


class CustomOp(nn.Module):
    """vLLM's CustomOp where no custom op is enabled: forward is forward_native."""

    @classmethod
    def register(cls, name):
        return lambda op: op

    register_oot = register

    @classmethod
    def enabled(cls) -> bool:
        return False

    def __init__(self, *, enforce_enable: bool = False, compile_native: bool = False):
        super().__init__()

    def forward(self, *arguments, **keywords):
        return self.forward_native(*arguments, **keywords)


class _Triton:
    """Triton's decorators, so that a kernel's definition loads; nothing launches one."""

    constexpr = object

    def __getattr__(self, name):
        if name in ("jit", "autotune", "heuristics"):
            return self._decorator
        if name == "next_power_of_2":
            return lambda n: 1 << (int(n) - 1).bit_length()
        if name == "cdiv":
            return lambda a, b: -(-a // b)
        return object

    @staticmethod
    def _decorator(*arguments, **keywords):
        if len(arguments) == 1 and callable(arguments[0]) and not keywords:
            return arguments[0]
        return lambda function: function


class _Config:
    """get_current_vllm_config(): the length LongRoPE decides on (``max_model_len``)."""

    def __init__(self):
        self.model_config = types.SimpleNamespace(max_model_len=SERVED)


_CONFIG = _Config()


def _stand_ins() -> dict:
    def module(name, **attributes):
        made = types.ModuleType(name)
        made.__dict__.update(attributes)
        return made

    class _Aiter:
        @staticmethod
        def is_triton_rotary_embed_enabled():
            return False

    return {
        "vllm": module("vllm", __path__=[]),
        "vllm.logger": module("vllm.logger", init_logger=lambda n: _Logger(logging.getLogger(n))),
        "vllm.platforms": module("vllm.platforms", current_platform=_Platform()),
        "vllm.model_executor": module("vllm.model_executor", __path__=[]),
        "vllm.model_executor.layers": module("vllm.model_executor.layers", __path__=[]),
        "vllm.model_executor.custom_op": module(
            "vllm.model_executor.custom_op", CustomOp=CustomOp, PluggableLayer=CustomOp
        ),
        "vllm.utils": module("vllm.utils", __path__=[]),
        "vllm.utils.torch_utils": module(
            "vllm.utils.torch_utils",
            direct_register_custom_op=lambda *a, **k: None,
            async_tensor_h2d=lambda data, dtype, device, pin_memory: torch.tensor(
                data, dtype=dtype
            ),
        ),
        "vllm.utils.flashinfer": module("vllm.utils.flashinfer", has_flashinfer=lambda: False),
        "vllm.triton_utils": module("vllm.triton_utils", tl=_Triton(), triton=_Triton()),
        "vllm._aiter_ops": module("vllm._aiter_ops", rocm_aiter_ops=_Aiter()),
        "vllm.distributed": module(
            "vllm.distributed",
            get_tensor_model_parallel_rank=lambda: 0,
            get_tensor_model_parallel_world_size=lambda: 1,
        ),
        "vllm.config": module("vllm.config", get_current_vllm_config=lambda: _CONFIG),
    }


rotary_embedding = load_engine_package("vllm", PACKAGE, _stand_ins)


def rope_parameters(rope: dict, preset: str | None = None) -> tuple[dict, bool, int]:
    """(rope_parameters, is_neox_style, max_position) as a vLLM model hands them to get_rope,
    from the kit's rotation (``configs``' normalised dict)."""
    scaling = dict(rope.get("scaling") or {})
    parameters = {"rope_type": scaling.pop("rope_type", "default"), "rope_theta": rope["base"]}
    scaling.pop("max_position_embeddings", None)
    parameters |= {k: list(v) if isinstance(v, tuple) else v for k, v in scaling.items()}
    if "original_max_position_embeddings" in parameters:
        parameters["original_max_position_embeddings"] = int(
            parameters["original_max_position_embeddings"]
        )
    if preset and preset.startswith("deepseek") and parameters["rope_type"] == "yarn":
        parameters["rope_type"] = "deepseek_yarn"  # as vLLM's DeepseekV2 model renames it
    rotary = rope.get("rotary_dim") or rope["head_dim"]
    if rotary != rope["head_dim"]:
        parameters["partial_rotary_factor"] = rotary / rope["head_dim"]
    if rope.get("mrope"):  # Qwen2-VL's sections (in frequency slots), Qwen3-VL's interleaved
        parameters["mrope_section"] = list(rope["mrope"]["section"])
        parameters["mrope_interleaved"] = rope["mrope"]["layout"] == "interleaved"
    return parameters, rope["layout"] == "half", SERVED


def rotary(rope: dict, *, preset: str | None = None, shared: bool = False, qk: bool = False):
    """f(x, positions) (or with ``qk`` f(q, k, positions)) by vLLM's get_rope at ``rope``:
    tokens first, as vLLM calls it, (tokens, heads * head_dim) at positions (tokens,); a
    fresh instance per call, built for the call's dtype as a model served in it is, unless
    ``shared``: then get_rope's one instance, built for float32."""
    parameters, neox, longest = rope_parameters(rope, preset)
    head = rope["head_dim"]

    def rotated(q, k, positions):
        if not shared:
            rotary_embedding._ROPE_DICT.clear()
        # the model's dtype: the call's (a model served in it), float32 for the shared one
        dtype = torch.float32 if shared else q.dtype
        layer = rotary_embedding.get_rope(
            head, longest, is_neox_style=neox, rope_parameters=parameters, dtype=dtype
        )
        # DeepSeek's MLA hands its rope part per head, (tokens, heads, d); the rest
        # (tokens, heads * d), as the models' attention does
        flat = parameters["rope_type"] != "deepseek_yarn"
        batched = positions.ndim == 2 and not rope.get("mrope")  # M-RoPE's are (3, T)
        tokens, back = _tokens(q, batched, flat)
        keys, _ = _tokens(k, batched, flat)
        at = positions.reshape(-1) if batched else positions
        q_out, k_out = layer(at, tokens, keys)  # forward: forward_native
        return back(q_out), back(k_out)

    def f(x, positions):
        return rotated(x, x.clone(), positions)[0]

    return rotated if qk else f


def _tokens(x, batched: bool, flat: bool = True):
    """x (..., T, d), or (B, H, T, d) ``batched`` at positions (B, T), as vLLM's tokens,
    (tokens, H * d) or, not ``flat``, (tokens, H, d); and the function that puts a result back."""
    if batched:  # tokens are (B, T)
        b, h, t, d = x.shape
        tokens = x.permute(0, 2, 1, 3).reshape(b * t, h * d if flat else h, *(() if flat else (d,)))
        return tokens, lambda y: y.reshape(b, t, h, d).permute(0, 2, 1, 3)
    t, d = x.shape[-2:]
    moved = x.movedim(-2, 0)  # (T, ..., d)
    tokens = moved.reshape(t, -1) if flat else moved.reshape(t, -1, d)
    return tokens, lambda y: y.reshape(moved.shape).movedim(0, -2)


def _at(preset: str, *, layer: str | None = None):
    rope = configs.preset(preset).options("rope", "--model", layer=layer)["rope"]
    return rotary(rope, preset=preset)


def rope(x, positions):
    """The textbook's rotation: get_rope's default at base 10000, the half (NeoX) layout."""
    return rotary({"head_dim": x.shape[-1], "base": 10000.0, "layout": "half"})(x, positions)


def rope_shared(x, positions):
    """get_rope as vLLM's models call it: one instance per configuration, shared."""
    return rotary({"head_dim": x.shape[-1], "base": 10000.0, "layout": "half"}, shared=True)(
        x, positions
    )


llama_3_2_1b = _at("llama-3.2-1b")
qwen2_5_7b = _at("qwen2.5-7b")
gpt_oss_20b = _at("gpt-oss-20b")
deepseek_v3 = _at("deepseek-v3")
phi_3_mini_128k = _at("phi-3-mini-128k")
gpt_neox_20b = _at("gpt-neox-20b")
phi_2 = _at("phi-2")
gpt_j_6b = _at("gpt-j-6b")  # the interleaved layout (is_neox_style=False), partial
gemma_4_e2b_full = _at("gemma-4-e2b", layer="full_attention")  # proportional, heads of 512
qwen2_5_vl_7b = _at("qwen2.5-vl-7b")  # M-RoPE: positions (3, T), chunked sections
qwen3_vl_8b = _at("qwen3-vl-8b")  # M-RoPE, interleaved sections
llama_2_7b_dynamic = _at("llama-2-7b-dynamic")
