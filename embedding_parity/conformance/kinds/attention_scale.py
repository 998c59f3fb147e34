"""attention_scale: f(positions, layer) -> the (T,) float64 factor q . k is multiplied by
before the softmax, at each query position of a layer.

The scalars around the rotation, as the model's attention code sets them: qk_head_dim**-0.5;
DeepSeek-V2's and V3's softmax scale times YaRN's mscale(factor, mscale_all_dim) squared
(x1.8739 for V3, x1.5896 for V2-Lite: on top of the attention factor on cos and sin, not
instead of it); Llama 4's NoPE layers' query temperature 1 + attn_scale * log1p(floor((p + 1) /
floor_scale)), 1 on its RoPE layers; Ministral 3's query scale 1 + beta * ln(1 + floor(p /
original_max_position_embeddings)) on every layer (transformers' get_llama_4_attn_scale, with
llama_4_scaling_beta: no + 1, so its steps fall one position after Llama 4's would). The
reference is that formula in float64; a correct float64 evaluation is within 4 ulps of it (the
power, the logarithm and at most four roundings of products and sums, each within one ulp), the
bound. A model whose layers differ is checked at each layer type and at every layer once
(``layer map``).
"""

from __future__ import annotations

import math

import numpy as np

from backends import validation
from embedding_parity.conformance.kinds.base import Case, Kind

# Query positions: the temperature's steps at 8192 (floor((p + 1) / 8192) moves from 0 to 1 at
# p = 8191), 16383, and on to Llama 4 Scout's 10M context.
POSITIONS = np.array([0, 1, 8190, 8191, 8192, 16382, 16383, 100000, 131071, 1048575, 10485759])
ULPS = 4  # the bound, in float64 ulps of the value


def mscale(factor: float, value: float) -> float:
    """YaRN's 0.1 * value * ln(factor) + 1 (1 for factor <= 1), DeepSeek's yarn_get_mscale."""
    return 1.0 if factor <= 1 else 0.1 * value * math.log(factor) + 1.0


