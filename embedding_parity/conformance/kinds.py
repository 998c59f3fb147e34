"""The six contracts, and for each its battery of cases, its reference and its named mistakes.

A case is plain data (``Case.params``) from which both the worker, which calls the target, and
the judge, which holds the result to the reference, rebuild the same arguments. A result that
differs is compared with the float64 outputs of the mistakes people make; the first that it
matches (bit for bit for the exact kinds, within the tolerance for the others) names it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

import backends
from backends import numpy_backend, positional, validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.numerics import FLOATS

VOCAB, DIM, MAX_SEQ_LEN, T = 64, 8, 16, 5
# Positions of the long-position checks: around 256 (where bfloat16 stops counting by one),
# 2048 and 4096 (float16's and bfloat16's reported failures), and up to 131072.
LONG = np.array([0, 1, 7, 255, 256, 257, 1000, 2047, 2049, 4095, 8191, 16385, 65537, 131071])
ROPE_DIM = 16
OTHER_BASES = (1000.0, 10000.0, 100000.0, 500000.0, 1000000.0)
# 2**31 - 33 fits int32 (JAX's default) and wraps to row 31, not the clamped row 63.
BAD_IDS = {"vocab_size": VOCAB, "-1": -1, "far out of range": 2**31 - 33}


@dataclass(frozen=True)
class Case:
    check: str  # the report line it belongs to
    label: str  # what this case tries
    params: dict = field(hash=False)


@dataclass
class Outcome:
    """What one call gave: an array, an exception, or no answer at all."""

    array: np.ndarray | None = None
    raised: str | None = None  # "IndexError: ..."
    failed: str | None = None  # "timed out after 30 s", "the worker died (signal 11)"


@dataclass
class Verdict:
    status: str  # conforms | differs | rejected | failed
    detail: str
    ulps: float | None = None
    phase: dict | None = None  # {"positions": [...], "radians": [...]}: rope and sinusoidal


def conforms(detail, **more) -> Verdict:
    return Verdict("conforms", detail, **more)


def differs(detail, **more) -> Verdict:
    return Verdict("differs", detail, **more)


class Kind:
    name = ""
    contract = ""
    exact = True  # bit-identical required; else within positional.tolerance

    def cases(self, options: dict) -> list[Case]:
        raise NotImplementedError

    def arguments(self, params: dict) -> list:
        """The call's arguments, in the contract's order, as NumPy arrays and Python values."""
        raise NotImplementedError

    def reference(self, params: dict) -> np.ndarray:
        """The float64 result the contract asks for."""
        raise NotImplementedError

    def mistakes(self, params: dict) -> list[tuple[str, np.ndarray]]:
        """(name, float64 result) of each plausible mistake, most specific first."""
        return []

    def tolerance(self, params: dict, dtype) -> float:
        return 0.0

    def judge(self, case: Case, outcome: Outcome) -> Verdict:
        if outcome.failed:
            return Verdict("failed", outcome.failed)
        params = case.params
        if outcome.raised:
            if params.get("bad"):
                return conforms(f"raises {outcome.raised}")
            if params.get("dtype", "float32") != "float32":  # a dtype it does not support
                return Verdict("rejected", f"rejects {params['dtype']}: {outcome.raised}")
            return differs(f"raises {outcome.raised} on a valid input")
        if params.get("bad"):
            return self.classify_bad(params, outcome.array)
        return self.compare(params, outcome.array)

    def expected_dtype(self, params: dict, actual: np.ndarray):
        return params["dtype"]

    def compare(self, params: dict, actual: np.ndarray) -> Verdict:
        reference = self.reference(params)
        if actual.shape != reference.shape:
            return differs(f"shape {actual.shape} where {reference.shape} is expected")
        dtype = self.expected_dtype(params, actual)
        if actual.dtype.name != dtype:
            return differs(f"returns {actual.dtype.name} for {dtype} (a silent change of dtype)")
        expected = numerics.rounded(reference, dtype)
        size, where = numerics.ulps(actual, reference, dtype)
        phase = self.phase(params, actual)
        if self.exact and numerics.same_bits(actual, expected):
            return conforms("bit-identical", ulps=size, phase=phase)
        tolerance = self.tolerance(params, dtype)
        error = numerics.max_error(actual, reference)
        if not self.exact:
            size = numerics.ulps_at_scale(error, reference, dtype)
        if not self.exact and error <= tolerance:
            return conforms(
                f"within tolerance: {error:.2g} <= {tolerance:.2g} ({size:.3g} ulp)",
                ulps=size,
                phase=phase,
            )
        if not math.isfinite(size):
            found = f"NaN at {list(where)}"
        elif self.exact:
            found = f"{size:.3g} ulp at {list(where)}"
        else:
            found = f"{error:.2g} > {tolerance:.2g} ({size:.3g} ulp)"
        diagnosis = self.diagnose(params, actual, dtype, tolerance, error)
        return differs(f"{found}{'; ' + diagnosis if diagnosis else ''}", ulps=size, phase=phase)

    def diagnose(self, params, actual, dtype, tolerance, error) -> str:
        """The mistake the result matches, or the one it is far closest to; "" if none."""
        closest, closest_error = "", math.inf
        with np.errstate(all="ignore"):
            mistakes = self.mistakes(params)
        for name, result in mistakes:
            if result.shape != actual.shape:
                continue
            if self.exact and numerics.same_bits(actual, numerics.rounded(result, dtype)):
                return name
            off = numerics.max_error(actual, result)
            if not self.exact and off <= tolerance:
                return name
            if off < closest_error:
                closest, closest_error = name, off
        if closest and closest_error <= 0.1 * error:  # ten times nearer than the reference
            return (
                f"nearest to {closest} ({closest_error:.2g} from it, {error:.2g} from the contract)"
            )
        return ""

    def phase(self, params: dict, actual: np.ndarray) -> dict | None:
        return None

    def classify_bad(self, params: dict, actual: np.ndarray) -> Verdict:
        raise NotImplementedError


# --- lookup ------------------------------------------------------------------------------


def _tables(params: dict):
    return backends.shared_weights(
        VOCAB, DIM, MAX_SEQ_LEN, seed=params["seed"], dtype=params["dtype"]
    )


def _ids(params: dict) -> np.ndarray:
    if params.get("bad") is not None:
        bad = params["bad"]
        return (
            np.array([3, 1.5, 5], np.float32) if bad == "1.5" else np.array([3, bad, 5], np.int64)
        )
    rng = np.random.default_rng(params["seed"] + 1)
    # at most two of each id, so that the gradient's rows sum at most two terms
    ids = rng.permutation(np.repeat(np.arange(VOCAB), 2))[: math.prod(params["shape"])]
    return ids.reshape(params["shape"]).astype(np.int64)


class Lookup(Kind):
    name = "lookup"
    contract = (
        "f(token_table, position_table, token_ids, start) -> x, "
        "x[..., t, :] = token_table[token_ids[..., t]] + position_table[start + t]"
    )

    def cases(self, options):
        found = []
        for dtype in FLOATS:
            for shape in ((T,), (3, T)):
                for start in (0, MAX_SEQ_LEN - T):
                    found.append(
                        Case(
                            f"forward {dtype}",
                            f"{len(shape)}-D ids, start {start}",
                            {"dtype": dtype, "shape": shape, "start": start, "seed": len(found)},
                        )
                    )
        for label, bad in {**BAD_IDS, "non-integer (1.5)": "1.5"}.items():
            params = {"dtype": "float32", "shape": (3,), "start": 0, "seed": 0, "bad": bad}
            found.append(Case(f"bad id: {label}", f"token_ids [3, {bad}, 5]", params))
        return found

    def arguments(self, params):
        token_table, position_table = _tables(params)
        return [token_table, position_table, _ids(params), params["start"]]

    def reference(self, params, *, start=None, positions=True):
        token_table, position_table, ids, given = self.arguments(params)
        start = given if start is None else start
        x = token_table.astype(np.float64)[ids]
        if positions:
            x += position_table.astype(np.float64)[start : start + ids.shape[-1]]
        return x

    def mistakes(self, params):
        start = params["start"]
        found = [("positions not added (token rows only)", self.reference(params, positions=False))]
        if start:
            found.append(
                (f"start ignored (positions from 0, not {start})", self.reference(params, start=0))
            )
        for k in (-1, 1):
            if 0 <= start + k <= MAX_SEQ_LEN - params["shape"][-1]:
                found.append(
                    (
                        f"position off by {k:+d} (start + {k})",
                        self.reference(params, start=start + k),
                    )
                )
        return found

    def classify_bad(self, params, actual):
        token_table, position_table, _, start = self.arguments(params)
        if actual.shape != (3, DIM) or actual.dtype.name not in FLOATS:
            return differs(f"returns {actual.dtype.name} {actual.shape} without raising")
        row = actual[1]
        return differs(_bad_row(params["bad"], row, token_table, position_table[start + 1]))


def _bad_row(bad, row, token_table, position_row) -> str:
    """What a returned row for a bad id is: NaN, a clamped, wrapped or zero row, or other
    (each candidate rounded to the row's dtype, as the implementation adds)."""
    if np.isnan(np.asarray(row, np.float64)).any():
        return "fills NaN: a NaN row instead of an error"
    if bad == "1.5":
        candidates = {"truncates 1.5 to 1": 1, "rounds 1.5 to 2": 2}
    else:
        candidates = {
            f"clamps to row {min(max(bad, 0), VOCAB - 1)}": min(max(bad, 0), VOCAB - 1),
            f"wraps to row {bad % VOCAB}": bad % VOCAB,
        }
    position = position_row.astype(np.float64)
    for name, index in candidates.items():
        expected = numerics.rounded(
            token_table[index].astype(np.float64) + position, row.dtype.name
        )
        if numerics.same_bits(row, expected):
            return f"{name}: a silent wrong answer"
    if numerics.same_bits(row, numerics.rounded(position, row.dtype.name)):
        return "zero row (position only): a silent wrong answer"
    return "returns a row without raising (none of clamp, wrap, NaN, zero)"


# --- sinusoidal --------------------------------------------------------------------------


class Sinusoidal(Kind):
    name = "sinusoidal"
    contract = (
        "f(num_positions, dim) -> table (num_positions, dim), interleaved: "
        "table[p, 2i] = sin(p / base**(2i/dim)), table[p, 2i+1] = cos(...)"
    )
    exact = False

    def cases(self, options):
        base = options.get("base", 10000.0)
        return [
            Case(
                "table 64 x 16",
                "64 positions, dim 16",
                {"num_positions": 64, "dim": 16, "base": base},
            ),
            Case(
                "table 64 x 64",
                "64 positions, dim 64",
                {"num_positions": 64, "dim": 64, "base": base},
            ),
            Case(
                "positions to 131071",
                "131072 positions, dim 16",
                {"num_positions": 131072, "dim": 16, "base": base},
            ),
        ]

    def arguments(self, params):
        return [params["num_positions"], params["dim"]]

    def reference(self, params, **changes):
        p = {**params, **changes}
        table = positional.sinusoidal_table(
            p["num_positions"] + p.get("offset", 0),
            p["dim"],
            base=p["base"],
            layout=p.get("layout", "interleaved"),
        )
        return table[p.get("offset", 0) :]

    def expected_dtype(self, params, actual):
        return actual.dtype.name if actual.dtype.name in FLOATS else "float32"

    def tolerance(self, params, dtype):
        return positional.tolerance(dtype, params["num_positions"] - 1, base=params["base"])

    def mistakes(self, params):
        positions = np.arange(params["num_positions"], dtype=np.float64)
        found = [
            (
                (
                    "concat layout (all sines, then all cosines), the contract's table is "
                    "table[:, argsort(backends.rope_permutation(dim))]"
                ),
                self.reference(params, layout="concat"),
            ),
            ("positions start at 1", self.reference(params, offset=1)),
        ]
        swapped = self.reference(params).copy()
        swapped[:, 0::2], swapped[:, 1::2] = swapped[:, 1::2].copy(), swapped[:, 0::2].copy()
        found.append(("sin and cos swapped (cos at even columns)", swapped))
        dim, base = params["dim"], params["base"]
        column = np.arange(0, dim, 2)
        for name, angles in (
            (
                "frequency exponent i/dim where 2i/dim is meant",
                positions[:, None] / base ** (column / 2 / dim),
            ),
            *(
                (
                    f"base {other:g} instead of {base:g}",
                    positions[:, None] / other ** (column / dim),
                )
                for other in OTHER_BASES
                if other != base
            ),
            *(
                (
                    f"angles computed in {low}",
                    low_precision_angles(positions, positional.frequencies(dim, base), low),
                )
                for low in ("bfloat16", "float16", "float32")
            ),
        ):
            table = np.empty((len(positions), dim))
            table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
            found.append((name, table))
        return found

    def phase(self, params, actual):
        if actual.ndim != 2 or actual.shape[1] % 2:
            return None
        positions = np.arange(actual.shape[0], dtype=np.float64)
        error = numerics.table_phase_error(actual, positions, params["base"])
        # the largest error in each octave of positions (0, 1, 2-3, 4-7, ...): the envelope
        edges = [0, *(2**k for k in range(int(np.log2(max(len(positions) - 1, 1))) + 1))]
        starts = [e for e in edges if e < len(positions)]
        stops = [*starts[1:], len(positions)]
        return _phase_record(
            np.array(starts), np.array([error[a:b].max() for a, b in zip(starts, stops)])
        )

    def diagnose(self, params, actual, dtype, tolerance, error):
        found = super().diagnose(params, actual, dtype, tolerance, error)
        phase = self.phase(params, actual)
        return _with_phase(found, phase)


def low_precision_angles(positions, frequencies, dtype):
    """p * w with p, w and their product rounded to ``dtype``, as an implementation that forms
    its angles there would; returned in float64."""
    low = validation.resolve_dtype(dtype)
    return (positions.astype(low)[:, None] * frequencies.astype(low)).astype(np.float64)


def _phase_record(positions, error) -> dict:
    return {"positions": [int(p) for p in positions], "radians": [float(e) for e in error]}


def _with_phase(found: str, phase: dict | None) -> str:
    """The diagnosis, with the largest phase error and where it occurs (not for a layout
    mistake, whose pairs are other pairs: their phase means nothing)."""
    if not phase or not phase["radians"] or "layout" in found or "swapped" in found:
        return found
    worst = int(np.argmax(phase["radians"]))
    radians = phase["radians"][worst]
    if radians < 1e-3:
        return found
    at = f"phase error {radians:.2g} rad at position {phase['positions'][worst]}"
    return f"{found}: {at}" if found else at


# --- rope --------------------------------------------------------------------------------


class Rope(Kind):
    name = "rope"
    contract = (
        "f(x, positions) -> rotated, x (..., T, head_dim), positions (T,) integers; pairs "
        "(i, i + head_dim/2) turned by positions * base**(-2i/head_dim) (the half layout)"
    )
    exact = False

    def cases(self, options):
        base = options.get("base", 10000.0)
        found = []
        for dtype in FLOATS:
            found.append(
                Case(
                    f"rotation {dtype}",
                    "x (3, 16, 16), positions 0..15",
                    {"dtype": dtype, "long": False, "base": base, "seed": len(found)},
                )
            )
            found.append(
                Case(
                    f"long positions {dtype}",
                    "x (3, 14, 16), positions to 131071",
                    {"dtype": dtype, "long": True, "base": base, "seed": len(found)},
                )
            )
        return found

    def arguments(self, params):
        positions = LONG if params["long"] else np.arange(16)
        rng = np.random.default_rng(params["seed"])
        x = rng.standard_normal((3, len(positions), ROPE_DIM)).astype(
            validation.resolve_dtype(params["dtype"])
        )
        return [x, positions.astype(np.int64)]

    def reference(self, params, *, layout="half", offset=0, base=None):
        x, positions = self.arguments(params)
        return positional.apply_rope(
            x, positions + offset, base=base or params["base"], layout=layout
        )

    def tolerance(self, params, dtype):
        x, positions = self.arguments(params)
        x = np.abs(x.astype(np.float64))
        magnitude = float((x[..., : ROPE_DIM // 2] + x[..., ROPE_DIM // 2 :]).max())
        return positional.tolerance(
            dtype, float(positions.max()), base=params["base"], magnitude=magnitude
        )

    def mistakes(self, params):
        x, positions = self.arguments(params)
        base = params["base"]
        found = [
            (
                (
                    "interleaved layout (pairs 2i, 2i+1: GPT-J, Meta's LLaMA) where half is expected, "
                    "it conforms as f(x[..., inv])[..., perm], perm = backends.rope_permutation(head_dim), "
                    "inv = argsort(perm)"
                ),
                self.reference(params, layout="interleaved"),
            )
        ]
        found += [
            (f"positions off by {k:+d}", self.reference(params, offset=k))
            for k in (1, -1)
            if positions.min() + k >= 0
        ]
        found += [
            (f"base {b:g} instead of {base:g}", self.reference(params, base=b))
            for b in OTHER_BASES
            if b != base
        ]
        wide = x.astype(np.float64)
        half = ROPE_DIM // 2
        a, b = wide[..., :half], wide[..., half:]
        frequencies = positional.frequencies(ROPE_DIM, base)
        angles = {
            low: low_precision_angles(positions.astype(np.float64), frequencies, low)
            for low in ("bfloat16", "float16", "float32")
        }
        angles["the other way (sin with the wrong sign)"] = -positions[:, None] * frequencies
        for name, angle in angles.items():
            cos, sin = np.cos(angle), np.sin(angle)
            turned = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
            found.append(
                (name if name.startswith("the other") else f"angles computed in {name}", turned)
            )
        return found

    def phase(self, params, actual):
        x, positions = self.arguments(params)
        if actual.shape != x.shape:
            return None
        error = numerics.rotation_phase_error(x, actual, positions, params["base"])
        return _phase_record(positions, error)

    def diagnose(self, params, actual, dtype, tolerance, error):
        found = super().diagnose(params, actual, dtype, tolerance, error)
        if dtype == "float64" and error <= self.tolerance(params, "float32"):
            found = "computed in float32: within float32's tolerance, not float64's"
        return _with_phase(found, self.phase(params, actual))


# --- alibi -------------------------------------------------------------------------------


class Alibi(Kind):
    name = "alibi"
    contract = "f(num_heads) -> slopes (num_heads,), BLOOM's rule for any head count"

    def cases(self, options):
        return [
            Case(
                "slopes, 1 to 128 heads",
                f"{n} heads" + ("" if n & (n - 1) == 0 else " (not a power of two)"),
                {"num_heads": n},
            )
            for n in range(1, 129)
        ]

    def arguments(self, params):
        return [params["num_heads"]]

    def reference(self, params):
        return positional.alibi_slopes(params["num_heads"])

    def expected_dtype(self, params, actual):
        return actual.dtype.name if actual.dtype.name in FLOATS else "float32"

    def mistakes(self, params):
        n = params["num_heads"]
        return [
            (
                f"the power-of-two formula 2**(-8i/n) applied to {n} heads",
                2.0 ** (-8 * np.arange(1, n + 1) / n),
            )
        ]

    def diagnose(self, params, actual, dtype, tolerance, error):
        found = super().diagnose(params, actual, dtype, tolerance, error)
        if found:
            return found
        size, _ = numerics.ulps(actual, self.reference(params), dtype)
        if size <= 4:
            return f"slopes off by up to {size:.0f} ulp: powers computed in {dtype}, not rounded once from exact values"
        return ""


# --- t5 ----------------------------------------------------------------------------------


class T5(Kind):
    name = "t5"
    contract = (
        "f(relative_position, bidirectional, num_buckets, max_distance) -> buckets, T5's rule"
    )

    CONFIGS = ((True, 32, 128), (False, 32, 128), (True, 64, 256), (False, 128, 1000))

    def cases(self, options):
        return [
            Case(
                f"buckets {'bidirectional' if b else 'causal'}, {n} buckets, max distance {d}",
                "relative positions -2000..2000",
                {"bidirectional": b, "num_buckets": n, "max_distance": d},
            )
            for b, n, d in self.CONFIGS
        ]

    def arguments(self, params):
        return [
            np.arange(-2000, 2001, dtype=np.int64),
            params["bidirectional"],
            params["num_buckets"],
            params["max_distance"],
        ]

    def reference(self, params):
        relative, bidirectional, n, d = self.arguments(params)
        return numpy_backend.t5_relative_buckets(
            relative, bidirectional=bidirectional, num_buckets=n, max_distance=d
        )

    def compare(self, params, actual):
        reference = self.reference(params)
        if actual.shape != reference.shape:
            return differs(f"shape {actual.shape} where {reference.shape} is expected")
        if actual.dtype.kind not in "iu":
            return differs(f"returns {actual.dtype.name}, not integers")
        wrong = np.flatnonzero(actual != reference)
        if not wrong.size:
            return conforms("exact")
        relative = self.arguments(params)[0]
        shown = ", ".join(str(int(r)) for r in relative[wrong][:6]) + (
            ", ..." if wrong.size > 6 else ""
        )
        detail = f"{wrong.size} buckets differ, at relative positions {shown}"
        for name, result in self.mistakes(params):
            if np.array_equal(actual, result):
                return differs(f"{detail}; {name}")
        starts = positional.t5_bucket_starts(
            params["num_buckets"], params["max_distance"], bidirectional=params["bidirectional"]
        )
        distance = np.abs(relative[wrong])
        if (
            np.isin(distance, np.r_[starts, starts - 1]).all()
            and np.abs(actual[wrong] - reference[wrong]).max() == 1
        ):
            listed = ", ".join(map(str, starts[:8])) + (", ..." if len(starts) > 8 else "")
            detail += f"; off by one at bucket boundaries (buckets start at distances {listed})"
        return differs(detail)

    def mistakes(self, params):
        relative, bidirectional, n, d = self.arguments(params)
        with np.errstate(all="ignore"):
            return [
                (
                    "the log in float32, as Hugging Face's T5 computes it",
                    _float_log_buckets(relative, bidirectional, n, d, np.float32),
                ),
                (
                    "the log in float64 (the published formula)",
                    _float_log_buckets(relative, bidirectional, n, d, np.float64),
                ),
            ]


def _float_log_buckets(relative, bidirectional, num_buckets, max_distance, dtype):
    """T5's published bucket rule with its log in ``dtype``."""
    buckets = np.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0) * num_buckets
        distance = np.abs(relative)
    else:
        distance = -np.minimum(relative, 0)
    exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = np.log(distance.astype(dtype) / dtype(exact)) / dtype(
            math.log(max_distance / exact)
        )
    large = exact + (large * dtype(num_buckets - exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return buckets + np.where(distance < exact, distance, large)


# --- gradient ----------------------------------------------------------------------------


class Gradient(Kind):
    """Rows of at most two terms are exact (one rounding); the sixteen-term row is not."""

    name = "gradient"
    contract = (
        "f(token_table, token_ids, upstream) -> d_token_table (the table's shape): "
        "row r sums upstream[..., t, :] over every t with token_ids[..., t] == r"
    )

    def cases(self, options):
        padding = options.get("padding_idx")
        found = []
        for dtype in FLOATS:
            for shape in ((T,), (3, T)):
                found.append(
                    Case(
                        f"gradient {dtype}",
                        f"{len(shape)}-D ids, each id at most twice",
                        {
                            "dtype": dtype,
                            "shape": shape,
                            "seed": len(found),
                            "padding_idx": padding,
                        },
                    )
                )
            found.append(
                Case(
                    f"gradient {dtype}",
                    "id 7 sixteen times",
                    {
                        "dtype": dtype,
                        "shape": (16,),
                        "seed": len(found),
                        "repeat": 16,
                        "padding_idx": padding,
                    },
                )
            )
        for label, bad in BAD_IDS.items():
            params = {
                "dtype": "float32",
                "shape": (3,),
                "seed": 0,
                "bad": bad,
                "padding_idx": padding,
            }
            found.append(Case(f"gradient, bad id: {label}", f"token_ids [3, {bad}, 5]", params))
        return found

    def arguments(self, params):
        token_table, _ = _tables(params)
        ids = np.full(params["shape"], 7, np.int64) if params.get("repeat") else _ids(params)
        rng = np.random.default_rng(params["seed"] + 2)
        upstream = rng.standard_normal((*ids.shape, DIM)).astype(token_table.dtype)
        return [token_table, ids, upstream]

    def reference(self, params, *, padding=True):
        token_table, ids, upstream = self.arguments(params)
        grad = np.zeros(token_table.shape, np.float64)
        np.add.at(grad, ids.reshape(-1), upstream.reshape(-1, DIM).astype(np.float64))
        if padding and params.get("padding_idx") is not None:
            grad[params["padding_idx"]] = 0.0
        return grad

    def compare(self, params, actual):
        if not params.get("repeat"):
            return super().compare(params, actual)
        # Sixteen terms in one row: each framework adds in its own order and precision, so the
        # row is held to n * eps * sum |terms| (every partial sum rounded once, eps of the dtype).
        reference = self.reference(params)
        if actual.shape != reference.shape or actual.dtype.name != params["dtype"]:
            return super().compare(params, actual)
        _, _, upstream = self.arguments(params)
        eps = float(ml_dtypes.finfo(validation.resolve_dtype(params["dtype"])).eps)
        bound = params["repeat"] * eps * np.abs(upstream.astype(np.float64)).sum(axis=0).max()
        error = numerics.max_error(actual, reference)
        size, _ = numerics.ulps(actual, reference, params["dtype"])
        if error <= bound:
            return conforms(f"within n * eps * sum|terms|: {error:.2g} <= {bound:.2g}", ulps=size)
        diagnosis = self.diagnose(params, actual, params["dtype"], bound, error)
        return differs(
            f"{error:.2g} > {bound:.2g}{'; ' + diagnosis if diagnosis else ''}", ulps=size
        )

    def mistakes(self, params):
        token_table, ids, upstream = self.arguments(params)
        found = []
        for name, order in (("last", 1), ("first", -1)):
            grad = np.zeros(token_table.shape, np.float64)
            flat_ids, rows = (
                ids.reshape(-1)[::order],
                upstream.reshape(-1, DIM)[::order].astype(np.float64),
            )
            grad[flat_ids] = rows  # NumPy keeps the last write of a repeated index
            found.append((f"repeated ids summed once (W[ids] += g: the {name} term kept)", grad))
        if params.get("padding_idx") is not None:
            found.append(
                (
                    f"the padding row {params['padding_idx']} learns",
                    self.reference(params, padding=False),
                )
            )
        return found

    def classify_bad(self, params, actual):
        token_table, ids, upstream = self.arguments(params)
        if actual.shape != token_table.shape:
            return differs(f"returns shape {actual.shape} without raising")
        actual = actual.astype(np.float64)
        good = np.zeros(token_table.shape)
        np.add.at(good, ids[[0, 2]], upstream[[0, 2]].astype(np.float64))
        if np.isnan(actual).any():
            return differs("fills NaN: a NaN gradient instead of an error")
        bad = params["bad"]
        for name, row in (
            (f"clamps to row {min(max(bad, 0), VOCAB - 1)}", min(max(bad, 0), VOCAB - 1)),
            (f"wraps to row {bad % VOCAB}", bad % VOCAB),
        ):
            moved = good.copy()
            moved[row] += upstream[1].astype(np.float64)
            if np.array_equal(actual, moved):
                return differs(f"{name}: its upstream row trains another token, silently")
        if np.array_equal(actual, good):
            return differs("drops it: its upstream row is lost, silently")
        return differs("returns a gradient without raising (none of clamp, wrap, drop)")


KINDS = {kind.name: kind for kind in (Lookup(), Sinusoidal(), Rope(), Alibi(), T5(), Gradient())}
