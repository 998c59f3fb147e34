"""No verdict from a shrunken battery, and the caller's process left as it was: an empty
choice of dtypes or checks, a cut cases.json, bad ids at one length along a path, a port held
to a wrong source, and a check in a process that raises on underflow, runs ONNX under
warnings-as-errors or keeps its own environment."""

import json
import os
import sys
import warnings

import numpy as np
import pytest

import compare
from backends import positional
from embedding_parity.cli import UsageError
from embedding_parity.conformance import cases, check, runner
from embedding_parity.conformance.kinds import KINDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance_targets"))
import numpy_targets


def zeros_that_check_ids(token_table, position_table, token_ids, start):
    """A lookup that raises for every bad id and answers zeros for every good one."""
    ids = numpy_targets._checked(token_ids, len(token_table))
    return np.zeros((*ids.shape, token_table.shape[1]), token_table.dtype)


def gemma(token_table, token_ids):
    """Gemma's scaled lookup, its ids checked."""
    return positional.scaled_embedding(
        token_table, numpy_targets._checked(token_ids, len(token_table))
    )


@pytest.fixture
def raising():
    """NumPy raising on every floating-point error, as many test suites set it; the state
    before is given back after the test."""
    before = np.seterr(all="raise")
    yield np.geterr()
    np.seterr(**before)


# --- an empty choice is refused ----------------------------------------------------------


@pytest.mark.parametrize("empty", [[], ()])
def test_no_dtypes_is_refused_not_run_as_the_bad_ids_alone(empty, capsys):
    with pytest.raises(UsageError, match=r"dtypes is empty: .*or None for all"):
        check(zeros_that_check_ids, "lookup", dtypes=empty)
    target = os.path.join(ROOT, "tests", "conformance_targets", "numpy_targets.py:lookup")
    assert compare.main(["check", target, "--kind", "lookup", "--dtypes", ""]) == 2
    assert "choose from float64" in capsys.readouterr().err


def test_no_checks_is_refused_by_what_was_asked():
    with pytest.raises(UsageError, match=r"checks is empty: it names no check of lookup"):
        check(zeros_that_check_ids, "lookup", checks=[])


# --- a cut cases.json --------------------------------------------------------------------


def results_of(folder: str, kind: str, function) -> None:
    """An outside runner: each case of the folder's manifest called, its result written."""
    with open(os.path.join(folder, "cases.json"), encoding="utf-8") as file:
        manifest = json.load(file)
    for entry in manifest["cases"]:
        arguments = KINDS[kind].arguments(entry["params"])
        try:
            result = function(*arguments)
        except (IndexError, TypeError) as error:
            with open(os.path.join(folder, "results", f"{entry['id']}.raised"), "w") as out:
                out.write(f"{type(error).__name__}: {error}")
            continue
        if result.dtype.name == "bfloat16":
            result = result.view(np.uint16)
        np.save(os.path.join(folder, "results", f"{entry['id']}.npy"), result)


def test_a_cut_manifest_its_fingerprint_recomputed_is_no_conforming_battery(tmp_path, capsys):
    folder = str(tmp_path / "battery")
    assert compare.main(["check", "--export-cases", folder, "--kind", "lookup"]) == 0
    path = os.path.join(folder, "cases.json")
    with open(path, encoding="utf-8") as file:
        manifest = json.load(file)
    kept = [case for case in manifest["cases"] if "bad" not in case["params"]]
    for number, case in enumerate(kept):  # renumbered, as the judge reads them in order
        case["id"] = f"case-{number:03d}"
    rebuilt = {cases._key(c): c for c in runner.select_cases("lookup", manifest["options"])}
    chosen = [rebuilt[(c["check"], c["label"], cases._canonical(c["params"]))] for c in kept]
    fingerprint = cases._fingerprint("lookup", manifest["options"], chosen)
    manifest |= {"cases": kept, "fingerprint": fingerprint}
    with open(path, "w", encoding="utf-8") as file:
        json.dump(manifest, file)
    capsys.readouterr()
    results_of(folder, "lookup", numpy_targets.lookup_clamps)  # clamps every bad id
    assert compare.main(["check", "--results", folder]) == 1
    out = capsys.readouterr().out
    assert "4 of 4 checks conform" in out and "CONFORMS" not in out
    assert out.splitlines()[-1].startswith("INCOMPLETE")
    assert (
        "left out: 4 checks of lookup's battery are not in the folder (bad id: vocab_size, "
        "bad id: -1, bad id: far out of range, bad id: non-integer (1.5))" in out
    )


def test_a_part_of_the_battery_names_what_it_leaves_out_case_by_case(tmp_path):
    chosen = runner.select_cases("lookup")
    forward = [c for c in chosen if c.check == "forward float32"]
    part = [c for c in chosen if c.check != "forward float32"] + forward[:1]
    folder = cases.export(str(tmp_path / "part"), "lookup", {}, part)
    results_of(folder, "lookup", numpy_targets.lookup)
    report = cases.judge(folder)
    assert report.accepted and not report.conforms
    assert report.left_out == [f"forward float32 (1 of {len(forward)} cases)"]
    full = cases.export(str(tmp_path / "whole"), "lookup", {}, chosen)
    results_of(full, "lookup", numpy_targets.lookup)
    assert cases.judge(full).conforms and cases.judge(full).left_out == []


