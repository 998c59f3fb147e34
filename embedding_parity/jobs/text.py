"""Real text on real tables: a packaged model (minilm, smollm2) or your own .safetensors/.npz
file with a tokenizer, every backend held bit for bit to the NumPy expression.

    compare.py text "the king and the queen drove a car"       # MiniLM, offline
    compare.py text "Hello world" --weights smollm2
    compare.py text "hi" --weights model.safetensors --tokenizer bert

Exit status: 0 every backend bit-identical, 1 one differs, 2 bad arguments or input.
"""

from __future__ import annotations

import os

import numpy as np

import backends
from backends import pretrained, quantized, validation
from embedding_parity import outputs
from embedding_parity.jobs import command
from embedding_parity.jobs.parity import cast_note, run_learned, run_tokens
from embedding_parity.results.parity import Run

COMMAND = "text"


def load_model(
    weights: str = "minilm",
    *,
    tokenizer: str | None = None,
    token_key: str | None = None,
    position_key: str | None = None,
) -> pretrained.Pretrained:
    """A packaged model by name, or the tables of a file with the tokenizer named."""
    if weights in pretrained.MODELS:
        if tokenizer is not None:
            raise ValueError(
                f"{weights} has its own tokenizer: --tokenizer goes with --weights PATH"
            )
        no_keys(weights, token_key, position_key)
        return pretrained.load_pretrained(weights)
    # the file first: a missing or broken file is the first thing to hear about
    token_table, position_table = load_tables(weights, token_key, position_key)
    if tokenizer is None:
        raise ValueError("--weights PATH needs --tokenizer bert or gpt2 to turn the text into ids")
    loaded = pretrained.load_tokenizer(tokenizer)
    if loaded.vocab_size > len(token_table):
        raise ValueError(
            f"tokenizer {tokenizer} has {loaded.vocab_size} tokens but the token table has "
            f"{len(token_table)} rows: ids {len(token_table)} and up would have no row; use "
            "the tokenizer the model was trained with"
        )
    max_seq_len = len(position_table) if position_table is not None else 2**31
    return pretrained.Pretrained(
        os.path.basename(weights), token_table, position_table, max_seq_len, loaded
    )


def load_tables(weights: str, token_key=None, position_key=None):
    """(token_table, position_table or None) of a packaged model or a .safetensors/.npz
    file, with messages that name compare.py's flags."""
    if weights in pretrained.MODELS:
        no_keys(weights, token_key, position_key)
        model = pretrained.load_pretrained(weights)
        return model.token_table, model.position_table
    try:
        return pretrained.load_tables(weights, token_key, position_key)
    except pretrained.MissingTable as error:
        raise ValueError(error.message(f"--{error.what}-key")) from None


def no_keys(weights: str, token_key, position_key) -> None:
    if token_key is not None or position_key is not None:
        raise ValueError(f"--token-key and --position-key go with --weights PATH, not {weights}")


def run(names, text: str, model: pretrained.Pretrained, *, dtype="float32", truncate=False) -> Run:
    """Tokenize ``text`` and run every backend on the model's tables (its own positions)."""
    token_ids = np.array(model.tokenizer.encode(text), dtype=np.int64)  # (T,)
    count = len(token_ids)
    notes = []
    if count > model.max_seq_len:
        if not truncate:
            raise ValueError(
                f"the text is {count} tokens but {model.name} has {model.max_seq_len} "
                "positions: shorten it or pass --truncate"
            )
        notes.append(f"truncated from {count} to {model.max_seq_len} tokens (--truncate)")
        token_ids = token_ids[: model.max_seq_len]
    dtype = validation.resolve_dtype(dtype)
    token_table = quantized.as_dtype(model.token_table, dtype)  # a quantized one stays so
    quoted = quote(text, count, embedded=len(token_ids))
    if model.position_table is not None:
        position_table = model.position_table.astype(dtype, copy=False)
        results = run_learned(names, token_table, position_table, token_ids, 0)
        heading = f"x = token_table[ids] + position_table[0:{len(token_ids)}], text {quoted}"
    else:
        results = run_tokens(names, token_table, token_ids)
        heading = f"x = {quantized.lookup_words(token_table, 'ids')}, text {quoted}"
        if model.rope:
            notes.append(
                f"{model.name} has no position table: position enters later, by RoPE on each "
                f"attention head's q and k (base {model.rope['base']:g}, "
                f"head dim {model.rope['head_dim']})"
            )
        else:
            notes.append(f"{model.name} has no position table: token rows only")
    labels = [f"{label} @ {i}" for i, label in enumerate(model.tokenizer.labels(token_ids))]
    notes += padding_note(model.tokenizer.vocab_size, len(token_table))
    source = model.metadata.get("source", model.name)
    notes += cast_note(source, (model.token_table, model.position_table), dtype)
    setting = (
        f"{source}: vocab_size {token_table.shape[0]}, dim {token_table.shape[1]}, {dtype.name}"
    )
    return Run(results, heading, setting, labels, token_ids, notes)


