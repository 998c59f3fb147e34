"""The battery as data (``conformance.cases``): exported into a folder, run by an outside
runner that reads only cases.json and .npy files, and judged from the files it writes back,
with the verdicts a direct run of the same function gives."""

import json
import os
import pickle
import re
from dataclasses import asdict

import ml_dtypes
import numpy as np
import pytest

import backends
from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.conformance import cases, runner

NUMPY = backends.get("numpy")


def lookup(token_table, position_table, token_ids, start):
    return NUMPY.TokenPositionEmbedding(token_table, position_table)(token_ids, start=start)


def rope(x, positions):
    return NUMPY.apply_rope(x, positions)


def t5(relative_position, bidirectional, num_buckets, max_distance):
    return NUMPY.t5_relative_buckets(
        relative_position,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )


def alibi_in_bfloat16(num_heads):
    return NUMPY.alibi_slopes(num_heads).astype(ml_dtypes.bfloat16)


SUITE = {"lookup": lookup, "rope": rope, "t5": t5, "alibi": alibi_in_bfloat16}


# --- an outside runner: cases.json and np.load, nothing of the kit's ---------------------


def manifest_of(folder) -> dict:
    with open(os.path.join(folder, "cases.json"), encoding="utf-8") as f:
        return json.load(f)


def read(folder, entry) -> np.ndarray:
    array = np.load(os.path.join(folder, entry["file"]), allow_pickle=False)
    return array.view(ml_dtypes.bfloat16) if entry.get("stored") == "uint16 bits" else array


def arguments_of(folder, case) -> list:
    return [read(folder, a) if "file" in a else a["value"] for a in case["arguments"]]


def run_outside(folder, function) -> None:
    """Call ``function`` on every case's arguments; write results/ID.npy or ID.raised."""
    manifest = manifest_of(folder)
    results = os.path.join(folder, manifest["results"]["folder"])
    for case in manifest["cases"]:
        arguments = arguments_of(folder, case)
        try:
            result = np.asarray(function(*arguments))
        except Exception as error:  # noqa: BLE001 - the implementation's exception is its answer
            with open(os.path.join(results, f"{case['id']}.raised"), "w", encoding="utf-8") as out:
                out.write(f"{type(error).__name__}: {error}")
            continue
        if result.dtype == ml_dtypes.bfloat16:
            result = result.view(np.uint16)
        np.save(os.path.join(results, f"{case['id']}.npy"), result, allow_pickle=False)


def exported(tmp_path, kind: str) -> str:
    return cases.export(str(tmp_path / f"{kind}-cases"), kind, {}, runner.select_cases(kind))


def judged(report) -> list[dict]:
    return [asdict(c) for c in report.checks]


def run_and_judge(tmp_path, kind: str, function):
    folder = exported(tmp_path, kind)
    run_outside(folder, function)
    return folder, cases.judge(folder)


# --- the same verdicts ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["lookup", "rope", "t5", "alibi"])
def test_results_from_files_get_the_verdicts_of_a_direct_run(tmp_path, kind):
    """alibi's slopes in bfloat16: a result of any float dtype comes back from its bits."""
    folder, from_files = run_and_judge(tmp_path, kind, SUITE[kind])
    direct = runner.run(SUITE[kind], kind, framework="numpy")
    assert judged(from_files) == judged(direct)
    assert from_files.conforms  # the suite's own backend: a control row
    assert (from_files.target, from_files.framework) == (folder, "files")
    assert from_files.contract == direct.contract


@pytest.mark.parametrize("name", ["torch", "jax"])
@pytest.mark.parametrize("kind", ["lookup", "rope"])
def test_every_backend_of_the_suite_round_trips(tmp_path, name, kind):
    """The outside runner calls the torch or JAX backend on the files' NumPy arrays (each
    backend takes them, and its to_numpy gives them back): the report of a direct run."""
    chosen = backends.get(name)

    def backend(*arguments):
        if kind == "lookup":
            token_table, position_table, token_ids, start = arguments
            layer = chosen.TokenPositionEmbedding(token_table, position_table)
            return chosen.to_numpy(layer(token_ids, start=start))
        return chosen.to_numpy(chosen.apply_rope(*arguments))

    _, from_files = run_and_judge(tmp_path, kind, backend)
    direct = runner.run(backend, kind, framework="numpy")
    assert from_files.conforms
    assert judged(from_files) == judged(direct)


def test_the_manifest_lets_a_runner_check_itself(tmp_path):
    """expected, reference and tolerance, read from the files, hold the suite's results as
    the kit does: bit-identical in the case's dtype (bfloat16 back from its bits), within
    the tolerance, or raising."""
    for kind in ("lookup", "rope"):
        folder = exported(tmp_path, kind)
        for case in manifest_of(folder)["cases"]:
            arguments = arguments_of(folder, case)
            if case["must"] == "raise":
                with pytest.raises(Exception):  # noqa: B017 - any exception is a refusal
                    SUITE[kind](*arguments)
                continue
            result = np.asarray(SUITE[kind](*arguments))
            assert result.dtype.name == case["result_dtype"] == case["expected"]["dtype"]
            if case["must"] == "bit-identical":
                assert result.tobytes() == read(folder, case["expected"]).tobytes()
            else:
                error = np.abs(result.astype(np.float64) - read(folder, case["reference"]))
                assert (error <= read(folder, case["tolerance"])).all()


