"""Files are written whole or not at all, and an input is never an output: a write that fails
midway (a full disk) leaves the previous file as it was, for every kind of output."""

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

import backends
import compare
from embedding_parity import outputs

OLD = b"the previous file, whole"


class FullDisk:
    """A file whose writes fail with ENOSPC once ``room`` bytes have been written."""

    def __init__(self, out, room: int):
        self.out, self.room = out, room

    def write(self, data):
        if self.room < len(data):
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.out.write(data)

    def __getattr__(self, name):  # seek, tell, flush, close: the real file's
        return getattr(self.out, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.out.close()


@pytest.fixture
def full_disk(monkeypatch):
    """full_disk(name): the temporary file of the output called ``name`` fills up after 100
    bytes; every other output is written as usual."""

    def only(target_name: str):
        real = outputs._open

        def fails(folder, name, mode):
            out, path = real(folder, name, mode)
            return (FullDisk(out, 100) if name == target_name else out), path

        monkeypatch.setattr(outputs, "_open", fails)

    return only


def test_a_finished_write_replaces_the_file_and_a_failed_one_leaves_it(tmp_path):
    target = tmp_path / "out.json"
    target.write_bytes(OLD)
    with pytest.raises(KeyboardInterrupt), outputs.replacing(target, "w") as out:
        out.write("half of a new file")
        raise KeyboardInterrupt  # Ctrl-C midway
    assert target.read_bytes() == OLD and os.listdir(tmp_path) == ["out.json"]
    outputs.write_text(target, "new")
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["out.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def shard_numpy(tmp_path, *flags):
    return [
        "shard",
        "--backends",
        "numpy",
        "--shards",
        "2",
        "--out",
        str(tmp_path / "s.png"),
        *flags,
    ]


@pytest.mark.parametrize(
    "name, argv",
    [
        ("picture.png", lambda d, p: ["--backends", "numpy", "--out", p]),
        ("arrays.npz", lambda d, p: shard_numpy(d, "--save-arrays", p)),
        (
            "curves.json",
            lambda d, p: [
                "train",
                "--backends",
                "numpy",
                "--scheme",
                "none",
                "--steps",
                "2",
                "--out",
                str(d / "t.png"),
                "--json",
                p,
            ],
        ),
        (
            "explorer.html",
            lambda d, p: ["page", "--backends", "numpy", "--train-steps", "2", "--out", p],
        ),
    ],
)
def test_a_full_disk_leaves_the_previous_output_whole(tmp_path, capsys, full_disk, name, argv):
    target = tmp_path / name
    target.write_bytes(OLD)
    full_disk(name)
    assert compare.main(argv(tmp_path, str(target))) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "No space left on device" in line
    assert target.read_bytes() == OLD
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".partial")]


def test_a_full_disk_leaves_the_previous_check_report_whole(tmp_path, capsys, full_disk):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance_targets")
    target = tmp_path / "report.json"
    target.write_bytes(OLD)
    full_disk("report.json")
    argv = [
        "check",
        os.path.join(here, "numpy_targets.py:t5"),
        "--kind",
        "t5",
        "--json",
        str(target),
    ]
    assert compare.main(argv) == 2
    assert target.read_bytes() == OLD


@pytest.mark.parametrize("spelling", ["same", "relative", "symlink"])
def test_an_output_that_is_the_input_is_refused_before_any_work(
    tmp_path, capsys, monkeypatch, spelling
):
    token_table, position_table = backends.shared_weights(100, 10, 16)
    weights = tmp_path / "tables.npz"
    np.savez(weights, token_table=token_table, position_table=position_table)
    before = weights.read_bytes()
    monkeypatch.chdir(tmp_path)
    out = {"same": str(weights), "relative": "./tables.npz", "symlink": str(tmp_path / "link.npz")}
    if spelling == "symlink":
        os.symlink(weights, tmp_path / "link.npz")
    argv = shard_numpy(
        tmp_path, "--weights", str(weights), "--tokens", "1", "--save-arrays", out[spelling]
    )
    assert compare.main(argv) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "is the same file as --weights" in line and "choose another name" in line
    assert weights.read_bytes() == before
    assert not (tmp_path / "s.png").exists()  # refused before any work


def test_a_check_report_cannot_overwrite_the_target(tmp_path, capsys):
    target = tmp_path / "mine.json"
    target.write_text(json.dumps({"keep": True}))
    # an odd target file name, but a real one: the report must not replace it
    argv = ["check", f"{target}:f", "--kind", "alibi", "--json", str(target)]
    assert compare.main(argv) == 2
    assert "is the same file as TARGET" in capsys.readouterr().err
    assert json.loads(target.read_text()) == {"keep": True}


TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance_targets")


def a_config(folder) -> str:
    path = folder / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "head_dim": 16, "rope_theta": 10000.0}))
    return str(path)


def an_expect_file(folder) -> str:
    path = folder / "expected.json"  # an odd name for one, but --json takes only .json
    path.write_text("rotation float64 = computes in float32\n")
    return str(path)


def an_export(folder) -> str:
    assert (
        compare.main(["check", "--export-cases", str(folder / "battery"), "--kind", "alibi"]) == 0
    )
    return str(folder / "battery")


