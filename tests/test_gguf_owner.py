"""The GGUF reader's tables of what architectures do, held to llama.cpp's own sources: the ones
the conformance install builds ggml from (llama-cpp-python's vendored llama.cpp, kept under its
engine folder's src/). Each architecture's loader (``load_arch_tensors``: the factor tensors it
creates; ``load_arch_hparams``: its sliding-window layers' base and scale) and its graph (the
freq_factors operand it hands ``ggml_rope_ext``; an MLA graph's ``n_embd_head_qk_nope`` split,
which rotates each head's last dims; whether its sliding-window layers rotate by parameters of
their own) are read from its src/models/<arch>.cpp; the architecture's class, its rope type
(``llama_model_rope_type``) and the "invalid n_rot" check from src/llama-model.cpp; its GGUF
name from src/llama-arch.cpp."""

import os
import re

import pytest

from embedding_parity.conformance import engines
from embedding_parity.configs import gguf

pytestmark = pytest.mark.matrix  # the second tier: make conformance-test

FACTORS = {
    "LLM_TENSOR_ROPE_FREQS": "rope_freqs.weight",
    "LLM_TENSOR_ROPE_FACTORS_LONG": "rope_factors_long.weight",
    "LLM_TENSOR_ROPE_FACTORS_SHORT": "rope_factors_short.weight",
}
# How a graph rotates its sliding-window layers: as the others where it reads no rope parameter
# of theirs (model.get_rope_freq_base/_scale by layer) or load_arch_hparams copies the others'
# (then rope.freq_base_swa, which the reader reads); at llama_hparams' defaults, base 10000 and
# scale 1 (src/llama-hparams.h, not among the kept sources), where it assigns neither.
SWA_DEFAULTS = "base 10000, unscaled"
SWA_AS_OTHERS = "the other layers' base and scale"


@pytest.fixture(scope="module")
def src():
    """The folder of llama.cpp's sources that the conformance install keeps."""
    assert engines.installed("llama-cpp-python"), "make install-conformance fetches it"
    return os.path.join(engines.folder("llama-cpp-python"), "src")


def _read(src: str, *path: str) -> str:
    with open(os.path.join(src, *path), encoding="utf-8") as file:
        return file.read()


@pytest.fixture(scope="module")
def names(src):
    """{LLM_ARCH_*: its GGUF name}, from llama-arch.cpp's LLM_ARCH_NAMES."""
    table = _read(src, "llama-arch.cpp").split("LLM_ARCH_NAMES")[1].split("};")[0]
    return dict(re.findall(r'\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}', table))


@pytest.fixture(scope="module")
def llama_cpp(src, names):
    """{GGUF architecture: (factor tensors its loader creates, freq_factors operands its graph
    passes, whether its graph splits MLA heads, how its sliding-window layers rotate)} for every
    architecture with a graph and a loader in llama.cpp's src/models/."""
    model = _read(src, "llama-model.cpp")
    classes = re.findall(r"case (LLM_ARCH_\w+):\s*return new (llama_model_\w+)\(", model)
    header = _read(src, "models", "models.h")
    files = sorted(f for f in os.listdir(os.path.join(src, "models")) if f.endswith(".cpp"))
    graphs, loaders = {}, {}  # {class: the file that defines its graph, its loader}
    for text in (_read(src, "models", f) for f in files):
        for defined in re.findall(r"\b(llama_model_\w+)::graph(?:<\w+>)?::graph\(", text):
            graphs.setdefault(defined, text)
        for defined in re.findall(r"\b(llama_model_\w+)::load_arch_tensors\b", text):
            loaders.setdefault(defined, text)
    found = {}
    for arch, name in classes:
        graph = _graph_class(header, name)
        if arch not in names or graph not in graphs or name not in loaders:
            continue
        # the constructor on, with the methods it calls (granite's build_attention_layer)
        body = re.split(rf"{graph}::graph(?:<\w+>)?::graph\(", graphs[graph])[-1]
        calls = re.findall(r"ggml_rope_ext\((.*?)\)\s*;", body, re.S)
        operands = {re.sub(r"\s+", "", call).split(",")[3] for call in calls}  # freq_factors
        load = _function(loaders[name], rf"{name}::load_arch_tensors\b")
        created = {tensor for token, tensor in FACTORS.items() if token in load}
        hparams = _function(loaders[name], rf"{name}::load_arch_hparams\b")
        mla = "n_embd_head_qk_nope" in graphs[graph]
        found[names[arch]] = (created, operands, mla, _swa_rotation(body, hparams))
    return found


def _graph_class(header: str, model: str) -> str:
    """The class whose graph ``model`` builds: its own, or the one its declaration in
    models.h borrows (``using graph = llama_model_x::graph``: phimoe builds phi3's)."""
    declared = re.search(rf"struct {model}\b[^{{]*\{{(.*?)\n\}};", header, re.S)
    shared = declared and re.search(r"using graph = (llama_model_\w+)::graph", declared.group(1))
    return shared.group(1) if shared else model


def _function(source: str, signature: str) -> str:
    """The definition of the function whose signature matches, to its closing brace at column
    0; empty where ``source`` defines none."""
    start = re.search(signature, source)
    return source[start.start() :].split("\n}\n")[0] if start else ""


