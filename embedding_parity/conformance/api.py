"""The kit from Python: ``check`` returns the report, ``assert_conforms`` raises on a difference.

    from embedding_parity.conformance import assert_conforms, check
    report = check(my_rope, "rope", config="path/to/config.json", dtypes=["float32"])
    report = check(my_rope, "rope", config="llama-3.1-8b")  # a bundled preset: config= too
    assert_conforms(my_rope, "rope", expected={"rotation float64": "computes in float32"})

A callable runs in this process: quick, and what a test has in hand (an ``nn.Module``, a
closure over a config, a ``jax.jit``-ed function), but with no time limit and no isolation (a
hang or a crash takes the caller with it). A ``"path/to/file.py:NAME"`` or
``"package.module:NAME"`` string, or a callable with ``isolate=True`` that is importable by its
name, runs in the kit's worker process, each case under ``timeout`` seconds.
"""

from __future__ import annotations

import difflib
import inspect
import math
import os
import shlex
import warnings

from embedding_parity import configs
from embedding_parity.conformance import runner
from embedding_parity.conformance.frameworks import FRAMEWORKS
from embedding_parity.conformance.kinds import KINDS, VOCAB
from embedding_parity.conformance.report import ACCEPTED, Report
from embedding_parity.usage import UsageError

DEFAULT_BASE = 10000.0
# The command line's flags that Python spells otherwise (check's keyword for each): a keyword
# guessed from the command line is answered with the one to write.
SPELLED_OTHERWISE = {"model": "config", "layer_type": "layer", "only": "checks"}


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
    against_framework: str | None = None,
    expected: dict | None = None,
    strict: bool = False,
    checks=None,
    timeout: float = 60.0,
    base: float | None = None,
    padding_idx: int | None = None,
    head_dim: int | None = None,
    batched: bool = False,
    qk: bool = False,
    table: tuple[int, int, int] | None = None,
    through: str | None = None,
    layer: int | str | None = None,
    invariances: bool = True,
    **unknown,
) -> Report:
    """The report of ``implementation`` against ``kind``'s contract (``compare.py check``).

    ``config``: a model's config.json or .gguf path, a bundled preset's name
    (``config="llama-3.1-8b"``), or a ``configs.Configuration``: the contract it sets (the
    command line's ``--config`` and ``--model`` both). ``dtypes``: the dtypes tried (default
    all four; a bad id is always tried; none, ``[]``, is refused). ``framework``: what it takes and returns (default:
    told by a probe call). ``against``: another implementation, or a source the kit ships
    ("hf", "torchtune"), to hold this one to case by case (``against_framework``: its
    framework). ``expected``: {check name, test id or glob: why it differs}; ``strict``: such
    a check that conforms fails the report. ``checks``: only these checks, by exact name (``[]`` is refused).
    ``timeout``: seconds per case in the worker. The call: ``base`` (rope, sinusoidal),
    ``padding_idx`` (gradient), ``head_dim``, ``batched``, ``qk`` (rope), ``table`` (lookup:
    vocab_size, dim, max_seq_len). ``through``: a production path to run it along
    ("torch.compile", "torch.export", "onnx", "jax.jit", "jax.export"), each case run
    eagerly too so that what the path changes is named as the path's. ``layer``: with a config
    whose layers rotate differently, a layer's index or a layer type's name: that type alone,
    the implementation called f(x, positions) (default: every type, f(x, positions, layer)).
    ``invariances``: rope, lookup, pos2d_resize and rope2d are asked two ways too
    (``rope_invariance``, ``lookup_invariance``: a batch and its rows, chunks and one call, ...;
    ``pos2d_resize_invariance``, ``rope2d_invariance``), their checks part
    of the verdict, where the call is one they are built for (not along a path, not every
    layer type at once); ``False`` runs the contract alone, and the report's last line says
    they were not asked. A callable along a
    torch path in this process leaves what torch leaves: $TMPDIR/torchinductor_$USER (empty
    after an export, Inductor's cache and headers after a compilation); a string target's
    stay in the worker's private folder. The caller's NumPy error state and environment are
    given back as they were; the target's own call runs under the caller's error state. An entry of ``expected`` that names no check of the
    battery is an ``UnmatchedExpectation`` warning; bad arguments are a UsageError (a
    ValueError) in one line, a keyword it does not take too (``model=`` names ``config=``)."""
    refuse_unknown("check()", unknown, KEYWORDS)
    call = {"base": base, "padding_idx": padding_idx, "head_dim": head_dim}
    call |= {"batched": batched, "qk": qk, "table": table}
    options = {**options_for(kind, **call), **configured(config, kind, base, layer)}
    for name, value in (("framework", framework), ("against_framework", against_framework)):
        if value is not None and value not in FRAMEWORKS:
            raise UsageError(f"{name}={value!r}: choose from {', '.join(FRAMEWORKS)}")
    if not (isinstance(timeout, (int, float)) and 0 < timeout <= 86400):
        raise UsageError(f"timeout={timeout!r}: seconds per case, more than 0, at most a day")
    if not isinstance(invariances, bool):
        raise UsageError(f"invariances={invariances!r}: True (the default) or False")
    if not invariances and kind not in runner.ASKED_TWICE:
        raise UsageError(
            f"invariances=False goes with kind {' or '.join(runner.ASKED_TWICE)} (asked two "
            f"ways by default), not {kind}"
        )
    if isolate:
        implementation, against = isolated(implementation), isolated(against)
    report = runner.run(
        absolute(implementation),
        kind,
        framework=framework,
        options=options,
        timeout=timeout,
        checks=checks,
        dtypes=dtypes,
        expected=expected,
        strict=strict,
        against=absolute(against),
        against_framework=against_framework,
        through=through,
        invariances=invariances,
    )
    for entry in report.unmatched:
        warnings.warn(
            f"expected difference {entry!r} matches no check of {kind}: "
            f"{', '.join(dict.fromkeys(c.check for c in KINDS[kind].cases(options)))}",
            UnmatchedExpectation,
            stacklevel=2,
        )
    return report


