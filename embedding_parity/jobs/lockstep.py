"""What both modes of the train command share (jobs.train and jobs.extrapolate): the same
model, weights and batches in every backend, in lockstep, so one set of checks for the
settings, JAX in float64 when asked (jobs.bias's softmax too) and one progress bar for every
backend's steps."""

from __future__ import annotations

import contextlib
import math
import sys

from backends import validation
from embedding_parity.jobs import command


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


def precision(name: str, dtype: str):
    """JAX computes in 32 bits unless x64 is on: on for this run only, as the layer does."""
    if name == "jax" and dtype == "float64":
        import jax

        return jax.enable_x64(True)
    return contextlib.nullcontext()


def progress_bar(total: int, progress: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="steps", disable=not (progress and sys.stderr.isatty()))
