"""Targets that try to fool or wreck the kit (tests/conformance_targets/hostile.py), run under
it with a memory cap, from a folder holding a planted traceback.py: a target that returns
instead of raising never conforms, no bytes it prints or raises reach the report raw, nothing
it starts outlives the check, and nothing in the current folder is imported by the worker."""

import json
import os
import subprocess
import sys
import time

import pytest

import compare
from embedding_parity.conformance import process, runner
from tests.conftest import alive

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets")
HOSTILE = os.path.join(TARGETS, "hostile.py")
CAP = 1 << 30  # bytes of address space for the run and for its worker, each
ONLY = ("forward float32", "bad id")  # a valid case first, then every bad id

# target, kind, the checks run; the worker is shared, as a matrix's rows share one
RUNS = [
    ("returns_none", "lookup", ("forward float16", *ONLY)),
    ("returns_dict", "lookup", ONLY),
    ("returns_strings", "lookup", ONLY),
    ("returns_gigabytes", "lookup", ONLY),
    ("gradient_of_records", "gradient", ("gradient float32", "gradient, bad id")),
    ("gradient_of_strings", "gradient", ("gradient float32", "gradient, bad id")),
    ("raises_escapes", "lookup", ONLY),
    ("prints_latin1_and_dies", "lookup", ("bad id: -1",)),
    ("floods_the_log", "lookup", ("bad id: -1",)),
    ("forks_and_returns", "lookup", ONLY),
    ("starts_a_process", "lookup", ("bad id: -1",)),
    ("dies_with_its_pipes_held", "lookup", ("bad id: -1",)),
    ("rope", "rope", ("long positions float16",)),
]

SCRIPT = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
from embedding_parity.conformance import process, runner
found = {{}}
with process.Worker({{}}) as worker:
    for name, kind, only in {runs!r}:
        report = runner.run(
            f"{hostile}:{{name}}", kind, only=tuple(only), worker=worker, timeout=20
        )
        print("\\n".join(report.lines()))
        found[name] = report.record()
    shadowed = runner.run("{numpy_py}:lookup", "lookup", only=ONLY, worker=worker)
    found["numpy.py"] = shadowed.record()
