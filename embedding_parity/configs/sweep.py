"""Every model type transformers knows whose text decoder rotates, read by the kit and held to
the model's own code (``owner``): the table of docs/owners.md.

A model type is swept where its config class's default config (a multimodal one's text config)
has a token vocabulary and its modeling module defines a rotary function
(``apply_rotary_pos_emb`` and kin); so is each bundled preset, a config shaped like a real
checkpoint. Each is read as a config.json with the kit's reading
(``hf.from_fields`` by transformers' config classes, without the hold) and the owner's code is
run on the same fields. Each row says how the kit reads the model and whether its code agrees,
or why the kit refuses it.

    python -m embedding_parity.configs.sweep > docs/owners.md
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from dataclasses import dataclass

from embedding_parity.configs import hf, owner
from embedding_parity.configs.configuration import Configuration, scaling_words, spans
from embedding_parity.configs.hf_transformers import _quiet
from embedding_parity.configs.presets import PRESETS
from embedding_parity.usage import UsageError


@dataclass(frozen=True)
class Row:
    model_type: str
    outcome: str  # "confirmed", "refused" or "disagrees"
    reading: str  # how the kit reads it (empty where it refuses)
    said: str  # the owner's code's answer, or the reason for the refusal


def model_types() -> dict[str, dict]:
    """{text model type: its default config's fields} for every model type whose text decoder
    rotates, in order of name; then each bundled preset that rotates (``preset NAME``), a
    config shaped like its real checkpoint (sliding patterns, partial rotation, scaling rules,
    NoPE layers)."""
    from transformers import CONFIG_MAPPING

    found = {}
    with _quiet():
        for name in sorted(CONFIG_MAPPING.keys()):
            try:
                text = CONFIG_MAPPING[name]().get_text_config()
            except Exception:  # a config class that needs arguments has no default to sweep
                continue
            vocabulary = isinstance(getattr(text, "vocab_size", None), int)
            if text.model_type in found or not vocabulary or not _rotates(type(text)):
                continue
            fields = text.to_dict()
            fields["model_type"] = text.model_type
            found[text.model_type] = fields
    presets = {
        f"preset {name}": preset["fields"]
        for name, preset in PRESETS.items()
        if hf.text_fields(preset["fields"], name)[1] not in hf.LEARNED
    }
    return dict(sorted(found.items())) | presets


def _rotates(config_class) -> bool:
    try:
        modeling = importlib.import_module(
            config_class.__module__.replace(".configuration_", ".modeling_")
        )
    except Exception:
        return False
    return any(name.startswith("apply_rotary") for name in vars(modeling))


def sweep_one(model_type: str, fields: dict) -> Row:
    """The kit's reading of one model type's fields, held to its code: a type the kit itself
    refuses to judge (``hf.UNREAD``) is held to its code as the kit would otherwise read it, and
    disagrees if the code confirms that reading (the refusal has gone stale)."""
    try:
        configuration = hf.from_fields(
            fields, model_type, model_type, reader="transformers", hold=False
        )
    except UsageError as error:
        return Row(model_type, "refused", "", _reason(str(error), model_type))
    if not configuration.rope:
        return Row(model_type, "refused", "", "the kit reads no rotation in it")
    reading = describe(configuration)
    if configuration.unconfirmed:
        finding = owner.compare(dataclasses.replace(configuration, unconfirmed=None), fields)
        if finding.agrees:
            stale = "the kit refuses it, but its code confirms the kit's reading: remove it from "
            return Row(model_type, "disagrees", reading, stale + "hf.UNREAD")
        return Row(model_type, "refused", reading, configuration.unconfirmed)
    finding = owner.compare(configuration, fields)
    return Row(model_type, OUTCOMES_BY_KIND[finding.kind], reading, finding.said)


# The sweep's outcome for each kind of the oracle's finding.
OUTCOMES_BY_KIND = {
    "agrees": "confirmed",
    "differs": "disagrees",
    "unread": "refused",
    "unrunnable": "refused",
}


def _reason(said: str, model_type: str) -> str:
    return said.removeprefix(f"{model_type}: ").strip()


def describe(configuration: Configuration) -> str:
    """The kit's reading in a table cell: rule, base, layout, rotated width, layers."""
    width = configuration.rotary_dim or configuration.head_dim
    said = (
        f"{scaling_words(configuration.scaling)}, base {configuration.rope_theta:g}, "
        f"{configuration.layout}, {width} of {configuration.head_dim} dims"
    )
    for group in configuration.layer_types:
        said += f"; {group.name} {spans(group.layers)}: {group.brief()}"
    return said


def markdown(rows: list[Row]) -> str:
    counts = {outcome: sum(row.outcome == outcome for row in rows) for outcome in OUTCOMES}
    presets = sum(row.model_type.startswith("preset ") for row in rows)
    lines = [
        "# Every model type transformers knows, held to its own code",
        "",
        "Generated by `python -m embedding_parity.configs.sweep > docs/owners.md` (transformers "
        f"{_version()}); tests/test_owner_sweep.py keeps it current. For each model type whose "
        "text decoder rotates, its default config (and each bundled preset, shaped like a real "
        "checkpoint) is read by the kit and the model's own modeling code is run on it "
        "(embedding_parity/configs/owner.py): the rotation each layer applies to a query, "
        "classified, beside the kit's reading. Where the two disagree, or the code cannot be "
        "run, the kinds that judge the rotation refuse the file in one line.",
        "",
        f"**{len(rows) - presets} model types and {presets} presets: {counts['confirmed']} "
        f"read and confirmed, {counts['refused']} refused with a reason, "
        f"{counts['disagrees']} disagreeing.**",
        "",
        "| model type | the kit's reading | the model's code |",
        "|---|---|---|",
    ]
    for row in rows:
        said = f"{row.outcome}: {_cell(row.said)}"
        lines.append(f"| `{row.model_type}` | {_cell(row.reading or 'refused')} | {said} |")
    return "\n".join(lines) + "\n"


OUTCOMES = ("confirmed", "refused", "disagrees")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _version() -> str:
    import transformers

    return transformers.__version__


def main() -> int:
    rows = [sweep_one(name, fields) for name, fields in model_types().items()]
    sys.stdout.write(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
