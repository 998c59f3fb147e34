"""Train short, test long (Press et al. 2022): the same causal model trained at length L on
the drifting-topic language (training/language.py) under every positional scheme, in every
backend, from the same weights on the same batches, then evaluated at L, 2L, 4L and 8L.

A learned position table has L rows, so past L the layer refuses the input: that is
recorded as the error it is, never as a number.
"""

from __future__ import annotations

import importlib

import numpy as np

from embedding_parity import outputs
from embedding_parity.jobs import command, lockstep
from embedding_parity.results.extrapolate import FACTORS, Extrapolation, Run
from embedding_parity.training import language
from embedding_parity.training import task as tasks

DEFAULTS = {
    "steps": 1000,
    "batch_size": 32,
    "lr": 0.01,
    "dim": 32,
    "head_dim": 8,
    "heads": 4,
    "length": 16,
    "seed": 0,
}
EVAL_SEQUENCES = 256  # test texts; each length reads the first tokens of the same texts
MAX_LENGTH = 128  # training length; tested up to 8x, the scores grow with its square
CHUNK = 16  # test texts scored at a time, which bounds the memory the scores take


def run(
    names, schemes=tasks.SCHEMES, *, dtype: str = "float32", progress: bool = False, **settings
) -> Extrapolation:
    """Train every (scheme, backend) pair at the training length and test it at every
    length in FACTORS; settings override DEFAULTS."""
    settings = check_settings(dtype, **settings)
    s = settings
    lengths = [factor * s["length"] for factor in FACTORS]
    arch = tasks.Architecture(heads=s["heads"], causal=True, pooled=False, max_len=lengths[-1])
    weights = tasks.initial_weights(
        s["dim"],
        s["head_dim"],
        seed=s["seed"],
        dtype=s["dtype"],
        vocab=language.VOCAB,
        classes=language.VOCAB,
        length=s["length"],
        heads=s["heads"],
    )
    batches = language.sample(s["steps"] * s["batch_size"], s["length"] + 1, seed=s["seed"])
    batches = batches.reshape(s["steps"], s["batch_size"], s["length"] + 1)
    texts = language.sample(EVAL_SEQUENCES, lengths[-1] + 1, seed=s["seed"] + 1)
    tests = {n: texts[:, : n + 1] for n in lengths}  # the same texts, read n + 1 tokens far
    runs = []
    with lockstep.progress_bar(len(schemes) * len(names) * s["steps"], progress) as bar:
        for scheme in schemes:
            for name in names:
                runs.append(_train(name, scheme, weights, arch, batches, tests, settings, bar))
    optimal = {n: language.optimal_loss(ids) for n, ids in tests.items()}
    done = Extrapolation(settings, runs, optimal)
    for scheme in schemes:
        done.drift[scheme] = _drift([done.run(scheme, n) for n in names])
    return done


def check_settings(dtype: str = "float32", **settings) -> dict:
    settings = lockstep.check_common(dtype, DEFAULTS, **settings)
    if settings["length"] < 2:
        raise ValueError(f"--length must be at least 2, got {settings['length']}")
    if settings["length"] > MAX_LENGTH:
        raise ValueError(
            f"--length {settings['length']} would test at {FACTORS[-1] * settings['length']} "
            f"tokens: keep it at most {MAX_LENGTH}, the scores grow with the square of the length"
        )
    lockstep.check_sizes(settings, settings["length"], language.VOCAB)
    longest = FACTORS[-1] * settings["length"]
    command.check_size(
        CHUNK * settings["heads"] * longest**2,
        f"the test's scores: {CHUNK} texts x --heads {settings['heads']} x "
        f"({FACTORS[-1]} x --length {settings['length']})^2",
        "lower --heads or --length",
    )
    return settings


def _train(name, scheme, weights, arch, batches, tests, settings, bar) -> Run:
    model_module = importlib.import_module(f"embedding_parity.training.{name}_model")
    with lockstep.precision(name, settings["dtype"]):
        model = model_module.Model(weights, scheme, lr=settings["lr"], arch=arch)
        loss = np.empty(len(batches))
        for step, batch in enumerate(batches):
            loss[step], _ = model.step(batch[:, :-1], batch[:, 1:])
            bar.update()
        test = {}
        for length, ids in tests.items():
            if scheme == "learned" and length > settings["length"]:
                try:  # the table has no row past the training length: the layer says so
                    model.logits(ids[:1, :-1])
                except ValueError as refused:
                    test[length] = str(refused)
                    continue
            test[length] = _test_loss(model, ids)
        return Run(scheme, name, loss, test)


def _test_loss(model, ids: np.ndarray) -> float:
    """Mean next-token cross-entropy over every prediction, CHUNK texts at a time."""
    chunks = np.split(ids, range(CHUNK, len(ids), CHUNK))
    losses = [_cross_entropy(model.logits(c[:, :-1]), c[:, 1:]) for c in chunks]
    return float(np.average(losses, weights=[len(c) for c in chunks]))


def _cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean next-token cross-entropy in nats, in float64 whatever the model's dtype."""
    logits = logits.astype(np.float64)
    logits -= logits.max(axis=-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return float(-np.take_along_axis(log_probs, targets[..., None], axis=-1).mean())


def _drift(runs: list[Run]) -> float:
    """The largest relative difference from the first backend, over training and test losses."""
    first = runs[0]
    worst = 0.0
    for other in runs[1:]:
        worst = max(worst, float(np.max(np.abs(other.loss - first.loss) / np.abs(first.loss))))
        for length, value in first.test.items():
            theirs = other.test[length]
            if isinstance(value, str) or isinstance(theirs, str):
                if theirs != value:  # one backend refused, another did not
                    return float("inf")
            else:
                worst = max(worst, abs(theirs - value) / abs(value))
    return worst


def save_json(done: Extrapolation, path: str) -> None:
    import json

    record = {
        "settings": done.settings,
        "factors": list(FACTORS),
        "tolerance": done.tolerance(),
        "optimal": {str(n): v for n, v in done.optimal.items()},
        "runs": [
            {
                "scheme": r.scheme,
                "backend": r.backend,
                "loss": r.loss.tolist(),
                "test": {str(n): v for n, v in r.test.items()},
            }
            for r in done.runs
        ],
        "drift": done.drift,
    }
    with outputs.replacing(path, "w") as out:
        json.dump(record, out, indent=1)
