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
import stat
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


RECORD_BYTES = 2**16  # a table.json is about 150 bytes: past 64 KiB it is not one this suite wrote
HEADER_BYTES = 2**16  # a DCP file's safetensors header (JSON): about 200 bytes for one shard
# table.json's fields and their types, every one required (the counts at least 1)
RECORD = {"framework": str, "format": str, "vocab_size": int, "dim": int, "dtype": str,
          "strategy": str, "num_shards": int}  # fmt: skip
DAMAGED = "the checkpoint is damaged: restore a copy, or save it again with --save-checkpoint"


def read_checkpoint_record(folder: str, framework: str, vocab_size=None, dim=None) -> dict:
    """A sharded table checkpoint's table.json, checked to be ``framework``'s (JAX's Orbax and
    torch's ``torch.distributed.checkpoint`` formats differ, and neither reads the other's)
    and, when given, of vocab_size rows and dim columns; and the files it describes, as far
    as they can be checked without the framework (torch: ``_check_dcp``), so that a damaged
    checkpoint is refused before any work. Otherwise ValueError, one line naming the file:
    also for a table.json that is not a regular file of at most RECORD_BYTES (a FIFO would
    block, a link to /dev/zero never end), not JSON, or with a field missing or wrong."""
    path = os.path.join(folder, "table.json")
    try:
        with _regular(path) as file:
            text = file.read(RECORD_BYTES + 1)
        if len(text) > RECORD_BYTES:
            raise ValueError(f"{path} is over {RECORD_BYTES} bytes; --save-checkpoint writes 150")
        record = json.loads(text)
    except (ValueError, RecursionError) as error:  # RecursionError: JSON nested too deep
        raise ValueError(f"{folder} is not a checkpoint of this suite ({error})") from None
    if not isinstance(record, dict):
        raise ValueError(
            f"{path} holds {json.dumps(record)[:40]}, not an object of the checkpoint's fields: "
            + DAMAGED
        )
    for name, kind in RECORD.items():
        value = record.get(name)
        if not isinstance(value, kind) or isinstance(value, bool) or (kind is int and value < 1):
            wanted = "a count of at least 1" if kind is int else "a string"
            raise ValueError(f"{path}: {name} must be {wanted}, got {value!r}: {DAMAGED}")
    if record["framework"] != framework:
        raise ValueError(
            f"{folder} holds a {record['framework']} checkpoint ({record['format']}); "
            f"{framework} reads only its own format: load it with the framework that wrote it"
        )
    from backends import validation
    from embedding_parity.sharding import reference

    for name, allowed in (("dtype", validation.DTYPES), ("strategy", reference.STRATEGIES)):
        if record[name] not in allowed:
            raise ValueError(
                f"{path}: {name} {record[name]!r} is not one of {', '.join(allowed)}: {DAMAGED}"
            )
    for name, wanted in (("vocab_size", vocab_size), ("dim", dim)):
        if wanted is not None and record[name] != wanted:
            raise ValueError(
                f"the checkpoint in {folder} has {name} {record[name]}, this table {wanted}: "
                "restore it into a table of its own shape"
            )
    data = os.path.join(folder, "dcp" if framework == "torch" else "orbax")
    if not os.path.isdir(data):
        raise ValueError(f"{data} is missing: table.json alone holds no table; {DAMAGED}")
    if framework == "torch":
        _check_dcp(data, record)
    return record


def _check_dcp(folder: str, record: dict) -> None:
    """DCP's safetensors files in ``folder`` against table.json, from their headers alone
    (JSON: nothing unpickled): each holds a band of the table's rows (or columns, by the
    record's strategy) in the bytes its header gives, and the bands cover the table once.
    DCP itself finds such damage only in the ranks, and says so in nested tracebacks."""
    shape = (record["vocab_size"], record["dim"])
    axis = 0 if record["strategy"] == "rows" else 1
    names = sorted(name for name in os.listdir(folder) if name.endswith(".safetensors"))
    bands = sorted(_dcp_band(os.path.join(folder, name), record) for name in names)
    covered, previous = 0, None
    for first, stop, path in bands:
        if first != covered:
            break
        covered, previous = stop, path
    else:
        first = shape[axis]
    if first < covered:
        raise ValueError(
            f"{path} and {previous} both hold {record['strategy']} {first}:{covered}: {DAMAGED}"
        )
    if covered < shape[axis]:
        raise ValueError(
            f"{record['strategy']} {covered}:{first} of the {shape[0]} x {shape[1]} table are in "
            f"no file of {folder}, which holds {len(names)} of the {record['num_shards']} files "
            f"that table.json says were saved: {DAMAGED}"
        )


def _dcp_band(path: str, record: dict) -> tuple[int, int, str]:
    """(first, stop, path): the rows (or columns) of the table that one DCP file holds, from
    its safetensors header, checked against table.json and the file's size."""
    import struct

    from backends import validation
    from embedding_parity.sharding import reference

    with _regular(path) as file:
        size = os.fstat(file.fileno()).st_size
        head = file.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else size
        if length > min(HEADER_BYTES, size - 8):
            raise ValueError(
                f"{path} ({size} bytes) has no safetensors header of at most {HEADER_BYTES} "
                f"bytes: {DAMAGED}"
            )
        text = file.read(length)
    try:
        header = json.loads(text)
        entry = header["token_table"]
        sharding = json.loads(header["__metadata__"]["DCP_SHARDING_INFO"])
        offsets, piece = sharding["token_table"]["saved_offsets"], entry["shape"]
        (begin, stop), kind = entry["data_offsets"], entry["dtype"]
        numbers = [*offsets, *piece, begin, stop]
        if len(offsets) != 2 or len(piece) != 2 or not all(map(_count, numbers)):
            raise ValueError(f"offsets {offsets}, shape {piece}, data_offsets {[begin, stop]}")
    except (ValueError, RecursionError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not a DCP file of this suite ({error!r}): {DAMAGED}") from None
    dtype = validation.DTYPES[record["dtype"]]
    name = next(k for k, v in reference._SAFETENSORS_DTYPES.items() if v == record["dtype"])
    needed = piece[0] * piece[1] * dtype.itemsize
    if kind != name or stop - begin != needed:
        raise ValueError(
            f"{path} holds a {piece[0]} x {piece[1]} {kind} piece in {stop - begin} bytes, "
            f"where table.json's {record['dtype']} table needs {name}, {needed} bytes: {DAMAGED}"
        )
    if size != 8 + length + stop:
        raise ValueError(f"{path} has {size} bytes, its header says {8 + length + stop}: {DAMAGED}")
    shape = (record["vocab_size"], record["dim"])
    axis = 0 if record["strategy"] == "rows" else 1
    if (
        offsets[1 - axis] != 0
        or piece[1 - axis] != shape[1 - axis]
        or (offsets[axis] + piece[axis] > shape[axis])
    ):
        raise ValueError(
            f"{path} holds rows {offsets[0]}:{offsets[0] + piece[0]} and columns "
            f"{offsets[1]}:{offsets[1] + piece[1]}: not a band of {record['strategy']} of "
            f"table.json's {shape[0]} x {shape[1]} table; {DAMAGED}"
        )
    return offsets[axis], offsets[axis] + piece[axis], path


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _regular(path: str):
    """``path`` opened for reading, if it is a regular file (a link to one is followed);
    ValueError otherwise. Opened without blocking: a FIFO's open would wait for a writer."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    file = os.fdopen(descriptor, "rb")
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        file.close()
        raise ValueError(
            f"{path} is not a regular file (a FIFO, a device, a folder?): a checkpoint is files"
        )
    return file
