"""A config.json read exactly as transformers reads it: the kit's own reader (used where
transformers is not installed) gives the Configuration transformers' config classes give, on
every preset and on every case where the two could part (a field given twice, a default of the
model type, a text_config); every field checked for type and range, naming the file and the
field; every config read through the bounded reader of regular files."""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys

import pytest

import compare
from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.configs import hf
from embedding_parity.configs.defaults import DEFAULTS
from embedding_parity.configs.presets import PRESETS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "tests", "conformance_targets", "configured.py") + ":llama32_rope"
READERS = ("kit", "transformers")
LLAMA = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}
WHERE = "--config dir/config.json"


def read(fields: dict, reader: str) -> configs.Configuration:
    return hf.from_fields(fields, "case", WHERE, reader=reader, hold=False)  # the readers alone


def both(fields: dict) -> configs.Configuration:
    """The Configuration both readers give; they must agree."""
    kit, transformers = (read(fields, reader) for reader in READERS)
    assert kit == transformers
    return kit


@pytest.mark.parametrize("name", list(PRESETS))
def test_readers_agree_on_every_preset(name):
    both(PRESETS[name]["fields"])


# Glm4vTextConfig's defaults rotate the whole head where its M-RoPE section (8, 12, 12) counts
# half of it: GLM-4.1V's file gives partial_rotary_factor 0.5 (its defaults alone are refused)
GIVEN_WITH_TYPE = {"glm4v_text": {"partial_rotary_factor": 0.5}}


@pytest.mark.parametrize("model_type", list(DEFAULTS))
def test_readers_agree_on_each_model_types_defaults(model_type):
    """A config that names only its model type: every default of the kit's table is the
    class's own (roberta's family needs a pad_token_id, which the class defaults to 1)."""
    both({"model_type": model_type, **GIVEN_WITH_TYPE.get(model_type, {})})


# (fields, what transformers' config object makes of them)
CONFLICTS = {
    "rope_scaling taken whole over rope_parameters, with the top level's theta": (
        {
            **LLAMA,
            "rope_theta": 500000.0,
            "rope_scaling": {"rope_type": "linear", "factor": 2.0},
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        },
        {"rope_theta": 500000.0, "scaling": {"rope_type": "linear", "factor": 2.0}},
    ),
    "rope_parameters' theta over the top level's": (
        {
            **LLAMA,
            "rope_theta": 500000.0,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
        },
        {"rope_theta": 10000.0, "scaling": None},
    ),
    # transformers' config object says 1024, but its rotary module standardises the dict again
    # when it is built, and the field beside the dict wins: the kit reads what the code turns by
    # (the oracle found it: tests/test_owner.py)
    "original_max_position_embeddings: the top level's over the rope dict's": (
        {
            **LLAMA,
            "max_position_embeddings": 8192,
            "original_max_position_embeddings": 2048,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 1024,
            },
        },
        {"scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}},
    ),
    "original_max_position_embeddings: Phi-3's own field over the rope dict's": (
        {
            **PRESETS["phi-3-mini-128k"]["fields"],
            "original_max_position_embeddings": 2048,
            "rope_scaling": {
                **PRESETS["phi-3-mini-128k"]["fields"]["rope_scaling"],
                "original_max_position_embeddings": 1024,
            },
        },
        {"max_position_embeddings": 131072},
    ),
    "partial_rotary_factor: the rope dict's over the top level's": (
        {
            "model_type": "phi",
            "hidden_size": 2560,
            "num_attention_heads": 32,
            "partial_rotary_factor": 0.5,
            "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25},
        },
        {"head_dim": 80, "rotary_dim": 20},
    ),
    "Phi's partial_rotary_factor defaults to 0.5": (
        {"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32},
        {"head_dim": 80, "rotary_dim": 40},
    ),
    "text_config over the top level's hidden_size and num_attention_heads": (
        {
            "model_type": "gemma3",
            "hidden_size": 64,
            "num_attention_heads": 2,
            "text_config": {
                "hidden_size": 2560,
                "num_attention_heads": 8,
                "rope_theta": 1000000.0,
                "rope_scaling": {"rope_type": "linear", "factor": 8.0},
            },
        },
        {"hidden_size": 2560, "head_dim": 256, "model_type": "gemma3_text", "rope_theta": 1e6},
    ),
    "Gemma 3 with no text_config: Gemma3TextConfig's defaults": (
        {"model_type": "gemma3", "hidden_size": 64, "num_attention_heads": 2},
        {"hidden_size": 2304, "head_dim": 256, "model_type": "gemma3_text"},
    ),
    "Gemma without hidden_size: GemmaConfig's 3072": (
        {"model_type": "gemma", "head_dim": 256},
        {"hidden_size": 3072, "embed_scale": True},
    ),
    "gpt-oss without rope fields: GptOssConfig's YaRN": (
        {"model_type": "gpt_oss"},
        {"rope_theta": 150000.0, "head_dim": 64},
    ),
    "GPT-NeoX reads rotary_emb_base and rotary_pct": (
        {"model_type": "gpt_neox", "hidden_size": 512, "num_attention_heads": 4, "rotary_pct": 0.5},
        {"head_dim": 128, "rotary_dim": 64, "rope_theta": 10000.0},
    ),
    "Qwen2.5's older 'type' key": (
        PRESETS["qwen2.5-7b"]["fields"],
        {
            "scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
            }
        },
    ),
    "DeepSeek-V3: qk_rope_head_dim, interleaved by default": (
        {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128},
        {"head_dim": 64, "layout": "interleaved"},
    ),
    "a model type transformers and the kit do not know: the file's fields only": (
        {
            "model_type": "unknown_lm",
            "hidden_size": 256,
            "num_attention_heads": 4,
            "rope_theta": 5e5,
        },
        {"head_dim": 64, "rope_theta": 500000.0},
    ),
}


