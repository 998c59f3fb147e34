"""The kit where porting happens: check() and assert_conforms() on a callable, what is
expected, one port held to another (--against), and the pytest plugin in a throwaway project."""

import functools
import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import compare
from embedding_parity.cli import UsageError
from embedding_parity.conformance import api, assert_conforms, check, process, runner
from embedding_parity.conformance import report as reports
from embedding_parity.conformance.api import UnmatchedExpectation
from embedding_parity.conformance.kinds import KINDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "tests", "conformance_targets")
sys.path.insert(0, HERE)
import ports

PORTS = os.path.join(HERE, "ports.py")
FLOAT64 = {"rotation float64": "computes in float32", "long positions float64": "float32 too"}


def test_a_callable_is_checked_in_process_and_the_report_is_data():
    report = check(ports.rope, "rope", dtypes=["float32", "bfloat16"])
    assert report.conforms
    asked = [c.check for c in KINDS["rope_invariance"].cases({})]  # in float32, asked too
    assert [c.check for c in report.checks] == [
        "rotation float32",
        "long positions float32",
        "rotation bfloat16",
        "long positions bfloat16",
        *asked,
    ]
    assert report.target == "ports.rope" and report.framework == "numpy"
    record = json.loads(json.dumps(report.record(), allow_nan=False))
    assert record["schema_version"] == reports.SCHEMA_VERSION
    assert {"check", "status", "detail", "ulps", "mismatch", "reason"} <= set(record["checks"][0])
    assert record["invariances"] == {"kind": "rope_invariance", "asked": asked}


def test_a_float32_port_differs_in_float64_unless_that_is_expected():
    report = check(ports.rope, "rope")
    assert not report.conforms
    assert {c.check for c in report.checks if c.status == "differs"} == set(FLOAT64)
    assert "computed in float32" in report.checks[0].detail
    report = check(ports.rope, "rope", expected=FLOAT64)
    assert report.conforms
    assert [c.status for c in report.checks[:2]] == ["expected", "expected"]
    assert report.checks[0].reason == "computes in float32"


def test_a_stale_expectation_is_reported_and_fails_under_strict():
    stale = {**FLOAT64, "rotation float32": "once off by one"}
    report = check(ports.rope, "rope", expected=stale)
    fixed = next(c for c in report.checks if c.check == "rotation float32")
    assert fixed.status == "fixed" and report.conforms
    assert "expected to differ, but conforms (once off by one)" in "\n".join(report.lines())
    assert not check(ports.rope, "rope", expected=stale, strict=True).conforms


def test_an_expectation_that_names_no_check_is_a_warning():
    with pytest.warns(UnmatchedExpectation, match="'rotation float128' matches no check"):
        report = check(ports.rope, "rope", expected={**FLOAT64, "rotation float128": "typo"})
    assert report.unmatched == ["rotation float128"]
    assert "warning: --expect 'rotation float128' matches no check" in report.lines()


def test_assert_conforms_names_the_first_mismatch_in_numbers_and_bits():
    with pytest.raises(AssertionError) as raised:
        assert_conforms(ports.lookup_one_ulp, "lookup", dtypes=["float32"])
    message = str(raised.value)
    cases = runner.select_cases("lookup", dtypes=["float32"])
    case = next(c for c in cases if c.params["shape"] == (3, 5) and not c.params["start"])
    expected = ports.lookup(*KINDS["lookup"].arguments(case.params))[1, 2, 3]
    up = np.nextafter(expected, np.float32(np.inf))
    assert "forward float32 (differs): 2-D ids, start 0: " in message
    assert "ulp at [1, 2, 3]" in message  # from the float64 reference: 1 ulp of the rounded one
    assert (
        f"first mismatch at [1, 2, 3]: {float(up)!r} (0x{int(up.view(np.uint32)):08x}) where "
        f"{float(expected)!r} (0x{int(expected.view(np.uint32)):08x}) is expected, 1 ulp"
    ) in message
    assert (
        f"reproduce: python -m embedding_parity check {PORTS}:lookup_one_ulp --kind lookup "
        "--only 'forward float32'"
    ) in message


@pytest.mark.parametrize(
    "target, shown",
    [
        (ports.lookup_negative_zero, "-0.0 (0x80000000, a negative zero)"),
        (ports.lookup_nan, "nan (0x7fc00123, quiet, payload 0x123)"),
    ],
)
def test_the_sign_of_a_zero_and_a_nan_payload_are_named(target, shown):
    with pytest.raises(AssertionError, match="first mismatch at \\[0, 0\\]: ") as raised:
        assert_conforms(target, "lookup", dtypes=["float32"])
    assert shown in str(raised.value)


