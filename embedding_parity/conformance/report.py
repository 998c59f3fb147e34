"""A target's report: each case's verdict (``judged``), one result per check
(``check_results``), the expectations marked (``mark_expected``), the lines and the JSON
record; and ``shown``, which makes whatever a target says safe to put in one.

Everything here judges and says; nothing runs a target (``process``) or a battery
(``runner``)."""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import asdict, dataclass, field

from embedding_parity.conformance.kinds import KINDS, Case, Outcome, Verdict, base
from embedding_parity.usage import UsageError

SHOWN_CHARACTERS = 300  # of a target's text in a report: one line, at most this long

# The kit's private folders (the job's, a worker's) in what a target raised: Inductor names
# its kernel's file, under the job's cache, in its bounds check's message.
PRIVATE = re.compile(r"(?:/[^/\s,:]+)*/embedding-parity-[\w-]+")  # wherever TMPDIR was
SCHEMA_VERSION = 1  # of Report.record(): docs/conformance.md, "The JSON report"
# expected: differs or failed as --expect said it would; fixed: an --expect that conforms
MARK = {"conforms": "ok", "differs": "NO", "rejected": "--", "failed": "FAIL"}
MARK |= {"expected": "xf", "fixed": "XP"}
ACCEPTED = ("conforms", "rejected", "expected")


@dataclass
class CheckResult:
    check: str
    status: str  # conforms | differs | rejected | failed | expected | fixed
    detail: str
    cases: list[dict] = field(default_factory=list)
    phase: dict | None = None
    ulps: float | None = None  # the largest of its cases'
    mismatch: dict | None = None  # the first differing element of its first differing case
    reason: str | None = None  # why it is expected to differ (--expect), if it is
    valid: bool = True  # its cases are valid inputs (a bad id's check: False; it must raise)


@dataclass
class Report:
    target: str
    kind: str
    framework: str
    why: str
    checks: list[CheckResult]
    seconds: float
    contract: str = ""
    strict: bool = False  # an expected difference that conforms (fixed) fails the report
    unmatched: list[str] = field(default_factory=list)  # --expect entries that match no check
    against: dict | None = None  # against.py: the other target and both contract verdicts
    through: dict | None = None  # the production path: its name, how, versions, eager's checks
    left_out: list[str] = field(default_factory=list)  # --results: checks the folder lacks
    # the kind's invariances: {"kind", "asked": their checks} or {"kind", "not_asked": why}
    invariances: dict | None = None

    @property
    def conforms(self) -> bool:
        """Every check conforms, was rejected (a dtype or format the target's error names is
        not a wrong answer) or differs as expected; a fixed expectation too, unless strict; and
        a valid case was answered and held to the contract (``answered``). Never for a part of
        the battery: results judged from a folder that leaves out a check (``left_out``)."""
        return self.verdict == "CONFORMS"

    @property
    def verdict(self) -> str:
        """CONFORMS; DIFFERS (a check differs or failed); INCOMPLETE (a folder that leaves out
        checks); NO VERDICT (every check accepted, but no valid case answered: refusals
        alone, a bad id's or a dtype's, are no evidence)."""
        if not self.accepted:
            return "DIFFERS"
        if self.left_out:
            return "INCOMPLETE"
        return "CONFORMS" if self.answered else "NO VERDICT"

    @property
    def accepted(self) -> bool:
        """Every check that was run is accepted, as ``conforms`` says, whatever was left out
        and whatever was answered."""
        accepted = ACCEPTED if self.strict else (*ACCEPTED, "fixed")
        return all(c.status in accepted for c in self.checks)

    @property
    def answered(self) -> bool:
        """Whether a valid case was answered and held to its contract: the evidence a verdict
        of conformance needs (a bad id that raises, a refused dtype, a difference expected are
        none; nor are the kind's invariances beside its contract's checks: they hold the
        target to itself, and a stub that answers zeros answers the same zeros two ways)."""
        return any(case["status"] == "conforms" for c in self._held() for case in c.cases)

    def _held(self) -> list[CheckResult]:
        """The checks of valid cases that are evidence: the contract's, or the invariances'
        where they alone were run (as under --kind rope_invariance)."""
        valid = [c for c in self.checks if c.valid]
        asked = (self.invariances or {}).get("asked", ())
        return [c for c in valid if c.check not in asked] or valid

    def unanswered(self) -> str:
        """Why no valid case was answered, in one line: a report of NO VERDICT's."""
        valid = ", ".join(f"{c.check}: {c.status}" for c in self._held())
        why = (
            f"no valid check conforms ({valid}): try a dtype or a format it reads"
            if valid
            else "only bad ids were tried: choose a check of valid inputs too"
        )
        return (
            f"no verdict: not one valid case was answered and held to {self.kind}'s contract, "
            f"and a refusal is no evidence of conformance; {why}"
        )

    def lines(self) -> list[str]:
        width = max(len(c.check) for c in self.checks)
        lines = [
            f"check {self.target} as {self.kind} ({self.framework}, {self.why})",
            f"contract: {self.contract or KINDS[self.kind].contract}",
        ]
        if self.against:
            lines.append(against_line(self.against))
        if self.through:
            lines.append(through_line(self.through))
        asked = (self.invariances or {}).get("asked", [])
        for c in self.checks:
            if asked and c.check == asked[0]:
                lines.append(
                    f"asked two ways ({self.invariances['kind']}): each answer held to the other"
                )
            detail = c.detail
            if c.status in ("expected", "fixed"):
                said = "expected" if c.status == "expected" else "expected to differ, but conforms"
                detail = f"{said} ({c.reason}): {detail}"
            if self.against and c.check not in asked:  # an invariance holds the target alone
                detail += beside(self.against, c.check)
            if self.through and c.check in self.through["bits"]:
                detail += f"  [eager: {self.through['bits'][c.check]}]"
            lines.append(f"  {MARK[c.status]:<4} {c.check:<{width}}  {detail}")
        lines += [f"warning: --expect {entry!r} matches no check" for entry in self.unmatched]
        counts = {s: sum(c.status == s for c in self.checks) for s in MARK}
        summary = f"{counts['conforms']} of {len(self.checks)} checks conform"
        if len(self.checks) == 1:
            summary = f"{counts['conforms']} of 1 check conforms"
        summary += "".join(
            f", {counts[s]} {word if counts[s] > 1 else s}"
            for s, word in (
                ("differs", "differ"),
                ("failed", "failed"),
                ("rejected", "rejected"),
                ("expected", "expected"),
                ("fixed", "fixed"),
            )
            if counts[s]
        )
        if self.left_out:
            lines.append(
                f"left out: {len(self.left_out)} checks of {self.kind}'s battery are not in the "
                f"folder ({', '.join(self.left_out)}): a part of the battery is no verdict of "
                "conformance; export the whole battery"
            )
        if self.verdict == "NO VERDICT":
            lines.append(self.unanswered())
        return [*lines, f"{self.verdict}: {summary} ({self.seconds:.1f} s){self._twice()}"]

    def _twice(self) -> str:
        """The last line's word on the kind's invariances: asked too, or why not."""
        if self.invariances is None:
            return ""
        kind = self.invariances["kind"]
        if "asked" in self.invariances:
            return f"; invariances asked too ({kind})"
        return f"; invariances not asked ({kind}): {self.invariances['not_asked']}"

    def record(self) -> dict:
        """Everything, JSON-ready: an infinite or NaN error as the string "inf" or "nan"."""
        record = {"schema_version": SCHEMA_VERSION, **asdict(self), "conforms": self.conforms}
        record["verdict"] = self.verdict
        return _finite(record)


