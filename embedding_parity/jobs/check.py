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
    pos2d_resize  f(table, old_grid, new_grid, prefix_tokens) -> table (prefix + h*w, D), raster
    pos2d_table   f(grid, dim) -> table (h*w, dim) float32, a fixed 2-D sin-cos table, raster
    rope2d      f(x, positions) -> x turned; x (..., N, head_dim), positions (N, 2) (row, column)
    rope2d_ids  f(grid) -> (N, 2) int (row, column) of each token in the model's order

A model's configuration (--config config.json or a .gguf file, --model NAME for a bundled
preset) sets the contract: rope at its head_dim, rotary_dim, layout, base and scaling rule
(the length rules, dynamic and longrope, take max(positions) + 1 as the length, Hugging
Face's rule), layer type by layer type where its layers rotate differently (Gemma 3's
sliding and global layers, SmolLM3's NoPE layers: TARGET called f(x, positions, layer), or
f(x, positions) for the one type --layer-type or --layer names); lookup with Gemma's scale f(token_table, token_ids); position_ids by its rule
(OPT, RoBERTa, BART); bert with its type_vocab_size.

rope, lookup, pos2d_resize and rope2d are asked two ways too, their invariances
(rope_invariance, lookup_invariance: a batch and its rows, chunks and one call, a call after one
in another dtype, ...; pos2d_resize_invariance: the identity and a transposed grid;
rope2d_invariance: q . k by the offset alone) checks of the same verdict, where the call is one
they are built for; --no-invariances runs the contract alone. The last line says whether they
were asked, and why not.

Every case is held to the float64 reference rounded once to the dtype tried: lookups, slopes,
buckets and gradient rows of at most two terms bit for bit; a sixteen-term gradient row within
n * eps * sum|terms|; tables and rotations within the suite's derived tolerance.
A result that differs is named by the mistake it matches; a bad id must raise.

    compare.py check my_rope.py:rope --kind rope
    compare.py check my_rope.py:rope --kind rope --model llama-3.2-1b
    compare.py check port.py:rope --kind rope --config path/to/config.json --against hf
    compare.py check port.py:rope --kind rope --model gemma-3-4b --layer-type sliding_attention
    compare.py check port.py:lookup --kind lookup --through onnx   # exported, run by ONNX Runtime
    compare.py check port.py:rope --kind rope --dtypes float32,bfloat16 \\
        --expect 'rotation float64=computes in float32'
    compare.py check --export-cases DIR --kind rope --model llama-3.2-1b   # the battery as files
    compare.py check --results DIR            # judge the results DIR/results/ holds
    compare.py check --known                  # the matrix of the implementations people use
    compare.py check --known --rows 'vllm*llama-3.2-1b' \\
        --against 'transformers rotary at llama-3.2-1b'   # one row held to another, bit for bit

From Python and pytest: embedding_parity.conformance.check, assert_conforms and
parametrize_with_checks (docs/conformance.md, "Add it to your CI").

