"""The invariance kinds (kinds/invariance.py): a correct implementation passes every one on each
backend, and each catches the kernel bug it is for on a deliberately wrong port, naming the batch
rows and positions that differ."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from backends import numpy_backend
from embedding_parity.conformance import cases, runner
from embedding_parity.conformance.kinds import KINDS
from embedding_parity.usage import UsageError


def _run(target, kind="rope_invariance", **options):
    framework = "torch" if kind.startswith("rope") and options.pop("torch", False) else "numpy"
    return {
        c.check: c for c in runner.run(target, kind, framework=framework, options=options).checks
    }


def rope(x, positions):
    return numpy_backend.apply_rope(x, positions)


def rope_rows(x, positions):
    """positions (B, T) with x (B, H, T, d): each row at its own positions."""
    return np.stack([rope(x[b], positions[b]) for b in range(len(x))])


def _statuses(checks):
    return {name: check.status for name, check in checks.items()}


@pytest.mark.parametrize("name", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("kind", ["rope_invariance", "lookup_invariance"])
def test_each_backend_holds_every_invariance_bit_for_bit(name, kind):
    backend = backends.get(name)
    if kind == "rope_invariance":

        def target(x, positions):
            return backend.apply_rope(x, positions)
    else:

        def target(token_table, position_table, token_ids, start):
            layer = backend.TokenPositionEmbedding(
                backend.to_numpy(token_table), backend.to_numpy(position_table)
            )
            return layer(token_ids, start=start)

    report = runner.run(target, kind, framework=name)
    assert report.conforms
    assert all(c.detail.startswith("bit-identical") for c in report.checks), [
        c.detail for c in report.checks
    ]
    expected = 6 if kind == "rope_invariance" else 5
    assert len(report.checks) == expected


def test_batched_and_qk_calls_add_their_invariances():
    def batched(x, positions):
        return rope_rows(x, positions)

    checks = _run(batched, batched=True)
    assert "left-padded batch = each row alone" in checks
    assert all(c.status == "conforms" for c in checks.values())

    def rotated(q, k, positions):
        return rope(q, positions), rope(k, positions)

    checks = _run(rotated, qk=True)
    assert checks["q and k in one call = two calls"].status == "conforms"


# --- each invariance catches the bug it is for -------------------------------------------


def first_row_only(x, positions):
    """mlx #3494: a decode step (T = 1) of a batch writes only its first row."""
    out = np.array(x, copy=True)
    if x.ndim == 4 and x.shape[-2] == 1:
        out[0] = rope(x[0], positions)
        return out
    return rope(x, positions)


def test_a_batched_decode_that_writes_only_the_first_row_is_caught():
    checks = _run(first_row_only)
    decode = checks["batch = row by row, T = 1 (decode)"]
    assert decode.status == "differs"
    assert "batch rows [1, 2, 3] of 4" in decode.detail
    assert "positions [17]" in decode.detail
    assert checks["batch = row by row, T > 1"].status == "conforms"


def not_reset(x, positions):
    """OLMo-core PR #591: packed documents numbered as one sequence, positions never reset."""
    return rope(x, np.arange(x.shape[-2]))


def test_packed_positions_not_reset_are_caught():
    packed = _run(not_reset)["packed documents = each document alone"]
    assert packed.status == "differs"
    # documents of 5, 7 and 4 tokens: the first is right; the others, at positions 0..6 and
    # 0..3, are rotated as if at 5..11 and 12..15
    assert "positions [0, 1, 2, 3, 4, 5, 6];" in packed.detail


def one_position_row(x, positions):
    """unsloth #3699: the first row's positions for every row of a left-padded batch."""
    return rope_rows(x, np.broadcast_to(positions[:1], positions.shape))


def test_one_position_row_for_a_left_padded_batch_is_caught():
    checks = _run(one_position_row, batched=True)
    padded = checks["left-padded batch = each row alone"]
    assert padded.status == "differs"
    assert "batch rows [1, 2, 3] of 4" in padded.detail


def offset_twice(x, positions):
    """mlx-node PR #33: a chunk's positions, which hold its offset, moved by the offset again."""
    return rope(x, positions + positions[0])


def test_chunked_prefill_counting_its_offset_twice_is_caught():
    checks = _run(offset_twice)
    chunked = checks["chunked prefill = one call"]
    assert chunked.status == "differs"
    # the first chunk is right (its positions start at the one call's offset, counted twice
    # in both); the chunks at 106.. and 111.. are not
    assert "positions [106, 107, 108, 109, 110, 111, 112, 113, ...]" in chunked.detail
    assert checks["batch = row by row, T > 1"].status == "conforms"


