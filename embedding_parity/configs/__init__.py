"""A model's configuration, as the kit understands it: what a Hugging Face ``config.json`` (or
a GGUF file's metadata, or a bundled preset) says about the input layer and the rotation.

``read(path)`` and ``preset(name)`` return a ``Configuration``; a field that bears on the
input layer or the rotation and that the kit cannot honour is refused with one line
(``UsageError``), never ignored. Fields that bear on neither (the MLP, dropout, the
tokenizer) are not read at all.

The modules, from the bottom: ``configuration`` (what the kit understands), ``checks`` (each
field's type and range), ``defaults`` (transformers' config classes' defaults),
``hf_transformers`` (a config.json read by transformers itself) and ``hf`` (a config.json as
transformers reads it, by transformers where it is installed, else by the kit's own rules),
``gguf`` (a GGUF file as llama.cpp reads it), ``presets`` (bundled config.json fields),
``vision`` and ``vision_owner`` (a vision tower's config and what its modeling code fixes); this
front reads a path (a regular file of at most a few MB) or a preset name.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import replace

from embedding_parity import outputs
from embedding_parity.configs.configuration import Configuration
from embedding_parity.configs.gguf import from_gguf
from embedding_parity.configs.hf import from_fields
from embedding_parity.configs.presets import PRESETS, VISION_PRESETS
from embedding_parity.configs.vision import Tower
from embedding_parity.usage import UsageError

__all__ = ["Configuration", "from_fields", "listing", "preset", "read"]


MOST_CONFIG_BYTES = 4 << 20  # a config.json is a few KB (Phi-3's long-factor lists: 10 KB)
FLOAT64_DIGITS = len(str(int(sys.float_info.max)))  # 309: every number the kit reads fits
MOST_DEPTH = 32  # a config.json nests a few levels (text_config, rope_scaling, a factor list)


def read(path: str) -> Configuration:
    """A config.json (Hugging Face) or a .gguf file's metadata; UsageError in one line."""
    if path.endswith(".gguf"):
        return from_gguf(path)
    fields = load_json(path, f"--config {path}")
    if not isinstance(fields, dict):
        raise UsageError(
            f"--config {path}: a config.json holds one object, got {type(fields).__name__}"
        )
    config = from_fields(fields, _model_name(fields, path), f"--config {path}")
    return replace(config, tokenizer_size=tokenizer_size(os.path.dirname(path)))


def tokenizer_size(folder: str) -> int | None:
    """The ids of the tokenizer.json in ``folder`` (its vocabulary and added tokens, as
    the ``tokenizers`` library counts them), or None where there is none (or no library to
    read it); one that is there but unreadable (a FIFO, a folder, no permission) is refused,
    not passed over: the padding rows past its ids would go unchecked."""
    path = os.path.join(folder or ".", "tokenizer.json")
    if not os.path.lexists(path) or importlib.util.find_spec("tokenizers") is None:
        return None
    from tokenizers import Tokenizer

    try:
        with outputs.open_regular(path) as file:
            data = file.read()
    except outputs.Unreadable as why:
        raise UsageError(
            f"{path} {why}: the config's folder holds a tokenizer.json, read for its ids; make "
            "it a readable file, or move it away"
        ) from None
    try:
        return Tokenizer.from_buffer(data).get_vocab_size(with_added_tokens=True)
    except Exception as error:  # noqa: BLE001 - the library's own error, said in one line
        said = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise UsageError(f"{path}: not a tokenizer the tokenizers library reads: {said}") from None


def _model_name(fields: dict, path: str) -> str:
    """What a config.json's line calls the model: the checkpoint transformers saved it from
    (``_name_or_path``), else its model_type and the path as given, else the path (the file's
    folder says nothing in general: /work/config.json). A name that is not one short printable
    line is passed over, as the file's text is not the kit's to print."""
    saved, model_type = fields.get("_name_or_path"), fields.get("model_type")
    if _plain(saved):
        return saved
    return f"{model_type} ({path})" if _plain(model_type) else path


