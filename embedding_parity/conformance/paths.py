"""The ways production runs a layer (``check --through PATH``): compiled, or exported and run
by the exporter's runtime, each of which can change what a bad id does and which bits come
out.

``along(path, function)`` is the function production calls: it takes and returns what the
target does (its framework's arrays; ONNX Runtime's results come back as NumPy arrays). An
export is made once per signature (the arrays' shapes and dtypes, the other arguments'
values, which it holds as constants), as a deployment exports once and then feeds it ids:
the bad ids of a battery share one export. What the path's own machinery raises (an export,
a compilation or a session that fails) is a ``PathFailed``, a reported result that is never
taken for the target raising; what the compiled or exported program raises when it runs is
the target's, as in eager mode."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import warnings
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from embedding_parity.conformance import frameworks
from embedding_parity.conformance.frameworks import framework_of
from embedding_parity.conformance.versions import versions as installed


@dataclass(frozen=True)
class Path:
    name: str
    framework: str  # the framework of the targets it runs
    packages: tuple[str, ...]  # whose versions a report names
    how: str


PATHS = {
    p.name: p
    for p in (
        Path("torch.compile", "torch", ("torch",), "torch.compile(f): Inductor's C++ on the CPU"),
        Path(
            "torch.export",
            "torch",
            ("torch",),
            "torch.export.export(f), its program's module() called",
        ),
        Path(
            "onnx",
            "torch",
            ("torch", "onnxscript", "onnx", "onnxruntime"),
            "torch.onnx.export(f, dynamo=True), each Resize node it writes checked against the "
            "rule of the ATen resize it came from, run by ONNX Runtime's CPUExecutionProvider",
        ),
        Path(
            "openvino",
            "torch",
            ("torch", "openvino"),
            "openvino.convert_model(f), compiled for the CPU under the plugin's default "
            "precision hint (bfloat16 where the CPU has it), run by OpenVINO",
        ),
        Path(
            "openvino-f32",
            "torch",
            ("torch", "openvino"),
            "openvino.convert_model(f), compiled for the CPU with INFERENCE_PRECISION_HINT f32",
        ),
        Path(
            "executorch",
            "torch",
            ("torch", "executorch"),
            "torch.export.export(f), to_edge(...).to_executorch(), run by ExecuTorch's runtime "
            "with its portable kernels",
        ),
        Path(
            "executorch-xnnpack",
            "torch",
            ("torch", "executorch"),
            "torch.export.export(f), lowered to XNNPACK (to_edge_transform_and_lower), run by "
            "ExecuTorch's runtime",
        ),
        Path("jax.jit", "jax", ("jax", "jaxlib"), "jax.jit(f), its non-array arguments static"),
        Path(
            "jax.export",
            "jax",
            ("jax", "jaxlib"),
            "jax.export.export(jax.jit(f)), serialized, deserialized and called",
        ),
    )
}


_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")  # the exporters colour their messages


class PathFailed(Exception):
    """The path could not make the function production calls: the one-line reason."""


def versions(path: str) -> dict:
    """{package: installed version or None} of the path's packages."""
    return installed(PATHS[path].packages)


def missing(path: str) -> str | None:
    """Why the path cannot run here (a package not installed), or None."""
    absent = [p for p, v in versions(path).items() if v is None]
    if absent:
        return (
            f"--through {path} needs {absent[0]}, which is not installed (make install-conformance)"
        )
    return None


def along(path: str, function):
    """The function production calls in place of ``function`` along ``path``; where the path
    cannot even be set up (an import that fails), one that raises why, as a PathFailed."""
    try:
        made = _MAKERS[path](function)
    except Exception as error:
        failed = _failed(f"setting up {path}", error)

        def cannot(*arguments):
            raise failed

        return cannot

    def run(*arguments):
        # what the path sets in the environment (ONNX Runtime's telemetry opt-out, Inductor's
        # cache folder) is given back after each call: a check in process leaves the caller's
        with _environment_kept():
            return made(*arguments)

    return run


