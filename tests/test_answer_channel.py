"""A verdict only from what the target did: every answer copied as its call returns, so that
a target answering in one reused buffer (a kernel's workspace, a port writing with out=) is
judged by each call's own answer, in every kind, in this process and in the worker; and only
answers the worker signed, so that a target writing its own answer on the worker's descriptors
(or changing a result file) is named for it and never conforms."""

import os
import sys

import numpy as np
import pytest
import torch

import compare
from backends import numpy_backend, positional, quantized
from embedding_parity import configs
from embedding_parity.conformance import api, process, runner
from embedding_parity.conformance.kinds import KINDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets")
sys.path.insert(0, TARGETS)
import buffered
import numpy_targets
import vision_resize_ports
import vision_rope_ports

BUFFERED, FORGING = (os.path.join(TARGETS, name) for name in ("buffered.py", "forging.py"))
FORGED = "wrote a forged answer on the kit's answer channel, never believed"


def _quantized_lookup(blocks, format, token_ids):
    block_size, type_size = quantized.BLOCKS[format]
    table = quantized.QuantizedTable(format, blocks, blocks.shape[1] // type_size * block_size)
    return numpy_backend.TokenPositionEmbedding(table, positions="none")(token_ids)


def _scaled_inputs(token_table, token_ids, inputs_embeds):
    scale = configs.preset("gemma-7b").options("scaled_inputs")["embedding_scale"]
    return numpy_backend.scaled_inputs(token_table, token_ids, inputs_embeds, **scale)


def _mrope_positions(input_ids, types, images, videos, seconds, mask):
    rule = positional.MROPE_POSITION_RULES["transformers 5.24"]
    return positional.mrope_positions_by(
        types, images, videos, seconds, mask, spatial_merge_size=2, tokens_per_second=2, **rule
    )


def _llama4_scale(positions, layer):
    """Llama 4 Scout's: 1/sqrt(128), times its query temperature on every fourth layer."""
    scale = np.full(len(positions), 128**-0.5)
    if (layer + 1) % 4 == 0:
        scale = scale * (1 + 0.1 * np.log1p(np.floor((positions + 1) / 8192)))
    return scale


# kind: (a correct NumPy target, the config it is checked at, the checks: two valid cases or
# more, each call's answer written into the buffer of the one before)
CORRECT = {
    "lookup": (buffered.lookup, None, ["forward float32"]),
    "quantized_lookup": (_quantized_lookup, None, ["Q8_0 rows"]),
    "scaled_inputs": (_scaled_inputs, "gemma-7b", ["ids float32", "given float32"]),
    "sinusoidal": (numpy_targets.sinusoidal, None, ["table 64 x 16", "table 64 x 64"]),
    "rope": (numpy_targets.rope, None, ["rotation float32", "long positions float32"]),
    "alibi": (numpy_targets.alibi, None, None),
    "t5": (numpy_targets.t5, None, None),
    "gradient": (numpy_targets.gradient, None, ["gradient float32"]),
    "position_ids": (
        lambda ids, mask, past: positional.position_ids(ids, mask, rule="opt", past_length=past),
        "opt-125m",
        None,
    ),
    "packed_positions": (
        lambda lengths, start: positional.packed_position_ids(lengths, start=start),
        None,
        ["packed positions from 0"],
    ),
    "bert": (
        lambda *tables_and_ids: numpy_backend.BertEmbeddings(*tables_and_ids[:3])(
            *tables_and_ids[3:]
        ),
        "bert-base-uncased",
        ["sum float32"],
    ),
    "mrope_positions": (_mrope_positions, "qwen2.5-vl-7b", None),
    "attention_scale": (
        _llama4_scale,
        "llama-4-scout",
        ["scale chunked_attention", "scale full_attention"],
    ),
    "rope2d": (vision_rope_ports.pixtral, None, ["grid 4 x 6 float32", "grid 6 x 4 float32"]),
    "rope2d_ids": (vision_rope_ports.raster_ids, None, None),
    "pos2d_resize": (
        vision_resize_ports.numpy_resize,
        None,
        ["resize float32", "identity float32"],
    ),
    "pos2d_table": (vision_resize_ports.mae_table, None, None),
    "rope_invariance": (buffered.rope, None, None),
    "lookup_invariance": (buffered.lookup, None, None),
    "rope2d_invariance": (vision_rope_ports.pixtral, None, None),
    "pos2d_resize_invariance": (vision_resize_ports.numpy_resize, None, None),
}


def test_every_kind_has_a_buffered_target():
    assert set(CORRECT) == set(KINDS)


@pytest.mark.parametrize("kind", list(CORRECT))
def test_a_correct_target_answering_in_one_buffer_conforms_in_process(kind):
    """Every case is asked before any is judged, and an invariance composes its calls'
    answers after the last: kept as views, each answer would be the last call's."""
    function, config, checks = CORRECT[kind]
    report = api.check(
        buffered.buffered(function), kind, config=config, checks=checks, framework="numpy"
    )
    assert report.conforms, [(c.check, c.detail) for c in report.checks]


@pytest.mark.parametrize(
    "kind, wrong",
    [
        ("lookup", numpy_targets.lookup_start_off_by_one),
        ("sinusoidal", numpy_targets.sinusoidal_concat),
        ("rope", numpy_targets.rope_interleaved),
        ("alibi", numpy_targets.alibi_paper),
        ("t5", numpy_targets.t5_boundary_off_by_one),
        ("gradient", numpy_targets.gradient_assigns),
    ],
)
def test_a_wrong_target_answering_in_one_buffer_is_told_what_it_is_told_without(kind, wrong):
    _, _, checks = CORRECT[kind]
    plain = api.check(wrong, kind, checks=checks, framework="numpy")
    reused = api.check(buffered.buffered(wrong), kind, checks=checks, framework="numpy")
    assert not plain.conforms
    assert [(c.status, c.detail) for c in reused.checks] == [
        (c.status, c.detail) for c in plain.checks
    ]


def test_a_torch_port_writing_with_out_conforms():
    """torch.add(..., out=) into one preallocated tensor: the kit reads torch's memory
    through a view (Tensor.numpy), so each answer is copied before the next call."""
    workspace = torch.empty(1 << 16)

    def lookup(token_table, position_table, token_ids, start):
        rows = token_table[token_ids]
        out = workspace[: rows.numel()].view(rows.shape)
        return torch.add(rows, position_table[start : start + token_ids.shape[-1]], out=out)

    report = runner.run(lookup, "lookup_invariance", framework="torch")
    assert report.conforms, [c.detail for c in report.checks]


ROPE_CHECKS = [
    "batch = row by row, T > 1",
    "strided x = contiguous x",
    "a call in another dtype leaves later calls unchanged",
]


@pytest.fixture(scope="module")
def worker():
    with process.Worker({}) as shared:
        yield shared


def _run(target, kind, worker=None, **options):
    return runner.run(target, kind, framework="numpy", worker=worker, **options)


@pytest.mark.parametrize("where", ["in process", "in the worker"])
def test_buffered_kernel_bugs_are_still_named(where, worker):
    """vLLM's recast cache and a strided x read as contiguous, each answering in one buffer:
    kept by reference, the one call's answer and the others' were the same memory."""

    def target(name):
        return getattr(buffered, name) if where == "in process" else f"{BUFFERED}:{name}"

    shared = worker if where == "in the worker" else None
    right = _run(target("buffered_rope"), "rope_invariance", shared, checks=ROPE_CHECKS)
    assert right.conforms, [c.detail for c in right.checks]
    assert all(c.detail.startswith("bit-identical") for c in right.checks)
    for name, check in (
        ("buffered_recast_cache", "a call in another dtype leaves later calls unchanged"),
        ("buffered_rope_reading_memory", "strided x = contiguous x"),
    ):
        wrong = _run(target(name), "rope_invariance", shared, checks=[check])
        assert wrong.checks[0].status == "differs", wrong.checks[0].detail
        assert "differ: positions [" in wrong.checks[0].detail


def test_a_forged_answer_for_a_wrapped_id_is_named_and_never_conforms(worker):
    """A lookup that wraps -1 to the last row and writes "raised": "IndexError" for it on
    every descriptor: the kit believed the first line with the request's id."""
    checks = ["forward float32", "bad id: -1"]
    report = runner.run(f"{FORGING}:wraps_and_forges", "lookup", worker=worker, checks=checks)
    assert not report.conforms
    found = {c.check: c for c in report.checks}
    assert found["forward float32"].status == "conforms"
    assert found["bad id: -1"].status == "failed"
    assert f"the call {FORGED}: " in found["bad id: -1"].detail


def test_a_forged_probe_answer_is_named_not_a_traceback(capsys):
    """Every call forges, the probe's too: its answer once crashed the kit with a KeyError."""
    code = compare.main(
        ["check", f"{FORGING}:forges_every_answer", "--kind", "lookup", "--only", "bad id: -1"]
    )
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err
    assert f"(the probe call {FORGED}: " in out
    assert f"FAIL bad id: -1  token_ids [3, -1, 5]: the call {FORGED}: " in out


def test_a_result_file_changed_after_the_worker_wrote_it_is_never_read(worker, monkeypatch):
    """The result files lie in a folder the target can write (a thread of its own could
    replace one between the worker's answer and the kit's reading): a file whose bytes are
    not those the signed answer names is refused."""
    received = process.Worker._receive

    def replaced(self, timeout):
        reply = received(self, timeout)
        if reply[0] is not None and "sha256" in reply[0]:
            np.save(os.path.join(self.folder, f"result{self.asked}.npy"), np.zeros((2, 8)))
        return reply

    monkeypatch.setattr(process.Worker, "_receive", replaced)
    report = runner.run(f"{BUFFERED}:lookup", "lookup", worker=worker, only="forward float32")
    assert [c.status for c in report.checks] == ["failed"]
    assert "the result file was changed after the worker wrote it" in report.checks[0].detail


def test_a_result_of_the_widest_elements_is_read_not_taken_for_a_forged_one(worker):
    report = runner.run(
        f"{FORGING}:rope_in_complex256", "rope", worker=worker, checks=["rotation float32"]
    )
    assert report.checks[0].status == "differs"
    assert "returns complex256 for float32 (a silent change of dtype)" in report.checks[0].detail


# --- what a target raises is the target's ---------------------------------------------------

RAISING = '''
from embedding_parity.conformance import paths
from numpy_targets import rope


class Unreadable(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


def raises_path_failed(x, positions):
    """The kit's own exception, raised by a target called along no path."""
    raise paths.PathFailed("out of memory")


def raises_unreadable(x, positions):
    raise Unreadable()


def floods(x, positions):
    """Writes 33 MiB without a newline on every pipe it may write but stderr's, then answers."""
    import os, stat

    log = os.fstat(2).st_ino
    for fd in range(1, 30):
        try:
            found = os.fstat(fd)
            if stat.S_ISFIFO(found.st_mode) and found.st_ino != log:
                for _ in range(33):
                    os.write(fd, b"x" * 2**20)
        except OSError:
            pass
    return rope(x, positions)
'''


@pytest.fixture(scope="module")
def raising(tmp_path_factory):
    folder = tmp_path_factory.mktemp("raising")
    (folder / "raising.py").write_text(f"import sys\nsys.path.insert(0, {TARGETS!r})\n{RAISING}")
    sys.path.insert(0, str(folder))
    import raising as module

    yield str(folder / "raising.py"), module
    sys.path.remove(str(folder))


@pytest.mark.parametrize("where", ["in process", "in the worker"])
@pytest.mark.parametrize(
    "name, said",
    [
        ("raises_path_failed", "raises PathFailed: out of memory on a valid input"),
        ("raises_unreadable", "raises Unreadable (its message could not be read: str() of it"),
    ],
)
def test_what_a_target_raises_is_judged_as_its_raise(where, name, said, raising, worker):
    """A PathFailed is the path's refusal only along a path (it was "the path rejects float16"
    wherever a target raised it); an exception whose __str__ raises is described by its type
    (it raised out of the kit in process, and killed the worker's call)."""
    path, module = raising
    target = getattr(module, name) if where == "in process" else f"{path}:{name}"
    shared = worker if where == "in the worker" else None
    report = _run(target, "rope", shared, checks=["rotation float16", "rotation float32"])
    assert [c.status for c in report.checks] == ["differs", "differs"], report.lines()
    assert all(said in c.detail for c in report.checks), report.lines()
    right = f"{TARGETS}/numpy_targets.py:rope" if shared else numpy_targets.rope
    assert _run(right, "rope", shared, checks=["rotation float16"]).conforms


def test_a_flood_on_the_answer_channel_is_named_and_the_next_target_conforms(raising, worker):
    """An answer line is held to a size (process.ANSWER_LINE_BYTES): without one, the kit held
    all a target wrote without a newline, and copied it whole for each chunk read."""
    path, _ = raising
    report = _run(f"{path}:floods", "rope", worker, checks=["rotation float32"])
    assert [c.status for c in report.checks] == ["failed"], report.lines()
    assert "MiB without a newline on the kit's answer channel" in report.checks[0].detail
    right = _run(f"{TARGETS}/numpy_targets.py:rope", "rope", worker, checks=["rotation float32"])
    assert right.conforms
