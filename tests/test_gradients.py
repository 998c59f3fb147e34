"""The backward pass on every backend: the scatter-add of the token gradient, the batch sum of
the position gradient, torch.nn.Embedding's padding_idx and scale_grad_by_freq, dense and
sparse, held to a float64 oracle; and the same errors for bad options everywhere."""

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import backends
from tests.conftest import native

DTYPES = list(backends.DTYPES)
VOCAB, DIM, MAX_SEQ_LEN = 12, 5, 8

# ids of each case; "exact": no row of either gradient sums more than two terms
CASES = {
    "distinct": (np.array([3, 1, 4]), True),
    "pairs": (np.array([[1, 2, 1], [2, 5, 5]]), True),
    "repeated": (np.array([[7, 7, 7, 7], [7, 2, 7, 2], [2, 2, 2, 9]]), False),
    "all-equal": (np.full((1, 6), 4), False),
    "empty": (np.zeros((2, 0), dtype=np.int64), True),
}
OPTIONS = {  # (padding_idx, scale_grad_by_freq); 7 and 2 are repeated ids above, 4 as well
    "plain": (None, False),
    "padding": (7, False),
    "scaled": (None, True),
    "padding-scaled": (2, True),
}


def oracle(ids, upstream, start, padding_idx, scale):
    """float64 gradients, and per element the sum of |terms| and the number of terms."""
    flat, rows = ids.reshape(-1), upstream.reshape(-1, DIM).astype(np.float64)
    if scale:
        rows = rows / np.bincount(flat, minlength=VOCAB)[flat][:, None]
    keep = flat != padding_idx
    token, absolute = np.zeros((VOCAB, DIM)), np.zeros((VOCAB, DIM))
    np.add.at(token, flat[keep], rows[keep])
    np.add.at(absolute, flat[keep], np.abs(rows[keep]))
    terms = np.bincount(flat[keep], minlength=VOCAB)[:, None]
    position, position_abs = np.zeros((MAX_SEQ_LEN, DIM)), np.zeros((MAX_SEQ_LEN, DIM))
    batch = (upstream if upstream.ndim == 3 else upstream[None]).astype(np.float64)  # (B, T, dim)
    position[start : start + ids.shape[-1]] = batch.sum(axis=0)
    position_abs[start : start + ids.shape[-1]] = np.abs(batch).sum(axis=0)
    return (token, absolute, terms), (position, position_abs, len(batch))


def bound(dtype, terms, absolute):
    """How far a sum of n terms, each addition rounded to ``dtype``, may land from the exact
    sum, in any order: (n - 1) * eps * sum(|terms|) to first order (recursive summation,
    Higham, Accuracy and Stability of Numerical Algorithms, 4.2), plus one more eps per
    term where scale_grad_by_freq rounds each term before it is added: n * eps * sum(|terms|).
    """
    eps = float(ml_dtypes.finfo(np.dtype(dtype)).eps)
    return terms * eps * absolute


def check(result, expected, exact, dtype):
    value, absolute, terms = expected
    if exact:  # one rounding of an exact sum: correctly rounded, whatever the order
        np.testing.assert_array_equal(result, value.astype(dtype))
    else:
        assert result.dtype == np.dtype(dtype)
        error = np.abs(result.astype(np.float64) - value)
        assert np.all(error <= bound(dtype, terms, absolute)), error.max()


def scatter(indices, rows, dtype):
    dense = np.zeros((VOCAB, DIM), dtype)
    dense[indices] = rows
    return dense


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_gradients_are_the_scatter_add_and_the_batch_sum(backend, case, dtype):
    ids, exact = CASES[case]
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN, dtype=dtype)
    upstream = np.random.default_rng(1).standard_normal((*ids.shape, DIM)).astype(dtype)
    start = 1
    for option, (padding_idx, scale) in OPTIONS.items():
        layer = backend.TokenPositionEmbedding(
            token_table, position_table, padding_idx=padding_idx, scale_grad_by_freq=scale
        )
        token, position = oracle(ids, upstream, start, padding_idx, scale)
        grads = backend.gradients(layer, ids, upstream, start)
        assert set(grads) == {"token_table", "position_table"}, option
        dense = backend.to_numpy(grads["token_table"])
        check(dense, token, exact, dtype)
        check(backend.to_numpy(grads["position_table"]), position, exact, dtype)
        if padding_idx is not None:
            assert not dense[padding_idx].any()  # the padding row never learns
        if scale:
            continue  # torch refuses sparse with scale_grad_by_freq; so does every backend
        indices, rows = (
            backend.to_numpy(a)
            for a in backend.gradients(layer, native(backend, ids), upstream, start, sparse=True)[
                "token_table"
            ]
        )
        present = np.unique(ids[ids != padding_idx]) if padding_idx is not None else np.unique(ids)
        np.testing.assert_array_equal(indices, present)  # the distinct ids, ascending
        assert rows.shape == (len(present), DIM) and rows.dtype == np.dtype(dtype)
        check(scatter(indices, rows, dtype), token, exact, dtype)


