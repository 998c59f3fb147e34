"""The worker: imports a target once, then calls it on one case at a time.

    python -P -m embedding_parity.conformance.worker FOLDER PARENT_PID

Reads JSON lines on stdin: {"id", "target", "framework", "why", "kind", "options"} (no
framework: its imports tell, until a probe says), then {"id", "target", "probe": a case's
params} where the framework is to be told by calling the target on that case, then one line
per case, {"id", "case": its params, "elements": the most a
result of it may hold, "through": a production path to call it along (``paths``) or none};
another target later switches to it, so a matrix's rows can share
one process. Answers one line per request, its JSON with the request's id, on the file
descriptor that was stdout; the target's own printing goes to stderr, so that it cannot
garble the answers. Results are written as .npy files into FOLDER (never pickled; bfloat16
as its uint16 bits), each answer naming the SHA-256 of its file's bytes.

The target runs in this process and could write on any descriptor it holds, the answers'
included, and into FOLDER: so every answer line is signed, an HMAC of its JSON under a key
the parent sends as stdin's first line, read before any target is imported (never in the
environment or the arguments, which the target can read). The parent believes only a line
signed for the request it asked; a target that reads the worker's memory is beyond what
any channel in its process can stop.

What the target did and what the kit did are kept apart: only an exception from the call
(or from the computation it dispatched, for JAX) is the target's raising; a result the kit
cannot read as an array of numbers is answered as what it is ("returned": "NoneType").
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import importlib.util
import io
import json
import os
import sys
import traceback

import ml_dtypes
import numpy as np

from embedding_parity.conformance import frameworks, paths
from embedding_parity.conformance.adapters import sources  # names only: imports no framework
from embedding_parity.conformance.kinds import KINDS
from embedding_parity.conformance.kinds.base import KIT_ERRORS, UNCOMPOSED
from embedding_parity.sharding import die_with_parent
from embedding_parity.usage import UsageError


class Unusable(Exception):
    """TARGET cannot be had: the one-line reason."""


def load(target: str):
    """(module, its name, callable) of "path/to/file.py:NAME" or "package.module:NAME"; Unusable with
    a one-line reason when it cannot be had. A file is imported under a name of its own, so
    that a numpy.py cannot become the kit's numpy; its folder goes first on the import path,
    as `python FILE` puts it. A module not found otherwise is looked for in the current
    folder, as `python -m` would."""
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise Unusable(
            f"TARGET {target!r} must look like path/to/file.py:NAME or package.module:NAME "
            f"(--against also takes a source the kit ships: {', '.join(sources.SOURCES)})"
        )
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise Unusable(f"TARGET {target!r}: no such file {where}")
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        shown = os.path.basename(where)[:-3]
        spec = importlib.util.spec_from_file_location(f"embedding_parity_target_{shown}", where)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        try:  # installed (the kit's own adapters, a library): the current folder not needed
            module = importlib.import_module(where)
        except ModuleNotFoundError as error:
            if error.name != where.split(".")[0]:
                raise
            sys.path.insert(0, os.getcwd())
            module = importlib.import_module(where)
        shown = where
    if not hasattr(module, name):
        raise Unusable(f"TARGET {target!r}: {where} has no {name!r}")
    function = getattr(module, name)
    if not callable(function):
        raise Unusable(f"TARGET {target!r}: {name} is {type(function).__name__!r}, not callable")
    return module, shown, function


def _loaded(request: dict) -> tuple[dict, tuple | None]:
    """(the answer, (function, framework, kind, module, shown)) of loading the request's
    target: ready, with its framework; or why it cannot be had, and None."""
    if request["target"] in sources.SOURCES:  # a source the kit ships (--against hf)
        try:
            function = sources.make(request["target"], request["kind"], request["options"])
        except Exception as error:
            return {"usage": str(error)}, None
        ready = {"ready": True, "framework": "torch", "why": sources.SOURCES[request["target"]]}
        return ready, (function, "torch", KINDS[request["kind"]], None, request["target"])
    try:
        module, shown, function = load(request["target"])
    except Unusable as error:
        return {"usage": str(error)}, None
    except Exception as error:
        return {"usage": f"TARGET {request['target']!r}: importing it raised {raised(error)}"}, None
    framework, why = request["framework"], request.get("why") or "given with --framework"
    if framework is None:
        framework, why = frameworks.detect(module, function, shown)
    ready = {"ready": True, "framework": framework, "why": why}
    return ready, (function, framework, KINDS[request["kind"]], module, shown)


def _probed(request: dict, function, kind, module, shown: str) -> dict:
    """The answer to a probe request: the framework the target speaks, told by calling it
    on one valid case ({"framework", "why"}), or why it cannot be told ({"usage"})."""
    arguments = kind.arguments(request["probe"])
    try:
        framework, why = frameworks.probe(function, arguments, module, shown)
    except UsageError as error:  # it takes one framework's arrays and returns another's
        return {"usage": f"TARGET {request['target']!r}: {error}"}
    return {"framework": framework, "why": why}


def _changed(kept: list, native: list) -> list[dict]:
    """The arguments the call changed in place: [{"argument": index, "elements": count}],
    each compared bit for bit (NaN included) with its copy from before the call."""
    found = []
    for index, (before, given) in enumerate(zip(kept, native)):
        if not isinstance(before, np.ndarray):
            continue
        try:
            after = frameworks.to_numpy(given)
        except Exception:
            found.append({"argument": index, "elements": int(before.size)})
            continue
        if after.shape != before.shape or after.dtype != before.dtype:  # resized, retyped
            found.append({"argument": index, "elements": int(before.size)})
            continue
        width = before.dtype.itemsize
        old, new = (np.ascontiguousarray(a).view(f"V{width}") for a in (before, after))
        if (old != new).any():
            found.append({"argument": index, "elements": int((old != new).sum())})
    return found


def _numbers(returned):
    """(array, None) for a result that is an array of numbers, else (None, what it is). A
    tuple or list of arrays (q and k rotated in one call) is their stack; of integer arrays of
    different shapes (a position builder's position ids and deltas), their elements in order."""
    if (
        isinstance(returned, (tuple, list))
        and returned
        and all(frameworks.framework_of(r) or frameworks.is_tracer(r) for r in returned)
    ):
        parts = [_numbers(r) for r in returned]
        what = next((w for _, w in parts if w is not None), None)
        if what is not None:
            return None, f"a {type(returned).__name__} holding {what}"
        arrays = [a for a, _ in parts]
        if len({a.shape for a in arrays}) > 1 and all(a.dtype.kind in "iu" for a in arrays):
            return np.concatenate([a.ravel().astype(np.int64) for a in arrays]), None
        if len({(a.shape, a.dtype) for a in arrays}) > 1:
            shapes = ", ".join(f"{a.dtype.name} {a.shape}" for a in arrays)
            return None, f"a {type(returned).__name__} of arrays that differ ({shapes})"
        return np.stack(arrays), None
    if frameworks.is_tracer(returned):
        return None, f"{type(returned).__name__} (a JAX tracer, leaked from a transformation)"
    try:
        with np.errstate(**KIT_ERRORS):
            array = frameworks.to_numpy(returned)
    except Exception:
        return None, type(returned).__name__
    if array.dtype.kind in "biufc" or array.dtype == ml_dtypes.bfloat16:
        return array, None
    if array.dtype == object:
        return None, type(returned).__name__ if not isinstance(returned, np.ndarray) else (
            "an array of Python objects"
        )
    return None, f"an array of {array.dtype} (not numbers)"


def sign(key: bytes, text: bytes) -> str:
    """The signature of an answer's JSON ``text``: its HMAC-SHA256 under the session's key."""
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def main(folder: str, parent: int) -> None:
    die_with_parent(parent)
    key = bytes.fromhex(sys.stdin.readline())  # before any target runs: see the docstring
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the target's prints go to the log, not into the answers
    sys.stdout = sys.stderr
    me = os.getpid()

    def answer(**reply):
        text = json.dumps({"id": request["id"], **reply})
        answers.write(f"{sign(key, text.encode())} {text}\n")

    function = framework = kind = module = shown = None
    along = {}  # path -> the target as production calls it along that path
    for line in sys.stdin:
        request = json.loads(line)
        if "probe" in request:
            reply = _probed(request, function, kind, module, shown)
            if os.getpid() != me:  # the target forked in a probe call: only the worker answers
                os._exit(0)
            framework = reply.get("framework", framework)
            answer(**reply)
            continue
        if "target" in request:  # a (new) target: later rows of a matrix reuse this process
            reply, found = _loaded(request)
            if os.getpid() != me:  # the import forked a copy of the worker: it stops here
                os._exit(0)
            answer(**reply)
            if found is None:
                return
            function, framework, kind, module, shown = found
            along = {}
            continue
        through = request.get("through")
        if through and through not in along:
            along[through] = paths.along(through, function)
        called = along[through] if through else function
        reply = ask(kind, request["case"], called, framework, request["elements"], along=through)
        if os.getpid() != me:  # a fork() in the target returned here: only one may answer
            os._exit(0)
        if "array" in reply:
            reply = _save(reply.pop("array"), request, folder) | reply
        answer(**reply)


def ask(kind, params: dict, function, framework, elements: int, *, log=True, along=None) -> dict:
    """What the target did with the case: one call (``call``), or, for a kind that asks one
    question two ways (``kinds.invariance``), each call of its plan, the answers composed
    and stacked (2, ...): the one call's first. Each answer is composed from the copy taken
    as its call returned (``call``): a target that answers every call in one buffer cannot
    change an earlier answer. A required call that does not answer with an array is the
    case's answer, said as which call it was. ``along``: the production path ``function`` is
    called along, if any (``call``)."""
    plan = getattr(kind, "plan", None)
    if plan is None:
        return call(function, framework, kind.arguments(params), elements, log=log, along=along)
    calls = plan(params)
    results = []
    for index, (arguments, required) in enumerate(calls):
        reply = call(function, framework, arguments, elements, log=log, along=along)
        if "array" in reply and not reply["changed"]:
            results.append(reply["array"])
        elif not required:  # the other dtype's call: only what it leaves behind is judged
            results.append(None)
        else:
            which = f"call {index + 1} of {len(calls)}"
            for said in ("raised", "returned", "refused"):
                if said in reply:
                    return {said: f"{reply[said]} ({which})"}
            return reply  # an input changed in place: the judge names which argument
    try:
        whole, composed = kind.compose(params, results)
    except (ValueError, IndexError) as error:  # shapes that do not compose: the answers
        return {"returned": f"{UNCOMPOSED} ({error})"}
    if whole.shape != composed.shape or whole.dtype != composed.dtype:
        return {
            "returned": f"{UNCOMPOSED}: "
            f"{composed.dtype.name} {composed.shape} from the calls, {whole.dtype.name} "
            f"{whole.shape} from the one call"
        }
    return {"array": np.stack([whole, composed]), "changed": []}


def call(function, framework, arguments, elements: int, *, log=True, along=None) -> dict:
    """What the target did with ``arguments``: {"raised"}, {"returned": what}, {"array",
    "changed"}, or {"refused"}: the production path ``function`` is called ``along`` could not
    make it (a PathFailed raised where no path was asked for is the target's). The array is a copy
    taken as the call returned, never a view of the target's memory, which its next call may
    write again (a kernel's workspace, a port writing with out=); a result of more than
    ``elements`` elements is only described, never copied (a broadcast view of a few bytes can
    stand for gigabytes). The worker's and ``process.InProcess``'s (``log``: print a raising
    target's traceback, into the worker's log)."""
    reply = _call(function, framework, arguments, log, along)
    if "array" not in reply:
        return reply
    array = reply["array"]
    if array.size > elements:
        return {
            "returned": f"an array of shape {array.shape} ({array.size} elements, "
            f"where a result of this case has at most {elements})"
        }
    return reply | {"array": array.copy()}


def _call(function, framework, arguments, log: bool, along) -> dict:
    """The call's outcome: {"raised"}, {"returned": what} or {"array", "changed"}. Only the
    call (and the computation it dispatched) is the target's: an exception of the kit's own
    work around it is never taken for the target raising."""
    with frameworks.precision(framework, arguments):
        with np.errstate(**KIT_ERRORS):
            native = [frameworks.to_framework(a, framework) for a in arguments]
            kept = [  # as the target receives them (JAX without x64 holds int64 as int32)
                frameworks.to_numpy(n).copy() if isinstance(a, np.ndarray) else None
                for a, n in zip(arguments, native)
            ]
        try:
            returned = frameworks.settle(function(*native))
        except Exception as error:
            if along and isinstance(error, paths.PathFailed):  # the path's machinery failed
                return {"refused": str(error)}
            if log:
                traceback.print_exc()
            return {"raised": raised(error)}
        with np.errstate(**KIT_ERRORS):
            changed = _changed(kept, native)
    array, what = _numbers(returned)
    if array is None:
        return {"returned": what}
    return {"array": array, "changed": changed}


def raised(error: BaseException) -> str:
    """What a target raised, in one line: its type and its message's first line; its type
    alone, said as such, where its message cannot be read (a ``__str__`` that raises is the
    target's code too)."""
    name = type(error).__name__
    try:
        first = (str(error).splitlines() or [""])[0]
    except Exception:
        return f"{name} (its message could not be read: str() of it raised)"
    return f"{name}: {first}" if first else name


def _save(result: np.ndarray, request: dict, folder: str) -> dict:
    """Write the result for the parent (never pickled; bfloat16 as its uint16 bits), and
    answer the SHA-256 of the bytes written: the parent reads them from a folder the target
    can write too."""
    written = io.BytesIO()
    with np.errstate(**KIT_ERRORS):
        bits = result.view(np.uint16) if result.dtype == ml_dtypes.bfloat16 else result
        np.save(written, bits, allow_pickle=False)
    data = written.getvalue()
    with open(os.path.join(folder, f"result{request['id']}.npy"), "wb") as file:
        file.write(data)
    return {"sha256": hashlib.sha256(data).hexdigest(), "dtype": result.dtype.name}


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
