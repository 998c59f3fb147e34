"""ALiBi and T5: position added to the attention scores instead of the vectors.

The input layer adds no position here: ``x = token_table[token_ids]``. Position enters
later, as a bias (num_heads, q_len, k_len) added to every head's scores q . k / sqrt(dim)
before the softmax: ALiBi's -slope * distance (Press et al. 2022), or T5's learned table
read at the bucket of each distance (Raffel et al. 2020). Both are causal here, as in a
decoder: ALiBi folds the mask into its bias as -inf; T5's one-way buckets give keys after
the query bucket 0, and T5's decoder masks them, as done here.

The attention pattern is the bias's alone: the softmax over the keys of the bias, with the
content scores set to 0. It shows what each head looks at from position alone, before any
token has a say; it needs no token at keys before ``start``, which the tokens do not cover.

Every backend builds the bias natively and takes the softmax in its own framework. Two calls
are checked on each: the tokens' own (queries at positions start .. start + T - 1, keys at
0 .. start + T - 1: the last T of start + T positions, as in a decode step with a cache) and
the window drawn (queries and keys at 0 .. max_seq_len - 1), of which the tokens' call is a
block. The token rows and the bias are held bit for bit (to ``token_table[token_ids]`` and
the NumPy backend's bias), the attention to the float64 softmax of that bias within
``attention_tolerance``.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import backends
from backends import positional, validation
from embedding_parity.jobs import lockstep
from embedding_parity.jobs.parity import SEED_TOKENS, run_tokens, same_bits
from embedding_parity.results.bias import T5_BUCKETS, T5_MAX_DISTANCE, BiasRun, Checked

SCHEMES = ("alibi", "t5")
CALLS = ("tokens", "window")  # the tokens' positions, and the window drawn


def run(
    names,
    tokens=SEED_TOKENS,
    *,
    scheme: str,
    num_heads: int = 4,
    vocab_size: int = 100,
    dim: int = 10,
    max_seq_len: int = 16,
    start: int = 0,
    seed: int = 0,
    dtype: str = "float32",
) -> BiasRun:
    """Every backend's token rows, bias and bias-only attention on the tables of
    ``backends.shared_weights(vocab_size, dim, max_seq_len, seed=seed, dtype=dtype)``.

    ``max_seq_len`` is the window drawn, so start + T must fit in it. T5's bias table is
    ``np.random.default_rng(seed).standard_normal((32, num_heads))`` rounded to ``dtype``:
    random, where T5 learns it.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r} for a bias: use alibi or t5")
    num_heads, _, _ = validation.check_lengths(num_heads, 1, None)
    dtype = validation.resolve_dtype(dtype)
    token_table, _ = backends.shared_weights(vocab_size, dim, max_seq_len, seed=seed, dtype=dtype)
    token_ids = validation.as_host(list(tokens))  # ids beyond int64 stay named, not overflowed
    if token_ids.ndim != 1:
        raise ValueError(f"{scheme}: one sequence of token ids, got shape {token_ids.shape}")
    token_ids, start = validation.check_call(token_ids, start, vocab_size, max_seq_len)
    stop = start + len(token_ids)
    lengths = {"tokens": (len(token_ids), stop), "window": (max_seq_len, max_seq_len)}
    masked = {c: positional.relative_positions(q, k) > 0 for c, (q, k) in lengths.items()}
    bias_table = None
    if scheme == "t5":
        draw = np.random.default_rng(seed).standard_normal((T5_BUCKETS, num_heads))
        bias_table = draw.astype(dtype)

    def bias(be, call):  # (num_heads, q_len, k_len), the backend's own array
        q_len, k_len = lengths[call]
        if scheme == "alibi":
            return be.alibi_bias(num_heads, q_len, k_len, causal=True, dtype=dtype)
        return be.t5_bias(
            bias_table, q_len, k_len, bidirectional=False, max_distance=T5_MAX_DISTANCE
        )

    numpy_backend = backends.get("numpy")
    expected_bias = {c: numpy_backend.to_numpy(bias(numpy_backend, c)) for c in CALLS}
    # The attention's reference starts from the bias every backend holds bit for bit (its
    # distance from the exact bias is tests/test_attention_bias.py's business), so the
    # tolerance below covers the softmax alone, in every dtype.
    reference = {c: expected_bias[c].astype(np.float64) for c in CALLS}
    expected = {c: _softmax("numpy", reference[c], masked[c], np.float64) for c in CALLS}
    # One bound for both calls: the window has the most keys (k_len >= the tokens').
    tolerance = attention_tolerance(dtype, max_seq_len, _logit_range(reference, masked))
    compute = positional.compute_dtype(dtype)
    checked = []
    for result in run_tokens(names, token_table, token_ids):
        be = backends.get(result.backend)
        with lockstep.precision(be.name, compute.name):
            biases = {c: bias(be, c) for c in CALLS}
            attention = {
                c: be.to_numpy(_softmax(be.name, biases[c], masked[c], compute)) for c in CALLS
            }
        biases = {c: be.to_numpy(b) for c, b in biases.items()}
        identical = all(same_bits(biases[c], expected_bias[c]) for c in CALLS)
        diff = max(float(np.abs(attention[c] - expected[c]).max()) for c in CALLS)
        checked.append(Checked(be.name, result, biases, attention, identical, diff, tolerance))
    return BiasRun(
        scheme,
        num_heads,
        token_ids,
        start,
        max_seq_len,
        checked,
        masked,
        bias_table,
        _heading(scheme, num_heads, len(token_ids), stop, seed),
        f"vocab_size {vocab_size}, dim {dim}, {dtype.name} (softmax in {compute.name}), "
        f"seed {seed}, num_heads {num_heads}; token_ids {tuple(map(int, token_ids))} at positions "
        f"{start}..{stop - 1}; window drawn: max_seq_len {max_seq_len} positions",
    )


