"""What the two demonstrations (jobs.demos) return and ``drawing.demos`` draws, with the lines
compare.py prints for them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Similarity:
    source: str
    words: list[str]  # the label of each word's token
    similarity: np.ndarray  # (n, n) cosine similarity, float64
    nearest: list[list[tuple[str, float]]]  # per word: the 5 closest rows, by label

    def lines(self) -> list[str]:
        width = max(len(w) for w in self.words)
        cell = max(8, width + 2)  # room for "-0.123" and for the longest word, with a gap
        rows = [f"cosine similarity of raw token-table rows, {self.source}"]
        rows.append(" " * width + "".join(f"{w:>{cell}}" for w in self.words))
        for word, row in zip(self.words, self.similarity, strict=True):
            rows.append(f"{word:>{width}}" + "".join(f"{v:{cell}.3f}" for v in row))
        for word, near in zip(self.words, self.nearest, strict=True):
            rows.append(f"nearest to {word}: " + ", ".join(f"{lb} {s:.3f}" for lb, s in near))
        return rows


@dataclass
class Order:
    texts: tuple[str, str]
    position: str  # how position enters: "position" (a table) or "RoPE"
    found: dict[str, dict]  # backend -> pretrained.order_demo(...)
    byte_level: bool  # the tokenizer keeps a word's leading space in its token

    def holds(self, name: str) -> bool:
        found = self.found[name]
        return found["same_without_position"] and not found["same_with_position"]

    @property
    def same_tokens(self) -> bool:
        ids = next(iter(self.found.values()))["ids"]
        return sorted(ids[0].tolist()) == sorted(ids[1].tolist())

    def lines(self) -> list[str]:
        rows = []
        if not self.same_tokens:
            labels = next(iter(self.found.values()))["labels"]
            hint = (
                "; with a byte-level BPE, give every word its leading space, "
                "e.g. ' dog bites man' ' man bites dog'"
                if self.byte_level
                else ": give the same words in another order"
            )
            rows.append(
                "note: the two texts do not tokenize to the same tokens "
                f"({labels[0]} vs {labels[1]}), so the claim cannot hold{hint}"
            )
        for name, found in self.found.items():
            rows.append(
                f"{name}: token rows only: {_same(found['same_without_position'])}; "
                f"token + {self.position}: {_same(found['same_with_position'])}"
                f"{'' if self.holds(name) else '  <- the claim fails'}"
            )
        return rows


def _same(same: bool) -> str:
    return "the same rows (reordered)" if same else "different rows"
