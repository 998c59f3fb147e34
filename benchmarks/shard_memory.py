"""Each torch rank's peak resident memory when the token table is read shard by shard from a
.safetensors file, at GPT-2's shape (50257 x 768, float32, 154 MB) for N = 1, 2 and 4 ranks.

No package ships GPT-2's table (only its tokenizer), so the table is a random one of that
shape, written once to a private temporary folder. Each rank opens the file and reads only its
rows (``safe_open(...).get_slice("token_table")[a:b]``) or columns; the lookup's result is
checked against the unsharded one. Reported per N and strategy: the bytes of the table each
rank read, each rank's peak resident memory, and the same ranks' peak with a four-row table of
the same width (the baseline: Python, torch, gloo), so that peak - baseline is the table's share.

    python -m benchmarks.shard_memory                 # about 20 s on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile

import numpy as np

import backends
import benchmarks
from embedding_parity import outputs
from embedding_parity.drawing.table import text_table
from embedding_parity.sharding import reference

SHAPE = (50257, 768)  # GPT-2's token table
COUNTS = (1, 2, 4)
STRATEGIES = ("rows", "columns")


def measure(counts=COUNTS, strategies=STRATEGIES, shape=SHAPE) -> list[dict]:
    from safetensors.numpy import save_file

    from embedding_parity.sharding import torch_shards

    folder = tempfile.mkdtemp(prefix="embedding-parity-bench-")
    try:
        token_table, position_table = backends.shared_weights(*shape, 16, seed=0)
        small = token_table[:4]  # four rows: a row a rank at N = 1, 2 and 4
        paths = {}
        for name, table in (("table", token_table), ("baseline", small)):
            paths[name] = os.path.join(folder, f"{name}.safetensors")
            save_file({"token_table": table}, paths[name])
        del small
        ids = np.array([[0, 1, shape[0] // 2, shape[0] - 1]])
        expected = token_table[ids] + position_table[:4]
        del token_table  # the parent keeps no copy while the ranks run
        records = []
        for count in counts:
            for strategy in strategies:
                measured = {}
                for name in ("table", "baseline"):
                    table = reference.TableFile.open(paths[name], "token_table")
                    case_ids = ids if name == "table" else np.zeros_like(ids)
                    [out], memory = torch_shards.embed_measured(
                        [(table, position_table, case_ids, 0)],
                        num_shards=count,
                        strategy=strategy,
                        timeout=300,
                    )
                    measured[name] = (out, memory)
                out, memory = measured["table"]
                if out.tobytes() != expected.tobytes():
                    raise AssertionError(f"{strategy} at N = {count} differs from one device")
                baseline = int(measured["baseline"][1][:, 0].max())
                records.append(
                    {
                        "ranks": count,
                        "strategy": strategy,
                        "read_per_rank": [int(b) for b in memory[:, 1]],
                        "peak_per_rank": [int(b) for b in memory[:, 0]],
                        "baseline_peak": baseline,
                        "table_bytes": int(np.prod(shape)) * 4,
                    }
                )
        return records
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(records: list[dict]) -> str:
    rows = [("N", "strategy", "read/rank MB", "peak/rank MB", "baseline MB", "table share MB")]
    for r in records:
        peak = max(r["peak_per_rank"])
        rows.append(
            (
                str(r["ranks"]),
                r["strategy"],
                f"{max(r['read_per_rank']) / 1e6:.1f}",
                f"{peak / 1e6:.0f}",
                f"{r['baseline_peak'] / 1e6:.0f}",
                f"{(peak - r['baseline_peak']) / 1e6:.0f}",
            )
        )
    return text_table(rows, right_from=2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shard_memory", description=__doc__)
    parser.add_argument("--json", default="bench-shard-memory.json", help="default: %(default)s")
    parser.add_argument("--quick", action="store_true", help="a small table (1000 x 768)")
    args = parser.parse_args(argv)
    shape = (1000, SHAPE[1]) if args.quick else SHAPE
    records = measure(shape=shape)
    print(f"token table {shape[0]} x {shape[1]} float32 ({np.prod(shape) * 4 / 1e6:.0f} MB), "
          "read shard by shard from a .safetensors file; peak resident memory per torch rank")  # fmt: skip
    print(report(records))
    with outputs.replacing(args.json, "w") as out:
        json.dump({"shape": shape, "records": records}, out, indent=1)
    print(f"records: {os.path.abspath(args.json)}")
    return 0


if __name__ == "__main__":
    benchmarks.run(main)
