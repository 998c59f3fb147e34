"""A verdict needs evidence: a kind conforms only where a valid case was answered and held to
its contract; a refusal counts only where the error names the dtype (or the format) refused;
the batteries read what they claim (a quantized table's upper half, its last row, rows of an
odd number of blocks; packed documents past int8's and int16's range); and a bound as wide as
the values it judges says so instead of passing everything."""

import json

import numpy as np
import pytest

import backends
import compare
from backends import positional, quantized
from embedding_parity.conformance import assert_conforms, cases, check, runner
from embedding_parity.conformance.kinds import KINDS, Outcome
from embedding_parity.conformance.kinds.base import DTYPE_NAMES, names
from embedding_parity.conformance.kinds.sinusoidal import Sinusoidal

NUMPY = backends.get("numpy")


def raises_always(*arguments):
    raise RuntimeError("out of memory")


def refuses_everything(*arguments):
    """A target that raises on every call, naming each case's dtype (or format): every
    refusal legitimate, and not one answer."""
    first = arguments[0]  # a table, or quantized_lookup's blocks and then its format
    raise TypeError(f"{arguments[1] if first.dtype == np.uint8 else first.dtype} is not supported")


def lookup(token_table, position_table, token_ids, start):
    return NUMPY.TokenPositionEmbedding(token_table, position_table)(token_ids, start=start)


def lookup_without_bfloat16(token_table, position_table, token_ids, start):
    """Right, but refusing bfloat16 as torch says it: a legitimate refusal."""
    if token_table.dtype.name == "bfloat16":
        raise TypeError("\"index_select_out_cpu_\" not implemented for 'BFloat16'")
    return lookup(token_table, position_table, token_ids, start)


# --- refusals: a dtype or a format the error names --------------------------------------


@pytest.mark.parametrize(
    "kind, settings",
    [
        ("quantized_lookup", {}),
        ("lookup", {"dtypes": ["float16", "bfloat16"]}),
        ("gradient", {"dtypes": ["bfloat16"]}),
        ("scaled_inputs", {"dtypes": ["float16"], "config": "gemma-2-2b"}),
        ("bert", {"dtypes": ["float64"]}),
    ],
)
def test_a_target_that_raises_on_every_call_differs(kind, settings):
    report = check(raises_always, kind, framework="numpy", **settings)
    assert report.verdict == "DIFFERS", report.lines()
    valid = [c for c in report.checks if c.valid]
    assert valid and all(c.status == "differs" for c in valid), report.lines()
    refused = "format" if kind == "quantized_lookup" else "dtype"
    assert all(f"is no refusal of the {refused}" in c.detail for c in valid)
    bad = [c for c in report.checks if not c.valid]
    assert all(c.status == "conforms" for c in bad)  # a bad id that raises is still right


@pytest.mark.parametrize(
    "kind, settings",
    [("quantized_lookup", {}), ("lookup", {"dtypes": ["float16", "bfloat16"]})],
)
def test_refusals_alone_are_no_verdict(kind, settings):
    report = check(refuses_everything, kind, framework="numpy", **settings)
    assert report.accepted and report.verdict == "NO VERDICT" and not report.conforms
    assert all(c.status == "rejected" for c in report.checks if c.valid)
    assert report.lines()[-2].startswith("no verdict: not one valid case was answered")
    assert report.record()["verdict"] == "NO VERDICT" and not report.record()["conforms"]
    with pytest.raises(AssertionError, match="no verdict: not one valid case was answered"):
        assert_conforms(refuses_everything, kind, framework="numpy", **settings)


def test_bad_ids_alone_are_no_verdict():
    report = check(lookup, "lookup", checks=["bad id: -1"])
    assert report.verdict == "NO VERDICT"
    assert "only bad ids were tried" in report.unanswered()


def test_differences_all_expected_are_no_verdict():
    def zeros(token_table, position_table, token_ids, start):
        rows = lookup(token_table, position_table, token_ids, start)  # a bad id raises
        return np.zeros_like(rows)

    # the contract alone (its invariances conform for a stub too, and are no evidence of it)
    report = check(
        zeros, "lookup", framework="numpy", expected={"forward *": "a stub"}, invariances=False
    )
    assert all(c.status == "expected" for c in report.checks if c.valid)
    assert report.verdict == "NO VERDICT" and "forward float32: expected" in report.unanswered()


def test_a_dtype_refused_by_name_is_rejected_and_the_rest_conforms():
    report = check(lookup_without_bfloat16, "lookup", framework="numpy")
    found = {c.check: c for c in report.checks}
    assert found["forward bfloat16"].status == "rejected"
    assert "not implemented for 'BFloat16'" in found["forward bfloat16"].detail
    assert report.conforms and report.verdict == "CONFORMS"


