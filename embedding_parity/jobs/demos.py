"""Two demonstrations on real tables.

- similarity: cosine similarity of raw token-table rows, before any layer has run; training
  alone put "king" near "queen".
- order: "dog bites man" and "man bites dog" are the same tokens in another order; without
  position their input vectors are the same rows, with position they differ.

Defaults suit the tokenizer: a byte-level BPE (GPT-2, SmolLM2) marks the space before a
word, so its words get that space and place names their capital letter.

    compare.py demo similarity                    # or --words, --weights smollm2
    compare.py demo order                         # or --texts "a b" "b a"

Exit status: 0 shown (order: both claims hold on every backend), 1 a claim fails, 2 bad
arguments or input.
"""

from __future__ import annotations

import os

import backends
from backends import pretrained
from embedding_parity import outputs
from embedding_parity.jobs import command
from embedding_parity.results.demos import Order, Similarity

COMMAND = "demo"

WORDS = ("king", "queen", "man", "woman", "car", "truck", "paris", "france")
BYTE_LEVEL_WORDS = ("king", "queen", "man", "woman", "car", "truck", "Paris", "France")
TEXTS = ("dog bites man", "man bites dog")


def default_words(tokenizer: pretrained.Tokenizer) -> tuple[str, ...]:
    return BYTE_LEVEL_WORDS if tokenizer.byte_level else WORDS


def default_texts(tokenizer: pretrained.Tokenizer) -> tuple[str, str]:
    return tuple(" " + t for t in TEXTS) if tokenizer.byte_level else TEXTS


def similarity(model: pretrained.Pretrained, words=None) -> Similarity:
    """The words' rows compared with each other, and each one's nearest rows in the table."""
    words = list(words or default_words(model.tokenizer))
    for i, word in enumerate(words, 1):
        if not word.strip():
            raise ValueError(f"--words: word {i} of {len(words)} is empty")
    vocab_size = len(model.token_table)
    ids = [pretrained.single_token(model.tokenizer, vocab_size, w) for w in words]
    nearest = [
        [(model.tokenizer.labels([i])[0], s) for i, s in pretrained.nearest(model.token_table, t)]
        for t in ids
    ]
    matrix = pretrained.cosine_similarities(model.token_table, ids)
    labels = model.tokenizer.labels(ids)  # the tokens used: "␣king" for " king", say
    return Similarity(model.metadata.get("source", model.name), labels, matrix, nearest)


def order(names, model: pretrained.Pretrained, texts=None) -> Order:
    """Both texts through every backend, without and with position."""
    texts = tuple(texts or default_texts(model.tokenizer))
    if model.position_table is None and model.rope is None:
        raise ValueError(
            f"demo order needs position, but {model.name} has no position table (and a file "
            "carries no RoPE parameters): use a file with a position table, or --weights smollm2"
        )
    for i, text in enumerate(texts, 1):
        if not text.strip():
            raise ValueError(f"--texts: text {i} is empty")
        length = len(model.tokenizer.encode(text))
        if length > model.max_seq_len:
            raise ValueError(
                f"--texts: text {i} is {length} tokens but {model.name} has "
                f"{model.max_seq_len} positions: shorten it"
            )
    if texts[0] == texts[1]:
        raise ValueError("--texts gives the same text twice: give the same words in two orders")
    found = {name: pretrained.order_demo(backends.get(name), model, *texts) for name in names}
    position = "position" if model.position_table is not None else "RoPE"
    return Order(texts, position, found, model.tokenizer.byte_level)


# --- the command: demo similarity, demo order ----------------------------------------------


def add_arguments(parser) -> None:
    from embedding_parity.jobs.text import add_real_tables

    demos = parser.add_subparsers(title="demonstrations", metavar="DEMO", required=True)
    found = demos.add_parser(
        "similarity",
        help="cosine similarity of token rows",
        description="Cosine similarity of raw token-table rows: training alone put king near "
        "queen. Exit status: 0 drawn, 2 bad arguments or input.",
    )
    found.add_argument(
        "--words",
        nargs="+",
        help=f"words to compare (default: {' '.join(WORDS)}; Paris and France capitalised for "
        "a byte-level BPE)",
    )
    add_real_tables(found)
    command.add_picture(found, "similarity.png")
    found.set_defaults(run=similarity_main)
    shown = demos.add_parser(
        "order",
        help="why position matters: dog bites man, man bites dog",
        description="Two texts of the same tokens in another order: the same rows without "
        "position, different rows with it. Exit status: 0 both claims hold on every backend, "
        "1 one fails, 2 bad arguments or input.",
    )
    shown.add_argument(
        "--texts",
        nargs=2,
        metavar="TEXT",
        help='two texts (default: "dog bites man" "man bites dog", with leading spaces for a '
        "byte-level BPE)",
    )
    add_real_tables(shown)
    command.add_dims(shown)
    command.add_backends(shown)
    command.add_picture(shown, "order.png")
    shown.set_defaults(run=order_main)


def similarity_main(args) -> int:
    from embedding_parity.drawing import demos as pictures
    from embedding_parity.jobs.text import load_model_of

    command.check_picture(args.out)
    outputs.check_not_inputs({"--out": args.out}, {"--weights": args.weights})
    model = load_model_of(args)
    found = similarity(model, args.words)
    print("\n".join(found.lines()))
    pictures.similarity(found, model.name, args.out, show=command.show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    return 0


def order_main(args) -> int:
    """1 if either claim fails on any backend."""
    from embedding_parity.drawing import demos as pictures
    from embedding_parity.drawing import heatmaps
    from embedding_parity.jobs.text import load_model_of

    command.check_picture(args.out)
    outputs.check_not_inputs({"--out": args.out}, {"--weights": args.weights})
    names = command.chosen_backends(args.backends)
    model = load_model_of(args)
    found = order(names, model, args.texts)
    print("\n".join(found.lines()))
    dims = heatmaps.columns(args.dims, model.token_table.shape[1])
    pictures.order(found, model.name, names[0], dims, args.out, show=command.show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    return 0 if all(found.holds(name) for name in names) else 1