def _failed(what: str, error: BaseException) -> PathFailed:
    """What raised, and why: the first line of the exception the exporter's wrapping started
    from ("Failed to export the model ... step 1/3" says nothing of the cause)."""
    said = f"{what} raised {type(error).__name__}"
    cause = error
    while getattr(cause, "inner_exception", None) or cause.__cause__:  # raised from
        cause = getattr(cause, "inner_exception", None) or cause.__cause__
    if cause is not error:
        said += f" (from {type(cause).__name__})"
    first = _ESCAPES.sub("", (str(cause).strip().splitlines() or [""])[0])
    return PathFailed(f"{said}: {first}" if first else said)


CONSTANTS = (bool, int, float, str, type(None))  # what an export holds as a constant


def _constant(argument) -> bool:
    """Whether an export holds ``argument`` as a constant: a number, a string, None, or a tuple
    of them (a grid's (h, w), which a resize reads as sizes)."""
    if isinstance(argument, tuple):
        return all(isinstance(value, CONSTANTS) for value in argument)
    return isinstance(argument, CONSTANTS)


def _split(arguments) -> tuple[list[int], tuple]:
    """(indices of the array arguments, a hashable key of the call's signature: the arrays'
    shapes and dtypes, the other arguments' values); PathFailed for an argument that is
    neither an array nor a constant an export can hold."""
    arrays, key = [], []
    for index, argument in enumerate(arguments):
        if framework_of(argument) is not None:
            arrays.append(index)
            key.append((tuple(argument.shape), str(argument.dtype)))
        elif _constant(argument):
            key.append((type(argument).__name__, argument))
        else:
            raise PathFailed(
                f"argument {index} is a {type(argument).__name__}: an export holds arrays as "
                "inputs and numbers (or tuples of them) as constants"
            )
    return arrays, tuple(key)


def _bound(function, arguments, arrays):
    """``function`` of the array arguments alone, the others fixed at their values."""

    def of_arrays(*given):
        full = list(arguments)
        for index, value in zip(arrays, given):
            full[index] = value
        return function(*full)

    return of_arrays


def _once_per_signature(make):
    """A path that builds a runnable program per signature: ``make(function, arguments,
    arrays)`` returns a callable of the array arguments."""

    def maker(function):
        built = {}

        def run(*arguments):
            arrays, key = _split(arguments)
            if key not in built:
                try:
                    built[key] = make(function, arguments, arrays)
                except PathFailed as failed:  # the bad ids of one shape fail once
                    built[key] = failed
            if isinstance(built[key], PathFailed):
                raise built[key]
            return built[key](*(arguments[i] for i in arrays))

        return run

    return maker


# --- torch -------------------------------------------------------------------------------


def _compiled(function):
    import torch

    # Past its recompile limit Dynamo runs the function eagerly, which would check eager torch
    # under the path's name: every signature of the battery is compiled. Set for the call
    # alone, so that a check in process leaves the caller's Dynamo as it was.
    limits = {"recompile_limit": 1 << 20, "accumulated_recompile_limit": 1 << 20}
    limits = {k: v for k, v in limits.items() if hasattr(torch._dynamo.config, k)}
    compiled = torch.compile(function)
    # Dynamo's and Inductor's own failures; what the compiled code raises is the target's,
    # as eagerly (a user's IndexError, Inductor's bounds check)
    failures = (
        torch._dynamo.exc.BackendCompilerFailed,
        torch._dynamo.exc.Unsupported,
        torch._dynamo.exc.InternalTorchDynamoError,
    )

    def run(*arguments):
        try:
            with torch._dynamo.config.patch(**limits):
                return compiled(*arguments)
        except failures as error:
            raise _failed("torch.compile", error) from None

    return run


def _module(function, arguments, arrays):
    import torch

    class Exported(torch.nn.Module):
        def forward(self, *given):
            return _bound(function, arguments, arrays)(*given)

    # in eval mode, as production exports: a module in training mode is an exporter's warning,
    # every case's failure where the caller turns warnings into errors
    return Exported().eval()


