"""Both ends of a table are read: every valid case of the lookup and quantized_lookup batteries
fetches the table's first two rows and its last two, so that a fetch wrong only there differs
at any vocab_size; and a bad id's check in a format the target refuses says that no id was
checked in it, rather than quote the refusal as the id's."""

import os
import sys

import numpy as np
import pytest

from backends import quantized
from embedding_parity.conformance import check
from embedding_parity.conformance.kinds import KINDS
from embedding_parity.conformance.kinds.lookup import battery_ids

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance_targets"))
import numpy_targets  # noqa: E402
import table_ends  # noqa: E402

# A module built for its own vocabulary: the old battery's 120 random ids of its 1000 rows drew
# neither its first two rows nor its last two.
TABLE = [1000, 8, 16]
BAD = ("bad id: vocab_size", "bad id: -1", "bad id: far out of range")


def by_name(report) -> dict:
    return {c.check: c for c in report.checks}


@pytest.mark.parametrize("table", [None, TABLE])
def test_every_lookup_case_reads_both_ends_of_the_table(table):
    vocab = (table or [64])[0]
    valid = [c for c in KINDS["lookup"].cases({"table": table}) if c.params.get("bad") is None]
    assert valid
    for case in valid:
        ids = battery_ids(case.params)
        assert {0, 1, vocab - 2, vocab - 1} <= set(ids.ravel().tolist()), case.label


def test_every_quantized_case_reads_its_first_rows_and_most_read_both_ends():
    kind = KINDS["quantized_lookup"]
    valid = [c for c in kind.cases({}) if c.params.get("bad") is None]
    for case in valid:
        ids = set(kind.arguments(case.params)[2].ravel().tolist())
        assert {0, 1} <= ids, case.label
        if "both ends" in case.label:
            assert {62, 63} <= ids, case.label
        else:  # the first half only: an offset counted in elements stays inside the bytes
            assert max(ids) < 32, case.label
    assert sum("both ends" in c.label for c in valid) == 2 * len(valid) // 3


@pytest.mark.parametrize("table", [None, TABLE])
@pytest.mark.parametrize(
    "port", [table_ends.first_row_as_padding, table_ends.last_row_as_padding], ids=["first", "last"]
)
def test_a_lookup_wrong_only_at_an_end_of_the_table_differs_in_every_case(port, table):
    options = {"table": table, "dtypes": ["float32"], "invariances": False}
    wrong = check(port, "lookup", framework="numpy", **options)
    assert wrong.verdict == "DIFFERS", wrong.lines()
    forward = [c for c in wrong.checks if c.valid]
    assert forward and all(c.status == "differs" for c in forward), wrong.lines()
    assert all(case["status"] == "differs" for c in forward for case in c.cases)
    assert all(c.status == "conforms" for c in wrong.checks if not c.valid)  # it raises

    right = check(numpy_targets.lookup, "lookup", framework="numpy", **options)
    assert right.verdict == "CONFORMS", right.lines()


def test_a_quantized_fetch_wrong_only_near_the_end_differs():
    wrong = check(table_ends.q4_k_tail_as_last_row, "quantized_lookup", framework="numpy")
    found = by_name(wrong)
    assert wrong.verdict == "DIFFERS", wrong.lines()
    assert found["Q4_K rows"].status == "differs"
    assert "both ends" in found["Q4_K rows"].detail
    right = check(table_ends.q4_k_only, "quantized_lookup", framework="numpy")
    assert right.verdict == "CONFORMS", right.lines()
    assert by_name(right)["Q4_K rows"].status == "conforms"


def test_a_q4_k_only_targets_bad_ids_are_checked_in_q4_k_and_its_q8_0_ones_rejected():
    report = check(table_ends.q4_k_only, "quantized_lookup", framework="numpy")
    found = by_name(report)
    for name in BAD:
        line = found[name]
        assert line.status == "conforms", line.detail
        assert line.detail.startswith("raises IndexError: token id out of range"), line.detail
        assert "(1 of 2 cases; rejected: Q8_0, token_ids [3, " in line.detail
        statuses = {case["label"].split(",")[0]: case["status"] for case in line.cases}
        assert statuses == {"Q8_0": "rejected", "Q4_K": "conforms"}
        q8_0 = next(case for case in line.cases if case["label"].startswith("Q8_0"))
        assert q8_0["detail"].startswith("rejects Q8_0, no bad id checked in it: raises ")


def test_a_target_reading_neither_bad_id_format_says_no_bad_id_was_checked():
    report = check(table_ends.q6_k_only, "quantized_lookup", framework="numpy")
    found = by_name(report)
    assert found["Q6_K rows"].status == "conforms"
    for name in BAD:
        assert found[name].status == "rejected", found[name].detail
        assert found[name].detail.startswith("rejects Q8_0, no bad id checked in it: raises ")
    lines = report.lines()
    assert not any(line.startswith("  ok   bad id") for line in lines), lines


def test_a_bad_ids_error_naming_a_format_the_target_reads_is_the_ids():
    report = check(table_ends.bound_named_by_format, "quantized_lookup", framework="numpy")
    assert report.verdict == "CONFORMS", report.lines()
    for name in BAD:
        line = by_name(report)[name]
        assert line.status == "conforms" and line.detail.endswith("(2 cases)"), line.detail
        assert all(case["status"] == "conforms" for case in line.cases)


def test_the_wrong_ports_are_right_away_from_the_tables_end():
    """Each wrong port is the right one on every row but its end's, so that its DIFFERS above
    is the end's alone."""
    rng = np.random.default_rng(0)
    token_table, position_table = rng.standard_normal((2, 64, 8)).astype(np.float32)
    right = numpy_targets.lookup(token_table, position_table, np.arange(1, 63), 0)
    for port in (table_ends.first_row_as_padding, table_ends.last_row_as_padding):
        np.testing.assert_array_equal(port(token_table, position_table, np.arange(1, 63), 0), right)
    blocks, inside = quantized.random_blocks("Q4_K", 64, 512, seed=0), np.arange(61)
    np.testing.assert_array_equal(
        table_ends.q4_k_tail_as_last_row(blocks, "Q4_K", inside),
        table_ends.q4_k_only(blocks, "Q4_K", inside),
    )
