"""The installed versions of packages, read from their metadata without importing them: what
a report names beside a production path's verdicts and a matrix row's."""

from __future__ import annotations

import importlib.metadata


def versions(packages) -> dict:
    """{package: installed version or None} of ``packages``."""
    found = {}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found
