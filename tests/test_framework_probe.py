"""A target's framework is told by calling it (frameworks.probe), not guessed from its imports:
Keras on JAX is JAX, its float64 cases under x64 as with --framework jax (it was taken for
NumPy, and its float64 result reported as a silent change of dtype); Keras on torch is torch;
the suite's targets keep their frameworks; a function that takes any framework's arrays is
NumPy's; a target that takes NumPy arrays and returns torch tensors is refused in one line."""

import os

import pytest

import compare
from embedding_parity.cli import UsageError
from embedding_parity.conformance import process, runner
from embedding_parity.conformance.kinds import KINDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets")
KERAS = os.path.join(TARGETS, "keras_targets.py")
PROBED = os.path.join(TARGETS, "probed.py")
ONLY = {
    "rope": ("rotation float64", "rotation float32"),
    "lookup": ("forward float64", "bad id: -1"),
}


def statuses(report) -> dict:
    return {c.check: c.status for c in report.checks}


@pytest.fixture(scope="module")
def keras_on_jax():
    with process.Worker({"KERAS_BACKEND": "jax"}) as worker:
        yield worker


@pytest.fixture(scope="module")
def worker():
    """One worker for the suite's targets, torch and jax imported in it by a target of each:
    every target is then probed with NumPy's, torch's and JAX's arrays."""
    with process.Worker({}) as worker:
        worker.load(os.path.join(TARGETS, "torch_targets.py:lookup"), "lookup", None)
        worker.load(os.path.join(TARGETS, "jax_targets.py:rope"), "rope", None)
        yield worker


@pytest.mark.matrix  # the second tier: Keras, from the conformance extra
@pytest.mark.parametrize("name, kind", [("rope", "rope"), ("lookup", "lookup")])
def test_keras_on_jax_is_jax_and_judged_as_with_framework_jax(keras_on_jax, name, kind):
    target = f"{KERAS}:{name}"
    found = runner.run(target, kind, only=ONLY[kind], worker=keras_on_jax)
    given = runner.run(target, kind, framework="jax", only=ONLY[kind], worker=keras_on_jax)
    assert (found.framework, found.why) == (
        "jax",
        "detected: returns jax.Array for jax arrays (a probe call)",
    )
    assert statuses(found) == statuses(given)
    assert [c.detail for c in found.checks] == [c.detail for c in given.checks]


@pytest.mark.matrix  # the second tier: Keras, from the conformance extra
def test_keras_on_jax_float64_is_not_misread_as_a_change_of_dtype(keras_on_jax):
    """Keras's cos computes a float64 rope in float32 on JAX: detected as JAX (x64 on), the
    kit says so; taken for NumPy (as its imports once said), it blamed a silent dtype change."""
    target, only = f"{KERAS}:rope", "rotation float64"
    found = runner.run(target, "rope", only=only, worker=keras_on_jax).checks[0]
    wrong = runner.run(target, "rope", framework="numpy", only=only, worker=keras_on_jax).checks[0]
    assert "computed in float32" in found.detail and "change of dtype" not in found.detail
    assert "returns float32 for float64 (a silent change of dtype)" in wrong.detail


@pytest.mark.matrix  # the second tier: Keras, from the conformance extra
def test_keras_on_torch_is_torch():
    with process.Worker({"KERAS_BACKEND": "torch"}) as worker:
        report = runner.run(f"{KERAS}:lookup", "lookup", only="forward float32", worker=worker)
    assert report.framework == "torch" and report.conforms
    assert report.why == "detected: returns torch.Tensor for torch tensors (a probe call)"


@pytest.mark.parametrize(
    "target, kind, framework",
    [
        ("torch_targets.py:lookup", "lookup", "torch"),
        ("torch_targets.py:gradient", "gradient", "torch"),
        ("jax_targets.py:rope", "rope", "jax"),
        ("numpy_targets.py:lookup", "lookup", "numpy"),
        ("numpy_targets.py:rope", "rope", "numpy"),
        ("numpy_targets.py:sinusoidal", "sinusoidal", "numpy"),
        ("numpy_targets.py:t5", "t5", "numpy"),
        ("configured.py:opt_positions", "position_ids", "numpy"),
    ],
)
def test_the_suites_targets_keep_their_framework(worker, target, kind, framework):
    first = KINDS[kind].cases({})[0].check
    report = runner.run(os.path.join(TARGETS, target), kind, only=first, worker=worker)
    assert report.framework == framework, report.why
    assert report.why.startswith("detected: ")


def test_a_function_that_takes_any_arrays_is_numpys(worker):
    report = runner.run(f"{PROBED}:lookup_any", "lookup", only="forward float32", worker=worker)
    assert report.framework == "numpy" and report.conforms
    assert report.why == (
        "detected: returns the arrays it is given, NumPy arrays and torch tensors and jax "
        "arrays (probe calls); probed imports no torch or jax"
    )


def test_numpy_in_torch_out_is_refused_in_one_line(capsys):
    target = f"{PROBED}:lookup_into_torch"
    code = compare.main(["check", target, "--kind", "lookup", "--only", "forward float32"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0] == (
        f"compare.py check: error: TARGET {target!r}: given NumPy arrays it returns "
        "torch.Tensor; given torch tensors it raises TypeError: it takes one framework's "
        "arrays and returns another's; give --framework numpy|torch|jax"
    )


def test_the_framework_given_settles_it(worker):
    target = f"{PROBED}:lookup_into_torch"
    report = runner.run(target, "lookup", framework="numpy", only="forward", worker=worker)
    assert report.conforms and report.why == "given with --framework"


def test_a_target_that_raises_on_every_probe_falls_back_to_its_imports(worker):
    """The battery then reports the raising; the why says what the probe saw, by the
    exceptions' types, never their text."""
    report = runner.run(f"{PROBED}:lookup_raising", "lookup", only="forward float32", worker=worker)
    assert report.framework == "numpy" and report.checks[0].status == "differs"
    assert report.why == (
        "detected: probed imports neither torch nor jax (no probe call returned an array: given "
        "NumPy arrays it raises ValueError; given torch tensors it raises ValueError; given "
        "jax arrays it raises ValueError)"
    )


def test_a_target_of_several_frameworks_but_numpy_that_imports_none_is_refused(worker):
    with pytest.raises(UsageError, match="it takes several frameworks' arrays and imports none"):
        runner.run(f"{PROBED}:lookup_not_numpy", "lookup", only="forward float32", worker=worker)
