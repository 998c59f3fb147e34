"""The engines' pinned files (embedding_parity/conformance/engines.py): an archive is taken only
with its pinned sha256, only the members asked for are kept, none may leave its folder, and a
folder is whole (PINNED written) or absent."""

import hashlib
import io
import os
import tarfile
from dataclasses import replace

import pytest

from embedding_parity.conformance import engines, versions


def _archive(path, files: dict, top="eng-1.0/"):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(top + name if not name.startswith("/") else name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _engine(path, members=("pkg/rotary/",)) -> engines.Engine:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return engines.Engine("eng", "1.0", f"file://{path}", digest, members)


@pytest.fixture
def prefix(tmp_path, monkeypatch):
    monkeypatch.setattr(engines.sys, "prefix", str(tmp_path / "env"))
    return tmp_path / "env"


def test_only_the_pinned_members_are_kept_and_the_folder_is_whole(tmp_path, prefix, monkeypatch):
    archive = _archive(
        tmp_path / "eng.tar.gz",
        {"pkg/rotary/a.py": b"A = 1\n", "pkg/rotary/sub/b.py": b"", "pkg/other.py": b"no"},
    )
    monkeypatch.setitem(engines.ENGINES, "eng", _engine(archive))
    into = engines.fetch("eng")
    kept = sorted(
        os.path.relpath(os.path.join(d, f), into) for d, _, fs in os.walk(into) for f in fs
    )
    assert kept == ["PINNED", "pkg/rotary/a.py", "pkg/rotary/sub/b.py"]
    assert engines.installed("eng") == "1.0"
    assert versions.versions(["eng"]) == {"eng": "1.0"}
    assert engines.fetch("eng") == into  # in place: nothing fetched again


def test_a_folder_of_another_layout_is_fetched_again(tmp_path, prefix, monkeypatch):
    """A folder an older kit fetched keeps other files (before llama.cpp's sources): its
    PINNED names no layout or another, so it is no install and the next fetch replaces it."""
    archive = _archive(tmp_path / "eng.tar.gz", {"pkg/rotary/a.py": b"A = 1\n"})
    monkeypatch.setitem(engines.ENGINES, "eng", _engine(archive))
    into = engines.fetch("eng")
    pinned = os.path.join(into, engines.PINNED)
    with open(pinned, encoding="utf-8") as file:
        first, url = file.readlines()
    with open(pinned, "w", encoding="utf-8") as file:
        file.write(first.replace(f" layout {engines.LAYOUT}", "") + url)
    os.remove(os.path.join(into, "pkg/rotary/a.py"))
    assert engines.installed("eng") is None
    assert engines.fetch("eng") == into and os.path.isfile(os.path.join(into, "pkg/rotary/a.py"))
    assert engines.installed("eng") == "1.0"


def test_an_archive_that_is_not_the_pinned_one_is_refused(tmp_path, prefix, monkeypatch):
    archive = _archive(tmp_path / "eng.tar.gz", {"pkg/rotary/a.py": b"A = 1\n"})
    monkeypatch.setitem(engines.ENGINES, "eng", replace(_engine(archive), sha256="0" * 64))
    with pytest.raises(OSError, match="where the pin is 0000"):
        engines.fetch("eng")
    assert engines.installed("eng") is None
    assert not os.path.exists(engines.folder("eng"))


def test_a_member_that_leaves_its_folder_is_refused(tmp_path, prefix, monkeypatch):
    archive = _archive(tmp_path / "eng.tar.gz", {"pkg/rotary/../../../escape.py": b"x"})
    monkeypatch.setitem(engines.ENGINES, "eng", _engine(archive, members=("pkg/",)))
    with pytest.raises(OSError, match="leaves its folder"):
        engines.fetch("eng")
    assert not (tmp_path / "escape.py").exists()
    assert engines.installed("eng") is None


def test_an_archive_without_the_members_is_refused(tmp_path, prefix, monkeypatch):
    archive = _archive(tmp_path / "eng.tar.gz", {"pkg/other.py": b"no"})
    monkeypatch.setitem(engines.ENGINES, "eng", _engine(archive))
    with pytest.raises(OSError, match="none of pkg/rotary/"):
        engines.fetch("eng")
    assert engines.installed("eng") is None


def test_an_engine_not_in_place_has_no_version(prefix):
    assert versions.versions(["vllm"]) == {"vllm": None}


def test_a_wheels_members_are_taken_without_a_top_folder(tmp_path, prefix, monkeypatch):
    import zipfile

    wheel = tmp_path / "eng-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/rotary/a.py", "A = 1\n")
        archive.writestr("pkg/server.so", b"\x7fELF")
        archive.writestr("eng-1.0.dist-info/licenses/LICENSE", "MIT\n")
    engine = replace(_engine(wheel), members=("pkg/rotary/", "eng-1.0.dist-info/licenses/LICENSE"))
    monkeypatch.setitem(engines.ENGINES, "eng", engine)
    into = engines.fetch("eng")
    kept = sorted(
        os.path.relpath(os.path.join(d, f), into) for d, _, fs in os.walk(into) for f in fs
    )
    assert kept == ["PINNED", "eng-1.0.dist-info/licenses/LICENSE", "pkg/rotary/a.py"]
