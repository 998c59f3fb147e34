"""The serving engines' own code, pinned: the files of a release that the matrix runs, fetched
from PyPI by ``make install-conformance`` into the environment, never at run time.

An engine's wheel is built for a GPU and brings its own torch (vLLM 0.33.0's is 336 MB and
asks another torch than the project's pinned CPU build); its rotary code is Python over torch
alone. So the matrix takes that code from the release's own source archive, checked against
its sha256, and keeps only the files it runs, under the environment's prefix:

    <sys.prefix>/share/embedding-parity/engines/vllm-0.33.0/vllm/model_executor/layers/...

    python -m embedding_parity.conformance.engines fetch vllm

Nothing is written outside that folder: the archive is read from a private temporary folder
that every exit removes, and the files are renamed into place whole or not at all."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    name: str  # the package, as versions() and a row name it
    version: str
    url: str  # the release's source archive on PyPI
    sha256: str
    members: tuple[str, ...]  # the folders and files kept, under the archive's top folder


ENGINES = {
    e.name: e
    for e in (
        Engine(
            "vllm",
            "0.33.0",
            "https://files.pythonhosted.org/packages/f7/25/"
            "aa5684e9c59d6fc75f78926b7f15e8d9adc7de2d9e6e7575b80776ad8169/vllm-0.33.0.tar.gz",
            "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112",
            ("vllm/model_executor/layers/rotary_embedding/", "LICENSE"),
        ),
    )
}
PINNED = "PINNED"  # the file that says a folder is whole: the engine, its version and sha256
LARGEST_ARCHIVE = 1 << 28  # bytes; vLLM's source archive is 47 MB


def root() -> str:
    return os.path.join(sys.prefix, "share", "embedding-parity", "engines")


def folder(name: str) -> str:
    engine = ENGINES[name]
    return os.path.join(root(), f"{engine.name}-{engine.version}")


def installed(name: str) -> str | None:
    """The pinned version of engine ``name`` if its files are in place, else None."""
    if name not in ENGINES:
        return None
    return ENGINES[name].version if os.path.isfile(os.path.join(folder(name), PINNED)) else None


def fetch(name: str) -> str:
    """Engine ``name``'s files in place (a no-op when they are); returns their folder."""
    engine, into = ENGINES[name], folder(name)
    if installed(name):
        return into
    os.makedirs(root(), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ep-engine-") as scratch:
        archive = os.path.join(scratch, os.path.basename(engine.url))
        _download(engine, archive)
        staged = os.path.join(scratch, "staged")
        _extract(engine, archive, staged)
        with open(os.path.join(staged, PINNED), "w", encoding="utf-8") as out:
            out.write(f"{engine.name} {engine.version} sha256:{engine.sha256}\n{engine.url}\n")
        if os.path.isdir(into):  # a folder left without its PINNED file: not whole
            shutil.rmtree(into)
        shutil.move(staged, into)  # a rename where the scratch folder shares the disk
    return into


def _download(engine: Engine, path: str) -> None:
    digest, size = hashlib.sha256(), 0
    with urllib.request.urlopen(engine.url, timeout=120) as response, open(path, "wb") as out:
        while chunk := response.read(1 << 20):
            size += len(chunk)
            if size > LARGEST_ARCHIVE:
                raise OSError(f"{engine.url}: over {LARGEST_ARCHIVE} bytes; not the pinned archive")
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != engine.sha256:
        raise OSError(
            f"{engine.url}: sha256 {digest.hexdigest()}, where the pin is {engine.sha256}"
        )


def _extract(engine: Engine, archive: str, into: str) -> None:
    """The archive's members under ``engine.members`` (regular files only, no links, no path
    that leaves ``into``), without the archive's top folder."""
    top = f"{engine.name}-{engine.version}/"
    os.makedirs(into)
    with tarfile.open(archive, "r:gz") as tar:
        kept = 0
        for member in tar:
            name = member.name.removeprefix(top)
            if member.name == name or not member.isfile():
                continue
            if not any(
                name == m or (m.endswith("/") and name.startswith(m)) for m in engine.members
            ):
                continue
            target = os.path.normpath(os.path.join(into, name))
            if not target.startswith(into + os.sep):
                raise OSError(f"{archive}: member {member.name!r} leaves its folder")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with tar.extractfile(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
            kept += 1
    if not kept:
        raise OSError(f"{archive}: none of {', '.join(engine.members)} in it")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "fetch" or any(n not in ENGINES for n in argv[1:]):
        print(f"usage: python -m {__spec__.name} fetch {' '.join(ENGINES)}", file=sys.stderr)
        return 2
    for name in argv[1:]:
        print(f"{name} {ENGINES[name].version}: {fetch(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
