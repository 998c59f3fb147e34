"""The matrix as a new user drives it (compare.py check --known): rows chosen by a pattern, a
row's line that says what failed, a difference next to 0 said as a difference, the engines'
rows that name their configuration, and one row held to another (--against ROW). The main
tier: in-process targets, and the rows that import NumPy, torch or JAX alone."""

import os
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import compare
from embedding_parity.conformance import check, known, numerics, runner
from embedding_parity.conformance.kinds import KINDS

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance_targets")
sys.path.insert(0, HERE)
import ports

NAMES = [r.name for r in known.ROWS]
LLAMA = "transformers rotary at llama-3.2-1b"


# --- --rows: a row's name, a glob or a part of names -------------------------------------


@pytest.mark.parametrize(
    "patterns, oracle",
    [
        (["*llama-3.2-1b"], lambda name: name.endswith("llama-3.2-1b")),
        (["VLLM GET_ROPE AT QWEN"], lambda name: "vllm get_rope at qwen" in name.lower()),
        (["jax x[ids]", "torch f.*"], lambda n: "JAX x[ids]" in n or n.startswith("torch F.")),
    ],
)
def test_rows_are_chosen_by_name_glob_or_part_in_any_case(patterns, oracle):
    assert [r.name for r in known.chosen(patterns)] == [n for n in NAMES if oracle(n)]


def test_an_exact_name_names_that_row_alone_not_its_rows_along_the_paths():
    holding = [n for n in NAMES if LLAMA in n]  # the row and its production paths
    assert len(holding) > 1 and [r.name for r in known.chosen([LLAMA])] == [LLAMA]
    assert [r.name for r in known.chosen([LLAMA.upper()])] == holding  # else a part of names