class RecastCache:
    """vLLM's get_rope: one cos and sin table per configuration, recast in place to the
    dtype of each call and kept, so that a bfloat16 call leaves float32 ones a bfloat16 table."""

    def __init__(self):
        self.table = None

    def __call__(self, x, positions):
        if self.table is None:
            w = 10000.0 ** (-np.arange(0, x.shape[-1], 2) / x.shape[-1])
            angles = np.arange(2048)[:, None] * w
            self.table = np.concatenate([np.cos(angles), np.sin(angles)], -1).astype(np.float32)
        if self.table.dtype != x.dtype:
            self.table = self.table.astype(x.dtype)
        cos, sin = np.split(self.table[positions], 2, axis=-1)
        half = x.shape[-1] // 2
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], -1).astype(x.dtype)


def test_a_cache_recast_by_a_call_in_another_dtype_is_caught():
    checks = _run(RecastCache())
    stateful = checks["a call in another dtype leaves later calls unchanged"]
    assert stateful.status == "differs"
    assert "positions [1000, 1001" in stateful.detail
    # each call alone is right: only the state between calls is wrong
    assert checks["batch = row by row, T > 1"].status == "conforms"


def test_a_strided_x_read_as_contiguous_is_caught():
    def as_contiguous(x, positions):
        """llama.cpp PR #14580: a strided view's memory read in the view's shape."""
        flat = torch.as_strided(x, x.shape, torch.empty(x.shape).stride())
        return torch.from_numpy(rope(flat.numpy(), positions.numpy()))

    def correct(x, positions):
        return torch.from_numpy(rope(x.numpy(), positions.numpy()))

    wrong = _run(as_contiguous, torch=True)["strided x = contiguous x"]
    assert wrong.status == "differs"
    assert _run(correct, torch=True)["strided x = contiguous x"].status == "conforms"


def test_k_rotated_as_q_is_caught():
    def k_as_q(q, k, positions):
        return rope(q, positions), rope(q, positions)

    qk = _run(k_as_q, qk=True)["q and k in one call = two calls"]
    assert qk.status == "differs"


def test_the_lookup_invariances_catch_a_decode_row_and_a_doubled_start():
    def first_row(token_table, position_table, token_ids, start):
        x = numpy_backend.TokenPositionEmbedding(token_table, position_table)(
            token_ids, start=start
        )
        if token_ids.ndim == 2 and token_ids.shape[1] == 1:
            x[1:] = 0.0
        return x

    def doubled(token_table, position_table, token_ids, start):
        layer = numpy_backend.TokenPositionEmbedding(token_table, position_table)
        return layer(token_ids, start=min(2 * start, len(position_table) - token_ids.shape[-1]))

    decode = _run(first_row, "lookup_invariance")["batch = row by row, T = 1 (decode)"]
    assert decode.status == "differs" and "batch rows [1, 2, 3] of 4" in decode.detail
    chunked = _run(doubled, "lookup_invariance")["chunked prefill = one call"]
    assert chunked.status == "differs" and "positions [6, 7, 8" in chunked.detail


def test_a_within_bound_difference_is_named_as_such():
    """A rotation whose chunks round otherwise (float64 inside, for the one call only) is
    within the kind's bound: not bit-identical, not a bug."""

    def wide_when_long(x, positions):
        if x.shape[-2] == 16:
            return rope(x.astype(np.float64), positions).astype(x.dtype)
        return rope(x, positions)

    chunked = _run(wide_when_long)["chunked prefill = one call"]
    assert chunked.status == "conforms"
    assert chunked.detail.startswith("within the kind's bound")


@settings(max_examples=12, deadline=None)
@given(
    head=st.sampled_from([2, 8, 64, 128]),
    base=st.sampled_from([10000.0, 500000.0]),
    layout=st.sampled_from(["half", "interleaved"]),
)
def test_any_rotation_of_the_library_is_invariant(head, base, layout):
    rope_options = {"head_dim": head, "base": base, "layout": layout, "scaling": None}

    def target(x, positions):
        return numpy_backend.apply_rope(x, positions, base=base, layout=layout)

    report = runner.run(
        target, "rope_invariance", framework="numpy", options={"rope": rope_options}
    )
    assert report.conforms, [c.detail for c in report.checks]


