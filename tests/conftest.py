"""Shared fixtures: every test that takes ``backend`` runs once per installed backend; the
real models load once per session, and skip (saying how to install them) when missing."""

pytest_plugins = ["pytester", "tests.leftovers"]

import ipaddress
import os
import signal
import socket
import struct

import pytest

pytest.register_assert_rewrite("tests.leftovers")  # imported here, before it is a plugin
from tests import leftovers  # noqa: E402

if "PYTEST_XDIST_WORKER" not in os.environ:  # the controller; its workers inherit the namespace
    leftovers.unshare()  # before NumPy starts its threads: see its docstring

import numpy as np  # noqa: E402

# Two pytest workers share the two cores: an idle OpenMP thread of torch's that spins between
# the tests' small operations takes the other worker's core (25 float64 training steps took
# 0.7 to 3.2 s of CPU spinning, 0.05 to 0.1 s waiting passively). Set before any test imports
# torch, so that its OpenMP runtime reads it; inherited by every process the tests start. The
# same threads and the same split of the work: the same numbers.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import backends  # noqa: E402
from backends import pretrained  # noqa: E402
from embedding_parity import scratch  # noqa: E402

BACKENDS = backends.names()


@pytest.fixture(params=BACKENDS, scope="session")
def backend(request):
    return backends.get(request.param)


def native(backend, array: np.ndarray):
    """``array`` as the backend's own array type (ids given the framework's way)."""
    if backend.name == "torch":
        import torch

        if array.dtype == backends.DTYPES["bfloat16"]:  # torch.from_numpy knows no ml_dtypes
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(array)
    if backend.name == "jax":
        import jax.numpy as jnp

        return jnp.asarray(array)
    return array


def backend_or_skip(name: str):
    """For tests of one framework's idiom. Skipping is safe: with REQUIRED_BACKENDS set
    (make test, CI) a missing framework already fails test_required_backends_are_installed."""
    if name not in BACKENDS:
        pytest.skip(f"{name} is not installed")
    return backends.get(name)


def needs(name: str) -> None:
    """Skip unless the model package is installed. Safe: with REQUIRED_MODELS set (make test,
    CI) a missing package already fails test_required_model_packages_are_installed."""
    try:
        pretrained.package_dir(name)
    except pretrained.MissingPackage as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def minilm():
    needs("minilm")
    return pretrained.load_pretrained("minilm")


@pytest.fixture(scope="session")
def smollm2():
    needs("smollm2")
    return pretrained.load_pretrained("smollm2")


def fresh_machine(folder) -> dict:
    """The environment of a machine that never ran the suite, for a child process: HOME and
    TMPDIR empty folders under ``folder`` (see ``left_behind``), no cache variable set."""
    env = {k: v for k, v in os.environ.items() if k not in scratch.CACHES}
    for name in ("home", "tmp"):
        os.mkdir(os.path.join(folder, name))
    return {**env, "HOME": os.path.join(folder, "home"), "TMPDIR": os.path.join(folder, "tmp")}


def left_behind(folder) -> list[str]:
    """What a child given ``fresh_machine(folder)`` left in its HOME and TMPDIR."""
    return sorted(
        os.path.join(name, entry)
        for name in ("home", "tmp")
        for entry in os.listdir(os.path.join(folder, name))
    )


