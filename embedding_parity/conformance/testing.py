"""The kit in your own pytest suite: one test per (implementation, check), as scikit-learn's
``parametrize_with_checks`` gives one per estimator check.

    from embedding_parity.conformance import parametrize_with_checks

    @parametrize_with_checks([my_rope], kind="rope", config="config.json",
                             expected_failed_checks={"rotation float64": "runs in float32"})
    def test_rope(implementation, check):
        check(implementation)

An expected failure is pytest's xfail with its reason: it passes as "xfailed" while the check
differs, is reported XPASS when it stops differing, and fails the run under ``strict=True``
(or pytest's ``xfail_strict``). An entry that matches no check is a warning. Test ids are the
implementation's name and the check's, stable across runs and pytest-xdist workers.
"""

from __future__ import annotations

import dataclasses
import warnings

from embedding_parity.conformance import api
from embedding_parity.conformance import report as reports
from embedding_parity.conformance.report import Report, check_id, mark_expected
from embedding_parity.conformance.runner import asked_twice, name_of, select_cases


def parametrize_with_checks(
    implementations,
    *,
    kind: str,
    expected_failed_checks=None,
    strict: bool | None = None,
    **settings,
):
    """``pytest.mark.parametrize("implementation, check", ...)``: one test per
    implementation and check of ``kind``'s battery (rope's and lookup's invariances among
    them, as ``check`` asks them). ``expected_failed_checks``: {check name,
    test id or glob: reason}, or a function of the implementation that returns one;
    ``strict``: an expected failure that passes fails the test (default: pytest's
    xfail_strict). ``settings``: what ``check`` takes but ``expected`` and ``strict`` (config,
    dtypes, checks, framework, isolate, against, timeout, base, head_dim, ...). The battery
    runs once per implementation, at its first test (a string target's worker, and an
    ``against`` source's, started once); each test then reads its check."""
    import pytest

    taken = ["expected_failed_checks", *(k for k in api.KEYWORDS if k != "expected")]
    api.refuse_unknown("parametrize_with_checks", settings, taken)
    call = {k: settings[k] for k in SHAPES if k in settings}
    options = api.options_for(kind, **call)
    options |= api.configured(
        settings.get("config"), kind, settings.get("base"), settings.get("layer")
    )
    asked = settings.get("invariances", True) is True  # check() refuses what is not a bool
    also, _ = asked_twice(kind, options, asked, settings.get("through"))
    chosen = select_cases(
        kind, options, checks=settings.get("checks"), dtypes=settings.get("dtypes"), also=also
    )
    names = list(dict.fromkeys(c.check for c in chosen))
    battery = list(dict.fromkeys(c.check for c in select_cases(kind, options, also=also)))
    params = []
    for ident, implementation in zip(implementation_ids(implementations), implementations):
        expected = expected_failed_checks or {}
        if callable(expected):
            expected = expected(implementation) or {}
        mark_expected([], expected)  # a dict of names to reasons, or one line why not
        run = Battery(kind, {**settings, "checks": names})
        for name in names:
            entry = next((e for e in expected if reports.names(e, name)), None)
            marks = [pytest.mark.conformance(kind=kind, check=name)]
            if entry is not None:
                xfail = {"reason": expected[entry], "raises": AssertionError}
                if strict is not None:
                    xfail["strict"] = strict
                marks.append(pytest.mark.xfail(**xfail))
            test_id = f"{ident}-{check_id(name)}"
            params.append(pytest.param(implementation, Check(run, name), id=test_id, marks=marks))
        for entry in expected:
            if not any(reports.names(entry, name) for name in battery):
                warnings.warn(
                    f"expected_failed_checks: {entry!r} matches no check of {kind} for {ident}: "
                    f"{', '.join(battery)}",
                    api.UnmatchedExpectation,
                    stacklevel=2,
                )
    return pytest.mark.parametrize("implementation, check", params)


SHAPES = ("base", "padding_idx", "head_dim", "batched", "qk", "table")


class Battery:
    """The report of one implementation's checks, run once, when a test first asks."""

    def __init__(self, kind: str, settings: dict):
        self.kind, self.settings, self.report = kind, settings, None

    def of(self, implementation) -> Report:
        if self.report is None:
            self.report = api.check(implementation, self.kind, **self.settings)
        return self.report


class Check:
    """One check of a kind, called on an implementation: ``check(implementation)`` raises
    AssertionError with the first mismatch and a line that reproduces it (a difference,
    which an expected failure may name); fails the test outright where the check failed (a
    hang, a crash: never an expected difference), and where the battery answered no valid
    case (its refusals, a bad id's or a dtype's, pass no test: no verdict); skips where the
    implementation refuses the check's dtype or format, its error naming it (rejected: not a
    wrong answer), in a battery that answered a valid case."""

    def __init__(self, battery: Battery, name: str):
        self.battery, self.name = battery, name

    def __call__(self, implementation) -> Report:
        import pytest

        whole = self.battery.of(implementation)
        found = next(c for c in whole.checks if c.check == self.name)
        report = dataclasses.replace(whole, checks=[found], unmatched=[])
        kind, kwargs = self.battery.kind, {**self.battery.settings, "checks": [self.name]}
        if not whole.answered and found.status in ("conforms", "rejected"):
            pytest.fail(f"{self.name}: {found.detail}; {whole.unanswered()}", pytrace=False)
        if found.status == "rejected":
            pytest.skip(f"{self.name}: {found.detail}")
        if found.status == "failed":
            pytest.fail(api.failure_message(report, implementation, kind, kwargs), pytrace=False)
        if not report.accepted:
            raise AssertionError(api.failure_message(report, implementation, kind, kwargs))
        return report

    def __repr__(self) -> str:
        return f"Check({self.battery.kind!r}, {self.name!r})"


def implementation_ids(implementations) -> list[str]:
    """Readable, stable names: a string target's file and name, a callable's qualified
    name, an instance's class; repeated names numbered."""
    names = []
    for implementation in implementations:
        if isinstance(implementation, str):
            where, _, name = implementation.rpartition(":")
            names.append(f"{where.rsplit('/', 1)[-1]}:{name}")
        else:
            names.append(name_of(implementation).rsplit(".", 1)[-1])
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if names.count(name) == 1 else f"{name}{seen[name]}")
    return unique
