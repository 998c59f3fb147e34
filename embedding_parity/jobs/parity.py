"""Every backend on the same weights, held to one reference.

Learned positions are held bit for bit to the NumPy expression
``token_table[token_ids] + position_table[start:start + T]``; sinusoidal positions and RoPE
to a float64 reference within the derived tolerance of ``backends.positional``.
"""

from __future__ import annotations

import numpy as np

import backends
from backends import positional, quantized, validation

# The result types live below the jobs and the pictures (results/); importable here as before.
from embedding_parity.results.parity import Result, Run, backends_run, same_bits  # noqa: F401

SEED_TOKENS = (5, 10, 7, 21)  # the seed demo's tokens, ALiBi's and T5's too (jobs.bias)


def cast_note(source: str, tables, dtype: np.dtype) -> list[str]:
    """A line that says so when a file's tables (None for a missing one) are computed in
    another dtype than their own, and whether that rounded them."""
    quantized_tables = [t for t in tables if isinstance(t, quantized.QuantizedTable)]
    memory = [f"{source}'s token table: {quantized.describe(t)}" for t in quantized_tables]
    found = [t for t in tables if t is not None and not isinstance(t, quantized.QuantizedTable)]
    return memory + _cast_note(source, found, dtype)


def _cast_note(source: str, found, dtype: np.dtype) -> list[str]:
    if all(table.dtype == dtype for table in found):
        return []
    names = list(dict.fromkeys(table.dtype.name for table in found))
    one = len(names) == 1 and names[0] in backends.DTYPES
    keeps = f"; --dtype {names[0]} keeps them" if one else ""
    exact = all(
        np.array_equal(table.astype(dtype).astype(table.dtype), table, equal_nan=True)
        for table in found
    )
    how = "exactly" if exact else "rounded"
    held = " and ".join(names)
    return [f"{source}'s tables are {held}: computed in {dtype.name}, {how}{keeps}"]


def reference(token_table, position_table, token_ids, start: int) -> np.ndarray:
    """The seed's expression, the oracle every backend is held to."""
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def run_learned(names, token_table, position_table, token_ids, start: int = 0) -> list[Result]:
    """Learned positions: each backend's layer on the same tables and ids, held bitwise."""
    # The same checks the layers make, so the NumPy expression never wraps a negative id.
    validation.check_tables(token_table, position_table)
    validation.check_call(token_ids, start, len(token_table), len(position_table))
    expected = reference(token_table, position_table, token_ids, start)
    results = []
    for name in names:
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(token_table, position_table)
        panels = {
            "token embeddings": be.to_numpy(layer.token_embeddings(token_ids)),
            "position embeddings": be.to_numpy(
                layer.position_embeddings(start, token_ids.shape[-1])
            ),
            "token + position": be.to_numpy(layer(token_ids, start=start)),
        }
        results.append(Result(name, panels, panels["token + position"], expected))
    return results


def run_sinusoidal(
    names, token_table, token_ids, start: int, max_seq_len: int, *, layout: str, base: float
) -> list[Result]:
    """Sinusoidal positions: each backend builds its own table; held to the float64 sum."""
    # Built first: the layers check every argument before the reference is formed.
    options = {
        "positions": "sinusoidal",
        "max_seq_len": max_seq_len,
        "layout": layout,
        "base": base,
    }
    layers = [
        (name, backends.get(name).TokenPositionEmbedding(token_table, **options)) for name in names
    ]
    length = token_ids.shape[-1]
    validation.check_call(token_ids, start, len(token_table), max_seq_len)
    table = positional.sinusoidal_table(max_seq_len, token_table.shape[1], base=base, layout=layout)
    expected = token_table[token_ids].astype(np.float64) + table[start : start + length]
    tolerance = positional.sum_tolerance(
        token_table.dtype, start + length - 1, float(np.abs(expected).max(initial=0)), base=base
    )
    results = []
    for name, layer in layers:
        be = backends.get(name)
        panels = {
            "token embeddings": be.to_numpy(layer.token_embeddings(token_ids)),
            "sinusoidal position embeddings": be.to_numpy(layer.position_embeddings(start, length)),
            "token + position": be.to_numpy(layer(token_ids, start=start)),
        }
        results.append(Result(name, panels, panels["token + position"], expected, tolerance))
    return results


