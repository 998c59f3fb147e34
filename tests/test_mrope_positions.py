"""The multimodal position builders (Qwen2.5-VL's get_rope_index; Qwen3-VL's, Qwen3.5's and
GLM-4V's, which split a video into a grid per frame) as an exact integer contract: a correct
port conforms bit for bit, each mistake is named, and transformers 4.57.1's rule for Qwen2.5-VL,
which differs from 5.24's in four places, is named as that version's."""

import functools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compare
from backends import positional
from embedding_parity import configs
from embedding_parity.conformance import api
from embedding_parity.conformance.kinds import KINDS, Outcome

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets", "configured.py")
KIND = KINDS["mrope_positions"]
RULE = positional.MROPE_POSITION_RULES["transformers 5.24"]


def port(**changes):
    """A port of the builder that makes the rule's choices, some changed."""

    def f(input_ids, types, images, videos, seconds, mask):
        return positional.mrope_positions_by(
            types,
            images,
            videos,
            seconds,
            mask,
            spatial_merge_size=2,
            tokens_per_second=2,
            **{**RULE, **changes},
        )

    return f


def judged(function, preset="qwen2.5-vl-7b") -> dict:
    """{check: (status, detail)}, as the worker reads a pair back (one integer array)."""
    found = {}
    for case in KIND.cases(configs.preset(preset).options("mrope_positions")):
        positions, deltas = function(*KIND.arguments(case.params))
        packed = np.concatenate([positions.ravel(), deltas.ravel()])
        verdict = KIND.judge(case, Outcome(array=packed))
        found[case.check] = (verdict.status, verdict.detail)
    return found


def test_a_correct_port_conforms_bit_for_bit():
    found = judged(port())
    assert set(found) == {
        "image and text",
        "video at half-second steps",
        "video then text",
        "left padding",
    }
    assert all(v == ("conforms", "exact") for v in found.values()), found


@pytest.mark.parametrize(
    "changes, check, words",
    [
        (
            {"step_cast_first": True},
            "video at half-second steps",
            "second_per_grid_t cast to an integer before the multiply",
        ),
        (
            {"advance": "grid max + 1"},
            "video then text",
            "the text after a video resumes at the grid's largest position + 1",
        ),
        ({"padded": 1}, "left padding", "padded slots hold 1 (transformers 4.57.1)"),
        ({"delta_counts": "row"}, "left padding", "each row's delta counted over the padded row"),
        (
            dict(positional.MROPE_POSITION_RULES["transformers 4.57.1"]),
            "left padding",
            "transformers 4.57.1's rule",
        ),
    ],
)
def test_each_mistake_and_the_older_rule_is_named(changes, check, words):
    status, detail = judged(port(**changes))[check]
    assert status == "differs" and words in detail, detail


def test_constant_temporal_ids_and_one_rows_delta_are_named():
    def constant(*arguments):
        positions, deltas = port()(*arguments)
        types = arguments[1]
        for row in range(types.shape[0]):
            for start in np.flatnonzero((types[row] != 0) & ~np.r_[False, types[row][:-1] != 0]):
                run = start + np.flatnonzero(np.cumprod(types[row][start:] != 0))
                positions[0, row, run] = positions[0, row, start]
        return positions, deltas

    assert "constant temporal ids" in judged(constant)["video then text"][1]

    def one_delta(*arguments):
        positions, deltas = port()(*arguments)
        return positions, np.broadcast_to(deltas[:1], deltas.shape)

    assert "row 0's decode delta for every row" in judged(one_delta)["left padding"][1]


def test_a_pair_of_the_wrong_shape_is_told_what_to_return():
    case = KIND.cases({})[0]
    positions, _ = port()(*KIND.arguments(case.params))
    verdict = KIND.judge(case, Outcome(array=positions.ravel()))
    assert (
        verdict.status == "differs"
        and "return the pair as transformers' get_rope_index" in verdict.detail
    )


