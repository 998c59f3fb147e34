"""pos2d_table: f(grid, dim) -> (h*w, dim) float32, a fixed 2-D sin-cos position table.

Contract. ``grid`` (h, w), a tuple of ints; ``dim`` an int, a multiple of 4. Returns the
table of the (h, w) grid of patches, rows in raster order (row i, column j is row i * w + j),
in float32, as the sources store it, by the model's rule (``backends.grid.SINCOS2D_RULES``,
option ``rule``, default "mae"; the rule's own options ``temperature``, ``base_size``,
``interpolation_scale``; ``grid`` the model's, default 4 x 6, and ``dim``, default 16):

- "mae" and "diffusers" compute in float64 and store float32: the table must be the float64
  table rounded once to float32, bit for bit (a port that computes in float32 is named so);
- "timm" and "big_vision" compute in float32 themselves (torch, jnp): within
  ``positional.tolerance("float32", max_angle)``, max_angle = (max(h, w) - 1) times the highest
  frequency, 1 (the bound of a float32 sin-cos table, derived in its docstring).

Cases: a square grid and a non-square one both ways ((h, w) and (w, h)).

Named mistakes (float64 results from the library's rules, most specific first): another rule's
table, said by what differs (the quarters' order, MAE's [sin w, cos w, sin h, cos h] against
timm's [sin h, sin w, cos h, cos w]; omega's denominator, D/4 against big_vision's D/4 - 1;
diffusers' positions rescaled by base_size / n); h and w exchanged (patch (i, j) encoded as
(j, i)); the rows in column-major order (torch.meshgrid's 'ij' for np.meshgrid's 'xy'); the
(w, h) grid's table (meshgrid's arguments swapped); the default temperature
10000 where the config gives another; computed in float32 where the rule computes in float64.
"""

from __future__ import annotations

import numpy as np

from backends import grid as grids
from backends import positional, validation
from embedding_parity.conformance import numerics
from embedding_parity.conformance.kinds.base import Case, Kind, conforms, differs
from embedding_parity.usage import UsageError

GRID, DIM = (4, 6), 16
MOST_SIDE = 64  # the largest grid side the battery builds
TEMPERATURE = 10000.0  # big_vision's and timm's default
FLOAT64_RULES = ("mae", "diffusers")  # computed in float64 and stored float32: bit for bit
QUARTERS = {
    "mae": "[sin w, cos w, sin h, cos h]",
    "big_vision": "[sin w, cos w, sin h, cos h]",
    "timm": "[sin h, sin w, cos h, cos w]",
    "diffusers": "[sin w, cos w, sin h, cos h]",
}
DENOMINATOR = {"mae": "D/4", "big_vision": "D/4 - 1", "timm": "D/4", "diffusers": "D/4"}
EXCHANGED = "h and w exchanged: patch (i, j) encoded as (j, i)"
COLUMN_MAJOR = (
    "rows in column-major order: row j * h + i is patch (i, j) (torch.meshgrid's default "
    "indexing 'ij' where np.meshgrid's 'xy' is meant)"
)
SIDES = "the (w, h) grid's table: the grid's sides swapped (meshgrid(grid_h, grid_w))"
IN_FLOAT32 = (
    "computed in float32: within a float32 table's bound of the table, not its bits (the rule "
    "computes in float64 and rounds once to float32)"
)


def grids_options() -> tuple[str, ...]:
    """Every rule's own option names (validation.SINCOS2D_RULES)."""
    return tuple(dict.fromkeys(n for names in validation.SINCOS2D_RULES.values() for n in names))


def options_of(options: dict) -> dict:
    """The rule, checked: UsageError in one line for an option it cannot take."""
    rule = options.get("rule", "mae")
    given = {k: options[k] for k in grids_options() if k in options}
    grid = options.get("grid", GRID)
    try:
        (h, w), dim, _, given = validation.check_sincos2d(
            grid, options.get("dim", DIM), rule, 0, given
        )
    except ValueError as error:
        raise UsageError(f"pos2d_table: {error}") from None
    if max(h, w) > MOST_SIDE:
        raise UsageError(f"grid {[h, w]!r}: at most {MOST_SIDE} a side")
    return {"rule": rule, "dim": dim, "options": given, "grid": [h, w]}


