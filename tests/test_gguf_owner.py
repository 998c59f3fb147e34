"""The GGUF reader's tables of what architectures do, held to llama.cpp's own sources: the ones
the conformance install builds ggml from (llama-cpp-python's vendored llama.cpp, kept under its
engine folder's src/). Each architecture's loader (``load_arch_tensors``: the factor tensors it
creates), its graph (the freq_factors operand it hands ``ggml_rope_ext``; an MLA graph's
``n_embd_head_qk_nope`` split, which rotates each head's last dims) are read from its
src/models/<arch>.cpp, the architecture's class from src/llama-model.cpp and its GGUF name from
src/llama-arch.cpp."""

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


@pytest.fixture(scope="module")
def llama_cpp():
    """{GGUF architecture: (factor tensors its loader creates, freq_factors operands its graph
    passes, whether its graph splits MLA heads)} for every architecture with a graph and a
    loader in llama.cpp's src/models/."""
    assert engines.installed("llama-cpp-python"), "make install-conformance fetches it"
    src = os.path.join(engines.folder("llama-cpp-python"), "src")

    def read(*path):
        with open(os.path.join(src, *path), encoding="utf-8") as file:
            return file.read()

    table = read("llama-arch.cpp").split("LLM_ARCH_NAMES")[1].split("};")[0]
    names = dict(re.findall(r'\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}', table))
    model = read("llama-model.cpp")
    classes = re.findall(r"case (LLM_ARCH_\w+):\s*return new (llama_model_\w+)\(", model)
    header = read("models", "models.h")
    files = sorted(f for f in os.listdir(os.path.join(src, "models")) if f.endswith(".cpp"))
    models = [read("models", f) for f in files]
    found = {}
    for arch, name in classes:
        graph = _graph_class(header, name)
        graphs = [t for t in models if re.search(rf"\b{graph}::graph(<\w+>)?::graph\(", t)]
        loaders = [t for t in models if re.search(rf"\b{name}::load_arch_tensors\b", t)]
        if arch not in names or not graphs or not loaders:
            continue
        body = re.split(rf"{graph}::graph(?:<\w+>)?::graph\(", graphs[0])[-1]
        calls = re.findall(r"ggml_rope_ext\((.*?)\)\s*;", body, re.S)
        operands = {re.sub(r"\s+", "", call).split(",")[3] for call in calls}  # freq_factors
        load = loaders[0].split("load_arch_tensors")[1].split("build_arch_graph")[0]
        created = {tensor for token, tensor in FACTORS.items() if token in load}
        found[names[arch]] = (created, operands, "n_embd_head_qk_nope" in graphs[0])
    return found


def _graph_class(header: str, model: str) -> str:
    """The class whose graph ``model`` builds: its own, or the one its declaration in
    models.h borrows (``using graph = llama_model_x::graph``: phimoe builds phi3's)."""
    declared = re.search(rf"struct {model}\b[^{{]*\{{(.*?)\n\}};", header, re.S)
    shared = declared and re.search(r"using graph = (llama_model_\w+)::graph", declared.group(1))
    return shared.group(1) if shared else model


def test_the_sources_name_the_architectures_the_reader_knows(llama_cpp):
    """A parser that found nothing would hold every table to nothing."""
    read = set(gguf.ROPE_TYPES) & set(llama_cpp)
    assert len(read) > 60 and {"llama", "qwen2", "phi3", "deepseek2"} <= read


def test_the_factor_tensors_are_those_each_loader_creates(llama_cpp):
    # an architecture that does not rotate (refact's loader copies llama's) is read by its
    # learned or absent positions, its factor tensors never
    rotating = {arch for arch, rule in gguf.ROPE_TYPES.items() if rule != "NONE"}
    for arch in rotating & set(llama_cpp):
        longrope, other = gguf.FACTOR_TENSORS_BY_ARCH.get(arch, ((), ()))
        assert set(longrope) | set(other) == llama_cpp[arch][0], arch


def test_factors_go_unused_where_the_graph_passes_none(llama_cpp):
    for arch in set(gguf.ROPE_TYPES) & set(llama_cpp):
        created, operands, _ = llama_cpp[arch]
        unused = bool(created) and operands == {"nullptr"}
        assert (arch in gguf.FACTORS_UNUSED) == unused, arch


def test_mla_heads_are_those_whose_graph_splits_them(llama_cpp):
    for arch in set(gguf.ROPE_TYPES) & set(llama_cpp):
        assert (arch in gguf.MLA) == llama_cpp[arch][2], arch
