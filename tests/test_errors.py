"""Bad input raises the same exception, with the same message, on every backend.

Raw NumPy wraps negative ids and JAX clamps out-of-range ones; the suite checks
everything on the host first, with one shared implementation. And at the command line, a
flag that takes a comma list, given its values as separate words, says how to type them.
"""

import numpy as np
import pytest

import backends
import compare
from tests.conftest import native
from tests.test_parity import _no_grad


@pytest.fixture(scope="module")
def tables():
    return backends.shared_weights(100, 10, 16)


def raised(backend, tables, token_ids, start=0):
    """The exception a call raises, asserting it raised at all."""
    layer = backend.TokenPositionEmbedding(*tables)
    with pytest.raises(Exception) as info:
        layer(token_ids, start=start)
    return info.value


def numpy_message(tables, token_ids, start=0):
    return str(raised(backends.get("numpy"), tables, token_ids, start))


@pytest.mark.parametrize(
    "token_ids, bad_id, where",
    [
        ([5, 10, 100, 21], 100, "token_ids[2]"),
        ([5, -1, 7], -1, "token_ids[1]"),
        ([[1, 2], [3, 1000]], 1000, "token_ids[1, 1]"),
        (np.array([3, 2**40]), 2**40, "token_ids[1]"),  # JAX would truncate this to int32 0
        (np.array([7, 255], dtype=np.uint8), 255, "token_ids[1]"),
    ],
    ids=["too-big", "negative", "2d", "beyond-int32", "uint8"],
)
def test_out_of_range_id_is_an_index_error(backend, tables, token_ids, bad_id, where):
    error = raised(backend, tables, np.asarray(token_ids))
    assert type(error) is IndexError
    message = str(error)
    assert f"token id {bad_id} at {where}" in message
    assert "vocab_size 100" in message
    assert message == numpy_message(tables, np.asarray(token_ids))


def test_out_of_range_native_ids(backend, tables):
    error = raised(backend, tables, native(backend, np.array([0, 100], dtype=np.int32)))
    assert type(error) is IndexError and "token id 100 at token_ids[1]" in str(error)


def test_token_embeddings_checks_ids_too(backend, tables):
    layer = backend.TokenPositionEmbedding(*tables)
    with pytest.raises(IndexError, match="token id -3 at token_ids\\[0\\]"):
        layer.token_embeddings(np.array([-3]))


@pytest.mark.parametrize(
    "token_ids",
    [
        np.array([1.0, 2.0]),
        np.array([True, False]),
        np.array([1 + 0j]),
        np.array([1, 2], dtype=object),
        np.array(["5", "10"]),
    ],
    ids=["float", "bool", "complex", "object", "str"],
)
def test_non_integer_ids_are_a_type_error(backend, tables, token_ids):
    error = raised(backend, tables, token_ids)
    assert type(error) is TypeError
    assert f"token_ids must be integers, got dtype {token_ids.dtype}" in str(error)


@pytest.mark.parametrize("dtype", ["float32", "bool"])
def test_non_integer_native_ids_are_a_type_error(backend, tables, dtype):
    error = raised(backend, tables, native(backend, np.zeros(3, dtype=dtype)))
    assert type(error) is TypeError and "token_ids must be integers" in str(error)


def test_bfloat16_native_ids_are_a_type_error(backend, tables):
    if backend.name == "torch":
        import torch

        ids = torch.zeros(2, dtype=torch.bfloat16)  # torch's own bfloat16 has no NumPy twin
    else:
        ids = native(backend, np.zeros(2, dtype=backends.DTYPES["bfloat16"]))
    error = raised(backend, tables, ids)
    assert type(error) is TypeError and "token_ids must be integers" in str(error)


@pytest.mark.parametrize("shape", [(), (2, 3, 4)], ids=["0d", "3d"])
def test_ids_must_be_1d_or_2d(backend, tables, shape):
    token_ids = np.zeros(shape, dtype=np.int64)
    error = raised(backend, tables, token_ids)
    assert type(error) is ValueError
    assert f"got shape {shape}" in str(error)
    assert str(error) == numpy_message(tables, token_ids)


