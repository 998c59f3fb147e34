"""The battery as data: a kind's cases written out as .npy files and one JSON manifest, for a
runner in any language to call its implementation on, and the judge of the results it writes.

    export(folder, kind, options, cases)  # compare.py check --export-cases DIR --kind K
    judge(folder) -> reports.Report        # compare.py check --results DIR

The manifest, ``cases.json``, holds each case's arguments (arrays as .npy files, Python values
inline), its float64 reference, the expected result rounded once to the case's dtype, and what
the result must be: bit-identical to it, equal to it (integers), within a tolerance, or an
exception. bfloat16, which no .npy reader outside NumPy knows, travels as its uint16 bits, both
ways. The runner writes ``results/ID.npy`` (the result) or ``results/ID.raised`` (the
exception's message) for each case, as the manifest's own "results" and "rules" say.

The judge takes no number from the folder but the results: it rebuilds every case from the
manifest's kind and options, refuses a battery whose fingerprint is not the kit's (the kit
changed, or the folder was edited), names each check of the whole battery the folder leaves
out (the fingerprint is a plain checksum, which anyone who cuts the manifest can recompute: no
signature), a part of the battery never conforming, and judges each result with the code of a direct run
(``reports.judged``, ``reports.check_results``), so the verdicts are the same. A result file is
checked before it is read: a regular file, no larger than the case's result can be, its header
read first, never unpickled; one that fails is that case's failure, not the run's.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time

import ml_dtypes
import numpy as np

from embedding_parity import outputs
from embedding_parity.conformance import report as reports
from embedding_parity.conformance.kinds import KINDS, Case, Kind, Outcome
from embedding_parity.conformance.process import LARGEST_ITEM, NPY_HEADER
from embedding_parity.conformance.runner import select_cases
from embedding_parity.usage import UsageError

SCHEMA_VERSION = 1  # of cases.json
MANIFEST, RESULTS = "cases.json", "results"
MANIFEST_BYTES = 1 << 22  # 4 MiB; the largest battery's manifest (alibi's 128 cases) is 68 KB
RAISED_BYTES = 4096  # of an exception's message: its first line is all a report shows
BITS = "uint16 bits"  # how a bfloat16 array is stored

RULES = {
    "must": "bit-identical: the result's bits equal expected's (same dtype and shape); equal: "
    "the same integers, in any integer dtype; within tolerance: |result - reference| <= "
    "tolerance element by element, in float64 (a NaN only where the reference has one); "
    "raise: the call must raise (a bad id: any returned value is a silent wrong answer)",
    "result_dtype": "the dtype the result must have; 'any float': judged in the float dtype "
    "it has (expected and tolerance are given at float32); 'any integer': any integer dtype",
    "raising": "a valid case that raises differs, but where its message names the case's "
    "dtype, other than float32 (or, in quantized_lookup, its format): then it is reported as "
    "rejected (not supported); a report with no valid case answered is NO VERDICT",
    "bfloat16": f'arrays whose dtype is bfloat16 are stored as their {BITS} ("stored")',
}


def export(folder: str, kind: str, options: dict, cases: list[Case]) -> str:
    """Write ``cases`` of ``kind``'s battery at ``options`` (``runner.select_cases``) into
    the new folder ``folder``, whole or not at all: cases.json, each array as a .npy file, and
    an empty results/ for the runner. Returns the folder's path; UsageError if it exists."""
    chosen = KINDS[kind]
    if hasattr(chosen, "plan"):
        raise UsageError(
            f"{kind} asks the target one question in several calls and holds the answers to "
            "each other; an exported battery is one call per case: run it with compare.py check"
        )
    path = os.path.abspath(folder)
    if os.path.lexists(path):
        raise UsageError(f"{folder} exists: the battery is exported into a new folder")
    if not os.path.isdir(os.path.dirname(path)):
        raise UsageError(f"{os.path.dirname(path)} is no folder to export the battery into")
    options = json.loads(_canonical(options))  # as the judge will read them back
    with outputs.new_folder(path) as into:
        records = [_record(chosen, _id(number), case, into) for number, case in enumerate(cases)]
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "kind": kind,
            "contract": chosen.describe(options),
            "options": options,
            "fingerprint": _fingerprint(kind, options, cases),
            "results": {
                "folder": RESULTS,
                "array": f"{RESULTS}/ID.npy: the result as a .npy array (format 1.0 or 2.0, as "
                f"np.save writes it; numbers only), in its own dtype, bfloat16 as its {BITS}",
                "raised": f"{RESULTS}/ID.raised: the exception's message, UTF-8, one line "
                f"('TypeError: ...'; the first {RAISED_BYTES} bytes are read)",
                "missing": "a case with neither file fails",
                **({"form": form} if (form := chosen.result_form(options)) else {}),
            },
            "rules": RULES,
            "cases": records,
        }
        with open(os.path.join(into, MANIFEST), "w", encoding="utf-8") as out:
            json.dump(manifest, out, indent=1, allow_nan=False)
            out.write("\n")
        os.mkdir(os.path.join(into, RESULTS))
    return path


