"""The README and docs stay true: every relative link and anchor resolves, every figure the
prose quotes from a committed record (docs/*.json) is that record's, as rounded there, and
every table of a command's flags names the flags its parser has."""

import functools
import glob
import json
import os
import pathlib
import re

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", *sorted(glob.glob("docs/*.md", root_dir=ROOT))]
SCHEMES = ("none", "learned", "sinusoidal", "rope", "alibi", "t5")


def anchors(path: str) -> set[str]:
    """The anchors GitHub gives a page's headings (outside code blocks): lowercased, every
    character but letters, digits, spaces, hyphens and underscores dropped, spaces made
    hyphens, a repeated heading numbered -1, -2 ...; and any <a id> or <a name>."""
    found, fenced = set(), False
    text = pathlib.Path(ROOT, path).read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = re.match(r"#{1,6} (.*)", line)
        if heading and not fenced:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            numbered, n = slug, 0
            while numbered in found:
                n += 1
                numbered = f"{slug}-{n}"
            found.add(numbered)
    return found | set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", text))


def relative_links():
    """(page, target) for every link and image of the README and docs that is not a URL."""
    found = []
    for path in DOCS:
        text = pathlib.Path(ROOT, path).read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # code, not links
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
            if not re.match(r"[a-z]+:", target):
                found.append(pytest.param(path, target, id=f"{path}->{target}"))
    return found


@pytest.mark.parametrize("page, target", relative_links())
def test_every_relative_link_and_anchor_resolves(page, target):
    file, _, anchor = target.partition("#")
    path = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
    assert os.path.exists(os.path.join(ROOT, path)), f"{page} links to {path}, which is missing"
    if anchor:
        assert path.endswith(".md"), f"{page}: an anchor into {path}, which is not a page"
        assert anchor in anchors(path), f"{page}: {path} has no heading for #{anchor}"


def test_the_sharding_pages_reference_loop_runs_and_is_the_reference():
    text = pathlib.Path(ROOT, "docs/sharding.md").read_text(encoding="utf-8")
    [loop] = re.findall(r"readable reference:\n\n```python\n(.*?)```", text, re.DOTALL)
    import backends
    from embedding_parity.sharding import reference

    token_table, position_table = backends.shared_weights(100, 10, 16, seed=0)
    ids, start = np.array([5, 10, 7, 99]), 3
    run = {"np": np, "reference": reference, "token_table": token_table, "ids": ids}
    run.update(position_table=position_table, start=start, T=len(ids), dim=10)
    exec(loop, run)  # noqa: S102 (the page's own code, committed beside this test)
    expected = reference.embed(token_table, position_table, ids, start, num_shards=4)
    np.testing.assert_array_equal(run["x"], expected)


# --- figures quoted from the records -------------------------------------------------------


def record(name: str) -> dict:
    return json.loads(pathlib.Path(ROOT, "docs", name).read_text())


def prose(page: str) -> str:
    """The page with its whitespace collapsed and Markdown's bold and Unicode minus undone, so
    a phrase is found whatever its line breaks."""
    text = pathlib.Path(ROOT, page).read_text(encoding="utf-8")
    return " ".join(text.replace("**", "").replace("\u2212", "-").split())


def e(value: float, digits: int = 2) -> str:
    """``value`` as the docs write it: 6.8e-4 (``digits`` significant digits)."""
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def largest(drift: dict) -> dict:
    """{scheme: the largest relative difference between backends over the run}."""
    return {s: e(float(np.nanmax(np.asarray(drift[s], dtype=float)))) for s in SCHEMES}


def train_claims():
    t64, t32 = record("train-float64.json"), record("train-float32.json")
    f32 = largest(t32["drift"])
    learned = np.asarray(t32["drift"]["learned"])
    stretches = [
        e(learned[a:b].max(), 1 if a == 0 else 2)
        for a, b in ((0, 50), (50, 100), (100, 200), (200, 300))
    ]
    none = [f"{r['loss'][-1]:.5f}" for r in t32["runs"] if r["scheme"] == "none"]
    printed = {  # as the run prints them: "none: losses agree to 1.59e-15 (relative), ..."
        s: f"{float(np.nanmax(np.asarray(t64['drift'][s], dtype=float))):.3g}" for s in SCHEMES
    }
    yield (
        "Measured largest relative differences over 300 steps, as the run prints them "
        '("losses agree to ..."): ' + ", ".join(f"{s} {printed[s]}" for s in SCHEMES)
    )
    yield f"300 · 109 · 2.2e-16 = {e(t64['tolerance'])}"
    yield (
        f"to at most {f32['learned']} (learned), {f32['sinusoidal']} (sinusoidal), "
        f"{f32['rope']} (rope), {f32['none']} (none), {f32['alibi']} (alibi) and "
        f"{f32['t5']} (t5) over 300 steps"
    )
    yield (
        f"{stretches[0]} in 0–50, {stretches[1]} in 50–100, {stretches[2]} in 100–200, "
        f"{stretches[3]} in 200–300"
    )
    yield f"`none` ends at {none[0]}, {none[1]} and {none[2]}"
    for scheme in SCHEMES:  # the table: every backend's test accuracy, and the final loss
        runs = [r for r in t64["runs"] if r["scheme"] == scheme]
        accuracies = " | ".join(f"{r['final_test_accuracy']:.3f}" for r in runs)
        losses = {f"{r['loss'][-1]:.3f}" if scheme == "none" else e(r["loss"][-1]) for r in runs}
        [loss] = losses  # one column: the backends agree to the digits shown
        yield f"| {scheme} | {accuracies} | {loss} |"


def extrapolate_claims():
    x64, x32 = record("extrapolate-float64.json"), record("extrapolate-float32.json")
    worst64 = max(largest(x64["drift"]).values(), key=float)
    yield f"float64: the backends agree to {worst64}."
    yield f"agree across backends to at most {worst64} relative"
    yield f"against the tolerance S·n·eps = {e(x64['tolerance'], 3)}"
    yield f"In float32 they differ by at most {max(largest(x32['drift']).values(), key=float)}."
    yield from extrapolate_table(x32, decimals=4, growth=True)


def extrapolate_table(x32: dict, *, decimals: int, growth: bool):
    """The rows of a table of test loss per length (float32, one row per scheme): the losses,
    then (with ``growth``) the growth from the first length to the last, then the excess over
    the floor at both; a scheme that cannot run past its table says "error", its row only
    the losses."""
    floor = {int(n): v for n, v in x32["optimal"].items()}
    lengths = sorted(floor)
    first, last = lengths[0], lengths[-1]
    for scheme in SCHEMES:
        runs = [r for r in x32["runs"] if r["scheme"] == scheme]
        tests = [{int(n): v for n, v in r["test"].items()} for r in runs]
        shown = [
            {n: f"{v:.{decimals}f}" if isinstance(v, float) else "error" for n, v in t.items()}
            for t in tests
        ]
        assert all(s == shown[0] for s in shown), f"{scheme}: the backends differ at 4 digits"
        loss, cells = tests[0], [shown[0][n] for n in lengths]
        if isinstance(loss[last], float):
            cells += [f"{loss[last] - loss[first]:+.3f}"] if growth else []
            cells += [f"{loss[first] - floor[first]:.3f} → {loss[last] - floor[last]:.3f}"]
        yield f"| {scheme} | {' | '.join(cells)} |"
    losses = " | ".join(f"{floor[n]:.{decimals}f}" for n in lengths)
    yield f"| Bayes-optimal | {losses} |"


def readme_claims():
    t64, t32 = record("train-float64.json"), record("train-float32.json")
    x64, x32 = record("extrapolate-float64.json"), record("extrapolate-float32.json")
    yield f"(tolerance {e(t64['tolerance'])}, derived in the page below)"
    yield f"drift apart, to at most {max(largest(t32['drift']).values(), key=float)} relative"
    yield f"(float64: they agree to {max(largest(x64['drift']).values(), key=float)})"
    yield from extrapolate_table(x32, decimals=3, growth=False)


@pytest.mark.parametrize(
    "page, claim",
    [
        *[("docs/learning.md", c) for c in (*train_claims(), *extrapolate_claims())],
        *[("README.md", c) for c in readme_claims()],
    ],
)
def test_every_figure_quoted_from_a_record_is_the_records(page, claim):
    assert claim in prose(page), f"{page} should say: {claim}"


# --- tables of flags ------------------------------------------------------------------------

FLAG = r"--[a-z][\w-]*"
# The line above a table whose first column is flags: the command they belong to, and
# ", some: why" when the table names only some of them on purpose.
FLAGS_OF = re.compile(r"<!-- flags of (?P<command>[a-z ]+?)(?P<some>, some: .+)? -->")


@functools.cache
def parsers() -> dict:
    """{"demo order": its parser, ...}: every command and subcommand of compare.py."""
    from embedding_parity import cli

    return {" ".join(path[1:]): sub for path, sub in cli._all_commands(cli.build_parser())}


def flags_of(parser) -> set[str]:
    return set(parser._option_string_actions) - {"-h", "--help"}


def tables(page: str):
    """(line number, the line above, header cells, rows of cells) of each table outside code."""
    lines = pathlib.Path(ROOT, page).read_text(encoding="utf-8").splitlines()
    fenced, start = False, None
    for number, line in enumerate([*lines, ""], 1):
        fenced ^= line.startswith("```")
        if line.startswith("|") and not fenced:
            start = number if start is None else start
        elif start is not None:
            block, start = lines[start - 1 : number - 1], None
            if len(block) > 1 and re.fullmatch(r"\|[-:| ]+\|", block[1]):  # not a line of prose
                header, _, *rows = ([c.strip() for c in r.strip("|").split(" | ")] for r in block)
                yield number - len(block), lines[number - len(block) - 2], header, rows


def flag_tables() -> list[tuple[str, int, str, set[str], set[str], bool]]:
    """Every table of flags in the README and docs, a (page, line, command, flags named, flags
    it may leave out, whether it names only some on purpose) for each command it lists: a
    "command | its flags (besides ...)" table, one row per command; or a table whose first
    column is flags, of the command that the comment above it names."""
    found = []
    for page in DOCS:
        for line, above, header, rows in tables(page):
            if header[:1] == ["command"] and header[1].startswith("its flags"):
                besides = set(re.findall(FLAG, header[1]))
                for row, (first, flags, *_) in enumerate(rows, line + 2):
                    words = re.match(r"`([a-z ]+)", first).group(1).split()
                    while words and " ".join(words) not in parsers():  # `text TEXT`
                        words.pop()
                    named = set(re.findall(FLAG, flags))
                    found.append((page, row, " ".join(words), named, besides, False))
            elif any(re.match(f"`?{FLAG}", row[0]) for row in rows):
                marker = FLAGS_OF.fullmatch(above) or {"command": None, "some": None}
                named = {re.match(f"`?({FLAG})", row[0]).group(1) for row in rows}
                found.append((page, line, marker["command"], named, set(), bool(marker["some"])))
    return found


@pytest.mark.parametrize(
    "page, line, command, named, besides, some",
    [pytest.param(*table, id=f"{table[0]}:{table[1]}:{table[2]}") for table in flag_tables()],
)
def test_every_table_of_flags_names_the_parsers_flags(page, line, command, named, besides, some):
    where = f"{page} line {line}"
    assert command is not None, f"{where}: a table of flags needs <!-- flags of COMMAND --> above"
    assert command in parsers(), f"{where}: compare.py has no command {command!r}"
    flags = flags_of(parsers()[command])
    unknown = " ".join(sorted(named - flags))
    missing = "" if some else " ".join(sorted(flags - named - besides))
    assert not unknown, f"{where} names {unknown}, which compare.py {command} does not take"
    assert not missing, f"{where} leaves out {missing}, which compare.py {command} takes"


def test_every_command_with_flags_has_a_complete_table():
    listed = {table[2] for table in flag_tables() if not table[5]}
    commands = {name for name, parser in parsers().items() if flags_of(parser)}
    assert listed >= commands, f"no complete table of flags for {sorted(commands - listed)}"
