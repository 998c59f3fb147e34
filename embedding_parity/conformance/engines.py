"""The serving engines' own code, pinned: the files of a release that the matrix runs, fetched
from PyPI by ``make install-conformance`` into the environment, never at run time.

An engine's wheel is built for a GPU and brings its own torch (vLLM 0.33.0's is 336 MB and
asks another torch than the project's pinned CPU build); its rotary code is Python over torch
alone. So the matrix takes that code from the release's own source archive, checked against
its sha256, and keeps only the files it runs, under the environment's prefix:

    <sys.prefix>/share/embedding-parity/engines/vllm-0.33.0/vllm/model_executor/layers/...

    python -m embedding_parity.conformance.engines fetch vllm sglang llama-cpp-python

An engine whose code is compiled (llama.cpp's ggml) is built from its archive's sources in the
same private folder, and only what the matrix loads is kept (the libraries, their license and
headers), with llama.cpp's architecture sources that the GGUF reader's tables are held to.

Nothing is written outside that folder: the archive is read from a private temporary folder
that every exit removes, and the files are renamed into place whole or not at all."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    name: str  # the package, as versions() and a row name it
    version: str
    url: str  # the release's source archive on PyPI
    sha256: str
    members: tuple[str, ...]  # the folders and files taken, under the archive's top folder
    build: str | None = None  # what is built from them (BUILDS), kept in place of the sources


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
        # SGLang's rotary package, from its wheel (a zip: no top folder); the wheel's .so files
        # are Rust extensions of its server, none of which the rotary code imports
        Engine(
            "sglang",
            "0.5.23",
            "https://files.pythonhosted.org/packages/57/dd/"
            "0206d00b2ea5b163bbdd216e91cc4f23ea90fde8620db0a6272d4236b68e/"
            "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
            "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
            ("sglang/srt/layers/rotary_embedding/", "sglang-0.5.23.dist-info/licenses/LICENSE"),
        ),
        # llama.cpp's ggml as llama-cpp-python 0.3.36 vendors it (ggml 0.25.3): its full build
        # takes over 10 minutes here; ggml's CPU library alone about 80 s (cmake and a C++
        # compiler, which this machine's kind has). The top-level CMakeLists is configured,
        # as the package's own build does, with llama's libraries and tools off.
        Engine(
            "llama-cpp-python",
            "0.3.36",
            "https://files.pythonhosted.org/packages/ec/e9/"
            "e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/"
            "llama_cpp_python-0.3.36.tar.gz",
            "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
            tuple(
                f"vendor/llama.cpp/{m}"
                for m in ("CMakeLists.txt", "LICENSE", "cmake/", "ggml/", "src/", "include/")
                + ("vendor/",)
            ),
            build="ggml",
        ),
    )
}
PINNED = "PINNED"  # the file that says a folder is whole: the engine, its version and sha256
# What a folder keeps, numbered: a folder fetched by a kit that kept other files is fetched
# again (2: llama.cpp's architecture sources beside ggml).
LAYOUT = 2
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
    try:
        with open(os.path.join(folder(name), PINNED), encoding="utf-8") as pinned:
            whole = pinned.readline() == _pinned(ENGINES[name])
    except OSError:
        return None
    return ENGINES[name].version if whole else None


def _pinned(engine: Engine) -> str:
    """PINNED's first line: the engine, its version, its archive's sha256 and the LAYOUT."""
    return f"{engine.name} {engine.version} sha256:{engine.sha256} layout {LAYOUT}\n"


def fetch(name: str) -> str:
    """Engine ``name``'s files in place (a no-op when they are); returns their folder."""
    engine, into = ENGINES[name], folder(name)
    if installed(name):
        return into
    os.makedirs(root(), exist_ok=True)
    # the scratch folder beside the engine's: the rename into place is one step, never a copy
    with tempfile.TemporaryDirectory(prefix=".fetching-", dir=root()) as scratch:
        archive = os.path.join(scratch, os.path.basename(engine.url))
        _download(engine, archive)
        staged = os.path.join(scratch, "staged")
        _extract(engine, archive, staged)
        if engine.build:
            staged = BUILDS[engine.build](staged, scratch)
        with open(os.path.join(staged, PINNED), "w", encoding="utf-8") as out:
            out.write(f"{_pinned(engine)}{engine.url}\n")
        if os.path.isdir(into):  # a folder left without its PINNED file, or of another LAYOUT
            shutil.rmtree(into)
        os.rename(staged, into)
    return into


def _download(engine: Engine, path: str) -> None:
    import urllib.request  # the install step's alone: versions() imports this module

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
    that leaves ``into``), without a source archive's top folder."""
    os.makedirs(into)
    kept = 0
    for name, opened in _members(archive):
        if not any(name == m or (m.endswith("/") and name.startswith(m)) for m in engine.members):
            continue
        target = os.path.normpath(os.path.join(into, name))
        if not target.startswith(into + os.sep):
            raise OSError(f"{archive}: member {name!r} leaves its folder")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with opened() as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out)
        kept += 1
    if not kept:
        raise OSError(f"{archive}: none of {', '.join(engine.members)} in it")


