"""The token table split across shards gives the unsharded layer's bits.

The NumPy reference runs here; JAX's meshes need N devices, which XLA makes only at import
(XLA_FLAGS), so the JAX checks run in a subprocess with 4 CPU devices and a timeout.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import backends
import compare
from embedding_parity.sharding import reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Every id of the 103-row table (each shard's first and last row: 52 starts shard 1 of 2, 35
# and 70 shards of 3, 26, 52 and 78 of 4), and a few shapes.
EVERY_ID = (np.arange(7 * 16) % 103).reshape(7, 16)
IDS = [
    np.array([[5, 10, 7, 102], [0, 5, 1, 2]]),
    np.array([3, 4]),
    np.zeros((2, 0), np.int64),
    EVERY_ID,
]


def unsharded(token_table, position_table, token_ids, start):
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("strategy", reference.STRATEGIES)
def test_the_reference_is_the_unsharded_layer_bit_for_bit(dtype, strategy):
    # vocab 103 and dim 10: 103 divisible by none of 2 to 5, 10 not by 3 or 4: padded shards.
    token_table, position_table = backends.shared_weights(103, 10, 16, seed=1, dtype=dtype)
    for num_shards in (1, 2, 3, 4, 5):
        for token_ids in IDS:
            for start in {0, min(2, 16 - token_ids.shape[-1]), 16 - token_ids.shape[-1]}:
                expected = unsharded(token_table, position_table, token_ids, start)
                found = reference.embed(
                    token_table,
                    position_table,
                    token_ids,
                    start,
                    num_shards=num_shards,
                    strategy=strategy,
                )
                assert same_bits(found, expected), (num_shards, token_ids.shape, start)


def test_a_shard_count_that_would_leave_a_shard_empty_is_refused():
    # 5 rows over 4 shards of ceil(5 / 4) = 2 rows: 2, 2, 1 and none. torch's DTensor fails
    # on such a split; the suite names the counts that work.
    token_table, position_table = backends.shared_weights(5, 4, 8)
    with pytest.raises(ValueError, match="use one of 1, 2, 3, 5"):
        reference.embed(token_table, position_table, [1], num_shards=4)


def test_shards_own_consecutive_rows_and_the_last_is_padded():
    table = np.arange(10 * 2, dtype=np.float32).reshape(10, 2)
    shards = reference.split_rows(table, 4)  # ceil(10 / 4) = 3 rows each: 3 3 3 1+2 padding
    assert [s.shape for s in shards] == [(3, 2)] * 4
    np.testing.assert_array_equal(np.concatenate(shards)[:10], table)
    np.testing.assert_array_equal(shards[3][1:], 0)
    columns = reference.split_columns(table, 2)
    assert [c.shape for c in columns] == [(10, 1)] * 2


def test_a_sum_of_one_row_and_exact_zeros_is_the_row_except_for_the_sign_of_zero():
    """All but one term of each row-parallel sum is an exact zero, so the sum is the owner's
    value; summed from +0.0, as XLA's and gloo's all-reduces sum, an owner's -0.0 becomes
    +0.0. Equal as values; the bits differ only there."""
    token_table = np.array([[1.5, -0.0, -0.0], [2.0, 3.0, -1.0]], np.float32)
    position_table = np.array([[0.25, 0.5, -0.0]], np.float32)
    token_ids = np.array([0])
    expected = unsharded(token_table, position_table, token_ids, 0)  # [1.75, 0.5, -0.0]
    found = reference.embed(token_table, position_table, token_ids, 0, num_shards=2)
    np.testing.assert_array_equal(found, expected)  # equal values (0.0 == -0.0)
    assert np.signbit(expected[0, 2]) and not np.signbit(found[0, 2])  # only the sign of zero
    assert same_bits(found[:, :2], expected[:, :2])  # -0.0 + 0.5 == 0.5 either way


def test_ids_outside_the_global_vocabulary_are_refused_before_any_shard_looks():
    token_table, position_table = backends.shared_weights(103, 10, 16)
    for strategy in reference.STRATEGIES:
        # 103 would be masked on every shard of 4 (each owns 26 rows: 0..103 padded to 104)
        # and come back as a zero row; the suite refuses it.
        with pytest.raises(IndexError, match="token id 103 at token_ids\\[1\\]"):
            reference.embed(
                token_table, position_table, np.array([1, 103]), num_shards=4, strategy=strategy
            )


@pytest.mark.parametrize(
    "num_shards, strategy, message",
    [
        (0, "rows", "cannot split 103 rows into 0 shards"),
        (11, "columns", "cannot split 10 columns into 11 shards"),
        (2, "diagonal", "unknown sharding strategy 'diagonal'"),
    ],
)
def test_a_bad_shard_count_or_strategy_is_a_value_error(num_shards, strategy, message):
    token_table, position_table = backends.shared_weights(103, 10, 16)
    with pytest.raises(ValueError, match=message):
        reference.embed(
            token_table,
            position_table,
            np.array([1]),
            num_shards=num_shards,
            strategy=strategy,
        )


JAX_CHECKS = textwrap.dedent(
    """
    import json
    import numpy as np
    import backends
    from embedding_parity.sharding import jax_shards

    IDS = [
        np.array([[5, 10, 7, 102], [0, 5, 1, 2]]),
        np.array([3, 4]),
        np.zeros((2, 0), int),
        (np.arange(7 * 16) % 103).reshape(7, 16),  # every id: each shard's first and last row
    ]
    import jax.numpy as jnp
    import optax

    checked, stepped_cases, errors = 0, 0, {}
    rng = np.random.default_rng(0)
    for dtype in ("float32", "float16", "bfloat16"):
        token_table, position_table = backends.shared_weights(103, 10, 16, seed=1, dtype=dtype)
        # float32 at every count and every id; the 16-bit dtypes at 4 shards (uneven splits of
        # rows and columns), where only the dtype is new
        for num_shards in (1, 2, 3, 4) if dtype == "float32" else (4,):
            for strategy in jax_shards.STRATEGIES:
                layer = jax_shards.ShardedEmbedding(
                    token_table, position_table, num_shards=num_shards, strategy=strategy
                )
                # every case at 4 shards; below, the 2-D ids and every id (each compiles anew);
                # the 16-bit dtypes on the 2-D ids alone
                cases = IDS if num_shards == 4 else [IDS[0], IDS[-1]]
                for ids in cases if dtype == "float32" else IDS[:1]:
                    start = 16 - ids.shape[-1]
                    expected = token_table[ids] + position_table[start:]
                    found = np.asarray(layer(ids, start))
                    same = found.dtype == expected.dtype and found.tobytes() == expected.tobytes()
                    assert same, (dtype, num_shards, strategy, ids.shape)
                    # The token gradient: sharded like the table (each row's gradient on the
                    # device that owns the row), and gathered, the unsharded one. Each row
                    # here sums at most two terms, so exactly (see docs/learning.md).
                    upstream = rng.standard_normal(expected.shape).astype(expected.dtype)
                    plain = backends.get("numpy").TokenPositionEmbedding(token_table, position_table)
                    wanted = backends.get("numpy").gradients(plain, ids, upstream, start)
                    gradient = layer.token_gradient(ids, upstream, start)
                    assert gradient.sharding == layer.token_table.sharding
                    gathered = np.asarray(gradient)[:103, :10]
                    assert gathered.tobytes() == wanted["token_table"].tobytes()
                    if dtype == "float32" and ids.shape == (7, 16):
                        # One Adam step (every id), each device on its own shard, against
                        # the whole table's step from gradients() with the same optimizer.
                        stepped = layer.adam_step(ids, upstream, start)
                        assert stepped.sharding == layer.token_table.sharding
                        optimizer = optax.adam(**jax_shards.ADAM)
                        whole = jnp.asarray(token_table)
                        step, _ = optimizer.update(
                            jnp.asarray(wanted["token_table"]), optimizer.init(whole), whole
                        )
                        expected_table = np.asarray(optax.apply_updates(whole, step))
                        found_table = np.asarray(stepped)[:103, :10]
                        assert found_table.tobytes() == expected_table.tobytes(), (
                            num_shards, strategy, ids.shape
                        )
                        stepped_cases += 1
                    checked += 1
    # Signed zeros: JAX agrees with the reference (an all-reduce sums from +0.0), and the
    # column split, which only moves values, keeps them.
    from embedding_parity.sharding import reference
    signed = np.array([[1.5, -0.0, -0.0], [2.0, 3.0, -1.0]], np.float32)
    positions = np.array([[0.25, 0.5, -0.0]], np.float32)
    for num_shards in (1, 2):  # one shard: a copy, -0.0 kept; two: summed from +0.0
        for strategy in ("rows", "columns"):
            sharded = jax_shards.ShardedEmbedding(
                signed, positions, num_shards=num_shards, strategy=strategy
            )
            found = np.asarray(sharded(np.array([0])))
            expected = reference.embed(
                signed, positions, [0], num_shards=num_shards, strategy=strategy
            )
            assert found.tobytes() == expected.tobytes(), (num_shards, strategy)
    checked += 2
    layer = jax_shards.ShardedEmbedding(token_table, position_table, num_shards=4)
    for name, call in {
        "id": lambda: layer(np.array([1, 103])),
        "start": lambda: layer(np.array([1, 2]), 15),
        "devices": lambda: jax_shards.ShardedEmbedding(token_table, position_table, num_shards=5),
    }.items():
        try:
            call()
        except Exception as error:
            errors[name] = [type(error).__name__, str(error)]
    # Checkpoints that change N: saved by Orbax from N devices, restored onto M, bit for bit.
    import os, sys
    table32, positions32 = backends.shared_weights(103, 10, 16, seed=1)
    restored = []
    # (fewer devices, more, one; each strategy: a save and a restore cost Orbax about a second)
    for saved_on, restored_on, strategy in ((4, 2, "rows"), (2, 3, "columns"), (3, 1, "rows")):
        folder = os.path.join(sys.argv[1], f"checkpoint-{saved_on}-{restored_on}-{strategy}")
        saved = jax_shards.ShardedEmbedding(
            table32, positions32, num_shards=saved_on, strategy=strategy
        )
        jax_shards.save_checkpoint(saved, folder)
        back = jax_shards.load_checkpoint(
            folder, positions32, num_shards=restored_on, strategy=strategy,
            vocab_size=103, dim=10,
        )
        table = np.asarray(back.token_table)[:103, :10]
        ids = IDS[-1][:1]
        same = table.tobytes() == table32.tobytes() and back.num_shards == restored_on
        same &= np.asarray(back(ids)).tobytes() == (table32[ids] + positions32).tobytes()
        restored.append([saved_on, restored_on, strategy, bool(same)])
    try:
        jax_shards.load_checkpoint(folder, positions32, num_shards=2, vocab_size=100, dim=10)
    except ValueError as error:
        errors["checkpoint"] = ["ValueError", str(error)]
    # A data file cut short: Orbax raises Exception, the cause TensorStore's, in one line.
    import glob
    data = max(glob.glob(os.path.join(folder, "orbax", "ocdbt.process_0", "d", "*")),
               key=os.path.getsize)
    os.truncate(data, 100)
    try:
        jax_shards.load_checkpoint(folder, positions32, num_shards=1)
    except ValueError as error:
        errors["truncated"] = ["ValueError", str(error)]
    # A full disk (files limited to 1000 bytes; the table is 4 kB): nothing left, nothing
    # on stderr (Orbax logged about 270 lines), one error.
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, EFBIG
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    sys.stderr.write("full disk from here\\n")
    sys.stderr.flush()
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, limits[1]))
    try:
        jax_shards.save_checkpoint(saved, os.path.join(sys.argv[1], "full"))
    except OSError as error:
        errors["full disk"] = ["OSError", str(error)]
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
    sys.stderr.write("full disk to here\\n")
    sys.stderr.flush()
    left = [name for name in os.listdir(sys.argv[1]) if "full" in name]
    # A table left in its file: each device's shard read through make_array_from_callback
    # (one process holds every device here, so it reads every shard, each once).
    from safetensors.numpy import save_file
    path = os.path.join(sys.argv[1], "tables.safetensors")
    save_file({"token_table": table32}, path)
    from_file = []
    for num_shards in (1, 2, 3, 4):
        for strategy in jax_shards.STRATEGIES:
            table = reference.TableFile.open(path, "token_table")
            layer = jax_shards.ShardedEmbedding(
                table, positions32, num_shards=num_shards, strategy=strategy
            )
            in_memory = jax_shards.ShardedEmbedding(
                table32, positions32, num_shards=num_shards, strategy=strategy
            )
            ids = IDS[-1]
            same = np.asarray(layer.token_table).tobytes() == np.asarray(
                in_memory.token_table).tobytes()
            same &= np.asarray(layer(ids)).tobytes() == np.asarray(in_memory(ids)).tobytes()
            from_file.append([num_shards, strategy, bool(same), table.read[0]])
    rows = jax_shards.ShardedEmbedding(token_table, position_table, num_shards=4)
    columns = jax_shards.ShardedEmbedding(
        token_table, position_table, num_shards=4, strategy="columns"
    )
    print(json.dumps({
        "checked": checked,
        "stepped": stepped_cases,
        "restored": restored,
        "from_file": from_file,
        "errors": errors,
        "left": left,
        "bytes": [rows.bytes_per_device(), columns.bytes_per_device()],
    }))
    """
)


def test_jax_shards_over_four_devices_are_the_unsharded_layer_and_gradient_bit_for_bit(tmp_path):
    pytest.importorskip("jax")
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    done = subprocess.run(
        [sys.executable, "-c", JAX_CHECKS, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["checked"] == (len(IDS) + 3 * 2 + 2 * 1) * 3 + 2
    # an Adam step at every count and strategy, on every id in float32
    assert report["stepped"] == 4 * 3
    # Orbax checkpoints restored onto another count: 4 -> 2 by rows, 2 -> 3 by columns, 3 -> 1
    assert [r[:3] for r in report["restored"]] == [
        [4, 2, "rows"],
        [2, 3, "columns"],
        [3, 1, "rows"],
    ]
    assert all(same for *_, same in report["restored"])
    # from a TableFile: every count and strategy, the in-memory layer's bits, the table read once
    assert [row[2:] for row in report["from_file"]] == [[True, 103 * 10 * 4]] * 12
    errors = report["errors"]
    assert errors["checkpoint"][0] == "ValueError"
    assert "has vocab_size 103, this table 100" in errors["checkpoint"][1]
    [_, truncated] = errors["truncated"]
    assert truncated.startswith("Orbax could not restore ") and "\n" not in truncated
    assert "OUT_OF_RANGE" in truncated and "checkpoint-3-1-rows" in truncated, truncated
    [_, full] = errors["full disk"]
    assert full.startswith(f"Orbax could not write {tmp_path / 'full'}: ") and "\n" not in full
    assert "File too large" in full, full
    assert report["left"] == []  # nor its temporary sibling
    during = done.stderr.split("full disk from here\n")[1].split("full disk to here\n")[0]
    assert during == "", during[-3000:]
    assert errors["id"][0] == "IndexError" and "token id 103 at token_ids[1]" in errors["id"][1]
    assert errors["start"][0] == "ValueError" and "exceeds max_seq_len 16" in errors["start"][1]
    assert errors["devices"][0] == "ValueError"
    assert "--xla_force_host_platform_device_count=5" in errors["devices"][1]
    # bfloat16, 2 bytes: rows 26 x 10 per device; columns 103 x ceil(10 / 4) = 3 per device
    assert report["bytes"] == [26 * 10 * 2, 103 * 3 * 2]


# --- the shard job and its command line --------------------------------------------------


@pytest.mark.slow
def test_compare_shard_prints_the_parity_table_and_writes_arrays_and_picture(tmp_path):
    """Every backend and strategy, from a .safetensors file, whose rows (or columns) each torch
    rank reads alone."""
    from safetensors.numpy import save_file

    arrays, picture = tmp_path / "shard.npz", tmp_path / "shard.png"
    token_table, position_table = backends.shared_weights(100, 10, 16)
    weights = tmp_path / "tables.safetensors"
    save_file({"token_table": token_table, "position_table": position_table}, str(weights))
    done = subprocess.run(
        [
            sys.executable,
            "compare.py",
            "shard",
            "--weights",
            str(weights),
            "--shards",
            "2",
            "--tokens",
            "5",
            "60",
            "7",
            "--save-arrays",
            str(arrays),
            "--out",
            str(picture),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = [line.split() for line in done.stdout.splitlines()]
    found = {(row[0], row[1]) for row in table if row and row[-1] == "yes"}
    expected = {("numpy", "rows"), ("numpy", "columns")}
    expected |= {("jax", s) for s in ("rows", "columns", "compiler")}
    expected |= {("torch", s) for s in ("rows", "columns", "dtensor")}
    assert expected <= found and not any(row and row[-1] == "NO" for row in table)
    # 50 rows x 10, 100 rows x 5 columns, and DTensor's whole table, 4 bytes each
    for strategy, read in (("rows", "2.0 kB"), ("columns", "2.0 kB"), ("dtensor", "4.0 kB")):
        assert f"torch {strategy}: each rank read at most {read} of the token table" in done.stdout
    reference_rows = token_table[[5, 60, 7]] + position_table[:3]
    with np.load(arrays, allow_pickle=False) as saved:
        np.testing.assert_array_equal(saved["reference"], reference_rows)
        for name in ("numpy", "jax", "torch"):
            assert saved[f"sum_{name}"].tobytes() == reference_rows.tobytes()
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--shards", "0"], "cannot split 10 columns into 0 shards"),
        (["--shards", "11"], "use one of 1, 2, 3, 4, 5, 10"),
        (["--shards", "7"], "cannot split 10 columns into 7 shards"),  # the last would be empty
        (["--tokens", "5", "100"], "token id 100 at token_ids[1] is out of range"),
        (["--start", "14", "--tokens", "1", "2", "3"], "exceeds max_seq_len 16"),
        (["--save-arrays", "x.txt"], "must end in .npz"),
    ],
)
def test_compare_shard_refuses_bad_input_with_one_line(
    flags, message, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)  # a refusal that failed would write its picture here
    assert compare.main(["shard", "--backends", "numpy", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_compare_shard_splits_a_larger_random_table(tmp_path, capsys):
    out = tmp_path / "shard.png"
    argv = ["shard", "--backends", "numpy", "--shards", "8", "--vocab-size", "1000", "--dim", "64"]
    assert compare.main([*argv, "--tokens", "0", "124", "125", "999", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "token table 1000 x 64 (float32) split 8 ways; ids 0 124 125 999" in printed
    assert "numpy    rows" in printed and " NO" not in printed


def test_compare_shard_splits_a_real_table(tmp_path, capsys, minilm):
    out, arrays = tmp_path / "shard.png", tmp_path / "shard.npz"
    argv = ["shard", "--backends", "numpy", "--weights", "minilm", "--tokens", "101", "2054", "102"]
    assert compare.main([*argv, "--out", str(out), "--save-arrays", str(arrays)]) == 0
    assert "token table 30522 x 384 (float32) split 4 ways" in capsys.readouterr().out
    with np.load(arrays, allow_pickle=False) as saved:
        expected = minilm.token_table[[101, 2054, 102]] + minilm.position_table[:3]
        np.testing.assert_array_equal(saved["sum_numpy"], expected)


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--weights", "minilm", "--dim", "4", "--tokens", "1"],
            "--dim does not go with --weights",
        ),
        (["--weights", "minilm"], "--weights needs --tokens"),
        (["--token-key", "k"], "--token-key and --position-key go with --weights PATH"),
        (["--dim", "4", "--shards", "5"], "cannot split 4 columns into 5 shards"),
        (
            ["--vocab-size", "3", "--dim", "8", "--shards", "4", "--tokens", "1"],
            "cannot split 3 rows into 4 shards",
        ),
    ],
)
def test_compare_shard_refuses_table_flags_that_do_not_fit(capsys, flags, message):
    assert compare.main(["shard", "--backends", "numpy", *flags]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("compare.py shard: error: ") and message in line


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_shard_read_from_the_file_is_the_split_shard_and_nothing_more(
    tmp_path, monkeypatch, dtype
):
    """reference.TableFile: each shard read alone from the .safetensors file (rows: one read
    into the shard; columns: a block of rows at a time) is split_rows's or split_columns's
    shard, and the bytes read are the shard's own."""
    from safetensors.numpy import save_file

    token_table, position_table = backends.shared_weights(103, 10, 16, seed=2, dtype=dtype)
    path = str(tmp_path / "tables.safetensors")
    save_file({"token_table": token_table, "position_table": position_table}, path)
    itemsize = token_table.dtype.itemsize
    monkeypatch.setattr(reference.TableFile, "CHUNK_BYTES", 7 * 10 * itemsize)  # blocks of 7
    for num_shards in (1, 2, 3, 4):
        rows, cols = reference.per_shard(103, num_shards), reference.per_shard(10, num_shards)
        for rank in range(num_shards):
            table = reference.TableFile.open(path, "token_table")
            found = reference.row_shard(table, rank, num_shards)
            assert same_bits(found, reference.split_rows(token_table, num_shards)[rank])
            owned = min(103, (rank + 1) * rows) - rank * rows
            assert table.read == [owned * 10 * itemsize]
            table = reference.TableFile.open(path, "token_table")
            found = reference.column_shard(table, rank, num_shards)
            expected = np.ascontiguousarray(reference.split_columns(token_table, num_shards)[rank])
            assert same_bits(found, expected)
            owned = min(10, (rank + 1) * cols) - rank * cols
            assert table.read == [103 * owned * itemsize]
    table = reference.TableFile.open(path, "token_table")  # the rows of some ids, alone
    ids = np.array([[102, 0, 5], [5, 51, 52]])
    assert same_bits(table.take(ids), token_table[ids])
    assert table.read == [5 * 10 * itemsize]  # five distinct ids
    with pytest.raises(ValueError, match="has no tensor 'embeddings'"):
        reference.TableFile.open(path, "embeddings")


