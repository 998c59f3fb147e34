"""A GGUF file's metadata read as llama.cpp reads it (``configs.gguf.from_gguf``): its
architecture's pairs, every rope. key and the rope_freqs / rope_factors_* tensors honoured or
refused in one line, and ``backends.pretrained.read_gguf`` refusing a broken file in one short
line. The files are written here with gguf-py's GGUFWriter, or byte by byte where the writer
cannot make the broken ones."""

import math
import os
import struct
import subprocess
import sys

import gguf
import numpy as np
import pytest

import compare
from backends import numpy_backend, positional, pretrained, validation
from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.configs.presets import PRESETS
from embedding_parity.conformance import check
from tests.conftest import needs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "tests", "conformance_targets", "configured.py")
# Llama 3.2 1B's shape, as its GGUF files give it.
LLAMA = {
    "context_length": 131072,
    "embedding_length": 2048,
    "attention.head_count": 32,
    "rope.freq_base": 500000.0,
    "rope.dimension_count": 64,
}
LLAMA3 = PRESETS["llama-3.2-1b"]["fields"]["rope_scaling"]


def llama3_factors(dim=64, base=500000.0, scaling=LLAMA3) -> np.ndarray:
    """rope_freqs as llama.cpp's convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors)
    computes it, in float32: 1, factor, or 1 / ((1 - smooth) / factor + smooth) per pair."""
    freqs = np.float32(1.0) / (base ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    found = []
    for freq in freqs:
        wavelength = np.float32(2 * math.pi) / freq
        if wavelength < old / high:
            found.append(1.0)
        elif wavelength > old / low:
            found.append(factor)
        else:
            smooth = (np.float32(old) / wavelength - low) / (high - low)
            found.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(found, dtype=np.float32)


def write(path, arch="llama", keys=None, tensors=None, *, base=LLAMA) -> str:
    """A GGUF file at ``path``: ``arch``'s keys (``base`` then ``keys``, without the arch
    prefix; None leaves a key out) and ``tensors`` {name: array}."""
    writer = gguf.GGUFWriter(str(path), arch)
    for short, value in {**base, **(keys or {})}.items():
        key = f"{arch}.{short}"
        if value is None:
            continue
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value) if value >= 0 else writer.add_int32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, value)
    for name, array in (tensors or {}).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


def refused(path) -> str:
    """The one line configs.read refuses ``path`` with."""
    with pytest.raises(UsageError) as info:
        configs.read(str(path))
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    return message


def raw_gguf(path, kvs: list[bytes], tensors: bytes = b"", n_tensors=0) -> str:
    """A GGUF v3 file byte by byte: the header, ``kvs`` (each from ``kv``), tensor infos."""
    path.write_bytes(
        b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kvs)) + b"".join(kvs) + tensors
    )
    return str(path)


def text(s: str | bytes) -> bytes:
    data = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(data)) + data


def kv(key: str, kind: int, payload: bytes) -> bytes:
    return text(key) + struct.pack("<I", kind) + payload


ARCH = kv("general.architecture", 8, text("llama"))


# --- the llama3 rule stored as a tensor ------------------------------------------------------


def test_a_llama3_gguf_holds_ports_to_its_rope_freqs(tmp_path):
    # Before: only keys were read, "RoPE no scaling", and the unscaled port conformed.
    path = write(tmp_path / "llama-3.2-1b.gguf", tensors={"rope_freqs.weight": llama3_factors()})
    config = configs.read(path)
    assert config.scaling["rope_type"] == "freq_factors"
    assert "RoPE freq_factors (factors 32 values)" in config.line()

    def llama3(x, positions):
        return numpy_backend.apply_rope(
            x, positions, base=500000.0, layout="interleaved", scaling=LLAMA3
        )

    def unscaled(x, positions):
        return numpy_backend.apply_rope(x, positions, base=500000.0, layout="interleaved")

    assert check(llama3, "rope", config=path, dtypes=["float32"]).conforms
    report = check(unscaled, "rope", config=path, dtypes=["float32"])
    assert not report.conforms
    assert "freq_factors scaling ignored (the plain rotation)" in "\n".join(report.lines())