def same_bits_but_nan(found, expected) -> bool:
    """Bit for bit, except that a NaN need only be a NaN: which NaN a sum of two NaNs gives
    (sign, payload) follows the operand order of the machine's add, which IEEE leaves open
    and NumPy's own loops do not fix (np.add.at and a vector add differ)."""
    nan = np.isnan(found)
    return bool(np.array_equal(nan, np.isnan(expected))) and (
        found[~nan].tobytes() == expected[~nan].tobytes()
    )


@settings(max_examples=30, deadline=None)
@example(ids=[4] * 12 + [1, 4, 2, 1], dtype="float32", padding=None, batched=True, seed=0)
@given(
    ids=st.lists(st.integers(0, 5), max_size=40),  # small vocabulary: ids repeat past 8 times
    dtype=st.sampled_from(DTYPES),
    padding=st.sampled_from([None, 0, 3]),
    batched=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_sparse_rows_are_np_add_at_sums_bit_for_bit(ids, dtype, padding, batched, seed):
    """sparse=True (NumPy's sort and a pass per repeat, then np.add.at past MAX_PASSES;
    JAX's segment_sum into one segment per id) gives each id's rows summed in their order
    from zero: np.add.at's bits, signed zeros and all, and the dense gradient's rows. Every
    gradient is a sum from +0.0, a -0.0 term alone included (XLA folds a one-term sum to
    the term: JAX once kept -0.0 for a single id, and NumPy and JAX for the positions)."""
    ids = np.array(ids, dtype=np.int64).reshape((1, -1) if batched else (-1,))
    rng = np.random.default_rng(seed)
    upstream = rng.standard_normal((*ids.shape, DIM)).astype(dtype)
    upstream[rng.random(upstream.shape) < 0.3] = -0.0
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf]).astype(dtype)
    odd = rng.random(upstream.shape) < 0.05
    upstream[odd] = rng.choice(specials, int(odd.sum()))
    flat, rows = ids.reshape(-1), upstream.reshape(-1, DIM)
    keep = flat != padding
    present = np.unique(flat[keep])
    expected = np.zeros((len(present), DIM), dtype)
    np.add.at(expected, np.searchsorted(present, flat[keep]), rows[keep])
    token_table, position_table = backends.shared_weights(6, DIM, 40, dtype=dtype)
    positions = []
    for name in ("numpy", "jax"):
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(token_table, position_table, padding_idx=padding)
        indices, found = be.gradients(layer, ids, upstream, sparse=True)["token_table"]
        np.testing.assert_array_equal(be.to_numpy(indices), present)
        assert same_bits_but_nan(be.to_numpy(found), expected), name
        grads = be.gradients(layer, ids, upstream)
        assert same_bits_but_nan(be.to_numpy(grads["token_table"])[present], expected), name
        positions.append(be.to_numpy(grads["position_table"]))
    torch = backends.get("torch")  # one term per position: exact on every backend
    layer = torch.TokenPositionEmbedding(token_table, position_table, padding_idx=padding)
    positions.append(torch.to_numpy(torch.gradients(layer, ids, upstream)["position_table"]))
    assert same_bits_but_nan(positions[0], positions[1])
    assert same_bits_but_nan(positions[0], positions[2])


