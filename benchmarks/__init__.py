"""Benchmarks of the lookup-add; run ``python -m benchmarks --help``."""
