"""The shapes ports call with: options of the rope and lookup kinds that call a target as a
port calls it (a head_dim of its own, a batch (B, H, T, head_dim) at positions (B, T), q and k
rotated in one call, tables of its own vocab_size, dim and max_seq_len). A correct float64
implementation conforms, a natural mistake differs and is named, and without the options the
cases are exactly those the documented matrix was made with.

Judged in this process (``Kind.judge`` on what the implementation returns), each case's params
first sent through JSON as the worker receives them.
"""

import json
import math

import numpy as np
import pytest

from backends import positional
from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.conformance.kinds import KINDS, Case, Outcome
from embedding_parity.conformance.kinds.rope import BATCHES

ROPE, LOOKUP = KINDS["rope"], KINDS["lookup"]
DTYPES = ("float64", "float32", "float16", "bfloat16")


def judged(kind, function, options: dict, only: str | None = None):
    """[(check, status, detail)] of ``function`` on the cases of ``options``, judged here; a
    returned pair is stacked, (2, ...), as the worker reads it back."""
    found = []
    for case in kind.cases(options):
        if only and not case.check.startswith(only):
            continue
        case = Case(case.check, case.label, json.loads(json.dumps(case.params)))
        try:
            result = function(*kind.arguments(case.params))
            outcome = Outcome(array=np.stack(result) if isinstance(result, tuple) else result)
        except (IndexError, TypeError) as error:
            outcome = Outcome(raised=f"{type(error).__name__}: {error}")
        verdict = kind.judge(case, outcome)
        found.append((case.check, verdict.status, verdict.detail))
    return found


def all_conform(verdicts) -> bool:
    return bool(verdicts) and all(status == "conforms" for _, status, _ in verdicts)


# --- float64 implementations, as ports write them ------------------------------------------


def textbook(head_dim: int, base: float = 10000.0) -> np.ndarray:
    """(head_dim/2,) inv_freq = 1 / base**(2i/head_dim)."""
    return 1.0 / base ** (np.arange(0, head_dim, 2) / head_dim)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def hf_rope(x, positions, inv_freq=None, *, interleaved=False):
    """Hugging Face's apply_rotary_pos_emb in float64: cos and sin (..., T, head_dim), taken to
    the head axis of x (B, H, T, head_dim) for positions (B, T) (unsqueeze_dim=1)."""
    inv_freq = textbook(x.shape[-1]) if inv_freq is None else inv_freq
    freqs = np.asarray(positions, np.float64)[..., None] * inv_freq  # (..., T, head_dim/2)
    if np.ndim(positions) == 2:
        freqs = freqs[:, None]  # (B, 1, T, head_dim/2): one angle for every head of a row
    wide = x.astype(np.float64)
    if interleaved:  # GPT-J's pairs (2i, 2i+1): the mistake where the half layout is asked for
        a, b, c, s = wide[..., 0::2], wide[..., 1::2], np.cos(freqs), np.sin(freqs)
        return np.stack([a * c - b * s, b * c + a * s], axis=-1).reshape(x.shape).astype(x.dtype)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return (wide * np.cos(emb) + rotate_half(wide) * np.sin(emb)).astype(x.dtype)


def hf_rope_qk(q, k, positions):
    return hf_rope(q, positions), hf_rope(k, positions)


def checked_lookup(token_table, position_table, token_ids, start):
    token_ids = np.asarray(token_ids)
    if token_ids.dtype.kind not in "iu":
        raise TypeError(f"token_ids must be integers, got {token_ids.dtype}")
    if token_ids.size and (token_ids.min() < 0 or token_ids.max() >= len(token_table)):
        raise IndexError(f"token ids must be in [0, {len(token_table)})")
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def clamped_lookup(token_table, position_table, token_ids, start):
    rows = np.take(token_table, np.asarray(token_ids).astype(np.int64), axis=0, mode="clip")
    return rows + position_table[start : start + np.shape(token_ids)[-1]]


# --- without the options: the cases of the documented matrix --------------------------------

