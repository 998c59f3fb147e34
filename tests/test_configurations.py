"""The configurations models ship, in the library: scaled and partial RoPE, the position-id
rules, Gemma's scale and BERT's three-term sum, on every backend and against Hugging Face's
own code (transformers, installed with the conformance extra) where that defines the rule.

Rotations are held to ``positional.rope_bound``, whose docstring derives it per element; the
integer rules, Gemma's product and BERT's sum are exact, so they are compared bit for bit.
"""

import math

import ml_dtypes
import numpy as np
import pytest
import torch
from numpy.testing import assert_array_equal

import backends
from backends import positional

SCALINGS = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 64},
    "yarn": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64},
    "yarn (DeepSeek's mscale)": {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 64,
        "mscale": 1.0,
        "mscale_all_dim": 0.707,
        "beta_fast": 32,
        "beta_slow": 1,
    },
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0, 1.1, 1.3, 2.0],
        "long_factor": [1.0, 2.0, 4.0, 16.0],
        "original_max_position_embeddings": 64,
        "max_position_embeddings": 2048,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
}
POSITIONS = np.array([0, 1, 7, 63, 64, 65, 255, 1000, 4095])


def bf16(values):
    return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("name", list(SCALINGS))
@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_every_rule_and_partial_rotary_within_the_bound(backend, name, dtype, layout):
    # A 12-wide head rotating its first 8 dims: the last 4 pass through, bit for bit.
    x = np.random.default_rng(1).standard_normal((2, len(POSITIONS), 12))
    x = x.astype(backends.DTYPES[dtype])
    options = {"layout": layout, "scaling": SCALINGS[name], "rotary_dim": 8}
    out = backend.to_numpy(backend.apply_rope(x, POSITIONS, **options))
    assert out.dtype == x.dtype
    assert_array_equal(out[..., 8:], x[..., 8:])
    error = np.abs(out.astype(np.float64) - positional.apply_rope(x, POSITIONS, **options))
    bound = positional.rope_bound(x, POSITIONS, dtype=dtype, **options)
    assert (error <= bound).all(), (
        f"largest error / bound {float((error / bound)[..., :8].max()):.3g}"
    )


def _hf_config(name, head_dim=8, rotary=1.0):
    from transformers import LlamaConfig

    rope = {"rope_type": "default", **(SCALINGS[name] or {}), "rope_theta": 10000.0}
    rope.pop("max_position_embeddings", None)
    rope["partial_rotary_factor"] = rotary
    return LlamaConfig(
        hidden_size=head_dim * 2,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=(SCALINGS[name] or {}).get("max_position_embeddings", 64),
        rope_parameters=rope,
    )


@pytest.mark.parametrize("name", [n for n in SCALINGS if n != "default"])
@pytest.mark.parametrize("seq_len", [64, 4096])
def test_the_rules_are_hugging_faces(name, seq_len):
    # transformers computes each rule in float32: ours, in float64, is within a few of its ulps.
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = _hf_config(name)
    kind = SCALINGS[name]["rope_type"]
    theirs, their_factor = ROPE_INIT_FUNCTIONS[kind](config, "cpu", seq_len=seq_len)
    ours, our_factor = positional.rope_parameters(8, 10000.0, SCALINGS[name], seq_len)
    np.testing.assert_allclose(theirs.double().numpy(), ours, rtol=16 * 2**-23)
    assert math.isclose(float(their_factor), our_factor, rel_tol=1e-12)


def test_the_named_rules_do_what_they_say():
    w = positional.frequencies(8)
    # llama3 keeps the short wavelengths, slows the long ones by factor 32
    llama3 = positional.frequencies(8, scaling=SCALINGS["llama3"])
    assert llama3[0] == w[0] and math.isclose(llama3[-1], w[-1] / 32, rel_tol=1e-15)
    # YaRN's attention factor 0.1 ln(8) + 1, and DeepSeek's ratio of two mscales
    assert positional.rope_parameters(8, scaling=SCALINGS["yarn"])[1] == 0.1 * math.log(8) + 1
    ratio = (0.1 * math.log(40) + 1) / (0.1 * 0.707 * math.log(40) + 1)
    deepseek = positional.rope_parameters(8, scaling=SCALINGS["yarn (DeepSeek's mscale)"])[1]
    assert math.isclose(deepseek, ratio, rel_tol=1e-15)
    # dynamic and longrope switch on max(positions) + 1, not on how many positions there are
    short = positional.rope_parameters(8, scaling=SCALINGS["longrope"], seq_len=64)[0]
    long = positional.rope_parameters(8, scaling=SCALINGS["longrope"], seq_len=65)[0]
    assert_array_equal(short, w / [1.0, 1.1, 1.3, 2.0])
    assert_array_equal(long, w / [1.0, 2.0, 4.0, 16.0])
    assert_array_equal(positional.frequencies(8, scaling=SCALINGS["dynamic"], seq_len=64), w)