@pytest.mark.parametrize("case", list(CONFLICTS))
def test_readers_agree_where_a_field_could_be_read_two_ways(case):
    fields, expected = CONFLICTS[case]
    config = both(fields)
    assert {key: getattr(config, key) for key in expected} == expected


def test_phi3_original_length_is_its_own_field():
    fields = CONFLICTS["original_max_position_embeddings: Phi-3's own field over the rope dict's"]
    assert both(fields[0]).scaling["original_max_position_embeddings"] == 2048


# (fields, the field the refusal names)
REFUSED = {
    "rope_scaling a list": ({**LLAMA, "rope_scaling": [1, 2]}, "rope_scaling"),
    "rope_scaling a string": ({**LLAMA, "rope_scaling": "linear"}, "rope_scaling"),
    "rope_parameters a list": ({**LLAMA, "rope_parameters": ["x"]}, "rope_parameters"),
    "model_type a number": ({**LLAMA, "model_type": 7}, "model_type"),
    "model_type a list": ({**LLAMA, "model_type": ["llama"]}, "model_type"),
    "text_config a string": ({"model_type": "gemma3", "text_config": "x"}, "text_config"),
    "head_dim a float": ({**LLAMA, "head_dim": 1e6}, "head_dim"),
    "head_dim over the cap": ({**LLAMA, "head_dim": 1 << 20}, "head_dim"),
    "head_dim 0": ({**LLAMA, "head_dim": 0}, "head_dim"),
    "head_dim odd": ({**LLAMA, "head_dim": 63}, "head_dim"),
    "head_dim a string": ({**LLAMA, "head_dim": "64"}, "head_dim"),
    "hidden_size a string": ({**LLAMA, "hidden_size": "256"}, "hidden_size"),
    "num_attention_heads 0": ({**LLAMA, "num_attention_heads": 0}, "num_attention_heads"),
    "rope_theta 1e-300": ({**LLAMA, "rope_theta": 1e-300}, "rope_theta"),
    "rope_theta 1": ({**LLAMA, "rope_theta": 1}, "rope_theta"),
    "rope_theta NaN": ({**LLAMA, "rope_theta": float("nan")}, "rope_theta"),
    "rope_theta a string": ({**LLAMA, "rope_theta": "1e4"}, "rope_theta"),
    "partial_rotary_factor a string": (
        {**LLAMA, "partial_rotary_factor": "0.4" * 1000},
        "partial_rotary_factor",
    ),
    "partial_rotary_factor 0": ({**LLAMA, "partial_rotary_factor": 0}, "partial_rotary_factor"),
    "partial_rotary_factor 1.5": ({**LLAMA, "partial_rotary_factor": 1.5}, "partial_rotary_factor"),
    "rotary_dim odd": ({**LLAMA, "rotary_dim": 7}, "rotary_dim"),
    "rope_interleave a string": ({**LLAMA, "rope_interleave": "yes"}, "rope_interleave"),
    "factor a string": (
        {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": "2"}},
        "factor",
    ),
    "factor negative": (
        {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": -2.0}},
        "factor",
    ),
    "factor past float64": (
        {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 10**400}},
        "factor",
    ),
    "rope_theta past float64": ({**LLAMA, "rope_theta": 10**400}, "rope_theta"),
    "original_max_position_embeddings a string": (
        {
            **LLAMA,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": "1024",
            },
        },
        "original_max_position_embeddings",
    ),
    "max_position_embeddings negative": (
        {**LLAMA, "max_position_embeddings": -1},
        "max_position_embeddings",
    ),
    "type_vocab_size 0": ({"model_type": "bert", "type_vocab_size": 0}, "type_vocab_size"),
    "type_vocab_size over the cap": (
        {"model_type": "bert", "type_vocab_size": 10**9},
        "type_vocab_size",
    ),
    "type_vocab_size a string": ({"model_type": "bert", "type_vocab_size": "2"}, "type_vocab_size"),
    "pad_token_id negative": ({"model_type": "bert", "pad_token_id": -1}, "pad_token_id"),
    "pad_token_id past int32's positions": (
        {"model_type": "roberta", "pad_token_id": 2**31 - 1},
        "pad_token_id",
    ),
    "pad_token_id a float": ({"model_type": "opt", "pad_token_id": 1.5}, "pad_token_id"),
    "layer_norm_eps a string": ({"model_type": "bert", "layer_norm_eps": "x"}, "layer_norm_eps"),
    "rope_type unknown": ({**LLAMA, "rope_scaling": {"rope_type": "ntk-by-parts"}}, "rope_type"),
    # transformers builds a list per layer as it reads: 30 million layers ran for minutes
    "num_hidden_layers past any model": ({**LLAMA, "num_hidden_layers": 30_000_000}, "layers"),
    # transformers 5.24 refuses a YaRN dict without its factor: the kit derived one
    "yarn without its factor": (
        {
            **LLAMA,
            "max_position_embeddings": 32768,
            "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 4096},
        },
        "factor",
    ),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case", list(REFUSED))
def test_every_field_is_checked_naming_the_file_and_the_field(case, reader):
    fields, field = REFUSED[case]
    with pytest.raises(UsageError) as refused:
        read(fields, reader)
    message = str(refused.value)
    assert message.startswith(WHERE) and field in message, message
    assert "\n" not in message and len(message) < 400, message


@pytest.mark.parametrize(
    "model_type, theirs",
    [("qwen3", {"head_dim": 128}), ("glm", {"rotary_dim": 64}), ("mistral", {})],
)
def test_a_model_type_without_known_defaults_is_read_by_transformers_alone(model_type, theirs):
    """Their classes' defaults decide what the file leaves out (Qwen3's head_dim is 128, not
    hidden_size / heads; GLM rotates half its head): the kit's own reader cannot know them."""
    fields = {"model_type": model_type, "hidden_size": 512, "num_attention_heads": 4}
    config = read(fields, "transformers")
    assert {key: getattr(config, key) for key in theirs} == theirs
    with pytest.raises(UsageError, match=f"model_type '{model_type}': transformers' {model_type}"):
        read(fields, "kit")


def test_the_kit_knows_which_model_types_transformers_has_a_class_for():
    from transformers import CONFIG_MAPPING

    from embedding_parity.configs.transformers_types import KNOWN_TO_TRANSFORMERS

    assert set(CONFIG_MAPPING.keys()) == KNOWN_TO_TRANSFORMERS


def test_a_broken_transformers_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # its import raises ImportError
    with pytest.raises(UsageError, match="transformers is installed but cannot be imported"):
        read(LLAMA, "transformers")


def test_transformers_keeps_its_logging_to_itself(caplog, capsys):
    """A factor below 1 makes transformers log a warning; the kit's reading prints nothing."""
    fields = {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 0.5}}
    with caplog.at_level(logging.DEBUG):
        config = read(fields, "transformers")
    assert config.scaling == {"rope_type": "linear", "factor": 0.5}
    assert caplog.records == []
    assert capsys.readouterr() == ("", "")


