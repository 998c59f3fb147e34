"""Files are written whole or not at all.

Every file the project writes (pictures, JSON, .npz arrays, the page, the benchmarks' records)
goes through ``replacing``: a temporary file beside the target, renamed over it only when the
writing finished. A full disk, an exception or Ctrl-C midway leaves the old file as it was, and
the temporary one is removed. A folder written as one (a checkpoint) goes through
``new_folder`` likewise. A small file the project reads from a user (a manifest, a list of
expected differences) is opened through ``open_regular``: never a FIFO or a device.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time


class Unreadable(Exception):
    """Why a file is not read: the rest of a sentence that names it."""


def open_regular(path: str, *, links: bool = True):
    """``path`` opened for reading (binary) if it is a regular file, never blocking on a FIFO
    (``links=False``: not through a symbolic link either); else Unreadable."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if links else os.O_NOFOLLOW)
    try:
        handle = os.open(path, flags)
    except OSError as error:
        if not links and os.path.islink(path):
            raise Unreadable("is a symbolic link: write the file itself") from None
        raise Unreadable(f"cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise Unreadable("is not a regular file")
    return os.fdopen(handle, "rb")


def _open(folder: str, name: str, mode: str):
    """(file object, its path): a new temporary file in ``folder``, mode 0600 until renamed."""
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".partial")
    return os.fdopen(handle, mode, **({} if "b" in mode else {"encoding": "utf-8"})), temporary


@contextlib.contextmanager
def replacing(path, mode: str = "wb"):
    """A file to write ``path``'s new contents into; it replaces ``path`` when the block ends
    without an exception, and is removed otherwise."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    out, temporary = _open(folder, os.path.basename(path), mode)
    try:
        with out:
            yield out
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as open() would have made it
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def new_folder(path):
    """A temporary folder beside ``path`` (which must not exist) to write its contents into;
    renamed to ``path`` when the block ends without an exception, and removed with all it
    holds otherwise: a full disk midway leaves no half-written folder. Yields its path."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path):
        raise ValueError(f"{path} exists: a checkpoint goes into a new folder")
    name = os.path.basename(path)
    temporary = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=f".{name}.", suffix=".partial")
    try:
        yield temporary
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o777 & ~umask)  # as mkdir would have made it, not mkdtemp's 0700
        os.rename(temporary, path)
    except BaseException:
        for _ in range(10):  # a writer's own threads (TensorStore's) may outlive its error
            shutil.rmtree(temporary, ignore_errors=True)
            time.sleep(0.05)
            if not os.path.exists(temporary):
                break
        raise


def write_text(path, text: str) -> None:
    with replacing(path, "w") as out:
        out.write(text)


def read_text(path: str, limit: int) -> str:
    """A regular UTF-8 file of at most ``limit`` bytes, read through ``open_regular`` (never a
    FIFO, a device or /dev/zero); else Unreadable."""
    with open_regular(path) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise Unreadable(f"is over {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Unreadable(f"is not UTF-8 ({error.reason})") from None


def check_not_inputs(outputs: dict, inputs: dict, folders: dict | None = None) -> None:
    """Refuse an output that is an input, or lies inside an input folder, by any spelling (a
    symlink, a relative path), and two outputs that are one file: ValueError naming both
    flags, before any work. ``outputs``, ``inputs`` (files) and ``folders`` (input folders):
    {flag: path or None}."""
    named = [(flag, path) for flag, path in outputs.items() if path]
    for number, (out_flag, out) in enumerate(named):
        for in_flag, folder in (folders or {}).items():
            if folder and os.path.isdir(folder) and _inside(out, folder):
                raise ValueError(
                    f"{out_flag} {out} is inside {in_flag} {folder}, a folder the run reads "
                    "(an output there could replace one of its files); choose another folder"
                )
        for in_flag, source in [*inputs.items(), *named[:number]]:
            if source and _same(out, source):
                whose = "the input" if in_flag in inputs else "the other output"
                raise ValueError(
                    f"{out_flag} {out} is the same file as {in_flag} {source}: writing it would "
                    f"destroy {whose}; choose another name"
                )


def _inside(out: str, folder: str) -> bool:
    parent, folder = (
        os.path.realpath(os.path.dirname(os.path.abspath(out))),
        os.path.realpath(folder),
    )
    return os.path.commonpath([parent, folder]) == folder


def _same(out: str, source: str) -> bool:
    """The same file, by any spelling; two paths that do not exist yet, by their real path."""
    if os.path.exists(out) and os.path.exists(source):
        return os.path.samefile(out, source)
    return os.path.realpath(out) == os.path.realpath(source)
