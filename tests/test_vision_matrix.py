"""The matrix's vision rows: the resizes of a learned position table by the libraries ports use,
the models' own resizes and 2-D rotaries at their presets, and a resize along ONNX Runtime and
jax.jit. Each finding asserted with the version it was found in (an upgrade that changes one
fails here, as in tests/test_conformance_known.py), each deviation by the mistake the kind names.

The main tier holds what needs no package of the conformance extra: the check of an exported
Resize node's attributes against eager's rule (paths.resize_disagreements), the grids an
export holds as constants, and the mlx-vlm stand-in's edges. The rest is the second tier
(``matrix``: make conformance-test)."""

import pytest

from embedding_parity.conformance import known, paths, runner
from embedding_parity.conformance.adapters import vision_numpy
from embedding_parity.conformance.kinds import pos2d_resize

# The versions the findings below were made with (constraints.txt, requirements-conformance.txt)
PINNED = {
    "transformers": "5.24.0",
    "torch": "2.13.0+cpu",
    "jax": "0.10.2",
    "keras": "3.15.1",
    "timm": "1.0.31",
    "pillow": "13.0.0",
    "scipy": "1.17.1",
    "opencv-python-headless": "5.1.0.95",
    "onnx": "1.23.2",
    "onnxruntime": "1.32.0",
    "onnxscript": "0.7.2",
}

WITHIN = "within tolerance"
SILENT = "a silent answer; a grid that is not the table's must raise"
BAD_GRIDS = ("bad grid: old_grid", "bad grid: prefix_tokens one more than the table's")
# The kind's mistake names, as the findings are classified by them
KEYS, RENORMALIZED = pos2d_resize.KEYS, pos2d_resize.RENORMALIZED
FLOAT32 = "computed in float32"  # rope2d's words for a float64 x turned in float32
# rope2d's layout mistake at Pixtral's spec: the complex form where the spec pairs (k, k + d/2)
LAYOUT = "dims (2k, 2k+1), the complex form"
PERMUTATION = "the permutation is missing"