def test_a_pattern_that_names_no_row_is_one_line_listing_them(capsys):
    assert compare.main(["check", "--known", "--rows", "torch*", "nothing*"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("compare.py check: error: --rows 'nothing*' names no row (a row's")
    assert line.endswith("; ".join(repr(n) for n in NAMES))


# --- a row's line: what failed, not a bare NO --------------------------------------------


def test_a_rows_line_names_the_checks_that_fail_and_why():
    # Hugging Face's recipe (ports.rope) computes float64 in float32, and float32 conforms
    asked = ["rotation float64", "rotation float32", "long positions float64"]
    report = runner.run(ports.rope, "rope", checks=asked).record()
    line = known._progress_line({"name": "ports.rope", "report": report})
    assert line.startswith("  NO   ports.rope (")
    assert line.endswith("s): rotation float64, long positions float64: computed in float32")
    right = runner.run(ports.rope, "rope", checks=["rotation float32"]).record()
    assert known._progress_line({"name": "ports.rope", "report": right}).endswith(" s)")


def test_a_rows_line_names_three_failures_and_counts_the_rest():
    checks = [
        {"check": f"check {i}", "status": "differs", "detail": f"case {i}: mistake {i % 4}"}
        for i in range(6)
    ]
    said = known.what_failed({"verdict": "DIFFERS", "checks": checks})
    expected = "check 0, check 4: mistake 0; check 1, check 5: mistake 1; check 2: mistake 2"
    assert said == f"{expected}; 1 more failing"  # check 3's mistake 3


def test_a_row_that_fails_no_check_but_answers_none_says_its_verdict():
    # every dtype refused: no check differs, and no valid case was answered
    refused = runner.run(ports.rope_float32_only, "rope", checks=["rotation float16"]).record()
    assert known.what_failed(refused) == "no verdict"


# --- a difference where the reference is about 0 -----------------------------------------

REFERENCE = np.array([[2.3, 0.0, 1.0], [1e-12, -0.5, 3.0]])


def test_next_to_0_a_difference_is_said_with_the_scale_not_in_ulps():
    actual = REFERENCE.astype(np.float32)
    actual[0, 1] = 0.51
    said = numerics.distance(actual, REFERENCE, "float32")
    assert said == "0.51 at [0, 1], where the reference is 0 (its values reach 3)"
    # counted in ulps of the largest magnitude (3.0: 2**(1 - 23)), not of 0's subnormal spacing
    size, where = numerics.ulps(actual, REFERENCE, "float32")
    assert (size, where) == (float(np.float32(0.51)) / 2.0 ** (1 - 23), (0, 1))
    first = numerics.mismatch(actual, REFERENCE.astype(np.float32), "float32")
    assert first["index"] == [0, 1] and first["scale"] == 3.0 and first["ulps"] == size


def test_below_one_ulp_of_the_largest_value_is_about_0():
    eps = float(ml_dtypes.finfo(np.float32).eps)
    assert 1e-12 < eps * 3.0  # the reference's 1e-12 is below one ulp of its 3.0
    actual = REFERENCE.astype(np.float32)
    actual[1, 0] = 1e-7
    said = numerics.distance(actual, REFERENCE, "float32")
    assert said == "1e-07 at [1, 0], where the reference is 1e-12 (about 0: its values reach 3)"


def test_elsewhere_the_ulps_are_counted_at_the_value():
    actual = REFERENCE.astype(np.float32)
    actual[1, 1] = -0.5 - 2 * 2.0**-24  # two ulps of 0.5 in float32 (2**(-1 - 23) each)
    assert numerics.distance(actual, REFERENCE, "float32") == "2 ulp at [1, 1]"
    assert "scale" not in numerics.mismatch(actual, REFERENCE.astype(np.float32), "float32")


def lookup_with_a_zero(token_table, position_table, token_ids, start):
    """ports.lookup with its first element 0: where it is held to, its answer is 0 there."""
    x = ports.lookup(token_table, position_table, token_ids, start)
    x.reshape(-1)[0] = 0.0
    return x


def test_a_port_held_to_a_0_says_the_difference_and_the_others_scale():
    report = check(
        ports.lookup,
        "lookup",
        checks=["forward float32"],
        against=lookup_with_a_zero,
        invariances=False,
    )
    forward = report.checks[0]
    case = runner.select_cases("lookup", checks=["forward float32"])[0]
    right = ports.lookup(*KINDS["lookup"].arguments(case.params))
    index = [0] * right.ndim
    theirs = lookup_with_a_zero(*KINDS["lookup"].arguments(case.params))
    name = runner.name_of(lookup_with_a_zero)
    assert forward.status == "differs", forward
    assert (
        f"1 of {right.size} elements differ from {name} in their bits, at most "
        f"{abs(float(right.flat[0])):.3g} at {index}, where {name} is 0 (its values reach "
        f"{np.abs(theirs).max():.3g}): "
    ) in forward.detail


# --- the engines' rows name their configuration ------------------------------------------


def test_the_engines_textbook_rows_name_the_configuration_they_run_at():
    rope = KINDS["rope_invariance"].cases({})[0].params["rope"]  # the kind's own rotation
    said = f"at base {rope['base']:g}, head_dim {rope['head_dim']}"
    rows = [
        r
        for r in known.ROWS
        if r.kind == "rope_invariance" and r.target.startswith(("vllm_layers", "sglang_layers"))
    ]
    assert len(rows) == 3 and all(said in r.name and r.preset is None for r in rows), rows
    adapters = pathlib.Path(known.__file__).parent / "adapters"
    for row in rows:  # the adapter's own base and the dtype its shared instance is built in
        module, _, function = row.target.partition(":")
        source = (adapters / f"{module}.py").read_text(encoding="utf-8")
        body = source.split(f"def {function}(")[1].split("\ndef ")[0]
        assert f'"base": {rope["base"]}' in body, row
        if row.target.endswith("_shared"):
            assert "float32 instance" in row.name and "torch.float32 if shared" in source, row


# --- one row held to another -------------------------------------------------------------

SUITE = "embedding-parity numpy (lookup)"
IDIOM = "NumPy: table[ids] + positions"


def test_a_row_held_to_another_is_bit_identical_where_their_answers_are(capsys):
    code = compare.main(["check", "--known", "--rows", SUITE, "--against", IDIOM])
    out = capsys.readouterr().out
    assert code == 0, out
    header = f"held to {IDIOM} (lookup; numpy {np.__version__}), each case bit for bit in its"
    assert out.startswith(f"{header} dtype: 1 row\n")
    assert f"  ok   {SUITE}, held to {IDIOM} (" in out
    assert "forward float32" in out and "bit-identical to " in out and "[contract: ok, ok]" in out
    assert "| implementation |" not in out  # the rows held, not the matrix against the contract


def test_a_row_held_to_another_still_answers_its_bad_ids_to_the_contract(capsys):
    # NumPy's indexing wraps id -1 to the last row: no result to match, the contract judges it
    assert compare.main(["check", "--known", "--rows", IDIOM, "--against", SUITE]) == 1
    out = capsys.readouterr().out
    assert f"  NO   {IDIOM}, held to {SUITE} (" in out and "bad id: -1: wraps to row 63" in out


def test_rows_held_to_another_in_other_bits_say_how_many_differ():
    # NumPy's float32 cos and sin and XLA's are different approximations: 220 of 768 elements
    # differ on an AVX-512 machine. (Rounded to float16 the two agreed there, and differed on
    # another machine: NumPy picks its SIMD sin and cos by the CPU it finds.)
    numpy_rope, jax_rope = "embedding-parity numpy (rope)", "embedding-parity jax (rope)"
    matrix = known.run([numpy_rope], against=jax_rope, only={numpy_rope: ["rotation float32"]})
    [record] = matrix["rows"]
    assert record["against"] == jax_rope
    [rotation] = record["report"]["checks"]
    assert rotation["status"] == "differs", rotation
    assert " elements differ from embedding_parity.conformance.adapters.suite:rope in " in (
        rotation["detail"]
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--against", "embedding-parity"], "--against 'embedding-parity' names "),
        (
            ["--rows", "torch nn.Embedding", "--against", "embedding-parity numpy (rope)"],
            "--against 'embedding-parity numpy (rope)' runs rope, and no other row chosen does",
        ),
        (
            ["--against", "JAX x[ids] through jax.jit"],
            "--against 'JAX x[ids] through jax.jit' runs along jax.jit, which its own report",
        ),
        (["--against", SUITE, "--markdown", "docs/conformance.md"], "--markdown draws the matrix"),
        (["--against", SUITE, "--against-framework", "numpy"], "--against-framework does not go"),
    ],
)
def test_a_row_that_cannot_be_held_is_one_line_before_any_runs(capsys, argv, message):
    assert compare.main(["check", "--known", *argv]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"compare.py check: error: {message}"), line
