"""compare.py check: correct implementations conform, and each natural mistake is caught (exit
1) and named; bad usage is one line and exit 2; a case that hangs or kills the worker is marked
and the run goes on."""

import collections
import contextlib
import functools
import json
import os
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import compare
from embedding_parity.conformance import numerics, process, runner
from embedding_parity.usage import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "tests", "conformance_targets")


def check(capsys, target: str, kind: str, *flags) -> tuple[int, str]:
    code = compare.main(["check", os.path.join(HERE, target), "--kind", kind, *flags])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture(scope="module")
def workers():
    """One worker process per targets file, for the checks about verdicts rather than about
    the worker's life (a hang, a crash: those start their own, as `check` does): a worker with
    torch or JAX costs seconds to start. Each check loads its target into it as into a fresh
    one, the way a matrix's rows share a worker; a file's targets import what the file does,
    so what the probe tries is what it would try in a fresh worker."""
    with contextlib.ExitStack() as stack:
        yield collections.defaultdict(lambda: stack.enter_context(process.Worker({})))


@pytest.fixture
def shared(capsys, monkeypatch, workers):
    """``check`` through the command line, its target run in the module's worker of its file."""

    def check_shared(target: str, kind: str, *flags) -> tuple[int, str]:
        worker = workers[target.partition(":")[0]]
        monkeypatch.setattr(runner, "run", functools.partial(runner.run, worker=worker))
        return check(capsys, target, kind, *flags)

    return check_shared


@pytest.mark.parametrize(
    "target, kind",
    [
        ("numpy_targets.py:lookup", "lookup"),
        ("numpy_targets.py:sinusoidal", "sinusoidal"),
        ("numpy_targets.py:rope", "rope"),
        ("numpy_targets.py:alibi", "alibi"),
        ("numpy_targets.py:t5", "t5"),
        ("numpy_targets.py:gradient", "gradient"),
        ("torch_targets.py:lookup", "lookup"),
        ("torch_targets.py:gradient", "gradient"),
        ("jax_targets.py:rope", "rope"),
        ("quantized_ports.py:correct", "quantized_lookup"),
    ],
)
def test_a_correct_implementation_conforms(shared, target, kind):
    # JAX compiles each shape the invariances ask (seconds): test_invariance.py asks them of
    # each backend of the suite
    code, report = shared(target, kind, *(["--no-invariances"] if target.startswith("jax") else []))
    assert code == 0, report
    assert "CONFORMS" in report and "  NO " not in report
    framework = (
        "torch" if target.startswith("torch") else "jax" if target.startswith("jax") else "numpy"
    )
    assert f"as {kind} ({framework}, detected:" in report


@pytest.mark.parametrize(
    "target, kind, bound, ulps",
    [
        ("numpy_targets.py:rope", "rope", "", "of the largest value"),
        ("numpy_targets.py:sinusoidal", "sinusoidal", "", "of the largest value"),
        (
            "numpy_targets.py:gradient",
            "gradient",
            " n * eps * sum|terms|",
            "of an element's own value",
        ),
    ],
)
def test_a_line_within_tolerance_says_its_error_is_inside_its_bound(
    shared, target, kind, bound, ulps
):
    # the ulps of a table or a rotation are of its largest value: thousands of them can be
    # well inside the (absolute) bound, and the line says so before it gives them
    code, report = shared(target, kind, "--dtypes", "float32")
    said = [line for line in report.splitlines() if "within tolerance" in line]
    assert code == 0 and said, report
    numbers = r": \S+ <= \S+ \(0\.\d\d of the bound\); \S+ ulp "
    shape = f"within tolerance, inside its bound{re.escape(bound)}{numbers}{ulps}"
    for line in said:
        assert re.search(shape, line), line