@pytest.mark.parametrize(
    "start, length, expected",
    [
        (-1, 4, "start -1 is negative: positions count from 0"),
        (13, 4, "start 13 + T 4 = 17 exceeds max_seq_len 16: use at most 3 tokens from start 13"),
        (15, 2, "start 15 + T 2 = 17 exceeds max_seq_len 16: use at most 1 token from start 15"),
        (0, 17, "start 0 + T 17 = 17 exceeds max_seq_len 16"),
        (17, 0, "start 17 + T 0 = 17 exceeds max_seq_len 16: start below 16"),
    ],
)
def test_positions_outside_the_table_are_a_value_error(backend, tables, start, length, expected):
    token_ids = np.ones((2, length), dtype=np.int64)
    error = raised(backend, tables, token_ids, start)
    assert type(error) is ValueError
    assert expected in str(error)
    layer = backend.TokenPositionEmbedding(*tables)
    with pytest.raises(ValueError, match="exceeds|negative"):
        layer.position_embeddings(start, length)


@pytest.mark.parametrize("start", [1.0, "2", None, True])
def test_start_must_be_an_integer(backend, tables, start):
    error = raised(backend, tables, np.array([1, 2]), start)
    assert type(error) is TypeError and "start must be an integer" in str(error)


def test_numpy_integer_start_is_fine(backend, tables):
    layer = backend.TokenPositionEmbedding(*tables)
    y = backend.to_numpy(layer(np.array([1, 2]), start=np.int64(3)))
    np.testing.assert_array_equal(y, tables[0][[1, 2]] + tables[1][3:5])


def test_ids_are_checked_before_positions(backend, tables):
    # Both are wrong; the ids' problem is reported, on every backend.
    assert type(raised(backend, tables, np.array([1.5]), start=-1)) is TypeError


f32 = np.zeros((5, 3), dtype=np.float32)


@pytest.mark.parametrize(
    "token_table, position_table, expected",
    [
        (np.zeros(5, np.float32), f32, "token_table must be 2-D"),
        (f32, np.zeros((2, 4, 3), np.float32), "position_table must be 2-D"),
        (np.zeros((5, 3), np.int32), np.zeros((5, 3), np.int32), "token_table has dtype int32"),
        (f32, np.zeros((5, 3), np.complex64), "position_table has dtype complex64"),
        (f32, np.zeros((5, 4), np.float32), "token_table has dim 3 but position_table has dim 4"),
        (f32, np.zeros((5, 3), np.float64), "token_table is float32 but position_table is float64"),
    ],
    ids=["token-1d", "position-3d", "int", "complex", "dims", "dtypes"],
)
def test_bad_tables_are_a_value_error_at_construction(
    backend, token_table, position_table, expected
):
    with pytest.raises(ValueError) as info:
        backend.TokenPositionEmbedding(token_table, position_table)
    assert expected in str(info.value)


def test_empty_ids_are_valid(backend, tables):
    layer = backend.TokenPositionEmbedding(*tables)
    assert backend.to_numpy(layer(np.zeros((0,), dtype=np.int32), start=16)).shape == (0, 10)


@pytest.mark.parametrize(
    "shape, dtype, expected",
    [
        ((2, 3, 10), np.float16, "got a float16 array of shape (2, 3, 10)"),
        ((2, 4, 10), np.float32, "got a float32 array of shape (2, 4, 10)"),
    ],
    ids=["dtype", "shape"],
)
def test_a_wrong_out_buffer_is_a_value_error(backend, tables, shape, dtype, expected):
    layer = backend.TokenPositionEmbedding(*tables)
    out = native(backend, np.zeros(shape, dtype=dtype))
    with _no_grad(backend), pytest.raises(ValueError) as info:
        layer(np.ones((2, 3), dtype=np.int64), out=out)
    assert "out must be a C-contiguous float32 array of shape (2, 3, 10)" in str(info.value)
    assert expected in str(info.value)


