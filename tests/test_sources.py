"""The sources a port is held to (``adapters.sources``): each is the library's own code at any
configuration the kit understands, judged here in-process on the kinds' own cases. Where a
source departs from the float64 contract, the test says how, as it really does."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from numpy.testing import assert_array_equal

from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.conformance import frameworks
from embedding_parity.conformance.adapters import sources
from embedding_parity.conformance.kinds import KINDS, Outcome

# The second tier (make conformance-test): transformers' and torchtune's own code, from the
# conformance extra.
pytestmark = pytest.mark.matrix


def arguments(kind: str, case) -> list:
    return [frameworks.to_framework(a, "torch") for a in KINDS[kind].arguments(case.params)]


def result(returned) -> np.ndarray:
    if isinstance(returned, tuple):  # q and k rotated: read back stacked, as the worker does
        return np.stack([frameworks.to_numpy(r) for r in returned])
    return frameworks.to_numpy(returned)


def verdicts(source: str, kind: str, options: dict) -> dict:
    """{(check, label): verdict} of every case of ``kind`` at ``options``, called in-process."""
    f = sources.make(source, kind, options)
    found = {}
    for case in KINDS[kind].cases(options):
        try:
            outcome = Outcome(array=result(f(*arguments(kind, case))))
        except Exception as error:  # noqa: BLE001 - a bad id's error is the source's answer
            outcome = Outcome(raised=f"{type(error).__name__}: {error}")
        found[case.check, case.label] = KINDS[kind].judge(case, outcome)
    return found


def options(kind: str, preset: str | None) -> dict:
    return configs.preset(preset).options(kind) if preset else {}


def test_every_source_is_described_in_one_line():
    assert {"hf", "torchtune"} <= set(sources.SOURCES)
    assert all("\n" not in line for line in sources.SOURCES.values())


@pytest.mark.parametrize(
    "preset", ["llama-3.2-1b", "gpt-neox-20b", "phi-3-mini-128k", "gpt-j-6b", None]
)
def test_hf_rope_conforms_in_float32_and_is_float32_at_float64(preset):
    assert_rotated_in_float32(verdicts("hf", "rope", options("rope", preset)))


def assert_rotated_in_float32(found: dict) -> None:
    # LlamaRotaryEmbedding forms its angles in float32 whatever x's dtype (the matrix's finding)
    for (check, _), verdict in found.items():
        if check.endswith("float64"):
            assert "computed in float32" in verdict.detail, (check, verdict)
        else:
            assert verdict.status == "conforms", (check, verdict)


def test_hf_rope_at_deepseek_v3_lays_its_interleaved_pairs_out_half():
    # apply_rotary_pos_emb_interleave: q . k is unchanged, the dims come out reordered
    for (check, _), verdict in verdicts("hf", "rope", options("rope", "deepseek-v3")).items():
        assert verdict.status == "differs", (check, verdict)
        assert "interleaved pairs in, the half layout out" in verdict.detail, (check, verdict)


def test_hf_rope_is_the_matrix_row_bit_for_bit():
    from embedding_parity.conformance.adapters import transformers_configured

    at = options("rope", "llama-3.2-1b")
    ours = sources.make("hf", "rope", at)
    for case in KINDS["rope"].cases(at):
        x, positions = arguments("rope", case)
        assert_array_equal(
            frameworks.to_numpy(ours(x, positions)),
            frameworks.to_numpy(transformers_configured.llama_3_2_1b(x, positions)),
        )


@pytest.mark.parametrize("call", [{"batched": True}, {"qk": True}, {"head_dim": 64}])
def test_hf_rope_takes_the_call_a_port_makes(call):
    # positions (B, T) with x (B, H, T, d); f(q, k, positions); a wider textbook head
    assert_rotated_in_float32(verdicts("hf", "rope", call))


@pytest.mark.parametrize("source", ["hf", "torchtune"])
def test_a_batch_of_position_rows_is_each_row_rotated(source):
    f = sources.make(source, "rope", options("rope", "llama-3.2-1b"))
    x = torch.randn(2, 3, 5, 64, generator=torch.Generator().manual_seed(0))  # (B, H, T, d)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])  # (B, T)
    rotated = f(x, positions)
    for row in range(2):
        assert_array_equal(rotated[row].numpy(), f(x[row], positions[row]).numpy())


@pytest.mark.parametrize("source", ["hf", "torchtune"])
def test_q_and_k_are_each_rotated_as_x(source):
    x, positions = torch.randn(3, 16, 16), torch.arange(16)
    q, k = sources.make(source, "rope", {"qk": True})(x, 2 * x, positions)
    alone = sources.make(source, "rope", {})(x, positions)
    assert_array_equal(q.numpy(), alone.numpy())
    assert_array_equal(k.numpy(), sources.make(source, "rope", {})(2 * x, positions).numpy())


@pytest.mark.parametrize("preset", [None, "gemma-7b"])
def test_hf_lookup_is_bit_identical_and_raises_on_bad_ids(preset):
    found = verdicts("hf", "lookup", options("lookup", preset))
    assert all(v.status == "conforms" for v in found.values()), found
    bad = [v for (check, _), v in found.items() if check.startswith("bad id")]
    assert bad and all(v.detail.startswith("raises") for v in bad), bad


@pytest.mark.parametrize("preset", ["llama-3.2-1b", "opt-125m", "roberta-base", "bart-base"])
def test_hf_position_ids_follow_the_configs_rule(preset):
    found = verdicts("hf", "position_ids", options("position_ids", preset))
    assert all(v.status == "conforms" for v in found.values()), found


def test_hf_bert_is_bert_embeddings_bit_for_bit():
    from tests.conftest import needs

    needs("minilm")
    found = verdicts("hf", "bert", options("bert", "bert-base-uncased"))
    assert all(v.status == "conforms" for v in found.values()), found


@pytest.mark.parametrize("preset", [None, "llama-3.2-1b"])
def test_torchtune_rope_rotates_interleaved_pairs(preset):
    # RotaryPositionalEmbeddings and Llama3ScaledRoPE pair (2i, 2i+1): torchtune permutes
    # Hugging Face's checkpoints instead (the matrix's finding)
    for (check, _), verdict in verdicts("torchtune", "rope", options("rope", preset)).items():
        assert verdict.status == "differs", (check, verdict)
        assert "interleaved layout" in verdict.detail, (check, verdict)


def test_torchtune_rope_conforms_where_the_config_pairs_interleaved():
    rope = {"head_dim": 32, "base": 10000.0, "layout": "interleaved", "scaling": None}
    found = verdicts("torchtune", "rope", {"rope": {**rope, "rotary_dim": None}})
    float32 = [v for (check, _), v in found.items() if check.endswith("float32")]
    assert float32 and all(v.status == "conforms" for v in float32), found


def test_torchtune_gemma_lookup_rounds_the_scale_from_float64():
    # GemmaNormEmbeddings: torch.tensor(dim**0.5, dtype=x.dtype), not through float32 as
    # transformers' buffer: the same in float32 and below, the exact sqrt in float64
    found = verdicts("torchtune", "lookup", options("lookup", "gemma-7b"))
    for (check, _), verdict in found.items():
        if check.endswith("float64"):
            assert "sqrt(3072) as float64's 55.4256258: the rule of transformers before 5.4" in (
                verdict.detail
            ), (check, verdict)
        else:
            assert verdict.status == "conforms", (check, verdict)


@pytest.mark.parametrize(
    ("source", "kind", "preset", "words"),
    [
        ("torchtune", "position_ids", "opt-125m", "torchtune has no position_ids"),
        ("torchtune", "rope", "gpt-neox-20b", "not the first 24 of 96 dims"),
        ("torchtune", "rope", "qwen2.5-7b", "torchtune has no yarn rule"),
        ("torchtune", "lookup", None, "it has Gemma's scaled lookup"),
        ("hf", "sinusoidal", None, "hf has no sinusoidal"),
        ("keras", "rope", None, "the sources are hf, torchtune"),
    ],
)
def test_a_piece_a_source_lacks_is_refused_in_one_line(source, kind, preset, words):
    with pytest.raises(UsageError) as refused:
        sources.make(source, kind, options(kind, preset))
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_naming_the_sources_imports_no_framework():
    code = (
        "import sys; from embedding_parity.conformance.adapters import sources; "
        "print(sorted({'torch', 'transformers', 'jax'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_case_sees_another_cases_cache():
    # a fresh module per call: a long call first must not change a short one after it
    f = sources.make("hf", "rope", options("rope", "phi-3-mini-128k"))
    x = torch.ones(1, 4, 96)
    short = f(x, torch.arange(4)).numpy()
    f(x, torch.tensor([0, 1, 2, 131071]))
    assert_array_equal(f(x, torch.arange(4)).numpy(), short)
    assert not np.array_equal(f(x, torch.tensor([0, 1, 2, 8191])).numpy()[0, :3], short[0, :3])
