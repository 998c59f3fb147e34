"""How far apart the backends' gradients land where summation order matters: the largest
difference from the NumPy backend, per dtype, for the token gradient (dense, and with
scale_grad_by_freq) and the position gradient (a sum over the batch).

    python -m benchmarks.gradient_agreement      # vocab 50, dim 64, B 8, T 128

About 20 terms per token row and 8 per position row; docs/learning.md has the results.
"""

from __future__ import annotations

import numpy as np

import backends
import benchmarks
from embedding_parity.drawing.table import text_table

VOCAB, DIM, BATCH, LENGTH = 50, 64, 8, 128


def differences(dtype: str, seed: int = 0) -> dict[str, tuple[float, str]]:
    """gradient -> (largest |backend - numpy|, the backend where it is)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, size=(BATCH, LENGTH))
    token_table, position_table = backends.shared_weights(VOCAB, DIM, LENGTH, dtype=dtype)
    upstream = rng.standard_normal((BATCH, LENGTH, DIM)).astype(dtype)
    found = {}
    for scale in (False, True):
        results = {}
        for name in backends.names():
            be = backends.get(name)
            layer = be.TokenPositionEmbedding(token_table, position_table, scale_grad_by_freq=scale)
            grads = be.gradients(layer, ids, upstream)
            results[name] = {k: be.to_numpy(v).astype(np.float64) for k, v in grads.items()}
        for table in ("token_table", "position_table"):
            if scale and table == "position_table":
                continue  # scaling touches the token table only
            worst = max(
                ((np.abs(results[n][table] - results["numpy"][table]).max(), n) for n in results),
                key=lambda pair: pair[0],
            )
            found[f"{table.split('_')[0]}{', scaled' if scale else ''}"] = worst
    return found


def main() -> int:
    rows = [("dtype", "token", "token, scaled", "position")]
    for dtype in backends.DTYPES:
        found = differences(dtype)
        cells = [
            f"{d:.2g} ({n})" if d else "0"
            for d, n in (found["token"], found["token, scaled"], found["position"])
        ]
        rows.append((dtype, *cells))
    print(text_table(rows))
    return 0


if __name__ == "__main__":
    benchmarks.run(main)