@pytest.mark.parametrize(
    "target, kind, flags, named",
    [
        (
            "numpy_targets.py:lookup_clamps",
            "lookup",
            [],
            ["bad id: vocab_size", "clamps to row 63", "truncates 1.5 to 1"],
        ),
        (
            "numpy_targets.py:lookup_start_off_by_one",
            "lookup",
            [],
            ["position off by +1 (start + 1)"],
        ),
        (
            "numpy_targets.py:sinusoidal_concat",
            "sinusoidal",
            [],
            ["concat layout (all sines, then all cosines)"],
        ),
        ("numpy_targets.py:rope_interleaved", "rope", [], ["interleaved layout (pairs 2i, 2i+1"]),
        (
            "torch_targets.py:rope_interleaved",
            "rope",
            ["--only", "rotation float32"],
            ["interleaved layout"],
        ),
        (
            "torch_targets.py:rope_angles_in_bfloat16",
            "rope",
            ["--only", "long positions float32"],
            ["angles computed in bfloat16: phase error 2.6 rad at position 16385"],
        ),
        (
            "numpy_targets.py:alibi_paper",
            "alibi",
            [],
            [
                "3 heads (not a power of two)",
                "the power-of-two formula 2**(-8i/n) applied to 3 heads",
            ],
        ),
        ("numpy_targets.py:t5_boundary_off_by_one", "t5", [], ["off by one at bucket boundaries"]),
        (
            "numpy_targets.py:gradient_assigns",
            "gradient",
            [],
            ["repeated ids summed once (W[ids] += g"],
        ),
        (
            "torch_targets.py:gradient_index_put",
            "gradient",
            ["--only", "gradient float32"],
            ["repeated ids summed once"],
        ),
        (
            "numpy_targets.py:gradient",
            "gradient",
            ["--padding-idx", "7"],
            ["the padding row 7 learns"],
        ),
        (
            "jax_targets.py:lookup_take",
            "lookup",
            ["--only", "bad id"],
            ["fills NaN: a NaN row instead of an error"],
        ),
        (
            "jax_targets.py:lookup_indexing",
            "lookup",
            ["--only", "bad id"],
            ["clamps to row 63", "wraps to row 63"],
        ),
        (
            "jax_targets.py:gradient",
            "gradient",
            ["--only", "gradient, bad id"],
            ["drops it: its upstream row is lost"],
        ),
        *(
            ("quantized_ports.py:" + port, "quantized_lookup", [], named)
            for port, named in (
                (
                    "bytes_as_floats",
                    [f"NO   {k} rows" for k in ("Q8_0", "Q4_0", "Q5_1", "Q4_K", "Q6_K")]
                    + ["quantized bytes read as floats, each byte a value (uint8)"],
                ),
                ("scale_as_bfloat16", ["NO   Q6_K rows", "the float16 scale read as bfloat16"]),
                (
                    "offset_in_elements",
                    ["NO   Q4_0 rows", "NO   Q4_K rows"]
                    + ["the row offset counted in elements (id * dim), not blocks"],
                ),
                (
                    "nibbles_swapped",
                    ["ok   Q8_0 rows", "NO   Q4_1 rows", "NO   Q5_0 rows", "NO   Q6_K rows"]
                    + ["the nibbles in the wrong order (high before low)"],
                ),
                (
                    "k_scales_ignored",
                    ["ok   Q5_1 rows", "NO   Q4_K rows", "NO   Q6_K rows"]
                    + ["the sub-block scales ignored (the super-block's d and dmin alone)"],
                ),
            )
        ),
    ],
)
def test_each_natural_mistake_is_caught_and_named(shared, target, kind, flags, named):
    code, report = shared(target, kind, *flags)
    assert code == 1, report
    assert "DIFFERS" in report
    for words in named:
        assert words in report, report


