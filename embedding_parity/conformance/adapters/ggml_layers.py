"""llama.cpp's ggml (0.25.3, as llama-cpp-python 0.3.36 vendors it): ``ggml_rope_ext``, the
rotation llama.cpp's models call, and ``ggml_get_rows`` + ``ggml_add``, its token and position
lookup, called through ctypes on ggml's CPU library, which ``make install-conformance`` builds
from the pinned archive (``engines``).

Each call builds a graph in a context of its own, computes it on one thread and copies the
result out: ggml's layout is the reverse of NumPy's, a tensor [head_dim, heads, tokens] is a
C-contiguous (tokens, heads, head_dim) array. ggml has float32 and float16 (and bfloat16, which
its rotation does not take: ``ggml_rope_ext`` on a bfloat16 tensor aborts the whole process,
GGML_ABORT). The adapter refuses bfloat16 and float64 (ggml has no float64) for the rotation
before the call, in one line, so that the worker lives; a bad id reaches ``ggml_get_rows`` as
llama.cpp's would, and ggml's own check (GGML_ASSERT) aborts the process: the row says so.
Run with GGML_NO_BACKTRACE set, or ggml's abort attaches gdb to print a backtrace first."""

import ctypes
import os

import ml_dtypes
import numpy as np

from backends import quantized
from embedding_parity import configs
from embedding_parity.conformance import engines

F32, F16, BF16, I32 = 0, 1, 30, 26  # enum ggml_type
QUANTIZED = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14}
NORMAL, NEOX = 0, 2  # rope modes: pairs (2i, 2i+1), pairs (i, i + n_dims/2)
TYPES = {np.dtype(np.float32): F32, np.dtype(np.float16): F16, np.dtype(ml_dtypes.bfloat16): BF16}
OVERHEAD = 1 << 20  # bytes of a context beyond its tensors' data: their headers, the graph


class InitParams(ctypes.Structure):
    _fields_ = [  # struct ggml_init_params
        ("mem_size", ctypes.c_size_t),
        ("mem_buffer", ctypes.c_void_p),
        ("no_alloc", ctypes.c_bool),
    ]


class CPlan(ctypes.Structure):
    _fields_ = [  # struct ggml_cplan (ggml-cpu.h)
        ("work_size", ctypes.c_size_t),
        ("work_data", ctypes.c_void_p),
        ("n_threads", ctypes.c_int),
        ("threadpool", ctypes.c_void_p),
        ("abort_callback", ctypes.c_void_p),
        ("abort_callback_data", ctypes.c_void_p),
        ("use_ref", ctypes.c_bool),
    ]


def _libraries():
    if engines.installed("llama-cpp-python") is None:
        raise ImportError(
            "ggml is not built: make install-conformance builds it from llama-cpp-python "
            "0.3.36's archive (python -m embedding_parity.conformance.engines fetch "
            "llama-cpp-python)"
        )
    where = os.path.join(engines.folder("llama-cpp-python"), "lib")
    base, cpu = (
        ctypes.CDLL(os.path.join(where, name), mode=ctypes.RTLD_GLOBAL)
        for name in engines.GGML_LIBRARIES
    )
    pointer, integer, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    signatures = [  # (function, restype, argtypes)
        (base.ggml_init, pointer, [InitParams]),
        (base.ggml_free, None, [pointer]),
        (base.ggml_new_tensor_1d, pointer, [pointer, integer, size]),
        (base.ggml_new_tensor_2d, pointer, [pointer, integer, size, size]),
        (base.ggml_new_tensor_3d, pointer, [pointer, integer, size, size, size]),
        (
            base.ggml_rope_ext,
            pointer,
            [pointer, pointer, pointer, pointer, integer, integer, integer] + [ctypes.c_float] * 6,
        ),
        (base.ggml_get_rows, pointer, [pointer, pointer, pointer]),
        (base.ggml_add, pointer, [pointer, pointer, pointer]),
        (base.ggml_new_graph, pointer, [pointer]),
        (base.ggml_build_forward_expand, None, [pointer, pointer]),
        (base.ggml_get_data, pointer, [pointer]),
        (base.ggml_nbytes, ctypes.c_size_t, [pointer]),
        (base.ggml_new_buffer, pointer, [pointer, ctypes.c_size_t]),
        (cpu.ggml_graph_plan, CPlan, [pointer, integer, pointer]),
        (cpu.ggml_graph_compute, integer, [pointer, ctypes.POINTER(CPlan)]),
        (cpu.ggml_cpu_init, None, []),
    ]
    for function, returned, arguments in signatures:
        function.restype, function.argtypes = returned, arguments
    cpu.ggml_cpu_init()
    return base, cpu


