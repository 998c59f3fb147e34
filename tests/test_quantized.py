"""A GGUF-quantized token table, looked up in place, is bit-identical on every backend to
``gguf.quants.dequantize(table)[ids]`` (float32), rounded once to the dtype asked for, plus the
position rows.

Every value a format decodes is ``scale * q`` (exact in float32) or that plus or minus a min
(one rounding), so there is no tolerance: the comparisons here are of the bits.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from backends import quantized
from tests.conftest import native
from tests.test_parity import _no_grad

gguf = pytest.importorskip("gguf")  # the models extra; make test installs it


def random_table(kind: str, vocab: int, blocks_per_row: int, seed: int, *, finite=True):
    """Random bytes as a ``kind`` table and its dim; with finite=True every float16 scale is
    finite (quantized.random_blocks), as in any table a model ships; else every byte random."""
    block_size, type_size = quantized.BLOCKS[kind]
    dim = blocks_per_row * block_size
    if finite:
        return quantized.random_blocks(kind, vocab, dim, seed=seed), dim
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (vocab, blocks_per_row * type_size), dtype=np.uint8), dim


def expected(blocks, kind, ids, dtype, position_rows=None):
    rows = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[kind])[ids]  # float32
    with np.errstate(over="ignore"):  # past float16's range: inf, as every framework rounds
        rows = rows.astype(backends.DTYPES[dtype])
    return rows if position_rows is None else rows + position_rows


def assert_bits(backend, actual, wanted):
    actual = backend.to_numpy(actual)
    assert actual.dtype == wanted.dtype and actual.shape == wanted.shape
    assert actual.tobytes() == wanted.tobytes()


@given(
    kind=st.sampled_from(quantized.KINDS),
    dtype=st.sampled_from(list(backends.DTYPES)),
    # a few table shapes: each new shape is a compilation under jax.jit
    vocab=st.sampled_from([1, 40]),
    blocks_per_row=st.sampled_from([1, 3]),
    shape=st.sampled_from([(5,), (2, 3)]),
    start=st.integers(0, 8),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=40, deadline=None)
def test_bit_identical_to_dequantize_then_gather(
    backend, kind, dtype, vocab, blocks_per_row, shape, start, seed
):
    blocks, dim = random_table(kind, vocab, blocks_per_row, seed)
    rng = np.random.default_rng(seed + 1)
    position_table = rng.standard_normal((16, dim)).astype(backends.DTYPES[dtype])
    ids = rng.integers(0, vocab, shape)
    table = quantized.QuantizedTable(kind, blocks, dim, dtype)
    layer = backend.TokenPositionEmbedding(table, position_table)
    positions = position_table[start : start + shape[-1]]
    assert_bits(
        backend, layer(native(backend, ids), start), expected(blocks, kind, ids, dtype, positions)
    )
    assert_bits(backend, layer.token_embeddings(ids), expected(blocks, kind, ids, dtype))


def nan_scales(kind: str, rows: int, seed: int) -> tuple[np.ndarray, int]:
    """Random bytes as a ``kind`` table of one block a row, about half its float16 scales and
    mins NaN of either sign, quiet or signalling, payload drawn; in the last three blocks the
    min NaN alone, d alone, then both."""
    blocks, dim = random_table(kind, rows, 1, seed, finite=False)
    halves = np.arange(2**16, dtype=np.uint16)
    nans = halves[np.isnan(halves.view(np.float16))]
    rng = np.random.default_rng(seed)
    for slot, (first, last) in enumerate(quantized.SCALES[kind]):
        chosen = rng.random(rows) < 0.5
        chosen[-3:] = (False, True, True) if slot == 0 else (True, False, True)
        drawn = rng.choice(nans, rows)
        blocks[chosen, first:last] = drawn[chosen, None].view(np.uint8)
    return blocks, dim


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kind", quantized.KINDS)
def test_every_block_and_byte_decoded(backend, kind, dtype):
    """Every row of a table: dequantize then gather, as the file's owner does, bit for bit with
    NaN and infinite scales left in: each NaN's sign and payload too (torch's conversion of the
    scales past its last vector made every NaN 0x7fffffff, its add kept the min's NaN where
    NumPy keeps the value's, and its bfloat16 cast made each 0xffff). 45 blocks: a count no
    vector width divides, so the last scales take the scalar path."""
    blocks, dim = nan_scales(kind, 45, seed=7)
    table = quantized.QuantizedTable(kind, blocks, dim, dtype)
    layer = backend.TokenPositionEmbedding(table, positions="none")
    ids = np.arange(45)
    with np.errstate(invalid="ignore", over="ignore"):
        wanted = expected(blocks, kind, ids, dtype)
    bits = np.uint32 if dtype == "float32" else np.uint16
    np.testing.assert_array_equal(backend.to_numpy(layer(ids)).view(bits), wanted.view(bits))
    assert np.isnan(wanted[-1]).all()  # NaN scales in the last blocks, where the tail is


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_quantize_round_trip(kind):
    """quantize() writes with gguf.quants; the layer reads back what gguf.quants reads."""
    token_table, _ = backends.shared_weights(50, 64, 4)
    table = quantized.quantize(token_table, kind)
    np.testing.assert_array_equal(
        quantized.dequantize(table),
        gguf.quants.dequantize(table.blocks, gguf.GGMLQuantizationType[kind]),
    )
    # 4 bits keep about one decimal digit of a standard normal value
    assert np.abs(quantized.dequantize(table) - token_table).max() < 0.5


FLOATS = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)


@pytest.mark.parametrize(
    "table, kind, message",
    [
        (FLOATS, "Q9_9", "quantized format 'Q9_9' is not one gguf.quants writes: give one of"),
        (FLOATS, "q8_0", "format 'q8_0' is not one"),
        (FLOATS, 8, "format 8 is not one"),
        (FLOATS, "Q4_K", "gguf.quants cannot write Q4_K"),
        (FLOATS[:, :48], "Q8_0", "dim 48 is not a multiple of Q8_0's block of 32"),
        (FLOATS[:, :0], "Q4_0", "dim 0 is not a multiple of Q4_0's block of 32"),
        (FLOATS[0], "Q8_0", r"must be 2-D \(rows, dim\), got shape \(64,\)"),
        (FLOATS[None], "Q8_0", r"must be 2-D \(rows, dim\), got shape \(1, 4, 64\)"),
        (None, "Q8_0", r"must be 2-D \(rows, dim\), got shape \(\)"),
        (FLOATS.astype(np.int64), "Q8_0", "has dtype int64, but the tables must be floating"),
        (FLOATS.astype(np.complex64), "Q8_0", "has dtype complex64"),
        (FLOATS.astype(object), "Q8_0", "has dtype object"),
        (np.where(FLOATS > 1, np.nan, FLOATS), "Q4_1", r"token_table\[0, 6\] is nan: every value"),
        (np.where(FLOATS > 1, np.inf, FLOATS), "Q5_0", r"\[0, 6\] is inf: .* within \+-65504"),
        (FLOATS * 1e30, "Q8_0", r"is 1.25\d*e\+29: .*a Q8_0 block keeps its scale in float16"),
    ],
)
def test_quantize_refuses_what_gguf_cannot_write_in_one_line(table, kind, message):
    """Where gguf raised its QuantError, a KeyError, an IndexError or a TypeError, or wrote an
    inf scale for a value past float16's range (and a NaN's bytes as the machine casts it): the
    ValueError the docs promise, naming the value and the fix."""
    with pytest.raises(ValueError, match=message) as raised:
        quantized.quantize(table, kind)
    assert type(raised.value) is ValueError and "\n" not in str(raised.value)


def test_every_backend_writes_into_out(backend):
    blocks, dim = random_table("Q4_K", 30, 1, seed=3)
    table = quantized.QuantizedTable("Q4_K", blocks, dim, "bfloat16")
    position_table = np.random.default_rng(0).standard_normal((8, dim)).astype(table.dtype)
    layer = backend.TokenPositionEmbedding(table, position_table)
    ids = np.array([[1, 29, 3], [0, 0, 7]])
    with _no_grad(backend):  # torch fills out= only where no gradient is recorded
        y = layer(ids, 2)
        y = layer(ids, 2, out=y)
    assert_bits(backend, y, expected(blocks, "Q4_K", ids, "bfloat16", position_table[2:5]))
    if backend.name == "torch":  # learned positions recorded for autograd: as the float layer
        with pytest.raises(ValueError, match="out= cannot record gradients"):
            layer(ids, 2, out=layer(ids, 2).detach())


def test_sinusoidal_positions_and_the_seed_shape(backend):
    token_table, _ = backends.shared_weights(100, 32, 16)
    table = quantized.quantize(token_table, "Q8_0")
    layer = backend.TokenPositionEmbedding(table, positions="sinusoidal", max_seq_len=16)
    floats = backend.TokenPositionEmbedding(
        quantized.dequantize(table), positions="sinusoidal", max_seq_len=16
    )
    ids = np.array([5, 10, 7, 21])
    np.testing.assert_array_equal(backend.to_numpy(layer(ids)), backend.to_numpy(floats(ids)))


def test_numpy_keeps_the_bytes_as_given():
    """The NumPy layer reads the caller's (memory-mapped) bytes; nothing is decoded at build."""
    blocks, dim = random_table("Q8_0", 1000, 4, seed=1)
    table = quantized.QuantizedTable("Q8_0", blocks, dim)
    layer = backends.get("numpy").TokenPositionEmbedding(table, positions="none")
    assert layer.token_table.blocks is blocks
    assert table.nbytes == 1000 * 4 * 34


