"""compare.py --scheme alibi|t5: position as a bias on the attention scores, per head.

The token rows and the bias are held bit for bit on every backend; the attention the bias
alone makes is held to the float64 softmax of that same bias, within the
tolerance derived in jobs.bias.attention_tolerance.
"""

import numpy as np
import pytest

import backends
import compare
from backends import numpy_backend, positional
from embedding_parity.jobs import bias, seed
from tests.pictures import unrendered
from tests.test_compare import exits_2_with_one_line

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bits(array: np.ndarray) -> np.ndarray:
    """The raw bytes: equal bits, not just equal values."""
    return np.ascontiguousarray(array).view(np.uint8)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("scheme", bias.SCHEMES)
def test_every_backend_agrees(scheme, dtype):
    done = bias.run(backends.names(), scheme=scheme, dtype=dtype, start=12)
    assert [c.backend for c in done.checked] == list(backends.names())
    lengths = {"tokens": (4, 16), "window": (16, 16)}  # queries the last 4 of 16 positions
    for call, (q_len, k_len) in lengths.items():
        if scheme == "alibi":
            expected = numpy_backend.alibi_bias(4, q_len, k_len, dtype=dtype)
        else:
            expected = numpy_backend.t5_bias(done.bias_table, q_len, k_len, bidirectional=False)
        for c in done.checked:
            assert c.bias[call].shape == (4, q_len, k_len) and c.bias[call].dtype == expected.dtype
            np.testing.assert_array_equal(bits(c.bias[call]), bits(expected))
    for c in done.checked:
        assert c.x.bit_identical and c.bias_identical
        assert c.max_abs_diff <= c.tolerance and c.agrees
    assert done.differing == [] and done.summary().startswith("all ")
    # Not vacuous: a few hundred ulp of the softmax's dtype at most.
    limit = {"float64": 1e-13, "float32": 1e-5, "bfloat16": 0.1}[dtype]
    assert done.checked[0].tolerance < limit


def test_the_bias_is_the_formula():
    """ALiBi at 4 heads: slopes 1/4 ... 1/256, powers of two, so -slope * distance is exact;
    T5: the random table read at each distance's bucket (distances below 16: bucket = distance)."""
    done = bias.run(["numpy"], scheme="alibi")
    window = done.checked[0].bias["window"]
    np.testing.assert_array_equal(window, positional.alibi_bias(4, 16, 16, causal=True))
    np.testing.assert_array_equal(window[:, 15, 0], -15 / np.array([4, 16, 64, 256]))
    done = bias.run(["numpy"], scheme="t5", seed=3)
    table = np.random.default_rng(3).standard_normal((32, 4)).astype(np.float32)
    np.testing.assert_array_equal(done.bias_table, table)
    window = done.checked[0].bias["window"]
    np.testing.assert_array_equal(window[:, 9, 2], table[7])  # distance 7: bucket 7
    np.testing.assert_array_equal(window[:, 2, 9], table[0])  # a later key: bucket 0 (masked)


@pytest.mark.parametrize("scheme", bias.SCHEMES)
def test_attention_is_causal_and_the_tokens_call_is_a_block_of_the_window(scheme):
    done = bias.run(["numpy"], scheme=scheme, start=5, max_seq_len=16)
    checked = done.checked[0]
    attention = checked.attention["window"]
    np.testing.assert_allclose(attention.sum(axis=-1), 1, rtol=1e-6)
    assert np.all(attention[:, done.masked["window"]] == 0)
    # Queries at 5..8 against keys 0..8: rows 5..8 of the window, keys 0..8.
    np.testing.assert_array_equal(checked.bias["tokens"], checked.bias["window"][:, 5:9, :9])
    np.testing.assert_allclose(
        checked.attention["tokens"], attention[:, 5:9, :9], rtol=0, atol=checked.tolerance
    )


