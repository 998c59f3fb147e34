"""compare.py vision: a seeded grid on every backend along each path, and its four pictures.

The library's own claims (bit-identity, tolerances) are tested in test_resize2d.py,
test_grid2d.py and test_rope2d.py; here, what the job prints, draws and refuses.
"""

import numpy as np
import pytest

import backends
import compare
from backends import grid, resize, rope2d
from embedding_parity.drawing import pyplot
from embedding_parity.drawing import vision as pictures
from embedding_parity.jobs import vision

NAMES = list(backends.names())
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def printed_tables(out: str) -> dict[str, list[str]]:
    """{a path's line: the backends of its parity table's rows}, as the job prints them."""
    found = {}
    for block in out.split("\n\n"):
        lines = block.splitlines()
        heading = next((i for i, line in enumerate(lines) if line.startswith("backend ")), None)
        if heading is not None and heading > 0:
            found[lines[heading - 1]] = [line.split()[0] for line in lines[heading + 2 :]]
    return found


def test_the_job_prints_a_row_per_backend_and_path_and_writes_four_pictures(tmp_path, capsys):
    out = tmp_path / "v.png"
    argv = ["vision", "--grid", "6", "8", "--to", "5", "10", "--dim", "16", "--out", str(out)]
    assert compare.main(argv) == 0
    printed = capsys.readouterr().out
    tables = printed_tables(printed)
    assert [line.split(":")[0] for line in tables] == ["host path", "framework path", "tap form"]
    assert all(rows == NAMES for rows in tables.values()), tables
    for name in vision.PICTURES:
        written = tmp_path / f"v-{name}.png"
        assert written.read_bytes()[:8] == PNG_MAGIC
        assert f"picture: {written}" in printed
    assert printed.splitlines()[-1] == f"all {len(NAMES)} backends agree on every path run"


@pytest.mark.parametrize("scheme, path", [("sincos2d", "host path"), ("rope2d", "framework path")])
def test_the_other_schemes_run_every_backend_on_one_path(scheme, path):
    done = vision.run(NAMES, scheme=scheme, grid=(3, 5), dim=8)
    [(line, results)] = done.paths.items()
    assert line.startswith(path) and [r.backend for r in results] == NAMES
    assert done.differing == []


