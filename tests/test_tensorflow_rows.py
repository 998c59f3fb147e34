"""TensorFlow as a framework of the kit, and its rows in the matrix: tf.gather and
tf.nn.embedding_lookup raise for every bad id on the CPU, the same gather under XLA clamps
them, Keras's Embedding on TensorFlow wraps -1 (keras.ops.take adds the vocabulary size to a
negative id before tf.gather) and truncates 1.5, and keras-hub's layers behave on TensorFlow
as on its other backends. Each finding is asserted with the versions it was made with."""

import json
import os
import subprocess
import sys

import pytest

from embedding_parity.conformance import known
from tests.conftest import fresh_machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The versions the findings below were made with (constraints.txt and
# requirements-conformance.txt); a new version is a new finding to check.
PINNED = {"tensorflow-cpu": "2.21.0", "keras": "3.15.1", "keras-hub": "0.32.0"}

# row: {check: words its detail must hold}; "raises" means the check conforms by raising.
FINDINGS = {
    "TensorFlow tf.gather": {
        "forward float64": "bit-identical",
        "forward float16": "bit-identical",
        "forward bfloat16": "bit-identical",
        "bad id: vocab_size": "raises",
        "bad id: -1": "raises",
        "bad id: far out of range": "raises",
        "bad id: non-integer (1.5)": "raises",
    },
    "TensorFlow tf.nn.embedding_lookup": {
        "forward bfloat16": "bit-identical",
        "bad id: vocab_size": "raises",
        "bad id: -1": "raises",
    },
    "TensorFlow tf.gather under XLA (jit_compile=True)": {
        "forward float64": "bit-identical",
        "forward bfloat16": "bit-identical",
        "bad id: vocab_size": "clamps to row 63",
        "bad id: -1": "clamps to row 0",
        "bad id: far out of range": "clamps to row 63",
        "bad id: non-integer (1.5)": "raises",
    },
    "Keras Embedding (tensorflow)": {
        "forward bfloat16": "bit-identical",
        "bad id: vocab_size": "raises",
        "bad id: -1": "wraps to row 63",
        "bad id: far out of range": "raises",
        "bad id: non-integer (1.5)": "truncates 1.5 to 1",
    },
    "TensorFlow tf.GradientTape of tf.gather": {
        "gradient float64": "bit-identical",
        "gradient bfloat16": "n * eps",
        "gradient, bad id: vocab_size": "raises",
        "gradient, bad id: -1": "raises",
    },
    "keras-hub TokenAndPositionEmbedding (tensorflow)": {
        "forward float16": "bit-identical",
        "bad id: vocab_size": "raises",
        "bad id: -1": "wraps to row 63",
        "bad id: non-integer (1.5)": "truncates 1.5 to 1",
    },
    "keras-hub RotaryEmbedding (tensorflow)": {
        "rotation float32": "within tolerance",
        "rotation float64": "computed in float32",
    },
    "keras-hub SinePositionEncoding (tensorflow)": {"positions to 131071": "within tolerance"},
    "keras-hub AlibiBias (tensorflow)": {"slopes, 1 to 128 heads": "bit-identical"},
}


@pytest.fixture(scope="module")
def matrix():
    # Two workers: TensorFlow's own rows, and keras-hub's on KERAS_BACKEND=tensorflow.
    return {r["name"]: r for r in known.run(list(FINDINGS))["rows"]}


def test_every_tensorflow_row_has_its_findings():
    assert {r.name for r in known.ROWS if r.framework == "tensorflow"} == set(FINDINGS)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FINDINGS))
def test_each_finding_holds_at_its_version(matrix, name):
    record = matrix[name]
    assert "missing" not in record, record.get("missing")
    for package, version in record["versions"].items():
        assert version == PINNED[package], f"{package} {version}: check this row's findings again"
    checks = {c["check"]: c for c in record["report"]["checks"]}
    for check, words in FINDINGS[name].items():
        found = checks[check]
        if words == "raises":
            assert found["status"] == "conforms" and found["detail"].startswith("raises"), found
        else:
            assert words in found["detail"], found