@pytest.mark.parametrize(
    "bad, error",
    [(-1, "token id -1"), (40, "token id 40"), (2**31, "token id 2147483648")],
)
def test_bad_ids_raise_the_same_error(backend, bad, error):
    blocks, dim = random_table("Q6_K", 40, 1, seed=2)
    layer = backend.TokenPositionEmbedding(
        quantized.QuantizedTable("Q6_K", blocks, dim), positions="none"
    )
    with pytest.raises(IndexError, match=error):
        layer(np.array([3, bad, 5]))
    with pytest.raises(TypeError):
        layer(np.array([1.5]))


def test_not_trainable(backend):
    blocks, dim = random_table("Q8_0", 10, 1, seed=2)
    table = quantized.QuantizedTable("Q8_0", blocks, dim)
    position_table = np.zeros((4, dim), np.float32)
    layer = backend.TokenPositionEmbedding(table, position_table)
    with pytest.raises(ValueError, match=r"quantized \(Q8_0\).*float table to train"):
        backend.gradients(layer, np.array([1, 2]), np.zeros((2, dim), np.float32))


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ("Q8_0", np.zeros((4, 34), np.uint8), 48),
            "dim 48 is not a multiple of Q8_0's block of 32",
        ),
        (("Q8_0", np.zeros((4, 35), np.uint8), 32), r"blocks must be \(vocab_size, 34\) uint8"),
        (("Q4_K", np.zeros((4, 144), np.int8), 256), r"got int8 \(4, 144\)"),
        (("Q3_K", np.zeros((4, 110), np.uint8), 256), "quantized format 'Q3_K'"),
        (("Q8_0", np.zeros((0, 34), np.uint8), 32), "at least one"),
    ],
)
def test_a_table_that_is_not_its_format_is_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        quantized.QuantizedTable(*arguments)


