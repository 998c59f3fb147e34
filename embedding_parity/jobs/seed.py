"""The seed demo (the default command): random tables from one seeded generator, or your own
--weights, every backend run on them under each positional scheme, against one reference.

    compare.py                                   # tokens 5 10 7 21, vocab 100, dim 10
    compare.py --dtype bfloat16 --batch 3 --start 5
    compare.py --scheme sinusoidal --layout concat   # or --scheme rope; --base
    compare.py --scheme alibi --heads 8          # or t5: position as a bias on the scores
    compare.py --weights trained.safetensors --tokens 0 10 2
    compare.py --model llama-3.2-1b --start 30000  # a model's rotation: its rule, head_dim
    compare.py --config path/to/config.json         # ... from its config.json (or .gguf)

Exit status: 0 every backend agrees (bit-identical to the NumPy expression for learned
positions, within the derived tolerance of the float64 reference for sinusoidal and RoPE),
1 a backend differs, 2 bad arguments or input.
"""

from __future__ import annotations

import os

import numpy as np

import backends
from backends import quantized, validation
from embedding_parity import outputs
from embedding_parity.jobs import command
from embedding_parity.jobs.parity import (
    SEED_TOKENS,
    cast_note,
    rule_positions,
    run_configured_learned,
    run_configured_rope,
    run_learned,
    run_rope,
    run_sinusoidal,
    run_tokens,
)
from embedding_parity.results.parity import Run
from embedding_parity.usage import UsageError

COMMAND = "seed"

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
    token_table = quantized.as_dtype(tables[0], dtype)  # a quantized one stays quantized
    position_table = None if tables[1] is None else tables[1].astype(dtype, copy=False)
    vocab_size = len(token_table)
    token_ids = _token_ids(tokens, vocab_size, batch, seed)
    stop = start + token_ids.shape[-1]
    setting = f"{source}: vocab_size {vocab_size}, dim {token_table.shape[1]}"
    if position_table is None:
        if start:
            raise ValueError(f"{source} has no position table, so no --start: leave it out")
        results = run_tokens(names, token_table, token_ids)
        heading = f"x = {quantized.lookup_words(token_table)}  (the file has no position table)"
    else:
        results = run_learned(names, token_table, position_table, token_ids, start)
        heading = f"x = token_table[token_ids] + position_table[{start}:{stop}]"
        setting += f", max_seq_len {len(position_table)}"
    notes = cast_note(source, tables, dtype)
    labels = _labels(token_ids, start)
    return Run(results, heading, f"{setting}, {dtype.name}", labels, token_ids, notes)


def _token_ids(tokens, vocab_size: int, batch: int | None, seed: int) -> np.ndarray:
    """``tokens`` as one sequence (T,), checked; or a random (batch, T) batch from ``seed``
    (the tokens then give T, and are still checked against the vocabulary)."""
    token_ids = validation.check_token_ids(validation.as_host(list(tokens)), vocab_size)
    if batch is None:
        return token_ids
    return np.random.default_rng(seed).integers(0, vocab_size, size=(batch, len(tokens)))


def _labels(token_ids: np.ndarray, start: int) -> list[str]:
    first = token_ids if token_ids.ndim == 1 else token_ids[0]
    return [f"token #{t} @ pos {start + i}" for i, t in enumerate(first)]


# --- the command ---------------------------------------------------------------------------

# Flags that the file's tables decide, so they do not go with --weights.
FROM_WEIGHTS = ("scheme", "layout", "base", "vocab_size", "dim", "max_seq_len")
# Flags that --scheme alibi and t5 do not use, and what they go with instead.
NOT_WITH_BIAS = {
    "layout": "--scheme sinusoidal or rope",
    "base": "--scheme sinusoidal or rope",
    "batch": "--scheme learned, sinusoidal or rope",
    "dims": "the embedding heatmaps (--scheme learned, sinusoidal, rope)",
}