# --- position ids ------------------------------------------------------------------------

IDS = np.array([[1, 1, 1, 5, 6, 7], [4, 5, 6, 7, 8, 9]])  # row 0 left-padded (pad id 1)


@pytest.mark.parametrize("past", [0, 3])
def test_position_id_rules_are_transformers_own(backend, past):
    from transformers.models.opt.modeling_opt import OPTLearnedPositionalEmbedding
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    mask = np.concatenate([np.ones((2, past), np.int64), (IDS != 1).astype(np.int64)], axis=1)
    # OPT's layer returns rows of its table: a table whose row i holds i reads back the ids.
    opt = OPTLearnedPositionalEmbedding(64, 1)
    opt.weight.data = torch.arange(66, dtype=torch.float64)[:, None]
    theirs = {
        "opt": opt(torch.from_numpy(mask), past).squeeze(-1).long().numpy(),
        "roberta": RobertaEmbeddings.create_position_ids_from_input_ids(
            torch.from_numpy(IDS), 1, past
        ).numpy(),
        "bart": np.broadcast_to(np.arange(past, past + 6) + 2, IDS.shape),
        "arange": np.broadcast_to(np.arange(past, past + 6), IDS.shape),
    }
    for rule, expected in theirs.items():
        ours = positional.position_ids(IDS, mask, rule=rule, padding_idx=1, past_length=past)
        assert_array_equal(ours, expected, err_msg=rule)
        native = backend.position_ids(IDS, mask, rule=rule, padding_idx=1, past_length=past)
        assert_array_equal(backend.to_numpy(native), expected, err_msg=rule)
    assert theirs["opt"][0, 3] == theirs["roberta"][0, 3] == 2 + past  # the first real token


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"rule": "opt"}, ValueError, "the opt rule needs attention_mask"),
        ({"rule": "roberta"}, ValueError, "the roberta rule needs padding_idx"),
        ({"rule": "t5"}, ValueError, "unknown position-id rule 't5'"),
        ({"rule": "arange", "past_length": -1}, ValueError, "past_length must be at least 0"),
        (
            {"rule": "opt", "attention_mask": np.ones((2, 5), np.int64)},
            ValueError,
            "attention_mask must have shape (B, past_length + T) = (2, 6)",
        ),
    ],
)
def test_bad_position_id_arguments(backend, kwargs, error, message):
    with pytest.raises(error) as info:
        backend.position_ids(IDS, **kwargs)
    assert message in str(info.value)


# --- Gemma's scale -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_gemma_scale_is_rounded_first_on_every_backend(backend, dtype):
    from transformers.models.gemma.modeling_gemma import GemmaTextScaledWordEmbedding

    table = np.random.default_rng(2).standard_normal((40, 3072)).astype(backends.DTYPES[dtype])
    ids = np.array([[3, 1, 4], [1, 5, 9]])
    expected = positional.scaled_embedding(table, ids)
    assert_array_equal(backend.to_numpy(backend.ScaledWordEmbedding(table)(ids)), expected)
    theirs = GemmaTextScaledWordEmbedding(40, 3072, 0, embed_scale=3072**0.5)
    theirs.weight.data = backends.get("torch").ScaledWordEmbedding(table).weight.data
    got = theirs(torch.from_numpy(ids)).detach()
    assert_array_equal(backends.get("torch").to_numpy(got), expected)


