"""In which process a target is called: a ``Worker`` (a process of its own, each case under
a time limit, restarted after a case that hangs or kills it) or ``InProcess`` (this one, as
the worker would call it). Both answer ``ask(case, ...)`` with the case's ``Outcome``.

Results travel as .npy files in the worker's private folder, removed on every exit path. The
target runs in the worker's process, where it can write on the worker's descriptors and into
that folder: so a Worker believes only answer lines signed with the key it gave the worker
at its start, and only result files whose bytes have the digest such an answer names
(``worker``'s docstring); anything else on its answer channel is named a forged answer."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import inspect
import io
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import types
from pathlib import Path

import ml_dtypes
import numpy as np

from embedding_parity import scratch
from embedding_parity.conformance import frameworks, paths, worker
from embedding_parity.conformance.adapters import sources  # names only: imports no framework
from embedding_parity.conformance.kinds import KINDS, Case, Outcome
from embedding_parity.conformance.report import PRIVATE, shown
from embedding_parity.usage import UsageError

ROOT = str(Path(__file__).resolve().parents[2])  # holds backends/ and embedding_parity/
IMPORT_SECONDS = 180  # the target's own import (transformers takes seconds) and the frameworks'
POLL_SECONDS = 0.1  # where no pidfd tells that the worker exited, how often to look
LOG_BYTES = 1 << 16  # the tail of a worker's printing kept for its last line
LARGEST_ITEM, NPY_HEADER = 32, 4096  # bytes of a complex256 element, of a .npy header at most
KEY_BYTES = 32  # of the key each worker signs its answers with (HMAC-SHA256's block is 64)
# The longest answer line the kit reads: a line grows only with what a target raised (its
# message's first line, in JSON's escapes); the longest the tests meet, hostile.py's
# raises_escapes, is 3,000,142 bytes. Ten times that leaves room for a long message of
# escaped characters and bounds what a target flooding the channel makes the kit hold.
ANSWER_LINE_BYTES = 32 * 2**20


class InProcess:
    """The target called in this process, as the worker calls it (the same conversions, the
    same reading of what it returns), its params through JSON as they reach a worker. What
    it gives up: no time limit, and a hang, a crash or a change to the process's state
    (NumPy's error state, JAX's flags, a signal handler) is the caller's."""

    def __init__(self, function, kind: str, framework: str | None, options: dict):
        self.function, self.worker, self.kind = function, worker, KINDS[kind]
        self.along = {}  # path -> the function as production calls it along that path
        self.framework, self.why = framework, "given"
        if framework is None:  # as the worker tells it: a probe call, else the imports
            module = inspect.getmodule(function) or inspect.getmodule(type(function))
            name = getattr(module, "__name__", "its module")
            module = module or types.ModuleType(name)
            probe = frameworks.probe_case(self.kind, options)
            if probe is None:
                self.framework, self.why = frameworks.detect(module, function, name)
                return
            arguments = self.kind.arguments(json.loads(json.dumps(probe)))
            self.framework, self.why = frameworks.probe(function, arguments, module, name)

    def ask(self, case: Case, elements: int, timeout: float, through=None) -> Outcome:
        params = json.loads(json.dumps(case.params))
        if through and through not in self.along:
            self.along[through] = paths.along(through, self.function)
        function = self.along[through] if through else self.function
        reply = self.worker.ask(
            self.kind, params, function, self.framework, elements, log=False, along=through
        )
        if "refused" in reply:
            return Outcome(refused=shown(reply["refused"]))
        if "raised" in reply:
            return Outcome(raised=shown(reply["raised"]))
        if "returned" in reply:
            return Outcome(returned=shown(reply["returned"]))
        return Outcome(array=reply["array"], changed=reply["changed"])


PRIVATE_FOLDER = "{private}"  # in a Worker's env: its private folder


