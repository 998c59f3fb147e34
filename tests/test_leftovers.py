"""The session judges only what it owns (tests/leftovers.py): another process writing into
the system's temporary folder during a session fails nothing; the session's own processes
writing there, past TMPDIR, fail it. Each case runs a session of its own (a pytest child with
the plugin alone, its system temporary folder one of this test's), while this test's process,
outside that session, plays the other program on the machine."""

import os
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 60  # seconds: every wait on the other side has this bound

# The session under test: one test that lets the other program write meanwhile, and, for the
# leak, a library of its own that writes past TMPDIR (an Inductor-like cache folder, in
# Python) and a child that is not Python at all.
SESSION = """
import os, pathlib, subprocess, time

SIGNALS = pathlib.Path(os.environ["SIGNALS"])
SYSTEM = os.environ["SYSTEM_TMP"]

def test_while_another_program_writes():
    (SIGNALS / "started").touch()
    deadline = time.monotonic() + {wait}
    while not (SIGNALS / "written").exists():
        assert time.monotonic() < deadline, "the other program never wrote"
        time.sleep(0.02)
    {leak}
"""
LEAK = """
    os.mkdir(os.path.join(SYSTEM, "torchinductor_" + os.environ.get("USER", "root")))
    subprocess.run(["touch", os.path.join(SYSTEM, "written-by-a-child")], check=True, timeout=30)
"""
# What the other program writes: names a leak of the session's would have too.
OTHERS = ("torchinductor_root", "tmp.another-program", "ep-tests-someone-else")


def run_session(tmp_path, leak: bool) -> tuple[subprocess.CompletedProcess, str]:
    system, signals = tmp_path / "system", tmp_path / "signals"
    system.mkdir()
    signals.mkdir()
    (tmp_path / "test_session.py").write_text(
        SESSION.format(wait=WAIT, leak=LEAK.strip() if leak else "")
    )
    env = {
        # a session of its own: not an xdist worker, none of this session's options
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        "TMPDIR": str(system),
        "SYSTEM_TMP": str(system),
        "SIGNALS": str(signals),
        "PYTHONPATH": ROOT,
    }
    ended = threading.Event()
    other = threading.Thread(target=another_program, args=(system, signals, ended), daemon=True)
    other.start()
    try:
        session = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "tests.leftovers", "-p", "no:cacheprovider",
             "-p", "no:jaxtyping", "-p", "no:randomly", "-q", "test_session.py"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        ended.set()  # the program's wait ends even if the session never started
        other.join(timeout=WAIT)
    return session, str(system)


def another_program(system, signals, ended) -> None:
    """Once the session runs, write into the machine's temporary folder, as a browser, an IDE
    or another project's test run would."""
    while not (signals / "started").exists():
        if ended.wait(0.02):
            return
    (system / OTHERS[0]).mkdir()
    (system / OTHERS[1]).write_text("another program's")
    (system / OTHERS[2]).mkdir()
    (signals / "written").touch()


def not_held(output: str) -> bool:
    """Whether the session said this machine gives it no private view (and so holds only its
    own TMPDIR and HOME): a container without CAP_SYS_ADMIN, say."""
    return "is not held (only the session's own TMPDIR and HOME are)" in output


def test_another_program_writing_into_the_system_temporary_folder_fails_nothing(tmp_path):
    session, system = run_session(tmp_path, leak=False)
    output = session.stdout + session.stderr
    assert session.returncode == 0, output
    assert "1 passed" in output
    assert "left files behind" not in output
    # the other program's files are where it put them; the session's own folder is gone
    assert sorted(os.listdir(system)) == sorted(OTHERS)


def test_the_sessions_own_writes_past_tmpdir_fail_it(tmp_path):
    session, system = run_session(tmp_path, leak=True)
    output = session.stdout + session.stderr
    if not_held(output):  # nothing to hold the session's writes to: say why, and skip
        (why,) = [line for line in output.splitlines() if "is not held" in line]
        pytest.skip(why)
    assert session.returncode == 1, output
    assert "1 passed" in output
    (left,) = [line for line in output.splitlines() if line.startswith(f"left in {system} ")]
    user = os.environ.get("USER", "root")
    assert left.endswith(f": torchinductor_{user}, written-by-a-child")  # not the others'
    kept = output.split("the session's temporary folder and home are kept: ")[1].split()[0]
    leaks = [f"torchinductor_{user}", "written-by-a-child"]
    assert sorted(os.listdir(kept)) == sorted(["session", *leaks])