@pytest.fixture
def offline(monkeypatch):
    """Any attempt to open a network connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, from /proc (zombies, already dead, left out)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return {child for child in found if alive(child)}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def listening() -> set[tuple[str, int, bool, int]]:
    """Every TCP socket listening on this machine: (address, port, whether the address is
    loopback, socket inode). Asked of the kernel over netlink (sock_diag, listening sockets
    alone: 0.04 ms a call), where reading /proc/net/tcp and tcp6 walks every bucket of the
    kernel's connection tables (7 ms of system time a call, every 50 ms while a launched job
    runs); /proc where netlink is refused."""
    try:
        return _listening_netlink()
    except (OSError, AttributeError):  # AttributeError: no AF_NETLINK, not Linux
        return _listening_proc()


def _loopback(address: str) -> bool:
    """127.x.x.x, ::1, and ::ffff:127.x.x.x (IPv4's loopback as an IPv6 socket sees it)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


# Netlink's sock_diag (linux/sock_diag.h, linux/inet_diag.h): a dump of the TCP sockets in
# state LISTEN, one family at a time.
_SOCK_DIAG, _BY_FAMILY, _DUMP_REQUEST, _DONE, _ERROR, _LISTEN = 4, 20, 0x301, 3, 2, 10


def _listening_netlink() -> set[tuple[str, int, bool, int]]:
    found = set()
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _SOCK_DIAG) as link:
        link.settimeout(10)
        for family, size in ((socket.AF_INET, 4), (socket.AF_INET6, 16)):
            # inet_diag_req_v2: family, protocol, extensions, pad, states, then a 48-byte
            # socket id (all zero: every socket), under a 16-byte netlink header
            request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _LISTEN)
            request += bytes(48)
            link.send(struct.pack("=IHHII", 16 + len(request), _BY_FAMILY, _DUMP_REQUEST, 1, 0)
                      + request)  # fmt: skip
            done = False
            while not done:
                data = link.recv(65536)
                offset = 0
                while offset < len(data) and not done:
                    length, kind = struct.unpack_from("=IH", data, offset)
                    if kind == _ERROR:
                        raise OSError("sock_diag refused the dump")
                    done = kind == _DONE
                    if not done:  # inet_diag_msg: port at 4, address at 8, inode at 68
                        body = offset + 16
                        port = struct.unpack_from("!H", data, body + 4)[0]
                        address = socket.inet_ntop(family, data[body + 8 : body + 8 + size])
                        inode = struct.unpack_from("=I", data, body + 68)[0]
                        found.add((address, port, _loopback(address), inode))
                    offset += (length + 3) & ~3
    return found


def _listening_proc() -> set[tuple[str, int, bool, int]]:
    found = set()
    for table, family, size in (
        ("/proc/net/tcp", socket.AF_INET, 4),
        ("/proc/net/tcp6", socket.AF_INET6, 16),
    ):
        try:
            with open(table) as sockets:
                next(sockets)
                for line in sockets:
                    fields = line.split()
                    if fields[3] == "0A":  # LISTEN
                        hexed, port = fields[1].split(":")
                        # the kernel writes each 32-bit word of the address in host order
                        words = bytes.fromhex(hexed)
                        packed = b"".join(
                            struct.pack("!I", struct.unpack("=I", words[i : i + 4])[0])
                            for i in range(0, size, 4)
                        )
                        address = socket.inet_ntop(family, packed)
                        found.add((address, int(port, 16), _loopback(address), int(fields[9])))
        except OSError:
            continue
    return found


def socket_owners(pids) -> dict[int, list[str]]:
    """{socket inode: the command lines of the processes that hold it} among these processes
    (a socket can be held by several: a forked child inherits its parent's)."""
    owners = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline") as cmdline:
                command = cmdline.read().replace("\0", " ")
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    owners.setdefault(int(target[8:-1]), []).append(command)
        except OSError:
            continue  # gone meanwhile
    return owners


# The order the two workers take whole files in (make test: --dist loadfile
# --no-loadscope-reorder): the longest first, so that the workers finish together rather than
# one waiting for the other's last long file. By default xdist hands out the files with the
# most tests first, which put the few long multi-process files last: one worker ran
# test_sharding_launched.py (31 s) alone at the end. Seconds each file took in a worker,
# measured in one run of make test on 2 cores, 2026-12-02; the rest follow in name order
# (the matrix tier's files among them: it is not tuned, and well inside its 8 minutes). Since
# issue 55 the heavy files at the top (marked slow) run in the second tier, where the order
# serves the same end.
LONGEST_FIRST = (
    "test_page.py",  # 42 s
    "test_sharding_jax.py",  # 41
    "test_train.py",  # 40
    "test_benchmarks.py",  # 37
    "test_sharding_torch.py",  # 34
    "test_sharding_launched.py",  # 32
    "test_sharding.py",  # 29
    "test_conformance.py",  # 25
    "test_compare.py",  # 24
    "test_real_text.py",  # 21
    "test_kit_api.py",  # 15
    "test_attention_bias.py",  # 14
    "test_package.py",  # 13
    "test_gradients.py",  # 12
    "test_pretrained.py",  # 10
    "test_bias_job.py",  # 10
    "test_stopping.py",  # 9
    "test_sharding_uneven.py",  # 8
    "test_call_paths.py",  # 8
    "test_hostile_targets.py",  # 8
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: within a file too


def pytest_configure(config):
    # Started with SIGINT ignored (`nohup make test &`, or a background job of a shell without
    # job control), the session would pass that on to every command a test stops with Ctrl-C:
    # an ignored signal stays ignored across exec, a handler does not.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