def test_gemma_scale_rounded_to_bfloat16_is_55_5():
    assert positional.embedding_scale(3072, "bfloat16") == 55.5
    # multiplying by the exact sqrt instead changes many bfloat16 products
    table = bf16(np.random.default_rng(3).standard_normal((64, 3072)))
    exact = (table.astype(np.float64) * math.sqrt(3072)).astype(np.float32)
    exact = exact.astype(ml_dtypes.bfloat16)
    ours = positional.scaled_embedding(table, np.arange(64))
    assert (ours != exact).mean() > 0.1


# --- BERT --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bert_sum_is_transformers_own_bit_for_bit(backend, dtype):
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    rng = np.random.default_rng(4)
    dt = backends.DTYPES[dtype]
    word, types, positions = (rng.standard_normal((n, 32)).astype(dt) for n in (50, 2, 16))
    ids, type_ids = rng.integers(0, 50, (2, 6)), rng.integers(0, 2, (2, 6))
    expected = positional.bert_embeddings(word, types, positions, ids, type_ids)
    ours = backend.BertEmbeddings(word, types, positions)(ids, type_ids)
    assert_array_equal(backend.to_numpy(ours), expected)
    config = BertConfig(vocab_size=50, hidden_size=32, max_position_embeddings=16)
    theirs = BertEmbeddings(config).eval().to(getattr(torch, dtype))
    torch_tables = backends.get("torch").BertEmbeddings(word, types, positions)
    for name in ("word_embeddings", "token_type_embeddings", "position_embeddings"):
        getattr(theirs, name).weight.data = getattr(torch_tables, name).weight.data
    theirs.LayerNorm = torch.nn.Identity()
    got = theirs(torch.from_numpy(ids), torch.from_numpy(type_ids)).detach()
    assert_array_equal(backends.get("torch").to_numpy(got), expected)


def test_bert_layer_norm_within_a_float32_reduction(backend):
    rng = np.random.default_rng(5)
    word, types, positions = (rng.standard_normal((n, 32)).astype(np.float32) for n in (9, 2, 8))
    gamma, beta = rng.standard_normal(32).astype(np.float32), np.zeros(32, np.float32)
    ids, type_ids = np.arange(8)[None], np.zeros((1, 8), np.int64)
    norm = (gamma, beta, 1e-12)
    expected = positional.bert_embeddings(word, types, positions, ids, type_ids, layer_norm=norm)
    ours = backend.BertEmbeddings(word, types, positions, layer_norm=norm)(ids, type_ids)
    # mean and variance over 32 values in float32: each within 32 eps of their magnitude, so
    # the normalised value within about 64 eps * |gamma| (|x - mean| / sigma is at most sqrt 32).
    bound = 64 * 2**-23 * np.abs(gamma).max() * math.sqrt(32)
    assert np.abs(backend.to_numpy(ours).astype(np.float64) - expected).max() <= bound


def test_bad_token_type_id_is_an_index_error_everywhere(backend):
    tables = [np.zeros((n, 4), np.float32) for n in (10, 2, 8)]
    with pytest.raises(IndexError, match=r"token type id 2 at token_type_ids\[0, 1\]"):
        backend.BertEmbeddings(*tables)(np.array([[1, 2]]), np.array([[0, 2]]))
    with pytest.raises(IndexError, match="token id 10"):
        backend.ScaledWordEmbedding(tables[0])(np.array([10]))


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_every_backends_table_within_the_table_bound(backend, dtype):
    layer = backend.TokenPositionEmbedding(
        np.zeros((4, 16), backends.DTYPES[dtype]), positions="sinusoidal", max_seq_len=4096
    )
    table = backend.to_numpy(layer.position_embeddings(0, 4096)).astype(np.float64)
    error = np.abs(table - positional.sinusoidal_table(4096, 16))
    ratio = float((error / positional.table_bound(4096, 16, dtype=dtype)).max())
    assert ratio <= 1
    if dtype == "float32":  # teeth: a correct float32 table uses a real share of it
        assert ratio > 0.05


