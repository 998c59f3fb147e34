"""rope: f(x, positions) -> x rotated, within the derived per-element bound.

Without a configuration the contract is the textbook's: the half layout, one base over the
whole head of 16 dims. With one (``--config``, ``--model``) it is the model's rotation: its
head_dim, the first rotary_dim dims rotated (the rest passed through, bit for bit), its
layout, base and scaling rule with the rule's attention factor on cos and sin. The length
rules (dynamic, longrope) take the length max(positions) + 1 of each call, Hugging Face's rule.
"""

from __future__ import annotations

import math

import numpy as np

from backends import positional, validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import (
    LONG,
    OTHER_BASES,
    ROPE_DIM,
    Case,
    Kind,
    _phase_record,
    _with_phase,
    low_precision_angles,
)
from embedding_parity.conformance.numerics import FLOATS

TEXTBOOK = {"head_dim": ROPE_DIM, "base": 10000.0, "layout": "half", "scaling": None}


def rotate(x, positions, w, attention, *, layout="half", scale_rest=1.0) -> np.ndarray:
    """float64: the first 2 * len(w) dims of x turned by positions * w, cos and sin times
    ``attention``; the rest passed through (times ``scale_rest``, for a mistake)."""
    angles = np.asarray(positions, np.float64)[:, None] * w
    return rotate_by(x, angles, attention, layout=layout, scale_rest=scale_rest)


