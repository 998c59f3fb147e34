"""Run a kind's battery on a target in a worker process, each case under a time limit, and
judge every result: the report of one target.

A case that hangs or kills the worker is marked (timed out, died) and a fresh worker takes the
next case, so one bad case never loses the run. Results travel as .npy files in one private
temporary folder, removed on every exit path."""

from __future__ import annotations

import contextlib
import fnmatch
import inspect
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from embedding_parity import scratch
from embedding_parity.conformance import frameworks
from embedding_parity.conformance.kinds import KINDS, Case, Outcome, Verdict
from embedding_parity.conformance.numerics import FLOATS
from embedding_parity.usage import UsageError

ROOT = str(Path(__file__).resolve().parents[2])  # holds backends/ and embedding_parity/
IMPORT_SECONDS = 180  # the target's own import (transformers takes seconds) and the frameworks'
POLL_SECONDS = 0.1  # where no pidfd tells that the worker exited, how often to look
LOG_BYTES = 1 << 16  # the tail of a worker's printing kept for its last line
SHOWN_CHARACTERS = 300  # of a target's text in a report: one line, at most this long
LARGEST_ITEM, NPY_HEADER = 16, 4096  # bytes of a complex128 element, of a .npy header at most


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

    @property
    def conforms(self) -> bool:
        """Every check conforms, was rejected (a dtype refused is not a wrong answer) or
        differs as expected; a fixed expectation too, unless strict. Never for a part of the
        battery: results judged from a folder that leaves out a check (``left_out``)."""
        return self.accepted and not self.left_out

    @property
    def accepted(self) -> bool:
        """Every check that was run is accepted, as ``conforms`` says, whatever was left out."""
        accepted = ACCEPTED if self.strict else (*ACCEPTED, "fixed")
        return any(c.status in ("conforms", "expected", "fixed") for c in self.checks) and all(
            c.status in accepted for c in self.checks
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
        for c in self.checks:
            detail = c.detail
            if c.status in ("expected", "fixed"):
                said = "expected" if c.status == "expected" else "expected to differ, but conforms"
                detail = f"{said} ({c.reason}): {detail}"
            if self.against:
                from embedding_parity.conformance import against

                detail += against.beside(self.against, c.check)
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
        verdict = "CONFORMS" if self.conforms else "DIFFERS"
        if self.left_out:
            lines.append(
                f"left out: {len(self.left_out)} checks of {self.kind}'s battery are not in the "
                f"folder ({', '.join(self.left_out)}): a part of the battery is no verdict of "
                "conformance; export the whole battery"
            )
            verdict = "INCOMPLETE" if self.accepted else verdict
        return [*lines, f"{verdict}: {summary} ({self.seconds:.1f} s)"]

    def record(self) -> dict:
        """Everything, JSON-ready: an infinite or NaN error as the string "inf" or "nan"."""
        record = {"schema_version": SCHEMA_VERSION, **asdict(self), "conforms": self.conforms}
        return _finite(record)


def against_line(against: dict) -> str:
    return (
        f"against {against['target']} ({against['framework']}, {against['why']}): each case "
        "bit for bit in its dtype; [contract: this target, the other]"
    )


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


def select_cases(
    kind: str,
    options: dict | None = None,
    *,
    only: str | tuple[str, ...] | None = None,
    checks=None,
    dtypes=None,
) -> list[Case]:
    """The cases of ``kind``'s battery to run: those of the checks named exactly in
    ``checks``, or starting with ``only`` (the check of that name, where one has it); of the ``dtypes`` given (every case that names a
    dtype, but a bad id's, which is about the ids); UsageError where nothing is left."""
    every = KINDS[kind].cases(options or {})
    names = list(dict.fromkeys(c.check for c in every))
    if isinstance(only, str) and only in names:  # a check's whole name: that check alone
        only, checks = None, [only]
    if dtypes is not None:
        dtypes = [dtypes] if isinstance(dtypes, str) else list(dtypes)
        if not dtypes:  # would leave the bad ids alone: a lookup of zeros that raises passes
            raise UsageError(
                f"dtypes is empty: it tries no dtype, and the bad ids alone judge no answer; "
                f"give one or more of {', '.join(FLOATS)}, or None for all"
            )
        for dtype in dtypes:
            if dtype not in FLOATS:
                raise UsageError(f"dtype {dtype!r} is not one the kit tries: {', '.join(FLOATS)}")
    if checks is not None:
        checks = [checks] if isinstance(checks, str) else list(checks)
        if not checks:
            raise UsageError(
                f"checks is empty: it names no check of {kind}; give one or more of "
                f"{', '.join(names)}, or None for all"
            )
        unknown = [c for c in checks if c not in names]
        if unknown:
            raise UsageError(f"{unknown[0]!r} is no check of {kind}: {', '.join(names)}")
    cases = [
        c
        for c in every
        if (only is None or c.check.startswith(only))
        and (checks is None or c.check in checks)
        and (
            dtypes is None
            or "dtype" not in c.params
            or c.params.get("bad") is not None
            or c.params["dtype"] in dtypes
        )
    ]
    if not cases:
        chosen = f"--only {only!r}" if only is not None else f"dtypes {dtypes}"
        raise UsageError(f"{chosen} matches no check of {kind}: {', '.join(names)}")
    return cases


def run(
    target,
    kind: str,
    *,
    framework: str | None = None,
    options: dict | None = None,
    env: dict | None = None,
    timeout: float = 60.0,
    only: str | tuple[str, ...] | None = None,
    checks=None,
    dtypes=None,
    expected: dict | None = None,
    strict: bool = False,
    against=None,
    against_framework: str | None = None,
    through: str | None = None,
    worker: Worker | None = None,
) -> Report:
    """The report of ``target`` against ``kind``'s battery.

    ``target``: "path/to/file.py:NAME" or "package.module:NAME", run in a worker process
    (``worker``: one to reuse, with its env, not ``env``), or a callable, run in this process
    (``InProcess``: no time limit, no isolation). ``only``: the checks whose name starts with
    it (or with one of them); ``checks``: those named exactly; ``dtypes``: the dtypes tried;
    ``expected``: {check name or glob: why it differs}; ``strict``: an expected difference
    that conforms fails the report; ``against``: another target (or a source of
    ``adapters.sources``) to hold this one to, case by case (``against_framework``: what it
    takes); ``through``: a production path (``paths.PATHS``) to run it along, each case run
    eagerly too, so that what the path changes is named as the path's. UsageError when a
    target cannot be imported or called, or cannot go along the path."""
    began = time.monotonic()
    options = options or {}
    chosen = KINDS[kind]
    cases = select_cases(kind, options, only=only, checks=checks, dtypes=dtypes)
    if through is not None:
        _check_path(through, against)
        cases = at_every_shape(cases)
    with contextlib.ExitStack() as stack:
        caller = _caller(stack, target, kind, options, framework, env, worker, timeout)
        if through is not None:
            _check_path_framework(through, caller, name_of(target))
        outcomes = _outcomes(chosen, cases, caller, timeout)
        if through is not None:
            eager = outcomes
            along = _outcomes(chosen, cases, caller, timeout, through)
            outcomes = _runnable(chosen, options, cases, along, caller, timeout, through)
        if against is not None:
            try:
                other = _caller(
                    stack, against, kind, options, against_framework, env, None, timeout
                )
            except UsageError as error:
                raise UsageError(f"--against: {error}") from None
            theirs = _outcomes(chosen, cases, other, timeout)
    verdicts = [judged(chosen, case, outcome) for case, outcome in zip(cases, outcomes)]
    report = Report(
        name_of(target),
        kind,
        caller.framework,
        caller.why,
        check_results(list(zip(cases, verdicts))),
        0.0,
        chosen.describe(options),
        strict,
    )
    if through is not None:
        eager_checks = check_results([(c, judged(chosen, c, o)) for c, o in zip(cases, eager)])
        report.through = _along(through, report.checks, eager_checks)
        report.through["bits"] = _bits(cases, outcomes, eager)
    if against is not None:
        from embedding_parity.conformance import against as held

        held.hold(report, chosen, cases, outcomes, verdicts, theirs, other, name_of(against))
    if expected:
        battery = [c.check for c in chosen.cases(options)]
        report.unmatched = mark_expected(report.checks, expected, battery)
    report.seconds = time.monotonic() - began
    return report


def name_of(target) -> str:
    """How a report names a target: its string, or the callable's module-level name (a
    class's name for an instance, an nn.Module say): never a repr with an address."""
    if isinstance(target, str):
        return target
    named = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None) or type(target).__module__
    return f"{module}.{named}" if module and module != "__main__" else named


