"""The kit's 2-D rotary kinds (rope2d, rope2d_ids, rope2d_invariance) on vision ports: ports in
NumPy from the owners' formulas and transformers' own modules conform at Pixtral's, Qwen2.5-VL's,
Llama 4's and DINOv3's specs; each port with one natural mistake differs, named, far outside the
bound; the q . k property catches a rotated CLS and an h/w-swapped table without a reference;
the id builders are exact and their mistakes named."""

import json
import os
import re
import sys

import ml_dtypes
import numpy as np
import pytest

import compare
from embedding_parity.conformance import cases, runner
from embedding_parity.conformance.kinds import KINDS
from embedding_parity.usage import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets")
PORTS = os.path.join(TARGETS, "vision_rope_ports.py")
sys.path.insert(0, TARGETS)
import vision_rope_ports as ports  # noqa: E402

HALF = ["float32", "float16", "bfloat16"]  # transformers' rotaries form angles in float32


def checked(port, spec, *, framework="numpy", dtypes=None, kind="rope2d", **options):
    return runner.run(
        port,
        kind,
        framework=framework,
        options={"spec": spec, **options},
        dtypes=dtypes,
        invariances=True,
    )


def details(report) -> dict:
    return {c.check: (c.status, c.detail) for c in report.checks}


@pytest.mark.parametrize(
    "spec, port, framework, dtypes",
    [
        ("pixtral", ports.pixtral, "numpy", None),
        ("qwen2.5-vl", ports.qwen2_5_vl, "numpy", None),
        ("llama-4", ports.llama_4, "numpy", None),
        ("dinov3", ports.dinov3, "numpy", None),
        ("pixtral", ports.pixtral_torch, "torch", HALF),
        ("pixtral", ports.pixtral_mistral, "torch", HALF),
        ("qwen2.5-vl", ports.qwen2_5_vl_torch, "torch", HALF),
        ("llama-4", ports.llama_4_torch, "torch", HALF),
        ("dinov3", ports.dinov3_torch, "torch", HALF),
    ],
)
def test_a_correct_port_conforms_at_its_spec(spec, port, framework, dtypes):
    """Every check, and the invariances where the spec's coordinates are integers; Mistral's
    complex form of Pixtral through the conversion's q/k permutation."""
    report = checked(port, spec, framework=framework, dtypes=dtypes)
    assert report.conforms, details(report)
    asked = "asked" in report.invariances
    assert asked == (spec != "dinov3"), report.invariances


def test_transformers_forms_its_angles_in_float32_whatever_x_s_dtype():
    report = checked(ports.pixtral_torch, "pixtral", framework="torch", dtypes=["float64"])
    said = "computed in float32: within float32's tolerance, not float64's"
    assert all(said in detail for status, detail in details(report).values() if status != "conforms")
    assert not report.conforms


# (port, spec, the words that name its mistake)
WRONG = [
    (ports.pixtral_blocks, "pixtral", "slots 'blocks'"),
    (ports.pixtral_mistral_unpermuted, "pixtral", "the permutation is missing"),
    (ports.pixtral_angles_in_bfloat16, "pixtral", "angles in bfloat16"),
    (ports.qwen2_5_vl_x_first, "qwen2.5-vl", "the column's slots first (x-first"),
    (ports.qwen2_5_vl_table_swapped, "qwen2.5-vl", "h and w swapped in the port's table"),
    (ports.llama_4_zero_based, "llama-4", "0-based coordinates where the spec's are 1-based"),
    (ports.llama_4_cls_rotated, "llama-4", "the CLS rotated"),
    (ports.dinov3_max, "dinov3", "normalized by the longer side ('max')"),
]


@pytest.mark.parametrize("port, spec, words", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_each_wrong_port_is_named_by_its_mistake(port, spec, words):
    """In float32, every check that differs names the mistake, far outside the bound (measured:
    1.3e3 to 1.7e7 times it; a CLS turned is off where the bound is 0, it must come back as it
    was)."""
    framework = "torch" if "mistral" in port.__name__ else "numpy"
    report = checked(port, spec, framework=framework, dtypes=["float32"])
    assert not report.conforms
    contract = [c for c in report.checks if c.check.endswith("float32") and c.status == "differs"]
    assert contract, details(report)
    for check in contract:
        assert words in check.detail, (check.check, check.detail)
        ratio = float(re.search(r"\(([\d.e+]+|inf) times the bound\)", check.detail).group(1))
        assert ratio > 100, (check.check, check.detail)


# --- q . k by offset alone: no reference needed ---------------------------------------------


def test_the_q_dot_k_property_catches_a_rotated_cls():
    report = checked(ports.llama_4_cls_rotated, "llama-4", kind="rope2d_invariance")
    found = details(report)
    assert found["q . k by offset alone"][0] == "conforms"  # no prefix token in it
    status, detail = found["prefix tokens at angle zero"]
    assert status == "differs" and detail.endswith("(the CLS rotated)"), detail


def test_the_q_dot_k_property_catches_an_h_w_swap_on_a_non_square_grid():
    report = checked(ports.qwen2_5_vl_table_swapped, "qwen2.5-vl", kind="rope2d_invariance")
    status, detail = details(report)["q . k by offset alone"]
    assert status == "differs" and "q . k follows more than the offset" in detail, detail


def test_a_consistent_swap_of_the_axes_keeps_q_dot_k_and_only_the_contract_names_it():
    """x-first for y-first is the rotation of another spec: q . k cannot tell, the reference can."""
    report = checked(ports.qwen2_5_vl_x_first, "qwen2.5-vl", dtypes=["float32"])
    asked = report.invariances["asked"]
    assert [details(report)[check][0] for check in asked] == ["conforms"]
    assert not report.conforms


def test_the_property_is_not_asked_where_coordinates_follow_the_grid():
    twice, why = runner.asked_twice("rope2d", {"spec": "dinov3"})
    assert twice is None and "normalized by the grid's sides ('separate')" in why
    with pytest.raises(UsageError, match="stretched to the reference grid"):
        KINDS["rope2d_invariance"].cases({"spec": "eva-02"})


# --- the id builders ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "builder, port",
    [
        ("raster", ports.raster_ids),
        ("merge", ports.merge_ids),
        ("window", ports.window_ids),
        ("llama-4", ports.llama_4_ids),
        ("flat", ports.flat_ids),
    ],
)
def test_a_correct_id_builder_is_exact(builder, port):
    report = runner.run(port, "rope2d_ids", framework="numpy", options={"builder": builder})
    assert report.conforms and {c.detail for c in report.checks} == {"exact"}, details(report)
    assert len(report.checks) == 2  # the grid and the grid transposed


