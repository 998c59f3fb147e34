"""Every backend is bit-identical to the NumPy expression on the same weights.

A gather copies rows exactly and one IEEE addition is correctly rounded, so no
tolerance is needed: every comparison here is assert_array_equal.
"""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from tests.conftest import native


def reference(token_table, position_table, token_ids, start):
    token_ids = np.asarray(token_ids)
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def assert_same(backend, y, expected):
    out = backend.to_numpy(y)
    assert out.dtype == expected.dtype
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", list(backends.DTYPES))
@pytest.mark.parametrize("shape", [(4,), (3, 4)], ids=["1d", "2d"])
@pytest.mark.parametrize("start", [0, 5, 12])
def test_bit_identical(backend, dtype, shape, start):
    token_table, position_table = backends.shared_weights(100, 10, 16, seed=1, dtype=dtype)
    token_ids = np.random.default_rng(2).integers(0, 100, size=shape)
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    assert_same(
        backend,
        layer(token_ids, start=start),
        reference(token_table, position_table, token_ids, start),
    )


@pytest.mark.parametrize("dtype", list(backends.DTYPES))
def test_native_ids(backend, dtype):
    token_table, position_table = backends.shared_weights(50, 6, 8, seed=3, dtype=dtype)
    token_ids = np.array([[0, 49, 7], [3, 3, 1]], dtype=np.int32)
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    y = layer(native(backend, token_ids), start=2)
    assert_same(backend, y, reference(token_table, position_table, token_ids, 2))


@pytest.mark.parametrize(
    "vocab_size, dim, max_seq_len, token_ids, start",
    [
        (100, 10, 16, np.arange(16) * 6, 0),  # T == max_seq_len
        (100, 10, 16, np.array([99]), 15),  # last id, last position
        (1, 5, 4, np.zeros((2, 4), dtype=np.int64), 0),  # vocab_size == 1
        (30, 1, 8, np.array([29, 0, 5]), 3),  # dim == 1
        (30, 4, 8, np.array([1, 2], dtype=np.uint8), 0),  # unsigned ids
    ],
    ids=["T-is-max_seq_len", "last-row", "vocab-1", "dim-1", "uint8-ids"],
)
def test_edge_shapes(backend, vocab_size, dim, max_seq_len, token_ids, start):
    token_table, position_table = backends.shared_weights(vocab_size, dim, max_seq_len)
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    assert_same(
        backend,
        layer(token_ids, start=start),
        reference(token_table, position_table, token_ids, start),
    )


@pytest.mark.parametrize("shape", [(0,), (3, 0)])
def test_empty_sequence_gives_empty_result(backend, shape):
    token_table, position_table = backends.shared_weights(10, 4, 6)
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    y = backend.to_numpy(
        layer(np.zeros(shape, dtype=np.int64), start=6)
    )  # start == max_seq_len is fine for T == 0
    assert y.shape == shape + (4,)
    assert y.dtype == np.float32


def test_the_two_terms_add_up_to_the_call(backend):
    token_table, position_table = backends.shared_weights(20, 6, 10, dtype="float16")
    token_ids = np.array([[3, 19, 0], [7, 7, 7]])
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    tokens = backend.to_numpy(layer.token_embeddings(token_ids))
    positions = backend.to_numpy(layer.position_embeddings(4, 3))
    np.testing.assert_array_equal(tokens, token_table[token_ids])
    np.testing.assert_array_equal(positions, position_table[4:7])
    np.testing.assert_array_equal(tokens + positions, backend.to_numpy(layer(token_ids, start=4)))


def test_layer_owns_its_weights(backend):
    token_table, position_table = backends.shared_weights(10, 4, 6)
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    before = backend.to_numpy(layer([1, 2]))
    token_table += 1.0  # the caller's arrays change; the layer's copies must not
    position_table += 1.0
    np.testing.assert_array_equal(backend.to_numpy(layer([1, 2])), before)


@st.composite
def problems(draw):
    vocab_size = draw(st.integers(1, 64))
    dim = draw(st.integers(1, 12))
    max_seq_len = draw(st.integers(1, 12))
    length = draw(st.integers(0, max_seq_len))
    start = draw(st.integers(0, max_seq_len - length))
    batch = draw(st.sampled_from([None, 1, 3]))
    shape = (length,) if batch is None else (batch, length)
    seed = draw(st.integers(0, 2**32 - 1))
    token_ids = np.random.default_rng(seed).integers(0, vocab_size, size=shape)
    dtype = draw(st.sampled_from(list(backends.DTYPES)))
    return vocab_size, dim, max_seq_len, token_ids, start, seed, dtype


@settings(max_examples=40, deadline=None)
@given(problem=problems())
def test_bit_identical_on_random_problems(backend, problem):
    vocab_size, dim, max_seq_len, token_ids, start, seed, dtype = problem
    token_table, position_table = backends.shared_weights(
        vocab_size, dim, max_seq_len, seed=seed, dtype=dtype
    )
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    y = layer(token_ids, start=start)
    assert_same(backend, y, reference(token_table, position_table, token_ids, start))
    # Each output row is exactly its token row plus its position row.
    out = backend.to_numpy(y)
    if token_ids.size:
        t = token_ids.shape[-1] - 1
        last = token_ids[..., t]
        np.testing.assert_array_equal(out[..., t, :], token_table[last] + position_table[start + t])


def _no_grad(backend):
    """The context a preallocated result needs: torch must not be recording gradients."""
    if backend.name == "torch":
        import torch

        return torch.inference_mode()
    return contextlib.nullcontext()


@pytest.mark.parametrize("dtype", list(backends.DTYPES))
@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "none"])
def test_out_buffer_gives_the_same_bits(backend, dtype, positions):
    token_table, position_table = backends.shared_weights(40, 8, 12, seed=6, dtype=dtype)
    kwargs = {"learned": {}, "sinusoidal": {"max_seq_len": 12}, "none": {}}[positions]
    table = position_table if positions == "learned" else None
    layer = backend.TokenPositionEmbedding(token_table, table, positions=positions, **kwargs)
    token_ids, other_ids = np.array([[1, 39, 4], [0, 0, 7]]), np.array([[2, 2, 2], [39, 0, 5]])
    expected = backend.to_numpy(layer(token_ids, start=2))  # the allocating (autograd) path
    expected_other = backend.to_numpy(layer(other_ids, start=1))
    with _no_grad(backend):
        fresh = layer(token_ids, start=2)  # the no-grad path, allocating
        np.testing.assert_array_equal(backend.to_numpy(fresh), expected)
        reused = layer(other_ids, start=1, out=fresh)  # the usual loop: y = layer(ids, out=y)
    if backend.name == "jax":  # immutable arrays: out is donated, its memory reused
        assert fresh.is_deleted()
    else:  # written in place
        assert reused is fresh
    np.testing.assert_array_equal(backend.to_numpy(reused), expected_other)


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_large_results_are_bit_identical_too(backend, dtype):
    # Over a megabyte of output, so the NumPy layer gathers and adds in chunks (64 rows
    # of 2048 float64), with a T that is not a multiple of the chunk.
    token_table, position_table = backends.shared_weights(50, 2048, 205, seed=8, dtype=dtype)
    token_ids = np.random.default_rng(9).integers(0, 50, size=(2, 200))
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    expected = reference(token_table, position_table, token_ids, 5)
    assert_same(backend, layer(token_ids, start=5), expected)