@_once_per_signature
def _exported(function, arguments, arrays):
    import torch

    inputs = tuple(arguments[i] for i in arrays)
    try:
        with _quiet():
            program = torch.export.export(_module(function, arguments, arrays), inputs)
    except Exception as error:
        raise _failed("torch.export.export", error) from None
    return program.module()


@_once_per_signature
def _onnx(function, arguments, arrays):
    # ONNX Runtime 1.29 and later send telemetry from Linux and write its session file (.ses)
    # into the temporary folder; this is its opt-out, read once, when it is first imported
    # (given back after the call, as ``along`` gives back all the environment)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import torch

    try:
        import onnxruntime
    except Exception as error:
        raise _failed("import onnxruntime", error) from None

    inputs = tuple(arguments[i] for i in arrays)
    names = [f"a{i}" for i in arrays]
    try:
        with _quiet():
            program = torch.onnx.export(
                _module(function, arguments, arrays),
                inputs,
                input_names=names,
                dynamo=True,
                verbose=False,
            )
        model = program.model_proto.SerializeToString()
    except Exception as error:
        raise _failed("torch.onnx.export", error) from None
    wrong = resize_disagreements(*_resizes(program))
    if wrong:  # ONNX Runtime would run another rule than eager's: no result of it is eager's
        raise PathFailed(f"torch.onnx.export wrote {'; '.join(wrong)}")
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # its warnings go nowhere useful: errors still raise
    try:
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as error:
        raise _failed("onnxruntime.InferenceSession", error) from None
    wanted = {i.name for i in session.get_inputs()}  # an unused input is dropped by the export

    def run(*given):
        feeds = {n: frameworks.to_numpy(g) for n, g in zip(names, given) if n in wanted}
        results = session.run(None, feeds)
        return results[0] if len(results) == 1 else results

    return run


# The ONNX Resize attributes that compute each ATen resize's rule (ATen UpSample.h): the plain
# bicubic's A = -0.75 over taps clamped to the grid; the antialiased kernels (Keys' a = -0.5,
# or the triangle) over the grid's pixels only, renormalized: ONNX's exclude_outside. Half-pixel
# centres are ONNX's half_pixel ((i + 0.5) / scale - 0.5, also for one output, as ATen samples
# it), or align_corners. The ONNX defaults (opset 19) stand for an attribute not written.
ATEN_RESIZES = {
    "aten.upsample_bicubic2d.vec": {
        "mode": "cubic",
        "cubic_coeff_a": -0.75,
        "exclude_outside": 0,
        "antialias": 0,
    },
    "aten._upsample_bicubic2d_aa.default": {
        "mode": "cubic",
        "cubic_coeff_a": -0.5,
        "exclude_outside": 1,
        "antialias": 1,
    },
    "aten.upsample_bilinear2d.vec": {"mode": "linear", "exclude_outside": 0, "antialias": 0},
    "aten._upsample_bilinear2d_aa.default": {
        "mode": "linear",
        "exclude_outside": 1,
        "antialias": 1,
    },
}
RESIZE_DEFAULTS = {
    "mode": "nearest",
    "cubic_coeff_a": -0.75,
    "exclude_outside": 0,
    "antialias": 0,
    "coordinate_transformation_mode": "half_pixel",
}


def resize_disagreements(resizes: list[tuple[str, bool]], nodes: list[dict]) -> list[str]:
    """How the exported Resize nodes differ from the rules of the ATen resizes they came from,
    one line each ([] where every one agrees). ``resizes``: the exported program's ATen resizes
    in order, (target, align_corners); ``nodes``: the ONNX graph's Resize nodes in order, each
    its attributes as written ({name: value}, strings decoded)."""
    if len(resizes) != len(nodes):
        return [f"{len(nodes)} Resize nodes for {len(resizes)} ATen resizes"]
    wrong = []
    for index, ((target, corners), node) in enumerate(zip(resizes, nodes)):
        rule = dict(ATEN_RESIZES[target])
        rule["coordinate_transformation_mode"] = "align_corners" if corners else "half_pixel"
        for name, value in rule.items():
            written = node.get(name, RESIZE_DEFAULTS[name])
            if written != value:
                wrong.append(
                    f"Resize node {index + 1} (from {target}, align_corners={corners}) with "
                    f"{name} {written!r} where eager's rule has {value!r}"
                )
    return wrong