# Taken from the kinds before the options existed.
ROPE_CHECKS = [
    (f"{check} {dtype}", label)
    for dtype in DTYPES
    for check, label in (
        ("rotation", "x (3, 16, 16), positions 0..15"),
        ("long positions", "x (3, 14, 16), positions to 131071"),
    )
]
LOOKUP_CHECKS = [
    (f"forward {dtype}", f"{ids} ids, start {start}")
    for dtype in DTYPES
    for ids in ("1-D", "2-D")
    for start in (0, 11)
] + [
    ("bad id: vocab_size", "token_ids [3, 64, 5]"),
    ("bad id: -1", "token_ids [3, -1, 5]"),
    ("bad id: far out of range", "token_ids [3, 2147483615, 5]"),
    ("bad id: non-integer (1.5)", "token_ids [3, 1.5, 5]"),
]
TEXTBOOK_ROPE = {"head_dim": 16, "base": 10000.0, "layout": "half", "scaling": None}
ROPE_PARAMS = [
    {"dtype": dtype, "long": long, "seed": 2 * i + long, "rope": TEXTBOOK_ROPE}
    for i, dtype in enumerate(DTYPES)
    for long in (False, True)
]
LOOKUP_PARAMS = [
    {"dtype": dtype, "shape": shape, "start": start, "seed": 4 * i + 2 * j + k}
    for i, dtype in enumerate(DTYPES)
    for j, shape in enumerate(((5,), (3, 5)))
    for k, start in enumerate((0, 11))
] + [
    {"dtype": "float32", "shape": (3,), "start": 0, "seed": 0, "bad": bad}
    for bad in (64, -1, 2**31 - 33, "1.5")
]


@pytest.mark.parametrize("options", [{}, {"base": 10000.0, "padding_idx": None}])
def test_without_the_options_the_cases_are_as_before(options):
    rope, lookup = ROPE.cases(options), LOOKUP.cases(options)
    assert [(c.check, c.label) for c in rope] == ROPE_CHECKS
    assert [c.params for c in rope] == ROPE_PARAMS
    assert [(c.check, c.label) for c in lookup] == LOOKUP_CHECKS
    assert [c.params for c in lookup] == LOOKUP_PARAMS
    assert ROPE.describe(options) == ROPE.contract
    assert LOOKUP.describe(options) == LOOKUP.contract


def test_without_the_options_a_configured_rotation_is_as_before():
    config = configs.preset("gpt-neox-20b")
    options = {"rope": {**config.rope_options(), "head_dim": config.head_dim}}
    assert [c.label for c in ROPE.cases(options)][:2] == [
        "x (3, 16, 96), positions 0..15",
        "x (3, 14, 96), positions to 131071",
    ]
    assert ROPE.describe(options) == (
        "f(x, positions) -> rotated, x (..., T, 96); the first 24 dims in pairs (i, i + 12) "
        "turned by positions * w_i, w from base 10000 and no scaling (cos and sin times its "
        "attention factor), dims 24.. passed through"
    )
    assert ROPE.argument_names(ROPE.cases(options)[0].params) == ["x", "positions"]


def test_without_the_options_gemmas_scaled_lookup_is_as_before():
    cases = LOOKUP.cases({"embed_scale": 3072})
    assert [(c.check, c.label) for c in cases] == [
        (f"scaled {dtype}", f"{ids} ids, width 3072") for dtype in DTYPES for ids in ("1-D", "2-D")
    ] + [
        ("bad id: vocab_size", "token_ids [3, 64, 5]"),
        ("bad id: -1", "token_ids [3, -1, 5]"),
        ("bad id: far out of range", "token_ids [3, 2147483615, 5]"),
    ]
    assert LOOKUP.arguments(cases[0].params)[0].shape == (64, 3072)


# --- rope: head_dim -------------------------------------------------------------------------


@pytest.mark.parametrize("head_dim", [2, 8, 64])
def test_a_rotation_of_its_own_head_dim_conforms(head_dim):
    options = {"head_dim": head_dim}
    x, _positions = ROPE.arguments(ROPE.cases(options)[0].params)
    assert x.shape == (3, 16, head_dim)
    assert all_conform(judged(ROPE, hf_rope, options))
    assert f"x (..., T, {head_dim}), positions (T,) integers" in ROPE.describe(options)


def test_the_interleaved_layout_at_a_head_dim_is_named():
    verdicts = judged(ROPE, lambda x, p: hf_rope(x, p, interleaved=True), {"head_dim": 64})
    assert {status for _, status, _ in verdicts} == {"differs"}
    assert all("interleaved layout" in detail for _, _, detail in verdicts)


@pytest.mark.parametrize(
    "head_dim, message",
    [
        (7, "head_dim 7 is not an even integer of at least 2"),
        (0, "head_dim 0 is not an even integer of at least 2"),
        (8.0, "head_dim 8.0 is not an even integer"),
        (True, "head_dim True is not an even integer"),
    ],
)
def test_a_head_dim_no_rotation_has_is_refused(head_dim, message):
    with pytest.raises(UsageError, match=message):
        ROPE.cases({"head_dim": head_dim})


def test_a_configs_head_dim_wins_and_another_is_refused():
    config = configs.preset("llama-3.2-1b")
    options = {"rope": {**config.rope_options(), "head_dim": config.head_dim}}
    same = ROPE.cases({**options, "head_dim": 64})
    assert [c.params for c in same] == [c.params for c in ROPE.cases(options)]
    with pytest.raises(UsageError, match="head_dim 16 where the config's is 64: .*leave head_dim"):
        ROPE.cases({**options, "head_dim": 16})


