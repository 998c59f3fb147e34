"""The token table split across N processes with ``torch.distributed``: the gloo backend, one
machine, nothing listening beyond the loopback interface: the ranks meet through a file
store in a temporary folder, and gloo's own connections use the loopback interface
(``GLOO_SOCKET_IFNAME=lo``, unless set already).

Each rank holds its shard as an ``nn.Embedding``:

- ``"rows"`` (Megatron-LM's ``VocabParallelEmbedding``): rank k owns rows
  [k * rows, (k + 1) * rows); it masks the ids it does not own, looks up the rest, zeroes the
  masked rows, and ``dist.all_reduce`` sums the ranks' results.
- ``"columns"``: rank k holds every row and ceil(dim / N) columns; ``dist.all_gather``
  collects the ranks' columns.
- ``"dtensor"``: torch's own row-wise sharding, ``parallelize_module(embedding, mesh,
  RowwiseParallel())`` on a DeviceMesh of the N ranks: the same algorithm, written by torch.

Every rank checks the ids against the *global* vocabulary before any collective runs, so a
bad id raises the suite's IndexError on every rank and no rank waits for another. The process
group has a timeout: a rank that dies makes the others fail with an error instead of hanging.
The ranks are forked from one launcher process that imported torch once (``_Ranks``), with
one OpenMP thread: a pool of OpenMP threads started before a fork is in the forked ranks as
state without threads, and their first parallel operation waits for them forever.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import importlib
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from functools import partial

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from backends import torch_backend, validation
from embedding_parity import outputs, scratch
from embedding_parity.sharding import die_with_parent, read_checkpoint_record, reference, stopped
from embedding_parity.sharding.launch import torch_store

STRATEGIES = ("rows", "columns", "dtensor")
# Seconds the launcher may take to import torch (and, for some runs, what the ranks import:
# _import_for_ranks) and fork the ranks (1.2 s, 2.4 s with those imports, on the 2 cores at a
# load of 2) before their timeout starts; a run is over at the latest this long past its timeout.
STARTUP = 10.0
# The folder holding backends/ and embedding_parity/: the ranks import both from there.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def embed(token_table, position_table, token_ids, start: int = 0, **kwargs) -> np.ndarray:
    """The sharded layer computed by num_shards processes: rank 0's result, as NumPy.
    Keyword arguments as for embed_many."""
    return embed_many([(token_table, position_table, token_ids, start)], **kwargs)[0]


def embed_many(
    cases,
    *,
    num_shards: int,
    strategy: str = "rows",
    timeout: float = 60.0,
    fault: tuple[str, int] | None = None,
) -> list[np.ndarray]:
    """Several (token_table, position_table, token_ids, start) cases, one process group.

    Every case is checked here, before any process starts, and again on every rank before
    its collective. timeout: seconds for the ranks' whole run, from their start (the
    launcher's start may take STARTUP more); past it every rank is killed and RuntimeError
    names the rank at fault. fault, for
    the tests that show no rank hangs, is what rank k does before its first collective:
    ("raise", k) raise, ("stall", k) sleep past the timeout, ("stop", k) SIGSTOP itself,
    ("kill", k) SIGKILL itself; ("absent", k): rank k's process never runs this code.
    """
    return _spawn(cases, "forward", num_shards, strategy, timeout, fault)


def embed_measured(
    cases, *, num_shards: int, strategy: str = "rows", timeout: float = 60.0
) -> tuple[list[np.ndarray], np.ndarray]:
    """embed_many's results, and each rank's (peak resident bytes, token-table bytes read)
    as an (N, 2) array. A case's token table may be a ``reference.TableFile``: then rows and
    columns ranks read only their own part of the file (dtensor's read the whole table)."""
    results = _spawn(cases, "forward", num_shards, strategy, timeout, None, raw=True)
    outputs = [results[str(i)].view(case[0].dtype) for i, case in enumerate(cases)]
    return outputs, results["memory"]


def embed_strategies(
    cases, *, num_shards: int, strategies, timeout: float = 60.0
) -> dict[str, tuple[list[np.ndarray], np.ndarray]]:
    """embed_measured for several strategies in one process group (one start of the ranks, not
    one per strategy): {strategy: ([result of each case], memory)}, memory as embed_measured's
    with the bytes each strategy read (peak resident bytes are the ranks' peak so far)."""
    strategies = tuple(strategies)
    results = _spawn(cases, "forward", num_shards, strategies, timeout, None, raw=True)
    return {
        strategy: (
            [results[f"{strategy} {i}"].view(case[0].dtype) for i, case in enumerate(cases)],
            results[f"{strategy} memory"],
        )
        for strategy in strategies
    }


def token_gradients(
    cases, *, num_shards: int, strategy: str = "rows", timeout: float = 60.0
) -> list[np.ndarray]:
    """(token_table, position_table, token_ids, start, upstream) cases: d(loss)/d(token table)
    for upstream = d(loss)/d(output). Each rank computes the gradient of its own shard only
    (a row's gradient lives on the rank that owns the row); rank 0 gathers the shards into
    the (vocab_size, dim) gradient, which is returned."""
    return [gradient for gradient, *_ in training_steps(cases, num_shards=num_shards,
            strategy=strategy, timeout=timeout)]  # fmt: skip


def training_steps(
    cases, *, num_shards: int, strategy: str | tuple = "rows", timeout: float = 60.0
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(token_table, position_table, token_ids, start, upstream) cases: (the gathered token
    gradient, the token table after one Adam step, the forward output) for the loss whose
    d(loss)/d(output) is upstream. Each rank steps only its own shard (``ADAM``'s settings),
    from the gradient of the ids it owns: Adam is elementwise, so the step itself needs no
    collective; rank 0 gathers the updated shards. ``strategy`` a tuple: {strategy: that list}
    for each, in one start of the ranks."""
    results = _spawn(cases, "gradient", num_shards, strategy, timeout, None, raw=True)
    if isinstance(strategy, tuple):
        return {one: _steps(results, cases, f"{one} ") for one in strategy}
    return _steps(results, cases, "")


def _steps(results, cases, prefix):
    return [
        tuple(
            results[f"{prefix}{name}{i}"].view(case[0].dtype) for name in ("", "adam ", "forward ")
        )
        for i, case in enumerate(cases)
    ]


def _spawn(cases, mode, num_shards, strategy, timeout, fault, raw=False, checkpoint=None):
    """Start the ranks on the cases; each case's result from rank 0 (raw: every array rank 0
    wrote, by name, as bits). ``strategy`` a tuple: each in turn, in the same ranks, every
    result named "STRATEGY NAME" and each strategy's memory "STRATEGY memory"."""
    chosen = strategy if isinstance(strategy, tuple) else (strategy,)
    for one in chosen:
        validation.choice(one, STRATEGIES, "sharding strategy")
    # the ranks' argument: "rows", or for a tuple "rows,columns," (a tuple of one too)
    strategy = ",".join(chosen) + ("," if isinstance(strategy, tuple) else "")
    checked = []
    for token_table, position_table, token_ids, start, *upstream in cases:
        if isinstance(token_table, reference.TableFile):
            position_table = token_table.check_positions(position_table)
        else:
            token_table, position_table = validation.check_tables(token_table, position_table)
        token_ids, start = validation.check_call(
            token_ids, start, token_table.shape[0], len(position_table)
        )
        vocab_size, dim = token_table.shape  # the shard count against the table
        if "columns" in chosen:
            reference.check_shards(num_shards, dim, "columns")
        if chosen != ("columns",):
            reference.check_shards(num_shards, vocab_size, "rows")
        extra = ()
        if mode == "gradient":
            (upstream,) = upstream
            upstream = np.asarray(upstream)
            if upstream.shape != (*token_ids.shape, token_table.shape[1]):
                raise ValueError(
                    f"upstream has shape {upstream.shape}, but the output for these ids has "
                    f"shape {(*token_ids.shape, token_table.shape[1])}"
                )
            if upstream.dtype != token_table.dtype:
                raise TypeError(
                    f"upstream is {upstream.dtype}, but the token table is {token_table.dtype}: "
                    "cast upstream to the table's dtype"
                )
            extra = (upstream,)
        checked.append((token_table, position_table, token_ids, start, *extra))
    with tempfile.TemporaryDirectory() as folder:
        case_file, out = os.path.join(folder, "cases.npz"), os.path.join(folder, "results.npz")
        _write_cases(case_file, checked, checkpoint)
        # Not torch.multiprocessing: its error files are pickles in $TMPDIR, loaded on any
        # failure. Each rank's error travels as text; TMPDIR is this folder.
        env = {**os.environ, "TMPDIR": folder, "PYTHONPATH": ROOT}
        ranks = _Ranks(folder, num_shards, [mode, strategy, str(timeout), json.dumps(fault)], env)
        try:
            latest = time.monotonic() + timeout + STARTUP
            processes = ranks.start(latest)
            # the ranks' whole run, every strategy's collectives too, within the timeout: a
            # rank stuck outside a collective, where no collective timeout fires, is found too
            deadline = min(time.monotonic() + timeout, latest)
            _wait(processes, folder, deadline, timeout, _step_names(chosen, len(checked)))
        finally:
            ranks.stop()  # every rank stopped, whatever happened
        with np.load(out, allow_pickle=False) as results:
            if raw:
                return dict(results)
            if mode == "time":
                return [results[str(i)] for i in range(len(checked))]
            return [results[str(i)].view(case[0].dtype) for i, case in enumerate(checked)]


class _Ranks:
    """The ranks of one run, forked from one launcher process that imported torch once (a
    rank started by itself spends about 1.4 s of CPU importing torch) with one OpenMP thread
    (``OMP_NUM_THREADS=1``), so that it starts no OpenMP pool before it forks (importing
    ``backends.torch_backend`` runs a parallel sin); each rank then takes as many threads as
    torch has in this process (``torch.get_num_threads()``). On a pipe of its own
    the launcher reports each rank's pid, then each rank's exit status as it ends; its own
    output goes to launcher.log and a rank's to rank{r}.log in the run's folder. Asked to
    stop (SIGTERM, SIGINT), it kills the ranks it has not reaped yet (so no pid is signalled
    after it is freed) and reaps them. Every rank dies with the launcher, and the launcher
    with this process (Linux's PR_SET_PDEATHSIG)."""

    def __init__(self, folder: str, num_shards: int, args: list[str], env: dict):
        self.folder, self.num_shards, self.args, self.env = folder, num_shards, args, env
        self.launcher, self.log, self.processes, self.buffer = None, None, [], b""
        self.pipe, self.ended = None, False

    def start(self, deadline: float) -> list[_Rank]:
        self.log = open(os.path.join(self.folder, "launcher.log"), "w+")
        self.pipe, report = os.pipe()
        threads = str(torch.get_num_threads())
        try:
            self.launcher = subprocess.Popen(
                [*scratch.PYTHON, "-m", __name__, str(os.getpid()), str(report), threads]
                + [self.folder, str(self.num_shards), *self.args],
                cwd=ROOT,
                env={**self.env, "OMP_NUM_THREADS": "1"},
                stdout=self.log,
                stderr=subprocess.STDOUT,
                pass_fds=(report,),
            )
        finally:
            os.close(report)  # the launcher's now: the pipe ends when the launcher does
        self.poller = select.poll()
        self.poller.register(self.pipe, select.POLLIN)
        while len(self.processes) < self.num_shards:
            line = self._line(deadline)
            if line is None:
                raise RuntimeError(self._ended_early() if self.ended else (
                    f"the torch ranks' launcher did not start the {self.num_shards} ranks in "
                    f"time{self._last_log_line()}"
                ))  # fmt: skip
            if " " in line:  # a status before every pid: the launcher was stopped
                raise RuntimeError(
                    f"the torch ranks' launcher was stopped before it started the "
                    f"{self.num_shards} ranks"
                )
            self.processes.append(_Rank(int(line), self))
        return self.processes

    def _line(self, deadline: float, wait: bool = True) -> str | None:
        """The launcher's next line; None once it has ended (self.ended), at the deadline,
        or (not waiting) for now."""
        while b"\n" not in self.buffer and not self.ended:
            left = max(deadline - time.monotonic(), 0) if wait else 0
            if not self.poller.poll(left * 1000):
                if wait and left > 0:
                    continue
                return None
            chunk = os.read(self.pipe, 4096)
            self.buffer += chunk
            self.ended = not chunk
        if b"\n" not in self.buffer:
            return None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()

    def update(self) -> None:
        """Record the exit statuses the launcher has reported so far; RuntimeError if it
        ended with ranks unreported (they died with it)."""
        while (line := self._line(0, wait=False)) is not None:
            pid, status = map(int, line.split())
            for rank in self.processes:
                if rank.pid == pid:
                    rank.returncode = status
        if self.ended and any(rank.returncode is None for rank in self.processes):
            raise RuntimeError(self._ended_early())

    def _ended_early(self) -> str:
        try:
            status = self.launcher.wait(timeout=10)
        except subprocess.TimeoutExpired:
            status = None
        how = (
            "is still running" if status is None
            else f"was killed by {signal.Signals(-status).name}" if status < 0
            else f"exited with {status}"
        )  # fmt: skip
        return (
            f"the torch ranks' launcher {how} before every rank had ended, and its ranks "
            f"with it{self._last_log_line()}"
        )

    def _last_log_line(self) -> str:
        self.log.flush()
        self.log.seek(0)
        last = [line.strip() for line in self.log.read().splitlines() if line.strip()][-1:]
        return "".join(f": {line}" for line in last)

    def stop(self) -> None:
        try:
            if self.launcher is not None and self.launcher.poll() is None:
                self.launcher.terminate()  # it kills and reaps the ranks still running
                try:
                    self.launcher.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.launcher.kill()  # and its ranks with it
                    self.launcher.wait(timeout=10)
        finally:
            if self.pipe is not None:
                os.close(self.pipe)
                self.pipe = None
            if self.log is not None:
                self.log.close()


class _Rank:
    """One forked rank, as much of ``subprocess.Popen`` as _wait and _culprit use."""

    def __init__(self, pid: int, ranks: _Ranks):
        self.pid, self.ranks, self.returncode = pid, ranks, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.ranks.update()
        return self.returncode


_STOPS = {signal.SIGTERM, signal.SIGINT}


def _launch(argv) -> None:
    """The launcher: PARENT REPORT THREADS FOLDER NUM_SHARDS MODE STRATEGY TIMEOUT FAULT (JSON),
    from _Ranks. Forks the ranks (torch is imported already, with one OpenMP thread; each rank
    takes THREADS), writes each one's pid to the file descriptor REPORT, then reaps them,
    writing "PID STATUS" for each (negative: the signal that ended it), and exits."""
    parent, report, threads, folder, num_shards, *args = argv
    report, threads = int(report), int(threads)
    die_with_parent(int(parent))
    fault = json.loads(args[-1])
    running, stopping = set(), []
    inherited = {number: signal.getsignal(number) for number in _STOPS}  # for the ranks

    def stop(number, frame):  # the ranks in running are unreaped: their pids are theirs
        stopping.append(number)
        for pid in running:
            os.kill(pid, signal.SIGKILL)

    for number, handler in inherited.items():
        if handler is not signal.SIG_IGN:  # Ctrl-C in a terminal reaches the ranks too
            signal.signal(number, stop)
    _import_for_ranks(*args[:2])
    gc.freeze()  # the collector leaves torch's objects alone: fewer pages copied on write
    launcher = os.getpid()
    for rank in range(int(num_shards)):
        if stopping:  # asked to stop while it was starting them: no more ranks
            break
        log = os.open(os.path.join(folder, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT, 0o600)
        sys.stdout.flush()
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)  # no stop() between fork and add
        pid = os.fork()
        if pid == 0:
            _forked_rank(launcher, report, log, inherited, threads, folder, rank, num_shards,
                         args, fault)  # fmt: skip
        os.close(log)
        running.add(pid)
        os.write(report, f"{pid}\n".encode())
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
    while running:
        # Which rank ended, left unreaped until it is out of running: stop() never signals
        # a freed pid.
        pid = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT).si_pid
        running.discard(pid)
        _, status = os.waitpid(pid, 0)
        os.write(report, f"{pid} {os.waitstatus_to_exitcode(status)}\n".encode())


def _import_for_ranks(mode: str, strategy: str) -> None:
    """Import here, once, what the ranks would each import on first use: torch._dynamo and
    sympy (backward, Adam, DTensor and DCP import them), DTensor, DCP; about 1.7 s of CPU.
    Forked, every rank has them already. Importing them starts no thread; a forward of rows
    or columns imports none of them, nor does its launcher."""
    checkpoint, dtensor = mode in ("save", "load"), "dtensor" in strategy.split(",")
    for name, needed in (
        ("torch._dynamo", checkpoint or dtensor or mode == "gradient"),
        ("torch.distributed.tensor.parallel", checkpoint or dtensor),
        ("torch.distributed.checkpoint", checkpoint),
    ):
        if needed:
            importlib.import_module(name)


def _forked_rank(launcher, report, log, inherited, threads, folder, rank, num_shards, args,
                 fault):  # fmt: skip
    """In a forked rank: its output to rank{rank}.log, its OpenMP threads (``threads``: a
    pool of its own, started on its first parallel operation), then its work; never returns.
    It ends as an uncaught exception would end it: the traceback and status 1, SystemExit's
    code, or for KeyboardInterrupt SIGINT."""
    code, interrupted = 1, False
    try:
        for number, handler in inherited.items():  # the rank's own, not the launcher's
            signal.signal(number, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
        die_with_parent(launcher)
        os.close(report)  # the launcher's alone: the pipe ends when the launcher does
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        torch.set_num_threads(threads)
        if fault == ["absent", rank]:  # a rank that never gets to run: a process that
            time.sleep(3600)  # only waits, as one stuck before it could start would
        main([folder, str(rank), num_shards, *args])  # ends in os._exit(0)
    except SystemExit as done:
        code = 0 if done.code is None else done.code if isinstance(done.code, int) else 1
        if not isinstance(done.code, int | None):
            print(done.code, file=sys.stderr)
    except KeyboardInterrupt:
        code, interrupted = 128 + signal.SIGINT, True
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # nothing raises on the way out
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        if interrupted:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


def _wait(processes, folder: str, deadline: float, timeout: float, steps: list[str]) -> None:
    """Until every rank has exited 0. A failure, or the deadline (the ranks' own collectives
    give up no sooner: their timeout counts from a later start), raises one RuntimeError
    that names the rank at fault and what happened to it (``_culprit``), not the rank that
    noticed. steps: what each step of a rank's progress after the rendezvous begins."""
    while True:
        codes = [p.poll() for p in processes]
        if any(code not in (None, 0) for code in codes):
            time.sleep(0.2)  # the others' errors, which say who was lost, arrive together
            raise RuntimeError(_culprit(processes, folder, timeout, steps))
        if all(code == 0 for code in codes):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(_culprit(processes, folder, timeout, steps, expired=True))
        time.sleep(0.05)


def _culprit(processes, folder: str, timeout: float, steps, expired: bool = False) -> str:
    """One line: the rank at fault and what happened. In order: a rank killed by a signal, a
    stopped rank (SIGSTOP), a rank whose own error is not about a lost peer, a rank behind the
    others (its last step, from rank*.progress); then every rank's error."""
    states = {}
    for rank, process in enumerate(processes):
        code = process.poll()
        if code is not None and code < 0:
            states[rank] = f"was killed by {signal.Signals(-code).name}"
        elif code is None and stopped(process.pid):
            states[rank] = "is stopped (SIGSTOP)"
    errors = {
        rank: _read(path)
        for rank in range(len(processes))
        if os.path.exists(path := os.path.join(folder, f"rank{rank}.error"))
    }
    progress = {rank: _progress(folder, rank) for rank in range(len(processes))}
    behind = min(progress.values())
    for rank, state in states.items():
        waited = (
            f"; the others gave up waiting for it after {timeout:g} s" if "stop" in state else ""
        )
        return f"rank {rank} {state} before {_step(progress[rank], steps)}{waited}"
    absent = [rank for rank, step in progress.items() if step < 0]
    if absent and len(absent) < len(processes):
        return (
            f"rank {absent[0]} never reached the rendezvous (it did not start its work); the "
            f"others waited {timeout:g} s for it there"
        )
    lost = ("Timed out", "Connection closed", "Connection reset", "wait timeout", "timed out")
    for rank, error in errors.items():
        if not any(word in error for word in lost):
            return f"rank {rank}: {error}"
    laggards = [rank for rank, step in progress.items() if step == behind]
    if len(laggards) < len(processes):
        rank = laggards[0]
        waited = f" (the others waited {timeout:g} s for it)"
        return f"rank {rank} stalled before {_step(behind, steps)}{waited}" + (
            f"; rank {min(errors)}: {errors[min(errors)]}" if errors else ""
        )
    if expired:  # every rank as far as the others
        where = _where_all(behind, steps)
        return f"the {len(processes)} ranks did not finish in {timeout:g} s{where}"
    failed = next(i for i, p in enumerate(processes) if p.poll() not in (None, 0))
    last = _read(os.path.join(folder, f"rank{failed}.log")).strip().splitlines()[-1:]
    return "; ".join(f"rank {r}: {e}" for r, e in errors.items()) or (
        f"rank {failed} exited with {processes[failed].poll()}" + "".join(f": {x}" for x in last)
    )


def _progress(folder: str, rank: int) -> int:
    """How far the rank got: -1 not started (no progress file), 0 waiting at the rendezvous,
    1 in the process group, 1 + k: began step k - 1 of ``_step_names`` (a byte a step, by _mark)."""
    path = os.path.join(folder, f"rank{rank}.progress")
    try:
        return len(_read(path))
    except OSError:
        return -1


def _step_names(strategies: tuple, num_cases: int) -> list[str]:
    """What each mark of a rank's progress after the rendezvous begins: every case's
    collectives, for each strategy in turn (named when there are several)."""
    return [
        f"case {i}'s collective" + (f" ({one})" if len(strategies) > 1 else "")
        for one in strategies
        for i in range(num_cases)
    ]


def _where_all(count: int, steps: list[str]) -> str:
    """Where ranks that all have this progress stand, for a run past its deadline."""
    if count < 0:
        return ""
    if count == 0:
        return ", every one at the rendezvous"
    if count == 1:
        return f", every one before {steps[0]}" if steps else ""
    return f", every one in {steps[count - 2]}"  # the last step they began


def _step(count: int, steps: list[str]) -> str:
    """Where a rank with this progress stands: before the step it did not begin."""
    if count < 1:
        return "the rendezvous"
    return steps[count - 1] if count - 1 < len(steps) else "the end of its run"


def _write_cases(path: str, cases, checkpoint: str | None = None) -> None:
    """The cases as one .npz: tables as raw bits (.npz holds no bfloat16), dtypes as JSON."""
    arrays, dtypes = {}, []
    for i, (token_table, position_table, token_ids, start, *upstream) in enumerate(cases):
        bits = f"u{token_table.dtype.itemsize}"
        if isinstance(token_table, reference.TableFile):  # each rank reads its own part
            where = json.dumps([token_table.path, token_table.key])
            arrays[f"token_file_{i}"] = np.array(where)
        else:
            arrays[f"token_table_{i}"] = token_table.view(bits)
        arrays |= {
            f"position_table_{i}": position_table.view(bits),
            f"token_ids_{i}": token_ids,
            f"start_{i}": np.array(start),
        }
        if upstream:
            arrays[f"upstream_{i}"] = upstream[0].view(bits)
        dtypes.append(token_table.dtype.name)
    if checkpoint is not None:  # the DCP folder that modes "save" and "load" use
        arrays["checkpoint"] = np.array(checkpoint)
    np.savez(path, dtypes=np.array(json.dumps(dtypes)), **arrays)


def _read_cases(path: str) -> list[tuple]:
    with np.load(path, allow_pickle=False) as saved:
        cases = []
        for i, name in enumerate(json.loads(str(saved["dtypes"]))):
            dtype = validation.DTYPES[name]
            if f"token_file_{i}" in saved:
                token_table = reference.TableFile.open(*json.loads(str(saved[f"token_file_{i}"])))
            else:
                token_table = saved[f"token_table_{i}"].view(dtype)
            case = (
                token_table,
                saved[f"position_table_{i}"].view(dtype),
                saved[f"token_ids_{i}"],
                int(saved[f"start_{i}"]),
            )
            if f"upstream_{i}" in saved:
                case += (saved[f"upstream_{i}"].view(dtype),)
            cases.append(case)
    return cases


def _rank(rank, num_shards, folder, cases, mode, strategy, timeout, fault, out, checkpoint=None):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo's pairs: loopback only
    progress = open(os.path.join(folder, f"rank{rank}.progress"), "w")
    mark = partial(_mark, progress)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{os.path.join(folder, 'rendezvous')}",  # no TCP store to listen
        rank=rank,
        world_size=num_shards,
        timeout=datetime.timedelta(seconds=timeout),
    )
    mark()  # in the group
    try:
        if mode in ("save", "load"):
            results = _checkpoint(mode, rank, num_shards, cases, strategy, checkpoint)
        elif "," in strategy:  # several, each in turn, with the bytes each read
            results = {}
            for one in filter(None, strategy.split(",")):
                read_before = _bytes_read(cases)
                bits = _compute(rank, num_shards, cases, mode, one, timeout, fault, mark)
                results.update({f"{one} {name}": value for name, value in bits.items()})
                read = _bytes_read(cases) - read_before
                results[f"{one} memory"] = _gather_memory(read, num_shards)
        else:
            results = _compute(rank, num_shards, cases, mode, strategy, timeout, fault, mark)
        results["memory"] = _gather_memory(_bytes_read(cases), num_shards)
        if rank == 0:
            np.savez(out, **results)  # raw bits: .npz holds no bfloat16
        dist.barrier()  # no rank leaves while another still has a collective in flight
    except BaseException as error:  # recorded for the parent, then re-raised
        with open(os.path.join(os.path.dirname(out), f"rank{rank}.error"), "w") as record:
            record.write(f"{type(error).__name__}: {error}")
        raise
    finally:
        dist.destroy_process_group()
    # Done, results on disk: leave without running C++ static destructors, where a gloo
    # thread that outlived its group can abort the exit ("terminate called without an
    # active exception", seen about once in 30 runs), failing a run that succeeded.
    os._exit(0)


def _bytes_read(cases) -> int:
    """Token-table bytes this process has read from the cases' files so far."""
    return sum(c[0].read[0] for c in cases if isinstance(c[0], reference.TableFile))


def _gather_memory(read: int, num_shards: int) -> np.ndarray:
    """Every rank's (peak resident bytes, ``read``), an (N, 2) array on every rank."""
    usage = torch.tensor([_peak_resident(), read], dtype=torch.int64)
    every = [torch.empty_like(usage) for _ in range(num_shards)]
    dist.all_gather(every, usage)
    return torch.stack(every).numpy()


def _peak_resident() -> int:
    """This process's peak resident bytes: VmHWM (its own address space: not ru_maxrss, which
    Linux carries over from the parent across fork and exec); ru_maxrss where there is no
    /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _mark(progress) -> None:
    """One step more, for the parent to tell which rank fell behind (one byte per step)."""
    progress.write(".")
    progress.flush()


def _compute(
    rank, num_shards, cases, mode, strategy, timeout=60.0, fault=None, mark=lambda: None
) -> dict:
    """This rank's part of every case, in a process group that is up: {"i": rank 0's view of
    the result as raw bits (or seconds, for mode "time")}. ``mark()`` before each case's
    collectives."""
    results = {}
    for i, (token_table, position_table, token_ids, start, *upstream) in enumerate(cases):
        # The same checks on every rank, before any collective: all raise, none waits.
        token_ids, start = validation.check_call(
            token_ids, start, token_table.shape[0], len(position_table)
        )
        # Faults, for the tests: each as it would come from outside, before the collective.
        if fault == ("raise", rank):
            raise RuntimeError(f"rank {rank} failed on purpose, before its collective")
        if fault == ("stall", rank):
            time.sleep(timeout + 20)  # the others' collective times out meanwhile
        if fault == ("stop", rank):
            os.kill(os.getpid(), signal.SIGSTOP)  # as `kill -STOP PID` would
        if fault == ("kill", rank):
            os.kill(os.getpid(), signal.SIGKILL)  # as `kill -KILL PID` would
        mark()
        ids = torch.from_numpy(token_ids.astype(np.int64))
        positions = torch_backend._as_tensor(position_table)[start : start + ids.shape[-1]]
        with torch.inference_mode():
            lookup = _build(strategy, rank, num_shards, token_table)
            if mode == "time":  # seconds per call, each call started together
                call = partial(_lookup_add, lookup, ids, positions)
                results[str(i)] = _times(call, repeats=25)
                continue
            x = lookup(ids) + positions
        bits = f"u{x.element_size()}"
        if mode == "gradient":  # the forward as well, then the backward and the step
            results[f"forward {i}"] = torch_backend.to_numpy(x).view(bits)
            upstream = torch_backend._as_tensor(upstream[0])
            x, stepped = _gradient_and_step(strategy, rank, num_shards, token_table, ids, upstream)
            results[f"adam {i}"] = torch_backend.to_numpy(stepped).view(bits)
        results[str(i)] = torch_backend.to_numpy(x).view(bits)
    return results


def _checkpoint(mode, rank, num_shards, cases, strategy, folder) -> dict:
    """Mode "save": the case's token table as a DTensor split over the ranks (by rows, or by
    columns), written by ``torch.distributed.checkpoint`` to ``folder``. Mode "load": an
    empty DTensor of the table's shape split over these ranks, filled by DCP from ``folder``
    whatever count wrote it (DCP reshards on load); rank 0 returns it gathered, and every
    rank's local shard shape (and with a second folder, after a newline, saves it there)."""
    folder, _, save_to = folder.partition("\n")  # "load" may also save what it loaded
    save_to = save_to or None
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageReader
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    ((token_table, *_),) = cases
    mesh = init_device_mesh("cpu", (num_shards,))
    placement = [Shard(1) if strategy == "columns" else Shard(0)]
    if mode == "save":
        table = distribute_tensor(torch_backend._as_tensor(token_table), mesh, placement)
        dcp.save({"token_table": table}, storage_writer=_writer(folder))
        return {}
    empty = torch.zeros(token_table.shape, dtype=torch_backend._torch_dtype(token_table.dtype))
    table = distribute_tensor(empty, mesh, placement)
    # DCP's default reader unpickles the checkpoint's metadata; this one reads the
    # safetensors headers (JSON), so loading a checkpoint can run no code.
    dcp.load({"token_table": table}, storage_reader=HuggingFaceStorageReader(folder))
    if save_to is not None:  # and written again, as these ranks now hold it
        dcp.save({"token_table": table}, storage_writer=_writer(save_to))
    local = torch.tensor(table.to_local().shape, dtype=torch.int64)
    every = [torch.empty_like(local) for _ in range(num_shards)]
    dist.all_gather(every, local)
    full = _waited(table.full_tensor())
    bits = torch_backend.to_numpy(full).view(f"u{full.element_size()}")
    return {"0": bits, "local shapes": torch.stack(every).numpy()}