@pytest.mark.parametrize(
    "text, dtype",
    [
        ("not implemented for 'Half'", "float16"),
        ("not implemented for 'BFloat16'", "bfloat16"),
        ("Could not find an implementation for tensor(double)", "float64"),
        ("ggml_rope_ext takes float32 or float16, not bf16", "bfloat16"),
    ],
)
def test_an_error_names_its_dtype_in_the_frameworks_words(text, dtype):
    assert names(text, DTYPE_NAMES[dtype])


def test_bfloat16_is_not_float16():
    assert not names("not implemented for 'BFloat16'", DTYPE_NAMES["float16"])
    assert not names("bf16 only", DTYPE_NAMES["float16"])


@pytest.mark.parametrize(
    "text, dtype",
    [
        ("id 40 is in the upper half of the table", "float16"),
        ("Half of the rows are missing", "float16"),
        ("ids of double the expected length", "float64"),
    ],
)
def test_half_and_double_as_words_name_no_dtype(text, dtype):
    assert not names(text, DTYPE_NAMES[dtype])


def rope(x, positions):
    return positional.apply_rope(x, positions).astype(x.dtype)  # half layout, base 10000


def rope_half_long(x, positions):
    """Right, but raising in float16 past position 2048, naming the dtype: float16 answered
    in one check and refused in another is a hard case refused, not the dtype."""
    if x.dtype == np.float16 and np.max(positions) > 2048:
        raise RuntimeError("positions past 2048 not implemented for 'Half'")
    return rope(x, positions)


def test_a_dtype_answered_in_one_check_and_refused_in_another_differs():
    report = check(rope_half_long, "rope", framework="numpy", dtypes=["float16"])
    found = {c.check: c for c in report.checks}
    assert found["rotation float16"].status == "conforms", report.lines()
    assert found["long positions float16"].status == "differs", report.lines()
    assert (
        "raises on a valid float16 input, where it answered float16 in 'rotation float16'"
        in found["long positions float16"].detail
    )
    assert report.verdict == "DIFFERS"
    assert check(rope, "rope", framework="numpy", dtypes=["float16"]).conforms