def _caller(stack, target, kind, options, framework, env, worker, timeout):
    """What asks the target for each case: a worker for a string, else the callable itself."""
    if isinstance(target, str):
        if worker is None:
            worker = stack.enter_context(Worker(env or {}))
        worker.load(target, kind, framework, options=options, timeout=timeout)
        return worker
    if not callable(target):
        raise UsageError(
            f"the implementation must be callable or a 'path/to/file.py:NAME' string, "
            f"not {type(target).__name__}"
        )
    return InProcess(target, kind, framework, options)


def at_every_shape(cases: list[Case]) -> list[Case]:
    """``cases``, each bad id's case followed by the same bad id at every other shape of ids a
    valid case has: a path makes one program per shape, and a bad id tried at one shape alone
    says nothing of the programs the valid cases run (a check that only a short input
    reaches, a bounds check compiled away at one size)."""
    shapes = [c.params.get("shape") for c in cases if c.params.get("bad") is None]
    shapes = list(dict.fromkeys(tuple(s) for s in shapes if s is not None))
    found = []
    for case in cases:
        found.append(case)
        if case.params.get("bad") is None or "shape" not in case.params:
            continue
        for shape in shapes:
            if shape != tuple(case.params["shape"]):
                label = f"{case.label} repeated to shape {shape}"
                found.append(Case(case.check, label, {**case.params, "shape": shape}))
    return found


