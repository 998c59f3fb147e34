"""Jobs started by a launcher, as clusters start them: torchrun (standalone, and two "nodes"
over loopback) starting the command as its ranks, and torch.distributed.checkpoint restoring a
table onto another number of ranks. The helpers that run launched jobs (here and in
test_sharding_jax.py) hold every listening socket to loopback."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import backends
from tests.conftest import descendants, listening, socket_owners
from tests.test_sharding import ROOT, same_bits
from tests.test_sharding_torch import _Mark

# --- started by a launcher: torchrun, or the JAX_* variables -------------------------------

# Each shard's first and last row of the seed's 100-row table at 2 and 4 shards.
BOUNDARY_TOKENS = ["0", "24", "25", "49", "50", "74", "75", "99"]
LAUNCH_TIMEOUT = 180


def run_all(commands, env, cwd, launchers=False):
    """Start every command at once; wait for all (each under LAUNCH_TIMEOUT); kill every one
    still running if any wait fails. [(returncode, stdout, stderr)]. Meanwhile every socket
    that this project's processes open to listen must be on the loopback interface
    (launchers: the commands are torchrun agents, whose own store listens where torchrun
    puts it; their children, this project's ranks, are held to loopback), and none may be
    left listening when all have ended."""
    import time

    before = listening()
    processes, opened = [], {}
    try:
        for command, extra in commands:
            processes.append(
                subprocess.Popen(
                    command,
                    cwd=cwd,
                    env={**env, **extra},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
            new = listening() - before  # outputs are small: the pipes do not fill meanwhile
            if new:  # this run's sockets: held by a process below this test's
                owners = socket_owners(descendants(os.getpid()))
                opened |= {entry: owners[entry[3]] for entry in new if entry[3] in owners}
            time.sleep(0.05)
        outputs = [p.communicate(timeout=max(1, deadline - time.monotonic())) for p in processes]

        def torchrun(commands):  # torchrun's own processes: the agent, and any it forks
            return launchers and any("torch.distributed.run" in c for c in commands)

        beyond = [(e, c) for e, c in opened.items() if not e[2] and not torchrun(c)]
        assert not beyond, f"listening beyond loopback: {beyond}"
        assert not set(opened) & listening(), "a socket was left listening"
        return [(p.returncode, *output) for p, output in zip(processes, outputs, strict=True)]
    finally:
        for p in processes:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait(timeout=10)


def test_the_listening_sockets_are_the_kernels_own_list_with_loopback_marked():
    """listening() asks netlink; what it finds is what /proc/net/tcp and tcp6 list, each
    address marked loopback or not as the sockets opened here are."""
    import socket

    from tests.conftest import _listening_netlink, _listening_proc

    wanted = {"127.0.0.1": True, "0.0.0.0": False, "::1": True, "::": False}
    wanted["::ffff:127.0.0.1"] = True
    opened = []
    try:
        for address in wanted:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            held = socket.socket(family, socket.SOCK_STREAM)
            try:
                if address == "::":
                    held.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                held.bind((address, 0))
            except OSError:  # a machine without IPv6: its addresses are not listed
                held.close()
                assert family == socket.AF_INET6, address
                continue
            held.listen()
            opened.append((held, address))
        assert {address for _, address in opened} >= {"127.0.0.1", "0.0.0.0"}
        # this test's own sockets, by inode: the other worker's jobs open and close theirs
        expected = {
            os.fstat(held.fileno()).st_ino: (address, held.getsockname()[1], wanted[address])
            for held, address in opened
        }

        def own(found):
            return {entry[3]: entry[:3] for entry in found if entry[3] in expected}

        assert own(_listening_proc()) == expected
        assert own(_listening_netlink()) == expected
    finally:
        for held, _ in opened:
            held.close()


def check_report(out: str, expected_launch: str, backend: str, strategies, tmp_path, shards):
    """One parity table, every row of ``backend`` bit-identical, and the saved arrays."""
    assert out.count("bit-identical") == 1, out
    assert expected_launch in out, out
    rows = [line.split() for line in out.splitlines() if line.startswith(backend + " ")]
    rows = [r for r in rows if not r[1].endswith(":")]  # the table's rows, not the memory
    assert [r[1] for r in rows] == list(strategies) and all(r[-1] == "yes" for r in rows), out
    token_table, position_table = backends.shared_weights(100, 10, 16)
    ids = np.array(BOUNDARY_TOKENS, dtype=np.int64)
    with np.load(tmp_path / "out.npz", allow_pickle=False) as saved:
        for strategy in strategies:
            assert same_bits(
                saved[f"sum_{backend}_{strategy}"], token_table[ids] + position_table[:8]
            )
    assert f"split {shards} ways" in out


def shard_command(prefix, backend, weights=None):
    """The shard job over the seed's tables: random ones, or (weights) read from that file."""
    return [
        *prefix,
        "-m",
        "embedding_parity",
        "shard",
        "--backends",
        backend,
        "--tokens",
        *BOUNDARY_TOKENS,
        "--save-arrays",
        "out.npz",
        "--timeout",
        "60",
        *(["--weights", str(weights)] if weights else []),
    ]


def seed_file(tmp_path):
    """The seed's tables (100 x 10, 16 positions) in a .safetensors file, under GPT-2's
    names: a launched rank reads its own part of the token table from it."""
    from safetensors.numpy import save_file

    token_table, position_table = backends.shared_weights(100, 10, 16)
    path = tmp_path / "seed.safetensors"
    save_file({"wte.weight": token_table, "wpe.weight": position_table}, str(path))
    return path


def base_env(tmp_path):
    """The environment of a launched job: one JAX device per process, and TMPDIR the test's
    own (torchrun writes its logs to a torchelastic_* folder there)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return {
        **env,
        "PYTHONPATH": ROOT,
        "JAX_PLATFORMS": "cpu",
        "OMP_NUM_THREADS": "1",
        "TMPDIR": str(tmp_path),
    }


@pytest.mark.slow
def test_torchrun_starts_the_command_as_its_ranks(tmp_path):
    """torchrun --standalone --nproc-per-node 2 -m embedding_parity shard ...: each rank
    joins through the environment torchrun set; rank 0 alone reports and writes."""
    pytest.importorskip("torch")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command = shard_command([*torchrun, "--nproc-per-node", "2"], "torch")
    [(status, out, err)] = run_all([(command, {})], base_env(tmp_path), tmp_path, launchers=True)
    assert status == 0, err[-3000:]
    check_report(
        out, "launch: torchrun, torch rank 0 of 2", "torch", ["rows", "columns", "dtensor"],
        tmp_path, 2,
    )  # fmt: skip


@pytest.mark.slow
def test_torchrun_on_two_nodes_over_loopback(tmp_path):
    """Two torchrun agents, --nnodes 2 --node-rank 0 and 1, one rank each, meeting at
    127.0.0.1 as two hosts would at a real address: node 0's rank reports, node 1's is
    silent, both exit 0. The table comes from a file, and each rank reads only its half of
    it (DTensor's read the whole: parallelize_module splits a whole weight)."""
    pytest.importorskip("torch")
    from embedding_parity.sharding import free_port

    port = str(free_port())
    nodes = [
        shard_command(
            [
                sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                "--nproc-per-node", "1", "--node-rank", str(node), "--master-addr",
                "127.0.0.1", "--master-port", port,
            ],
            "torch",
            seed_file(tmp_path),
        )
        for node in (0, 1)
    ]  # fmt: skip
    (status0, out0, err0), (status1, out1, err1) = run_all(
        [(nodes[0], {}), (nodes[1], {})], base_env(tmp_path), tmp_path, launchers=True
    )
    assert (status0, status1) == (0, 0), (err0[-2000:], err1[-2000:])
    check_report(
        out0, "torch rank 0 of 2, rendezvous at 127.0.0.1:" + port, "torch",
        ["rows", "columns", "dtensor"], tmp_path, 2,
    )  # fmt: skip
    # 100 x 10 float32 is 4000 bytes: half of its rows, or half of its columns, per rank
    for strategy, share in (("rows", "2.0 kB"), ("columns", "2.0 kB"), ("dtensor", "4.0 kB")):
        assert f"torch {strategy}: each rank read at most {share} of the token table" in out0
    assert "bit-identical" not in out1


@pytest.mark.slow
def test_a_dcp_checkpoint_is_restored_onto_another_number_of_ranks(tmp_path, monkeypatch):
    """torch.distributed.checkpoint reshards on load: saved by 2 ranks by rows, restored by 3
    by columns (more ranks, uneven parts; and saved again), by 1 by rows (fewer); every step
    bit-identical. (4 ranks: the tests above; each rank here costs a process with torch.)"""
    pytest.importorskip("torch")
    import json
    import pickle

    from embedding_parity import sharding
    from embedding_parity.sharding import torch_shards

    token_table, _ = backends.shared_weights(103, 10, 16, seed=3)
    torch_shards.save_checkpoint(token_table, tmp_path / "n2", num_shards=2)
    assert not [f for f in os.listdir(tmp_path / "n2" / "dcp") if not f.endswith(".safetensors")]
    # DCP's default reader unpickles a .metadata file: plant one that leaves a mark if loaded.
    mark = tmp_path / "unpickled"
    (tmp_path / "n2" / "dcp" / ".metadata").write_bytes(pickle.dumps(_Mark(str(mark))))
    saved, steps = tmp_path / "n2", [(3, "columns"), (1, "rows")]
    for count, strategy in steps:
        new = tmp_path / f"n{count}"
        table, shapes = torch_shards.load_checkpoint(
            saved, num_shards=count, strategy=strategy, vocab_size=103, dim=10, save_to=new
        )
        assert same_bits(table, token_table)
        split = 10 if strategy == "columns" else 103  # each rank holds its own part only
        sizes = shapes[:, 1 if strategy == "columns" else 0]
        assert len(shapes) == count and sizes.sum() == split and sizes.max() < split + (count == 1)
        saved = new
    assert not mark.exists()  # nothing unpickled
    with pytest.raises(ValueError, match="has dim 10, this table 12"):
        torch_shards.load_checkpoint(saved, num_shards=2, dim=12)
    record = json.loads((saved / "table.json").read_text())
    (saved / "table.json").write_text(json.dumps({**record, "framework": "jax"}))
    with pytest.raises(ValueError, match="holds a jax checkpoint .* torch reads only its own"):
        torch_shards.load_checkpoint(saved, num_shards=2)
    # DCP's real files, damaged: refused from their headers before any rank starts (the
    # damage that test_sharding.py makes to hand-made ones)
    second = tmp_path / "n2" / "dcp" / "shard-00002-model-00001-of-00001.safetensors"
    whole = second.read_bytes()
    for damaged, named in [
        (whole[:1000], f"{second} has 1000 bytes, its header says {len(whole)}"),
        (whole.replace(b"[51,10]", b"[61,10]", 1), f"{second} holds a 61 x 10 F32 piece"),
        (whole.replace(b'offsets\\": [52', b'offsets\\": [72', 1), f"{second} holds rows 72:"),
    ]:
        second.write_bytes(damaged)
        with pytest.raises(ValueError, match=re.escape(named)):
            torch_shards.load_checkpoint(tmp_path / "n2", num_shards=2)
    # and should the ranks find what the headers cannot show, their error is one line
    monkeypatch.setattr(sharding, "_check_dcp", lambda folder, record: None)
    second.write_bytes(whole[:1000])
    with pytest.raises(RuntimeError) as failed:
        torch_shards.load_checkpoint(tmp_path / "n2", num_shards=2)
    assert str(failed.value).startswith(f"the ranks could not restore {tmp_path / 'n2'}: ")
    assert "\n" not in str(failed.value) and "not fully covered" in str(failed.value)


@pytest.mark.slow
def test_ranks_launched_by_the_variables_listen_on_loopback_alone(tmp_path):
    """Two ranks started by RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT, as a
    scheduler's script would start them, with no torchrun: rank 0 hosts the store, and it
    listens on 127.0.0.1 alone (env://'s own store listened on every interface)."""
    pytest.importorskip("torch")
    from embedding_parity.sharding import free_port

    port = str(free_port())
    command = shard_command([sys.executable], "torch")
    variables = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
    ranks = [(command, {**variables, "RANK": str(rank)}) for rank in (0, 1)]
    (status0, out0, err0), (status1, out1, _) = run_all(ranks, base_env(tmp_path), tmp_path)
    assert (status0, status1) == (0, 0), err0[-3000:]
    launch = f"launch: RANK/WORLD_SIZE variables, torch rank 0 of 2, rendezvous at 127.0.0.1:{port}"
    check_report(out0, launch, "torch", ["rows", "columns", "dtensor"], tmp_path, 2)
    assert "bit-identical" not in out1