@pytest.mark.slow
def test_compare_shard_saves_a_checkpoint_and_restores_it_onto_another_count(tmp_path):
    """--save-checkpoint by 4 JAX devices (Orbax), --load-checkpoint onto 2: the restored
    table is this run's, bit for bit; with other weights it differs (exit 1)."""
    pytest.importorskip("jax")
    checkpoint = tmp_path / "checkpoint"

    def shard(*runs):
        """Each run's (exit status, stdout, stderr): compare.py shard with its flags, every run
        in one fresh process (JAX makes its devices at import: one shard count a process)."""
        script = (
            "import contextlib, io, json, sys\nimport compare\ndone = []\n"
            "for flags in json.loads(sys.argv[1]):\n"
            "    out, err = io.StringIO(), io.StringIO()\n"
            "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
            "        done.append([compare.main(['shard', *flags]), out.getvalue(), err.getvalue()])\n"
            "print(json.dumps(done))\n"
        )
        common = ["--backends", "numpy", "jax", "--out", str(tmp_path / "shard.png")]
        runs = json.dumps([[*common, *flags] for flags in runs])
        env = {**os.environ, "MPLBACKEND": "Agg"}
        env.pop("XLA_FLAGS", None)
        done = subprocess.run(
            [sys.executable, "-c", script, runs],
            cwd=ROOT, capture_output=True, text=True, timeout=300, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.splitlines()[-1])

    [(status, saved, err)] = shard(["--shards", "4", "--save-checkpoint", str(checkpoint)])
    assert status == 0, err[-2000:]
    assert f"checkpoint: {checkpoint / 'jax'} (Orbax, 4 shards by rows)" in saved
    (status, restored, err), (other_status, other, _) = shard(
        ["--shards", "2", "--load-checkpoint", str(checkpoint)],
        ["--shards", "2", "--seed", "1", "--load-checkpoint", str(checkpoint)],
    )
    assert status == 0, err[-2000:]
    assert "(Orbax, saved by 4 shards) onto 2: bit-identical to this run's token table" in restored
    assert other_status == 1 and "DIFFERS from this run's token table" in other


