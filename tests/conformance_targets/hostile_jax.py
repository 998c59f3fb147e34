"""JAX targets that return no numbers for a bad id (tests/test_hostile_targets.py): a tracer
leaked out of jit, and a ShapeDtypeStruct. Each clamps silently, as JAX's indexing does."""

import jax
import jax.numpy as jnp

LEAKED = []


def _bad(token_ids, vocab_size) -> bool:
    return bool((token_ids < 0).any() or (token_ids >= vocab_size).any())


def _lookup(token_table, position_table, token_ids, start):
    return token_table[token_ids] + jax.lax.dynamic_slice_in_dim(
        position_table, start, token_ids.shape[-1]
    )


@jax.jit
def _leaking(token_table, position_table, token_ids):
    LEAKED.append(token_table[token_ids])  # a tracer kept past the trace
    return token_table[token_ids]


def leaks_a_tracer(token_table, position_table, token_ids, start):
    if _bad(token_ids, len(token_table)):
        LEAKED.clear()
        _leaking(token_table, position_table, token_ids)
        return LEAKED[-1]
    return _lookup(token_table, position_table, token_ids, start)


def returns_a_shape(token_table, position_table, token_ids, start):
    if _bad(token_ids, len(token_table)):
        return jax.eval_shape(_lookup, token_table, position_table, token_ids, start)
    return _lookup(token_table, position_table, token_ids, start)


def clamps_in_jit(token_table, position_table, token_ids, start):
    """Raw JAX: an out-of-range id reads a clamped row, silently."""
    return jax.jit(_lookup)(token_table, position_table, token_ids, jnp.asarray(start))


def deletes_its_ids(token_table, position_table, token_ids, start):
    """Returns a clamped row for a bad id, having deleted the ids it was given: the kit's
    reading them back fails, which was taken for the target raising, and it conformed."""
    result = _lookup(token_table, position_table, token_ids, start)
    if _bad(token_ids, len(token_table)):
        token_ids.delete()
    return result