# --- rope: a batch (B, H, T, head_dim) at positions (B, T) ----------------------------------

BATCHED_CHECKS = [
    f"{check} {dtype}"
    for dtype in DTYPES
    for check in ("packed batch", "left-padded batch", "long positions")
]


def test_the_batches_are_the_ones_ports_meet():
    np.testing.assert_array_equal(BATCHES["packed"][0], [*range(8), *range(8)])
    # Hugging Face's cumsum(mask) - 1 with the 3 padded slots at 1
    np.testing.assert_array_equal(BATCHES["left-padded"][0], [1, 1, 1, *range(13)])
    np.testing.assert_array_equal(BATCHES["left-padded"][1], np.arange(16))
    assert BATCHES["long"].max() == 131071


def test_a_batched_rotation_conforms():
    cases = ROPE.cases({"batched": True})
    assert [c.check for c in cases] == BATCHED_CHECKS
    x, positions = ROPE.arguments(cases[0].params)
    assert (x.shape, positions.shape) == ((2, 3, 16, 16), (2, 16))
    assert all_conform(judged(ROPE, hf_rope, {"batched": True}))
    assert "positions (B, T) integers" in ROPE.describe({"batched": True})


@pytest.mark.parametrize(
    "wrong, named",
    [
        (lambda x, p: hf_rope(x, np.broadcast_to(p[0], p.shape)), "row 0's positions"),
        (
            lambda x, p: hf_rope(x, np.arange(p.shape[-1])),
            "the positions ignored: 0..15 in every batch row",
        ),
    ],
    ids=["row 0 for every row", "positions ignored"],
)
def test_a_batch_mistake_is_named(wrong, named):
    verdicts = judged(ROPE, wrong, {"batched": True}, only="packed batch")
    assert {status for _, status, _ in verdicts} == {"differs"}
    assert all(named in detail for _, _, detail in verdicts)


def test_a_length_rule_reads_the_whole_batch():
    config = configs.preset("llama-2-7b-dynamic")
    rope = {**config.rope_options(), "head_dim": config.head_dim}
    options = {"rope": rope, "batched": True}

    def rule(positions):  # dynamic NTK at max(positions) + 1 of what it is given
        length = positional.length(positions)
        return positional.frequencies(config.head_dim, rope["base"], rope["scaling"], length)

    def whole(x, positions):
        return hf_rope(x, positions, rule(positions))

    def per_row(x, positions):
        return np.stack([hf_rope(x[b], positions[b], rule(positions[b])) for b in range(len(x))])

    assert all_conform(judged(ROPE, whole, options))
    verdicts = judged(ROPE, per_row, options, only="long positions")
    assert {status for _, status, _ in verdicts} == {"differs"}
    assert all("dynamic from each batch row's max(positions) + 1" in d for _, _, d in verdicts)


# --- rope: f(q, k, positions) -> (q_rotated, k_rotated) -------------------------------------


@pytest.mark.parametrize(
    "options",
    [{"qk": True}, {"qk": True, "batched": True}, {"qk": True, "batched": True, "head_dim": 8}],
    ids=["qk", "qk batched", "qk batched head_dim 8"],
)
def test_q_and_k_rotated_in_one_call_conform(options):
    q, k, _ = ROPE.arguments(ROPE.cases(options)[0].params)
    assert q.shape == k.shape and not np.array_equal(q, k)
    assert all_conform(judged(ROPE, hf_rope_qk, options))


def test_the_qk_call_is_said_and_its_arguments_named():
    options = {"qk": True, "batched": True}
    assert ROPE.describe(options).startswith(
        "f(q, k, positions) -> (q_rotated, k_rotated), q and k (B, H, T, 16)"
    )
    params = ROPE.cases(options)[0].params
    assert ROPE.argument_names(params) == ["q", "k", "positions"]
    changed = ROPE.changed(params, [{"argument": 1, "elements": 5}])
    assert changed.startswith("changes its input in place: k (5 of 1536 elements)")


def test_k_off_by_one_differs():
    def wrong(q, k, positions):
        return hf_rope(q, positions), hf_rope(k, positions + 1)

    verdicts = judged(ROPE, wrong, {"qk": True, "batched": True})
    assert {status for _, status, _ in verdicts} == {"differs"}


