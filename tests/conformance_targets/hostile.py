"""Targets that try to fool or wreck the kit (tests/test_hostile_targets.py): each is a correct
lookup or gradient for valid ids, and does one hostile thing where a bad id comes (or, for the
last few, on every call). Where one starts a process it writes the pid into $HOSTILE_PIDS.

NumPy's error state is made to raise at import, as a target may: the kit's own case
building must not trip on it (a float16 cast of the battery's tables underflows)."""

import os
import subprocess
import sys
import time

import numpy as np

np.seterr(all="raise")


def _bad(token_ids, vocab_size) -> bool:
    ids = np.asarray(token_ids)
    return ids.dtype.kind not in "iu" or bool(ids.min() < 0 or ids.max() >= vocab_size)


def _lookup(token_table, position_table, token_ids, start):
    return token_table[token_ids] + position_table[start : start + token_ids.shape[-1]]


def _keep_pid(pid: int) -> None:
    with open(os.environ["HOSTILE_PIDS"], "a") as pids:
        pids.write(f"{pid}\n")


def _returns(value):
    def lookup(token_table, position_table, token_ids, start):
        if _bad(token_ids, len(token_table)):
            return value
        return _lookup(token_table, position_table, token_ids, start)

    return lookup


returns_none = _returns(None)
returns_dict = _returns({"rows": [1.0, 2.0]})
returns_strings = _returns(np.array(["a", "b", "c"]))


def returns_gigabytes(token_table, position_table, token_ids, start):
    """A few bytes that stand for 4 GB: a broadcast view of one float64."""
    if _bad(token_ids, len(token_table)):
        return np.broadcast_to(np.float64(1.0), (500_000_000,))
    return _lookup(token_table, position_table, token_ids, start)


def _gradient(value):
    def gradient(token_table, token_ids, upstream):
        if _bad(token_ids, len(token_table)):
            return value(token_table.shape)
        grad = np.zeros_like(token_table)
        np.add.at(grad, token_ids.reshape(-1), upstream.reshape(-1, token_table.shape[1]))
        return grad

    return gradient


# of the table's shape, where the gradient's classifier reads numbers
gradient_of_records = _gradient(lambda shape: np.zeros(shape, [("row", "i8"), ("value", "f8")]))
gradient_of_strings = _gradient(lambda shape: np.full(shape, "0.0"))


def raises_escapes(token_table, position_table, token_ids, start):
    """Prints and raises text that would clear the screen and hide what follows, a lone
    surrogate, and a 3 MB line."""
    if _bad(token_ids, len(token_table)):
        print("\x1b[2J\x1b[8m" + "x" * 3_000_000, file=sys.stderr)
        raise IndexError("\x1b[2J\x1b[8mhidden \u202eevil \udce9" + "y" * 3_000_000 + "\rmore")
    return _lookup(token_table, position_table, token_ids, start)


def prints_latin1_and_dies(token_table, position_table, token_ids, start):
    if _bad(token_ids, len(token_table)):
        os.write(2, b"caf\xe9 \x1b[2J\n")
        os._exit(3)
    return _lookup(token_table, position_table, token_ids, start)


def floods_the_log(token_table, position_table, token_ids, start):
    """Prints 600 MB for a bad id, then dies: the kit reads what it printed last."""
    if _bad(token_ids, len(token_table)):
        line = b"z" * (1 << 20) + b"\n"
        for _ in range(600):
            os.write(2, line)
        os.write(2, b"the last line\n")
        os._exit(5)
    return _lookup(token_table, position_table, token_ids, start)


def forks_and_returns(token_table, position_table, token_ids, start):
    """fork() without os._exit: the copy returns into the kit at once, with a clamped row,
    while the target itself raises a moment later."""
    if _bad(token_ids, len(token_table)):
        if os.fork() == 0:
            return _lookup(token_table, position_table, np.zeros(3, np.int64), start)
        time.sleep(0.2)
        raise IndexError("token id out of range")
    return _lookup(token_table, position_table, token_ids, start)


def starts_a_process(token_table, position_table, token_ids, start):
    """Leaves a process running, and a forked copy of itself sleeping."""
    if _bad(token_ids, len(token_table)):
        _keep_pid(subprocess.Popen(["sleep", "120"]).pid)
        child = os.fork()
        if child == 0:
            time.sleep(120)
            os._exit(0)
        _keep_pid(child)
        raise IndexError("token id out of range")
    return _lookup(token_table, position_table, token_ids, start)


def dies_with_its_pipes_held(token_table, position_table, token_ids, start):
    """Dies while a forked child holds the worker's pipes open."""
    if _bad(token_ids, len(token_table)):
        child = os.fork()
        if child == 0:
            time.sleep(120)
            os._exit(0)
        _keep_pid(child)
        os._exit(4)
    return _lookup(token_table, position_table, token_ids, start)


def rope(x, positions):
    """Correct: its import above made NumPy raise on underflow, which the kit's float16 cases
    of long positions meet as it builds them."""
    from numpy_targets import rope as correct

    return correct(x, positions)


def closes_its_stderr(token_table, position_table, token_ids, start):
    """Closes the worker's stderr (and stdout, which the worker points at it), then hangs on
    a bad id: the kit waits out the timeout without spinning on the closed pipe."""
    if _bad(token_ids, len(token_table)):
        os.close(1)
        os.close(2)
        time.sleep(3600)
    return _lookup(token_table, position_table, token_ids, start)
