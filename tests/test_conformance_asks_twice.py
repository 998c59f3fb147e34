"""check --kind rope and --kind lookup ask twice by default: the contract and its invariances
(kinds/invariance.py) in one verdict, so that a decode fast path right for one sequence and
wrong for the others of a batch differs under the plain command; --no-invariances runs the
contract alone, and the last line says the invariances were not asked, as it says where they
cannot be (every layer type of a config at once, a production path, a folder of results)."""

import contextlib
import functools
import json
import os
import re
import shlex

import ml_dtypes
import numpy as np
import pytest

import compare
from backends import numpy_backend
from embedding_parity.conformance import api, known, process, runner
from embedding_parity.conformance.report import check_id
from embedding_parity.conformance.testing import parametrize_with_checks

HERE = os.path.abspath(__file__)
DECODE = "batch = row by row, T = 1 (decode)"
HELD = "each answer held to the other"


def rope(x, positions):
    return numpy_backend.apply_rope(x, positions)


def rope_decoding_the_first_sequence(x, positions):
    """A decode fast path (one token for each sequence of a batch) that rotates only the
    first sequence and hands the others back as they came (mlx #3494, mx.fast.rope at T = 1)."""
    if x.ndim == 4 and x.shape[-2] == 1:
        out = np.array(x, copy=True)
        out[0] = rope(x[0], positions)
        return out
    return rope(x, positions)


def lookup(token_table, position_table, token_ids, start):
    return numpy_backend.TokenPositionEmbedding(token_table, position_table)(token_ids, start=start)


def lookup_decoding_the_first_sequence(token_table, position_table, token_ids, start):
    """A decode fast path that gathers the first sequence's token for every row of the batch."""
    if token_ids.ndim == 2 and token_ids.shape[1] == 1:
        token_ids = np.broadcast_to(token_ids[:1], token_ids.shape)
    return lookup(token_table, position_table, token_ids, start)


TARGETS = {
    "rope": (rope, rope_decoding_the_first_sequence),
    "lookup": (lookup, lookup_decoding_the_first_sequence),
}


@pytest.fixture(scope="module")
def worker():
    """One worker for this file's targets: each check loads its target into it as into a fresh
    one (a fresh worker for each costs its start)."""
    with process.Worker({}) as started:
        yield started


@pytest.fixture
def command(capsys, monkeypatch, worker):
    """compare.py check on a target of this file, run in the module's worker: (status, lines)."""
    monkeypatch.setattr(runner, "run", functools.partial(runner.run, worker=worker))

    def run(*flags):
        code = compare.main(["check", *flags])
        captured = capsys.readouterr()
        return code, (captured.out + captured.err).splitlines()

    return run


def marked(lines, mark: str, check: str) -> str:
    """The report's line of ``check``, which must carry ``mark`` (ok, NO)."""
    found = [line for line in lines if re.match(rf"\s+{mark}\s+{re.escape(check)}\s", line)]
    assert len(found) == 1, lines
    return found[0]


# --- the plain command asks twice ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["rope", "lookup"])
def test_a_decode_path_wrong_past_the_first_sequence_differs_under_the_plain_command(
    command, kind
):
    # Before: the contract's cases have no batch of one-token sequences, so the port conformed
    # (exit 0); only --kind rope_invariance (lookup_invariance) caught it.
    code, lines = command(f"{HERE}:{TARGETS[kind][1].__name__}", "--kind", kind)
    assert code == 1
    assert "batch rows [1, 2, 3] of 4" in marked(lines, "NO", DECODE)
    assert lines[-1].startswith("DIFFERS: ")
    assert lines[-1].endswith(f"; invariances asked too ({kind}_invariance)")
    # the contract asked once conforms: the invariance alone tells it
    contract = lines[2 : lines.index(f"asked two ways ({kind}_invariance): {HELD}")]
    assert contract and all(re.match(r"\s+ok\s", line) for line in contract), contract


@pytest.mark.parametrize("kind", ["rope", "lookup"])
def test_a_correct_target_conforms_to_the_contract_and_its_invariances(command, kind):
    code, lines = command(f"{HERE}:{TARGETS[kind][0].__name__}", "--kind", kind)
    assert code == 0
    marked(lines, "ok", DECODE)
    assert re.fullmatch(
        rf"CONFORMS: (\d+) of \1 checks conform \([\d.]+ s\); invariances asked too "
        rf"\({kind}_invariance\)",
        lines[-1],
    )


@pytest.mark.parametrize("kind", ["rope", "lookup"])
def test_no_invariances_runs_the_contract_alone_and_says_so(command, kind):
    code, lines = command(
        f"{HERE}:{TARGETS[kind][1].__name__}", "--kind", kind, "--no-invariances"
    )
    assert code == 0
    assert not any(DECODE in line for line in lines)
    assert lines[-1].startswith("CONFORMS: ")
    assert lines[-1].endswith(f"; invariances not asked ({kind}_invariance): turned off")


def test_no_invariances_goes_with_a_kind_asked_twice_only(command):
    code, lines = command(f"{HERE}:rope", "--kind", "sinusoidal", "--no-invariances")
    assert code == 2
    assert lines == [
        "compare.py check: error: --no-invariances goes with --kind rope or lookup or "
        "pos2d_resize or rope2d (asked two ways by default), not sinusoidal"
    ]
    with pytest.raises(ValueError, match="invariances=False goes with kind rope or lookup or"):
        api.check(rope, "sinusoidal", invariances=False)


# --- the Python front doors --------------------------------------------------------------