def _resizes(program) -> tuple[list[tuple[str, bool]], list[dict]]:
    """(the ATen resizes of an ONNXProgram's exported program, in order, each (target,
    align_corners); its ONNX graph's Resize nodes' attributes, in order)."""
    import onnx

    resizes = [
        (str(node.target), bool(node.args[2]))  # (input, size, align_corners, scales...)
        for node in program.exported_program.graph.nodes
        if node.op == "call_function" and str(node.target) in ATEN_RESIZES
    ]
    nodes = [
        {
            a.name: (v.decode() if isinstance(v, bytes) else v)
            for a in node.attribute
            for v in [onnx.helper.get_attribute_value(a)]
        }
        for node in program.model_proto.graph.node
        if node.op_type == "Resize"
    ]
    return resizes, nodes


def _openvino(hint: str | None):
    """OpenVINO's path: the torch function converted (``openvino.convert_model``, which traces
    it at the call's arrays) and compiled for the CPU, under the plugin's default precision
    hint or ``hint``. Its converter runs with its telemetry stub, which sends and writes
    nothing (no client id under ~/intel): make install-conformance leaves openvino-telemetry
    out, and where it is installed the converter is kept from importing it."""

    @_once_per_signature
    def made(function, arguments, arrays):
        try:
            with _without_openvino_telemetry():  # its converter is imported with it
                import openvino
        except Exception as error:
            raise _failed("import openvino", error) from None
        inputs = tuple(arguments[i] for i in arrays)
        try:
            with _quiet(), _without_openvino_telemetry():
                model = openvino.convert_model(
                    _module(function, arguments, arrays), example_input=inputs
                )
        except Exception as error:
            raise _failed("openvino.convert_model", error) from None
        config = {"INFERENCE_PRECISION_HINT": hint} if hint else {}
        try:
            compiled = openvino.Core().compile_model(model, "CPU", config)
        except Exception as error:
            raise _failed("openvino.Core().compile_model", error) from None

        def run(*given):
            request = compiled.create_infer_request()
            request.infer([_to_openvino(openvino, frameworks.to_numpy(g)) for g in given])
            outputs = [_from_openvino(openvino, t) for t in request.output_tensors]
            return outputs[0] if len(outputs) == 1 else outputs

        return run

    return made


def _executorch(xnnpack: bool):
    """ExecuTorch's path: the torch function exported (``torch.export``), made an ExecuTorch
    program (its portable kernels, or lowered to XNNPACK where it takes the ops) and run by
    its runtime from the program's bytes, as a device loads a .pte file."""

    @_once_per_signature
    def made(function, arguments, arrays):
        import torch

        try:
            from executorch.runtime import Runtime

            if xnnpack:
                from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
                    XnnpackPartitioner,
                )
                from executorch.exir import to_edge_transform_and_lower
            else:
                from executorch.exir import to_edge
        except Exception as error:
            raise _failed("import executorch", error) from None
        inputs = tuple(arguments[i] for i in arrays)
        try:
            with _quiet():
                program = torch.export.export(_module(function, arguments, arrays), inputs)
                if xnnpack:
                    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
                else:
                    edge = to_edge(program)
                buffer = edge.to_executorch().buffer
        except Exception as error:
            raise _failed("exporting to ExecuTorch", error) from None
        try:
            loaded = Runtime.get().load_program(buffer)
            method = loaded.load_method("forward")
        except Exception as error:
            raise _failed("ExecuTorch's runtime loading the program", error) from None

        def run(*given):
            outputs = method.execute(list(given))
            return outputs[0] if len(outputs) == 1 else list(outputs)

        run.program = (buffer, loaded)  # the method reads both: freed, a later call crashes
        return run

    return made


