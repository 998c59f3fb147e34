"""Every backend's arrays of a parity run as one .npz, readable without pickles."""

from __future__ import annotations

import numpy as np

from embedding_parity import outputs
from embedding_parity.results.parity import Run

_SAVED = {"token embeddings": "token", "position embeddings": "position"}


def save(path: str, done: Run) -> None:
    """``token_ids`` and, per backend, ``token_<backend>``, ``position_<backend>`` (not for a
    model without a position table) and ``sum_<backend>``, full width.

    bfloat16 is stored as float32 (exactly), since .npz has no bfloat16 without pickling.
    """
    arrays = {"token_ids": done.token_ids}
    for r in done.results:
        for heading, array in r.panels.items():
            if heading in _SAVED:
                arrays[f"{_SAVED[heading]}_{r.backend}"] = array
        arrays[f"sum_{r.backend}"] = r.output
    arrays = {
        k: v.astype(np.float32) if v.dtype.name == "bfloat16" else v for k, v in arrays.items()
    }
    with outputs.replacing(path) as out:
        np.savez(out, **arrays)