def test_a_result_of_several_arrays_is_told_how_to_be_one(tmp_path):
    from embedding_parity.conformance.kinds import KINDS

    def form(kind, options):
        folder = cases.export(
            str(tmp_path / f"{kind}-{len(options)}"), kind, options, KINDS[kind].cases(options)
        )
        return manifest_of(folder)["results"].get("form")

    vision = configs.preset("qwen2.5-vl-7b").options("mrope_positions")
    assert form("mrope_positions", vision).startswith("the pair as one int64 array")
    assert form("rope", {"qk": True}).startswith("q and k rotated, stacked into one array")
    assert form("rope", {}) is None and form("lookup", {}) is None


def test_integer_kinds_have_integer_references(tmp_path):
    manifest = manifest_of(exported(tmp_path, "t5"))
    assert {c["must"] for c in manifest["cases"]} == {"equal"}
    assert manifest["cases"][0]["arguments"][1] == {"name": "bidirectional", "value": True}
    assert manifest["cases"][0]["reference"]["dtype"] == "int64"
    assert manifest["kind"] == "t5" and manifest["schema_version"] == 1


def one_ulp_off(token_table, position_table, token_ids, start):
    result = lookup(token_table, position_table, token_ids, start)
    if result.dtype == np.float32:
        result[..., 0, 0] = np.nextafter(result[..., 0, 0], np.float32(np.inf))
    return result


def clamps_ids(token_table, position_table, token_ids, start):
    ids = np.clip(np.asarray(token_ids, np.int64), 0, len(token_table) - 1)
    return token_table[ids] + position_table[start : start + ids.shape[-1]]


def ignores_start(token_table, position_table, token_ids, start):
    return lookup(token_table, position_table, token_ids, 0)


def widens_bfloat16(token_table, position_table, token_ids, start):
    result = lookup(token_table, position_table, token_ids, start)
    return result.astype(np.float32) if result.dtype == ml_dtypes.bfloat16 else result


@pytest.mark.parametrize(
    ("function", "check", "found"),
    [
        (one_ulp_off, "forward float32", "1 ulp at [0, 0]"),
        (clamps_ids, "bad id: -1", "clamps to row 0: a silent wrong answer"),
        (ignores_start, "forward float64", "start ignored (positions from 0, not 11)"),
        (widens_bfloat16, "forward bfloat16", "returns float32 for bfloat16"),
    ],
    ids=["one ulp", "clamped id", "start ignored", "bfloat16 as float32"],
)
def test_a_wrong_result_differs_as_in_a_direct_run(tmp_path, function, check, found):
    _, from_files = run_and_judge(tmp_path, "lookup", function)
    direct = runner.run(function, "lookup", framework="numpy")
    assert judged(from_files) == judged(direct)
    named = {c.check: c for c in from_files.checks}[check]
    assert named.status == "differs" and found in named.detail


# --- what the judge refuses ----------------------------------------------------------------


def checks_of(report) -> dict:
    return {c.check: c for c in report.checks}


def test_a_missing_result_fails_its_case(tmp_path):
    folder = exported(tmp_path, "t5")
    run_outside(folder, t5)
    os.remove(os.path.join(folder, "results", "case-001.npy"))
    report = cases.judge(folder)
    first, second = report.checks[:2]
    assert first.status == "conforms"
    assert second.status == "failed"
    assert second.detail == "relative positions -2000..2000: no result in results/"


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update(fingerprint="0" * 64),
        lambda m: m["cases"][0]["params"].update(num_buckets=64),
        lambda m: m["options"].update(base=500000.0),
    ],
    ids=["fingerprint", "a case's params", "options"],
)
def test_an_edited_manifest_is_refused_in_one_line(tmp_path, edit):
    folder = exported(tmp_path, "t5")
    run_outside(folder, t5)
    manifest = manifest_of(folder)
    edit(manifest)
    with open(os.path.join(folder, "cases.json"), "w", encoding="utf-8") as out:
        json.dump(manifest, out)
    with pytest.raises(UsageError, match="export the battery again") as refused:
        cases.judge(folder)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (None, "cannot be read (No such file or directory): export the battery first"),
        ("{", "is not JSON"),
        ('{"schema_version": 2}', "schema_version 2, where this kit reads 1"),
        ('{"schema_version": 1, "kind": "nope"}', "kind 'nope' is none of"),
        (" " * (cases.MANIFEST_BYTES + 1), "is over 4194304 bytes"),
    ],
    ids=["missing", "not JSON", "schema", "kind", "too large"],
)
def test_an_unusable_manifest_is_refused_in_one_line(tmp_path, text, said):
    if text is not None:
        (tmp_path / "cases.json").write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=re.escape(said)) as refused:
        cases.judge(str(tmp_path))
    assert "\n" not in str(refused.value)