def judge(folder: str, expected: dict | None = None, strict: bool = False) -> reports.Report:
    """The report of the results a runner wrote into ``folder`` (exported by ``export``): the
    verdicts of a direct run of the same battery, ``expected`` and ``strict`` as there.
    UsageError, one line, for a manifest that is missing, unreadable, malformed, or not the
    kit's battery any more."""
    began = time.monotonic()
    manifest = _manifest(os.path.join(folder, MANIFEST))
    kind, options = manifest["kind"], manifest["options"]
    chosen = KINDS[kind]
    battery, cases = _rebuilt(os.path.join(folder, MANIFEST), manifest)
    outcomes = [
        _outcome(chosen, case, os.path.join(folder, RESULTS), _id(number))
        for number, case in enumerate(cases)
    ]
    verdicts = [reports.judged(chosen, case, outcome) for case, outcome in zip(cases, outcomes)]
    report = reports.Report(
        folder,
        kind,
        "files",
        "results read from files",
        reports.check_results(list(zip(cases, verdicts))),
        0.0,
        chosen.describe(options),
        strict,
    )
    report.left_out = _left_out(battery, cases)
    if expected:  # stale only against the whole battery, not the cases exported
        names = [c.check for c in battery]
        report.unmatched = reports.mark_expected(report.checks, expected, names)
    report.seconds = time.monotonic() - began
    return report


# --- export ------------------------------------------------------------------------------


def _id(number: int) -> str:
    return f"case-{number:03d}"


def _record(chosen: Kind, name: str, case: Case, into: str) -> dict:
    """One case's entry of the manifest, its arrays written into ``into``."""
    params = case.params
    names = chosen.argument_names(params)
    arguments = []
    for i, value in enumerate(chosen.arguments(params)):
        entry = {"name": names[i] if i < len(names) else f"argument {i}"}
        if isinstance(value, np.ndarray):
            entry |= _saved(into, f"{name}.arg{i}.npy", value)
        else:  # a Python value: start, bidirectional, num_heads
            entry["value"] = value.item() if isinstance(value, np.generic) else value
        arguments.append(entry)
    record = {
        "id": name,
        "check": case.check,
        "label": case.label,
        "params": params,
        "arguments": arguments,
    }
    if params.get("bad") is not None:
        return record | {"must": "raise"}
    return record | _expected(chosen, params, name, into)


def _expected(chosen: Kind, params: dict, name: str, into: str) -> dict:
    """What a valid case's result must be: the reference, the expected result rounded once
    to the dtype, and the rule (bit-identical, equal, or within a tolerance)."""
    reference = np.asarray(chosen.reference(params))
    if reference.dtype.kind in "iu":  # t5, position_ids
        saved = _saved(into, f"{name}.reference.npy", reference)
        return {
            "must": "equal",
            "result_dtype": "any integer",
            "reference": saved,
            "expected": saved,
        }
    dtype = params.get("dtype", "float32")  # sinusoidal and alibi: any float, given at float32
    exact = chosen.exact_for(params)
    record = {
        "must": "bit-identical" if exact else "within tolerance",
        "result_dtype": params.get("dtype", "any float"),
        "reference": _saved(into, f"{name}.reference.npy", reference.astype(np.float64)),
        "expected": _saved(into, f"{name}.expected.npy", chosen.rounded(reference, dtype)),
    }
    if not exact:
        tolerance = chosen.tolerance(params, dtype)
        record["tolerance"] = (
            float(tolerance)
            if np.ndim(tolerance) == 0
            else _saved(into, f"{name}.tolerance.npy", np.asarray(tolerance, np.float64))
        )
    return record


