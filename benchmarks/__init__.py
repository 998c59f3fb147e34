"""Benchmarks of the lookup-add; run ``python -m benchmarks --help``."""

import sys

from embedding_parity import scratch


def run(main) -> None:
    """A benchmark's command: ``main()`` in one private temporary folder that also holds the
    frameworks' caches (torch.compile's, Matplotlib's), removed on every way out; its status,
    or compare.py's for Ctrl-C (130) and SIGTERM or SIGHUP (143, 129), with one line."""
    spec = sys.modules["__main__"].__spec__  # python -m benchmarks[.decode]
    prog = f"python -m {spec.name.removesuffix('.__main__') if spec else 'benchmarks'}"
    try:
        with scratch.private_folder(prefix="embedding-parity-bench-"):
            status = main()
    except KeyboardInterrupt as stop:  # Ctrl-C, or scratch.Terminated
        status = scratch.stopped(prog, stop)
    sys.exit(status)