# row: {check (or the start of its name): words its detail must hold}; "raises" means the check
# conforms by raising
FINDINGS = {
    # torch: each kernel as its options name it; the antialiased kernels have no 16-bit CPU path
    "torch F.interpolate bicubic": {
        "resize float32": WITHIN,
        "resize bfloat16": WITHIN,
        "identity float16": "bit-identical",
        "bad grid: old_grid": "raises",
    },
    "torch F.interpolate bicubic antialias=True": {
        "resize float32": WITHIN,
        "resize float16": "\"compute_index_ranges_weights\" not implemented for 'Half'",
    },
    "torch F.interpolate bilinear": {"resize float32": WITHIN, "resize float16": WITHIN},
    "torch F.interpolate bilinear antialias=True": {"resize float32": WITHIN},
    "torch F.interpolate bilinear align_corners=True": {"resize float32": WITHIN},
    # JAX: cubic-pytorch is torch's bicubic; 'bicubic' antialiases by default
    "jax.image.resize cubic-pytorch": {"resize float32": WITHIN, "resize bfloat16": WITHIN},
    "jax.image.resize bicubic": {"resize float32": WITHIN, "identity bfloat16": "bit-identical"},
    "jax.image.resize bicubic antialias=False": {"resize float32": WITHIN},
    "jax.image.resize linear": {"resize float32": WITHIN},
    "jax.image.resize linear antialias=False": {"resize float32": WITHIN},
    # Pillow's float images are 32-bit, OpenCV's resize and scipy's zoom have no 16-bit path:
    # each refuses a float16 table with an error that does not name the dtype
    "Pillow Image.resize BICUBIC": {
        "resize float32": WITHIN,
        "resize float16": "Cannot handle this data type",
    },
    "Pillow Image.resize BILINEAR": {"resize float32": WITHIN},
    "OpenCV cv2.resize INTER_CUBIC": {
        "resize float32": WITHIN,
        "resize float16": "(-215:Assertion failed) func != 0",
        "identity bfloat16": "returns float32 for bfloat16",
    },
    "OpenCV cv2.resize INTER_LINEAR": {"resize float32": WITHIN},
    "scipy.ndimage.zoom order=1 (big_vision's resample_posemb)": {
        "resize float32": WITHIN,
        "resize float16": "data type not supported",
    },
    "big_vision NaFlex _pos_emb_resize (transcribed)": {
        "naflex float32": WITHIN,
        "naflex bfloat16": WITHIN,
    },
    # one Keras call, held to Hugging Face ViT's rule: torch's backend conforms, JAX's and
    # NumPy's are Keys' a = -0.5 over the grid, renormalized (named where an axis shrinks;
    # where none does it equals antialias on), TensorFlow's the nearest to it (its
    # ResizeBicubic reads Keys' weights from a table of 1024 offsets)
    "Keras ops.image.resize bicubic (torch)": {
        "resize float32": WITHIN,
        "resize bfloat16": WITHIN,
    },
    "Keras ops.image.resize bicubic (jax)": {"resize float32": KEYS, "resize bfloat16": KEYS},
    "Keras ops.image.resize bicubic (numpy)": {"resize float32": KEYS},
    "Keras ops.image.resize bicubic (tensorflow)": {"resize float32": KEYS},
    # timm (its default antialias=True) conforms to its own rule and is antialias on at
    # Hugging Face ViT's
    "timm resample_abs_pos_embed": {"resize float32": WITHIN, "resize bfloat16": WITHIN},
    "timm resample_abs_pos_embed at vit-b-16": {
        "resize float32": pos2d_resize.ANTIALIAS_ON,
        "bad grid: old_grid": "raises",
    },
    "mlx-vlm bicubic_interpolate without Metal (a NumPy stand-in)": {
        "resize float32": RENORMALIZED,
        "resize float16": RENORMALIZED,
    },
    # DINOv2: the original's scale factor with its offset, Hugging Face's size=; each is the
    # other's named mistake
    "DINOv2's own interpolate_pos_encoding (transcribed) at dinov2-vit-l-14-original": {
        "resize float32": WITHIN,
        "resize bfloat16": WITHIN,
    },
    "DINOv2's own interpolate_pos_encoding (transcribed) at dinov2-vit-l-14": {
        "resize float32": pos2d_resize.WITH_OFFSET,
    },
    "transformers Dinov2Embeddings.interpolate_pos_encoding at dinov2-vit-l-14": {
        "resize float32": WITHIN,
        "resize bfloat16": WITHIN,
        "bad grid: old_grid": SILENT,
    },
    "transformers Dinov2Embeddings.interpolate_pos_encoding at dinov2-vit-l-14-original": {
        "resize float32": pos2d_resize.WITHOUT_OFFSET,
        "resize bfloat16": pos2d_resize.WITHOUT_OFFSET,
    },
    # Hugging Face's interpolate_pos_encoding takes no grid: it reads a square from the rows
    "transformers ViTEmbeddings.interpolate_pos_encoding, a 4 x 9 table": {
        "resize float32": pos2d_resize.SQUARE,
        "identity float32": pos2d_resize.SQUARE,
        "bad grid: old_grid": SILENT,
    },
    "transformers ViTEmbeddings.interpolate_pos_encoding at vit-b-16": {
        "resize float32": WITHIN,
        "resize float16": WITHIN,
        "identity bfloat16": "bit-identical",
        "bad grid: prefix_tokens": SILENT,
    },
    "transformers CLIPVisionEmbeddings.interpolate_pos_encoding at clip-vit-l-14": {
        "resize float32": WITHIN,
        "resize bfloat16": WITHIN,
    },
    "transformers SiglipVisionEmbeddings.interpolate_pos_encoding at siglip-so400m-14-384": {
        "resize float32": WITHIN,
    },
    "transformers Dinov2WithRegistersEmbeddings.interpolate_pos_encoding at "
    "dinov2-with-registers": {"resize float32": WITHIN, "resize bfloat16": WITHIN},
    "transformers Siglip2VisionEmbeddings.resize_positional_embeddings at siglip2-naflex": {
        "naflex float32": WITHIN,
        "naflex bfloat16": WITHIN,
        "naflex, bad shapes": "raises",
    },
    # the rotaries: transformers' turn in float32 whatever x's dtype
    "transformers PixtralVisionRotaryEmbedding at pixtral-12b": {
        "grid 4 x 6 float32": WITHIN,
        "long coordinates bfloat16": WITHIN,
        "grid 4 x 6 float64": FLOAT32,
    },
    "Mistral's complex rotary (transcribed), q and k permuted as the conversion does, at "
    "pixtral-12b": {"grid 4 x 6 float32": WITHIN, "long coordinates float16": WITHIN},
    "Mistral's complex rotary (transcribed), unpermuted, at pixtral-12b": {
        "grid 4 x 6 float32": LAYOUT,
        "grid 6 x 4 bfloat16": PERMUTATION,
    },
    "transformers Qwen2_5_VLVisionRotaryEmbedding at qwen2.5-vl-7b-vision": {
        "grid 4 x 6 float32": WITHIN,
        "long coordinates float32": WITHIN,
    },
    # its CLS at angle 0 comes back as it is but for float64, which it turns in float32 too
    "transformers Llama4VisionRotaryEmbedding at llama-4-scout-vision": {
        "grid 24 x 24 with prefix tokens float32": WITHIN,
        "grid 4 x 6 bfloat16": WITHIN,
        "grid 24 x 24 with prefix tokens float64": "1.8e-09 > 0 at [0, 576, 0]",
    },
    "transformers DINOv3ViTRopePositionEmbedding at dinov3-vit-l-16": {
        "grid 14 x 14 with prefix tokens float32": WITHIN,
        "long coordinates bfloat16": WITHIN,
    },
    # the properties: Hugging Face's square reading fails both on a 4 x 9 table
    "torch F.interpolate bicubic: invariances": {
        "transposed grids = the result transposed": "within twice the kind's bound",
    },
    "transformers ViTEmbeddings.interpolate_pos_encoding, a 4 x 9 table: invariances": {
        "identity = the table": "the table does not come back",
        "transposed grids = the result transposed": "differs from the result by up to",
    },
    "transformers Llama4VisionRotaryEmbedding at llama-4-scout-vision: invariances": {
        "prefix tokens at angle zero": "q . k the same at both placings",
    },
    # along the paths: ONNX Runtime's layout optimizer turns the grid's transpose and a
    # downsampling bicubic Resize into one on channels last, which its CPU kernel refuses;
    # it has no bfloat16 Resize; its float32 sample points (i + 0.5) / float32(16/14) - 0.5
    # round past the bound derived from torch's and JAX's
    "torch F.interpolate bicubic through onnx": {
        "resize float32": "through onnx: downsample: 4x9 -> 3x6: raises Fail",
        "resize float16": WITHIN,
        "resize bfloat16": "the path rejects bfloat16",
    },
    "torch F.interpolate bicubic antialias=True through onnx": {
        "resize float32": WITHIN,
        "resize float16": "through onnx: within tolerance",
    },
    "transformers ViTEmbeddings.interpolate_pos_encoding at vit-b-16 through onnx": {
        "resize float32": "1.36 times the bound",
        "resize float16": WITHIN,
    },
    # XLA's fused multiply-adds: within the tolerance (never held to eager's bits)
    "jax.image.resize cubic-pytorch through jax.jit": {
        "resize float32": WITHIN,
        "resize bfloat16": WITHIN,
        "identity float32": "bit-identical",
    },
    "jax.image.resize bicubic through jax.jit": {"resize float32": WITHIN},
}