_BASE, _CPU = _libraries()


class _Context:
    """A ggml context: tensors from NumPy arrays, a graph planned once and computed, the result
    read. Freed on leaving its ``with`` block, or by ``close``."""

    def __init__(self, *arrays):
        # each tensor's data (inputs, results, a view or two), with room for the rest
        self.ctx = _BASE.ggml_init(InitParams(4 * sum(a.nbytes for a in arrays) + OVERHEAD))
        if not self.ctx:
            raise MemoryError("ggml_init returned no context")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        _BASE.ggml_free(self.ctx)

    def tensor(self, array: np.ndarray, kind: int):
        """A ggml tensor holding ``array`` (C order: ggml's ne are its shape reversed)."""
        array = np.ascontiguousarray(array)
        new = {
            1: _BASE.ggml_new_tensor_1d,
            2: _BASE.ggml_new_tensor_2d,
            3: _BASE.ggml_new_tensor_3d,
        }
        made = new[array.ndim](self.ctx, kind, *reversed(array.shape))
        ctypes.memmove(_BASE.ggml_get_data(made), array.ctypes.data, array.nbytes)
        return made

    def compute(self, result, shape: tuple, dtype) -> np.ndarray:
        """``result``'s graph computed once, on one thread; its data copied out."""
        return self.planned(result, shape, dtype)().copy()

    def planned(self, result, shape: tuple, dtype):
        """f() that computes ``result``'s graph on one thread, its graph, plan and work buffer
        made here, once (as llama.cpp reuses a graph), and returns ggml's result in place: a
        ``shape`` ``dtype`` view of the context's memory, valid until the context is freed."""
        graph = _BASE.ggml_new_graph(self.ctx)
        _BASE.ggml_build_forward_expand(graph, result)
        plan = _CPU.ggml_graph_plan(graph, 1, None)
        plan.work_data = _BASE.ggml_new_buffer(self.ctx, plan.work_size)
        nbytes = np.dtype(dtype).itemsize * int(np.prod(shape))
        if _BASE.ggml_nbytes(result) != nbytes:
            held = _BASE.ggml_nbytes(result)
            raise RuntimeError(f"ggml's result holds {held} bytes, not {nbytes}")
        data = ctypes.cast(_BASE.ggml_get_data(result), ctypes.POINTER(ctypes.c_uint8))
        view = np.ctypeslib.as_array(data, (nbytes,)).view(dtype).reshape(shape)

        def run() -> np.ndarray:
            status = _CPU.ggml_graph_compute(graph, ctypes.byref(plan))
            if status != 0:
                raise RuntimeError(f"ggml_graph_compute returned status {status}")
            return view

        return run


def rotary(head_dim: int, base: float, *, rotary_dim: int | None = None, layout: str = "half"):
    """f(x, positions) by ggml_rope_ext: x (..., T, head_dim) at positions (T,), the first
    ``rotary_dim`` dims turned (n_dims) in the half layout (GGML_ROPE_TYPE_NEOX) or in pairs
    (2i, 2i+1) (GGML_ROPE_TYPE_NORMAL), no scaling (freq_scale 1, ext_factor 0)."""
    n_dims = rotary_dim or head_dim
    mode = NEOX if layout == "half" else NORMAL

    def f(x, positions):
        if x.dtype not in (np.float32, np.float16):
            raise TypeError(
                f"ggml_rope_ext takes float32 or float16, not {x.dtype}: "
                + (
                    "on a bfloat16 tensor it aborts the whole process (GGML_ABORT)"
                    if x.dtype == ml_dtypes.bfloat16
                    else "ggml has no float64"
                )
            )
        length = x.shape[-2]
        tokens = np.moveaxis(x, -2, 0).reshape(length, -1, head_dim)  # [head_dim, heads, T]
        with _Context(tokens, np.asarray(positions)) as ggml:
            a = ggml.tensor(tokens, TYPES[x.dtype])
            b = ggml.tensor(np.asarray(positions, np.int32), I32)
            # ctx, a, b, freq factors, n_dims, mode, n_ctx_orig, freq_base, freq_scale,
            # ext_factor, attn_factor, beta_fast, beta_slow
            turned = _BASE.ggml_rope_ext(
                ggml.ctx, a, b, None, n_dims, mode, 0, base, 1.0, 0.0, 1.0, 32.0, 1.0
            )
            out = ggml.compute(turned, tokens.shape, x.dtype)
        return np.moveaxis(out.reshape(length, *x.shape[:-2], head_dim), 0, -2)

    return f


