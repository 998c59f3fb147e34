"""A vision tower's configuration, as the conformance kit's vision kinds take it: what a
config.json (ViT, CLIP, SigLIP, SigLIP2, DINOv2 with or without registers, DINOv3, Pixtral,
Qwen2-VL, Qwen2.5-VL and Qwen3-VL's vision_config, Llama 4's, or a multimodal config's
vision_config beside its text_config) sets for ``pos2d_resize``, ``pos2d_table``, ``rope2d``
and ``rope2d_ids``, and which source decided each part.

Three sources, each named on the line the command prints:

- **the config**, read by transformers' own config class (``CONFIG_MAPPING[model_type]``, a
  multimodal config's ``vision_config`` as its class builds it): the pretrained grid
  (``image_size // patch_size``; SigLIP2's ``sqrt(num_patches)``; Qwen3-VL's
  ``sqrt(num_position_embeddings)``), the head width, the rotation's base, the register tokens,
  ``spatial_merge_size``, ``window_size``. A field the kit cannot honour is refused in one line.
- **the model's code**, transformers' modeling file for the config's class (never a list of
  model types kept by hand, which would fall silently behind a changed model):
  - the resize is read from the source of the embeddings class whose ``__init__`` takes the
    config class (``ast``, the file read, nothing imported): its ``interpolate_pos_encoding``'s
    one ``F.interpolate`` call, or a call of ``vision_utils.get_vision_interpolation_indices_and_
    weights`` whose ``mode`` and ``align_corners`` are literals or ``self`` attributes set to
    literals (Qwen3-VL). ``mode``, ``antialias`` and ``align_corners`` name a
    ``backends.resize.KERNELS`` entry by its ``torch`` options (the entry that holds wherever an
    axis shrinks: "keys-bicubic" is F.interpolate's antialiased bicubic only where none does);
    ``size=(height, width)`` is the size rule (``scale_factor=``, a (width, height) size, a
    mode or option no kernel has, a ``**kwargs`` are refused, not guessed); a cast of the table
    to float32 as the call's argument is ``compute_dtype`` "float32" (any other cast in the
    function refused); the prefix rows are the start of the slice ``[:, K:]`` that takes the
    grid's rows (none: 0, SigLIP's table has no CLS row); the get_vision_... helper's weights
    are float32, which a 16-bit table is promoted to.
  - a fixed 2-D sin-cos table (``pos2d_table``: ViT-MAE's) is filled by the tower's own
    method that calls a sin-cos builder, run, and named as the ``backends.grid`` rule whose
    float32 table it is bit for bit (its zero CLS row the prefix); ``dim`` is hidden_size.
  - SigLIP2's NaFlex resize writes its weights out (``resize_positional_embeddings``, no
    F.interpolate call): its code is run on a table and held to ``resize.naflex_positions``
    (``vision_owner``).
  - a rotary tower's module is run at the config's head width and base (``vision_owner``: how
    to call each module, not what it does) and its turn classified as the one
    ``backends.rope2d.SPECS`` entry within ``rope2d.bound``; the token order its code builds
    (Pixtral's forward, Qwen's ``vision_utils`` ids and window index, Llama 4's CLS last,
    DINOv3's prefix tokens left out) named as one of ``rope2d.ID_BUILDERS``.
- **a preset** (``presets.VISION_PRESETS``): a model's hub config.json fields, and for DINOv2's
  original code (facebookresearch/dinov2, not in transformers) the rule its code fixes.

What the code fixed, for transformers 5.24: ViT, CLIP and SigLIP: torch-bicubic, the table's
own dtype (CLS row kept: 1, 1, 0 prefix rows); DINOv2: torch-bicubic in float32, 1 prefix row
(its original code: dinov2-offset, a scale factor (new + 0.1)/old, where transformers passes
the size); DINOv2 with registers: antialiased-bicubic in float32, 1 prefix row (the registers
carry no position); SigLIP2: NaFlex, antialiased bilinear through float32, padding rows at
(0, 0); Qwen3-VL: bilinear-corners in float32, no prefix, its rows emitted in merge blocks
(``merge``: the config's spatial_merge_size, which the helper's call passes; the kit asks for
raster order and names that order as a mistake); Pixtral: spec "pixtral" (raster ids);
Qwen2-VL: "qwen2-vl" (merge blocks); Qwen2.5-VL: "qwen2.5-vl" (windows of merge blocks);
Qwen3-VL: "qwen2.5-vl", the same rule (merge blocks; a spec whose sources name the model's file
is chosen among equal ones, else the first); Llama 4: "llama-4" (its CLS last); DINOv3:
"dinov3" (CLS and registers first, not rotated); ViT-MAE: a "mae" sin-cos table after a zero
CLS row, resized as ViT's. tests/test_vision_configs.py holds these readings, and shows a
changed call read differently or refused.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import numbers
import os
from dataclasses import dataclass, field

from backends import resize
from embedding_parity.configs import checks, vision_owner
from embedding_parity.configs.configuration import VISION_KINDS as KINDS
from embedding_parity.usage import UsageError

# The helper transformers' newer towers call instead of F.interpolate (vision_utils.py).
HELPER = "get_vision_interpolation_indices_and_weights"
FLOAT32 = {"float", "float32"}  # torch's names of float32 (.float(), torch.float32)
CASTS = {"float", "half", "bfloat16", "double"}  # the methods that cast a tensor's dtype


@dataclass(frozen=True)
class Part:
    """One kind's options and, for each, the source that decided it (config, model code,
    preset)."""

    options: dict
    sources: dict


@dataclass(frozen=True)
class Reading:
    """What a vision config holds as transformers reads it: its class, the fields the kit reads,
    and the code behind it (the modeling file's path and text)."""

    model_type: str
    class_name: str
    config: object  # transformers' config object for the tower
    grid: tuple[int, int] | None
    grid_source: str
    head_dim: int | None
    head_source: str
    path: str | None
    source: str | None


@dataclass(frozen=True)
class Tower:
    """A vision tower's configuration, read when a vision kind first asks (a multimodal
    config's text reading imports nothing for it). ``alone``: the file is the tower's alone (a
    ViT's config.json) or a vision preset, so every kind is the tower's to answer. ``rule``: a
    preset's resize rule that its transformers code does not have (DINOv2's original), with
    ``rule["source"]`` and ``rule["differs"]`` (how transformers' code differs)."""

    name: str
    fields: dict = field(compare=False, repr=False)
    where: str
    alone: bool
    rule: dict | None = field(default=None, compare=False)
    preset: str | None = None
    _asked: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def asked(self) -> bool:
        return bool(self._asked)

    def reading(self) -> Reading:
        if "reading" not in self._asked:
            self._asked["reading"] = read(self.fields, self.where)
        return self._asked["reading"]

    def part(self, kind: str) -> Part:
        """The options ``kind`` takes from this tower; UsageError where it sets none."""
        if kind not in self._asked:
            try:
                self._asked[kind] = PARTS[kind](self, self.reading())
            except UsageError as error:
                self._asked[kind] = error
        answer = self._asked[kind]
        if isinstance(answer, UsageError):
            raise UsageError(str(answer))
        return answer

    def options(self, kind: str, flag: str) -> dict:
        """What this tower sets for the vision ``kind``; UsageError naming ``flag``."""
        if kind not in KINDS:
            raise UsageError(
                f"{flag}: {self.name} is a vision tower's configuration: it sets "
                f"--kind {', '.join(KINDS)}, not {kind}"
            )
        try:
            return copy.deepcopy(self.part(kind).options)
        except UsageError as error:
            said = str(error).removeprefix(f"{self.where}: ")
            raise UsageError(f"{flag}: {said}") from None

    def line(self) -> str:
        """What was read, and which source decided each option of each kind asked (a kind
        refused is left to its error, as a text preset's refusal is)."""
        reading = self._asked.get("reading")
        if reading is None:
            return f"config {self.name}: a vision tower, not read"
        head = (
            f"config {self.name}: vision tower {reading.model_type} ({reading.class_name}, "
            f"read by transformers)"
        )
        said = [head]
        if reading.grid:
            said.append(f"  grid {reading.grid[0]} x {reading.grid[1]} [{reading.grid_source}]")
        for kind in KINDS:  # a part refused is said once, by the error that refuses it
            answer = self._asked.get(kind)
            if isinstance(answer, Part):
                said.append(f"  {kind}: {_grouped(answer)}")
        return "\n".join(said)


def _grouped(part: Part) -> str:
    """A part's options, those decided by one source together: "kernel torch-bicubic,
    prefix_tokens 1 [model code: ...]; grid 14 x 14 [config: ...]"."""
    groups: dict[str, list[str]] = {}
    for name, value in part.options.items():
        groups.setdefault(part.sources[name], []).append(f"{name} {_value(value)}")
    return "; ".join(f"{', '.join(names)} [{source}]" for source, names in groups.items())


def _value(value) -> str:
    if isinstance(value, list):
        return " x ".join(map(str, value)) if len(value) == 2 else str(value)
    return "the table's own dtype" if value is None else str(value)


# --- the config, as transformers reads it -----------------------------------------------------


def alone(fields: dict, by_transformers: bool) -> bool:
    """Whether a config.json is a vision tower's alone: no text_config nor vision_config, no
    vocabulary (a text model may patch its input too: BLT's bytes, NeoMME's), and a patch size,
    given or (``by_transformers``: the file is read by transformers anyway) as its class
    defaults it."""
    if "text_config" in fields or "vision_config" in fields or "vocab_size" in fields:
        return False
    if "patch_size" in fields or "image_size" in fields:
        return True
    model_type = fields.get("model_type")
    if not isinstance(model_type, str) or not by_transformers:
        return False
    from embedding_parity.configs.hf_transformers import _quiet

    try:  # a transformers that cannot be imported, a class that needs its fields: the text
        with _quiet():  # reader's to refuse, in its words
            from transformers import CONFIG_MAPPING

            known = model_type in CONFIG_MAPPING
            config = CONFIG_MAPPING[model_type]() if known else None
            return known and hasattr(config, "patch_size") and not hasattr(config, "vocab_size")
    except Exception:  # noqa: BLE001
        return False


def read(fields: dict, where: str) -> Reading:
    """The tower's config as transformers builds it, and its modeling file."""
    config = _config(fields, where)
    grid, grid_source = _grid(config, where)
    head_dim, head_source = _head_dim(config, where)
    path, source = _modeling(type(config))
    return Reading(
        config.model_type,
        type(config).__name__,
        config,
        grid,
        grid_source,
        head_dim,
        head_source,
        path,
        source,
    )


def _config(fields: dict, where: str):
    """transformers' config object of the tower: the file's class, or its vision_config's."""
    if importlib.util.find_spec("transformers") is None:
        checks.refuse(
            where,
            "a vision tower's config is read by transformers' config classes and its rule by "
            "their modeling code: install transformers (pip install 'transformers>=5')",
        )
    from embedding_parity.configs.hf_transformers import SAID, _quiet

    model_type = checks.text(fields.get("model_type"), "model_type", where)
    checks.mapping(fields.get("vision_config"), "vision_config", where)
    with _quiet():
        from transformers import CONFIG_MAPPING

        if model_type not in CONFIG_MAPPING:
            checks.refuse(
                where,
                f"model_type {checks.shown(model_type)}: transformers has no config class for "
                "it, so no modeling code to say how its tower places its patches",
            )
        try:
            config = CONFIG_MAPPING[model_type].from_dict(copy.deepcopy(fields))
        except Exception as error:
            said = (str(error).strip().splitlines() or [type(error).__name__])[-1].strip()
            checks.refuse(where, f"transformers refuses it: {said[:SAID]}")
    vision = getattr(config, "vision_config", None)
    if vision is not None:
        return vision
    if "vision_config" in fields or not hasattr(config, "patch_size"):
        checks.refuse(
            where,
            f"model_type {model_type!r} ({type(config).__name__}) has no vision tower's "
            "config (no vision_config, no patch_size)",
        )
    return config


def _pair(value, field_name: str, where: str) -> tuple[int, int]:
    """An int or an (h, w) pair of ints, as transformers' towers take image_size and
    patch_size."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    if not isinstance(value, list | tuple) or len(value) != 2:
        checks.refuse(
            where, f"{field_name} must be an integer or [h, w], got {checks.shown(value)}"
        )
    return tuple(checks.integer(v, field_name, where, 1) for v in value)


def _grid(config, where: str) -> tuple[tuple[int, int] | None, str]:
    """The pretrained grid of patches and the fields it comes from."""
    names = vars(config)
    if "num_position_embeddings" in names:  # Qwen3-VL: a square table of its own size
        count = checks.integer(
            config.num_position_embeddings, "num_position_embeddings", where, 1
        )
        return _square(count, "num_position_embeddings", where)
    if "num_patches" in names and "image_size" not in names:  # SigLIP2 NaFlex
        count = checks.integer(config.num_patches, "num_patches", where, 1)
        return _square(count, "num_patches", where)
    if "image_size" not in names or "patch_size" not in names:
        return None, "config: no image_size (its grid is each image's own)"
    image = _pair(config.image_size, "image_size", where)
    patch = _pair(config.patch_size, "patch_size", where)
    grid = (image[0] // patch[0], image[1] // patch[1])
    if min(grid) < 1:
        checks.refuse(
            where, f"image_size {list(image)} is smaller than patch_size {list(patch)}: no patch"
        )
    given = f"image_size {_shown(config.image_size)} // patch_size {_shown(config.patch_size)}"
    return grid, f"config: {given}"


def _shown(value) -> str:
    return str(list(value)) if isinstance(value, list | tuple) else str(value)


def _square(count: int, name: str, where: str):
    side = int(count**0.5)
    if side * side != count:
        checks.refuse(
            where,
            f"{name} {count} is not a square: the tower's code lays its table out as "
            f"int({name} ** 0.5) = {side} a side",
        )
    return (side, side), f"config: {name} {count} = {side} x {side}"


def _head_dim(config, where: str) -> tuple[int | None, str]:
    given = getattr(config, "head_dim", None)
    if given is not None:
        return checks.head_dim(given, "head_dim", where), f"config: head_dim {given}"
    hidden = getattr(config, "hidden_size", None)
    heads = getattr(config, "num_attention_heads", None)
    if hidden is None or heads is None:
        return None, "config: no head width"
    hidden = checks.integer(hidden, "hidden_size", where, 1)
    heads = checks.integer(heads, "num_attention_heads", where, 1)
    return hidden // heads, f"config: hidden_size {hidden} // num_attention_heads {heads}"


def _modeling(config_class) -> tuple[str | None, str | None]:
    """The modeling file of a config class's module (its path and text), read, not imported."""
    name = config_class.__module__.replace(".configuration_", ".modeling_")
    path = modeling_path(name)
    if path is None:
        return None, None
    with open(path, encoding="utf-8") as file:
        return path, file.read()


def modeling_path(module: str) -> str | None:
    """Where a transformers modeling module's file is (None: there is none)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return None if spec is None else spec.origin


def _file(reading: Reading) -> str:
    """The modeling file as its owner names it: models/vit/modeling_vit.py."""
    parts = (reading.path or "?").split(os.sep)
    return "/".join(parts[-3:])


# --- the resize, read from the model's code -----------------------------------------------


def _pos2d_resize(tower: Tower, reading: Reading) -> Part:
    grid_source = {"grid": reading.grid_source}
    if tower.rule is not None:  # a preset's code that transformers does not hold
        said = f"preset {tower.preset}: {tower.rule['source']}; {tower.rule['differs']}"
        options = {k: tower.rule[k] for k in ("kernel", "prefix_tokens", "compute_dtype")}
        options["grid"] = list(reading.grid)
        return Part(options, {**dict.fromkeys(options, said), **grid_source})
    if reading.source is None:
        checks.refuse(tower.where, f"{reading.model_type}: transformers has no modeling file")
    if vision_owner.naflex_class(reading.source) is not None:
        said = vision_owner.hold_naflex(reading, _file(reading))
        return Part(
            {"naflex": True, "prefix_tokens": 0, "grid": list(reading.grid)},
            {"naflex": said, "prefix_tokens": said, **grid_source},
        )
    rule = interpolation(reading.source, reading.class_name)
    if isinstance(rule, str):
        checks.refuse(tower.where, f"{reading.model_type}'s code ({_file(reading)}): {rule}")
    if reading.grid is None:
        checks.refuse(tower.where, f"{reading.model_type}: no image_size for its table's grid")
    said = f"model code: {_file(reading)} {rule.pop('said')}"
    options = {**rule, "grid": list(reading.grid)}
    if reading.grid[0] != reading.grid[1] and rule.pop("square", False):
        checks.refuse(
            tower.where,
            f"a {reading.grid[0]} x {reading.grid[1]} grid: {reading.model_type}'s code reshapes "
            "its table as a square (sqrt(num_positions) a side)",
        )
    options.pop("square", None)
    sources = {**dict.fromkeys(options, said), **grid_source}
    if "merge" in rule:
        options["merge"], sources["merge"] = _merge(tower, reading, rule["merge"])
    return Part(options, sources)


def _merge(tower: Tower, reading: Reading, argument: str) -> tuple[int, str]:
    """The merge-block side a helper's ``spatial_merge_size=`` argument gives, and why the line
    names it: the kit asks for raster order, the model emits its rows in merge blocks."""
    field_name = argument.rpartition(".")[2]
    merge = getattr(reading.config, field_name, None)
    if not isinstance(merge, int) or isinstance(merge, bool) or merge < 1:
        checks.refuse(
            tower.where,
            f"{reading.model_type}: spatial_merge_size={argument} is {merge!r}, not a side",
        )
    order = "raster order" if merge == 1 else f"{merge} x {merge} merge-block order"
    return merge, (
        f"config: {field_name} {merge}; the kit asks for the rows in raster order, where "
        f"{reading.model_type}'s code emits them in {order} (spatial_merge_size={argument})"
    )


def interpolation(source: str, config_class: str) -> dict | str:
    """The resize rule a modeling file's source fixes for the tower of ``config_class``:
    {"kernel", "prefix_tokens", "compute_dtype", "square", "said"}, or why it cannot be read."""
    tree = ast.parse(source)
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    mine = [c for c in classes if _takes(c, config_class)]
    for cls in mine:
        method = _method(cls, "interpolate_pos_encoding")
        if method is not None:
            return _interpolate_call(cls, method)
    for cls in mine:
        for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            calls = [c for c in ast.walk(method) if _called(c) == HELPER]
            if calls:
                return _helper_call(cls, method, calls)
    return (
        f"no class taking {config_class} resizes a position table (no interpolate_pos_encoding, "
        f"no {HELPER} call): its positions are not a resized table"
    )


def _takes(cls: ast.ClassDef, config_class: str) -> bool:
    """Whether a class's __init__ takes ``config: <config_class>``."""
    init = _method(cls, "__init__")
    if init is None:
        return False
    return any(
        arg.arg == "config" and arg.annotation is not None
        and ast.unparse(arg.annotation) == config_class
        for arg in init.args.args
    )


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _called(node) -> str | None:
    """The name a call calls (``F.interpolate`` -> "interpolate"), or None."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else None


def _interpolate_call(cls: ast.ClassDef, method: ast.FunctionDef) -> dict | str:
    where = f"{cls.name}.interpolate_pos_encoding"
    calls = [node for node in ast.walk(method) if _called(node) == "interpolate"]
    if len(calls) != 1:
        return f"{where} makes {len(calls)} interpolate calls, where the kit reads one"
    call = calls[0]
    said = f"{where}: interpolate({_arguments(call)})"
    if len(call.args) != 1:
        return f"{said}: arguments past the table by position, which the kit does not read"
    keywords = {k.arg: k.value for k in call.keywords}
    if None in keywords:
        return f"{said}: **kwargs, whose options the kit cannot read from the code"
    unread = sorted(set(keywords) - {"size", "mode", "align_corners", "antialias"})
    if unread:
        return (
            f"{said}: {', '.join(unread)}, which the kit does not map to a kernel "
            "(it reads size=, mode, align_corners and antialias)"
        )
    if "size" not in keywords:
        return f"{said}: no size=, which the kit reads as the new grid"
    size = keywords["size"]
    if not isinstance(size, ast.Tuple) or len(size.elts) != 2:
        return f"{said}: size={ast.unparse(size)} is not an (height, width) pair"
    first, second = (ast.unparse(e) for e in size.elts)
    if "height" not in first or "width" not in second:
        return f"{said}: size=({first}, {second}) is not (height, width) in that order"
    literals = {}
    for name, default in (("mode", "nearest"), ("align_corners", None), ("antialias", False)):
        node = keywords.get(name)
        literals[name] = default if node is None else _literal(node)
        if literals[name] is _UNREAD:
            return f"{said}: {name}={ast.unparse(node)} is not a literal the kit can read"
    kernel = _kernel(literals)
    if kernel.startswith("!"):
        return f"{said}: {kernel[1:]}"
    dtype = _compute_dtype(method, call)
    if dtype.startswith("!"):
        return f"{said}: {dtype[1:]}"
    prefix = _prefix(method)
    if isinstance(prefix, str):
        return f"{said}: {prefix}"
    square = any(  # the table reshaped as num_positions ** 0.5 a side
        isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
        and isinstance(node.right, ast.Constant) and node.right.value == 0.5
        for node in ast.walk(method)
    )
    return {
        "kernel": kernel,
        "prefix_tokens": prefix,
        "compute_dtype": dtype or None,
        "square": square,
        "said": said,
    }


def _helper_call(cls: ast.ClassDef, method: ast.FunctionDef, calls) -> dict | str:
    """Qwen3-VL's form: vision_utils' helper given mode and align_corners (literals, or self
    attributes its class sets to literals)."""
    where = f"{cls.name}.{method.name}"
    if len(calls) != 1:
        return f"{where} makes {len(calls)} {HELPER} calls, where the kit reads one"
    call = calls[0]
    said = f"{where}: {HELPER}({_arguments(call)})"
    keywords = {k.arg: k.value for k in call.keywords}
    if None in keywords:
        return f"{said}: **kwargs, whose options the kit cannot read from the code"
    attributes = _self_literals(cls)
    literals = {"antialias": False}
    for name, default in (("mode", "bilinear"), ("align_corners", False)):
        node = keywords.get(name)
        text = None if node is None else ast.unparse(node)
        if node is None:
            literals[name] = default
        elif text in attributes:
            literals[name] = attributes[text]
        else:
            literals[name] = _literal(node)
            if literals[name] is _UNREAD:
                return f"{said}: {name}={text} is not a literal the kit can read"
    kernel = _kernel(literals)
    if kernel.startswith("!"):
        return f"{said}: {kernel[1:]}"
    said += (
        f" ({', '.join(f'{k} {v!r}' for k, v in literals.items())}; its weights float32, a "
        "16-bit table promoted to them)"
    )
    found = {
        "kernel": kernel,
        "prefix_tokens": 0,
        "compute_dtype": "float32",
        "square": True,
        "said": said,
    }
    merge = keywords.get("spatial_merge_size")  # > 1: the helper emits merge blocks
    if merge is not None:
        found["merge"] = ast.unparse(merge)
    return found


def _self_literals(cls: ast.ClassDef) -> dict:
    """``self.NAME = literal`` in a class's methods: {"self.NAME": value}."""
    found = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = ast.unparse(node.targets[0])
            if target.startswith("self."):
                try:
                    found[target] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return found


def _arguments(call: ast.Call) -> str:
    """A call's arguments as its code writes them."""
    return ", ".join(
        [ast.unparse(a) for a in call.args]
        + [f"{k.arg}={ast.unparse(k.value)}" if k.arg else f"**{ast.unparse(k.value)}"
           for k in call.keywords]
    )


_UNREAD = object()  # a keyword's value that is not a literal


def _literal(node):
    """A keyword's literal value, or _UNREAD."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _UNREAD


def _kernel(literals: dict) -> str:
    """The KERNELS entry F.interpolate's options name (the one that holds wherever an axis
    shrinks), or "!why"."""
    mode = literals["mode"]
    options = {
        "mode": mode,
        "antialias": bool(literals["antialias"]),
        "align_corners": bool(literals["align_corners"]),
    }
    found = [
        name
        for name, kernel in resize.KERNELS.items()
        if kernel.torch == options and kernel.torch_shrinks and kernel.offset is None
    ]
    if len(found) != 1:
        said = ", ".join(f"{k}={v!r}" for k, v in options.items())
        many = "no" if not found else "more than one"
        return f"!{said} is {many} kernel of the kit's ({', '.join(resize.KERNELS)})"
    return found[0]


def _compute_dtype(method: ast.FunctionDef, call: ast.Call) -> str:
    """"float32" where the call's table is cast to float32 first, "" where it is not cast, or
    "!why" for a cast elsewhere in the function (before the call, the kit would misplace it)."""
    argument = call.args[0]
    upcast = _cast(argument)
    if upcast not in (None, "float32"):
        return f"!its table is cast to {upcast} for the resize, which the kit does not read"
    for node in ast.walk(method):
        target = _cast(node)
        if node is argument or target is None or target == "back":
            continue
        return f"!a cast to {target} ({ast.unparse(node)}) the kit does not place"
    return upcast or ""


def _cast(node) -> str | None:
    """What dtype a call casts to: "float32", another torch dtype's name, "back" (to a dtype
    held in a variable: the table's own, after the resize), or None (not a cast)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    method = node.func.attr
    if method in CASTS and not node.args and not node.keywords:
        return "float32" if method in FLOAT32 else method
    if method != "to":
        return None
    given = [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")]
    dtypes = [
        a for a in given if isinstance(a, ast.Attribute) and ast.unparse(a).startswith("torch.")
    ]
    if dtypes:
        name = dtypes[0].attr
        return "float32" if name in FLOAT32 else name
    names = [k for k in node.keywords if k.arg == "dtype"]
    return "back" if names else None


def _prefix(method: ast.FunctionDef) -> int | str:
    """The rows before the grid: K of the slice ``[:, K:]`` that takes the grid's rows (0 where
    the whole table is the grid), or why it cannot be read."""
    starts = set()
    for node in ast.walk(method):
        if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple):
            continue
        items = node.slice.elts
        if len(items) != 2 or not _whole(items[0]) or not isinstance(items[1], ast.Slice):
            continue
        rows = items[1]
        if rows.lower is not None and rows.upper is None and rows.step is None:
            try:
                starts.add(ast.literal_eval(rows.lower))
            except ValueError:
                return f"the grid's rows start at {ast.unparse(rows.lower)}, not a literal"
    if len(starts) > 1:
        return f"the grid's rows are sliced from {sorted(starts)}: the kit reads one start"
    return starts.pop() if starts else 0