def against_line(against: dict) -> str:
    return (
        f"against {against['target']} ({against['framework']}, {against['why']}): each case "
        "bit for bit in its dtype; [contract: this target, the other]"
    )


def beside(against: dict, check: str) -> str:
    """ "  [contract: ok, NO]": the two targets' verdicts of ``check`` against the contract."""
    marks = [
        next((MARK[c["status"]] for c in against[side] if c["check"] == check), "")
        for side in ("own", "other")
    ]
    return f"  [contract: {marks[0]}, {marks[1]}]"


def through_line(through: dict) -> str:
    shown = ", ".join(f"{p} {v}" for p, v in through["versions"].items())
    return f"through {through['path']}: {through['how']} ({shown}); what it changes from eager is named"


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def mark_expected(checks: list[CheckResult], expected: dict, battery=()) -> list[str]:
    """Mark the checks an entry of ``expected`` names (its name, test id or a glob): a
    difference becomes expected, a conforming check fixed (a failure — a hang, a death —
    stays one, and a dtype refused stays rejected). Returns the entries that name no check
    of the whole ``battery`` (of ``checks`` where none is given): a filter that leaves a
    check out does not make its entry stale."""
    if not isinstance(expected, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in expected.items()
    ):
        raise UsageError("expected differences must be a dict {check name or glob: reason}")
    for check in checks:
        entry = next((e for e in expected if names(e, check.check)), None)
        if entry is None or check.status not in ("differs", "conforms"):
            continue
        check.reason = expected[entry]
        check.status = "expected" if check.status == "differs" else "fixed"
    known = set(battery) | {c.check for c in checks}
    return [e for e in expected if not any(names(e, name) for name in known)]


def names(entry: str, check: str) -> bool:
    """Whether an expected entry names ``check``: its name, its test id, or a glob of either."""
    return fnmatch.fnmatchcase(check, entry) or fnmatch.fnmatchcase(check_id(check), entry)


