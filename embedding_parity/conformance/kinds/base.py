"""What every contract shares: a case, an outcome, a verdict, and the Kind that judges one.

A case is plain data (``Case.params``) from which both the worker, which calls the target, and
the judge, which holds the result to the reference, rebuild the same arguments. A result that
differs is compared with the float64 outputs of the mistakes people make; the first that it
matches (bit for bit for the exact kinds, within the tolerance for the others) names it.

Every method of a kind runs under the kit's own NumPy error state (``KIT_ERRORS``), whatever
the caller's ``np.seterr`` says, and gives the caller's back when it returns: a test suite that
raises on underflow still builds and judges the battery, and only the target's call, which is
no method of a kind, runs under the caller's state.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from dataclasses import dataclass, field

import numpy as np

from backends import validation
from embedding_parity.conformance import numerics

VOCAB, DIM, MAX_SEQ_LEN, T = 64, 8, 16, 5
# Positions of the long-position checks: around 256 (where bfloat16 stops counting by one),
# 2048 and 4096 (float16's and bfloat16's reported failures), and up to 131072.
LONG = np.array([0, 1, 7, 255, 256, 257, 1000, 2047, 2049, 4095, 8191, 16385, 65537, 131071])
ROPE_DIM = 16
OTHER_BASES = (1000.0, 10000.0, 100000.0, 500000.0, 1000000.0)
# 2**31 - 33 fits int32 (JAX's default) and wraps to row 31, not the clamped row 63.
BAD_IDS = {"vocab_size": VOCAB, "-1": -1, "far out of range": 2**31 - 33}
# NumPy's error state for the kit's own arithmetic: what it computes on purpose (float16's
# overflow at position 65537, a reference's underflow in a cast to bfloat16, a NaN compared)
# is a value of the contract, never an error to raise or warn about.
KIT_ERRORS = {"all": "ignore"}
# An invariance's answers of shapes its plan cannot compose (worker.ask): arrays, not "no array".
UNCOMPOSED = "answers that do not compose to the one call's shape"
# The names an error may give the dtype it refuses (torch's 'Half', 'BFloat16' and 'Double',
# ONNX's tensor(double), ggml's f16 and bf16): a valid case's error that names none of its
# dtype's is no refusal of the dtype, but a valid input refused (a target that raises on every
# call refuses no dtype). "half" and "double" count only as a type's name, quoted or qualified:
# as words ("the upper half of the table") they name nothing.
DTYPE_NAMES = {
    "float64": ("float64", "f64", "fp64", "'double'", "tensor(double)", "torch.double"),
    "float16": ("float16", "f16", "fp16", "'half'", "torch.half", "c10::half"),
    "bfloat16": ("bfloat16", "bf16"),
}


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
    returned: str | None = None  # what came back that is no array of numbers: "NoneType"
    changed: list = field(default_factory=list)  # [{"argument": i, "elements": n}]: in place
    refused: str | None = None  # a production path could not make the program (paths.py)


@dataclass
class Verdict:
    status: str  # conforms | differs | rejected | failed
    detail: str
    ulps: float | None = None
    phase: dict | None = None  # {"positions": [...], "radians": [...]}: rope and sinusoidal
    ratio: float | None = None  # largest error / bound: rope and sinusoidal
    mismatch: dict | None = None  # the first differing element (numerics.mismatch)


def conforms(detail, **more) -> Verdict:
    return Verdict("conforms", detail, **more)


def differs(detail, **more) -> Verdict:
    return Verdict("differs", detail, **more)


def names(text: str, words) -> bool:
    """Whether ``text`` names one of ``words``, a whole word in any case: "BFloat16" names
    bfloat16, and does not name float16."""
    spelled = "|".join(re.escape(w) for w in words)
    return re.search(rf"(?<![a-z0-9])(?:{spelled})(?![a-z0-9])", text, re.IGNORECASE) is not None


def integer_mismatch(actual: np.ndarray, expected: np.ndarray, wrong: np.ndarray) -> dict:
    """The first wrong integer: its index and both values."""
    at = tuple(int(i) for i in np.argwhere(wrong)[0])
    return {"index": list(at), "actual": str(actual[at]), "expected": str(expected[at])}


def exact_integers(actual: np.ndarray, expected: np.ndarray):
    """(verdict, wrong) for a result that must be these integers exactly: a Verdict for a wrong
    shape, a result that is not integers, or one that is exact; else None and the boolean mask
    of the values that differ, for the kind to say which."""
    if actual.shape != expected.shape:
        return differs(f"shape {actual.shape} where {expected.shape} is expected"), None
    if actual.dtype.kind not in "iu":
        return differs(f"returns {actual.dtype.name}, not integers"), None
    wrong = actual != expected
    if not wrong.any():
        return conforms("exact"), None
    return None, wrong


def integer_verdict(actual, expected, where, mistakes) -> Verdict:
    """The verdict on a result that must be the integers ``expected``: exact, or what differs
    (``where(wrong)``: how many and the first, in the kind's words) and the mistake of
    ``mistakes`` ((name, integers)) it equals, if any."""
    verdict, wrong = exact_integers(actual, expected)
    if verdict:
        return verdict
    first = integer_mismatch(actual, expected, wrong)
    detail = where(wrong)
    for name, result in mistakes:
        if np.array_equal(actual, result):
            return differs(f"{detail}; {name}", mismatch=first)
    return differs(detail, mismatch=first)


def _under_kit_errors(method):
    """``method`` run under KIT_ERRORS, the caller's NumPy error state restored after it."""

    @functools.wraps(method)
    def wrapped(*arguments, **keywords):
        with np.errstate(**KIT_ERRORS):
            return method(*arguments, **keywords)

    return wrapped


def _guard_methods(cls) -> None:
    for name, value in list(vars(cls).items()):
        if inspect.isfunction(value) and not name.startswith("__"):
            setattr(cls, name, _under_kit_errors(value))


class Kind:
    name = ""
    contract = ""
    exact = True  # bit-identical required; else within positional.tolerance
    packages: tuple[str, ...] = ()  # what its battery needs beyond NumPy (its reference's owner)

    def __init_subclass__(cls, **keywords):
        # one place for the error state: each kind's cases, arguments, references and
        # judgement, wherever they are called from (the worker, the caller's process, the judge)
        super().__init_subclass__(**keywords)
        _guard_methods(cls)

    def cases(self, options: dict) -> list[Case]:
        raise NotImplementedError

    def describe(self, options: dict) -> str:
        """The contract the cases of ``options`` hold a target to."""
        return self.contract

    def result_form(self, options: dict) -> str | None:
        """How a result that is several arrays is written as one (an exported battery's
        results/ID.npy), where the kind's call returns several; None where it returns one."""
        return None

    def arguments(self, params: dict) -> list:
        """The call's arguments, in the contract's order, as NumPy arrays and Python values."""
        raise NotImplementedError

    def reference(self, params: dict) -> np.ndarray:
        """The float64 result the contract asks for."""
        raise NotImplementedError

    def most_elements(self, params: dict) -> int:
        """The most elements a result of the case can hold and be judged: the reference's,
        or the arguments' together (a bad id's case has no reference). A larger result is
        never written or read: a broadcast view of a few bytes can stand for gigabytes."""
        arrays = sum(np.size(a) for a in self.arguments(params) if isinstance(a, np.ndarray))
        if params.get("bad") is not None:
            return int(arrays)
        return int(max(arrays, np.size(self.reference(params))))

    def rounded(self, reference: np.ndarray, dtype) -> np.ndarray:
        """``reference`` rounded once to ``dtype``: the bits an exact result must have (a
        method, so that a cast that underflows is the kit's rounding, never the caller's
        FloatingPointError)."""
        return numerics.rounded(reference, dtype)

    def mistakes(self, params: dict) -> list[tuple[str, np.ndarray]]:
        """(name, float64 result) of each plausible mistake, most specific first."""
        return []

    def tolerance(self, params: dict, dtype):
        """The bound on |result - reference|: a number, or one per element."""
        return 0.0

    def exact_for(self, params: dict) -> bool:
        """Whether this case's result must be bit-identical (else within ``tolerance``)."""
        return self.exact

    def judge(self, case: Case, outcome: Outcome) -> Verdict:
        if outcome.failed:
            return Verdict("failed", outcome.failed)
        params = case.params
        if outcome.refused:  # no program to run: nothing silent, but nothing computed either
            if params.get("bad") is not None:
                return conforms(f"refused: {outcome.refused}")
            if params.get("dtype", "float32") != "float32":
                return Verdict("rejected", f"the path rejects {params['dtype']}: {outcome.refused}")
            return Verdict("failed", outcome.refused)
        if outcome.raised:
            if params.get("bad"):
                return conforms(f"raises {outcome.raised}")
            return self.raised_on_valid(params, outcome.raised)
        if outcome.returned:
            if params.get("bad") is not None:
                return differs(f"returns {outcome.returned} for a bad id: a silent answer")
            if outcome.returned.startswith(UNCOMPOSED):
                return differs(f"returns {outcome.returned}")
            return differs(f"returns {outcome.returned}, not an array of numbers")
        if outcome.changed:
            return differs(self.changed(params, outcome.changed))
        if params.get("bad"):
            return self.classify_bad(params, outcome.array)
        return self.compare(params, outcome.array)

    def raised_on_valid(self, params: dict, raised: str) -> Verdict:
        """The verdict on a valid case that raised: rejected where the error names the case's
        dtype, other than float32 (a dtype the target does not support, said so); else a
        valid input refused."""
        dtype = params.get("dtype")
        if dtype in DTYPE_NAMES and names(raised, DTYPE_NAMES[dtype]):
            return Verdict("rejected", f"rejects {dtype}: {raised}")
        if dtype in DTYPE_NAMES:
            return differs(
                f"raises {raised} on a valid input (an error that does not name {dtype} is no "
                "refusal of the dtype)"
            )
        return differs(f"raises {raised} on a valid input")

    def argument_names(self, params: dict) -> list[str]:
        return self.contract.split("(", 1)[1].split(")", 1)[0].split(", ")

    def changed(self, params: dict, changed: list) -> str:
        """The arguments a call changed, by the contract's names: a silent side effect."""
        names = self.argument_names(params)
        arguments = self.arguments(params)
        said = []
        for change in changed:
            i = change["argument"]
            name = names[i] if i < len(names) else f"argument {i}"
            said.append(f"{name} ({change['elements']} of {np.size(arguments[i])} elements)")
        return f"changes its input in place: {', '.join(said)}; the caller's arrays must be left as they were"

    def expected_dtype(self, params: dict, actual: np.ndarray):
        return params["dtype"]

    def compare(self, params: dict, actual: np.ndarray) -> Verdict:
        reference = self.reference(params)
        if actual.shape != reference.shape:
            return differs(f"shape {actual.shape} where {reference.shape} is expected")
        dtype = self.expected_dtype(params, actual)
        if actual.dtype.name != dtype:
            return differs(f"returns {actual.dtype.name} for {dtype} (a silent change of dtype)")
        expected = self.rounded(reference, dtype)
        size, where = numerics.ulps(actual, reference, dtype)
        phase = self.phase(params, actual)
        if self.exact and numerics.same_bits(actual, expected):
            return conforms("bit-identical", ulps=size, phase=phase)
        tolerance = self.tolerance(params, dtype)
        if not self.exact and (vacuous := _vacuous(tolerance, reference)):
            return Verdict("failed", vacuous)
        error = numerics.max_error(actual, reference)
        if not self.exact:
            size = numerics.ulps_at_scale(error, reference, dtype)
            ratio, worst = numerics.worst_ratio(actual, reference, tolerance)
            bound = float(np.broadcast_to(tolerance, actual.shape)[worst]) if worst else 0.0
            at = float(abs(np.float64(actual[worst]) - reference[worst])) if worst else 0.0
            if ratio <= 1:
                return conforms(
                    f"within tolerance, inside its bound: {at:.2g} <= {bound:.2g} ({ratio:.2f} of "
                    f"the bound); {size:.3g} ulp of the largest value",
                    ulps=size,
                    phase=phase,
                    ratio=ratio,
                )
        if not math.isfinite(size):
            found = f"NaN at {list(where)}"
        elif self.exact:
            found = numerics.distance(actual, reference, dtype)
        else:
            found = f"{at:.2g} > {bound:.2g} at {list(worst)} ({ratio:.3g} times the bound)"
        diagnosis = self.diagnose(params, actual, dtype, tolerance, error)
        first = numerics.mismatch(actual, expected, dtype, None if self.exact else worst or None)
        return differs(
            f"{found}{'; ' + diagnosis if diagnosis else ''}",
            ulps=size,
            phase=phase,
            mismatch=first or None,
        )

    def diagnose(self, params, actual, dtype, tolerance, error) -> str:
        """The mistake the result matches, or the one it is far closest to; "" if none.
        A NaN where the mistake has a NaN matches it (positions rounded to float16 overflow)."""
        closest, closest_error = "", math.inf
        for name, result in self.mistakes(params):
            if result.shape != actual.shape:
                continue
            if self.exact and numerics.same_bits(actual, numerics.rounded(result, dtype)):
                return name
            if not self.exact and numerics.worst_ratio(actual, result, tolerance)[0] <= 1:
                return name
            off = numerics.max_error(actual, result, nan_matches=True)
            # ten times nearer the mistake than zeros are, too: else a small result (zeros)
            # would be "nearest" to any mistake whose values are all small
            like = off <= 0.1 * numerics.max_error(np.zeros(result.shape), result)
            if like and off < closest_error:
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


_guard_methods(Kind)


def _vacuous(tolerance, reference) -> str:
    """Why a bound cannot tell right from wrong, or "": a bound as wide as the largest value it
    judges passes an answer of zeros, or a rotation left undone (a scaling factor of 1e-300
    widens a rotation's bound to 1e290). Whatever numbers made it, the check says so rather
    than conform."""
    bound = float(np.max(tolerance))
    magnitudes = np.abs(reference)
    largest = float(np.max(magnitudes, initial=0.0, where=np.isfinite(magnitudes)))
    if bound == 0 or bound < largest:
        return ""
    return (
        f"the kit cannot judge it: its bound ({bound:.2g}) is as wide as the largest value it "
        f"judges ({largest:.2g}), so an answer of zeros would pass; the contract's numbers (a "
        "scaling factor, a multiplier) leave the check no teeth"
    )


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
