"""Train the same tiny model in every backend, from the same weights on the same batches.

The model is the suite's layer, attention and a readout (``embedding_parity/training/``),
trained under each positional scheme; the job reports losses, accuracies and how far the
backends' loss curves drift apart. By default the task needs word order ("dog bites man": the
target is the subject). With --extrapolate: train short, test long, a causal next-token model
trained at --length tokens and tested at 1, 2, 4 and 8 times that (``jobs.extrapolate``).

    compare.py train --dtype float64          # about 17 s on 2 cores
    compare.py train --extrapolate            # about 40 s on 2 cores

Exit status: 0 done (float64: every backend's loss within the tolerance), 1 float64 losses
beyond the tolerance, 2 bad arguments.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from backends import validation
from embedding_parity import outputs
from embedding_parity.jobs import command
from embedding_parity.training import task as tasks

COMMAND = "train"

DEFAULTS = {"steps": 300, "batch_size": 32, "lr": 0.01, "dim": 32, "head_dim": 16, "seed": 0}


@dataclass
class Curve:
    scheme: str
    backend: str
    loss: np.ndarray  # (steps,) the batch's loss before each update
    accuracy: np.ndarray  # (steps,) the batch's accuracy before each update
    test_accuracy: np.ndarray  # (steps,) on the held-out pairs, after each update
    tables: dict  # the trained token (and learned position) tables


@dataclass
class Training:
    settings: dict
    curves: list[Curve]
    initial: dict  # the shared initial weights
    words: tuple[str, ...]
    drift: dict = field(default_factory=dict)  # scheme -> (steps,) max relative loss difference

    def tolerance(self) -> float | None:
        """For float64: how far the backends' losses may drift apart, relative to the loss.

        Every loss is a chain of sums no longer than n = dim + head_dim + T + head_dim +
        classes + batch_size terms, so one step's rounding error is about n * eps relative
        (first order); the weights then carry each step's difference into the next, so after
        S steps the losses may differ by about S * n * eps. That assumes differences grow
        about linearly, which holds at the default settings (measured: 4x below it for alibi,
        10x for the others); a larger learning rate or many more steps can amplify them
        faster. float32 gets no tolerance: its drift is measured and drawn instead.
        """
        s = self.settings
        if s["dtype"] != "float64":
            return None
        n = s["dim"] + 2 * s["head_dim"] + tasks.LENGTH + len(tasks.NOUNS) + s["batch_size"]
        return s["steps"] * n * float(np.finfo(np.float64).eps)

    def beyond(self) -> list[str]:
        """The schemes whose float64 losses drift past the tolerance (a NaN counts)."""
        tolerance = self.tolerance()
        if tolerance is None:
            return []
        return [s for s, d in self.drift.items() if not np.all(d <= tolerance)]

    def curve(self, scheme: str, backend: str) -> Curve:
        return next(c for c in self.curves if (c.scheme, c.backend) == (scheme, backend))


def run(
    names,
    schemes=tasks.SCHEMES,
    *,
    dtype: str = "float32",
    progress: bool = False,
    **settings,
) -> Training:
    """Train every (scheme, backend) pair; settings override DEFAULTS."""
    settings = check_settings(dtype, **settings)
    task = tasks.make_task(seed=settings["seed"])
    weights = tasks.initial_weights(
        settings["dim"], settings["head_dim"], seed=settings["seed"], dtype=settings["dtype"]
    )
    batches = tasks.batches(task, settings["steps"], settings["batch_size"], seed=settings["seed"])
    curves = []
    with progress_bar(len(schemes) * len(names) * settings["steps"], progress) as bar:
        for scheme in schemes:
            for name in names:
                curves.append(_train(name, scheme, weights, task, batches, settings, bar))
    training = Training(settings, curves, weights, task.words)
    for scheme in schemes:
        losses = np.stack([training.curve(scheme, n).loss for n in names])  # (backends, steps)
        training.drift[scheme] = (np.abs(losses - losses[0]) / np.abs(losses[0])).max(axis=0)
    return training


def check_settings(dtype: str = "float32", defaults=DEFAULTS, **settings) -> dict:
    """``defaults`` overridden by ``settings``, checked; ValueError names the train flag."""
    settings = check_common(dtype, defaults, **settings)
    task = tasks.make_task(seed=settings["seed"])
    sequences = len(task.train_ids)
    if settings["batch_size"] > sequences:
        raise ValueError(
            f"--batch-size {settings['batch_size']} exceeds the {sequences} training sequences"
        )
    return check_sizes(settings, tasks.LENGTH, len(task.words))


def check_sizes(settings: dict, length: int, vocab: int) -> dict:
    """The largest arrays a training run builds, from the settings alone (sequences of
    ``length`` tokens, ``vocab`` words): UsageError past command.MAX_VALUES."""
    s, heads = settings, settings.get("heads", 1)
    steps, batch, dim, head_dim = s["steps"], s["batch_size"], s["dim"], s["head_dim"]
    width = f"--heads {heads} x --head-dim {head_dim}" if "heads" in s else f"--head-dim {head_dim}"
    for count, formula, fix in (
        (
            steps * batch * (length + 1),
            (
                f"the batches, drawn before the first step: --steps {steps} x --batch-size "
                f"{batch} x {length + 1} tokens"
            ),
            "lower --steps or --batch-size",
        ),
        (vocab * dim, f"the token table: {vocab} words x --dim {dim}", "lower --dim"),
        (heads * head_dim * dim, f"each projection: {width} x --dim {dim}", "lower the widths"),
        (
            batch * length * max(dim, heads * head_dim),
            (
                f"a step's activations: --batch-size {batch} x {length} tokens x the widest "
                f"of --dim {dim} and {width}"
            ),
            "lower --batch-size or the widths",
        ),
    ):
        command.check_size(count, formula, fix)
    return settings


def check_common(dtype: str, defaults: dict, **settings) -> dict:
    """The checks every train mode shares."""
    settings = {**defaults, **settings, "dtype": validation.resolve_dtype(dtype).name}
    if settings["dtype"] not in ("float64", "float32"):
        raise ValueError(f"train runs in float64 or float32, got {dtype}")
    for key in ("steps", "batch_size", "dim", "head_dim", "heads"):
        if settings.get(key, 1) < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be at least 1, got {settings[key]}")
    if settings["head_dim"] % 2:
        raise ValueError(
            f"--head-dim must be even (RoPE pairs dimensions), got {settings['head_dim']}"
        )
    if not (math.isfinite(settings["lr"]) and settings["lr"] > 0):
        raise ValueError(f"--lr must be positive and finite, got {settings['lr']}")
    if settings["seed"] < 0:
        raise ValueError(f"--seed must be at least 0, got {settings['seed']}")
    return settings


def _train(name, scheme, weights, task, batches, settings, bar) -> Curve:
    model_module = importlib.import_module(f"embedding_parity.training.{name}_model")
    with precision(name, settings["dtype"]):
        model = model_module.Model(weights, scheme, lr=settings["lr"])
        loss, accuracy, test = (np.empty(len(batches)) for _ in range(3))
        for step, rows in enumerate(batches):
            targets = task.train_targets[rows]
            loss[step], logits = model.step(task.train_ids[rows], targets)
            accuracy[step] = (logits.argmax(axis=1) == targets).mean()
            test[step] = (model.logits(task.test_ids).argmax(axis=1) == task.test_targets).mean()
            bar.update()
        return Curve(scheme, name, loss, accuracy, test, model.tables())


def precision(name: str, dtype: str):
    """JAX computes in 32 bits unless x64 is on: on for this run only, as the layer does."""
    if name == "jax" and dtype == "float64":
        import jax

        return jax.enable_x64(True)
    return contextlib.nullcontext()


def progress_bar(total: int, progress: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="steps", disable=not (progress and sys.stderr.isatty()))


def save_json(training: Training, path: str) -> None:
    import json

    record = {
        "settings": training.settings,
        "tolerance": training.tolerance(),
        "runs": [
            {
                "scheme": c.scheme,
                "backend": c.backend,
                "loss": c.loss.tolist(),
                "accuracy": c.accuracy.tolist(),
                "test_accuracy": c.test_accuracy.tolist(),
                "final_test_accuracy": float(c.test_accuracy[-1]),
            }
            for c in training.curves
        ],
        "drift": {scheme: d.tolist() for scheme, d in training.drift.items()},
    }
    with outputs.replacing(path, "w") as out:
        json.dump(record, out, indent=1)


def save_tables(training: Training, path: str) -> tuple[str, str]:
    """The trained tables as .safetensors (keys token_table, position_table), from the first
    backend's run of the learned scheme (or the first scheme run); returns (scheme, backend)."""
    from safetensors.numpy import save

    schemes = [c.scheme for c in training.curves]
    curve = training.curves[schemes.index("learned") if "learned" in schemes else 0]
    with outputs.replacing(path) as out:  # whole or not at all; a failure is an OSError
        out.write(save({k: np.ascontiguousarray(v) for k, v in curve.tables.items()}))
    return curve.scheme, curve.backend


