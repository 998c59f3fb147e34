"""check --through: a target run the way production runs it (compiled, exported and run by the
exporter's runtime), each case eagerly too, and what the path changes named as the path's.

Each test runs the few checks it is about (a torch.compile signature costs a C++ compilation,
an ONNX one an export): the matrix (test_conformance_known.py) holds the rows' whole findings."""

import os
import subprocess
import sys

import numpy as np
import pytest

import compare
from embedding_parity.conformance import api, paths, process, runner
from embedding_parity.conformance import report as reports

pytestmark = pytest.mark.matrix  # the second tier: make conformance-test
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCTION = os.path.join(ROOT, "tests", "conformance_targets", "production.py")


def target(name: str) -> str:
    return f"{PRODUCTION}:{name}"


def checks_of(report) -> dict:
    return {c.check: c for c in report.checks}


@pytest.fixture(scope="module")
def worker():
    """One worker for the targets, as the matrix shares one: torch, JAX, torch's exporter and
    ONNX Runtime are imported once, each target loaded in turn."""
    with process.Worker({}) as shared:
        yield shared


def test_onnx_reads_the_last_row_for_minus_one_where_eager_torch_raises(worker):
    report = runner.run(
        target("embedding"),
        "lookup",
        checks=["forward float32", "forward bfloat16", "bad id: -1", "bad id: vocab_size"],
        through="onnx",
        worker=worker,
    )
    found = checks_of(report)
    assert found["forward float32"].detail.startswith("bit-identical")
    minus_one = found["bad id: -1"]
    assert minus_one.status == "differs"
    assert minus_one.detail.startswith("through onnx: token_ids [3, -1, 5]: wraps to row 63")
    assert "; eager: raises IndexError" in minus_one.detail
    # past the end ONNX Runtime's CPU kernel raises, as ONNX's Gather allows [-64, 63]
    assert found["bad id: vocab_size"].status == "conforms"
    assert "must be within the inclusive range [-64,63]" in found["bad id: vocab_size"].detail
    # ONNX Runtime has no CPU kernel for a bfloat16 Add: a dtype the path rejects, said so
    bfloat16 = found["forward bfloat16"]
    assert bfloat16.status == "rejected" and "Could not find an implementation" in bfloat16.detail
    assert report.through["path"] == "onnx" and report.through["changed"] == [
        "forward bfloat16",
        "bad id: -1",
    ]
    assert report.through["versions"]["onnxruntime"] == paths.versions("onnx")["onnxruntime"]
    assert not report.conforms


def test_the_ports_fix_sending_negative_ids_past_the_end_raises_in_onnx_runtime_too(worker):
    report = runner.run(
        target("guarded"), "lookup", checks=["bad id: -1"], through="onnx", worker=worker
    )
    (check,) = report.checks
    assert (
        check.status == "conforms" and "idx=64 must be within the inclusive range" in check.detail
    )


def test_a_wrong_target_stays_wrong_through_the_path_and_it_is_not_the_paths(worker):
    report = runner.run(
        target("clamped"),
        "lookup",
        checks=["forward float32", "bad id: vocab_size"],
        through="onnx",
        worker=worker,
    )
    found = checks_of(report)
    assert found["forward float32"].detail.startswith("bit-identical")
    check = found["bad id: vocab_size"]
    assert check.status == "differs"
    assert check.detail == "token_ids [3, 64, 5]: clamps to row 63: a silent wrong answer"
    assert report.through["changed"] == []  # eager clamps too: the target's, not the path's


def test_an_export_that_fails_is_a_reported_result_not_a_crash(worker):
    report = runner.run(
        target("data_dependent"),
        "lookup",
        checks=["forward float32", "bad id: -1"],
        through="torch.export",
        worker=worker,
    )
    found = checks_of(report)
    assert found["forward float32"].status == "failed"
    assert "torch.export.export raised" in found["forward float32"].detail
    assert "data-dependent" in found["forward float32"].detail
    assert found["forward float32"].detail.endswith("eager: bit-identical (4 cases)")
    # no program for any valid case: a bad id's refusal is no conforming raise
    assert found["bad id: -1"].status == "failed"
    assert not report.conforms


def test_bad_ids_alone_are_no_pass_where_the_path_cannot_make_a_valid_case(worker):
    # the refusals of the bad ids are no conforming raise: a valid case, made along the path
    # to tell, cannot be traced either
    report = runner.run(
        target("host_checked"), "lookup", checks=["bad id: -1"], through="jax.jit", worker=worker
    )
    (check,) = report.checks
    assert check.status == "failed" and "TracerArrayConversionError" in check.detail
    assert not report.conforms


def test_a_dtype_the_path_rejects_is_told_from_a_path_that_cannot_run_the_target(worker):
    # no float32 case chosen: one is made along the path, and it is, so bfloat16 alone is refused
    report = runner.run(
        target("embedding"),
        "lookup",
        checks=["forward bfloat16", "bad id: vocab_size"],
        through="onnx",
        worker=worker,
    )
    found = checks_of(report)
    assert found["forward bfloat16"].status == "rejected"
    assert found["bad id: vocab_size"].detail.startswith("raises InvalidArgument")


def test_a_path_that_cannot_be_set_up_or_hold_an_argument_says_so(monkeypatch):
    def broken(function):
        raise ImportError("libonnxruntime.so: cannot open shared object file")

    monkeypatch.setitem(paths._MAKERS, "onnx", broken)
    with pytest.raises(paths.PathFailed, match="setting up onnx raised ImportError: libonnx"):
        paths.along("onnx", lambda *a: a)(np.ones(2))
    with pytest.raises(paths.PathFailed, match="argument 1 is a list: an export holds arrays"):
        paths._split([np.ones(2), [1, 2]])
    arrays, key = paths._split([np.ones((2, 3), np.float32), 5, None])
    assert arrays == [0] and key == (((2, 3), "float32"), ("int", 5), ("NoneType", None))


