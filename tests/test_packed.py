"""Packed sequences (positional.packed_position_ids, packed_documents): position ids restarting
at each document, exact, and the two rules by which transformers finds the documents again,
held bit for bit to transformers' own functions and named where they disagree."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal
from transformers import DataCollatorWithFlattening
from transformers.masking_utils import find_packed_sequence_indices
from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

from backends import positional

LENGTHS = st.lists(st.integers(1, 9), min_size=1, max_size=6)


def transformers_documents(position_ids: np.ndarray, rule: str) -> np.ndarray:
    """transformers 5.24's documents of (B, T) position ids: the mask's sequence indices (None
    means one document a row), or flash attention's cu_seqlens as a document per token."""
    ids = torch.from_numpy(position_ids)
    if rule == "mask":
        found = find_packed_sequence_indices(ids)
        return np.zeros(position_ids.shape, np.int64) if found is None else found.numpy()
    (starts, _), _ = prepare_fa_kwargs_from_position_ids(ids)
    documents = np.full(position_ids.size, -1, np.int64)
    for number, (a, b) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist())):
        documents[a:b] = number
    return documents.reshape(position_ids.shape)


@settings(max_examples=60, deadline=None)
@given(lengths=LENGTHS, start=st.sampled_from([0, 2]))
def test_each_document_counts_from_its_start_and_both_rules_find_it(lengths, start):
    ids = positional.packed_position_ids(lengths, start=start)
    assert ids.dtype == np.int64 and ids.shape == (sum(lengths),)
    expected = np.concatenate([start + np.arange(n) for n in lengths])
    assert_array_equal(ids, expected)
    documents = np.repeat(np.arange(len(lengths)), lengths)[None]
    for rule in positional.PACKED_RULES:
        found = positional.packed_documents(ids[None], rule=rule)
        assert_array_equal(found, documents)
        assert_array_equal(found, transformers_documents(ids[None], rule))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=8), min_size=1, max_size=3))
def test_both_rules_are_transformers_own_on_any_position_ids(rows):
    width = max(len(r) for r in rows)
    position_ids = np.array([np.resize(r, width) for r in rows], np.int64)
    for rule in positional.PACKED_RULES:
        assert_array_equal(
            positional.packed_documents(position_ids, rule=rule),
            transformers_documents(position_ids, rule),
        )


def test_a_continued_document_is_where_the_rules_disagree():
    """A document that continues one from an earlier chunk does not restart at 0: the mask
    rule sees two documents, flash attention's one of the last two tokens (the first three
    are dropped)."""
    continued = np.array([[3, 4, 5, 0, 1]])
    assert_array_equal(positional.packed_documents(continued, rule="mask"), [[0, 0, 0, 1, 1]])
    assert_array_equal(positional.packed_documents(continued, rule="flash"), [[-1, -1, -1, 0, 0]])


def test_transformers_flattening_collator_numbers_documents_as_the_rule_does():
    lengths = [5, 7, 4]
    features = [{"input_ids": list(range(10, 10 + n))} for n in lengths]
    batch = DataCollatorWithFlattening(return_position_ids=True, return_tensors="np")(features)
    assert_array_equal(batch["position_ids"][0], positional.packed_position_ids(lengths))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: positional.packed_position_ids([3, 0, 2]), "at least 1, got 0"),
        (lambda: positional.packed_position_ids([]), "1-D list of document lengths"),
        (lambda: positional.packed_position_ids([2.5]), "1-D list of document lengths"),
        (lambda: positional.packed_position_ids([2], start=-1), "start must be at least 0"),
        (lambda: positional.packed_documents(np.arange(4), rule="mask"), r"position_ids\[None\]"),
        (lambda: positional.packed_documents(np.zeros((1, 3)), rule="mask"), "position_ids"),
        (lambda: positional.packed_documents(np.zeros((1, 3), int), rule="sdpa"), "mask, flash"),
    ],
)
def test_bad_input_is_refused_in_one_line(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


# --- the kit's contract: packed_positions ------------------------------------------------


def _kit(target, **options):
    from embedding_parity.conformance import runner

    return runner.run(target, "packed_positions", framework="numpy", options=options)


def test_the_kit_holds_packed_positions_exactly_and_names_each_mistake():
    def correct(lengths, start):
        return positional.packed_position_ids(lengths, start=start)

    def not_reset(lengths, start):
        return start + np.arange(int(np.sum(lengths)))

    def from_zero(lengths, start):
        return positional.packed_position_ids(lengths)

    def one_late(lengths, start):
        return positional.packed_position_ids(lengths, start=start) + 1

    assert _kit(correct).conforms
    named = {
        not_reset: "not reset: the row numbered as one sequence",
        from_zero: "start ignored: each document from 0, not 2",
        one_late: "each document from start + 1",
    }
    for port, name in named.items():
        checks = {c.check: c for c in _kit(port).checks}
        differing = [c for c in checks.values() if c.status == "differs"]
        assert differing, checks
        for check in differing:  # from_zero is right from 0: its differences are from 2
            assert name in check.detail, check.detail
        if port is from_zero:
            assert checks["packed positions from 0"].status == "conforms"


def test_a_roberta_config_sets_the_start_and_an_opt_config_is_refused():
    from embedding_parity import configs
    from embedding_parity.conformance.kinds import KINDS
    from embedding_parity.usage import UsageError

    options = configs.preset("roberta-base").options("packed_positions", "--model")
    assert options == {"packed_start": 2}
    assert {c.params["start"] for c in KINDS["packed_positions"].cases(options)} == {2}
    assert configs.preset("llama-3.2-1b").options("packed_positions", "--model") == {
        "packed_start": 0
    }
    with pytest.raises(UsageError, match="from its attention mask"):
        configs.preset("opt-125m").options("packed_positions", "--model")
