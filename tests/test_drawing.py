"""The pictures and text tables: what they show, what they leave out and say so, and that
they stay readable (no clipped titles, no endless pictures, no washed-out scales)."""

import json
import os

import matplotlib
import numpy as np
import pytest

import backends
from benchmarks import lookup_add
from embedding_parity.drawing import heatmaps, pyplot, table, wrap
from embedding_parity.jobs import parity, seed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_text_table_pads_columns_and_aligns_numbers_right():
    printed = table.text_table([("name", "µs"), ("numpy", "2.5"), ("torch", "10.25")], right_from=1)
    assert printed.splitlines() == [
        "name      µs",
        "-----  -----",
        "numpy    2.5",
        "torch  10.25",
    ]


def test_parity_table_has_a_tolerance_column_only_when_not_exact():
    done = seed.run(["numpy"])
    assert "bit-identical" in table.parity_table(done.results).splitlines()[0]
    done = seed.run(["numpy"], scheme="rope")
    header = table.parity_table(done.results).splitlines()[0].split()
    assert header[-2:] == ["tolerance", "within"]


def test_one_outlier_does_not_wash_out_the_scale():
    rng = np.random.default_rng(0)
    rows = rng.normal(0, 0.05, size=(10, 384))
    rows[0, 7] = 5.0  # a [CLS]-like outlier, 100 standard deviations out
    limit, clipped = heatmaps.colour_limit([rows])
    assert clipped and limit == pytest.approx(np.percentile(np.abs(rows), 99))
    assert limit < 0.2


def test_without_outliers_the_scale_is_the_largest_value():
    values = np.linspace(-3, 2, 200)
    assert heatmaps.colour_limit([values]) == (3.0, False)


@pytest.mark.parametrize(
    "dims, dim, expected",
    [(None, 10, slice(0, 10)), (None, 384, slice(0, 32)), ((64, 96), 384, slice(64, 96))],
)
def test_columns_default_to_a_readable_width(dims, dim, expected):
    assert heatmaps.columns(dims, dim) == expected


def test_columns_outside_the_table_are_refused():
    with pytest.raises(ValueError, match="--dims 5:5 must be a non-empty range within 0:384"):
        heatmaps.columns((5, 5), 384)


def test_long_runs_draw_fewer_tokens_and_say_so(tmp_path):
    done = seed.run(
        backends.names(),
        tuple(range(1, 97)),
        dim=64,
        max_seq_len=4096,
        start=4000,
        scheme="sinusoidal",
    )
    drawn, _ = heatmaps.rows_drawn(len(done.results), 96, heatmaps.EXTRAS_INCHES)
    assert 4 <= drawn < 96
    assert f"first {drawn} of 96 tokens drawn (parity checked on all)" in heatmaps.title(
        done, drawn, slice(0, 64)
    )
    out = tmp_path / "long.png"
    heatmaps.plot(done, str(out), dims=slice(0, 64))
    height = pyplot().imread(out).shape[0]
    assert height <= heatmaps.MAX_HEIGHT * 110 + 1  # 110 dpi


def test_short_runs_draw_every_token():
    assert heatmaps.rows_drawn(3, 4) == (4, heatmaps.PANEL_INCHES + 4 * heatmaps.TOKEN_INCHES)


def test_long_titles_are_wrapped_to_the_figure():
    title = "HuggingFaceTB/SmolLM2-135M-Instruct (LLaMA architecture), GGUF: " * 3
    lines = wrap(title, 6.0).splitlines()
    assert len(lines) > 1 and max(len(line) for line in lines) <= 6.0 * 72 / 5.5


def test_the_sinusoidal_picture_says_which_positions_it_draws(tmp_path):
    out = tmp_path / "sinusoidal.svg"
    done = seed.run(backends.names(), scheme="sinusoidal")
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # keep text as text
        heatmaps.plot(done, str(out), dims=slice(0, 10))
    text = out.read_text()
    assert "the formula at 0-127; the layers' table has max_seq_len 16" in text
    assert "rows run" in text and "max_seq_len" in text


