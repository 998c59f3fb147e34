"""torch ranks stuck where no collective's timeout can fire (as every rank was on OpenMP, on
MiniLM's 30522 rows over 4 ranks: test_sharding_torch.py): the run is reported within its
timeout (plus the launcher's start), in one line saying where, no process left behind."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import backends
from tests.conftest import alive, descendants


@pytest.mark.slow
def test_a_run_stuck_outside_its_collectives_is_reported_within_its_timeout(tmp_path, monkeypatch):
    """Rank 1 stalls before its collective, then both ranks are stopped (SIGSTOP): no
    collective's timeout can fire, so only the run's own deadline ends it, as when every rank
    waited on OpenMP. Reported within the timeout and the launcher's start, in one line
    naming a stopped rank; every process killed."""
    pytest.importorskip("torch")
    import tempfile

    from embedding_parity.sharding import torch_shards

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ranks = []

    def stop_the_ranks():  # once rank 0 is in its collective and rank 1 stalls before its own
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            _steps(tmp_path, 0) >= 2 and _steps(tmp_path, 1) >= 1
        ):
            time.sleep(0.05)
        ranks.extend(_ranks())
        for pid in ranks:
            os.kill(pid, signal.SIGSTOP)

    stopper = threading.Thread(target=stop_the_ranks, daemon=True)
    stopper.start()
    token_table, position_table = backends.shared_weights(103, 10, 16)
    timeout = 5
    began = time.monotonic()
    try:
        with pytest.raises(RuntimeError) as info:
            torch_shards.embed(
                token_table,
                position_table,
                np.array([1, 2]),
                num_shards=2,
                timeout=timeout,
                fault=("stall", 1),
            )
        reported = time.monotonic() - began
    finally:
        stopper.join(timeout=60)
        for pid in ranks:  # killed by the run; by this test only if the run left them
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert len(ranks) == 2
    assert str(info.value).startswith("rank 0 is stopped (SIGSTOP)"), str(info.value)
    assert len(str(info.value).splitlines()) == 1
    # the "within its --timeout plus a few seconds", the launcher's start among them
    assert reported < timeout + 10, reported
    assert not descendants(os.getpid()), "a rank outlived the run"
    assert os.listdir(tmp_path) == []  # the run's own folder removed


def _steps(folder, rank: int) -> int:
    """How far rank ``rank`` of the one run in ``folder`` got (its progress file's bytes)."""
    found = list(folder.glob(f"*/rank{rank}.progress"))
    return found[0].stat().st_size if found else -1


def _ranks() -> list[int]:
    """The ranks: the processes whose parent is this process's child running torch_shards."""
    found = []
    for pid in descendants(os.getpid()):
        with open(f"/proc/{pid}/stat") as stat, open(f"/proc/{pid}/cmdline", "rb") as line:
            parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if parent != os.getpid() and b"embedding_parity.sharding.torch_shards" in line.read():
                found.append(pid)
    return sorted(found)


@pytest.mark.parametrize(
    "progress, where",
    [
        ("....", "every one in case 0's collective (dtensor)"),  # the third strategy begun
        (".", "every one before case 0's collective (rows)"),  # in the group, no step begun
        ("", "every one at the rendezvous"),
    ],
)
def test_ranks_stuck_together_are_reported_with_the_step_they_are_in(tmp_path, progress, where):
    """The line for ranks that all hang in one place (as they did on OpenMP, in DTensor's
    padding) says where, from their progress files (a byte for the group, one a step)."""
    pytest.importorskip("torch")
    from embedding_parity.sharding import torch_shards

    class Running:  # a rank still running, as _Rank answers: this process, never stopped
        pid, returncode = os.getpid(), None

        def poll(self):
            return None

    for rank in range(4):
        (tmp_path / f"rank{rank}.progress").write_text(progress)
    steps = torch_shards._step_names(torch_shards.STRATEGIES, 1)
    line = torch_shards._culprit([Running()] * 4, str(tmp_path), 20, steps, expired=True)
    assert line == f"the 4 ranks did not finish in 20 s, {where}"