@pytest.mark.parametrize(
    "wrong, named",
    [
        (lambda q, k, p: hf_rope_qk(q, k, p)[::-1], "q and k swapped"),
        (lambda q, k, p: (hf_rope(q, p), k), "k returned as given"),
        (
            lambda q, k, p: (hf_rope(q, p, interleaved=True), hf_rope(k, p, interleaved=True)),
            "interleaved layout",
        ),
    ],
    ids=["swapped", "k unrotated", "interleaved"],
)
def test_a_qk_mistake_is_named(wrong, named):
    verdicts = judged(ROPE, wrong, {"qk": True}, only="rotation")
    assert {status for _, status, _ in verdicts} == {"differs"}
    assert all(named in detail for _, _, detail in verdicts)


# --- lookup: tables of the caller's shape ---------------------------------------------------


@pytest.mark.parametrize("table", [(1000, 32, 64), [3, 4, 5]], ids=["1000x32", "3x4"])
def test_a_lookup_over_tables_of_its_own_shape_conforms(table):
    vocab, dim, length = table
    cases = LOOKUP.cases({"table": table})
    token_table, position_table, _ids, _start = LOOKUP.arguments(cases[0].params)
    assert (token_table.shape, position_table.shape) == ((vocab, dim), (length, dim))
    assert {c.params["start"] for c in cases} == {0, length - 5}
    assert [c.label for c in cases if c.check == "bad id: vocab_size"] == [
        f"token_ids [{min(3, vocab - 2)}, {vocab}, {min(5, vocab - 1)}]"
    ]
    assert all_conform(judged(LOOKUP, checked_lookup, {"table": table}))


def test_a_clamped_bad_id_is_named_at_the_tables_vocab_size():
    verdicts = {c: d for c, _, d in judged(LOOKUP, clamped_lookup, {"table": (1000, 32, 64)})}
    assert verdicts["bad id: vocab_size"] == "clamps to row 999: a silent wrong answer"
    assert verdicts["bad id: far out of range"] == "clamps to row 999: a silent wrong answer"
    assert verdicts["bad id: -1"] == "clamps to row 0: a silent wrong answer"


def test_a_start_ignored_is_named_at_the_tables_length():
    def wrong(token_table, position_table, token_ids, start):  # positions always from 0
        return checked_lookup(token_table, position_table, token_ids, 0)

    verdicts = judged(LOOKUP, wrong, {"table": (1000, 32, 64)}, only="forward")
    differing = [detail for _, status, detail in verdicts if status == "differs"]
    assert len(differing) == 8  # the cases at start 59 = max_seq_len - T; those at 0 conform
    assert {d.split("; ")[-1] for d in differing} == {"start ignored (positions from 0, not 59)"}


@pytest.mark.parametrize(
    "table, message",
    [
        ((2, 4, 5), "vocab_size 2 is under 3"),
        ((3, 0, 5), "dim 0 is under 1"),
        ((3, 4, 4), "max_seq_len 4 is under 5"),
        ((128256, 4096, 8192), "558891008 values are over the limit of 67108864"),
        ((3, 4), r"table \(3, 4\) is not \(vocab_size, dim, max_seq_len\)"),
        ((3.0, 4, 5), "give three integers"),
    ],
)
def test_a_table_the_battery_cannot_use_is_refused(table, message):
    with pytest.raises(UsageError, match=message):
        LOOKUP.cases({"table": table})


def gemma_lookup(token_table, token_ids, *, rounded=True):
    """Gemma's token_table[token_ids] * sqrt(hidden_size), the scale rounded to the table's dtype
    through float32 (transformers' float32 buffer), or not: the mistake."""
    token_ids = np.asarray(token_ids)
    if token_ids.dtype.kind not in "iu" or token_ids.min() < 0:
        raise IndexError("token ids must be non-negative integers")
    rows = token_table[token_ids]  # IndexError past the last row
    if not rounded:
        return (rows.astype(np.float64) * math.sqrt(token_table.shape[1])).astype(rows.dtype)
    return rows * np.float32(math.sqrt(token_table.shape[1])).astype(rows.dtype)


def test_gemmas_scaled_lookup_takes_the_tables_vocab_size():
    options = {"embed_scale": 48, "table": (100, 48, 5)}
    cases = LOOKUP.cases(options)
    assert LOOKUP.arguments(cases[0].params)[0].shape == (100, 48)
    assert next(c.label for c in cases if c.check.startswith("bad id")) == "token_ids [3, 100, 5]"
    assert all_conform(judged(LOOKUP, gemma_lookup, options))
    verdicts = judged(LOOKUP, lambda t, i: gemma_lookup(t, i, rounded=False), options, "scaled")
    assert any("sqrt(48) unrounded" in detail for _, _, detail in verdicts)
    with pytest.raises(UsageError, match="table dim 32 where the config's hidden_size is 48"):
        LOOKUP.cases({"embed_scale": 48, "table": (100, 32, 5)})