def test_a_dtype_answered_in_one_check_fails_its_refused_test(pytester):
    pytester.makepyfile(
        test_port="""
import numpy as np
from embedding_parity.conformance import parametrize_with_checks
from tests.test_evidence import rope_half_long

@parametrize_with_checks([rope_half_long], kind="rope", framework="numpy", dtypes=["float16"])
def test_rope(implementation, check):
    check(implementation)
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*where it answered float16 in 'rotation float16'*"])


# --- the same, from files: --results ------------------------------------------------------


def _raised_folder(tmp_path, message):
    """The quantized battery exported, and a runner's .raised file for every case."""
    folder = tmp_path / "battery"
    selected = runner.select_cases("quantized_lookup", {})
    cases.export(str(folder), "quantized_lookup", {}, selected)
    with open(folder / "cases.json", encoding="utf-8") as file:
        manifest = json.load(file)
    for entry in manifest["cases"]:
        said = message(entry["params"]["format"])
        (folder / "results" / f"{entry['id']}.raised").write_text(said, encoding="utf-8")
    return str(folder)


def test_a_folder_of_raised_files_differs(tmp_path, capsys):
    folder = _raised_folder(tmp_path, lambda kind: "RuntimeError: out of memory")
    assert compare.main(["check", "--results", folder]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("DIFFERS")


def test_a_folder_of_named_refusals_is_no_verdict(tmp_path, capsys):
    folder = _raised_folder(tmp_path, lambda kind: f"NotImplementedError: {kind} is not read")
    assert compare.main(["check", "--results", folder]) == 3
    out = capsys.readouterr().out.splitlines()
    # the bad ids' errors name the formats refused too: no id was checked in them
    assert out[-1].startswith("NO VERDICT: 0 of 10 checks conform, 10 rejected")
    assert out[-2].startswith("no verdict: not one valid case was answered")


# --- under pytest ---------------------------------------------------------------------------


def test_a_battery_that_answered_nothing_fails_its_tests(pytester):
    pytester.makepyfile(
        test_port="""
from embedding_parity.conformance import parametrize_with_checks

def refuses(token_table, position_table, token_ids, start):
    raise TypeError(f"{token_table.dtype} is not supported")

@parametrize_with_checks([refuses], kind="lookup", framework="numpy", dtypes=["bfloat16"],
                         checks=["forward bfloat16", "bad id: -1"])
def test_lookup(implementation, check):
    check(implementation)
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*no verdict: not one valid case was answered*"])


# --- the quantized battery reads the whole table ------------------------------------------


def fetch(blocks, format, token_ids):
    """The suite's NumPy lookup of a quantized table: a right target. Every port below is
    it, but for one mistake, and refuses a bad id, so that only its rows are judged."""
    block_size, type_size = quantized.BLOCKS[format]
    table = quantized.QuantizedTable(format, blocks, blocks.shape[1] // type_size * block_size)
    return NUMPY.TokenPositionEmbedding(table, positions="none")(token_ids)


def above_half_from_below(blocks, format, token_ids):
    """An id past half the table fetched from the first half: its offset's top bit lost."""
    fetch(blocks, format, token_ids)  # a bad id raises
    return fetch(blocks, format, np.asarray(token_ids) % (len(blocks) // 2))


def last_row_refused(blocks, format, token_ids):
    """A bound checked with <= where < is meant: the last row refused."""
    if (np.asarray(token_ids) == len(blocks) - 1).any():
        raise IndexError(f"token id {len(blocks) - 1} out of range")
    return fetch(blocks, format, token_ids)


def last_row_zeroed(blocks, format, token_ids):
    rows = np.array(fetch(blocks, format, token_ids))
    rows[np.asarray(token_ids) == len(blocks) - 1] = 0.0
    return rows


def odd_block_dropped(blocks, format, token_ids):
    """A pairwise loop over a row's blocks with its tail forgotten: an odd row's last block
    left as the zeroed output had it."""
    rows = np.array(fetch(blocks, format, token_ids))
    block_size, type_size = quantized.BLOCKS[format]
    count = blocks.shape[1] // type_size
    if count % 2:
        rows[..., (count - 1) * block_size :] = 0.0
    return rows


@pytest.mark.parametrize(
    "port", [above_half_from_below, last_row_refused, last_row_zeroed, odd_block_dropped]
)
def test_a_fetch_wrong_past_the_first_half_or_rows_of_two_blocks_differs(port):
    report = check(port, "quantized_lookup", framework="numpy")
    found = {c.check: c for c in report.checks}
    assert report.verdict == "DIFFERS"
    for kind in quantized.KINDS:  # in every format
        assert found[f"{kind} rows"].status == "differs", found[f"{kind} rows"].detail
    assert all(found[c].status == "conforms" for c in found if c.startswith("bad id"))


def test_the_suites_quantized_lookup_conforms():
    report = check(fetch, "quantized_lookup", framework="numpy")
    assert report.conforms, report.lines()
    labels = [case["label"] for c in report.checks for case in c.cases]
    assert any("both halves and both ends" in label for label in labels)
    assert any("rows of 3 blocks" in label for label in labels)


# --- packed documents past int8 and int16 ------------------------------------------------


def packed(lengths, start):
    return positional.packed_position_ids(lengths, start=start)


def positions_in_int8(lengths, start):
    return packed(lengths, start).astype(np.int8)


def positions_in_int16(lengths, start):
    return packed(lengths, start).astype(np.int16)


def offsets_in_int16(lengths, start):
    """Each document's offset summed in int16, then subtracted from the row's count."""
    lengths = np.asarray(lengths)
    ends = np.cumsum(lengths.astype(np.int16), dtype=np.int16)
    offsets = np.repeat(np.concatenate([[0], ends[:-1]]).astype(np.int64), lengths)
    return start + np.arange(int(lengths.sum())) - offsets


@pytest.mark.parametrize(
    "port, name",
    [
        (positions_in_int8, "positions held in int8: they wrap past 127"),
        (positions_in_int16, "positions held in int16: they wrap past 32767"),
        (offsets_in_int16, "the documents' offsets summed in int16: they wrap past 32767"),
    ],
)
def test_packed_positions_held_in_a_small_integer_differ_by_name(port, name):
    report = check(port, "packed_positions", framework="numpy")
    assert report.verdict == "DIFFERS"
    for result in report.checks:  # from 0 and from 2
        assert result.status == "differs" and name in result.detail, result.detail
    assert check(packed, "packed_positions", framework="numpy").conforms


# --- a bound as wide as the values it judges ----------------------------------------------


class Loose(Sinusoidal):
    """The sinusoidal contract with its bound widened past the table's values, as a scaling
    factor of 1e-300 widens a rotation's."""

    def tolerance(self, params, dtype):
        return 1e300 * super().tolerance(params, dtype)


def test_a_bound_wider_than_the_values_says_it_cannot_judge():
    case = KINDS["sinusoidal"].cases({"base": 10000.0})[0]
    table = np.asarray(NUMPY.sinusoidal_table(*Loose().arguments(case.params), dtype="float32"))
    zeros = np.zeros_like(table)
    loose = Loose().judge(case, Outcome(array=zeros))
    assert loose.status == "failed"
    assert "cannot judge it" in loose.detail and "as wide as the largest value" in loose.detail
    assert KINDS["sinusoidal"].judge(case, Outcome(array=zeros)).status == "differs"
    assert KINDS["sinusoidal"].judge(case, Outcome(array=table)).status == "conforms"


def test_the_batteries_bounds_are_far_narrower_than_their_values():
    """A right rotation's bound, at bfloat16 and position 131071, is a few percent of the
    values: the guard above never touches a battery of the kit's own."""
    rope = KINDS["rope"]
    for case in rope.cases({"base": 10000.0}):
        reference = rope.reference(case.params)
        bound = np.max(rope.tolerance(case.params, case.params["dtype"]))
        assert bound < 0.1 * np.abs(reference).max(), case.label