def add_arguments(parser) -> None:
    """Flags that pick a variation default to None, so that "given" can be told from default."""
    from embedding_parity.jobs import bias

    add = parser.add_argument
    add(
        "--scheme",
        choices=SCHEMES + bias.SCHEMES,
        help="how position enters: a learned table, the sinusoidal table, rotary (RoPE), or "
        "a bias on the attention scores per head: ALiBi, T5's bucketed table (random here); "
        "alibi and t5 draw the bias and the attention it makes over --max-seq-len positions "
        "(default: learned)",
    )
    add(
        "--heads",
        type=command.at_least(1),
        metavar="N",
        help="attention heads, with --scheme alibi or t5 (default: 4; the first 8 are drawn)",
    )
    add(
        "--layout",
        help="sinusoidal: interleaved (default) or concat; rope: half (default) or interleaved",
    )
    add(
        "--base",
        type=command.base,
        help="sinusoidal and rope frequency base (default: 10000)",
    )
    add(
        "--tokens",
        type=int,
        nargs="+",
        metavar="ID",
        help=f"token ids of one sequence (default: {' '.join(map(str, SEED_TOKENS))})",
    )
    add("--vocab-size", type=command.at_least(1), help="rows of token_table (default: 100)")
    add("--dim", type=command.at_least(1), help="embedding width (default: 10)")
    add(
        "--max-seq-len",
        type=command.at_least(1),
        help="rows of the position table; for rope, positions in the score plot (up to 64); "
        "for alibi and t5, the positions drawn, which must hold --start + T (default: 16)",
    )
    add("--start", type=int, help="position of the first token (default: 0)")
    add(
        "--batch",
        type=command.at_least(1),
        metavar="B",
        help="instead of --tokens, a random (B, T) batch, T = how many --tokens were given",
    )
    add("--seed", type=command.at_least(0), help="seed of the weights and --batch (default: 0)")
    add("--dtype", choices=list(backends.DTYPES), help="dtype of the tables (default: float32)")
    add(
        "--weights",
        metavar="minilm|smollm2|PATH",
        help="real tables instead of random ones: a packaged model or a .safetensors/.npz "
        "file (needs --tokens)",
    )
    add(
        "--config",
        metavar="CONFIG",
        help="a model's config.json (or .gguf): run its rotation (rule, head_dim, rotary_dim, "
        "layout; Gemma's scaled rows) and draw each pair's wavelength before and after scaling; "
        "a learned-position model's input layer (BERT's three rows, OPT's and RoBERTa's "
        "position ids), bit for bit",
    )
    add("--model", metavar="NAME", help="a bundled model preset, as --config (--model list)")
    command.add_table_keys(parser)
    command.add_dims(parser)
    command.add_backends(parser)
    command.add_picture(parser, "compare.png")
    parser.set_defaults(run=main)


def main(args) -> int:
    if args.model == "list":
        from embedding_parity import configs

        return command.listing_alone(args, add_arguments, configs.listing())
    _check(args)
    names = command.chosen_backends(args.backends)
    settings = {
        flag: getattr(args, flag)
        for flag in (
            "scheme",
            "layout",
            "base",
            "tokens",
            "vocab_size",
            "dim",
            "max_seq_len",
            "start",
            "batch",
            "seed",
            "dtype",
            "heads",
        )
        if getattr(args, flag) is not None
    }
    if args.scheme in ("alibi", "t5"):
        return _bias(args, names, settings)
    if args.config is not None or args.model is not None:
        return command.report_parity(args, _configured(args, names, settings))
    if args.weights is not None:
        from embedding_parity.jobs import text

        settings["tables"] = text.load_tables(args.weights, args.token_key, args.position_key)
        length, dim = len(args.tokens), settings["tables"][0].shape[1]
        command.check_size(
            (args.batch or 1) * length * dim,
            f"the output: --batch {args.batch or 1} x {length} tokens x dim {dim} (the file's)",
            "lower --batch or use fewer tokens",
        )
        settings["source"] = os.path.basename(args.weights)
    return command.report_parity(args, run(names, **settings))


def _check(args) -> None:
    """The flags that go together; argparse has refused every flag this command lacks."""
    if args.config is not None or args.model is not None:
        _check_configured(args)
    if args.weights is not None:
        chosen = [flag for flag in FROM_WEIGHTS if getattr(args, flag) is not None]
        if chosen:
            raise UsageError(
                f"{_option(chosen[0])} does not go with --weights: the tables come from the "
                "file, with their own sizes and learned positions (or none)"
            )
        if args.tokens is None:
            raise UsageError("--weights needs --tokens: the ids to look up in its tables")
    command.check_table_keys(args)
    if args.scheme in (None, "learned") and (args.layout is not None or args.base is not None):
        raise UsageError("--layout and --base apply to --scheme sinusoidal or rope")
    if args.heads is not None and args.scheme not in ("alibi", "t5"):
        raise UsageError("--heads goes with --scheme alibi or t5")
    if args.scheme in ("alibi", "t5"):
        unused = [flag for flag in NOT_WITH_BIAS if getattr(args, flag) is not None]
        if unused:
            raise UsageError(
                "; ".join(
                    f"{_option(f)} goes with {NOT_WITH_BIAS[f]}, not --scheme {args.scheme}"
                    for f in unused
                )
            )
    command.check_picture(args.out)
    outputs.check_not_inputs(
        {"--out": args.out}, {"--weights": args.weights, "--config": args.config}
    )
    _check_sizes(args)