def padding_note(tokenizer_size: int, vocab_size: int) -> list[str]:
    """A line for a table padded past its tokenizer (Qwen's 151936 rows for 151665 ids)."""
    if tokenizer_size >= vocab_size:
        return []
    return [
        f"the table has {vocab_size} rows for a tokenizer of {tokenizer_size} ids: rows "
        f"{tokenizer_size} to {vocab_size - 1} are padding, legal rows no text makes"
    ]


def quote(text: str, tokens: int, *, embedded: int | None = None, limit: int = 60) -> str:
    """The text in quotes; a long one as its first and last words, with its token count and,
    when it was cut, how many of its tokens were embedded."""
    text = " ".join(text.split())
    cut = "" if embedded in (None, tokens) else f", the first {embedded} embedded"
    if len(text) <= limit:
        return f'"{text}"' + (f" ({tokens} tokens{cut})" if cut else "")
    words = text.split(" ")
    head, tail = " ".join(words[:5])[: limit // 2], " ".join(words[-3:])[-limit // 2 :]
    return f'"{head} … {tail}" ({len(words)} words, {tokens} tokens{cut})'


# --- the command ---------------------------------------------------------------------------


def add_real_tables(parser) -> None:
    """--weights and what reads it: the flags of text and of both demonstrations."""
    add = parser.add_argument
    add(
        "--weights",
        default="minilm",
        metavar="minilm|smollm2|PATH",
        help="a packaged model, or a .safetensors/.npz file (default: %(default)s)",
    )
    add(
        "--tokenizer",
        choices=pretrained.TOKENIZERS,
        help="with --weights PATH: bert (WordPiece) or gpt2 (byte-level BPE)",
    )
    command.add_table_keys(parser)


def load_model_of(args) -> pretrained.Pretrained:
    """The model that add_real_tables's flags name."""
    return load_model(
        args.weights,
        tokenizer=args.tokenizer,
        token_key=args.token_key,
        position_key=args.position_key,
    )


def add_arguments(parser) -> None:
    parser.add_argument("text", help='the text to tokenize and embed, e.g. "dog bites man"')
    add_real_tables(parser)
    parser.add_argument(
        "--truncate", action="store_true", help="cut a text longer than the model's positions"
    )
    parser.add_argument("--save-arrays", metavar="OUT.npz", help="also save ids and every array")
    parser.add_argument(
        "--dtype", choices=list(backends.DTYPES), default="float32", help="(default: %(default)s)"
    )
    command.add_dims(parser)
    command.add_backends(parser)
    command.add_picture(parser, "compare.png")
    parser.set_defaults(run=main)


def main(args) -> int:
    command.check_picture(args.out)
    command.check_file("--save-arrays", args.save_arrays, ".npz")
    outputs.check_not_inputs(
        {"--out": args.out, "--save-arrays": args.save_arrays}, {"--weights": args.weights}
    )
    names = command.chosen_backends(args.backends)
    model = load_model_of(args)
    done = run(names, args.text, model, dtype=args.dtype, truncate=args.truncate)
    return command.report_parity(args, done)
