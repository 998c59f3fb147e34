"""Every route a call can take refuses bad input, and moves no more than it says.

The routes: the shared checks' fast path for a few ids (validation.check_call) and their
general path; torch tensors read through a zero-copy view on the CPU, or checked on the
device with one synchronisation (the route for accelerators, forced here on the CPU);
JAX's checks inside a jitted step (embed_checked's status, thrown by throw). Each
is held to the NumPy layer: the same bits for good input, the same exception type and
message for bad input.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from backends import validation
from tests.conftest import backend_or_skip, native
from tests.test_parity import reference

TABLES = backends.shared_weights(100, 10, 16, seed=4)


def outcome(call):
    """("ok", result) or (exception type, message): what a call did, to compare routes."""
    try:
        return "ok", call()
    except (TypeError, ValueError, IndexError) as error:
        return type(error), str(error)


def general_path(token_ids, start, vocab_size, max_seq_len):
    """check_call without its fast path: the checks one by one."""
    token_ids = validation.check_token_ids(validation.as_host(token_ids), vocab_size)
    return token_ids, validation.check_positions(start, token_ids.shape[-1], max_seq_len)


@st.composite
def calls(draw):
    """Ids of many dtypes and byte orders, from 0-d to 3-d, from empty to past the fast
    path's 64; values mostly in range, some just outside; starts of several types around the
    table's end, and tables with no limit (max_seq_len None, positions="none")."""
    vocab_size = draw(st.integers(1, 300))
    max_seq_len = draw(st.one_of(st.none(), st.integers(0, 20)))
    dtype = draw(
        st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "uint64", ">i8", "float32"])
    )
    shape = draw(
        st.sampled_from([(), (0,), (1,), (4,), (64,), (65,), (1, 4), (8, 1), (3, 30), (1, 1, 2)])
    )
    size = int(np.prod(shape))
    if dtype == "float32":
        values = draw(st.lists(st.integers(0, vocab_size - 1), min_size=size, max_size=size))
    else:
        info = np.iinfo(np.dtype(dtype))
        high = min(vocab_size + 2, int(info.max))
        values = draw(
            st.lists(st.integers(max(-3, int(info.min)), high), min_size=size, max_size=size)
        )
        if draw(st.booleans()):  # mostly good ids, so that the fast path is taken and refused
            values = [v % min(vocab_size, high + 1) for v in values]
    token_ids = np.array(values, dtype=dtype).reshape(shape)
    limit = 20 if max_seq_len is None else max_seq_len
    start = draw(st.integers(-2, limit + 2))
    start = draw(st.sampled_from([start, np.int64(start), float(start), start == 1]))
    return token_ids, start, vocab_size, max_seq_len


@settings(max_examples=300, deadline=None)
@given(calls())
def test_the_fast_path_accepts_and_refuses_what_the_checks_do(call):
    token_ids, start, vocab_size, max_seq_len = call
    fast = outcome(lambda: validation.check_call(token_ids, start, vocab_size, max_seq_len))
    slow = outcome(lambda: general_path(token_ids, start, vocab_size, max_seq_len))
    assert fast[0] == slow[0]
    if fast[0] == "ok":
        assert fast[1][0] is token_ids and fast[1][1] == slow[1][1] == start
        assert type(fast[1][1]) is int
    else:
        assert fast[1] == slow[1]


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(st.integers(-2, 101), min_size=1, max_size=70),
    batch=st.sampled_from([1, 2]),
    start=st.integers(-1, 17),
    dtype=st.sampled_from(["int32", "int64"]),
)
def test_native_ids_on_every_backend_give_the_numpy_layer_bits_or_error(ids, batch, start, dtype):
    token_ids = np.array(ids * batch, dtype=dtype).reshape(batch, -1)
    expected = outcome(
        lambda: backends.get("numpy").TokenPositionEmbedding(*TABLES)(token_ids, start)
    )
    for name in backends.names():
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(*TABLES)
        found = outcome(lambda be=be, layer=layer: be.to_numpy(layer(native(be, token_ids), start)))
        assert found[0] == expected[0], name
        if found[0] == "ok":
            np.testing.assert_array_equal(found[1], expected[1])
        else:
            assert found[1] == expected[1], name


