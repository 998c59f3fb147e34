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

import inspect
import warnings

from embedding_parity.cli import UsageError
from embedding_parity.conformance import api, runner


def parametrize_with_checks(
    implementations,
    *,
    kind: str,
    expected_failed_checks=None,
    strict: bool | None = None,
    **settings,
):
    """``pytest.mark.parametrize("implementation, check", ...)``: one test per
    implementation and check of ``kind``'s battery. ``expected_failed_checks``: {check name,
    test id or glob: reason}, or a function of the implementation that returns one;
    ``strict``: an expected failure that passes fails the test (default: pytest's
    xfail_strict). ``settings``: what ``check`` takes but ``expected`` and ``strict`` (config,
    dtypes, checks, framework, isolate, against, timeout, base, head_dim, ...). A string
    implementation runs in a fresh worker for each check (its import paid each time)."""
    import pytest

    taken = set(inspect.signature(api.check).parameters) - {"implementation", "kind"}
    unknown = sorted(set(settings) - (taken - {"expected", "strict"}))
    if unknown:
        raise UsageError(
            f"parametrize_with_checks takes no {unknown[0]!r}: it takes {sorted(taken)}"
        )
    call = {k: settings[k] for k in SHAPES if k in settings}
    options = {**api.options_for(kind, **call), **api.configured(settings.get("config"), kind)}
    chosen = runner.select_cases(
        kind, options, checks=settings.get("checks"), dtypes=settings.get("dtypes")
    )
    names = list(dict.fromkeys(c.check for c in chosen))
    battery = list(dict.fromkeys(c.check for c in runner.KINDS[kind].cases(options)))
    settings = {k: v for k, v in settings.items() if k != "checks"}
    params = []
    for ident, implementation in zip(implementation_ids(implementations), implementations):
        expected = expected_failed_checks or {}
        if callable(expected):
            expected = expected(implementation) or {}
        for name in names:
            entry = next((e for e in expected if runner.names(e, name)), None)
            marks = [pytest.mark.conformance(kind=kind, check=name)]
            if entry is not None:
                xfail = {"reason": expected[entry], "raises": AssertionError}
                if strict is not None:
                    xfail["strict"] = strict
                marks.append(pytest.mark.xfail(**xfail))
            test_id = f"{ident}-{runner.check_id(name)}"
            check = Check(kind, name, settings)
            params.append(pytest.param(implementation, check, id=test_id, marks=marks))
        for entry in expected:
            if not any(runner.names(entry, name) for name in battery):
                warnings.warn(
                    f"expected_failed_checks: {entry!r} matches no check of {kind} for {ident}: "
                    f"{', '.join(battery)}",
                    api.UnmatchedExpectation,
                    stacklevel=2,
                )
    return pytest.mark.parametrize("implementation, check", params)


SHAPES = ("base", "padding_idx", "head_dim", "batched", "qk", "table")


class Check:
    """One check of a kind, called on an implementation: ``check(implementation)`` raises
    AssertionError with the first mismatch and a line that reproduces it, and skips where
    the implementation refuses the check's dtype (rejected: not a wrong answer)."""

    def __init__(self, kind: str, name: str, settings: dict):
        self.kind, self.name, self.settings = kind, name, settings

    def __call__(self, implementation) -> runner.Report:
        kwargs = {**self.settings, "checks": [self.name]}
        report = api.check(implementation, self.kind, **kwargs)
        if [c.status for c in report.checks] == ["rejected"]:
            import pytest

            pytest.skip(f"{self.name}: {report.checks[0].detail}")
        if not report.conforms:
            raise AssertionError(api.failure_message(report, implementation, self.kind, kwargs))
        return report

    def __repr__(self) -> str:
        return f"Check({self.kind!r}, {self.name!r})"


def implementation_ids(implementations) -> list[str]:
    """Readable, stable names: a string target's file and name, a callable's qualified
    name, an instance's class; repeated names numbered."""
    names = []
    for implementation in implementations:
        if isinstance(implementation, str):
            where, _, name = implementation.rpartition(":")
            names.append(f"{where.rsplit('/', 1)[-1]}:{name}")
        else:
            names.append(runner.name_of(implementation).rsplit(".", 1)[-1])
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if names.count(name) == 1 else f"{name}{seen[name]}")
    return unique