def _swa_rotation(graph: str, hparams: str) -> str:
    """How a graph rotates its sliding-window layers: as the others where it reads no rope
    parameter of theirs, else by what load_arch_hparams assigns them."""
    if not re.search(r"get_rope_freq_(base|scale)|rope_freq_(base|scale)_train_swa", graph):
        return SWA_AS_OTHERS
    assigned = re.findall(r"hparams\.rope_freq_(base|scale)_train_swa\s*=\s*([^;]+);", hparams)
    if not assigned:
        return SWA_DEFAULTS
    copied = {"base": "hparams.rope_freq_base_train", "scale": "hparams.rope_freq_scale_train"}
    return SWA_AS_OTHERS if dict(assigned) == copied else str(dict(assigned))


@pytest.fixture(scope="module")
def rope_types(src, names):
    """{GGUF architecture: the rope type llama_model_rope_type returns for it}: each run of
    case labels takes the LLAMA_ROPE_TYPE_* its statements return, joined by "/" where they
    return several (decided by the file's hparams). The M-RoPE a file's M-RoPE sections turn
    on (``hparams.use_mrope() ? LLAMA_ROPE_TYPE_MROPE : ...``: glm4's) is set aside, as the
    reader refuses rope.dimension_sections (gguf.REFUSED)."""
    model = _read(src, "llama-model.cpp")
    switch = _function(model, r"llama_rope_type llama_model_rope_type\(")
    switch = re.sub(r"//[^\n]*", "", switch)
    switch = re.sub(r"\w+->hparams\.use_mrope\(\)\s*\?\s*LLAMA_ROPE_TYPE_MROPE\s*:", "", switch)
    parts = re.split(r"((?:\s*case LLM_ARCH_\w+:)+)", switch)  # [head, labels, statements, ...]
    found = {}
    for labels, statements in zip(parts[1::2], parts[2::2]):
        returned = "/".join(sorted(set(re.findall(r"LLAMA_ROPE_TYPE_(\w+)", statements))))
        found |= {names[a]: returned for a in re.findall(r"LLM_ARCH_\w+", labels) if a in names}
    return found


@pytest.fixture(scope="module")
def whole_head(src, names):
    """The GGUF architectures whose rotated width load_hparams holds to head_dim: the
    ``arch == LLM_ARCH_*`` terms of the condition under which it throws "invalid n_rot"."""
    model = _read(src, "llama-model.cpp")
    before, _ = model.split('"invalid n_rot')  # the one such check
    tests = re.findall(r"if \((arch == LLM_ARCH_\w+(?:\s*\|\|\s*arch == LLM_ARCH_\w+)*)\)", before)
    condition = tests[-1]  # the nearest: the one the throw sits under
    return {names[a] for a in re.findall(r"LLM_ARCH_\w+", condition)}


def test_the_sources_name_the_architectures_the_reader_knows(llama_cpp, rope_types):
    """A parser that found nothing would hold every table to nothing."""
    read = set(gguf.ROPE_TYPES) & set(llama_cpp)
    assert len(read) > 60 and {"llama", "qwen2", "phi3", "deepseek2"} <= read
    assert len(rope_types) > 100 and rope_types["llama"] == "NORM"


def test_the_pairs_are_those_llama_model_rope_type_returns(rope_types):
    for arch, rule in gguf.ROPE_TYPES.items():
        assert rope_types.get(arch) == rule, (
            f"{arch}: ROPE_TYPES says {rule}, llama.cpp's llama_model_rope_type "
            f"{rope_types.get(arch) or 'does not know it'}"
        )


def test_the_whole_head_rotates_where_load_hparams_says_so(whole_head):
    # an architecture the reader refuses (not in ROPE_TYPES) needs no width check
    assert set(gguf.WHOLE_HEAD) == whole_head & set(gguf.ROPE_TYPES), (
        f"WHOLE_HEAD is {sorted(gguf.WHOLE_HEAD)}, llama.cpp's 'invalid n_rot' check names "
        f"{sorted(whole_head & set(gguf.ROPE_TYPES))} of the architectures the reader reads"
    )


def test_the_sliding_window_layers_rotate_as_load_arch_hparams_leaves_them(llama_cpp):
    rotating = {arch for arch, rule in gguf.ROPE_TYPES.items() if rule != "NONE"}
    for arch in rotating & set(llama_cpp):
        read = SWA_DEFAULTS if arch in gguf.SWA_BASE_10000 else SWA_AS_OTHERS
        assert llama_cpp[arch][3] == read, (
            f"{arch}: the reader rotates its sliding-window layers at {read} (SWA_BASE_10000), "
            f"llama.cpp at {llama_cpp[arch][3]}"
        )


def test_the_factor_tensors_are_those_each_loader_creates(llama_cpp):
    # an architecture that does not rotate (refact's loader copies llama's) is read by its
    # learned or absent positions, its factor tensors never
    rotating = {arch for arch, rule in gguf.ROPE_TYPES.items() if rule != "NONE"}
    for arch in rotating & set(llama_cpp):
        longrope, other = gguf.FACTOR_TENSORS_BY_ARCH.get(arch, ((), ()))
        assert set(longrope) | set(other) == llama_cpp[arch][0], arch


def test_factors_go_unused_where_the_graph_passes_none(llama_cpp):
    for arch in set(gguf.ROPE_TYPES) & set(llama_cpp):
        created, operands, _, _ = llama_cpp[arch]
        unused = bool(created) and operands == {"nullptr"}
        assert (arch in gguf.FACTORS_UNUSED) == unused, arch


def test_mla_heads_are_those_whose_graph_splits_them(llama_cpp):
    for arch in set(gguf.ROPE_TYPES) & set(llama_cpp):
        assert (arch in gguf.MLA) == llama_cpp[arch][2], arch