def test_in_float64_a_gguf_port_uses_the_files_factors(tmp_path):
    """The file's factors are float32 values: llama.cpp's port, dividing by them, conforms in
    every dtype; the llama3 rule computed again in float64 differs by their rounding (2e-9),
    and is told so rather than called a float32 computation."""
    factors = llama3_factors()
    path = write(tmp_path / "llama.gguf", tensors={"rope_freqs.weight": factors})
    scaling = {"rope_type": "freq_factors", "factors": tuple(factors.astype(np.float64))}

    def llama_cpp(x, positions):
        return numpy_backend.apply_rope(
            x, positions, base=500000.0, layout="interleaved", scaling=scaling
        )

    def llama3(x, positions):
        return numpy_backend.apply_rope(
            x, positions, base=500000.0, layout="interleaved", scaling=LLAMA3
        )

    assert check(llama_cpp, "rope", config=path).conforms
    recomputed = check(llama3, "rope", config=path, dtypes=["float64"])
    assert [c.status for c in recomputed.checks] == ["differs", "differs"]
    assert all("from factors other than the file's" in c.detail for c in recomputed.checks)


def test_a_partial_rotation_with_rope_freqs_is_judged(tmp_path):
    # The kind's "partial rotary ignored" mistake rotates the whole head: the 8 factors of 16
    # rotated dims do not stretch to 64 (before, building that mistake raised: "the kit failed
    # to judge it").
    shape = {"context_length": 4096, "embedding_length": 2048, "attention.head_count": 32}
    factors = np.linspace(1.0, 4.0, 8, dtype=np.float32)
    path = write(
        tmp_path / "m.gguf",
        "exaone",  # its loader creates rope_freqs, its graph passes it (stablelm's: neither)
        {"rope.dimension_count": 16},
        {"rope_freqs.weight": factors},
        base=shape,
    )
    config = configs.read(path)

    def port(x, positions):
        return numpy_backend.apply_rope(x, positions, **config.rope_options())

    def whole_head(x, positions):
        return numpy_backend.apply_rope(x, positions, base=10000.0)

    contract = {"config": path, "dtypes": ["float32"], "invariances": False}  # the reading's
    assert check(port, "rope", **contract).conforms
    report = check(whole_head, "rope", **contract)
    assert [c.status for c in report.checks] == ["differs", "differs"]
    assert "partial rotary ignored: the whole head rotated" in "\n".join(report.lines())


def test_the_freq_factors_rule_divides_each_pairs_frequency():
    factors = tuple(float(f) for f in llama3_factors())
    w, attention = positional.rope_parameters(
        64, 500000.0, {"rope_type": "freq_factors", "factors": factors, "attention_factor": 1.5}
    )
    np.testing.assert_array_equal(w, positional.frequencies(64, 500000.0) / np.array(factors))
    assert attention == 1.5
    with pytest.raises(ValueError, match="factors has 31 factors; a rotated width of 64"):
        validation.check_rope_scaling({"rope_type": "freq_factors", "factors": factors[:31]}, 64)


def test_against_hf_refuses_a_rule_transformers_has_not(tmp_path):
    path = write(tmp_path / "m.gguf", tensors={"rope_freqs.weight": llama3_factors()})

    def unscaled(x, positions):
        return numpy_backend.apply_rope(x, positions, base=500000.0, layout="interleaved")

    with pytest.raises(UsageError, match="hf has no freq_factors rule"):
        check(unscaled, "rope", config=path, dtypes=["float32"], against="hf")


# --- which pairs rotate: llama_model_rope_type ----------------------------------------------


@pytest.mark.parametrize(
    "arch, layout",
    [
        ("llama", "interleaved"),
        ("deepseek2", "interleaved"),
        ("command-r", "interleaved"),
        ("olmo", "interleaved"),
        ("granite", "interleaved"),
        ("cohere2", "interleaved"),
        ("glm4", "interleaved"),
        ("qwen2", "half"),
        ("orion", "half"),  # NEOX in llama.cpp: the old table had it in pairs (2i, 2i+1)
        ("phi3", "half"),
        ("olmo2", "half"),
    ],
)
def test_the_layout_is_llama_cpps_for_the_architecture(tmp_path, arch, layout):
    assert configs.read(write(tmp_path / "m.gguf", arch)).layout == layout