def _writer(folder: str):
    """DCP's safetensors writer: each rank its own file, its shard's place in the table in the
    file's header (JSON); no pickle, and readable by any safetensors reader."""
    from torch.distributed.checkpoint import HuggingFaceStorageWriter

    return HuggingFaceStorageWriter(folder, save_distributed=True)


def save_checkpoint(token_table, folder: str, *, num_shards: int, strategy: str = "rows",
                    timeout: float = 60.0) -> None:  # fmt: skip
    """Write ``token_table`` split over num_shards ranks (by rows or columns) to ``folder``
    (which must not exist) with ``torch.distributed.checkpoint``: each rank writes its own
    shard; ``folder/dcp`` in DCP's format and ``folder/table.json`` with the sizes. Written
    into a temporary folder beside it and renamed: a failure leaves no ``folder``."""
    validation.choice(strategy, ("rows", "columns"), "checkpoint strategy")
    token_table = np.asarray(token_table)
    case = (token_table, token_table[:1], np.zeros(0, np.int64), 0)
    with outputs.new_folder(folder) as partial:
        where = os.path.join(partial, "dcp")
        try:
            _spawn([case], "save", num_shards, strategy, timeout, None, raw=True, checkpoint=where)
        except RuntimeError as error:
            raise RuntimeError(f"the ranks could not write {folder}: {_last(error)}") from None
        record = {
            "framework": "torch",
            "format": "dcp",
            "vocab_size": token_table.shape[0],
            "dim": token_table.shape[1],
            "dtype": token_table.dtype.name,
            "strategy": strategy,
            "num_shards": num_shards,
        }
        outputs.write_text(os.path.join(partial, "table.json"), json.dumps(record, indent=1))