KEYWORDS = tuple(
    p.name for p in inspect.signature(check).parameters.values() if p.kind is p.KEYWORD_ONLY
)


def refuse_unknown(caller: str, given: dict, taken) -> None:
    """A UsageError for the first keyword of ``given`` that ``caller`` does not take, naming
    the one to write: the command line's flag as Python spells it, else the nearest, else all."""
    unknown = sorted(set(given) - set(taken))
    if not unknown:
        return
    name = unknown[0]
    if name in SPELLED_OTHERWISE:
        right = SPELLED_OTHERWISE[name]
        hint = (
            f"the command line's --{name.replace('_', '-')} is {right}= in Python "
            f"({right}={given[name]!r})"
        )
    elif close := difflib.get_close_matches(name, taken, n=1):
        hint = f"did you mean {close[0]}=?"
    else:
        hint = f"it takes {', '.join(taken)}"
    raise UsageError(f"{caller} takes no {name}=: {hint}")


def options_for(
    kind: str,
    *,
    base=None,
    padding_idx=None,
    head_dim=None,
    batched=False,
    qk=False,
    table=None,
    spell=lambda name: f"{name}=",
    spell_kind=lambda kinds: f"kind {kinds}",
) -> dict:
    """The kind's options for the call's settings, each refused (UsageError, one line) with a
    kind it does not fit; ``spell`` names a setting as the caller wrote it (``--head-dim``)."""
    if kind not in KINDS:
        raise UsageError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    rope, lookup = ("rope", "rope_invariance"), ("lookup", "lookup_invariance")
    fits = {"base": (*rope, "sinusoidal"), "padding_idx": ("gradient",), "table": lookup}
    fits |= {"head_dim": rope, "batched": rope, "qk": rope}
    given = {"base": base, "padding_idx": padding_idx, "head_dim": head_dim}
    given |= {"batched": batched or None, "qk": qk or None, "table": table}
    for name, value in given.items():
        if value is not None and kind not in fits[name]:
            kinds = " or ".join(fits[name])
            raise UsageError(f"{spell(name)} goes with {spell_kind(kinds)}, not {kind}")
    if base is not None and not (isinstance(base, (int, float)) and 1 < base < math.inf):
        raise UsageError(
            f"{spell('base')} {base!r}: must be finite and above 1 (the frequencies "
            "base**(-2i/dim) fall from 1 only above 1)"
        )
    if padding_idx is not None and not (isinstance(padding_idx, int) and 0 <= padding_idx < VOCAB):
        raise UsageError(
            f"{spell('padding_idx')} {padding_idx!r} is past the battery's {VOCAB}-row table: "
            f"use 0 to {VOCAB - 1}"
        )
    options = {"base": DEFAULT_BASE if base is None else float(base), "padding_idx": padding_idx}
    return options | {k: v for k, v in given.items() if k not in options and v is not None}


def assert_conforms(implementation, kind: str, **kwargs) -> Report:
    """``check``, raising AssertionError when the report does not conform: the message names
    each failing check, its first mismatching element (index, both values as numbers and as
    bits, ulps, the sign of a zero, a NaN's payload), the diagnosis, and one line that
    reproduces it."""
    report = check(implementation, kind, **kwargs)
    if not report.conforms:
        raise AssertionError(failure_message(report, implementation, kind, kwargs))
    return report