def test_equal_values_in_another_dtype_are_drawn_as_not_bit_identical(tmp_path):
    token_table, position_table = backends.shared_weights(20, 4, 8, dtype="bfloat16")
    ids = np.array([1, 2])
    [good] = parity.run_learned(["numpy"], token_table, position_table, ids)
    widened = parity.Result("numpy", good.panels, good.output.astype(np.float32), good.expected)
    assert widened.max_abs_diff == 0 and not widened.agrees  # same values, another dtype
    done = parity.Run([widened], "x", "s", ["a", "b"], ids)
    out = tmp_path / "widened.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        heatmaps.plot(done, str(out), dims=slice(0, 4))
    assert "NOT bit-identical:" in out.read_text()


def test_the_benchmark_legend_covers_no_bar():
    with open(os.path.join(ROOT, "docs", "bench-1thread.json")) as f:
        records = [lookup_add.Record(**r) for r in json.load(f)["records"]]
    fig = lookup_add.chart_figure(records, "title")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    [legend] = fig.legends
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:
        for bar in ax.patches:
            assert not box.overlaps(bar.get_window_extent(renderer))
    assert fig.get_figwidth() >= 12  # two panels of 7.5 inches per row
    pyplot().close(fig)


def test_between_backends_each_pair_is_bit_identical_or_its_largest_difference():
    """Within tolerance of float64 says nothing of whether two backends rounded alike: the
    table says it pair by pair, bit-identical where they are."""
    expected = np.array([[0.1, 0.2]])  # float64 reference
    output = expected.astype(np.float32)
    nudged = np.nextafter(output, np.float32(1))  # one float32 ulp up, everywhere
    results = [
        parity.Result(name, {}, array, expected, tolerance=1e-6)
        for name, array in (("numpy", output), ("torch", output.copy()), ("jax", nudged))
    ]
    ulp = f"{float(np.max(nudged.astype(np.float64) - output)):.3g}"
    printed = table.parity_table(results).split("\n\n")
    assert printed[0].splitlines()[0].split()[-2:] == ["tolerance", "within"]
    assert [line.split() for line in printed[1].splitlines()[2:]] == [
        ["numpy", "-", "bit-identical", ulp],
        ["torch", "bit-identical", "-", ulp],
        ["jax", ulp, ulp, "-"],
    ]


def test_exact_runs_need_no_table_between_backends():
    done = seed.run(backends.names())
    assert "\n\n" not in table.parity_table(done.results)


def _captured(monkeypatch, module):
    """The figures ``module`` saves, drawn and kept open for inspection."""
    figures = []
    monkeypatch.setattr(module, "save", lambda fig, path, show=False: figures.append(fig))
    return figures


def _inside(fig, artist) -> bool:
    fig.canvas.draw()
    box, page = artist.get_window_extent(), fig.bbox
    return page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1


def test_the_training_titles_fit_their_pictures(monkeypatch):
    """Two schemes make a narrow picture (train --scheme none learned): its title wraps."""
    from embedding_parity.drawing import training
    from embedding_parity.jobs import extrapolate, train

    figures = _captured(monkeypatch, training)
    steps, settings = np.arange(1.0, 301.0), {**train.DEFAULTS, "dtype": "float32"}
    curves = [
        train.Curve(scheme, name, (1 + i * 1e-7) / steps, np.ones(300), np.ones(300), {})
        for scheme in ("none", "learned")
        for i, name in enumerate(("numpy", "torch", "jax"))
    ]
    done = train.Training(settings, curves, {}, (), {"none": steps, "learned": steps})
    training.curves(done, "unused.png")
    lengths = [16 * factor for factor in extrapolate.FACTORS]
    runs = [
        extrapolate.Run(scheme, name, np.ones(3), {n: 3.0 for n in lengths})
        for scheme in ("none", "learned", "sinusoidal", "rope", "alibi", "t5")
        for name in ("numpy", "torch", "jax")
    ]
    settings = {**extrapolate.DEFAULTS, "dtype": "float32"}
    training.extrapolation(
        extrapolate.Extrapolation(settings, runs, dict.fromkeys(lengths, 2.9)), "x"
    )
    for fig in figures:
        assert _inside(fig, fig._suptitle), fig._suptitle.get_text()
        pyplot().close(fig)