def _outcomes(chosen, cases, caller, timeout, through=None) -> list[Outcome]:
    return [caller.ask(case, chosen.most_elements(case.params), timeout, through) for case in cases]


def _runnable(chosen, options, cases, outcomes: list[Outcome], caller, timeout, through):
    """A path that makes no program of a valid case cannot run the target at all: then its
    refusals are failures, never a bad id's conforming refusal or a dtype's rejection. Where
    no float32 case was chosen and made, one (the probe's) is made along the path to tell a
    path that cannot run the target from one that rejects a dtype."""
    valid = [(c, o) for c, o in zip(cases, outcomes) if c.params.get("bad") is None]
    if not any(o.refused for o in outcomes) or any(not o.refused for _, o in valid):
        return outcomes
    if not any(c.params.get("dtype", "float32") == "float32" for c, _ in valid):
        params = frameworks.probe_case(chosen, options)
        if params is not None:
            probe = Case("a valid case", "a valid float32 case", params)
            made = caller.ask(probe, chosen.most_elements(params), timeout, through)
            if not made.refused:
                return outcomes
    return [Outcome(failed=o.refused) if o.refused else o for o in outcomes]


def _check_path(through: str, against) -> None:
    from embedding_parity.conformance import paths

    if through not in paths.PATHS:
        raise UsageError(f"--through {through!r}: the paths are {', '.join(paths.PATHS)}")
    if against is not None:
        raise UsageError("--through and --against: one at a time (the path is held to eager)")
    why = paths.missing(through)
    if why:
        raise UsageError(why)


def _check_path_framework(through: str, caller, name: str) -> None:
    from embedding_parity.conformance import paths

    wanted = paths.PATHS[through].framework
    if caller.framework != wanted:
        raise UsageError(
            f"--through {through} runs a {wanted} target; {name} takes {caller.framework} "
            f"({caller.why}); give --framework {wanted} if that is wrong"
        )


