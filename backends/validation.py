"""Validation shared by every backend: written once, run on the host before any framework op.

Raw frameworks disagree on bad input (NumPy wraps negative ids, JAX clamps or fills
NaN, torch raises), so every backend calls these functions first and the suite
raises the same exception, with the same message, whatever the framework.
"""

from __future__ import annotations

import math
import numbers
import operator

import ml_dtypes
import numpy as np

# The four dtypes the parity contract covers, by name.
DTYPES = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}


def resolve_dtype(dtype) -> np.dtype:
    """Map a dtype name or NumPy dtype to one of DTYPES, or raise ValueError."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}: use one of {', '.join(DTYPES)}")
    return DTYPES[name]


def native(array) -> np.ndarray:
    """``array`` as a NumPy array in this machine's byte order: big-endian data (from a file,
    say) is accepted by every backend, converted once on the host (a copy only then)."""
    array = np.asarray(array)
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def check_tables(token_table, position_table) -> tuple[np.ndarray, np.ndarray]:
    """Return both tables as NumPy arrays after checking they fit together.

    token_table (vocab_size, dim) and position_table (max_seq_len, dim) must be
    2-D, of one floating dtype from DTYPES and of the same dim. Raises ValueError.
    """
    tables = {"token_table": native(token_table), "position_table": native(position_table)}
    for name, table in tables.items():
        if table.ndim != 2:
            raise ValueError(
                f"{name} must be 2-D (rows, dim), got shape {table.shape}: "
                "pass one row per token (or position) and one column per dimension"
            )
        if table.dtype not in DTYPES.values():
            raise ValueError(
                f"{name} has dtype {table.dtype}, but the tables must be floating point, "
                f"one of {', '.join(DTYPES)}: convert with .astype(np.float32), say"
            )
    token_table, position_table = tables.values()
    if token_table.shape[1] != position_table.shape[1]:
        raise ValueError(
            f"token_table has dim {token_table.shape[1]} but position_table has dim "
            f"{position_table.shape[1]}: both tables need the same number of columns"
        )
    if token_table.dtype != position_table.dtype:
        raise ValueError(
            f"token_table is {token_table.dtype} but position_table is {position_table.dtype}: "
            "cast both to one dtype so the sum is rounded once, the same way on every backend"
        )
    return token_table, position_table


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}  # by itemsize


def ids_dtype_error(dtype, what: str = "token_ids") -> TypeError:
    """The error for ids or positions that are not integers (shared so native dtypes get it too)."""
    return TypeError(
        f"{what} must be integers, got dtype {dtype}: "
        "cast to an integer dtype such as int64, after making sure every value is a whole number"
    )


def check_token_ids(
    token_ids: np.ndarray, vocab_size: int, tokenizer_size: int | None = None
) -> np.ndarray:
    """Check host-side token_ids: integer dtype, 1-D or 2-D, every id in [0, vocab_size).

    Raises TypeError, ValueError or IndexError; returns token_ids unchanged. tokenizer_size:
    the tokenizer's, where the table has padding rows past it (those ids are rows; the error
    for an id past the table says so). Cost: one max over the ids, nothing per element.
    """
    if token_ids.dtype.kind not in "iu":  # signed or unsigned integers; not bool, float, ...
        _refuse_python_ints(token_ids, vocab_size, tokenizer_size)
        raise ids_dtype_error(token_ids.dtype)
    check_ids_shape(token_ids.shape)
    if token_ids.size and not _ids_in_range(token_ids, vocab_size):
        bad = (token_ids < 0) | (token_ids >= vocab_size)
        where = np.unravel_index(int(np.flatnonzero(bad)[0]), token_ids.shape)
        index = ", ".join(str(int(i)) for i in where)
        raise id_out_of_range(int(token_ids[where]), index, vocab_size, tokenizer_size)
    return token_ids


def id_out_of_range(value, index: str, vocab_size: int, tokenizer_size=None) -> IndexError:
    """The error for token id ``value`` at token_ids[index] (also a template, with "{}"); with
    a tokenizer smaller than the table (padding rows), the bound it crossed is named."""
    if tokenizer_size is not None and tokenizer_size < vocab_size and value >= vocab_size:
        return IndexError(
            f"token id {value} at token_ids[{index}] is past the token table's {vocab_size} "
            f"rows (vocab_size): ids must be in [0, {vocab_size - 1}]. The tokenizer's "
            f"{tokenizer_size} ids end before the table does (rows {tokenizer_size} to "
            f"{vocab_size - 1} are padding, legal rows no text makes), so no tokenizer made "
            "this id: check where the ids come from"
        )
    return IndexError(
        f"token id {value} at token_ids[{index}] is out of range for "
        f"vocab_size {vocab_size}: ids must be in [0, {vocab_size - 1}]; "
        "check that the tokenizer matches the token table"
    )


def check_ids_shape(shape: tuple) -> None:
    """token_ids must be 1-D (T,) or 2-D (B, T): a check of metadata alone."""
    if len(shape) not in (1, 2):
        raise ValueError(
            f"token_ids must be 1-D (T,) or 2-D (B, T), got shape {tuple(shape)}: "
            "reshape to (batch, sequence length)"
        )


# Up to this many ids, Python's min and max over .tolist() (0.2 µs for 4 ids) beat a NumPy
# reduction, whose set-up alone costs about 0.8 µs: most of a decode step's whole lookup.
_FEW_IDS = 64


def _ids_in_range(token_ids: np.ndarray, vocab_size: int) -> bool:
    if token_ids.size <= _FEW_IDS:
        ids = token_ids.ravel().tolist()
        return min(ids) >= 0 and max(ids) < vocab_size
    if token_ids.dtype.kind == "u":
        return token_ids.max() < vocab_size
    itemsize = token_ids.dtype.itemsize
    if token_ids.dtype.isnative and vocab_size <= 2 ** (8 * itemsize - 1):
        # One pass: viewed as unsigned, a negative id (two's complement) is at least
        # 2**(bits - 1) >= vocab_size, so a single max finds both kinds of bad id.
        return token_ids.view(_UNSIGNED[itemsize]).max() < vocab_size
    return token_ids.min() >= 0 and token_ids.max() < vocab_size


def as_host(array) -> np.ndarray:
    """np.asarray, except for lists of Python ints that NumPy would not make integer: an
    empty list stays integer (NumPy: float64), and ints beyond int64 stay Python ints in an
    object array (NumPy: float64 for [-1, 2**63], object for [10**30]), so that the checks
    name the id rather than a dtype the caller never chose."""
    host = np.asarray(array)
    if host.dtype.kind in "iu" or not isinstance(array, list | tuple):
        return host
    if host.size == 0:
        return host.astype(np.int64)
    if host.dtype.kind in "fO":
        exact = np.array(array, dtype=object)
        if all(_is_int(value) for value in exact.flat):
            return exact
    return host


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def _refuse_python_ints(token_ids: np.ndarray, vocab_size: int, tokenizer_size=None) -> None:
    """Ids held as Python ints (``as_host`` keeps ints beyond int64 so): the IndexError for
    the first one out of range. In range, they are still not an integer dtype: the caller
    raises the TypeError."""
    if token_ids.dtype.kind != "O" or not all(_is_int(v) for v in token_ids.flat):
        return
    for where, value in np.ndenumerate(token_ids):
        if not 0 <= value < vocab_size:
            where = ", ".join(map(str, where))
            raise id_out_of_range(value, where, vocab_size, tokenizer_size)


def integer(value, what: str) -> int:
    """value as an int; bool, float and everything else without __index__ is a TypeError."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {value!r}") from None


