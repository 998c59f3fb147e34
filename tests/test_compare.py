"""compare.py end to end: the table, the picture and the exit codes."""

import os
import subprocess
import sys

import numpy as np
import pytest

import backends
import compare
from tests.conftest import fresh_machine, left_behind
from tests.pictures import unrendered

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_seed_demo_as_a_user_runs_it(tmp_path):
    # On a fresh machine: Matplotlib's font list, torch's and JAX's first imports find no
    # cache, and must leave none in the home or temporary folder.
    machine = tmp_path / "machine"
    machine.mkdir()
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "compare.py")],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**fresh_machine(machine), "MPLBACKEND": "Agg"},
    )
    assert done.returncode == 0, done.stderr
    assert left_behind(machine) == []
    assert (tmp_path / "compare.png").read_bytes()[:8] == PNG_MAGIC
    lines = done.stdout.splitlines()
    for name in backends.names():
        row = next(line.split() for line in lines if line.startswith(name + " "))
        assert row == [name, "(4,", "10)", "float32", "0", "yes"]
    assert f"picture: {tmp_path / 'compare.png'}" in done.stdout


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    # `compare.py | head`: the pipe closes before the table is written.
    process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "compare.py"), "--backends", "numpy"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    process.stdout.close()
    try:
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert (process.returncode, err) == (141, b"")  # 128 + SIGPIPE, as `head` leaves a tool


@pytest.mark.parametrize("dtype", list(backends.DTYPES))
def test_batch_and_dtypes(tmp_path, capsys, dtype):
    out = tmp_path / "batch.png"
    code = compare.main(["--batch", "3", "--start", "5", "--dtype", dtype, "--out", str(out)])
    assert code == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert f"(3, 4, 10)  {dtype}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "scheme, layout, dtype",
    [  # each scheme, layout and dtype once (every combination on every backend: test_positional)
        ("sinusoidal", "interleaved", "float64"),
        ("sinusoidal", "concat", "bfloat16"),
        ("rope", "half", "bfloat16"),
        ("rope", "interleaved", "float64"),
    ],
)
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


def test_rope_beyond_tolerance_exits_1(tmp_path, capsys, monkeypatch):
    unrendered(monkeypatch)
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
        (["--dim", "0"], "argument --dim: must be at least 1, got 0"),
        (["--batch", "0"], "argument --batch: must be at least 1, got 0"),
        (["--layout", "concat"], "--layout and --base apply to --scheme sinusoidal or rope"),
        (["--base", "500"], "--layout and --base apply to --scheme sinusoidal or rope"),
        (["--out", "/no/such/folder/x.png"], "folder /no/such/folder does not exist"),
        (["--out", "picture.txt"], "needs an extension, one of .png"),
        (["--out", "noextension"], "needs an extension"),
        (["--backends", "numpy", "numpy"], "lists a backend twice"),
        (["--seed", "-1"], "argument --seed: must be at least 0, got -1"),
        (
            ["--words", "king"],
            "unrecognized arguments: --words king (--words goes with compare.py demo similarity)",
        ),
        (
            ["--save-arrays", "a.npz"],
            "(--save-arrays goes with compare.py text or compare.py shard)",
        ),
        (["--weights", "/no/such/file.safetensors", "--tokens", "1"], "no such file: /no/such/"),
        (["--weights", "minilm", "--dim", "4"], "--dim does not go with --weights"),
        (["--weights", "minilm", "--scheme", "rope"], "--scheme does not go with --weights"),
        (["--token-key", "k"], "--token-key and --position-key go with --weights PATH"),
        (["text", "hi", "--tokens", "1"], "--tokens goes with compare.py seed or compare.py shard"),
        (["text", "hi", "--start", "0"], "--start goes with compare.py seed"),
        (["text", "hi", "--scheme", "rope"], "--scheme goes with compare.py seed"),
        (["demo", "order", "--tokens", "1"], "--tokens goes with compare.py seed"),
        (["demo", "order", "--dtype", "float16"], "--dtype goes with compare.py seed"),
        (["demo", "similarity", "--backends", "jax"], "--backends goes with"),
        (["demo", "similarity", "--dims", "0:8"], "--dims goes with"),
        (["demo", "order", "--truncate"], "--truncate goes with compare.py text)"),
        (["demo", "similarity", "--texts", "a", "b"], "--texts goes with compare.py demo order)"),
        (["--tokenizer", "bert"], "--tokenizer goes with compare.py text or compare.py demo"),
        (["--dims", "abc"], "argument --dims: must look like 0:32, got 'abc'"),
        (["--vocab-size", "0"], "argument --vocab-size: must be at least 1, got 0"),
        # the spellings of the modes before they became commands: a hint with the new one
        (["--text", "dog bites man"], "(--text is now a command: compare.py text ...)"),
        (["--demo", "order"], "(--demo is now a command: compare.py demo ...)"),
        (["demo"], "the following arguments are required: DEMO"),
        (["trian"], "argument COMMAND: invalid choice: 'trian'"),
        (
            ["--tokens", "99999999999999999999"],
            "token id 99999999999999999999 at token_ids[0] is out of range",
        ),
        (["--scheme", "rope", "--base", "inf"], "--base: must be positive and finite, got inf"),
        (["--scheme", "rope", "--dim", "7"], "RoPE needs an even dim, got 7"),
        (["--scheme", "sinusoidal", "--dim", "7"], "a sinusoidal table needs an even dim, got 7"),
        (["--scheme", "rope", "--layout", "concat"], "unknown RoPE layout 'concat'"),
        (["--scheme", "sinusoidal", "--start", "15"], "start 15 + T 4 = 19 exceeds max_seq_len 16"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, expected):
    exits_2_with_one_line(capsys, argv, expected)