def _checked(checks: dict, start: str) -> dict:
    """The check whose name is ``start`` or starts with it (the bad grids' names hold the
    grid)."""
    if start in checks:
        return checks[start]
    [found] = [c for name, c in checks.items() if name.startswith(start)]
    return found


@pytest.fixture(scope="module")
def matrix():
    rows = known.run(list(FINDINGS), only=None, timeout=120)["rows"]
    return {r["name"]: r for r in rows}


@pytest.mark.matrix
@pytest.mark.slow
@pytest.mark.parametrize("name", list(FINDINGS))
def test_each_vision_finding_holds_at_its_version(matrix, name):
    record = matrix[name]
    assert "missing" not in record, record.get("missing")
    for package, version in record["versions"].items():
        if package in PINNED:
            assert version == PINNED[package], f"{package} {version}: check this row again"
    checks = {c["check"]: c for c in record["report"]["checks"]}
    for start, words in FINDINGS[name].items():
        found = _checked(checks, start)
        if words == "raises":
            assert found["status"] == "conforms" and "raises" in found["detail"], found
        else:
            assert words in found["detail"], found


@pytest.mark.matrix
@pytest.mark.slow
def test_keras_names_keys_bicubic_on_jax_and_numpy_where_an_axis_shrinks(matrix):
    """Keras's backend dependence: one call, a = -0.75 replicated on torch (it conforms),
    Keys' a = -0.5 renormalized on JAX and NumPy, case by case where the grid shrinks; on
    TensorFlow the nearest mistake is that one, 0.001 to 0.0024 from it (ResizeBicubic's
    table of weights)."""
    assert matrix["Keras ops.image.resize bicubic (torch)"]["report"]["conforms"]
    for backend, said in (("jax", KEYS), ("numpy", KEYS), ("tensorflow", f"nearest to {KEYS} (")):
        [resize] = [
            c
            for c in matrix[f"Keras ops.image.resize bicubic ({backend})"]["report"]["checks"]
            if c["check"] == "resize float32"
        ]
        shrinks = [
            c for c in resize["cases"] if c["label"].startswith(("downsample", "non-square t"))
        ]
        assert len(shrinks) == 2 and all(said in c["detail"] for c in shrinks), shrinks


@pytest.mark.matrix
@pytest.mark.slow
def test_hugging_face_vit_against_timm_differs_in_every_resize_by_antialias():
    """HF ViT's rule (antialias off) held row to row to timm's resample_abs_pos_embed (on): no
    resized case has the same bits; the identity, which both skip, has."""
    hf = "transformers ViTEmbeddings.interpolate_pos_encoding at vit-b-16"
    [record] = known.run([hf], against="timm resample_abs_pos_embed at vit-b-16")["rows"]
    for check in record["report"]["checks"]:
        if check["check"].startswith("resize"):
            assert "differ from" in check["detail"], check
        elif check["check"].startswith("identity"):
            assert "bit-identical to " in check["detail"], check


