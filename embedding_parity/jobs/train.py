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

import importlib
import os
import sys

import numpy as np

from embedding_parity import outputs
from embedding_parity.jobs import command, extrapolate, lockstep
from embedding_parity.results.train import Curve, Training
from embedding_parity.training import task as tasks

COMMAND = "train"

DEFAULTS = {"steps": 300, "batch_size": 32, "lr": 0.01, "dim": 32, "head_dim": 16, "seed": 0}


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
    with lockstep.progress_bar(len(schemes) * len(names) * settings["steps"], progress) as bar:
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
    settings = lockstep.check_common(dtype, defaults, **settings)
    task = tasks.make_task(seed=settings["seed"])
    sequences = len(task.train_ids)
    if settings["batch_size"] > sequences:
        raise ValueError(
            f"--batch-size {settings['batch_size']} exceeds the {sequences} training sequences"
        )
    return lockstep.check_sizes(settings, tasks.LENGTH, len(task.words))


def _train(name, scheme, weights, task, batches, settings, bar) -> Curve:
    model_module = importlib.import_module(f"embedding_parity.training.{name}_model")
    with lockstep.precision(name, settings["dtype"]):
        model = model_module.Model(weights, scheme, lr=settings["lr"])
        loss, accuracy, test = (np.empty(len(batches)) for _ in range(3))
        for step, rows in enumerate(batches):
            targets = task.train_targets[rows]
            loss[step], logits = model.step(task.train_ids[rows], targets)
            accuracy[step] = (logits.argmax(axis=1) == targets).mean()
            test[step] = (model.logits(task.test_ids).argmax(axis=1) == task.test_targets).mean()
            bar.update()
        return Curve(scheme, name, loss, accuracy, test, model.tables())


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

    done = extrapolate.run(names, schemes, dtype=args.dtype, progress=True, **settings)
    print("\n".join(pictures.extrapolation_summary(done)))
    pictures.extrapolation(done, args.out, show=command.show(args))
    print(f"picture: {os.path.abspath(args.out)}")
    if args.json:
        extrapolate.save_json(done, args.json)
        print(f"losses: {os.path.abspath(args.json)}")
    return 1 if done.beyond() else 0
