"""The matrix's findings about other people's packages, each asserted with the version it was
found in: an upgrade that changes one fails here instead of silently changing the table in
docs/conformance.md. The suite's own rows, the controls, must conform everywhere."""

import re

import pytest

from embedding_parity.conformance import known

pytestmark = pytest.mark.matrix  # the second tier: make conformance-test

# The versions the findings below were made with (pinned in constraints.txt and
# requirements-conformance.txt); a new version is a new finding to check.
PINNED = {
    "transformers": "5.24.0",
    "keras": "3.15.1",
    "keras-hub": "0.32.0",
    "flax": "0.12.8",
    "equinox": "0.13.8",
    "torchtune": "0.6.1",
    "mlx": "0.32.4",
    "mlx-cpu": "0.32.4",
    "mlx-lm": "0.32.2",
    "jax": "0.10.2",
    "jaxlib": "0.10.2",
    "torch": "2.13.0+cpu",
    "onnx": "1.23.2",
    "onnxruntime": "1.32.0",
    "onnxscript": "0.7.2",
    "tensorflow-cpu": "2.21.0",
    "vllm": "0.33.0",
    "openvino": "2026.4.1",
    "paddlepaddle": "3.3.1",
    "llama-cpp-python": "0.3.36",
    "sglang": "0.5.23",
    "executorch": "1.5.1",
    "gguf": "0.19.0",
}


def _native_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX), where OpenVINO's CPU
    plugin takes bfloat16 as its default precision hint (else float32)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return re.search(r"\b(avx512_bf16|amx_bf16)\b", info.read()) is not None
    except OSError:
        return False