def check_id(name: str) -> str:
    """A check's name as a test id: "bad id: -1" -> "bad_id_-1"."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", name).strip("_")


def judged(chosen, case: Case, outcome: Outcome) -> Verdict:
    """The verdict on what the target did with ``case``. The kit's own failure to judge it is
    the kit's, said as such, never the target's."""
    try:  # under the kit's error state, as every method of a kind (kinds.base.KIT_ERRORS)
        return chosen.judge(case, outcome)
    except Exception as error:
        return Verdict(
            "failed", shown(f"the kit failed to judge it: {type(error).__name__}: {error}")
        )


def check_results(verdicts: list[tuple[Case, Verdict]]) -> list[CheckResult]:
    """One result per check: the first difference or failure, else what every case shares.
    A refusal of a dtype (or a format) the target answered in a valid case of the battery is
    a valid input refused (``answered_elsewhere``)."""
    verdicts = answered_elsewhere(verdicts)
    grouped: dict[str, list[tuple[Case, Verdict]]] = {}
    for case, verdict in verdicts:
        grouped.setdefault(case.check, []).append((case, verdict))
    results = []
    for check, pairs in grouped.items():
        valid = all(c.params.get("bad") is None for c, _ in pairs)
        cases_ = [
            {
                "label": c.label,
                "status": v.status,
                "detail": v.detail,
                "ulps": v.ulps,
                "ratio": v.ratio,  # the largest error over its bound (rope, sinusoidal)
                "mismatch": v.mismatch,
            }
            for c, v in pairs
        ]
        phases = [v.phase for _, v in pairs if v.phase]
        phase = max(phases, key=lambda p: max(p["positions"]), default=None)
        sizes = [v.ulps for _, v in pairs if v.ulps is not None]
        more = {"ulps": max(sizes) if sizes else None, "valid": valid}
        statuses = {v.status for _, v in pairs}
        for status in ("differs", "failed"):
            first = next(((c, v) for c, v in pairs if v.status == status), None)
            if first:
                detail = f"{first[0].label}: {first[1].detail}"
                mismatch = first[1].mismatch and {"case": first[0].label, **first[1].mismatch}
                results.append(
                    CheckResult(check, status, detail, cases_, phase, mismatch=mismatch, **more)
                )
                break
        else:
            status = "rejected" if statuses == {"rejected"} else "conforms"
            said = [v for _, v in pairs if v.status == status]
            worst = max(said, key=lambda v: v.ulps or 0.0)
            count = f" ({len(pairs)} cases)" if len(pairs) > 1 else ""
            rejected = [c.label for c, v in pairs if v.status == "rejected"]
            if status == "conforms" and rejected:  # a bad id's, in a format the target refuses
                count = f" ({len(said)} of {len(pairs)} cases; rejected: {'; '.join(rejected)})"
            results.append(CheckResult(check, status, worst.detail + count, cases_, phase, **more))
    return results


def answered_elsewhere(verdicts: list[tuple[Case, Verdict]]) -> list[tuple[Case, Verdict]]:
    """The verdicts with each refusal of a dtype (quantized_lookup: a format) that a valid case
    of the same battery answered and held to the contract made a difference: a target that
    reads float16 and raises on float16 only at long positions refuses a hard case, not the
    dtype. And a bad id's error that names a format (a dtype) the valid cases found refused is
    that refusal again, no id checked: rejected, saying so (a target that reads Q4_K alone
    raises naming Q8_0 for Q8_0's bad ids)."""
    answered: dict[str, Case] = {}
    for case, verdict in verdicts:
        if verdict.status == "conforms" and case.params.get("bad") is None:
            answered.setdefault(refusable(case), case)
    found = []
    for case, verdict in verdicts:
        other = answered.get(refusable(case))
        if verdict.status == "rejected" and other is not None:
            what = refusable(case)
            verdict = Verdict(
                "differs",
                shown(
                    f"raises on a valid {what} input, where it answered {what} in "
                    f"'{other.check}' ({verdict.detail}): a hard case refused, not {what}"
                ),
            )
        found.append((case, verdict))
    refused = {refusable(c) for c, v in found if v.status == "rejected"}
    return [(c, _unchecked(c, v) if refusable(c) in refused else v) for c, v in found]


def _unchecked(case: Case, verdict: Verdict) -> Verdict:
    """A bad id's verdict, rejected where the error it raised names what the target refuses."""
    what = refusable(case)
    raised = case.params.get("bad") is not None and verdict.status == "conforms"
    if not raised or not base.names(verdict.detail, (what,)):
        return verdict
    return Verdict("rejected", shown(f"rejects {what}, no bad id checked in it: {verdict.detail}"))


def refusable(case: Case) -> str:
    """What a refusal of ``case`` may name: its format (quantized_lookup), else its dtype."""
    return case.params.get("format") or case.params.get("dtype", "float32")


def shown(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """A target's text made safe for a report: its first line, every character that is not
    printable escaped (an escape sequence, a carriage return, a lone surrogate, a
    right-to-left override), cut to ``limit`` characters."""
    first = (str(text).splitlines() or [""])[0]
    if len(first) > limit:
        first = f"{first[:limit]}... ({len(first)} characters)"
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in first
    )
