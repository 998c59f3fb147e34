"""Split the token table N ways, by rows and by columns, and hold every result to one device's.

The lookup runs in NumPy (the reference, over a list of shards), in JAX (one process, N
devices: shard_map with psum or all_gather, and the compiler's own gather) and in torch (N
processes, gloo on 127.0.0.1, by hand and with DTensor), every result against the unsharded
layer, bit for bit. The table is the seed's random one (--vocab-size, --dim, --max-seq-len,
--seed) or a real one (--weights).

    compare.py shard --shards 4 --tokens 5 40 77 21
    compare.py shard --shards 8 --dim 64 --vocab-size 1000
    compare.py shard --shards 4 --weights minilm --tokens 101 2054 102

Exit status: 0 every sharded result is bit-identical to the unsharded layer, 1 one differs,
2 bad arguments or input, or a distributed run that failed.

JAX makes its N CPU devices only when it is imported (``XLA_FLAGS``), so ``run`` sets the
flag itself when JAX is not imported yet, and refuses clearly when it is, with too few.
"""

from __future__ import annotations

import os
import re
import sys

import numpy as np

import backends
from backends import pretrained, validation
from embedding_parity import outputs
from embedding_parity.jobs import command
from embedding_parity.results.shard import Row, Sharded
from embedding_parity.sharding import jax_processes, read_checkpoint_record, reference
from embedding_parity.sharding import launch as launching

COMMAND = "shard"
SEED = {"vocab_size": 100, "dim": 10, "max_seq_len": 16, "tokens": (5, 10, 7, 21)}
# Per backend: its strategies, and the collective each one runs.
STRATEGIES = {
    "numpy": {"rows": "sum over shards", "columns": "concatenate"},
    "jax": {"rows": "psum (all-reduce)", "columns": "all-gather", "compiler": None},
    "torch": {"rows": "all_reduce", "columns": "all_gather", "dtensor": "all-reduce (DTensor)"},
}


def prepare(names, num_shards, vocab_size: int = SEED["vocab_size"], dim: int = SEED["dim"]) -> int:
    """Check num_shards against the table (every shard must own a row and a column) and, with
    JAX among names, make JAX see that many devices. Call before JAX is imported."""
    num_shards = reference.check_shards(num_shards, dim, "columns")
    num_shards = reference.check_shards(num_shards, vocab_size, "rows")
    if "jax" in names:
        ensure_devices(num_shards)
    return num_shards


def ensure_devices(num_shards: int) -> None:
    """Make JAX see num_shards CPU devices: set XLA_FLAGS if JAX is not imported yet."""
    if "jax" not in sys.modules:
        flags = os.environ.get("XLA_FLAGS", "")
        flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags)
        os.environ["XLA_FLAGS"] = (
            f"{flags} --xla_force_host_platform_device_count={num_shards}".strip()
        )
        return
    import jax

    if jax.device_count() < num_shards:
        raise ValueError(
            f"JAX was imported with {jax.device_count()} devices, {num_shards} are needed: "
            f"run in a fresh process (XLA_FLAGS=--xla_force_host_platform_device_count="
            f"{num_shards})"
        )