class Worker:
    """A worker process, its targets loaded one after another; restarted (with the current
    target) after a case that hangs or kills it. Its files, the caches of the libraries it
    imports (Keras writes ~/.keras on import) and its TMPDIR live in one private folder,
    removed when it closes: use it as a context manager.

    The worker is a session (and process group) of its own, the group killed when it closes,
    so that nothing a target starts (a subprocess, a fork) outlives the check (unless it
    makes a group of its own); the worker dies with this process too
    (PR_SET_PDEATHSIG). What it prints is read as bytes into a bounded tail (``Tail``)."""

    def __init__(self, env: dict):
        self.request = None
        self.begun = None  # the request begin() sent, whose answer no one has read yet
        self.folder = tempfile.mkdtemp(prefix="embedding-parity-check-")
        os.mkdir(os.path.join(self.folder, "tmp"))
        self.env = {
            **os.environ,
            **scratch.caches(self.folder),
            # the target's temporary files too (Inductor's precompiled headers, 150 MB, go to
            # $TMPDIR/torchinductor_$USER whatever its cache variable says)
            "TMPDIR": os.path.join(self.folder, "tmp"),
            # a value may name the private folder: {"HOME": "{private}/home"} for a library
            # that writes under ~ whatever its cache variables say (Paddle's ~/.cache/paddle)
            **{name: value.replace(PRIVATE_FOLDER, self.folder) for name, value in env.items()},
            "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
        }
        self.process = None
        self.asked = 0  # the id of the last request

    def __enter__(self):
        return self

    def __exit__(self, kind=None, *exc):
        self.close(kill=kind is not None)  # on the way out of an error: no grace period
        shutil.rmtree(self.folder, ignore_errors=True)

    def load(
        self, target: str, kind: str, framework: str | None, options=None, timeout=60.0
    ) -> None:
        """Make ``target`` the one the next cases call (a source of ``adapters.sources`` built
        at ``options``), its framework, where not given, told by calling it on one valid case
        (``frameworks.probe``) under ``timeout``; UsageError if it cannot be had."""
        options = options or {}
        self.request = _request(target, kind, framework, options)
        begun, self.begun = self.begun, None
        if self.process is None:
            self._start()
        elif begun is None:
            self._send_request()
        elif begun == self.request:  # the import begin() asked for: waited for, not asked again
            self._send_request(sent=True)
        else:  # begun, never loaded: its answer unread (a refusal, after which the worker exits)
            self.close(kill=True)
            self._start()
        if framework is None and target not in sources.SOURCES:
            probe = frameworks.probe_case(KINDS[kind], options)
            if probe is not None:
                self._probe(probe, timeout)

    def _probe(self, params: dict, timeout: float) -> None:
        """Tell the target's framework from a call on ``params``; where that call hangs or
        kills the worker, its imports tell (the cases then show what it does)."""
        reply, why = self._exchange({"target": self.request["target"], "probe": params}, timeout)
        if reply is None:
            last = self.log.last_line()
            self.close(kill=True)
            self._start()
            self.why = f"{self.why} (the probe call {why}{last})"
        elif "usage" in reply:
            self.close()
            raise UsageError(shown(reply["usage"]))
        else:
            self.framework, self.why = reply["framework"], shown(reply["why"])
        # a worker restarted after a case that hangs or crashes keeps what the probe told
        self.request |= {"framework": self.framework, "why": self.why}

    def begin(self, target: str, kind: str, framework: str | None, options=None) -> None:
        """Start the worker importing ``target`` without waiting for it: a matrix starts its
        workers at once, so that their libraries' imports overlap. The ``load`` of the same
        request that follows waits for that import's answer; another's asks anew."""
        if self.process is not None:
            return
        self.request = _request(target, kind, framework, options or {})
        self._spawn()
        if self._send(self.request) is None:
            self.begun = self.request
        else:
            self.close(
                kill=True
            )  # died at once: the load that follows starts it again and says why

    def _start(self) -> None:
        self._spawn()
        self._send_request()

    def _spawn(self) -> None:
        self.process = subprocess.Popen(
            [
                *scratch.PYTHON,
                "-m",
                "embedding_parity.conformance.worker",
                self.folder,
                str(os.getpid()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            start_new_session=True,
        )
        self.exited = _exit_watch(self.process.pid)
        self.buffer, self.scanned = bytearray(), 0  # scanned: its bytes known to hold no newline
        # stdin's first line, which the worker reads before it imports a target; a fresh key
        # for each worker process (a restarted one included)
        self.key = secrets.token_bytes(KEY_BYTES)
        with contextlib.suppress(BrokenPipeError):  # died at once: the next request says why
            self.process.stdin.write(self.key.hex().encode() + b"\n")
            self.process.stdin.flush()

    def _send_request(self, sent: bool = False) -> None:
        """Ask the worker to import the request's target (``sent``: begin() has asked) and
        take its answer: the framework, or UsageError why not."""
        try:
            if sent:
                reply, why = self._receive(IMPORT_SECONDS)
            else:
                reply, why = self._exchange(self.request, IMPORT_SECONDS)
        except BaseException:  # Ctrl-C while the target imports: leave no worker behind
            self.close(kill=True)
            raise
        if reply is None:
            last = self.log.last_line()
            self.close(kill=True)
            raise UsageError(
                f"TARGET {self.request['target']!r}: while importing it, the worker {why}{last}"
            )
        if "usage" in reply:
            self.close()
            raise UsageError(shown(reply["usage"]))
        self.framework, self.why = reply["framework"], shown(reply["why"])

    def ask(self, case: Case, elements: int, timeout: float, through=None) -> Outcome:
        """What the target did with ``case``, a result of at most ``elements`` elements,
        called along the production path ``through`` (``paths``) where one is given."""
        message = {"case": case.params, "elements": elements}
        reply, why = self._exchange(message | ({"through": through} if through else {}), timeout)
        if reply is None:
            outcome = Outcome(failed=f"the call {why}{self.log.last_line()}")
            self.close(kill=True)
            self._start()
            return outcome
        if "refused" in reply:
            return Outcome(refused=shown(str(reply["refused"])))
        if "raised" in reply:  # a private folder named as such: a report reads the same twice
            return Outcome(raised=shown(PRIVATE.sub("<private folder>", str(reply["raised"]))))
        if "returned" in reply:
            return Outcome(returned=shown(reply["returned"]))
        # the file of this request's id in the kit's folder: no answer can make the kit read,
        # or remove, another file; its bytes read once, believed only with the signed digest
        path = os.path.join(self.folder, f"result{self.asked}.npy")
        try:
            with open(path, "rb") as file:  # the worker writes no more than this
                data = file.read(LARGEST_ITEM * elements + NPY_HEADER + 1)
            if hashlib.sha256(data).hexdigest() != reply["sha256"]:
                return Outcome(failed=FORGED_FILE)
            array = np.load(io.BytesIO(data), allow_pickle=False)
        except OSError as error:  # removed, or made unreadable, since the worker wrote it
            return Outcome(failed=shown(f"{FORGED_FILE} ({error})"))
        finally:
            with contextlib.suppress(OSError):
                os.remove(path)
        if reply["dtype"] == "bfloat16":
            array = array.view(ml_dtypes.bfloat16)
        return Outcome(array=array, changed=reply["changed"])

    def _exchange(self, message: dict, timeout: float):
        """(reply, None), or (None, why): the worker died or did not answer in time. Its
        printing is drained meanwhile, so that it never blocks on a full pipe; its last
        line, shown when the worker fails, is from this request."""
        why = self._send(message)
        if why is not None:
            return None, why
        return self._receive(timeout)

    def _receive(self, timeout: float):
        """The answer to the last request sent, as ``_exchange`` says."""
        deadline = time.monotonic() + timeout
        out, err = self.process.stdout.fileno(), self.process.stderr.fileno()
        watched = [out, err, *self.exited]
        while True:
            end = self.buffer.find(b"\n", self.scanned)  # each byte searched once
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                self.scanned = 0
                reply = self._signed(line)
                if reply is None:
                    return None, forged(line)
                return reply, None
            self.scanned = len(self.buffer)
            if self.scanned > ANSWER_LINE_BYTES:
                return None, FLOOD
            left = deadline - time.monotonic()
            if left <= 0:
                return None, f"timed out after {timeout:g} s"
            ready, _, _ = select.select(watched, [], [], min(left, POLL_SECONDS))
            if err in ready:
                printed = os.read(err, 65536)
                self.log.add(printed)
                if not printed:  # its stderr closed (by the target, say): no more to read
                    watched.remove(err)
            if out in ready:
                chunk = os.read(out, 65536)
                if not chunk:
                    return None, self._died(err)
                self.buffer += chunk
            elif not self._running():
                # dead, though a process it forked may hold its pipes open: what it wrote
                # before dying is read first
                ready, _, _ = select.select([out], [], [], 0)
                if not ready or b"\n" not in (chunk := os.read(out, 65536)):
                    return None, self._died(err)
                self.buffer += chunk

    def _signed(self, line: bytes) -> dict | None:
        """The answer ``line`` carries where the worker signed it, for the request last sent;
        else None. (A worker that timed out or died is restarted with a new key: no answer
        to an earlier request arrives, and none can be replayed.)"""
        signature, _, text = line.partition(b" ")
        if not hmac.compare_digest(signature, worker.sign(self.key, text).encode()):
            return None
        reply = json.loads(text)
        return reply if reply["id"] == self.asked else None

    def _send(self, message: dict) -> str | None:
        """Write ``message`` as the next request: None, or why not (the worker is gone)."""
        self.asked += 1
        self.log = Tail()
        try:
            self.process.stdin.write((json.dumps({"id": self.asked, **message}) + "\n").encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            return f"died ({self._exit()})"
        return None

    def _died(self, err: int) -> str:
        """Why the worker is gone, its last words read first: what it printed before dying
        may still sit in the pipe (a pipe's worth, or what a child that holds it adds within
        a second)."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and select.select([err], [], [], 0)[0]:
            printed = os.read(err, 65536)
            if not printed:
                break
            self.log.add(printed)
        return f"died ({self._exit()})"

    def _running(self) -> bool:
        """Whether the worker has not exited (not reaping it where a pidfd tells)."""
        if self.exited:
            return not select.select(self.exited, [], [], 0)[0]
        return self.process.poll() is None

    def _exit(self) -> str:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # its stdout closed, but it lingers
            self._kill_session()
            code = self.process.wait(timeout=10)
        return f"signal {-code}" if code < 0 else f"exit status {code}"

    def _kill_session(self) -> None:
        """SIGKILL the worker and everything in its process group (what the target started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def close(self, kill: bool = False) -> None:
        """Stop the worker (at once with ``kill``, else given 5 s to finish) and everything
        in its group, with SIGINT, SIGTERM and SIGHUP blocked in this thread meanwhile (a
        library's own threads may still take one: then a stop signal ends the cleanup)."""
        if self.process is None:
            return
        held = {signal.SIGINT, *scratch.STOP_SIGNALS}
        blocked = threading.current_thread() is threading.main_thread()
        if blocked:
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            if not kill and self._running():
                with contextlib.suppress(BrokenPipeError, OSError):
                    self.process.stdin.close()  # the worker's cue to finish
                _wait_exited(self.process, self.exited, 5)
            self._kill_session()  # where it can, before the worker is reaped: its group's id stays its own
            self.process.wait(timeout=10)
            for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
                with contextlib.suppress(OSError):
                    pipe.close()
            for fd in self.exited:
                os.close(fd)
            self.process = None
        finally:
            if blocked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


FLOOD = (
    f"wrote more than {ANSWER_LINE_BYTES // 2**20} MiB without a newline on the kit's answer "
    "channel: a flood of forged bytes, never believed"
)
FORGED_FILE = (
    "the result file was changed after the worker wrote it (its bytes are not those the "
    "worker's signed answer names): a forged result, never believed"
)


def forged(line: bytes) -> str:
    """Why ``line``, on the answer channel where the worker signed no answer to the request
    with it, is refused (after "the call" or "the worker"): only the target can have
    written it."""
    return (
        f"wrote a forged answer on the kit's answer channel, never believed: "
        f"{shown(line.decode(errors='replace'))}"
    )


def _request(target: str, kind: str, framework: str | None, options: dict) -> dict:
    """What a worker is asked to load: the target, its kind and framework, the kind's options."""
    return {"target": target, "kind": kind, "framework": framework, "options": options}


def _exit_watch(pid: int) -> list[int]:
    """[a file descriptor readable once ``pid`` has exited] where Linux gives one (a pidfd),
    else []: the waits then poll."""
    try:
        return [os.pidfd_open(pid)]
    except (AttributeError, OSError):
        return []


def _wait_exited(process, watch: list[int], seconds: float) -> None:
    """Wait up to ``seconds`` for ``process`` to exit, without reaping it where a pidfd
    lets (so that its group cannot be another's when it is killed)."""
    if watch:
        select.select(watch, [], [], seconds)
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=seconds)


class Tail:
    """The last LOG_BYTES bytes a worker printed (the rest dropped), decoded
    with replacement: a target can print anything, in any amount."""

    def __init__(self):
        self.data = b""

    def add(self, chunk: bytes) -> None:
        self.data = (self.data + chunk)[-LOG_BYTES:]

    def last_line(self) -> str:
        """ ": LINE", the last line printed, shown safely; "" if none."""
        lines = [line.strip() for line in self.data.decode(errors="replace").splitlines()]
        lines = [line for line in lines if line]
        return f": {shown(lines[-1])}" if lines else ""