@pytest.mark.matrix
@pytest.mark.parametrize(
    "options, target",
    [
        ({"mode": "bicubic", "align_corners": False}, "aten.upsample_bicubic2d.vec"),
        (
            {"mode": "bicubic", "align_corners": False, "antialias": True},
            "aten._upsample_bicubic2d_aa.default",
        ),
        ({"mode": "bilinear", "align_corners": True}, "aten.upsample_bilinear2d.vec"),
        (
            {"mode": "bilinear", "align_corners": False, "antialias": True},
            "aten._upsample_bilinear2d_aa.default",
        ),
    ],
    ids=["bicubic", "bicubic antialias", "bilinear corners", "bilinear antialias"],
)
def test_the_exported_resize_node_computes_eager_rule(options, target):
    """torch.onnx.export's Resize node for each ATen resize: cubic_coeff_a, exclude_outside,
    antialias and the coordinate mode are those of eager's rule (paths.ATEN_RESIZES)."""
    import contextlib
    import io
    import warnings

    import torch

    class Resized(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, size=(3, 11), **options)

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(Resized().eval(), (torch.zeros(1, 2, 4, 9),), dynamo=True)
    resizes, nodes = paths._resizes(program)
    assert resizes == [(target, options["align_corners"])]
    assert paths.resize_disagreements(resizes, nodes) == []
    if options["mode"] == "bicubic":  # the coefficient the two bicubics differ by
        assert nodes[0]["cubic_coeff_a"] == (-0.5 if options.get("antialias") else -0.75)


# --- the main tier: no package of the conformance extra ---------------------------------------

BICUBIC = ("aten.upsample_bicubic2d.vec", False)
WRITTEN = {
    "mode": "cubic",
    "cubic_coeff_a": -0.75,
    "exclude_outside": 0,
    "antialias": 0,
    "coordinate_transformation_mode": "half_pixel",
}


def test_a_resize_node_as_eager_computes_it_agrees():
    assert paths.resize_disagreements([BICUBIC], [WRITTEN]) == []
    # an attribute not written is ONNX's default (a = -0.75, half_pixel, no antialias)
    assert paths.resize_disagreements([BICUBIC], [{"mode": "cubic"}]) == []


def test_a_resize_node_with_another_rule_is_named_by_its_attribute():
    said = paths.resize_disagreements([BICUBIC], [WRITTEN | {"cubic_coeff_a": -0.5}])
    assert said == [
        "Resize node 1 (from aten.upsample_bicubic2d.vec, align_corners=False) with "
        "cubic_coeff_a -0.5 where eager's rule has -0.75"
    ]
    corners = paths.resize_disagreements([("aten.upsample_bicubic2d.vec", True)], [WRITTEN])
    assert corners == [
        "Resize node 1 (from aten.upsample_bicubic2d.vec, align_corners=True) with "
        "coordinate_transformation_mode 'half_pixel' where eager's rule has 'align_corners'"
    ]
    antialiased = ("aten._upsample_bicubic2d_aa.default", False)
    assert len(paths.resize_disagreements([antialiased], [WRITTEN])) == 3  # a, outside, aa
    assert paths.resize_disagreements([BICUBIC, BICUBIC], [WRITTEN]) == [
        "1 Resize nodes for 2 ATen resizes"
    ]


def test_an_export_holds_a_grid_as_a_constant_and_refuses_a_list():
    import numpy as np

    table = np.zeros((37, 8), np.float32)
    arrays, key = paths._split([table, (4, 9), (6, 11), 1])
    assert arrays == [0] and key[1] == ("tuple", (4, 9))
    with pytest.raises(paths.PathFailed, match="argument 1 is a list"):
        paths._split([table, [4, 9], (6, 11), 1])


def test_the_mlx_vlm_stand_in_renormalizes_its_edges():
    """mlx-vlm's bicubic without Metal (a = -0.75 over the grid only, renormalized), held to
    Hugging Face's rule (a = -0.75, edges replicated): that mistake, named at every resize."""
    report = runner.run(vision_numpy.mlx_vlm_bicubic, "pos2d_resize", checks=["resize float32"])
    [resize] = report.checks
    assert resize.status == "differs" and all(
        case["detail"].endswith(RENORMALIZED) for case in resize.cases
    ), resize


def test_every_vision_row_has_its_findings():
    vision = {r.name for r in known.VISION}
    assert set(FINDINGS) <= {r.name for r in known.ROWS}
    assert vision <= set(FINDINGS), vision - set(FINDINGS)
