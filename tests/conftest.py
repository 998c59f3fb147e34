"""Shared fixtures: every test that takes ``backend`` runs once per installed backend; the
real models load once per session, and skip (saying how to install them) when missing."""

import socket

import numpy as np
import pytest

import backends
from backends import pretrained

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


def needs(name: str) -> None:
    """Skip unless the model package is installed. Safe: with REQUIRED_MODELS set (make test,
    CI) a missing package already fails test_required_model_packages_are_installed."""
    try:
        pretrained.package_dir(name)
    except pretrained.MissingPackage as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def minilm():
    needs("minilm")
    return pretrained.load_pretrained("minilm")


@pytest.fixture(scope="session")
def smollm2():
    needs("smollm2")
    return pretrained.load_pretrained("smollm2")


@pytest.fixture
def offline(monkeypatch):
    """Any attempt to open a network connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