def _along(through: str, checks: list[CheckResult], eager: list[CheckResult]) -> dict:
    """Report.through: the path, its versions, eager's verdicts and the checks whose verdict
    the path changed ("changed"), each of which says what eager did beside what the path did."""
    from embedding_parity.conformance import paths

    before = {c.check: c for c in eager}
    changed = []
    for check in checks:
        was = before.get(check.check)
        if was is not None and was.status != check.status:
            changed.append(check.check)
            check.detail = f"through {through}: {check.detail}; eager: {was.detail}"
    return {
        "path": through,
        "how": paths.PATHS[through].how,
        "versions": paths.versions(through),
        "changed": changed,
        "eager": [asdict(c) for c in eager],
    }


def _bits(cases, along: list[Outcome], eager: list[Outcome]) -> dict:
    """{check: "same bits", or how many elements differ from eager's and by how many ulps at
    most}, over the valid cases both answered with arrays of one shape and dtype: which bits
    the path changed, where the contract cannot say (a rotation within its tolerance either
    way). The ulps are of the case's largest value, as a table's or rotation's tolerance is
    absolute (at an element near zero one float32 step of the angle is millions of its ulps);
    a zero's sign or a NaN's payload is a difference of 0 ulp."""
    from embedding_parity.conformance import numerics

    found: dict[str, list] = {}
    for case, mine, theirs in zip(cases, along, eager):
        a, b = mine.array, theirs.array
        if case.params.get("bad") is not None or a is None or b is None:
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            continue
        width = a.dtype.itemsize
        differ = np.ascontiguousarray(a).view(f"V{width}") != np.ascontiguousarray(b).view(
            f"V{width}"
        )
        counts = found.setdefault(case.check, [0, 0, 0.0, a.dtype.name in FLOATS])
        counts[0] += int(differ.sum())
        counts[1] += a.size
        if differ.any() and a.dtype.name in FLOATS:
            with np.errstate(all="ignore"):
                error = numerics.max_error(a, b, nan_matches=True)
                finite = np.where(np.isfinite(b), b.astype(np.float64), 0.0)
                counts[2] = max(counts[2], numerics.ulps_at_scale(error, finite, a.dtype.name))
    return {check: _bits_said(*counts) for check, counts in found.items()}


def _bits_said(differ: int, of: int, ulps: float, floats: bool) -> str:
    """Elements differing, of how many, by how many ulps of the largest value, in floats."""
    if not differ:
        return "same bits"
    if not floats:
        return f"{differ} of {of} integers differ"
    if not ulps:  # a zero's sign or a NaN's payload alone
        return f"{differ} of {of} elements differ in their bits, not in their value"
    return f"{differ} of {of} elements differ, by at most {ulps:.3g} ulp of the largest value"


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
    """One result per check: the first difference or failure, else what every case shares."""
    grouped: dict[str, list[tuple[Case, Verdict]]] = {}
    for case, verdict in verdicts:
        grouped.setdefault(case.check, []).append((case, verdict))
    results = []
    for check, pairs in grouped.items():
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
        more = {"ulps": max(sizes) if sizes else None}
        statuses = {v.status for _, v in pairs}
        if statuses == {"conforms", "rejected"}:  # refused some cases of a dtype, not the dtype
            case, verdict = next((c, v) for c, v in pairs if v.status == "rejected")
            detail = f"{case.label}: raises on a valid input ({verdict.detail})"
            results.append(CheckResult(check, "differs", detail, cases_, phase, **more))
            continue
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
            results.append(CheckResult(check, status, worst.detail + count, cases_, phase, **more))
    return results


