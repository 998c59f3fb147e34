"""The worker: imports a target once, then calls it on one case at a time.

    python -m embedding_parity.conformance.worker FOLDER

Reads JSON lines on stdin: {"target", "framework", "kind"}, then one case's params per line;
another target later switches to it, so a matrix's rows can share one process. Answers one JSON line per request on the file descriptor that was stdout; the target's
own printing goes to stderr, so that it cannot garble the answers. Results are written as .npy
files into FOLDER (never pickled; bfloat16 as its uint16 bits).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback

import ml_dtypes
import numpy as np


class Unusable(Exception):
    """TARGET cannot be had: the one-line reason."""


def load(target: str):
    """(module, callable) of "path/to/file.py:NAME" or "package.module:NAME"; Unusable with
    a one-line reason when it cannot be had."""
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise Unusable(
            f"TARGET {target!r} must look like path/to/file.py:NAME or package.module:NAME"
        )
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise Unusable(f"TARGET {target!r}: no such file {where}")
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        spec = importlib.util.spec_from_file_location(os.path.basename(where)[:-3], where)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    if not hasattr(module, name):
        raise Unusable(f"TARGET {target!r}: {module.__name__} has no {name!r}")
    function = getattr(module, name)
    if not callable(function):
        raise Unusable(f"TARGET {target!r}: {name} is {type(function).__name__!r}, not callable")
    return module, function


def _load_answer(request: dict, answer):
    """Load the request's target and answer ready (with the framework) or why not; returns
    (function, framework, kind), or None when the target cannot be had."""
    from embedding_parity.conformance import frameworks
    from embedding_parity.conformance.kinds import KINDS

    try:
        module, function = load(request["target"])
    except Unusable as error:
        answer(usage=str(error))
        return None
    except Exception as error:  # noqa: BLE001 - any failure to import is the user's to read
        first = (str(error).splitlines() or [""])[0]
        target = request["target"]
        answer(usage=f"TARGET {target!r}: importing it raised {type(error).__name__}: {first}")
        return None
    framework, why = request["framework"], "given with --framework"
    if framework is None:
        framework, why = frameworks.detect(module, function)
    answer(ready=True, framework=framework, why=why)
    return function, framework, KINDS[request["kind"]]


def _changed(kept: list, native: list) -> list[dict]:
    """The arguments the call changed in place: [{"argument": index, "elements": count}],
    each compared bit for bit (NaN included) with its copy from before the call."""
    from embedding_parity.conformance import frameworks

    found = []
    for index, (before, given) in enumerate(zip(kept, native)):
        if not isinstance(before, np.ndarray):
            continue
        after = frameworks.to_numpy(given)
        if after.shape != before.shape or after.dtype != before.dtype:  # resized, retyped
            found.append({"argument": index, "elements": int(before.size)})
            continue
        width = before.dtype.itemsize
        old, new = (np.ascontiguousarray(a).view(f"V{width}") for a in (before, after))
        if (old != new).any():
            found.append({"argument": index, "elements": int((old != new).sum())})
    return found


def main(folder: str) -> None:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the target's prints go to the log, not into the answers
    sys.stdout = sys.stderr

    def answer(**reply):
        answers.write(json.dumps(reply) + "\n")

    from embedding_parity.conformance import frameworks

    function = framework = kind = None
    for number, line in enumerate(sys.stdin):
        message = json.loads(line)
        if "target" in message:  # a (new) target: later rows of a matrix reuse this process
            found = _load_answer(message, answer)
            if found is None:
                return
            function, framework, kind = found
            continue
        arguments = kind.arguments(message)
        try:
            with frameworks.precision(framework, arguments):
                native = [frameworks.to_framework(a, framework) for a in arguments]
                kept = [  # as the target receives them (JAX without x64 holds int64 as int32)
                    frameworks.to_numpy(n).copy() if isinstance(a, np.ndarray) else None
                    for a, n in zip(arguments, native)
                ]
                result = frameworks.to_numpy(function(*native))
                changed = _changed(kept, native)
        except Exception as error:  # noqa: BLE001 - the target's exception is the finding
            traceback.print_exc()
            first = (str(error).splitlines() or [""])[0]
            answer(raised=f"{type(error).__name__}: {first}" if first else type(error).__name__)
            continue
        if result.dtype == object:
            what = type(result.flat[0]).__name__ if result.size else "no"
            answer(raised=f"TypeError: returned {what} objects, not an array")
            continue
        path = os.path.join(folder, f"result{number}.npy")
        dtype = result.dtype.name
        np.save(
            path,
            result.view(np.uint16) if result.dtype == ml_dtypes.bfloat16 else result,
            allow_pickle=False,
        )
        answer(path=path, dtype=dtype, changed=changed)


if __name__ == "__main__":
    main(sys.argv[1])
