"""``compare.py check`` at the configurations models ship: correct implementations conform at
every preset, and each mistake a port makes is caught and named.

The implementations here are judged in this process (``Kind.judge`` on what they return),
as the worker would judge them, so the battery costs no process launch; one test runs
targets through the worker for what only the worker sees (an input changed in place).
"""

import json
import math
import os
import re

import ml_dtypes
import numpy as np
import pytest

import compare
from backends import numpy_backend, positional, pretrained
from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.configs.presets import PRESETS
from embedding_parity.conformance import process, runner
from embedding_parity.conformance.kinds import KINDS, Outcome
from tests.conftest import needs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets", "configured.py")


def rope_options(config: configs.Configuration) -> dict:
    return {
        "rope": {
            **config.rope_options(),
            "head_dim": config.head_dim,
            "max_position_embeddings": config.max_position_embeddings,
        }
    }


def judged(kind: str, function, options: dict, only: str | None = None):
    """[(check, status, detail)] of ``function`` on the battery, judged in this process."""
    found = []
    for case in KINDS[kind].cases(options):
        if only and not case.check.startswith(only):
            continue
        try:
            outcome = Outcome(array=np.asarray(function(*KINDS[kind].arguments(case.params))))
        except (IndexError, ValueError, TypeError) as error:
            outcome = Outcome(raised=f"{type(error).__name__}: {error}")
        verdict = KINDS[kind].judge(case, outcome)
        found.append((case.check, verdict.status, verdict.detail))
    return found


def port(w_of, attention_of=None, *, round_positions=False, scale_rest=1.0, whole=False):
    """A NumPy rotation computed as a float32 port would, from its own (w, attention) rule:
    ``w_of(rotary_dim, positions)``; x (..., T, head_dim) in the half or interleaved layout."""

    def rotate(config):
        layout = config.layout
        rotary = config.head_dim if whole else config.rotary_dim or config.head_dim

        def f(x, positions):
            compute = positional.compute_dtype(x.dtype)
            with np.errstate(over="ignore", invalid="ignore"):  # float16 overflows: the mistake
                at = positions.astype(x.dtype) if round_positions else positions
                w = w_of(rotary, positions).astype(compute)
                s = compute.type(attention_of(positions) if attention_of else 1.0)
                angles = np.asarray(at, compute)[:, None] * w
                cos = (np.cos(angles) * s).astype(x.dtype)
                sin = (np.sin(angles) * s).astype(x.dtype)
            part, rest = x[..., :rotary], x[..., rotary:] * x.dtype.type(scale_rest)
            if layout == "interleaved":
                a, b = part[..., 0::2], part[..., 1::2]
                out = np.stack([a * cos - b * sin, b * cos + a * sin], -1).reshape(part.shape)
            else:
                a, b = np.split(part, 2, axis=-1)
                out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
            return np.concatenate([out, rest], axis=-1)

        return f

    return rotate


def rule_of(config, **changes):
    """The config's own frequency rule, with ``changes`` made to its scaling parameters."""

    def w_of(rotary, positions):
        scaling = {**config.scaling, **changes} if config.scaling else None
        return positional.rope_parameters(
            rotary, config.rope_theta, scaling, positional.length(positions)
        )[0]

    return w_of


def attention_of(config, **changes):
    def s(positions):
        scaling = {**config.scaling, **changes}
        rotary = config.rotary_dim or config.head_dim
        return positional.rope_parameters(
            rotary, config.rope_theta, scaling, positional.length(positions)
        )[1]

    return s


ROPE_PRESETS = [name for name in PRESETS if configs.preset(name).rope]


@pytest.mark.parametrize("name", ROPE_PRESETS)
def test_the_suite_conforms_at_every_preset(name):
    config = configs.preset(name)

    def suite(x, positions):
        return numpy_backend.apply_rope(x, positions, **config.rope_options())

    verdicts = judged("rope", suite, rope_options(config))
    assert {status for _, status, _ in verdicts} == {"conforms"}, verdicts
    # a bound with teeth: the correct rotation uses a real share of it, not a thousandth
    ratios = [float(re.search(r"\(([\d.]+) of the bound\)", d)[1]) for _, _, d in verdicts]
    assert max(ratios) > 0.1


def synthetic(**fields) -> configs.Configuration:
    """A reading of made-up fields, not held to a model's code: transformers' Llama cannot run
    some of them (its apply_rotary_pos_emb turns the whole head, partial_rotary_factor or not);
    the contracts at these readings are what is tested."""
    base = {"model_type": "llama", "head_dim": 16, "num_attention_heads": 1, "hidden_size": 16}
    return configs.from_fields({**base, **fields}, "synthetic", "test", hold=False)


