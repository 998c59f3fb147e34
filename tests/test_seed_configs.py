"""compare.py seed --config / --model: a model's rotation on every backend, its wavelength
picture, and what the flags refuse."""

import json

import numpy as np
import pytest

import backends
import compare
from backends import positional
from tests.pictures import unrendered

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def rows(printed: str) -> dict[str, str]:
    """The parity table's row of each backend that ran."""
    lines = printed.splitlines()
    found = {n: next((x for x in lines if x.startswith(n + " ")), None) for n in backends.names()}
    return {name: line for name, line in found.items() if line is not None}


@pytest.mark.parametrize(
    "model, dtype, start",
    [
        # (every rule, layout and partial rotation on every backend: test_configurations.py)
        ("llama-3.2-1b", "float32", 30000),  # llama3, factor 32
        ("gemma-7b", "bfloat16", 3),  # the rows scaled by sqrt(3072) rounded first
    ],
)
def test_a_models_rotation_on_every_backend(tmp_path, capsys, model, dtype, start):
    out = tmp_path / "model.png"
    argv = ["--model", model, "--dtype", dtype, "--start", str(start), "--out", str(out)]
    assert compare.main(argv) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    printed = capsys.readouterr().out
    assert f"config {model}: RoPE" in printed
    assert len(rows(printed)) == len(backends.names())
    for row in rows(printed).values():
        assert "yes (" in row and "of its bound at worst" in row
    assert printed.splitlines()[-1] == "all 3 backends within tolerance of the float64 reference"


def test_longrope_past_its_original_length_in_float64():
    # LongRoPE's long factors and attention factor (past 4096), every backend, no picture.
    from embedding_parity import configs
    from embedding_parity.jobs import parity

    table, _ = backends.shared_weights(100, 96, 1, dtype="float64")
    config = configs.preset("phi-3-mini-128k")
    for r in parity.run_configured_rope(backends.names(), config, table, np.arange(4), 5000):
        assert r.agrees and r.bound_used < 1 and r.max_abs_diff < 1e-12, r.backend


def test_a_config_json_on_disk(tmp_path, capsys, monkeypatch):
    unrendered(monkeypatch)
    config = {
        "model_type": "llama",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "max_position_embeddings": 2048,
        "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 4.0},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = tmp_path / "linear.png"
    argv = ["--config", str(path), "--start", "500", "--backends", "numpy", "--out", str(out)]
    assert compare.main(argv) == 0
    printed = capsys.readouterr().out
    assert "RoPE linear (factor 4), rope_theta 10000, head_dim 64" in printed
    assert "(4, 64)  float32" in printed


def test_a_backend_that_ignores_the_scaling_differs(tmp_path, capsys, monkeypatch):
    unrendered(monkeypatch)
    # llama3's factor 32 left out: the low-frequency pairs turn 32 times too fast at 30000.
    name = backends.names()[-1]
    be = backends.get(name)
    exact = be.apply_rope
    monkeypatch.setattr(be, "apply_rope", lambda x, p, **kw: exact(x, p, **{**kw, "scaling": None}))
    argv = ["--model", "llama-3.2-1b", "--start", "30000", "--backends", *{"numpy": 0, name: 0}]
    assert compare.main([*argv, "--out", str(tmp_path / "x.png")]) == 1
    printed = capsys.readouterr().out
    assert "  NO (" in rows(printed)[name] and "times its bound at worst)" in rows(printed)[name]
    assert printed.splitlines()[-1] == f"DIFFERS from the float64 reference: {name}"


def test_an_unrounded_gemma_scale_is_named(tmp_path, capsys, monkeypatch):
    unrendered(monkeypatch)
    # sqrt(3072) = 55.43 not rounded to bfloat16's 55.5 first: rows a few ulps off, while the
    # rotation stays within its bound, so the rows' own bits are what catches it.
    be = backends.get("numpy")

    class Unrounded(be.ScaledWordEmbedding):
        def __call__(self, token_ids):
            rows = self.token_table[np.asarray(token_ids)].astype(np.float32)
            return (rows * np.float32(np.sqrt(rows.shape[-1]))).astype(self.dtype)

    monkeypatch.setattr(be, "ScaledWordEmbedding", Unrounded)
    argv = ["--model", "gemma-7b", "--dtype", "bfloat16", "--backends", "numpy", "jax"]
    assert compare.main([*argv, "--out", str(tmp_path / "g.png")]) == 1
    printed = capsys.readouterr().out
    assert "numpy: its ScaledWordEmbedding rows are not the reference's bits" in printed
    assert printed.splitlines()[-1] == "DIFFERS from the float64 reference: numpy"


def test_the_picture_draws_each_pairs_wavelength_before_and_after(tmp_path, monkeypatch):
    from embedding_parity.drawing import schemes

    drawn = {}
    real = schemes.wavelengths

    def spy(config, stop):
        draw = real(config, stop)

        def recording(subfigure):
            draw(subfigure)
            left, right = subfigure.axes
            drawn["left"] = {line.get_label(): line.get_ydata() for line in left.get_lines()}
            drawn["right"] = {line.get_label(): line.get_ydata() for line in right.get_lines()}

        return recording

    monkeypatch.setattr(schemes, "wavelengths", spy)
    unrendered(monkeypatch)  # the lines are read from the figure as it is built
    argv = ["--model", "llama-3.1-8b", "--backends", "numpy", "--out", str(tmp_path / "w.png")]
    assert compare.main(argv) == 0
    before = drawn["left"]["before: rope_theta 500000"]
    after = drawn["left"]["after, at length 4"]
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    np.testing.assert_array_equal(before, 2 * np.pi / positional.frequencies(128, 500000.0))
    np.testing.assert_array_equal(after, 2 * np.pi / positional.frequencies(128, 500000.0, scaling))
    ratio = drawn["right"]["after, at length 4"]
    assert ratio[0] == 1.0 and ratio[-1] == 8.0  # fast pairs kept, slow ones stretched 8x
    assert np.all(np.diff(ratio) >= 0)
    assert drawn["left"]["original context 8192"][0] == 8192


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "opt-125m"], "opt-125m has learned positions (opt rule), no rotation"),
        (["--model", "llama-3.2-1b", "--dim", "8"], "--dim does not go with --model"),
        (["--model", "llama-3.2-1b", "--scheme", "rope"], "--scheme does not go with --model"),
        (["--config", "c.json", "--model", "phi-2"], "give --config or --model, not both"),
        (["--model", "llama-9"], "--model 'llama-9': no such preset"),
        (
            ["--model", "gemma-3-4b", "--batch", "100000"],
            "the output: --batch 100000 x 4 tokens x 2560 (the model's width) = 1024000000 values",
        ),
    ],
)
def test_what_the_flags_refuse(tmp_path, capsys, argv, message):
    assert compare.main([*argv, "--out", str(tmp_path / "x.png")]) == 2
    assert message in capsys.readouterr().err


def test_model_list_names_every_preset(capsys):
    from embedding_parity.configs.presets import PRESETS

    assert compare.main(["--model", "list"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in printed] == list(PRESETS)