@settings(max_examples=30, deadline=None)
@given(
    runs=st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(1, 3)), min_size=1, max_size=5),
    pads=st.integers(0, 4),
    second=st.sampled_from([0.5, 1.0, 2.0, 3.0]),
)
def test_the_builders_invariants(runs, pads, second):
    """Text alone is arange on all three rows; padding moves no token's position; a decode step
    continues at max + 1; every grid's h and w rows start where its t row does."""
    types, images, videos = [0] * pads, [], []
    for kind, size in runs:
        if kind == 0:
            types += [0] * size
        else:
            (images if kind == 1 else videos).append([size if kind == 2 else 1, 4, 2 * size])
            types += [kind] * ((size if kind == 2 else 1) * 2 * size) + [0]  # then vision_end
    types = np.array([types])
    mask = np.ones_like(types)
    mask[0, :pads] = 0
    arguments = (types, np.array(images).reshape(-1, 3), np.array(videos).reshape(-1, 3))
    seconds = np.full(len(videos), second, np.float32)
    padded, delta = positional.mrope_position_ids(*arguments, seconds, mask, tokens_per_second=2)
    alone, _ = positional.mrope_position_ids(
        types[:, pads:], *arguments[1:], seconds, tokens_per_second=2
    )
    np.testing.assert_array_equal(padded[:, :, pads:], alone)
    assert np.all(padded[:, :, :pads] == 0)
    assert padded.max() + 1 == mask.sum() + delta[0, 0]
    text = types[0, pads:] == 0
    np.testing.assert_array_equal(alone[0, 0, text], alone[1, 0, text])
    np.testing.assert_array_equal(alone[1, 0, text], alone[2, 0, text])


def test_check_runs_a_port_through_the_worker(capsys):
    argv = ["check", f"{TARGETS}:qwen2_5_vl_positions", "--kind", "mrope_positions"]
    assert compare.main([*argv, "--model", "qwen2.5-vl-7b"]) == 0
    out = capsys.readouterr().out
    assert "spatial_merge_size 2, tokens_per_second 2" in out and "left padding" in out


def test_a_model_whose_builder_the_kit_does_not_know_is_refused(capsys):
    argv = ["check", f"{TARGETS}:qwen2_5_vl_positions", "--kind", "mrope_positions"]
    assert compare.main([*argv, "--model", "llama-3.2-1b"]) == 2
    assert (
        "the kit checks the position builders (get_rope_index) of Qwen2.5-VL, Qwen3-VL, "
        "Qwen3.5 and GLM-4V, not llama-3.2-1b's" in capsys.readouterr().err
    )


# --- Qwen3-VL's, Qwen3.5's and GLM-4V's builder: a grid per video frame ---------------------


def test_the_frame_splitting_builder_holds_a_correct_port_and_names_its_mistakes():
    split = port(frames="split")
    for preset in ("qwen3-vl-8b", "glm-4.1v-9b", "qwen3.5-27b"):
        found = judged(split, preset)
        assert "video frames between timestamps" in found
        assert all(v == ("conforms", "exact") for v in found.values()), (preset, found)
    for changes, words in (
        ({"padded": 1}, "padded slots hold 1, where 5.24 leaves them 0"),
        ({"delta_counts": "row"}, "each row's delta counted over the padded row, where"),
    ):
        status, detail = judged(port(frames="split", **changes), "qwen3-vl-8b")["left padding"]
        assert status == "differs" and words in detail, detail
        assert "4.57.1" not in detail  # that version's notes are Qwen2.5-VL's
    # Qwen2.5-VL's builder on a video between timestamps looks for one grid of frames in one run
    case = KIND.cases(configs.preset("qwen3-vl-8b").options("mrope_positions"))[1]
    with pytest.raises(ValueError, match=r"3 run\(s\) of video tokens .* for 1 grid\(s\) in video"):
        port()(*KIND.arguments(case.params))


