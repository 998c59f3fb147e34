"""The scalars around the rotation: the factor q . k is multiplied by before the softmax, per
query position and layer. DeepSeek's softmax scale times mscale(factor, mscale_all_dim)
squared; Llama 4's query temperature on its NoPE layers. A correct float64 port conforms, each
mistake is named."""

import math

import numpy as np
import pytest

from embedding_parity import configs
from embedding_parity.conformance import api
from embedding_parity.conformance.kinds import KINDS
from embedding_parity.conformance.kinds.attention_scale import POSITIONS, mscale


def test_deepseek_factors_are_the_published_ones():
    """x1.8739 for V3 (mscale_all_dim 1), x1.5896 for V2-Lite (0.707), on 192**-0.5."""
    assert round(mscale(40, 1.0) ** 2, 4) == 1.8739
    assert round(mscale(40, 0.707) ** 2, 4) == 1.5896
    for preset, value in (("deepseek-v3", 1.0), ("deepseek-v2-lite", 0.707)):
        config = configs.preset(preset)
        assert config.attention == {
            "qk_head_dim": 192,
            "mscale": {"factor": 40.0, "mscale_all_dim": value, "mscale": value},
        }
        assert "softmax scale qk_head_dim 192**-0.5 times mscale" in config.line()


def constant(value):
    return lambda positions, layer: np.full(len(positions), value)


@pytest.mark.parametrize(
    "preset, value, words",
    [
        ("deepseek-v2-lite", 192**-0.5 * mscale(40, 0.707) ** 2, None),
        ("deepseek-v2-lite", 192**-0.5, "without DeepSeek's mscale squared"),
        ("deepseek-v2-lite", 192**-0.5 * mscale(40, 0.707), "applied once, not squared"),
        ("deepseek-v2-lite", 192**-0.5 * mscale(40, 1.0) ** 2, "mscale_all_dim taken as 1"),
        ("deepseek-v3", 64**-0.5 * mscale(40, 1.0) ** 2, "1 / sqrt(64) where q . k is 192 wide"),
    ],
)
def test_deepseek_softmax_scale(preset, value, words):
    report = api.check(constant(value), "attention_scale", config=preset, framework="numpy")
    if words is None:
        assert report.conforms
    else:
        assert not report.conforms and words in report.checks[0].detail


def llama4(positions, layer, *, every=False, floor=True, shift=1):
    scale = np.full(len(positions), 128**-0.5)
    if (layer + 1) % 4 == 0 or every:  # no_rope_layers: every fourth layer NoPE
        steps = (positions + shift) / 8192
        steps = np.floor(steps) if floor else steps
        scale = scale * (1 + 0.1 * np.log1p(steps))
    return scale


@pytest.mark.parametrize(
    "changes, check, words",
    [
        ({}, None, None),
        ({"every": True}, "scale chunked_attention", "the query temperature on every layer"),
        ({"floor": False}, "scale full_attention", "without the floor"),
        ({"shift": 0}, "scale full_attention", "the step one position late"),
    ],
)
def test_llama4_query_temperature(changes, check, words):
    report = api.check(
        lambda p, layer: llama4(p, layer, **changes),
        "attention_scale",
        config="llama-4-scout",
        framework="numpy",
    )
    found = {c.check: c for c in report.checks}
    assert set(found) == {"scale chunked_attention", "scale full_attention", "layer map"}
    if check is None:
        assert report.conforms, report.lines()
    else:
        assert found[check].status == "differs" and words in found[check].detail


def test_llama4_temperature_in_float32_is_named():
    def float32(positions, layer):
        p = positions.astype(np.float32)
        tuned = np.log1p(np.floor((p + np.float32(1)) / np.float32(8192))) * np.float32(0.1) + 1
        nope = (layer + 1) % 4 == 0
        return np.full(len(p), 128**-0.5) * (tuned.astype(np.float64) if nope else 1.0)

    report = api.check(float32, "attention_scale", config="llama-4-scout", framework="numpy")
    found = {c.check: c for c in report.checks}
    assert "computed in float32" in found["scale full_attention"].detail


def test_the_reference_is_the_formula():
    options = configs.preset("llama-4-scout").options("attention_scale")
    case = next(
        c for c in KINDS["attention_scale"].cases(options) if c.check == "scale full_attention"
    )
    expected = [128**-0.5 * (1 + 0.1 * math.log1p(math.floor((p + 1) / 8192))) for p in POSITIONS]
    np.testing.assert_array_equal(KINDS["attention_scale"].reference(case.params), expected)


@pytest.mark.parametrize("preset", ["gemma-3-4b", "gemma-2-2b"])
def test_a_model_with_its_own_scale_is_refused(preset):
    from embedding_parity.cli import UsageError

    with pytest.raises(UsageError, match="query_pre_attn_scalar"):
        configs.preset(preset).options("attention_scale")


def test_a_config_without_attention_fields_takes_its_head_dim():
    import dataclasses

    config = dataclasses.replace(configs.preset("llama-3.2-1b"), attention=None)
    assert config.options("attention_scale")["attention"] == {"qk_head_dim": 64}
