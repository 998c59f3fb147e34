"""Targets that answer every call in one reused buffer, as a kernel writing into its workspace
or a port calling with out= does (``buffered``): the suite's correct functions so wrapped, and
two kernel bugs the invariance kinds catch, wrapped the same way."""

import numpy as np

from backends import numpy_backend

ALIGN = 64  # bytes between the starts of a tuple's arrays in the workspace
# bytes of workspace at first: more than any case's answer, so that every call writes the same
# memory (np.empty commits no page until it is written)
WORKSPACE = 1 << 26


def buffered(function):
    """``function``, its answer (an array, or a tuple of them) copied into one workspace that
    every call writes again and returned as views of it: a caller that keeps an answer
    without copying it sees the next call's."""
    workspace = np.empty(WORKSPACE, np.uint8)

    def within(arrays: list[np.ndarray]) -> list[np.ndarray]:
        nonlocal workspace
        starts = np.cumsum([0] + [-(-a.nbytes // ALIGN) * ALIGN for a in arrays])
        if workspace.nbytes < starts[-1]:
            workspace = np.empty(starts[-1], np.uint8)
        views = []
        for array, start in zip(arrays, starts):
            view = workspace[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
            view[...] = array
            views.append(view)
        return views

    def answer(*arguments):
        result = function(*arguments)
        if isinstance(result, tuple):
            return tuple(within([np.asarray(r) for r in result]))
        return within([np.asarray(result)])[0]

    return answer


def lookup(token_table, position_table, token_ids, start):
    return numpy_backend.TokenPositionEmbedding(token_table, position_table)(
        token_ids, start=start
    )


def rope(x, positions):
    return numpy_backend.apply_rope(x, positions)


def rope_reading_memory(x, positions):
    """llama.cpp PR #14580: a strided view's memory read in the view's shape."""
    contiguous = np.empty(x.shape, x.dtype).strides
    return rope(np.lib.stride_tricks.as_strided(x, x.shape, contiguous), positions)


class RecastCache:
    """vLLM's get_rope: one cos and sin cache, recast in place to the dtype of each call and
    kept, so that a bfloat16 call leaves later float32 calls a bfloat16 cache."""

    def __init__(self):
        self.cache = None

    def __call__(self, x, positions):
        if self.cache is None:
            w = 10000.0 ** (-np.arange(0, x.shape[-1], 2) / x.shape[-1])
            angles = np.arange(2048)[:, None] * w
            self.cache = np.concatenate([np.cos(angles), np.sin(angles)], -1).astype(np.float32)
        if self.cache.dtype != x.dtype:
            self.cache = self.cache.astype(x.dtype)
        cos, sin = np.split(self.cache[positions].astype(np.float32), 2, axis=-1)
        a, b = np.split(x.astype(np.float32), 2, axis=-1)
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], -1).astype(x.dtype)


buffered_lookup = buffered(lookup)
buffered_rope = buffered(rope)
buffered_rope_reading_memory = buffered(rope_reading_memory)
buffered_recast_cache = buffered(RecastCache())