def test_json_has_every_case(tmp_path, shared):
    out = tmp_path / "check.json"
    code, _ = shared("numpy_targets.py:alibi_paper", "alibi", "--json", str(out))
    assert code == 1
    record = json.loads(out.read_text())
    assert record["conforms"] is False and record["kind"] == "alibi"
    [slopes] = record["checks"]
    assert len(slopes["cases"]) == 128
    cases = {case["label"]: case for case in slopes["cases"]}
    assert cases["8 heads"]["status"] == "conforms"
    # 12 heads, the issue's own example: caught and named like the first, 3 heads
    twelve = cases["12 heads (not a power of two)"]
    assert twelve["status"] == "differs"
    assert "the power-of-two formula 2**(-8i/n) applied to 12 heads" in twelve["detail"]


def test_a_hang_is_marked_and_the_run_goes_on(capsys):
    code, report = check(capsys, "misbehaving.py:hangs_on_bad_ids", "lookup", "--timeout", "1")
    assert code == 1
    assert "FAIL bad id: vocab_size" in report and "timed out after 1 s" in report
    assert "ok   forward float32" in report  # the cases before it
    assert "bad id: non-integer (1.5)" in report  # and after it, in a fresh worker


def test_a_probe_call_that_hangs_leaves_the_framework_to_the_imports(capsys):
    flags = ["--timeout", "0.5", "--only", "bad id: -1"]
    code, report = check(capsys, "misbehaving.py:hangs_always", "lookup", *flags)
    assert code == 1
    why = "imports neither torch nor jax (the probe call timed out after 0.5 s)"
    assert f"as lookup (numpy, detected: misbehaving {why})" in report
    assert "FAIL bad id: -1" in report and "timed out after 0.5 s" in report


def test_a_crash_is_marked_and_the_run_goes_on(capsys):
    code, report = check(capsys, "misbehaving.py:dies_on_bad_ids", "lookup")
    assert code == 1
    assert "died (exit status 7)" in report
    assert report.count("FAIL") == 3 and "ok   forward bfloat16" in report


def test_raising_on_a_valid_input_is_a_difference_not_a_pass(shared):
    code, report = shared("misbehaving.py:refuses_odd_heads", "alibi")
    assert code == 1
    assert "3 heads (not a power of two): raises ValueError: 3 heads: only powers of two" in report


def test_nan_results_are_reported_and_recorded(tmp_path, shared):
    out = tmp_path / "nan.json"
    code, report = shared("misbehaving.py:rope_of_nans", "rope", "--json", str(out))
    assert code == 1 and "NaN at [0, 0, 0]" in report
    record = json.loads(out.read_text())  # strict JSON: the infinite ulps as a string
    assert record["checks"][0]["cases"][0]["ulps"] == "inf"


def test_a_target_that_prints_still_conforms(shared):
    code, report = shared("misbehaving.py:prints", "alibi")
    assert code == 0, report


