"""What a GGUF file says about its rotation, read where llama.cpp's graphs and loaders say it:
the MLA graphs' rotation of each head's last n_rot dims, the factor tensors only where the
architecture's loader creates them and its graph passes them, and a base or a factor that
would leave the rope kind's bound wider than the values it bounds refused where it is read.
Also the reader's arrays of numbers held as views of the file, not a Python object each."""

import struct
import tracemalloc

import numpy as np
import pytest

from backends import numpy_backend, pretrained
from embedding_parity import configs
from embedding_parity.cli import UsageError
from embedding_parity.conformance import check
from embedding_parity.conformance.adapters import sources
from tests.test_config_bounds import LEAST, keeps_its_teeth
from tests.test_gguf_config import ARCH, LLAMA, kv, llama3_factors, raw_gguf, refused, text, write

# --- MLA: llama.cpp rotates q_pe, each head's last n_rot dims -----------------------------

# Each MLA graph's head: (keys, head_dim, n_rot, layout). MiniCPM3-4B's shape; DeepSeek-V2-Lite's,
# whose key_length (kv_lora_rank 512 + 64) is the absorbed MQA head and key_length_mla the
# head its graph splits; PLM-1.8B's.
MLA_FILES = {
    "minicpm3": ({"attention.key_length": 96, "rope.dimension_count": 32}, 96, 32, "half"),
    "deepseek2": (
        {"attention.key_length": 576, "attention.key_length_mla": 192, "rope.dimension_count": 64},
        192,
        64,
        "interleaved",
    ),
    "plm": ({"attention.key_length": 192, "rope.dimension_count": 64}, 192, 64, "interleaved"),
}


def rotating(head, rotary, layout, *, last):
    """A port at base 10000 rotating the head's first or last ``rotary`` dims."""

    def port(x, positions):
        cut = head - rotary if last else rotary
        parts = [x[..., :cut], x[..., cut:]]
        turn = 1 if last else 0
        parts[turn] = numpy_backend.apply_rope(parts[turn], positions, layout=layout)
        return np.concatenate(parts, axis=-1).astype(x.dtype)

    return port


@pytest.mark.parametrize("arch", list(MLA_FILES))
def test_an_mla_gguf_rotates_the_last_dims_as_llama_cpps_q_pe(tmp_path, arch):
    # Before: the first n_rot dims were the contract, so llama.cpp's port differed and the
    # port rotating the first dims conformed.
    keys, head, rotary, layout = MLA_FILES[arch]
    shape = {"context_length": 4096, "embedding_length": 2048, "attention.head_count": 16}
    path = write(tmp_path / f"{arch}.gguf", arch, keys, base=shape)
    config = configs.read(path)
    assert (config.head_dim, config.rotary_dim, config.rotary_last) == (head, rotary, True)
    llama_cpp = rotating(head, rotary, layout, last=True)
    assert check(llama_cpp, "rope", config=path, dtypes=["float32"]).conforms
    first = rotating(head, rotary, layout, last=False)
    report = check(first, "rope", config=path, dtypes=["float32"])
    assert [c.status for c in report.checks] == ["differs", "differs"]
    assert f"the first {rotary} dims rotated where llama.cpp's MLA graph rotates the last" in (
        "\n".join(report.lines())
    )


def test_an_mla_rotation_is_refused_where_the_kit_would_rotate_the_first_dims(tmp_path):
    keys, *_ = MLA_FILES["minicpm3"]
    config = configs.read(write(tmp_path / "m.gguf", "minicpm3", keys))
    with pytest.raises(UsageError, match="llama.cpp rotates the last 32 dims of each head"):
        config.rope_options()  # the backends' apply_rope, which rotates the first
    with pytest.raises(UsageError, match="whose invariances the kit does not build"):
        config.options("rope_invariance")
    with pytest.raises(UsageError, match="the sources' modules the first"):
        sources.rotation(config.options("rope"))  # --against hf, torchtune