def attention_tolerance(dtype, num_keys: int, logit_range: float) -> float:
    """Largest |softmax - float64 softmax of the same bias| allowed, for ``num_keys`` keys
    and finite logits spanning at most ``logit_range``.

    Derivation, with c = eps of the compute dtype (float32, or float64 for float64 biases;
    a 16-bit bias is exact in float32, so widening it moves nothing):
    - Moving every logit by at most delta moves each probability p by at most
      (exp(2 delta) - 1) p: the numerator and the sum each move by a factor within
      exp(+-delta). Two moves add up to delta: subtracting the row's maximum, rounded once
      (c/2 * logit_range), and exp's error of at most 2 ulp (2c relative, the same as a
      logit moved by 2c).
    - Summing num_keys terms, in any order, and the division: (num_keys + 1) * c/2 relative
      to p <= 1.
    - The float64 reference makes the same errors with eps of float64; they are added.
    """

    def bound(eps: float) -> float:
        delta = eps / 2 * logit_range + 2 * eps
        return math.expm1(2 * delta) + (num_keys + 1) * eps / 2

    c = float(ml_dtypes.finfo(positional.compute_dtype(dtype)).eps)
    return bound(c) + bound(float(np.finfo(np.float64).eps))


def _logit_range(reference: dict, masked: dict) -> float:
    """The largest spread of the logits a softmax row sees: max - min of the unmasked bias."""
    spreads = []
    for call, r in reference.items():
        kept = r[:, ~masked[call]]
        spreads.append(float(kept.max() - kept.min()))
    return max(spreads)


def _softmax(name: str, bias, masked: np.ndarray, compute):
    """Softmax over the keys (the last axis) by the framework's own function, in ``compute``,
    after the causal mask: ALiBi's bias already holds it as -inf; T5's one-way bias gives
    later keys bucket 0, and its decoder masks them."""
    if name == "torch":
        import torch

        scores = bias.to(getattr(torch, np.dtype(compute).name))
        masked = torch.from_numpy(masked).to(scores.device)
        return torch.softmax(scores.masked_fill(masked, -math.inf), dim=-1)
    if name == "jax":
        import jax
        import jax.numpy as jnp

        scores = jnp.asarray(bias).astype(compute)
        return jax.nn.softmax(jnp.where(masked, -jnp.inf, scores), axis=-1)
    scores = np.where(masked, -np.inf, np.asarray(bias).astype(compute))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _heading(scheme: str, num_heads: int, length: int, stop: int, seed: int) -> list[str]:
    shape = f"q_len={length}, k_len={stop}"
    if scheme == "alibi":
        bias = (
            f"scores + alibi_bias(num_heads={num_heads}, {shape}, causal=True): "
            "-slope * (query - key), -inf for keys after the query"
        )
    else:
        bias = (
            f"scores + t5_bias(bias_table ({T5_BUCKETS}, {num_heads}), {shape}, "
            "bidirectional=False): bias_table[bucket(key - query)], keys after the query "
            f"masked; the table is random (standard normal, seed {seed}), not trained"
        )
    return [
        "x = token_table[token_ids]  (no position in the vectors)",
        bias,
        (
            "attention = softmax over keys of the bias alone (content scores set to 0): "
            "what each head looks at from position alone"
        ),
    ]