YARN_PARTIAL = {
    "partial_rotary_factor": 0.5,
    "max_position_embeddings": 524288,
    "rope_scaling": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 131072,
    },
}
DYNAMIC = {
    "max_position_embeddings": 4096,
    "rope_scaling": {"rope_type": "dynamic", "factor": 4.0},
}

MISTAKES = [
    ("llama-3.2-1b", lambda c: port(rule_of(c, factor=8.0)), "hard-coded to 8"),
    ("gpt-oss-20b", lambda c: port(rule_of(c)), "YaRN without its attention factor"),
    (
        "deepseek-v3",
        lambda c: port(rule_of(c), lambda p: 0.1 * math.log(40) + 1),
        "0.1 ln(factor) + 1 = 1.369 where the mscale / mscale_all_dim ratio 1 applies",
    ),
    (
        "gpt-oss-20b",
        lambda c: port(rule_of(c), lambda p: attention_of(c)(p) ** 2),
        "attention factor applied twice",
    ),
    ("gpt-oss-20b", lambda c: port(rule_of(c, truncate=True), attention_of(c)), "truncate ignored"),
    (
        "gpt-oss-20b",
        lambda c: port(
            rule_of(c, original_max_position_embeddings=131072),
            attention_of(c, original_max_position_embeddings=131072),
        ),
        "correction range from max_position_embeddings",
    ),
    (
        YARN_PARTIAL,
        lambda c: port(rule_of(c), attention_of(c), scale_rest=attention_of(c)(np.arange(1))),
        "on the whole output",
    ),
    (
        {**YARN_PARTIAL, "partial_rotary_factor": 1.0},
        lambda c: port(
            lambda rotary, p: _clamped_yarn(c, rotary),
            attention_of(c),
        ),
        "clamped at d/2 - 1",
    ),
    (
        DYNAMIC,
        lambda c: port(lambda rotary, p: rule_of(c)(rotary, np.array([4096 * 4 - 1]))),
        "dynamic NTK computed once at the longest length",
    ),
    (
        "phi-3-mini-128k",
        lambda c: port(
            lambda rotary, p: rule_of(c)(rotary, np.arange(len(p))),
            lambda p: attention_of(c)(np.arange(len(p))),
        ),
        "LongRoPE switched by the chunk length",
    ),
    (
        "phi-3-mini-128k",
        lambda c: port(
            lambda rotary, p: rule_of(c)(rotary, np.array([4096])),
            attention_of(c),
        ),
        "LongRoPE always long",
    ),
    (  # a w per position (T, pairs): each token rotated in a call of its own (mlx-lm, keras-hub)
        "phi-3-mini-128k",
        lambda c: port(
            lambda rotary, p: np.stack([rule_of(c)(rotary, np.array([q])) for q in p]),
            attention_of(c),
        ),
        "LongRoPE switched per token by its own position + 1",
    ),
    (
        DYNAMIC,
        lambda c: port(lambda rotary, p: np.stack([rule_of(c)(rotary, np.array([q])) for q in p])),
        "dynamic NTK from each token's own position + 1",
    ),
    (
        DYNAMIC,
        lambda c: port(lambda rotary, p: positional.frequencies(rotary) / 4.0 ** (16 / 14)),
        "static (keras-hub's rope_type 'dynamic')",
    ),
    ("gpt-neox-20b", lambda c: _rest_through_float32, "(24..95) rounded through float32"),
    (
        "gpt-neox-20b",
        lambda c: port(lambda rotary, p: positional.frequencies(c.head_dim), whole=True),
        "partial rotary ignored: the whole head rotated, not its first 24 dims",
    ),
    (
        "gpt-neox-20b",
        lambda c: port(lambda rotary, p: 10000.0 ** -(np.arange(0, rotary, 2) / c.head_dim)),
        "frequency exponent 2i/head_dim (96) where 2i/rotary_dim (24) is meant",
    ),
]


def _rest_through_float32(config):
    """A correct rotation whose passed-through dims come back rounded to float32 (MLX's)."""

    def f(x, positions):
        out = numpy_backend.apply_rope(x, positions, **config.rope_options())
        out[..., config.rotary_dim :] = x[..., config.rotary_dim :].astype(np.float32)
        return out

    return f


