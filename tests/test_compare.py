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
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"},
    )  # fmt: skip
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
        np.testing.assert_array_equal(r.token, token_table[token_ids])
        np.testing.assert_array_equal(r.position, position_table[1:3])
        np.testing.assert_array_equal(r.total, token_table[token_ids] + position_table[1:3])
        assert r.bit_identical and r.max_abs_diff == 0.0


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