def test_hf_at_an_interleaved_gguf_rotates_its_pairs_in_place_as_ggmls_norm_mode(tmp_path):
    # Before: --against hf applied DeepSeek-V3's apply_rotary_pos_emb_interleave, which lays
    # the pairs out half, so llama.cpp's port was told it differs. GLM's apply (transformers'
    # own code) turns the pairs (2i, 2i+1) in place, as ggml's NORM mode does.
    path = write(tmp_path / "llama.gguf")
    config = configs.read(path)
    assert config.layout == "interleaved"
    hf = sources.make("hf", "rope", config.options("rope"))
    report = check(hf, "rope", config=path, dtypes=["float32"])
    assert report.conforms, "\n".join(report.lines())


# --- the factor tensors: where the loader creates them and the graph passes them -----------


@pytest.mark.parametrize(
    "arch, keys, tensors, message",
    [
        # llama.cpp's qwen2 and gemma2 loaders create no factor tensor (the file fails to load)
        ("qwen2", {}, ["rope_freqs.weight"], "qwen2 loader creates no factor tensor"),
        ("gemma2", {}, ["rope_freqs.weight"], "gemma2 loader creates no factor tensor"),
        # llama's creates rope_freqs, or under longrope the pair, never both
        (
            "llama",
            {},
            ["rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"],
            "tensor rope_factors_long.weight: llama.cpp's llama loader creates rope_freqs.weight",
        ),
        (
            "llama",
            {"rope.scaling.type": "longrope"},
            ["rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"],
            "tensor rope_freqs.weight: llama.cpp's llama loader creates rope_factors_long.weight "
            "and rope_factors_short.weight under rope.scaling.type longrope",
        ),
        ("phi3", {}, ["rope_freqs.weight"], "phi3 loader creates rope_factors_long.weight and"),
        ("phi3", {}, ["rope_factors_long.weight"], "without its pair"),
    ],
)
def test_a_factor_tensor_is_read_only_where_llama_cpps_loader_creates_it(
    tmp_path, arch, keys, tensors, message
):
    # Before: qwen2's and gemma2's rope_freqs were read as a scaling rule, and llama's three
    # tensors as rope_freqs alone.
    ones = {name: np.ones(32, np.float32) for name in tensors}
    assert message in refused(write(tmp_path / "m.gguf", arch, keys, ones))


def test_a_factor_tensor_a_graph_passes_no_factors_for_is_not_applied(tmp_path):
    # falcon-h1's loader creates rope_freqs and its graph hands ggml_rope_ext nullptr
    path = write(tmp_path / "m.gguf", "falcon-h1", tensors={"rope_freqs.weight": llama3_factors()})
    config = configs.read(path)
    assert config.scaling is None
    assert "[rope_freqs.weight not applied: llama.cpp's falcon-h1 graph passes no factors]" in (
        config.line()
    )


def test_granite_hybrids_rope_freqs_is_read_as_its_loader_creates_it(tmp_path):
    # Before: refused as a tensor the granitehybrid loader does not create; it creates it in
    # both its feed-forward branches and its graph passes it (tests/test_gguf_owner.py)
    factors = {"rope_freqs.weight": llama3_factors()}
    path = write(tmp_path / "m.gguf", "granitehybrid", tensors=factors)
    assert configs.read(path).scaling["rope_type"] == "freq_factors"


# --- a base or a factor that would leave the bound toothless: refused where read ----------


@pytest.mark.parametrize("base", [1.0, 0.5])
def test_a_base_of_at_most_1_is_refused_in_one_line(tmp_path, base):
    # Before: accepted, then every case "the kit failed to judge it" (exit 1).
    path = write(tmp_path / "m.gguf", keys={"rope.freq_base": base})
    assert f"key llama.rope.freq_base is {base:g}: RoPE's base must be above 1" in refused(path)