def test_a_port_held_to_its_source_is_bit_identical_or_one_ulp_at_its_index():
    held = {"against": ports.rope, "invariances": False}  # the contract's cases, one by one
    same = check(ports.rope_same, "rope", **held)
    assert not same.conforms  # as wrong as its source in float64 (test_battery_integrity.py)
    same = check(ports.rope_same, "rope", expected=FLOAT64, **held)
    assert same.conforms
    assert all("bit-identical to ports.rope" in c.detail for c in same.checks)
    # both compute in float32: their float64 cases differ from the contract, not each other
    assert [c["status"] for c in same.against["own"]][:2] == ["differs", "differs"]
    off = check(ports.rope_one_ulp, "rope", dtypes=["float32"], **held)
    first = off.checks[0]
    assert first.status == "differs" and off.checks[1].status == "conforms"
    assert first.detail.endswith(
        first.mismatch["actual"] + " where ports.rope gives " + first.mismatch["expected"]
    )
    assert (
        "1 of 768 elements differ from ports.rope in their bits, at most 1 ulp at [1, 2, 3]"
        in (first.detail)
    )
    assert first.mismatch["index"] == [1, 2, 3] and first.mismatch["ulps"] == 1.0


def test_a_bad_id_is_held_to_the_contract_against_another():
    report = check(ports.lookup, "lookup", against=ports.lookup_negative_zero)
    bad = [c for c in report.checks if c.check.startswith("bad id")]
    assert bad and all(c.status == "conforms" for c in bad)
    forward = next(c for c in report.checks if c.check == "forward float32")
    assert forward.status == "differs" and "0x80000000" in forward.detail


def test_isolate_runs_an_importable_callable_in_the_worker():
    report = check(ports.rope, "rope", isolate=True, checks=["rotation float32"])
    assert report.conforms and report.target == f"{PORTS}:rope"
    with pytest.raises(ValueError, match="isolate=True runs the target in a worker"):
        check(lambda x, p: x, "rope", isolate=True)


def run_check(capsys, *flags):
    code = compare.main(["check", *flags])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture(scope="module")
def ports_worker():
    """One worker process for the command-line checks of ports.py that are about the command
    line, not the worker (a fresh one for each costs its start): each loads its target into it
    as into a fresh one, the way a matrix's rows share a worker. --against starts its own."""
    with process.Worker({}) as worker:
        yield worker


@pytest.fixture
def shared(capsys, monkeypatch, ports_worker):
    """``run_check``, its target run in the module's ports.py worker."""
    monkeypatch.setattr(runner, "run", functools.partial(runner.run, worker=ports_worker))
    return functools.partial(run_check, capsys)


def test_the_command_line_says_what_is_expected(shared, tmp_path):
    target = f"{PORTS}:rope"
    rope = ["--kind", "rope", "--dtypes", "float64,float32", "--no-invariances"]
    code, out = shared(target, *rope)
    assert code == 1 and "DIFFERS" in out
    expect = ["--expect", "rotation float64=computes in float32", "--expect", "long*64=same"]
    code, out = shared(target, *rope, *expect)
    assert code == 0, out
    assert "  xf   rotation float64  " in out and "expected (computes in float32)" in out
    listed = tmp_path / "expected.txt"
    listed.write_text("# float32 inside\n* float64 = computes in float32\nrotation float32=stale\n")
    flags = [target, *rope, "--expect-file", str(listed)]
    code, out = shared(*flags)
    assert code == 0 and "  XP   rotation float32" in out
    code, out = shared(*flags, "--strict", "--json", str(tmp_path / "r.json"))
    assert code == 1
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["schema_version"] == 1 and record["strict"] is True
    assert [c["status"] for c in record["checks"]] == ["expected", "expected", "fixed", "conforms"]
    code, out = shared(target, "--kind", "rope", "--expect", "no equals sign")
    assert code == 2 and "must be CHECK=REASON" in out


def test_the_command_line_holds_one_port_to_another(shared):
    flags = ["--kind", "rope", "--dtypes", "float32", "--against", f"{PORTS}:rope"]
    code, out = shared(f"{PORTS}:rope_same", *flags)
    assert code == 0, out
    assert "bit-identical to" in out and "[contract: ok, ok]" in out
    code, out = shared(f"{PORTS}:rope_one_ulp", *flags)
    assert code == 1 and "at most 1 ulp at [1, 2, 3]" in out