def _saved(into: str, file: str, array: np.ndarray) -> dict:
    """Write ``array`` as ``file`` (never pickled; bfloat16 as its uint16 bits): its entry."""
    entry = {"file": file, "dtype": array.dtype.name, "shape": list(array.shape)}
    if array.dtype == ml_dtypes.bfloat16:
        array, entry["stored"] = array.view(np.uint16), BITS
    np.save(os.path.join(into, file), array, allow_pickle=False)
    return entry


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _fingerprint(kind: str, options: dict, cases: list[Case]) -> str:
    """sha256 of the battery: kind, options, and each case's check, label, params and
    arguments (their dtypes, shapes and bytes: a kit that draws its inputs otherwise is
    another battery, whose results the old ones are not)."""
    record = {
        "kind": kind,
        "options": options,
        "cases": [
            {"check": c.check, "label": c.label, "params": c.params}
            | {"inputs": _inputs(KINDS[kind], c)}
            for c in cases
        ],
    }
    return hashlib.sha256(_canonical(record).encode()).hexdigest()


def _inputs(chosen: Kind, case: Case) -> str:
    digest = hashlib.sha256()
    for value in chosen.arguments(case.params):
        if isinstance(value, np.ndarray):
            digest.update(f"{value.dtype.name}{value.shape}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        else:
            digest.update(repr(value.item() if isinstance(value, np.generic) else value).encode())
    return digest.hexdigest()


# --- judge -------------------------------------------------------------------------------


def _manifest(path: str) -> dict:
    """cases.json, read (at most MANIFEST_BYTES) and checked for the fields the judge uses."""
    try:
        with outputs.open_regular(path, links=False) as handle:
            data = handle.read(MANIFEST_BYTES + 1)
    except outputs.Unreadable as why:
        raise UsageError(f"{path} {why}: export the battery first (--export-cases)") from None
    if len(data) > MANIFEST_BYTES:
        raise UsageError(f"{path} is over {MANIFEST_BYTES} bytes: no manifest the kit writes")
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise UsageError(reports.shown(f"{path} is not JSON ({error})")) from None
    malformed = _malformed(manifest)
    if malformed:
        raise UsageError(f"{path} is no manifest of exported cases: {malformed}")
    return manifest


def _malformed(manifest) -> str:
    """What is wrong with the manifest's shape, or ""."""
    if not isinstance(manifest, dict):
        return "not a JSON object"
    if manifest.get("schema_version") != SCHEMA_VERSION:
        found = manifest.get("schema_version")
        return reports.shown(f"schema_version {found!r}, where this kit reads {SCHEMA_VERSION}")
    if manifest.get("kind") not in KINDS:
        return reports.shown(f"kind {manifest.get('kind')!r} is none of {', '.join(KINDS)}")
    if not isinstance(manifest.get("options"), dict) or not isinstance(
        manifest.get("fingerprint"), str
    ):
        return "options must be an object and fingerprint a string"
    cases = manifest.get("cases")
    if not isinstance(cases, list) or not cases:
        return "cases must be a list of cases"
    for number, case in enumerate(cases):
        fields = isinstance(case, dict) and isinstance(case.get("params"), dict)
        if not fields or not all(isinstance(case.get(k), str) for k in ("id", "check", "label")):
            return f"case {number} lacks its id, check, label or params"
        if case["id"] != _id(number):
            return reports.shown(f"case {number} has the id {case['id']!r}, not {_id(number)!r}")
    return ""


def _rebuilt(path: str, manifest: dict) -> tuple[list[Case], list[Case]]:
    """(the kit's whole battery at the manifest's kind and options, its cases that the
    manifest names by check, label and params, in the manifest's order); UsageError where one
    is not in the kit's battery or the fingerprint differs."""
    kind, options = manifest["kind"], manifest["options"]
    again = "the kit changed since the export, or the folder was edited: export the battery again"
    try:
        battery = select_cases(kind, options)
    except Exception as error:
        said = f"{path}: {kind}'s battery cannot be built at its options ({error}); {again}"
        raise UsageError(reports.shown(said)) from None
    by_key = {_key(c): c for c in battery}
    cases = []
    for entry in manifest["cases"]:
        try:
            case = by_key.get((entry["check"], entry["label"], _canonical(entry["params"])))
        except ValueError:  # a NaN or infinity in params: no case of the kit's
            case = None
        if case is None:
            said = reports.shown(f"{entry['id']} ({entry['check']}: {entry['label']})")
            raise UsageError(f"{path}: {said} is no case of the kit's {kind} battery; {again}")
        cases.append(case)
    if _fingerprint(kind, options, cases) != manifest["fingerprint"]:
        raise UsageError(f"{path}: its fingerprint is not the battery's; {again}")
    return battery, cases


def _key(case: Case) -> tuple:
    return case.check, case.label, _canonical(case.params)


def _left_out(battery: list[Case], cases: list[Case]) -> list[str]:
    """The checks of the whole battery the folder lacks, or lacks cases of ("forward float32
    (2 of 4 cases)"): an export of a part, or a manifest cut and its fingerprint recomputed
    (a plain checksum, which anyone can recompute: no signature)."""
    held = {_key(c) for c in cases}
    left = []
    for check in dict.fromkeys(c.check for c in battery):
        keys = [_key(c) for c in battery if c.check == check]
        found = sum(key in held for key in keys)
        if found < len(keys):
            left.append(check if not found else f"{check} ({found} of {len(keys)} cases)")
    return left


def _outcome(chosen: Kind, case: Case, results: str, name: str) -> Outcome:
    """What the runner wrote for ``case``: results/NAME.npy or results/NAME.raised."""
    files = (f"{name}.npy", f"{name}.raised")
    written = [f for f in files if os.path.lexists(os.path.join(results, f))]
    if not written:
        return Outcome(failed=f"no result in {RESULTS}/")
    if len(written) == 2:
        return Outcome(failed=f"both {name}.npy and {name}.raised in {RESULTS}/: write one")
    named = f"{RESULTS}/{written[0]}"
    try:
        with outputs.open_regular(os.path.join(results, written[0]), links=False) as handle:
            if written[0].endswith(".raised"):
                text = handle.read(RAISED_BYTES).decode("utf-8", errors="replace")
                return Outcome(raised=reports.shown(text) or "an exception without a message")
            return _array(chosen, case, handle, named)
    except outputs.Unreadable as why:
        return Outcome(failed=f"{named} {why}")
    except OSError as error:
        return Outcome(failed=reports.shown(f"{named} cannot be read ({error})"))


def _array(chosen: Kind, case: Case, handle, named: str) -> Outcome:
    """The result in ``handle``, a .npy file: its size and header checked before its data is
    read, so that neither a huge file nor a header that claims gigabytes is read."""
    elements = chosen.most_elements(case.params)
    size = os.fstat(handle.fileno()).st_size
    if size > LARGEST_ITEM * elements + NPY_HEADER:
        return Outcome(
            failed=f"{named} holds {size} bytes: more than a result of this case can "
            f"({elements} elements)"
        )
    try:
        version = np.lib.format.read_magic(handle)
        header = {
            (1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0,
        }
        if version not in header:
            raise ValueError(f"format version {version[0]}.{version[1]}, not 1.0 or 2.0")
        shape, fortran, dtype = header[version](handle, max_header_size=NPY_HEADER)
    except (ValueError, OSError) as error:
        return Outcome(failed=reports.shown(f"{named} is not a .npy array ({error})"))
    if dtype.hasobject:
        return Outcome(failed=f"{named} holds Python objects (a pickle): never read")
    if dtype.kind not in "biufc":  # as the worker says it (worker._numbers)
        return Outcome(returned=f"an array of {dtype} (not numbers)")
    if any(n < 0 for n in shape):
        return Outcome(failed=f"{named} is not a .npy array (its shape is {shape})")
    count = math.prod(shape)
    if count > elements:  # as the worker says it (worker.call)
        return Outcome(
            returned=f"an array of shape {shape} ({count} elements, where a result of this "
            f"case has at most {elements})"
        )
    needed = count * dtype.itemsize
    data = handle.read(needed)
    if len(data) < needed:
        return Outcome(failed=f"{named} is cut short: {len(data)} of {needed} bytes")
    array = np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")
    # a writable copy in native byte order, as np.load gives the worker's result
    array = array.astype(dtype.newbyteorder("="))
    if array.dtype == np.uint16 and _bfloat16(chosen, case.params):
        array = array.view(ml_dtypes.bfloat16)
    return Outcome(array=array)


def _bfloat16(chosen: Kind, params: dict) -> bool:
    """Whether a uint16 result is bfloat16's bits: in a bfloat16 case, or in a valid case of
    any float (sinusoidal, alibi), where uint16 would be no answer; never where integers
    are the answer (t5, position_ids)."""
    if "dtype" in params:
        return params["dtype"] == "bfloat16"
    return params.get("bad") is None and np.asarray(chosen.reference(params)).dtype.kind == "f"