def test_a_kernel_a_framework_cannot_express_is_a_note_not_a_row():
    done = vision.run(["numpy", "torch"], grid=(4, 4), to=(3, 5), dim=4, kernel="keys-bicubic")
    framework = next(r for line, r in done.paths.items() if line.startswith("framework path"))
    assert [r.backend for r in framework] == ["numpy"]  # NumPy's own form is its taps
    assert any(n.startswith("torch: kernel 'keys-bicubic' has no torch form") for n in done.notes)


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--grid", "0", "3"], "argument --grid: must be at least 1, got 0"),
        (["--grid", "41", "3"], "must be at most 40 patches"),
        (["--to", "3"], "argument --to: expected 2 arguments"),
        (["--kernel", "bicubic"], "argument --kernel: invalid choice: 'bicubic'"),
        (["--spec", "pixtral"], "--spec goes with --scheme rope2d"),
        (["--scheme", "rope2d", "--spec", "flux"], "not --dim 64: pass --dim 128"),
        (["--scheme", "rope2d", "--dim", "1024"], "--dim 1024 is over 512 for --scheme rope2d"),
        (["--dim", "6"], "needs dim a multiple of 4 and at least 4, got 6"),
        (["--grid", "40", "40", "--dim", "4096"], "= 7602176 values is over the limit of 4194304"),
        (["--out", "v.txt"], "needs an extension"),
    ],
)
def test_bad_flags_exit_2_with_one_line(capsys, argv, expected):
    assert compare.main(["vision", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("compare.py vision: error: ") and expected in line


@pytest.fixture
def drawn(monkeypatch):
    """The figures the pictures build, kept instead of rendered to a file."""
    figures = []
    monkeypatch.setattr(pictures, "save", lambda fig, path, show=False: figures.append(fig))
    yield figures
    for fig in figures:
        pyplot().close(fig)


def test_the_similarity_mosaic_is_each_patchs_cosine_similarity_to_every_other(drawn):
    table = np.random.default_rng(1).standard_normal((3 * 4, 5))  # a 3 x 4 grid, dim 5
    sincos = grid.sincos2d_table((3, 4), 8)
    pictures.similarity([("random", table, (3, 4)), ("sincos", sincos, (3, 4))], "t", "x.png")
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    expected = np.einsum("pd,qd->pq", unit, unit).reshape(3, 4, 3, 4)  # patch (i, j) -> map
    shown = drawn[0].axes[0].images[0].get_array().filled(np.nan)
    assert shown.shape == (3 * 4 - 1, 4 * 5 - 1)  # 3 x 4 maps of 3 x 4, a blank cell between
    for i in range(3):
        for j in range(4):
            tile = shown[i * 4 : i * 4 + 3, j * 5 : j * 5 + 4]
            # dot products of float64 unit vectors of 5 terms: within 5 eps of each other
            np.testing.assert_allclose(tile, expected[i, j], rtol=0, atol=5 * np.finfo(float).eps)
    assert np.isnan(shown[3]).all() and np.isnan(shown[:, 4]).all()
    np.testing.assert_array_equal(shown[0, 0], 1.0)  # a patch against itself
    middle = drawn[0].axes[2].images[0].get_array()  # under the mosaics: patch (1, 2) drawn large
    np.testing.assert_array_equal(middle, shown[4:7, 10:14])


def test_the_difference_says_bit_identical_where_zero_and_where_it_lies_otherwise(drawn):
    channel = np.arange(12.0).reshape(3, 4)
    same = np.ones((5, 6))
    edge = same.copy()
    edge[0, 2] += 0.25  # a difference on the border only
    curves = [("k", np.array([-1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0]))]
    pictures.resize(channel, [("a", same), ("b", same.copy())], curves, curves, "t", "x.png")
    pictures.resize(channel, [("a", edge), ("b", same)], curves, curves, "t", "y.png")
    identical, differing = (fig.axes[3] for fig in drawn)
    assert "bit-identical" in identical.texts[0].get_text() and not identical.images
    np.testing.assert_array_equal(differing.images[0].get_array(), edge - same)
    assert "max |diff|: border 0.25, inside 0" in differing.get_title()


def test_the_resize_panels_are_the_host_paths_of_torchs_and_jaxs_bicubic():
    table = vision.learned_table((14, 3), 2)
    channel, resized, curves, taps = vision.resize_panels(table, (14, 3), (16, 2))
    np.testing.assert_array_equal(channel, table[:, 0].reshape(14, 3))
    for (_, values), kernel in zip(resized, ("torch-bicubic", "antialiased-bicubic"), strict=True):
        expected = resize.resize_table(table.astype(np.float64), (14, 3), (16, 2), kernel=kernel)
        np.testing.assert_array_equal(values, expected[:, 0].reshape(16, 2))
    # the traced kernels: Keys' cubic at a = -0.75 and -0.5, 1 at 0 and 0 at +-1 and +-2
    for (_, offsets, weights), a in zip(curves, (-0.75, -0.5), strict=True):
        x = np.abs(offsets)
        keys = np.where(
            x < 1, ((a + 2) * x - (a + 3)) * x**2 + 1, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        )
        np.testing.assert_allclose(weights, np.where(x < 2, keys, 0), atol=1e-12)
    assert len(taps[2][1]) > len(taps[1][1])  # downsampling widens the antialiased kernel


def test_the_slot_maps_give_each_pair_one_axis_and_merge_equal_specs():
    rows = vision.slot_rows(16)
    labels = [label.split("\n")[0] for label, *_ in rows]
    assert "qwen2.5-vl = qwen2-vl" in labels and len(rows) == len(set(rope2d.SPECS.values()))
    for label, axes, pairs, frequencies in rows:
        assert (axes[pairs[:, 0]] == axes[pairs[:, 1]]).all(), label
        assert (frequencies[pairs[:, 0]] == frequencies[pairs[:, 1]]).all(), label
    llama = rows[labels.index("llama-4")]
    assert list(llama[1][:8]) == ["w"] * 8 and list(llama[1][8:]) == ["h"] * 8  # x first


def test_picture_paths_keep_the_extension():
    paths = vision.picture_paths("docs/vision.svg")
    assert paths == {n: f"docs/vision-{n}.svg" for n in vision.PICTURES}