def test_a_deeply_nested_config_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(UsageError, match="nested too deeply"):
        configs.read(str(path))


def test_a_config_nested_past_a_few_levels_is_refused(tmp_path):
    """Under Python's recursion limit, but deep enough that copying it would reach it."""
    path = tmp_path / "config.json"
    path.write_text('{"rope_scaling": {"factor": ' + "[" * 600 + "]" * 600 + "}}")
    with pytest.raises(UsageError, match="nested over"):
        configs.read(str(path))


def test_a_config_over_the_size_cap_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "padding": "x" * configs.MOST_CONFIG_BYTES}))
    with pytest.raises(UsageError, match="over"):
        configs.read(str(path))


def cli(*arguments: str) -> tuple[int, str]:
    """compare.py's exit status and what it printed to stderr, run as a Python of its own:
    for a file whose reading, were it to regress, would never end (the timeout ends it)."""
    done = subprocess.run(
        [sys.executable, "compare.py", *arguments],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stderr


def here(capsys, *arguments: str) -> tuple[int, str]:
    """The same in this process (compare.main): no Python, torch or JAX started for it."""
    code = compare.main(list(arguments))
    return code, capsys.readouterr().err


def refused_in_one_line(done: tuple[int, str], *words: str) -> None:
    code, stderr = done
    assert code == 2, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and all(word in lines[0] for word in words), lines


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "folder"])
def test_check_refuses_a_config_that_is_not_a_regular_file(tmp_path, capsys, special):
    path = str(tmp_path / "config.json")
    if special == "fifo":
        os.mkfifo(path)  # nobody writes it: reading it would wait for ever
    elif special == "folder":
        os.mkdir(path)
    else:
        path = special  # read to its end, it has none
    run = functools.partial(here, capsys) if special == "folder" else cli
    done = run("check", TARGET, "--kind", "rope", "--config", path)
    refused_in_one_line(done, f"--config {path}")