@pytest.mark.parametrize("name", [n for n in backends.names() if n != "jax"])
def test_a_non_contiguous_out_buffer_is_a_value_error(name, tables):
    backend = backends.get(name)  # JAX has no strided arrays to refuse
    layer = backend.TokenPositionEmbedding(*tables)
    out = native(backend, np.zeros((2, 3, 10), dtype=np.float32, order="F"))
    with _no_grad(backend), pytest.raises(ValueError, match="got a non-contiguous float32 array"):
        layer(np.ones((2, 3), dtype=np.int64), out=out)


def test_torch_out_refuses_to_drop_gradients(tables):
    torch = pytest.importorskip("torch")
    layer = backends.get("torch").TokenPositionEmbedding(*tables)
    with pytest.raises(ValueError, match="out= cannot record gradients"):
        layer(np.array([1, 2]), out=torch.empty(2, 10))


@pytest.mark.parametrize(
    "token_ids, vocab_size, bad_id, where",
    [
        (np.array([5, -1], dtype=np.int8), 300, -1, "token_ids[1]"),  # every int8 is < 300
        (np.array([5, -1], dtype=np.int16), 70000, -1, "token_ids[1]"),
        (np.array([5, 7, -128], dtype=np.int8), 128, -128, "token_ids[2]"),
        (np.array([5, 300], dtype=">i8"), 300, 300, "token_ids[1]"),  # big-endian
        (np.array([1, 30], dtype=np.uint8), 30, 30, "token_ids[1]"),  # unsigned == vocab_size
        # vocab_size between 2**7 and 2**8: viewed as uint8, -100 is 156, inside the vocabulary.
        (np.array([-100], dtype=np.int8), 200, -100, "token_ids[0]"),
    ],
    ids=[
        "int8-vocab-300",
        "int16-vocab-70000",
        "int8-min",
        "big-endian",
        "uint8-at-vocab",
        "int8-vocab-200",
    ],
)
def test_negative_ids_of_narrow_or_foreign_dtypes(backend, token_ids, vocab_size, bad_id, where):
    token_table, position_table = backends.shared_weights(vocab_size, 4, 8)
    error = raised(backend, (token_table, position_table), token_ids)
    assert type(error) is IndexError and f"token id {bad_id} at {where}" in str(error)
    # Past 64 ids the check takes another route (one NumPy reduction, where a few ids are
    # compared in Python): the same bad id among 100 good ones, at [1, 20] of (2, 50).
    many = np.zeros(100, token_ids.dtype)
    many[70] = token_ids[-1]
    error = raised(backend, (token_table, position_table), many.reshape(2, 50))
    assert type(error) is IndexError and f"token id {bad_id} at token_ids[1, 20]" in str(error)


def test_big_endian_and_strided_ids_are_fine(backend, tables):
    layer = backend.TokenPositionEmbedding(*tables)
    for token_ids in (
        np.array([5, 7, 99], dtype=">i8"),
        np.arange(10)[::-3],
        np.arange(12).reshape(3, 4).T,
    ):
        expected = tables[0][token_ids] + tables[1][: token_ids.shape[-1]]
        np.testing.assert_array_equal(backend.to_numpy(layer(token_ids)), expected)


def test_strided_tables_are_fine(backend):
    token_table, position_table = backends.shared_weights(20, 6, 8)
    layer = backend.TokenPositionEmbedding(token_table[::-1], position_table[:, ::-1])
    expected = token_table[::-1][[1, 2]] + position_table[:, ::-1][:2]
    np.testing.assert_array_equal(backend.to_numpy(layer([1, 2])), expected)


def test_big_endian_tables_and_inputs_are_read_as_their_values(backend):
    """Data from a file may be big-endian: tables, RoPE's x and T5's bias table are accepted
    (once refused as "dtype >f4, but the tables must be ... float32") and give the native
    result."""
    token_table, position_table = backends.shared_weights(20, 6, 8)
    layer = backend.TokenPositionEmbedding(token_table.astype(">f4"), position_table.astype(">f4"))
    expected = token_table[[1, 2]] + position_table[:2]
    np.testing.assert_array_equal(backend.to_numpy(layer([1, 2])), expected)
    x = position_table[None, :4]  # (1, T, dim)
    rotated = backend.to_numpy(backend.apply_rope(x.astype(">f4"), np.arange(4)))
    np.testing.assert_array_equal(rotated, backend.to_numpy(backend.apply_rope(x, np.arange(4))))
    table = token_table[:, :4].copy()  # (num_buckets 20, heads 4)
    bias = backend.to_numpy(backend.t5_bias(table.astype(">f4"), 3, max_distance=16))
    np.testing.assert_array_equal(
        bias, backend.to_numpy(backend.t5_bias(table, 3, max_distance=16))
    )