def run(
    names,
    num_shards: int,
    *,
    tokens=None,
    batch: int | None = None,
    start: int = 0,
    dtype="float32",
    seed: int = 0,
    vocab_size: int = SEED["vocab_size"],
    dim: int = SEED["dim"],
    max_seq_len: int = SEED["max_seq_len"],
    tables: tuple | None = None,
    launch=None,
    timeout: float = 60.0,
    table_file=None,
) -> Sharded:
    """The tables of ``backends.shared_weights(vocab_size, dim, max_seq_len, seed=seed)``, or
    ``tables`` (token_table, position_table) cast to dtype, split num_shards ways, every
    strategy of every backend in names. tokens: the ids (default: the seed's 5 10 7 21);
    batch: B random sequences of their length instead (drawn with seed). launch: this
    process is one rank of a job that torchrun or jax.distributed started
    (``sharding.launch.detect``): its framework's rows come from that job's ranks, and
    num_shards is the job's size. table_file: the token table's ``reference.TableFile``
    (with tables from that file): the torch ranks read their own rows or columns from it.
    The token table in ``tables`` may be that TableFile itself: then no part of this run
    holds the whole table (NumPy's shards are read one at a time, the unsharded lookup
    reads the ids' rows)."""
    if tables is None:
        tables = backends.shared_weights(vocab_size, dim, max_seq_len, seed=seed, dtype=dtype)
    dtype = validation.resolve_dtype(dtype)
    token_table, position_table = (
        t if isinstance(t, reference.TableFile) else np.asarray(t).astype(dtype, copy=False)
        for t in tables
    )
    vocab_size = len(token_table)
    # as_host keeps ids beyond int64 as Python ints, for check_token_ids to name
    token_ids = validation.as_host(list(SEED["tokens"] if tokens is None else tokens))
    validation.check_token_ids(token_ids, vocab_size)
    if batch is not None:
        batch = validation.integer(batch, "--batch")
        if batch < 1:
            raise ValueError(f"--batch must be at least 1, got {batch}")
        rng = np.random.default_rng(seed)
        token_ids = rng.integers(0, vocab_size, (batch, len(token_ids)))
    token_ids, start = validation.check_call(
        token_ids, start, *map(len, (token_table, position_table))
    )
    if launch is None:
        num_shards = prepare(names, num_shards, *token_table.shape)
    else:
        num_shards = reference.check_shards(num_shards, token_table.shape[1], "columns")
        num_shards = reference.check_shards(num_shards, token_table.shape[0], "rows")
    if isinstance(token_table, reference.TableFile):  # the ids' rows alone
        rows = token_table.take(token_ids)
    else:
        rows = token_table[token_ids]
    unsharded = rows + position_table[start : start + token_ids.shape[-1]]
    done = Sharded(num_shards, token_ids, start, token_table, position_table, unsharded)
    case = (token_table, position_table, token_ids, start)
    if launch is not None and launch.rank != 0:
        names = [launch.framework]  # rank 0 alone reports: the others' part is the job's
    for name in names:
        launched = {}
        if launch is not None and name == launch.framework:
            launched = _launched(name, case, launch, timeout)
        elif name == "torch":  # every strategy in one start of the ranks
            launched = _torch_ranks(case, table_file, num_shards, timeout)
        for strategy, collective in STRATEGIES[name].items():
            memory = None
            if strategy in launched:
                output, collective, memory = launched[strategy]
                per_device = _per_device(strategy, token_table, num_shards)
            else:
                output, per_device, collective = _one(name, strategy, collective, num_shards, *case)
            difference = np.abs(output.astype(np.float64) - unsharded.astype(np.float64))
            done.rows.append(
                Row(
                    name,
                    strategy,
                    collective,
                    per_device,
                    output,
                    float(difference.max(initial=0.0)),
                    output.dtype == unsharded.dtype and output.tobytes() == unsharded.tobytes(),
                    memory,
                )
            )
    return done


def _per_device(strategy: str, token_table: np.ndarray, num_shards: int) -> int:
    """Bytes of the token table each shard holds (padded)."""
    vocab_size, dim = token_table.shape
    itemsize = token_table.dtype.itemsize
    if strategy == "columns":
        return vocab_size * reference.per_shard(dim, num_shards) * itemsize
    return reference.per_shard(vocab_size, num_shards) * dim * itemsize


def _launched(name, case, launch, timeout) -> dict:
    """{strategy: (output, collective, memory)} of the ranks or processes a launcher started
    (memory: torch ranks' (peak resident bytes, table bytes read) each, else None)."""
    if name == "torch":
        from embedding_parity.sharding import torch_shards

        done = torch_shards.embed_launched([case], STRATEGIES["torch"], launch, timeout=timeout)
        if not isinstance(case[0], reference.TableFile):  # read nothing from a file
            return {s: (out[0], STRATEGIES["torch"][s], None) for s, (out, _) in done.items()}
        return {s: (out[0], STRATEGIES["torch"][s], memory) for s, (out, memory) in done.items()}

    done = jax_processes.embed_launched([case], STRATEGIES["jax"], launch, timeout=timeout)
    return {s: (out[0], chosen or STRATEGIES["jax"][s], None) for s, (out, chosen) in done.items()}


