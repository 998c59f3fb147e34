"""The JAX mesh of ``sharding.jax_shards`` spread over N processes with ``jax.distributed``.

Each process owns one CPU device; ``jax.distributed.initialize`` joins them into one set of
global devices (collectives over gloo, JAX's CPU default), and the very same
``ShardedEmbedding`` runs in every process: the mesh spans the processes, each holds its
shard, and the all-reduce or all-gather crosses process boundaries. Moving to several hosts
changes only the coordinator's address and the process count. On each host i of N::

    python -m embedding_parity.sharding.jax_processes --coordinator HOST0:PORT --num-processes N \\
        --process-id i --cases cases.npz --out results.npz

``embed_many`` starts N such processes on this machine, on 127.0.0.1, and collects process 0's
results; every process is stopped when it returns, whatever happened.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

from backends import validation
from embedding_parity import outputs, scratch
from embedding_parity.sharding import reference, stopped

# The folder holding backends/ and embedding_parity/: the workers import both from there.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def embed_many(
    cases,
    *,
    num_processes: int,
    strategy: str = "rows",
    timeout: float = 120.0,
    fail_process: int | None = None,
) -> list[np.ndarray]:
    """(token_table, position_table, token_ids, start) cases, each computed by num_processes
    JAX processes holding one shard each: process 0's results, as NumPy. Every case is
    checked here first (global vocabulary, positions, shard count); a process that fails,
    or a run longer than timeout seconds, stops them all and raises RuntimeError.
    fail_process: a process that raises before its first lookup (for the test that shows
    the others are stopped, not left waiting in their collective)."""
    from embedding_parity.sharding import free_port
    from embedding_parity.sharding.jax_shards import STRATEGIES

    validation.choice(strategy, STRATEGIES, "sharding strategy")
    arrays, dtypes = {}, []
    for i, (token_table, position_table, token_ids, start) in enumerate(cases):
        token_table, position_table = validation.check_tables(token_table, position_table)
        token_ids, start = validation.check_call(
            token_ids, start, len(token_table), len(position_table)
        )
        split = reference.split_columns if strategy == "columns" else reference.split_rows
        split(token_table, num_processes)  # checks the count against the table
        bits = f"u{token_table.dtype.itemsize}"  # .npz holds no bfloat16: store the bits
        arrays |= {
            f"token_table_{i}": token_table.view(bits),
            f"position_table_{i}": position_table.view(bits),
            f"token_ids_{i}": token_ids,
            f"start_{i}": np.array(start),
        }
        dtypes.append(token_table.dtype.name)
    with tempfile.TemporaryDirectory() as folder:
        case_file, out = os.path.join(folder, "cases.npz"), os.path.join(folder, "results.npz")
        np.savez(case_file, dtypes=np.array(json.dumps(dtypes)), **arrays)
        coordinator = f"127.0.0.1:{free_port()}"
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one device each
        env |= {"JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT}
        processes = []
        with contextlib.ExitStack() as stack:
            logs = [
                stack.enter_context(open(os.path.join(folder, f"process{i}.log"), "w+"))
                for i in range(num_processes)
            ]
            try:
                for i in range(num_processes):
                    command = [
                        *scratch.PYTHON,
                        "-m",
                        "embedding_parity.sharding.jax_processes",
                        "--coordinator",
                        coordinator,
                        "--num-processes",
                        str(num_processes),
                        "--process-id",
                        str(i),
                        "--strategy",
                        strategy,
                        "--cases",
                        case_file,
                        "--out",
                        out,
                        "--timeout",
                        str(timeout),
                    ]
                    if fail_process is not None:
                        command += ["--fail-process", str(fail_process)]
                    processes.append(
                        subprocess.Popen(
                            command, cwd=ROOT, env=env, stdout=logs[i], stderr=subprocess.STDOUT
                        )
                    )
                _wait(processes, logs, time.monotonic() + timeout)
            finally:
                for process in processes:  # every process stopped, whatever happened
                    if process.poll() is None:
                        process.kill()
                    process.wait(timeout=10)
        with np.load(out, allow_pickle=False) as results:
            return [results[str(i)].view(validation.DTYPES[d]) for i, d in enumerate(dtypes)]


def _wait(processes, logs, deadline: float) -> None:
    """Until every process has exited 0; the first failure, or the deadline, raises."""
    while True:
        codes = [p.poll() for p in processes]
        for i, code in enumerate(codes):
            if code not in (None, 0):
                logs[i].seek(0)
                raise RuntimeError(f"JAX process {i} exited with {code}:\n{logs[i].read()[-3000:]}")
        if all(code == 0 for code in codes):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the {len(processes)} JAX processes did not finish in time")
        time.sleep(0.05)


# Set in the child that ``supervise`` starts: the process that joins the JAX job.
CHILD = "EMBEDDING_PARITY_JAX_CHILD"
# Lines on stderr that report progress, not a problem: gloo's connection notices.
_NOISE = re.compile(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks")


def supervise(argv, prog: str, launch, timeout: float) -> int:
    """Run this command again in a child process that joins the JAX job, and answer for it.

    JAX's coordination service ends a process it gives up on with a C++ abort (a stack trace,
    status 134): a process that never started, or one that died or stopped mid-run. The child
    runs the job; this parent turns such an end into one line (RuntimeError) that says which
    process and what JAX reported, passes on the child's stdout and stderr once it has ended
    (without gloo's connection notices), and returns its exit status. The child is stopped on every
    way out of here."""
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, CHILD: "1", "PYTHONPATH": path}  # -P: the project from its path
    code = (
        "import sys; from embedding_parity.sharding import die_with_parent; "
        "die_with_parent(int(sys.argv[1])); from embedding_parity.cli import main; "
        "sys.exit(main(sys.argv[3:], prog=sys.argv[2]))"
    )
    # Both streams through files in the run's private folder: gloo writes its notices to
    # stdout, and JAX's abort to stderr.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(
            [*scratch.PYTHON, "-c", code, str(os.getpid()), prog, *argv],
            env=env,
            stdout=out,
            stderr=err,
        )
        try:
            status = _wait_child(child, launch, timeout)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)
            out.seek(0)  # what the child printed, on every way out of here
            sys.stdout.write(_quiet(out.read()))
            sys.stdout.flush()
        err.seek(0)
        text = err.read()
    if status in (0, 1, 2, 130, 128 + signal.SIGTERM, 128 + signal.SIGHUP):  # its own answer
        sys.stderr.write(_quiet(text))
        return status
    raise RuntimeError(_fatal(text, launch, status, timeout))


def _quiet(text: str) -> str:
    """``text`` without gloo's connection notices."""
    return "".join(line + "\n" for line in text.splitlines() if not _NOISE.match(line))


def _wait_child(child, launch, timeout: float) -> int:
    """The child's exit status; RuntimeError if it stays stopped (SIGSTOP) past timeout."""
    stopped_since = None
    while (status := child.poll()) is None:
        if not stopped(child.pid):
            stopped_since = None
        elif stopped_since is None:
            stopped_since = time.monotonic()
        elif time.monotonic() - stopped_since > timeout:
            raise RuntimeError(f"{launch.who} was stopped (SIGSTOP) for {timeout:g} s: ended it")
        time.sleep(0.05)
    return status


def _fatal(text: str, launch, status: int, timeout: float) -> str:
    """One line for a JAX process that ended by a signal, from what JAX printed."""
    how = f"killed by {signal.Signals(-status).name}" if status < 0 else f"exit status {status}"
    found = re.search(r"absl::Status: (\w+): ([^\n]*)", text)
    rpc = re.search(r"RPC: /xla\.coordination\.CoordinationService/(\w+)", text)
    tasks = sorted(set(re.findall(r"/task:(\d+)", text)) - {str(launch.rank)})
    who = launch.who
    if rpc and rpc.group(1) == "RegisterTask":
        return (
            f"{who}: the other processes did not all join the coordinator at {launch.address} "
            f"within {timeout:g} s (JAX: {found.group(1) if found else 'gave up'}); start all "
            f"{launch.world}, or raise --timeout"
        )
    silent = re.search(r"stopped sending heartbeats\):\s*\n([\d,\s]+?)\n", text)
    if silent:
        lost = ", ".join(silent.group(1).replace(",", " ").split())
        return (
            f"{who}: process {lost} stopped sending heartbeats (it died or was stopped); "
            f"JAX's coordination service gave up on it after {timeout:g} s and ended this one"
        )
    if found:
        culprit = f"; JAX names task {', '.join(tasks)}" if tasks else ""
        return (
            f"{who}: JAX's coordination service ended it ({how}): {found.group(1)}: "
            f"{found.group(2).strip()}{culprit}"
        )
    last = [line for line in text.splitlines() if line.strip() and not _NOISE.match(line)]
    return f"{who} ended ({how})" + (f": {last[-1].strip()}" if last else "")


def join(launch, timeout: float):
    """Join the job a launcher started (``sharding.launch``): ``jax.distributed.initialize``
    with its coordinator, process count and id, or with none where JAX finds them itself
    (Slurm, Open MPI). Process 0's coordinator listens on the address given, and only there.
    Returns the launch with this process's index, the process count and the job's global
    device count (one shard per device). Call before anything else uses JAX."""
    import dataclasses

    import jax

    # The exit barrier keeps JAX's own default: rank 0 draws and writes while the others wait
    # there, and a dead peer is found by the heartbeat anyway.
    waits = {
        "initialization_timeout": math.ceil(timeout),
        "heartbeat_timeout_seconds": math.ceil(timeout),
    }
    try:
        if launch.rank is None:
            jax.distributed.initialize(**waits)
        else:
            jax.distributed.initialize(
                coordinator_address=launch.address,
                coordinator_bind_address=launch.address if launch.rank == 0 else None,
                num_processes=launch.world,
                process_id=launch.rank,
                **waits,
            )
    except Exception as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = f" at {launch.address}" if launch.address else ""
        raise RuntimeError(
            f"{launch.who}: jax.distributed.initialize with the coordinator{where} failed: "
            f"{type(error).__name__}: {first}"
        ) from None
    return dataclasses.replace(
        launch,
        rank=jax.process_index(),
        world=jax.process_count(),
        devices=jax.device_count(),
        address=launch.address or jax.distributed.global_state.coordinator_address,
    )


def embed_launched(cases, strategies, launch, *, timeout: float = 60.0) -> dict:
    """In a process that ``join`` joined to its job: every strategy on every case over the
    job's global devices, {strategy: ([this process's copy of each result], the collective
    the compiler chose, or None for the strategies that name theirs)}."""
    from embedding_parity.sharding.jax_shards import ShardedEmbedding, collectives

    # For the tests of faults: "kill:K" or "stop:K" makes process K do so to itself here,
    # after it joined, as `kill -KILL` or `kill -STOP` from outside would.
    fault = os.environ.get("EMBEDDING_PARITY_TEST_FAULT", "")
    if fault.partition(":")[2] == str(launch.rank):
        os.kill(os.getpid(), signal.SIGKILL if fault.startswith("kill") else signal.SIGSTOP)
    done = {}
    for strategy in strategies:
        outputs, collective = [], None  # the compiler's: read from its program
        for token_table, position_table, token_ids, start in cases:
            # The ids first, against the global vocabulary, before any cross-process step.
            validation.check_call(token_ids, start, len(token_table), len(position_table))
            layer = ShardedEmbedding(
                token_table, position_table, num_shards=launch.shards, strategy=strategy
            )
            outputs.append(np.asarray(layer(token_ids, start).addressable_data(0)))
            if strategy == "compiler":
                collective = "compiler: " + ", ".join(collectives(layer, token_ids, start))
        done[strategy] = (outputs, collective)
    return done


def main(argv=None) -> int:
    from embedding_parity.usage import seconds

    parser = argparse.ArgumentParser(
        prog="python -m embedding_parity.sharding.jax_processes", description=__doc__
    )
    add = parser.add_argument
    add("--coordinator", required=True, help="HOST:PORT of process 0's coordinator service")
    add("--num-processes", type=int, required=True)
    add("--process-id", type=int, required=True)
    add("--strategy", default="rows")
    add("--cases", required=True, help="an .npz written by embed_many")
    add("--out", required=True, help="where process 0 writes the results (.npz)")
    add("--timeout", type=seconds, default=120.0, help="seconds to wait for the others to join")
    add("--fail-process", type=int, help=argparse.SUPPRESS)  # tests: this process raises
    args = parser.parse_args(argv)
    if os.path.exists(args.out) and os.path.samefile(args.out, args.cases):
        parser.error(f"--out {args.out} is --cases: the results would overwrite the cases")

    import jax

    jax.distributed.initialize(
        coordinator_address=args.coordinator,
        # Process 0's coordinator listens on the address it is given, not on every interface.
        coordinator_bind_address=args.coordinator if args.process_id == 0 else None,
        num_processes=args.num_processes,
        process_id=args.process_id,
        initialization_timeout=int(args.timeout),
    )
    try:
        _lookups(args)
    except BaseException:
        # Exit now: JAX's exit hook would wait at a barrier for the other processes, which
        # are waiting in a collective for this one.
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    jax.distributed.shutdown()
    return 0


def _lookups(args) -> None:
    from embedding_parity.sharding.jax_shards import ShardedEmbedding

    if args.process_id == args.fail_process:
        raise RuntimeError(f"process {args.process_id} failed on purpose, before its lookups")
    results = {}
    with np.load(args.cases, allow_pickle=False) as cases:
        dtypes = json.loads(str(cases["dtypes"]))
        for i, name in enumerate(dtypes):
            dtype = validation.DTYPES[name]
            token_table = cases[f"token_table_{i}"].view(dtype)
            position_table = cases[f"position_table_{i}"].view(dtype)
            token_ids, start = cases[f"token_ids_{i}"], int(cases[f"start_{i}"])
            # The ids first, against the global vocabulary, before any cross-process step.
            validation.check_call(token_ids, start, len(token_table), len(position_table))
            layer = ShardedEmbedding(
                token_table, position_table, num_shards=args.num_processes, strategy=args.strategy
            )
            y = layer(token_ids, start)
            local = np.asarray(y.addressable_data(0))  # replicated: this process's copy
            results[str(i)] = local.view(f"u{local.dtype.itemsize}")
    if args.process_id == 0:
        with outputs.replacing(args.out) as out:  # whole or not at all
            np.savez(out, **results)


if __name__ == "__main__":
    sys.exit(main())
