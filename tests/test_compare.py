"""compare.py end to end: the table, the picture and the exit codes."""

import os
import subprocess
import sys

import numpy as np
import pytest

import backends
import compare

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_seed_demo_as_a_user_runs_it(tmp_path):
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "compare.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "compare.png").read_bytes()[:8] == PNG_MAGIC
    lines = done.stdout.splitlines()
    for name in backends.names():
        row = next(line.split() for line in lines if line.startswith(name + " "))
        assert row == [name, "(4,", "10)", "float32", "0", "yes"]
    assert f"picture: {tmp_path / 'compare.png'}" in done.stdout


@pytest.mark.parametrize("dtype", list(backends.DTYPES))
def test_batch_and_dtypes(tmp_path, capsys, dtype):
    out = tmp_path / "batch.png"
    code = compare.main(["--batch", "3", "--start", "5", "--dtype", dtype, "--out", str(out)])
    assert code == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert f"(3, 4, 10)  {dtype}" in capsys.readouterr().out


def test_results_hold_the_backends_arrays():
    token_table, position_table = backends.shared_weights(20, 3, 6, seed=5)
    token_ids = np.array([[4, 19], [0, 4]])
    for r in compare.run(backends.names(), token_table, position_table, token_ids, start=1):
        np.testing.assert_array_equal(r.panels["token embeddings"], token_table[token_ids])
        np.testing.assert_array_equal(r.panels["position embeddings"], position_table[1:3])
        np.testing.assert_array_equal(r.output, token_table[token_ids] + position_table[1:3])
        assert r.bit_identical and r.max_abs_diff == 0.0


@pytest.mark.parametrize(
    "scheme, layout",
    [
        ("sinusoidal", "interleaved"),
        ("sinusoidal", "concat"),
        ("rope", "half"),
        ("rope", "interleaved"),
    ],
)
@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_sinusoidal_and_rope_schemes(tmp_path, capsys, scheme, layout, dtype):
    out = tmp_path / f"{scheme}.png"
    argv = [
        "--scheme",
        scheme,
        "--layout",
        layout,
        "--dtype",
        dtype,
        "--start",
        "3",
        "--out",
        str(out),
    ]
    assert compare.main(argv) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    printed = capsys.readouterr().out
    assert f"layout {layout}" in printed
    for name in backends.names():
        row = next(line.split() for line in printed.splitlines() if line.startswith(name + " "))
        max_diff, tolerance, within = float(row[-3]), float(row[-2]), row[-1]
        assert within == "yes" and max_diff <= tolerance
        if dtype == "float64":
            assert max_diff < 1e-12
    assert "within tolerance of the float64 reference" in printed


def test_rope_results_are_the_backends_rotations():
    token_table, _ = backends.shared_weights(20, 8, 1, seed=5)
    token_ids = np.array([3, 19, 0])
    for r in compare.run_rope(
        backends.names(), token_table, token_ids, 2, layout="half", base=10000.0
    ):
        np.testing.assert_array_equal(r.panels["token embeddings"], token_table[token_ids])
        assert r.agrees and 0 < r.tolerance < 1e-4


def test_rope_beyond_tolerance_exits_1(tmp_path, capsys, monkeypatch):
    name = backends.names()[-1]
    be = backends.get(name)
    exact = be.apply_rope
    # Off by 1e-3: a plausible-looking rotation with the wrong frequencies, say.
    monkeypatch.setattr(be, "apply_rope", lambda x, p, **kw: exact(x, p, **kw) * (1 + 1e-3))
    assert compare.main(["--scheme", "rope", "--out", str(tmp_path / "rope.png")]) == 1
    printed = capsys.readouterr().out
    row = next(line.split() for line in printed.splitlines() if line.startswith(name + " "))
    assert row[-1] == "NO" and float(row[-3]) > float(row[-2])
    assert f"DIFFERS from the float64 reference: {name}" in printed


def test_a_differing_backend_exits_1(tmp_path, capsys, monkeypatch):
    name = backends.names()[-1]
    be = backends.get(name)
    exact = be.to_numpy
    # One ulp off in every element: a backend that is close, but not bit-identical.
    monkeypatch.setattr(be, "to_numpy", lambda array: np.nextafter(exact(array), np.inf))
    out = tmp_path / "differs.png"
    assert compare.main(["--out", str(out)]) == 1
    printed = capsys.readouterr().out
    row = next(line.split() for line in printed.splitlines() if line.startswith(name + " "))
    assert row[-1] == "NO" and float(row[-2]) > 0
    assert f"DIFFERS from the NumPy expression: {name}" in printed
    assert out.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["--tokens", "5", "100"],
            "token id 100 at token_ids[1] is out of range for vocab_size 100",
        ),
        (["--tokens", "-2"], "token id -2 at token_ids[0]"),
        (["--start", "14"], "start 14 + T 4 = 18 exceeds max_seq_len 16"),
        (["--backends", "numpy", "mxnet"], "unknown backend 'mxnet'"),
        (["--dim", "0"], "--dim must be at least 1, got 0"),
        (["--batch", "0"], "--batch must be at least 1, got 0"),
        (["--layout", "concat"], "--layout and --base apply to --scheme sinusoidal or rope"),
        (["--base", "500"], "--layout and --base apply to --scheme sinusoidal or rope"),
        (["--out", "/no/such/folder/x.png"], "folder /no/such/folder does not exist"),
        (["--out", "picture.txt"], "needs an extension, one of .png"),
        (["--out", "noextension"], "needs an extension"),
        (["--backends", "numpy", "numpy"], "lists a backend twice"),
        (["--seed", "-1"], "--seed must be at least 0, got -1"),
        (["--words", "king"], "--words goes with --demo similarity"),
        (["--save-arrays", "a.npz"], "--save-arrays goes with --text"),
        (["--tokens", "99999999999999999999"], "too large"),
        (["--scheme", "rope", "--base", "inf"], "base must be positive and finite"),
        (["--scheme", "rope", "--dim", "7"], "RoPE needs an even dim, got 7"),
        (["--scheme", "sinusoidal", "--dim", "7"], "a sinusoidal table needs an even dim, got 7"),
        (["--scheme", "rope", "--layout", "concat"], "unknown RoPE layout 'concat'"),
        (["--scheme", "sinusoidal", "--start", "15"], "start 15 + T 4 = 19 exceeds max_seq_len 16"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, expected):
    assert compare.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("compare.py: error: ") and expected in line


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        compare.main(["--dtype", "int8"])
    assert info.value.code == 2
