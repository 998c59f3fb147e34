"""Multimodal RoPE (M-RoPE): positions (3, T), the t, h and w rows, each frequency slot turned by
its row's position; chunked slots (Qwen2-VL, Qwen2.5-VL, GLM-4V) or interleaved (Qwen3-VL,
Qwen3.5). Read from the models' config.json as transformers reads it; a correct port conforms on
text, image and video tokens; each mistake ports make is named, among them the ones that leave
text tokens right and only image tokens wrong."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends
from backends import positional
from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.conformance.kinds import KINDS, Outcome

ROPE = KINDS["rope"]
PRESETS = ("qwen2.5-vl-7b", "qwen3-vl-8b", "glm-4.1v-9b", "qwen3.5-27b")


def test_the_presets_read_as_their_rotary_modules_take_them():
    found = {name: configs.preset(name) for name in PRESETS}
    assert {n: c.mrope for n, c in found.items()} == {
        "qwen2.5-vl-7b": ("chunked", (16, 24, 24)),
        "qwen3-vl-8b": ("interleaved", (24, 20, 20)),
        "glm-4.1v-9b": ("chunked", (8, 12, 12)),
        "qwen3.5-27b": ("interleaved", (11, 11, 10)),
    }
    assert found["glm-4.1v-9b"].layout == "interleaved" and found["glm-4.1v-9b"].rotary_dim == 64
    assert found["qwen3.5-27b"].rotary_dim == 64
    assert "M-RoPE over positions (3, T), chunked frequency slots t 16, h 24, w 24" in (
        found["qwen2.5-vl-7b"].line()
    )


def test_the_slots_each_axis_turns():
    chunked = positional.mrope_axes(64, (16, 24, 24), "chunked")
    assert list(np.bincount(chunked)) == [16, 24, 24] and np.all(np.diff(chunked) >= 0)
    interleaved = positional.mrope_axes(64, (24, 20, 20), "interleaved")
    assert list(interleaved[:6]) == [0, 1, 2, 0, 1, 2]
    assert list(interleaved[60:]) == [0, 0, 0, 0]  # past 3 * 20 slots: t's
    assert list(np.bincount(interleaved)) == [24, 20, 20]


@settings(max_examples=40, deadline=None)
@given(
    section=st.tuples(*[st.integers(1, 12)] * 3),
    layout=st.sampled_from(["chunked", "interleaved"]),
    pairing=st.sampled_from(["half", "interleaved"]),
    start=st.integers(0, 100000),
)
def test_text_tokens_are_plain_rope(section, layout, pairing, start):
    """t = h = w: every slot reads the same position, whatever the section and layout."""
    rotary = 2 * sum(section)
    x = np.random.default_rng(sum(section)).standard_normal((2, 5, rotary + 4))
    text = start + np.arange(5)
    turned = positional.apply_mrope(
        x,
        np.stack([text] * 3),
        section=section,
        mrope_layout=layout,
        layout=pairing,
        rotary_dim=rotary,
    )
    plain = positional.apply_rope(x, text, layout=pairing, rotary_dim=rotary)
    np.testing.assert_array_equal(turned, plain)


@pytest.mark.parametrize(
    "section, message",
    [((16, 24), "three positive integers"), ((16, 24, 20), "holds 60 frequency slots")],
)
def test_a_section_that_does_not_fit_is_refused(section, message):
    with pytest.raises(ValueError, match=message):
        positional.mrope_axes(64, section)


def port(layout=None, section=None, pairing=None, rows=None):
    """A float64 port rounded once, at the preset's rule unless told otherwise."""

    def made(config):
        rule = {
            "section": section or config.mrope[1],
            "mrope_layout": layout or config.mrope[0],
            "layout": pairing or config.layout,
            "base": config.rope_theta,
            "rotary_dim": config.rotary_dim,
        }

        def f(x, positions):
            at = positions if rows is None else positions[list(rows)]
            return positional.apply_mrope(x, at, **rule).astype(x.dtype)

        return f

    return made


def judged(function, preset) -> dict:
    """{check: (status, detail)}: the first difference of each check, else its verdict."""
    found = {}
    for case in ROPE.cases(configs.preset(preset).options("rope")):
        array = function(*ROPE.arguments(case.params))
        verdict = ROPE.judge(case, Outcome(array=np.asarray(array)))
        if case.check not in found or found[case.check][0] == "conforms":
            found[case.check] = (verdict.status, f"{case.label}: {verdict.detail}")
    return found


@pytest.mark.parametrize("preset", PRESETS)
def test_a_correct_port_conforms(preset):
    found = judged(port()(configs.preset(preset)), preset)
    assert {c.rsplit(" ", 1)[0] for c in found} == {
        "text tokens",
        "image tokens",
        "video tokens",
        "long positions",
    }
    assert all(status == "conforms" for status, _ in found.values()), found


