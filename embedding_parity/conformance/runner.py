"""Run a kind's battery on a target and judge every result: the report of one target.

The cases are chosen (``select_cases``), each asked of the target in a worker or in this
process (``process``), eagerly and along a production path (``paths``) where one is given,
judged against the contract (``report``) and, where another target is given, held to it
case by case (``against``). A kind with invariances (rope, lookup: ``kinds.invariance``) has
them asked too where the caller asks (``asked_twice``): the front doors do by default."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict

import numpy as np

from embedding_parity.conformance import against as held
from embedding_parity.conformance import frameworks, numerics, paths
from embedding_parity.conformance.kinds import KINDS, Case, Outcome
from embedding_parity.conformance.numerics import FLOATS
from embedding_parity.conformance.process import InProcess, Worker
from embedding_parity.conformance.report import (
    CheckResult,
    Report,
    check_results,
    judged,
    mark_expected,
)
from embedding_parity.usage import UsageError


# The kinds asked two ways (kinds/invariance.py), by the kind whose question they ask
ASKED_TWICE = {
    name.removesuffix("_invariance"): name for name in KINDS if name.endswith("_invariance")
}


def asked_twice(
    kind: str, options: dict, asked: bool = True, through: str | None = None
) -> tuple[str | None, str | None]:
    """(the kind that asks ``kind``'s questions two ways, where it is asked; why it is not,
    where ``kind`` has one). Not ``asked``; not along a production path (each of their calls'
    shapes one more program to make: asked along it on their own, ``--kind rope_invariance
    --through PATH``); not where the options set a call they are not built for (their kind's
    refusal, in one line)."""
    twice = ASKED_TWICE.get(kind)
    if twice is None:
        return None, None
    if not asked:
        return None, "turned off"
    if through is not None:
        return None, f"ask them along {through} with --kind {twice} --through {through}"
    try:
        KINDS[twice].cases(options)
    except UsageError as refused:
        return None, str(refused)
    return twice, None


def select_cases(
    kind: str,
    options: dict | None = None,
    *,
    only: str | tuple[str, ...] | None = None,
    checks=None,
    dtypes=None,
    also: str | None = None,
) -> list[Case]:
    """The cases of ``kind``'s battery to run: those of the checks named exactly in
    ``checks``, or starting with ``only`` (the check of that name, where one has it); of the ``dtypes`` given (every case that names a
    dtype, but a bad id's, which is about the ids); UsageError where nothing is left.
    ``also``: a kind whose battery joins ``kind``'s, its invariances (``asked_twice``)."""
    every = KINDS[kind].cases(options or {})
    if also is not None:
        every += KINDS[also].cases(options or {})
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
    against_worker: Worker | None = None,
    through: str | None = None,
    worker: Worker | None = None,
    invariances: bool = False,
) -> Report:
    """The report of ``target`` against ``kind``'s battery.

    ``target``: "path/to/file.py:NAME" or "package.module:NAME", run in a worker process
    (``worker``: one to reuse, with its env, not ``env``), or a callable, run in this process
    (``InProcess``: no time limit, no isolation). ``only``: the checks whose name starts with
    it (or with one of them); ``checks``: those named exactly; ``dtypes``: the dtypes tried;
    ``expected``: {check name or glob: why it differs}; ``strict``: an expected difference
    that conforms fails the report; ``against``: another target (or a source of
    ``adapters.sources``) to hold this one to, case by case (``against_framework``: what it
    takes; ``against_worker``: the worker it runs in, else one of ``env``'s); ``through``: a
    production path (``paths.PATHS``) to run it along, each case run eagerly too, so that
    what the path changes is named as the path's; ``invariances``: the
    kind's invariances asked too, where ``asked_twice`` says they can be, their checks part
    of the battery and of the verdict (else the report says why not). UsageError when a
    target cannot be imported or called, or cannot go along the path."""
    began = time.monotonic()
    options = options or {}
    chosen = KINDS[kind]
    also, not_asked = asked_twice(kind, options, invariances, through)
    selected = select_cases(kind, options, only=only, checks=checks, dtypes=dtypes, also=also)
    # an invariance's case names the invariance it asks (kinds/invariance.py)
    twice = [c for c in selected if also and "invariance" in c.params]
    cases = [c for c in selected if not (also and "invariance" in c.params)]
    if through is not None:
        _check_path(through, against)
        cases = at_every_shape(cases)
    caller = None
    outcomes, answers = [], []
    with contextlib.ExitStack() as stack:
        if cases:
            caller = _caller(stack, target, kind, options, framework, env, worker, timeout)
            if through is not None:
                _check_path_framework(through, caller, name_of(target))
            outcomes = _outcomes(chosen, cases, caller, timeout)
        if through is not None:
            eager = outcomes
            along = _outcomes(chosen, cases, caller, timeout, through)
            outcomes = _runnable(chosen, options, cases, along, caller, timeout, through)
        # the framework and how it was told, before a worker's reload says "given"
        told = (caller.framework, caller.why) if caller else None
        if against is not None and cases:
            try:
                other = _caller(
                    stack, against, kind, options, against_framework, env, against_worker, timeout
                )
            except UsageError as error:
                raise UsageError(f"--against: {error}") from None
            theirs = _outcomes(chosen, cases, other, timeout)
        if twice:  # the same worker, the target loaded again as the invariance kind's
            known = caller.framework if caller else framework
            again = caller if isinstance(caller, Worker) else worker
            asker = _caller(stack, target, also, options, known, env, again, timeout)
            answers = _outcomes(KINDS[also], twice, asker, timeout)
            told = told or (asker.framework, asker.why)
    verdicts = [judged(chosen, case, outcome) for case, outcome in zip(cases, outcomes)]
    judged_twice = [(c, judged(KINDS[also], c, o)) for c, o in zip(twice, answers)]
    # judged as one battery: a dtype refused in one part and answered in the other differs
    results = check_results(list(zip(cases, verdicts)) + judged_twice)
    asked = list(dict.fromkeys(c.check for c in twice))
    report = Report(
        name_of(target),
        kind,
        *told,
        [c for c in results if c.check not in asked],
        0.0,
        chosen.describe(options),
        strict,
    )
    if through is not None:
        eager_checks = check_results([(c, judged(chosen, c, o)) for c, o in zip(cases, eager)])
        report.through = _along(through, report.checks, eager_checks)
        report.through["bits"] = _bits(cases, outcomes, eager)
    if against is not None and cases:
        held.hold(report, chosen, cases, outcomes, verdicts, theirs, other, name_of(against))
    report.checks += [c for c in results if c.check in asked]
    report.invariances = _invariances(kind, also, asked, not_asked)
    if expected:
        battery = [c.check for c in select_cases(kind, options, also=also)]
        report.unmatched = mark_expected(report.checks, expected, battery)
    report.seconds = time.monotonic() - began
    return report


def _invariances(kind: str, also, asked: list[str], not_asked) -> dict | None:
    """Report.invariances: which of the kind's invariances were asked, or why none was."""
    if asked:
        return {"kind": also, "asked": asked}
    if also is not None:  # asked for, and every one filtered out
        not_asked = "the checks chosen leave them out"
    return {"kind": ASKED_TWICE[kind], "not_asked": not_asked} if not_asked else None


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
    if through not in paths.PATHS:
        raise UsageError(f"--through {through!r}: the paths are {', '.join(paths.PATHS)}")
    if against is not None:
        raise UsageError("--through and --against: one at a time (the path is held to eager)")
    why = paths.missing(through)
    if why:
        raise UsageError(why)


def _check_path_framework(through: str, caller, name: str) -> None:
    wanted = paths.PATHS[through].framework
    if caller.framework != wanted:
        raise UsageError(
            f"--through {through} runs a {wanted} target; {name} takes {caller.framework} "
            f"({caller.why}); give --framework {wanted} if that is wrong"
        )


def _along(through: str, checks: list[CheckResult], eager: list[CheckResult]) -> dict:
    """Report.through: the path, its versions, eager's verdicts and the checks whose verdict
    the path changed ("changed"), each of which says what eager did beside what the path did."""
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