# Flags that a model's configuration decides, so they do not go with --config or --model.
FROM_CONFIG = ("scheme", "layout", "base", "dim", "max_seq_len", "heads", "weights")


def _check_configured(args) -> None:
    if args.config is not None and args.model is not None:
        raise UsageError("give --config or --model, not both")
    flag = "--config" if args.config is not None else "--model"
    chosen = [name for name in FROM_CONFIG if getattr(args, name) is not None]
    if chosen:
        raise UsageError(
            f"{_option(chosen[0])} does not go with {flag}: the model's configuration sets the "
            "rotation (rule, rope_theta, head_dim, layout) and the rows' width"
        )


def _configured(args, names, settings) -> Run:
    """--config or --model: the model's rotation on random token rows of its head_dim (of its
    hidden_size for Gemma, scaled first), every backend against the float64 reference."""
    from embedding_parity import configs

    config = configs.read(args.config) if args.config else configs.preset(args.model)
    if config.tower is not None and config.tower.alone:
        raise UsageError(
            f"{'--config' if args.config else '--model'}: {config.name} is a vision tower's "
            "configuration, not a text model's: check a port at it with compare.py check "
            "--kind pos2d_resize, pos2d_table, rope2d or rope2d_ids"
        )
    if not config.rope:
        return _configured_learned(args, names, settings, config)
    vocab, seed = settings.get("vocab_size", 100), settings.get("seed", 0)
    dtype, start = settings.get("dtype", "float32"), settings.get("start", 0)
    widest = max([config.head_dim, *(t.head_dim or 0 for t in config.layer_types)])
    width = config.hidden_size if config.embed_scale else widest
    command.check_size(
        vocab * width, f"the token table: --vocab-size {vocab} x {width}", "lower --vocab-size"
    )
    length = len(settings.get("tokens", SEED_TOKENS))
    command.check_size(
        (args.batch or 1) * length * width,
        f"the output: --batch {args.batch or 1} x {length} tokens x {width} (the model's width)",
        "lower --batch or use fewer tokens",
    )
    token_table, _ = backends.shared_weights(vocab, width, 1, seed=seed, dtype=dtype)
    token_ids = _token_ids(settings.get("tokens", SEED_TOKENS), vocab, args.batch, seed)
    stop = start + token_ids.shape[-1]
    results = run_configured_rope(names, config, token_table, token_ids, start)
    rows = (
        "token_table[token_ids] * sqrt(hidden)" if config.embed_scale else "token_table[token_ids]"
    )
    heading = f"x = rope({rows}, positions {start}..{stop - 1}), as {config.name} rotates"
    if config.mrope:
        heading += " text tokens (the t, h and w rows equal: M-RoPE's text is plain RoPE)"
    if config.layer_types:
        kinds = ", ".join(t.name for t in config.layer_types)
        heading += f" each layer type ({kinds}: their results side by side; wavelengths below)"
    setting = f"{config.line()}\nvocab_size {vocab}, dim {width}, {np.dtype(token_table.dtype).name}, seed {seed}"
    scheme = {"name": "configured", "config": config, "start": start, "stop": stop}
    return Run(results, heading, setting, _labels(token_ids, start), token_ids, scheme=scheme)


# The rows past the last position id that each learned-position rule's table keeps: OPT's and
# BART's offset of 2 (their tables have max_position_embeddings + 2 rows); RoBERTa's and the
# others' max_position_embeddings counts them already.
TABLE_OFFSET = {"opt": 2, "bart": 2}


