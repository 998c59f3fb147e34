"""The house is layered: import-linter's contracts in pyproject.toml (every import, inside
functions too) hold on the source, and break, naming the import, when a circle is added."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("backends", "embedding_parity", "benchmarks")
LINT = os.path.join(os.path.dirname(sys.executable), "lint-imports")


def lint(root: str) -> subprocess.CompletedProcess:
    """lint-imports on the packages under ``root``, with its configuration, writing no cache."""
    return subprocess.run(
        [LINT, "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_contract_is_kept():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 broken" in done.stdout


@pytest.fixture
def copy(tmp_path):
    """The three packages and pyproject.toml, copied to be broken on purpose."""
    for name in PACKAGES:
        shutil.copytree(
            os.path.join(ROOT, name), tmp_path / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path)
    return tmp_path


def add_import(path, before: str, line: str) -> None:
    """Put ``line`` as the first statement of the function defined by ``before``."""
    text = path.read_text()
    assert text.count(before) == 1, before
    path.write_text(text.replace(before, f"{before}\n    {line}\n", 1))


def test_a_circle_in_the_kit_breaks_the_layers_and_is_named(copy):
    # the report reaching up to the runner, inside a function: the circle runner -> report
    report = copy / "embedding_parity" / "conformance" / "report.py"
    add_import(report, "def check_id(name: str) -> str:", "from embedding_parity.conformance import runner")
    done = lint(str(copy))
    assert done.returncode == 1, done.stdout
    said = " ".join(done.stdout.split())  # its lines are wrapped at 80 columns
    assert "embedding_parity.conformance.report is not allowed to import" in said
    assert "embedding_parity.conformance.report -> embedding_parity.conformance.runner" in said
    assert "No cycles are allowed in embedding_parity.conformance" in said
    assert ".report -> .runner (1 import)" in said


def test_a_circle_between_siblings_of_one_layer_is_found(copy):
    # two jobs importing each other: no layer is crossed, the circle alone breaks a contract
    jobs = copy / "embedding_parity" / "jobs"
    add_import(jobs / "text.py", "def main(args) -> int:", "from embedding_parity.jobs import page")
    add_import(jobs / "page.py", "def main(args) -> int:", "from embedding_parity.jobs import text")
    done = lint(str(copy))
    assert done.returncode == 1, done.stdout
    said = " ".join(done.stdout.split())
    assert "No cycles are allowed in embedding_parity.jobs" in said


def test_a_picture_importing_its_job_breaks_the_layers(copy):
    drawing = copy / "embedding_parity" / "drawing" / "table.py"
    drawing.write_text(drawing.read_text() + "\n\nfrom embedding_parity.jobs import seed  # noqa\n")
    done = lint(str(copy))
    assert done.returncode == 1, done.stdout
    said = " ".join(done.stdout.split())
    assert "embedding_parity.drawing.table -> embedding_parity.jobs.seed" in said


def test_a_module_outside_every_layer_is_refused(copy):
    (copy / "embedding_parity" / "helpers.py").write_text('"""Placed in no layer."""\n')
    done = lint(str(copy))
    assert done.returncode == 1, done.stdout
    assert "embedding_parity.helpers" in done.stdout


def drawn_layers() -> dict:
    """{container, or "the project": [layer, ...]} as docs/development.md draws them."""
    with open(os.path.join(ROOT, "docs", "development.md")) as page:
        text = page.read()
    block = text.split("<!-- layers:", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    drawn: dict[str, list[str]] = {}
    for line in block.splitlines():
        if not line.startswith(" "):
            container = drawn.setdefault(line.strip(), [])
        else:  # the layer, then its description after two or more spaces
            container.append(line.strip().split("  ", 1)[0])
    return drawn


def test_the_docs_draw_the_contracts_layers():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as file:
        contracts = tomllib.load(file)["tool"]["importlinter"]["contracts"]
    layered = {
        (c["containers"][0] if "containers" in c else "the project"): c["layers"]
        for c in contracts
        if c["type"] == "layers"
    }
    assert drawn_layers() == layered
