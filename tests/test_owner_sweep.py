"""Every model type transformers knows whose text decoder rotates, read by the kit and held to
its own modeling code (embedding_parity/configs/sweep.py): none disagrees, each refusal names
its reason, and docs/owners.md is the table the sweep makes. The hand lists the kit keeps for
a reading without transformers (INTERLEAVED, SLIDING_ONLY, NO_ROPE_LAYERS, LAYER_HEAD_DIM) are
held to the same answers; OWN_ATTENTION_SCALE both ways (every type off that list is held to
head_dim ** -0.5 by the sweep itself, and every type on it, taken off, to another scale).

In the matrix tier: the sweep builds and runs about 200 models (a minute or two on 2 cores),
which the main tier's time cannot hold."""

import pathlib

import pytest

from embedding_parity.configs import hf, layers, owner, sweep
from embedding_parity.configs.configuration import OWN_ATTENTION_SCALE

pytestmark = pytest.mark.matrix

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "owners.md"


@pytest.fixture(scope="module")
def types():
    return sweep.model_types()


@pytest.fixture(scope="module")
def rows(types):
    return [sweep.sweep_one(name, fields) for name, fields in types.items()]


def test_no_model_type_is_read_otherwise_than_its_code_does(rows):
    disagreeing = [f"{row.model_type}: {row.said}" for row in rows if row.outcome == "disagrees"]
    assert disagreeing == []


def test_every_refusal_names_its_reason(rows):
    for row in rows:
        if row.outcome == "refused":
            assert len(row.said) > 20 and "\n" not in row.said, row


def test_the_docs_table_is_the_sweeps(rows):
    assert DOC.read_text() == sweep.markdown(rows)


def by_type(rows):
    return {row.model_type: row for row in rows}


def test_the_interleaved_list_is_what_the_code_pairs(rows, types):
    """Each listed type that the sweep confirms pairs (2i, 2i+1) in its code; each confirmed
    type read as interleaved is on the list, or its file says so (DeepSeek's rope_interleave)."""
    found = by_type(rows)
    for name in hf.INTERLEAVED & found.keys():
        if found[name].outcome == "confirmed":
            assert ", interleaved," in found[name].reading, name
    for name, row in found.items():
        if row.outcome == "confirmed" and ", interleaved," in row.reading:
            model_type = hf.text_fields(types[name], name)[1]  # a preset's, or the type itself
            assert model_type in hf.INTERLEAVED or types[name].get("rope_interleave"), name


def test_the_per_layer_lists_are_what_the_code_rotates(rows):
    """The types whose layers the kit maps by hand are confirmed layer by layer, or their code
    cannot run at its defaults (the kit then reads no verdict from them; Granite 4.0-H's real
    files are held in tests/test_config_models_2026.py)."""
    found = by_type(rows)
    listed = {
        *layers.SLIDING_ONLY, *layers.NO_ROPE_LAYERS, *layers.LAYER_HEAD_DIM,
        *layers.NO_ROTARY, *layers.ROTARY_NAMED,
    }
    for name in sorted(listed & found.keys()):
        row = found[name]
        ran = row.outcome == "confirmed"
        assert ran or row.said.startswith("its code could not be run"), row


def test_the_fields_the_kit_credits_to_a_few_classes_are_read_by_those_alone():
    """layers.OWNERS (the fields a file may give only for the classes that read them) held to
    transformers' config classes: every class whose own code names such a field is among the
    model types the kit credits it to (Gemma 3n's rope_local_base_freq was refused)."""
    import inspect

    from transformers import CONFIG_MAPPING, PretrainedConfig

    readers = {}
    for name in CONFIG_MAPPING.keys():
        module = inspect.getmodule(CONFIG_MAPPING[name])
        for cls in vars(module).values():
            mine = isinstance(cls, type) and cls.__module__ == module.__name__
            if mine and issubclass(cls, PretrainedConfig) and cls.model_type:
                source = inspect.getsource(cls)
                for field in layers.OWNERS:
                    if field in source:
                        readers.setdefault(field, set()).add(cls.model_type)
    for field, owners in layers.OWNERS.items():
        assert readers.get(field, set()) <= set(owners), (field, readers[field] - set(owners))


def test_the_types_listed_as_scaling_attention_their_own_way_do(types, monkeypatch):
    """configuration.OWN_ATTENTION_SCALE held the other way round: taken off the list, each
    listed type the sweep can run is seen by its own code to scale q . k otherwise than
    head_dim ** -0.5 (its field set away from that: query_pre_attn_scalar for Gemma 2 and 3,
    attention_multiplier for Granite; Gemma 3n's and 4's RMS-normalised q and k scale by 1)."""
    monkeypatch.setattr(owner, "OWN_ATTENTION_SCALE", {})
    for name in sorted(OWN_ATTENTION_SCALE.keys() & types.keys()):
        fields = {**types[name], "query_pre_attn_scalar": 64, "attention_multiplier": 0.5}
        row = sweep.sweep_one(name, fields)
        if row.said.startswith("its code could not be run"):
            continue  # Granite 4.0-H at its defaults; its real files: test_config_models_2026.py
        assert row.outcome == "refused" and ": its attention scales q . k by " in row.said, row