@functools.cache
def _qwen3_vl_model():
    """A tiny Qwen3VLModel (its builder reads spatial_merge_size 2 alone)."""
    from transformers import Qwen3VLConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

    tiny = {"hidden_size": 16, "intermediate_size": 16, "num_attention_heads": 2}
    text = {**tiny, "num_key_value_heads": 1, "num_hidden_layers": 1, "head_dim": 8}
    text["rope_parameters"] = {"rope_type": "default", "mrope_section": [2, 1, 1]}
    vision = {**tiny, "depth": 1, "num_heads": 2, "out_hidden_size": 16}
    vision["deepstack_visual_indexes"] = []
    return Qwen3VLModel(Qwen3VLConfig(text_config=text, vision_config=vision)).eval()


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(1, 3)), min_size=1, max_size=4),
        min_size=1,
        max_size=2,
    ),
    pads=st.integers(0, 3),
)
def test_the_frame_splitting_builder_is_qwen3_vls_bit_for_bit(rows, pads):
    """Random rows of text, images and videos (each frame between timestamp text), left-padded:
    mrope_position_ids(frames="split") equals transformers' Qwen3VLModel.get_rope_index."""
    import torch

    made, images, videos = [], [], []
    for runs in rows:
        types = []
        for kind, size in runs:
            if kind == 0:
                types += [0] * size
            elif kind == 1:
                images.append([1, 2, 2 * size])
                types += [1] * size + [0]
            else:  # size frames of 2 x 2 patches, one merged token each, a timestamp before
                videos.append([size, 2, 2])
                types += [0, 2] * size + [0]
        made.append(types)
    length = max(len(types) for types in made) + pads
    types = np.array([[0] * (length - len(t)) + t for t in made])
    mask = np.ones_like(types)
    for row, t in enumerate(made):
        mask[row, : length - len(t)] = 0
    images, videos = np.array(images).reshape(-1, 3), np.array(videos).reshape(-1, 3)
    ours = positional.mrope_position_ids(types, images, videos, None, mask, frames="split")
    theirs = _qwen3_vl_model().get_rope_index(
        torch.from_numpy(types),
        torch.from_numpy(types),
        torch.from_numpy(images) if len(images) else None,
        torch.from_numpy(videos) if len(videos) else None,
        torch.from_numpy(mask),
    )
    np.testing.assert_array_equal(ours[0], theirs[0].numpy())
    np.testing.assert_array_equal(ours[1], theirs[1].numpy())


def test_every_token_numbered_as_text_is_named():
    def as_text(input_ids, types, images, videos, seconds, mask):
        positions = np.zeros((3, *types.shape), np.int64)
        for row in range(types.shape[0]):
            kept = mask[row].astype(bool)
            positions[:, row, kept] = np.arange(int(kept.sum()))
        return positions, np.zeros((types.shape[0], 1), np.int64)

    for preset in ("qwen2.5-vl-7b", "glm-4.1v-9b"):
        status, detail = judged(as_text, preset)["image and text"]
        assert status == "differs" and "every token numbered as text" in detail, detail


def test_the_presets_vision_fields_are_their_classes():
    assert configs.preset("qwen2.5-vl-7b").vision == {
        "spatial_merge_size": 2,
        "tokens_per_second": 2,
        "frames": "whole",
    }
    bare = configs.from_fields({"model_type": "qwen2_5_vl"}, "bare", "test", reader="kit")
    from transformers import Glm4vConfig, Qwen2_5_VLConfig, Qwen3VLConfig

    theirs = Qwen2_5_VLConfig().vision_config
    assert bare.vision == {
        "spatial_merge_size": theirs.spatial_merge_size,
        "tokens_per_second": theirs.tokens_per_second,
        "frames": "whole",
    }
    for preset, config in (("qwen3-vl-8b", Qwen3VLConfig), ("glm-4.1v-9b", Glm4vConfig)):
        merge = config().vision_config.spatial_merge_size  # the presets give no vision_config
        assert configs.preset(preset).vision == {"spatial_merge_size": merge, "frames": "split"}
    report = api.check(port(), "mrope_positions", config="qwen2.5-vl-7b", framework="numpy")
    assert report.conforms


