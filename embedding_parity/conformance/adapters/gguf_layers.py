"""gguf-py (llama.cpp's own Python reader, ``gguf.quants``): the whole table dequantized, then
the rows of the ids taken with NumPy indexing, as a script that reads a GGUF file does."""

import gguf


def dequantize_then_gather(blocks, format, token_ids):
    table = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[format])  # (vocab, dim)
    return table[token_ids]
