"""The vision tables' kinds: pos2d_resize (a learned table resized to another grid, within
resize.tolerance, the identity bit for bit, a grid that is not the table's refused; NaFlex's
packed form), its properties (pos2d_resize_invariance) and pos2d_table (a fixed 2-D sin-cos
table). Correct ports conform; each wrong port in vision_resize_ports is named by its mistake;
the transposition property catches an h/w swap that a square pretrained grid hides."""

import os
import sys

import numpy as np
import pytest

import compare
from backends import resize
from embedding_parity.conformance import api, cases, numerics, runner
from embedding_parity.conformance.kinds import KINDS, Outcome
from embedding_parity.conformance.kinds import pos2d_resize as kind
from embedding_parity.conformance.kinds import pos2d_table as table_kind
from embedding_parity.usage import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets")
sys.path.insert(0, TARGETS)
import vision_resize_ports as ports  # noqa: E402

RESIZE, TABLE = KINDS["pos2d_resize"], KINDS["pos2d_table"]
DINOV2 = {"kernel": "dinov2-offset", "grid": [14, 14], "compute_dtype": "float32"}
NAFLEX = {"naflex": True, "grid": [6, 6]}
QWEN3_VL = {"kernel": "bilinear-corners", "prefix_tokens": 0, "compute_dtype": "float32"}


# the ports that take and return torch tensors; the others NumPy arrays
TORCH_PORTS = {
    *("torch_resize", "torch_dinov2", "antialias_on", "corners_aligned", "with_offset"),
    *("bilinear", "transposed", "new_transposed", "in_bfloat16", "naflex"),
    *("naflex_padding_zeros", "naflex_antialias_off", "mae_in_float32", "timm_table"),
    *("timm_default_temperature", "timm_at_100", "merge_order"),
}


def framework_of(port) -> str:
    return "torch" if port.__name__ in TORCH_PORTS else "numpy"


def run(port, options=None, kind="pos2d_resize", **chosen):
    return runner.run(port, kind, framework=framework_of(port), options=options or {}, **chosen)


def details(report) -> dict:
    return {c.check: (c.status, c.detail) for c in report.checks}


# --- correct ports conform ---------------------------------------------------------------


@pytest.mark.parametrize(
    "port, options",
    [
        (ports.numpy_resize, {}),
        (ports.torch_resize, {}),
        (ports.torch_resize, {"grid": [14, 14]}),
        (ports.torch_dinov2, DINOV2),
        (ports.naflex, NAFLEX),
    ],
    ids=["numpy", "torch", "torch-14x14", "dinov2-offset", "naflex"],
)
def test_a_correct_port_conforms(port, options):
    report = run(port, options)
    assert report.conforms, details(report)
    found = details(report)
    if not options.get("naflex"):
        for dtype in kind.DTYPES:  # the identity bit for bit, in every dtype
            assert found[f"identity {dtype}"] == (
                "conforms",
                "bit-identical: the table returned as it is",
            )
        assert all(found[c][1].startswith("raises ") for c in found if c.startswith("bad grid"))


