"""Shared fixtures: every test that takes ``backend`` runs once per installed backend."""

import numpy as np
import pytest

import backends

BACKENDS = backends.names()


@pytest.fixture(params=BACKENDS, scope="session")
def backend(request):
    return backends.get(request.param)


def native(backend, array: np.ndarray):
    """``array`` as the backend's own array type (ids given the framework's way)."""
    if backend.name == "torch":
        import torch

        if array.dtype == backends.DTYPES["bfloat16"]:  # torch.from_numpy knows no ml_dtypes
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(array)
    if backend.name == "jax":
        import jax.numpy as jnp

        return jnp.asarray(array)
    return array


def backend_or_skip(name: str):
    """For tests of one framework's idiom. Skipping is safe: with REQUIRED_BACKENDS set
    (make test, CI) a missing framework already fails test_required_backends_are_installed."""
    if name not in BACKENDS:
        pytest.skip(f"{name} is not installed")
    return backends.get(name)
