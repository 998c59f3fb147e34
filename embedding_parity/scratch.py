"""One private temporary folder per run, removed on every way out.

Everything a job writes temporarily (the torch ranks' and JAX processes' case files and
logs, the conformance workers' arrays) goes in it: ``tempfile`` and every child process
(through ``TMPDIR``) are pointed there for the run, and so are the caches that frameworks
write on first use (``CACHES``), unless you set their variables yourself: nothing is left in
the temporary folder or the home folder. ``mkdtemp`` makes it mode 0700, so no
other user can plant a file in it or read one. It is removed when the job returns, raises,
is interrupted (Ctrl-C) or is asked to stop (SIGTERM, SIGHUP): those signals raise
``Terminated`` in the main thread, so every ``finally`` on the way out runs, and those
that start processes stop them; more of them meanwhile are ignored.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

# How the project starts every Python of its own (the check's worker, the ranks and their
# launcher, the JAX processes, the benchmarks' helpers): -P keeps the current folder off the
# import path, so that a traceback.py or numpy.py where the user stands is never imported in
# place of the library's. The project comes from PYTHONPATH, set by whoever starts it.
PYTHON = (sys.executable, "-P")

# What each framework writes on first use, and where it would go by default. A variable you
# set yourself is kept: that is how to ask for a cache that outlives the run (a persistent
# torch.compile cache, say). JAX's persistent compilation cache is off unless you set
# JAX_COMPILATION_CACHE_DIR, so it needs no entry here.
CACHES = {
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",  # torch.compile: $TMPDIR/torchinductor_$USER
    "TRITON_CACHE_DIR": "triton",  # Triton's kernels (GPU): ~/.triton/cache
    "MPLCONFIGDIR": "matplotlib",  # config and font list: ~/.config, ~/.cache/matplotlib
    "KERAS_HOME": "keras",  # keras.json, written on import: ~/.keras
    "HF_HOME": "huggingface",  # Hugging Face's hub cache and modules: ~/.cache/huggingface
    "XDG_CACHE_HOME": "cache",  # the rest that follow the XDG convention: ~/.cache
}


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwind as for Ctrl-C. ``signal`` is its number."""

    def __init__(self, number: int):
        super().__init__(signal.Signals(number).name)
        self.signal = number


def stopped(where: str, stop: KeyboardInterrupt) -> int:
    """Say in one line that the run was stopped (Ctrl-C, or ``Terminated``); its status:
    130 interrupted, 128 + the signal terminated (143 for SIGTERM, 129 for SIGHUP)."""
    if isinstance(stop, Terminated):
        print(f"{where}: terminated ({stop})", file=sys.stderr)
        return 128 + stop.signal
    print(f"{where}: interrupted", file=sys.stderr)
    return 130


def _terminate(number, frame):
    # The run is stopping: a second SIGTERM must not cut its cleanup short (and leave a
    # process it started behind), so the stop signals are ignored until private_folder ends.
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    raise Terminated(number)


@contextlib.contextmanager
def private_folder(prefix: str = "embedding-parity-"):
    """The run's temporary folder, as ``tempfile``'s and the children's TMPDIR, and the
    home of the framework caches not set already, while the block runs; SIGTERM and SIGHUP
    raise ``Terminated`` meanwhile (main thread only)."""
    names = ["TMPDIR", *CACHES]
    saved_env = {name: os.environ.get(name) for name in names}
    saved_tempdir = tempfile.tempdir  # before mkdtemp sets it
    folder = tempfile.mkdtemp(prefix=prefix)  # mode 0700
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {number: signal.signal(number, _terminate) for number in STOP_SIGNALS}
    os.environ.update({"TMPDIR": folder, **caches(folder)})
    tempfile.tempdir = folder
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for name, value in saved_env.items():  # torch.compile sets its variable itself
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tempfile.tempdir = saved_tempdir
        for number, handler in handlers.items():  # last: a SIGTERM until here is ignored
            signal.signal(number, handler)


def caches(folder: str) -> dict[str, str]:
    """The cache variables not set in this environment, each a path in ``folder`` (created by
    the framework that uses it)."""
    return {
        name: os.path.join(folder, sub) for name, sub in CACHES.items() if name not in os.environ
    }
