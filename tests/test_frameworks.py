"""Each framework's own idiom: what the torch module and the JAX functions must be."""

import numpy as np
import pytest

import backends
from backends import validation
from tests.conftest import backend_or_skip


@pytest.fixture
def tables():
    return backends.shared_weights(100, 10, 16, seed=4)


def test_torch_layer_is_a_module_with_two_trainable_embeddings(tables):
    be = backend_or_skip("torch")
    import torch

    layer = be.TokenPositionEmbedding(*tables)
    assert isinstance(layer, torch.nn.Module)
    embeddings = [m for m in layer.modules() if isinstance(m, torch.nn.Embedding)]
    assert [tuple(e.weight.shape) for e in embeddings] == [(100, 10), (16, 10)]
    assert all(p.requires_grad for p in layer.parameters())
    # Gradients reach the rows that were used, once per use.
    layer(np.array([5, 5, 7]), start=2).sum().backward()
    token_grad = layer.token.weight.grad[:, 0].numpy()
    assert token_grad[5] == 2.0 and token_grad[7] == 1.0 and token_grad.sum() == 3.0
    position_grad = layer.position.weight.grad[:, 0].numpy()
    np.testing.assert_array_equal(np.flatnonzero(position_grad), [2, 3, 4])


def test_jax_tables_are_jit_arguments_not_constants(tables):
    be = backend_or_skip("jax")
    import jax

    params = be.init_params(*tables)
    assert set(params) == {"token_table", "position_table"}
    closed = jax.make_jaxpr(be.embed)(params, np.array([1, 2], dtype=np.int32), 3)
    assert all_consts(closed) == []  # a closed-over table would show up here
    # The check can fail: the same function closing over a table has one.
    table = params["token_table"]
    leaky = jax.jit(lambda ids: table[ids])
    assert [c.shape for c in all_consts(jax.make_jaxpr(leaky)(np.array([1], np.int32)))] == [
        (100, 10)
    ]


def all_consts(closed) -> list:
    """Constants of a closed jaxpr and of every jaxpr nested in its equations (jit inlines
    its callee as a nested closed jaxpr, where a captured array ends up)."""
    from jax.extend.core import ClosedJaxpr

    found = list(closed.consts)
    for eqn in closed.jaxpr.eqns:
        for param in eqn.params.values():
            if isinstance(param, ClosedJaxpr):
                found += all_consts(param)
    return found


def test_jax_eager_and_jit_agree_bitwise(tables):
    be = backend_or_skip("jax")
    import jax

    layer = be.TokenPositionEmbedding(*tables)
    token_ids = np.array([[5, 10, 7, 21], [0, 99, 1, 98]])
    jitted = be.to_numpy(layer(token_ids, start=3))
    with jax.disable_jit():
        eager = be.to_numpy(layer(token_ids, start=3))
    np.testing.assert_array_equal(eager, jitted)
    np.testing.assert_array_equal(jitted, tables[0][token_ids] + tables[1][3:7])


def test_jax_float64_leaves_x64_off_for_everyone_else():
    be = backend_or_skip("jax")
    import jax
    import jax.numpy as jnp

    token_table, position_table = backends.shared_weights(10, 4, 8, dtype="float64")
    before = jax.config.jax_enable_x64  # False unless JAX_ENABLE_X64 is set
    y = be.TokenPositionEmbedding(token_table, position_table)([1, 2])
    assert y.dtype == jnp.float64
    np.testing.assert_array_equal(be.to_numpy(y), token_table[[1, 2]] + position_table[:2])
    assert jax.config.jax_enable_x64 == before
    if not before:
        assert jnp.asarray(np.ones(2)).dtype == jnp.float32


def test_dtypes_table_covers_the_four_contract_dtypes():
    assert list(validation.DTYPES) == ["float64", "float32", "float16", "bfloat16"]


def test_torch_layer_follows_a_dtype_change(tables):
    be = backend_or_skip("torch")
    import torch

    layer = be.TokenPositionEmbedding(*tables).double()
    assert layer.dtype == np.float64
    with torch.inference_mode():
        out = layer(np.array([1, 2]), out=torch.empty(2, 10, dtype=torch.float64))
    np.testing.assert_array_equal(
        be.to_numpy(out), tables[0][[1, 2]].astype(np.float64) + tables[1][:2]
    )


def test_torch_frozen_tokens_still_train_positions(tables):
    be = backend_or_skip("torch")
    layer = be.TokenPositionEmbedding(*tables)
    layer.token.weight.requires_grad_(False)
    for _ in range(2):  # the second call must not take the out=-style path either
        layer(np.array([3, 4]), start=1).sum().backward()
    assert layer.token.weight.grad is None
    np.testing.assert_array_equal(np.flatnonzero(layer.position.weight.grad[:, 0].numpy()), [1, 2])


def test_zero_width_tables(tables):
    be = backend_or_skip("torch")
    import torch

    layer = be.TokenPositionEmbedding(np.zeros((5, 0), np.float32), np.zeros((4, 0), np.float32))
    with torch.no_grad():
        assert tuple(layer(np.array([[1, 2]])).shape) == (1, 2, 0)
