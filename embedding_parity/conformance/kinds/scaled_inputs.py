"""scaled_inputs: f(token_table, token_ids, inputs_embeds) -> x, a model's input embeddings
with its scale applied as the model applies it; bit for bit.

Exactly one of token_ids and inputs_embeds is given, the other None, as a model's forward
takes them. The option ``embedding_scale`` {"rule", "value"} names the model's rule
(``backends.positional.SCALE_RULES``: where the scale applies and how it is rounded) and its
number; ``--config`` or ``--model`` sets it from a model's config, or a row of the matrix from
``MODELS`` below. Gemma and MiniCPM scale in the embedding module, by a float32 buffer cast to
the rows' dtype, so embeddings given instead are not scaled; Granite scales after the lookup
by a Python float, embeddings given too; Falcon-H1 scales by a Python float on the ids path
only. The mistakes: the scale applied twice (a port that also scales in forward what the
module scaled: TransformerLens PR #1315), applied to given embeddings where the model does
not, missing there where it does, missing altogether, and rounded otherwise than the model.
"""

from __future__ import annotations

import math

import numpy as np

from backends import positional, validation
from embedding_parity.configs import checks
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import BAD_IDS, VOCAB, Case, Kind, T, differs
from embedding_parity.conformance.kinds.lookup import battery_ids
from embedding_parity.conformance.numerics import FLOATS
from embedding_parity.usage import UsageError

DIM = 16
# The models the matrix checks, each rule's number as its config.json gives it.
MODELS = {
    "granite": {
        "value": 12.0,
        "source": "embedding_multiplier of IBM's Granite 3.x and 4.1 config.json files",
    },
    "falcon_h1": {
        "value": 5.656854249492381,
        "source": "embedding_multiplier of tiiuae/Falcon-H1-0.5B's config.json (sqrt(32))",
    },
    "minicpm": {
        "value": 12.0,
        "source": "scale_emb of openbmb/MiniCPM3-4B's config.json (MiniCPM3Config's default)",
    },
    "gemma": {
        "value": math.sqrt(2304),
        "source": "sqrt(hidden_size) of google/gemma-3-1b's 2304 (Gemma3TextConfig's default)",
    },
}


def checked_scale(options: dict) -> dict:
    """The option ``embedding_scale`` as {"rule", "value"}; UsageError naming the fix."""
    scale = options.get("embedding_scale")
    if scale is None:
        raise UsageError(
            "--kind scaled_inputs needs the model's rule: --config CONFIG.json or --model NAME "
            f"(a model that scales its input embeddings: {', '.join(positional.SCALE_RULES)})"
        )
    rules = positional.SCALE_RULES
    if not isinstance(scale, dict) or scale.get("rule") not in rules:
        raise UsageError(
            f"embedding_scale {scale!r}: give {{'rule': one of {', '.join(rules)}, 'value': a number}}"
        )
    # the config readers' bound, for a scale given without a config too (runner.run's options)
    value = checks.multiplier(scale.get("value"), "value", "embedding_scale")
    return {"rule": scale["rule"], "value": value}


def width(params: dict) -> int:
    """The battery's rows: DIM wide, or Gemma's hidden_size, whose square root is its scale."""
    if params["rule"] == "gemma":
        return round(params["value"] ** 2)
    return DIM


