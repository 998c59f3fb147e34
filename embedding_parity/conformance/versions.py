"""The installed versions of packages, read from their metadata without importing them: what
a report names beside a production path's verdicts and a matrix row's, and what says that a
package is missing and what adds it."""

from __future__ import annotations

import importlib.metadata
import re

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


def missing(packages) -> str | None:
    """The first of ``packages`` not installed, or None."""
    return next((p for p, v in versions(packages).items() if v is None), None)


def not_installed(package: str) -> str:
    """"PACKAGE is not installed (WHAT adds it)": the extras of pyproject.toml that list it, as
    the installed project's metadata gives them; else make install-conformance, which installs
    requirements-conformance.txt and fetches the engines' pinned files."""
    extras = [extra for name, extra in _extras() if name == _normalized(package)]
    adds = f"the {' or '.join(extras)} extra" if extras else "make install-conformance"
    return f"{package} is not installed ({adds} adds it)"


def _extras() -> list[tuple[str, str]]:
    """(package, extra) for each package an extra of embedding-parity lists; none where the
    project runs from a clone without being installed."""
    try:
        required = importlib.metadata.requires("embedding-parity") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found = []
    for requirement in required:  # 'gguf>=0.10; extra == "models"'
        extra = re.search(r"extra == \"([\w.-]+)\"", requirement)
        if extra:
            found.append((_normalized(re.match(r"[\w.-]+", requirement).group()), extra.group(1)))
    return found


def _normalized(name: str) -> str:
    """A distribution's name as packaging compares it (PEP 503): ruamel.yaml is ruamel-yaml."""
    return re.sub(r"[-_.]+", "-", name).lower()