@pytest.mark.parametrize(
    "builder, port, words",
    [
        ("merge", ports.merge_ids_as_raster, "raster order where the model's are merge blocks"),
        ("window", ports.window_ids_unpermuted, "the window permutation missing"),
        ("llama-4", ports.llama_4_ids_cls_first, "first where Llama 4 appends its CLS last"),
        ("raster", ports.raster_ids_x_first, "each pair (column, row): the axes swapped"),
        ("raster", ports.raster_ids_transposed, "the grid transposed"),
        ("flat", ports.flat_ids_grid_width, "row * w (6, the grid's width)"),
    ],
)
def test_each_wrong_id_builder_is_named(builder, port, words):
    report = runner.run(port, "rope2d_ids", framework="numpy", options={"builder": builder})
    assert not report.conforms
    found = details(report)
    first = next(iter(found.values()))
    assert first[0] == "differs" and words in first[1], found


# --- options, the command line, the battery as files -------------------------------------


@pytest.mark.parametrize(
    "kind, options, message",
    [
        ("rope2d", {"spec": "pixtrall"}, "spec 'pixtrall' is not one of rope2d.SPECS"),
        ("rope2d", {"spec": "pixtral", "head_dim": 18}, "head_dim 18 must be a positive multiple"),
        ("rope2d", {"spec": "qwen2.5-vl", "grid": [3, 6]}, "does not divide into 2x2 merge"),
        ("rope2d", {"spec": {"name": "pixtral", "bse": 1.0}}, "unexpected keyword argument 'bse'"),
        ("rope2d_ids", {"builder": "zigzag"}, "builder 'zigzag' is not one of raster"),
        ("rope2d_ids", {"builder": "flat", "max_width": 5}, "max_width must be at least 6"),
    ],
)
def test_bad_options_are_refused_in_one_line(kind, options, message):
    with pytest.raises(UsageError, match=re.escape(message)) as refused:
        KINDS[kind].cases(options)
    assert "\n" not in str(refused.value)


def test_a_config_s_fields_change_the_named_spec():
    """{"name": ..., field: value}: a config's rope_theta on Pixtral's rule; the port's fixed
    base then differs, named by nothing it matches."""
    options = {"spec": {"name": "pixtral", "base": 100.0}}
    report = runner.run(
        ports.pixtral, "rope2d", framework="numpy", options=options, dtypes=["float32"]
    )
    assert not report.conforms
    assert "base 100.0" in report.contract


def test_the_command_line_checks_a_port_and_names_its_mistake(capsys):
    code = compare.main(["check", f"{PORTS}:pixtral", "--kind", "rope2d", "--dtypes", "float32"])
    out = capsys.readouterr().out
    assert code == 0 and "CONFORMS" in out and "invariances asked too (rope2d_invariance)" in out
    wrong = [f"{PORTS}:pixtral_blocks", "--kind", "rope2d", "--dtypes", "float32"]
    code = compare.main(["check", *wrong])
    out = capsys.readouterr().out
    assert code == 1 and "slots 'blocks'" in out, out


def test_the_battery_round_trips_through_files(tmp_path):
    """Exported, run from the files and judged: it conforms (the invariance, which asks two
    calls a case, is refused)."""
    folder = cases.export(str(tmp_path / "rope2d"), "rope2d", {}, runner.select_cases("rope2d"))
    with open(os.path.join(folder, "cases.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    for case in manifest["cases"]:
        x, positions = (read(folder, a) for a in case["arguments"])
        result = ports.pixtral(x, positions)
        bits = result.view(np.uint16) if result.dtype == ml_dtypes.bfloat16 else result
        np.save(os.path.join(folder, "results", f"{case['id']}.npy"), bits)
    assert cases.judge(folder).conforms
    with pytest.raises(UsageError, match="asks the target one question in several calls"):
        cases.export(str(tmp_path / "twice"), "rope2d_invariance", {}, [])


def read(folder, entry) -> np.ndarray:
    array = np.load(os.path.join(folder, entry["file"]), allow_pickle=False)
    return array.view(ml_dtypes.bfloat16) if entry.get("stored") == "uint16 bits" else array