# row: {check: words its detail must hold}; "raises" means the check conforms by raising.
FINDINGS = {
    "NumPy: table[ids] + positions": {
        "bad id: vocab_size": "raises",
        "bad id: -1": "wraps to row 63",
    },
    "torch nn.Embedding": {
        "bad id: vocab_size": "raises",
        "bad id: -1": "raises",
        "forward bfloat16": "bit-identical",
    },
    "transformers GPT-2 wte + wpe": {"bad id: -1": "raises", "forward float16": "bit-identical"},
    "JAX x[ids]": {"bad id: vocab_size": "clamps to row 63", "bad id: -1": "wraps to row 63"},
    "JAX jnp.take": {"bad id: vocab_size": "fills NaN", "bad id: far out of range": "fills NaN"},
    "keras-hub TokenAndPositionEmbedding (jax)": {
        "bad id: vocab_size": "fills NaN",
        "bad id: -1": "wraps to row 63",
        "bad id: non-integer (1.5)": "truncates 1.5 to 1",
        "forward float32": "bit-identical",
    },
    "keras-hub TokenAndPositionEmbedding (torch)": {
        "bad id: vocab_size": "raises",
        "bad id: -1": "wraps to row 63",
    },
    "keras-hub TokenAndPositionEmbedding (numpy)": {
        "bad id: vocab_size": "raises",
        "bad id: -1": "wraps to row 63",
    },
    # padding_idx=None is kept as -1, whose rows the CPU kernel leaves unwritten: id -1
    # returns whatever the output's memory held (zeros in fresh pages), never an error
    "PaddlePaddle nn.Embedding": {
        "bad id: -1": "a silent wrong answer",
        "bad id: vocab_size": "raises",
        "bad id: far out of range": "raises",
        "forward float32": "bit-identical",
        "forward float16": "rejects float16",
    },
    "flax nnx.Embed": {"bad id: vocab_size": "fills NaN", "bad id: -1": "wraps to row 63"},
    "equinox nn.Embedding": {
        "bad id: vocab_size": "clamps to row 63",
        "bad id: -1": "wraps to row 63",
    },
    "torchtune RotaryPositionalEmbeddings": {"rotation float32": "interleaved layout"},
    "transformers Llama rotary + apply_rotary_pos_emb": {
        "rotation float32": "within tolerance",
        "long positions bfloat16": "within tolerance",
        "rotation float64": "computed in float32",
    },
    "keras-hub RotaryEmbedding (jax)": {
        "rotation float16": "within tolerance",
        "rotation float64": "computed in float32",
    },
    "keras-hub SinePositionEncoding (jax)": {"positions to 131071": "within tolerance"},
    "transformers BLOOM build_alibi_tensor": {
        "slopes, 1 to 128 heads": "11 heads (not a power of two)"
    },
    # (on JAX the same verdict takes 38 s: a fresh trace for each head count)
    "keras-hub AlibiBias (numpy)": {"slopes, 1 to 128 heads": "bit-identical"},
    "transformers T5 _relative_position_bucket": {
        "buckets bidirectional, 32 buckets, max distance 128": "exact"
    },
    "transformers rotary at llama-3.2-1b": {
        "long positions float32": "within tolerance",
        "rotation float64": "computed in float32",
    },
    "transformers rotary at gpt-oss-20b": {"long positions bfloat16": "within tolerance"},
    "transformers rotary at phi-3-mini-128k": {"long positions float16": "within tolerance"},
    "transformers rotary at gpt-neox-20b": {"long positions float32": "within tolerance"},
    "transformers rotary at deepseek-v3": {
        "rotation float32": "interleaved pairs in, the half layout out"
    },
    "transformers Gemma3RotaryEmbedding at gemma-3-4b": {
        "rotation sliding_attention float32": "within tolerance",
        "long positions full_attention float32": "within tolerance",
        "layer map float32": "within tolerance",
    },
    "transformers ModernBertRotaryEmbedding at modernbert-base": {
        "rotation full_attention bfloat16": "within tolerance",
        "layer map float32": "within tolerance",
    },
    "transformers Olmo3RotaryEmbedding at olmo-3-7b": {
        "long positions full_attention float32": "within tolerance",
        "layer map float32": "within tolerance",
    },
    "transformers SmolLM3 rotary and no_rope_layers at smollm3-3b": {
        "rotation nope float32": "bit-identical",
        "layer map float32": "within tolerance",
    },
    "transformers Llama 4 rotary and no_rope_layers at llama-4-scout": {
        "rotation chunked_attention float64": "computed in float32",
        "rotation full_attention bfloat16": "bit-identical",
        "layer map float32": "within tolerance",
    },
    "transformers Gemma4TextRotaryEmbedding at gemma-4-e2b": {
        "rotation full_attention float64": "computed in float32",
        "long positions full_attention float32": "within tolerance",
        "layer map float32": "within tolerance",
    },
    "transformers Qwen2_5_VLRotaryEmbedding at qwen2.5-vl-7b": {
        "text tokens float64": "computed in float32",
        "image tokens float32": "within tolerance",
        "video tokens bfloat16": "within tolerance",
    },
    "transformers Qwen3VLTextRotaryEmbedding at qwen3-vl-8b": {
        "image tokens float32": "within tolerance",
        "long positions float16": "within tolerance",
    },
    "transformers Glm4vTextRotaryEmbedding at glm-4.1v-9b": {
        "video tokens float32": "within tolerance",
    },
    "transformers Qwen3_5TextRotaryEmbedding at qwen3.5-27b": {
        "image tokens float32": "within tolerance",
    },
    "transformers Qwen2_5_VLModel.get_rope_index at qwen2.5-vl-7b": {
        "video at half-second steps": "exact",
        "left padding": "exact",
    },
    # Qwen3-VL's and GLM-4V's builders: one code, each video frame a grid between timestamps
    "transformers Qwen3VLModel.get_rope_index at qwen3-vl-8b": {
        "video frames between timestamps": "exact",
        "left padding": "exact",
    },
    "transformers Glm4vModel.get_rope_index at glm-4.1v-9b": {
        "video then image": "exact",
        "left padding": "exact",
    },
    "transformers DeepSeek softmax scale at deepseek-v3": {"scale every layer": "within"},
    # its NoPE layers' temperature from positions.float(): float32's precision, where the
    # contract is the formula in float64
    "transformers Llama4TextAttention temperature at llama-4-scout": {
        "scale chunked_attention": "within tolerance",
        "scale full_attention": "computed in float32 (transformers' positions.float())",
    },
    "transformers DeepSeek softmax scale at deepseek-v2-lite": {"scale every layer": "within"},
    "transformers Cohere2 rotary on sliding layers at command-r7b": {
        "rotation full_attention float16": "bit-identical",
        "layer map float32": "within tolerance",
    },
    "transformers rotary at llama-2-7b-dynamic": {"long positions float32": "within tolerance"},
    "torchtune Llama3ScaledRoPE at llama-3.2-1b": {"rotation float32": "interleaved layout"},
    "keras-hub RotaryEmbedding linear at gemma-3-4b full_attention (jax)": {
        "long positions full_attention float32": "within tolerance"
    },
    # keras-hub's converter from a transformers checkpoint, then its backbone: each layer type
    "keras-hub Gemma3Backbone's layers at gemma-3-4b (jax)": {
        "rotation sliding_attention float32": "within tolerance",
        "long positions full_attention bfloat16": "within tolerance",
        "layer map float32": "within tolerance",
    },
    "keras-hub RotaryEmbedding dynamic at llama-2-7b-dynamic (jax)": {
        "rotation float32": "static (keras-hub's rope_type 'dynamic')"
    },
    "keras-hub RotaryEmbedding yarn at qwen2.5-7b (jax)": {
        "long positions bfloat16": "within tolerance"
    },
    "keras-hub LlamaRotaryEmbedding at llama-3.2-1b (jax)": {
        "long positions float32": "within tolerance"
    },
    "keras-hub Phi3SuScaledRotaryEmbedding at phi-3-mini-128k (jax)": {
        "rotation float32": "raises ValueError"
    },
    "keras-hub Phi3SuScaledRotaryEmbedding from a start at phi-3-mini-128k (jax)": {
        "long positions float32": "within tolerance"
    },
    "MLX nn.RoPE (mx.fast.rope)": {
        "long positions float32": "within tolerance",
        "rotation float64": "computed in float32",
    },
    "mlx-lm initialize_rope at llama-3.2-1b": {"rotation float32": "within tolerance"},
    "mlx-lm initialize_rope at qwen2.5-7b": {"rotation bfloat16": "within tolerance"},
    "mlx-lm initialize_rope at gpt-oss-20b": {"rotation float32": "YaRN's truncate ignored"},
    "mlx-lm initialize_rope at phi-3-mini-128k": {"rotation float32": "LongRoPE always long"},
    "mlx-lm initialize_rope at gemma-3-4b full_attention": {
        "rotation full_attention float32": "within tolerance"
    },
    # mlx-lm's model files: Gemma 3's and 4's layer types and Llama 4's NoPE layers as
    # transformers has them; its Qwen3-VL is a text model, one position per token (the t row)
    "mlx-lm gemma3_text Attention rope at gemma-3-4b": {
        "rotation sliding_attention float32": "within tolerance",
        "layer map float32": "within tolerance",
    },
    "mlx-lm gemma4_text Attention rope at gemma-4-e2b": {
        "long positions full_attention float32": "within tolerance",
        "layer map float32": "within tolerance",
    },
    "mlx-lm llama4 Attention rope at llama-4-scout": {
        "rotation full_attention float32": "bit-identical",
        "layer map float32": "within tolerance",
    },
    "mlx-lm qwen3_vl (its text model) Attention rope at qwen3-vl-8b": {
        "text tokens float32": "within tolerance",
        "image tokens float32": "the temporal row for every frequency slot",
    },
    "mlx-lm initialize_rope at llama-2-7b-dynamic": {"long positions float32": "within tolerance"},
    "mlx-lm initialize_rope at gpt-neox-20b": {
        "rotation float64": "(24..95) rounded through float32"
    },
    "transformers Gemma scaled embedding at gemma-7b": {
        "scaled bfloat16": "bit-identical",
        "bad id: -1": "raises",
    },
    "transformers OPT position ids": {"position ids, left padding after a cache of 4": "exact"},
    "transformers RoBERTa position ids": {"position ids, left padding": "exact"},
    "transformers BART position ids": {"position ids, right padding": "exact"},
    "transformers BertEmbeddings (MiniLM's config)": {"sum bfloat16": "bit-identical"},
    "JAX jax.vjp of x[ids]": {
        "gradient, bad id: vocab_size": "drops it",
        "gradient float32": "n * eps",
    },
    # TensorFlow: tf.gather raises for every bad id on the CPU, the same gather under XLA clamps
    # them; Keras's Embedding on TensorFlow wraps -1 (keras.ops.take adds the vocabulary size
    # to a negative id before tf.gather) and truncates 1.5; keras-hub's layers behave on
    # TensorFlow as on its other backends
    "TensorFlow tf.gather": {
        "forward float64": "bit-identical",
        "forward float16": "bit-identical",
        "forward bfloat16": "bit-identical",
        "bad id: vocab_size": "raises",
        "bad id: -1": "raises",
        "bad id: far out of range": "raises",
        "bad id: non-integer (1.5)": "raises",
    },
    "TensorFlow tf.nn.embedding_lookup": {
        "forward bfloat16": "bit-identical",
        "bad id: vocab_size": "raises",
        "bad id: -1": "raises",
    },
    "TensorFlow tf.gather under XLA (jit_compile=True)": {
        "forward float64": "bit-identical",
        "forward bfloat16": "bit-identical",
        "bad id: vocab_size": "clamps to row 63",
        "bad id: -1": "clamps to row 0",
        "bad id: far out of range": "clamps to row 63",
        "bad id: non-integer (1.5)": "raises",
    },
    "Keras Embedding (tensorflow)": {
        "forward bfloat16": "bit-identical",
        "bad id: vocab_size": "raises",
        "bad id: -1": "wraps to row 63",
        "bad id: far out of range": "raises",
        "bad id: non-integer (1.5)": "truncates 1.5 to 1",
    },
    "TensorFlow tf.GradientTape of tf.gather": {
        "gradient float64": "bit-identical",
        "gradient bfloat16": "n * eps",
        "gradient, bad id: vocab_size": "raises",
        "gradient, bad id: -1": "raises",
    },
    "keras-hub TokenAndPositionEmbedding (tensorflow)": {
        "forward float16": "bit-identical",
        "bad id: vocab_size": "raises",
        "bad id: -1": "wraps to row 63",
        "bad id: non-integer (1.5)": "truncates 1.5 to 1",
    },
    "keras-hub RotaryEmbedding (tensorflow)": {
        "rotation float32": "within tolerance",
        "rotation float64": "computed in float32",
    },
    "keras-hub SinePositionEncoding (tensorflow)": {"positions to 131071": "within tolerance"},
    "keras-hub AlibiBias (tensorflow)": {"slopes, 1 to 128 heads": "bit-identical"},
    # along the production paths: what each changes from eager is said as the path's
    "torch nn.Embedding through onnx": {
        "bad id: -1": "through onnx: token_ids [3, -1, 5]: wraps to row 63: a silent wrong "
        "answer; eager: raises IndexError",
        "bad id: vocab_size": "raises",
        "forward float16": "bit-identical",
        "forward bfloat16": "the path rejects bfloat16: onnxruntime.InferenceSession raised "
        "NotImplemented",
    },
    "torch nn.Embedding through torch.compile": {
        "bad id: -1": "raises",
        "forward bfloat16": "bit-identical",
    },
    "torch nn.Embedding through torch.export": {"bad id: -1": "raises"},
    "JAX x[ids] through jax.jit": {"bad id: -1": "wraps to row 63"},
    "JAX x[ids] through jax.export": {"bad id: vocab_size": "clamps to row 63"},
    "transformers rotary at llama-3.2-1b through onnx": {
        "long positions float32": "within tolerance",
        "rotation float64": "computed in float32",
    },
    "JAX jax.vjp of x[ids] through jax.export": {"gradient, bad id: -1": "wraps to row 63"},
    # the suite's layers check ids and positions on the host: no exporter can trace that
    "embedding-parity torch (lookup) through torch.export": {
        "forward float32": ".numpy() is not supported for tensor subclasses"
    },
    "embedding-parity jax (lookup) through jax.jit": {
        "forward float32": "TracerArrayConversionError"
    },
    "embedding-parity jax (sinusoidal) through jax.export": {"table 64 x 16": "within tolerance"},
    # vLLM's rotary code (forward_native): its cos and sin table is built in float32, whatever
    # the model's dtype, and cast to it
    "vLLM get_rope": {
        "rotation float32": "within tolerance",
        "rotation bfloat16": "within tolerance",
        "rotation float64": "computed in float32",
        "long positions float64": "computed in float32",
    },
    "vLLM get_rope at llama-3.2-1b": {
        "long positions float32": "within tolerance",
        "long positions float64": "computed in float32",
    },
    "vLLM get_rope at qwen2.5-7b": {"long positions float32": "within tolerance"},
    # gpt-oss's truncate: false is read (vLLM #27722 was fixed before 0.33.0)
    "vLLM get_rope at gpt-oss-20b": {"long positions float32": "within tolerance"},
    "vLLM get_rope at deepseek-v3": {"long positions float32": "within tolerance"},
    # max_model_len 131072 > 4096: the long factors at every length, by design ("to prevent KV
    # cache invalidation when sequences cross this threshold")
    "vLLM get_rope at phi-3-mini-128k": {
        "rotation float32": "LongRoPE always long",
        "long positions float32": "within tolerance",
    },
    "vLLM get_rope at gpt-neox-20b": {"long positions float32": "within tolerance"},
    "vLLM get_rope at phi-2": {"long positions float32": "within tolerance"},
    "vLLM get_rope at gpt-j-6b": {"long positions float32": "within tolerance"},
    # "dynamic" with max_trained_positions = max_position: base * 1 ** (d / (d - 2)), a fixed
    # table of plain RoPE (no length-dependent base)
    "vLLM get_rope at llama-2-7b-dynamic": {
        "rotation float32": "within tolerance",
        "long positions float32": "dynamic scaling ignored (the plain rotation)",
    },
    # M-RoPE (MRotaryEmbedding, positions (3, T)) and Gemma 4's proportional rule
    # (Gemma4RotaryEmbedding: the first 64 of 256 slots turned, the rest at frequency 0)
    "vLLM get_rope at qwen2.5-vl-7b": {"image tokens float32": "within tolerance"},
    "vLLM get_rope at qwen3-vl-8b": {"video tokens float32": "within tolerance"},
    "vLLM get_rope at gemma-4-e2b full_attention": {
        "long positions full_attention float32": "within tolerance"
    },
    "SGLang get_rope at qwen2.5-vl-7b": {"image tokens float32": "within tolerance"},
    "SGLang get_rope at qwen3-vl-8b": {"video tokens float32": "within tolerance"},
    "SGLang get_rope at gemma-4-e2b full_attention": {
        "long positions full_attention float32": "within tolerance"
    },
    # the collator numbers each document from 0: right for RoPE models, one row short of
    # RoBERTa's (its rows count from padding_idx + 1 = 2; rows 0 and 1 are its pad's)
    "transformers DataCollatorWithFlattening": {
        "packed positions from 0": "exact",
        "packed positions from 2": "start ignored: each document from 0, not 2",
    },
    "transformers DataCollatorWithFlattening at roberta-base": {
        "packed positions from 2": "start ignored: each document from 0, not 2",
    },
    "vLLM get_rope at base 10000, head_dim 16, a fresh instance per call": {
        "batch = row by row, T = 1 (decode)": "bit-identical",
        "a call in another dtype leaves later calls unchanged": "bit-identical",
    },
    # get_rope's one instance per configuration recasts its table to a call's dtype in place
    # (_match_cos_sin_cache_dtype): after a bfloat16 call, float32 calls read bfloat16 values
    "vLLM get_rope at base 10000, head_dim 16, one shared float32 instance (as its models "
    "call it)": {
        "a call in another dtype leaves later calls unchanged": "positions [1000, 1001",
        "strided x = contiguous x": "bit-identical",
    },
    # OpenVINO's CPU plugin: a gather that raises nothing (id -1 reads the last row, ids past
    # the table read zeros), float64 computed in float32, and under its default precision hint
    # (bfloat16 on this CPU, which has AVX-512 BF16) a bfloat16 rotation's angles in bfloat16
    # (convert_model traces the call's own arrays: a float32 program is made by a valid case
    # first, then the bad ids repeated to its shape run on it, as a deployment's ids do)
    "torch nn.Embedding through openvino": {
        "forward float32": "bit-identical",
        "bad id: -1": "wraps to row 63",
        "bad id: vocab_size": "zero row",
        "bad id: far out of range": "zero row",
        "forward float64": "computed in float32 (the float64 tables rounded to it)",
        "forward bfloat16": "bit-identical",
    },
    "torch nn.Embedding through openvino-f32": {
        "forward float32": "bit-identical",
        "bad id: -1": "wraps to row 63",
    },
    "transformers rotary at llama-3.2-1b through openvino": {
        "long positions bfloat16": (
            "phase error 3.1 rad at position 131071" if _native_bfloat16() else "within tolerance"
        ),
        "long positions float32": "within tolerance",
        "rotation float64": "computed in float32",
    },
    # ExecuTorch 1.5.1: its portable kernels and XNNPACK both raise on a bad id (error 0x12,
    # InvalidArgument) and give eager's lookup bit for bit; the rotation within its bound
    "torch nn.Embedding through executorch": {
        "forward float32": "bit-identical",
        "forward bfloat16": "bit-identical",
        "bad id: -1": "raises",
        "bad id: vocab_size": "raises",
    },
    "torch nn.Embedding through executorch-xnnpack": {
        "forward float32": "bit-identical",
        "bad id: -1": "raises",
    },
    "transformers rotary at llama-3.2-1b through executorch": {
        "long positions float32": "within tolerance",
        "rotation bfloat16": "within tolerance",
    },
    "transformers rotary at llama-3.2-1b through executorch-xnnpack": {
        "long positions float32": "within tolerance",
    },
    "transformers rotary at llama-3.2-1b through openvino-f32": {
        "long positions bfloat16": "within tolerance",
    },
    # SGLang's rotary code (forward_native): vLLM's, but for "dynamic", whose one table is at
    # base * (2 * factor - 1) ** (d / (d - 2)) at every length (vLLM's is base); and its
    # native path casts cos and sin per call, so that a shared instance keeps no state
    "SGLang get_rope": {
        "rotation float32": "within tolerance",
        "rotation float64": "computed in float32",
    },
    "SGLang get_rope at llama-3.2-1b": {"long positions float32": "within tolerance"},
    "SGLang get_rope at qwen2.5-7b": {"long positions float32": "within tolerance"},
    "SGLang get_rope at gpt-oss-20b": {"long positions float32": "within tolerance"},
    "SGLang get_rope at phi-3-mini-128k": {
        "rotation float32": "within tolerance",
        "long positions float32": "within tolerance",
    },
    "SGLang get_rope at gpt-j-6b": {"long positions float32": "within tolerance"},
    "SGLang get_rope at llama-2-7b-dynamic": {
        "rotation float32": "dynamic NTK computed once at the longest length",
        "long positions float32": "dynamic NTK computed once at the longest length",
    },
    "SGLang get_rope at base 10000, head_dim 16, one shared float32 instance (as its models "
    "call it)": {
        "a call in another dtype leaves later calls unchanged": "bit-identical",
    },
    # llama.cpp's ggml 0.25.3: float32 and float16 only (a bfloat16 rotation would abort the
    # process: the adapter refuses it first); each angle from theta_scale multiplied step by
    # step, within the bound; a bad id aborts the process (GGML_ASSERT), no error to catch
    "llama.cpp ggml_rope_ext": {
        "rotation bfloat16": "aborts the whole process (GGML_ABORT)",
        "rotation float64": "ggml has no float64",
        "long positions float32": "within tolerance",
        "rotation float16": "within tolerance",
    },
    "llama.cpp ggml_rope_ext at gpt-neox-20b": {"long positions float32": "within tolerance"},
    "llama.cpp ggml_rope_ext at gpt-j-6b": {"long positions float32": "within tolerance"},
    "llama.cpp ggml_get_rows + ggml_add": {
        "forward float32": "bit-identical",
        "forward float16": "returns float32 for float16",
        "bad id: -1": "GGML_ASSERT(i01 >= 0 && i01 < ne01) failed",
        "bad id: vocab_size": "llama.cpp/ggml/src/ggml-cpu/ops.cpp",
    },
    # transformers' own models scale their input embeddings as the kit's rules say, bit for
    # bit, in every dtype: in the module (Gemma, MiniCPM: given embeddings passed on) or in
    # forward (Granite: given embeddings too; Falcon-H1: the looked-up rows only)
    **{
        f"transformers {model} input embeddings": {
            "ids bfloat16": "bit-identical",
            "given bfloat16": "bit-identical",
            "ids float16": "bit-identical",
            "given float32": "bit-identical",
            "bad id: -1": "raises",
        }
        for model in ("GraniteModel", "FalconH1Model", "MiniCPM3Model", "Gemma3TextModel")
    },
    # the formats as gguf.quants reads them, bit for bit; the whole table dequantized, then
    # NumPy's indexing, which wraps -1 to the last row
    "gguf.quants dequantize, then [ids]": {
        **{f"{k} rows": "bit-identical" for k in ("Q8_0", "Q4_0", "Q5_1", "Q4_K", "Q6_K")},
        "bad id: -1": "wraps to row 63",
        "bad id: vocab_size": "raises",
    },
    # ggml decodes only the rows it gathers, bit for bit gguf.quants' values; a bad id aborts
    "llama.cpp ggml_get_rows on a quantized table": {
        **{f"{k} rows": "bit-identical" for k in ("Q8_0", "Q4_1", "Q5_0", "Q4_K", "Q6_K")},
        "bad id: -1": "GGML_ASSERT(i01 >= 0 && i01 < ne01) failed",
    },
    # transformers 5.24's GGUF reader keeps a GGUF model's table packed and unpacks the ids'
    # rows in torch: bit for bit where it reads the format; it has no Q5_0 or Q5_1
    "transformers GgufEmbedding": {
        **{f"{k} rows": "bit-identical" for k in ("Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K")},
        "Q5_0 rows": "transformers' GGUF reader has no Q5_0",
        "Q5_1 rows": "transformers' GGUF reader has no Q5_1",
        "bad id: -1": "raises",
    },
    "llama.cpp ggml_rope_ext: invariances": {
        "batch = row by row, T = 1 (decode)": "bit-identical",
        "chunked prefill = one call": "bit-identical",
    },
    "MLX nn.RoPE (mx.fast.rope): invariances": {
        "batch = row by row, T = 1 (decode)": "bit-identical",
        "packed documents = each document alone": "bit-identical",
    },
    "transformers Llama rotary + apply_rotary_pos_emb: invariances": {
        "chunked prefill = one call": "bit-identical",
        "a call in another dtype leaves later calls unchanged": "bit-identical",
    },
    "JAX x[ids]: invariances": {"strided ids = contiguous ids": "bit-identical"},
}
# The suite's own rows, NumPy's for every kind (tests/test_parity.py, test_positional.py and
# test_attention_bias.py hold torch and JAX to NumPy, bit for bit or within the tolerance).
CONTROLS = [
    *(
        f"embedding-parity numpy ({kind})"
        for kind in ("lookup", "quantized_lookup", "sinusoidal", "rope", "alibi", "t5", "gradient")
    ),
    *(
        f"embedding-parity numpy ({kind} at {preset})"
        for kind, preset in (
            ("rope", "llama-3.2-1b"),
            ("rope", "gpt-neox-20b"),
            ("lookup", "gemma-7b"),
            ("position_ids", "opt-125m"),
            ("bert", "bert-base-uncased"),
        )
    ),
    *(f"embedding-parity numpy ({kind}): invariances" for kind in ("lookup", "rope")),
    *(
        f"embedding-parity numpy (scaled_inputs, {model})"
        for model in ("GraniteModel", "FalconH1Model", "MiniCPM3Model", "Gemma3TextModel")
    ),
    "embedding-parity (packed_positions)",
]


