"""A synthetic language with local structure, for "train short, test long".

Text drifts between topics: a hidden topic (one of TOPICS) emits each token, and switches to
another topic with probability SWITCH per token (a sticky hidden Markov chain). Each topic
owns WORDS tokens and spends OWN of its probability on them, the rest on the whole
vocabulary, so one token is weak evidence and the best guess of the next token weighs the
last dozen or so tokens, the recent ones most. Text is the same at every length, so a model
that has learned the local rule should predict as well at 8x its training length as at 1x;
one that averages over everything it sees gets worse as the text grows.

The Bayes-optimal loss (the forward algorithm on the true chain) is the floor every model
is measured against.
"""

from __future__ import annotations

import numpy as np

TOPICS, WORDS = 8, 4  # 8 topics of 4 own tokens: a vocabulary of 32
OWN = 0.5  # probability mass a topic puts on its own tokens
SWITCH = 1 / 16  # probability per token of moving to another topic
VOCAB = TOPICS * WORDS


def emissions() -> np.ndarray:
    """(TOPICS, VOCAB) p(token | topic)."""
    e = np.full((TOPICS, VOCAB), (1 - OWN) / VOCAB)
    for topic in range(TOPICS):
        e[topic, topic * WORDS : (topic + 1) * WORDS] += OWN / WORDS
    return e


def transitions() -> np.ndarray:
    """(TOPICS, TOPICS) p(next topic | topic)."""
    a = np.full((TOPICS, TOPICS), SWITCH / (TOPICS - 1))
    np.fill_diagonal(a, 1 - SWITCH)
    return a


def sample(count: int, length: int, *, seed: int) -> np.ndarray:
    """(count, length) int64 token ids, from NumPy's seeded generator."""
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(emissions(), axis=1)
    topic = rng.integers(TOPICS, size=count)
    ids = np.empty((count, length), dtype=np.int64)
    for t in range(length):
        ids[:, t] = (rng.random((count, 1)) < cumulative[topic]).argmax(axis=1)
        moves = rng.random(count) < SWITCH
        topic = np.where(moves, (topic + rng.integers(1, TOPICS, size=count)) % TOPICS, topic)
    return ids


def optimal_loss(ids: np.ndarray) -> float:
    """Mean next-token cross-entropy (nats) of the Bayes-optimal predictor on ids (n, T + 1),
    over the same T predictions a model makes: token t + 1 from tokens 0 .. t."""
    e, a = emissions(), transitions()
    belief = np.full((len(ids), TOPICS), 1 / TOPICS)  # p(topic of the next token | past)
    losses = []
    for t in range(ids.shape[1] - 1):
        belief = belief * e[:, ids[:, t]].T  # p(topic_t | tokens 0..t), unnormalised
        belief = belief / belief.sum(axis=1, keepdims=True) @ a  # topic of token t + 1
        predicted = belief @ e  # (n, VOCAB)
        losses.append(-np.log(predicted[np.arange(len(ids)), ids[:, t + 1]]))
    return float(np.mean(losses))