@pytest.mark.parametrize("tiny", [1e-30, 1e-45])
def test_a_tiny_factor_is_refused_naming_the_tensor_the_value_and_the_limit(tmp_path, tiny):
    # Before: read, and a target that does not rotate conformed ("0.8 <= 2.2e+290").
    factors = llama3_factors()
    factors[0] = tiny
    said = refused(write(tmp_path / "m.gguf", tensors={"rope_freqs.weight": factors}))
    value = float(np.float32(tiny))  # the tensor's float32, as the reader reads it
    assert f"tensor rope_freqs.weight: freq_factors scaling factors[0] {value:g} turns pair 0 " in (
        said
    )
    assert "the rope check's bound is" in said
    # the smallest factor it names, rounded up to a float32 as the tensor stores it, is read
    least = float(LEAST.search(said).group(1))
    stored = np.float32(least)
    factors[0] = np.nextafter(stored, np.float32(np.inf)) if stored < least else stored
    path = write(tmp_path / "m.gguf", tensors={"rope_freqs.weight": factors})
    keeps_its_teeth(configs.read(path), said)
    # and it is the smallest: rounded up to 3 digits it is within 1 % of the bisected limit
    factors[0] = least * 0.98
    assert "turns pair 0 " in refused(write(path, tensors={"rope_freqs.weight": factors}))


def test_a_tiny_linear_factor_is_refused_naming_the_key(tmp_path):
    path = write(tmp_path / "m.gguf", keys={"rope.scaling.factor": 1e-30})
    said = refused(path)
    assert "key llama.rope.scaling.factor: linear scaling factor 1e-30 turns pair 0 " in said
    least = float(LEAST.search(said).group(1))
    keeps_its_teeth(configs.read(write(path, keys={"rope.scaling.factor": least})), said)


# --- the reader: a tensor of no dimensions, arrays of numbers ------------------------------


def test_a_tensor_of_no_dimensions_is_one_element_as_gguf_cpp_reads_it(tmp_path):
    # Before: "tuple index out of range". gguf.cpp sets each ne past n_dims to 1.
    info = text("rope_freqs.weight") + struct.pack("<I", 0) + struct.pack("<IQ", 0, 0)
    counts = {k: v for k, v in LLAMA.items() if k != "rope.freq_base"}  # uint32 keys only
    keys = [ARCH, *(kv(f"llama.{k}", 4, struct.pack("<I", v)) for k, v in counts.items())]
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, len(keys)) + b"".join(keys) + info
    padding = bytes(-len(head) % 32)
    (tmp_path / "m.gguf").write_bytes(head + padding + struct.pack("<f", 1.0))
    _, tensors = pretrained.read_gguf(str(tmp_path / "m.gguf"))
    assert tensors["rope_freqs.weight"][1].shape == (4,)  # one F32 element's bytes
    assert "tensor rope_freqs.weight has 1 factors; a rotated width of 64 has 32" in refused(
        tmp_path / "m.gguf"
    )


def test_an_array_of_numbers_is_read_without_a_python_object_per_element(tmp_path):
    """Before: a list of Python bools, 17 times the array's bytes (a 100 MB array reached
    1.7 GB). Now a read-only view of the mapped file, as gguf.GGUFReader holds it."""
    count = 1 << 22
    flags = kv("llama.flags", 9, struct.pack("<IQ", 7, count) + bytes(count))
    path = raw_gguf(tmp_path / "m.gguf", [ARCH, flags])
    tracemalloc.start()
    try:
        fields, _ = pretrained.read_gguf(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < count  # less than the array's own bytes: nothing copied per element
    values = fields["llama.flags"]
    assert values.dtype == np.bool_ and values.shape == (count,) and not values.flags.writeable


@pytest.mark.parametrize("attention", [3e38, 1e-6])
def test_an_attention_factor_outside_float16s_normal_numbers_is_refused(tmp_path, attention):
    # Before: read, and 3e38 made the float32 reference NaN.
    yarn = {"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0}
    path = write(tmp_path / "m.gguf", keys={**yarn, "rope.scaling.attn_factor": attention})
    shown = f"{float(np.float32(attention)):g}"  # the key's float32, as the reader reads it
    assert f"key llama.rope.scaling.attn_factor is {shown}: it must be in [6.1e-05, 65504]" in (
        refused(path)
    )
    path = write(path, keys={**yarn, "rope.scaling.attn_factor": 1.0})
    assert configs.read(path).scaling["rope_type"] == "yarn"