# In a process of its own: TensorFlow imported into the tests' process would be probed in
# every later in-process check (frameworks.probe tries each framework imported).
IN_TENSORFLOW = """
import json, sys

import ml_dtypes
import numpy as np

from embedding_parity.conformance import frameworks, known
from embedding_parity.conformance.kinds import KINDS

imported = "tensorflow" in sys.modules
import tensorflow as tf

from embedding_parity.conformance.adapters import keras_hub_layers, tensorflow_idioms

rng = np.random.default_rng(0)
trips = {}
for name in ("float64", "float32", "float16", "bfloat16", "int64", "int32"):
    dtype = np.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else name)
    given = rng.integers(0, 256, 64 * dtype.itemsize, dtype=np.uint8).view(dtype)  # any bits
    native = frameworks.to_framework(given, "tensorflow")
    variable = tf.Variable(native)
    back, held = frameworks.to_numpy(native), frameworks.to_numpy(variable)
    trips[name] = {
        "native": [type(native).__name__, native.dtype.name, frameworks.framework_of(native)],
        "back": [back.dtype.name, back.tobytes() == given.tobytes()],
        "variable": [
            held.dtype.name, held.tobytes() == given.tobytes(), frameworks.framework_of(variable)
        ],
    }

probes = {}
for function, kind in (("gather", "lookup"), ("keras_embedding", "lookup"),
                       ("gather_gradient", "gradient")):
    arguments = KINDS[kind].arguments(frameworks.probe_case(KINDS[kind], {}))
    probes[function] = frameworks.probe(
        getattr(tensorflow_idioms, function), arguments, tensorflow_idioms, "tensorflow_idioms"
    )
detected = frameworks.detect(keras_hub_layers, None, "keras_hub_layers")
traced = []
tf.function(lambda x: traced.append(frameworks.framework_of(x)) or x)(tf.constant(1.0))
print(json.dumps({"imported": imported, "trips": trips, "probes": probes,
                  "detected": detected, "traced": traced}))
"""


@pytest.fixture(scope="module")
def in_tensorflow(tmp_path_factory):
    # HOME and TMPDIR under the test's folder: Keras writes ~/.keras on import
    folder = tmp_path_factory.mktemp("tensorflow")
    env = {**fresh_machine(folder), "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", IN_TENSORFLOW],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_kit_imports_no_tensorflow_until_a_target_does(in_tensorflow):
    assert in_tensorflow["imported"] is False


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "int64", "int32"])
def test_each_dtype_goes_through_tensorflow_and_back_bit_for_bit(in_tensorflow, dtype):
    """Random bits, NaN payloads and subnormals included; bfloat16 as ml_dtypes' (TF's own)."""
    trip = in_tensorflow["trips"][dtype]
    assert trip == {
        "native": ["EagerTensor", dtype, "tensorflow"],
        "back": [dtype, True],
        "variable": [dtype, True, "tensorflow"],
    }


def test_a_symbolic_tensor_is_no_array(in_tensorflow):
    """Inside tf.function a tensor stands for no numbers, as a JAX tracer does."""
    assert in_tensorflow["traced"] == [None]


def test_tensorflow_targets_are_detected_by_a_probe_call(in_tensorflow):
    said = ["tensorflow", "detected: returns tf.Tensor for TensorFlow tensors (a probe call)"]
    assert in_tensorflow["probes"] == {
        "gather": said,
        "keras_embedding": said,
        "gather_gradient": said,
    }


def test_keras_on_tensorflow_counts_as_tensorflow(in_tensorflow):
    assert in_tensorflow["detected"] == [
        "tensorflow",
        "detected: keras_hub_layers imports keras (on tensorflow)",
    ]
