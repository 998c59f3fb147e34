"""The task: sequences <noun_a> <verb> <noun_b>, the target is the subject noun_a.

Without position the model sees the same multiset of rows for "a bites b" and "b bites a",
so on the test pairs (noun pairs never seen in training, each in both orders) it cannot
beat 50 %. Every backend starts from the same weights and sees the same batches.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from backends import validation

NOUNS = ("dog", "man", "cat", "woman", "bird", "child", "horse", "teacher", "fox", "king")
VERBS = ("bites", "sees", "follows", "helps")
SCHEMES = ("none", "learned", "sinusoidal", "rope", "alibi", "t5")
LENGTH = 3  # tokens per sequence
T5_BUCKETS = 32  # T5's own settings: 32 buckets, max_distance 128


@dataclass(frozen=True)
class Architecture:
    """What the models in training/ build around the embedding (one attention layer).

    heads: attention heads of head_dim each. causal: keys after the query are masked (ALiBi
    always is: its bias carries the mask). pooled: one prediction per sequence (the mean
    over positions; the subject task), or one per position (next-token prediction).
    max_len: the longest sequence the model will be run on (rows of a sinusoidal table).
    """

    heads: int = 1
    causal: bool = False
    pooled: bool = True
    max_len: int = LENGTH


SUBJECT = Architecture()  # the subject task's: one head, no mask, pooled over 3 positions


@dataclass
class Task:
    words: tuple[str, ...]  # id -> word: the nouns, then the verbs
    train_ids: np.ndarray  # (n, 3) int64
    train_targets: np.ndarray  # (n,) the subject's id, which is also its class
    test_ids: np.ndarray  # (m, 3): held-out noun pairs, each in both orders
    test_targets: np.ndarray


def make_task(held_out_pairs: int = 9, seed: int = 0) -> Task:
    """Every ordered pair of different nouns with every verb; ``held_out_pairs`` unordered
    noun pairs (both orders, every verb) form the test set."""
    pairs = list(itertools.combinations(range(len(NOUNS)), 2))
    held = set(map(tuple, np.random.default_rng(seed).permutation(pairs)[:held_out_pairs]))
    train, test = [], []
    for a, b in itertools.permutations(range(len(NOUNS)), 2):
        for verb in range(len(NOUNS), len(NOUNS) + len(VERBS)):
            (test if (min(a, b), max(a, b)) in held else train).append((a, verb, b))
    train_ids, test_ids = np.array(train), np.array(test)
    return Task(NOUNS + VERBS, train_ids, train_ids[:, 0], test_ids, test_ids[:, 0])


def initial_weights(
    dim: int,
    head_dim: int,
    *,
    seed: int = 0,
    dtype="float32",
    vocab: int = len(NOUNS) + len(VERBS),
    classes: int = len(NOUNS),
    length: int = LENGTH,
    heads: int = 1,
) -> dict:
    """The model's weights, drawn once with NumPy's seeded generator and handed to every
    backend: token_table (vocab, dim), position_table (length, dim), wq/wk/wv
    (dim, heads * head_dim), wo (heads * head_dim, classes), bo (classes,) and T5's
    bias_table (T5_BUCKETS, heads). Scaled so that a fresh model's logits are small."""
    dtype = validation.resolve_dtype(dtype)
    rng = np.random.default_rng(seed)
    width = heads * head_dim
    shapes = {
        "token_table": ((vocab, dim), 1.0),
        "position_table": ((length, dim), 1.0),
        "wq": ((dim, width), dim**-0.5),
        "wk": ((dim, width), dim**-0.5),
        "wv": ((dim, width), dim**-0.5),
        "wo": ((width, classes), width**-0.5),
        "bias_table": ((T5_BUCKETS, heads), 0.1),
    }
    weights = {
        k: (rng.standard_normal(s) * scale).astype(dtype) for k, (s, scale) in shapes.items()
    }
    weights["bo"] = np.zeros(classes, dtype)
    return weights


def batches(task: Task, steps: int, batch_size: int, *, seed: int = 0) -> np.ndarray:
    """(steps, batch_size) row numbers of the training set: the same batches for everyone."""
    rng = np.random.default_rng(seed + 1)
    return np.stack(
        [rng.choice(len(task.train_ids), batch_size, replace=False) for _ in range(steps)]
    )


def embedding_layer(backend, weights: dict, scheme: str, max_len: int = LENGTH):
    """The suite's layer for a scheme, in ``backend`` (RoPE, ALiBi and T5 add nothing here:
    the models rotate q and k, or bias the scores)."""
    if scheme == "learned":
        return backend.TokenPositionEmbedding(weights["token_table"], weights["position_table"])
    if scheme == "sinusoidal":
        return backend.TokenPositionEmbedding(
            weights["token_table"], positions="sinusoidal", max_seq_len=max_len
        )
    return backend.TokenPositionEmbedding(weights["token_table"], positions="none")
