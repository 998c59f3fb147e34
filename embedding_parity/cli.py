"""The command line: one subcommand per job, each declared by its own module.

The parser only creates the subparsers, the way torchtune's ``tune`` command is built: every
job module in ``JOBS`` adds its own flags (``add_arguments``, which also sets ``run`` to its
``main(args) -> int``), checks them and runs itself. With no command, or with flags first, the
seed demo runs, so bare ``python compare.py`` is the seed demo. Exit status: 0 every backend agrees, 1 one differs
(or a demonstration's claim fails), 2 bad usage or input (one line, no traceback),
130 interrupted (Ctrl-C), 143 terminated (SIGTERM; 129 for SIGHUP), 141 when the reader of
its output went away (``compare.py | head``: quietly, as SIGPIPE would). Every run's temporary
files live in one private folder that every one of these ways out removes (``scratch``).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys

from embedding_parity import scratch
from embedding_parity.jobs import check, demos, page, seed, shard, text, train, vision
from embedding_parity.usage import UsageError

# The job modules, in the order --help lists them; the first is the default.
JOB_MODULES = (seed, text, demos, train, shard, vision, page, check)
JOBS = tuple(job.__name__.rsplit(".", 1)[1] for job in JOB_MODULES)


class Parser(argparse.ArgumentParser):
    """argparse, with its errors raised (one line from main) instead of printed with usage."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        raise UsageError(message)

    def _get_values(self, action, arg_strings):
        # argparse drops a "--" given as a flag's value (--dim=--), leaving an empty list as
        # the value of a one-value flag; refuse it instead.
        if action.option_strings and "--" in arg_strings and action.nargs != argparse.REMAINDER:
            raise argparse.ArgumentError(action, "expected a value, got '--'")
        return super()._get_values(action, arg_strings)


def build_parser(prog: str = "compare.py") -> Parser:
    parser = Parser(
        prog=prog,
        description="The token + position embedding in NumPy, PyTorch and JAX on the same "
        "weights: parity tables against a reference, pictures, training, sharding, the explorer "
        f"page. With no command (or flags first) it runs `seed`: `{prog} --dtype bfloat16` is "
        f"`{prog} seed --dtype bfloat16`. Each command's --help lists its flags.",
        epilog="Exit status: 0 every backend agrees, 1 one differs (or a demonstration's claim "
        "fails), 2 bad arguments or input (one line), 130 interrupted, 143 terminated.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for job in JOB_MODULES:
        summary = job.__doc__.split("\n\n")[0].replace("\n", " ")
        sub = commands.add_parser(
            job.COMMAND,
            help=summary,
            description=job.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        job.add_arguments(sub)  # its flags, and set_defaults(run=its main)
    return parser


def main(argv=None, prog: str = "compare.py") -> int:
    try:
        status = _main(argv, prog)
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at exit
        return status
    except BrokenPipeError:
        # The reader went away (`compare.py | head`): stop quietly, as command-line tools
        # do, with the status of a process that SIGPIPE ended. Python's documented recipe:
        # stdout onto /dev/null, so the interpreter's own flush at exit finds nothing to say.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE


def _main(argv, prog: str) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    implied = _implies_default(argv)
    if implied:
        argv = [JOBS[0], *argv]
    # Errors name what was typed: "compare.py demo order: error: ...", "compare.py: error: ..."
    # when the default command was implied.
    where = prog if implied else " ".join([prog, *_command_words(parser, argv)])
    try:
        args = parser.parse_args(argv)
        args.argv, args.prog = argv, prog  # to run the same command again in a child
        with scratch.private_folder():  # the run's temporary files, removed on every way out
            return args.run(args)
    except KeyboardInterrupt as stop:  # Ctrl-C, or scratch.Terminated (SIGTERM, SIGHUP)
        return scratch.stopped(where, stop)
    except UsageError as error:
        print(f"{where}: error: {_hint(parser, str(error), argv)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise  # main's: not an error of the input
    # bad input found past argparse; OSError: an unwritable output, say
    except (
        ValueError,
        TypeError,
        IndexError,
        ImportError,
        OverflowError,
        MemoryError,
        OSError,
    ) as error:
        print(f"{where}: error: {error}", file=sys.stderr)
        return 2


def parse(argv, prog: str = "compare.py") -> argparse.Namespace:
    """The parsed command line, the default command implied as main implies it; UsageError
    if argparse refuses it. Runs nothing."""
    argv = list(argv)
    return build_parser(prog).parse_args([JOBS[0], *argv] if _implies_default(argv) else argv)


def _implies_default(argv) -> bool:
    """No command: nothing at all, or flags first (but not --help, which lists the commands)."""
    return not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help"))


def console() -> int:
    """The embedding-parity script."""
    return main(prog="embedding-parity")


def _command_words(parser, argv) -> list[str]:
    """The (sub)command names at the start of argv: ["demo", "order"], say."""
    words = []
    for word in argv:
        choices = _subcommands(parser)
        if word not in choices:
            break
        words.append(word)
        parser = choices[word]
    return words


def _subcommands(parser) -> dict:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def _hint(parser, message: str, argv) -> str:
    """argparse's message, plus where an unrecognised argument belongs: another command's flag,
    a flag that became a command (--text is now `compare.py text`), or the next value of a flag
    that takes a comma list (--dtypes float32 bfloat16 means --dtypes float32,bfloat16)."""
    found = re.match(r"unrecognized arguments: (.*)", message)
    if not found:
        return message
    hints = []
    for flag in dict.fromkeys(re.findall(r"(?:^| )(--[\w-]+)", found.group(1))):
        if flag[2:] in _subcommands(parser):
            hints.append(f"{flag} is now a command: {parser.prog} {flag[2:]} ...")
            continue
        owners = [" ".join(path) for path, sub in _all_commands(parser) if flag in _flags(sub)]
        if owners:
            hints.append(f"{flag} goes with {' or '.join(owners)}")
    hints += _comma_lists(parser, argv)
    return message + (f" ({'; '.join(hints)})" if hints else "")


def _comma_lists(parser, argv) -> list[str]:
    """A hint for each flag whose value is a comma list (a comma in its metavar: DTYPE[,DTYPE...])
    given its values as separate words, which left some over (unrecognised, or taken by a
    positional that pushed another out): the longest run of them the flag accepts, joined."""
    command = parser
    for word in _command_words(parser, argv):
        command = _subcommands(command)[word]
    hints = []
    for at, word in enumerate(argv):
        flag, equals, value = word.partition("=")
        action = command._option_string_actions.get(flag)
        if action is None or "," not in str(action.metavar):
            continue
        words = [value] if equals else []
        for next_word in argv[at + 1 :]:
            if next_word.startswith("-"):
                break
            words.append(next_word)
        for end in range(len(words), 1, -1):  # the longest run first
            try:
                (action.type or str)(",".join(words[:end]))
            except (argparse.ArgumentTypeError, ValueError):
                continue
            hints.append(f"{flag} takes a comma list: {flag} {','.join(words[:end])}")
            break
    return hints


def _all_commands(parser, path=None):
    """(path, parser) of every command and subcommand, depth first."""
    for name, sub in _subcommands(parser).items():
        here = [*(path or [parser.prog]), name]
        yield here, sub
        yield from _all_commands(sub, here)


def _flags(parser) -> set[str]:
    return set(parser._option_string_actions)
