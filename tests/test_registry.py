"""The registry: names(), get(), lazy imports, shared_weights()."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import backends
from backends import validation


def test_names_are_ordered_and_numpy_is_always_there():
    names = backends.names()
    assert names[0] == "numpy"
    assert list(names) == [n for n in ("numpy", "torch", "jax") if n in names]


def test_required_backends_are_installed():
    # CI sets REQUIRED_BACKENDS (the Makefile does), so a missing framework fails the
    # run instead of silently shrinking the parametrized tests.
    required = [n for n in os.environ.get("REQUIRED_BACKENDS", "numpy").split(",") if n]
    missing = sorted(set(required) - set(backends.names()))
    assert not missing, f"required backends not installed: {missing}"


def test_get_returns_the_backend_named(backend):
    assert backends.get(backend.name) is backend
    assert backend.name in backends.names()


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown backend 'tensorflow'.*numpy, torch, jax"):
        backends.get("tensorflow")


def test_missing_framework_names_the_extra(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "jax" else real_find_spec(name, *a),
    )
    assert "jax" not in backends.names()
    with pytest.raises(ImportError, match=r"pip install .*'\.\[jax\]'"):
        backends.get("jax")


def test_import_backends_imports_no_framework():
    code = (
        "import sys, backends\n"
        "t, p = backends.shared_weights(10, 4, 8)\n"
        "backends.get('numpy').TokenPositionEmbedding(t, p)([1, 2])\n"
        "backends.names()\n"
        "loaded = sorted(m for m in ('torch', 'jax', 'jaxlib') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


def test_every_backend_has_the_interface(backend):
    token_table, position_table = backends.shared_weights(7, 3, 5)
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    assert (layer.vocab_size, layer.dim, layer.max_seq_len, layer.dtype) == (7, 3, 5, np.float32)
    assert (layer.padding_idx, layer.scale_grad_by_freq) == (None, False)
    for method in ("token_embeddings", "position_embeddings"):
        assert callable(getattr(layer, method))
    assert callable(backend.gradients)
    assert isinstance(backend.to_numpy(layer([1])), np.ndarray)


@pytest.mark.parametrize("dtype", list(backends.DTYPES))
def test_shared_weights_are_seeded_standard_normal(dtype):
    token_table, position_table = backends.shared_weights(6, 4, 3, seed=7, dtype=dtype)
    rng = np.random.default_rng(7)
    expected_token = rng.standard_normal((6, 4)).astype(validation.DTYPES[dtype])
    expected_position = rng.standard_normal((3, 4)).astype(validation.DTYPES[dtype])
    assert token_table.dtype == position_table.dtype == validation.DTYPES[dtype]
    np.testing.assert_array_equal(token_table, expected_token)
    np.testing.assert_array_equal(position_table, expected_position)
    assert not np.array_equal(token_table, backends.shared_weights(6, 4, 3, seed=8, dtype=dtype)[0])


def test_shared_weights_refuses_an_unsupported_dtype():
    with pytest.raises(ValueError, match="unsupported dtype 'int32'.*bfloat16"):
        backends.shared_weights(4, 2, 2, dtype="int32")