RECORD = {"framework": "jax", "format": "orbax", "vocab_size": 100, "dim": 10,
          "dtype": "float32", "strategy": "rows", "num_shards": 2}  # fmt: skip


def test_compare_shard_refuses_a_checkpoint_of_another_shape_before_any_work(tmp_path, capsys):
    folder = tmp_path / "checkpoint" / "jax"
    (folder / "orbax").mkdir(parents=True)
    (folder / "table.json").write_text(json.dumps(RECORD))
    argv = ["shard", "--backends", "numpy", "jax", "--dim", "12"]
    assert compare.main([*argv, "--load-checkpoint", str(tmp_path / "checkpoint")]) == 2
    err = capsys.readouterr().err
    expected = (
        f"compare.py shard: error: --load-checkpoint {folder} holds a 100 x 10 table, this run's "
        "is 100 x 12: give the flags (or --weights) it was saved with"
    )
    assert err.splitlines() == [expected]
    assert compare.main(["shard", "--save-checkpoint", str(tmp_path)]) == 2
    assert "exists: a checkpoint goes into a new folder" in capsys.readouterr().err


def damage_record(table: str):
    """How a table.json may be damaged, each once the end of a traceback and exit 1 (some
    after the whole run), or a run that read /dev/zero until memory ran out, or hung."""
    damages = {
        "bogus dtype": lambda: table.write_text(json.dumps({**RECORD, "dtype": "bogus"})),
        "no vocab_size": lambda: table.write_text(json.dumps(
            {k: v for k, v in RECORD.items() if k != "vocab_size"})),
        "no num_shards": lambda: table.write_text(json.dumps(
            {k: v for k, v in RECORD.items() if k != "num_shards"})),
        "a list": lambda: table.write_text("[]"),
        "null": lambda: table.write_text("null"),
        "a string count": lambda: table.write_text(json.dumps({**RECORD, "dim": "10"})),
        "nested too deep": lambda: table.write_text("[" * 10000),
        "too big": lambda: table.write_text(" " * 70000 + json.dumps(RECORD)),
        "/dev/zero": lambda: table.symlink_to("/dev/zero"),
        "a FIFO": lambda: os.mkfifo(table),
    }  # fmt: skip
    return damages


