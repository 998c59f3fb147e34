"""Nothing left behind, seen as a fresh machine sees it: a pytest plugin (tests/conftest.py
loads it; tests/test_leftovers.py runs it in sessions of its own).

Tests write only under tmp_path. The controller (the one process under pytest-xdist) gives
the session a folder of its own before any worker starts, and every process below it
inherits it: ``tmp`` is the temporary folder (TMPDIR) and ``home`` the home folder (HOME),
both empty at the start, and the framework caches' variables are unset, as on a machine that
never ran the suite. Whatever a test, a worker or a library it drives leaves in either is a
leak on every machine, not only on one whose /tmp lacked it; so is an untracked file in the
work tree. pytest's tmp_path root is the exception; tmp_path_retention_policy = "failed"
empties it of passing tests' folders. A passing session's folder is removed; a failing one's
is kept and named.

The system's temporary folder (the one TMPDIR named when the session started) is held too,
for a library that writes past TMPDIR (Inductor's ``torchinductor_$USER`` once did), but it is
shared with every other process of the machine: a browser, an IDE, another user's or another
project's run write there too, and their files are not the session's. So the session holds
only its own view of it: the controller enters a mount namespace of its own before any
worker starts (``unshare``, as root, or in a user namespace that maps the user to itself,
where the machine allows unprivileged ones) and mounts an empty folder of its own over the
system's temporary folder. Every process of the session, whatever its language, sees that
folder there and writes into it; no other process sees it, nor does the session see theirs.
Where the machine refuses a namespace (a container without CAP_SYS_ADMIN, Ubuntu's AppArmor
rule against unprivileged user namespaces), the session says in one line that the system's
temporary folder is not held and why, and holds the rest.

Two caches are the session's (``caches``, outside both folders), for the library code the
tests run in their own processes, where no command's private folder is entered: Matplotlib's
(the tests draw) and torch.compile's (torch makes its folder when a dispatch mode is entered,
and on an optimizer's first step). Children inherit those two; the rest stay unset, so a
child that writes one of them is caught. conftest.fresh_machine() runs a command with none
set, to show that it finds its own place for every one (embedding_parity.scratch).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from embedding_parity import scratch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# linux/sched.h and linux/mount.h
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_MNT_DETACH = 2

# Why the session has no namespace of its own (None once it has one), from unshare()'s one try.
_refused: str | None = "no namespace was entered"
_tried = False


def unshare() -> None:
    """Enter a mount namespace of this process's own, once; its children inherit it. Called
    by conftest before it imports anything that starts a thread: a user namespace (for a user
    without CAP_SYS_ADMIN) can only be entered by a process with one thread, and NumPy's
    OpenBLAS starts its threads on import. The mounts come later (pytest_configure)."""
    global _refused, _tried
    if _tried:
        return
    _tried = True
    _refused = _project_inside(tempfile.gettempdir())
    if _refused:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) == 0:
        return
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:
        _refused = f"unshare(CLONE_NEWNS): {_errno()}; {threads} threads rule out a user namespace"
        return
    # Tried in a child first: a process whose id maps cannot be written is left in a user
    # namespace with unmapped ids, which this one must never be.
    child = os.fork()
    if child == 0:
        os._exit(0 if _user_namespace() is None else 1)
    _, status = os.waitpid(child, 0)
    if status != 0:
        _refused = "unshare(CLONE_NEWUSER | CLONE_NEWNS) or its id maps refused"
        return
    _refused = _user_namespace()


def _user_namespace() -> str | None:
    """Enter a user and mount namespace that maps the user to itself; None, or why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
        return f"unshare(CLONE_NEWUSER | CLONE_NEWNS): {_errno()}"
    maps = (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1"))
    try:
        for name, text in maps:
            with open(f"/proc/self/{name}", "w") as map_file:
                map_file.write(text)
    except OSError as refused:
        return f"/proc/self/{name}: {refused.strerror}"
    return None


def _project_inside(system: str) -> str | None:
    """Why the system's temporary folder cannot be covered: the work tree, the current folder
    or the Python running the tests lies in it (a clone in /tmp), and would vanish under it."""
    for what, path in (
        ("the work tree", ROOT),
        ("the current folder", os.getcwd()),
        ("the Python running the tests", sys.prefix),
        ("the Python running the tests", os.path.realpath(sys.executable)),
    ):
        system = os.path.realpath(system)
        if os.path.commonpath([os.path.realpath(path), system]) == system:
            return f"{what} ({path}) lies in it"
    return None


# linux/capability.h: a process in a user namespace of its own holds every capability there;
# the session's tests run without them (as the user, not as its namespace's root), and the
# controller takes them back only to unmount.
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]


def _effective_capabilities(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), f"capget: {_errno()}")
    for word in data:
        word.effective = word.permitted if on else 0
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), f"capset: {_errno()}")


def _errno() -> str:
    number = ctypes.get_errno()
    return f"{os.strerror(number)} (errno {number})"


