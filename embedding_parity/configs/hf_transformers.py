"""A config.json read by transformers' own config classes, where transformers is installed:
``CONFIG_MAPPING[model_type]`` (or ``PretrainedConfig`` for a type transformers does not know)
built from the file's fields with ``from_dict`` (nothing from the hub, no remote code), its
``get_text_config()``, and the fields the kit needs read off that object. transformers'
logging and warnings are held back while it reads: the CLI prints the kit's lines only.
"""

from __future__ import annotations

import contextlib
import copy
import warnings

from embedding_parity.configs import checks, layers
from embedding_parity.configs.defaults import PLAIN

SAID = 200  # characters of transformers' refusal quoted (it may quote the whole value)


def transformers_reading(fields: dict, where: str) -> dict:
    """The reading (``hf.kit_reading``'s shape) of transformers' config object for ``fields``;
    UsageError in one line naming ``where`` and what transformers said where it refuses them."""
    try:
        with _quiet():
            from transformers import PretrainedConfig
    except Exception as error:
        said = (str(error).strip().splitlines() or [""])[0][:SAID]
        checks.refuse(
            where,
            f"transformers is installed but cannot be imported ({type(error).__name__}: "
            f"{said}): repair it, or uninstall it to read the file by the kit's own "
            "transcription of its rules",
        )
    with _quiet():
        try:
            config = _text_config(fields)
        except Exception as error:
            said = str(error).strip().splitlines() or [type(error).__name__]
            said = said[-1].strip()
            checks.refuse(where, f"transformers refuses it: {said[:SAID]}")
    with _quiet():  # a heterogeneous config warns of each model-wide read of a per-layer field
        per_layer = _per_layer(config, where)
        reading = {key: _global(config, key) for key in PLAIN}
    raw = fields.get("text_config") or fields
    reading["model_type"] = config.model_type or raw.get("model_type") or None
    rope = copy.deepcopy(getattr(config, "rope_parameters", None))
    if rope is None and type(config) is PretrainedConfig:
        # a model type transformers does not know keeps rope_theta as an attribute, which the
        # model's own code reads
        given = ("rope_theta", "partial_rotary_factor")
        rope = {key: getattr(config, key) for key in given if hasattr(config, key)} or None
    reading["rope"] = rope
    reading["layer_types"] = copy.deepcopy(getattr(config, "layer_types", None))
    no_rope = getattr(config, "no_rope_layers", None)
    reading["no_rope_layers"] = (
        list(no_rope) if reading["model_type"] in layers.NO_ROPE_LAYERS else None
    )
    reading["head_dims"] = per_layer
    return reading


# What a class may set per layer (its per_layer_config) that the kit reads: the head width.
PER_LAYER = {"head_dim"}
# And what it may set per layer that the kit's contracts do not depend on.
PER_LAYER_OTHER = {"num_key_value_heads", "sliding_window", "attention_chunk_size"}


def _per_layer(config, where: str) -> list | None:
    """Each layer's head_dim where the config is heterogeneous (transformers' per_layer_config:
    Gemma 4's global_head_dim on its full-attention layers), else None; a config that sets
    anything else the kit reads per layer is refused."""
    if not getattr(config, "is_heterogeneous", False):
        return None
    varying = set(config.per_layer_attributes or ())
    unread = sorted(varying - PER_LAYER - PER_LAYER_OTHER)
    if unread:
        checks.refuse(
            where,
            f"per_layer_config sets {', '.join(unread)} per layer, which the kit does not read "
            "per layer (it reads head_dim)",
        )
    if "head_dim" not in varying:
        return None
    return [layer.head_dim for layer in config.per_layer_config]


def _global(config, key: str):
    """A field of the config object; a heterogeneous config's model-wide value of a field its
    layers may override (transformers raises on plain access to those unless the config's
    allow_global_per_layer_attribute_access says the caller knows)."""
    if getattr(config, "is_heterogeneous", False):
        config.allow_global_per_layer_attribute_access = True
    return getattr(config, key, None)


def _text_config(fields: dict):
    """transformers' config object for the text model ``fields`` describe, its rope dict
    standardised again as the model's rotary module does when it is built (a field the file
    gives beside the dict, such as original_max_position_embeddings, is an attribute only
    then, and wins)."""
    config = _config(fields)
    if getattr(config, "rope_parameters", None) and hasattr(config, "standardize_rope_params"):
        config.standardize_rope_params()
    return config


def _config(fields: dict):
    from transformers import CONFIG_MAPPING, PretrainedConfig

    model_type = fields.get("model_type")
    if model_type in CONFIG_MAPPING:
        config = CONFIG_MAPPING[model_type].from_dict(copy.deepcopy(fields))
        text = config.get_text_config()
        if isinstance(text, PretrainedConfig):
            return text
    if isinstance(fields.get("text_config"), dict):
        return _config(fields["text_config"])
    return PretrainedConfig.from_dict(copy.deepcopy(fields))


@contextlib.contextmanager
def _quiet():
    """transformers' warnings and info lines held back (its logging level restored after)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers.utils import logging

        level = logging.get_verbosity()
        logging.set_verbosity_error()
        try:
            yield
        finally:
            logging.set_verbosity(level)
