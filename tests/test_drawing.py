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