def load_checkpoint(folder: str, *, num_shards: int, strategy: str = "rows", vocab_size=None,
                    dim=None, timeout: float = 60.0, save_to: str | None = None,
                    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The token table restored from ``folder`` onto num_shards ranks split by ``strategy``,
    whatever count wrote it (DCP reshards on load): (the table gathered on rank 0, each
    rank's local shard shape). ValueError when the checkpoint's vocabulary or dim is not
    vocab_size or dim (when given), it is not torch's, or its files are damaged (checked
    before any rank starts, ``read_checkpoint_record``); RuntimeError in one line when the
    ranks fail to load it all the same. save_to: a new folder, where the same ranks then
    save the table as they hold it (a reshard in one run), whole or not at all."""
    folder = os.path.abspath(folder)
    record = read_checkpoint_record(folder, "torch", vocab_size, dim)
    shape = (record["vocab_size"], record["dim"])
    empty = np.zeros(shape, validation.DTYPES[record["dtype"]])
    case = (empty, empty[:1], np.zeros(0, np.int64), 0)
    saving = outputs.new_folder(save_to) if save_to is not None else contextlib.nullcontext()
    with saving as partial:
        where = os.path.join(folder, "dcp")
        if partial is not None:
            where += "\n" + os.path.join(partial, "dcp")
        try:
            results = _spawn(
                [case], "load", num_shards, strategy, timeout, None, raw=True, checkpoint=where
            )
        except RuntimeError as error:
            raise RuntimeError(f"the ranks could not restore {folder}: {_last(error)}") from None
        if partial is not None:
            record = {**record, "strategy": strategy, "num_shards": num_shards}
            outputs.write_text(os.path.join(partial, "table.json"), json.dumps(record, indent=1))
    return results["0"].view(empty.dtype), results["local shapes"]


def _last(error: RuntimeError) -> str:
    """A rank's error's last line: DCP's own error holds every rank's traceback."""
    return "".join(str(error).strip().splitlines()[-1:])


def embed_launched(cases, strategies, launch, *, timeout: float = 60.0) -> dict[str, tuple]:
    """This process as one rank of a job a launcher started (torchrun: ``launch`` from
    ``sharding.launch.detect``): join its group through the environment (``env://``), run
    every strategy on every case, and return {strategy: ([result of each case], memory)}
    (every rank gets the whole result: the collectives replicate it). memory: every rank's
    (peak resident bytes so far, token-table bytes read by this strategy), an (N, 2) array.
    A case's token table may be a ``reference.TableFile``: each rank reads its own part.

    gloo keeps to the loopback interface when the launcher's address is loopback; otherwise
    it uses the interfaces the launcher's address leads to. A rank missing from the
    rendezvous, or one that stops, ends the wait after ``timeout`` seconds with an error."""
    if launch.loopback:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    try:
        store = torch_store(launch, timeout)  # on loopback, rank 0 listens there alone
        dist.init_process_group(
            "gloo",
            **({"init_method": "env://"} if store is None else {"store": store}),
            rank=launch.rank,
            world_size=launch.world,
            timeout=datetime.timedelta(seconds=timeout),
        )
    except OSError as error:  # rank 0's address taken, say (torch's own errors are not OSErrors)
        raise RuntimeError(f"rank 0 cannot listen at {launch.address}: {error}") from None
    except (RuntimeError, dist.DistStoreError) as error:
        raise RuntimeError(
            f"rank {launch.rank}: the rendezvous at {launch.address} did not gather the "
            f"{launch.world} ranks in {timeout:g} s (a rank that never started?): "
            f"{str(error).splitlines()[0]}"
        ) from None
    try:
        done = {}
        for strategy in strategies:
            read_before = _bytes_read(cases)
            bits = _compute(launch.rank, launch.world, cases, "lookup", strategy, timeout)
            memory = _gather_memory(_bytes_read(cases) - read_before, launch.world)
            results = [bits[str(i)].view(case[0].dtype) for i, case in enumerate(cases)]
            done[strategy] = (results, memory)
        dist.barrier()  # no rank leaves while another still has a collective in flight
        return done
    finally:
        dist.destroy_process_group()


def main(argv) -> None:
    """One rank: FOLDER RANK NUM_SHARDS MODE STRATEGY TIMEOUT FAULT (JSON), from _spawn."""
    folder, rank, num_shards, mode, strategy, timeout, fault = argv
    fault = json.loads(fault)
    cases = _read_cases(os.path.join(folder, "cases.npz"))
    with np.load(os.path.join(folder, "cases.npz"), allow_pickle=False) as saved:
        checkpoint = str(saved["checkpoint"]) if "checkpoint" in saved else None
    out = os.path.join(folder, "results.npz")
    _rank(
        int(rank),
        int(num_shards),
        folder,
        cases,
        mode,
        strategy,
        float(timeout),
        tuple(fault) if fault else None,
        out,
        checkpoint,
    )


def _read(path: str) -> str:
    with open(path) as record:
        return record.read()


def _build(strategy: str, rank: int, num_shards: int, token_table: np.ndarray):
    """This rank's lookup: its shard as an nn.Embedding, built once; ids -> the full rows."""
    if strategy == "dtensor":
        return _dtensor(num_shards, token_table)
    if strategy == "columns":
        return _columns(rank, num_shards, token_table)
    return _rows(rank, num_shards, token_table)


def _rows(rank, num_shards, token_table):
    shard = reference.row_shard(token_table, rank, num_shards)  # this rank's rows alone
    embedding = nn.Embedding.from_pretrained(torch_backend._as_tensor(shard))
    rows = len(shard)

    def lookup(ids):
        local = ids - rank * rows
        owned = (local >= 0) & (local < rows)
        x = embedding(torch.where(owned, local, 0))
        x[~owned] = 0  # ids this rank does not own contribute an exact zero
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x

    return lookup


def _columns(rank, num_shards, token_table):
    shard = reference.column_shard(token_table, rank, num_shards)
    embedding = nn.Embedding.from_pretrained(torch_backend._as_tensor(np.ascontiguousarray(shard)))

    def lookup(ids):
        x = embedding(ids)
        parts = [torch.empty_like(x) for _ in range(num_shards)]
        dist.all_gather(parts, x)
        return torch.cat(parts, dim=-1)[..., : token_table.shape[1]]

    return lookup


def _dtensor(num_shards, token_table):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (num_shards,))
    if isinstance(token_table, reference.TableFile):  # DTensor splits a whole table itself
        token_table = token_table.whole()
    embedding = nn.Embedding.from_pretrained(torch_backend._as_tensor(token_table))
    # Every rank sees every id (replicated input); torch splits the rows, masks, and
    # all-reduces the partial results into a replicated output.
    plan = RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
    parallelize_module(embedding, mesh, plan)
    return lambda ids: _waited(embedding(ids))


def _waited(tensor: torch.Tensor) -> torch.Tensor:
    """DTensor hands back the result of its collective unfinished (an AsyncCollectiveTensor):
    wait for it here, or the process can end with the collective in flight (an abort)."""
    wait = getattr(tensor, "wait", None)
    return tensor if wait is None else wait()


def _lookup_add(lookup, ids, positions):
    return lookup(ids) + positions


def _times(call, repeats: int) -> np.ndarray:
    """Seconds of each of ``repeats`` calls, every rank starting each one after a barrier."""
    for _ in range(3):  # warm-up
        call()
    seconds = []
    for _ in range(repeats):
        dist.barrier()
        began = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - began)
    return np.array(seconds)


