"""One transformer input layer, ``token_table[token_ids] + position_table[start:start + T]``,
in NumPy, PyTorch and JAX behind one interface (``backends.interface``).

The registry is explicit and lazy: ``import backends`` imports NumPy only, and a
framework is imported the first time its backend is asked for with ``get``.

    >>> import backends
    >>> token_table, position_table = backends.shared_weights(100, 10, 16)
    >>> be = backends.get("numpy")
    >>> be.TokenPositionEmbedding(token_table, position_table)([5, 10, 7, 21]).shape
    (4, 10)
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

import numpy as np

from backends import quantized
from backends.positional import rope_permutation
from backends.validation import DTYPES, resolve_dtype

__all__ = ["DTYPES", "get", "names", "quantized", "rope_permutation", "shared_weights"]

# Backend name (the framework's import name) -> module implementing backends.interface.
_REGISTRY = {
    "numpy": "backends.numpy_backend",
    "torch": "backends.torch_backend",
    "jax": "backends.jax_backend",
}


def names() -> tuple[str, ...]:
    """Installed backends, in the order ("numpy", "torch", "jax"); numpy is always there.

    Looks for the frameworks without importing them.
    """
    return tuple(name for name in _REGISTRY if importlib.util.find_spec(name) is not None)


def get(name: str) -> ModuleType:
    """The backend module called ``name``, importing its framework on first use.

    Raises ValueError for an unknown name and ImportError, with the install
    command, when the framework is not installed.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown backend {name!r}: valid names are {', '.join(_REGISTRY)}")
    if importlib.util.find_spec(name) is None:
        raise ImportError(
            f"backend {name!r} needs the {name} package, which is not installed: "
            f"pip install 'embedding-parity[{name}]' (in a clone of the repository, "
            f"pip install -c constraints.txt -e '.[{name}]' takes the build it is tested with)"
        )
    return importlib.import_module(_REGISTRY[name])


def shared_weights(
    vocab_size: int, dim: int, max_seq_len: int, *, seed: int = 0, dtype="float32"
) -> tuple[np.ndarray, np.ndarray]:
    """Draw (token_table, position_table) once, to hand the same weights to every backend.

    Standard normal values from ``np.random.default_rng(seed)`` (the seed demo's
    ``randn``), drawn in float64 and rounded once to ``dtype`` (a name from DTYPES).
    Returns token_table (vocab_size, dim) and position_table (max_seq_len, dim).
    """
    dtype = resolve_dtype(dtype)
    rng = np.random.default_rng(seed)
    token_table = rng.standard_normal((vocab_size, dim)).astype(dtype)
    position_table = rng.standard_normal((max_seq_len, dim)).astype(dtype)
    return token_table, position_table