# --- NumPy's error state -----------------------------------------------------------------


def test_a_caller_that_raises_on_underflow_gets_the_battery_built_and_keeps_its_state(raising):
    seen = []  # the target's own call keeps the caller's state: it is what the caller runs

    def recording(token_table, token_ids):
        seen.append(np.geterr())
        return gemma(token_table, token_ids)

    assert check(numpy_targets.rope, "rope", framework="numpy").conforms
    assert check(recording, "lookup", config="gemma-2-2b", framework="numpy").conforms
    assert np.geterr() == raising
    assert seen and all(state == raising for state in seen)


def test_cases_are_exported_and_judged_under_a_raising_state(raising, tmp_path):
    folder = tmp_path / "rope"
    cases.export(str(folder), "rope", {"base": 10000.0}, runner.select_cases("rope", {}))
    report = cases.judge(str(folder))
    assert {c.status for c in report.checks} == {"failed"}  # no results written: none judged
    assert np.geterr() == raising


# --- the caller's warnings and environment -------------------------------------------------


@pytest.mark.matrix  # the second tier: along ONNX Runtime, from the conformance extra
def test_a_check_along_onnx_in_process_keeps_the_callers_warnings_and_environment():
    import production

    before = dict(os.environ)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # python -W error: the exporter's module in eval mode
        report = check(production.guarded, "lookup", through="onnx", dtypes=["float32"])
    assert report.conforms, "\n".join(report.lines())
    assert dict(os.environ) == before  # ORT_DISABLE_TELEMETRY, Inductor's cache folder


# --- a port held to a wrong source -------------------------------------------------------


def tokens_only(token_table, position_table, token_ids, start):
    """A wrong source: the token rows, no position rows added."""
    return token_table[numpy_targets._checked(token_ids, len(token_table))]


def tokens_only_port(token_table, position_table, token_ids, start):
    """A port that copies tokens_only bit for bit."""
    return tokens_only(token_table, position_table, token_ids, start).copy()


def rounded_rope(x, positions):
    """A rotation returned as integers, where the contract is in the input's float dtype."""
    return np.round(numpy_targets.rope(x, positions)).astype(np.int32)


def test_a_port_bit_identical_to_a_source_that_breaks_the_contract_does_not_conform(capsys):
    report = check(tokens_only_port, "lookup", against=tokens_only, dtypes=["float32"])
    forward = next(c for c in report.checks if c.check == "forward float32")
    assert not report.conforms and forward.status == "differs"
    assert "bit-identical to test_battery_integrity.tokens_only, and as wrong" in forward.detail
    assert "positions not added" in forward.detail
    shown = "\n".join(report.lines())
    assert "[contract: NO, NO]" in shown and shown.splitlines()[-1].startswith("DIFFERS")
    target = f"{__file__}:tokens_only_port"
    flags = ["--kind", "lookup", "--dtypes", "float32", "--against", f"{__file__}:tokens_only"]
    assert compare.main(["check", target, *flags]) == 1
    assert "as wrong: against the contract" in capsys.readouterr().out


def test_the_same_integers_where_the_contract_is_in_a_float_dtype_are_a_difference():
    numpy = {"framework": "numpy", "against_framework": "numpy", "invariances": False}
    report = check(rounded_rope, "rope", against=rounded_rope, dtypes=["float32"], **numpy)
    assert not report.conforms
    assert {c.status for c in report.checks} == {"differs"}
    assert "returns int32 for float32" in report.checks[0].detail


# --- bad ids along a path ----------------------------------------------------------------


def checked_at_length_three(token_table, position_table, token_ids, start):
    """A JAX lookup whose ids are checked on the host where they are three long (the bad
    ids' length): a tracer refuses the check, so the path refuses that program, while the
    programs of the valid lengths read token_table[token_ids], which clamps."""
    if token_ids.shape[-1] == 3:
        numpy_targets._checked(np.asarray(token_ids), len(token_table))
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def test_a_path_tries_each_bad_id_at_every_shape_it_exports():
    report = check(
        checked_at_length_three, "lookup", through="jax.jit", dtypes=["float32"], framework="jax"
    )
    bad = next(c for c in report.checks if c.check == "bad id: -1")
    labels = [case["label"] for case in bad.cases]
    assert labels == [
        "token_ids [3, -1, 5]",
        "token_ids [3, -1, 5] repeated to shape (5,)",
        "token_ids [3, -1, 5] repeated to shape (3, 5)",
    ]
    assert bad.cases[0]["status"] == "conforms"  # refused at length 3: no program
    assert bad.status == "differs" and "shape (5,)" in bad.detail and "row 63" in bad.detail
    assert not report.conforms
    direct = [c.params["shape"] for c in runner.select_cases("lookup") if "bad" in c.params]
    assert direct == [(3,)] * 4  # a direct run's battery (and an export's) is as it was