# --- torch: the CPU view and the device route -------------------------------------------


class Ops:
    """The aten ops a torch call dispatches (torch's own interposition point)."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        seen = self.seen = []

        class Record(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                seen.append(str(func.overloadpacket))
                return func(*args, **(kwargs or {}))

        self.mode = Record()

    def __enter__(self):
        self.mode.__enter__()
        return self.seen

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


# The ops that read a device value on the host, a synchronisation: bool(tensor) dispatches
# is_nonzero, .item() item; both end in _local_scalar_dense.
SYNCS = {"aten.is_nonzero", "aten.item", "aten._local_scalar_dense"}
# What Tensor.numpy() dispatches on a CPU tensor: no copy (aten.to with the tensor's own
# dtype and device returns it as it is; the resolves are no-ops without conj/neg bits).
NUMPY_VIEW = ["aten.detach", "aten.to", "aten.resolve_conj", "aten.resolve_neg"]


def syncs(ops) -> int:
    return sum(op in SYNCS for op in ops)


@pytest.fixture
def device_route(monkeypatch):
    """Send torch's own tensors down the accelerator route, as on CUDA, on the CPU."""
    tb = backend_or_skip("torch")
    monkeypatch.setattr(tb, "_readable_on_host", lambda tensor: False)
    return tb


def test_cpu_tensors_are_checked_without_a_copy_or_a_sync():
    torch = pytest.importorskip("torch")
    tb = backend_or_skip("torch")
    layer = tb.TokenPositionEmbedding(*TABLES)
    ids = torch.tensor([[5, 10, 7, 21]])
    with torch.inference_mode(), Ops() as ops:
        layer(ids, 3)
    # The view's ops, then the lookup and nothing else: no copy of the ids, no sync.
    assert set(ops[: len(NUMPY_VIEW)]) <= set(NUMPY_VIEW)
    assert [op for op in ops if op not in NUMPY_VIEW] == [
        "aten.embedding",
        "aten.slice",
        "aten.add_",
    ]
    assert syncs(ops) == 0


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize(
    "token_ids, start",
    [
        ([[5, 10, 7, 21]], 3),
        ([[5, -1, 7]], 0),
        ([[5, 100]], 0),
        ([[1, 2], [3, 400]], 1),
        ([7, 8], 15),
        ([7, 8], -1),
        ([[[1]]], 0),
        ([], 0),
    ],
)
def test_the_device_route_raises_what_the_host_raises(device_route, dtype, token_ids, start):
    torch = pytest.importorskip("torch")
    host = np.array(token_ids, dtype=dtype)
    layer = device_route.TokenPositionEmbedding(*TABLES)
    numpy_layer = backends.get("numpy").TokenPositionEmbedding(*TABLES)
    expected = outcome(lambda: numpy_layer(host, start))
    for grad in (False, True):  # the inference path and the autograd path
        with torch.set_grad_enabled(grad):
            found = outcome(lambda: device_route.to_numpy(layer(torch.from_numpy(host), start)))
        assert found[0] == expected[0]
        if found[0] == "ok":
            np.testing.assert_array_equal(found[1], expected[1])
        else:
            assert found[1] == expected[1]


def test_the_device_route_synchronises_once_and_copies_nothing_when_the_ids_are_good(
    device_route,
):
    torch = pytest.importorskip("torch")
    layer = device_route.TokenPositionEmbedding(*TABLES)
    ids = torch.tensor([[5, 10, 7, 21]])
    with torch.inference_mode(), Ops() as ops:
        layer(ids, 3)
    assert syncs(ops) == 1 and "aten._to_copy" not in ops and "aten.detach" not in ops
    assert ops[-3:] == ["aten.embedding", "aten.slice", "aten.add_"]
    with torch.inference_mode(), Ops() as ops, pytest.raises(IndexError):
        layer(torch.tensor([[5, 100]]), 0)
    assert syncs(ops) == 1 and "aten.embedding" not in ops  # refused before the lookup