@pytest.mark.parametrize(
    "arch, message",
    [
        ("llama9", "architecture 'llama9' is not in llama_model_rope_type"),
        ("qwen2vl", "rotates with llama.cpp's MROPE"),
        ("bloom", "llama.cpp rotates nothing (LLAMA_ROPE_TYPE_NONE)"),
    ],
)
def test_an_architecture_the_kit_cannot_rotate_is_refused(tmp_path, arch, message):
    assert message in refused(write(tmp_path / "m.gguf", arch))


def test_learned_positions_from_a_position_table(tmp_path):
    table = np.zeros((1024, 8), np.float32)
    path = write(tmp_path / "m.gguf", "gpt2", tensors={"position_embd.weight": table})
    config = configs.read(path)
    assert not config.rope and config.position_rule == "arange"


# --- every rope. key ------------------------------------------------------------------------


def test_yarn_keys_read_as_ggmls_rope_yarn(tmp_path):
    keys = {
        "rope.scaling.type": "yarn",
        "rope.scaling.factor": 4.0,
        "rope.scaling.original_context_length": 32768,
        "rope.scaling.attn_factor": 1.25,
    }
    config = configs.read(write(tmp_path / "m.gguf", "qwen2", keys))
    # ggml's mscale: attn_factor, times 1 + 0.1 ln(1 / freq_scale) with ext_factor 1
    assert config.scaling == {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
        "attention_factor": 1.25 * (1 + 0.1 * math.log(4.0)),
    }


def test_a_linear_factor_without_a_type_is_linear(tmp_path):
    # load_hparams: rope.scaling.type defaults to "linear"; the factor's older key too
    config = configs.read(write(tmp_path / "m.gguf", keys={"rope.scale_linear": 2.0}))
    assert config.scaling == {"rope_type": "linear", "factor": 2.0}
    none = {"rope.scaling.type": "none", "rope.scaling.factor": 8.0}
    assert configs.read(write(tmp_path / "n.gguf", keys=none)).scaling is None


@pytest.mark.parametrize(
    "arch, keys, message",
    [
        ("llama", {"rope.dimension_sections": [16, 24, 24, 0]}, "M-RoPE's sections"),
        ("llama", {"rope.dimension_count_swa": 32}, "rotate another width"),
        ("llama", {"rope.scaling.alpha": 1000.0}, "a RoPE key the kit does not honour"),
        ("llama", {"rope.scaling.type": "su"}, "llama.cpp knows none, linear, yarn, longrope"),
        ("llama", {"rope.scaling.attn_factor": 1.2}, "the kit's linear rule has no attention"),
        ("qwen2", {"rope.scaling.yarn_beta_fast": 8.0}, "yarn_beta_fast is 8"),
        ("qwen2", {"rope.scaling.yarn_log_multiplier": 0.1}, "yarn_log_multiplier is 0.1"),
        ("qwen2", {"rope.scaling.yarn_ext_factor": 0.5}, "yarn_ext_factor is 0.5"),
        ("qwen2", {"rope.scaling.yarn_attn_factor": 2.0}, "yarn_attn_factor is 2"),
        ("qwen2", {"rope.freq_base_swa": 10000.0}, "sliding-window layers rotate at base 10000"),
        ("gemma3", {"attention.sliding_window": 512, "rope.freq_base": 1e6}, "base 10000"),
        ("gemma3", {"attention.sliding_window": "512"}, "sliding_window is '512'"),
        (
            "deepseek2",
            {"rope.scaling.type": "yarn", "rope.scaling.factor": 40.0},
            "deepseek2 with YaRN",
        ),
        ("llama", {"rope.scaling.type": "longrope"}, "longrope without rope_factors_long"),
        ("llama", {"rope.freq_base": -1.0}, "rope.freq_base is -1.0: a positive finite"),
        ("llama", {"rope.freq_base": math.inf}, "rope.freq_base is inf"),
        ("llama", {"rope.freq_base": "1e4"}, "rope.freq_base is '1e4'"),
        ("llama", {"rope.scaling.factor": 0.0}, "rope.scaling.factor is 0.0"),
        ("llama", {"rope.scaling.finetuned": 1}, "finetuned is 1: true or false"),
        ("qwen2", {"rope.dimension_count": 63}, "the rotated width must be even"),
        ("qwen2", {"rope.dimension_count": 128}, "rope.dimension_count is 128: an integer of 2"),
        ("llama", {"rope.dimension_count": 32}, "llama.cpp refuses it for llama (invalid n_rot)"),
        ("llama", {"attention.key_length": 70000}, "and at most 65536"),
        ("llama", {"attention.head_count": 0}, "layer 0 needs attention heads"),
        ("llama", {"attention.head_count": [0, 32]}, "layer 0 needs attention heads"),
        ("llama", {"attention.head_count": "32"}, "head_count is '32'"),
        ("llama", {"attention.head_count": 4096}, "head_dim 0"),
    ],
)
def test_a_key_the_kit_cannot_honour_is_refused_naming_it(tmp_path, arch, keys, message):
    assert message in refused(write(tmp_path / "m.gguf", arch, keys))


