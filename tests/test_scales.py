"""A model's input scaling (backends.positional.SCALE_RULES) on every backend, bit for bit the
float64 reference rounded as the model rounds it: Gemma's and MiniCPM's float32 buffer cast to
the rows' dtype, one product; Granite's and Falcon-H1's Python float, the product formed in
float32 for 16-bit rows. Where each rule applies: the looked-up rows, and given embeddings for
Granite alone. That these rules are transformers' own is the matrix's finding (the rows
"transformers ... input embeddings" in tests/test_conformance_known.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from backends import positional
from tests.conftest import native


@given(
    rule=st.sampled_from(list(positional.SCALE_RULES)),
    value=st.sampled_from([12.0, 5.656854249492381, 0.1, 2304**0.5, 1.0]),
    dtype=st.sampled_from(list(backends.DTYPES)),
    path=st.sampled_from(["ids", "given"]),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=40, deadline=None)
def test_every_backend_scales_as_the_model_rounds(backend, rule, value, dtype, path, seed):
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((30, 12)).astype(dtype)
    ids = rng.integers(0, 30, (2, 5))
    embeds = rng.standard_normal((2, 5, 12)).astype(dtype)
    arguments = (ids, None) if path == "ids" else (None, embeds)
    expected = positional.scaled_inputs(table, *arguments, rule=rule, value=value)
    # JAX holds float64 only in x64 mode, which the layer turns on for the call: NumPy in
    native_arguments = [
        a if a is None or (backend.name == "jax" and a.dtype == np.float64) else native(backend, a)
        for a in arguments
    ]
    actual = backend.to_numpy(
        backend.scaled_inputs(table, *native_arguments, rule=rule, value=value)
    )
    assert actual.dtype == expected.dtype and actual.tobytes() == expected.tobytes()


@pytest.mark.parametrize("rule", list(positional.SCALE_RULES))
def test_where_each_rule_applies(rule):
    table = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    embeds = np.ones((1, 2, 4), np.float32)
    rows = positional.scaled_inputs(table, np.array([2]), rule=rule, value=2.0)
    np.testing.assert_array_equal(rows, table[[2]] * 2)  # every rule scales its lookup
    passed = positional.scaled_inputs(table, None, embeds, rule=rule, value=2.0)
    scaled = positional.SCALE_RULES[rule]["given"]
    np.testing.assert_array_equal(passed, embeds * 2 if scaled else embeds)
    assert scaled == (rule == "granite")


def test_the_two_roundings_differ_where_the_models_do():
    """bfloat16 rows times Falcon-H1's sqrt(32): torch's product in float32 (the scalar rule)
    and a product with the multiplier rounded to bfloat16 first (JAX's weak-typed scalar, and
    the buffer rule) give different rows."""
    table = np.random.default_rng(0).standard_normal((64, 16)).astype("bfloat16")
    ids = np.arange(64)
    scalar = positional.scaled_inputs(table, ids, rule="falcon_h1", value=32**0.5)
    buffer = positional.scaled_inputs(table, ids, rule="gemma", value=32**0.5)
    assert scalar.tobytes() != buffer.tobytes()
    assert float(positional.scale_factor("gemma", 32**0.5, "bfloat16")) == 5.65625


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        (
            {"token_ids": [1], "inputs_embeds": np.zeros((1, 1, 4), np.float32)},
            ValueError,
            "exactly one",
        ),
        ({}, ValueError, "exactly one"),
        ({"token_ids": [3]}, IndexError, "token id 3"),
        ({"inputs_embeds": np.zeros((1, 1, 5), np.float32)}, ValueError, r"pass \(\.\.\., T, 4\)"),
        ({"inputs_embeds": np.zeros((1, 1, 4), np.float16)}, ValueError, "cast them"),
        ({"token_ids": [1], "value": float("nan")}, ValueError, "finite number"),
        ({"token_ids": [1], "rule": "bart"}, ValueError, "embedding scale rule 'bart'"),
    ],
)
def test_bad_arguments_raise_the_same_error_on_every_backend(backend, arguments, error, message):
    options = {"rule": "granite", "value": 12.0, **arguments}
    table = np.zeros((3, 4), np.float32)
    with pytest.raises(error, match=message):
        backend.scaled_inputs(table, **options)


def test_a_result_that_resembles_no_mistake_is_named_as_none():
    """A target that returns zeros is no mistake of the kit's: it was "nearest to no scale (the
    rows as stored)", the zeros a tenth as far from the rows as from the scaled contract; a
    mistake a target does make is still named."""
    from embedding_parity import configs
    from embedding_parity.conformance import api

    fields = {"model_type": "granite", "embedding_multiplier": 12.0, "hidden_size": 64}
    granite = configs.from_fields({**fields, "num_attention_heads": 4}, "granite", "test")
    checks = ["ids float32", "given float32"]

    def zeros(token_table, token_ids, inputs_embeds):
        rows = token_table[token_ids] if inputs_embeds is None else inputs_embeds
        return np.zeros_like(rows)

    def unscaled(token_table, token_ids, inputs_embeds):
        return token_table[token_ids] if inputs_embeds is None else inputs_embeds

    for config in ("gemma-7b", granite):
        report = api.check(zeros, "scaled_inputs", config=config, checks=checks)
        assert [c.status for c in report.checks] == ["differs"] * 2, report.lines()
        assert not any("nearest to" in c.detail for c in report.checks), report.lines()
    report = api.check(unscaled, "scaled_inputs", config=granite, checks=checks)
    assert all("no scale" in c.detail for c in report.checks), report.lines()