# --- JAX: the checks inside a jitted step ------------------------------------------------


def checked_step():
    import jax

    jb = backend_or_skip("jax")
    return jb, jax.jit(jb.embed_checked)


@settings(max_examples=40, deadline=None)
@given(
    ids=st.lists(st.integers(-3, 102), min_size=1, max_size=8),
    batch=st.sampled_from([None, 1, 3]),
    start=st.integers(-2, 18),
)
def test_checks_inside_jit_raise_what_the_eager_layer_raises(ids, batch, start):
    import jax.numpy as jnp

    jb, step = checked_step()
    token_ids = np.array(ids if batch is None else ids * batch, dtype=np.int32)
    if batch is not None:
        token_ids = token_ids.reshape(batch, -1)
    layer = jb.TokenPositionEmbedding(*TABLES)
    expected = outcome(lambda: np.asarray(layer(token_ids, start)))

    def jitted():
        y, status = step(layer.tables, jnp.asarray(token_ids), jnp.int32(start))
        jb.throw(status)
        return np.asarray(y)

    found = outcome(jitted)
    assert found[0] == expected[0]
    if found[0] == "ok":
        np.testing.assert_array_equal(found[1], expected[1])
    else:
        assert found[1] == expected[1]


def test_a_device_resident_checked_step_makes_no_host_transfer():
    import jax

    jb, step = checked_step()
    layer = jb.TokenPositionEmbedding(*TABLES)
    ids, start = jax.device_put(np.array([[5, 10, 7, 21]], np.int32)), jax.device_put(np.int32(3))
    step(layer.tables, ids, start)  # compiled outside the guard
    with jax.transfer_guard("disallow"):
        y, status = step(layer.tables, ids, start)
        assert np.dtype(y.dtype) == np.float32 and y.shape == (1, 4, 10)
    jb.throw(status)  # after the step: the one read of the status
    np.testing.assert_array_equal(np.asarray(y), reference(*TABLES, np.asarray(ids), 3))
    # The guard is live: the eager layer sends its start from the host, and is refused. (On
    # the CPU a device array is host memory, so JAX reports no transfer when the eager layer
    # reads the ids; inside the jitted step the ids are traced, and the host cannot read them.)
    with jax.transfer_guard("disallow"), pytest.raises(Exception, match="[Dd]isallowed"):
        layer(ids, start)


def test_checks_inside_jit_fail_at_trace_time_for_static_mistakes():
    import jax.numpy as jnp

    jb, step = checked_step()
    tables = jb.TokenPositionEmbedding(*TABLES).tables
    with pytest.raises(TypeError, match="token_ids must be integers, got dtype float32"):
        step(tables, jnp.zeros((1, 2), jnp.float32), jnp.int32(0))
    with pytest.raises(ValueError, match="1-D \\(T,\\) or 2-D \\(B, T\\), got shape \\(1, 1, 2\\)"):
        step(tables, jnp.zeros((1, 1, 2), jnp.int32), jnp.int32(0))
    with pytest.raises(ValueError, match="start 15 \\+ T 2 = 17 exceeds max_seq_len 16"):
        jb.embed_checked(tables, jnp.zeros((1, 2), jnp.int32), 15)