@pytest.mark.parametrize(
    "fields, field",
    [
        ({**LLAMA, "head_dim": 1e6}, "head_dim"),
        ({**LLAMA, "head_dim": 0}, "head_dim"),
        ({**LLAMA, "rope_scaling": [1]}, "rope_scaling"),
        ({**LLAMA, "model_type": 3}, "model_type"),
    ],
    ids=["head_dim 1e6", "head_dim 0", "rope_scaling a list", "model_type a number"],
)
def test_check_refuses_a_bad_field_with_exit_two(tmp_path, capsys, fields, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    done = here(capsys, "check", TARGET, "--kind", "rope", "--config", str(path))
    refused_in_one_line(done, f"--config {path}", field)


@pytest.mark.parametrize(
    "fields, field",
    [
        ({**LLAMA, "hidden_size": "DIGITS"}, "hidden_size"),
        (
            {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": "DIGITS"}},
            "rope_scaling factor",
        ),
        ({**LLAMA, "layer_types": ["full_attention", "-DIGITS"]}, "layer_types[1]"),
    ],
)
def test_an_integer_longer_than_python_converts_is_named_with_its_field(
    tmp_path, capsys, fields, field
):
    path = tmp_path / "config.json"
    digits = "9" * (sys.get_int_max_str_digits() + 700)  # json.loads alone: a bare ValueError
    text = json.dumps(fields).replace('"-DIGITS"', f"-{digits}").replace('"DIGITS"', digits)
    path.write_text(text)
    done = here(capsys, "check", TARGET, "--kind", "rope", "--config", str(path))
    refused_in_one_line(done, f"--config {path}: {field} is an integer of {len(digits)} digits")


@pytest.mark.parametrize("special", ["fifo", "folder"])
def test_an_unreadable_tokenizer_beside_the_config_is_named_not_passed_over(
    tmp_path, capsys, special
):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "vocab_size": 12}))
    tokenizer = tmp_path / "tokenizer.json"
    os.mkfifo(tokenizer) if special == "fifo" else os.mkdir(tokenizer)
    done = here(capsys, "check", TARGET, "--kind", "lookup", "--config", str(path))
    refused_in_one_line(done, f"{tokenizer} is not a regular file", "tokenizer.json, read for")


