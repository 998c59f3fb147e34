"""NumPy arrays into a framework's own arrays and back, and which framework a target speaks.

A target's framework is what it takes and returns, so the kit asks the target (``probe``):
it calls it on one valid case as NumPy arrays, and as torch's, JAX's and TensorFlow's where
the target has imported them (no target returns a torch tensor without torch imported). The
framework whose arrays it returns for its own arrays is the one. A function that works on
every framework's arrays (plain indexing) is taken as the one its module imports, else as
NumPy's; a target that takes one framework's arrays and returns another's is refused in one
line, for --framework to settle, never guessed. Only where no probe call returns an array (a target
that raises on every valid input) does what its module imports decide (``detect``), the
battery then reporting the raising. Keras (and keras-hub) is the framework of its backend.

Each framework is imported only when a target of it runs (in the worker process): TensorFlow's
import alone takes about 3 s."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from embedding_parity.usage import UsageError

FRAMEWORKS = ("numpy", "torch", "jax", "tensorflow")
GIVEN = {
    "numpy": "NumPy arrays",
    "torch": "torch tensors",
    "jax": "jax arrays",
    "tensorflow": "TensorFlow tensors",
}
ARRAY = {
    "numpy": "numpy.ndarray",
    "torch": "torch.Tensor",
    "jax": "jax.Array",
    "tensorflow": "tf.Tensor",
}
FAMILIES = {  # by import name
    "torch": "torch",
    "jax": "jax",
    "flax": "jax",
    "equinox": "jax",
    "tensorflow": "tensorflow",
}
KERAS = ("keras", "keras_hub")  # their framework is the backend KERAS_BACKEND named


def probe_case(kind, options: dict) -> dict | None:
    """The params of the case a probe calls the target on: the first valid float32 case of
    ``kind``'s battery (a Kind) at ``options`` (a case that names no dtype counts as one);
    None if it has none."""
    valid = (
        c.params
        for c in kind.cases(options)
        if c.params.get("dtype", "float32") == "float32" and c.params.get("bad") is None
    )
    return next(valid, None)


def probe(function, arguments: list, module, name: str) -> tuple[str, str]:
    """(framework, why) from what ``function`` takes and returns. It is called on
    ``arguments`` (one valid case's, as NumPy arrays) converted to each framework's arrays in
    turn: NumPy's, then torch's, JAX's and TensorFlow's where imported by then. The framework
    whose arrays it returns when given its own is the one; of several, the first that
    ``module`` (called ``name`` in the why) imports, else NumPy. UsageError, in one line,
    where the calls return arrays but cannot settle it: none of a framework given its own (it
    takes one framework's arrays and returns another's), or several, none of them NumPy or
    imported.
    ``detect`` where no call returns an array. What the target raises stays in here, named
    by its type only (a probe's exception is no finding)."""
    said, matches, spoken = {}, [], False  # said: framework given -> "returns jax.Array"
    for framework in FRAMEWORKS:
        if framework != "numpy" and framework not in sys.modules:
            continue
        fresh = [a.copy() if isinstance(a, np.ndarray) else a for a in arguments]
        with precision(framework, fresh):
            native = [to_framework(a, framework) for a in fresh]
            try:
                result = settle(function(*native))
            except Exception as error:
                said[framework] = f"raises {type(error).__name__}"
                continue
        speaks = _speaks(result)
        said[framework] = f"returns {ARRAY[speaks] if speaks else type(result).__name__}"
        matches += [framework] if speaks == framework else []
        spoken = spoken or speaks is not None
    seen = "; ".join(f"given {GIVEN[f]} it {what}" for f, what in said.items())
    if len(matches) == 1:
        found = matches[0]
        return found, f"detected: returns {ARRAY[found]} for {GIVEN[found]} (a probe call)"
    if matches:
        found, reason = _imported_of(matches, module, name, seen)
        given = " and ".join(GIVEN[f] for f in matches)
        return found, f"detected: returns the arrays it is given, {given} (probe calls); {reason}"
    if spoken:
        raise UsageError(
            f"{seen}: it takes one framework's arrays and returns another's; {_framework_flag()}"
        )
    framework, why = detect(module, function, name)
    return framework, f"{why} (no probe call returned an array: {seen})"


def _imported_of(matches: list, module, name: str, seen: str) -> tuple[str, str]:
    """(framework, why) of a target that takes several frameworks' arrays (``matches``): the
    first its module imports, else NumPy; UsageError if it imports none and NumPy is not one."""
    imported = [(f, what) for f, what in _imports(module) if f in matches]
    if imported:
        framework, what = imported[0]
        return framework, f"{name} imports {what}"
    if "numpy" not in matches:
        raise UsageError(
            f"{seen}: it takes several frameworks' arrays and imports none; {_framework_flag()}"
        )
    return "numpy", f"{name} imports no {' or '.join(f for f in matches if f != 'numpy')}"


def _framework_flag() -> str:
    """The --framework choices to settle it: TensorFlow's only where the target's process
    imports it (the probe tried its tensors only then)."""
    offered = [f for f in FRAMEWORKS if f != "tensorflow" or f in sys.modules]
    return f"give --framework {'|'.join(offered)}"


def detect(module, function, name: str) -> tuple[str, str]:
    """(framework, why) from imports alone: the first of torch, jax and tensorflow that the
    target's module (called ``name`` in the why) imports, else numpy."""
    for framework, what in _imports(module)[:1]:
        return framework, f"detected: {name} imports {what}"
    return "numpy", f"detected: {name} imports neither torch nor jax"


def _imports(module) -> list[tuple[str, str]]:
    """(framework, what is imported) for each import of torch, jax or tensorflow in ``module``,
    in that order: flax and equinox are JAX's; Keras and keras-hub are their backend's."""
    names = {getattr(value, "__name__", "") for value in vars(module).values()}
    names |= {type(value).__module__ for value in vars(module).values()}
    roots = sorted({name.split(".")[0] for name in names if name})
    found = [(FAMILIES[root], root) for root in roots if root in FAMILIES]
    keras = sys.modules.get("keras")
    if keras is not None:
        backend = keras.backend.backend()
        found += [(backend, f"{root} (on {backend})") for root in roots if root in KERAS]
    order = ("torch", "jax", "tensorflow")
    return sorted((pair for pair in found if pair[0] in order), key=lambda p: order.index(p[0]))


def _speaks(value) -> str | None:
    """The framework whose array ``value`` is (a tuple's or list's: its first element's)."""
    if isinstance(value, (tuple, list)) and value:
        value = value[0]
    return framework_of(value)


def framework_of(value) -> str | None:
    """The framework whose array ``value`` is (a tf.Variable is TensorFlow's); None for anything
    else, a JAX tracer and a symbolic TensorFlow tensor included (they stand for no numbers)."""
    if isinstance(value, np.ndarray):
        return "numpy"
    torch, jax = sys.modules.get("torch"), sys.modules.get("jax")
    if torch is not None and isinstance(value, torch.Tensor):
        return "torch"
    if jax is not None and isinstance(value, jax.Array) and not is_tracer(value):
        return "jax"
    tf = sys.modules.get("tensorflow")
    if (
        tf is not None
        and isinstance(value, (tf.Tensor, tf.Variable))
        and not tf.is_symbolic_tensor(value)
    ):
        return "tensorflow"
    return None


@dataclass(frozen=True)
class Strided:
    """An argument handed to a target as a view: ``stored`` (contiguous, as memory holds it)
    seen as ``np.transpose(stored, axes)``, without a copy where the framework has views
    (NumPy's and torch's are strided; JAX's and TensorFlow's arrays are copies anyway)."""

    stored: np.ndarray
    axes: tuple[int, ...]

    @property
    def value(self) -> np.ndarray:
        return np.transpose(self.stored, self.axes)


def to_framework(value, framework: str):
    """A NumPy array as the framework's array (same dtype), a ``Strided`` as the framework's
    view of it; anything else unchanged."""
    if isinstance(value, Strided):
        stored = to_framework(value.stored, framework)
        if framework == "torch":
            return stored.permute(value.axes)
        if framework == "numpy":
            return np.transpose(stored, value.axes)
        if framework == "jax":
            import jax.numpy as jnp

            return jnp.transpose(stored, value.axes)
        import tensorflow as tf

        return tf.transpose(stored, value.axes)
    if not isinstance(value, np.ndarray) or framework == "numpy":
        return value
    if framework == "torch":
        import torch

        if value.dtype == ml_dtypes.bfloat16:  # torch cannot read ml_dtypes: move the bits
            return torch.from_numpy(value.view(np.int16).copy()).view(torch.bfloat16)
        return torch.from_numpy(value.copy())
    if framework == "jax":
        import jax.numpy as jnp

        return jnp.asarray(value)
    import tensorflow as tf

    return tf.constant(value)  # a copy; TF's bfloat16 is ml_dtypes', so it reads it as it is


def precision(framework: str, arguments):
    """JAX keeps float64 only with x64 on: on for a float64 case, as the suite's layer does."""
    wide = any(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in arguments)
    if framework == "jax" and wide:
        import jax

        return jax.enable_x64(True)
    return contextlib.nullcontext()


def to_numpy(result) -> np.ndarray:
    """Any framework's array (or a list of numbers) as NumPy, same dtype: a view of its memory
    where the framework shares it (NumPy's own, torch's on the CPU, a broadcast view of a few
    bytes among them), so that its size can be looked at before anything is materialized;
    what is kept past the target's next call is copied (``worker.call``). TensorFlow's
    tensors and variables give theirs through np.asarray, bfloat16 included (ml_dtypes')."""
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