@pytest.fixture(scope="module")
def matrix():
    # A finding's row runs the checks it names (make conformance runs them all); the controls
    # run every check.
    rows = known.run([*FINDINGS, *CONTROLS], only=FINDINGS)["rows"]
    return {r["name"]: r for r in rows}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FINDINGS))
def test_each_finding_holds_at_its_version(matrix, name):
    record = matrix[name]
    assert "missing" not in record, record.get("missing")
    for package, version in record["versions"].items():
        if package in PINNED:
            assert version == PINNED[package], (
                f"{package} {version}: check this row's findings again"
            )
    checks = {c["check"]: c for c in record["report"]["checks"]}
    for check, words in FINDINGS[name].items():
        found = checks[check]
        if words == "raises":
            assert found["status"] == "conforms" and found["detail"].startswith("raises"), found
        else:
            assert words in found["detail"], found


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTROLS)
def test_the_suites_own_rows_conform_everywhere(matrix, name):
    report = matrix[name]["report"]
    assert report["conforms"], [c for c in report["checks"] if c["status"] != "conforms"]


@pytest.mark.slow
def test_vllms_llama_3_2_rotation_is_transformers_bit_for_bit():
    # held row to row (--against ROW): every case the same bits; float64 as wrong in both
    # (each computes it in float32)
    vllm, hf = "vLLM get_rope at llama-3.2-1b", "transformers rotary at llama-3.2-1b"
    [record] = known.run([vllm], against=hf)["rows"]
    assert record["against"] == hf
    assert record["versions"] == {p: PINNED[p] for p in ("vllm", "torch")}, record
    for check in record["report"]["checks"]:
        assert "bit-identical to " in check["detail"], check
        float64 = check["check"].endswith("float64")
        assert check["status"] == ("differs" if float64 else "conforms"), check


def test_every_tensorflow_row_has_its_findings():
    # the vision rows' findings are test_vision_matrix.py's (test_every_vision_row_has_its_...)
    tensorflow = {r.name for r in known.ROWS if r.framework == "tensorflow"}
    assert tensorflow - {r.name for r in known.VISION} <= set(FINDINGS)


def test_every_row_names_an_adapter_that_exists():
    import importlib.util
    import pathlib

    for row in known.ROWS:
        module, _, function = row.target.partition(":")
        spec = importlib.util.find_spec(f"{known.ADAPTERS}.{module}")
        assert spec is not None and function, row
        source = pathlib.Path(spec.origin).read_text(encoding="utf-8")
        assert f"def {function}(" in source or f"\n{function} = " in source, row