def time_lookup(cases, *, num_shards: int, strategy: str = "rows", timeout: float = 300.0):
    """Rank 0's seconds for each of 25 calls of each case's sharded lookup (after 3 warm-up
    calls; the ranks start each call together)."""
    return _spawn(cases, "time", num_shards, strategy, timeout, None)


def _gathered(local: torch.Tensor, num_shards: int, dim: int) -> torch.Tensor:
    """Every rank's equal-shaped gradient shard, concatenated along dim (an all-gather)."""
    parts = [torch.empty_like(local) for _ in range(num_shards)]
    dist.all_gather(parts, local)
    return torch.cat(parts, dim=dim)


# One Adam step on the sharded table (training_steps, in mode "gradient"): these settings, on
# every rank and in the unsharded reference. Adam is elementwise, so each rank steps its own rows (or columns).
ADAM = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "foreach": False}


def _rows_backward(rank, num_shards, token_table, ids, upstream):
    """The backward of _rows on this rank: the all-reduce's backward passes the replicated
    upstream to every rank unchanged, and the mask sends each row's terms to its owner.
    Returns (this rank's weight, with .grad; how to gather the shards)."""
    shard = reference.row_shard(token_table, rank, num_shards)
    embedding = nn.Embedding.from_pretrained(
        torch_backend._as_tensor(shard), freeze=False
    )  # own copy
    rows = len(shard)
    local = ids - rank * rows
    owned = (local >= 0) & (local < rows)
    x = torch.where(owned[..., None], embedding(torch.where(owned, local, 0)), 0)
    x.backward(upstream)
    weight = embedding.weight
    return weight, lambda t: _gathered(t, num_shards, 0)[: len(token_table)]