def test_alibi_heads_decay_at_different_rates():
    """The last query's weight on itself: largest for the steepest slope (head 0)."""
    done = bias.run(["numpy"], scheme="alibi")
    on_itself = done.checked[0].attention["window"][:, 15, 15]
    assert np.all(np.diff(on_itself) < 0) and on_itself[0] > 3 * on_itself[-1]


@pytest.mark.parametrize("scheme", bias.SCHEMES)
def test_compare_draws_and_prints_the_table(tmp_path, capsys, scheme):
    out = tmp_path / f"{scheme}.png"
    assert compare.main(["--scheme", scheme, "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0] == "x = token_table[token_ids]  (no position in the vectors)"
    assert f"{scheme}_bias(" in lines[1]
    assert "bias (4, 4, 4) and (4, 16, 16)" in printed
    for name in backends.names():
        row = next(line.split() for line in lines if line.startswith(name + " "))
        assert row[1:3] == ["bit-identical", "bit-identical"] and row[-1] == "yes"
        assert float(row[-3]) <= float(row[-2]) < 1e-5
    assert f"picture: {out}" in printed
    assert lines[-1].startswith(f"all {len(backends.names())} backends agree")


def test_heads_and_a_subset_of_backends(tmp_path, capsys):
    out = tmp_path / "t5.png"
    argv = ["--scheme", "t5", "--heads", "10", "--backends", "numpy", "--dtype", "float16"]
    assert compare.main([*argv, "--start", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "bias (10, 4, 6) and (10, 16, 16)" in printed
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_a_differing_bias_exits_1(tmp_path, capsys, monkeypatch):
    unrendered(monkeypatch)  # the picture does not show the verdict: the table does
    name = backends.names()[-1]
    be = backends.get(name)
    exact = be.alibi_bias
    # One ulp toward zero everywhere: a close bias, but not the NumPy backend's bits.
    monkeypatch.setattr(be, "alibi_bias", lambda *a, **k: exact(*a, **k) * (1 - 2**-23))
    assert compare.main(["--scheme", "alibi", "--out", str(tmp_path / "a.png")]) == 1
    printed = capsys.readouterr().out
    row = next(line.split() for line in printed.splitlines() if line.startswith(name + " "))
    assert row[2] == "NO" and row[-1] == "NO"
    assert f"DIFFERS: {name} (bias not bit-identical to NumPy's)" in printed


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--scheme", "alibi", "--heads", "0"], "argument --heads: must be at least 1, got 0"),
        (["--scheme", "learned", "--heads", "2"], "--heads goes with --scheme alibi or t5"),
        (["--heads", "2"], "--heads goes with --scheme alibi or t5"),
        (["--scheme", "rope", "--heads", "2"], "--heads goes with --scheme alibi or t5"),
        (
            ["--scheme", "alibi", "--batch", "2"],
            "--batch goes with --scheme learned, sinusoidal or rope, not --scheme alibi",
        ),
        (
            ["--scheme", "t5", "--layout", "half"],
            "--layout goes with --scheme sinusoidal or rope, not --scheme t5",
        ),
        (["--scheme", "t5", "--base", "500"], "--base goes with --scheme sinusoidal or rope"),
        (["--scheme", "alibi", "--dims", "0:4"], "--dims goes with the embedding heatmaps"),
        (["--scheme", "t5", "--weights", "minilm"], "--scheme does not go with --weights"),
        (["--scheme", "alibi", "--start", "14"], "start 14 + T 4 = 18 exceeds max_seq_len 16"),
        (["--scheme", "t5", "--tokens", "100"], "token id 100 at token_ids[0] is out of range"),
        (["text", "hi", "--heads", "2"], "--heads goes with compare.py seed or compare.py train)"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, expected):
    exits_2_with_one_line(capsys, argv, expected)


def test_the_jobs_name_each_others_schemes():
    with pytest.raises(ValueError, match="alibi and t5 bias the attention scores instead"):
        seed.run(["numpy"], scheme="alibi")
    with pytest.raises(ValueError, match="unknown scheme 'rope' for a bias: use alibi or t5"):
        bias.run(["numpy"], scheme="rope")
