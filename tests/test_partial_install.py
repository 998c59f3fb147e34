"""A partial install degrades row by row: without gguf (the models extra) or without
transformers (the test and conformance extras), `compare.py check --known` still prints its
matrix, each row that needs the missing package (its library's, or its kind's reference's:
quantized_lookup is held to gguf.quants.dequantize) names it and the extra that adds it, and
the other rows give their verdicts; a check of a kind whose reference needs it is refused in
one line.

Nothing is uninstalled (other tests share the environment): each command runs in a child
Python that cannot see the package, as after ``pip uninstall``. A sitecustomize.py on the
child's PYTHONPATH, which Python imports at startup and the kit's worker processes inherit,
swaps the path finder on sys.meta_path for one that finds neither the package's modules
(``import gguf`` raises ModuleNotFoundError, ``importlib.util.find_spec`` gives None) nor its
metadata (``importlib.metadata.version`` raises PackageNotFoundError): the two ways the kit
asks whether a package is there. A stub package that raises ImportError would leave the
metadata saying it is installed, which no real partial install does."""

import os
import re
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import fresh_machine, left_behind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HIDING = '''
import importlib.machinery
import sys

HIDDEN = {hidden!r}


class Hiding(importlib.machinery.PathFinder):
    """The path finder, blind to HIDDEN: its modules and its metadata."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] == HIDDEN:
            return None
        return super().find_spec(name, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        for found in super().find_distributions(*args, **kwargs):
            if found.metadata["Name"] != HIDDEN:
                yield found


sys.meta_path[:] = [
    Hiding if finder is importlib.machinery.PathFinder else finder for finder in sys.meta_path
]
'''

NEITHER = "embedding-parity numpy (lookup)"  # a control row that needs neither package
QUANTIZED = "embedding-parity numpy (quantized_lookup)"  # a control row held to gguf
GGUF_EMBEDDING = "transformers GgufEmbedding"  # needs transformers, and gguf for its reference
PRESET = "embedding-parity numpy (rope at llama-3.2-1b)"  # a config read without transformers


def without(package: str, tmp_path, *argv, **variables) -> subprocess.CompletedProcess:
    """compare.py ARGV in a child that cannot see ``package``, on a fresh machine whose HOME
    and TMPDIR it must leave empty, with environment ``variables`` set too."""
    hiding = tmp_path / "hiding"
    hiding.mkdir()
    (hiding / "sitecustomize.py").write_text(HIDING.format(hidden=package))
    machine = tmp_path / "machine"
    machine.mkdir()
    env = fresh_machine(machine) | variables
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hiding), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "compare.py"), *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert left_behind(machine) == []
    return done


def adds(package: str) -> str:
    """What the kit must say adds ``package``: the extras pyproject.toml lists it in."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as project:
        extras = tomllib.load(project)["project"]["optional-dependencies"]
    named = re.compile(rf"{package}\b")  # "gguf>=0.10"
    listing = [e for e, wanted in extras.items() if any(named.match(w) for w in wanted)]
    return f"{package} is not installed (the {' or '.join(listing)} extra adds it)"


def known(package: str, tmp_path, *rows) -> tuple[int, dict, dict]:
    """(exit status, {row: its progress line}, {row: its line of the matrix}) of --known on
    ``rows``, run without ``package``."""
    done = without(package, tmp_path, "check", "--known", "--rows", *rows)
    assert done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    progress = {r: next(line for line in lines if _progress_of(r, line)) for r in rows}
    table = {r: next(line for line in lines if line.startswith(f"| {r} |")) for r in rows}
    return done.returncode, progress, table


def _progress_of(row: str, line: str) -> bool:
    """Whether ``line`` is ``row``'s progress line: "  ok   NAME (0.4 s)", "  --   NAME: why"."""
    return re.match(rf"  \S+ +{re.escape(row)}[ :]", line) is not None


def test_known_without_gguf_runs_every_other_row(tmp_path):
    status, progress, table = known("gguf", tmp_path, GGUF_EMBEDDING, QUANTIZED, NEITHER)
    # gguf is neither row's library: their kind's reference needs it
    for row in (GGUF_EMBEDDING, QUANTIZED):
        assert progress[row] == f"  --   {row}: {adds('gguf')}"
        assert "not run" in table[row]
    assert progress[NEITHER].startswith(f"  ok   {NEITHER} (")
    assert "✓ bit-identical" in table[NEITHER] and "✓ raises" in table[NEITHER]
    # the CLI's status with --known: 1 where a control row did not conform, and the quantized
    # control could not run
    assert status == 1


def test_known_without_transformers_runs_every_other_row(tmp_path):
    status, progress, table = known(
        "transformers", tmp_path, GGUF_EMBEDDING, QUANTIZED, NEITHER, PRESET
    )
    assert progress[GGUF_EMBEDDING] == f"  --   {GGUF_EMBEDDING}: {adds('transformers')}"
    assert "not run" in table[GGUF_EMBEDDING]
    for row in (QUANTIZED, NEITHER, PRESET):
        assert progress[row].startswith(f"  ok   {row} ("), progress[row]
    assert "✓ bit-identical" in table[QUANTIZED] and "not run" not in table[PRESET]
    assert status == 0  # every control row ran and conforms


@pytest.mark.parametrize(
    "argv",
    [
        # the suite's own NumPy decoding, which needs no gguf: the reference does
        ["embedding_parity.conformance.adapters.suite:quantized_lookup"],
        ["--export-cases", "cases"],
    ],
    ids=["a target", "--export-cases"],
)
def test_a_kind_whose_reference_is_missing_is_refused_in_one_line(tmp_path, argv):
    suite = {"EMBEDDING_PARITY_BACKEND": "numpy"}  # the backend the suite's target runs
    done = without("gguf", tmp_path, "check", *argv, "--kind", "quantized_lookup", **suite)
    assert done.returncode == 2  # the CLI's bad usage
    assert done.stdout == ""
    reference = "quantized_lookup's reference is gguf.quants.dequantize"
    assert done.stderr == f"compare.py check: error: {reference}: {adds('gguf')}\n"
    assert not (tmp_path / "cases").exists()