class InProcess:
    """The target called in this process, as the worker calls it (the same conversions, the
    same reading of what it returns), its params through JSON as they reach a worker. What
    it gives up: no time limit, and a hang, a crash or a change to the process's state
    (NumPy's error state, JAX's flags, a signal handler) is the caller's."""

    def __init__(self, function, kind: str, framework: str | None, options: dict):
        from embedding_parity.conformance import worker

        self.function, self.worker, self.kind = function, worker, KINDS[kind]
        self.along = {}  # path -> the function as production calls it along that path
        self.framework, self.why = framework, "given"
        if framework is None:  # as the worker tells it: a probe call, else the imports
            module = inspect.getmodule(function) or inspect.getmodule(type(function))
            name = getattr(module, "__name__", "its module")
            module = module or types.ModuleType(name)
            probe = frameworks.probe_case(self.kind, options)
            if probe is None:
                self.framework, self.why = frameworks.detect(module, function, name)
                return
            arguments = self.kind.arguments(json.loads(json.dumps(probe)))
            self.framework, self.why = frameworks.probe(function, arguments, module, name)

    def ask(self, case: Case, elements: int, timeout: float, through=None) -> Outcome:
        from embedding_parity.conformance import paths

        params = json.loads(json.dumps(case.params))
        arguments = self.kind.arguments(params)
        if through and through not in self.along:
            self.along[through] = paths.along(through, self.function)
        function = self.along[through] if through else self.function
        reply = self.worker.call(function, self.framework, arguments, elements, log=False)
        if "refused" in reply:
            return Outcome(refused=shown(reply["refused"]))
        if "raised" in reply:
            return Outcome(raised=shown(reply["raised"]))
        if "returned" in reply:
            return Outcome(returned=shown(reply["returned"]))
        return Outcome(array=reply["array"], changed=reply["changed"])


