"""The benchmark runs, records what it promises, and times only correct code.

No timing is asserted: this machine is shared and noisy (see benchmarks/).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import backends
from benchmarks import lookup_add
from tests.conftest import fresh_machine, left_behind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = {
    "backend",
    "variant",
    "shape",
    "dtype",
    "threads",
    "median_us",
    "iqr_us",
    "gbps",
    "copy_fraction",
    "faults_per_call",
}
VARIANTS = {
    "numpy": {"idiomatic", "take_out", "take_out_chunked", "suite", "empty"},
    "torch": {"idiomatic", "index_select_out", "compile", "suite", "empty"},
    "jax": {"idiomatic", "promise_in_bounds", "donate", "suite", "empty"},
}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--shapes",
            "seed",  # the machinery at one shape: torch.compile compiles afresh for each (14 s)
            "--repeats",
            "1",
            "--json",
            str(out / "bench.json"),
            "--png",
            str(out / "bench.png"),
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        # A fresh machine: torch.compile's cache and Matplotlib's font list go nowhere else.
        # No precompiled header: it pays for itself over many kernels, not one (4 s here).
        env={
            **fresh_machine(out),
            "MPLBACKEND": "Agg",
            "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0",
        },
    )
    assert done.returncode == 0, done.stderr
    assert left_behind(out) == []
    return done, json.loads((out / "bench.json").read_text()), out


@pytest.mark.slow
def test_quick_run_records_every_backend_and_variant(quick_run):
    _, report, _ = quick_run
    assert {"date", "machine", "versions", "settings", "records"} <= set(report)
    assert report["settings"]["threads"] == 1
    records = report["records"]
    assert all(FIELDS <= set(r) for r in records)
    assert list(report["settings"]["shapes"]) == ["seed"]
    found = {(r["backend"], r["variant"]) for r in records}
    expected = {("baseline", "copy"), ("baseline", "gather")}
    expected |= {(b, v) for b in backends.names() for v in VARIANTS[b]}
    assert found == expected
    copy = [r for r in records if r["variant"] == "copy"]
    assert all(r["copy_fraction"] == 1.0 and r["median_us"] > 0 for r in copy)
    timed = [r for r in records if r["variant"] != "empty"]
    assert all(r["gbps"] > 0 and r["copy_fraction"] > 0 for r in timed)


@pytest.mark.slow
def test_quick_run_prints_a_table_and_draws_a_chart(quick_run):
    done, _, out = quick_run
    assert "copy_fraction" in done.stdout and "faults/call" in done.stdout
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", backends.names())
@pytest.mark.parametrize("shape", ["seed", "small"])
def test_suite_variant_equals_idiomatic_bitwise(name, shape):
    problem = lookup_add.problem(lookup_add.SHAPES[shape], "float32")
    found = {v.name: v for v in lookup_add.variants(name, *problem)}
    be = backends.get(name)
    suite, idiomatic = be.to_numpy(found["suite"].call()), be.to_numpy(found["idiomatic"].call())
    assert suite.dtype == idiomatic.dtype and suite.shape == idiomatic.shape
    np.testing.assert_array_equal(suite, idiomatic)


def test_a_wrong_variant_is_refused_before_timing():
    problem = lookup_add.problem(lookup_add.SHAPES["seed"], "float32")
    token_table, position_table, ids, start = problem
    expected = token_table[ids] + position_table[start : start + ids.shape[-1]]
    length = ids.shape[-1]
    # Positions from 0 instead of start: plausible numbers, wrong rows.
    wrong = lookup_add.Variant(
        "numpy", "off_by_one", lambda: token_table[ids] + position_table[:length]
    )
    with pytest.raises(RuntimeError, match="numpy/off_by_one differs from the NumPy expression"):
        lookup_add.check(wrong, expected)
    lookup_add.check(lookup_add.variants("numpy", *problem)[0], expected)  # the right one passes


@pytest.mark.slow
def test_records_follow_their_definitions(quick_run):
    _, report, _ = quick_run
    shapes = {name: lookup_add.Shape(**s) for name, s in report["settings"]["shapes"].items()}
    for r in report["records"]:
        if r["gbps"] is None:
            continue
        shape = shapes[r["shape"]]
        moved = (
            2 * shape.out_bytes(4) if r["variant"] in ("copy", "gather") else shape.fused_bytes(4)
        )
        assert r["gbps"] == pytest.approx(moved / (r["median_us"] * 1e-6) / 1e9, rel=1e-9)
        assert r["faults_per_call"] >= 0 and r["iqr_us"] >= 0


@pytest.mark.slow
def test_backward_benchmark_checks_and_records_every_variant(tmp_path):
    from benchmarks import backward

    out = tmp_path / "backward.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.backward",
            "--shape",
            "small",
            "--repeats",
            "1",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = json.loads(out.read_text())["records"]
    expected = {
        "numpy": {"dense", "sparse_add_at", "sparse_reduceat", "sparse_passes"},
        "torch": {"dense", "sparse", "sparse_adam"},
        "jax": {"dense", "sparse"},
    }
    for name in backends.names():
        mine = [r for r in records if r["backend"] == name]
        assert {r["variant"] for r in mine} == expected[name] | set(backward.API)
        assert all(r["median_ms"] > 0 and r["bytes_touched"] > 0 for r in mine)
        # the API's sparse gradient is timed against its dense one, not the dense step
        api = {r["variant"]: r for r in mine if r["variant"] in backward.API}
        assert api["gradients()"]["speedup_vs_dense"] == 1.0
    shape = lookup_add.SHAPES["small"]
    assert backward.bytes_touched("sparse", shape) < backward.bytes_touched("dense", shape)
    assert backward.bytes_touched(backward.API[1], shape) < backward.bytes_touched(
        backward.API[0], shape
    )


def test_a_wrong_backward_step_is_refused():
    from benchmarks import backward

    table = np.zeros((4, 2), np.float32)
    ids, upstream = np.array([[1, 1]]), np.ones((1, 2, 2), np.float32)
    with pytest.raises(RuntimeError, match="is not the float64 step"):
        backward.check("numpy/wrong", table, table, ids, upstream)  # no step taken


def test_gradient_agreement_measures_every_gradient():
    from benchmarks import gradient_agreement

    found = gradient_agreement.differences("float64")
    assert set(found) == {"token", "token, scaled", "position"}
    assert all(0 <= d < 1e-12 and n in backends.names() for d, n in found.values())


DECODE_VARIANTS = {
    "numpy": {"idiomatic", "suite", "suite_out"},
    "torch": {"idiomatic", "suite", "suite_out"},
    "jax": {"idiomatic", "suite", "suite_out", "jit_unchecked", "jit_checked"},
}


@pytest.mark.slow
def test_decode_benchmark_records_every_variant_and_the_profile(tmp_path):

    out = tmp_path / "decode.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.decode",
            "--quick",
            "--shapes",
            "seed",  # the machinery at the smallest shape; decode-b1's table costs seconds
            "--repeats",
            "1",
            "--profile",
            "--json",
            str(out),
            "--png",
            str(tmp_path / "decode.png"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "vs idiomatic" in done.stdout and "where the time goes" in done.stdout
    report = json.loads(out.read_text())
    assert list(report["settings"]["shapes"]) == ["seed"]
    for shape in ["seed"]:
        for name in backends.names():
            mine = [r for r in report["records"] if r["shape"] == shape and r["backend"] == name]
            assert {r["variant"] for r in mine} == DECODE_VARIANTS[name]
            assert all(r["median_us"] > 0 and r["vs_idiomatic"] > 0 for r in mine)
            assert next(r for r in mine if r["variant"] == "idiomatic")["vs_idiomatic"] == 1.0
            # the checked step is held to the unchecked one, and only it
            ratios = {r["variant"]: r["vs_unchecked"] for r in mine}
            assert all(v is None for k, v in ratios.items() if k != "jit_checked")
            assert name != "jax" or ratios["jit_checked"] > 0
            steps = {
                r["variant"]
                for r in report["profile"]
                if r["shape"] == shape and r["backend"] == name
            }
            assert {"idiomatic", "suite"} < steps
    assert (tmp_path / "decode.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_wrong_decode_variant_is_refused_before_timing():
    from benchmarks import decode

    shape = decode.SHAPES["seed"]
    token_table, position_table = backends.shared_weights(100, 10, 16)
    rng = np.random.default_rng(0)

    def from_zero(ids, start):  # positions from 0 instead of start: plausible, wrong
        return token_table[ids] + position_table[: ids.shape[-1]]

    wrong = decode.Variant("numpy", "from_zero", from_zero, lambda ids: ids)
    with pytest.raises(RuntimeError, match="numpy/from_zero differs from the NumPy expression"):
        decode.check(wrong, shape, token_table, position_table, rng)
    for name in backends.names():  # every real variant passes the same check
        for v in decode.variants(name, token_table, position_table, shape):
            decode.check(v, shape, token_table, position_table, rng)


def test_the_sharding_model_on_paper():
    from benchmarks import sharding

    # A ring all-reduce sends 2 (N - 1) / N of the result per device, an all-gather half that.
    assert sharding.moved("rows", 1000, 10, 4, 2) == 2 * 3 * 1000 * 10 * 2 // 4
    assert sharding.moved("columns", 1000, 10, 4, 2) == 3 * 1000 * 10 * 2 // 4
    assert sharding.moved("rows", 1000, 10, 1, 2) == 0  # one shard: nothing to send
    # Padded shards: 50257 rows over 4 is 12565 rows each; 768 columns over 4 is 192.
    assert sharding.per_device("rows", 50257, 768, 4, 4) == 12565 * 768 * 4
    assert sharding.per_device("columns", 50257, 768, 4, 4) == 50257 * 192 * 4
    paper = sharding.on_paper(tokens=16384)
    llama = {(p["shards"], p["strategy"]): p for p in paper if p["model"].startswith("LLaMA-3")}
    assert llama[8, "rows"]["table_bytes"] == 128256 * 4096 * 2  # 1 GiB in bfloat16
    assert llama[8, "rows"]["bytes_per_device"] == 16032 * 4096 * 2
    assert llama[64, "columns"]["bytes_per_device"] == 128256 * 64 * 2
    assert (
        llama[8, "columns"]["bytes_sent_per_device_per_call"] * 2
        == (llama[8, "rows"]["bytes_sent_per_device_per_call"])
    )


def test_the_kit_benchmark_times_conforming_checks(monkeypatch):
    from benchmarks import kit

    monkeypatch.setattr(kit, "ROUNDS", 1)
    for name in backends.names():
        for kind, function in kit.targets(name).items():
            seconds, conforms = kit.check_seconds(name, kind, function)
            assert conforms and seconds > 0
    assert 0 < kit.plugin_import() < 5


@pytest.mark.slow
def test_the_quantized_benchmark_measures_checks_and_draws(tmp_path, monkeypatch):
    """benchmarks.quantized at a small shape of its own: every backend held to gguf.quants
    before it is timed, a record per variant, each form's peak memory in a fresh process, and
    the picture."""
    from benchmarks import lookup_add, quantized

    monkeypatch.setitem(lookup_add.SHAPES, "tiny", lookup_add.Shape(300, 256, 2, 16))
    records = quantized.measure("tiny", "Q4_K", ["numpy", "torch", "jax"], rounds=2)
    variants = {"copy", "float32 gather", "numpy", "torch", "jax"}
    built = quantized.ggml_missing() is None  # ggml's row, held to gguf.quants, where it is built
    if built:
        variants.add("ggml_get_rows")
    assert {r["variant"] for r in records} == variants
    copy = next(r for r in records if r["variant"] == "copy")
    assert copy["copy_fraction"] == 1.0 and copy["bytes_read"] == 2 * 16 * 144
    by = {r["variant"]: r for r in records}
    assert by["float32 gather"]["per_gather"] == 1.0
    if built:
        assert by["ggml_get_rows"]["per_ggml"] == 1.0
    else:  # no ratio to a row that is missing
        assert by["numpy"]["per_ggml"] is None
    peak = quantized.probe("tiny", "Q8_0", "quantized", "numpy")
    assert peak["table_mb"] == 300 * 8 * 34 / 1e6 and peak["peak_mb"] >= 0
    peaks = [
        {
            "shape": "tiny",
            "kind": "Q4_K",
            "backend": b,
            "form": form,
            "peak_mb": 1.0,
            "table_mb": 1.0,
        }
        for b in ("numpy", "torch", "jax")
        for form in ("quantized", "float32")
    ]
    quantized.chart(records, peaks, str(tmp_path / "q.png"), "tiny")
    assert (tmp_path / "q.png").stat().st_size > 10_000
    assert "float32 gather" in quantized.format_tables(records, peaks)