def test_the_torch_port_conforms_through_the_command_line_with_its_properties(capsys):
    target = os.path.join(TARGETS, "vision_resize_ports.py:torch_resize")
    code = compare.main(["check", target, "--kind", "pos2d_resize"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1].endswith("; invariances asked too (pos2d_resize_invariance)")
    assert "transposed grids = the result transposed" in out


# --- each wrong port is named ------------------------------------------------------------


@pytest.mark.parametrize(
    "port, options, check, mistake",
    [
        (ports.antialias_on, {}, "resize float32", kind.ANTIALIAS_ON),
        (ports.keys_renormalized, {}, "resize float32", kind.KEYS),
        (ports.keys_replicated, {}, "resize float32", kind.HALF),
        (ports.edges_renormalized, {}, "resize float32", kind.RENORMALIZED),
        (ports.corners_aligned, {}, "resize float32", kind.CORNERS),
        (ports.with_offset, {}, "resize float32", kind.WITH_OFFSET),
        (ports.torch_resize, DINOV2, "resize float32", kind.WITHOUT_OFFSET),
        (ports.torch_dinov2, {"grid": [14, 14]}, "resize float32", kind.WITH_OFFSET),
        (ports.bilinear, {}, "resize float32", kind.BILINEAR),
        (ports.transposed, {}, "resize float32", kind.BOTH),
        (ports.new_transposed, {}, "resize float32", kind.NEW),
        (ports.square, {}, "resize float32", kind.SQUARE),
        (ports.prefix_in_grid, {}, "resize float32", kind.PREFIX_IN),
        (ports.prefix_dropped, {}, "resize float32", "the prefix rows dropped"),
        (ports.in_bfloat16, {}, "resize float32", kind.BFLOAT16),
        (ports.in_bfloat16, {}, "resize float16", kind.BFLOAT16),
        (ports.merge_order, QWEN3_VL | {"grid": [8, 8]}, "resize float32", kind.MERGE_ORDER),
        (ports.merge_order, QWEN3_VL | {"grid": [8, 8]}, "resize bfloat16", kind.MERGE_ORDER),
        *(  # Hugging Face ViT's resize at Qwen3-VL's rule: named in every dtype
            (ports.torch_resize, QWEN3_VL, f"resize {dtype}", kind.BICUBIC_HALF_PIXEL)
            for dtype in kind.DTYPES
        ),
        (ports.naflex_padding_zeros, NAFLEX, "naflex float32", kind.PADDING_ZEROS),
        (ports.naflex_antialias_off, NAFLEX, "naflex float32", "antialias off"),
    ],
    ids=lambda value: value.__name__ if callable(value) else None,
)
def test_each_wrong_port_is_named_by_its_mistake(port, options, check, mistake):
    report = run(port, options, checks=[check])
    status, detail = details(report)[check]
    assert status == "differs" and mistake in detail, detail


def test_antialias_on_and_keys_kernel_are_told_apart_where_an_axis_shrinks():
    """Upsampling, torch's antialias=True is Keys' a = -0.5 with renormalized edges: the one
    name says both; downsampling widens the kernel, and each is named alone."""
    for port, alone, other in (
        (ports.antialias_on, kind.ANTIALIAS_ON, kind.KEYS),
        (ports.keys_renormalized, kind.KEYS, kind.ANTIALIAS_ON),
    ):
        case = next(c for c in RESIZE.cases({}) if c.label.startswith("downsample"))
        arguments = RESIZE.arguments(case.params)
        verdict = RESIZE.judge(case, Outcome(array=_answer(port, arguments)))
        assert alone in verdict.detail and other not in verdict.detail, verdict.detail


def _answer(port, arguments) -> np.ndarray:
    if framework_of(port) == "numpy":
        return np.asarray(port(*arguments))
    import torch

    return port(torch.from_numpy(arguments[0]), *arguments[1:]).numpy()


def test_the_identity_must_come_back_bit_for_bit():
    """A resize at the table's own grid that changes one bit differs, said so."""
    case = next(c for c in RESIZE.cases({}) if c.check == "identity float32")
    table = RESIZE.arguments(case.params)[0].copy()
    table.view(np.uint32)[5, 3] ^= 1
    verdict = RESIZE.judge(case, Outcome(array=table))
    assert verdict.status == "differs"
    assert verdict.detail.startswith("resized to its own grid, the table must come back bit")


def test_a_port_that_does_not_refuse_a_grid_that_is_not_the_tables_is_named():
    report = run(ports.square)
    status, detail = details(report)["bad grid: old_grid (5, 9) for a table of a 4x9 grid"]
    assert status == "differs"
    assert "given old_grid (5, 9) and prefix_tokens 1 (46 rows): a silent answer" in detail


# --- the properties: identity, and the grids transposed ----------------------------------


def test_the_transposition_property_catches_an_h_w_swap_a_square_grid_hides():
    """At a square pretrained grid (14 x 14) reading the table as (w0, h0) changes nothing:
    the property holds a port to itself on the non-square new grids and finds the swap."""
    right = run(ports.torch_resize, {"grid": [14, 14]}, kind="pos2d_resize_invariance")
    assert right.conforms, details(right)
    wrong = details(run(ports.transposed, {"grid": [14, 14]}, kind="pos2d_resize_invariance"))
    assert wrong["identity = the table"][0] == "conforms"
    status, detail = wrong[kind.TRANSPOSED]
    assert status == "differs" and "for instance: h and w taken one for the other" in detail
    assert "differs from the result by up to " in detail, detail


def _prefix_last(table, old_grid, new_grid, prefix_tokens):
    resized = ports.numpy_resize(table, old_grid, new_grid, prefix_tokens)
    return np.concatenate([resized[prefix_tokens:], resized[:prefix_tokens]])


def _nan_where_wide(table, old_grid, new_grid, prefix_tokens):
    resized = ports.numpy_resize(table, old_grid, new_grid, prefix_tokens)
    return resized * np.nan if new_grid[1] > new_grid[0] else resized


@pytest.mark.parametrize(
    "port, words",
    [
        (_prefix_last, "the prefix rows differ by up to "),
        (_nan_where_wide, "the result: NaN or infinity, the two cannot be compared"),
        (
            ports.prefix_dropped,
            "returns answers that do not compose to the one call's shape (the one call returns "
            "shape (66, 8) where (67, 8) is expected: prefix_tokens 1 + 6 * 11 rows)",
        ),
    ],
    ids=["prefix-last", "nan", "prefix-dropped"],
)
def test_the_transposition_property_says_what_it_found_and_no_more(port, words):
    """Neither an h/w swap blamed where the prefix rows moved, nor a placeholder number where
    the answers cannot be compared, nor "not an array of numbers" for a wrong shape."""
    case = next(c for c in kind.Pos2dResizeInvariance().cases({}) if c.check == kind.TRANSPOSED)
    found = details(run(port, kind="pos2d_resize_invariance", checks=[case.check]))
    status, detail = found[kind.TRANSPOSED]
    assert status == "differs" and words in detail, detail
    assert "e+308" not in detail and "not an array" not in detail, detail


def test_the_identity_property_names_a_port_that_resizes_at_its_own_grid():
    found = details(run(ports.new_transposed, kind="pos2d_resize_invariance"))
    status, detail = found[kind.IDENTITY]
    assert status == "differs" and "resized to its own grid, the table does not come" in detail


def test_naflex_asks_no_properties_and_says_why():
    report = run(ports.naflex, NAFLEX, invariances=True)
    assert report.invariances["not_asked"].startswith("pos2d_resize_invariance asks f(table,")


# --- the battery's own numbers -----------------------------------------------------------


@pytest.mark.parametrize("n_in", [1, 2, 5, 14, 37])
@pytest.mark.parametrize("n_out", [1, 3, 10, 16, 39])
def test_the_kinds_cubic_weights_are_the_librarys_where_it_names_them(n_in, n_out):
    """cubic_weights writes the variants resize.KERNELS does not name; where it does, the
    same bits."""
    np.testing.assert_array_equal(
        kind.cubic_weights(n_in, n_out, a=-0.75, edges="replicated"),
        resize.weight_matrix("torch-bicubic", n_in, n_out),
    )
    np.testing.assert_array_equal(
        kind.cubic_weights(n_in, n_out, a=-0.5, edges="renormalized"),
        resize.weight_matrix("keys-bicubic", n_in, n_out),
    )


@pytest.mark.parametrize(
    "options", [{}, {"grid": [14, 14]}, DINOV2], ids=["4x9", "14x14", "dinov2"]
)
def test_every_mistake_is_far_outside_the_bound(options):
    """Teeth: each mistake's float64 result lies outside the float32 tolerance of every resize
    case it is offered at, by 1000 times and more (the least measured: 2.1e3, mlx-vlm's
    renormalized edges at DINOv2's offset; 308 at a 37 x 37 grid, not run here)."""
    for case in RESIZE.cases(options):
        params = case.params
        if params.get("bad") or params["dtype"] != "float32" or RESIZE.exact_for(params):
            continue
        reference, bound = RESIZE.reference(params), RESIZE.tolerance(params, "float32")
        for name, result in RESIZE.mistakes(params):
            ratio, _ = numerics.worst_ratio(result, reference, bound)
            assert ratio > 1000, (case.label, name, ratio)


def test_the_merge_block_order_is_offered_where_the_merge_divides_the_grid():
    """Qwen3-VL's rows in merge blocks: offered where both new sides divide by the merge
    (the option; 2 by default), far outside the bound there, and the identity's permuted
    table named too; not offered at 8x8 -> 11x9, nor by a merge of 3 at 10x10."""
    offered = {}
    for merge in (2, 3):
        for case in RESIZE.cases(QWEN3_VL | {"grid": [8, 8], "merge": merge}):
            params = case.params
            if params.get("bad") or params["dtype"] != "float32":
                continue
            named = dict(RESIZE.mistakes(params))
            offered[merge, tuple(params["new"])] = kind.MERGE_ORDER in named
            if kind.MERGE_ORDER in named and not RESIZE.exact_for(params):
                reference, bound = RESIZE.reference(params), RESIZE.tolerance(params, "float32")
                ratio, _ = numerics.worst_ratio(named[kind.MERGE_ORDER], reference, bound)
                assert ratio > 1000, (case.label, ratio)
    assert offered == {
        (2, (10, 10)): True, (2, (6, 6)): True, (2, (11, 9)): False, (2, (9, 11)): False,
        (2, (8, 8)): True, (3, (10, 10)): False, (3, (6, 6)): True, (3, (11, 9)): False,
        (3, (9, 11)): False, (3, (8, 8)): False,
    }


def test_the_battery_exports_and_a_folder_of_results_is_judged(tmp_path):
    folder = cases.export(str(tmp_path / "b"), "pos2d_resize", {}, RESIZE.cases({}))
    for number, case in enumerate(RESIZE.cases({})):
        name = os.path.join(folder, "results", f"case-{number:03d}")
        try:
            result = ports.numpy_resize(*RESIZE.arguments(case.params))
        except ValueError as error:
            with open(f"{name}.raised", "w") as out:
                out.write(f"ValueError: {error}")
            continue
        bits = result.dtype.name == "bfloat16"  # stored as its uint16 bits, as cases.py says
        np.save(f"{name}.npy", result.view(np.uint16) if bits else result)
    assert cases.judge(folder).conforms


@pytest.mark.parametrize(
    "options, words",
    [
        ({"kernel": "lanczos"}, "kernel 'lanczos' is no resize kernel: torch-bicubic"),
        ({"naflex": True, "prefix_tokens": 1}, "SigLIP2's NaFlex table has no prefix rows"),
        ({"grid": [65, 2]}, "1 to 64 a side"),
        ({"compute_dtype": "int8"}, "compute_dtype 'int8': None or one of"),
        ({"merge": 0}, "merge 0: the side of the squares a merge-block order reads"),
    ],
)
def test_an_option_the_kind_cannot_take_is_refused_in_one_line(options, words):
    with pytest.raises(UsageError, match=words):
        RESIZE.cases(options)


# --- pos2d_table ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "port, options, how",
    [
        (ports.mae_table, {}, "bit-identical"),
        (ports.mae_table, {"grid": [14, 14], "dim": 64}, "bit-identical"),
        (ports.timm_table, {"rule": "timm"}, "within tolerance"),
        (ports.timm_at_100, {"rule": "timm", "temperature": 100.0}, "within tolerance"),
    ],
)
def test_a_correct_table_conforms(port, options, how):
    report = run(port, options, kind="pos2d_table")
    assert report.conforms and all(c.detail.startswith(how) for c in report.checks)


