"""NumPy arrays into a framework's own arrays and back, and which framework a target speaks.

Each framework is imported only when a target of it runs (in the worker process)."""

from __future__ import annotations

import contextlib
import sys

import ml_dtypes
import numpy as np

FRAMEWORKS = ("numpy", "torch", "jax")


def detect(module, function, name: str) -> tuple[str, str]:
    """(framework, why): the first of torch and jax that the target's module (called ``name``
    in the why) imports (flax and equinox count as jax), else numpy. Keras can run on any of
    them: give --framework."""
    names = {getattr(value, "__name__", "") for value in vars(module).values()}
    names |= {type(value).__module__ for value in vars(module).values()}
    roots = {name.split(".")[0] for name in names if name}
    for framework, families in (("torch", {"torch"}), ("jax", {"jax", "flax", "equinox"})):
        found = sorted(roots & families)
        if found:
            return framework, f"detected: {name} imports {found[0]}"
    return "numpy", f"detected: {name} imports neither torch nor jax"


def to_framework(value, framework: str):
    """A NumPy array as the framework's array (same dtype); anything else unchanged."""
    if not isinstance(value, np.ndarray) or framework == "numpy":
        return value
    if framework == "torch":
        import torch

        if value.dtype == ml_dtypes.bfloat16:  # torch cannot read ml_dtypes: move the bits
            return torch.from_numpy(value.view(np.int16).copy()).view(torch.bfloat16)
        return torch.from_numpy(value.copy())
    import jax.numpy as jnp

    return jnp.asarray(value)


def precision(framework: str, arguments):
    """JAX keeps float64 only with x64 on: on for a float64 case, as the suite's layer does."""
    wide = any(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in arguments)
    if framework == "jax" and wide:
        import jax

        return jax.enable_x64(True)
    return contextlib.nullcontext()


def to_numpy(result) -> np.ndarray:
    """Any framework's array (or a list of numbers) as NumPy, same dtype."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(result, torch.Tensor):
        result = result.detach().cpu()
        if result.dtype == torch.bfloat16:
            return result.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return result.numpy()
    return np.asarray(result)


def is_tracer(value) -> bool:
    """Whether ``value`` is a JAX tracer: an abstract value leaked out of jit or grad, which
    stands for no numbers (a jax.Array check passes it: a Tracer is registered as one)."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.core.Tracer)


def settle(result):
    """The result once the computation behind it has run: JAX dispatches asynchronously, so an
    error of the target's computation shows here, inside its call, not in the kit's reading."""
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(result, jax.Array) and not is_tracer(result):
        result.block_until_ready()
    return result