def test_head_counts_per_layer_take_layer_0s(tmp_path):
    config = configs.read(write(tmp_path / "m.gguf", "qwen2", {"attention.head_count": [16, 8]}))
    assert config.head_dim == 2048 // 16


# --- the factor tensors ---------------------------------------------------------------------


def phi3(tmp_path, context, name="phi3.gguf"):
    keys = {
        "context_length": context,
        "embedding_length": 3072,
        "attention.head_count": 32,
        "rope.freq_base": 10000.0,
        "rope.dimension_count": 96,
        "rope.scaling.original_context_length": 4096,
        "rope.scaling.attn_factor": 1.19,
    }
    factors = {
        "rope_factors_long.weight": np.linspace(1.0, 40.0, 48, dtype=np.float32),
        "rope_factors_short.weight": np.linspace(1.0, 1.5, 48, dtype=np.float32),
    }
    return write(tmp_path / name, "phi3", tensors=factors, base=keys), factors


@pytest.mark.parametrize("context, chosen", [(131072, "long"), (4096, "short")])
def test_phi3s_factors_are_llama_cpps_choice_at_the_files_context(tmp_path, context, chosen):
    path, factors = phi3(tmp_path, context)
    config = configs.read(path)
    expected = factors[f"rope_factors_{chosen}.weight"].astype(np.float64)
    np.testing.assert_array_equal(config.scaling["factors"], expected)
    assert config.scaling["attention_factor"] == np.float32(1.19)
    assert f"[rope_factors_{chosen}: llama.cpp's at n_ctx {context}, the file's" in config.line()
    assert config.name == "phi3.gguf"  # the choice is a note beside the name, not in it


def test_a_gemma_gguf_lookup_is_refused_as_llama_cpps_scale_is_not_transformers(tmp_path):
    """llama.cpp multiplies the float32 rows it gathered by sqrtf(n_embd); transformers (the
    kit's Gemma lookup contract) multiplies in the table's dtype by the scale rounded to it:
    for a bfloat16 table the two differ, so a verdict from the GGUF would be the wrong rule."""
    keys = {"embedding_length": 2048, "attention.head_count": 8, "attention.key_length": 256}
    path = write(tmp_path / "gemma.gguf", "gemma", keys, base={"context_length": 8192})
    config = configs.read(path)
    assert config.rope and config.head_dim == 256  # its rotation is llama.cpp's to say
    with pytest.raises(UsageError, match="llama.cpp scales gemma's rows after the lookup"):
        config.options("lookup")


@pytest.mark.parametrize(
    "tensors, message",
    [
        ({"rope_freqs.weight": np.ones(32, np.int32)}, "ggml type 26: the kit reads factors"),
        ({"rope_freqs.weight": np.ones(31, np.float32)}, "has 31 factors; a rotated width of 64"),
        ({"rope_freqs.weight": -np.ones(32, np.float32)}, "not positive and finite"),
        (
            {"rope_factors_long.weight": np.ones(32, np.float32)},
            "llama.cpp's llama loader creates rope_freqs.weight under rope.scaling.type linear",
        ),
        ({"blk.0.rope_freqs.weight": np.ones(32, np.float32)}, "a RoPE tensor the kit does not"),
    ],
)
def test_a_factor_tensor_the_kit_cannot_read_is_refused(tmp_path, tensors, message):
    assert message in refused(write(tmp_path / "m.gguf", tensors=tensors))


def test_factors_read_from_float16(tmp_path):
    factors = llama3_factors().astype(np.float16)
    config = configs.read(write(tmp_path / "m.gguf", tensors={"rope_freqs.weight": factors}))
    np.testing.assert_array_equal(config.scaling["factors"], factors.astype(np.float64))