@pytest.mark.parametrize(
    "port, options, mistake",
    [
        (ports.mae_h_first, {}, table_kind.EXCHANGED),
        (ports.mae_ij, {}, table_kind.COLUMN_MAJOR),
        (ports.mae_sides_swapped, {}, table_kind.SIDES),
        (ports.mae_denominator, {}, "omega's denominator D/4 - 1 for D/4"),
        (ports.mae_in_float32, {}, table_kind.IN_FLOAT32),
        (ports.mae_table, {"rule": "timm"}, "the quarters [sin w, cos w, sin h, cos h] for [sin h"),
        (
            ports.timm_default_temperature,
            {"rule": "timm", "temperature": 100.0},
            "the default temperature 10000 where the rule's is 100",
        ),
    ],
    ids=lambda value: value.__name__ if callable(value) else None,
)
def test_each_wrong_table_is_named_by_its_mistake(port, options, mistake):
    """Named on the non-square grid, where h and w cannot stand in for each other."""
    report = run(port, options, kind="pos2d_table")
    status, detail = details(report)["table 4x6"]
    assert status == "differs" and mistake in detail, detail


@pytest.mark.parametrize("name", ["pos2d_resize", "pos2d_table", "rope2d", "rope2d_ids"])
def test_check_help_lists_each_vision_kinds_contract(name, capsys):
    """As the text kinds': one line, the kind's name, then its call as its contract opens."""
    with pytest.raises(SystemExit):
        compare.main(["check", "--help"])
    lines = [line.split(None, 1) for line in capsys.readouterr().out.splitlines()]
    said = [words[1] for words in lines if len(words) == 2 and words[0] == name]
    assert said and said[0].startswith(KINDS[name].contract.split(" -> ")[0] + " -> "), said


def test_the_api_runs_both_kinds():
    assert api.check(ports.mae_table, "pos2d_table").conforms
    report = api.check(ports.numpy_resize, "pos2d_resize", dtypes=["float32"])
    assert report.conforms and report.invariances["kind"] == "pos2d_resize_invariance"