@contextlib.contextmanager
def _without_openvino_telemetry():
    """OpenVINO's converter with its telemetry stub even where openvino-telemetry is installed
    (it would write a client id under ~/intel and send events): the converter, imported with
    ``openvino``, falls back to its own stub on an ImportError, which a None in sys.modules
    gives. The caller's sys.modules is given back. (Where the caller imported openvino first,
    its converter is bound already: the kit's worker imports it here.)"""
    saved = sys.modules.get("openvino_telemetry", _ABSENT)
    sys.modules["openvino_telemetry"] = None
    try:
        yield
    finally:
        if saved is _ABSENT:
            sys.modules.pop("openvino_telemetry", None)
        else:
            sys.modules["openvino_telemetry"] = saved


_ABSENT = object()


def _to_openvino(openvino, array):
    """A NumPy array as OpenVINO's tensor; bfloat16 by its bits (OpenVINO's Python shows a
    bfloat16 tensor's data as float16, so that assigning values would convert them)."""
    if array.dtype != ml_dtypes.bfloat16:
        return openvino.Tensor(np.ascontiguousarray(array))
    tensor = openvino.Tensor(openvino.Type.bf16, list(array.shape))
    tensor.data.view(np.uint16)[...] = array.view(np.uint16)
    return tensor


def _from_openvino(openvino, tensor):
    """OpenVINO's output tensor as a NumPy array of its own dtype (bfloat16 by its bits)."""
    if tensor.element_type == openvino.Type.bf16:
        return tensor.data.view(np.uint16).copy().view(ml_dtypes.bfloat16)
    return tensor.data.copy()


# --- jax ---------------------------------------------------------------------------------


def _tracing_errors():
    import jax

    errors = jax.errors
    return (
        errors.ConcretizationTypeError,
        errors.TracerArrayConversionError,
        errors.TracerBoolConversionError,
        errors.TracerIntegerConversionError,
        errors.UnexpectedTracerError,
    )


def _jitted(function):
    import jax

    jitted = {}

    def run(*arguments):
        arrays, _ = _split(arguments)
        static = tuple(i for i in range(len(arguments)) if i not in arrays)
        if static not in jitted:
            jitted[static] = jax.jit(function, static_argnums=static)
        try:
            return jitted[static](*arguments)
        except _tracing_errors() as error:
            raise _failed("jax.jit", error) from None

    return run


@_once_per_signature
def _jax_exported(function, arguments, arrays):
    import jax
    from jax import export

    shapes = [jax.ShapeDtypeStruct(arguments[i].shape, arguments[i].dtype) for i in arrays]
    try:
        exported = export.export(jax.jit(_bound(function, arguments, arrays)))(*shapes)
        reloaded = export.deserialize(exported.serialize())
    except Exception as error:
        raise _failed("jax.export.export", error) from None
    return reloaded.call


_MAKERS = {
    "torch.compile": _compiled,
    "torch.export": _exported,
    "onnx": _onnx,
    "openvino": _openvino(None),
    "openvino-f32": _openvino("f32"),
    "executorch": _executorch(xnnpack=False),
    "executorch-xnnpack": _executorch(xnnpack=True),
    "jax.jit": _jitted,
    "jax.export": _jax_exported,
}


@contextlib.contextmanager
def _environment_kept():
    """The environment as it was before the block: what the block set, removed or changed
    given back."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for name in set(os.environ) - set(saved):
            del os.environ[name]
        for name, value in saved.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


# torch 2.13's exporters' notice of their own deprecated internals, raised as if from copyreg
# (so no module filter can tell it from a target's own warning): filtered by its words alone.
EXPORTERS_NOTICE = r"`isinstance\(treespec, LeafSpec\)` is deprecated"


@contextlib.contextmanager
def _quiet():
    """The exporters' progress lines ("[torch.onnx] Obtain model graph ...") kept out of a
    caller's output: the worker's go to its log anyway, the API's would reach the user's. So
    are the exporters' notices of their own deprecated internals (torch 2.13's exporter warns
    that ``isinstance(treespec, LeafSpec)`` is deprecated), which under a caller's
    warnings-as-errors would fail every export; any other warning is left to the caller's
    filters."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.filterwarnings("ignore", EXPORTERS_NOTICE, FutureWarning)
        yield