def _torch_ranks(case, table_file, num_shards, timeout) -> dict:
    """{strategy: (output, collective, memory)} of every torch strategy, from one process
    group that this process starts (its ranks read their own part of a table file, if given;
    memory is reported only then, as the ranks' reads are what it shows)."""
    from embedding_parity.sharding import torch_shards

    cases = [case if table_file is None else (table_file, *case[1:])]
    done = torch_shards.embed_strategies(
        cases, num_shards=num_shards, strategies=STRATEGIES["torch"], timeout=timeout
    )
    return {
        strategy: (
            outputs[0],
            STRATEGIES["torch"][strategy],
            None if table_file is None else memory,
        )
        for strategy, (outputs, memory) in done.items()
    }


def _one(name, strategy, collective, num_shards, token_table, position_table, token_ids, start):
    """(output, token-table bytes per device, collective) of one NumPy or JAX strategy (torch's
    ranks run every strategy in one start: ``_torch_ranks``)."""
    per_device = _per_device(strategy, token_table, num_shards)
    if name == "numpy":
        output = reference.embed(
            token_table, position_table, token_ids, start, num_shards=num_shards, strategy=strategy
        )
        return output, per_device, collective
    from embedding_parity.sharding import jax_shards

    layer = jax_shards.ShardedEmbedding(
        token_table, position_table, num_shards=num_shards, strategy=strategy
    )
    if collective is None:  # the compiler's choice, read from the compiled program
        collective = "compiler: " + ", ".join(jax_shards.collectives(layer, token_ids, start))
    return np.asarray(layer(token_ids, start)), layer.bytes_per_device(), collective


# --- the command ---------------------------------------------------------------------------