# --- the command ---------------------------------------------------------------------------


def add_arguments(parser) -> None:
    """Numeric flags default to None: given ones override the mode's own defaults."""
    from embedding_parity.jobs import extrapolate

    add = parser.add_argument
    add(
        "--scheme",
        nargs="+",
        choices=tasks.SCHEMES,
        default=list(tasks.SCHEMES),
        help="default: all",
    )
    command.add_backends(parser)
    add("--dtype", choices=("float64", "float32"), default="float32", help="default: float32")
    add(
        "--extrapolate",
        action="store_true",
        help="train short, test long, on a drifting-topic language",
    )
    for flag, kind, what in (
        ("steps", int, "Adam steps"),
        ("batch_size", int, "training sequences per step"),
        ("lr", float, "Adam's learning rate"),
        ("dim", int, "embedding width"),
        ("head_dim", int, "width of q, k and v per head (even: RoPE pairs them)"),
        ("seed", int, "seed of the weights, the batches and the held-out data"),
        ("heads", int, "attention heads, with --extrapolate"),
        ("length", int, "training length, with --extrapolate"),
    ):
        add(
            "--" + flag.replace("_", "-"),
            type=kind,
            help=f"{what} (default: {DEFAULTS.get(flag, '-')}; with --extrapolate: "
            f"{extrapolate.DEFAULTS[flag]})",
        )
    add("--json", metavar="PATH", help="write every curve and the settings as JSON")
    add("--save", metavar="PATH.safetensors", help="write the trained tables (not --extrapolate)")
    command.add_picture(
        parser, "train.png", "the curves picture; with the learned scheme also OUT-positions.png"
    )
    parser.set_defaults(run=main)


