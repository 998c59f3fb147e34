"""One implementation held to another, case by case: a port to the implementation it comes
from, in the dtype it runs in.

Each valid case's two results are compared bit for bit in the case's dtype: bit-identical,
or how many elements differ, by how many ulps at most (at the other's value) and where. A
bad id's case has no result to match: there the target is held to the contract, as without
``--against``, and so is it where the other gives no result (raises: a dtype it refuses).
Both targets' verdicts against the contract (the float64 reference) are kept
beside the comparison, and a difference still names the mistake the kit recognises in the
target's result. A result that matches the other's is no pass where the target's own result
breaks the contract: a port bit-identical to a wrong source (or returning the same integers
where the contract is in a float dtype) is as wrong as it, and its check says so.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds import Case, Outcome, Verdict
from embedding_parity.conformance.kinds.base import conforms, differs, integer_mismatch
from embedding_parity.conformance.report import check_results, judged, shown


def hold(report, kind, cases, outcomes, verdicts, theirs, other, name: str) -> None:
    """Make ``report`` (of the target against the contract) the report against ``name``:
    its checks become the case-by-case comparison, the contract's verdicts of both go
    beside them (``report.against``)."""
    other_verdicts = [judged(kind, c, o) for c, o in zip(cases, theirs)]
    held = [
        _guarded(case, mine, yours, own, name)
        for case, mine, yours, own in zip(cases, outcomes, theirs, verdicts)
    ]
    own_checks = report.checks
    other_checks = check_results(list(zip(cases, other_verdicts)))
    report.checks = check_results(list(zip(cases, held)))
    report.against = {
        "target": name,
        "framework": other.framework,
        "why": other.why,
        "own": [asdict(c) for c in own_checks],
        "other": [asdict(c) for c in other_checks],
    }


def _guarded(case, mine, theirs, own, name) -> Verdict:
    """``versus``, a failure of the kit's own said as the kit's (as ``report.judged`` does)."""
    try:
        with np.errstate(all="ignore"):  # NaN and infinities are compared on purpose
            return versus(case, mine, theirs, own, name)
    except Exception as error:
        return Verdict(
            "failed", shown(f"the kit failed to compare it: {type(error).__name__}: {error}")
        )


def versus(case: Case, mine: Outcome, theirs: Outcome, own: Verdict, name: str) -> Verdict:
    """The verdict of one case: the target's result against the other's."""
    if case.params.get("bad") is not None:
        return own  # no result to match: a bad id must raise, whatever the other does
    if mine.failed:
        return Verdict("failed", mine.failed)
    if theirs.failed:
        return Verdict("failed", f"{name}: {theirs.failed}")
    if theirs.array is None:  # nothing to match: the contract judges it alone
        why = f"raises {theirs.raised}" if theirs.raised else f"returns {theirs.returned}"
        return replace(own, detail=f"{name} {why}, so against the contract: {own.detail}")
    if mine.array is None or mine.changed:
        return own  # raised, returned no numbers, changed its input: the contract says which
    return _compared(mine.array, theirs.array, own, name)


def _compared(actual: np.ndarray, other: np.ndarray, own: Verdict, name: str) -> Verdict:
    """The comparison with the other's result, where the target's own result keeps the
    contract; else the contract's verdict, said beside the match."""
    matched = _matched(actual, other, own, name)
    if matched.status != "conforms" or own.status == "conforms":
        return matched
    return replace(
        own, detail=f"{matched.detail}, and as wrong: against the contract, {own.detail}"
    )


def _matched(actual: np.ndarray, other: np.ndarray, own: Verdict, name: str) -> Verdict:
    if actual.shape != other.shape:
        return differs(f"shape {actual.shape} where {name} gives {other.shape}")
    named = f"; against the contract: {own.detail}" if own.status == "differs" else ""
    if actual.dtype.kind in "iu" and other.dtype.kind in "iu":  # any integers, as the contract
        wrong = actual != other
        if not wrong.any():
            return conforms(f"the same integers as {name}", ulps=0.0)
        first = integer_mismatch(actual, other, wrong)
        return differs(
            f"{int(wrong.sum())} of {actual.size} elements differ from {name}, first at "
            f"{first['index']}: {first['actual']} where {name} gives {first['expected']}{named}",
            mismatch=first,
        )
    if actual.dtype != other.dtype:
        return differs(f"returns {actual.dtype.name} where {name} returns {other.dtype.name}")
    if actual.dtype.name not in numerics.FLOATS:
        return differs(f"returns {actual.dtype.name}, where the contract is in a float dtype")
    if numerics.same_bits(actual, other):
        return conforms(f"bit-identical to {name}", ulps=0.0)
    width, dtype = actual.dtype.itemsize, actual.dtype.name
    same = actual.view(f"V{width}") == other.view(f"V{width}")
    count = int((~same).sum())
    # ulps where the numbers differ (a zero's sign or a NaN's bits differ by none); the
    # other's values kept where they match: the scale a difference next to 0 is said beside
    alike = same | (np.isnan(actual) & np.isnan(other))
    yours = np.where(alike & np.isnan(other), 0.0, other.astype(np.float64))
    mine = np.where(alike, yours, actual)
    size, where = numerics.ulps(mine, yours, dtype)
    first = numerics.mismatch(actual, other, dtype, where if size else None)
    far = f"0 ulp at {first['index']}"
    if size:
        far = numerics.distance(mine, yours, dtype, named=name)
    return differs(
        f"{count} of {actual.size} elements differ from {name} in their bits, at most "
        f"{far}: {first['actual']} where {name} gives {first['expected']}{named}",
        ulps=size,
        mismatch=first,
    )
