"""What the conformance kit costs where a port's tests run: the pytest plugin's import, and
an in-process check of one kind (every case, judged) after the framework is imported.

    python -m benchmarks.kit            # medians of 7 rounds, this machine

The targets: the suite's own backends (numpy, torch, jax) as callables, each framework
imported and warmed by one check before the timed ones. The issue's budgets: the plugin's
import under 0.1 s, a check under 5 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import backends
import benchmarks
from embedding_parity.drawing.table import text_table

ROUNDS = 7


def plugin_import() -> float:
    """Median seconds to import the plugin, from `python -X importtime` (its own and its
    imports' cumulative time, in a fresh interpreter each round)."""
    found = []
    for _ in range(ROUNDS):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import embedding_parity.pytest_plugin"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        line = next(x for x in out.splitlines() if x.endswith(" embedding_parity.pytest_plugin"))
        found.append(int(line.split("|")[1]) / 1e6)  # cumulative microseconds
    return statistics.median(found)


def targets(name: str) -> dict:
    """lookup and rope of backend ``name``, as the kit calls them."""
    chosen = backends.get(name)

    def lookup(token_table, position_table, token_ids, start):
        layer = chosen.TokenPositionEmbedding(
            chosen.to_numpy(token_table), chosen.to_numpy(position_table)
        )
        return layer(token_ids, start=start)

    def rope(x, positions):
        return chosen.apply_rope(x, positions)

    return {"lookup": lookup, "rope": rope}


def check_seconds(name: str, kind: str, function) -> tuple[float, bool]:
    """(median seconds of check(function, kind), whether it conformed)."""
    from embedding_parity.conformance import check

    report = check(function, kind, framework=name)  # imports and warms the framework
    times = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        check(function, kind, framework=name)
        times.append(time.perf_counter() - began)
    return statistics.median(times), report.conforms


def main() -> int:
    rows = [("what", "median", "conforms")]
    rows.append(("import embedding_parity.pytest_plugin", f"{plugin_import() * 1e3:.1f} ms", ""))
    for name in backends.names():
        for kind, function in targets(name).items():
            seconds, conforms = check_seconds(name, kind, function)
            rows.append((f"check {name} {kind}", f"{seconds:.3f} s", "yes" if conforms else "NO"))
    print(text_table(rows))
    print(f"medians of {ROUNDS} rounds; the framework imported before timing")
    return 0


if __name__ == "__main__":
    benchmarks.run(main)