def _plain(name) -> bool:
    """A short name in one printable line (a Hugging Face repo id is at most 96 characters)."""
    return isinstance(name, str) and 0 < len(name) <= 96 and name.isprintable()


def load_json(path: str, where: str):
    """The JSON in ``path``, a regular UTF-8 file of at most MOST_CONFIG_BYTES (never a FIFO, a
    device, a folder); UsageError in one line naming ``where``."""
    try:
        text = outputs.read_text(path, MOST_CONFIG_BYTES)
    except outputs.Unreadable as why:
        raise UsageError(f"{where} {why}") from None
    try:
        fields = json.loads(text, parse_int=_integer)
    except json.JSONDecodeError as error:
        raise UsageError(f"{where}: not a JSON file ({error})") from None
    except RecursionError:
        raise UsageError(f"{where}: nested too deeply to be a config.json") from None
    if _depth(fields) > MOST_DEPTH:
        raise UsageError(
            f"{where}: nested over {MOST_DEPTH} levels deep; a config.json nests a few"
        )
    for field, value in _values(fields):
        if isinstance(value, _Digits):
            raise UsageError(
                f"{where}: {field} is an integer of {value.count} digits, past the "
                f"{sys.get_int_max_str_digits()} Python converts and the {FLOAT64_DIGITS} of "
                "the largest number a field can hold (float64's); correct it"
            )
    return fields


class _Digits:
    """An integer of more digits than Python converts, kept as its count for its field to be
    named once the whole file is read (json.loads alone says neither file nor field)."""

    def __init__(self, count: int):
        self.count = count


def _integer(digits: str):
    try:
        return int(digits)
    except ValueError:  # past sys.get_int_max_str_digits()
        return _Digits(len(digits.lstrip("-")))


def _values(fields):
    """(the field's name, its value) of every value in a config, nested ones named by their
    path ("rope_scaling factor", "long_factor[3]"), without recursion."""
    level = [("", fields)]
    while level:
        deeper = []
        for name, held in level:
            if isinstance(held, dict):
                deeper += [(f"{name} {key}".strip(), value) for key, value in held.items()]
            elif isinstance(held, list):
                deeper += [(f"{name}[{i}]", value) for i, value in enumerate(held)]
            else:
                yield name, held
        level = deeper


def _depth(value) -> int:
    """How deeply ``value``'s lists and objects nest, counted without recursion (the readers
    copy and compare values recursively)."""
    deepest, level = 0, [value]
    while containers := [held for held in level if isinstance(held, dict | list)]:
        deepest += 1
        level = [
            item
            for held in containers
            for item in (held.values() if isinstance(held, dict) else held)
        ]
    return deepest


def preset(name: str) -> Configuration:
    """A bundled preset (``presets.PRESETS``), read as its config.json would be: by the kit's
    own reader, which tests/test_config_reading.py holds equal to transformers' on every preset
    (so a process that reads one imports no transformers, nor the torch it imports); a vision
    tower's (``presets.VISION_PRESETS``) by transformers, whose code fixes its rule."""
    if name in VISION_PRESETS:
        return vision_preset(name)
    if name not in PRESETS:
        raise UsageError(
            f"--model {name!r}: no such preset; the presets are "
            f"{', '.join([*PRESETS, *VISION_PRESETS])}"
        )
    return from_fields(PRESETS[name]["fields"], name, f"--model {name}", reader="kit")


def vision_preset(name: str) -> Configuration:
    """A vision tower's preset (``presets.VISION_PRESETS``): its hub fields read by
    transformers' config class, the rule by its modeling code (or the preset's own rule)."""
    given = VISION_PRESETS[name]
    tower = Tower(name, given["fields"], f"--model {name}", True, given.get("rule"), name)
    tower.reading()  # the fields read now, as a config.json is
    return Configuration(name=name, model_type=given["fields"]["model_type"], tower=tower)


def listing() -> str:
    """The presets, one line each (``--model list``)."""
    every = {**PRESETS, **VISION_PRESETS}
    width = max(map(len, every))  # the longest name, dinov2-vit-l-14-original, keeps the column
    return "\n".join(f"{name:<{width}} {p['about']}" for name, p in every.items())
