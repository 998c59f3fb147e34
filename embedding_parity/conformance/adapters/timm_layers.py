"""timm's ``resample_abs_pos_embed``, loaded from timm/layers/pos_embed.py with its two sibling
modules (_fx.py, helpers.py: torch alone) as a package of their own.

``import timm`` imports torchvision (timm/layers/create_norm.py), and PyPI's torchvision for
torch 2.13 (0.28.0) is a CUDA build whose operators do not register against the CPU torch
pinned here ("operator torchvision::nms does not exist"): timm is installed without its
dependencies (requirements-conformance.txt) and its package's __init__ is never run.

f(table, old_grid, new_grid, prefix_tokens) (the pos2d_resize kind), called as
``checkpoint_filter_fn`` calls it on a (1, prefix + h0 * w0, D) table: its defaults, bicubic
with antialias=True, computed in float32 and cast back."""

import importlib
import importlib.util
import os
import sys
import types

LAYERS = "embedding_parity_timm_layers"  # a package of timm/layers' files, without its __init__


def _pos_embed():
    if LAYERS not in sys.modules:
        found = importlib.util.find_spec("timm")
        if found is None:
            raise ImportError("timm is not installed: pip install --no-deps timm")
        package = types.ModuleType(LAYERS)
        package.__path__ = [os.path.join(found.submodule_search_locations[0], "layers")]
        sys.modules[LAYERS] = package
    return importlib.import_module(f"{LAYERS}.pos_embed")


resample_abs_pos_embed = _pos_embed().resample_abs_pos_embed


def resample(table, old_grid, new_grid, prefix_tokens):
    resized = resample_abs_pos_embed(
        table[None], list(new_grid), list(old_grid), num_prefix_tokens=prefix_tokens
    )
    return resized[0]