def test_the_tutorials_exp_form_is_within_the_table_bound_and_its_mistakes_are_not():
    # PyTorch's tutorial forms w as exp(2k * (-ln(base) / dim)) in float32, the form the bound's
    # |ln w| c term is for; a float64 table from float32 angles, or base 1e4 read as 1e5, is not.
    positions = np.arange(131072, dtype=np.float32)[:, None]
    w = np.exp(np.arange(0, 16, 2, dtype=np.float32) * np.float32(-math.log(10000.0) / 16))
    angles = positions * w
    table = np.empty((131072, 16), np.float32)
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    reference = positional.sinusoidal_table(131072, 16)
    bound = positional.table_bound(131072, 16, dtype="float32")
    ratio = float((np.abs(table - reference) / bound).max())
    assert 0.05 < ratio <= 1
    as_float64 = table.astype(np.float64)
    assert (
        np.abs(as_float64 - reference) > positional.table_bound(131072, 16, dtype="float64")
    ).any()
    other = positional.sinusoidal_table(131072, 16, base=100000.0)
    assert (np.abs(other - reference) > bound).any()


def test_the_phase_bound_is_the_value_bound_over_the_magnitude():
    # At each position, the bound on the angle read back is the largest pair's value bound
    # divided by |z|, with |a| + |b| at its largest, sqrt(2) |z|.
    positions = np.array([0, 1, 100, 65537])
    x = np.tile([1.0, 1.0], (len(positions), 8)).reshape(len(positions), 16) / math.sqrt(2)
    value = positional.rope_bound(x, positions, dtype="float32", layout="interleaved")
    phase = positional.phase_bound(positions, 16, dtype="float32")
    np.testing.assert_allclose(phase, value.max(axis=1), rtol=1e-12)


@pytest.fixture(scope="module")
def minilm():
    """MiniLM's packaged embedding weights (a BERT), and transformers' BertEmbeddings built
    from its packaged config.json with them: its sum before the LayerNorm, and after it."""
    import os

    from safetensors.numpy import load_file
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    from backends import pretrained

    folder = os.path.join(pretrained.package_dir("minilm"), "model")
    weights = load_file(os.path.join(folder, "model.safetensors"))
    names = ("word_embeddings", "token_type_embeddings", "position_embeddings")
    tables = [weights[f"embeddings.{name}.weight"] for name in names]
    gamma, beta = weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"]
    config = BertConfig.from_json_file(os.path.join(folder, "config.json"))
    ids = np.array([[101, 2054, 2003, 1037, 7861, 102, 2009, 102]])  # [CLS] what is a ... [SEP]
    type_ids = np.array([[0, 0, 0, 0, 0, 0, 1, 1]])
    theirs = BertEmbeddings(config).eval()
    with torch.no_grad():
        for name, table in zip(names, tables, strict=True):
            getattr(theirs, name).weight.copy_(torch.from_numpy(table))
        theirs.LayerNorm.weight.copy_(torch.from_numpy(gamma))
        theirs.LayerNorm.bias.copy_(torch.from_numpy(beta))
        normed = theirs(torch.from_numpy(ids), torch.from_numpy(type_ids)).numpy()
        theirs.LayerNorm = torch.nn.Identity()
        summed = theirs(torch.from_numpy(ids), torch.from_numpy(type_ids)).numpy()
    norm = (gamma, beta, config.layer_norm_eps)
    return tables, norm, ids, type_ids, summed, normed


def test_minilms_own_embeddings_are_transformers_bert_embeddings(backend, minilm):
    # The sum before the LayerNorm bit for bit, transformers' and every backend's; with MiniLM's
    # LayerNorm, both within the float32 reduction's bound of the float64 reference.
    tables, norm, ids, type_ids, summed, normed = minilm
    expected = positional.bert_embeddings(*tables, ids, type_ids)
    assert_array_equal(summed, expected)
    assert_array_equal(backend.to_numpy(backend.BertEmbeddings(*tables)(ids, type_ids)), expected)
    reference = positional.bert_embeddings(*tables, ids, type_ids, layer_norm=norm)
    # the bound of test_bert_layer_norm_within_a_float32_reduction, over MiniLM's 384 dims
    bound = 2 * 384 * 2**-23 * np.abs(norm[0]).max() * math.sqrt(384)
    ours = backend.to_numpy(backend.BertEmbeddings(*tables, layer_norm=norm)(ids, type_ids))
    for found in (ours, normed):
        assert np.abs(found.astype(np.float64) - reference).max() <= bound