def test_an_invariance_battery_is_not_exported(tmp_path):
    with pytest.raises(UsageError, match="several calls"):
        cases.export(
            str(tmp_path / "out"), "rope_invariance", {}, KINDS["rope_invariance"].cases({})
        )


def test_a_batch_rotated_with_its_first_rows_x_is_caught():
    """A kernel that reads one row's stride for every row of a batch (T > 1)."""

    def first_rows_x(x, positions):
        if x.ndim == 4:
            return np.broadcast_to(rope(x[:1], positions), x.shape).copy()
        return rope(x, positions)

    batch = _run(first_rows_x)["batch = row by row, T > 1"]
    assert batch.status == "differs" and "batch rows [1, 2, 3] of 4" in batch.detail


def test_the_lookup_invariances_catch_strided_ids_and_a_recast_table():
    def ids_as_contiguous(token_table, position_table, token_ids, start):
        flat = torch.as_strided(token_ids, token_ids.shape, torch.empty(token_ids.shape).stride())
        return (
            torch.nn.functional.embedding(flat, token_table)
            + position_table[start : start + token_ids.shape[-1]]
        )

    class RecastTable:
        """A table kept from the first call, recast to each call's dtype in place."""

        def __init__(self):
            self.table = None

        def __call__(self, token_table, position_table, token_ids, start):
            if self.table is None or self.table.dtype != token_table.dtype:
                self.table = (token_table if self.table is None else self.table).astype(
                    token_table.dtype
                )
            rows = self.table[token_ids] + position_table[start : start + token_ids.shape[-1]]
            return rows.astype(token_table.dtype)

    strided = runner.run(ids_as_contiguous, "lookup_invariance", framework="torch").checks
    assert {c.check: c.status for c in strided}["strided ids = contiguous ids"] == "differs"
    recast = _run(RecastTable(), "lookup_invariance")
    assert recast["a call in another dtype leaves later calls unchanged"].status == "differs"
    assert recast["batch = row by row, T > 1"].status == "conforms"


def test_a_call_that_raises_changes_its_input_or_does_not_compose_is_named():
    def raises_alone(x, positions):
        if x.ndim == 3 and x.shape[-2] == 1:  # a decode row called alone
            raise ValueError("one row")
        return rope(x, positions)

    def rotates_in_place(x, positions):
        x[...] = rope(x, positions)
        return x

    def drops_a_token(x, positions):
        return rope(x, positions)[..., :-1, :] if x.shape[-2] == 5 else rope(x, positions)

    decode = _run(raises_alone)["batch = row by row, T = 1 (decode)"]
    assert decode.status == "differs"
    assert "raises ValueError: one row (call 2 of 5)" in decode.detail
    in_place = _run(rotates_in_place)["batch = row by row, T > 1"]
    assert "changes its input in place: x" in in_place.detail
    packed = _run(drops_a_token)["packed documents = each document alone"]
    assert packed.status == "differs" and "do not compose" in packed.detail


def test_the_invariance_kinds_take_the_rope_kinds_options_and_a_config():
    from embedding_parity import configs
    from embedding_parity.conformance import api

    options = api.options_for("rope_invariance", batched=True, qk=True, head_dim=64)
    assert options["batched"] and options["qk"] and options["head_dim"] == 64
    names = [c.check for c in KINDS["rope_invariance"].cases(options)]
    assert "left-padded batch = each row alone" in names
    assert "q and k in one call = two calls" in names
    at_llama = configs.preset("llama-3.2-1b").options("rope_invariance", "--model")
    assert at_llama["rope"]["scaling"]["rope_type"] == "llama3"
    gemma = configs.preset("gemma-4-e2b").options(
        "rope_invariance", "--model", layer="full_attention"
    )
    assert KINDS["rope_invariance"].cases(gemma)[0].params["rope"]["head_dim"] == 512
    with pytest.raises(UsageError, match="name one layer type"):
        KINDS["rope_invariance"].cases(configs.preset("gemma-4-e2b").options("rope", "--model"))
    with pytest.raises(UsageError, match="Gemma's scaled"):
        configs.preset("gemma-7b").options("lookup_invariance", "--model")

    def target(x, positions):
        return numpy_backend.apply_rope(
            x, positions, **configs.preset("llama-3.2-1b").rope_options()
        )

    report = runner.run(target, "rope_invariance", framework="numpy", options=at_llama)
    assert report.conforms, [c.detail for c in report.checks]
