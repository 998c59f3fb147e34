"""Check anyone's embedding or positional encoding against the suite's contract.

TARGET is path/to/file.py:NAME or package.module:NAME, a callable written in NumPy, PyTorch or
JAX that follows the contract of --kind (its arguments come as that framework's arrays):

    lookup      f(token_table, position_table, token_ids, start) -> x
    sinusoidal  f(num_positions, dim) -> table (interleaved: sin at even columns)
    rope        f(x, positions) -> rotated; x (..., T, head_dim), the half layout
    alibi       f(num_heads) -> slopes (num_heads,)
    t5          f(relative_position, bidirectional, num_buckets, max_distance) -> buckets
    gradient    f(token_table, token_ids, upstream) -> d_token_table (dense)
    position_ids  f(input_ids, attention_mask, past_length) -> (B, T) rows of the position table
    bert        f(word_table, type_table, position_table, input_ids, token_type_ids, start) -> x

A model's configuration (--config config.json or a .gguf file, --model NAME for a bundled
preset) sets the contract: rope at its head_dim, rotary_dim, layout, base and scaling rule
(the length rules, dynamic and longrope, take max(positions) + 1 as the length, Hugging
Face's rule); lookup with Gemma's scale f(token_table, token_ids); position_ids by its rule
(OPT, RoBERTa, BART); bert with its type_vocab_size.

Every case is held to the float64 reference rounded once to the dtype tried: lookups, slopes,
buckets and gradient rows of at most two terms bit for bit; a sixteen-term gradient row within
n * eps * sum|terms|; tables and rotations within the suite's derived tolerance.
A result that differs is named by the mistake it matches; a bad id must raise.

    compare.py check my_rope.py:rope --kind rope
    compare.py check my_rope.py:rope --kind rope --model llama-3.2-1b
    compare.py check port.py:rope --kind rope --config path/to/config.json
    compare.py check --known                  # the matrix of the implementations people use

Exit status: 0 every check conforms (with --known: the suite's own control rows do), 1 one
differs (the report says which and how), 2 bad usage (TARGET cannot be imported or is not
callable).
"""

from __future__ import annotations

import json
import os

from embedding_parity import outputs
from embedding_parity.cli import UsageError
from embedding_parity.conformance.frameworks import FRAMEWORKS
from embedding_parity.conformance.kinds import KINDS, VOCAB
from embedding_parity.jobs import command

COMMAND = "check"
DEFAULT_BASE = 10000.0


def add_arguments(parser) -> None:
    add = parser.add_argument
    add("target", nargs="?", metavar="TARGET", help="path/to/file.py:NAME or package.module:NAME")
    add("--kind", choices=list(KINDS), help="the contract TARGET follows")
    add("--framework", choices=FRAMEWORKS, help="what TARGET takes and returns (default: detected)")
    add(
        "--base",
        type=command.positive_finite,
        default=10000.0,
        help="rope and sinusoidal base (default: %(default)g)",
    )
    add("--padding-idx", type=command.at_least(0), help="gradient: the row that must not learn")
    add("--config", metavar="CONFIG", help="a model's config.json (or .gguf): the contract it sets")
    add("--model", metavar="NAME", help="a bundled model preset (see --model list)")
    add("--only", metavar="CHECK", help="run only the checks whose name starts with CHECK")
    add(
        "--timeout",
        type=command.seconds,
        default=60.0,
        help="seconds per case (default: %(default)g)",
    )
    add("--json", metavar="OUT.json", help="write every case's verdict as JSON")
    add("--known", action="store_true", help="run the matrix of known implementations instead")
    add("--rows", nargs="+", metavar="NAME", help="with --known: only these rows (default: all)")
    add("--markdown", metavar="PATH.md", help="with --known: the page whose matrix to rewrite")
    add("--out", metavar="PICTURE", help="with --known: phase error against position, a picture")
    parser.set_defaults(run=main)