class Pos2dTable(Kind):
    name = "pos2d_table"
    contract = (
        "f(grid, dim) -> table (h*w, dim) float32: the fixed 2-D sin-cos table of an (h, w) grid "
        "of patches, rows in raster order, by the model's rule"
    )
    exact = False  # per rule: exact_for

    def cases(self, options):
        rule = options_of(options)
        h, w = rule["grid"]
        rule |= {"dtype": "float32"}  # as the sources store the table
        side = max(h, w)
        wide = [h, w] if h != w else [h, w + 3]
        found = []
        for label, shape in (("square", [side, side]), ("non-square", wide)):
            found.append(Case(f"table {shape[0]}x{shape[1]}", label, rule | {"shape": shape}))
        flipped = wide[::-1]
        label = "non-square transposed"
        found.append(Case(f"table {flipped[0]}x{flipped[1]}", label, rule | {"shape": flipped}))
        return found

    def describe(self, options):
        rule = options_of(options)
        said = ", ".join(f"{k} {v:g}" for k, v in rule["options"].items())
        how = (
            "the float64 table rounded once, bit for bit"
            if rule["rule"] in FLOAT64_RULES
            else "computed in float32 as its source, within the float32 table's bound"
        )
        return (
            f"{self.contract}: {rule['rule']}'s (quarters {QUARTERS[rule['rule']]}, omega's "
            f"denominator {DENOMINATOR[rule['rule']]}{', ' + said if said else ''}), dim "
            f"{rule['dim']}; {how}"
        )

    def arguments(self, params):
        return [tuple(params["shape"]), params["dim"]]

    def most_elements(self, params):
        return int(np.prod(params["shape"])) * params["dim"]

    def reference(self, params, **changes):
        p = {**params, **changes}
        h, w = p["shape"]
        return grids.SINCOS2D_RULES[p["rule"]](h, w, p["dim"], **p["options"])

    def exact_for(self, params):
        return params["rule"] in FLOAT64_RULES

    def tolerance(self, params, dtype):
        """A float32 sin-cos table's bound (positional.tolerance): angles up to max(h, w) - 1
        times the highest frequency, 1 in every rule (k = 0); 0 where bit for bit."""
        if self.exact_for(params):
            return 0.0
        return self._float32_bound(params)

    def _float32_bound(self, params) -> float:
        h, w = params["shape"]
        base = params["options"].get("temperature", TEMPERATURE)
        return positional.tolerance("float32", max(h, w) - 1, base=base)

    def compare(self, params, actual):
        if not self.exact_for(params):
            return super().compare(params, actual)
        reference = self.reference(params)
        if actual.shape != reference.shape:
            return differs(f"shape {actual.shape} where {reference.shape} is expected")
        if actual.dtype.name != "float32":
            return differs(f"returns {actual.dtype.name}, where the table is float32")
        expected = self.rounded(reference, "float32")
        if numerics.same_bits(actual, expected):
            return conforms("bit-identical: the float64 table rounded once to float32")
        found = numerics.distance(actual, reference, "float32")
        bound = self._float32_bound(params)
        if numerics.worst_ratio(actual, reference, bound)[0] <= 1:
            named = IN_FLOAT32
        else:
            error = numerics.max_error(actual, reference)
            named = self.diagnose(params, actual, "float32", bound, error)
        return differs(
            f"{found}{'; ' + named if named else ''}",
            mismatch=numerics.mismatch(actual, expected, "float32") or None,
        )

    def mistakes(self, params):
        rule, (h, w), dim = params["rule"], params["shape"], params["dim"]
        table = self.reference(params)
        found = []
        for other in grids.SINCOS2D_RULES:
            if other != rule:
                other_table = self.reference(params, rule=other, options={})
                found.append((_other_rule(rule, other), other_table))
        swapped = self.reference(params, shape=[w, h])
        found += [
            (EXCHANGED, swapped.reshape(w, h, dim).transpose(1, 0, 2).reshape(h * w, dim)),
            (COLUMN_MAJOR, table.reshape(h, w, dim).transpose(1, 0, 2).reshape(h * w, dim)),
            (SIDES, swapped),
        ]
        temperature = params["options"].get("temperature", TEMPERATURE)
        if temperature != TEMPERATURE:
            name = f"the default temperature {TEMPERATURE:g} where the rule's is {temperature:g}"
            found.append((name, self.reference(params, options={})))
        kept = []  # those that differ from the table; one equal to an earlier named with it
        for name, result in found:
            same = [i for i, (_, r) in enumerate(kept) if np.array_equal(r, result)]
            if same:
                earlier, its = kept[same[0]]
                kept[same[0]] = (f"{earlier} (at this grid the same as: {name})", its)
            elif not np.array_equal(result, table):
                kept.append((name, result))
        return kept


def _other_rule(rule: str, other: str) -> str:
    """Another rule's table, said by what differs from ``rule``'s."""
    said = []
    if QUARTERS[other] != QUARTERS[rule]:
        said.append(f"the quarters {QUARTERS[other]} for {QUARTERS[rule]}")
    if DENOMINATOR[other] != DENOMINATOR[rule]:
        said.append(f"omega's denominator {DENOMINATOR[other]} for {DENOMINATOR[rule]}")
    if "diffusers" in (rule, other):
        said.append(
            "positions rescaled by base_size / n" if other == "diffusers" else "positions "
            "not rescaled by base_size / n and interpolation_scale"
        )
    return f"{other}'s table: {'; '.join(said)}"
