"""Benchmarks of the lookup-add; run ``python -m benchmarks --help``."""

import sys

from embedding_parity import scratch


def run(main) -> None:
    """A benchmark's command: ``main()`` in one private temporary folder that also holds the
    frameworks' caches (torch.compile's, Matplotlib's), removed on every way out; its status."""
    with scratch.private_folder(prefix="embedding-parity-bench-"):
        status = main()
    sys.exit(status)