def rope(x, positions):
    """The textbook's rotation: the half layout, base 10000."""
    return rotary(x.shape[-1], 10000.0)(x, positions)


def _at(preset: str):
    rope = configs.preset(preset).options("rope", "--model")["rope"]
    if rope["scaling"] is not None:
        raise ValueError(f"{preset} scales its rotation: this adapter passes no scaling")
    return rotary(
        rope["head_dim"], rope["base"], rotary_dim=rope.get("rotary_dim"), layout=rope["layout"]
    )


gpt_neox_20b = _at("gpt-neox-20b")
phi_2 = _at("phi-2")
gpt_j_6b = _at("gpt-j-6b")


def get_rows(token_table, position_table, token_ids, start):
    """ggml_get_rows(token_table, ids) + ggml_get_rows(position_table, start .. start + T - 1),
    as llama.cpp's input layer reads learned positions (GPT-2's): ids int32, the rows returned
    in float32 whatever the table's type (ggml's get_rows), summed there."""
    if token_ids.dtype.kind not in "iu":  # llama_token is int32_t: nothing else reaches ggml
        raise TypeError(f"ggml_get_rows takes int32 ids (llama_token), not {token_ids.dtype}")
    if token_table.dtype not in TYPES:
        raise TypeError(f"ggml has no {token_table.dtype} tensors: float32, float16 or bfloat16")
    length = token_ids.shape[-1]
    rows = np.empty((*token_ids.shape, token_table.shape[1]), np.float32)  # the result's size
    with _Context(token_table, position_table, token_ids, rows, rows) as ggml:
        tokens = ggml.tensor(token_table, TYPES[token_table.dtype])
        positions = ggml.tensor(position_table, TYPES[position_table.dtype])
        ids = ggml.tensor(np.asarray(token_ids, np.int32).reshape(-1), I32)
        at = ggml.tensor(np.arange(start, start + length, dtype=np.int32), I32)
        rows = _BASE.ggml_get_rows(ggml.ctx, tokens, ids)
        summed = _BASE.ggml_add(ggml.ctx, rows, _BASE.ggml_get_rows(ggml.ctx, positions, at))
        dim = token_table.shape[1]
        return ggml.compute(summed, (*token_ids.shape, dim), np.float32)


def get_quantized_rows(blocks, format, token_ids):
    """ggml_get_rows on a quantized table, as llama.cpp's input layer reads token_embd: the
    table a [dim, vocab] tensor of ``format`` holding the file's bytes; the rows of the ids
    decoded to float32 (ggml's dequantize_row for the format), only those rows."""
    with QuantizedRows(blocks, format, token_ids) as rows:
        return rows().copy()


class QuantizedRows:
    """``get_quantized_rows`` with its context and graph built once: each call computes the
    graph again, on one thread, and returns ggml's (..., dim) float32 rows in place (a view
    of the context's memory, rewritten by the next call; valid until ``close``)."""

    def __init__(self, blocks, format, token_ids):
        if token_ids.dtype.kind not in "iu":  # llama_token is int32_t: nothing else reaches ggml
            raise TypeError(f"ggml_get_rows takes int32 ids (llama_token), not {token_ids.dtype}")
        block_size, type_size = _blocks_of(format)
        vocab, row_bytes = blocks.shape
        dim = row_bytes // type_size * block_size
        shape = (*token_ids.shape, dim)
        result = np.broadcast_to(np.float32(0), shape)  # its size, for the context's
        self._ggml = ggml = _Context(blocks, token_ids, result)
        table = _BASE.ggml_new_tensor_2d(ggml.ctx, QUANTIZED[format], dim, vocab)
        data = np.ascontiguousarray(blocks)
        ctypes.memmove(_BASE.ggml_get_data(table), data.ctypes.data, data.nbytes)
        ids = ggml.tensor(np.asarray(token_ids, np.int32).reshape(-1), I32)
        self._run = ggml.planned(_BASE.ggml_get_rows(ggml.ctx, table, ids), shape, np.float32)

    def __call__(self) -> np.ndarray:
        return self._run()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._ggml.close()


def _blocks_of(format: str) -> tuple[int, int]:
    """(block_size, type_size) of a format ggml is asked for; a KeyError names the others."""
    if format not in QUANTIZED:
        raise ValueError(f"this adapter passes {', '.join(QUANTIZED)} to ggml, not {format}")
    return quantized.BLOCKS[format]
