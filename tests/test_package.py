"""The package as a user installs it: two top-level names, three ways to start one command
line, and every command the README and docs show still parsing (or failing as they say)."""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

import compare
from embedding_parity import cli
from tests.test_docs import DOCS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def documented_commands():
    """(file, argv, the error line shown after it or None) for every `python compare.py ...`
    line in a code block of the README and docs."""
    found = []
    for path in DOCS:
        lines = pathlib.Path(ROOT, path).read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            command = re.match(r"^(?:\$ )?(?:\.venv/bin/)?python compare\.py(.*)$", line)
            if command:
                argv = shlex.split(re.split(r"\s+#", command.group(1))[0])
                after = lines[i + 1] if i + 1 < len(lines) else ""
                shown = after if re.match(r"compare\.py[\w ]*: error: ", after) else None
                found.append(pytest.param(argv, shown, id=f"{path}:{i + 1}"))
    return found


@pytest.mark.parametrize("argv, shown_error", documented_commands())
def test_every_documented_command_parses_or_fails_as_shown(capsys, argv, shown_error):
    if shown_error is None:
        cli.parse(argv)  # raises UsageError for a flag or value the command does not take
    else:
        assert cli.main(argv) == 2
        assert capsys.readouterr().err.strip() == shown_error


def test_readme_stays_a_front_page():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as readme:
        assert len(readme.read().splitlines()) <= 300


def test_every_command_has_help(capsys):
    for argv in (["--help"], *([command, "--help"] for command in _commands())):
        with pytest.raises(SystemExit) as done:
            cli.main(argv)
        assert done.value.code == 0, argv
        assert "usage:" in capsys.readouterr().out


def _commands():
    parser = cli.build_parser()
    return list(cli._subcommands(parser))


@pytest.mark.slow
def test_the_wheel_installs_two_names_and_runs_the_seed_demo(tmp_path, capsys, monkeypatch):
    # Build from a copy, so that the build's own files (build/, *.egg-info) stay out of the tree.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(ROOT, name), source)
    for package in ("backends", "embedding_parity"):
        shutil.copytree(
            os.path.join(ROOT, package),
            source / package,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    # pip asks `rustc --version` for its user agent, and rustup's rustc writes ~/.rustup.
    (tmp_path / "home").mkdir()
    pip_env = {**os.environ, "HOME": str(tmp_path / "home")}
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp_path / "wheel", source],
        check=True,
        cwd=tmp_path,
        env=pip_env,
        timeout=300,
    )
    [wheel] = (tmp_path / "wheel").glob("embedding_parity-*.whl")
    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", site, wheel],
        check=True,
        env=pip_env,
        timeout=300,
    )
    names = {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")} - {"bin"}
    assert names == {"backends", "embedding_parity"}
    assert (site / "embedding_parity" / "page" / "explorer.js").is_file()  # package data
    env = {**os.environ, "PYTHONPATH": str(site), "MPLBACKEND": "Agg"}
    outputs = []
    commands = ([site / "bin" / "embedding-parity"], [sys.executable, "-m", "embedding_parity"])
    for command in commands:
        run = tmp_path / f"run{len(outputs)}"
        run.mkdir()
        done = subprocess.run(
            command, cwd=run, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr
        assert (run / "compare.png").is_file()
        outputs.append(done.stdout.replace(str(run), "RUN"))
    # and compare.py's own run of the clone, here in-process: one program, three ways to start it
    here = tmp_path / "run2"
    here.mkdir()
    monkeypatch.chdir(here)
    capsys.readouterr()
    assert compare.main([]) == 0
    outputs.append(capsys.readouterr().out.replace(str(here), "RUN"))
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0].startswith("x = token_table[token_ids] + position_table[0:4]\n")
    assert "picture: RUN/compare.png\n" in outputs[0]
    imported = subprocess.run(
        [sys.executable, "-c", "import embedding_parity; print(embedding_parity.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert imported.stdout.startswith(str(site))  # the wheel's copy ran, not the clone's


@pytest.mark.parametrize(
    "missing, argv, says",
    [
        (
            ("matplotlib", "torch", "jax"),
            [],
            (
                "the pictures need Matplotlib, which is not installed: "
                "pip install 'embedding-parity[plot]'"
            ),
        ),
        (
            ("torch",),
            ["--backends", "torch"],
            (
                "backend 'torch' needs the torch package, which is not installed: "
                "pip install 'embedding-parity[torch]' (in a clone of the repository, "
            ),
        ),
    ],
)
def test_without_its_extras_the_installed_command_names_the_one_to_install(
    tmp_path, missing, argv, says
):
    # `pip install embedding-parity` brings NumPy alone. A None in sys.modules makes Python's
    # import raise what a missing package raises (ModuleNotFoundError, with its name), and
    # find_spec, which backends.names() asks, answer None.
    hide = f"import sys; sys.modules.update(dict.fromkeys({missing!r})); "
    done = subprocess.run(
        [sys.executable, "-c", f"{hide}from embedding_parity import cli; sys.exit(cli.console())"]
        + argv,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"embedding-parity: error: {says}"), done.stderr
    assert done.stderr.count("\n") == 1


def test_the_files_scheduled_first_are_test_files():
    """conftest.LONGEST_FIRST orders the workers' files by name: a renamed file would
    silently drop back to the end of the run."""
    from tests import conftest

    here = os.path.dirname(os.path.abspath(__file__))
    named = set(conftest.LONGEST_FIRST)
    assert len(named) == len(conftest.LONGEST_FIRST)
    assert named <= {name for name in os.listdir(here) if name.startswith("test_")}