def test_a_layer_that_reads_its_arguments_on_the_host_cannot_be_jitted_and_says_why(worker):
    report = runner.run(
        target("host_checked"),
        "lookup",
        checks=["forward float32"],
        through="jax.jit",
        worker=worker,
    )
    (check,) = report.checks
    assert check.status == "failed"
    assert "jax.jit raised TracerArrayConversionError" in check.detail
    assert check.detail.endswith("eager: bit-identical (4 cases)")


def test_jax_export_serializes_reloads_and_keeps_the_clamp(worker):
    report = runner.run(
        target("taken"),
        "lookup",
        checks=["forward float32", "bad id: -1"],
        through="jax.export",
        worker=worker,
    )
    found = checks_of(report)
    assert found["forward float32"].detail.startswith("bit-identical")
    assert (
        found["bad id: -1"].detail == "token_ids [3, -1, 5]: clamps to row 0: a silent wrong answer"
    )
    assert report.through["changed"] == []
    # the reloaded program's bits are eager's: compared element by element
    assert report.through["bits"] == {"forward float32": "same bits"}


def test_the_command_line_names_the_path_its_versions_and_what_it_changed(capsys):
    # torch.export: no exporter beyond torch's own to import in a worker of its own
    code = compare.main(
        ["check", target("data_dependent"), "--kind", "lookup", "--only", "forward float32"]
        + ["--through", "torch.export"]
    )
    out = capsys.readouterr().out
    assert code == 1
    torch_version = paths.versions("torch.export")["torch"]
    assert (
        f"through torch.export: torch.export.export(f), its program's module() called (torch {torch_version})"
        in out
    )
    assert (
        "FAIL forward float32  through torch.export: 1-D ids, start 0: torch.export.export raised"
        in out
    )
    assert out.splitlines()[-2].endswith("eager: bit-identical (4 cases)")


def test_the_api_takes_the_path_and_its_reproduce_line_names_it():
    kwargs = {"checks": ["bad id: -1"], "through": "jax.export"}
    with pytest.raises(AssertionError) as raised:
        api.assert_conforms(target("taken"), "lookup", **kwargs)
    assert "--through jax.export" in str(raised.value)
    assert "clamps to row 0" in str(raised.value)


@pytest.mark.parametrize(
    "arguments, words",
    [
        (["--through", "onnx", "--framework", "jax"], "--through onnx runs a torch target"),
        (["--through", "jax.export"], "--through jax.export runs a jax target"),
        (["--through", "onnx", "--against", "hf"], "--through and --against: one at a time"),
    ],
)
def test_a_target_that_cannot_go_along_the_path_is_refused_in_one_line(capsys, arguments, words):
    code = compare.main(["check", target("embedding"), "--kind", "lookup", *arguments])
    assert code == 2
    assert words in capsys.readouterr().err


def test_an_unknown_path_is_refused_with_the_paths():
    done = subprocess.run(
        [
            sys.executable,
            "compare.py",
            "check",
            target("embedding"),
            "--kind",
            "lookup",
            "--through",
            "tensorrt",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "invalid choice: 'tensorrt'" in done.stderr and "onnx" in done.stderr


def test_a_path_whose_packages_are_missing_says_which(monkeypatch):
    monkeypatch.setattr(paths, "versions", lambda path: {"torch": "2", "onnxruntime": None})
    with pytest.raises(api.UsageError, match="needs onnxruntime, which is not installed"):
        runner.run(target("embedding"), "lookup", through="onnx")


def test_bits_that_differ_from_eager_are_counted_where_the_contract_cannot_tell():
    from embedding_parity.conformance.kinds import Case, Outcome

    eager = np.array([1.0, 2.0, -0.0, np.nan], np.float32)
    along = np.array([1.0, np.nextafter(np.float32(2), np.float32(3)), 0.0, np.nan], np.float32)
    case = Case("forward float32", "x", {"dtype": "float32"})
    bits = runner._bits([case, case], [Outcome(array=along)] * 2, [Outcome(array=eager)] * 2)
    # the one-ulp element (one of 2: the largest value) and the zero's sign (0 ulp) differ; the
    # NaN's bits are the same
    assert bits == {
        "forward float32": "4 of 8 elements differ, by at most 1 ulp of the largest value"
    }
    assert runner._bits([case], [Outcome(array=eager)], [Outcome(array=eager)]) == {
        "forward float32": "same bits"
    }


def test_a_callable_goes_along_the_path_in_process():
    sys.path.insert(0, os.path.dirname(PRODUCTION))
    try:
        import production
    finally:
        sys.path.remove(os.path.dirname(PRODUCTION))
        sys.modules.pop("production", None)
    report = api.check(production.taken, "lookup", through="jax.jit", checks=["forward float32"])
    assert report.conforms and report.through["path"] == "jax.jit"
    assert report.through["bits"] == {"forward float32": "same bits"}


def test_the_kits_private_folder_in_what_a_target_raised_is_named_not_shown():
    # Inductor's bounds check names its kernel's file, under the job's cache folder
    import tempfile

    said = f"kernel, {tempfile.gettempdir()}/embedding-parity-x1_y/torchinductor/hm/k.cpp:28, index"
    assert reports.PRIVATE.sub("<private folder>", said) == (
        "kernel, <private folder>/torchinductor/hm/k.cpp:28, index"
    )