def test_a_merge_the_battery_is_not_sized_for_is_refused():
    from embedding_parity.cli import UsageError

    fields = {"model_type": "qwen2_5_vl", "vision_config": {"spatial_merge_size": 4}}
    config = configs.from_fields(fields, "merge 4", "test", reader="kit")
    with pytest.raises(UsageError, match="spatial_merge_size 4"):
        config.options("mrope_positions")


# --- the builder's arguments: each bad one refused in one line, as the --config reader does -----

VIDEO_ROW = np.array([[0, *[2] * 8, 0]])  # text, a video grid (2, 4, 4) merged by 2, text
BUILT = {
    "mm_token_type_ids": VIDEO_ROW,
    "image_grid_thw": None,
    "video_grid_thw": [[2, 4, 4]],
    "second_per_grid_ts": [0.5],
}


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"second_per_grid_ts": [float("nan")]}, ValueError, r"second_per_grid_ts\[0\] is nan"),
        ({"second_per_grid_ts": [-1.0]}, ValueError, r"_ts\[0\] is -1.0: .*positive"),
        ({"second_per_grid_ts": [1e30]}, ValueError, "1e\\+30, past 16777216"),
        ({"second_per_grid_ts": [0.5, 0.5]}, ValueError, r"shape \(2,\) where video_grid_thw"),
        ({"second_per_grid_ts": ["1"]}, TypeError, "second_per_grid_ts must be numbers"),
        ({"spatial_merge_size": 0}, ValueError, r"spatial_merge_size 0 must be .* \[1, 65536\]"),
        ({"spatial_merge_size": 2.0}, TypeError, "spatial_merge_size must be an integer"),
        ({"tokens_per_second": 2**17}, ValueError, "tokens_per_second 131072 must be"),
        ({"video_grid_thw": []}, ValueError, r"1 run\(s\) of video tokens .* for 0 grid\(s\)"),
        ({"image_grid_thw": [[1, 4, 4]]}, ValueError, r"0 run\(s\) of image tokens .* for 1"),
        ({"video_grid_thw": [[2, 5, 4]]}, ValueError, r"\(2, 5, 4\): .* multiples of spatial"),
        ({"video_grid_thw": [[0, 4, 4]]}, ValueError, r"\(0, 4, 4\): t, h and w must be at least"),
        ({"video_grid_thw": [2, 4, 4]}, ValueError, r"video_grid_thw must be \(n, 3\)"),
        ({"mm_token_type_ids": VIDEO_ROW + 1}, ValueError, r"mm_token_type_ids\[0, 1\] is 3"),
        ({"mm_token_type_ids": VIDEO_ROW[0]}, ValueError, r"must be \(B, T\)"),
        ({"mm_token_type_ids": VIDEO_ROW * 1.0}, TypeError, "must be integers, got dtype float64"),
        ({"attention_mask": 2 * np.ones((1, 10))}, TypeError, "attention_mask must be integers"),
        ({"attention_mask": np.full((1, 10), 2)}, ValueError, r"attention_mask\[0, 0\] is 2"),
        ({"attention_mask": np.ones((1, 9), int)}, ValueError, r"shape \(1, 9\) where"),
    ],
)
def test_each_bad_argument_of_the_builder_is_refused_in_one_line(changes, error, message):
    """NaN seconds gave positions of -9.2e18, a merge of 0 ZeroDivisionError, a missing grid an
    empty StopIteration: every argument is checked before the positions are built."""
    arguments = {**BUILT, **changes}
    with pytest.raises(error, match=message) as raised:
        positional.mrope_position_ids(**arguments)
    assert "\n" not in str(raised.value)


def test_the_builder_and_the_config_reader_refuse_a_setting_in_the_same_words():
    with pytest.raises(ValueError) as library:
        positional.mrope_position_ids(**BUILT, spatial_merge_size=0)
    fields = {"model_type": "qwen2_5_vl", "vision_config": {"spatial_merge_size": 0}}
    with pytest.raises(configs.UsageError) as cli:
        configs.from_fields(fields, "merge 0", "config.json", reader="kit")
    assert str(cli.value) == f"config.json: vision_config {library.value}"