def test_backends_agree_bitwise_where_rows_have_two_terms(backend):
    ids = np.array([[0, 3, 3, 1], [1, 2, 0, 2]])  # every id twice, B = 2
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN)
    upstream = np.random.default_rng(2).standard_normal((2, 4, DIM)).astype(np.float32)
    reference = backends.get("numpy")
    expected = reference.gradients(
        reference.TokenPositionEmbedding(token_table, position_table), ids, upstream
    )
    grads = backend.gradients(
        backend.TokenPositionEmbedding(token_table, position_table), native(backend, ids), upstream
    )
    for name in ("token_table", "position_table"):
        np.testing.assert_array_equal(backend.to_numpy(grads[name]), expected[name])


def test_learned_positions_only_get_a_position_gradient(backend):
    token_table, _ = backends.shared_weights(VOCAB, 4, 1)  # even dim, for the sinusoidal table
    upstream = np.ones((3, 4), np.float32)
    sinusoidal = backend.TokenPositionEmbedding(token_table, positions="sinusoidal", max_seq_len=8)
    none = backend.TokenPositionEmbedding(token_table, positions="none")
    for layer in (sinusoidal, none):
        grads = backend.gradients(layer, [1, 1, 2], upstream)
        assert list(grads) == ["token_table"]
        np.testing.assert_array_equal(backend.to_numpy(grads["token_table"])[1], np.full(4, 2.0))


def test_the_padding_row_is_returned_as_stored(backend):
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN)
    layer = backend.TokenPositionEmbedding(token_table, position_table, padding_idx=-1)
    assert layer.padding_idx == VOCAB - 1  # counted from the end, as torch does
    y = backend.to_numpy(layer([VOCAB - 1, 0]))
    np.testing.assert_array_equal(y, token_table[[VOCAB - 1, 0]] + position_table[:2])


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"padding_idx": VOCAB}, ValueError, "padding_idx 12 is out of range for vocab_size 12"),
        ({"padding_idx": -VOCAB - 1}, ValueError, "padding_idx -13 is out of range"),
        ({"padding_idx": 1.0}, TypeError, "padding_idx must be an integer, got 1.0"),
        ({"padding_idx": True}, TypeError, "padding_idx must be an integer, got True"),
        ({"scale_grad_by_freq": 1}, TypeError, "scale_grad_by_freq must be True or False"),
    ],
)
def test_bad_options_are_refused_the_same_way(backend, options, error, message):
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN)
    with pytest.raises(error, match=message):
        backend.TokenPositionEmbedding(token_table, position_table, **options)


@pytest.mark.parametrize(
    "upstream, sparse, error, message",
    [
        (np.ones((3, DIM), np.float32), False, ValueError, "upstream has shape (3, 5)"),
        (np.ones((2, DIM), np.float64), False, TypeError, "upstream is float64"),
        (np.ones((2, DIM), np.float32), "yes", TypeError, "sparse must be True or False"),
    ],
)
def test_bad_gradient_calls_are_refused_the_same_way(backend, upstream, sparse, error, message):
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN)
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    with pytest.raises(error, match=re.escape(message)):
        backend.gradients(layer, [1, 2], upstream, sparse=sparse)


def test_sparse_with_scale_grad_by_freq_is_refused_everywhere(backend):
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN)
    layer = backend.TokenPositionEmbedding(token_table, position_table, scale_grad_by_freq=True)
    with pytest.raises(ValueError, match="sparse=True cannot be combined with scale_grad_by_freq"):
        backend.gradients(layer, [1, 2], np.ones((2, DIM), np.float32), sparse=True)


def test_bad_ids_raise_before_any_gradient(backend):
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN)
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    with pytest.raises(IndexError, match="token id 12 at token_ids\\[1\\]"):
        backend.gradients(layer, [1, 12], np.ones((2, DIM), np.float32))
    with pytest.raises(ValueError, match="exceeds max_seq_len 8"):
        backend.gradients(layer, [1, 2], np.ones((2, DIM), np.float32), start=7)


def test_scaled_gradients_of_a_frequent_id_are_not_lost_in_low_precision(backend):
    # 300 occurrences of one id, each upstream row 1: each term 1/300, the row's sum 1.
    # Summing first and dividing after would saturate: bfloat16 holds no integer above 256
    # with a unit step, so the sum of 300 ones is not 300.
    token_table, position_table = backends.shared_weights(VOCAB, DIM, 300, dtype="bfloat16")
    layer = backend.TokenPositionEmbedding(token_table, position_table, scale_grad_by_freq=True)
    ids = np.full(300, 2)
    grads = backend.gradients(layer, ids, np.ones((300, DIM), token_table.dtype))
    np.testing.assert_allclose(
        backend.to_numpy(grads["token_table"])[2].astype(float), 1, rtol=0.02
    )