def test_an_existing_folder_is_refused(tmp_path):
    (tmp_path / "there").mkdir()
    with pytest.raises(UsageError, match="exists: the battery is exported into a new folder"):
        cases.export(str(tmp_path / "there"), "t5", {}, runner.select_cases("t5"))
    assert os.listdir(tmp_path / "there") == [] and os.listdir(tmp_path) == ["there"]


class Unpickled:
    """Makes a folder when unpickled: the proof that the judge never unpickles."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def pickled_array(path, marker):
    np.save(path, np.array([Unpickled(marker)], dtype=object), allow_pickle=True)


def plain_pickle(path, marker):
    with open(path, "wb") as out:
        pickle.dump(Unpickled(marker), out)


@pytest.mark.parametrize(
    ("write", "said"),
    [
        (pickled_array, "results/case-000.npy holds Python objects (a pickle): never read"),
        (plain_pickle, "results/case-000.npy is not a .npy array"),
    ],
    ids=["object array", "pickle"],
)
def test_a_pickled_result_is_refused_unread(tmp_path, write, said):
    folder = exported(tmp_path, "t5")
    run_outside(folder, t5)
    marker = str(tmp_path / "unpickled")
    path = os.path.join(folder, "results", "case-000.npy")
    os.remove(path)
    write(path, marker)
    first = cases.judge(folder).checks[0]
    assert first.status == "failed" and said in first.detail
    assert not os.path.exists(marker)


def huge_file(path):
    """A valid header, a gigabyte of (sparse) data behind it."""
    with open(path, "wb") as out:
        header = {"descr": "<f8", "fortran_order": False, "shape": (1 << 27,)}
        np.lib.format.write_array_header_1_0(out, header)
        out.truncate(out.tell() + (8 << 27))


def huge_header(path):
    """A few bytes that claim 2**40 elements."""
    with open(path, "wb") as out:
        header = {"descr": "<i8", "fortran_order": False, "shape": (1 << 40,)}
        np.lib.format.write_array_header_1_0(out, header)
        out.write(b"\0" * 64)


def cut_short(path):
    np.save(path, np.arange(4001, dtype=np.int64))
    with open(path, "r+b") as out:
        out.truncate(os.path.getsize(path) - 8)


def symlink(path):
    np.save(path + ".elsewhere.npy", np.arange(-2000, 2001))
    os.symlink(path + ".elsewhere.npy", path)


def fifo(path):
    os.mkfifo(path)


@pytest.mark.parametrize(
    ("write", "status", "said"),
    [
        (huge_file, "failed", "results/case-000.npy holds 1073741952 bytes: more than a result"),
        (huge_header, "differs", "an array of shape (1099511627776,) (1099511627776 elements"),
        (cut_short, "failed", "results/case-000.npy is cut short: 32000 of 32008 bytes"),
        (symlink, "failed", "results/case-000.npy is a symbolic link: write the file itself"),
        (fifo, "failed", "results/case-000.npy is not a regular file"),
    ],
    ids=["huge file", "huge header", "cut short", "symlink", "fifo"],
)
def test_a_result_is_checked_before_it_is_read(tmp_path, write, status, said):
    folder = exported(tmp_path, "t5")
    run_outside(folder, t5)
    path = os.path.join(folder, "results", "case-000.npy")
    os.remove(path)
    write(path)
    first, *rest = cases.judge(folder).checks
    assert first.status == status and said in first.detail
    assert {c.status for c in rest} == {"conforms"}


def test_a_result_in_either_byte_order_is_the_same_result(tmp_path):
    folder = exported(tmp_path, "t5")
    run_outside(folder, lambda *arguments: t5(*arguments).astype(">i8"))
    assert cases.judge(folder).conforms


def test_a_raised_message_is_shown_safely(tmp_path):
    folder = exported(tmp_path, "t5")
    run_outside(folder, t5)
    os.remove(os.path.join(folder, "results", "case-000.npy"))
    with open(os.path.join(folder, "results", "case-000.raised"), "wb") as out:
        out.write(b"ValueError: \x1b[2J no\nsecond line" + b"x" * 100_000)
    first = cases.judge(folder).checks[0]
    assert first.status == "differs"
    assert first.detail.endswith(r"raises ValueError: \x1b[2J no on a valid input")


def test_an_expectation_of_a_check_left_out_of_the_export_is_not_stale(tmp_path):
    chosen = runner.select_cases("rope", dtypes=["float32"])
    folder = cases.export(str(tmp_path / "rope-cases"), "rope", {}, chosen)
    run_outside(folder, rope)
    expected = {"rotation float64": "not exported", "rotation float128": "a typo"}
    report = cases.judge(folder, expected, strict=True)
    assert report.accepted and report.unmatched == ["rotation float128"]
    assert not report.conforms  # a part of the battery (test_battery_integrity.py)