def _clamped_yarn(config, rotary):
    low, _ = positional.yarn_correction_range(rotary, config.rope_theta, config.scaling)
    w = positional.frequencies(rotary, config.rope_theta)
    ramp = np.clip((np.arange(rotary // 2) - low) / (rotary // 2 - 1 - low), 0, 1)
    return w / config.scaling["factor"] * ramp + w * (1 - ramp)


@pytest.mark.parametrize(
    "config, wrong, name", MISTAKES, ids=[m[2].split(":")[0][:40] for m in MISTAKES]
)
def test_each_rope_mistake_is_caught_and_named(config, wrong, name):
    config = configs.preset(config) if isinstance(config, str) else synthetic(**config)
    verdicts = judged("rope", wrong(config)(config), rope_options(config))
    assert {status for _, status, _ in verdicts} <= {"conforms", "differs"}, verdicts
    named = [check for check, status, detail in verdicts if status == "differs" and name in detail]
    assert named, [d for _, _, d in verdicts]


@pytest.mark.parametrize(
    "dtype, moved", [("bfloat16", "257 becomes 256"), ("float16", "2049 becomes 2048")]
)
def test_positions_rounded_to_the_dtype_are_named(dtype, moved):
    config = configs.preset("llama-3.1-8b")
    wrong = port(rule_of(config), round_positions=True)(config)
    verdicts = judged("rope", wrong, rope_options(config), only=f"long positions {dtype}")
    (detail,) = [d for _, _, d in verdicts]
    assert f"positions rounded to the input's dtype ({dtype}) before the angles" in detail
    assert moved in detail


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_different_rule_does_not_pass_a_float32_or_float16_check(dtype):
    # llama3's rotation held to the plain contract: the old bound (0.79) let it through here
    llama3 = configs.preset("llama-3.1-8b")

    def scaled(x, positions):
        return numpy_backend.apply_rope(x, positions, scaling=llama3.scaling)

    for check, status, _ in judged("rope", scaled, {}, only=f"long positions {dtype}"):
        assert status == "differs", check


# --- the embedding side ------------------------------------------------------------------


def gemma(scale_of):
    def f(token_table, token_ids):
        rows = token_table[token_ids].astype(np.float64) * scale_of(token_table)
        return rows.astype(positional.compute_dtype(token_table.dtype)).astype(token_table.dtype)

    return f


@pytest.mark.parametrize(
    "wrong, name",
    [
        (gemma(lambda t: math.sqrt(t.shape[1])), "sqrt(3072) unrounded"),
        (
            gemma(lambda t: float(np.float32(math.sqrt(t.shape[1])).astype(ml_dtypes.bfloat16))),
            "sqrt(3072) rounded to bfloat16 (55.5), not float16",
        ),
    ],
)
def test_gemma_scale_mistakes(wrong, name):
    options = {"embed_scale": configs.preset("gemma-7b").hidden_size}
    right = judged("lookup", lambda t, i: numpy_backend.ScaledWordEmbedding(t)(i), options)
    assert {s for _, s, _ in right} == {"conforms"}
    verdicts = judged("lookup", wrong, options, only="scaled")
    assert any(s == "differs" and name in d for _, s, d in verdicts), verdicts


def positions_by(rule, shift=0, **kwargs):
    def f(input_ids, attention_mask, past_length):
        found = positional.position_ids(
            input_ids, attention_mask, rule=rule, past_length=past_length, **kwargs
        )
        return found + shift

    return f


@pytest.mark.parametrize(
    "preset, wrong, name",
    [
        ("opt-125m", positions_by("opt", -2), "OPT's offset 2 missing"),
        ("opt-125m", positions_by("bart"), "OPT's padding ignored"),
        ("roberta-base", positions_by("arange"), "RoBERTa's positions from 0"),
        ("roberta-base", positions_by("arange", 2), "RoBERTa's pads not skipped"),
        ("bart-base", positions_by("arange"), "BART's offset 2 missing"),
    ],
)
def test_position_id_mistakes(preset, wrong, name):
    config = configs.preset(preset)
    options = {"position_rule": config.position_rule, "pad_token_id": config.pad_token_id}
    right = positions_by(config.position_rule, padding_idx=config.pad_token_id)
    assert {s for _, s, _ in judged("position_ids", right, options)} == {"conforms"}
    verdicts = judged("position_ids", wrong, options)
    assert any(s == "differs" and name in d for _, s, d in verdicts), verdicts


def test_bert_sum_in_another_order_is_named():
    def other_order(word, types, position, ids, type_ids, start):
        return word[ids] + (types[type_ids] + position[start : start + ids.shape[-1]])

    def bert(*arguments):
        return numpy_backend.BertEmbeddings(*arguments[:3])(*arguments[3:])

    assert {s for _, s, _ in judged("bert", bert, {"type_vocab_size": 2})} == {"conforms"}
    verdicts = judged("bert", other_order, {"type_vocab_size": 2}, only="sum bfloat16")
    assert "summed in another order: word + (type + position)" in verdicts[0][2]


# --- configs in, and the worker's view ------------------------------------------------------


def test_minilms_packaged_config_is_understood():
    needs("minilm")
    path = os.path.join(pretrained.package_dir("minilm"), "model", "config.json")
    config = configs.read(path)
    assert (config.model_type, config.type_vocab_size, config.pad_token_id) == ("bert", 2, 0)
    assert config.layer_norm_eps == 1e-12 and not config.rope


def test_smollm2s_gguf_metadata_is_a_config():
    needs("smollm2")
    path = os.path.join(pretrained.package_dir("smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf")
    config = configs.read(path)
    assert (config.head_dim, config.rope_theta, config.layout) == (64, 100000.0, "interleaved")


@pytest.mark.parametrize(
    "fields, name",
    [
        (
            {"_name_or_path": "meta-llama/Llama-3.2-1B", "model_type": "llama"},
            "meta-llama/Llama-3.2-1B",
        ),
        ({"model_type": "llama"}, "llama (PATH)"),
        ({}, "PATH"),
        # not one short printable line: passed over, never printed
        ({"_name_or_path": "a\x1b[2Jb", "model_type": "llama"}, "llama (PATH)"),
        ({"_name_or_path": "x" * 97, "model_type": "llama\n"}, "PATH"),
    ],
)
def test_a_config_json_is_named_by_its_model_not_its_folder(tmp_path, fields, name):
    path = tmp_path / "config.json"  # in a folder whose name says nothing of the model
    path.write_text(json.dumps({"head_dim": 64, **fields}))
    config = configs.read(str(path))
    assert config.name == name.replace("PATH", str(path))
    assert config.line().startswith(f"config {config.name}: RoPE")


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"rope_scaling": {"rope_type": "mrope", "mrope_section": [16, 24]}},
            "mrope_section: M-RoPE is read by the rotary modules of qwen2_vl_text",
        ),
        (
            {"model_type": "qwen2_vl", "rope_scaling": {"type": "mrope", "mrope_section": [4, 4]}},
            "mrope_section must be three positive integers",
        ),
        (
            {"rope_scaling": {"rope_type": "linear", "factor": 2.0, "finetuned": True}},
            "unexpected: ['finetuned']",
        ),
        ({"partial_rotary_factor": 0.3125}, "rotary_dim 5 must be even"),
        (
            {"model_type": "bert", "position_embedding_type": "relative_key"},
            "position_embedding_type 'relative_key'",
        ),
        (
            {"rope_parameters": {"full_attention": {"rope_theta": 1e6}}},
            (
                "rope_parameters keyed by layer type (full_attention): model_type 'llama''s rotary "
                "module rotates every layer by one rule"
            ),
        ),
        (
            {"rope_local_base_freq": 10000.0},
            "rope_local_base_freq: read by the classes of gemma3_text, gemma3n_text, t5gemma2_text, "
            "t5gemma2_decoder only, not model_type 'llama''s",
        ),
        (
            {"no_rope_layers": [1, 0]},
            "no_rope_layers: read by the classes of smollm3, llama4_text, mistral_large4_text only",
        ),
    ],
)
def test_a_field_the_kit_cannot_honour_is_refused_in_one_line(fields, message):
    with pytest.raises(UsageError) as info:
        synthetic(**fields)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_check_config_exit_two_for_a_field_it_cannot_honour(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"model_type": "llama", "head_dim": 64, "rope_scaling": {"type": "su"}})
    )
    # in this process: what compare.py prints and exits with, without a Python (and the
    # torch that transformers' config classes import) started for it
    argv = ["check", f"{TARGETS}:llama32_rope", "--kind", "rope", "--config", str(config)]
    assert compare.main(argv) == 2
    expected = (
        f"compare.py check: error: --config {config}: rope_type 'su' is not one the kit "
        "checks (linear, dynamic, yarn, longrope, llama3, proportional)"
    )
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().splitlines() == [expected]


def test_inputs_changed_in_place_differ_with_the_argument_named():
    with process.Worker({}) as worker:
        rope = runner.run(
            f"{TARGETS}:rope_in_place", "rope", only="rotation float32", worker=worker
        )
        lookup = runner.run(
            f"{TARGETS}:lookup_in_place", "lookup", only="forward float32", worker=worker
        )
        factor_8 = runner.run(
            f"{TARGETS}:llama32_rope_factor_8",
            "rope",
            options=rope_options(configs.preset("llama-3.2-1b")),
            only="long positions float32",
            worker=worker,
        )
    assert not rope.conforms and "changes its input in place: x (" in rope.checks[0].detail
    assert not lookup.conforms
    assert (
        "changes its input in place: position_table (40 of 128 elements)" in lookup.checks[0].detail
    )
    assert "llama3 with the factor hard-coded to 8" in factor_8.checks[0].detail
    assert "f(x, positions) -> rotated, x (..., T, 64)" in factor_8.contract