def test_the_plugin_imports_no_framework_and_is_registered():
    code = (
        "import sys, importlib.metadata as m; import embedding_parity.pytest_plugin; "
        "print(sorted(n for n in ('numpy', 'torch', 'jax', 'embedding_parity.conformance') "
        "if n in sys.modules)); "
        "print([e.value for e in m.entry_points(group='pytest11') if e.name == 'embedding_parity'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "['embedding_parity.pytest_plugin']"]


THROWAWAY = """
from embedding_parity.conformance import parametrize_with_checks
from ports import rope, rope_off_by_one

EXPECTED = {{
    "rotation float64": "computes in float32",
    "long positions float64": "computes in float32",
    "long positions float32": "fixed long ago",
    "rotation float128": "a typo",
}}


@parametrize_with_checks([rope, rope_off_by_one], kind="rope", dtypes=["float64", "float32"],
                         invariances=False, expected_failed_checks=EXPECTED{strict})
def test_rope(implementation, check):
    check(implementation)
"""


# The venv's other pytest plugins, nothing to do with a port's project: each of the three
# processes below would import Hypothesis (a second of CPU) for nothing.
UNRELATED = ["-p", "no:hypothesispytest", "-p", "no:anyio", "-p", "no:jaxtyping"]


def throwaway(pytester, strict: str) -> None:
    """A project of its own: the ports module and a test file that checks two of them."""
    with open(PORTS, encoding="utf-8") as file:
        pytester.makepyfile(ports=file.read(), test_port=THROWAWAY.format(strict=strict))
    pytester.syspathinsert()


def test_the_decorator_gives_one_test_per_check_in_a_throwaway_project(pytester):
    """Under pytest-xdist, as a port's CI runs it: the workers collect the same ids."""
    throwaway(pytester, "")
    flags = ["-p", "no:cacheprovider", "-rxXf", "--junitxml=junit.xml", *UNRELATED]
    result = pytester.runpytest_subprocess("-n", "2", *flags)
    # rope: float64 as expected, rotation float32 conforms, long positions float32 XPASS;
    # rope_off_by_one: every check differs, rotation float32 unexpectedly; the stale entry's
    # warning once per implementation in each worker's collection
    result.assert_outcomes(passed=1, failed=1, xfailed=5, xpassed=1, warnings=4)
    result.stdout.fnmatch_lines(
        [
            "*rotation float32 (differs): *positions off by +1*",
            "*worst mismatch at *",  # a rotation: the element furthest outside its bound
            "*reproduce: python -m embedding_parity check *ports.py:rope_off_by_one --kind rope*",
        ]
    )
    result.stdout.fnmatch_lines(["*'rotation float128' matches no check of rope*"])
    result.stdout.fnmatch_lines(
        ["XPASS test_port.py::test_rope?rope-long_positions_float32? - fixed long ago"]
    )
    assert 'name="test_rope[rope-rotation_float64]"' in (pytester.path / "junit.xml").read_text()
    collected = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [line for line in collected.stdout.lines if "::" in line]
    assert ids == [
        f"test_port.py::test_rope[{name}-{check}]"
        for name in ("rope", "rope_off_by_one")
        for check in (
            "rotation_float64",
            "long_positions_float64",
            "rotation_float32",
            "long_positions_float32",
        )
    ]


def test_strict_makes_a_stale_expectation_a_failure(pytester):
    throwaway(pytester, ", strict=True")
    # the plugin registers the marker every test carries: -m selects them, strictly
    flags = ["-m", "conformance", "--strict-markers", "-k", "rope-"]
    result = pytester.runpytest("-p", "no:cacheprovider", *flags)
    result.assert_outcomes(passed=1, failed=1, xfailed=2, warnings=2)
    result.stdout.fnmatch_lines(["*XPASS(strict)*fixed long ago*"])


def test_the_shapes_ports_call_with():
    batched = check(
        ports.rope_batched, "rope", batched=True, head_dim=64, dtypes=["float32"], invariances=False
    )
    assert batched.conforms, batched.lines()
    assert [c.check for c in batched.checks] == [
        "packed batch float32",
        "left-padded batch float32",
        "long positions float32",
    ]
    assert "x (2, 3, 16, 64)" in batched.checks[0].cases[0]["label"]
    both = check(ports.rope_qk, "rope", batched=True, qk=True, dtypes=["float32"])
    assert both.conforms, both.lines()
    wrong = check(ports.rope, "rope", batched=True, dtypes=["float32"])  # (T,) positions only
    assert not wrong.conforms


def test_the_command_line_takes_the_shapes_and_a_pair_comes_back_from_the_worker(shared):
    flags = ["--kind", "rope", "--batched", "--qk", "--head-dim", "8", "--dtypes", "bfloat16"]
    code, out = shared(f"{PORTS}:rope_qk", *flags)
    assert code == 0, out
    assert "f(q, k, positions)" in out
    code, out = shared(f"{PORTS}:lookup", "--kind", "rope", "--table", "5,4,8")
    assert code == 2 and "--table goes with --kind lookup or lookup_invariance, not rope" in out
    code, out = shared(f"{PORTS}:lookup", "--kind", "lookup", "--table", "50,4,8")
    assert code == 0, out
    assert "bad id: vocab_size" in out


def test_a_port_is_held_to_hugging_face_at_a_config_in_one_line(capsys):
    port = f"{HERE}/torch_ports.py:llama_rope_unscaled"
    flags = ["--kind", "rope", "--model", "llama-3.2-1b", "--against", "hf", "--dtypes", "float32"]
    code, out = run_check(capsys, port, *flags)
    assert code == 1
    assert "against hf (torch, Hugging Face transformers" in out
    assert "elements differ from hf in their bits, at most" in out and "[contract: NO, ok]" in out
    assert "against the contract: " in out and "llama3 scaling ignored" in out


def test_where_the_other_gives_no_result_the_contract_judges():
    report = check(
        ports.rope_wrong_in_float16,
        "rope",
        dtypes=["float32", "float16"],
        against=ports.rope_float32_only,
    )
    assert not report.conforms
    float16 = next(c for c in report.checks if c.check == "rotation float16")
    assert float16.status == "differs"
    assert "ports.rope_float32_only raises TypeError: only float32" in float16.detail
    assert "positions off by +1" in float16.detail


def test_a_check_of_a_refused_dtype_is_skipped_not_failed(pytester):
    with open(PORTS, encoding="utf-8") as file:
        pytester.makepyfile(
            ports=file.read(),
            test_port="""
from embedding_parity.conformance import parametrize_with_checks
from ports import rope_float32_only

@parametrize_with_checks([rope_float32_only], kind="rope", checks=["rotation float32", "rotation float16"])
def test_rope(implementation, check):
    check(implementation)
""",
        )
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*rotation float16: rejects float16: TypeError: only float32*"])


@pytest.mark.parametrize(
    "kwargs, said",
    [
        ({"head_dim": 0}, "head_dim 0 is not an even integer of at least 2"),
        ({"table": (3, 8, 16)}, "table= goes with kind lookup or lookup_invariance, not rope"),
        ({"padding_idx": 0}, "padding_idx= goes with kind gradient, not rope"),
        ({"framework": "tf"}, "framework='tf': choose from numpy, torch, jax"),
        ({"timeout": 0}, "timeout=0: seconds per case"),
        ({"expected": ["rotation float64"]}, "expected differences must be a dict"),
        ({"config": 123}, "config=123: a config.json or .gguf path"),
        ({"dtypes": ["float8"]}, "dtype 'float8' is not one the kit tries"),
        ({"dtype": ["float32"]}, "check() takes no dtype=: did you mean dtypes=?"),  # no default
        ({"only": ["rotation float32"]}, "--only is checks= in Python"),
        ({"layer_type": "sliding"}, "--layer-type is layer= in Python (layer='sliding')"),
    ],
)
def test_bad_arguments_to_check_are_one_line(kwargs, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        check(ports.rope, "rope", **kwargs)


def test_check_takes_the_settings_a_contract_has():
    gradient = check(ports.lookup, "lookup", table=(100, 4, 8), dtypes=["float32"])
    assert gradient.conforms
    with pytest.raises(ValueError, match="kind 'ropee' is not one of"):
        check(ports.rope, "ropee")


def test_a_preset_is_config_everywhere_and_model_is_answered_with_it():
    """One spelling: config= takes a preset's name as it takes a path; model=, the command
    line's --model, is refused naming config= by check, assert_conforms and the decorator."""
    from embedding_parity import configs
    from embedding_parity.conformance import parametrize_with_checks

    preset = configs.preset("llama-3.1-8b").options("rope", "config", None)
    assert api.configured("llama-3.1-8b", "rope") == preset
    said = "no model=: the command line's --model is config= in Python (config='llama-3.1-8b')"
    for call in (
        functools.partial(check, ports.rope, "rope"),
        functools.partial(assert_conforms, ports.rope, "rope"),
        functools.partial(parametrize_with_checks, [ports.rope], kind="rope"),
    ):
        with pytest.raises(UsageError, match=re.escape(said)):
            call(model="llama-3.1-8b")


def test_an_expected_entry_names_a_check_by_its_test_id_and_is_not_stale_when_filtered():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check(ports.rope, "rope", dtypes=["float64"], expected={"rotation_float64": "f32"})
        filtered = check(ports.rope, "rope", dtypes=["float32"], expected=FLOAT64)
    assert report.checks[0].status == "expected" and filtered.unmatched == []


def test_reproduce_says_every_setting_of_the_call():
    line = api.reproduce(
        ports.rope,
        "rope",
        "rotation float32",
        {"base": 500000.0, "against": ports.rope_same, "head_dim": 32, "batched": True},
    )
    assert line == (
        f"python -m embedding_parity check {PORTS}:rope --kind rope --only 'rotation float32' "
        f"--against {PORTS}:rope_same --base 500000.0 --head-dim 32 --batched"
    )
    inline = api.reproduce(lambda x, p: x, "rope", "rotation float32", {"against": ports.rope})
    assert inline == "check(<lambda>, 'rope', checks=['rotation float32'], against=rope)"


def test_against_names_a_zeros_sign_where_it_is_the_only_difference():
    report = check(
        ports.lookup_negative_signed_zero,
        "lookup",
        dtypes=["float32"],
        against=ports.lookup_signed_zero,
    )
    forward = report.checks[0]
    assert forward.status == "differs" and forward.mismatch["index"] == [0, 2]
    assert forward.mismatch["actual"] == "-0.0 (0x80000000, a negative zero)"
    assert forward.mismatch["expected"] == "+0.0 (0x00000000, a positive zero)"
    assert "in their bits, at most 0 ulp at [0, 2]" in forward.detail


def test_against_compares_integers_by_value_and_refuses_what_is_not_a_number():
    padded = "HF's rule for a padded batch, where the contract's default is arange"
    padded = {"position ids, left padding*": padded, "position ids, right padding": padded}
    same = check(
        ports.positions_int32, "position_ids", against=ports.positions_int64, expected=padded
    )
    assert same.conforms  # int32 and int64 of the same values: the contract takes any integers
    assert all("the same integers as ports.positions_int64" in c.detail for c in same.checks)
    odd = check(ports.rope_complex, "rope", dtypes=["float32"], against=ports.rope_complex)
    assert odd.checks[0].status == "differs"
    assert "returns complex64, where the contract is in a float dtype" in odd.checks[0].detail


def test_only_with_a_checks_whole_name_runs_that_check_alone(shared):
    code, out = shared(f"{PORTS}:lookup", "--kind", "lookup", "--only", "forward float32")
    assert code == 0 and "1 of 1 check conforms" in out
    code, out = shared(f"{PORTS}:lookup", "--kind", "lookup", "--only", "bad id")
    assert "4 of 4 checks conform" in out


def test_a_crash_fails_its_test_even_where_a_difference_is_expected(pytester):
    with open(PORTS, encoding="utf-8") as file:
        pytester.makepyfile(
            ports=file.read(),
            test_port="""
from embedding_parity.conformance import parametrize_with_checks
from ports import rope_dies_in_float64

CALLS = []

@parametrize_with_checks(
    ["ports.py:rope_dies_in_float64"],
    kind="rope",
    checks=["rotation float64", "rotation float32", "long positions float32"],
    expected_failed_checks={"rotation float64": "float32 inside"},
)
def test_rope(implementation, check):
    check(implementation)
""",
        )
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*rotation float64 (failed): *the call died (exit status 3)*"])


def test_an_expect_file_that_is_no_regular_file_is_one_line(capsys, tmp_path):
    for path, said in ((tmp_path, "is not a regular file"), (tmp_path / "none", "cannot be read")):
        code, out = run_check(capsys, f"{PORTS}:rope", "--kind", "rope", "--expect-file", str(path))
        assert code == 2 and f"--expect-file {path} {said}" in out and len(out.splitlines()) == 1


@pytest.mark.parametrize("base", [1e-300, 1.0, 0.5])
def test_a_base_at_or_below_one_is_refused_not_judged(base):
    """At 1e-300 every frequency overflowed, the reference was NaN, and a port CONFORMED."""
    with pytest.raises(UsageError, match=f"base= {base!r}: must be finite and above 1"):
        check(ports.rope, "rope", base=base)
