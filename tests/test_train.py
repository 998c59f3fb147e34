"""Training in lockstep: the same model, weights and batches in every backend; float64
losses within the derived tolerance, the claims about position, Adam's formula, the CLI."""

import json

import numpy as np
import pytest

import backends
import compare
from embedding_parity.jobs import extrapolate, train
from embedding_parity.training import language, numpy_model, task

NAMES = backends.names()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def float64_run():
    return train.run(NAMES, dtype="float64", steps=25)


@pytest.mark.slow
def test_float64_losses_agree_within_the_derived_tolerance(float64_run):
    tolerance = float64_run.tolerance()
    assert 0 < tolerance < 1e-11  # 25 steps * (32 + 32 + 3 + 10 + 32) terms * eps
    for scheme, drift in float64_run.drift.items():
        assert drift.shape == (25,) and drift.max() <= tolerance, scheme
    first = float64_run.curve("learned", NAMES[0]).loss
    assert first[-1] < first[0] / 10  # and they are learning


@pytest.fixture(scope="module")
def float32_run():
    # every scheme with position passes 0.95 by step 55 (rope, the slowest; learned by 11)
    return train.run(NAMES, dtype="float32", steps=80, seed=0)


@pytest.mark.slow
def test_without_position_the_test_pairs_stay_at_chance(float32_run):
    # "a verb b" and "b verb a" are the same multiset of rows: one prediction for both orders.
    for name in NAMES:
        assert float32_run.curve("none", name).test_accuracy.max() <= 0.5


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["learned", "sinusoidal", "rope", "alibi", "t5"])
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


