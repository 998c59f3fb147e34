"""The installed versions of packages, read from their metadata without importing them: what
a report names beside a production path's verdicts and a matrix row's."""

from __future__ import annotations

import importlib.metadata

from embedding_parity.conformance import engines


def versions(packages) -> dict:
    """{package: installed version or None} of ``packages`` (an engine: its pinned files'
    version, ``engines``)."""
    found = {}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:  # an engine's pinned files, or none
            found[package] = engines.installed(package)
    return found