Exit status: 0 every check conforms, or differs as --expect said (with --known: the suite's
own control rows conform; with --known --against: every row held is bit-identical to it and
keeps the contract), 1 one differs or fails (the report says which and how; with
--strict, an expected difference that conforms too; with --results, a folder that leaves out
checks of the battery), 2 bad usage (TARGET cannot be imported or is not callable, a flag
that does not fit), 3 no verdict: not one valid case was answered (every one refused, its
dtype or format named by the error, or only bad ids tried): a refusal is no evidence.
"""

from __future__ import annotations

import argparse
import json
import os

from embedding_parity import outputs
from embedding_parity.conformance.frameworks import FRAMEWORKS
from embedding_parity.conformance.kinds import KINDS
from embedding_parity.conformance.numerics import FLOATS
from embedding_parity.conformance.paths import PATHS
from embedding_parity.jobs import command
from embedding_parity.usage import UsageError

COMMAND = "check"
EXIT_STATUS = {"CONFORMS": 0, "DIFFERS": 1, "INCOMPLETE": 1, "NO VERDICT": 3}


def add_arguments(parser) -> None:
    add = parser.add_argument
    add("target", nargs="?", metavar="TARGET", help="path/to/file.py:NAME or package.module:NAME")
    add("--kind", choices=list(KINDS), help="the contract TARGET follows")
    add("--framework", choices=FRAMEWORKS, help="what TARGET takes and returns (default: detected)")
    add(
        "--base",
        type=command.base,
        help="rope and sinusoidal base (default: 10000)",
    )
    add("--padding-idx", type=command.at_least(0), help="gradient: the row that must not learn")
    add("--config", metavar="CONFIG", help="a model's config.json (or .gguf): the contract it sets")
    add("--model", metavar="NAME", help="a bundled model preset (see --model list)")
    add(
        "--layer-type",
        metavar="NAME",
        help="rope, with a config whose layers rotate differently: check this layer type alone, "
        "TARGET called f(x, positions) (default: every type, f(x, positions, layer))",
    )
    add(
        "--layer",
        type=command.at_least(0),
        metavar="N",
        help="rope: check layer N's type alone, as --layer-type does",
    )
    add(
        "--only",
        metavar="CHECK",
        help="run only the check named CHECK, or the checks whose name starts with it",
    )
    add(
        "--dtypes",
        type=_dtypes,
        metavar="DTYPE[,DTYPE...]",
        help=f"the dtypes tried (default: all of {','.join(FLOATS)}); bad ids are always tried",
    )
    add(
        "--expect",
        action="append",
        default=[],
        type=_expectation,
        metavar="CHECK=REASON",
        help="an expected difference: CHECK (a check's name, test id or a glob) differs for "
        "REASON; "
        "reported as expected, exit 0 if only expected ones differ (repeatable)",
    )
    add(
        "--expect-file",
        metavar="PATH",
        help="expected differences, one CHECK = REASON a line (a line that starts with # is a "
        "comment)",
    )
    add("--strict", action="store_true", help="an expected difference that conforms is exit 1")
    add(
        "--against",
        metavar="TARGET",
        help="hold the implementation to TARGET, the one it is ported from, case by case and "
        "bit for bit in each dtype: path/to/file.py:NAME, package.module:NAME, or a source the "
        "kit ships, built at the same --config: hf or torchtune; with --known, a row (named as "
        "--rows names them): each row of its kind at its configuration is held to it",
    )
    add(
        "--against-framework",
        choices=FRAMEWORKS,
        help="what the --against target takes and returns (default: detected)",
    )
    add(
        "--through",
        choices=tuple(PATHS),
        metavar="PATH",
        help="run TARGET the way production will and check the battery there: "
        f"{', '.join(PATHS)}; each case runs eagerly too, and what the path changes is "
        "named as the path's",
    )
    add(
        "--no-invariances",
        action="store_true",
        help="rope, lookup, pos2d_resize, rope2d: the contract alone, not asked two ways too "
        "(rope_invariance, lookup_invariance: a batch and its rows, chunks and one call, ...; "
        "pos2d_resize_invariance, rope2d_invariance); the last line says they were not asked",
    )
    add("--head-dim", type=command.at_least(2), help="rope: the head width (default 16)")
    add("--batched", action="store_true", help="rope: positions (B, T), x (B, H, T, head_dim)")
    add("--qk", action="store_true", help="rope: f(q, k, positions) -> (q, k) rotated in one call")
    add(
        "--table",
        type=_table,
        metavar="VOCAB,DIM,MAX_SEQ_LEN",
        help="lookup: the tables' shape (default 64,8,16)",
    )
    add(
        "--export-cases",
        metavar="DIR",
        help="write the battery (inputs, references, tolerances, manifest) into the new folder "
        "DIR instead of running a target",
    )
    add(
        "--results",
        metavar="DIR",
        help="judge the results in DIR/results/ of the cases exported into DIR",
    )
    add(
        "--timeout",
        type=command.seconds,
        default=60.0,
        help="seconds per case (default: %(default)g)",
    )
    add("--json", metavar="OUT.json", help="write every case's verdict as JSON")
    add("--known", action="store_true", help="run the matrix of known implementations instead")
    add(
        "--rows",
        nargs="+",
        metavar="NAME",
        help="with --known: only these rows (default: all); a row's exact name, or a glob "
        "('*llama-3.2-1b') or a part of names ('vllm'), in any case",
    )
    add("--markdown", metavar="PATH.md", help="with --known: the page whose matrix to rewrite")
    add("--out", metavar="PICTURE", help="with --known: phase error against position, a picture")
    parser.set_defaults(run=main)


def main(args) -> int:
    """1 if a check differs (with --known: if a control row does)."""
    if args.dtypes and args.target in FLOATS:  # --dtypes float32 bfloat16: TARGET took the second
        joined = ",".join([*args.dtypes, args.target])
        raise UsageError(
            f"TARGET {args.target!r} is a dtype: --dtypes takes a comma list: --dtypes {joined}"
        )
    command.check_file("--json", args.json, ".json")
    if args.model == "list":
        from embedding_parity import configs

        return command.listing_alone(args, add_arguments, configs.listing())
    outputs.check_not_inputs(
        {"--json": args.json, "--out": args.out},
        {
            "TARGET": _file_of(args.target),
            "--against": _file_of(args.against),
            "--config": args.config,
            "--expect-file": args.expect_file,
            "--markdown": args.markdown,
        },
        {"--results": args.results},
    )
    if args.known:
        return _known(args)
    for flag in ("rows", "markdown", "out"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag} goes with --known")
    if args.results is not None:
        return _results(args)
    if args.kind is None or (args.target is None) == (args.export_cases is None):
        raise UsageError(
            "give TARGET and --kind, --export-cases DIR and --kind, --results DIR, or --known: "
            "see compare.py check --help"
        )
    from embedding_parity.conformance import api, runner

    if args.no_invariances and args.kind not in runner.ASKED_TWICE:
        raise UsageError(
            f"--no-invariances goes with --kind {' or '.join(runner.ASKED_TWICE)} (asked two "
            f"ways by default), not {args.kind}"
        )
    options = api.options_for(
        args.kind,
        base=args.base,
        padding_idx=args.padding_idx,
        head_dim=args.head_dim,
        batched=args.batched,
        qk=args.qk,
        table=args.table,
        spell=lambda name: f"--{name.replace('_', '-')}",
        spell_kind=lambda kinds: f"--kind {kinds}",
    )
    options.update(_configured(args))
    if args.export_cases is not None:
        return _export(args, options)
    report = runner.run(
        api.absolute(args.target),
        args.kind,
        framework=args.framework,
        options=options,
        timeout=args.timeout,
        only=args.only,
        dtypes=args.dtypes,
        expected=_expected(args),
        strict=args.strict,
        against=api.absolute(args.against),
        against_framework=args.against_framework,
        through=args.through,
        invariances=not args.no_invariances,
    )
    return _report(args, report)


def _file_of(target: str | None) -> str | None:
    """The file part of a TARGET (path/to/file.py:NAME; a module's name is no file)."""
    return target.rpartition(":")[0] if target else None


def _report(args, report) -> int:
    print("\n".join(report.lines()))
    if args.json:
        _write_json(args.json, report.record())
    return EXIT_STATUS[report.verdict]


def _expected(args) -> dict:
    """{check or glob: reason} from --expect and --expect-file."""
    expected = {}
    if args.expect_file is not None:
        for number, line in enumerate(_small_text(args.expect_file).splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                try:
                    check, reason = _expectation(line)
                except argparse.ArgumentTypeError as error:
                    raise UsageError(f"--expect-file line {number}: {error}") from None
                expected[check] = reason
    expected.update(dict(args.expect))
    return expected


def _small_text(path: str, limit: int = 1 << 16) -> str:
    """A regular UTF-8 file of at most ``limit`` bytes, or one line saying why not."""
    try:
        return outputs.read_text(path, limit)
    except outputs.Unreadable as why:
        raise UsageError(f"--expect-file {path} {why}: it lists checks, one a line") from None


def _expectation(text: str) -> tuple[str, str]:
    check, equals, reason = text.partition("=")
    if not equals or not check.strip() or not reason.strip():
        raise argparse.ArgumentTypeError(
            f"{text!r} must be CHECK=REASON, say 'rotation float64=computes in float32'"
        )
    return check.strip(), reason.strip()


def _dtypes(text: str) -> list[str]:
    chosen = [d.strip() for d in text.split(",") if d.strip()]
    wrong = [d for d in chosen if d not in FLOATS]
    if wrong or not chosen:
        raise argparse.ArgumentTypeError(
            f"{text!r}: choose from {','.join(FLOATS)}, comma-separated"
        )
    return chosen


def _table(text: str) -> tuple[int, int, int]:
    try:
        vocab_size, dim, max_seq_len = (int(n) for n in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be VOCAB,DIM,MAX_SEQ_LEN, three integers: say 50257,768,1024"
        ) from None
    return vocab_size, dim, max_seq_len


def _export(args, options) -> int:
    from embedding_parity.conformance import cases, runner

    for flag in ("against", "json", "framework", "against_framework", "through"):
        if getattr(args, flag) is not None:
            raise UsageError(
                f"--{flag.replace('_', '-')} does not go with --export-cases: no target runs"
            )
    if args.expect or args.expect_file or args.strict:
        raise UsageError("--expect and --strict go with the judging (--results), not the export")
    if args.no_invariances:
        raise UsageError(
            "--no-invariances does not go with --export-cases: it exports the contract alone"
        )
    selected = runner.select_cases(args.kind, options, only=args.only, dtypes=args.dtypes)
    folder = cases.export(args.export_cases, args.kind, options, selected)
    print(f"{len(selected)} cases of {args.kind}: {os.path.abspath(folder)}")
    print(
        f"write each case's result into {os.path.join(folder, 'results')}/ (cases.json says "
        f"how), then: compare.py check --results {folder}"
    )
    return 0


def _results(args) -> int:
    from embedding_parity.conformance import cases, runner

    given = {"TARGET": args.target, "--kind": args.kind, "--config": args.config}
    given.update({"--model": args.model, "--against": args.against, "--only": args.only})
    given.update({"--export-cases": args.export_cases, "--framework": args.framework})
    given.update({"--dtypes": args.dtypes, "--head-dim": args.head_dim, "--table": args.table})
    given.update({"--padding-idx": args.padding_idx, "--batched": args.batched or None})
    given.update({"--qk": args.qk or None, "--against-framework": args.against_framework})
    given["--through"] = args.through
    given["--base"] = args.base
    given.update({"--layer": args.layer, "--layer-type": args.layer_type})
    given["--no-invariances"] = args.no_invariances or None
    for flag, value in given.items():
        if value is not None:
            raise UsageError(f"{flag} does not go with --results: the folder's cases.json says")
    report = cases.judge(args.results, _expected(args), args.strict)
    twice = runner.ASKED_TWICE.get(report.kind)
    if twice is not None:  # a file holds one answer to a case; an invariance asks for several
        why = f"a folder holds one answer a case: ask them of the target, --kind {twice}"
        report.invariances = {"kind": twice, "not_asked": why}
    return _report(args, report)


def _configured(args) -> dict:
    """The options a --config or --model sets for --kind; {} without one."""
    if args.config is None and args.model is None:
        if _layer(args) is not None:
            raise UsageError("--layer and --layer-type go with --config or --model")
        return {}
    from embedding_parity import configs

    if args.config is not None and args.model is not None:
        raise UsageError("give --config or --model, not both")
    if args.base is not None:  # even 10000, the default: the config's rope_theta decides
        raise UsageError(
            "--base comes from the config (rope_theta): leave it out with --config or --model"
        )
    config = configs.read(args.config) if args.config else configs.preset(args.model)
    flag = "--config" if args.config else "--model"
    try:  # the options first: a kind that judges the rotation runs the model's own code
        return config.options(args.kind, flag, layer=_layer(args))
    finally:
        print(config.line())


def _layer(args):
    """--layer N or --layer-type NAME (not both), or None."""
    if args.layer is not None and args.layer_type is not None:
        raise UsageError("give --layer or --layer-type, not both")
    return args.layer if args.layer is not None else args.layer_type


def _write_json(path: str, record) -> None:
    outputs.write_text(path, json.dumps(record, indent=1, allow_nan=False))
    print(f"json: {os.path.abspath(path)}")


def _known(args) -> int:
    from embedding_parity.conformance import known, report

    if args.target is not None or args.kind is not None:
        raise UsageError("--known runs its own targets: leave out TARGET and --kind")
    given = {"--only": args.only, "--framework": args.framework, "--padding-idx": args.padding_idx}
    given.update({"--config": args.config, "--model": args.model, "--dtypes": args.dtypes})
    given.update({"--head-dim": args.head_dim, "--table": args.table})
    given.update({"--export-cases": args.export_cases, "--results": args.results})
    given.update({"--expect-file": args.expect_file, "--expect": args.expect or None})
    given.update({"--strict": args.strict or None, "--batched": args.batched or None})
    given["--qk"] = args.qk or None
    given["--against-framework"] = args.against_framework  # a row's is its own
    given["--through"] = args.through
    given["--base"] = args.base
    given.update({"--layer": args.layer, "--layer-type": args.layer_type})
    given["--no-invariances"] = args.no_invariances or None
    for flag, value in given.items():
        if value is not None:
            raise UsageError(f"{flag} does not go with --known: each row has its own settings")
    if args.against is not None:
        for flag in ("markdown", "out"):
            if getattr(args, flag) is not None:
                raise UsageError(
                    f"--{flag} draws the matrix against the contract, not rows held to a row: "
                    "leave out --against"
                )
    if args.markdown is not None:
        command.check_file("--markdown", args.markdown, ".md")
        known.check_markdown(args.markdown)  # before minutes of work
    if args.out is not None:
        command.check_picture(args.out)
    matrix = known.run(args.rows, timeout=args.timeout, progress=print, against=args.against)
    if args.against is None:
        print("\n".join(known.summary(matrix)))
    if args.json:
        _write_json(args.json, {"schema_version": report.SCHEMA_VERSION, **matrix})
    if args.markdown:
        known.write_markdown(matrix, args.markdown)
        print(f"matrix: {os.path.abspath(args.markdown)}")
    if args.out:
        from embedding_parity.drawing import conformance as pictures

        pictures.phase_errors(matrix, args.out)
        print(f"picture: {os.path.abspath(args.out)}")
    if args.against is not None:  # every row held bit-identical to it, keeping the contract
        return 0 if all(r.get("report", {}).get("conforms") for r in matrix["rows"]) else 1
    return 0 if known.controls_conform(matrix) else 1