def main(args) -> int:
    """1 if float64 losses drift beyond the tolerance."""
    from embedding_parity.jobs import extrapolate

    names = command.chosen_backends(args.backends)
    command.check_picture(args.out)
    if not args.extrapolate and "learned" in args.scheme:  # its second picture, beside --out
        command.check_folder("the positions picture of --out", _positions_picture(args.out))
    command.check_file("--json", args.json, ".json")
    command.check_file("--save", args.save, ".safetensors")
    job = extrapolate if args.extrapolate else sys.modules[__name__]
    settings = {k: getattr(args, k) for k in extrapolate.DEFAULTS if getattr(args, k) is not None}
    if not args.extrapolate:
        for flag in ("heads", "length"):
            if flag in settings:
                raise command.UsageError(f"--{flag} goes with --extrapolate")
    elif args.save:
        raise command.UsageError(
            "--save writes the word-order task's tables: leave out --extrapolate"
        )
    settings = job.check_settings(args.dtype, **settings)
    settings.pop("dtype")
    schemes = tuple(dict.fromkeys(args.scheme))
    if args.extrapolate:
        return _report_extrapolation(args, names, schemes, settings)
    return _report(args, run(names, schemes, dtype=args.dtype, progress=True, **settings))


def _report(args, done: Training) -> int:
    from embedding_parity.drawing import training as pictures

    print("\n".join(pictures.summary(done)))
    show = command.show(args)
    pictures.curves(done, args.out, show=show)
    print(f"picture: {os.path.abspath(args.out)}")
    if "learned" in done.drift:
        pictures.positions(done, _positions_picture(args.out), show=show)
        print(f"picture: {os.path.abspath(_positions_picture(args.out))}")
    if args.json:
        save_json(done, args.json)
        print(f"curves: {os.path.abspath(args.json)}")
    if args.save:
        scheme, backend = save_tables(done, args.save)
        note = "" if scheme == "learned" else "; token_table only: no learned positions"
        print(f"tables ({scheme}, {backend}{note}): {os.path.abspath(args.save)}")
    return 1 if done.beyond() else 0


def _positions_picture(out: str) -> str:
    """The learned position table's picture, written beside --out: OUT-positions.png."""
    stem, extension = os.path.splitext(out)
    return f"{stem}-positions{extension}"


def _report_extrapolation(args, names, schemes, settings) -> int:
    from embedding_parity.drawing import training as pictures
    from embedding_parity.jobs import extrapolate

    done = extrapolate.run(names, schemes, dtype=args.dtype, progress=True, **settings)
    print("\n".join(pictures.extrapolation_summary(done)))
    pictures.extrapolation(done, args.out, show=command.show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    if args.json:
        extrapolate.save_json(done, args.json)
        print(f"losses: {os.path.abspath(args.json)}")
    return 1 if done.beyond() else 0
