"""What the commands share: the flags several jobs declare, their checks, and the report of a
parity run. Each job module declares its own flags with these and checks the rest itself."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import backends
from embedding_parity.usage import UsageError, positive_finite, seconds  # noqa: F401 (the jobs' flags)

# The most values one array that a job builds from its flags may hold: 2 GiB in float64. A
# job works out its largest arrays from the flags alone and refuses past this, before it
# allocates anything (not a MemoryError, or a machine swapping, minutes later).
MAX_VALUES = 2**28


def check_size(count: int, formula: str, fix: str) -> None:
    """UsageError if ``count`` values (``formula``: the flags that make it, with their values)
    are over MAX_VALUES."""
    if count > MAX_VALUES:
        raise UsageError(f"{formula} = {count} values is over the limit of {MAX_VALUES}: {fix}")


def at_least(least: int):
    """An argparse type: an int, at least ``least``."""

    def parse(text: str) -> int:
        value = int(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    parse.__name__ = "int"  # argparse names the type in "invalid int value: 'x'"
    return parse


def base(text: str) -> float:
    """An argparse type: a sinusoidal or RoPE base (``validation.check_base``: above 1)."""
    try:
        return backends.validation.check_base(positive_finite(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).replace("base ", "", 1)) from None


base.__name__ = "float"


def column_range(text: str) -> tuple[int, int]:
    """An argparse type for --dims: "A:B" as (A, B)."""
    first, _, stop = text.partition(":")
    try:
        return int(first), int(stop)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must look like 0:32, got {text!r}") from None


column_range.__name__ = "dims"


def add_backends(parser) -> None:
    parser.add_argument(
        "--backends",
        nargs="+",
        metavar="NAME",
        help=f"backends to run (default: every installed one: {' '.join(backends.names())})",
    )


def add_picture(parser, default: str, what: str = "the picture") -> None:
    """--out and --show."""
    parser.add_argument("--out", default=default, help=f"{what} (default: %(default)s)")
    parser.add_argument(
        "--show",
        action="store_true",
        help="also open the picture in a window, if there is a display",
    )


def add_dims(parser) -> None:
    parser.add_argument(
        "--dims",
        type=column_range,
        metavar="A:B",
        help="columns to draw (default: all, or 0:32 for tables wider than 64)",
    )


def add_table_keys(parser) -> None:
    """--token-key and --position-key: the tables' names in a --weights file."""
    parser.add_argument("--token-key", help="name of the token table in a --weights file")
    parser.add_argument("--position-key", help="name of the position table in a --weights file")


def check_table_keys(args) -> None:
    """The keys name tables in a file: without --weights they have nothing to name."""
    if args.weights is None and (args.token_key is not None or args.position_key is not None):
        raise UsageError("--token-key and --position-key go with --weights PATH")


def chosen_backends(given) -> list[str]:
    """--backends (default: every installed one), each imported now: an unknown, missing or
    repeated one fails here, before any work."""
    names = list(given or backends.names())
    if len(set(names)) != len(names):
        raise UsageError(f"--backends lists a backend twice: {' '.join(names)}")
    for name in names:
        backends.get(name)
    return names


def check_picture(path: str, flag: str = "--out") -> None:
    """A picture path: a format matplotlib writes, in a folder that exists."""
    from embedding_parity import drawing

    drawing.require()
    extension = os.path.splitext(path)[1].lstrip(".").lower()
    if not drawing.writes(extension):
        raise UsageError(f"{flag} {path!r} needs an extension, one of .png .svg .pdf .jpg ...")
    check_folder(flag, path)


def check_folder(flag: str, path: str) -> None:
    """An output's folder exists and takes new files (the output is written beside itself and
    renamed), and the output is not a folder: checked before any work."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path!r}: folder {folder} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path!r} is a folder: give a file name")
    try:  # a real try, as the write will be: access() says yes to root even in /proc
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".embedding-parity-probe-")
    except OSError as error:
        raise UsageError(
            f"{flag} {path!r}: cannot write in folder {folder} ({error.strerror})"
        ) from None
    os.close(handle)
    os.unlink(probe)


def check_file(flag: str, path: str | None, ending: str) -> None:
    """An output file flag, if given: the right ending, in a folder that exists."""
    if path is None:
        return
    if not path.endswith(ending):
        raise UsageError(f"{flag} {path!r} must end in {ending}")
    check_folder(flag, path)


def show(args) -> bool:
    """--show when a display exists; without one, say so and only write the file."""
    display = sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    if args.show and not display:
        print("--show: no display found, only writing the file")
    return bool(args.show and display)


def report_parity(args, done) -> int:
    """Print and draw a parity run (``jobs.parity.Run``); 1 if a backend differs."""
    from embedding_parity.drawing import heatmaps, table
    from embedding_parity.jobs import arrays

    dims = heatmaps.columns(args.dims, done.results[0].output.shape[-1])
    print(done.heading)
    print(f"{done.setting}, token_ids shape {done.token_ids.shape}")
    for note in done.notes:
        print(note)
    print(table.parity_table(done.results))
    for r in done.results:
        for failure in r.failures:
            print(f"{r.backend}: {failure}")
    heatmaps.plot(done, args.out, dims=dims, show=show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    if getattr(args, "save_arrays", None):
        arrays.save(args.save_arrays, done)
        print(f"arrays: {os.path.abspath(args.save_arrays)}")
    print(done.verdict)
    return 1 if done.differing else 0


def given_flags(args, add_arguments) -> list[str]:
    """The flags of a job (its ``add_arguments``) that ``args`` sets away from their defaults,
    spelled as typed (``TARGET`` for a positional)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    spelled = {a.dest: (a.option_strings or [a.metavar or a.dest])[0] for a in parser._actions}
    defaults = vars(parser.parse_args([]))
    return [spelled[name] for name, value in defaults.items() if getattr(args, name) != value]


def listing_alone(args, add_arguments, listing: str) -> int:
    """--model list: the presets, and nothing else asked for beside it (exit 0 having checked
    nothing would read as a pass)."""
    given = [flag for flag in given_flags(args, add_arguments) if flag != "--model"]
    if given:
        raise UsageError(
            f"--model list only lists the presets and runs nothing: leave out "
            f"{', '.join(given)}, or give --model NAME to run at a preset"
        )
    print(listing)
    return 0