def main(args) -> int:
    """1 if a check differs (with --known: if a control row does)."""
    command.check_file("--json", args.json, ".json")
    if args.known:
        return _known(args)
    for flag in ("rows", "markdown", "out"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag} goes with --known")
    if args.model == "list":
        from embedding_parity import configs

        print(configs.listing())
        return 0
    if args.target is None or args.kind is None:
        raise UsageError("give TARGET and --kind (or --known): see compare.py check --help")
    if args.base != DEFAULT_BASE and args.kind not in ("rope", "sinusoidal"):
        raise UsageError(f"--base goes with --kind rope or sinusoidal, not {args.kind}")
    if args.padding_idx is not None:
        if args.kind != "gradient":
            raise UsageError(f"--padding-idx goes with --kind gradient, not {args.kind}")
        if args.padding_idx >= VOCAB:
            raise UsageError(
                f"--padding-idx {args.padding_idx} is past the battery's {VOCAB}-row table: "
                f"use 0 to {VOCAB - 1}"
            )
    outputs.check_not_inputs({"--json": args.json}, {"TARGET": args.target.rpartition(":")[0]})
    from embedding_parity.conformance import runner

    options = {"base": args.base, "padding_idx": args.padding_idx}
    options.update(_configured(args))
    report = runner.run(
        _absolute(args.target),
        args.kind,
        framework=args.framework,
        options=options,
        timeout=args.timeout,
        only=args.only,
    )
    print("\n".join(report.lines()))
    if args.json:
        _write_json(args.json, report.record())
    return 0 if report.conforms else 1


def _configured(args) -> dict:
    """The options a --config or --model sets for --kind; {} without one."""
    if args.config is None and args.model is None:
        return {}
    from embedding_parity import configs

    if args.config is not None and args.model is not None:
        raise UsageError("give --config or --model, not both")
    if args.base != DEFAULT_BASE:
        raise UsageError(
            "--base comes from the config (rope_theta): leave it out with --config or --model"
        )
    config = configs.read(args.config) if args.config else configs.preset(args.model)
    flag = "--config" if args.config else "--model"
    print(config.line())
    return config.options(args.kind, flag)


def _absolute(target: str) -> str:
    """A file target made absolute, so that the worker finds it from any folder."""
    where, colon, name = target.rpartition(":")
    return f"{os.path.abspath(where)}{colon}{name}" if where.endswith(".py") else target


def _write_json(path: str, record) -> None:
    outputs.write_text(path, json.dumps(record, indent=1, allow_nan=False))
    print(f"json: {os.path.abspath(path)}")


def _known(args) -> int:
    from embedding_parity.conformance import known

    if args.target is not None or args.kind is not None:
        raise UsageError("--known runs its own targets: leave out TARGET and --kind")
    given = {"--only": args.only, "--framework": args.framework, "--padding-idx": args.padding_idx}
    given.update({"--config": args.config, "--model": args.model})
    given["--base"] = None if args.base == DEFAULT_BASE else args.base
    for flag, value in given.items():
        if value is not None:
            raise UsageError(f"{flag} does not go with --known: each row has its own settings")
    if args.markdown is not None:
        command.check_file("--markdown", args.markdown, ".md")
        known.check_markdown(args.markdown)  # before minutes of work
    if args.out is not None:
        command.check_picture(args.out)
    matrix = known.run(args.rows, timeout=args.timeout, progress=print)
    print("\n".join(known.summary(matrix)))
    if args.json:
        _write_json(args.json, matrix)
    if args.markdown:
        known.write_markdown(matrix, args.markdown)
        print(f"matrix: {os.path.abspath(args.markdown)}")
    if args.out:
        from embedding_parity.drawing import conformance as pictures

        pictures.phase_errors(matrix, args.out)
        print(f"picture: {os.path.abspath(args.out)}")
    return 0 if known.controls_conform(matrix) else 1
