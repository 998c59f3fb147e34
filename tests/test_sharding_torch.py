"""The token table split across torch ranks (gloo, loopback), started here: the forward, the
gradient and an Adam step, each bit for bit the unsharded layer's; and what happens when a
rank fails. Started by torchrun, and DCP checkpoints: test_sharding_launched.py."""

import os

import numpy as np
import pytest

import backends
from tests.conftest import alive, descendants
from tests.test_sharding import IDS, same_bits, unsharded

# --- torch: N processes, gloo on the loopback interface --------------------------------


def torch_cases():
    cases = []
    for dtype in ("float32", "float16", "bfloat16"):
        token_table, position_table = backends.shared_weights(103, 10, 16, seed=1, dtype=dtype)
        cases += [(token_table, position_table, ids, 16 - ids.shape[-1]) for ids in IDS]
    return cases


# MiniLM's (bert-base-uncased's) vocabulary, 30522 rows: 7631 a rank at 4 ranks, the last 7629.
# The first and last row of each of the 4 shards, and a few between.
MINILM_IDS = np.array([[0, 7630, 7631, 15261, 15262, 22892, 22893, 30521], [5, 2054, 101, 102] * 2])


def minilm_sized_case():
    token_table, position_table = backends.shared_weights(30522, 16, 16, seed=3)
    return (token_table, position_table, MINILM_IDS, 16 - MINILM_IDS.shape[-1])


@pytest.mark.slow
@pytest.mark.parametrize(
    "strategy, num_shards",
    [pytest.param(("rows", "columns", "dtensor"), 4, id="every-4")]
    + [("rows", n) for n in (1, 2, 3)],
)
def test_torch_ranks_give_the_unsharded_layer_gradient_and_adam_step_bit_for_bit(
    num_shards, strategy
):
    """Every strategy at 4 ranks (4 splits 103 rows and 10 columns unevenly; the three in one
    start of the ranks, in turn), rows at 1, 2 and 3 as well (every strategy at 2 ranks
    started by torchrun: test_sharding_launched.py). At 4 ranks also a table of MiniLM's 30522
    rows, with 2 OpenMP threads a rank whatever this process has: DTensor pads the last
    rank's 7629 rows to 7631 with an operation large enough to run on several threads, which
    waited forever for threads the ranks' launcher had started before it forked them (small
    tables pad on one thread). Each rank looks up
    its shard (the forward, all-reduced or gathered: the unsharded layer's bits), computes the
    gradient of its own shard and takes one Adam step on it alone; gathered, the gradient is
    gradients()'s and the table is the unsharded Adam step's, bit for bit (each row here sums
    at most two terms; see docs/learning.md)."""
    pytest.importorskip("torch")
    import torch

    from backends import torch_backend
    from embedding_parity.sharding import torch_shards

    numpy_backend = backends.get("numpy")
    rng = np.random.default_rng(0)
    cases, wanted = [], []
    uneven = [minilm_sized_case()] if num_shards == 4 else []
    for token_table, position_table, token_ids, start in torch_cases() + uneven:
        shape = (*token_ids.shape, token_table.shape[1])
        upstream = rng.standard_normal(shape).astype(token_table.dtype)
        cases.append((token_table, position_table, token_ids, start, upstream))
        plain = numpy_backend.TokenPositionEmbedding(token_table, position_table)
        wanted.append(numpy_backend.gradients(plain, token_ids, upstream, start)["token_table"])
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the ranks take this process's count
    try:
        found = torch_shards.training_steps(cases, num_shards=num_shards, strategy=strategy)
    finally:
        torch.set_num_threads(threads)
    if isinstance(strategy, tuple):
        assert list(found) == list(strategy)
        found = [result for one in strategy for result in found[one]]
        wanted, cases = wanted * len(strategy), cases * len(strategy)
    for (gradient, stepped, forward), expected, case in zip(found, wanted, cases, strict=True):
        assert same_bits(forward, unsharded(*case[:4]))
        assert same_bits(gradient, expected)
        if case[0].dtype != np.float32:  # Adam's eps 1e-8 is 0 in float16: 0 / 0 steps
            continue
        # The unsharded step: the whole table, gradients()'s gradient, the same optimizer.
        whole = torch.nn.Parameter(torch_backend._as_tensor(case[0]).clone())
        whole.grad = torch_backend._as_tensor(expected)
        torch.optim.Adam([whole], **torch_shards.ADAM).step()
        assert same_bits(stepped, torch_backend.to_numpy(whole.detach()))
        moved = not same_bits(stepped, case[0])  # the rows that had a gradient moved
        assert moved == (case[2].size > 0)


def test_torch_refuses_a_bad_id_before_starting_a_process():
    pytest.importorskip("torch")
    import multiprocessing

    from embedding_parity.sharding import torch_shards

    token_table, position_table = backends.shared_weights(103, 10, 16)
    with pytest.raises(IndexError, match="token id 103 at token_ids\\[1\\]"):
        torch_shards.embed(token_table, position_table, np.array([1, 103]), num_shards=2)
    assert not multiprocessing.active_children()


