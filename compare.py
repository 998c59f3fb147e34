"""Run every installed backend on the same weights and show that they agree.

    python compare.py                       # the seed demo: tokens 5 10 7 21, vocab 100, dim 10
    python compare.py --dtype bfloat16 --batch 3 --start 5
    python compare.py --scheme sinusoidal --layout concat
    python compare.py --scheme rope
    python compare.py --scheme alibi                  # or t5: position as a bias per head
    python compare.py --scheme t5 --heads 8 --max-seq-len 32
    python compare.py --text "the king and the queen drove a car"     # real tables (MiniLM)
    python compare.py --demo similarity                               # or --demo order
    python compare.py train --dtype float64                           # learning the tables
    python compare.py shard --shards 4                                # the table split 4 ways
    python compare.py page --out explorer.html                        # the interactive page

Prints a parity table and writes a picture. This file only parses the command line,
checks that every flag given belongs to the chosen mode, dispatches to a job (``jobs/``),
prints and draws what it returns (``drawing/``) and maps the outcome to an exit status:
0 when every backend agrees, 1 when any differs (or a demonstration's claim fails),
2 on bad arguments or input.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

import backends
from backends import pretrained
from jobs import bias, demos, parity, seed, text

# The flags each mode uses (argparse dest names); any other flag given is an error.
SCHEME = {"scheme", "layout", "base", "heads"}
RANDOM = {"tokens", "vocab_size", "dim", "max_seq_len", "start", "batch", "seed"}
REAL = {"weights", "tokenizer", "token_key", "position_key"}
MODES = {
    "seed": SCHEME | RANDOM | {"dtype", "dims", "backends", "weights", "token_key", "position_key"},
    "text": REAL | {"text", "truncate", "save_arrays", "dtype", "dims", "backends"},
    "similarity": REAL | {"demo", "words"},
    "order": REAL | {"demo", "texts", "dims", "backends"},
}
EVERY_MODE = {"out", "show"}
AT_LEAST = {"seed": 0, "vocab_size": 1, "dim": 1, "max_seq_len": 1, "batch": 1, "heads": 1}
# Seed-mode flags that --scheme alibi and t5 do not use, and what they go with instead.
NOT_WITH_BIAS = {
    "layout": "--scheme sinusoidal or rope",
    "base": "--scheme sinusoidal or rope",
    "batch": "--scheme learned, sinusoidal or rope",
    "dims": "the embedding heatmaps (--scheme learned, sinusoidal, rope; --text; --demo order)",
}
MODE_NAMES = {
    "seed": "the seed demo (no --text, no --demo)",
    "text": "--text",
    "similarity": "--demo similarity",
    "order": "--demo order",
}


def parse_args(argv=None) -> argparse.Namespace:
    """Every mode-specific flag defaults to None, so that "given" can be told from "default"."""
    parser = argparse.ArgumentParser(
        description="Run the token + position embedding in every installed backend on the same "
        "weights, print a parity table against a reference and draw the embeddings. Three "
        "modes: random tables (the default), --text on real tables, and --demo; and three jobs, "
        "`compare.py train`, `compare.py shard` and `compare.py page` (see their --help).",
        epilog="Exit status: 0 all backends agree, 1 a backend differs (or a demonstration's "
        "claim fails), 2 bad arguments or input. A flag that the chosen mode does not use is "
        "an error, never ignored.",
    )
    add = parser.add_argument
    random = parser.add_argument_group("random tables (the default mode)")
    random.add_argument(
        "--scheme",
        choices=seed.SCHEMES + bias.SCHEMES,
        help="how position enters: a learned table, the sinusoidal table, rotary (RoPE), or "
        "a bias on the attention scores per head: ALiBi, T5's bucketed table (random here); "
        "alibi and t5 draw the bias and the attention it makes over --max-seq-len positions "
        "(default: learned)",
    )
    random.add_argument(
        "--heads",
        type=int,
        metavar="N",
        help="attention heads, with --scheme alibi or t5 (default: 4; the first 8 are drawn)",
    )
    random.add_argument(
        "--layout",
        help="sinusoidal: interleaved (default) or concat; rope: half (default) or interleaved",
    )
    random.add_argument(
        "--base", type=float, help="sinusoidal and rope frequency base (default: 10000)"
    )
    random.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        metavar="ID",
        help=f"token ids of one sequence (default: {' '.join(map(str, seed.SEED_TOKENS))})",
    )
    random.add_argument("--vocab-size", type=int, help="rows of token_table (default: 100)")
    random.add_argument("--dim", type=int, help="embedding width (default: 10)")
    random.add_argument(
        "--max-seq-len",
        type=int,
        help="rows of the position table; for rope, positions in the score plot (up to 64); "
        "for alibi and t5, the positions drawn, which must hold --start + T (default: 16)",
    )
    random.add_argument("--start", type=int, help="position of the first token (default: 0)")
    random.add_argument(
        "--batch",
        type=int,
        metavar="B",
        help="instead of --tokens, a random (B, T) batch, T = how many --tokens were given",
    )
    random.add_argument("--seed", type=int, help="seed of the weights and --batch (default: 0)")
    add(
        "--dtype",
        choices=list(backends.DTYPES),
        help="dtype of the tables (default: float32); random tables and --text",
    )
    real = parser.add_argument_group("real text and tables (offline, from installed packages)")
    real.add_argument("--text", help='text to tokenize and embed, e.g. "dog bites man"')
    real.add_argument(
        "--weights",
        metavar="minilm|smollm2|PATH",
        help="with --text or --demo: a packaged model, or a .safetensors/.npz file "
        "(default: minilm)",
    )
    real.add_argument(
        "--tokenizer",
        choices=pretrained.TOKENIZERS,
        help="with --weights PATH: bert (WordPiece) or gpt2 (byte-level BPE)",
    )
    real.add_argument("--token-key", help="name of the token table in a --weights file")
    real.add_argument("--position-key", help="name of the position table in a --weights file")
    real.add_argument(
        "--truncate",
        action="store_true",
        default=None,
        help="cut a --text longer than the model's positions",
    )
    real.add_argument(
        "--save-arrays", metavar="OUT.npz", help="with --text: also save ids and every array"
    )
    real.add_argument(
        "--demo",
        choices=("similarity", "order"),
        help="similarity: cosine similarity of token rows; order: why position matters",
    )
    real.add_argument(
        "--words",
        nargs="+",
        help=f"words for --demo similarity (default: {' '.join(demos.WORDS)}; Paris and France "
        "capitalised for a byte-level BPE)",
    )
    real.add_argument(
        "--texts",
        nargs=2,
        metavar="TEXT",
        help='two texts for --demo order (default: "dog bites man" "man bites dog", '
        "with leading spaces for a byte-level BPE)",
    )
    add(
        "--dims",
        metavar="A:B",
        help="columns to draw (default: all, or 0:32 for tables wider than 64)",
    )
    add(
        "--backends",
        nargs="+",
        metavar="NAME",
        help=f"backends to run (default: every installed one: {' '.join(backends.names())})",
    )
    add("--out", default="compare.png", help="where to write the picture (default: %(default)s)")
    add(
        "--show",
        action="store_true",
        help="also open the picture in a window, if there is a display",
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["train"]:
        return _train(argv[1:])
    if argv[:1] == ["shard"]:
        return _shard(argv[1:])
    if argv[:1] == ["page"]:
        return _page(argv[1:])
    args = parse_args(argv)
    try:
        mode = _check(args)
        names = args.backends or backends.names()
        if "backends" in MODES[mode]:
            for name in names:
                backends.get(name)  # unknown or missing frameworks fail here, before any work
        if mode == "seed" and args.scheme in bias.SCHEMES:
            return _bias(args, names)
        if mode == "seed":
            return _report(args, seed.run(names, **_seed_settings(args)))
        model = text.load_model(
            args.weights or "minilm",
            tokenizer=args.tokenizer,
            token_key=args.token_key,
            position_key=args.position_key,
        )
        if mode == "text":
            done = text.run(
                names, args.text, model, dtype=args.dtype or "float32", truncate=args.truncate
            )
            return _report(args, done)
        if mode == "similarity":
            return _similarity(args, model)
        return _order(args, names, model)
    except pretrained.MissingPackage as error:
        print(f"compare.py: {error}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, IndexError, ImportError, OverflowError, MemoryError) as error:
        print(f"compare.py: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # an unwritable --out, say
        print(f"compare.py: error: {error}", file=sys.stderr)
        return 2


def _check(args) -> str:
    """The mode; ValueError for a flag the mode does not use, or a value out of range.
    Also turns --dims "A:B" into (A, B)."""
    if args.demo is not None and args.text is not None:
        raise ValueError("--text and --demo are two modes: give one of them")
    mode = args.demo or ("text" if args.text is not None else "seed")
    allowed = MODES[mode] | EVERY_MODE
    given = [flag for flag, value in vars(args).items() if value is not None]
    stray = [flag for flag in given if flag not in allowed]
    if stray:
        raise ValueError(
            "; ".join(
                f"{_option(f)} goes with {_modes_using(f)}, not {MODE_NAMES[mode]}" for f in stray
            )
        )
    if args.weights is not None and mode == "seed":
        chosen = [
            f
            for f in ("scheme", "layout", "base", "vocab_size", "dim", "max_seq_len")
            if getattr(args, f) is not None
        ]
        if chosen:
            raise ValueError(
                f"{_option(chosen[0])} does not go with --weights: the tables come from the "
                "file, with their own sizes and learned positions (or none)"
            )
        if args.tokens is None:
            raise ValueError(
                "--weights in the seed demo needs --tokens: the ids to look up in its tables"
            )
    if (args.token_key is not None or args.position_key is not None) and args.weights is None:
        raise ValueError("--token-key and --position-key go with --weights PATH")
    if args.scheme in (None, "learned") and (args.layout is not None or args.base is not None):
        raise ValueError("--layout and --base apply to --scheme sinusoidal or rope")
    if args.heads is not None and args.scheme not in bias.SCHEMES:
        raise ValueError("--heads goes with --scheme alibi or t5")
    if args.scheme in bias.SCHEMES:
        unused = [f for f in NOT_WITH_BIAS if getattr(args, f) is not None]
        if unused:
            raise ValueError(
                "; ".join(
                    f"{_option(f)} goes with {NOT_WITH_BIAS[f]}, not --scheme {args.scheme}"
                    for f in unused
                )
            )
    if args.base is not None and not (math.isfinite(args.base) and args.base > 0):
        raise ValueError(f"--base must be positive and finite, got {args.base:g}")
    for flag, least in AT_LEAST.items():
        value = getattr(args, flag)
        if value is not None and value < least:
            raise ValueError(f"{_option(flag)} must be at least {least}, got {value}")
    if args.backends and len(set(args.backends)) != len(args.backends):
        raise ValueError(f"--backends lists a backend twice: {' '.join(args.backends)}")
    _check_out_path(args.out)
    if args.save_arrays:
        folder = os.path.dirname(os.path.abspath(args.save_arrays))
        if not args.save_arrays.endswith(".npz"):
            raise ValueError(f"--save-arrays {args.save_arrays!r} must end in .npz")
        if not os.path.isdir(folder):
            raise ValueError(f"--save-arrays {args.save_arrays!r}: folder {folder} does not exist")
    if args.dims is not None:
        first, _, stop = args.dims.partition(":")
        try:
            args.dims = (int(first), int(stop))
        except ValueError:
            raise ValueError(f"--dims must look like 0:32, got {args.dims!r}") from None
    return mode


def _option(flag: str) -> str:
    return "--" + flag.replace("_", "-")


def _modes_using(flag: str) -> str:
    names = [MODE_NAMES[mode] for mode, flags in MODES.items() if flag in flags]
    if {MODE_NAMES["similarity"], MODE_NAMES["order"]} <= set(names):  # both demos: "--demo"
        names = [n for n in names if n != MODE_NAMES["order"]]
        names[names.index(MODE_NAMES["similarity"])] = "--demo"
    return " or ".join(names)


def _seed_settings(args) -> dict:
    """The seed-mode flags given, as seed.run's keywords; the rest keep its defaults. With
    --weights, the tables come from it (a packaged model or a file) instead of --seed."""
    flags = MODES["seed"] - {"dims", "backends", "weights", "token_key", "position_key"}
    given = {flag: getattr(args, flag) for flag in flags if getattr(args, flag) is not None}
    if args.weights is None:
        return given
    tables = text.load_tables(args.weights, args.token_key, args.position_key)
    return {**given, "tables": tables, "source": os.path.basename(args.weights)}


def _check_out_path(path: str) -> None:
    """--out must name a picture format matplotlib writes, in a folder that exists."""
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    extension = os.path.splitext(path)[1].lstrip(".").lower()
    if extension not in formats:
        raise ValueError(f"--out {path!r} needs an extension, one of .png .svg .pdf .jpg ...")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--out {path!r}: folder {folder} does not exist")


def _report(args, done: parity.Run) -> int:
    """Print and draw a parity run; 1 if a backend differs from the reference."""
    from drawing import heatmaps, table
    from jobs import arrays

    dims = heatmaps.columns(args.dims, done.results[0].output.shape[-1])
    print(done.heading)
    print(f"{done.setting}, token_ids shape {done.token_ids.shape}")
    for note in done.notes:
        print(note)
    print(table.parity_table(done.results))
    heatmaps.plot(done, args.out, dims=dims, show=_show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    if args.save_arrays:
        arrays.save(args.save_arrays, done)
        print(f"arrays: {os.path.abspath(args.save_arrays)}")
    print(done.verdict)
    return 1 if done.differing else 0


def _bias(args, names) -> int:
    """--scheme alibi or t5: 1 if a backend's token rows, bias or attention differ."""
    from drawing import bias as pictures

    settings = _seed_settings(args)
    if "heads" in settings:
        settings["num_heads"] = settings.pop("heads")
    done = bias.run(names, **settings)
    print("\n".join(done.heading))
    print(done.setting)
    print(pictures.table(done))
    pictures.plot(done, args.out, show=_show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    print(done.summary())
    return 1 if done.differing else 0


def _similarity(args, model) -> int:
    from drawing import demos as pictures

    found = demos.similarity(model, args.words)
    print("\n".join(found.lines()))
    pictures.similarity(found, model.name, args.out, show=_show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    return 0


def _order(args, names, model) -> int:
    """1 if either claim fails on any backend."""
    from drawing import demos as pictures
    from drawing import heatmaps

    found = demos.order(names, model, args.texts)
    print("\n".join(found.lines()))
    dims = heatmaps.columns(args.dims, model.token_table.shape[1])
    pictures.order(found, model.name, names[0], dims, args.out, show=_show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    return 0 if all(found.holds(name) for name in names) else 1


def parse_train_args(argv) -> argparse.Namespace:
    from jobs import extrapolate, train
    from training.task import SCHEMES

    parser = argparse.ArgumentParser(
        prog="compare.py train",
        description="Train the same tiny model (token + position embedding, one attention "
        "layer, linear readout) in every backend from the same weights on the same batches. "
        "By default: which schemes learn word order (one head, mean over positions), and how "
        "far the backends drift apart. With --extrapolate: train short, test long, a causal "
        "next-token model trained at --length tokens and tested at 1, 2, 4 and 8 times that.",
        epilog="Exit status: 0 done (float64: every backend's loss within the tolerance), "
        "1 float64 losses beyond the tolerance, 2 bad arguments.",
    )
    add = parser.add_argument
    add("--scheme", nargs="+", choices=SCHEMES, default=list(SCHEMES), help="default: all")
    add("--backends", nargs="+", metavar="NAME", help="default: every installed one")
    add("--dtype", choices=("float64", "float32"), default="float32", help="default: float32")
    add(
        "--extrapolate",
        action="store_true",
        help="train short, test long, on a drifting-topic language (a few minutes)",
    )
    defaults = {key: f"{train.DEFAULTS.get(key, '-')}" for key in extrapolate.DEFAULTS}
    for flag, kind, what in (
        ("steps", int, "Adam steps"),
        ("batch_size", int, "training sequences per step"),
        ("lr", float, "Adam's learning rate"),
        ("dim", int, "embedding width"),
        ("head_dim", int, "width of q, k and v per head (even: RoPE pairs them)"),
        ("seed", int, "seed of the weights, the batches and the held-out data"),
        ("heads", int, "attention heads, with --extrapolate"),
        ("length", int, "training length, with --extrapolate"),
    ):
        add(
            "--" + flag.replace("_", "-"),
            type=kind,
            help=f"{what} (default: {defaults[flag]}; with --extrapolate: "
            f"{extrapolate.DEFAULTS[flag]})",
        )
    add("--json", metavar="PATH", help="write every curve and the settings as JSON")
    add("--save", metavar="PATH.safetensors", help="write the trained tables (not --extrapolate)")
    add(
        "--out",
        default="train.png",
        help="the curves picture (default: %(default)s); "
        "with the learned scheme also OUT-positions.png",
    )
    add("--show", action="store_true", help="also open the pictures, if there is a display")
    return parser.parse_args(argv)


def _train(argv) -> int:
    """compare.py train: 1 if float64 losses drift beyond the tolerance."""
    from drawing import training as pictures
    from jobs import extrapolate, train

    args = parse_train_args(argv)
    try:
        names = _job_backends(args.backends)
        _check_out_path(args.out)
        _check_file_flag("--json", args.json, ".json")
        _check_file_flag("--save", args.save, ".safetensors")
        job = extrapolate if args.extrapolate else train
        settings = {
            k: getattr(args, k) for k in extrapolate.DEFAULTS if getattr(args, k) is not None
        }
        if not args.extrapolate:
            for flag in ("heads", "length"):
                if flag in settings:
                    raise ValueError(f"--{flag} goes with --extrapolate")
        elif args.save:
            raise ValueError("--save writes the word-order task's tables: leave out --extrapolate")
        settings = job.check_settings(args.dtype, **settings)
    except (ValueError, TypeError, ImportError, OSError) as error:
        print(f"compare.py train: error: {error}", file=sys.stderr)
        return 2
    settings.pop("dtype")
    schemes = tuple(dict.fromkeys(args.scheme))
    if args.extrapolate:
        return _extrapolate(args, names, schemes, settings)
    # Past the checks, an error is a bug to see whole, not bad input to summarise.
    done = train.run(names, schemes, dtype=args.dtype, progress=True, **settings)
    print("\n".join(pictures.summary(done)))
    try:
        show = _show(args)
        pictures.curves(done, args.out, show=show)
        print(f"picture: {os.path.abspath(args.out)}")
        if "learned" in done.drift:
            stem, extension = os.path.splitext(args.out)
            pictures.positions(done, f"{stem}-positions{extension}", show=show)
            print(f"picture: {os.path.abspath(f'{stem}-positions{extension}')}")
        if args.json:
            train.save_json(done, args.json)
            print(f"curves: {os.path.abspath(args.json)}")
        if args.save:
            scheme, backend = train.save_tables(done, args.save)
            note = "" if scheme == "learned" else "; token_table only: no learned positions"
            print(f"tables ({scheme}, {backend}{note}): {os.path.abspath(args.save)}")
    except OSError as error:  # a picture or file that cannot be written
        print(f"compare.py train: error: {error}", file=sys.stderr)
        return 2
    return 1 if done.beyond() else 0


def _extrapolate(args, names, schemes, settings) -> int:
    """compare.py train --extrapolate: 1 if float64 losses drift beyond the tolerance."""
    from drawing import training as pictures
    from jobs import extrapolate

    done = extrapolate.run(names, schemes, dtype=args.dtype, progress=True, **settings)
    print("\n".join(pictures.extrapolation_summary(done)))
    try:
        pictures.extrapolation(done, args.out, show=_show(args))
        print(f"picture: {os.path.abspath(args.out)}")
        if args.json:
            extrapolate.save_json(done, args.json)
            print(f"losses: {os.path.abspath(args.json)}")
    except OSError as error:
        print(f"compare.py train: error: {error}", file=sys.stderr)
        return 2
    return 1 if done.beyond() else 0


def parse_page_args(argv) -> argparse.Namespace:
    from jobs.train import DEFAULTS

    parser = argparse.ArgumentParser(
        prog="compare.py page",
        description="Run the suite (the seed demo, the positional schemes, MiniLM's real tables, "
        "a training run) and write the explorer: one self-contained HTML file that draws it "
        "all interactively, recomputes the seed's sums in the browser and needs no network.",
        epilog="Exit status: 0 written and every backend agrees, 1 written but a backend "
        "differs, 2 bad arguments.",
    )
    add = parser.add_argument
    add("--out", default="explorer.html", help="the page (default: %(default)s)")
    add("--backends", nargs="+", metavar="NAME", help="default: every installed one")
    add(
        "--train-steps",
        type=int,
        default=DEFAULTS["steps"],
        help="steps of the training run the page draws (default: %(default)s)",
    )
    return parser.parse_args(argv)


def _page(argv) -> int:
    """compare.py page: 1 if a backend differs anywhere in what the page shows."""
    from jobs import page
    from page import render

    args = parse_page_args(argv)
    try:
        names = _job_backends(args.backends)
        _check_file_flag("--out", args.out, ".html")
        if args.train_steps < 1:
            raise ValueError(f"--train-steps must be at least 1, got {args.train_steps}")
    except (ValueError, TypeError, ImportError, OSError) as error:
        print(f"compare.py page: error: {error}", file=sys.stderr)
        return 2
    try:
        pretrained.package_dir("minilm")
        real = True
    except pretrained.MissingPackage as missing:
        print(f"compare.py page: without the real tables: {missing}")
        real = False
    data = page.run(names, train_steps=args.train_steps, real=real)
    try:
        size = render.write(data, args.out)
    except OSError as error:
        print(f"compare.py page: error: {error}", file=sys.stderr)
        return 2
    print(f"page: {os.path.abspath(args.out)} ({size / 1e6:.2f} MB, {', '.join(names)})")
    differing = page.differing(data)
    for line in differing:
        print(f"DIFFERS: {line}")
    return 1 if differing else 0


def parse_shard_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="compare.py shard",
        description="Split the seed's token table (vocab 100, dim 10) across N shards, by rows "
        "and by columns, and run the lookup in NumPy (the reference, over a list of shards), "
        "JAX (one process, N devices) and torch (N processes, gloo on 127.0.0.1): every "
        "result against the unsharded layer, bit for bit.",
        epilog="Exit status: 0 every sharded result is bit-identical to the unsharded layer, "
        "1 one differs, 2 bad arguments or input, or a distributed run that failed.",
    )
    add = parser.add_argument
    add(
        "--shards",
        type=int,
        default=4,
        help="how many shards: 1, 2, 3, 4, 5 or 10, so that each owns a column (default: %(default)s)",
    )
    add("--tokens", type=int, nargs="+", metavar="ID", help="ids (default: 5 10 7 21)")
    add("--batch", type=int, help="B random sequences as long as --tokens, instead of it")
    add("--start", type=int, default=0, help="first position (default: 0)")
    add("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    add("--backends", nargs="+", metavar="NAME", help="default: every installed one")
    add("--save-arrays", metavar="PATH.npz", help="write reference and sum_<backend> arrays")
    add("--out", default="shard.png", help="the picture (default: %(default)s)")
    add("--show", action="store_true", help="also open the picture, if there is a display")
    return parser.parse_args(argv)


def _shard(argv) -> int:
    """compare.py shard: 1 if a sharded result differs from the unsharded layer."""
    from drawing import sharding as pictures
    from drawing.table import text_table
    from jobs import shard

    args = parse_shard_args(argv)
    try:
        names = args.backends or backends.names()
        shard.prepare(names, args.shards)  # before JAX is imported: it makes its devices then
        names = _job_backends(names)
        _check_out_path(args.out)
        _check_file_flag("--save-arrays", args.save_arrays, ".npz")
        done = shard.run(
            names,
            args.shards,
            tokens=args.tokens,
            batch=args.batch,
            start=args.start,
            dtype=args.dtype,
        )
    except (ValueError, TypeError, IndexError, ImportError, OSError) as error:
        print(f"compare.py shard: error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # a rank or process that failed: its own error, last line
        print(
            f"compare.py shard: a distributed run failed: {str(error).splitlines()[-1]}",
            file=sys.stderr,
        )
        return 2
    ids = " ".join(map(str, done.token_ids.reshape(-1)[:12]))
    print(
        f"token table {done.token_table.shape[0]} x {done.token_table.shape[1]} "
        f"({done.token_table.dtype}) split {done.num_shards} ways; ids {ids}"
        f"{' ...' if done.token_ids.size > 12 else ''}; start {done.start}"
    )
    rows = [("backend", "strategy", "collective", "bytes/device", "max |diff|", "bit-identical")]
    rows += [
        (
            r.backend,
            r.strategy,
            r.collective,
            str(r.bytes_per_device),
            f"{r.max_abs_diff:.3g}",
            "yes" if r.identical else "NO",
        )
        for r in done.rows
    ]
    print(text_table(rows, right_from=3))
    unsharded = done.token_table.nbytes
    print(f"(the whole token table: {unsharded} bytes on one device)")
    try:
        pictures.ownership(done, args.out, show=_show(args))
        print(f"picture: {os.path.abspath(args.out)}")
        if args.save_arrays:
            arrays = {"reference": done.unsharded}
            for r in done.rows:
                arrays[f"sum_{r.backend}_{r.strategy}"] = r.output
                if r.strategy == "rows":
                    arrays[f"sum_{r.backend}"] = r.output
            np.savez(args.save_arrays, **{k: _savable(v) for k, v in arrays.items()})
            print(f"arrays: {os.path.abspath(args.save_arrays)}")
    except OSError as error:
        print(f"compare.py shard: error: {error}", file=sys.stderr)
        return 2
    return 1 if done.differing else 0


def _savable(array: np.ndarray) -> np.ndarray:
    """.npz cannot hold ml_dtypes.bfloat16: widen it to float32 (exactly)."""
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def _job_backends(given) -> list[str]:
    """A job's --backends (default: every installed one), each imported now: an unknown,
    missing or repeated one fails here, before any work."""
    names = list(given or backends.names())
    if len(set(names)) != len(names):
        raise ValueError(f"--backends lists a backend twice: {' '.join(names)}")
    for name in names:
        backends.get(name)
    return names


def _check_file_flag(flag: str, path: str | None, ending: str) -> None:
    """An output file flag, if given: the right ending, in a folder that exists."""
    if path is None:
        return
    if not path.endswith(ending):
        raise ValueError(f"{flag} {path!r} must end in {ending}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise ValueError(f"{flag} {path!r}: its folder does not exist")


def _show(args) -> bool:
    """--show when a display exists; without one, say so and only write the file."""
    display = sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    if args.show and not display:
        print("--show: no display found, only writing the file")
    return bool(args.show and display)


if __name__ == "__main__":
    sys.exit(main())
