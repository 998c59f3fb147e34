"""The jobs behind compare.py, called as a library: what each returns, and its errors."""

import numpy as np
import pytest

import backends
from embedding_parity.jobs import arrays, demos, parity, seed, text

NAMES = backends.names()


def test_results_hold_the_backends_arrays():
    token_table, position_table = backends.shared_weights(20, 3, 6, seed=5)
    token_ids = np.array([[4, 19], [0, 4]])
    for r in parity.run_learned(backends.names(), token_table, position_table, token_ids, start=1):
        np.testing.assert_array_equal(r.panels["token embeddings"], token_table[token_ids])
        np.testing.assert_array_equal(r.panels["position embeddings"], position_table[1:3])
        np.testing.assert_array_equal(r.output, token_table[token_ids] + position_table[1:3])
        assert r.bit_identical and r.max_abs_diff == 0.0


def test_rope_results_are_the_backends_rotations():
    token_table, _ = backends.shared_weights(20, 8, 1, seed=5)
    token_ids = np.array([3, 19, 0])
    for r in parity.run_rope(
        backends.names(), token_table, token_ids, 2, layout="half", base=10000.0
    ):
        np.testing.assert_array_equal(r.panels["token embeddings"], token_table[token_ids])
        assert r.agrees and 0 < r.tolerance < 1e-4


def test_the_seed_job_is_the_seed_expression():
    done = seed.run(NAMES)
    token_table, position_table = backends.shared_weights(100, 10, 16, seed=0)
    expected = token_table[[5, 10, 7, 21]] + position_table[0:4]
    assert done.exact and not done.differing
    for r in done.results:
        np.testing.assert_array_equal(r.output, expected)
    assert done.heading == "x = token_table[token_ids] + position_table[0:4]"
    assert done.labels == [
        "token #5 @ pos 0",
        "token #10 @ pos 1",
        "token #7 @ pos 2",
        "token #21 @ pos 3",
    ]


def test_the_seed_job_draws_a_batch_from_the_seed():
    done = seed.run(NAMES, (1, 2, 3), batch=2, seed=7, start=5)
    expected = np.random.default_rng(7).integers(0, 100, size=(2, 3))
    np.testing.assert_array_equal(done.token_ids, expected)
    assert done.results[0].output.shape == (2, 3, 10)


def test_an_unknown_scheme_is_a_value_error():
    with pytest.raises(ValueError, match="unknown scheme 'alibi': use one of learned"):
        seed.run(NAMES, scheme="alibi")


def test_a_backend_with_the_right_bytes_in_the_wrong_dtype_differs():
    token_table, position_table = backends.shared_weights(20, 4, 8, dtype="bfloat16")
    [good] = parity.run_learned(["numpy"], token_table, position_table, np.array([1, 2]))
    relabelled = parity.Result("numpy", good.panels, good.output.view(np.float16), good.expected)
    assert relabelled.output.tobytes() == good.expected.tobytes()
    assert not relabelled.bit_identical and not relabelled.agrees


@pytest.mark.parametrize(
    "given, expected",
    [
        ("the king and the queen drove a car", '"the king and the queen drove a car"'),
        ("  two\n  lines ", '"two lines"'),
        (
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen",
            '"one two three four five … twelve thirteen fourteen" (14 words, 16 tokens)',
        ),
    ],
)
def test_long_texts_are_quoted_by_their_ends(given, expected):
    assert text.quote(given, 16) == expected


def test_saved_arrays_load_without_pickles(tmp_path):
    done = seed.run(NAMES, dtype="bfloat16")
    path = tmp_path / "seed.npz"
    arrays.save(str(path), done)
    with np.load(path, allow_pickle=False) as saved:
        np.testing.assert_array_equal(saved["token_ids"], [5, 10, 7, 21])
        for r in done.results:
            assert saved[f"sum_{r.backend}"].dtype == np.float32  # bfloat16, widened exactly
            np.testing.assert_array_equal(saved[f"sum_{r.backend}"], r.output.astype(np.float32))


def _tokenizer(byte_level):
    from backends.pretrained import Tokenizer

    return Tokenizer("t", str.split, str, 10, byte_level=byte_level)


def test_demo_defaults_suit_the_tokenizer():
    assert demos.default_texts(_tokenizer(False)) == ("dog bites man", "man bites dog")
    assert demos.default_texts(_tokenizer(True)) == (" dog bites man", " man bites dog")
    assert "paris" in demos.default_words(_tokenizer(False))
    assert "Paris" in demos.default_words(_tokenizer(True))


def test_labels_show_spaces():
    from backends.pretrained import Tokenizer

    labels = {0: " king", 1: "king", 2: "\n"}
    tokenizer = Tokenizer("t", None, labels.__getitem__, 3, byte_level=True)
    assert tokenizer.labels([0, 1, 2]) == ["␣king", "king", "↵"]


def test_a_cut_text_says_how_much_was_embedded():
    assert (
        text.quote("dog bites man", 600, embedded=512)
        == '"dog bites man" (600 tokens, the first 512 embedded)'
    )
    assert text.quote("dog bites man", 5, embedded=5) == '"dog bites man"'


def test_the_similarity_table_fits_long_labels():
    found = demos.Similarity("src", ["␣king", "␣butterfly"], np.eye(2), [[], []])
    header, first, second = found.lines()[1:4]
    assert header.split() == ["␣king", "␣butterfly"]
    assert first.split() == ["␣king", "1.000", "0.000"] and second.split()[0] == "␣butterfly"