@pytest.mark.parametrize(
    "flag, made, reads, inside",
    [
        ("--config", a_config, ["--kind", "rope", "--config"], ""),
        ("--expect-file", an_expect_file, ["--kind", "rope", "--expect-file"], ""),
        ("--results", an_export, ["--results"], "cases.json"),
        ("--against", lambda folder: a_config(folder), ["--kind", "rope", "--against"], ""),
    ],
)
def test_a_check_report_cannot_overwrite_what_the_run_reads(
    tmp_path, capsys, flag, made, reads, inside
):
    source = made(tmp_path)
    written = os.path.join(source, inside) if inside else source
    before = Path(written).read_bytes()
    given = f"{source}:rope" if flag == "--against" else source
    target = [] if flag == "--results" else [os.path.join(TARGETS, "numpy_targets.py:rope")]
    capsys.readouterr()
    assert compare.main(["check", *target, *reads, given, "--json", written]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert f"{flag} {source}" in line and "choose another" in line
    assert Path(written).read_bytes() == before


def test_the_matrix_json_cannot_overwrite_its_page(tmp_path, capsys):
    page = tmp_path / "conformance.md"
    page.write_text("<!-- matrix -->")
    os.symlink(page, tmp_path / "page.json")
    argv = ["check", "--known", "--markdown", str(page), "--json", str(tmp_path / "page.json")]
    assert compare.main(argv) == 2
    assert "is the same file as --markdown" in capsys.readouterr().err
    assert page.read_text() == "<!-- matrix -->"


@pytest.mark.parametrize("device", ["fifo", "/dev/zero"])
def test_the_matrix_page_is_read_only_from_a_regular_file(tmp_path, capsys, device):
    page = tmp_path / "page.md"
    if device == "fifo":
        os.mkfifo(page)
    else:
        os.symlink(device, page)
    assert compare.main(["check", "--known", "--markdown", str(page)]) == 2  # at once
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(f"--markdown {page} is not a regular file")


@pytest.mark.parametrize(
    "argv, left",
    [
        (["check", "--model", "list", "port.py:rope"], "TARGET"),
        (["check", "--model", "list", "--kind", "rope"], "--kind"),
        (["seed", "--model", "list", "--dtype", "bfloat16"], "--dtype"),
        (["--model", "list", "--out", "x.png"], "--out"),
    ],
)
def test_model_list_stands_alone(capsys, argv, left):
    assert compare.main(argv) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert f"--model list only lists the presets and runs nothing: leave out {left}" in line
    assert compare.main(argv[: argv.index("list") + 1]) == 0
    assert "llama-3.2-1b" in capsys.readouterr().out


def test_train_checks_its_second_picture_before_training(tmp_path, capsys):
    """With the learned scheme train also draws OUT-positions.png: a name it cannot take is
    refused before any step, not after the whole run."""
    (tmp_path / "t-positions.png").mkdir()
    argv = ["train", "--backends", "numpy", "--scheme", "learned", "--steps", "2"]
    assert compare.main([*argv, "--out", str(tmp_path / "t.png")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "t-positions.png' is a folder: give a file name" in line
    assert not (tmp_path / "t.png").exists()  # before training


def test_a_full_disk_leaves_no_half_written_checkpoint(tmp_path, capsys, full_disk):
    """Orbax writes its files, then table.json meets a full disk: one line, and nothing at
    --save-checkpoint's path or beside it (it was written in a temporary sibling)."""
    pytest.importorskip("orbax.checkpoint")
    full_disk("table.json")
    argv = [
        "shard",
        "--backends",
        "numpy",
        "jax",
        "--shards",
        "1",
        "--out",
        str(tmp_path / "s.png"),
    ]
    assert compare.main([*argv, "--save-checkpoint", str(tmp_path / "ckpt")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "No space left on device" in line
    assert sorted(os.listdir(tmp_path)) == ["s.png"]


def test_a_failed_dcp_save_leaves_no_folder_and_says_it_in_one_line(tmp_path, monkeypatch):
    """A rank that cannot write (its error DCP's, every rank's traceback in it)."""
    pytest.importorskip("torch")
    from embedding_parity.sharding import torch_shards

    def full(*args, checkpoint, **kwargs):
        os.makedirs(checkpoint)  # a rank's file, half written
        (Path(checkpoint) / "shard-00001-model-00001-of-00001.safetensors").write_bytes(OLD)
        raise RuntimeError(
            "rank 0: CheckpointException ranks:dict_keys([0, 1])\nTraceback (most recent call "
            "last): (RANK 0)\n  File ...\nOSError: [Errno 28] No space left on device\n"
        )

    monkeypatch.setattr(torch_shards, "_spawn", full)
    token_table, _ = backends.shared_weights(100, 10, 16)
    with pytest.raises(RuntimeError) as failed:
        torch_shards.save_checkpoint(token_table, tmp_path / "ckpt", num_shards=2)
    assert str(failed.value) == (
        f"the ranks could not write {tmp_path / 'ckpt'}: OSError: [Errno 28] No space left on "
        "device"
    )
    assert os.listdir(tmp_path) == []