def test_position_table_checked_against_the_quantized_shape(backend):
    blocks, dim = random_table("Q8_0", 10, 1, seed=2)
    table = quantized.QuantizedTable("Q8_0", blocks, dim, "float16")
    with pytest.raises(ValueError, match="dim"):
        backend.TokenPositionEmbedding(table, np.zeros((4, dim + 1), np.float16))
    with pytest.raises(ValueError, match="dtype"):
        backend.TokenPositionEmbedding(table, np.zeros((4, dim), np.float32))


def test_zeros_are_named_as_no_mistake_of_the_battery():
    """Zeros are no quantized mistake: they were "nearest to the float16 scale read as bfloat16",
    whose values (a float16 scale's bits read as bfloat16 are about 1e-30) are all near zero."""
    from embedding_parity.conformance import api

    def zeros(blocks, format, token_ids):
        return np.zeros((*token_ids.shape, 2 * quantized.BLOCKS[format][0]), np.float32)

    report = api.check(zeros, "quantized_lookup")
    valid = [c for c in report.checks if "bad id" not in c.check]
    assert valid and all(c.status == "differs" for c in valid), report.lines()
    assert not any("nearest to" in c.detail for c in valid), report.lines()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kind", quantized.KINDS)
def test_torch_decodes_in_chunks(monkeypatch, kind, dtype):
    """torch decodes chunks of about CHUNK_VALUES values (a float32 chunk where the result is
    another dtype): set to two rows and a half, 5 x 3 ids are 8 chunks, the last one row."""
    torch_backend = backends.get("torch")
    blocks, dim = random_table(kind, 40, 2, seed=5)
    monkeypatch.setattr(torch_backend, "CHUNK_VALUES", dim * 5 // 2)
    monkeypatch.setattr(torch_backend, "SMALL_VALUES", 0)  # Q8_0's few rows: not here
    table = quantized.QuantizedTable(kind, blocks, dim, dtype)
    layer = torch_backend.TokenPositionEmbedding(table, positions="none")
    ids = np.random.default_rng(5).integers(0, 40, (5, 3))
    wanted = expected(blocks, kind, ids, dtype)
    with _no_grad(torch_backend):
        assert_bits(torch_backend, layer(native(torch_backend, ids)), wanted)
        y = layer(native(torch_backend, ids))
        assert_bits(torch_backend, layer(native(torch_backend, ids), out=y), wanted)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_q8_0_few_rows_follow_the_buffer(dtype):
    """torch's few Q8_0 rows are gathered from views of the table's bytes made once
    (_q8_0_few): a new bytes buffer (what .to() and the like put there) is read, not the
    views of the old one; with and without out=."""
    torch_backend = backends.get("torch")
    (old, dim), (new, _) = random_table("Q8_0", 40, 2, seed=6), random_table("Q8_0", 40, 2, 7)
    layer = torch_backend.TokenPositionEmbedding(
        quantized.QuantizedTable("Q8_0", old, dim, dtype), positions="none"
    )
    ids = native(torch_backend, np.array([[3, 39], [0, 3]]))
    wanted = [expected(blocks, "Q8_0", ids.numpy(), dtype) for blocks in (old, new)]
    with _no_grad(torch_backend):
        assert_bits(torch_backend, layer(ids), wanted[0])
        layer.token.blocks = layer.token.blocks.new_tensor(new)  # a new uint8 buffer
        y = layer(ids)
        assert_bits(torch_backend, y, wanted[1])
        assert_bits(torch_backend, layer(ids, out=y), wanted[1])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_out_holds_the_result(backend, dtype):
    """out= is the result's memory on every backend (JAX: the donated buffer, written by the
    decode in place), float32 rows in one program and 16-bit ones, rounded before their
    positions are added, in two."""
    blocks, dim = random_table("Q8_0", 30, 2, seed=4)
    table = quantized.QuantizedTable("Q8_0", blocks, dim, dtype)
    position_table = np.random.default_rng(4).standard_normal((8, dim)).astype(table.dtype)
    layer = backend.TokenPositionEmbedding(table, position_table)
    ids = np.array([[4, 29, 0], [7, 7, 1]])
    with _no_grad(backend):
        y = layer(native(backend, ids), 1)
        memory = _address(backend, y)
        y = layer(native(backend, ids), 1, out=y)
    assert _address(backend, y) == memory
    assert_bits(backend, y, expected(blocks, "Q8_0", ids, dtype, position_table[1:4]))


def _address(backend, array) -> int:
    if backend.name == "torch":
        return array.data_ptr()
    if backend.name == "jax":
        return array.unsafe_buffer_pointer()
    return array.ctypes.data