@pytest.mark.slow
def test_train_from_the_command_line(tmp_path, capsys):
    out, curves, tables = tmp_path / "t.png", tmp_path / "t.json", tmp_path / "t.safetensors"
    # Two schemes: the command's plumbing (every scheme is trained by the fixtures above).
    schemes = ("learned", "rope")
    argv = ["train", "--steps", "15", "--dtype", "float64", "--scheme", *schemes, "--out", str(out)]
    assert compare.main([*argv, "--json", str(curves), "--save", str(tables)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("within") == len(schemes)
    for picture in (out, tmp_path / "t-positions.png"):
        assert picture.read_bytes()[:8] == PNG_MAGIC
    record = json.loads(curves.read_text())
    assert record["settings"]["steps"] == 15 and record["tolerance"] > 0
    assert {(r["scheme"], r["backend"]) for r in record["runs"]} == {
        (s, n) for s in schemes for n in NAMES
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
        (["--heads", "2"], "--heads goes with --extrapolate"),
        (["--length", "8"], "--length goes with --extrapolate"),
        (["--extrapolate", "--length", "1"], "--length must be at least 2, got 1"),
        (["--extrapolate", "--length", "600"], "would test at 4800 tokens"),
        (["--extrapolate", "--heads", "0"], "--heads must be at least 1, got 0"),
        (["--extrapolate", "--save", "t.safetensors"], "leave out --extrapolate"),
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
    assert "--weights needs --tokens" in capsys.readouterr().err
    assert (
        compare.main(
            ["--weights", str(path), "--tokens", "3", "1", "--out", str(tmp_path / "x.png")]
        )
        == 0
    )
    assert "(the file has no position table)" in capsys.readouterr().out


# --- train short, test long --------------------------------------------------------------


@pytest.fixture(scope="module")
def short_extrapolation():
    return extrapolate.run(NAMES, dtype="float64", steps=20, length=6)


@pytest.mark.slow
def test_extrapolation_agrees_across_backends_in_float64(short_extrapolation):
    done = short_extrapolation
    assert done.lengths == [6, 12, 24, 48]
    assert 0 < done.tolerance() < 1e-11
    for scheme, drift in done.drift.items():
        assert drift <= done.tolerance(), scheme
    first = done.run("alibi", NAMES[0]).loss
    assert first[-5:].mean() < first[:5].mean()  # learning


@pytest.mark.slow
def test_learned_positions_are_an_error_past_their_table_not_a_number(short_extrapolation):
    for name in NAMES:
        test = short_extrapolation.run("learned", name).test
        assert isinstance(test[6], float)
        for length in (12, 24, 48):
            assert test[length] == (
                f"start 0 + T {length} = {length} exceeds max_seq_len 6: use at most 6 tokens "
                "from start 0, or a longer position table"
            )
    for scheme in ("none", "sinusoidal", "rope", "alibi", "t5"):
        assert all(np.isfinite(v) for v in short_extrapolation.run(scheme, NAMES[0]).test.values())


@pytest.mark.slow
def test_no_model_beats_the_bayes_optimal_loss(short_extrapolation):
    for run in short_extrapolation.runs:
        for length, value in run.test.items():
            if isinstance(value, float):
                assert value > short_extrapolation.optimal[length], (run.scheme, length)


def test_the_optimal_loss_is_the_forward_algorithm():
    """Checked against brute force: p(next | past) summed over every path of topics."""
    import itertools

    ids = language.sample(5, 4, seed=3)
    e, a = language.emissions(), language.transitions()
    start = np.full(language.TOPICS, 1 / language.TOPICS)
    total = []
    for seq in ids:
        for t in range(1, len(seq)):

            def joint(tokens):  # p(tokens), summing over every topic path
                return sum(
                    start[path[0]]
                    * np.prod([a[p, q] for p, q in itertools.pairwise(path)])
                    * np.prod([e[z, x] for z, x in zip(path, tokens, strict=True)])
                    for path in itertools.product(range(language.TOPICS), repeat=len(tokens))
                )

            total.append(-np.log(joint(seq[: t + 1]) / joint(seq[:t])))
    assert language.optimal_loss(ids) == pytest.approx(np.mean(total), rel=1e-12)


def test_the_language_has_the_stated_statistics():
    ids = language.sample(2000, 64, seed=0)
    counts = np.bincount(ids.ravel(), minlength=language.VOCAB)
    assert counts.min() > 0.8 * counts.mean()  # every token in use, roughly uniformly
    # Consecutive tokens share a topic's own words more often than chance (1/8).
    same = (ids[:, 1:] // language.WORDS) == (ids[:, :-1] // language.WORDS)
    assert same.mean() > 0.2


@pytest.mark.slow
def test_extrapolate_from_the_command_line(tmp_path, capsys):
    out, record = tmp_path / "x.png", tmp_path / "x.json"
    # The fixture's length, dtype and widths: JAX reuses the programs it compiled for them.
    argv = ["train", "--extrapolate", "--steps", "3", "--length", "6", "--dtype", "float64"]
    argv += ["--scheme", "learned", "alibi"]  # the command's plumbing; the fixture trains all six
    assert compare.main([*argv, "--out", str(out), "--json", str(record)]) == 0
    printed = capsys.readouterr().out
    assert "Bayes-optimal" in printed and "lowest loss at T=48" in printed
    assert "error: start 0 + T 12 = 12 exceeds max_seq_len 6" in printed
    assert out.read_bytes()[:8] == PNG_MAGIC
    saved = json.loads(record.read_text())
    assert saved["settings"]["length"] == 6 and len(saved["runs"]) == 2 * len(NAMES)


@pytest.mark.slow
def test_one_backend_reports_no_drift(capsys, tmp_path):
    argv = ["train", "--extrapolate", "--steps", "2", "--length", "2", "--backends", "numpy"]
    assert compare.main([*argv, "--scheme", "alibi", "--out", str(tmp_path / "x.png")]) == 0
    printed = capsys.readouterr().out
    assert "one backend ran: no drift between backends to report" in printed
    assert "agree to" not in printed and "differ by" not in printed


@pytest.mark.slow
def test_the_recorded_run_the_page_reads_is_what_training_computes(float32_run):
    # compare.py page reads docs/train-float32.json instead of training: it must be this code's.
    from embedding_parity.jobs import page

    names = backends.names()
    recorded = page.recorded_training(names, train.DEFAULTS["steps"])
    assert recorded is not None, "docs/train-float32.json no longer matches: run make train"
    assert page.recorded_training(names, 7) is None  # other settings: trained afresh
    # The first steps of the recorded run: the batches and Adam do not depend on the step count,
    # so the fixture's first 40 steps (the default settings but for the count) are a 40-step run.
    steps = 40
    assert {**float32_run.settings, "steps": train.DEFAULTS["steps"]} == {
        **train.DEFAULTS,
        "dtype": "float32",
    }
    # The record was made on another CPU, and float32 matrix products are not bit-reproducible
    # across CPUs: OpenBLAS picks its kernels by instruction set (with its SkylakeX kernels
    # NumPy gives the record's bits; with the Haswell or Zen ones a loss differs in its last bit
    # from step 1). Such a record is one more correct implementation: at every step it may
    # differ from this run by as much as this run's backends differ from each other (their
    # drift, relative to the loss, or one float32 rounding where they agree), and no more. A
    # stale record differs by orders more.
    drift = np.maximum(float32_run.drift["learned"][:steps], np.finfo(np.float32).eps)
    for name in names:
        curve = float32_run.curve("learned", name)
        [kept] = [c for c in recorded["curves"] if (c["scheme"], c["backend"]) == ("learned", name)]
        kept_loss = np.asarray(kept["loss"][:steps])
        beyond = np.abs(kept_loss - curve.loss[:steps]) > drift * np.abs(kept_loss)
        assert not beyond.any(), f"{name}: the record differs at {np.flatnonzero(beyond)}"
        np.testing.assert_array_equal(kept["test_accuracy"][:steps], curve.test_accuracy[:steps])
