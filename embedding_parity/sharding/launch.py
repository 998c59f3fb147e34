"""Which launcher started this process, read from the environment it set.

- **torchrun** (and any launcher of ``torch.distributed``'s ``env://`` kind) sets ``RANK``,
  ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` (and ``LOCAL_RANK``): the process is
  one rank of that job and joins its group with ``init_method="env://"``.
- **JAX**: ``JAX_COORDINATOR_ADDRESS`` (HOST:PORT, read by ``jax.distributed.initialize``
  itself), ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID`` (this project's names for the two
  numbers JAX takes as arguments). In a task of a multi-task Slurm step
  (``SLURM_STEP_NUM_TASKS`` > 1, under srun) or Open MPI job (``OMPI_COMM_WORLD_SIZE`` > 1),
  with ``--backends jax``, ``jax.distributed.initialize()`` is called with no arguments and
  finds all three itself.
- Neither: the command starts its own processes on 127.0.0.1, as before.

An address the launcher gives is used as given; loopback stays the default only for what this
project starts itself.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

TORCH_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
JAX_VARIABLES = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


class LaunchError(ValueError):
    """The environment names a launch, but not a whole one."""


@dataclass(frozen=True)
class Launch:
    framework: str  # "torch" or "jax"
    rank: int | None  # None: JAX finds it (Slurm, Open MPI)
    world: int | None
    address: str | None  # the rendezvous, HOST:PORT; None: JAX finds it
    launcher: str  # "torchrun", "JAX_* variables", "Slurm", "Open MPI"
    devices: int | None = None  # JAX, once joined: the job's devices, one shard each

    @property
    def shards(self) -> int | None:
        """How many shards the job holds: one per torch rank, one per JAX device."""
        return self.devices or self.world

    @property
    def loopback(self) -> bool:
        """Whether the rendezvous address is this machine's loopback interface."""
        return self.address is not None and is_loopback(self.address.rsplit(":", 1)[0])

    @property
    def who(self) -> str:
        """This process, for messages: "process 1 of 2", or the launcher's name before JAX
        has found the numbers."""
        if self.rank is None:
            return f"this process ({self.launcher})"
        return f"process {self.rank} of {self.world}"

    def describe(self) -> str:
        if self.rank is None:
            return f"launch: {self.launcher} ({self.framework}; jax.distributed finds the rest)"
        if self.framework == "torch":
            who = f"torch rank {self.rank} of {self.world}"
        else:
            devices = f", {self.devices} devices" if self.devices else ""
            who = f"JAX process {self.rank} of {self.world}{devices}"
        return f"launch: {self.launcher}, {who}, rendezvous at {self.address}"


def detect(environ=None) -> Launch | None:
    """The launch that set this environment, or None. LaunchError when the variables of one
    are there only in part (naming the missing ones), or both kinds are."""
    environ = os.environ if environ is None else environ
    torch_set = [name for name in TORCH_VARIABLES if name in environ]
    jax_set = [name for name in JAX_VARIABLES if name in environ]
    if torch_set and jax_set:
        raise LaunchError(
            f"both a torch launch ({', '.join(torch_set)}) and a JAX one ({', '.join(jax_set)}) "
            "are set in the environment: unset one"
        )
    if torch_set:
        rank, world = _numbers(environ, TORCH_VARIABLES, "torch", "RANK", "WORLD_SIZE")
        address = f"{environ['MASTER_ADDR']}:{environ['MASTER_PORT']}"
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in environ else "RANK/WORLD_SIZE variables"
        return Launch("torch", rank, world, address, launcher)
    if jax_set:
        rank, world = _numbers(environ, JAX_VARIABLES, "JAX", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES")
        return Launch("jax", rank, world, environ["JAX_COORDINATOR_ADDRESS"], "JAX_* variables")
    # A task of a multi-task srun step or mpirun job (not a batch script or an salloc shell,
    # which set SLURM_NTASKS too): JAX's own detection finds the rest.
    for launcher, size in (("Slurm", "SLURM_STEP_NUM_TASKS"), ("Open MPI", "OMPI_COMM_WORLD_SIZE")):
        if environ.get(size, "1").isdigit() and int(environ.get(size, "1")) > 1:
            return Launch("jax", None, None, None, launcher)
    return None


def _numbers(environ, names, what: str, rank_name: str, world_name: str) -> tuple[int, int]:
    missing = [name for name in names if name not in environ]
    if missing:
        raise LaunchError(
            f"a {what} launch sets {', '.join(names)}; {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing from the environment"
        )
    try:
        rank, world = int(environ[rank_name]), int(environ[world_name])
    except ValueError:
        raise LaunchError(
            f"{rank_name}={environ[rank_name]!r} and {world_name}={environ[world_name]!r} "
            "must be integers"
        ) from None
    if not 0 <= rank < world:
        raise LaunchError(f"{rank_name} {rank} is outside [0, {world_name} {world})")
    return rank, world


def torch_store(launch: Launch, timeout: float):
    """The ``torch.distributed`` store this rank joins its group through, or None for
    ``env://``'s own. Rank 0 of a launch on a loopback address that no torchrun agent serves
    listens on that address alone: the store ``env://`` makes listens on every interface.
    (torchrun's agent holds the store of its ranks, where torchrun puts it.)"""
    if not launch.loopback or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return None
    import datetime
    import socket

    import torch.distributed as dist

    host, port = launch.address.rsplit(":", 1)
    host, listening = host.strip("[]"), None
    if launch.rank == 0:  # bound here, to this address alone; the store's server takes it
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listening = socket.create_server((host, int(port)), family=family).detach()
    return dist.TCPStore(
        host,
        int(port),
        launch.world,
        is_master=launch.rank == 0,
        timeout=datetime.timedelta(seconds=timeout),
        wait_for_workers=False,
        master_listen_fd=listening,
    )


def is_loopback(host: str) -> bool:
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: not known to be loopback
        return False
