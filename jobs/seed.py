"""The seed demo and its variations: random tables from one seeded generator, every backend
run on them, under each positional scheme."""

from __future__ import annotations

import numpy as np

import backends
from backends import validation
from jobs.parity import Run, run_learned, run_rope, run_sinusoidal, run_tokens

SEED_TOKENS = (5, 10, 7, 21)
SCHEMES = ("learned", "sinusoidal", "rope")
LAYOUTS = {"sinusoidal": "interleaved", "rope": "half"}  # each scheme's default layout


def run(
    names,
    tokens=SEED_TOKENS,
    *,
    vocab_size: int = 100,
    dim: int = 10,
    max_seq_len: int = 16,
    start: int = 0,
    batch: int | None = None,
    seed: int = 0,
    dtype: str = "float32",
    scheme: str = "learned",
    layout: str | None = None,
    base: float = 10000.0,
    tables: tuple | None = None,
    source: str | None = None,
) -> Run:
    """Tables from ``backends.shared_weights(..., seed=seed)``; ``tokens`` as one sequence,
    or with ``batch`` a random (batch, len(tokens)) batch drawn with the same seed (the
    tokens then give T, and are still checked against the vocabulary).

    ``tables``: (token_table, position_table or None) to run instead of random ones (a
    trained or downloaded pair, from ``source``), cast to ``dtype``; learned positions only,
    or the token rows alone when there is no position table.
    """
    if tables is not None:
        return _run_tables(
            names, tokens, tables, source, start=start, batch=batch, seed=seed, dtype=dtype
        )
    token_table, position_table = backends.shared_weights(
        vocab_size, dim, max_seq_len, seed=seed, dtype=dtype
    )
    token_ids = _token_ids(tokens, vocab_size, batch, seed)
    stop = start + token_ids.shape[-1]
    layout = layout or LAYOUTS.get(scheme)
    if scheme == "learned":
        results = run_learned(names, token_table, position_table, token_ids, start)
        heading = f"x = token_table[token_ids] + position_table[{start}:{stop}]"
    elif scheme == "sinusoidal":
        results = run_sinusoidal(
            names, token_table, token_ids, start, max_seq_len, layout=layout, base=base
        )
        heading = f"x = token_table[token_ids] + sinusoidal_table[{start}:{stop}]"
    elif scheme == "rope":
        results = run_rope(names, token_table, token_ids, start, layout=layout, base=base)
        heading = f"x = rope(token_table[token_ids], positions {start}..{stop - 1})"
    else:
        raise ValueError(
            f"unknown scheme {scheme!r}: use one of {', '.join(SCHEMES)} "
            "(alibi and t5 bias the attention scores instead: jobs.bias.run)"
        )
    settings = {}
    if scheme != "learned":
        heading += f"  (layout {layout}, base {base:g})"
        settings = {
            "name": scheme,
            "layout": layout,
            "base": base,
            "max_seq_len": max_seq_len,
            "start": start,
            "stop": stop,
            "token_table": token_table,
        }
    setting = f"vocab_size {vocab_size}, dim {dim}, max_seq_len {max_seq_len}, {dtype}, seed {seed}"
    return Run(results, heading, setting, _labels(token_ids, start), token_ids, scheme=settings)


def _run_tables(names, tokens, tables, source, *, start, batch, seed, dtype) -> Run:
    dtype = validation.resolve_dtype(dtype)
    token_table = tables[0].astype(dtype, copy=False)
    position_table = None if tables[1] is None else tables[1].astype(dtype, copy=False)
    vocab_size = len(token_table)
    token_ids = _token_ids(tokens, vocab_size, batch, seed)
    stop = start + token_ids.shape[-1]
    setting = f"{source}: vocab_size {vocab_size}, dim {token_table.shape[1]}"
    if position_table is None:
        if start:
            raise ValueError(f"{source} has no position table, so no --start: leave it out")
        results = run_tokens(names, token_table, token_ids)
        heading = "x = token_table[token_ids]  (the file has no position table)"
    else:
        results = run_learned(names, token_table, position_table, token_ids, start)
        heading = f"x = token_table[token_ids] + position_table[{start}:{stop}]"
        setting += f", max_seq_len {len(position_table)}"
    return Run(results, heading, f"{setting}, {dtype.name}", _labels(token_ids, start), token_ids)


def _token_ids(tokens, vocab_size: int, batch: int | None, seed: int) -> np.ndarray:
    """``tokens`` as one sequence (T,), checked; or a random (batch, T) batch from ``seed``
    (the tokens then give T, and are still checked against the vocabulary)."""
    token_ids = validation.check_token_ids(np.array(tokens, dtype=np.int64), vocab_size)
    if batch is None:
        return token_ids
    return np.random.default_rng(seed).integers(0, vocab_size, size=(batch, len(tokens)))


def _labels(token_ids: np.ndarray, start: int) -> list[str]:
    first = token_ids if token_ids.ndim == 1 else token_ids[0]
    return [f"token #{t} @ pos {start + i}" for i, t in enumerate(first)]
