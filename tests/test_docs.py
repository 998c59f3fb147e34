"""The README and docs stay true: every relative link and anchor resolves, and every figure
the prose quotes from a committed record (docs/*.json) is that record's, as rounded there."""

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
    f64, f32 = largest(t64["drift"]), largest(t32["drift"])
    learned = np.asarray(t32["drift"]["learned"])
    stretches = [
        e(learned[a:b].max(), 1 if a == 0 else 2)
        for a, b in ((0, 50), (50, 100), (100, 200), (200, 300))
    ]
    none = [f"{r['loss'][-1]:.5f}" for r in t32["runs"] if r["scheme"] == "none"]
    yield (
        "Measured largest relative differences over 300 steps: "
        + ", ".join(f"{s} {f64[s]}" for s in SCHEMES)
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