def test_an_empty_list_is_an_empty_sequence(backend, tables):
    layer = backend.TokenPositionEmbedding(*tables)
    assert backend.to_numpy(layer([])).shape == (0, 10)


def test_timedelta_ids_are_a_type_error(backend, tables):
    error = raised(backend, tables, np.array([1, 2], dtype="m8[s]"))
    assert type(error) is TypeError


@pytest.mark.parametrize(
    "length, error, message",
    [
        (-1, ValueError, "the number of positions must be at least 0, got -1"),
        (2.0, TypeError, "the number of positions must be an integer, got 2.0"),
        (True, TypeError, "the number of positions must be an integer, got True"),
    ],
)
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_position_embeddings_checks_the_length(backend, tables, length, error, message, positions):
    if positions == "learned":
        layer = backend.TokenPositionEmbedding(*tables)
    else:
        layer = backend.TokenPositionEmbedding(tables[0], positions="sinusoidal", max_seq_len=16)
    with pytest.raises(error) as info:
        layer.position_embeddings(0, length)
    assert message in str(info.value)


def test_a_donated_jax_buffer_cannot_be_reused(tables):
    if "jax" not in backends.names():
        pytest.skip(
            "jax is not installed (CI requires it: see test_required_backends_are_installed)"
        )
    layer = backends.get("jax").TokenPositionEmbedding(*tables)
    y = layer([1, 2])
    layer([3, 4], out=y)  # y is donated here
    with pytest.raises(ValueError, match="out was donated to an earlier call"):
        layer([1, 2], out=y)


@pytest.mark.parametrize("name", [n for n in backends.names() if n != "jax"])
def test_out_must_not_overlap_the_tables(name, tables):
    backend = backends.get(name)
    layer = backend.TokenPositionEmbedding(*tables)
    table = layer.position_table if name == "numpy" else layer.position.weight
    with (
        _no_grad(backend),
        pytest.raises(ValueError, match="shares memory with the layer's own tables"),
    ):
        layer(np.arange(16) % 10, out=table)
    expected = tables[0][[1, 2]] + tables[1][:2]
    np.testing.assert_array_equal(backend.to_numpy(layer([1, 2])), expected)  # tables untouched


def test_out_of_the_wrong_type_is_a_type_error(backend, tables):
    layer = backend.TokenPositionEmbedding(*tables)
    with _no_grad(backend), pytest.raises(TypeError, match="out must be a"):
        layer([1, 2], out=[[0.0] * 10] * 2)


def test_ids_beyond_16_bits_reach_their_own_rows(backend):
    """A vocabulary wider than int16 and uint16: an id converted to a narrower integer on the
    way to the framework (JAX converts on the host) would land on another row."""
    vocab_size = 2**16 + 3
    token_table, position_table = backends.shared_weights(vocab_size, 2, 4)
    token_ids = np.array([2**16 + 2, 2**15, 2**16, 2**15 - 1])  # each wraps in 16 bits
    layer = backend.TokenPositionEmbedding(token_table, position_table)
    expected = token_table[token_ids] + position_table[:4]
    for ids in (token_ids, native(backend, token_ids), native(backend, token_ids.astype(np.int32))):
        np.testing.assert_array_equal(backend.to_numpy(layer(ids)), expected)


# --- the shared table --------------------------------------------------------------------


def error_of(call):
    with pytest.raises((TypeError, ValueError, IndexError)) as info:
        call()
    return type(info.value), str(info.value)