def _configured_learned(args, names, settings, config) -> Run:
    """--config or --model of a learned-position model: its input layer on random tables of its
    hidden_size, max_position_embeddings (and type_vocab_size) rows: BERT's three-term sum,
    else the token rows plus the rows its position rule picks."""
    vocab, seed = settings.get("vocab_size", 100), settings.get("seed", 0)
    dtype = settings.get("dtype", "float32")
    flag = "--config" if args.config else "--model"
    if settings.get("start"):
        raise UsageError(
            f"--start does not go with {flag} {config.name}: its rule "
            f"({config.position_rule}) sets the positions of a run of tokens"
        )
    width = config.hidden_size
    rows = (config.max_position_embeddings or 512) + TABLE_OFFSET.get(config.position_rule, 0)
    types = config.type_vocab_size or 0
    command.check_size(
        (vocab + rows + types) * width,
        f"the tables: (--vocab-size {vocab} + {rows} positions + {types} token types) x {width}",
        "lower --vocab-size",
    )
    tokens = settings.get("tokens", SEED_TOKENS)
    command.check_size(
        (args.batch or 1) * len(tokens) * width,
        f"the output: --batch {args.batch or 1} x {len(tokens)} tokens x {width} (the model's "
        "width)",
        "lower --batch or use fewer tokens",
    )
    token_table, position_table = backends.shared_weights(
        vocab, width, rows, seed=seed, dtype=dtype
    )
    token_ids = _token_ids(tokens, vocab, args.batch, seed)
    length = token_ids.shape[-1]
    if config.position_rule == "roberta" and np.any(token_ids == config.pad_token_id):
        raise UsageError(
            f"token {config.pad_token_id} is {config.name}'s pad_token_id, which its rule "
            f"places at position {config.pad_token_id} and the tokens after it one place "
            "back (padding, not a run of positions): leave it out of --tokens (or, with "
            "--batch, try another --seed)"
        )
    first = int(rule_positions(config, token_ids)[0, 0])
    positions = f"position ids {first}..{first + length - 1} by its rule ({config.position_rule})"
    if types:  # a sentence pair where the model has two types: the second half type 1
        type_table = (
            np.random.default_rng(seed + 1)
            .standard_normal((types, width))
            .astype(token_table.dtype)
        )
        pair = ((np.arange(length) >= length // 2) & (types > 1)).astype(np.int64)
        type_ids = np.broadcast_to(pair, token_ids.shape)
        tables = (token_table, type_table, position_table)
        results = run_configured_learned(names, config, tables, token_ids, type_ids)
        heading = (
            "x = (word_table[ids] + type_table[type_ids]) + position_table[position_ids], as "
            f"{config.name}'s embeddings add: type ids {' '.join(map(str, pair))}, {positions}"
        )
    else:
        results = run_configured_learned(names, config, (token_table, position_table), token_ids)
        heading = f"x = token_table[ids] + position_table[position_ids], {positions}"
    setting = (
        f"{config.line()}\nvocab_size {vocab}, dim {width}, {rows} positions, {dtype}, seed {seed}"
    )
    return Run(results, heading, setting, _labels(token_ids, first), token_ids)


def _check_sizes(args) -> None:
    """The largest arrays, from the flags alone (with --weights, the file sets the tables)."""
    vocab, dim, rows = (args.vocab_size or 100), (args.dim or 10), (args.max_seq_len or 16)
    length, batch = len(args.tokens or SEED_TOKENS), args.batch or 1
    if args.weights is None:
        command.check_size(
            (vocab + rows) * dim,
            f"the tables: (--vocab-size {vocab} + --max-seq-len {rows}) x --dim {dim}",
            "make them smaller",
        )
        command.check_size(
            batch * length * dim,
            f"the output: --batch {batch} x {length} tokens x --dim {dim}",
            "lower --batch or use fewer tokens",
        )
    else:  # the output's width comes with the file: checked once it is read (main)
        command.check_size(batch * length, f"the ids: --batch {batch} x {length}", "lower --batch")
    if args.scheme in ("alibi", "t5"):
        heads = args.heads or 4
        command.check_size(
            heads * rows * rows,
            f"the bias and attention drawn: --heads {heads} x --max-seq-len {rows} squared",
            "lower --max-seq-len or --heads",
        )


def _option(flag: str) -> str:
    return "--" + flag.replace("_", "-")


def _bias(args, names, settings) -> int:
    """--scheme alibi or t5: 1 if a backend's token rows, bias or attention differ."""
    from embedding_parity.drawing import bias as pictures
    from embedding_parity.jobs import bias

    if "heads" in settings:
        settings["num_heads"] = settings.pop("heads")
    done = bias.run(names, **settings)
    print("\n".join(done.heading))
    print(done.setting)
    print(pictures.table(done))
    pictures.plot(done, args.out, show=command.show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    print(done.summary())
    return 1 if done.differing else 0
