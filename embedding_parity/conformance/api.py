"""The kit from Python: ``check`` returns the report, ``assert_conforms`` raises on a difference.

    from embedding_parity.conformance import assert_conforms, check
    report = check(my_rope, "rope", config="path/to/config.json", dtypes=["float32"])
    assert_conforms(my_rope, "rope", expected={"rotation float64": "computes in float32"})

A callable runs in this process: quick, and what a test has in hand (an ``nn.Module``, a
closure over a config, a ``jax.jit``-ed function), but with no time limit and no isolation (a
hang or a crash takes the caller with it). A ``"path/to/file.py:NAME"`` or
``"package.module:NAME"`` string, or a callable with ``isolate=True`` that is importable by its
name, runs in the kit's worker process, each case under ``timeout`` seconds.
"""

from __future__ import annotations

import inspect
import os
import shlex
import warnings

from embedding_parity.cli import UsageError
from embedding_parity.conformance import runner


class UnmatchedExpectation(UserWarning):
    """An expected difference that names no check of the kind: a typo, or a stale entry."""


def check(
    implementation,
    kind: str,
    *,
    config=None,
    dtypes=None,
    framework: str | None = None,
    isolate: bool = False,
    against=None,
    expected: dict | None = None,
    strict: bool = False,
    checks=None,
    timeout: float = 60.0,
    **shape,
) -> runner.Report:
    """The report of ``implementation`` against ``kind``'s contract (``compare.py check``).

    ``config``: a model's config.json or .gguf path, a bundled preset's name, or a
    ``configs.Configuration``: the contract it sets. ``dtypes``: the dtypes tried (default
    all four). ``against``: another implementation, or a source the kit ships ("hf",
    "torchtune"), to hold this one to case by case. ``expected``: {check name or glob: why it
    differs}; ``strict``: such a check that conforms fails the report. ``checks``: only these
    checks, by exact name. ``shape``: the call's shapes (the kinds' options: ``head_dim``,
    ``batched``, ``qk`` for rope, ``table`` for lookup). An entry of ``expected`` that matches
    no check is an ``UnmatchedExpectation`` warning."""
    if kind not in runner.KINDS:
        raise UsageError(f"kind {kind!r} is not one of {', '.join(runner.KINDS)}")
    if isolate and not isinstance(implementation, str):
        implementation = importable(implementation)
        if implementation is None:
            raise UsageError(
                "isolate=True runs the target in a worker process, which imports it by name: "
                "give a function defined at a module's top level, or a 'file.py:NAME' string"
            )
    options = {**configured(config, kind), **{k: v for k, v in shape.items() if v}}
    report = runner.run(
        _absolute(implementation),
        kind,
        framework=framework,
        options=options,
        timeout=timeout,
        checks=checks,
        dtypes=dtypes,
        expected=expected,
        strict=strict,
        against=_absolute(against) if against is not None else None,
    )
    for entry in report.unmatched:
        names = ", ".join(c.check for c in report.checks)
        warnings.warn(
            f"expected difference {entry!r} matches no check of {kind}: {names}",
            UnmatchedExpectation,
            stacklevel=2,
        )
    return report


def assert_conforms(implementation, kind: str, **kwargs) -> runner.Report:
    """``check``, raising AssertionError when the report does not conform: the message names
    each failing check, its first mismatching element (index, both values as numbers and as
    bits, ulps, the sign of a zero, a NaN's payload), the diagnosis, and one line that
    reproduces it."""
    report = check(implementation, kind, **kwargs)
    if not report.conforms:
        raise AssertionError(failure_message(report, implementation, kind, kwargs))
    return report


def failure_message(report: runner.Report, implementation, kind: str, kwargs: dict) -> str:
    failing = [c for c in report.checks if c.status not in runner.ACCEPTED]
    if report.strict:
        failing += [c for c in report.checks if c.status == "fixed"]
    lines = [
        f"{report.target} does not conform to {kind}: {len(failing)} of "
        f"{len(report.checks)} checks fail"
    ]
    for c in failing:
        if c.status == "fixed":
            lines.append(f"  {c.check}: expected to differ ({c.reason}), but conforms (strict)")
            continue
        lines.append(f"  {c.check} ({c.status}): {c.detail}")
        if c.mismatch:
            m = c.mismatch
            ulps = f", {m['ulps']:.3g} ulp" if "ulps" in m else ""
            lines.append(
                f"    first mismatch at {m['index']}: {m['actual']} where {m['expected']} "
                f"is expected{ulps}"
            )
        lines.append(f"    reproduce: {reproduce(implementation, kind, c.check, kwargs)}")
    return "\n".join(lines)


def reproduce(implementation, kind: str, name: str, kwargs: dict) -> str:
    """One line that runs the check again: the command line for a target importable by
    name, else the Python call."""
    target = implementation if isinstance(implementation, str) else importable(implementation)
    config, against = kwargs.get("config"), kwargs.get("against")
    plain = all(
        isinstance(v, (str, int, float, bool, type(None)))
        for k, v in kwargs.items()
        if k not in ("dtypes", "checks", "expected")
    )
    if target is None or not plain or (against is not None and not isinstance(against, str)):
        extra = "".join(
            f", {k}={v!r}" for k, v in kwargs.items() if k not in ("checks", "expected")
        )
        named = getattr(implementation, "__name__", type(implementation).__name__)
        return f"embedding_parity.conformance.check({named}, {kind!r}, checks=[{name!r}]{extra})"
    words = ["python", "-m", "embedding_parity", "check", _absolute(target), "--kind", kind]
    words += ["--only", name]
    if config is not None:
        flag = "--config" if os.path.exists(str(config)) else "--model"
        words += [flag, str(config)]
    if against is not None:
        words += ["--against", _absolute(against)]
    if kwargs.get("framework"):
        words += ["--framework", kwargs["framework"]]
    for key in ("head_dim", "table"):
        if kwargs.get(key):
            value = kwargs[key]
            words += [f"--{key.replace('_', '-')}", ",".join(map(str, value))
                      if isinstance(value, (list, tuple)) else str(value)]
    for key in ("batched", "qk"):
        if kwargs.get(key):
            words.append(f"--{key}")
    return shlex.join(words)


def importable(function) -> str | None:
    """"path/to/file.py:NAME" for a function or class a worker can import by name (defined
    at its module's top level, in a file), else None."""
    name = getattr(function, "__qualname__", "")
    module = inspect.getmodule(function)
    path = getattr(module, "__file__", None)
    if not name or "<" in name or "." in name or path is None:
        return None
    if getattr(module, name, None) is not function:
        return None
    return f"{os.path.abspath(path)}:{name}"


def configured(config, kind: str) -> dict:
    """The options a configuration sets for ``kind``: {} for None."""
    if config is None:
        return {}
    from embedding_parity import configs

    if isinstance(config, configs.Configuration):
        return config.options(kind, "config")
    text = os.fspath(config)
    if os.path.exists(text) or text.endswith((".json", ".gguf")):
        return configs.read(text).options(kind, "config")
    return configs.preset(text).options(kind, "config")


def _absolute(target):
    """A file target made absolute, so that the worker finds it from any folder."""
    if not isinstance(target, str):
        return target
    where, colon, name = target.rpartition(":")
    return f"{os.path.abspath(where)}{colon}{name}" if where.endswith(".py") else target