def _mount(source: str | None, target: str, flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source and source.encode(), target.encode(), None, flags, None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {source or 'none'} on {target}: {_errno()}")


def _umount(target: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(target.encode(), _MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), f"umount {target}: {_errno()}")


def _controller(config) -> bool:
    return not hasattr(config, "workerinput")


def _entries(folder: str) -> set[str]:
    return {name for name in os.listdir(folder) if not name.startswith("pytest-of-")}


def _untracked(home: str) -> set[str]:
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--ignored=no"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": home},  # git's own config (safe.directory) is the user's
    )
    return set(listed.stdout.splitlines()) if listed.returncode == 0 else set()


def _private_view(system: str, backing: str) -> str | None:
    """Mount ``backing`` over ``system`` in this namespace (after making every mount private,
    so that nothing propagates back to the machine's); None, or why not."""
    global _refused
    unshare()
    if _refused is None:
        try:
            _mount(None, "/", _MS_REC | _MS_PRIVATE)
            _mount(backing, system, _MS_BIND)
            if os.getuid() != 0:  # a user namespace's: the tests run as the user
                _effective_capabilities(False)
        except OSError as refused:
            _refused = refused.strerror
    return _refused


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if not _controller(config):
        return
    system = tempfile.gettempdir()
    backing = tempfile.mkdtemp(prefix="ep-tests-", dir=system)  # short: sockets go below
    refused = _private_view(system, backing)
    # In the private view the session's folder is the first entry of the (empty) system
    # folder; without one, it is the folder just made.
    session = backing if refused else os.path.join(system, "session")
    if not refused:
        os.mkdir(session)
    home = os.path.expanduser("~")  # the user's, before the session's replaces it
    folders = {name: os.path.join(session, name) for name in ("tmp", "home", "caches")}
    for folder in folders.values():
        os.mkdir(folder)
    for name in scratch.CACHES:
        os.environ.pop(name, None)
    os.environ.update(
        TMPDIR=folders["tmp"],
        HOME=folders["home"],
        MPLCONFIGDIR=os.path.join(folders["caches"], "matplotlib"),
        TORCHINDUCTOR_CACHE_DIR=os.path.join(folders["caches"], "torchinductor"),
    )
    tempfile.tempdir = folders["tmp"]
    config.stash[_SESSION] = _Session(system, backing, session, refused)
    config.stash[_UNTRACKED] = (home, _untracked(home))


class _Session:
    def __init__(self, system: str, backing: str, folder: str, refused: str | None):
        self.system, self.backing, self.folder, self.refused = system, backing, folder, refused

    def held(self) -> list[tuple[str, set[str]]]:
        """(folder, what is left in it) for each folder the session holds, folders named as
        the machine's other processes see them."""
        held = [
            (os.path.join(self.backing if self.refused else self.backing + "/session", name),
             _entries(os.path.join(self.folder, name)))
            for name in ("tmp", "home")
        ]  # fmt: skip
        if not self.refused:
            held.append((f"{self.system} (the session's own view, kept in {self.backing})",
                         set(os.listdir(self.system)) - {"session"}))  # fmt: skip
        return held

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        if not self.refused:
            if os.getuid() != 0:
                _effective_capabilities(True)
            # the machine's folder again, with the backing folder in it; a mount that will not
            # go ends with the namespace, when the session's last process does
            with contextlib.suppress(OSError):
                _umount(self.system)
        shutil.rmtree(self.backing, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if not _controller(config) or _SESSION not in config.stash:
        return
    held = config.stash[_SESSION]
    problems = [f"left in {at}: {', '.join(sorted(left))}" for at, left in held.held() if left]
    home, untracked = config.stash[_UNTRACKED]
    written = sorted(_untracked(home) - untracked)
    if written:
        problems.append(f"written into the work tree: {', '.join(written)}")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if problems:
        if reporter is not None:
            reporter.write("\n")
            reporter.write_sep("=", "the test session left files behind", red=True)
            for problem in problems:
                reporter.write_line(problem, red=True)
        if session.exitstatus == pytest.ExitCode.OK:  # an interrupted run stays interrupted
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if held.refused and reporter is not None:
        reporter.write_line(
            f"the system's temporary folder {held.system} is not held (only the session's own"
            f" TMPDIR and HOME are): no private view of it, {held.refused}"
        )
    config.stash[_FAILED] = session.exitstatus != pytest.ExitCode.OK
    if config.stash[_FAILED] and reporter is not None:
        reporter.write_line(f"the session's temporary folder and home are kept: {held.backing}")


def pytest_unconfigure(config):
    """A passing session's folder goes once pytest has cleaned its own tmp_path root."""
    if _controller(config) and _SESSION in config.stash and not config.stash.get(_FAILED, False):
        config.stash[_SESSION].remove()


_SESSION = pytest.StashKey[_Session]()
_UNTRACKED = pytest.StashKey[tuple]()
_FAILED = pytest.StashKey[bool]()