def test_every_rank_checks_the_ids_before_its_collective(tmp_path, monkeypatch):
    """A rank given a bad id raises the suite's IndexError before any collective: a world of
    one rank in this process, every collective replaced by one that fails the test."""
    pytest.importorskip("torch")
    import torch.distributed as dist

    from embedding_parity.sharding import torch_shards

    def collective(*args, **kwargs):
        raise AssertionError("a collective ran before the ids were checked")

    for name in ("all_reduce", "all_gather", "barrier", "broadcast"):
        monkeypatch.setattr(dist, name, collective)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")

    token_table, position_table = backends.shared_weights(103, 10, 16)
    case = (token_table, position_table, np.array([1, 103]), 0)
    out = str(tmp_path / "results.npz")
    with pytest.raises(IndexError, match="token id 103 at token_ids\\[1\\]"):
        torch_shards._rank(0, 1, str(tmp_path), [case], "forward", "rows", 10, None, out)
    assert not os.path.exists(out)


FAULTS = {  # what rank 1 does before its collective, and the one line that names it
    "raise": "rank 1: RuntimeError: rank 1 failed on purpose, before its collective",
    "stall": "rank 1 stalled before case 0's collective (the others waited 3 s for it)",
    "stop": "rank 1 is stopped (SIGSTOP) before case 0's collective; the others gave up",
    "kill": "rank 1 was killed by SIGKILL before case 0's collective",
    "absent": "rank 1 never reached the rendezvous (it did not start its work); the others "
    "waited 3 s for it there",
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_failed_rank_makes_the_run_fail_not_hang(fault, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import pickle
    import tempfile
    import time

    from embedding_parity.sharding import torch_shards

    # torch.multiprocessing would pickle.load a $TMPDIR/pytorch-errorfile-*.pickle on a failed
    # rank: plant one that leaves a mark when unpickled, and show it is never read.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mark = tmp_path / "unpickled"
    planted = tmp_path / "pytorch-errorfile-planted.pickle"
    planted.write_bytes(pickle.dumps(_Mark(str(mark))))
    token_table, position_table = backends.shared_weights(103, 10, 16)
    began = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        torch_shards.embed(
            token_table,
            position_table,
            np.array([1, 2]),
            num_shards=2,
            timeout=3,
            fault=(fault, 1),
        )
    # The rank at fault is named, not rank 0, whose all-reduce gave up after 3 s.
    assert str(info.value).startswith(FAULTS[fault]), str(info.value)
    assert len(str(info.value).splitlines()) == 1
    assert time.monotonic() - began < 30
    assert not descendants(os.getpid()), "a rank outlived the run"
    assert not mark.exists()  # nothing unpickled
    assert sorted(os.listdir(tmp_path)) == [planted.name]  # the run's own folder removed


@pytest.mark.slow
def test_a_launcher_that_dies_ends_the_run_at_once_in_one_line(tmp_path, monkeypatch):
    """The ranks are forked from one launcher: killed, it takes them with it, and the run says
    so at once, not after the timeout (rank 1 stalls, so they would otherwise wait 60 s)."""
    pytest.importorskip("torch")
    import tempfile
    import threading
    import time

    from embedding_parity.sharding import torch_shards

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed, family = [], set()

    def kill_the_launcher():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(tmp_path.glob("*/rank1.progress")):
            time.sleep(0.05)
        family.update(descendants(os.getpid()))
        for pid in family:  # the launcher: this process's child, running torch_shards
            with open(f"/proc/{pid}/stat") as stat, open(f"/proc/{pid}/cmdline", "rb") as line:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                if (
                    parent == os.getpid()
                    and b"embedding_parity.sharding.torch_shards" in line.read()
                ):
                    os.kill(pid, 9)
                    killed.append(pid)

    killer = threading.Thread(target=kill_the_launcher, daemon=True)
    killer.start()
    token_table, position_table = backends.shared_weights(103, 10, 16)
    began = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        torch_shards.embed(
            token_table, position_table, np.array([1, 2]), num_shards=2, timeout=60,
            fault=("stall", 1),
        )  # fmt: skip
    killer.join(timeout=60)
    assert len(killed) == 1
    assert str(info.value).startswith(
        "the torch ranks' launcher was killed by SIGKILL before every rank had ended, and its "
        "ranks with it"
    )
    assert len(str(info.value).splitlines()) == 1
    assert time.monotonic() - began < 30
    assert len(family) == 3  # the launcher and its two ranks, which die with it
    ended = time.monotonic()
    while any(alive(pid) for pid in family) and time.monotonic() - ended < 10:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in family), "a rank outlived its launcher"
    assert os.listdir(tmp_path) == []  # the run's own folder removed


class _Mark:
    """Unpickling one creates the file at ``path``: proof that a pickle was loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))