def _positive(value, what: str) -> float:
    """value as a finite float > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{what} must be positive and finite, got {value!r}")
    return number


def check_base(value, what: str = "base") -> float:
    """A sinusoidal or RoPE base: a finite number above 1. Only above 1 do the frequencies
    base**(-2i/dim) fall from 1 (at 1e-300 they overflow to inf, and every row is NaN)."""
    number = _positive(value, what)
    if not number > 1:
        raise ValueError(
            f"{what} must be above 1, got {value!r}: the frequencies base**(-2i/dim) fall from "
            "1 only for a base above 1 (models use 10000 to 1e7)"
        )
    return number


def negative_start_message(start) -> str:
    return f"start {start} is negative: positions count from 0"


def check_positions(start, length: int, max_seq_len: int | None) -> int:
    """Check that positions start .. start + length - 1 exist in the position table.

    Returns start as a Python int. Raises TypeError for a non-integer start and
    ValueError for start < 0 or start + length > max_seq_len (None: no table, no limit).
    """
    if type(start) is not int:  # the common case skips the conversion: bool is not int here
        start = integer(start, "start")
    if type(length) is not int:
        length = integer(length, "the number of positions")
    if length < 0:
        raise ValueError(f"the number of positions must be at least 0, got {length}")
    if start < 0:
        raise ValueError(negative_start_message(start))
    if max_seq_len is not None and start + length > max_seq_len:
        room = max_seq_len - start
        fix = (
            f"use at most {room} token{'' if room == 1 else 's'} from start {start}"
            if room > 0
            else f"start below {max_seq_len}"
        )
        raise ValueError(
            f"start {start} + T {length} = {start + length} exceeds max_seq_len {max_seq_len}: "
            f"{fix}, or a longer position table"
        )
    return start


def check_out(out, out_dtype, contiguous: bool, shape: tuple, dtype) -> None:
    """A caller's output buffer must be exactly what the layer would have allocated.

    ``out_dtype`` and ``dtype`` are the framework's dtype objects, compared as they are
    (naming them is slow, so it happens only for the error message).
    """
    if tuple(out.shape) != shape or out_dtype != dtype or not contiguous:
        name, out_name = (str(d).removeprefix("torch.") for d in (dtype, out_dtype))
        raise ValueError(
            f"out must be a C-contiguous {name} array of shape {shape}, got a "
            f"{'' if contiguous else 'non-contiguous '}{out_name} array "
            f"of shape {tuple(out.shape)}: "
            "allocate it once with the layer's dtype and token_ids.shape + (dim,)"
        )


def out_overlaps_error() -> ValueError:
    return ValueError(
        "out shares memory with the layer's own tables: writing the result there would "
        "corrupt them; pass a separate buffer"
    )


def check_call(
    token_ids, start, vocab_size: int, max_seq_len: int, tokenizer_size: int | None = None
) -> tuple[np.ndarray, int]:
    """Everything a layer call checks, ids first: returns (token_ids as a NumPy array,
    start as int). token_ids: a NumPy array or anything np.asarray takes.

    The first branch is the same checks for the common case (a short NumPy array of ids,
    an int start), as one predicate without function calls: at a decode step's shapes the
    whole call is a microsecond, and each Python call costs about 0.06 µs. Anything it
    does not accept, good or bad, goes through the checks below, which raise.
    """
    if type(token_ids) is not np.ndarray:
        token_ids = as_host(token_ids)
    if (
        type(start) is int
        and 0 < token_ids.size <= _FEW_IDS
        and token_ids.dtype.kind in "iu"
        and 0 < token_ids.ndim < 3
        and start >= 0
        and (max_seq_len is None or start + token_ids.shape[-1] <= max_seq_len)
    ):
        ids = token_ids.ravel().tolist()
        if min(ids) >= 0 and max(ids) < vocab_size:
            return token_ids, start
    token_ids = check_token_ids(token_ids, vocab_size, tokenizer_size)
    return token_ids, check_positions(start, token_ids.shape[-1], max_seq_len)


# --- positional schemes -------------------------------------------------------------

SCHEMES = ("learned", "sinusoidal", "none")
SINUSOIDAL_LAYOUTS = ("interleaved", "concat")
ROPE_LAYOUTS = ("half", "interleaved")
# Scaling rules by type, with the parameter names Hugging Face configs use for them.
# RoPE scaling rule -> (the parameters it needs, those it may take): Hugging Face's names.
ROPE_SCALINGS = {
    "linear": (("factor",), ()),
    "dynamic": (("factor", "max_position_embeddings"), ()),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        ("attention_factor", "mscale", "mscale_all_dim", "beta_fast", "beta_slow", "truncate"),
    ),
    "longrope": (
        ("short_factor", "long_factor", "original_max_position_embeddings"),
        ("factor", "attention_factor", "max_position_embeddings"),
    ),
    "llama3": (
        ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
        (),
    ),
    # Gemma 4's global layers: the head's frequencies, the first partial_rotary_factor of them
    # kept and the rest zero (transformers 5.24 _compute_proportional_rope_parameters).
    "proportional": ((), ("partial_rotary_factor", "factor")),
    # llama.cpp's per-pair divisors (ggml_rope_ext's freq_factors): no Hugging Face config
    # names it; a GGUF file stores it as a tensor (rope_freqs, rope_factors_long/short).
    "freq_factors": (("factors",), ("attention_factor",)),
}
# Positions are turned into float32 angles; above 2**24 float32 cannot hold every integer.
MAX_POSITION = 2**24


def choice(value, valid: tuple[str, ...], what: str) -> str:
    if value not in valid:
        raise ValueError(f"unknown {what} {value!r}: valid ones are {', '.join(valid)}")
    return value


def check_even_dim(dim: int, what: str) -> int:
    if dim % 2:
        raise ValueError(
            f"{what} needs an even dim, got {dim}: "
            "it pairs dimensions into (sin, cos) or rotation pairs"
        )
    return dim


def check_sinusoidal(num_positions, dim, base, layout) -> tuple[int, int, float]:
    """Arguments of sinusoidal_table(num_positions, dim, base=..., layout=...), as
    (num_positions, dim, base)."""
    choice(layout, SINUSOIDAL_LAYOUTS, "sinusoidal layout")
    num_positions, dim = integer(num_positions, "num_positions"), integer(dim, "dim")
    if dim < 2:
        raise ValueError(f"a sinusoidal table needs dim >= 2, got {dim}")
    check_even_dim(dim, "a sinusoidal table")
    if not 0 <= num_positions <= MAX_POSITION:
        raise ValueError(f"num_positions must be in [0, {MAX_POSITION}], got {num_positions}")
    check_size(
        num_positions * dim,
        f"a sinusoidal table of num_positions x dim = {num_positions} x {dim}",
        "build fewer positions or a narrower table",
    )
    return num_positions, dim, check_base(base)


def check_rope_scaling(scaling, dim: int | None = None) -> dict | None:
    """A Hugging Face style ``rope_scaling`` dict, normalised to {"rope_type": ..., params...}.

    The type may be given as "rope_type" (current configs) or "type" (older ones); None
    and {"rope_type": "default"} mean no scaling. Parameters given as None are left out (as
    Hugging Face reads them with ``.get``). ``dim``: the rotated width, for LongRoPE's
    per-pair factor lists and dynamic NTK's exponent dim / (dim - 2).
    """
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise TypeError(
            "scaling must be None or a dict like {'rope_type': 'linear', 'factor': 4.0}, "
            f"got {scaling!r}"
        )
    params = {k: v for k, v in scaling.items() if v is not None}
    kind = params.pop("rope_type", None) or params.pop("type", None)
    params.pop("type", None)
    if kind == "default":
        return None
    choice(kind, tuple(ROPE_SCALINGS), "RoPE scaling type")
    needed, optional = ROPE_SCALINGS[kind]
    missing, unexpected = set(needed) - set(params), set(params) - set(needed) - set(optional)
    if missing or unexpected:
        raise ValueError(
            f"RoPE scaling {kind!r} takes {', '.join(needed)}"
            + (f" (and optionally {', '.join(optional)})" if optional else "")
            + f"; missing: {sorted(missing) or 'none'}, unexpected: {sorted(unexpected) or 'none'}"
        )
    for name, value in params.items():
        if name == "truncate":
            params[name] = flag(value, "RoPE scaling truncate")
        elif name.endswith("_factor") and kind == "longrope" and name != "attention_factor":
            params[name] = _factor_list(value, name, dim)
        elif name == "factors":
            params[name] = _factor_list(value, name, dim)
        elif name == "partial_rotary_factor":
            params[name] = _positive(value, f"RoPE scaling {name}")
            if params[name] > 1:
                raise ValueError(
                    f"RoPE scaling partial_rotary_factor {value!r} must be in (0, 1]: the share "
                    "of the head's frequency slots that turn"
                )
        else:
            params[name] = _positive(value, f"RoPE scaling {name}")
    if kind == "llama3" and not params["high_freq_factor"] >= params["low_freq_factor"] > 0:
        raise ValueError(
            "llama3 scaling needs high_freq_factor >= low_freq_factor > 0, got "
            f"{params['high_freq_factor']} and {params['low_freq_factor']}"
        )
    if kind == "longrope" and "factor" not in params and "max_position_embeddings" not in params:
        raise ValueError(
            "longrope scaling needs factor or max_position_embeddings (its factor is "
            "max_position_embeddings / original_max_position_embeddings)"
        )
    if kind == "dynamic" and dim is not None and dim <= 2:
        raise ValueError(f"dynamic NTK scaling needs a rotated width above 2, got {dim}")
    return {"rope_type": kind, **params}


def _factor_list(value, name: str, dim: int | None) -> tuple[float, ...]:
    """LongRoPE's short_factor or long_factor, or freq_factors' factors: one positive number
    per rotated pair."""
    if isinstance(value, str) or not hasattr(value, "__len__"):
        raise TypeError(f"RoPE scaling {name} must be a list of numbers, got {value!r}")
    factors = tuple(_positive(v, f"RoPE scaling {name}") for v in value)
    if dim is not None and len(factors) != dim // 2:
        raise ValueError(
            f"RoPE scaling {name} has {len(factors)} factors; a rotated width of {dim} has "
            f"{dim // 2} pairs: give one factor per pair"
        )
    return factors


def check_float_dtype(dtype_name: str, what: str) -> np.dtype:
    """The NumPy dtype for a floating dtype name (torch's without the "torch." prefix)."""
    if dtype_name not in DTYPES:
        raise TypeError(f"{what} must be one of {', '.join(DTYPES)}, got dtype {dtype_name}")
    return DTYPES[dtype_name]


def check_rope(
    shape: tuple, positions: np.ndarray, base, layout, scaling, rotary_dim=None
) -> tuple[np.ndarray, dict | None, int]:
    """Arguments of apply_rope(x, positions, ...): x of ``shape`` (..., T, head_dim), positions
    (T,), rotary_dim (None: the whole head) even and at most head_dim.

    Returns (positions, normalised scaling, rotary_dim).
    """
    choice(layout, ROPE_LAYOUTS, "RoPE layout")
    if len(shape) < 2:
        raise ValueError(f"x must be (..., T, dim), got shape {shape}: add a sequence axis")
    if rotary_dim is None:
        rotary_dim = check_even_dim(shape[-1], "RoPE")
    else:
        rotary_dim = integer(rotary_dim, "rotary_dim")
        if not 2 <= rotary_dim <= shape[-1] or rotary_dim % 2:
            raise ValueError(
                f"rotary_dim {rotary_dim} must be even and in [2, {shape[-1]}] for a head of "
                f"{shape[-1]} dims: the first rotary_dim dims are rotated, the rest pass through"
            )
    check_base(base)
    positions = check_nope(shape, positions)
    scaling = check_rope_scaling(scaling, rotary_dim)
    if scaling and scaling["rope_type"] == "proportional" and rotary_dim < shape[-1]:
        raise ValueError(
            f"rotary_dim {rotary_dim} with the proportional rule: it turns a share of the whole "
            "head's frequency slots (its partial_rotary_factor), so it takes no rotary_dim"
        )
    return positions, scaling, rotary_dim


def check_nope(shape: tuple, positions: np.ndarray) -> np.ndarray:
    """x of ``shape`` (..., T, head_dim) and its positions (T,): integers in [0, MAX_POSITION),
    as a rotation takes them (a NoPE layer's call takes them too, and rotates nothing)."""
    if len(shape) < 2:
        raise ValueError(f"x must be (..., T, dim), got shape {shape}: add a sequence axis")
    if positions.dtype.kind not in "iu":
        raise ids_dtype_error(positions.dtype, "positions")
    if positions.shape != (shape[-2],):
        raise ValueError(
            f"positions must have shape (T,) = ({shape[-2]},) to match x of shape {shape}, "
            f"got {positions.shape}"
        )
    if positions.size and (positions.min() < 0 or positions.max() >= MAX_POSITION):
        bad = int(np.flatnonzero((positions < 0) | (positions >= MAX_POSITION))[0])
        raise ValueError(
            f"position {int(positions[bad])} at positions[{bad}] is outside [0, {MAX_POSITION}): "
            "positions count from 0 and must be exact in float32"
        )
    return positions


MROPE_LAYOUTS = ("chunked", "interleaved")


def check_mrope(section, mrope_layout: str, rotary_dim: int) -> tuple[int, int, int]:
    """M-RoPE's frequency slots per axis (t, h, w): three positive ints summing to rotary_dim /
    2, the slots of a rotation of rotary_dim; ``mrope_layout`` chunked (Qwen2-VL: t's slots,
    then h's, then w's) or interleaved (Qwen3-VL: t h w t h w ..., t's after 3 * h's)."""
    choice(mrope_layout, MROPE_LAYOUTS, "M-RoPE layout")
    section = tuple(section) if isinstance(section, list | tuple) else (section,)
    if len(section) != 3 or not all(
        isinstance(n, int | np.integer) and not isinstance(n, bool) and n > 0 for n in section
    ):
        raise ValueError(
            f"mrope_section must be three positive integers (the t, h and w axes' frequency "
            f"slots), got {section!r}"
        )
    if sum(section) != rotary_dim // 2:
        raise ValueError(
            f"mrope_section {list(section)} holds {sum(section)} frequency slots where the "
            f"rotation of {rotary_dim} dims has {rotary_dim // 2}: they must add up"
        )
    return tuple(int(n) for n in section)


ROPE_OPTIONS = ("base", "layout", "scaling", "rotary_dim")


def check_layer_rope(layers, layer_type) -> dict | None:
    """apply_layer_rope's rotation per layer type: ``layers`` maps each type's name to its
    apply_rope options (ROPE_OPTIONS) or None for a type that is not rotated (NoPE). The
    options of ``layer_type``, None for NoPE; ValueError naming the model's types for another."""
    if not isinstance(layers, dict) or not layers:
        raise TypeError(
            "layers must map each layer type's name to its apply_rope options (or None for a "
            f"NoPE type), e.g. {{'sliding_attention': {{'base': 10000.0}}}}, got {layers!r}"
        )
    if layer_type not in layers:
        raise ValueError(
            f"layer type {layer_type!r} is not one of this model's: {', '.join(map(str, layers))}"
        )
    rope = layers[layer_type]
    if rope is not None and not isinstance(rope, dict):
        raise TypeError(f"layers[{layer_type!r}] must be a dict of apply_rope options or None")
    unknown = sorted(set(rope or {}) - set(ROPE_OPTIONS))
    if unknown:
        raise ValueError(
            f"layers[{layer_type!r}] has {unknown}: a layer type's rotation takes "
            f"{', '.join(ROPE_OPTIONS)}"
        )
    return rope


def check_mrope_rope(shape, positions, base, layout, scaling, rotary_dim, mrope):
    """Arguments of apply_rope with ``mrope`` ({"layout": "chunked" or "interleaved",
    "section": (t, h, w)}): positions (3, T), the t, h and w rows, each checked as apply_rope's
    positions are; no scaling rule (the models that ship M-RoPE rotate at the default rule).

    Returns (positions, rotary_dim, mrope layout, section)."""
    if positions.ndim != 2 or positions.shape[0] != 3:
        raise ValueError(
            f"M-RoPE positions must be (3, T), the t, h and w rows, got shape {positions.shape}: "
            "text tokens have three equal rows"
        )
    if scaling is not None:
        raise ValueError("M-RoPE takes no scaling rule: the models that ship it rotate unscaled")
    if not isinstance(mrope, dict) or set(mrope) != {"layout", "section"}:
        raise ValueError(
            f"mrope must be {{'layout': 'chunked' or 'interleaved', 'section': (t, h, w)}}, "
            f"got {mrope!r}"
        )
    for row in positions:
        _, _, rotary_dim = check_rope(shape, row, base, layout, None, rotary_dim)
    section = check_mrope(mrope["section"], mrope["layout"], rotary_dim)
    return positions, rotary_dim, mrope["layout"], section


# The position builder's vision settings (a vision_config's fields): counts of at least 1, at
# most 2**16 (the models ship 2; a grid side or a step past that is a typo, not a model).
MOST_VISION_SETTING = 1 << 16
VISION_SETTINGS = {
    "spatial_merge_size": "the side of the square of patches merged into one token (2 in "
    "Qwen2-VL, Qwen2.5-VL, Qwen3-VL and GLM-4V)",
    "tokens_per_second": "the temporal ids a second of video advances (Qwen2.5-VL's: 2)",
}


def check_vision_setting(value, name: str) -> int:
    """A position builder's ``name`` (VISION_SETTINGS) as an int in [1, MOST_VISION_SETTING];
    the --config reader refuses a vision_config field with this message too."""
    span = f"in [1, {MOST_VISION_SETTING}]"
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer {span}, got {value!r}: {VISION_SETTINGS[name]}")
    if not 1 <= value <= MOST_VISION_SETTING:
        raise ValueError(f"{name} {value} must be an integer {span}: {VISION_SETTINGS[name]}")
    return int(value)


MM_TOKEN_TYPES = {0: "text", 1: "image", 2: "video"}


def check_mrope_positions(types, images, videos, seconds, mask, merge, tokens_per_second, split):
    """Arguments of mrope_position_ids: mm_token_type_ids (B, T) of MM_TOKEN_TYPES, a mask of
    0s and 1s of its shape (None: every token real), a grid (t, h, w) per run of image and of
    video tokens (``split``: one run per frame of a video grid), h and w multiples of the
    merge, and for whole videos second_per_grid_ts (None: 1 s each), one per video grid, with
    every frame's temporal id exact in float32. Returns (types, images, videos, seconds, mask,
    merge, tokens_per_second): the grids (n, 3) int64, seconds (videos,) float32 (None when
    ``split``), the mask bool."""
    merge = check_vision_setting(merge, "spatial_merge_size")
    tokens_per_second = check_vision_setting(tokens_per_second, "tokens_per_second")
    types = _integer_array(types, "mm_token_type_ids")
    if types.ndim != 2:
        raise ValueError(
            f"mm_token_type_ids must be (B, T), got shape {types.shape}: a single row is x[None]"
        )
    _check_in(types, MM_TOKEN_TYPES, "mm_token_type_ids", "0 (text), 1 (image) or 2 (video)")
    mask = _checked_mask(mask, types.shape)
    images = _checked_grids(images, "image_grid_thw", merge)
    videos = _checked_grids(videos, "video_grid_thw", merge)
    _check_runs(types, mask, 1, len(images), "grid(s) in image_grid_thw")
    if split:  # each frame a grid of its own, numbered as an image: the seconds are not read
        _check_runs(types, mask, 2, int(videos[:, 0].sum()), "frame(s) in video_grid_thw (t)")
        return types, images, videos, None, mask, merge, tokens_per_second
    _check_runs(types, mask, 2, len(videos), "grid(s) in video_grid_thw")
    seconds = _checked_seconds(seconds, videos, tokens_per_second)
    return types, images, videos, seconds, mask, merge, tokens_per_second


def _integer_array(values, what: str) -> np.ndarray:
    values = native(as_host(values))
    if values.dtype.kind not in "iu":
        raise ids_dtype_error(values.dtype, what)
    return values.astype(np.int64)


def _check_in(values: np.ndarray, valid, what: str, allowed: str) -> None:
    """Every value one of ``valid``; else a ValueError naming the first that is not, and where."""
    bad = ~np.isin(values, list(valid))
    if bad.any():
        where = np.unravel_index(int(np.flatnonzero(bad)[0]), values.shape)
        index = ", ".join(str(int(i)) for i in where)
        raise ValueError(f"{what}[{index}] is {values[where]}: each must be {allowed}")


def _checked_mask(mask, shape: tuple) -> np.ndarray:
    """attention_mask of ``shape``, 0s and 1s (bools too), as bool; None: every token real."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    mask = native(as_host(mask))
    if mask.dtype.kind not in "iub":
        raise ids_dtype_error(mask.dtype, "attention_mask")
    if mask.shape != shape:
        raise ValueError(
            f"attention_mask has shape {mask.shape} where mm_token_type_ids has {shape}: one "
            "entry per token"
        )
    _check_in(mask, (0, 1), "attention_mask", "1 (a token) or 0 (padding)")
    return mask.astype(bool)


def _checked_grids(grids, what: str, merge: int) -> np.ndarray:
    """(n, 3) int64 grids (t, h, w) of patches, each at least 1, h and w whole merges; None or
    an empty array of any dtype (NumPy's empty arrays are float64): no grid."""
    if grids is None or np.size(grids) == 0:
        return np.zeros((0, 3), np.int64)
    grids = _integer_array(grids, what)
    if grids.ndim != 2 or grids.shape[1] != 3:
        raise ValueError(f"{what} must be (n, 3), one (t, h, w) per grid, got shape {grids.shape}")
    for n, (t, h, w) in enumerate(grids.tolist()):
        if min(t, h, w) < 1 or h % merge or w % merge:
            raise ValueError(
                f"{what}[{n}] is ({t}, {h}, {w}): t, h and w must be at least 1, and h and w "
                f"multiples of spatial_merge_size {merge} (the patches merge {merge} x {merge} "
                "into a token): give the grid the processor returned"
            )
    return grids


def _check_runs(types, mask, kind: int, grids: int, what: str) -> None:
    """As many runs of ``kind``'s tokens (padding left out) as there are grids for them."""
    runs = 0
    for row, kept in zip(types, mask):
        tokens = row[kept] == kind
        runs += int(np.count_nonzero(tokens[1:] & ~tokens[:-1]) + tokens[:1].sum())
    if runs != grids:
        name = MM_TOKEN_TYPES[kind]
        raise ValueError(
            f"mm_token_type_ids holds {runs} run(s) of {name} tokens (padding left out) for "
            f"{grids} {what}: give one grid per run of {name} tokens, in order"
        )


def _checked_seconds(seconds, videos: np.ndarray, tokens_per_second: int) -> np.ndarray:
    """second_per_grid_ts, one positive finite number per video grid (None: 1 each), as the
    float32 the builder multiplies; each grid's last temporal id at most MAX_POSITION."""
    if seconds is None:
        return np.ones(len(videos), np.float32)
    given = native(np.asarray(seconds))
    if given.dtype.kind not in "iuf":
        raise TypeError(
            f"second_per_grid_ts must be numbers, got dtype {given.dtype}: seconds per temporal "
            "grid of each video, as the processor returns them"
        )
    if given.shape != (len(videos),):
        raise ValueError(
            f"second_per_grid_ts has shape {given.shape} where video_grid_thw has {len(videos)} "
            f"grids: give one number per video grid, ({len(videos)},)"
        )
    seconds = given.astype(np.float32)
    for n, (second, frames) in enumerate(zip(seconds.tolist(), videos[:, 0].tolist())):
        if not (math.isfinite(second) and second > 0):
            raise ValueError(
                f"second_per_grid_ts[{n}] is {given[n]}: seconds per temporal grid must be "
                "positive and finite (temporal_patch_size / fps)"
            )
        last = (frames - 1) * tokens_per_second * second
        if last > MAX_POSITION:
            raise ValueError(
                f"video grid {n}'s last frame is at temporal id ({frames} - 1) x "
                f"tokens_per_second {tokens_per_second} x second_per_grid_ts {given[n]} = "
                f"{last:g}, past {MAX_POSITION}: positions must be exact in float32; check "
                "the seconds per grid"
            )
    return seconds


POSITION_ID_RULES = ("arange", "opt", "roberta", "bart")


def check_position_ids(input_ids, attention_mask, rule, padding_idx, past_length):
    """Arguments of position_ids: input_ids 1-D (T,) or 2-D (B, T) integers (returned 2-D);
    for "opt" an attention_mask of 0s and 1s, (B, past_length + T); for "roberta" a
    padding_idx. Returns (input_ids, attention_mask, past_length)."""
    choice(rule, POSITION_ID_RULES, "position-id rule")
    if input_ids.dtype.kind not in "iu":
        raise ids_dtype_error(input_ids.dtype, "input_ids")
    check_ids_shape(input_ids.shape)
    input_ids = input_ids.reshape(-1, input_ids.shape[-1])
    past_length = integer(past_length, "past_length")
    if past_length < 0:
        raise ValueError(f"past_length must be at least 0, got {past_length}")
    if rule == "roberta":
        if padding_idx is None:
            raise ValueError("the roberta rule needs padding_idx (the pad token's id)")
        padding_idx = integer(padding_idx, "padding_idx")
    if rule != "opt":
        return input_ids, None, past_length
    if attention_mask is None:
        raise ValueError("the opt rule needs attention_mask (B, past_length + T) of 0s and 1s")
    expected = (input_ids.shape[0], past_length + input_ids.shape[1])
    attention_mask = (
        attention_mask.reshape(-1, attention_mask.shape[-1])
        if attention_mask.ndim
        else attention_mask
    )
    if attention_mask.shape != expected:
        raise ValueError(
            f"attention_mask must have shape (B, past_length + T) = {expected}, got "
            f"{attention_mask.shape}: it covers the cached tokens too"
        )
    if attention_mask.dtype.kind not in "iub" or not np.isin(attention_mask, (0, 1)).all():
        raise ValueError("attention_mask must hold 0 (padding) and 1 (a real token) only")
    return input_ids, attention_mask, past_length


def check_packed_lengths(lengths, start) -> np.ndarray:
    """Document lengths for packed_position_ids: a 1-D list of integers of at least 1 (int64),
    and a start of at least 0."""
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not lengths.size or lengths.dtype.kind not in "iu":
        raise ValueError(
            f"lengths must be a 1-D list of document lengths (integers), got {lengths.tolist()!r}"
        )
    if (lengths < 1).any():
        short = int(lengths[lengths < 1][0])
        raise ValueError(
            f"every document length must be at least 1, got {short}: drop empty documents"
        )
    if integer(start, "start") < 0:
        raise ValueError(f"start must be at least 0, got {start}")
    return lengths.astype(np.int64)


def check_packed_position_ids(position_ids) -> np.ndarray:
    """Packed position ids for packed_documents: (B, T) integers, T at least 1."""
    if position_ids.dtype.kind not in "iu":
        raise ids_dtype_error(position_ids.dtype, "position_ids")
    if position_ids.ndim != 2 or not position_ids.shape[1]:
        raise ValueError(
            f"position_ids must be (B, T) with T >= 1, as transformers reads them; got shape "
            f"{position_ids.shape} (a single row: position_ids[None])"
        )
    return position_ids.astype(np.int64)


def check_scaled_inputs(token_table, token_ids, inputs_embeds, rule, value):
    """Arguments of scaled_inputs: a rule of positional.SCALE_RULES (``rules``) and its
    finite value, and exactly one of token_ids (checked against the table) and inputs_embeds
    (..., T, dim) of the table's dtype. Returns (token_ids or None, inputs_embeds or None)."""
    check_float_dtype(token_table.dtype.name, "token_table")
    if (token_ids is None) == (inputs_embeds is None):
        raise ValueError(
            "give exactly one of token_ids and inputs_embeds, as a model's forward takes them"
        )
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"the {rule} scale must be a finite number, got {value!r}")
    if token_ids is not None:
        return check_token_ids(as_host(token_ids), token_table.shape[0]), None
    embeds = native(as_host(inputs_embeds))
    if embeds.ndim < 2 or embeds.shape[-1] != token_table.shape[1]:
        raise ValueError(
            f"inputs_embeds has shape {embeds.shape}, but rows of this table are "
            f"{token_table.shape[1]} wide: pass (..., T, {token_table.shape[1]})"
        )
    if embeds.dtype != token_table.dtype:
        raise ValueError(
            f"inputs_embeds is {embeds.dtype} but the token table is {token_table.dtype}: cast "
            "them to the table's dtype, as the model's embeddings are"
        )
    return None, embeds


def check_bert_tables(word_table, type_table, position_table) -> np.dtype:
    """Three (rows, hidden) tables of one floating dtype; returns the dtype."""
    tables = {"word_table": word_table, "type_table": type_table, "position_table": position_table}
    for what, table in tables.items():
        check_float_dtype(table.dtype.name, what)
        if table.ndim != 2 or table.shape[0] < 1:
            raise ValueError(f"{what} must be (rows, hidden), got shape {table.shape}")
    widths = {what: t.shape[1] for what, t in tables.items()}
    dtypes = {what: t.dtype.name for what, t in tables.items()}
    if len(set(widths.values())) > 1 or len(set(dtypes.values())) > 1:
        raise ValueError(f"the three tables must share width and dtype, got {widths}, {dtypes}")
    return word_table.dtype


def check_token_type_ids(token_type_ids, shape: tuple, type_vocab_size: int) -> np.ndarray:
    """token_type_ids of input_ids' shape, each in [0, type_vocab_size)."""
    if token_type_ids.dtype.kind not in "iu":
        raise ids_dtype_error(token_type_ids.dtype, "token_type_ids")
    if token_type_ids.shape != shape:
        raise ValueError(
            f"token_type_ids must have input_ids' shape {shape}, got {token_type_ids.shape}"
        )
    bad = (token_type_ids < 0) | (token_type_ids >= type_vocab_size)
    if bad.any():
        where = np.unravel_index(int(np.flatnonzero(bad)[0]), shape)
        index = ", ".join(str(int(i)) for i in where)
        raise IndexError(
            f"token type id {int(token_type_ids[where])} at token_type_ids[{index}] is out of "
            f"range for type_vocab_size {type_vocab_size}: ids must be in "
            f"[0, {type_vocab_size - 1}]"
        )
    return token_type_ids


# The most values one array that the API builds from sizes alone may hold (a bias, a
# sinusoidal table): 8 GiB of float32. Checked from the arguments, before any allocation,
# so that an impossible size is the same ValueError on every backend, not NumPy's
# MemoryError, torch's RuntimeError or JAX's OverflowError.
MAX_VALUES = 2**31


def check_size(count: int, what: str, fix: str) -> None:
    """Refuse to build ``what`` (a description ending in its shape) of ``count`` values."""
    if count > MAX_VALUES:
        raise ValueError(f"{what} = {count} values is over {MAX_VALUES}: {fix}")


def flag(value, what: str) -> bool:
    """True or False (NumPy's bools too); anything else, "False" included, is a TypeError."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{what} must be True or False, got {value!r}")
    return bool(value)


def check_lengths(num_heads, q_len, k_len, *, planes: int = 0) -> tuple[int, int, int]:
    """Arguments of alibi_bias and t5_bias, as ints; k_len None means q_len.

    The queries are the last q_len of k_len positions (a decode step with a cache), so
    k_len must be at least q_len; every distance must be exact in float32. The bias,
    (num_heads + planes) x q_len x k_len values, must fit MAX_VALUES: ``planes`` counts the
    (q_len, k_len) intermediates a bias builds besides itself (T5's int64 positions and
    buckets).
    """
    num_heads = integer(num_heads, "num_heads")
    if num_heads < 1:
        raise ValueError(f"num_heads must be at least 1, got {num_heads}")
    q_len = integer(q_len, "q_len")
    k_len = q_len if k_len is None else integer(k_len, "k_len")
    for name, value in (("q_len", q_len), ("k_len", k_len)):
        if not 1 <= value <= MAX_POSITION:
            raise ValueError(
                f"{name} must be in [1, {MAX_POSITION}], got {value}: a bias needs at least one "
                "position, and distances must be exact in float32"
            )
    if k_len < q_len:
        raise ValueError(
            f"k_len {k_len} is below q_len {q_len}: the queries are the last q_len of the "
            "k_len key positions, so pass k_len >= q_len (or leave it out for k_len = q_len)"
        )
    shape = f"{num_heads} x {q_len} x {k_len}"
    check_size(
        (num_heads + planes) * q_len * k_len,
        f"a bias of num_heads x q_len x k_len = {shape}"
        + (f", plus {planes} such planes of positions and buckets," if planes else ""),
        "build it for fewer queries at a time (keep k_len, slice q_len)",
    )
    return num_heads, q_len, k_len


def check_t5_lengths(table_shape: tuple, q_len, k_len) -> tuple[int, int, int]:
    """check_lengths for t5_bias, whose heads are the table's columns; its int64 relative
    positions and buckets, (q_len, k_len) each, count as four float32 planes."""
    return check_lengths(int(table_shape[1]), q_len, k_len, planes=4)


def check_t5_buckets(bidirectional, num_buckets, max_distance) -> tuple[int, int]:
    """T5's bucket settings, as (buckets per direction, max_distance)."""
    bidirectional = flag(bidirectional, "bidirectional")
    num_buckets = integer(num_buckets, "num_buckets")
    if num_buckets < 2 or num_buckets % 2:
        raise ValueError(
            f"num_buckets must be even and at least 2, got {num_buckets}: half of them are "
            "exact distances and, when bidirectional, half of all buckets face each way"
        )
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_direction // 2
    max_distance = integer(max_distance, "max_distance")
    if not max_exact < max_distance <= MAX_POSITION:
        raise ValueError(
            f"max_distance must exceed the {max_exact} exact distances "
            f"(num_buckets={num_buckets}, bidirectional={bidirectional}) and be at most "
            f"{MAX_POSITION}, the longest distance there is, got {max_distance}"
        )
    return per_direction, max_distance


def check_relative_positions(relative_position: np.ndarray) -> np.ndarray:
    """Integer relative positions (key - query), each within +-MAX_POSITION."""
    if relative_position.dtype.kind not in "iu":
        raise ids_dtype_error(relative_position.dtype, "relative_position")
    if relative_position.size:
        low, high = relative_position.min(), relative_position.max()
        if low < -MAX_POSITION or high > MAX_POSITION:
            bad = low if low < -MAX_POSITION else high
            raise ValueError(
                f"relative_position {int(bad)} is outside [-{MAX_POSITION}, {MAX_POSITION}]: "
                "positions must be exact in float32"
            )
    return relative_position


def check_t5_table(shape: tuple, dtype_name: str) -> int:
    """A T5 relative attention bias table (num_buckets, num_heads); returns num_buckets."""
    check_float_dtype(dtype_name, "bias_table")
    if len(shape) != 2 or shape[0] < 2 or shape[0] % 2 or shape[1] < 1:
        raise ValueError(
            f"bias_table must be (num_buckets, num_heads) with num_buckets even and at least 2 "
            f"and num_heads at least 1, got shape {tuple(shape)}: T5 stores it as "
            "relative_attention_bias.weight"
        )
    return shape[0]


def check_layer(token_table, position_table, positions: str, max_seq_len, base, layout: str):
    """Constructor arguments of TokenPositionEmbedding, for every positional scheme.

    Returns (token_table, position_table or None, max_seq_len or None).
    """
    choice(positions, SCHEMES, "positions scheme")
    if positions == "learned":
        if position_table is None:
            raise ValueError('positions="learned" needs a position_table (max_seq_len, dim)')
        token_table, position_table = check_tables(token_table, position_table)
        if max_seq_len is not None and max_seq_len != len(position_table):
            raise ValueError(
                f"max_seq_len {max_seq_len} does not match position_table's "
                f"{len(position_table)} rows: "
                "leave max_seq_len out for learned positions"
            )
        return token_table, position_table, len(position_table)
    if position_table is not None:
        raise ValueError(f'positions="{positions}" takes no position_table: pass None')
    token_table, _ = check_tables(token_table, token_table)
    if positions == "none":
        if max_seq_len is not None:
            raise ValueError(
                'positions="none" has no position table, so no max_seq_len: leave it out'
            )
        return token_table, None, None
    if max_seq_len is None:
        raise ValueError('positions="sinusoidal" needs max_seq_len, the number of rows to build')
    max_seq_len, _, _ = check_sinusoidal(max_seq_len, token_table.shape[1], base, layout)
    return token_table, None, max_seq_len


def check_has_positions(positions: str) -> None:
    if positions == "none":
        raise ValueError(
            'this layer was built with positions="none": it has no position table '
            "(position enters later, e.g. through apply_rope)"
        )


# --- gradients ----------------------------------------------------------------------


def check_tokenizer_size(tokenizer_size, vocab_size: int) -> int | None:
    """A layer's tokenizer_size: None, or the tokenizer's id count, at most the table's rows
    (a table padded past its tokenizer, as Qwen's 151936 rows for 151665 ids)."""
    if tokenizer_size is None:
        return None
    tokenizer_size = integer(tokenizer_size, "tokenizer_size")
    if not 1 <= tokenizer_size <= vocab_size:
        raise ValueError(
            f"tokenizer_size {tokenizer_size} is not in [1, {vocab_size}], the token table's "
            "rows: a tokenizer with more ids than the table has rows makes ids with no row; "
            "give the tokenizer that goes with this table"
        )
    return tokenizer_size


def check_embedding_options(padding_idx, scale_grad_by_freq, vocab_size: int) -> int | None:
    """``padding_idx`` and ``scale_grad_by_freq`` with torch.nn.Embedding's meaning.

    padding_idx: None, or an integer in [-vocab_size, vocab_size), negative counting from
    the end as torch does; returned in [0, vocab_size). Raises TypeError or ValueError.
    """
    if not isinstance(scale_grad_by_freq, bool | np.bool_):
        raise TypeError(f"scale_grad_by_freq must be True or False, got {scale_grad_by_freq!r}")
    if padding_idx is None:
        return None
    padding_idx = integer(padding_idx, "padding_idx")
    if not -vocab_size <= padding_idx < vocab_size:
        raise ValueError(
            f"padding_idx {padding_idx} is out of range for vocab_size {vocab_size}: "
            f"use an id in [0, {vocab_size - 1}] (or [-{vocab_size}, -1] from the end), or None"
        )
    return padding_idx % vocab_size


def check_gradients(layer, token_ids: np.ndarray, start, upstream_shape, upstream_dtype, sparse):
    """Everything a gradients() call checks, in this order: ``sparse`` (a bool, and not
    with scale_grad_by_freq, which torch refuses: "scale_grad_by_freq not supported with
    sparse gradients"), the ids and start as for a call, then upstream's shape and dtype
    (the output's; dtype as NumPy names it). Returns (token_ids, start as int)."""
    if not isinstance(sparse, bool | np.bool_):
        raise TypeError(f"sparse must be True or False, got {sparse!r}")
    if layer.quantized:
        raise ValueError(
            f"the token table is quantized ({layer.quantized}): its rows are decoded from "
            "fixed bytes, not trained; build the layer from a float table to train it"
        )
    if sparse and layer.scale_grad_by_freq:
        raise ValueError(
            "sparse=True cannot be combined with scale_grad_by_freq (torch.nn.Embedding "
            "refuses it): use the dense gradient, or build the layer without scale_grad_by_freq"
        )
    token_ids, start = check_call(token_ids, start, layer.vocab_size, layer.max_seq_len)
    expected = (*token_ids.shape, layer.dim)
    if tuple(upstream_shape) != expected:
        raise ValueError(
            f"upstream has shape {tuple(upstream_shape)}, but the layer's output for these ids "
            f"has shape {expected}: pass dL/d(output), one row per token"
        )
    if str(upstream_dtype) != np.dtype(layer.dtype).name:  # a name: byte order does not count
        raise TypeError(
            f"upstream is {upstream_dtype}, but the layer's tables are "
            f"{np.dtype(layer.dtype)}: cast upstream to the tables' dtype"
        )
    return token_ids, start


def id_counts(token_ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """How often each id occurs in the whole input, (vocab_size,) int64 (for
    scale_grad_by_freq: each row's gradient is divided by its id's count)."""
    return np.bincount(token_ids.reshape(-1), minlength=vocab_size)


# --- 2-D positions (vision towers) ---------------------------------------------------------

CHANNELS = ("first", "last")  # images (B, C, H, W) or (B, H, W, C)


# Fixed 2-D sin-cos rules (backends.grid.SINCOS2D_RULES) -> the options each one reads.
SINCOS2D_RULES = {
    "mae": (),
    "big_vision": ("temperature",),
    "timm": ("temperature",),
    "diffusers": ("base_size", "interpolation_scale"),
}


def check_grid(grid, what: str = "grid") -> tuple[int, int]:
    """A grid of patches as (h, w): two positive ints, h rows of w patches."""
    if isinstance(grid, numbers.Integral) or len(grid) != 2:
        raise ValueError(f"{what} must be (h, w), two ints, got {grid!r}: pass (14, 14), say")
    h, w = (integer(side, what) for side in grid)
    if h < 1 or w < 1:
        raise ValueError(f"{what} {(h, w)} must have h >= 1 and w >= 1: a grid holds patches")
    return h, w


def check_grid_rows(rows: int, grid, prefix_tokens, what: str = "position_table") -> tuple:
    """A table of ``rows`` rows holding ``prefix_tokens`` prefix rows (CLS) then an (h, w) grid,
    row-major: returns ((h, w), prefix_tokens)."""
    h, w = check_grid(grid)
    prefix_tokens = integer(prefix_tokens, "prefix_tokens")
    if not 0 <= prefix_tokens <= rows:
        raise ValueError(
            f"prefix_tokens {prefix_tokens} must be in [0, {rows}], the rows of {what}: "
            "count only the rows before the grid (1 for a CLS row, 0 for none)"
        )
    if rows != prefix_tokens + h * w:
        raise ValueError(
            f"{what} has {rows} rows but {prefix_tokens} prefix rows and a {h}x{w} grid make "
            f"{prefix_tokens + h * w}: pass the grid the table was trained on, (h, w) with "
            f"h * w = {rows - prefix_tokens}"
        )
    return (h, w), prefix_tokens


def check_sincos2d(grid, dim, rule: str, prefix_tokens, options: dict) -> tuple:
    """A 2-D sin-cos table's arguments: ((h, w), dim, prefix_tokens, options as floats)."""
    h, w = check_grid(grid)
    choice(rule, tuple(SINCOS2D_RULES), "sin-cos rule")
    dim = integer(dim, "dim")
    least = 8 if rule == "big_vision" else 4  # big_vision divides by dim/4 - 1
    if dim < least or dim % 4:
        raise ValueError(
            f"a 2-D sin-cos table ({rule!r}) needs dim a multiple of 4 and at least {least}, got "
            f"{dim}: a quarter of the columns each for sin and cos of each axis"
        )
    prefix_tokens = integer(prefix_tokens, "prefix_tokens")
    if prefix_tokens < 0:
        raise ValueError(f"prefix_tokens must be 0 or more, got {prefix_tokens}: 1 for a CLS row")
    valid = SINCOS2D_RULES[rule]
    for name in options:
        if name not in valid:
            raise ValueError(
                f"the {rule!r} sin-cos rule takes no option {name!r}: its options are "
                f"{', '.join(valid) or 'none'}"
            )
    options = {name: _positive(value, name) for name, value in options.items()}
    if "temperature" in options:
        check_base(options["temperature"], "temperature")
    rows = prefix_tokens + h * w
    check_size(rows * dim, f"a {h}x{w} sin-cos table of dim {dim}", "use a smaller grid")
    return (h, w), dim, prefix_tokens, options


def check_patches(shape: tuple, patch_size, channels: str) -> tuple[int, int]:
    """The (h, w) grid of patches of images of ``shape``, (B, C, H, W) or (B, H, W, C)."""
    patch_size = integer(patch_size, "patch_size")
    if patch_size < 1:
        raise ValueError(
            f"patch_size must be at least 1, got {patch_size}: a patch's side in pixels (16 in "
            "ViT-B/16)"
        )
    channels = choice(channels, CHANNELS, "channels")
    layout = "(B, C, H, W)" if channels == "first" else "(B, H, W, C)"
    if len(shape) != 4:
        raise ValueError(f"images must be 4-D {layout}, got shape {tuple(shape)}: add a batch axis")
    height, width = shape[2:] if channels == "first" else shape[1:3]
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"images of {height}x{width} pixels do not divide into {patch_size}x{patch_size} "
            f"patches: crop or resize them to multiples of {patch_size}"
        )
    return height // patch_size, width // patch_size


def check_patch_layer(projection, position_table, patch_size, bias, cls_token, registers, grid):
    """A patch embedding's arrays, checked to fit: returns (arrays by name, (h, w), prefix),
    the table's grid and its prefix rows (0, or 1 for CLS's position).

    projection (D, C, p, p) (torch's conv weight order), position_table (prefix + h*w, D),
    bias and cls_token (D,), registers (R, D), all of one floating dtype. Without ``grid``
    the table's grid is the square of the rows after CLS's, as Hugging Face's ViT reads it
    (``num_positions = rows - 1``); big_vision's table has no CLS row (it concatenates CLS
    after the add): its grid is the square of all rows.
    """
    patch_size = integer(patch_size, "patch_size")
    projection = native(projection)
    if patch_size < 1 or projection.ndim != 4 or projection.shape[2:] != (patch_size,) * 2:
        raise ValueError(
            f"projection has shape {projection.shape}, expected (D, C, {patch_size}, "
            f"{patch_size}) for patch_size {patch_size}: torch's nn.Conv2d weight order "
            "(out, in, kh, kw); a flax kernel (kh, kw, in, out) is .transpose(3, 2, 0, 1) of it"
        )
    dim = projection.shape[0]
    arrays = {"projection": projection}
    for name, array, ndim, shape in (
        ("position_table", position_table, 2, "(rows, D)"),
        ("bias", bias, 1, "(D,)"),
        ("cls_token", cls_token, 1, "(D,)"),
        ("registers", registers, 2, "(R, D)"),
    ):
        if array is None:
            continue
        array = arrays[name] = native(array)
        if array.ndim != ndim or array.shape[-1] != dim:
            raise ValueError(
                f"{name} has shape {array.shape}, expected {shape} with D = {dim}, the "
                "projection's output width"
            )
        if array.dtype != projection.dtype:
            raise ValueError(
                f"{name} is {array.dtype} but projection is {projection.dtype}: give every "
                "array of the layer one dtype"
            )
    if projection.dtype not in DTYPES.values():
        raise ValueError(
            f"projection has dtype {projection.dtype}: use one of {', '.join(DTYPES)}"
        )
    rows = len(arrays["position_table"])
    (h, w), prefix = _table_grid(rows, grid, cls_token is not None)
    return arrays, (h, w), prefix


def _table_grid(rows: int, grid, has_cls: bool) -> tuple[tuple[int, int], int]:
    if grid is None:
        prefix = int(has_cls and _is_square(rows - 1) and not _is_square(rows))
        if not _is_square(rows - prefix):
            raise ValueError(
                f"position_table has {rows} rows, not a square grid"
                + (" after a CLS row" if has_cls else "")
                + ": pass grid=(h, w), the grid the table was trained on"
            )
        side = math.isqrt(rows - prefix)
        grid = (side, side)
    h, w = check_grid(grid)
    (h, w), prefix = check_grid_rows(rows, (h, w), max(rows - h * w, 0))
    if prefix > 1:
        raise ValueError(
            f"position_table has {prefix} rows before its {h}x{w} grid, at most 1: only CLS "
            "has a position row (registers carry none); pass the grid the table holds"
        )
    if prefix and not has_cls:
        raise ValueError(
            f"position_table has a row before its {h}x{w} grid but there is no cls_token: pass "
            f"cls_token, whose position it is, or a table of {h * w} rows"
        )
    return (h, w), prefix


def _is_square(n: int) -> bool:
    return n >= 1 and math.isqrt(n) ** 2 == n


def check_images(shape: tuple, dtype_name: str, patch_size, channels, in_channels, layer_dtype):
    """Images for a patch embedding: their (h, w) grid of patches."""
    grid = check_patches(shape, patch_size, channels)
    c = shape[1] if channels == "first" else shape[3]
    if c != in_channels:
        axis = "1 (channels first)" if channels == "first" else "3 (channels last)"
        raise ValueError(
            f"images have {c} channels on axis {axis} but the projection takes {in_channels}: "
            "pass channels='last' for (B, H, W, C) images"
        )
    if dtype_name != layer_dtype.name:
        raise ValueError(
            f"images are {dtype_name} but the layer is {layer_dtype.name}: cast them to "
            f"{layer_dtype.name} first (the projection takes one dtype)"
        )
    return grid


def grid_mismatch(image_grid: tuple, table_grid: tuple, patch_size: int) -> ValueError:
    """The error for images whose grid of patches is not the position table's."""
    (h, w), (th, tw) = image_grid, table_grid
    return ValueError(
        f"images make a {h}x{w} grid of {patch_size}-pixel patches but the position table holds "
        f"{th}x{tw}: pass resize=<kernel> (backends.resize.KERNELS) to resize the table, or "
        f"images of {th * patch_size}x{tw * patch_size} pixels"
    )



# --- 2-D rotary positions (backends.rope2d) ---------------------------------------------------

# Each field of a rope2d.Rope2D and the values it takes (rope2d.SLOT_RULES names the slot rules).
ROPE2D_FIELDS = {
    "slots": ("blocks", "even_odd", "alternating", "sections"),
    "first": ("h", "w"),
    "layout": ROPE_LAYOUTS,
    "frequencies": ("inverse", "periods"),
    "coordinates": ("0-based", "1-based", "separate", "max", "min"),
    "prefix": ("none", "identity", "excluded"),
}
NORMALIZED_COORDINATES = ("separate", "max", "min")  # DINOv3's: they need the grid


def check_rope2d_spec(spec) -> None:
    """A Rope2D's fields: each a known value (ROPE2D_FIELDS), a base above 1, periods (min, max)
    only with frequencies "periods", a reference grid (h, w) only with integer coordinates,
    sections (t, h, w) three even dims only with slots "sections"."""
    for name, valid in ROPE2D_FIELDS.items():
        choice(getattr(spec, name), valid, f"Rope2D {name}")
    check_base(spec.base, "Rope2D base")
    if spec.reference_grid is not None:
        if spec.coordinates in NORMALIZED_COORDINATES:
            raise ValueError(
                f"Rope2D reference_grid {spec.reference_grid!r} stretches integer coordinates; "
                f"coordinates {spec.coordinates!r} are normalized already: drop one"
            )
        check_grid(spec.reference_grid, "Rope2D reference_grid")
    if spec.periods is not None:
        if spec.frequencies != "periods" or len(spec.periods) != 2:
            raise ValueError(
                f"Rope2D periods {spec.periods!r} is DINOv3's (min_period, max_period) and needs "
                "frequencies='periods': give both, or neither and a base"
            )
        low, high = (_positive(p, "a Rope2D period") for p in spec.periods)
        if not low < high:
            raise ValueError(f"Rope2D periods {spec.periods!r} must be (min, max) with min < max")
    if spec.sections is None and spec.slots == "sections":
        raise ValueError(
            "Rope2D slots='sections' needs sections, the dims of (t, h, w): Flux's (16, 56, 56)"
        )
    if spec.sections is not None and spec.slots != "sections":
        raise ValueError(
            f"Rope2D sections {spec.sections!r} go with slots='sections' only: drop them, or "
            "choose that slot rule"
        )
    if spec.sections is not None and (
        len(spec.sections) != 3
        or not all(_is_int(n) and n >= 0 and n % 2 == 0 for n in spec.sections)
        or not (spec.sections[1] and spec.sections[2])
    ):
        raise ValueError(
            f"Rope2D sections {spec.sections!r} must be three even dims (t, h, w), h and w "
            "above 0, as Flux's axes_dim (16, 56, 56)"
        )


def check_rope2d_head(head_dim, spec) -> int:
    """head_dim for a Rope2D: divisible by 4 (each axis turns whole pairs of its own, as many for
    h as for w), or for slots "sections" the sum of the sections."""
    head_dim = integer(head_dim, "head_dim")
    if spec.slots == "sections":
        if head_dim != sum(spec.sections):
            raise ValueError(
                f"Rope2D sections {list(spec.sections)} add up to {sum(spec.sections)} dims "
                f"where the head has {head_dim}: the sections must cover the head"
            )
    elif head_dim < 4 or head_dim % 4:
        raise ValueError(
            f"head_dim {head_dim} must be a positive multiple of 4 for 2-D RoPE: each axis turns "
            "head_dim / 4 pairs of dims"
        )
    return head_dim


def check_rope2d(shape: tuple, positions: np.ndarray, spec, grid) -> tuple:
    """apply_rope2d's arguments: x of ``shape`` (..., N, head_dim), positions (N, 2) integer (row,
    column), (-1, -1) for a prefix token where the spec has them, and the grid (h, w), which
    normalized coordinates need (they divide by its sides). Returns (positions, grid)."""
    if not all(hasattr(spec, name) for name in ROPE2D_FIELDS):
        raise TypeError(
            f"spec must be a rope2d.Rope2D, got {spec!r}: rope2d.SPECS holds the models' "
            "(rope2d.SPECS['pixtral'], say)"
        )
    if len(shape) < 2:
        raise ValueError(f"x must be (..., N, head_dim), got shape {shape}: add a token axis")
    check_rope2d_head(shape[-1], spec)
    if positions.dtype.kind not in "iu":
        raise ids_dtype_error(positions.dtype, "positions")
    if positions.shape != (shape[-2], 2):
        raise ValueError(
            f"positions must be (N, 2) = ({shape[-2]}, 2), each token's (row, column), to match "
            f"x of shape {shape}, got {positions.shape}: build them with an id builder"
        )
    if spec.coordinates in NORMALIZED_COORDINATES or spec.reference_grid is not None:
        if grid is None:
            rule = (
                f"coordinates {spec.coordinates!r} are normalized"
                if spec.reference_grid is None
                else f"coordinates are stretched to reference_grid {spec.reference_grid}"
            )
            raise ValueError(f"{rule} by the grid's sides: pass grid=(h, w)")
        grid = check_grid(grid)
    marked = positions[:, 0] < 0
    limit = np.array(grid if grid else (MAX_POSITION, MAX_POSITION))
    half_marked = marked != (positions[:, 1] < 0)
    wrong = (positions < -1).any(1) | half_marked | (positions >= limit).any(1)
    if wrong.any():
        bad = int(np.flatnonzero(wrong)[0])
        inside = f"of the grid {grid}" if grid else f"in [0, {MAX_POSITION})"
        raise ValueError(
            f"position {tuple(positions[bad].tolist())} at positions[{bad}] is neither a (row, "
            f"column) {inside} nor a prefix token's (-1, -1)"
        )
    if spec.prefix == "none" and marked.any():
        raise ValueError(
            f"positions[{int(np.flatnonzero(marked)[0])}] is a prefix token's (-1, -1) but the "
            "spec's prefix is 'none': give the model's prefix rule ('identity' or 'excluded') or "
            "a grid position"
        )
    return positions, grid


ID_SETTINGS = ("prefix", "merge", "window", "max_width")


def check_id_grid(grid, **settings) -> tuple:
    """An id builder's grid (h, w) and settings, as ints: prefix >= 0; merge and window >= 1,
    the grid's sides divisible by merge; max_width >= w. Returns ((h, w), *settings)."""
    h, w = check_grid(grid)
    values = {name: integer(value, name) for name, value in settings.items()}
    least = {"prefix": 0, "merge": 1, "window": 1, "max_width": w}
    for name, value in values.items():
        if value < least[name]:
            why = ", the grid's width: a row's ids would run into the next's"
            why = why if name == "max_width" else ""
            raise ValueError(f"{name} must be at least {least[name]}{why}, got {value}")
    merge = values.get("merge", 1)
    if h % merge or w % merge:
        raise ValueError(
            f"grid {(h, w)} does not divide into {merge}x{merge} merge blocks: each side must "
            f"be a multiple of merge {merge} (the processor resizes images so)"
        )
    check_size(h * w, f"a grid of {h}x{w} patches", "use a smaller grid")
    return ((h, w), *values.values())


# Resizing a grid table (backends.resize): the checks every backend shares.


def check_scale_factor(scale_factor, old: tuple, new: tuple) -> tuple[float, float]:
    """torch's ``scale_factor``, a number or (h, w), as a pair of positive floats. torch makes
    floor(n * factor) outputs of n inputs: that must be new_grid."""
    pair = tuple(scale_factor) if isinstance(scale_factor, tuple | list) else (scale_factor,) * 2
    if len(pair) != 2:
        raise ValueError(f"scale_factor must be a number or (h, w), got {scale_factor!r}")
    pair = tuple(_positive(factor, "scale_factor") for factor in pair)
    for n_in, n_out, factor in zip(old, new, pair):
        if math.floor(n_in * factor) != n_out:
            raise ValueError(
                f"scale_factor {factor} makes floor({n_in} * {factor}) = "
                f"{math.floor(n_in * factor)} rows or columns, not new_grid's {n_out}: pass a "
                f"factor in [{n_out / n_in:g}, {(n_out + 1) / n_in:g}), or no scale_factor"
            )
    return pair


def no_framework_form(kernel: str, framework: str, why: str, fix: str = "") -> ValueError:
    """The error for a resize the framework's own call cannot make (``fix``: a first remedy)."""
    return ValueError(
        f"kernel {kernel!r} has no {framework} form {why}: pass {fix}path='taps' (its weights "
        "summed tap by tap, bit-identical on every backend) or path='host'"
    )
