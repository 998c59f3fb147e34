"""The sharded lookup at the gpt2 shape against the number of shards, and the memory and
traffic of the two strategies on paper for LLaMA-3's and Gemma's tables.

Measured: GPT-2's table (50257 x 768, float32), B 8, T 128 (1024 tokens a call), for N in
{1, 2, 4}: JAX in one process over N CPU devices (rows, columns, compiler) and torch in N
processes (rows, columns, dtensor). Reported per strategy: the median time per call and the
token table's bytes per device. On a 2-core machine N devices or processes share the same two
cores and the same memory: expect no speed-up; the point is memory per device and correctness
(the results are checked bit for bit in tests/test_sharding.py, not here).

JAX: each N's strategies are timed in interleaved rounds (a batch of calls per sample, ending
in ``block_until_ready``). torch: rank 0's time for each of 25 calls, every rank starting
each call after a barrier; the median.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

import numpy as np

import backends
import benchmarks
from embedding_parity import outputs, scratch
from embedding_parity.drawing.table import text_table
from embedding_parity.sharding import reference

VOCAB, DIM, MAX_SEQ_LEN, BATCH, LENGTH = 50257, 768, 1024, 8, 128
# name: (vocab_size, dim, bytes per element); bfloat16 weights
MODELS = {"LLaMA-3 8B": (128256, 4096, 2), "Gemma 7B": (256000, 3072, 2)}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def problem():
    token_table, position_table = backends.shared_weights(VOCAB, DIM, MAX_SEQ_LEN, seed=0)
    ids = np.random.default_rng(1).integers(0, VOCAB, (BATCH, LENGTH))
    return token_table, position_table, ids, 0


def per_device(strategy: str, vocab_size: int, dim: int, num_shards: int, itemsize: int) -> int:
    """The token table's bytes on each device."""
    if strategy == "columns":
        return vocab_size * reference.per_shard(dim, num_shards) * itemsize
    return reference.per_shard(vocab_size, num_shards) * dim * itemsize


def moved(strategy: str, tokens: int, dim: int, num_shards: int, itemsize: int) -> int:
    """Bytes each device sends per call with a ring collective: an all-reduce of the
    (tokens, dim) result sends 2 (N - 1) / N of it; an all-gather (N - 1) / N."""
    result = tokens * dim * itemsize
    share = 2 if strategy == "rows" else 1
    return share * (num_shards - 1) * result // num_shards


def on_paper(tokens: int = 8 * 2048) -> list[dict]:
    rows = []
    for model, (vocab_size, dim, itemsize) in MODELS.items():
        for num_shards in (8, 64):
            for strategy in ("rows", "columns"):
                rows.append(
                    {
                        "model": model,
                        "shards": num_shards,
                        "strategy": strategy,
                        "table_bytes": vocab_size * dim * itemsize,
                        "bytes_per_device": per_device(
                            strategy, vocab_size, dim, num_shards, itemsize
                        ),
                        "tokens_per_call": tokens,
                        "bytes_sent_per_device_per_call": moved(
                            strategy, tokens, dim, num_shards, itemsize
                        ),
                    }
                )
    return rows


def jax_worker(shards, rounds: int) -> list[dict]:
    """In a process with max(shards) CPU devices: every N and strategy, interleaved."""
    from embedding_parity.sharding import jax_shards

    token_table, position_table, ids, start = problem()
    layers = {
        (n, s): jax_shards.ShardedEmbedding(token_table, position_table, num_shards=n, strategy=s)
        for n in shards
        for s in jax_shards.STRATEGIES
    }
    for layer in layers.values():
        for _ in range(3):
            layer(ids, start).block_until_ready()
    seconds = {key: [] for key in layers}
    for _ in range(rounds):
        for key, layer in layers.items():
            began = time.perf_counter()
            for _ in range(5):
                layer(ids, start).block_until_ready()
            seconds[key].append((time.perf_counter() - began) / 5)
    return [
        {
            "backend": "jax",
            "strategy": s,
            "shards": n,
            "median_ms": float(np.median(seconds[n, s])) * 1e3,
            "bytes_per_device": layers[n, s].bytes_per_device(),
        }
        for (n, s) in layers
    ]


def torch_records(shards) -> list[dict]:
    from embedding_parity.sharding import torch_shards

    case = problem()
    records = []
    for n in shards:
        for s in torch_shards.STRATEGIES:
            (seconds,) = torch_shards.time_lookup([case], num_shards=n, strategy=s)
            records.append(
                {
                    "backend": "torch",
                    "strategy": s,
                    "shards": n,
                    "median_ms": float(np.median(seconds)) * 1e3,
                    "bytes_per_device": per_device(s, VOCAB, DIM, n, 4),
                }
            )
    return records


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sharding", description=__doc__)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=9, help="JAX rounds (default: 9)")
    parser.add_argument("--json", default="bench-sharding.json", help="default: %(default)s")
    parser.add_argument("--jax-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jax_worker:
        print(json.dumps(jax_worker(args.shards, args.rounds)))
        return 0
    records = []
    if "jax" in backends.names():
        env = {
            **os.environ,
            "XLA_FLAGS": f"--xla_force_host_platform_device_count={max(args.shards)}",
            "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
        }
        done = subprocess.run(
            [
                *scratch.PYTHON,
                "-m",
                "benchmarks.sharding",
                "--jax-worker",
                "--rounds",
                str(args.rounds),
                "--shards",
                *map(str, args.shards),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=True,
        )
        records += json.loads(done.stdout.strip().splitlines()[-1])
    if "torch" in backends.names():
        records += torch_records(args.shards)
    rows = [("backend", "strategy", "shards", "median ms", "MB/device")]
    rows += [
        (
            r["backend"],
            r["strategy"],
            str(r["shards"]),
            f"{r['median_ms']:.3g}",
            f"{r['bytes_per_device'] / 1e6:.3g}",
        )
        for r in records
    ]
    print(
        f"gpt2 table {VOCAB} x {DIM} float32 ({VOCAB * DIM * 4 / 1e6:.0f} MB), "
        f"B {BATCH} x T {LENGTH} a call"
    )
    print(text_table(rows, right_from=2))
    paper = on_paper()
    rows = [("model", "shards", "strategy", "GB/device", "MB sent/device/call")]
    rows += [
        (
            p["model"],
            str(p["shards"]),
            p["strategy"],
            f"{p['bytes_per_device'] / 1e9:.3g}",
            f"{p['bytes_sent_per_device_per_call'] / 1e6:.3g}",
        )
        for p in paper
    ]
    print(
        f"\non paper: bfloat16 tables, {paper[0]['tokens_per_call']} tokens a call, ring "
        "collectives"
    )
    print(text_table(rows, right_from=3))
    with outputs.replacing(args.json, "w") as out:
        json.dump(
            {
                "shape": {"vocab_size": VOCAB, "dim": DIM, "batch": BATCH, "length": LENGTH},
                "records": records,
                "on_paper": paper,
            },
            out,
            indent=1,
        )
    print(f"records: {os.path.abspath(args.json)}")
    return 0


if __name__ == "__main__":
    benchmarks.run(main)