def _members(archive: str):
    """(name, open) of each regular file of a wheel (.whl, a zip) or a source archive (.tar.gz,
    its names without the one top folder every sdist has)."""
    import tarfile
    import zipfile

    if archive.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            for info in wheel.infolist():
                if not info.is_dir() and not _zip_link(info):
                    yield info.filename, lambda info=info: wheel.open(info)
        return
    with tarfile.open(archive, "r:gz") as tar:
        top = None
        for member in tar:
            first, _, name = member.name.partition("/")
            top = top or first
            if first == top and name and member.isfile():
                yield name, lambda member=member: tar.extractfile(member)


def _zip_link(info) -> bool:
    """Whether a zip member is a symbolic link (its Unix mode, in the high 16 bits)."""
    return (info.external_attr >> 16) & 0o170000 == 0o120000


GGML_LIBRARIES = ("libggml-base.so.0", "libggml-cpu.so.0")  # by their sonames, base first


def _build_ggml(source: str, scratch: str) -> str:
    """ggml's CPU library built from the vendored llama.cpp in ``source``; returns a folder of
    the libraries (lib/), ggml's license and headers and llama.cpp's architecture sources
    (src/), the rest left behind."""
    import subprocess

    if shutil.which("cmake") is None:
        raise OSError("building ggml needs cmake (and a C++ compiler): neither is on PATH")
    top = os.path.join(source, "vendor", "llama.cpp")
    build = os.path.join(scratch, "build")
    log = os.path.join(scratch, "build.log")
    flags = [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=ON",
        "-DGGML_NATIVE=OFF",  # the CPU variant for any x86-64 with AVX2, not this one alone
        "-DGGML_OPENMP=OFF",
        "-DGGML_CCACHE=OFF",
        "-DLLAMA_CURL=OFF",
        # ggml's assert messages name their source files: named from llama.cpp's folder, not
        # from the build's temporary one
        *(f"-DCMAKE_{lang}_FLAGS=-ffile-prefix-map={top}=llama.cpp" for lang in ("C", "CXX")),
        *(
            f"-DLLAMA_BUILD_{part}=OFF"
            for part in ("COMMON", "TESTS", "TOOLS", "EXAMPLES", "SERVER", "APP")
        ),
    ]
    steps = (
        ["cmake", "-S", top, "-B", build, *flags],
        ["cmake", "--build", build, "--target", "ggml-cpu", "-j", str(os.cpu_count() or 2)],
    )
    with open(log, "w", encoding="utf-8") as out:
        for step in steps:
            done = subprocess.run(
                step, stdout=out, stderr=subprocess.STDOUT, timeout=1800, check=False
            )
            if done.returncode:
                with open(log, encoding="utf-8", errors="replace") as said:
                    lines = said.read().splitlines()
                errors = [n for n, line in enumerate(lines) if "rror" in line] or [len(lines) - 3]
                said = " ".join(line.strip() for line in lines[errors[0] : errors[0] + 3])
                raise OSError(f"building ggml failed ({' '.join(step[:2])}): {said}")
    kept = os.path.join(scratch, "kept")
    os.makedirs(os.path.join(kept, "lib"))
    for name in GGML_LIBRARIES:
        shutil.copyfile(os.path.join(build, "bin", name), os.path.join(kept, "lib", name))
    shutil.copyfile(os.path.join(top, "LICENSE"), os.path.join(kept, "LICENSE"))
    shutil.copytree(os.path.join(top, "ggml", "include"), os.path.join(kept, "include"))
    # llama.cpp's own words for what each architecture does (its loader's tensors, its graph's
    # ggml_rope_ext operands, its MLA heads; 2.4 MB): the GGUF reader's tables are held to them
    # (tests/test_gguf_owner.py)
    os.makedirs(os.path.join(kept, "src"))
    for name in ("llama-arch.cpp", "llama-model.cpp"):
        shutil.copyfile(os.path.join(top, "src", name), os.path.join(kept, "src", name))
    shutil.copytree(os.path.join(top, "src", "models"), os.path.join(kept, "src", "models"))
    return kept


BUILDS = {"ggml": _build_ggml}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "fetch" or any(n not in ENGINES for n in argv[1:]):
        print(f"usage: python -m {__spec__.name} fetch {' '.join(ENGINES)}", file=sys.stderr)
        return 2
    for name in argv[1:]:
        try:
            print(f"{name} {ENGINES[name].version}: {fetch(name)}")
        except OSError as error:
            print(f"{name} {ENGINES[name].version}: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
