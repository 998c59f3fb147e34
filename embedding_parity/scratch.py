"""One private temporary folder per run, removed on every way out.

Everything a job writes temporarily (the torch ranks' and JAX processes' case files and
logs, the conformance workers' arrays) goes in it: ``tempfile`` and every child process
(through ``TMPDIR``) are pointed there for the run. ``mkdtemp`` makes it mode 0700, so no
other user can plant a file in it or read one. It is removed when the job returns, raises,
is interrupted (Ctrl-C) or is asked to stop (SIGTERM, SIGHUP): those signals raise
``Terminated`` in the main thread, so every ``finally`` on the way out runs, and those
that start processes stop them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwind as for Ctrl-C. ``signal`` is its number."""

    def __init__(self, number: int):
        super().__init__(signal.Signals(number).name)
        self.signal = number


def _terminate(number, frame):
    raise Terminated(number)


@contextlib.contextmanager
def private_folder(prefix: str = "embedding-parity-"):
    """The run's temporary folder, as ``tempfile``'s and the children's TMPDIR, while the
    block runs; SIGTERM and SIGHUP raise ``Terminated`` meanwhile (main thread only)."""
    saved_env, saved_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir  # before mkdtemp sets it
    folder = tempfile.mkdtemp(prefix=prefix)  # mode 0700
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {number: signal.signal(number, _terminate) for number in STOP_SIGNALS}
    os.environ["TMPDIR"], tempfile.tempdir = folder, folder
    try:
        yield folder
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        tempfile.tempdir = saved_tempdir
        shutil.rmtree(folder, ignore_errors=True)