def run_rope(
    names, token_table, token_ids, start: int, *, layout: str, base: float
) -> list[Result]:
    """RoPE: token rows (no position added) rotated at positions start .. start + T - 1."""
    validation.check_call(token_ids, start, len(token_table), None)
    validation.check_even_dim(token_table.shape[1], "RoPE")
    positions = np.arange(start, start + token_ids.shape[-1])
    rows = token_table[token_ids]
    expected = positional.apply_rope(rows, positions, base=base, layout=layout)
    magnitude = 2 * float(np.abs(rows.astype(np.float64)).max(initial=0))  # max |a| + |b|
    tolerance = positional.tolerance(
        token_table.dtype, float(positions.max(initial=0)), base=base, magnitude=magnitude
    )
    results = []
    for name in names:
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(token_table, positions="none")
        x = layer(token_ids)  # (..., T, dim): position enters through the rotation
        rotated = be.to_numpy(be.apply_rope(x, positions, base=base, layout=layout))
        panels = {"token embeddings": be.to_numpy(x), f"after RoPE ({layout})": rotated}
        results.append(Result(name, panels, rotated, expected, tolerance))
    return results


def run_configured_rope(names, config, token_table, token_ids, start: int = 0) -> list[Result]:
    """A model's rotation (``configs.Configuration``): each backend's token rows (Gemma's
    scaled by sqrt(hidden_size) rounded first, held bit for bit), the first head_dim dims
    rotated by the config's rule at positions start .. start + T - 1, held element by element
    to the float64 reference within ``positional.rope_bound``. A model whose layers rotate
    differently: every layer type's rule (``apply_layer_rope``, each type at its own head
    width, a NoPE type held to x bit for bit), the results side by side."""
    validation.check_call(token_ids, start, len(token_table), None)
    positions = np.arange(start, start + token_ids.shape[-1])
    if config.embed_scale:
        rows, lookup = positional.scaled_embedding(token_table, token_ids), "ScaledWordEmbedding"
    else:
        rows, lookup = token_table[token_ids], "TokenPositionEmbedding"
    turns = _turns(config, rows, positions, token_table.dtype)
    expected = np.concatenate([turn[3] for turn in turns], axis=-1)
    bound = np.concatenate([turn[4] for turn in turns], axis=-1)
    widest = max(turn[1] for turn in turns)
    results = []
    for name in names:
        be = backends.get(name)
        if config.embed_scale:
            layer = be.ScaledWordEmbedding(token_table)
        else:
            layer = be.TokenPositionEmbedding(token_table, positions="none")
        x = layer(token_ids)
        turned = {
            heading: be.to_numpy(call(be, x[..., :head])) for heading, head, call, *_ in turns
        }
        x = be.to_numpy(x)
        failures = [] if same_bits(x, rows) else [f"its {lookup} rows are not the reference's bits"]
        heading = "token rows x sqrt(hidden), rounded first" if config.embed_scale else "token rows"
        output = np.concatenate(list(turned.values()), axis=-1)
        tolerance = float(bound.max(initial=0))
        panels = {heading: x[..., :widest], **turned}
        results.append(Result(name, panels, output, expected, tolerance, bound, failures))
    return results


def _turns(config, rows, positions, dtype) -> list[tuple]:
    """(panel heading, head width, call(be, x), float64 reference, bound) of each rotation the
    config runs: its rule, or each layer type's."""
    head = config.head_dim
    if config.layer_types:
        layers, widths = config.rope_by_layer_type(), config.layer_head_dims()
        turns = []
        for t in config.layer_types:
            width = widths[t.name]
            x = rows[..., :width]
            if t.rotates:
                expected = positional.apply_rope(x, positions, **layers[t.name])
                bound = positional.rope_bound(x, positions, **layers[t.name], dtype=dtype)
                heading = f"{t.name} layers\n({t.brief()})"
            else:  # NoPE: x back bit for bit
                expected, bound = x.astype(np.float64), np.zeros(x.shape)
                heading = f"{t.name} layers\n(NoPE: x as it is)"

            def call(be, x, name=t.name):
                return be.apply_layer_rope(x, positions, name, layers=layers)

            turns.append((heading, width, call, expected, bound))
        return turns
    rope = config.rope_options()
    rule = "no scaling" if config.scaling is None else config.scaling["rope_type"]
    x = rows[..., :head]
    if config.mrope:  # text tokens: the t, h and w rows equal, each slot at the token's position
        expected = positional.apply_mrope(
            x,
            np.stack([positions] * 3),
            section=config.mrope[1],
            mrope_layout=config.mrope[0],
            base=config.rope_theta,
            layout=config.layout,
            rotary_dim=config.rotary_dim,
        )
        plain = {k: v for k, v in rope.items() if k != "mrope"}
        bound = positional.rope_bound(x, positions, **plain, dtype=dtype)
        at = np.stack([positions] * 3)
    else:
        expected = positional.apply_rope(x, positions, **rope)
        bound = positional.rope_bound(x, positions, **rope, dtype=dtype)
        at = positions

    def call(be, x):
        return be.apply_rope(x, at, **rope)

    return [(f"after RoPE ({rule})", head, call, expected, bound)]


