"""JAX's mesh across processes: started by embed_many, or by the JAX_* variables as a launcher
would, each result bit for bit the unsharded layer's; and what happens when a process fails
(never joins, is killed, is stopped, gets Ctrl-C)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import backends
from tests.conftest import descendants
from tests.test_sharding import same_bits, unsharded
from tests.test_sharding_launched import base_env, check_report, run_all, seed_file, shard_command
from tests.test_sharding_torch import torch_cases

# --- JAX: N processes joined by jax.distributed on 127.0.0.1 ---------------------------


@pytest.mark.slow
# The mesh program is the one tested over 1 to 4 devices in one process; what is new here is
# jax.distributed, started by embed_many.
# (Every strategy across 2 and 4 processes, started by the JAX_* variables, is tested below.)
@pytest.mark.parametrize("strategy, num_processes", [("rows", 2)])
def test_jax_processes_give_the_unsharded_layer_bit_for_bit(num_processes, strategy):
    pytest.importorskip("jax")
    from embedding_parity.sharding import jax_processes

    cases = torch_cases()  # the same tables, ids and starts
    found = jax_processes.embed_many(
        cases, num_processes=num_processes, strategy=strategy, timeout=120
    )
    for (token_table, position_table, token_ids, start), result in zip(cases, found, strict=True):
        assert same_bits(result, unsharded(token_table, position_table, token_ids, start))


@pytest.mark.slow
def test_a_failed_jax_process_stops_the_others():
    pytest.importorskip("jax")
    import time

    from embedding_parity.sharding import jax_processes

    token_table, position_table = backends.shared_weights(103, 10, 16)
    cases = [(token_table, position_table, np.array([1, 2]), 0)]
    began = time.monotonic()
    with pytest.raises(RuntimeError, match="process 1 failed on purpose"):
        jax_processes.embed_many(cases, num_processes=2, timeout=60, fail_process=1)
    assert time.monotonic() - began < 60
    assert not descendants(os.getpid()), "a JAX process outlived the run"


def test_jax_processes_refuse_a_bad_id_before_starting():
    pytest.importorskip("jax")
    from embedding_parity.sharding import jax_processes

    token_table, position_table = backends.shared_weights(103, 10, 16)
    with pytest.raises(IndexError, match="token id 103 at token_ids\\[1\\]"):
        jax_processes.embed_many(
            [(token_table, position_table, np.array([1, 103]), 0)], num_processes=2
        )


@pytest.mark.slow
@pytest.mark.parametrize("num_processes", [2, 4])
def test_jax_processes_started_by_the_environment(tmp_path, num_processes):
    """The same command started num_processes times with JAX_COORDINATOR_ADDRESS,
    JAX_NUM_PROCESSES and JAX_PROCESS_ID: one JAX job, every strategy bit-identical. With
    4, the table comes from a file, each process reading its own devices' shards."""
    pytest.importorskip("jax")
    from embedding_parity.sharding import free_port

    address = f"127.0.0.1:{free_port()}"
    command = shard_command([sys.executable], "jax", num_processes == 4 and seed_file(tmp_path))
    variables = {"JAX_COORDINATOR_ADDRESS": address, "JAX_NUM_PROCESSES": str(num_processes)}
    done = run_all(
        [(command, {**variables, "JAX_PROCESS_ID": str(i)}) for i in range(num_processes)],
        base_env(tmp_path),
        tmp_path,
    )
    assert [status for status, _, _ in done] == [0] * num_processes, done[0][2][-3000:]
    check_report(
        done[0][1], f"JAX process 0 of {num_processes}, {num_processes} devices", "jax",
        ["rows", "columns", "compiler"], tmp_path, num_processes,
    )  # fmt: skip
    assert all("bit-identical" not in out for _, out, _ in done[1:])
    assert not any("[Gloo]" in out + err for _, out, err in done)  # its notices, dropped


HEARTBEATS = (
    "process 0 of 2: process 1 stopped sending heartbeats (it died or was stopped); JAX's "
    "coordination service gave up on it after 3 s and ended this one"
)
NEVER_JOINED = (
    "process 0 of 2: the other processes did not all join the coordinator at {address} "
    "within 1 s (JAX: DEADLINE_EXCEEDED); start all 2, or raise --timeout"
)
JAX_FAULTS = {  # fault -> (process 0's line, process 1's line); None: process 1 never starts
    None: (NEVER_JOINED, None),
    "kill:1": (HEARTBEATS, "process 1 of 2 ended (killed by SIGKILL)"),
    "stop:1": (HEARTBEATS, "process 1 of 2 was stopped (SIGSTOP) for 3 s: ended it"),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(JAX_FAULTS), ids=["never-started", "killed", "stopped"])