@pytest.mark.parametrize(
    "argv, message",
    [
        (["check", "no_such_file.py:f", "--kind", "lookup"], "no such file"),
        (
            ["check", os.path.join(HERE, "numpy_targets.py:nothing"), "--kind", "lookup"],
            "has no 'nothing'",
        ),
        (
            ["check", os.path.join(HERE, "misbehaving.py:NOT_CALLABLE"), "--kind", "alibi"],
            "is 'int', not callable",
        ),
        (
            ["check", os.path.join(HERE, "broken_import.py:f"), "--kind", "alibi"],
            "RuntimeError: this module is broken",
        ),
        (["check", "no_such_package.module:f", "--kind", "t5"], "ModuleNotFoundError"),
        (["check", "numpy_targets.py", "--kind", "t5"], "must look like path/to/file.py:NAME"),
        (["check", "x.py:f", "--kind", "conv"], "argument --kind: invalid choice: 'conv'"),
        (["check", "x.py:f"], "give TARGET and --kind"),
        (["check", "--rows", "x"], "--rows goes with --known"),
        (
            ["check", "--known", "--rows", "nothing"],
            (
                "--rows 'nothing' names no row (a row's name, a glob or part of one, in any "
                "case); the rows are 'NumPy: table[ids] + positions'; 'torch nn.Embedding'; "
            ),
        ),
        (["check", "--known", "--only", "bad"], "--only does not go with --known"),
        (
            [
                "check",
                os.path.join(HERE, "numpy_targets.py:alibi"),
                "--kind",
                "alibi",
                "--only",
                "x",
            ],
            "--only 'x' matches no check of alibi: slopes, 1 to 128 heads",
        ),
        (["check", "--known", "--markdown", "README.md"], "no <!-- matrix: written by make"),
        (["check", "x.py:f", "--kind", "lookup", "--base", "500"], "--base goes with --kind rope"),
        (["check", "x.py:f", "--kind", "gradient", "--padding-idx", "64"], "use 0 to 63"),
        (["check", "x.py:f", "--kind", "alibi", "--padding-idx", "1"], "--padding-idx goes with"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(capsys, argv, message):
    assert compare.main(argv) == 2, capsys.readouterr()
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("compare.py check: error: ") and message in line, line


def test_no_framework_or_library_is_imported_until_a_row_runs():
    modules = ("torch", "jax", "transformers", "keras", "keras_hub", "flax", "equinox", "torchtune")
    modules += ("tensorflow", "onnx", "onnxruntime", "onnxscript")
    code = (
        "import sys, compare\n"
        "from embedding_parity.conformance import api, known, paths, runner\n"
        "from embedding_parity.jobs import check\n"
        f"print([m for m in {modules!r} if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    assert done.stdout.strip() == "[]"


# --- the numbers behind the verdicts ------------------------------------------------------


def test_ulps_count_the_last_place_of_each_dtype():
    reference = np.array([1.0, 0.5, 3.0, -6.0])
    for dtype, mantissa_bits in (("float32", 23), ("float16", 10), ("bfloat16", 7)):
        spacing = 2.0 ** (np.floor(np.log2(np.abs(reference))) - mantissa_bits)
        size, where = numerics.ulps(reference + spacing * [1, 1, 2, 1], reference, dtype)
        assert (size, where) == (2.0, (2,))
    assert numerics.ulps(np.array([np.nan]), np.array([1.0]), "float32")[0] == np.inf


def test_rounding_goes_through_float32_for_the_16_bit_dtypes():
    # Just above a bfloat16 tie: correctly rounded it is 1 + 2**-7, but float32 drops the 2**-30
    # and the tie then rounds to even, 1.0 - what the frameworks give when they compute in
    # float32 and round to bfloat16, and so what the reference must be.
    value = np.array([1 + 2.0**-8 + 2.0**-30])
    assert numerics.rounded(value, "bfloat16")[0] == 1.0
    assert numerics.rounded(value, "bfloat16").dtype == ml_dtypes.bfloat16
    assert numerics.rounded(value, "float64")[0] == value[0]


def test_workers_begun_at_once_answer_as_one_loaded_alone():
    """The matrix starts its workers at once (Worker.begin) and loads each later: a target
    that imports gives the framework it would alone, one whose import fails says why, not that
    the worker died, and a load of another target than the begun one is not blamed for the
    begun one's failure."""
    from embedding_parity.conformance import process

    good = os.path.join(HERE, "numpy_targets.py:lookup")
    broken = os.path.join(HERE, "broken_import.py:f")
    with process.Worker({}) as first, process.Worker({}) as second:
        first.begin(good, "lookup", None)
        second.begin(broken, "alibi", None)
        first.load(good, "lookup", None)
        assert (first.framework, first.begun) == ("numpy", None)
        with pytest.raises(UsageError, match="RuntimeError: this module is broken on purpose"):
            second.load(broken, "alibi", None)
        first.begin(broken, "alibi", None)  # running already: nothing is sent
        first.load(os.path.join(HERE, "numpy_targets.py:alibi"), "alibi", None)
        assert first.framework == "numpy"
    with process.Worker({}) as third:  # begun, never loaded (its row refused before loading)
        third.begin(broken, "alibi", None)
        third.load(good, "lookup", None)  # another target: a fresh worker, not "died" for it
        assert third.framework == "numpy"


SCALED_CONFIGS = {
    "granite": {"model_type": "granite", "hidden_size": 64, "num_attention_heads": 4},
    "falcon_h1": {"model_type": "falcon_h1", "hidden_size": 64, "num_attention_heads": 4},
}


@pytest.mark.parametrize(
    "model, port, named",
    [
        ("granite", "granite_twice", ["NO   ids bfloat16", "the scale applied twice"]),
        (
            "granite",
            "granite_given_unscaled",
            ["ok   ids float16", "NO   given float16", "no scale on given embeddings"],
        ),
        (
            "falcon_h1",
            "falcon_h1_given_scaled",
            ["ok   ids float32", "NO   given bfloat16", "the scale applied to given embeddings"],
        ),
        ("falcon_h1", "falcon_h1_missing", ["NO   ids float32", "no scale (the rows as stored)"]),
        (
            "falcon_h1",
            "falcon_h1_in_the_rows_dtype",
            ["ok   ids float32", "NO   ids bfloat16", "the multiplier rounded to bfloat16 first"],
        ),
    ],
)
def test_each_scale_mistake_is_caught_and_named(tmp_path, shared, model, port, named):
    """A model's config.json sets the rule and its number (Granite's and Falcon-H1's
    embedding_multiplier): each port gets one thing wrong, and the report names it."""
    from embedding_parity.conformance.kinds.scaled_inputs import MODELS

    config = tmp_path / "config.json"
    fields = {**SCALED_CONFIGS[model], "embedding_multiplier": MODELS[model]["value"]}
    config.write_text(json.dumps(fields))
    code, report = shared(f"scaled_ports.py:{port}", "scaled_inputs", "--config", str(config))
    assert code == 1 and "DIFFERS" in report, report
    for words in named:
        assert words in report, report


def test_a_correct_scaling_conforms_and_the_rule_needs_a_model(tmp_path, shared):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**SCALED_CONFIGS["falcon_h1"], "embedding_multiplier": 32**0.5}))
    code, report = shared(
        "scaled_ports.py:numpy_falcon_h1", "scaled_inputs", "--config", str(config)
    )
    assert code == 0 and "CONFORMS" in report, report
    assert "falcon_h1: embedding_multiplier = 5.65685425 on the token rows only" in report
    code, report = shared("scaled_ports.py:numpy_falcon_h1", "scaled_inputs")
    assert code == 2 and "needs the model's rule: --config CONFIG.json or --model NAME" in report
    llama = tmp_path / "llama.json"
    llama.write_text(json.dumps({"model_type": "llama"}))
    code, report = shared(
        "scaled_ports.py:numpy_falcon_h1", "scaled_inputs", "--config", str(llama)
    )
    assert code == 2 and "does not scale its input embeddings" in report


@pytest.fixture
def padded_model(tmp_path):
    """A config.json of vocab_size 12 beside a tokenizer.json of 10 ids: rows 10 and 11 are
    padding (as Qwen's 151936 rows for 151665 ids)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    vocabulary = {f"w{i}": i for i in range(10)}
    Tokenizer(WordLevel(vocabulary, unk_token="w0")).save(str(tmp_path / "tokenizer.json"))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "vocab_size": 12}))
    return str(config)


def test_padding_rows_are_rows_and_a_port_bounded_by_the_tokenizer_is_named(shared, padded_model):
    code, report = shared("padded_ports.py:lookup", "lookup", "--config", padded_model)
    assert code == 0, report
    assert "vocab_size 12 beside the tokenizer's 10 ids: rows 10 to 11 are padding" in report
    assert "ok   padding rows" in report
    code, report = shared(
        "padded_ports.py:bounded_by_the_tokenizer", "lookup", "--config", padded_model
    )
    assert code == 1 and "NO   padding rows" in report, report
    assert (
        "padding rows are rows (the ids bounded by the tokenizer's size, not the table's)" in report
    )