def test_factors_with_another_scaling_are_refused(tmp_path):
    keys = {"rope.scaling.factor": 8.0}
    path = write(tmp_path / "m.gguf", keys=keys, tensors={"rope_freqs.weight": llama3_factors()})
    assert "tensor rope_freqs with linear scaling by factor 8" in refused(path)


# --- a broken file: one short line, never a traceback ---------------------------------------


def nested(tmp_path):
    array_of_arrays = struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 0)
    return raw_gguf(tmp_path / "m.gguf", [ARCH, kv("llama.x", 9, array_of_arrays)])


def alignment(value):
    def make(tmp_path):
        given = kv("general.alignment", 4, struct.pack("<I", value))
        return raw_gguf(tmp_path / "m.gguf", [ARCH, given])

    return make


def huge_string(tmp_path):
    return raw_gguf(tmp_path / "m.gguf", [ARCH, kv("llama.x", 8, text(b"\xff" * (20 << 20)))])


def huge_key(tmp_path):
    return write(tmp_path / "m.gguf", keys={"rope." + "x" * (1 << 20): 1.0})


def truncated_tensor(tmp_path):
    path = write(tmp_path / "m.gguf", tensors={"rope_freqs.weight": llama3_factors()})
    data = open(path, "rb").read()
    (tmp_path / "m.gguf").write_bytes(data[:-8])
    return path


def truncated_keys(tmp_path):
    path = write(tmp_path / "m.gguf")
    (tmp_path / "m.gguf").write_bytes(open(path, "rb").read()[:60])
    return path


def empty(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"")
    return str(tmp_path / "m.gguf")


def fifo(tmp_path):
    os.mkfifo(tmp_path / "m.gguf")
    return str(tmp_path / "m.gguf")


BROKEN = {
    "nested arrays": (nested, "key 'llama.x': an array of arrays"),
    "alignment 0": (alignment(0), "general.alignment is 0: the tensor data's alignment"),
    "alignment 24": (alignment(24), "general.alignment is 24"),
    "a 20 MB string": (huge_string, "key 'llama.x': a string at byte"),
    "a 1 MB key": (huge_key, "... (1048587 characters)"),
    "truncated tensor": (truncated_tensor, "tensor 'rope_freqs.weight': its 128 bytes"),
    "truncated keys": (truncated_keys, "runs past the end of the file (60 bytes)"),
    "empty": (empty, "0 bytes: too short to be a GGUF file"),
    "a value type": (
        lambda p: raw_gguf(p / "m.gguf", [ARCH, kv("llama.x", 13, b"")]),
        "value type 13, not one of GGUF's",
    ),
    "a key twice": (lambda p: raw_gguf(p / "m.gguf", [ARCH, ARCH]), "given twice"),
}
# A FIFO only through compare.py, under a timeout: read in this process, a regression would
# wait forever for a writer.
FIFO = {"a FIFO": (fifo, "is not a regular file")}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_file_is_refused_in_one_short_line(tmp_path, case):
    make, message = BROKEN[case]
    assert message in refused(make(tmp_path))


@pytest.mark.parametrize("case", ["nested arrays", "alignment 0", "a FIFO"])
def test_check_exits_two_on_a_broken_file(tmp_path, capsys, case):
    make, message = {**BROKEN, **FIFO}[case]
    argv = ["check", f"{TARGETS}:llama32_rope", "--kind", "rope", "--config", make(tmp_path)]
    if case in FIFO:
        done = subprocess.run(
            [sys.executable, "compare.py", *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        code, said = done.returncode, done.stderr
    else:  # in this process: what compare.py prints and exits with, without a Python's start
        code, said = compare.main(argv), capsys.readouterr().err
    assert code == 2, said
    assert message in said and "Traceback" not in said
    assert len(said.strip().splitlines()) == 1


# --- the file the project ships --------------------------------------------------------------


def test_smollm2s_gguf_reads_as_before():
    needs("smollm2")
    path = os.path.join(pretrained.package_dir("smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert configs.read(path).line() == (
        "config SmolLM2-135M-Instruct.Q4_1.gguf: RoPE no scaling, rope_theta 100000, "
        "head_dim 64, rotating 64 dims (interleaved layout); max_position_embeddings 8192"
    )