def test_torch_gradients_leave_the_layer_as_they_found_it():
    import torch

    if "torch" not in backends.names():
        pytest.skip("torch is not installed (CI requires it: test_required_backends_are_installed)")
    be = backends.get("torch")
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN)
    layer = be.TokenPositionEmbedding(token_table, position_table)
    layer.token.sparse = True
    layer([1, 2]).sum().backward()  # a caller's own accumulated gradient
    kept = layer.token.weight.grad.to_dense().clone()
    with torch.inference_mode():  # a caller's inference mode does not stop the backward pass
        grads = be.gradients(layer, [3, 3], np.ones((2, DIM), np.float32))
    assert torch.equal(grads["token_table"][3], torch.full((DIM,), 2.0))
    assert layer.token.sparse is True
    assert torch.equal(layer.token.weight.grad.to_dense(), kept)
    layer.position.weight.requires_grad_(False)  # frozen: no entry, not None
    assert list(be.gradients(layer, [3], np.ones((1, DIM), np.float32))) == ["token_table"]
    layer.token.weight.requires_grad_(False)
    with pytest.raises(ValueError, match="every table of this layer is frozen"):
        be.gradients(layer, [3], np.ones((1, DIM), np.float32))


@pytest.mark.parametrize("positions", ["sinusoidal", "none"])
def test_sparse_gradients_without_learned_positions(backend, positions):
    token_table, _ = backends.shared_weights(VOCAB, 4, 1)
    options = {"max_seq_len": 8} if positions == "sinusoidal" else {}
    layer = backend.TokenPositionEmbedding(token_table, positions=positions, **options)
    grads = backend.gradients(
        layer, native(backend, np.array([5, 1, 5])), np.ones((3, 4), np.float32), sparse=True
    )
    indices, rows = (backend.to_numpy(a) for a in grads["token_table"])
    np.testing.assert_array_equal(indices, [1, 5])
    np.testing.assert_array_equal(rows, [[1.0] * 4, [2.0] * 4])


@pytest.mark.parametrize("sparse", [False, True])
def test_a_big_endian_upstream_is_read_as_its_values(backend, sparse):
    """Non-native byte order (data from a file, say) is accepted, as ids and tables are: the
    same gradient as the native upstream's, on every backend."""
    layer = backend.TokenPositionEmbedding(*backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN))
    ids = np.array([[3, 1], [3, 9]])
    upstream = np.random.default_rng(0).standard_normal((2, 2, DIM)).astype(np.float32)
    native_grads = backend.gradients(layer, ids, upstream, sparse=sparse)
    swapped = backend.gradients(layer, ids, upstream.astype(">f4"), sparse=sparse)
    for name, expected in native_grads.items():
        pairs = (
            zip(expected, swapped[name])
            if sparse and name == "token_table"
            else [(expected, swapped[name])]
        )
        for want, got in pairs:
            np.testing.assert_array_equal(backend.to_numpy(got), backend.to_numpy(want))
            assert backend.to_numpy(got).dtype.isnative


@pytest.mark.parametrize("sparse", [False, True])
def test_tables_of_width_zero_have_gradients_of_width_zero(backend, sparse):
    """dim 0 (NumPy's gradients once raised a reshape error here, and JAX's sparse route
    divided by zero): the same shapes, and for sparse the same ids, on every backend."""
    layer = backend.TokenPositionEmbedding(*backends.shared_weights(VOCAB, 0, MAX_SEQ_LEN))
    grads = backend.gradients(
        layer, [[3, 1], [3, 9]], np.zeros((2, 2, 0), np.float32), sparse=sparse
    )
    assert backend.to_numpy(grads["position_table"]).shape == (MAX_SEQ_LEN, 0)
    if sparse:
        indices, rows = (backend.to_numpy(a) for a in grads["token_table"])
        np.testing.assert_array_equal(indices, [1, 3, 9])
        assert rows.shape == (3, 0)
    else:
        assert backend.to_numpy(grads["token_table"]).shape == (VOCAB, 0)