@pytest.mark.parametrize("positions", ["sinusoidal", "none"])
def test_checks_inside_jit_for_every_scheme(positions):
    import jax.numpy as jnp

    jb, step = checked_step()
    token_table = TABLES[0]
    kwargs = {"max_seq_len": 16} if positions == "sinusoidal" else {}
    layer = jb.TokenPositionEmbedding(token_table, positions=positions, **kwargs)
    ids = np.array([[3, 99, 0]], np.int32)
    y, status = step(layer.tables, jnp.asarray(ids), jnp.int32(5))
    jb.throw(status)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(layer(ids, 5)))
    _, status = step(layer.tables, jnp.asarray(ids + 1), jnp.int32(5))
    with pytest.raises(IndexError, match="token id 100 at token_ids\\[0, 1\\]"):
        jb.throw(status)


def test_starts_inside_jit_for_a_table_without_positions_and_of_the_wrong_type():
    import jax.numpy as jnp

    jb, step = checked_step()
    layer = jb.TokenPositionEmbedding(TABLES[0], positions="none")
    ids = jnp.asarray([[1, 2]], jnp.int32)
    _, status = step(layer.tables, ids, jnp.int32(-1))
    with pytest.raises(ValueError, match="^start -1 is negative: positions count from 0$"):
        jb.throw(status)
    with pytest.raises(ValueError, match="^start -1 is negative"):
        layer(np.asarray(ids), -1)  # the eager layer says the same
    tables = jb.TokenPositionEmbedding(*TABLES).tables
    for bad in (jnp.float32(1.0), jnp.asarray(True), jnp.zeros(2, jnp.int32)):
        with pytest.raises(TypeError, match="start must be an integer"):
            step(tables, ids, bad)
    # A NumPy integer seen as a number (outside jit) is checked at once, like a Python int.
    y, status = jb.embed_checked(tables, ids, np.int64(3))
    jb.throw(status)
    np.testing.assert_array_equal(np.asarray(y), reference(*TABLES, np.asarray(ids), 3))
    with pytest.raises(ValueError, match="start 15 \\+ T 2 = 17 exceeds max_seq_len 16"):
        jb.embed_checked(tables, ids, np.int64(15))