def rule_positions(config, token_ids, be=positional):
    """(B, T) the position ids a learned-position model's rule gives ``token_ids``, unpadded
    (an all-ones mask: every row reads start, start + 1, ... unless a RoBERTa id is its pad),
    by the reference or by a backend ``be`` (the same signature)."""
    batch = np.atleast_2d(token_ids)
    rule = {"rule": config.position_rule, "padding_idx": config.pad_token_id}
    return be.position_ids(batch, np.ones_like(batch), **rule)


def run_configured_learned(names, config, tables, token_ids, token_type_ids=None) -> list[Result]:
    """A learned-position model's input layer (``configs.Configuration``), each backend's on the
    same tables, held bit for bit to the model's own expression. The position ids by the
    model's rule (OPT's and BART's offset 2, RoBERTa's count from pad_token_id + 1), each
    backend's own ``position_ids`` held to them; then, for a model with token types (``tables``
    the word, token type and position tables: BERT's, RoBERTa's), ``BertEmbeddings``, (word +
    type) + position, each addition rounded in that order; for the others (the token and
    position tables) the token rows plus the position rows from the first id on."""
    ids = rule_positions(config, token_ids)
    start, length = int(ids[0, 0]), token_ids.shape[-1]
    if token_type_ids is not None:
        word, types, position = tables
        expected = positional.bert_embeddings(
            word, types, position, token_ids, token_type_ids, start
        )
    else:
        expected = reference(*tables, token_ids, start)
    results = []
    for name in names:
        be = backends.get(name)
        found = be.to_numpy(rule_positions(config, token_ids, be))
        failures = [] if np.array_equal(found, ids) else [f"its position ids are {found[0]}"]
        if token_type_ids is not None:
            layer = be.BertEmbeddings(word, types, position)
            out = be.to_numpy(layer(token_ids, token_type_ids, start))
            panels = {  # the three tables' rows (the same for every backend), then its sum
                "word rows": word[token_ids],
                "token type rows": types[token_type_ids],
                f"position rows {start}..{start + length - 1}": np.broadcast_to(
                    position[start : start + length], out.shape
                ),
                "(word + type) + position": out,
            }
        else:
            layer = be.TokenPositionEmbedding(*tables)
            out = be.to_numpy(layer(token_ids, start=start))
            panels = {
                "token embeddings": be.to_numpy(layer.token_embeddings(token_ids)),
                f"position rows {start}..{start + length - 1}": be.to_numpy(
                    layer.position_embeddings(start, length)
                ),
                "token + position": out,
            }
        results.append(Result(name, panels, out, expected, failures=failures))
    return results


def run_tokens(names, token_table, token_ids) -> list[Result]:
    """A model without a position table (RoPE): each backend's token lookup, held bitwise; a
    quantized table's to gguf.quants' dequantize-then-gather of its rows."""
    validation.check_token_ids(token_ids, len(token_table))
    if isinstance(token_table, quantized.QuantizedTable):
        expected = quantized.owner_rows(token_table, token_ids)
    else:
        expected = token_table[token_ids]
    results = []
    for name in names:
        be = backends.get(name)
        layer = be.TokenPositionEmbedding(token_table, positions="none")
        panels = {"token embeddings": be.to_numpy(layer(token_ids))}
        results.append(Result(name, panels, panels["token embeddings"], expected))
    return results