class Worker:
    """A worker process, its targets loaded one after another; restarted (with the current
    target) after a case that hangs or kills it. Its files, the caches of the libraries it
    imports (Keras writes ~/.keras on import) and its TMPDIR live in one private folder,
    removed when it closes: use it as a context manager.

    The worker is a session (and process group) of its own, the group killed when it closes,
    so that nothing a target starts (a subprocess, a fork) outlives the check (unless it
    makes a group of its own); the worker dies with this process too
    (PR_SET_PDEATHSIG). What it prints is read as bytes into a bounded tail (``Tail``)."""

    def __init__(self, env: dict):
        self.request = None
        self.folder = tempfile.mkdtemp(prefix="embedding-parity-check-")
        os.mkdir(os.path.join(self.folder, "tmp"))
        self.env = {
            **os.environ,
            **scratch.caches(self.folder),
            # the target's temporary files too (Inductor's precompiled headers, 150 MB, go to
            # $TMPDIR/torchinductor_$USER whatever its cache variable says)
            "TMPDIR": os.path.join(self.folder, "tmp"),
            **env,
            "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
        }
        self.process = None
        self.asked = 0  # the id of the last request

    def __enter__(self):
        return self

    def __exit__(self, kind=None, *exc):
        self.close(kill=kind is not None)  # on the way out of an error: no grace period
        shutil.rmtree(self.folder, ignore_errors=True)

    def load(
        self, target: str, kind: str, framework: str | None, options=None, timeout=60.0
    ) -> None:
        """Make ``target`` the one the next cases call (a source of ``adapters.sources`` built
        at ``options``), its framework, where not given, told by calling it on one valid case
        (``frameworks.probe``) under ``timeout``; UsageError if it cannot be had."""
        from embedding_parity.conformance.adapters import sources

        options = options or {}
        self.request = {"target": target, "kind": kind, "framework": framework}
        self.request["options"] = options
        if self.process is None:
            self._start()
        else:
            self._send_request()
        if framework is None and target not in sources.SOURCES:
            probe = frameworks.probe_case(KINDS[kind], options)
            if probe is not None:
                self._probe(probe, timeout)

    def _probe(self, params: dict, timeout: float) -> None:
        """Tell the target's framework from a call on ``params``; where that call hangs or
        kills the worker, its imports tell (the cases then show what it does)."""
        reply, why = self._exchange({"target": self.request["target"], "probe": params}, timeout)
        if reply is None:
            last = self.log.last_line()
            self.close(kill=True)
            self._start()
            self.why = f"{self.why} (the probe call {why}{last})"
        elif "usage" in reply:
            self.close()
            raise UsageError(shown(reply["usage"]))
        else:
            self.framework, self.why = reply["framework"], shown(reply["why"])
        # a worker restarted after a case that hangs or crashes keeps what the probe told
        self.request |= {"framework": self.framework, "why": self.why}

    def _start(self) -> None:
        self.process = subprocess.Popen(
            [
                *scratch.PYTHON,
                "-m",
                "embedding_parity.conformance.worker",
                self.folder,
                str(os.getpid()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            start_new_session=True,
        )
        self.exited = _exit_watch(self.process.pid)
        self.buffer = b""
        self._send_request()

    def _send_request(self) -> None:
        try:
            reply, why = self._exchange(self.request, IMPORT_SECONDS)
        except BaseException:  # Ctrl-C while the target imports: leave no worker behind
            self.close(kill=True)
            raise
        if reply is None:
            last = self.log.last_line()
            self.close(kill=True)
            raise UsageError(
                f"TARGET {self.request['target']!r}: the worker {why} while importing it{last}"
            )
        if "usage" in reply:
            self.close()
            raise UsageError(shown(reply["usage"]))
        self.framework, self.why = reply["framework"], shown(reply["why"])

    def ask(self, case: Case, elements: int, timeout: float, through=None) -> Outcome:
        """What the target did with ``case``, a result of at most ``elements`` elements,
        called along the production path ``through`` (``paths``) where one is given."""
        message = {"case": case.params, "elements": elements}
        reply, why = self._exchange(message | ({"through": through} if through else {}), timeout)
        if reply is None:
            outcome = Outcome(failed=f"the call {why}{self.log.last_line()}")
            self.close(kill=True)
            self._start()
            return outcome
        if "refused" in reply:
            return Outcome(refused=shown(str(reply["refused"])))
        if "raised" in reply:  # a private folder named as such: a report reads the same twice
            return Outcome(raised=shown(PRIVATE.sub("<private folder>", str(reply["raised"]))))
        if "returned" in reply:
            return Outcome(returned=shown(reply["returned"]))
        # the file of this request's id in the kit's folder, whatever the answer names: no
        # answer can make the kit read, or remove, another file
        path = os.path.join(self.folder, f"result{self.asked}.npy")
        try:
            written = os.path.getsize(path)
            if written > LARGEST_ITEM * elements + NPY_HEADER:
                return Outcome(failed=f"the worker wrote {written} bytes for {elements} elements")
            array = np.load(path, allow_pickle=False)
            changed = [dict(c, argument=int(c["argument"])) for c in reply.get("changed", [])]
        except (OSError, ValueError, TypeError, KeyError) as error:  # a forged or cut answer
            return Outcome(failed=shown(f"the worker's answer could not be read ({error})"))
        finally:
            with contextlib.suppress(OSError):
                os.remove(path)
        if reply.get("dtype") == "bfloat16":
            array = array.view(ml_dtypes.bfloat16)
        return Outcome(array=array, changed=changed)

    def _exchange(self, message: dict, timeout: float):
        """(reply, None), or (None, why): the worker died or did not answer in time. Its
        printing is drained meanwhile, so that it never blocks on a full pipe; its last
        line, shown when the worker fails, is from this request."""
        self.asked += 1
        self.log = Tail()
        try:
            self.process.stdin.write((json.dumps({"id": self.asked, **message}) + "\n").encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            return None, f"died ({self._exit()})"
        deadline = time.monotonic() + timeout
        out, err = self.process.stdout.fileno(), self.process.stderr.fileno()
        watched = [out, err, *self.exited]
        while True:
            line, newline, rest = self.buffer.partition(b"\n")
            if newline:
                self.buffer = rest
                with contextlib.suppress(ValueError):  # not JSON: no answer (a target's write)
                    reply = json.loads(line)
                    if isinstance(reply, dict) and reply.get("id") == self.asked:
                        return reply, None
                continue  # else stale: an answer to an earlier request (one that timed out)
            left = deadline - time.monotonic()
            if left <= 0:
                return None, f"timed out after {timeout:g} s"
            ready, _, _ = select.select(watched, [], [], min(left, POLL_SECONDS))
            if err in ready:
                printed = os.read(err, 65536)
                self.log.add(printed)
                if not printed:  # its stderr closed (by the target, say): no more to read
                    watched.remove(err)
            if out in ready:
                chunk = os.read(out, 65536)
                if not chunk:
                    return None, self._died(err)
                self.buffer += chunk
            elif not self._running():
                # dead, though a process it forked may hold its pipes open: what it wrote
                # before dying is read first
                ready, _, _ = select.select([out], [], [], 0)
                if not ready or b"\n" not in (chunk := os.read(out, 65536)):
                    return None, self._died(err)
                self.buffer += chunk

    def _died(self, err: int) -> str:
        """Why the worker is gone, its last words read first: what it printed before dying
        may still sit in the pipe (a pipe's worth, or what a child that holds it adds within
        a second)."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and select.select([err], [], [], 0)[0]:
            printed = os.read(err, 65536)
            if not printed:
                break
            self.log.add(printed)
        return f"died ({self._exit()})"

    def _running(self) -> bool:
        """Whether the worker has not exited (not reaping it where a pidfd tells)."""
        if self.exited:
            return not select.select(self.exited, [], [], 0)[0]
        return self.process.poll() is None

    def _exit(self) -> str:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # its stdout closed, but it lingers
            self._kill_session()
            code = self.process.wait(timeout=10)
        return f"signal {-code}" if code < 0 else f"exit status {code}"

    def _kill_session(self) -> None:
        """SIGKILL the worker and everything in its process group (what the target started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def close(self, kill: bool = False) -> None:
        """Stop the worker (at once with ``kill``, else given 5 s to finish) and everything
        in its group, with SIGINT, SIGTERM and SIGHUP blocked in this thread meanwhile (a
        library's own threads may still take one: then a stop signal ends the cleanup)."""
        if self.process is None:
            return
        held = {signal.SIGINT, *scratch.STOP_SIGNALS}
        blocked = threading.current_thread() is threading.main_thread()
        if blocked:
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            if not kill and self._running():
                with contextlib.suppress(BrokenPipeError, OSError):
                    self.process.stdin.close()  # the worker's cue to finish
                _wait_exited(self.process, self.exited, 5)
            self._kill_session()  # where it can, before the worker is reaped: its group's id stays its own
            self.process.wait(timeout=10)
            for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
                with contextlib.suppress(OSError):
                    pipe.close()
            for fd in self.exited:
                os.close(fd)
            self.process = None
        finally:
            if blocked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def _exit_watch(pid: int) -> list[int]:
    """[a file descriptor readable once ``pid`` has exited] where Linux gives one (a pidfd),
    else []: the waits then poll."""
    try:
        return [os.pidfd_open(pid)]
    except (AttributeError, OSError):
        return []


def _wait_exited(process, watch: list[int], seconds: float) -> None:
    """Wait up to ``seconds`` for ``process`` to exit, without reaping it where a pidfd
    lets (so that its group cannot be another's when it is killed)."""
    if watch:
        select.select(watch, [], [], seconds)
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=seconds)


class Tail:
    """The last LOG_BYTES bytes a worker printed (the rest dropped), decoded
    with replacement: a target can print anything, in any amount."""

    def __init__(self):
        self.data = b""

    def add(self, chunk: bytes) -> None:
        self.data = (self.data + chunk)[-LOG_BYTES:]

    def last_line(self) -> str:
        """ ": LINE", the last line printed, shown safely; "" if none."""
        lines = [line.strip() for line in self.data.decode(errors="replace").splitlines()]
        lines = [line for line in lines if line]
        return f": {shown(lines[-1])}" if lines else ""


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