# (preset, the port's mistake, the words that name it); text tokens conform in each but the
# pairing's (whose text tokens are wrong too)
MISTAKES = [
    (
        "qwen3-vl-8b",
        port(layout="chunked"),
        "chunked frequency slots where the config's are interleaved",
    ),
    (
        "qwen2.5-vl-7b",
        port(layout="interleaved"),
        "interleaved frequency slots where the config's are chunked",
    ),
    (
        "qwen2.5-vl-7b",
        port(section=(24, 20, 20)),
        "section [24, 20, 20] (t 24, h 20, w 20) where the config's is [16, 24, 24]",
    ),
    (
        "qwen3-vl-8b",
        port(section=(16, 24, 24)),
        "section [16, 24, 24] (t 16, h 24, w 24) where the config's is [24, 20, 20]",
    ),
    ("glm-4.1v-9b", port(rows=(0, 0, 0)), "the temporal row for every frequency slot"),
    ("qwen3.5-27b", port(rows=(0, 2, 1)), "the h and w rows swapped"),
]


@pytest.mark.parametrize("preset, made, words", MISTAKES, ids=[m[2][:40] for m in MISTAKES])
def test_each_mistake_is_named_and_text_tokens_hide_it(preset, made, words):
    found = judged(made(configs.preset(preset)), preset)
    assert found["text tokens float32"][0] == "conforms"
    checks = ("image tokens float32", "video tokens float32", "long positions float32")
    differing = [found[c] for c in checks if found[c][0] == "differs"]
    assert differing and all(words in detail for _, detail in differing), found


@pytest.mark.parametrize(
    "preset, pairing, words",
    [
        ("qwen2.5-vl-7b", "interleaved", "GPT-J pairs (2i, 2i+1) where the config's half layout"),
        ("glm-4.1v-9b", "half", "half pairs (i, i + d/2) where the config's interleaved layout"),
    ],
)
def test_the_other_pairing_is_named(preset, pairing, words):
    found = judged(port(pairing=pairing)(configs.preset(preset)), preset)
    assert words in found["image tokens float32"][1]


def test_batched_is_refused_with_mrope():
    options = {**configs.preset("qwen3-vl-8b").options("rope"), "batched": True}
    with pytest.raises(UsageError, match="batched with M-RoPE"):
        ROPE.cases(options)


# --- the library: each backend's apply_rope(..., mrope=...) ----------------------------------

MROPES = {
    "chunked": {"layout": "chunked", "section": [16, 24, 24]},
    "interleaved": {"layout": "interleaved", "section": [24, 20, 20]},
}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("slots", list(MROPES))
@pytest.mark.parametrize("case", ["image", "video", "long"])
def test_each_backend_rotates_within_the_bound(backend, dtype, slots, case):
    """The bound is rope_bound with each pair at its own row's position (the kit's)."""
    from embedding_parity.conformance.kinds.rope import MROPE_POSITIONS

    positions = MROPE_POSITIONS[case]
    x = np.random.default_rng(1).standard_normal((3, positions.shape[1], 128))
    x = x.astype(backends.DTYPES[dtype])
    mrope = MROPES[slots]
    y = np.asarray(backend.to_numpy(backend.apply_rope(x, positions, base=1e6, mrope=mrope)))
    assert y.dtype == x.dtype
    expected = positional.apply_mrope(
        x, positions, section=mrope["section"], mrope_layout=slots, base=1e6
    )
    axes = positional.mrope_axes(64, mrope["section"], slots)
    bound = positional.rope_bound(
        x, positions.max(axis=0), base=1e6, dtype=dtype, pair_positions=positions[axes].T
    )
    assert np.all(np.abs(y.astype(np.float64) - expected) <= bound)


@pytest.mark.parametrize(
    "positions, kwargs, message",
    [
        (np.arange(4), {}, "M-RoPE positions must be (3, T)"),
        (
            np.zeros((3, 4), np.int64),
            {"scaling": {"rope_type": "linear", "factor": 2.0}},
            "no scaling",
        ),
        (np.zeros((3, 4), np.int64), {"mrope": {"section": [2, 1, 1]}}, "mrope must be"),
        (np.full((3, 4), -1), {}, "position -1 at positions[0]"),
        (
            np.zeros((3, 4), np.int64),
            {"mrope": {"layout": "chunked", "section": [2, 2, 2]}},
            "holds 6 frequency slots",
        ),
    ],
)
def test_each_backend_refuses_bad_mrope_input_alike(backend, positions, kwargs, message):
    x = np.ones((2, 4, 8), np.float32)
    call = {"mrope": {"layout": "chunked", "section": [2, 1, 1]}, **kwargs}
    with pytest.raises(ValueError) as info:
        backend.apply_rope(x, positions, **call)
    assert message in str(info.value)