@pytest.mark.parametrize("base", ["500000", "10000"])  # 10000: the default, given
@pytest.mark.parametrize("flag", ["--model", "--config"])
def test_check_refuses_a_base_beside_a_config(tmp_path, capsys, flag, base):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    config = "llama-3.2-1b" if flag == "--model" else str(path)
    done = here(capsys, "check", TARGET, "--kind", "rope", flag, config, "--base", base)
    refused_in_one_line(done, "--base comes from the config (rope_theta)")


def test_seed_refuses_a_base_that_overflows_the_frequencies(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "rope_theta": 1e-300}))
    done = here(capsys, "seed", "--config", str(path), "--out", str(tmp_path / "seed.png"))
    refused_in_one_line(done, f"--config {path}", "rope_theta")


def test_the_kit_knows_the_classes_that_rotate_by_layer_type():
    """layers.KEYED_ROPE (rope_parameters keyed by layer type is read) holds every transformers
    class whose default rope_parameters is keyed by its layer types, and LAYER_HEAD_DIM every
    class that takes a global_head_dim: a file the kit refuses for these is one its owner
    reads."""
    import glob
    import re

    import transformers
    from transformers import CONFIG_MAPPING

    from embedding_parity.configs import layers

    keyed, widened = set(), set()
    root = os.path.join(os.path.dirname(transformers.__file__), "models")
    for path in glob.glob(os.path.join(root, "*", "configuration_*.py")):
        with open(path, encoding="utf-8") as file:
            text = file.read()
        types = re.findall(r'model_type = "([^"]+)"', text)
        if 'pop("global_head_dim"' in text:
            widened |= {t for t in types if t.endswith("_text")}
        if "layer_types" not in text or "rope_parameters" not in text:
            continue
        for model_type in types:
            try:
                config = CONFIG_MAPPING[model_type]()
            except Exception:  # noqa: BLE001, S112 - a class that needs arguments keys nothing
                continue
            rope = getattr(config, "rope_parameters", None) or {}
            named = getattr(config, "layer_types", None) or []
            if any(isinstance(v, dict) and k in named for k, v in rope.items()):
                keyed.add(model_type)
    assert keyed and keyed <= set(layers.KEYED_ROPE), sorted(keyed - set(layers.KEYED_ROPE))
    assert widened == set(layers.LAYER_HEAD_DIM)


@pytest.mark.parametrize(
    "fields, scale",
    [
        ({"model_type": "granite", "embedding_multiplier": 12.0}, ("granite", 12.0)),
        ({"model_type": "granitemoehybrid", "embedding_multiplier": 12.0}, ("granite", 12.0)),
        ({"model_type": "granite"}, ("granite", 1.0)),  # GraniteConfig's default
        ({"model_type": "falcon_h1", "embedding_multiplier": 32**0.5}, ("falcon_h1", 32**0.5)),
        ({"model_type": "minicpm3"}, ("minicpm", 12.0)),  # MiniCPM3Config's scale_emb
        ({"model_type": "gemma3_text", "hidden_size": 2304}, ("gemma", 48.0)),
        ({"model_type": "llama"}, None),
    ],
)
def test_the_input_scale_is_read_as_transformers_reads_it(fields, scale):
    """The number a model scales its input embeddings by (embedding_multiplier, scale_emb,
    sqrt(hidden_size)) from transformers' config object, its class's default where the file
    leaves it out; the rule (backends.positional.SCALE_RULES) by the model type."""
    config = read(fields, "transformers")
    assert config.embedding_scale == scale
    if scale:
        rule, value = scale
        expected = {"embedding_scale": {"rule": rule, "value": value}}
        assert config.options("scaled_inputs") == expected


def test_a_scale_that_is_not_a_positive_number_is_refused():
    with pytest.raises(UsageError, match="embedding_multiplier -2.0 must be positive"):
        read({"model_type": "granite", "embedding_multiplier": -2.0}, "transformers")