def _whole(node) -> bool:
    return isinstance(node, ast.Slice) and node.lower is None and node.upper is None


# --- the rotation and the token order, from the model's code run -----------------------------


def _rope2d(tower: Tower, reading: Reading) -> Part:
    found = _rotary(tower, reading)
    options = {"spec": found.spec, "head_dim": found.head_dim}
    sources = {"spec": found.said, "head_dim": found.head_said}
    if found.prefix:  # the CLS (and registers) the spec leaves unturned
        options["prefix_tokens"] = found.prefix
        sources["prefix_tokens"] = found.settings_sources.get("prefix", found.ids_said)
    if reading.grid is not None and found.grid_matters:
        options["grid"] = list(reading.grid)
        sources["grid"] = reading.grid_source
    return Part(options, sources)


def _rope2d_ids(tower: Tower, reading: Reading) -> Part:
    found = _rotary(tower, reading)
    options = {"builder": found.builder, **found.settings}
    sources = dict.fromkeys(options, found.ids_said)
    sources.update(found.settings_sources)
    return Part(options, sources)


def _rotary(tower: Tower, reading: Reading) -> vision_owner.Rotary:
    if "rotary" not in tower._asked:
        try:
            tower._asked["rotary"] = vision_owner.rotary(reading, _file(reading))
        except UsageError as error:
            tower._asked["rotary"] = error
    answer = tower._asked["rotary"]
    if isinstance(answer, UsageError):
        checks.refuse(tower.where, str(answer))
    return answer


def _pos2d_table(tower: Tower, reading: Reading) -> Part:
    found = vision_owner.sincos_method(reading.source or "", reading.class_name)
    if found is None or reading.grid is None:
        checks.refuse(
            tower.where,
            f"{reading.model_type}'s positions are not a fixed 2-D sin-cos table (its code "
            "fills none with a sin-cos builder): check a learned table with --kind "
            "pos2d_resize, a rotation with --kind rope2d",
        )
    rule, _, said = vision_owner.sincos_rule(reading, _file(reading), found)
    options = {"rule": rule, "dim": reading.config.hidden_size, "grid": list(reading.grid)}
    sources = {"rule": said, "dim": f"config: hidden_size {options['dim']}"}
    return Part(options, {**sources, "grid": reading.grid_source})


PARTS = {
    "pos2d_resize": _pos2d_resize,
    "pos2d_table": _pos2d_table,
    "rope2d": _rope2d,
    "rope2d_ids": _rope2d_ids,
}

