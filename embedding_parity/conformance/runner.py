"""Run a kind's battery on a target in a worker process, each case under a time limit, and
judge every result: the report of one target.

A case that hangs or kills the worker is marked (timed out, died) and a fresh worker takes the
next case, so one bad case never loses the run. Results travel as .npy files in one private
temporary folder, removed on every exit path."""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from embedding_parity import scratch
from embedding_parity.cli import UsageError
from embedding_parity.conformance.kinds import KINDS, Case, Outcome, Verdict

ROOT = str(Path(__file__).resolve().parents[2])  # holds backends/ and embedding_parity/
IMPORT_SECONDS = 180  # the target's own import (transformers takes seconds) and the frameworks'
MARK = {"conforms": "ok", "differs": "NO", "rejected": "--", "failed": "FAIL"}


@dataclass
class CheckResult:
    check: str
    status: str  # conforms | differs | rejected | failed
    detail: str
    cases: list[dict] = field(default_factory=list)
    phase: dict | None = None


@dataclass
class Report:
    target: str
    kind: str
    framework: str
    why: str
    checks: list[CheckResult]
    seconds: float
    contract: str = ""

    @property
    def conforms(self) -> bool:
        """Every check conforms or was rejected (a dtype refused is not a wrong answer)."""
        return any(c.status == "conforms" for c in self.checks) and all(
            c.status in ("conforms", "rejected") for c in self.checks
        )

    def lines(self) -> list[str]:
        width = max(len(c.check) for c in self.checks)
        lines = [
            f"check {self.target} as {self.kind} ({self.framework}, {self.why})",
            f"contract: {self.contract or KINDS[self.kind].contract}",
        ]
        lines += [f"  {MARK[c.status]:<4} {c.check:<{width}}  {c.detail}" for c in self.checks]
        counts = {s: sum(c.status == s for c in self.checks) for s in MARK}
        summary = f"{counts['conforms']} of {len(self.checks)} checks conform"
        if len(self.checks) == 1:
            summary = f"{counts['conforms']} of 1 check conforms"
        summary += "".join(
            f", {counts[s]} {word if counts[s] > 1 else s}"
            for s, word in (("differs", "differ"), ("failed", "failed"), ("rejected", "rejected"))
            if counts[s]
        )
        verdict = "CONFORMS" if self.conforms else "DIFFERS"
        return [*lines, f"{verdict}: {summary} ({self.seconds:.1f} s)"]

    def record(self) -> dict:
        """Everything, JSON-ready: an infinite or NaN error as the string "inf" or "nan"."""
        return _finite({**asdict(self), "conforms": self.conforms})


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def run(
    target: str,
    kind: str,
    *,
    framework: str | None = None,
    options: dict | None = None,
    env: dict | None = None,
    timeout: float = 60.0,
    only: str | tuple[str, ...] | None = None,
    worker: Worker | None = None,
) -> Report:
    """The report of ``target`` against ``kind``'s battery. ``only``: the checks whose name
    starts with it (or with one of them); ``worker``: a Worker to reuse (its env, not ``env``), else a fresh one.
    UsageError when the target cannot be imported or called."""
    began = time.monotonic()
    chosen = KINDS[kind]
    cases = [c for c in chosen.cases(options or {}) if only is None or c.check.startswith(only)]
    if not cases:
        names = ", ".join(dict.fromkeys(c.check for c in chosen.cases(options or {})))
        raise UsageError(f"--only {only!r} matches no check of {kind}: {names}")
    with contextlib.ExitStack() as stack:
        if worker is None:
            worker = stack.enter_context(Worker(env or {}))
        worker.load(target, kind, framework)
        verdicts = [(case, chosen.judge(case, worker.ask(case, timeout))) for case in cases]
    checks = _checks(verdicts)
    seconds = time.monotonic() - began
    contract = chosen.describe(options or {})
    return Report(target, kind, worker.framework, worker.why, checks, seconds, contract)


