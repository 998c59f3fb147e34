"""Every job checks the sizes it will allocate from its flags, before it allocates anything,
and refuses with one line naming the flags and the limit; and a property test over every
job's flags keeps it so: whatever is typed, exit 0, 1 or 2, on 2 one line and no traceback,
never past a set memory or time."""

import contextlib
import json
import os
import resource
import signal
import string

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from embedding_parity import cli
from embedding_parity.jobs import command
from embedding_parity.sharding import reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = f"is over the limit of {command.MAX_VALUES}"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--scheme", "t5", "--max-seq-len", "20000"], "--heads 4 x --max-seq-len 20000 squared"),
        (["--scheme", "alibi", "--heads", "100000000"], "--heads 100000000 x --max-seq-len 16"),
        (["--vocab-size", "100000000", "--dim", "1000"], "(--vocab-size 100000000 + --max-seq-len"),
        (["--batch", "10000000000"], "the output: --batch 10000000000 x 4 tokens x --dim 10"),
        (["train", "--steps", "1000000000"], "--steps 1000000000 x --batch-size 32 x 4 tokens"),
        (["train", "--dim", "1000000000"], "the token table: 14 words x --dim 1000000000"),
        (["train", "--head-dim", "1000000000"], "each projection: --head-dim 1000000000 x --dim"),
        (
            ["train", "--extrapolate", "--batch-size", "1000000000"],
            "--steps 1000 x --batch-size 1000000000 x 17 tokens",
        ),
        (["train", "--extrapolate", "--heads", "100000"], "--heads 100000 x --head-dim 8"),
        (["shard", "--batch", "1000000000000"], "the output: --batch 1000000000000 x 4 tokens"),
        (["shard", "--vocab-size", "100000000", "--dim", "100"], "the tables: (--vocab-size"),
    ],
)
def test_sizes_are_refused_from_the_flags_alone(capsys, argv, fragment):
    """Each of these once allocated first: a MemoryError after gigabytes, a traceback, or (for
    --steps) a run that grew silently past 1.6 GB."""
    assert cli.main([*argv, "--backends", "numpy"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and fragment in err and LIMIT in err, err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--tokens", "5", str(10**30)], f"token id {10**30} at token_ids[1] is out of range"),
        (["shard", "--tokens", str(2**64)], f"token id {2**64} at token_ids[0] is out of range"),
        (["--scheme", "alibi", "--tokens", str(-(2**63) - 1)], "token id -9223372036854775809"),
        (["page", "--train-steps", "1000000000"], "--train-steps 1000000000 is over 10000"),
    ],
)
def test_other_limits_name_the_value(capsys, argv, fragment):
    assert cli.main([*argv, "--backends", "numpy"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and fragment in err, err


def test_the_valid_shard_counts_are_found_without_trying_every_count():
    """The message lists the first counts and the largest; the list once came from trying
    every count up to the table's size (13 s for 10**7 rows)."""
    with pytest.raises(ValueError) as info:
        reference.check_shards(10**7 - 1, 10**7, "rows")
    assert "use one of 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, ..., 10000000" in str(info.value)
    assert reference.valid_counts(5) == [1, 2, 3, 5]


# --- the property test -------------------------------------------------------------------

MEMORY = 3 * 2**30  # bytes of address space a job may add to the test process's own
SECONDS = 60  # per command; the cheap base commands below take a few seconds at most

NUMBERS = st.sampled_from(
    [-(10**30), -(2**63), -1, 0, 1, 2, 3, 7, 2**31, 10**9, 10**12, 2**64, 10**30]
).map(str)
FLOATS = st.sampled_from(["nan", "inf", "-inf", "-1.5", "0", "1e-300", "0.5", "1e308"])
WORDS = st.one_of(
    st.sampled_from(["", "-", "abc", "1.5", "0x10", "１２", "--", "None"]),
    st.text(string.printable, max_size=8),
)
PATHS = st.sampled_from(["{tmp}/out", "{tmp}/missing/out", "/proc/out", "{tmp}", "{tmp}/in"])
VALUES = st.one_of(NUMBERS, NUMBERS, NUMBERS, FLOATS, WORDS)  # mostly numbers: past argparse

# command words and cheap flags (one backend, few steps), then the flags to vary
JOBS = {
    "seed": (
        ["seed", "--backends", "numpy", "--out", "{tmp}/seed.png"],
        ["--heads", "--base", "--tokens", "--vocab-size", "--dim", "--max-seq-len", "--start",
         "--batch", "--seed", "--dims", "--scheme", "--layout", "--weights", "--out"],
    ),
    "train": (
        ["train", "--backends", "numpy", "--scheme", "learned", "--steps", "2",
         "--out", "{tmp}/train.png"],
        ["--steps", "--batch-size", "--lr", "--dim", "--head-dim", "--seed", "--json", "--save",
         "--out", "--heads"],
    ),
    "extrapolate": (
        ["train", "--extrapolate", "--backends", "numpy", "--scheme", "none", "--steps", "2",
         "--length", "2", "--out", "{tmp}/extrapolate.png"],
        ["--steps", "--batch-size", "--dim", "--head-dim", "--heads", "--length", "--lr"],
    ),
    "shard": (
        ["shard", "--backends", "numpy", "--shards", "2", "--out", "{tmp}/shard.png"],
        ["--shards", "--tokens", "--batch", "--start", "--vocab-size", "--dim", "--max-seq-len",
         "--seed", "--weights", "--save-arrays", "--out", "--dtype"],
    ),
    "checkpoint": (  # a damaged table.json (RECORDS): refused before any rank starts
        ["shard", "--backends", "numpy", "torch", "--shards", "2", "--out", "{tmp}/shard.png",
         "--load-checkpoint", "{tmp}/checkpoint"],
        ["--vocab-size", "--dim", "--dtype", "--shards"],
    ),
    "page": (["page", "--backends", "numpy", "--out", "{tmp}/page.html"], ["--train-steps"]),
    "vision": (
        ["vision", "--backends", "numpy", "--out", "{tmp}/vision.png"],
        ["--grid", "--to", "--dim", "--seed", "--kernel", "--scheme", "--rule", "--spec",
         "--dtype", "--out"],
    ),
    "check": (  # a target drawn from TARGETS
        ["check", "{target}", "--kind", "lookup", "--only", "bad id"],
        ["--base", "--padding-idx", "--timeout", "--only", "--json"],
    ),
}  # fmt: skip
PATH_FLAGS = {"--out", "--json", "--save", "--save-arrays", "--weights"}
MORE_NUMBERS = {"--tokens", "--grid", "--to"}  # flags that take several numbers
# the check's targets: a correct one, and hostile ones (tests/test_hostile_targets.py)
TARGETS = [
    os.path.join(ROOT, "tests", "conformance_targets", target)
    for target in ("numpy_targets.py:lookup", "hostile.py:returns_none",
                   "hostile.py:raises_escapes", "hostile.py:returns_gigabytes",
                   "hostile.py:forks_and_returns", "hostile.py:prints_latin1_and_dies")
]  # fmt: skip


# the table.json of a checkpoint --load-checkpoint reads: one field of a good one given a
# wrong value or left out, or no such object at all
RECORD = {"framework": "torch", "format": "dcp", "vocab_size": 100, "dim": 10,
          "dtype": "float32", "strategy": "rows", "num_shards": 2}  # fmt: skip
JSON_VALUES = st.sampled_from(
    [None, [], {}, "", "bogus", "float32", "rows", True, -1, 0, 1.5, 2**63, 10**30, 1e308]
)
RECORDS = st.one_of(
    st.builds(lambda key, value: json.dumps({**RECORD, key: value}),
              st.sampled_from(list(RECORD)), JSON_VALUES),
    st.builds(lambda key: json.dumps({k: v for k, v in RECORD.items() if k != key}),
              st.sampled_from(list(RECORD))),
    st.sampled_from(["[]", "null", "", "{", "[" * 5000, '"table"', "1e400", "\xff"]),
    st.text(max_size=20),
)  # fmt: skip


class TookTooLong(BaseException):
    """Raised by the alarm: not an Exception, so the CLI cannot turn it into a status."""


@contextlib.contextmanager
def bounded(seconds: float, memory: int):
    """At most ``seconds`` of wall time and ``memory`` more bytes of address space."""
    with open("/proc/self/statm") as statm:
        used = int(statm.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = used + memory if hard == resource.RLIM_INFINITY else min(used + memory, hard)

    def alarm(number, frame):
        raise TookTooLong(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@st.composite
def commands(draw):
    job = draw(st.sampled_from(list(JOBS)))
    base, flags = JOBS[job]
    chosen = draw(st.lists(st.sampled_from(flags), min_size=1, max_size=2, unique=True))
    argv = [word.replace("{target}", draw(st.sampled_from(TARGETS))) for word in base]
    for flag in chosen:
        value = draw(PATHS if flag in PATH_FLAGS else VALUES)
        extra = draw(st.lists(NUMBERS, max_size=2)) if flag in MORE_NUMBERS else []
        argv += [flag, value, *extra] if not value.startswith("-") else [f"{flag}={value}", *extra]
    return argv


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=commands(), record=RECORDS)
@example(argv=["train", "--backends", "numpy", "--steps", "1000000000"], record="")
@example(
    argv=["seed", "--backends", "numpy", "--scheme", "t5", "--max-seq-len", "20000"], record=""
)
@example(argv=["shard", "--backends", "numpy", "--tokens", str(10**30)], record="")
@example(argv=["page", "--backends", "numpy", "--train-steps", "1000000000"], record="")
@example(argv=["train", "--backends", "numpy", "--steps", "2", "--save", "/proc/out.safetensors"],
         record="")  # fmt: skip
@example(argv=[*JOBS["checkpoint"][0], "--dim", "10"], record=json.dumps({**RECORD, "dtype": "x"}))
@example(argv=["check", TARGETS[2], "--kind", "lookup", "--only", "bad id", "--timeout", "9"],
         record="")  # fmt: skip
def test_any_flags_end_in_a_status_and_at_most_one_line(tmp_path_factory, capsys, argv, record):
    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "in").write_bytes(b"not a table")
    (tmp / "checkpoint" / "torch" / "dcp").mkdir(parents=True)  # no files: not even a good one
    (tmp / "checkpoint" / "torch" / "table.json").write_text(record)
    argv = [word.replace("{tmp}", str(tmp)) for word in argv]
    cwd = os.getcwd()
    os.chdir(tmp)  # default outputs land here
    try:
        with bounded(SECONDS, MEMORY):
            status = cli.main(argv)
    finally:
        os.chdir(cwd)
    out, err = capsys.readouterr()
    assert status in (0, 1, 2, 3), (argv, status, err)  # 3: check's no verdict
    if status == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("compare.py"), (argv, err)
        # refused by a check, not by running out
        assert "allocate" not in err and "Traceback" not in err, (argv, err)
    else:
        assert "Traceback" not in out + err, (argv, out, err)
    if argv[0] == "check":  # nothing a target printed or raised, raw
        assert all(line.isprintable() for line in (out + err).splitlines()), (argv, out, err)