def _layer(be, dim=4, **options):
    return be.TokenPositionEmbedding(*backends.shared_weights(100, dim, 16), **options)


# The shared bad-input table: every public function's bad calls, as (call on a backend,
# exception type, a fragment of the message). The test below runs each on every backend and
# asserts NumPy's exception type and exact message; a new API adds its cases here.
BAD_CALLS = {
    "no heads": (lambda be: be.alibi_slopes(0), ValueError, "num_heads must be at least 1, got 0"),
    "fractional heads": (
        lambda be: be.alibi_bias(2.5, 4),
        TypeError,
        "num_heads must be an integer",
    ),
    "empty query": (
        lambda be: be.alibi_bias(4, 0),
        ValueError,
        "q_len must be in [1, 16777216], got 0",
    ),
    "keys before queries": (
        lambda be: be.alibi_bias(4, 5, 3),
        ValueError,
        "k_len 3 is below q_len 5",
    ),
    "keys one before queries": (  # the bound itself: at k_len = q_len - 1 the first query
        # would see no key (a row of -inf, NaN after softmax)
        lambda be: be.alibi_bias(4, 5, 4),
        ValueError,
        "k_len 4 is below q_len 5",
    ),
    "odd buckets": (
        lambda be: be.t5_relative_buckets(np.arange(3), num_buckets=31),
        ValueError,
        "num_buckets must be even and at least 2, got 31",
    ),
    "no buckets": (
        lambda be: be.t5_relative_buckets(np.arange(3), num_buckets=0),
        ValueError,
        "got 0",
    ),
    "short max_distance": (
        lambda be: be.t5_relative_buckets(np.arange(3), max_distance=8),
        ValueError,
        "max_distance must exceed the 8 exact distances",
    ),
    "float positions": (
        lambda be: be.t5_relative_buckets(np.array([0.0, 1.0])),
        TypeError,
        "relative_position must be integers",
    ),
    "far positions": (
        lambda be: be.t5_relative_buckets(np.array([0, -(2**25)])),
        ValueError,
        "relative_position -33554432 is outside",
    ),
    "1-D table": (
        lambda be: be.t5_bias(np.zeros(32, np.float32), 4),
        ValueError,
        "got shape (32,)",
    ),
    "odd table": (
        lambda be: be.t5_bias(np.zeros((31, 2), np.float32), 4),
        ValueError,
        "got shape (31, 2)",
    ),
    "integer table": (
        lambda be: be.t5_bias(np.zeros((32, 2), np.int32), 4),
        TypeError,
        "bias_table must be one of",
    ),
    "string causal": (
        lambda be: be.alibi_bias(2, 3, causal="False"),
        TypeError,
        "causal must be True or False, got 'False'",
    ),
    "huge max_distance": (
        lambda be: be.t5_relative_buckets(np.arange(3), max_distance=10**400),
        ValueError,
        "and be at most 16777216, the longest distance there is",
    ),
    "huge bias": (
        lambda be: be.alibi_bias(8, 2**20),
        ValueError,
        "values is over 2147483648",
    ),
    "string bidirectional": (
        lambda be: be.t5_relative_buckets(np.arange(3), bidirectional="yes"),
        TypeError,
        "bidirectional must be True or False",
    ),
    "no head count": (
        lambda be: be.alibi_bias(None, 4),
        TypeError,
        "num_heads must be an integer, got None",
    ),
    "huge t5 bias": (  # 1000 heads x 2000 x 2000 passed when the heads were not counted
        lambda be: be.t5_bias(np.zeros((32, 1000), np.float32), 2000),
        ValueError,
        "= 1000 x 2000 x 2000, plus 4 such planes of positions and buckets, = 4016000000 values",
    ),
    "huge sinusoidal table": (  # was MemoryError, RuntimeError and OverflowError
        lambda be: be.sinusoidal_table(4, 10**12),
        ValueError,
        "num_positions x dim = 4 x 1000000000000 = 4000000000000 values is over 2147483648",
    ),
    "huge sinusoidal layer": (
        lambda be: be.TokenPositionEmbedding(
            np.zeros((4, 1024), np.float32), None, positions="sinusoidal", max_seq_len=2**24
        ),
        ValueError,
        "= 16777216 x 1024 = 17179869184 values",
    ),
    "ids beyond int64": (  # NumPy makes [-1, 2**63] float64 and [5, 10**30] an object array
        lambda be: _layer(be)([5, 10**30]),
        IndexError,
        "token id 1000000000000000000000000000000 at token_ids[1] is out of range",
    ),
    "ids that NumPy makes float": (
        lambda be: _layer(be)([[3, 2**63], [-1, 0]]),
        IndexError,
        "token id 9223372036854775808 at token_ids[0, 1] is out of range",
    ),
    "gradient of ids beyond int64": (
        lambda be: be.gradients(_layer(be), [2**64], np.zeros((1, 4), np.float32)),
        IndexError,
        "token id 18446744073709551616 at token_ids[0]",
    ),
    "upstream of another dtype": (
        lambda be: be.gradients(_layer(be), [1], np.zeros((1, 4), ">f8")),
        TypeError,
        "upstream is float64, but the layer's tables are float32",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_input_raises_the_same_error_everywhere(backend, case):
    call, kind, fragment = BAD_CALLS[case]
    got = error_of(lambda: call(backend))
    assert got[0] is kind and fragment in got[1], got
    assert got == error_of(lambda: call(backends.get("numpy")))


# --- a comma list given as separate words --------------------------------------------------


@pytest.mark.parametrize(
    "argv, ending",
    [
        # the second dtype left over, or taken as TARGET (pushing the real one out)
        (
            ["x.py:f", "--kind", "rope", "--dtypes", "float32", "bfloat16"],
            "bfloat16 (--dtypes takes a comma list: --dtypes float32,bfloat16)",
        ),
        (
            ["--dtypes", "float32", "bfloat16", "--kind", "rope", "x.py:f"],
            "x.py:f (--dtypes takes a comma list: --dtypes float32,bfloat16)",
        ),
        (
            ["--dtypes=float32", "float16", "bfloat16", "x.py:f"],
            "x.py:f (--dtypes takes a comma list: --dtypes float32,float16,bfloat16)",
        ),
        (
            ["--kind", "rope", "--dtypes", "float32", "bfloat16"],
            "TARGET 'bfloat16' is a dtype: --dtypes takes a comma list: --dtypes float32,bfloat16",
        ),
    ],
)
def test_a_comma_list_given_as_words_is_refused_with_the_list_to_type(capsys, argv, ending):
    assert compare.main(["check", *argv]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("compare.py check: error: ") and line.endswith(ending), line


def test_a_word_the_comma_list_would_not_take_gets_no_such_hint(capsys):
    assert compare.main(["check", "x.py:f", "--kind", "rope", "--dtypes", "float32", "y"]) == 2
    assert capsys.readouterr().err == "compare.py check: error: unrecognized arguments: y\n"


def test_padding_rows_past_the_tokenizer_are_rows(backend):
    """A table padded past its tokenizer (Qwen's 151936 rows for 151665 ids): the ids in
    between are rows, and an id past the table is refused naming the table's bound."""
    token_table, position_table = backends.shared_weights(12, 4, 8)
    layer = backend.TokenPositionEmbedding(token_table, position_table, tokenizer_size=10)
    ids = np.array([9, 10, 11])  # the last id the tokenizer makes, then two padding rows
    np.testing.assert_array_equal(
        backend.to_numpy(layer(ids)), token_table[ids] + position_table[:3]
    )
    with pytest.raises(
        IndexError,
        match=r"token id 12 at token_ids\[1\] is past the token "
        r"table's 12 rows \(vocab_size\).*tokenizer's 10 ids.*rows 10 to 11 are padding",
    ):
        layer(np.array([1, 12]))
    with pytest.raises(IndexError, match=r"token id -1 .* out of range for vocab_size 12"):
        layer.token_embeddings(np.array([-1]))
    with pytest.raises(ValueError, match=r"tokenizer_size 13 is not in \[1, 12\]"):
        backend.TokenPositionEmbedding(token_table, position_table, tokenizer_size=13)