def add_arguments(parser) -> None:
    add = parser.add_argument
    add(
        "--shards",
        type=int,
        help="how many shards: each must own a row and a column, so at most --dim; a count "
        "that would leave a shard empty is refused with the ones that work (default: 4, or "
        "the size of the job when torchrun or jax.distributed started it)",
    )
    add("--tokens", type=int, nargs="+", metavar="ID", help="ids (default: 5 10 7 21)")
    add("--batch", type=int, help="B random sequences as long as --tokens, instead of it")
    add("--start", type=int, default=0, help="first position (default: 0)")
    add(
        "--vocab-size",
        type=command.at_least(1),
        help=f"rows of the random token table (default: {SEED['vocab_size']})",
    )
    add("--dim", type=command.at_least(1), help=f"its width (default: {SEED['dim']})")
    add(
        "--max-seq-len",
        type=command.at_least(1),
        help=f"rows of the position table (default: {SEED['max_seq_len']})",
    )
    add(
        "--seed",
        type=command.at_least(0),
        default=0,
        help="seed of the random tables and --batch (default: %(default)s)",
    )
    add(
        "--weights",
        metavar="minilm|smollm2|PATH",
        help="split a real token table instead: "
        "a packaged model or a .safetensors/.npz file with a position table (give --tokens)",
    )
    command.add_table_keys(parser)
    add("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    command.add_backends(parser)
    add("--save-arrays", metavar="PATH.npz", help="write reference and sum_<backend> arrays")
    add(
        "--save-checkpoint",
        metavar="DIR",
        help="write the token table as the shards hold it (by rows), with each framework's own "
        "engine: DIR/torch by torch.distributed.checkpoint, DIR/jax by Orbax (DIR must not exist)",
    )
    add(
        "--load-checkpoint",
        metavar="DIR",
        help="restore such a checkpoint onto --shards (any count) and check it is this run's "
        "token table, bit for bit",
    )
    add(
        "--timeout",
        type=command.seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long ranks wait for each other, at the rendezvous and in each collective; "
        "the torch ranks this command starts itself get that long for their whole run, once "
        "started (default: %(default)g)",
    )
    command.add_picture(parser, "shard.png")
    parser.set_defaults(run=main)


def main(args) -> int:
    """1 if a sharded result differs from the unsharded layer. Started by torchrun or
    jax.distributed (``sharding.launch``), every rank runs this; rank 0 reports."""
    try:
        launch = launching.detect()
    except launching.LaunchError as error:
        raise command.UsageError(str(error)) from None
    if launch is not None and launch.rank is None and "jax" not in (args.backends or []):
        launch = None  # a scheduler's task: a JAX rank only when asked for (--backends jax)
    if launch is not None and launch.framework == "jax" and jax_processes.CHILD not in os.environ:
        try:  # the job runs in a child that JAX may end; this process answers for it
            return jax_processes.supervise(args.argv, args.prog, launch, args.timeout)
        except RuntimeError as error:
            raise command.UsageError(f"a distributed run failed: {error}") from None
    if launch is not None:
        launch = _joined(args, launch)
    elif args.shards is None:
        args.shards = 4
    sizes = {k: getattr(args, k) for k in ("vocab_size", "dim", "max_seq_len")}
    tables = table_file = None
    if args.weights is not None:
        tables, table_file = _real_tables(args, sizes, launch)
    else:
        command.check_table_keys(args)
        sizes = {k: SEED[k] if v is None else v for k, v in sizes.items()}
    names = args.backends or backends.names()
    shape = tables[0].shape if tables is not None else (sizes["vocab_size"], sizes["dim"])
    _check_sizes(args, sizes, shape)
    _check_checkpoints(args, names, launch, shape)
    if launch is None:
        prepare(names, args.shards, *shape)  # before JAX is imported: it makes its devices then
    names = command.chosen_backends(names)
    command.check_picture(args.out)
    command.check_file("--save-arrays", args.save_arrays, ".npz")
    outputs.check_not_inputs(
        {"--out": args.out, "--save-arrays": args.save_arrays}, {"--weights": args.weights}
    )
    settings = {} if tables is not None else sizes
    try:
        done = run(
            names,
            args.shards,
            tokens=args.tokens,
            batch=args.batch,
            start=args.start,
            dtype=args.dtype,
            seed=args.seed,
            tables=tables,
            launch=launch,
            timeout=args.timeout,
            table_file=table_file,
            **settings,
        )
    except RuntimeError as error:  # a rank or process that failed: its own error, last line
        raise command.UsageError(
            f"a distributed run failed: {str(error).splitlines()[-1]}"
        ) from None
    if launch is None or launch.rank == 0:  # one report for the job
        print(launch.describe() if launch else _own_launch(names, done.num_shards))
        _report(args, done)
    try:
        restored_differ = _checkpoints(args, names, done) if launch is None else False
    except RuntimeError as error:  # the ranks that save or restore: one line naming the folder
        raise command.UsageError(f"a distributed run failed: {error}") from None
    return 1 if done.differing or restored_differ else 0


CHECKPOINTED = {"torch": "DCP", "jax": "Orbax"}  # the frameworks with a checkpoint engine here


def _check_checkpoints(args, names, launch, shape) -> None:
    """--save-checkpoint and --load-checkpoint, before any work: a load's vocabulary and dim
    against this run's table (``shape``)."""
    if not (args.save_checkpoint or args.load_checkpoint):
        return
    if launch is not None:
        raise command.UsageError("--save-checkpoint and --load-checkpoint run without a launcher")
    if not set(names) & set(CHECKPOINTED):
        raise command.UsageError("checkpoints are torch's (DCP) and JAX's (Orbax): --backends")
    if args.save_checkpoint and os.path.exists(args.save_checkpoint):
        raise command.UsageError(
            f"--save-checkpoint {args.save_checkpoint} exists: a checkpoint goes into a new folder"
        )
    if args.save_checkpoint:  # written beside itself and renamed: its folder must take it
        command.check_folder("--save-checkpoint", args.save_checkpoint)
    if args.load_checkpoint:
        found = [n for n in CHECKPOINTED if os.path.isdir(os.path.join(args.load_checkpoint, n))]
        if not found:
            raise command.UsageError(
                f"--load-checkpoint {args.load_checkpoint} holds no torch/ or jax/ checkpoint "
                "written by --save-checkpoint"
            )
        for name in found:
            folder = os.path.join(args.load_checkpoint, name)
            record = read_checkpoint_record(folder, name)
            if (record["vocab_size"], record["dim"]) != tuple(shape):
                raise command.UsageError(
                    f"--load-checkpoint {folder} holds a {record['vocab_size']} x "
                    f"{record['dim']} table, this run's is {shape[0]} x {shape[1]}: give the "
                    "flags (or --weights) it was saved with"
                )


def _checkpoints(args, names, done) -> bool:
    """Save, or restore and compare, the token table; True if a restored table differs."""
    frameworks = [n for n in names if n in CHECKPOINTED]
    differ = False
    if args.save_checkpoint:
        with outputs.new_folder(args.save_checkpoint) as partial:  # every framework's or none
            for name in frameworks:
                folder = os.path.join(partial, name)
                if name == "torch":
                    from embedding_parity.sharding import torch_shards

                    torch_shards.save_checkpoint(
                        done.token_table, folder, num_shards=done.num_shards
                    )
                else:
                    from embedding_parity.sharding import jax_shards

                    layer = jax_shards.ShardedEmbedding(
                        done.token_table, done.position_table, num_shards=done.num_shards
                    )
                    jax_shards.save_checkpoint(layer, folder)
        for name in frameworks:
            print(
                f"checkpoint: {os.path.abspath(os.path.join(args.save_checkpoint, name))} "
                f"({CHECKPOINTED[name]}, {done.num_shards} shards by rows)"
            )
    if args.load_checkpoint:
        vocab_size, dim = done.token_table.shape
        for name in frameworks:
            folder = os.path.join(args.load_checkpoint, name)
            if not os.path.isdir(folder):
                print(f"restored: no {name} checkpoint in {args.load_checkpoint}")
                continue
            saved = read_checkpoint_record(folder, name)
            if name == "torch":
                from embedding_parity.sharding import torch_shards

                table, _ = torch_shards.load_checkpoint(
                    folder, num_shards=done.num_shards, vocab_size=vocab_size, dim=dim
                )
            else:
                from embedding_parity.sharding import jax_shards

                layer = jax_shards.load_checkpoint(
                    folder, done.position_table, num_shards=done.num_shards,
                    vocab_size=vocab_size, dim=dim,
                )  # fmt: skip
                table = np.asarray(layer.token_table)[:vocab_size, :dim]
            same = table.tobytes() == done.token_table.tobytes()
            differ |= not same
            print(
                f"restored: {os.path.abspath(folder)} ({CHECKPOINTED[name]}, saved by "
                f"{saved['num_shards']} shards) onto {done.num_shards}: "
                + ("bit-identical to this run's token table" if same else "DIFFERS from this "
                   "run's token table (other weights or --seed?)")
            )  # fmt: skip
    return differ


def _own_launch(names, num_shards: int) -> str:
    started = []
    if "torch" in names:
        started.append(f"{num_shards} torch ranks")
    if "jax" in names:
        started.append(f"{num_shards} JAX devices in this process")
    return (
        "launch: none found (no torchrun or JAX_* variables); started here: "
        + (", ".join(started) or "nothing (NumPy alone)")
        + ", on 127.0.0.1"
    )


def _joined(args, launch):
    """Under a launcher: the backends and shard count its job fixes, checked; for JAX, the
    process joins the job now (before anything else touches JAX)."""
    other = {"torch": "jax", "jax": "torch"}[launch.framework]
    names = args.backends or ["numpy", launch.framework]
    if other in names:
        raise command.UsageError(
            f"{launch.launcher} started this process as one {launch.framework} rank: "
            f"--backends may list numpy and {launch.framework}, not {other}"
        )
    if launch.framework not in names:
        names = [*names, launch.framework]
    args.backends = names
    if launch.framework == "jax":
        try:
            launch = jax_processes.join(launch, args.timeout)
        except RuntimeError as error:
            raise command.UsageError(f"a distributed run failed: {error}") from None
    if args.shards is not None and args.shards != launch.shards:
        raise command.UsageError(
            f"--shards {args.shards} does not match the job's {launch.shards} "
            f"{'ranks' if launch.framework == 'torch' else 'devices'}: leave --shards out "
            "under a launcher"
        )
    args.shards = launch.shards
    return launch


def _check_sizes(args, sizes: dict, shape: tuple) -> None:
    """The tables (random ones) and the output, from the flags, before anything is built."""
    if args.weights is None:
        command.check_size(
            (sizes["vocab_size"] + sizes["max_seq_len"]) * sizes["dim"],
            f"the tables: (--vocab-size {sizes['vocab_size']} + --max-seq-len "
            f"{sizes['max_seq_len']}) x --dim {sizes['dim']}",
            "make them smaller",
        )
    length = len(args.tokens or SEED["tokens"])
    command.check_size(
        (args.batch or 1) * length * shape[1],
        f"the output: --batch {args.batch or 1} x {length} tokens x dim {shape[1]}",
        "lower --batch or use fewer tokens",
    )


def _real_tables(args, sizes, launch) -> tuple:
    """((token_table, position_table), the token table's ``reference.TableFile`` or None).

    The TableFile is there when the file is a .safetensors holding the table in --dtype: the
    torch ranks this command starts read their own part of it. A rank of a launched job
    reads no more than that: its token table *is* the TableFile, and the unsharded lookup it
    is held to reads only the rows of the ids."""
    from embedding_parity.jobs import text

    given = [f"--{k.replace('_', '-')}" for k, v in sizes.items() if v is not None]
    if given:
        raise command.UsageError(f"{given[0]} does not go with --weights: the file sets the sizes")
    if args.tokens is None and args.batch is None:
        raise command.UsageError("--weights needs --tokens: ids of its vocabulary")
    table_file = position_key = None
    try:
        location = pretrained.table_locations(args.weights, args.token_key, args.position_key)
    except Exception:
        location = None
    if location is not None:
        path, token_key, position_key = location
        table_file = reference.TableFile.open(path, token_key)
        if table_file.dtype != validation.resolve_dtype(args.dtype):
            table_file = None  # cast as a whole
    if launch is not None and table_file is not None and position_key is not None:
        if args.weights in pretrained.MODELS:  # as load_tables refuses them
            text.no_keys(args.weights, args.token_key, args.position_key)
        from safetensors import safe_open

        with safe_open(table_file.path, framework="np") as f:
            position_table = f.get_tensor(position_key)
        try:
            position_table = table_file.check_positions(position_table)
        except ValueError as error:  # named as load_tables names it
            raise ValueError(f"{table_file.path}: {error}") from None
        return (table_file, position_table), table_file
    tables = text.load_tables(args.weights, args.token_key, args.position_key)
    if tables[1] is None:
        raise command.UsageError(
            f"{args.weights} has no position table: shard splits a learned-position layer"
        )
    return tables, table_file


def _report(args, done: Sharded) -> None:
    from embedding_parity.drawing import sharding as pictures
    from embedding_parity.drawing.table import text_table

    ids = " ".join(map(str, done.token_ids.reshape(-1)[:12]))
    print(
        f"token table {done.token_table.shape[0]} x {done.token_table.shape[1]} "
        f"({done.token_table.dtype}) split {done.num_shards} ways; ids {ids}"
        f"{' ...' if done.token_ids.size > 12 else ''}; start {done.start}"
    )
    rows = [("backend", "strategy", "collective", "bytes/device", "max |diff|", "bit-identical")]
    rows += [
        (
            r.backend,
            r.strategy,
            r.collective,
            str(r.bytes_per_device),
            f"{r.max_abs_diff:.3g}",
            "yes" if r.identical else "NO",
        )
        for r in done.rows
    ]
    print(text_table(rows, right_from=3))
    print(f"(the whole token table: {done.token_table.nbytes} bytes on one device)")
    for r in done.rows:
        if r.memory is not None:
            peak, read = r.memory.max(axis=0)
            print(
                f"torch {r.strategy}: each rank read at most {_size(read)} of the token table "
                f"from its file; peak resident memory so far {_size(peak)} (the most of any "
                "rank; the strategies run in turn in the same ranks)"
            )
    pictures.ownership(done, args.out, show=command.show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    if args.save_arrays:
        arrays = {"reference": done.unsharded}
        for r in done.rows:
            arrays[f"sum_{r.backend}_{r.strategy}"] = r.output
            if r.strategy == "rows":
                arrays[f"sum_{r.backend}"] = r.output
        with outputs.replacing(args.save_arrays) as out:
            np.savez(out, **{k: _savable(v) for k, v in arrays.items()})
        print(f"arrays: {os.path.abspath(args.save_arrays)}")


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def _savable(array: np.ndarray) -> np.ndarray:
    """.npz cannot hold ml_dtypes.bfloat16: widen it to float32 (exactly)."""
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array
