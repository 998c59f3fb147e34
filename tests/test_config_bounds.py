"""A config's factor or multiplier that would make a check's bound larger than the values it
bounds is refused where the config is read, in one line naming the file, the field, the value
and the smallest (or largest) that keeps the check's teeth; at that limit the check still tells
a wrong target from a right one."""

import json
import re

import numpy as np
import pytest

import compare
from backends import positional
from embedding_parity import configs
from embedding_parity.configs import checks
from embedding_parity.conformance import api, runner
from embedding_parity.conformance.kinds import rope
from embedding_parity.usage import UsageError

SMALL = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4}  # head_dim 16
LEAST = re.compile(r"give a factor of at least ([0-9.e+-]+)")


def written(tmp_path, fields: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    return str(path)


def refusal(path: str) -> str:
    with pytest.raises(UsageError) as info:
        configs.read(path)
    said = str(info.value)
    assert "\n" not in said and said.startswith(f"--config {path}: ")
    return said


def rotating(config):
    """A correct port of the config's rotation, in float64 rounded once."""

    def f(x, positions):
        turned = positional.apply_rope(
            x, positions, base=config.rope_theta, layout=config.layout, scaling=config.scaling
        )
        return turned.astype(x.dtype)

    return f


def not_rotating(x, positions):
    return x.copy()


def test_the_positions_the_bound_is_held_at_are_the_rope_kinds():
    longest = {rope.positions_of({"long": long}).max() for long in (False, True)}
    assert set(checks.CHECKED_POSITIONS) == longest


@pytest.mark.parametrize(
    "scaling, named",
    [
        ({"rope_type": "linear", "factor": 1e-300}, "linear scaling factor 1e-300"),
        ({"rope_type": "linear", "factor": 0.05}, "linear scaling factor 0.05"),
        (
            {"rope_type": "yarn", "factor": 1e-30, "original_max_position_embeddings": 4096},
            "yarn scaling factor 1e-30",
        ),
        (
            {
                "rope_type": "longrope",
                "short_factor": [1.0] * 8,
                "long_factor": [1.0] * 7 + [1e-9],
                "original_max_position_embeddings": 4096,
            },
            "longrope scaling long_factor[7] 1e-09",
        ),
    ],
)
def test_a_factor_that_makes_the_rope_bound_vacuous_is_refused_and_its_limit_has_teeth(
    tmp_path, scaling, named
):
    path = written(tmp_path, {**SMALL, "rope_scaling": scaling})
    said = refusal(path)
    assert named in said and "the rope check's bound is" in said
    least = float(LEAST.search(said).group(1))
    if "long_factor" in scaling:
        scaling = {**scaling, "long_factor": [1.0] * 7 + [least]}
    else:
        scaling = {**scaling, "factor": least}
    keeps_its_teeth(configs.read(written(tmp_path, {**SMALL, "rope_scaling": scaling})), said)


def keeps_its_teeth(config, said: str) -> None:
    """At the limit a refusal named, the check at the position it names (in the loosest dtype)
    still tells no rotation from a rotation."""
    position = int(re.search(r"at position (\d+) ", said).group(1))
    only = {15: "rotation", 131071: "long positions"}[position] + f" {checks.LOOSEST}"
    assert api.check(rotating(config), "rope", config=config, checks=[only]).conforms
    wrong = api.check(not_rotating, "rope", config=config, checks=[only])
    assert [c.status for c in wrong.checks] == ["differs"]


def test_check_and_seed_refuse_a_vacuous_factor_in_one_line(tmp_path, capsys):
    path = written(tmp_path, {**SMALL, "rope_scaling": {"rope_type": "linear", "factor": 1e-300}})
    target = f"{__file__}:not_rotating"
    for argv in (["check", target, "--kind", "rope", "--config", path], ["--config", path]):
        assert compare.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "linear scaling factor 1e-300" in err[0], err


GRANITE = {**SMALL, "model_type": "granite"}


@pytest.mark.parametrize("value", [1e308, 70000.0, 1e-300])
def test_a_multiplier_past_the_dtypes_range_is_refused(tmp_path, value):
    said = refusal(written(tmp_path, {**GRANITE, "embedding_multiplier": value}))
    assert f"embedding_multiplier {value!r} must be in [6.1e-05, 65504]" in said


@pytest.mark.parametrize("value", [1e308, 1e-300])
def test_a_scale_given_without_a_config_is_held_to_the_same_range(value):
    """The kind's embedding_scale option, given without a config (runner.run's options, an
    exported battery's), is read by the same rule as a config's field."""

    def infinite(token_table, token_ids, inputs_embeds):
        return np.full((*np.shape(token_ids), token_table.shape[1]), np.inf, token_table.dtype)

    scale = {"rule": "granite", "value": value}
    with pytest.raises(UsageError, match=r"must be in \[6.1e-05, 65504\]"):
        runner.run(infinite, "scaled_inputs", options={"embedding_scale": scale})


def test_at_the_largest_multiplier_an_infinite_answer_still_differs(tmp_path):
    path = written(tmp_path, {**GRANITE, "embedding_multiplier": 65504.0})

    def infinite(token_table, token_ids, inputs_embeds):
        rows = token_table[token_ids] if inputs_embeds is None else inputs_embeds
        return np.full(rows.shape, np.inf, rows.dtype)

    report = api.check(infinite, "scaled_inputs", config=path, checks=["ids float16"])
    assert [c.status for c in report.checks] == ["differs"]


@pytest.mark.parametrize("attention", [1e300, 1e6, 1e-6])
def test_a_yarn_attention_factor_outside_float16s_normal_numbers_is_refused(tmp_path, attention):
    # Before: 1e300 made every case "the kit failed to judge it: OverflowError"; at 1e6 and
    # 1e-6 transformers' own rotary differed in float16 (NaN, or the subnormals' spacing).
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    fields = {**SMALL, "rope_scaling": {**yarn, "attention_factor": attention}}
    said = refusal(written(tmp_path, fields))
    assert f"rope_scaling attention_factor {attention!r} must be in [6.1e-05, 65504]" in said
    fields["rope_scaling"]["attention_factor"] = 1.2
    assert configs.read(written(tmp_path, fields)).scaling["attention_factor"] == 1.2
