"""rope: f(x, positions) -> x rotated, within the derived per-element bound.

Without a configuration the contract is the textbook's: the half layout, one base over the
whole head of 16 dims. With one (``--config``, ``--model``) it is the model's rotation: its
head_dim, the first rotary_dim dims rotated (the last, ``rotary_last``, for llama.cpp's MLA
graphs; the rest passed through, bit for bit), its layout, base and scaling rule with the
rule's attention factor on cos and sin. The length rules (dynamic, longrope) take the length
max(positions) + 1 of each call, Hugging Face's rule.

Options shape the call as ports make it: ``head_dim`` (the textbook's head width, 16 unless
given), ``batched`` (x (B, H, T, head_dim) at positions (B, T): packed and left-padded batches,
Hugging Face's apply_rotary_pos_emb) and ``qk`` (f(q, k, positions) -> (q_rotated, k_rotated),
read back stacked as (2, *q.shape)). The judge rotates a batch as its rows side by side, x
(..., H, B*T, head_dim) at positions (B*T,): the rotation is per token, and the length rules
see max(positions) + 1 of the whole batch, as Hugging Face's dynamic_rope_update does. Where
the head's last dims rotate, the judge moves them to the front (``head_order``) and back.
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
    conforms,
    low_precision_angles,
)
from embedding_parity.conformance.numerics import FLOATS
from embedding_parity.usage import UsageError

MOST_HEAD_DIM = 1 << 16  # the widest head the battery builds (models' are 64 to 512)
TEXTBOOK = {"head_dim": ROPE_DIM, "base": 10000.0, "layout": "half", "scaling": None}
BATCH, HEADS = 2, 3  # x (BATCH, HEADS, T, head_dim) in a batched case; (HEADS, T, head_dim) else


def left_padded(mask: np.ndarray) -> np.ndarray:
    """(B, T) position ids of a left-padded batch as Hugging Face's generate makes them:
    cumsum(mask) - 1, the padded slots set to 1."""
    return np.where(mask == 1, np.cumsum(mask, axis=-1) - 1, 1)


# The batched cases' positions (BATCH, T): batches a port is called with.
BATCHES = {
    # two sequences packed in row 0, each counting from 0; one sequence in row 1
    "packed": np.stack([np.tile(np.arange(8), 2), np.arange(16)]),
    # row 0 padded on the left by 3 slots ([1, 1, 1, 0, 1, .., 12]), row 1 not padded
    "left-padded": left_padded(np.array([[0] * 3 + [1] * 13, [1] * 16])),
    # a long sequence beside a short one: the length rules read the long one for both rows
    "long": np.stack([LONG, np.arange(len(LONG))]),
}
# (check, params, where) of each batched case, in the order of the report
BATCHED_CHECKS = (
    ("packed batch", {"long": False, "batch": "packed"}, "positions 0..7 0..7 and 0..15"),
    (
        "left-padded batch",
        {"long": False, "batch": "left-padded"},
        "positions 1 1 1 0 1 .. 12 (3 pads) and 0..15",
    ),
    ("long positions", {"long": True, "batch": "long"}, "positions to 131071 and 0..13"),
)


def rotate(x, positions, w, attention, *, layout="half", scale_rest=1.0) -> np.ndarray:
    """float64: the first 2 * len(w) dims of x turned by positions * w, cos and sin times
    ``attention``; the rest passed through (times ``scale_rest``, for a mistake)."""
    angles = np.asarray(positions, np.float64)[:, None] * w  # (T, pairs); w (pairs,) or (T, pairs)
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
        layers, chosen = options.get("layers"), _chosen(options)
        if not layers:
            return self._cases(options, _rope(options), {}, "")
        found = []
        for layer_type in layers:
            if chosen not in (None, layer_type["name"]):
                continue
            call = _layer_call(layer_type, layers, at=None if chosen else layer_type["layers"][0])
            found += self._cases(options, layer_type["rope"], call, f" {layer_type['name']}", found)
        if chosen is None:  # each layer once: which rule a port gives which layer
            for layer_type in layers:
                for layer in layer_type["layers"]:
                    call = _layer_call(layer_type, layers, at=layer)
                    params = {"dtype": "float32", "long": False, **call, "seed": len(found)}
                    params |= {"qk": True} if options.get("qk") else {}
                    params["rope"] = layer_type["rope"]
                    where = f"layer {layer} ({layer_type['name']}), positions 0..15"
                    found.append(Case("layer map float32", where, params))
        return found

    def _cases(self, options, rope, call, named, found=()):
        """The battery at one rotation: each check in each dtype (``named`` after the check:
        a layer type's name)."""
        operand, qk = ("q, k", {"qk": True}) if options.get("qk") else ("x", {})
        cases = []
        for dtype in FLOATS:
            for check, shaped, where in _checks(options, rope):
                seed = len(found) + len(cases)
                params = {"dtype": dtype, **shaped, "seed": seed, "rope": rope, **qk, **call}
                label = f"{operand} {x_shape(params)}, {where}"
                cases.append(Case(f"{check}{named} {dtype}", label, params))
        return cases

    def describe(self, options):
        if not options.get("rope") and not _shaped_call(options):
            return self.contract
        rope = _rope(options)
        said = _signature(options, rope["head_dim"])
        layers, chosen = options.get("layers"), _chosen(options)
        if layers and chosen is None:
            rules = "; ".join(f"{t['name']} layers: {_rotation(t['rope'])}" for t in layers)
            return (
                f"{said.replace('positions', 'positions, layer', 1)}, layer the layer's index "
                f"(0-based), each layer rotated by its layer type's rule: {rules}"
            )
        if chosen is not None:
            rope = next(t["rope"] for t in layers if t["name"] == chosen)
            return f"{said}; the {chosen} layers: {_rotation(rope)}"
        return f"{said}; {_rotation(rope) if options.get('rope') else _textbook(rope)}"

    def result_form(self, options):
        if not options.get("qk"):
            return None
        return "q and k rotated, stacked into one array (2, ...): q's first"

    def argument_names(self, params):
        names = ["q", "k", "positions"] if params.get("qk") else super().argument_names(params)
        return [*names, "layer"] if "layer" in params else names

    def arguments(self, params):
        positions = positions_of(params)
        rng = np.random.default_rng(params["seed"])
        shape = x_shape(params)
        dtype = validation.resolve_dtype(params["dtype"])
        xs = [rng.standard_normal(shape).astype(dtype) for _ in range(2 if params.get("qk") else 1)]
        layer = [params["layer"]] if "layer" in params else []  # the layer's index, an int
        return [*xs, positions.astype(np.int64), *layer]

    def _inputs(self, params):
        """(x, positions) in the call's shapes, q and k stacked (2, ...) as the result is."""
        *xs, positions = self.arguments(params)[: 3 if params.get("qk") else 2]
        return (np.stack(xs) if len(xs) > 1 else xs[0]), positions

    def _operands(self, params):
        """(x, positions) as the judge rotates them: a batch's rows side by side (M-RoPE's
        positions (3, T) as they are)."""
        x, positions = self._inputs(params)
        if params["rope"].get("mrope"):
            return x, positions
        return side_by_side(x[..., head_order(params["rope"])], positions), positions.reshape(-1)

    def _rule(self, params):
        """(w, attention, rotary_dim) of the contract at this case's positions."""
        rope = params["rope"]
        rotary = rope.get("rotary_dim") or rope["head_dim"]
        w, attention = positional.rope_parameters(
            rotary, rope["base"], rope["scaling"], positional.length(positions_of(params))
        )
        return w, attention, rotary

    def reference(self, params):
        x, positions = self._operands(params)
        if params["rope"].get("nope"):  # a NoPE layer: x as it is
            return in_rows(x.astype(np.float64), params)
        w, attention, _ = self._rule(params)
        if params["rope"].get("mrope"):
            angles = mrope_positions(params["rope"], positions) * w
            return rotate_by(x, angles, attention, layout=params["rope"]["layout"])
        turned = rotate(x, positions, w, attention, layout=params["rope"]["layout"])
        return in_rows(turned, params)

    def compare(self, params, actual):
        if params["rope"].get("nope") and numerics.same_bits(actual, self._inputs(params)[0]):
            return conforms("bit-identical: x returned as it is, as a NoPE layer does")
        return super().compare(params, actual)

    def tolerance(self, params, dtype):
        x, positions = self._operands(params)
        rope = params["rope"]
        if rope.get("nope"):  # nothing computed: x must come back bit for bit
            return np.zeros(self.reference(params).shape)
        paired = None
        if rope.get("mrope"):  # each frequency slot at its own axis's position
            positions, paired = positions.max(axis=0), mrope_positions(rope, positions)
        bound = positional.rope_bound(
            x.astype(np.float64),
            positions,
            pair_positions=paired,
            base=rope["base"],
            layout=rope["layout"],
            scaling=rope["scaling"],
            rotary_dim=rope.get("rotary_dim"),
            dtype=dtype,
        )
        return in_rows(bound, params)

    def mistakes(self, params):
        if params["rope"].get("mrope"):
            return _mrope_mistakes(params, *self._operands(params), *self._rule(params))
        found = [] if params["rope"].get("nope") else self._mistakes(params)
        found += _layer_mistakes(params, *self._operands(params))
        found = [(name, in_rows(result, params)) for name, result in found]
        return found + self._qk_mistakes(params)

    def _mistakes(self, params):
        """The mistakes of the rotation, as the judge rotates: a batch's rows side by side."""
        x, positions = self._operands(params)
        rope = params["rope"]
        base, layout, scaling, head = (
            rope["base"],
            rope["layout"],
            rope["scaling"],
            rope["head_dim"],
        )
        w, attention, rotary = self._rule(params)

        def turned(w=w, attention=attention, *, at=positions, layout=layout, scale_rest=1.0, x=x):
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
            order = head_order(rope)
            as_called = x[..., np.argsort(order)]  # the head in the call's order
            whole = positional.frequencies(head, base, _for_whole_head(scaling))
            found.append(
                (
                    f"partial rotary ignored: the whole head rotated, not its {_which(rope)} dims",
                    rotate(as_called, positions, whole, attention, layout=layout)[..., order],
                )
            )
            if rope.get("rotary_last"):
                said = (
                    f"the first {rotary} dims rotated where llama.cpp's MLA graph rotates the "
                    f"last {rotary} (its q_pe view at offset head_dim - n_rot = {head - rotary})"
                )
                found.append((said, turned(x=as_called)[..., order]))
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
        if params.get("batch"):
            found += _batch_mistakes(params, turned, rotary)
        return found

    def _qk_mistakes(self, params):
        """The mistakes of f(q, k, positions) -> (q_rotated, k_rotated), read back stacked."""
        if not params.get("qk"):
            return []
        expected = self.reference(params)
        k = self.arguments(params)[1].astype(np.float64)
        return [
            ("q and k swapped: (k_rotated, q_rotated) returned", expected[::-1]),
            ("k returned as given: only q rotated", np.stack([expected[0], k])),
        ]

    def phase(self, params, actual):
        x, positions = self._inputs(params)
        if actual.shape != x.shape or params["rope"].get("nope") or params["rope"].get("mrope"):
            return None
        w, _, _ = self._rule(params)
        order = head_order(params["rope"])
        error = numerics.rotation_phase_error(
            side_by_side(x[..., order], positions),
            side_by_side(actual[..., order], positions),
            positions.reshape(-1),
            w,
            layout=params["rope"]["layout"],
        ).reshape(positions.shape)  # (T,), or (BATCH, T)
        if error.ndim == 2:  # a batch: its worst row
            worst = int(np.argmax(error.max(axis=-1)))
            positions, error = positions[worst], error[worst]
        return _phase_record(positions, error)

    def diagnose(self, params, actual, dtype, tolerance, error):
        if params["rope"].get("nope"):  # a rotation's mistakes are judged within its own bound
            bound = self.tolerance({**params, "rope": _mistaken_rotation(params)}, dtype)
            found = super().diagnose(params, actual, dtype, bound, error)
            return found or "changed where a NoPE layer returns x as it is"
        found = super().diagnose(params, actual, dtype, tolerance, error)
        x, _ = self._inputs(params)
        rope = params["rope"]
        rotary, order = rope.get("rotary_dim") or rope["head_dim"], head_order(rope)
        rest, passed = x[..., order[rotary:]], actual[..., order[rotary:]]
        if rest.size and not numerics.same_bits(passed, rest.astype(passed.dtype)):
            rounded = rest.astype(np.float32).astype(rest.dtype)
            how = (
                "rounded through float32"
                if numerics.same_bits(passed, rounded.astype(passed.dtype))
                else "changed"
            )
            which = f"before the last {rotary}" if rope.get("rotary_last") else "past rotary_dim"
            changed = f"the dims {which} ({order[rotary]}..{order[-1]}) {how}: they must pass through unchanged"
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
            scaling = params["rope"].get("scaling") or {}
            if scaling.get("rope_type") == "freq_factors":  # a GGUF's tensor: float32 values
                found = (
                    "within float32's tolerance, not float64's: computed in float32, or from "
                    "factors other than the file's (they are float32 values: a port that "
                    "computes them again from their rule in float64 differs here)"
                )
        return _with_phase(found, self.phase(params, actual))


# --- the call's shapes: the options, the positions and the batch's rows side by side --------


def _rope(options) -> dict:
    """The rotation of the cases: the config's (its head_dim wins), else the textbook's at the
    options' base and head_dim. UsageError for a head_dim that no rotation or the config has."""
    head = options.get("head_dim")
    config = options.get("rope") or {}
    if head is not None:
        if isinstance(head, bool) or not isinstance(head, int | np.integer) or head < 2 or head % 2:
            raise UsageError(
                f"head_dim {head!r} is not an even integer of at least 2: RoPE turns pairs of "
                "dims; give an even head_dim (the textbook's is 16)"
            )
        if head > MOST_HEAD_DIM:
            raise UsageError(
                f"head_dim {head} is over {MOST_HEAD_DIM}: the battery's x (3, 16, head_dim) is "
                "built in float64 for every case; models' heads are 64 to 512"
            )
        if config.get("head_dim", head) != head:
            raise UsageError(
                f"head_dim {head} where the config's is {config['head_dim']}: the config sets "
                "it; leave head_dim out"
            )
    given = {"head_dim": int(head)} if head is not None else {}
    return {**TEXTBOOK, "base": options.get("base", 10000.0), **given, **config}


def _shaped_call(options) -> bool:
    """Whether the options ask for a call other than the textbook's f(x (..., T, 16), positions)."""
    return any(options.get(key) for key in ("head_dim", "batched", "qk"))


def _checks(options, rope):
    """(check, params, where) of each case, per dtype."""
    if rope.get("mrope"):
        if options.get("batched"):
            raise UsageError(
                "batched with M-RoPE: the battery calls f(x, positions (3, T)); leave --batched out"
            )
        return MROPE_CHECKS
    if options.get("batched"):
        return BATCHED_CHECKS
    return (
        ("rotation", {"long": False}, "positions 0..15"),
        ("long positions", {"long": True}, "positions to 131071"),
    )


def positions_of(params) -> np.ndarray:
    """The case's positions: (T,), (BATCH, T) for a batched case, (3, T) for M-RoPE's."""
    if params.get("mrope_case"):
        return MROPE_POSITIONS[params["mrope_case"]]
    if params.get("batch"):
        return BATCHES[params["batch"]]
    return LONG if params["long"] else np.arange(16)


def x_shape(params) -> tuple:
    """x's shape: (HEADS, T, head_dim), or (BATCH, HEADS, T, head_dim) at positions (BATCH, T)."""
    positions = positions_of(params)
    lead = () if params.get("mrope_case") else positions.shape[:-1]
    return (*lead, HEADS, positions.shape[-1], params["rope"]["head_dim"])


def side_by_side(x, positions) -> np.ndarray:
    """x (..., B, H, T, d) at positions (B, T) as x (..., H, B*T, d), rows side by side; x as
    it is at positions (T,)."""
    if np.ndim(positions) == 1:
        return x
    *lead, b, h, t, d = x.shape
    return np.moveaxis(x, -4, -3).reshape(*lead, h, b * t, d)


def in_rows(y, params) -> np.ndarray:
    """The judge's arrangement undone: y (..., H, B*T, d) as (..., B, H, T, d) for a batched
    case, the head's dims back in the call's order."""
    y = y[..., np.argsort(head_order(params["rope"]))]
    if not params.get("batch"):
        return y
    *lead, h, bt, d = y.shape
    return np.moveaxis(y.reshape(*lead, h, BATCH, bt // BATCH, d), -3, -4)


def head_order(rope) -> np.ndarray:
    """The head's dims in the order the judge rotates them, the rotated ones first: the last
    rotary_dim brought to the front where those turn (``rotary_last``), else as they are."""
    head = rope["head_dim"]
    rotary = rope.get("rotary_dim") or head
    return np.roll(np.arange(head), rotary if rope.get("rotary_last") else 0)


def _which(rope) -> str:
    """The rotated dims in words: "first 16", "last 32"."""
    rotary = rope.get("rotary_dim") or rope["head_dim"]
    return f"{'last' if rope.get('rotary_last') else 'first'} {rotary}"


def _signature(options, head) -> str:
    """The call the cases make, in words."""
    shape = f"(B, H, T, {head})" if options.get("batched") else f"(..., T, {head})"
    if options.get("qk"):
        said = (
            f"f(q, k, positions) -> (q_rotated, k_rotated), q and k {shape} (each rotated as x; "
            "the pair read back stacked, (2, *q.shape))"
        )
    else:
        said = f"f(x, positions) -> rotated, x {shape}"
    if options.get("batched"):
        return (
            f"{said}, positions (B, T) integers (cos and sin (B, T, d) unsqueezed at the head "
            "axis, as Hugging Face's apply_rotary_pos_emb)"
        )
    return f"{said}, positions (T,) integers" if _shaped_call(options) else said


def _textbook(rope) -> str:
    return (
        f"pairs (i, i + {rope['head_dim'] // 2}) turned by positions * "
        f"{rope['base']:g}**(-2i/{rope['head_dim']}) (the half layout)"
    )


def _rotation(rope) -> str:
    """A config's rotation, in words."""
    if rope.get("nope"):
        return "not rotated (NoPE): x returned as it is, bit for bit"
    if rope.get("mrope"):
        t, h, w = rope["mrope"]["section"]
        return (
            f"{_rotation({**rope, 'mrope': None})}; positions (3, T), the t, h and w rows: each "
            f"frequency slot turned by its row's position, {rope['mrope']['layout']} slots t {t}, "
            f"h {h}, w {w} (text tokens, t = h = w, are plain RoPE)"
        )
    rotary = rope.get("rotary_dim") or rope["head_dim"]
    pairs = "(2i, 2i+1)" if rope["layout"] == "interleaved" else f"(i, i + {rotary // 2})"
    rule = "no scaling" if rope["scaling"] is None else f"the {rope['scaling']['rope_type']} rule"
    head = rope["head_dim"]
    passed = f"0..{head - rotary - 1}" if rope.get("rotary_last") else f"{rotary}.."
    rest = f", dims {passed} passed through" if rotary < head else ""
    return (
        f"the {_which(rope)} dims in pairs {pairs} turned by positions * w_i, w from base "
        f"{rope['base']:g} and {rule} (cos and sin times its attention factor){rest}"
    )


def _batch_mistakes(params, turned, rotary):
    """The mistakes of a batched call, at positions (B, T) side by side as (B*T,)."""
    rows = positions_of(params)
    b, t = rows.shape
    found = [
        ("row 0's positions used for every batch row", turned(at=np.tile(rows[0], b))),
        (
            f"the positions ignored: 0..{t - 1} in every batch row",
            turned(at=np.tile(np.arange(t), b)),
        ),
    ]
    rope = params["rope"]
    scaling = rope["scaling"]
    if scaling and scaling["rope_type"] in positional.LENGTH_RULES:
        own = [
            positional.rope_parameters(rotary, rope["base"], scaling, positional.length(row))[0]
            for row in rows
        ]
        w = np.repeat(np.stack(own), t, axis=0)  # (B*T, pairs): each row's own length
        found.append(
            (
                (
                    f"{scaling['rope_type']} from each batch row's max(positions) + 1, not the "
                    f"batch's {positional.length(rows)} (Hugging Face's over all position_ids)"
                ),
                turned(w),
            )
        )
    return [(name, result) for name, result in found if not np.array_equal(result, turned())]


def _first_rounded(positions, rounded) -> str:
    moved = np.flatnonzero(rounded != positions)
    if not moved.size:
        return "no position moves"
    p = int(positions[moved[0]])
    return f"position {p} becomes {rounded[moved[0]]:g}"


def _for_whole_head(scaling):
    """A scaling dict for another rotated width (LongRoPE's and freq_factors' per-pair lists
    do not stretch)."""
    if scaling and scaling["rope_type"] in ("longrope", "freq_factors"):
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
        if scaling.get("mscale_all_dim"):
            softmax = positional.yarn_mscale(factor, scaling["mscale_all_dim"]) ** 2
            found.append(
                (
                    (
                        f"DeepSeek's softmax factor mscale(factor, mscale_all_dim)**2 = {softmax:.4g} "
                        "on cos and sin (it scales q . k in the attention, not the rotation: "
                        "kekzl/imp PR #880)"
                    ),
                    turned(attention=attention * softmax),
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
    if kind == "proportional":
        found += _proportional_mistakes(x, positions, scaling, rope, turned, w, attention, rotary)
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
        chunk = positions_of(params).shape[-1]  # positions per call (per batch row)
        by_chunk = positional.ROPE_INIT_FUNCTIONS[kind](rotary, base, scaling, chunk)
        always_long = positional.ROPE_INIT_FUNCTIONS[kind](rotary, base, scaling, original + 1)
        found.append(
            (
                f"LongRoPE switched by the chunk length ({chunk} positions), not max(positions) + 1 = {seq_len}",
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


def _proportional_mistakes(x, positions, scaling, rope, turned, w, attention, rotary):
    """Gemma 4's proportional rule read as a partial rotation: the head's first
    ``turning`` of its rotary/2 frequency slots turn at base**(-2i/head_dim), the rest stand."""
    turning = int(scaling.get("partial_rotary_factor", 1.0) * rotary // 2)
    if turning == rotary // 2:
        return []
    width, factor, layout = 2 * turning, scaling.get("factor", 1.0), rope["layout"]
    narrow = positional.frequencies(width, rope["base"]) / factor
    slots = rotary // 2
    return [
        (
            (
                f"proportional with the rotated width as the exponent's denominator, "
                f"base**(-2i/{width}), where it is the head's, base**(-2i/{rotary}) "
                "(neuronx PR #106)"
            ),
            turned(np.concatenate([narrow, np.zeros(slots - turning)])),
        ),
        (
            (
                f"proportional as {turning} slots for {slots}: a partial rotation of the first "
                f"{width} dims, pairs (i, i + {turning}), where the head keeps {slots} slots, "
                f"pairs (i, i + {slots}), the last {slots - turning} standing still "
                "(Megatron-Bridge #4195: the frequencies right, the shape wrong)"
            ),
            rotate(x, positions, w[:turning], attention, layout=layout),
        ),
        (
            (
                f"partial_rotary_factor read as GPT-NeoX's rotary width: the first {width} dims "
                f"rotated at base**(-2i/{width}), pairs (i, i + {turning}), where proportional "
                f"keeps the head's {slots} slots at base**(-2i/{rotary})"
            ),
            rotate(x, positions, narrow, attention, layout=layout),
        ),
    ]


def _yarn_ramp(rotary, base, factor, low, high):
    w = positional.frequencies(rotary, base)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(rotary // 2) - low) / (high - low), 0.0, 1.0)
    return w / factor * ramp + w * (1.0 - ramp)


# --- layer types: each layer by its own rule ----------------------------------------------


def _chosen(options) -> str | None:
    """The layer type checked alone: the one asked for, or a model's only one (no layer of it
    rotates: every layer alike, yet not by the config's rope fields)."""
    layers = options.get("layers") or []
    return options.get("layer_type") or (layers[0]["name"] if len(layers) == 1 else None)


def _layer_call(layer_type, layers, *, at) -> dict:
    """The params that place a case in one layer type: its name, why it rotates so, the other
    types (for the mistakes), and ``layer``, the index the call is told (none where a single
    type is checked, f(x, positions))."""
    call = {"layer_type": layer_type["name"], "why": layer_type["why"]}
    call["others"] = [t for t in layers if t["name"] != layer_type["name"]]
    return call if at is None else {**call, "layer": at}


def _rotated(x, positions, rope) -> np.ndarray:
    """x turned by a layer type's rope dict at x's own head width (Gemma 4's layer types differ
    in it), in float64."""
    rotary = rope.get("rotary_dim") or x.shape[-1]
    length = positional.length(positions)
    w, attention = positional.rope_parameters(rotary, rope["base"], rope["scaling"], length)
    return rotate(x, positions, w, attention, layout=rope["layout"])


def _layer_mistakes(params, x, positions):
    """The mistakes of a model whose layers rotate differently: another layer type's rule on
    this one (two types swapped, or one rule for every layer), RoPE on a NoPE layer or none on
    a rotating one (``no_rope_layers`` read inverted), a type's scaling on the unscaled type."""
    if "layer_type" not in params:
        return []
    rope, name = params["rope"], params["layer_type"]
    why = f" [{params['why']}]" if params.get("why") else ""
    found = []
    if rope.get("nope") and all(other["rope"].get("nope") for other in params["others"]):
        default = _mistaken_rotation(params)
        said = (
            f"rotated ({_rule_words(default)}, {default['layout']} layout) where no layer of the "
            f"model rotates{why}: the config read as RoPE's default"
        )
        found.append((said, _rotated(x, positions, default)))
    for other in params["others"]:
        theirs = other["rope"]
        if theirs.get("nope"):
            said = (
                f"not rotated, as the {other['name']} layers are not, on a {name} layer{why}: "
                "NoPE and RoPE layers swapped (no_rope_layers read inverted), or no layer rotated"
            )
            found.append((said, x))
            continue
        result, words = _rotated(x, positions, theirs), _rule_words(theirs)
        if rope.get("nope"):
            said = (
                f"rotated ({words}, the {other['name']} layers' rule) on a NoPE layer{why}: "
                "RoPE and NoPE layers swapped (no_rope_layers read inverted), or every layer rotated"
            )
            found.append((said, result))
            continue
        said = (
            f"the {other['name']} layers' rule ({words}) on a {name} layer: the two layer types' "
            "rules swapped, or one rule for both"
        )
        found.append((said, result))
        if rope["scaling"] is None and theirs["scaling"] is not None:
            said = (
                f"the {other['name']} layers' {theirs['scaling']['rope_type']} scaling applied to "
                f"a {name} layer too (it rotates unscaled, at base {rope['base']:g})"
            )
            found.append((said, _rotated(x, positions, {**rope, "scaling": theirs["scaling"]})))
    return found


def _mistaken_rotation(params) -> dict:
    """The rotation a port would wrongly apply on a NoPE layer: another layer type's, else
    RoPE's default (base 10000, unscaled) at the layer's head and layout."""
    rotating = [t["rope"] for t in params["others"] if not t["rope"].get("nope")]
    if rotating:
        return rotating[0]
    rope = {key: value for key, value in params["rope"].items() if key != "nope"}
    return {**rope, "base": TEXTBOOK["base"], "scaling": None}


def _rule_words(rope) -> str:
    rule = "no scaling" if rope["scaling"] is None else rope["scaling"]["rope_type"]
    return f"base {rope['base']:g}, {rule}"


# --- multimodal RoPE: positions (3, T), each frequency slot turned by the t, h or w row -------


def _text(start: int, count: int) -> np.ndarray:
    """(3, count): text tokens, t = h = w counting from ``start``."""
    return np.tile(start + np.arange(count), (3, 1))


def _grid(start: int, frames: int, height: int, width: int, step: int = 1) -> np.ndarray:
    """(3, frames * height * width): a vision grid from ``start`` as Qwen2-VL numbers it, t
    by ``step`` per frame (tokens_per_second * second_per_grid_t for a video), h by row, w by
    column."""
    t, h, w = np.meshgrid(
        np.arange(frames) * step, np.arange(height), np.arange(width), indexing="ij"
    )
    return start + np.stack([t.ravel(), h.ravel(), w.ravel()])


# Each case's positions (3, T): what a multimodal model's position builder gives a sequence
# (the text after a grid resumes at the grid's largest position + 1).
MROPE_POSITIONS = {
    "text": _text(0, 16),
    "image": np.concatenate([_text(0, 4), _grid(4, 1, 3, 4), _text(8, 3)], axis=1),
    "video": np.concatenate([_text(0, 2), _grid(2, 3, 2, 2, step=2), _text(7, 2)], axis=1),
    "long": np.concatenate(
        [_text(131000, 2), _grid(131002, 2, 4, 4, step=50), _text(131053, 3)], axis=1
    ),
}
MROPE_CHECKS = (
    ("text tokens", {"long": False, "mrope_case": "text"}, "t = h = w = 0..15: plain RoPE"),
    (
        "image tokens",
        {"long": False, "mrope_case": "image"},
        "4 text tokens, a 3 x 4 image grid at 4, 3 text tokens from 8",
    ),
    (
        "video tokens",
        {"long": False, "mrope_case": "video"},
        "2 text tokens, 3 frames of 2 x 2 two temporal steps apart, 2 text tokens from 7",
    ),
    (
        "long positions",
        {"long": True, "mrope_case": "long"},
        "text and a 2-frame 4 x 4 grid from position 131000",
    ),
)


def mrope_positions(rope, positions, *, layout=None, section=None) -> np.ndarray:
    """(T, pairs): each frequency slot's position, its axis's row (the config's layout and
    section unless others are given)."""
    mrope = rope["mrope"]
    pairs = (rope.get("rotary_dim") or rope["head_dim"]) // 2
    axes = positional.mrope_axes(pairs, section or mrope["section"], layout or mrope["layout"])
    return np.asarray(positions, np.float64)[axes].T


def _mrope_mistakes(params, x, positions, w, attention, rotary):
    """The mistakes of multimodal RoPE: the other layout of the slots, another model's section,
    h and w swapped, the temporal row everywhere (text RoPE), the other pairing."""
    rope = params["rope"]
    layout, section = rope["mrope"]["layout"], tuple(rope["mrope"]["section"])

    def turned(paired, pairing=rope["layout"]):
        return rotate_by(x, paired * w, attention, layout=pairing)

    other = "interleaved" if layout == "chunked" else "chunked"
    found = [
        (
            f"{other} frequency slots where the config's are {layout} ("
            + (
                "Qwen3-VL's t h w t h w ... read as Qwen2-VL's chunks"
                if other == "chunked"
                else "Qwen2-VL's chunks read as Qwen3-VL's t h w t h w ..."
            )
            + "): text tokens are unchanged, image and video tokens turn wrong",
            turned(mrope_positions(rope, positions, layout=other)),
        ),
        (
            (
                "the temporal row for every frequency slot (plain RoPE from positions[0]): "
                "right on text tokens only"
            ),
            turned(np.repeat(np.asarray(positions[0], np.float64)[:, None], rotary // 2, axis=1)),
        ),
    ]
    found.append(
        (
            "the h and w rows swapped (each slot of h turned by the column, of w by the row)",
            turned(mrope_positions(rope, np.asarray(positions)[[0, 2, 1]])),
        )
    )
    for known in MROPE_SECTIONS:
        if known != section and sum(known) == sum(section):
            said = ", ".join(f"{a} {n}" for a, n in zip("thw", known, strict=True))
            found.append(
                (
                    f"section {list(known)} ({said}) where the config's is {list(section)}",
                    turned(mrope_positions(rope, positions, section=known)),
                )
            )
    pairing = "interleaved" if rope["layout"] == "half" else "half"
    found.append(
        (
            f"{'GPT-J pairs (2i, 2i+1)' if pairing == 'interleaved' else 'half pairs (i, i + d/2)'} "
            f"where the config's {rope['layout']} layout pairs them"
            + (" (GLM-4V pairs GPT-J style over half the head)" if pairing == "half" else ""),
            turned(mrope_positions(rope, positions), pairing),
        )
    )
    reference = turned(mrope_positions(rope, positions))
    return [(name, result) for name, result in found if not np.array_equal(result, reference)]


# The sections models ship (the t, h, w slots): Qwen2-VL and Qwen2.5-VL, Qwen3-VL, GLM-4V,
# Qwen3.5 (hf.MROPE's defaults): a port that copies another model's reads one of them.
MROPE_SECTIONS = ((16, 24, 24), (24, 20, 20), (8, 12, 12), (11, 11, 10))