def _columns_backward(rank, num_shards, token_table, ids, upstream):
    shard = reference.column_shard(token_table, rank, num_shards)
    weight = torch_backend._as_tensor(np.ascontiguousarray(shard)).clone()
    embedding = nn.Embedding.from_pretrained(weight, freeze=False)
    cols, dim = shard.shape[1], token_table.shape[1]
    padded = torch.zeros((*upstream.shape[:-1], cols * num_shards), dtype=upstream.dtype)
    padded[..., :dim] = upstream
    embedding(ids).backward(padded[..., rank * cols : (rank + 1) * cols])  # its own columns
    return embedding.weight, lambda t: _gathered(t, num_shards, 1)[:, :dim]


def _dtensor_backward(rank, num_shards, token_table, ids, upstream):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (num_shards,))
    weight = torch_backend._as_tensor(token_table).clone()
    embedding = nn.Embedding.from_pretrained(weight, freeze=False)
    plan = RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
    parallelize_module(embedding, mesh, plan)
    # An op on DTensor's unfinished result waits for its collective and keeps the graph;
    # d/dx of sum(x * upstream) is upstream exactly, so the gradient is backward(upstream)'s.
    (embedding(ids) * upstream).sum().backward()
    # a DTensor split by rows, its shards gathered by full_tensor
    return embedding.weight, lambda t: _waited(t.full_tensor())


_BACKWARDS = {"rows": _rows_backward, "columns": _columns_backward, "dtensor": _dtensor_backward}


def _gradient_and_step(strategy, rank, num_shards, token_table, ids, upstream):
    """The gathered token gradient, and the gathered table after one Adam step (ADAM) of each
    rank on its own shard."""
    weight, gather = _BACKWARDS[strategy](rank, num_shards, token_table, ids, upstream)
    gradient = gather(weight.grad)
    torch.optim.Adam([weight], **ADAM).step()
    return gradient, gather(weight.detach())


if __name__ == "__main__":
    _launch(sys.argv[1:])