def test_a_step_of_several_lookups_throws_each_status_and_composes_with_checkify():
    """Two lookups in one step: throw takes their statuses together (a tuple or a dict) and
    raises the first failure; a step the caller checkifies for checks of their own keeps
    both: checkify's error for theirs, the status for the layer's."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import checkify

    jb = backend_or_skip("jax")
    tables = jb.TokenPositionEmbedding(*TABLES).tables

    @jax.jit
    def pair(tables, ids, other, start):
        x, first = jb.embed_checked(tables, ids, start)
        y, second = jb.embed_checked(tables, other, start + 1)
        return x + y, {"first": first, "second": second}

    good = jnp.ones((1, 2), jnp.int32)
    _, statuses = pair(tables, good, good, jnp.int32(0))
    assert jb.throw(statuses) is None and jb.throw(tuple(statuses.values())) is None
    _, statuses = pair(tables, good, jnp.asarray([[7, 130]], jnp.int32), jnp.int32(0))
    with pytest.raises(IndexError, match="token id 130 at token_ids\\[0, 1\\]"):
        jb.throw(statuses)
    _, statuses = pair(tables, good, good, jnp.int32(14))  # the second lookup starts at 15
    with pytest.raises(ValueError, match="start 15 \\+ T 2 = 17 exceeds max_seq_len 16"):
        jb.throw(list(statuses.values()))

    def step(tables, ids, start):
        y, status = jb.embed_checked(tables, ids, start)
        checkify.check(jnp.all(y < 100), "activations too large")  # the caller's own check
        return y, status

    checked = jax.jit(checkify.checkify(step))
    error, (_, status) = checked(tables, good, jnp.int32(0))
    assert error.get() is None and jb.throw(status) is None
    huge = jax.tree_util.tree_map(lambda t: t * 1e6, tables)
    error, (_, status) = checked(huge, jnp.asarray([[1, 100]], jnp.int32), jnp.int32(0))
    with pytest.raises(checkify.JaxRuntimeError, match="activations too large"):
        error.throw()
    with pytest.raises(IndexError, match="token id 100 at token_ids\\[0, 1\\]"):
        jb.throw(status)


def test_narrow_ids_wide_starts_and_too_many_ids_inside_jit_as_eagerly():
    """int8 ids with a vocabulary past int8's range, a uint32 start past 2**31 (traced), a
    huge start without a position table (known at trace time), and more ids than positions:
    each gives the eager layer's result or error, not JAX's overflow or slicing errors."""
    import jax
    import jax.numpy as jnp

    jb = backend_or_skip("jax")
    token_table, position_table = backends.shared_weights(300, 10, 16)
    layer = jb.TokenPositionEmbedding(token_table, position_table)
    step = jax.jit(jb.embed_checked)
    cases = [
        (np.array([[1, 120]], np.int8), jnp.int32(2)),
        (np.array([[1, -2]], np.int8), jnp.int32(0)),
        (np.array([[1, 250]], np.uint8), jnp.int32(0)),
        (np.array([[1, 2]], np.int32), jnp.uint32(3_000_000_000)),
    ]
    for ids, start in cases:

        def jitted(ids=ids, start=start):
            y, status = step(layer.tables, jnp.asarray(ids), start)
            jb.throw(status)
            return np.asarray(y)

        found = outcome(jitted)
        expected = outcome(lambda ids=ids, start=start: np.asarray(layer(ids, int(start))))
        assert found[0] == expected[0], (ids, start, found, expected)
        if found[0] == "ok":
            np.testing.assert_array_equal(found[1], expected[1])
        else:
            assert found[1] == expected[1]
    with pytest.raises(ValueError, match="T 20 exceeds max_seq_len 16: no start fits"):
        step(layer.tables, jnp.zeros((1, 20), jnp.int32), jnp.int32(0))
    none = jb.TokenPositionEmbedding(token_table, positions="none")
    y, status = jb.embed_checked(none.tables, jnp.ones((1, 2), jnp.int32), 3_000_000_000)
    jb.throw(status)
    np.testing.assert_array_equal(np.asarray(y), token_table[[[1, 1]]])


def test_a_bad_id_beyond_int32_is_named_exactly_inside_jit():
    """The status carries the bad id in two halves: a uint32 id past 2**31 is not wrapped."""
    import jax
    import jax.numpy as jnp

    jb = backend_or_skip("jax")
    layer = jb.TokenPositionEmbedding(*TABLES)
    ids = np.array([[3, 4_000_000_000]], np.uint32)
    _, status = jax.jit(jb.embed_checked)(layer.tables, jnp.asarray(ids), jnp.int32(0))
    with pytest.raises(IndexError) as inside:
        jb.throw(status)
    with pytest.raises(IndexError) as eager:
        layer(ids, 0)
    assert str(inside.value) == str(eager.value)
    assert "token id 4000000000 at token_ids[0, 1]" in str(inside.value)


def test_torch_paths_follow_parametrizations_and_strided_ids():
    torch = pytest.importorskip("torch")
    from torch.nn.utils import parametrize

    tb = backend_or_skip("torch")
    layer = tb.TokenPositionEmbedding(*TABLES)

    class Doubled(torch.nn.Module):
        def forward(self, weight):
            return 2 * weight

    parametrize.register_parametrization(layer.token, "weight", Doubled())
    ids = np.array([[5, 10, 7, 21]])
    expected = 2 * TABLES[0][ids] + TABLES[1][3:7]  # doubling is exact
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            np.testing.assert_array_equal(tb.to_numpy(layer(torch.from_numpy(ids), 3)), expected)
    plain = tb.TokenPositionEmbedding(*TABLES)
    strided = torch.arange(8).reshape(2, 4).t()  # (4, 2), not contiguous
    out = torch.empty(4, 2, 10)
    with torch.inference_mode():
        plain(strided, 0, out=out)
    np.testing.assert_array_equal(out.numpy(), reference(*TABLES, strided.numpy(), 0))