print(json.dumps(found))
""".replace("ONLY", repr(ONLY))

PLANTED = """
open({marker!r}, "w").close()
raise SystemExit("the planted traceback.py ran")
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(records by target, what the run printed, the pids the targets started, the marker
    the planted traceback.py would write): one run of every hostile target."""
    base = tmp_path_factory.mktemp("hostile")
    here, scripts = base / "here", base / "scripts"
    here.mkdir()
    scripts.mkdir()
    marker = base / "planted-ran"
    (here / "traceback.py").write_text(PLANTED.format(marker=str(marker)))
    script = scripts / "run.py"
    numpy_py = os.path.join(TARGETS, "shadowing", "numpy.py")
    script.write_text(SCRIPT.format(cap=CAP, runs=RUNS, hostile=HOSTILE, numpy_py=numpy_py))
    pids = base / "pids"
    pids.touch()
    env = {
        **os.environ,
        "PYTHONPATH": ROOT,
        "HOSTILE_PIDS": str(pids),
        "PYTHONIOENCODING": "utf-8:strict",  # a lone surrogate printed would raise
        "TMPDIR": str(base),
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        cwd=here,
        env=env,
        capture_output=True,
        timeout=240,
        encoding="utf-8",
        errors="strict",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *printed, last = done.stdout.splitlines()
    started = [int(line) for line in pids.read_text().split()]
    return json.loads(last), printed, started, marker


def checks(record: dict) -> dict:
    return {c["check"]: c for c in record["checks"]}


@pytest.mark.parametrize(
    "name, what",
    [
        ("returns_none", "NoneType"),
        ("returns_dict", "dict"),
        ("returns_strings", "an array of <U1 (not numbers)"),
    ],
)
def test_a_target_that_returns_for_a_bad_id_never_conforms(hostile, name, what):
    record = hostile[0][name]
    assert not record["conforms"]
    found = checks(record)
    assert found["forward float32"]["status"] == "conforms"
    for check in ("bad id: vocab_size", "bad id: -1", "bad id: far out of range"):
        assert found[check]["status"] == "differs"
        assert f"returns {what} for a bad id: a silent answer" in found[check]["detail"]


def test_a_result_too_large_for_its_case_is_neither_written_nor_read(hostile):
    found = checks(hostile[0]["returns_gigabytes"])
    detail = found["bad id: -1"]["detail"]
    assert found["bad id: -1"]["status"] == "differs"
    assert "returns an array of shape (500000000,) (500000000 elements, where a result" in detail
    assert found["forward float32"]["status"] == "conforms"


@pytest.mark.parametrize(
    "name, what",
    [
        ("gradient_of_records", "an array of [('row', '<i8'), ('value', '<f8')] (not numbers)"),
        ("gradient_of_strings", "an array of <U3 (not numbers)"),
    ],
)
def test_a_gradient_that_is_no_numbers_is_a_difference_not_a_crash(hostile, name, what):
    found = checks(hostile[0][name])
    assert found["gradient float32"]["status"] == "conforms"
    detail = found["gradient, bad id: -1"]["detail"]
    assert detail == f"token_ids [3, -1, 5]: returns {what} for a bad id: a silent answer"


def test_no_byte_a_target_prints_or_raises_reaches_the_report_raw(hostile):
    records, printed, _, _ = hostile
    for line in printed:
        assert line.isprintable() and len(line) < 1000, line[:200]
    found = checks(records["raises_escapes"])
    detail = found["bad id: -1"]["detail"]
    assert found["bad id: -1"]["status"] == "conforms"
    assert detail.startswith("raises IndexError: \\x1b[2J\\x1b[8mhidden \\u202eevil \\udce9yyy")
    assert detail.endswith(f"... ({len('IndexError: ') + 22 + 3_000_000} characters)")
    died = checks(records["prints_latin1_and_dies"])["bad id: -1"]
    assert died["status"] == "failed"
    assert died["detail"].endswith("died (exit status 3): caf\ufffd \\x1b[2J")


def test_a_flood_of_printing_is_bounded(hostile):
    """600 MB printed, then a death: the kit keeps only the tail of what the worker prints
    (it read the whole log into memory, past the cap, before)."""
    found = checks(hostile[0]["floods_the_log"])["bad id: -1"]
    assert found["status"] == "failed"
    assert found["detail"] == "token_ids [3, -1, 5]: the call died (exit status 5): the last line"


def test_a_fork_that_returns_into_the_kit_answers_nothing(hostile):
    """The copy the target forks returns into the worker's loop: it stops there, so every
    later case gets its own answer."""
    record = hostile[0]["forks_and_returns"]
    assert record["conforms"], record
    assert [c["status"] for c in record["checks"]] == ["conforms"] * 5


def test_nothing_a_target_starts_outlives_the_check(hostile):
    _, _, started, _ = hostile
    assert len(started) == 3  # a sleep, a forked copy, a child holding the pipes
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in started)


def test_a_death_is_seen_though_a_child_holds_the_pipes(hostile):
    found = checks(hostile[0]["dies_with_its_pipes_held"])["bad id: -1"]
    assert found["status"] == "failed"
    assert found["detail"] == "token_ids [3, -1, 5]: the call died (exit status 4)"


def test_the_current_folder_and_a_numpy_py_shadow_nothing(hostile):
    """The worker never imports from where the check was started (a traceback.py there ran
    at the worker's start before), and a target file named numpy.py is not the kit's numpy;
    the target made NumPy raise on every floating-point error, and the kit's own case
    building went on."""
    records, _, _, marker = hostile
    assert not marker.exists()
    assert records["numpy.py"]["conforms"]
    why = "detected: returns numpy.ndarray for NumPy arrays (a probe call)"
    assert records["numpy.py"]["why"] == why
    assert checks(records["returns_none"])["forward float16"]["status"] == "conforms"
    assert records["rope"]["conforms"], records["rope"]


def test_jax_results_that_are_no_numbers_are_named():
    """A tracer leaked out of jit, or a ShapeDtypeStruct, returned for a bad id: before, the
    kit's failure to read either was taken for the target raising, and it conformed."""
    target = os.path.join(TARGETS, "hostile_jax.py")
    with process.Worker({}) as worker:
        leaked, shape, clamped, deleting = (
            runner.run(f"{target}:{name}", "lookup", only=("bad id: -1",), worker=worker)
            for name in ("leaks_a_tracer", "returns_a_shape", "clamps_in_jit", "deletes_its_ids")
        )
    assert leaked.checks[0].detail == (
        "token_ids [3, -1, 5]: returns DynamicJaxprTracer (a JAX tracer, leaked from a "
        "transformation) for a bad id: a silent answer"
    )
    assert shape.checks[0].detail == (
        "token_ids [3, -1, 5]: returns ShapeDtypeStruct for a bad id: a silent answer"
    )
    assert (
        clamped.checks[0].detail == "token_ids [3, -1, 5]: wraps to row 63: a silent wrong answer"
    )
    assert not (leaked.conforms or shape.conforms or clamped.conforms or deleting.conforms)
    assert deleting.checks[0].detail == (
        "token_ids [3, -1, 5]: changes its input in place: token_ids (3 of 3 elements); the "
        "caller's arrays must be left as they were"
    )


@pytest.mark.parametrize(
    "argv", [["check", f"{HOSTILE}:returns_none", "--kind", "lookup"], ["shard"]]
)
def test_a_timeout_past_a_day_is_refused_at_once(capsys, argv):
    """1e300 passed argparse and failed late: a clock's time_t, or the torch ranks'."""
    code = compare.main([*argv, "--timeout", "1e300"])
    err = capsys.readouterr().err
    assert code == 2
    said = "argument --timeout: 1e+300 seconds: give at most 86400 (a day)"
    assert err.strip().splitlines() == [f"compare.py {argv[0]}: error: {said}"]


def test_a_closed_stderr_is_waited_on_not_spun_on(capsys):
    """Its stderr closed, a hanging target's timeout is slept through: the kit used a whole
    core, reading the closed pipe's end again and again."""
    began = time.process_time()
    code = compare.main(
        ["check", f"{HOSTILE}:closes_its_stderr", "--kind", "lookup", "--only", "bad id: -1",
         "--timeout", "2"]
    )  # fmt: skip
    assert code == 1 and "the call timed out after 2 s" in capsys.readouterr().out
    assert time.process_time() - began < 1.0  # of this process's CPU, over the 2 s wait
