"""TensorFlow as a framework of the kit: its arrays to and from NumPy bit for bit, a target of it
told by its probe, and nothing of the kit importing it before a target does. Its rows'
findings in the matrix (tf.gather raises, XLA clamps, Keras on TensorFlow wraps -1) are
asserted with the others, in test_conformance_known.py."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import fresh_machine

pytestmark = pytest.mark.matrix  # the second tier: make conformance-test
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