def _checks(verdicts: list[tuple[Case, Verdict]]) -> list[CheckResult]:
    """One result per check: the first difference or failure, else what every case shares."""
    grouped: dict[str, list[tuple[Case, Verdict]]] = {}
    for case, verdict in verdicts:
        grouped.setdefault(case.check, []).append((case, verdict))
    results = []
    for check, pairs in grouped.items():
        cases = [
            {
                "label": c.label,
                "status": v.status,
                "detail": v.detail,
                "ulps": v.ulps,
                "ratio": v.ratio,  # the largest error over its bound (rope, sinusoidal)
            }
            for c, v in pairs
        ]
        phases = [v.phase for _, v in pairs if v.phase]
        phase = max(phases, key=lambda p: max(p["positions"]), default=None)
        statuses = {v.status for _, v in pairs}
        if statuses == {"conforms", "rejected"}:  # refused some cases of a dtype, not the dtype
            case, verdict = next((c, v) for c, v in pairs if v.status == "rejected")
            detail = f"{case.label}: raises on a valid input ({verdict.detail})"
            results.append(CheckResult(check, "differs", detail, cases, phase))
            continue
        for status in ("differs", "failed"):
            first = next(((c, v) for c, v in pairs if v.status == status), None)
            if first:
                results.append(
                    CheckResult(check, status, f"{first[0].label}: {first[1].detail}", cases, phase)
                )
                break
        else:
            status = "rejected" if statuses == {"rejected"} else "conforms"
            shown = [v for _, v in pairs if v.status == status]
            worst = max(shown, key=lambda v: v.ulps or 0.0)
            more = f" ({len(pairs)} cases)" if len(pairs) > 1 else ""
            results.append(CheckResult(check, status, worst.detail + more, cases, phase))
    return results


class Worker:
    """A worker process, its targets loaded one after another; restarted (with the current
    target) after a case that hangs or kills it. Its files, and the caches of the libraries
    it imports (Keras writes ~/.keras on import), live in one private temporary folder,
    removed when it closes: use it as a context manager."""

    def __init__(self, env: dict):
        self.request = None
        self.folder = tempfile.mkdtemp(prefix="embedding-parity-check-")
        self.env = {
            **os.environ,
            **scratch.caches(self.folder),
            **env,
            "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
        }
        self.started = 0
        self.process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def load(self, target: str, kind: str, framework: str | None) -> None:
        """Make ``target`` the one the next cases call; UsageError if it cannot be had."""
        self.request = {"target": target, "kind": kind, "framework": framework}
        if self.process is None:
            self._start()
        else:
            self._send_request()

    def _start(self) -> None:
        self.started += 1
        log = open(os.path.join(self.folder, f"worker{self.started}.log"), "w+")  # noqa: SIM115
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "embedding_parity.conformance.worker", self.folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=self.env,
        )
        self.buffer = b""
        self._send_request()

    def _send_request(self) -> None:
        try:
            reply, why = self._exchange(self.request, IMPORT_SECONDS)
        except BaseException:  # Ctrl-C while the target imports: leave no worker behind
            self.close(kill=True)
            raise
        if reply is None:
            last = self._last_log_line()
            self.close(kill=True)
            raise UsageError(
                f"TARGET {self.request['target']!r}: the worker {why} while importing it{last}"
            )
        if "usage" in reply:
            self.close()
            raise UsageError(reply["usage"])
        self.framework, self.why = reply["framework"], reply["why"]

    def ask(self, case: Case, timeout: float) -> Outcome:
        reply, why = self._exchange(case.params, timeout)
        if reply is None:
            outcome = Outcome(failed=f"the call {why}{self._last_log_line()}")
            self.close(kill=True)
            self._start()
            return outcome
        if "raised" in reply:
            return Outcome(raised=reply["raised"])
        array = np.load(reply["path"], allow_pickle=False)
        os.remove(reply["path"])
        if reply["dtype"] == "bfloat16":
            array = array.view(ml_dtypes.bfloat16)
        return Outcome(array=array, changed=reply.get("changed", []))

    def _exchange(self, message: dict, timeout: float):
        """(reply, None), or (None, why): the worker died or did not answer in time."""
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            return None, f"died ({self._exit()})"
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, f"timed out after {timeout:g} s"
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    return None, f"died ({self._exit()})"
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line), None

    def _exit(self) -> str:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # its stdout closed, but it lingers
            self.process.kill()
            code = self.process.wait(timeout=10)
        return f"signal {-code}" if code < 0 else f"exit status {code}"

    def _last_log_line(self) -> str:
        self.log.flush()
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().splitlines() if line.strip()]
        return f": {lines[-1]}" if lines else ""

    def close(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
                self.process.kill()
                self.process.wait(timeout=10)
        self.process.stdout.close()
        self.log.close()
        self.process = None