def test_the_order_picture_labels_token_rows_by_token_and_summed_rows_by_position(monkeypatch):
    from embedding_parity.drawing import demos as pictures
    from embedding_parity.jobs import demos

    figures = _captured(monkeypatch, pictures)
    rows = [np.eye(3), np.eye(3)[::-1]]
    found = {
        "ids": [np.array([1, 2, 3]), np.array([3, 2, 1])],
        "labels": [["dog", "bites", "man"], ["man", "bites", "dog"]],
        "tokens": rows,
        "positioned": [r + 1 for r in rows],
        "same_without_position": True,
        "same_with_position": False,
    }
    done = demos.Order(("dog bites man", "man bites dog"), "position", {"numpy": found}, False)
    pictures.order(done, "model", "numpy", slice(0, 3), "unused.png")
    [fig] = figures
    axes = [ax for ax in fig.axes if ax.get_title()]  # the four panels, row by row

    def labels(ax):
        return [label.get_text() for label in ax.get_yticklabels()]

    assert labels(axes[0]) == ["dog", "bites", "man"]  # token rows only: no position
    assert labels(axes[1]) == ["man", "bites", "dog"]
    assert labels(axes[2]) == ["dog @ 0", "bites @ 1", "man @ 2"]
    assert labels(axes[3]) == ["man @ 0", "bites @ 1", "dog @ 2"]
    pyplot().close(fig)


@pytest.mark.parametrize(
    "model, label",
    [("llama-3.1-8b", "factor 8"), ("gpt-oss-20b", "factor 32"), ("llama-2-7b-dynamic", None)],
)
def test_the_stretch_labels_the_plateau_of_the_rules_that_have_one(model, label):
    """llama3 and YaRN stretch the slowest pairs by the factor; a length rule's stretch grows
    with the length, so no line claims a plateau there."""
    from backends import positional
    from embedding_parity import configs
    from embedding_parity.drawing import schemes

    config = configs.preset(model)
    fig = pyplot().figure()
    schemes.wavelengths(config, 4)(fig)
    stretch = fig.axes[1]
    texts = [t.get_text() for t in stretch.texts]
    if label is None:
        assert texts == []
    else:
        assert texts == [label]
        factor = config.scaling["factor"]
        rotated = config.rotary_dim or config.head_dim
        w, _ = positional.rope_parameters(rotated, config.rope_theta, config.scaling, 4)
        ratio = positional.frequencies(rotated, config.rope_theta) / w
        assert ratio.max() == pytest.approx(factor)  # the plateau the label names
        assert stretch.get_ylim()[1] > factor  # with room above it for the label
    pyplot().close(fig)


def test_the_formats_accepted_unimported_are_matplotlibs(tmp_path):
    """A picture path is checked before any work without importing Matplotlib, from a list
    every supported Matplotlib writes; other extensions are what the installed one says."""
    import subprocess
    import sys

    from matplotlib.figure import Figure

    from embedding_parity import drawing

    supported = set(Figure().canvas.get_supported_filetypes())
    assert drawing.WRITTEN <= supported
    for extension in supported | {"", "txt", "npz"}:
        assert drawing.writes(extension) == (extension in supported), extension
    check = (
        "import sys; from embedding_parity.jobs import command; "
        "command.check_picture(sys.argv[1]); print('matplotlib' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", check, str(tmp_path / "compare.png")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert done.stdout == "False\n"


def test_the_mrope_map_draws_both_layouts_at_the_models_own_section():
    """Qwen3-VL's interleaved slots above the same section cut into chunks: the second row is
    Qwen2-VL's layout, not Qwen2-VL's section, and the labels say so."""
    from backends import positional
    from embedding_parity import configs
    from embedding_parity.drawing import schemes

    config = configs.preset("qwen3-vl-8b")
    fig = pyplot().figure()
    schemes.wavelengths(config, 4)(fig)
    slots = fig.axes[1]
    _, section = config.mrope
    pairs = config.head_dim // 2
    np.testing.assert_array_equal(
        slots.images[0].get_array(),
        [positional.mrope_axes(pairs, section, kind) for kind in ("interleaved", "chunked")],
    )
    labels = [label.get_text() for label in slots.get_yticklabels()]
    assert labels == ["interleaved\n(this model)", "chunked\n(as Qwen2-VL)"]
    assert "both at this model's section t 24, h 20, w 20" in slots.get_title()
    pyplot().close(fig)