def rotate_by(x, angles, attention, *, layout="half", scale_rest=1.0) -> np.ndarray:
    """float64: x's first 2 * pairs dims turned by angles (T, pairs), times ``attention``."""
    x = np.asarray(x, np.float64)
    rotary = 2 * angles.shape[-1]
    turn = attention * np.exp(1j * angles)
    part, rest = x[..., :rotary], x[..., rotary:] * scale_rest
    if layout == "interleaved":
        z = (part[..., 0::2] + 1j * part[..., 1::2]) * turn
        turned = np.stack([z.real, z.imag], axis=-1).reshape(part.shape)
    else:
        z = (part[..., : rotary // 2] + 1j * part[..., rotary // 2 :]) * turn
        turned = np.concatenate([z.real, z.imag], axis=-1)
    return np.concatenate([turned, rest], axis=-1)


class Rope(Kind):
    name = "rope"
    contract = (
        "f(x, positions) -> rotated, x (..., T, head_dim), positions (T,) integers; pairs "
        "(i, i + head_dim/2) turned by positions * base**(-2i/head_dim) (the half layout), or "
        "the rotation --config / --model defines"
    )
    exact = False

    def cases(self, options):
        rope = {**TEXTBOOK, "base": options.get("base", 10000.0), **options.get("rope", {})}
        head = rope["head_dim"]
        found = []
        for dtype in FLOATS:
            for long, label in ((False, "rotation"), (True, "long positions")):
                shape = f"x (3, {len(LONG) if long else 16}, {head})"
                where = "positions to 131071" if long else "positions 0..15"
                params = {"dtype": dtype, "long": long, "seed": len(found), "rope": rope}
                found.append(Case(f"{label} {dtype}", f"{shape}, {where}", params))
        return found

    def describe(self, options):
        rope = options.get("rope")
        if not rope:
            return self.contract
        rotary = rope.get("rotary_dim") or rope["head_dim"]
        pairs = "(2i, 2i+1)" if rope["layout"] == "interleaved" else f"(i, i + {rotary // 2})"
        rule = (
            "no scaling" if rope["scaling"] is None else f"the {rope['scaling']['rope_type']} rule"
        )
        rest = f", dims {rotary}.. passed through" if rotary < rope["head_dim"] else ""
        return (
            f"f(x, positions) -> rotated, x (..., T, {rope['head_dim']}); the first {rotary} dims "
            f"in pairs {pairs} turned by positions * w_i, w from base {rope['base']:g} and "
            f"{rule} (cos and sin times its attention factor){rest}"
        )

    def arguments(self, params):
        positions = LONG if params["long"] else np.arange(16)
        rng = np.random.default_rng(params["seed"])
        shape = (3, len(positions), params["rope"]["head_dim"])
        x = rng.standard_normal(shape).astype(validation.resolve_dtype(params["dtype"]))
        return [x, positions.astype(np.int64)]

    def _rule(self, params):
        """(w, attention, rotary_dim) of the contract at this case's positions."""
        rope = params["rope"]
        rotary = rope.get("rotary_dim") or rope["head_dim"]
        _, positions = self.arguments(params)
        w, attention = positional.rope_parameters(
            rotary, rope["base"], rope["scaling"], positional.length(positions)
        )
        return w, attention, rotary

    def reference(self, params):
        x, positions = self.arguments(params)
        w, attention, _ = self._rule(params)
        return rotate(x, positions, w, attention, layout=params["rope"]["layout"])

    def tolerance(self, params, dtype):
        x, positions = self.arguments(params)
        rope = params["rope"]
        return positional.rope_bound(
            x.astype(np.float64),
            positions,
            base=rope["base"],
            layout=rope["layout"],
            scaling=rope["scaling"],
            rotary_dim=rope.get("rotary_dim"),
            dtype=dtype,
        )

    def mistakes(self, params):
        x, positions = self.arguments(params)
        rope = params["rope"]
        base, layout, scaling, head = (
            rope["base"],
            rope["layout"],
            rope["scaling"],
            rope["head_dim"],
        )
        w, attention, rotary = self._rule(params)

        def turned(w=w, attention=attention, *, at=positions, layout=layout, scale_rest=1.0):
            return rotate(x, at, w, attention, layout=layout, scale_rest=scale_rest)

        other = "interleaved" if layout == "half" else "half"
        found = [
            (
                (
                    "interleaved layout (pairs 2i, 2i+1: GPT-J, Meta's LLaMA) where half is expected, "
                    "it conforms as f(x[..., inv])[..., perm], perm = backends.rope_permutation(head_dim), "
                    "inv = argsort(perm)"
                )
                if other == "interleaved"
                else "half layout (pairs i, i + d/2) where the config's interleaved pairs are expected",
                turned(layout=other),
            )
        ]
        if layout == "interleaved":
            mixed = turned().copy()
            mixed[..., :rotary] = mixed[..., positional.rope_permutation(rotary)]
            found.append(
                (
                    (
                        "interleaved pairs in, the half layout out (DeepSeek-V3's "
                        "apply_rotary_pos_emb_interleave: q . k unchanged, the rotated dims "
                        "reordered by backends.rope_permutation)"
                    ),
                    mixed,
                )
            )
        found += _rule_mistakes(params, x, positions, turned, w, attention, rotary)
        if rotary < head:
            whole = positional.frequencies(head, base, _for_whole_head(scaling))
            found.append(
                (
                    f"partial rotary ignored: the whole head rotated, not its first {rotary} dims",
                    rotate(x, positions, whole, attention, layout=layout),
                )
            )
            over_head = base ** -(np.arange(0, rotary, 2) / head)
            if scaling is None:
                found.append(
                    (
                        f"frequency exponent 2i/head_dim ({head}) where 2i/rotary_dim ({rotary}) is meant",
                        turned(over_head),
                    )
                )
        found += [
            (f"positions off by {k:+d}", turned(at=positions + k))
            for k in (1, -1)
            if positions.min() + k >= 0
        ]
        if scaling is None:
            found += [
                (f"base {b:g} instead of {base:g}", turned(positional.frequencies(rotary, b)))
                for b in OTHER_BASES
                if b != base
            ]
        dtype = params["dtype"]
        if dtype in ("float16", "bfloat16"):
            with np.errstate(over="ignore"):
                rounded = positions.astype(validation.resolve_dtype(dtype)).astype(np.float64)
            found.append(
                (
                    f"positions rounded to the input's dtype ({dtype}) before the angles: {_first_rounded(positions, rounded)}",
                    turned(at=rounded),
                )
            )
        for low in ("bfloat16", "float16", "float32"):
            angles = low_precision_angles(positions.astype(np.float64), w, low)
            found.append(
                (f"angles computed in {low}", rotate_by(x, angles, attention, layout=layout))
            )
        found.append(("the other way (sin with the wrong sign)", turned(at=-positions)))
        return found

    def phase(self, params, actual):
        x, positions = self.arguments(params)
        if actual.shape != x.shape:
            return None
        w, _, _ = self._rule(params)
        error = numerics.rotation_phase_error(
            x, actual, positions, w, layout=params["rope"]["layout"]
        )
        return _phase_record(positions, error)

    def diagnose(self, params, actual, dtype, tolerance, error):
        found = super().diagnose(params, actual, dtype, tolerance, error)
        x, _ = self.arguments(params)
        rotary = params["rope"].get("rotary_dim") or params["rope"]["head_dim"]
        rest, passed = x[..., rotary:], actual[..., rotary:]
        if rest.size and not numerics.same_bits(passed, rest.astype(passed.dtype)):
            rounded = rest.astype(np.float32).astype(rest.dtype)
            how = (
                "rounded through float32"
                if numerics.same_bits(passed, rounded.astype(passed.dtype))
                else "changed"
            )
            changed = f"the dims past rotary_dim ({rotary}..{x.shape[-1] - 1}) {how}: they must pass through unchanged"
            return _with_phase(
                f"{changed}; {found}" if found else changed, self.phase(params, actual)
            )
        if (
            dtype == "float64"
            and numerics.worst_ratio(
                actual, self.reference(params), self.tolerance(params, "float32")
            )[0]
            <= 1
        ):
            found = "computed in float32: within float32's tolerance, not float64's"
        return _with_phase(found, self.phase(params, actual))


def _first_rounded(positions, rounded) -> str:
    moved = np.flatnonzero(rounded != positions)
    if not moved.size:
        return "no position moves"
    p = int(positions[moved[0]])
    return f"position {p} becomes {rounded[moved[0]]:g}"


def _for_whole_head(scaling):
    """A scaling dict for another rotated width (LongRoPE's per-pair lists do not stretch)."""
    if scaling and scaling["rope_type"] == "longrope":
        return None
    return scaling


def _rule_mistakes(params, x, positions, turned, w, attention, rotary):
    """The mistakes of the config's own scaling rule, each named as a port would make it."""
    rope = params["rope"]
    base, scaling = rope["base"], rope["scaling"]
    if scaling is None:
        return []
    kind = scaling["rope_type"]
    seq_len = positional.length(positions)
    found = [
        (
            f"{kind} scaling ignored (the plain rotation)",
            turned(positional.frequencies(rotary, base), 1.0),
        )
    ]

    def rule(**changes):
        return positional.ROPE_INIT_FUNCTIONS[kind](rotary, base, {**scaling, **changes}, seq_len)

    if kind == "llama3" and scaling["factor"] != 8:
        found.append(
            (
                f"llama3 with the factor hard-coded to 8 (Llama 3.1's) where the config says {scaling['factor']:g}",
                turned(rule(factor=8.0)[0]),
            )
        )
    if kind == "yarn":
        factor = scaling["factor"]
        if attention != 1.0:
            found.append(
                (
                    f"YaRN without its attention factor ({attention:.4g} on cos and sin)",
                    turned(attention=1.0),
                )
            )
            found.append(("YaRN's attention factor applied twice", turned(attention=attention**2)))
            if rotary < rope["head_dim"]:
                found.append(
                    (
                        "YaRN's attention factor on the whole output (the passed-through dims scaled too)",
                        turned(scale_rest=attention),
                    )
                )
        plain = positional.yarn_mscale(factor)
        if (
            scaling.get("mscale")
            and scaling.get("mscale_all_dim")
            and not math.isclose(plain, attention)
        ):
            found.append(
                (
                    f"YaRN's 0.1 ln(factor) + 1 = {plain:.4g} where the mscale / mscale_all_dim ratio {attention:.4g} applies",
                    turned(attention=plain),
                )
            )
        truncate = scaling.get("truncate", True)
        found.append(
            (
                f"YaRN's truncate {'ignored: the correction range floored and ceiled' if not truncate else 'off: the correction range not floored and ceiled'}",
                turned(rule(truncate=not truncate)[0]),
            )
        )
        longest = rope.get("max_position_embeddings")
        if longest and longest != scaling["original_max_position_embeddings"]:
            found.append(
                (
                    "YaRN's correction range from max_position_embeddings instead of original_max_position_embeddings",
                    turned(rule(original_max_position_embeddings=longest)[0]),
                )
            )
        low, high = positional.yarn_correction_range(rotary, base, scaling)
        if high > rotary // 2 - 1:
            found.append(
                (
                    "YaRN's correction range clamped at d/2 - 1, not d - 1 (keras-hub before PR#2981)",
                    turned(_yarn_ramp(rotary, base, factor, low, rotary // 2 - 1)),
                )
            )
    if kind == "dynamic":
        longest = scaling["max_position_embeddings"] * scaling["factor"]
        found.append(
            (
                f"dynamic NTK computed once at the longest length ({longest:g}), not from max(positions) + 1",
                turned(
                    positional.ROPE_INIT_FUNCTIONS[kind](rotary, base, scaling, int(longest))[0]
                ),
            )
        )
        own = np.stack(  # (T, pairs): each token's own length
            [
                positional.ROPE_INIT_FUNCTIONS[kind](rotary, base, scaling, int(p) + 1)[0]
                for p in positions
            ]
        )
        found.append(
            (
                (
                    "dynamic NTK from each token's own position + 1 (a token at a time, as a "
                    f"decoding step does), not max(positions) + 1 = {seq_len} of the call"
                ),
                rotate_by(x, positions[:, None] * own, attention, layout=rope["layout"]),
            )
        )
        exponent = rotary / (rotary - 2)
        found.append(
            (
                (
                    f"dynamic as every pair's frequency divided by factor**(d/(d-2)) = {scaling['factor'] ** exponent:.4g}, "
                    "static (keras-hub's rope_type 'dynamic'): NTK changes the base, which leaves the fastest pair as it is"
                ),
                turned(positional.frequencies(rotary, base) / scaling["factor"] ** exponent),
            )
        )
    if kind == "longrope":
        original = scaling["original_max_position_embeddings"]
        by_chunk = positional.ROPE_INIT_FUNCTIONS[kind](rotary, base, scaling, len(positions))
        always_long = positional.ROPE_INIT_FUNCTIONS[kind](rotary, base, scaling, original + 1)
        found.append(
            (
                f"LongRoPE switched by the chunk length ({len(positions)} positions), not max(positions) + 1 = {seq_len}",
                turned(*by_chunk),
            )
        )
        found.append(
            ("LongRoPE always long (its long factors at every length)", turned(*always_long))
        )
        short = positional.ROPE_INIT_FUNCTIONS[kind](rotary, base, scaling, original)[0]
        own = np.where(positions[:, None] + 1 > original, always_long[0], short)
        found.append(
            (
                (
                    "LongRoPE switched per token by its own position + 1 (a token at a time, as a "
                    f"decoding step does), not by max(positions) + 1 = {seq_len} of the call"
                ),
                rotate_by(x, positions[:, None] * own, attention, layout=rope["layout"]),
            )
        )
        if attention != 1.0:
            found.append(
                (
                    f"LongRoPE without its attention factor ({attention:.4g} on cos and sin)",
                    turned(attention=1.0),
                )
            )
    return [(name, result) for name, result in found if not np.array_equal(result, turned())]


def _yarn_ramp(rotary, base, factor, low, high):
    w = positional.frequencies(rotary, base)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(rotary // 2) - low) / (high - low), 0.0, 1.0)
    return w / factor * ramp + w * (1.0 - ramp)
