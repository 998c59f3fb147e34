"""The token table split across devices and processes (docs/sharding.md).

``reference``: the two strategies, row-parallel and column-parallel, in NumPy over a list of
shards, the readable reference; ``jax_shards``: the same over a JAX ``Mesh`` with
``NamedSharding`` and ``shard_map`` (or the compiler's own gather); ``jax_processes``: that
mesh spread over N processes with ``jax.distributed``; ``torch_shards``: N
processes with ``torch.distributed`` (gloo, loopback), by hand and with DTensor's
``RowwiseParallel``.
"""

import json
import os
import signal
import socket
import sys


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (Linux's PR_SET_PDEATHSIG), so that nothing
    outlives the run; exit at once if the parent (its pid) has died already. Called after
    exec, not in a ``preexec_fn``: that runs fork hooks, and JAX warns in one it is
    multithreaded."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent:
        os._exit(1)


def free_port() -> int:
    """A free TCP port on 127.0.0.1, for a rendezvous bound to 127.0.0.1 alone. (Another
    program could take it between this probe and the bind: then the run fails, it does not
    cross interfaces.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stopped(pid: int) -> bool:
    """Whether a process is stopped by a signal (state T in /proc; False where unknown)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except OSError:
        return False


def read_checkpoint_record(folder: str, framework: str, vocab_size=None, dim=None) -> dict:
    """A sharded table checkpoint's table.json, checked to be ``framework``'s (JAX's Orbax and
    torch's ``torch.distributed.checkpoint`` formats differ, and neither reads the other's)
    and, when given, of vocab_size rows and dim columns."""
    path = os.path.join(folder, "table.json")
    try:
        with open(path) as record_file:
            record = json.load(record_file)
    except (OSError, ValueError) as error:
        raise ValueError(f"{folder} is not a checkpoint of this suite ({error})") from None
    if record.get("framework") != framework:
        raise ValueError(
            f"{folder} holds a {record.get('framework')} checkpoint ({record.get('format')}); "
            f"{framework} reads only its own format: load it with the framework that wrote it"
        )
    for name, wanted in (("vocab_size", vocab_size), ("dim", dim)):
        if wanted is not None and record.get(name) != wanted:
            raise ValueError(
                f"the checkpoint in {folder} has {name} {record.get(name)}, this table {wanted}: "
                "restore it into a table of its own shape"
            )
    return record