@pytest.mark.parametrize("damage", list(damage_record(None)))
def test_a_damaged_checkpoint_record_is_refused_in_one_line_before_any_work(
    tmp_path, capsys, damage
):
    folder = tmp_path / "checkpoint" / "jax"
    (folder / "orbax").mkdir(parents=True)
    damage_record(folder / "table.json")[damage]()
    out = tmp_path / "shard.png"
    argv = ["shard", "--backends", "numpy", "jax", "--load-checkpoint", str(folder.parent)]
    assert compare.main([*argv, "--timeout", "5", "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("compare.py shard: error: ") and str(folder) in line, line
    assert not out.exists()  # before any work


def dcp_files(folder, token_table, num_shards: int) -> None:
    """A torch checkpoint as DCP's safetensors writer leaves it (test_sharding_launched.py
    holds a real one to the same checks): one file per rank, its rows' place in its header."""
    from safetensors.numpy import save_file

    (folder / "dcp").mkdir(parents=True)
    rows = reference.per_shard(len(token_table), num_shards)
    for rank in range(num_shards):
        info = {"token_table": {"saved_offsets": [rank * rows, 0]}}
        metadata = {"format": "pt", "DCP_SHARDING_INFO": json.dumps(info), "DCP_VERSION": "1.0"}
        name = f"shard-{rank + 1:05d}-model-00001-of-00001.safetensors"
        part = np.ascontiguousarray(token_table[rank * rows : (rank + 1) * rows])
        save_file({"token_table": part}, str(folder / "dcp" / name), metadata=metadata)
    record = {**RECORD, "framework": "torch", "format": "dcp", "num_shards": num_shards}
    (folder / "table.json").write_text(json.dumps(record))


def damage_dcp(folder):
    """How DCP's files may be damaged, each once nested rank tracebacks and exit 1: the
    damage, and what the one line names."""
    second = folder / "dcp" / "shard-00002-model-00001-of-00001.safetensors"

    def edit(old: bytes, new: bytes):
        second.write_bytes(second.read_bytes().replace(old, new, 1))

    return {
        "truncated": (lambda: os.truncate(second, 1000), f"{second} has 1000 bytes"),
        "deleted": (second.unlink, "rows 50:100 of the 100 x 10 table are in no file"),
        "offsets past the table": (
            lambda: edit(b'saved_offsets\\": [50', b'saved_offsets\\": [70'),
            f"{second} holds rows 70:120",
        ),
        "overlapping offsets": (
            lambda: edit(b'saved_offsets\\": [50', b'saved_offsets\\": [40'),
            "both hold rows 40:50",
        ),
        "shape": (lambda: edit(b"[50,10]", b"[60,10]"), f"{second} holds a 60 x 10 F32 piece"),
        "no dcp folder": (lambda: shutil.rmtree(folder / "dcp"), f"{folder / 'dcp'} is missing"),
    }


@pytest.mark.parametrize("damage", list(damage_dcp(pathlib.Path("checkpoint"))))
def test_a_damaged_dcp_checkpoint_is_refused_in_one_line_before_any_rank_starts(
    tmp_path, capsys, damage
):
    folder = tmp_path / "checkpoint" / "torch"
    token_table, _ = backends.shared_weights(100, 10, 16, seed=0)
    dcp_files(folder, token_table, 2)
    do, named = damage_dcp(folder)[damage]
    do()
    out = tmp_path / "shard.png"
    argv = ["shard", "--backends", "numpy", "torch", "--load-checkpoint", str(folder.parent)]
    assert compare.main([*argv, "--shards", "2", "--timeout", "5", "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("compare.py shard: error: ") and named in line, line
    assert not out.exists()  # before any rank started


@pytest.mark.parametrize("strategy", ["rows", "columns"])
def test_layers_over_a_table_left_in_its_file_read_each_shard_once(tmp_path, strategy):
    """A rank of a launched job keeps the token table in its file (a TableFile): NumPy's
    reference reads one shard at a time and the unsharded lookup only the ids' rows, each
    giving the in-memory table's bits. (JAX's mesh over a TableFile: JAX_CHECKS.)"""
    from safetensors.numpy import save_file

    token_table, position_table = backends.shared_weights(103, 10, 16, seed=4)
    path = str(tmp_path / "tables.safetensors")
    save_file({"token_table": token_table}, path)
    ids = np.array([[0, 25, 26, 51, 52], [77, 78, 102, 0, 0]])
    for num_shards in (1, 2, 4):
        table = reference.TableFile.open(path, "token_table")
        found = reference.embed(table, position_table, ids, 3, num_shards=num_shards,
                                strategy=strategy)  # fmt: skip
        expected = reference.embed(token_table, position_table, ids, 3, num_shards=num_shards,
                                   strategy=strategy)  # fmt: skip
        assert same_bits(found, expected)
        assert table.read == [token_table.nbytes]  # every shard once, each alone
    table = reference.TableFile.open(path, "token_table")
    assert same_bits(table.take(ids), token_table[ids])
    assert table.read == [len(np.unique(ids)) * 10 * 4]