def exits_2_with_one_line(capsys, argv, expected):
    """compare.py refuses argv: exit 2, nothing on stdout, one line naming the problem, after
    the command typed ("compare.py demo order: error: ..."; plain "compare.py" for the default)."""
    assert compare.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    typed = argv[:1] if argv[0] in ("text", "demo") else []
    if typed == ["demo"] and argv[1:2] in (["order"], ["similarity"]):
        typed = argv[:2]
    assert line.startswith(" ".join(["compare.py", *typed]) + ": error: ") and expected in line


def test_argparse_errors_are_one_line_too(capsys):
    exits_2_with_one_line(capsys, ["--dtype", "int8"], "argument --dtype: invalid choice: 'int8'")


def test_every_stray_flag_is_named_in_one_line(capsys):
    assert compare.main(["text", "hi", "--tokens", "1", "--batch", "2"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("compare.py text: error: unrecognized arguments: --tokens 1 --batch 2")
    assert "--tokens goes with" in line and "--batch goes with" in line


def test_a_flag_given_with_its_default_value_is_still_checked(capsys):
    # Given explicitly, even at its default, a flag the command does not take is an error.
    assert compare.main(["demo", "similarity", "--dtype", "float32"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("compare.py demo similarity: error:") and "--dtype goes with" in line


def test_right_bytes_in_the_wrong_dtype_differ(tmp_path, capsys, monkeypatch):
    unrendered(monkeypatch)
    name = backends.names()[-1]
    be = backends.get(name)
    exact = be.to_numpy
    # bfloat16 results relabelled float16: every byte right, every value wrong.
    monkeypatch.setattr(be, "to_numpy", lambda array: exact(array).view(np.float16))
    assert compare.main(["--dtype", "bfloat16", "--out", str(tmp_path / "d.png")]) == 1
    printed = capsys.readouterr().out
    row = next(line.split() for line in printed.splitlines() if line.startswith(name + " "))
    assert row[3] == "float16" and row[-1] == "NO"
    assert f"DIFFERS from the NumPy expression: {name}" in printed


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["text", "hi", "--demo", "order"], "--demo is now a command: compare.py demo ..."),
        (["--scheme", "rope", "--base", "0"], "--base: must be positive and finite, got 0"),
        (["--scheme", "rope", "--base", "1e-300"], "--base: must be above 1, got 1e-300"),
        (["--batch", "2", "--tokens", "200", "--vocab-size", "5"], "token id 200 at token_ids[0]"),
        (["--start", "20"], "exceeds max_seq_len 16: start below 16"),
    ],
)
def test_more_bad_arguments_exit_2_with_one_line(capsys, argv, expected):
    assert compare.main(argv) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert expected in line


def test_a_files_tables_in_another_dtype_are_said_to_be_cast(tmp_path, capsys, monkeypatch):
    unrendered(monkeypatch)
    token_table, position_table = backends.shared_weights(50, 6, 8, dtype="float64")
    path = tmp_path / "f64.npz"
    np.savez(path, token_table=token_table, position_table=position_table)
    argv = ["--weights", str(path), "--tokens", "1", "2", "--out", str(tmp_path / "x.png")]
    assert compare.main(argv) == 0
    note = "f64.npz's tables are float64: computed in float32, rounded; --dtype float64 keeps them"
    assert note in capsys.readouterr().out.splitlines()
    assert compare.main([*argv, "--dtype", "float64"]) == 0
    assert "computed in" not in capsys.readouterr().out
    # Whether the cast rounds is asked of both tables: here only the positions do.
    from embedding_parity.jobs.parity import cast_note

    exact = token_table.astype(np.float32).astype(np.float64)
    [note] = cast_note("f.npz", (exact, position_table), np.dtype(np.float32))
    assert (
        note
        == "f.npz's tables are float64: computed in float32, rounded; --dtype float64 keeps them"
    )
    assert cast_note("f.npz", (exact, None), np.dtype(np.float32))[0].endswith(
        ", exactly; --dtype float64 keeps them"
    )
