"""A run stopped from outside, by Ctrl-C (SIGINT) or SIGTERM, while its worker processes run:
one line, the status for the signal (130, 143), its private temporary folder removed and
every process it started gone."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import alive, descendants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets")

# command, and the file inside the run's private folder that shows its workers are running
JOBS = {
    "shard's torch ranks": (
        ["shard", "--backends", "torch", "--shards", "2", "--out", "{out}.png"],
        "rank1.log",
    ),
    "check's worker": (
        [
            "check",
            os.path.join(TARGETS, "misbehaving.py:hangs_on_bad_ids"),
            "--kind",
            "lookup",
            "--timeout",
            "120",
            "--json",
            "{out}.json",
        ],
        "hanging",  # the target's mark, made as it starts to hang
    ),
}
STATUS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated (SIGTERM)")}


def wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def find(folder: str, name: str) -> str | None:
    for where, _, files in os.walk(folder):
        if name in files:
            return os.path.join(where, name)
    return None


def start(job: str, tmp_path, temporary):
    """(process, argv, marker): ``job`` of JOBS run in ``tmp_path`` with TMPDIR
    ``temporary``, in a session of its own: a signal goes to the run alone, as `kill PID`
    sends it."""
    words, marker = JOBS[job]
    argv = [w.replace("{out}", str(tmp_path / "out")) for w in words]
    process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "compare.py"), *argv],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(temporary), "PYTHONPATH": ROOT},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return process, argv, marker


@pytest.mark.slow
@pytest.mark.parametrize(
    "job, number",
    # each signal on each kind of worker once (the JAX processes' Ctrl-C: test_sharding_jax.py)
    [("shard's torch ranks", signal.SIGINT), ("check's worker", signal.SIGTERM)],
    ids=lambda v: signal.Signals(v).name if isinstance(v, int) else v,
)
def test_a_stopped_run_cleans_up_everything(tmp_path, job, number):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    process, argv, marker = start(job, tmp_path, temporary)
    started = set()
    try:
        wait_for(lambda: find(str(temporary), marker), 90, f"{marker} in the private folder")
        started = descendants(process.pid)
        assert started, "the workers should be running"
        private = os.listdir(temporary)
        assert len(private) == 1 and private[0].startswith("embedding-parity-")
        assert os.stat(temporary / private[0]).st_mode & 0o777 == 0o700
        process.send_signal(number)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    status, word = STATUS[number]
    assert process.returncode == status, (out, err)
    assert err.strip().splitlines() == [f"compare.py {argv[0]}: {word}"], err
    assert os.listdir(temporary) == [], "the private folder should be gone"
    wait_for(lambda: not any(alive(pid) for pid in started), 10, "the workers to stop")
    assert not os.path.exists(tmp_path / "out.json") and not os.path.exists(tmp_path / "out.png")


@pytest.mark.slow
def test_more_sigterms_during_cleanup_leave_nothing_behind(tmp_path):
    """SIGTERM after SIGTERM while the run stops (a supervisor that insists): its cleanup
    still ends every process it started (a second one cut it short, and left the hanging
    worker alive)."""
    process, _, marker = start("check's worker", tmp_path, tmp_path)
    started = set()
    try:
        wait_for(lambda: find(str(tmp_path), marker), 90, f"{marker} in the private folder")
        started = descendants(process.pid)
        for _ in range(50):  # 0.5 s of them: the cleanup, and past it
            process.send_signal(signal.SIGTERM)
            time.sleep(0.01)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    # 143 and its line, or (a SIGTERM after the cleanup, its handler back) killed by one
    assert process.returncode in (143, -signal.SIGTERM), (out, err)
    assert err.strip().splitlines() in (["compare.py check: terminated (SIGTERM)"], []), err
    wait_for(lambda: not any(alive(pid) for pid in started), 10, "the workers to stop")
    assert os.listdir(tmp_path) == []


KILLED = """
import sys
import numpy as np
import backends
from embedding_parity.sharding import torch_shards
token_table, position_table = backends.shared_weights(100, 10, 16)
torch_shards.embed(
    token_table, position_table, np.array([1, 2]), num_shards=2, timeout=60, fault=("stall", 1)
)
"""


@pytest.mark.slow
def test_a_run_killed_outright_takes_its_torch_ranks_with_it(tmp_path):
    """SIGKILL leaves a run no way to stop its ranks itself: their launcher dies with it, and
    the ranks with their launcher (PR_SET_PDEATHSIG). Rank 1 stalls, so both are running."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": ROOT}
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED], cwd=tmp_path, env=env, start_new_session=True
    )
    started = set()
    try:
        wait_for(lambda: find(str(tmp_path), "rank1.progress"), 90, "rank 1 to start its work")
        started = descendants(process.pid)
        assert len(started) == 3, started  # the launcher and two ranks
        process.kill()
        process.wait(timeout=10)
        wait_for(lambda: not any(alive(pid) for pid in started), 10, "the ranks to end")
    finally:  # had the test failed: nothing left behind by it either (its own session)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def test_the_private_folder_is_removed_and_the_environment_restored(tmp_path, monkeypatch):
    import tempfile

    from embedding_parity import scratch

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(scratch.Terminated), scratch.private_folder() as folder:
        assert os.environ["TMPDIR"] == folder == tempfile.gettempdir()
        assert os.path.dirname(folder) == str(tmp_path)
        with open(os.path.join(tempfile.mkdtemp(), "left.txt"), "w") as left:
            left.write("a worker's file")
        os.kill(os.getpid(), signal.SIGTERM)  # raises Terminated here, in the main thread
        time.sleep(5)  # not reached
    assert os.listdir(tmp_path) == []
    assert os.environ["TMPDIR"] == str(tmp_path) and tempfile.tempdir is None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
