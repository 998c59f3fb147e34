"""Training in lockstep: the same model, weights and batches in every backend; float64
losses within the derived tolerance, the claims about position, Adam's formula, the CLI."""

import json

import numpy as np
import pytest

import backends
import compare
from jobs import train
from training import numpy_model, task

NAMES = backends.names()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def float64_run():
    return train.run(NAMES, dtype="float64", steps=40)


def test_float64_losses_agree_within_the_derived_tolerance(float64_run):
    tolerance = float64_run.tolerance()
    assert 0 < tolerance < 1e-11  # 40 steps * (32 + 32 + 3 + 10 + 32) terms * eps
    for scheme, drift in float64_run.drift.items():
        assert drift.shape == (40,) and drift.max() <= tolerance, scheme
    first = float64_run.curve("learned", NAMES[0]).loss
    assert first[-1] < first[0] / 10  # and they are learning


@pytest.fixture(scope="module")
def float32_run():
    return train.run(NAMES, dtype="float32", steps=120, seed=0)


def test_without_position_the_test_pairs_stay_at_chance(float32_run):
    # "a verb b" and "b verb a" are the same multiset of rows: one prediction for both orders.
    for name in NAMES:
        assert float32_run.curve("none", name).test_accuracy.max() <= 0.5


@pytest.mark.parametrize("scheme", ["learned", "sinusoidal", "rope"])
def test_with_position_the_test_pairs_are_learned(float32_run, scheme):
    for name in NAMES:
        assert float32_run.curve(scheme, name).test_accuracy[-1] > 0.95, name


def test_the_test_pairs_are_never_trained_on():
    t = task.make_task()
    pairs = {frozenset((a, b)) for a, _, b in t.train_ids}
    assert not pairs & {frozenset((a, b)) for a, _, b in t.test_ids}
    assert len(t.test_ids) == 2 * 9 * len(task.VERBS)  # both orders of 9 pairs, every verb


def test_numpy_adam_is_torch_adam():
    import torch

    rng = np.random.default_rng(3)
    start, target = rng.standard_normal(5), rng.standard_normal(5)
    params = {"w": start.copy()}
    state = numpy_model.adam_init(params)
    w = torch.tensor(start, requires_grad=True)
    optimizer = torch.optim.Adam([w], lr=0.1, betas=(0.9, 0.999), eps=1e-8)
    for _ in range(20):
        numpy_model.adam_update(
            params, {"w": 2 * (params["w"] - target)}, state, lr=0.1, b1=0.9, b2=0.999, eps=1e-8
        )
        optimizer.zero_grad()
        ((w - torch.from_numpy(target)) ** 2).sum().backward()
        optimizer.step()
    np.testing.assert_allclose(params["w"], w.detach().numpy(), rtol=1e-13, atol=0)


def test_train_from_the_command_line(tmp_path, capsys):
    out, curves, tables = tmp_path / "t.png", tmp_path / "t.json", tmp_path / "t.safetensors"
    argv = ["train", "--steps", "15", "--dtype", "float64", "--out", str(out)]
    assert compare.main([*argv, "--json", str(curves), "--save", str(tables)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("within") == len(task.SCHEMES)
    for picture in (out, tmp_path / "t-positions.png"):
        assert picture.read_bytes()[:8] == PNG_MAGIC
    record = json.loads(curves.read_text())
    assert record["settings"]["steps"] == 15 and record["tolerance"] > 0
    assert {(r["scheme"], r["backend"]) for r in record["runs"]} == {
        (s, n) for s in task.SCHEMES for n in NAMES
    }
    assert all(len(r["loss"]) == 15 and 0 <= r["final_test_accuracy"] <= 1 for r in record["runs"])
    # The trained tables go straight back into the parity check.
    code = compare.main(["--weights", str(tables), "--tokens", "0", "10", "2", "--out", str(out)])
    assert code == 0 and "t.safetensors: vocab_size 14, dim 32, max_seq_len 3" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--steps", "0"], "--steps must be at least 1, got 0"),
        (["--head-dim", "3"], "--head-dim must be even"),
        (["--lr", "0"], "--lr must be positive"),
        (["--batch-size", "1000"], "--batch-size 1000 exceeds the 288 training sequences"),
        (["--save", "tables.npz"], "--save 'tables.npz' must end in .safetensors"),
        (["--backends", "numpy", "numpy"], "lists a backend twice"),
    ],
)
def test_bad_train_arguments_exit_2_with_one_line(capsys, argv, expected):
    assert compare.main(["train", *argv]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("compare.py train: error: ") and expected in line


def test_a_float64_run_that_diverges_exits_1(tmp_path, capsys):
    # An absurd learning rate makes the losses NaN: not "agreeing", whatever NaN compares to.
    argv = ["train", "--dtype", "float64", "--lr", "1e300", "--steps", "2", "--scheme", "learned"]
    with np.errstate(all="ignore"):
        assert compare.main([*argv, "--out", str(tmp_path / "t.png")]) == 1
    assert "BEYOND the tolerance" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--seed", "-1"], "--seed must be at least 0, got -1"),
        (["--lr", "inf"], "--lr must be positive and finite, got inf"),
    ],
)
def test_more_bad_train_arguments(capsys, argv, expected):
    assert compare.main(["train", *argv]) == 2
    assert expected in capsys.readouterr().err


def test_tables_from_a_file_need_ids(capsys, tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "tables.safetensors"
    save_file({"token_table": np.ones((4, 2), np.float32)}, str(path))
    assert compare.main(["--weights", str(path)]) == 2
    assert "--weights in the seed demo needs --tokens" in capsys.readouterr().err
    assert (
        compare.main(
            ["--weights", str(path), "--tokens", "3", "1", "--out", str(tmp_path / "x.png")]
        )
        == 0
    )
    assert "(the file has no position table)" in capsys.readouterr().out