class ScaledInputs(Kind):
    name = "scaled_inputs"
    contract = (
        "f(token_table, token_ids, inputs_embeds) -> x, exactly one of token_ids and "
        "inputs_embeds given (the other None): token_table[token_ids] or inputs_embeds, times "
        "the model's scale where its rule applies, rounded as the model rounds it"
    )

    def cases(self, options):
        scale = checked_scale(options)
        found = []
        for dtype in FLOATS:
            for path, shape in (("ids", (T,)), ("ids", (3, T)), ("given", (3, T))):
                params = {"dtype": dtype, "shape": shape, "seed": len(found), "path": path, **scale}
                what = (
                    f"{len(shape)}-D token_ids"
                    if path == "ids"
                    else f"inputs_embeds {(*shape, width(scale))}"
                )
                found.append(Case(f"{path} {dtype}", what, params))
        for label, bad in BAD_IDS.items():
            params = {
                "dtype": "float32",
                "shape": (3,),
                "seed": 0,
                "path": "ids",
                "bad": bad,
                **scale,
            }
            found.append(Case(f"bad id: {label}", f"token_ids [3, {bad}, 5]", params))
        return found

    def describe(self, options):
        scale = checked_scale(options)
        rule = positional.SCALE_RULES[scale["rule"]]
        where = "token rows and given embeddings" if rule["given"] else "token rows only"
        how = (
            "a float32 buffer cast to the rows' dtype"
            if rule["rounding"] == "buffer"
            else "a Python float (a 16-bit product formed in float32)"
        )
        return (
            f"{self.contract}; {scale['rule']}: {rule['field']} = {scale['value']:.9g} on the "
            f"{where}, by {how} ({rule['source']})"
        )

    def argument_names(self, params):
        return ["token_table", "token_ids", "inputs_embeds"]

    def arguments(self, params):
        dtype = validation.resolve_dtype(params["dtype"])
        rng = np.random.default_rng(params["seed"])
        dim = width(params)
        table = rng.standard_normal((VOCAB, dim)).astype(dtype)
        if params["path"] == "given":
            return [table, None, rng.standard_normal((*params["shape"], dim)).astype(dtype)]
        return [table, battery_ids({**params, "table": None}), None]

    def reference(self, params):
        table, ids, given = self.arguments(params)
        scaled = positional.scaled_inputs(
            table, ids, given, rule=params["rule"], value=params["value"]
        )
        return scaled.astype(np.float64)

    def mistakes(self, params):
        table, ids, given = self.arguments(params)
        rule, value = positional.SCALE_RULES[params["rule"]], params["value"]
        dtype = table.dtype
        rows = (table[ids] if given is None else given).astype(np.float64)
        factor = float(positional.scale_factor(params["rule"], value, dtype))
        once = positional.scaled_inputs(table, ids, given, rule=params["rule"], value=value)
        if given is not None and not rule["given"]:
            passed_on = (
                "the scale applied to given embeddings, where the model passes them on as they "
                "are (only its own lookup is scaled)"
            )
            return [(passed_on, rows * factor)]
        doubled = (
            "the scale applied twice: once where the model applies it and again in forward "
            "(TransformerLens PR #1315)"
        )
        twice = (doubled, once.astype(np.float64) * factor)
        missing = (
            "no scale on given embeddings, where the model scales them too"
            if given is not None
            else "no scale (the rows as stored)"
        )
        found = [twice, (missing, rows)]
        if rule["rounding"] == "scalar" and dtype != np.float64:
            rounded = float(np.asarray(value).astype(dtype))
            if rounded != factor:
                named = (
                    f"the multiplier rounded to {dtype.name} first ({rounded:.6g}): a scalar "
                    "that takes the rows' dtype (JAX's weak type), where torch forms the "
                    "product in float32"
                )
                found.append((named, rows * rounded))
        if rule["rounding"] == "buffer" and dtype != np.float64 and value != factor:
            named = (
                f"the scale unrounded ({value:.9g}): the model keeps it as a float32 buffer "
                f"cast to {dtype.name} ({factor:.6g})"
            )
            found.append((named, rows * value))
        return found

    def classify_bad(self, params, actual):
        table, ids, _ = self.arguments(params)
        if actual.shape != (*ids.shape, table.shape[1]):
            return differs(f"returns {actual.dtype.name} {actual.shape} without raising")
        row = actual.reshape(-1, table.shape[1])[1]
        bad = params["bad"]
        clamped, wrapped = min(max(bad, 0), VOCAB - 1), bad % VOCAB
        for name, index in {
            f"clamps to row {clamped}": clamped,
            f"wraps to row {wrapped}": wrapped,
        }.items():
            scaled = positional.scaled_inputs(
                table, np.array([index]), rule=params["rule"], value=params["value"]
            )[0]
            if numerics.same_bits(row, scaled):
                return differs(f"{name}: a silent wrong answer")
        return differs("a row that is no table row, without raising: a silent wrong answer")