def test_check_and_assert_conforms_ask_twice_and_name_the_invariance():
    report = api.check(rope_decoding_the_first_sequence, "rope")
    assert not report.conforms
    assert [c.check for c in report.checks if c.status == "differs"] == [DECODE]
    alone = api.check(rope_decoding_the_first_sequence, "rope", invariances=False)
    assert alone.conforms
    assert alone.lines()[-1].endswith("; invariances not asked (rope_invariance): turned off")


def test_a_port_bit_identical_to_its_source_is_still_asked_twice():
    # --against holds the contract's cases to the source; the invariances hold the port to itself
    report = api.check(rope_decoding_the_first_sequence, "rope", against=rope, dtypes=["float32"])
    assert [c.check for c in report.checks if c.status == "differs"] == [DECODE]
    assert all("bit-identical to " in c.detail for c in report.checks[:2])
    assert "[contract: ok, ok]" in marked(report.lines(), "ok", "rotation float32")
    assert "[contract:" not in marked(report.lines(), "NO", DECODE)


def test_invariances_that_conform_are_no_evidence_of_the_contract():
    # a stub that answers zeros answers the same zeros two ways: its invariances conform, and
    # with every contract check expected to differ no valid case was held to the contract
    def zeros(token_table, position_table, token_ids, start):
        return np.zeros_like(lookup(token_table, position_table, token_ids, start))

    report = api.check(zeros, "lookup", expected={"forward *": "a stub"})
    assert {c.status for c in report.checks if c.check.startswith("forward")} == {"expected"}
    assert report.checks[-1].status == "conforms" and report.invariances["asked"]
    assert report.verdict == "NO VERDICT"
    assert "batch" not in report.unanswered()


def test_the_line_that_reproduces_a_failing_invariance_runs_it_alone(command):
    with pytest.raises(AssertionError) as raised:
        api.assert_conforms(rope_decoding_the_first_sequence, "rope", isolate=True)
    line = str(raised.value).splitlines()[-1]
    assert line.endswith(f"--kind rope --only {shlex.quote(DECODE)}")
    code, lines = command(*shlex.split(line.partition(" check ")[2]))
    assert code == 1
    marked(lines, "NO", DECODE)
    assert lines[-1].startswith("DIFFERS: 0 of 1 check conforms, 1 differs")


def test_parametrize_with_checks_gives_each_invariance_its_test():
    def ids(**settings):
        mark = parametrize_with_checks([rope], kind="rope", **settings)
        return [param.id for param in mark.args[1]]

    assert f"rope-{check_id(DECODE)}" in ids()
    assert f"rope-{check_id(DECODE)}" not in ids(invariances=False)
    assert "rope-rotation_float32" in ids(invariances=False)


# --- where the invariances cannot be asked, the last line says why ------------------------


def test_every_layer_type_at_once_says_the_invariances_ask_one():
    sliding = "rotation sliding_attention float32"
    report = api.check(rope, "rope", config="gemma-3-1b", checks=[sliding])
    assert [c.check for c in report.checks] == [sliding]
    assert report.lines()[-1].endswith(
        "; invariances not asked (rope_invariance): rope_invariance asks one rotation, "
        "f(x, positions): name one layer type of a config whose layers rotate differently "
        "(--layer-type)"
    )
    # one layer type is one rotation: asked
    one = api.check(rope, "rope", config="gemma-3-1b", layer="sliding_attention", checks=[DECODE])
    assert one.conforms and [c.check for c in one.checks] == [DECODE]


def test_a_production_path_runs_the_contract_alone_and_names_the_command_that_asks_them():
    assert runner.asked_twice("lookup", {}, through="onnx") == (
        None,
        "ask them along onnx with --kind lookup_invariance --through onnx",
    )
    assert runner.asked_twice("lookup", {}) == ("lookup_invariance", None)
    assert runner.asked_twice("sinusoidal", {}) == (None, None)


def test_a_folder_of_results_says_the_invariances_were_not_asked(command, tmp_path):
    folder = str(tmp_path / "cases")
    assert command("--export-cases", folder, "--kind", "rope")[0] == 0
    with open(os.path.join(folder, "cases.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    for case in manifest["cases"]:  # an outside runner: the files in, the rotation out
        x, positions = (read(folder, a) if "file" in a else a["value"] for a in case["arguments"])
        rotated = rope(x, positions)
        if rotated.dtype == ml_dtypes.bfloat16:  # bfloat16 as its bits, as cases.json says
            rotated = rotated.view(np.uint16)
        np.save(os.path.join(folder, "results", f"{case['id']}.npy"), rotated)
    code, lines = command("--results", folder)
    assert code == 0
    assert lines[-1].endswith(
        "; invariances not asked (rope_invariance): a folder holds one answer a case: ask "
        "them of the target, --kind rope_invariance"
    )


def read(folder, entry) -> np.ndarray:
    array = np.load(os.path.join(folder, entry["file"]))
    return array.view(ml_dtypes.bfloat16) if entry.get("stored") == "uint16 bits" else array


def test_the_matrix_asks_them_in_rows_of_their_own_not_twice():
    row = "NumPy: table[ids] + positions"
    matrix = known.run([row, f"{row}: invariances"])
    contract, invariances = (record["report"] for record in matrix["rows"])
    assert contract["invariances"] == {"kind": "lookup_invariance", "not_asked": "turned off"}
    assert [c["check"] for c in invariances["checks"]][0] == DECODE
    assert not any(c["check"] == DECODE for c in contract["checks"])