def failure_message(report: Report, implementation, kind: str, kwargs: dict) -> str:
    failing = [c for c in report.checks if c.status not in ACCEPTED]
    if report.strict:
        failing += [c for c in report.checks if c.status == "fixed"]
    if not failing:  # no valid case answered: refusals alone
        refused = "; ".join(f"{c.check}: {c.detail}" for c in report.checks)
        return f"{report.target} does not conform to {kind}: {report.unanswered()} ({refused})"
    lines = [
        (
            f"{report.target} does not conform to {kind}: {len(failing)} of "
            f"{len(report.checks)} checks fail"
        )
    ]
    for c in failing:
        if c.status == "fixed":
            lines.append(f"  {c.check}: expected to differ ({c.reason}), but conforms (strict)")
            continue
        lines.append(f"  {c.check} ({c.status}): {c.detail}")
        if c.mismatch:
            m = c.mismatch
            ulps = f", {m['ulps']:.3g} ulp" if "ulps" in m else ""
            if "scale" in m:  # about 0 (numerics.about_zero): no count of ulps means anything
                ulps = f" (about 0: the expected values reach {m['scale']:.3g})"
            lines.append(
                f"    {m.get('which', 'first')} mismatch at {m['index']}: {m['actual']} where "
                f"{m['expected']} "
                f"is expected{ulps}"
            )
        lines.append(f"    reproduce: {reproduce(implementation, kind, c.check, kwargs)}")
    return "\n".join(lines)


def reproduce(implementation, kind: str, name: str, kwargs: dict) -> str:
    """One line that runs the check again: the command line for targets importable by name,
    else the Python call."""
    target, against = (
        t if t is None or isinstance(t, str) else importable(t)
        for t in (implementation, kwargs.get("against"))
    )
    config = kwargs.get("config")
    if (
        target is None
        or (against is None and kwargs.get("against") is not None)
        or isinstance(config, configs.Configuration)
    ):
        extra = "".join(
            f", {key}={_shown(value)}"
            for key, value in kwargs.items()
            if key not in ("checks", "expected", "strict")
        )
        return f"check({_shown(implementation)}, {kind!r}, checks=[{name!r}]{extra})"
    words = ["python", "-m", "embedding_parity", "check", absolute(target), "--kind", kind]
    words += ["--only", name]
    if config is not None:
        words += ["--config" if os.path.exists(str(config)) else "--model", str(config)]
    if against is not None:
        words += ["--against", absolute(against)]
    keys = ("framework", "against_framework", "through", "base", "padding_idx", "head_dim")
    for key in (*keys, "timeout"):
        if kwargs.get(key) is not None:
            words += [f"--{key.replace('_', '-')}", str(kwargs[key])]
    if kwargs.get("table") is not None:
        words += ["--table", ",".join(str(n) for n in kwargs["table"])]
    layer = kwargs.get("layer")
    if layer is not None:
        words += ["--layer-type" if isinstance(layer, str) else "--layer", str(layer)]
    words += [f"--{key}" for key in ("batched", "qk") if kwargs.get(key)]
    words += ["--no-invariances"] if kwargs.get("invariances") is False else []
    return shlex.join(words)


def _shown(value) -> str:
    """A value of the call as it would be written: a callable by its name."""
    if callable(value):
        return getattr(value, "__name__", type(value).__name__)
    return repr(value)


def isolated(implementation):
    """A callable as the "path/to/file.py:NAME" a worker imports; a string as it is."""
    if implementation is None or isinstance(implementation, str):
        return implementation
    found = importable(implementation)
    if found is None:
        raise UsageError(
            "isolate=True runs the target in a worker process, which imports it by name: "
            "give a function defined at the top level of an imported module (not a script's "
            "__main__, whose import would run the script again), or a 'file.py:NAME' string"
        )
    return found


def importable(function) -> str | None:
    """ "path/to/file.py:NAME" for a function or class a worker can import by name (defined
    at the top level of a module in a file, not ``__main__``), else None."""
    name = getattr(function, "__qualname__", "")
    module = inspect.getmodule(function)
    path = getattr(module, "__file__", None)
    if not name or "<" in name or "." in name or path is None or module.__name__ == "__main__":
        return None
    if getattr(module, name, None) is not function:
        return None
    return f"{os.path.abspath(path)}:{name}"


def configured(config, kind: str, base=None, layer=None) -> dict:
    """The options a configuration sets for ``kind`` (``layer``: one layer type's): {} for
    None."""
    if config is None:
        if layer is not None:
            raise UsageError("layer goes with a config whose layers rotate differently")
        return {}
    if base is not None:
        raise UsageError("base comes from the config (rope_theta): leave it out with a config")
    if isinstance(config, configs.Configuration):
        return config.options(kind, "config", layer)
    if not isinstance(config, (str, os.PathLike)):
        raise UsageError(
            f"config={config!r}: a config.json or .gguf path, a preset's name, or a Configuration"
        )
    text = os.fspath(config)
    if os.path.exists(text) or text.endswith((".json", ".gguf")):
        return configs.read(text).options(kind, "config", layer)
    return configs.preset(text).options(kind, "config", layer)


def absolute(target):
    """A file target made absolute, so that the worker finds it from any folder."""
    if not isinstance(target, str):
        return target
    where, colon, name = target.rpartition(":")
    return f"{os.path.abspath(where)}{colon}{name}" if where.endswith(".py") else target