class AttentionScale(Kind):
    name = "attention_scale"
    contract = (
        "f(positions, layer) -> the (T,) float64 factor of q . k before the softmax at each "
        "query position: qk_head_dim**-0.5, DeepSeek's mscale squared, Llama 4's temperature, "
        "Ministral 3's query scale"
    )
    exact = False

    def cases(self, options):
        attention = options.get("attention") or {"qk_head_dim": 16}
        layers = options.get("layers") or [{"name": "every layer", "layers": [0], "rope": {}}]
        found = []
        for layer_type in layers:
            params = _params(attention, layer_type, layers, layer_type["layers"][0])
            where = f"layer {params['layer']}, positions 0 to {_positions(attention)[-1]}"
            found.append(Case(f"scale {layer_type['name']}", where, params))
        if options.get("layers"):
            for layer_type in layers:
                for layer in layer_type["layers"]:
                    params = _params(attention, layer_type, layers, layer)
                    found.append(Case("layer map", f"layer {layer} ({layer_type['name']})", params))
        return found

    def describe(self, options):
        attention = options.get("attention") or {"qk_head_dim": 16}
        said = f"{self.contract}: {_formula(attention)}"
        if "temperature" in attention:
            said += "; the temperature on the NoPE layers only"
        if "llama_4_scaling" in attention:
            said += "; the query scale on every layer"
        return said

    def arguments(self, params):
        return [_positions(params["attention"]).astype(np.int64), params["layer"]]

    def expected_dtype(self, params, actual):
        return "float64"

    def reference(self, params, on=None, **changes):
        """The factor at the case's positions; ``on``: the temperature applied or not (default:
        on the NoPE layers); ``changes``: the attention settings a mistake changes."""
        attention = {**params["attention"], **changes}
        positions = _positions(params["attention"])
        return _scale(attention, positions, params["nope"] if on is None else on)

    def tolerance(self, params, dtype):
        return ULPS * np.spacing(np.abs(self.reference(params)))

    def mistakes(self, params):
        attention = params["attention"]
        found = []
        temperature = attention.get("temperature")
        if temperature:
            found += [
                (
                    (
                        "the query temperature on every layer, its RoPE layers too (Llama 4 tunes "
                        "the NoPE layers' alone)"
                    ),
                    self.reference(params, on=True),
                ),
                (
                    "no query temperature on the NoPE layers (attn_temperature_tuning ignored)",
                    self.reference(params, on=False),
                ),
                (
                    (
                        "log1p((p + 1) / floor_scale) without the floor: the temperature grows "
                        "smoothly where Llama 4's steps every floor_scale positions"
                    ),
                    self.reference(params, temperature={**temperature, "floor": False}),
                ),
                (
                    (
                        "floor(p / floor_scale), not floor((p + 1) / floor_scale): the step one "
                        "position late"
                    ),
                    self.reference(params, temperature={**temperature, "shift": 0}),
                ),
                (
                    (
                        "computed in float32 (transformers' positions.float()): right to float32's "
                        "precision, not float64's"
                    ),
                    self._in_float32(params),
                ),
            ]
        found += self._llama_4_scaling_mistakes(params)
        scale = attention.get("mscale")
        if scale:
            found += [
                (
                    (
                        "without DeepSeek's mscale squared: qk_head_dim**-0.5 alone (mobius PR #548: "
                        "the logits off by that factor)"
                    ),
                    self.reference(params, mscale=None),
                ),
                ("DeepSeek's mscale applied once, not squared", self._mscale_once(params)),
                (
                    (
                        f"mscale(factor, mscale) where mscale_all_dim ({scale['mscale_all_dim']:g}) "
                        "is meant (Megatron-LM #1429)"
                    ),
                    self.reference(params, mscale={**scale, "mscale_all_dim": scale["mscale"]}),
                ),
                (
                    (
                        "YaRN's 0.1 ln(factor) + 1 squared, mscale_all_dim taken as 1 (DeepSeek-V3's "
                        "value on another model)"
                    ),
                    self.reference(params, mscale={**scale, "mscale_all_dim": 1.0}),
                ),
            ]
        width = attention["qk_head_dim"]
        for other in sorted({64, 128, width // 3} - {width}):
            found.append(
                (
                    f"1 / sqrt({other}) where q . k is {width} wide"
                    + (" (DeepSeek's rope dims alone)" if other == width // 3 else ""),
                    self.reference(params, qk_head_dim=other),
                )
            )
        found.append(("the softmax scale left out: 1", self.reference(params, qk_head_dim=1)))
        expected = self.reference(params)
        return [(name, result) for name, result in found if not np.array_equal(result, expected)]

    def _llama_4_scaling_mistakes(self, params):
        """Ministral 3's query scale: left out, Llama 4's step, no floor, the wrong length."""
        scaling = params["attention"].get("llama_4_scaling")
        if not scaling:
            return []
        length = scaling["original_max_position_embeddings"]
        found = [
            (
                (
                    "no query scale (llama_4_scaling_beta ignored, or kept to the NoPE layers as "
                    "Llama 4's temperature is: Ministral 3 scales every layer's query)"
                ),
                self.reference(params, llama_4_scaling=None),
            ),
            (
                (
                    f"Llama 4's step floor((p + 1) / {length}) where get_llama_4_attn_scale's is "
                    f"floor(p / {length}): the scale steps up one position early"
                ),
                self.reference(params, llama_4_scaling={**scaling, "shift": 1}),
            ),
            (
                (
                    f"ln(1 + p / {length}) without the floor: the scale grows smoothly where "
                    f"Ministral 3's steps every {length} positions"
                ),
                self.reference(params, llama_4_scaling={**scaling, "floor": False}),
            ),
            (
                (
                    "computed in float32 (transformers' position_ids / length in torch's default "
                    "dtype): right to float32's precision, not float64's"
                ),
                self._in_float32(params),
            ),
        ]
        longest = scaling.get("max_position_embeddings")
        if longest and longest != length:
            said = (
                f"max_position_embeddings ({longest}) where original_max_position_embeddings "
                f"({length}) is meant (get_llama_4_attn_scale names its argument "
                "max_position_embeddings)"
            )
            changed = {**scaling, "original_max_position_embeddings": longest}
            found.append((said, self.reference(params, llama_4_scaling=changed)))
        return found

    def _mscale_once(self, params):
        scale = params["attention"]["mscale"]
        return self.reference(params) / mscale(scale["factor"], scale["mscale_all_dim"])

    def _in_float32(self, params):
        """The models' own arithmetic, the query's factor in float32: Llama 4's positions.float(),
        Ministral 3's position_ids / length in torch's default dtype (float32)."""
        attention = params["attention"]
        p = _positions(attention).astype(np.float32)
        one = np.float32(1)
        result = self.reference(params, temperature=None, llama_4_scaling=None)
        temperature = attention.get("temperature")
        if temperature and params["nope"]:
            steps = np.floor((p + one) / np.float32(temperature["floor_scale"]))
            tuned = np.log1p(steps) * np.float32(temperature["attn_scale"]) + one
            result = result * tuned.astype(np.float64)
        scaling = attention.get("llama_4_scaling")
        if scaling:
            steps = np.floor(p / np.float32(scaling["original_max_position_embeddings"]))
            scaled = one + np.float32(scaling["beta"]) * np.log(one + steps)
            result = result * scaled.astype(np.float64)
        return result

    def diagnose(self, params, actual, dtype, tolerance, error):
        # a mistake matches within float32's rounding of the value, not the float64 bound
        loose = np.abs(self.reference(params)) * float(np.finfo(np.float32).eps)
        return super().diagnose(params, actual, dtype, loose, error)


def _params(attention, layer_type, layers, layer) -> dict:
    nope = bool(layer_type["rope"].get("nope"))
    named = [t["name"] for t in layers]
    return {"attention": attention, "layer": layer, "nope": nope, "types": named}


def _positions(attention: dict) -> np.ndarray:
    """The query positions: POSITIONS, and either side of the first two steps of Ministral 3's
    query scale (p = k * original_max_position_embeddings) where the model has one."""
    scaling = attention.get("llama_4_scaling")
    if not scaling:
        return POSITIONS
    length = scaling["original_max_position_embeddings"]
    near = [k * length + d for k in (1, 2) for d in (-1, 0)]
    return np.union1d(POSITIONS, [p for p in near if p < validation.MAX_POSITION])


def _scale(attention: dict, positions, on: bool) -> np.ndarray:
    """(T,) float64: qk_head_dim**-0.5, times DeepSeek's mscale squared, times the temperature
    where ``on`` (a NoPE layer of Llama 4's), times Ministral 3's query scale (every layer)."""
    value = attention["qk_head_dim"] ** -0.5
    scale = attention.get("mscale")
    if scale:
        value = value * mscale(scale["factor"], scale["mscale_all_dim"]) ** 2
    result = np.full(len(positions), value)
    temperature = attention.get("temperature")
    if temperature and on:
        steps = (positions + temperature.get("shift", 1)) / temperature["floor_scale"]
        if temperature.get("floor", True):
            steps = np.floor(steps)
        result = result * (1.0 + temperature["attn_scale"] * np.log1p(steps))
    scaling = attention.get("llama_4_scaling")
    if scaling:  # get_llama_4_attn_scale: 1 + beta * log(1 + floor(p / length))
        steps = (positions + scaling.get("shift", 0)) / scaling["original_max_position_embeddings"]
        if scaling.get("floor", True):
            steps = np.floor(steps)
        result = result * (1.0 + scaling["beta"] * np.log(1.0 + steps))
    return result


def _formula(attention: dict) -> str:
    said = f"{attention['qk_head_dim']}**-0.5"
    if "mscale" in attention:
        m = attention["mscale"]
        said += f" * (0.1 * {m['mscale_all_dim']:g} * ln({m['factor']:g}) + 1)**2"
    if "temperature" in attention:
        t = attention["temperature"]
        said += f" * (1 + {t['attn_scale']:g} * log1p(floor((p + 1) / {t['floor_scale']})))"
    if "llama_4_scaling" in attention:
        s = attention["llama_4_scaling"]
        length = s["original_max_position_embeddings"]
        said += f" * (1 + {s['beta']:g} * ln(1 + floor(p / {length})))"
    return said