def test_a_jax_process_that_fails_is_named_in_one_line(tmp_path, fault):
    """JAX's coordination service ends a process with a C++ abort when a peer never joins,
    dies or stops; the command runs the job in a child and turns that into one line, exit 2,
    within the timeout, nothing left running and no private folder left."""
    pytest.importorskip("jax")
    import time

    from embedding_parity.sharding import free_port

    address = f"127.0.0.1:{free_port()}"
    wait = "1" if fault is None else "3"  # --timeout: 1 s to join, 3 s of heartbeats
    command = [*shard_command([sys.executable], "jax")[:-1], wait]
    variables = {"JAX_COORDINATOR_ADDRESS": address, "JAX_NUM_PROCESSES": "2"}
    if fault:
        variables["EMBEDDING_PARITY_TEST_FAULT"] = fault
    count = 1 if fault is None else 2
    began = time.monotonic()
    done = run_all(
        [(command, {**variables, "JAX_PROCESS_ID": str(i)}) for i in range(count)],
        base_env(tmp_path),
        tmp_path,
    )
    assert time.monotonic() - began < 60
    wanted = [line.format(address=address) for line in JAX_FAULTS[fault][:count]]
    for (status, out, err), line in zip(done, wanted, strict=True):
        assert status == 2, err
        assert err.splitlines() == [
            f"python -m embedding_parity shard: error: a distributed run failed: {line}"
        ], err
        assert "bit-identical" not in out
    assert not descendants(os.getpid())
    assert not [name for name in os.listdir(tmp_path) if name.startswith("embedding-parity-")]
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.slow
def test_ctrl_c_on_a_jax_process_ends_it_and_its_peer_in_one_line_each(tmp_path, monkeypatch):
    """Ctrl-C on process 0 while the job runs (process 1 holds it up, stopped): process 0
    says "interrupted" (130) and its child is gone; process 1, its peer lost, ends in one
    line too (exit 2); nothing left running."""
    pytest.importorskip("jax")
    import signal
    import threading
    import time

    from embedding_parity.sharding import free_port, stopped

    address = f"127.0.0.1:{free_port()}"
    # --timeout 5: short, yet past the watcher's /proc scans on a loaded machine (at 3 s, once,
    # process 0's heartbeat wait ended before the Ctrl-C came)
    command = [*shard_command([sys.executable], "jax")[:-1], "5"]
    variables = {
        "JAX_COORDINATOR_ADDRESS": address,
        "JAX_NUM_PROCESSES": "2",
        "EMBEDDING_PARITY_TEST_FAULT": "stop:1",
    }
    started = []

    def interrupt_when_held():  # once process 1's child has stopped itself: Ctrl-C on 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            below = descendants(os.getpid())
            if len(started) == 2 and any(stopped(pid) for pid in below):
                os.kill(started[0], signal.SIGINT)
                return
            time.sleep(0.05)

    real_popen = subprocess.Popen

    def popen(*args, **kwargs):  # note each process as run_all starts it
        process = real_popen(*args, **kwargs)
        started.append(process.pid)
        return process

    monkeypatch.setattr(subprocess, "Popen", popen)
    watcher = threading.Thread(target=interrupt_when_held, daemon=True)
    watcher.start()
    results = run_all(
        [(command, {**variables, "JAX_PROCESS_ID": str(i)}) for i in range(2)],
        base_env(tmp_path),
        tmp_path,
    )
    watcher.join(timeout=5)
    (status0, _, err0), (status1, _, err1) = results
    assert (status0, err0.splitlines()) == (130, ["python -m embedding_parity shard: interrupted"])
    assert status1 == 2 and len(err1.splitlines()) == 1, err1
    assert "process 1 of 2" in err1
    assert not descendants(os.getpid())


def test_the_processes_program_never_overwrites_its_cases(tmp_path, capsys):
    """`--out` that is `--cases` (by any spelling: a link here) is refused before JAX starts,
    and the cases are left as they were; the results are written whole or not at all."""
    from embedding_parity.sharding import jax_processes

    cases = tmp_path / "cases.npz"
    np.savez(cases, token_ids=np.arange(3))
    before = cases.read_bytes()
    (tmp_path / "link.npz").symlink_to(cases)
    argv = ["--coordinator", "127.0.0.1:1", "--num-processes", "1", "--process-id", "0"]
    with pytest.raises(SystemExit) as stop:
        jax_processes.main([*argv, "--cases", str(cases), "--out", str(tmp_path / "link.npz")])
    assert stop.value.code == 2
    assert f"--out {tmp_path / 'link.npz'} is --cases" in capsys.readouterr().err
    assert cases.read_bytes() == before
    with pytest.raises(SystemExit):
        jax_processes.main([*argv, "--cases", str(cases), "--out", "x", "--timeout", "1e300"])
    assert "1e+300 seconds: give at most 86400 (a day)" in capsys.readouterr().err
