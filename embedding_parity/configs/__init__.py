"""A model's configuration, as the kit understands it: what a Hugging Face ``config.json`` (or
a GGUF file's metadata, or a bundled preset) says about the input layer and the rotation.

``read(path)`` and ``preset(name)`` return a ``Configuration``; a field that bears on the
input layer or the rotation and that the kit cannot honour is refused with one line
(``UsageError``), never ignored. Fields that bear on neither (the MLP, dropout, the
tokenizer) are not read at all.

The modules, from the bottom: ``configuration`` (what the kit understands), ``hf`` (a
config.json as transformers reads it), ``gguf`` (a GGUF file as llama.cpp reads it),
``presets`` (bundled config.json fields); this front reads a path or a preset name.
"""

from __future__ import annotations

import json
import os

from embedding_parity.cli import UsageError
from embedding_parity.configs.configuration import Configuration
from embedding_parity.configs.gguf import from_gguf
from embedding_parity.configs.hf import from_fields
from embedding_parity.configs.presets import PRESETS

__all__ = ["Configuration", "from_fields", "listing", "preset", "read"]


def read(path: str) -> Configuration:
    """A config.json (Hugging Face) or a .gguf file's metadata; UsageError in one line."""
    if path.endswith(".gguf"):
        return from_gguf(path)
    try:
        with open(path, encoding="utf-8") as file:
            fields = json.load(file)
    except OSError as error:
        raise UsageError(f"--config {path}: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"--config {path}: not a JSON file ({error})") from None
    if not isinstance(fields, dict):
        raise UsageError(
            f"--config {path}: a config.json holds one object, got {type(fields).__name__}"
        )
    return from_fields(
        fields, os.path.basename(os.path.dirname(os.path.abspath(path))) or path, f"--config {path}"
    )


def preset(name: str) -> Configuration:
    if name not in PRESETS:
        raise UsageError(f"--model {name!r}: no such preset; the presets are {', '.join(PRESETS)}")
    return from_fields(PRESETS[name]["fields"], name, f"--model {name}")


def listing() -> str:
    """The presets, one line each (``--model list``)."""
    return "\n".join(f"{name:<20} {p['about']}" for name, p in PRESETS.items())
