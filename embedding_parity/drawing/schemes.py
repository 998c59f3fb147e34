"""Plots of the positional schemes, drawn under the heatmaps: the sinusoidal table, and the
RoPE scores that depend only on the distance m - n. ``plots(done)`` returns
``draw(subfigure)`` for a run's scheme, or None for learned positions."""

from __future__ import annotations

import numpy as np

import backends
from backends import positional

# The classic picture needs a few wavelengths: 128 positions, drawn even if max_seq_len < 128.
TABLE_POSITIONS = 128
MAX_SCORE_POSITIONS = 64  # positions on each axis of the RoPE score plot


def plots(done):
    """draw(subfigure) for the scheme of ``done`` (a results.parity.Run), or None."""
    scheme = done.scheme
    if scheme.get("name") == "sinusoidal":
        dim = done.results[0].output.shape[-1]
        return sinusoidal(
            dim,
            scheme["layout"],
            scheme["base"],
            scheme["max_seq_len"],
            scheme["start"],
            scheme["stop"],
        )
    if scheme.get("name") == "rope":
        return rope(
            done.results,
            scheme["token_table"],
            done.token_ids,
            scheme["layout"],
            scheme["base"],
            scheme["max_seq_len"],
        )
    if scheme.get("name") == "configured":
        return wavelengths(scheme["config"], scheme["stop"])
    return None


def wavelengths(config, stop: int):
    """How a model's rule stretches its context: each rotation pair's wavelength 2 pi / w_k
    before scaling (rope_theta alone) and after (the rule, at the run's length max(positions)
    + 1 = ``stop``, and for the length rules at max_position_embeddings too), and their
    ratio; the original and the stretched context lengths marked. A model whose layers rotate
    differently: each layer type's curve on one axis (a NoPE type named, with no curve). A
    multimodal model (M-RoPE): which of the t, h and w rows turns each pair, its layout beside
    the other's."""
    if config.layer_types:
        return _layer_wavelengths(config)
    rotated = config.rotary_dim or config.head_dim
    scaling = config.scaling
    before = positional.frequencies(rotated, config.rope_theta)
    afters = [(f"after, at length {stop}", stop)]
    longest = config.max_position_embeddings
    if scaling and scaling["rope_type"] in positional.LENGTH_RULES and longest:
        if scaling["rope_type"] == "dynamic":  # unscaled up to L: drawn where it stretches most
            longest = int(scaling["max_position_embeddings"] * scaling["factor"])
        if longest != stop:
            afters.append((f"after, at length {longest}", longest))
    pairs = np.arange(len(before))

    def draw(subfigure):
        from matplotlib.ticker import LogFormatter

        left, right = subfigure.subplots(1, 2, width_ratios=[1.3, 1])
        left.plot(
            pairs, 2 * np.pi / before, "k-", lw=2, label=f"before: rope_theta {config.rope_theta:g}"
        )
        for (label, seq_len), style in zip(afters, ("C3--", "C0:")):
            w, attention = positional.rope_parameters(rotated, config.rope_theta, scaling, seq_len)
            factor = f", cos and sin x {attention:.4g}" if attention != 1 else ""
            left.plot(pairs, 2 * np.pi / w, style, lw=2, label=f"{label}{factor}")
            if not config.mrope:
                right.plot(pairs, before / w, style, lw=2, label=label)
        original = (scaling or {}).get("original_max_position_embeddings")
        for length, name, colour in (
            (original, "original context", "grey"),
            (config.max_position_embeddings, "max_position_embeddings", "black"),
        ):
            if length:
                left.axhline(length, color=colour, ls="-.", lw=1, label=f"{name} {int(length)}")
        rule = "no scaling" if scaling is None else scaling["rope_type"]
        left.set(
            yscale="log",
            xlabel=f"rotation pair k (of {rotated // 2}: dims {config.layout} layout)",
            ylabel="wavelength 2 pi / w_k (positions)",
            title=f"{config.name}: each pair's wavelength, {rule}",
        )
        left.legend(fontsize=7, loc="upper left")
        if config.mrope:
            _mrope_map(right, config)
            return
        right.set(
            yscale="log",
            xlabel="rotation pair k",
            ylabel="wavelength after / before",
            title="the stretch: 1 = the pair turns as without scaling",
        )
        right.yaxis.set_major_formatter(LogFormatter())  # 8, not 8 x 10^0
        right.yaxis.set_minor_formatter(LogFormatter())
        # linear, llama3 and YaRN stretch the slowest pairs by the factor: their plateau (the
        # length rules' stretch grows with the length instead)
        stretch = (scaling or {}).get("factor")
        if stretch and scaling["rope_type"] not in positional.LENGTH_RULES:
            right.axhline(stretch, color="grey", ls="-.", lw=1, zorder=1)
            right.text(pairs[-1], stretch * 1.08, f"factor {stretch:g}", ha="right", fontsize=8)
            right.set_ylim(top=max(right.get_ylim()[1], stretch * 1.6))  # room for the label
        right.legend(fontsize=7, loc="upper left")

    return draw


def _layer_wavelengths(config):
    """Each layer type's wavelengths on one axis (left), and which layer rotates by which type
    (middle): Gemma 3's sliding layers at 10 000 beside every sixth at 1e6 stretched by 8;
    Gemma 4's proportional slots that stand still named. Llama 4's query temperature on its
    NoPE layers against the position (right), where the config tunes it."""
    types = config.layer_types
    count = sum(len(t.layers) for t in types)
    temperature = (config.attention or {}).get("temperature")

    def draw(subfigure):
        ratios = [1.3, 0.7, 1.0] if temperature else [1.3, 1.0]
        panels = subfigure.subplots(1, len(ratios), width_ratios=ratios)
        left, right = panels[:2]
        for n, layer_type in enumerate(types):
            label = f"{layer_type.name} ({len(layer_type.layers)} layers): {layer_type.brief()}"
            if not layer_type.rotates:
                left.plot([], [], "s", color=f"C{n}", label=label)  # NoPE: named, no curve
                continue
            rotated = layer_type.rotary_dim or layer_type.head_dim or config.head_dim
            w, _ = positional.rope_parameters(rotated, layer_type.rope_theta, layer_type.scaling)
            turning = np.flatnonzero(w)  # the proportional rule's other slots stand still
            if len(turning) < len(w):
                label += f"; pairs {len(turning)}..{len(w) - 1} stand still (w = 0)"
            left.plot(turning, 2 * np.pi / w[turning], f"C{n}-", lw=2, label=label)
        if config.max_position_embeddings:
            left.axhline(
                config.max_position_embeddings,
                color="black",
                ls="-.",
                lw=1,
                label=f"max_position_embeddings {config.max_position_embeddings}",
            )
        left.set(
            yscale="log",
            xlabel=f"rotation pair k ({config.layout} layout)",
            ylabel="wavelength 2 pi / w_k (positions)",
            title=f"{config.name}: each layer type's wavelengths",
        )
        left.legend(fontsize=7, loc="upper left")
        from matplotlib.colors import ListedColormap

        strip = np.zeros((1, count))
        for n, layer_type in enumerate(types):
            strip[0, list(layer_type.layers)] = n
        colours = [f"C{n}" for n in range(len(types))]
        right.imshow(
            strip, aspect="auto", cmap=ListedColormap(colours), vmin=-0.5, vmax=len(types) - 0.5
        )
        right.set(
            yticks=[],
            xlabel=f"layer (0 .. {count - 1})",
            title="each layer's type\n(colours as on the left)",
        )
        if temperature:
            _temperature(panels[2], config, temperature, types)

    return draw


def _temperature(axis, config, temperature, types):
    """Llama 4's query temperature 1 + attn_scale log1p(floor((p + 1) / floor_scale)) on its
    NoPE layers against the position p, 1 on its RoPE layers: a step every floor_scale."""
    longest = config.max_position_embeddings or 100 * temperature["floor_scale"]
    p = np.unique(np.geomspace(1, longest, 4000).astype(np.int64))
    steps = np.floor((p + 1) / temperature["floor_scale"])
    for n, layer_type in enumerate(types):
        tuned = not layer_type.rotates
        value = 1 + temperature["attn_scale"] * np.log1p(steps) if tuned else np.ones(len(p))
        label = f"{layer_type.name} ({'NoPE: tuned' if tuned else 'RoPE: 1'})"
        axis.step(p, value, where="post", color=f"C{n}", lw=2, label=label)
    axis.axvline(temperature["floor_scale"], color="grey", ls="-.", lw=1)
    axis.text(
        temperature["floor_scale"] * 1.15,
        1.01,
        f"floor_scale {temperature['floor_scale']}",
        fontsize=8,
    )
    axis.set(
        xscale="log",
        xlabel="query position p",
        ylabel="factor on the query",
        title=f"query temperature: 1 + {temperature['attn_scale']:g} log1p(floor(\n(p + 1) / "
        f"{temperature['floor_scale']})) on the NoPE layers",
    )
    axis.legend(fontsize=7, loc="upper left")


def _mrope_map(axis, config):
    """Which row (t, h or w) turns each frequency pair: the config's layout above the other
    (Qwen2-VL's chunks, Qwen3-VL's t h w t h w ...), both at the config's section, so the two
    rows differ by the layout alone."""
    from matplotlib.colors import ListedColormap

    layout, section = config.mrope
    other, owner = ("interleaved", "Qwen3-VL") if layout == "chunked" else ("chunked", "Qwen2-VL")
    pairs = (config.rotary_dim or config.head_dim) // 2
    rows = np.stack([positional.mrope_axes(pairs, section, kind) for kind in (layout, other)])
    axis.imshow(rows, aspect="auto", cmap=ListedColormap(["C0", "C1", "C2"]), vmin=-0.5, vmax=2.5)
    axis.set(
        yticks=[0, 1],
        yticklabels=[f"{layout}\n(this model)", f"{other}\n(as {owner})"],
        xlabel=f"frequency pair k (of {pairs}; fast to slow)",
        title=f"M-RoPE's rows: t blue, h orange, w green\n(both at this model's section t "
        f"{section[0]}, h {section[1]}, w {section[2]})",
    )


def sinusoidal(dim: int, layout: str, base: float, max_seq_len: int, start: int, stop: int):
    """The table (positions x dims) and a few of its columns around the rows that were run
    (start .. stop - 1, outlined): TABLE_POSITIONS positions, or all that were run if more,
    ending at the last one run; the end of the layers' table (max_seq_len) is marked when the
    window reaches past it."""
    first = max(0, stop - max(TABLE_POSITIONS, stop - start))
    positions = np.arange(first, first + max(TABLE_POSITIONS, stop - start))

    def draw(subfigure):
        table = positional.sinusoidal_table(positions[-1] + 1, dim, base=base, layout=layout)
        table = table[first:]  # (positions, dim)
        left, right = subfigure.subplots(1, 2, width_ratios=[1.3, 1])
        extent = (first - 0.5, positions[-1] + 0.5, dim - 0.5, -0.5)
        image = left.imshow(
            table.T,
            cmap="RdBu_r",
            vmin=-1,
            vmax=1,
            aspect="auto",
            interpolation="nearest",
            extent=extent,
        )
        left.axvspan(start - 0.5, stop - 0.5, fill=False, ec="black", lw=1.5, label="rows run")
        if max_seq_len <= positions[-1]:
            left.axvline(max_seq_len - 0.5, color="black", ls="--", lw=1, label="max_seq_len")
        left.set(
            xlabel=f"position (the formula at {first}-{positions[-1]}; the layers' table has "
            f"max_seq_len {max_seq_len})",
            ylabel="dim",
            title=f"sinusoidal table, layout {layout!r}, base {base:g}",
        )
        left.legend(fontsize=7, loc="upper right", framealpha=0.9)
        subfigure.colorbar(image, ax=left)
        for column in range(min(dim, 4)):
            is_sin = column % 2 == 0 if layout == "interleaved" else column < dim // 2
            kind = "sin" if is_sin else "cos"
            right.plot(positions, table[:, column], label=f"dim {column} ({kind})")
        right.axvspan(start - 0.5, stop - 0.5, color="grey", alpha=0.2)
        right.set(
            xlabel="position (shaded: rows run)",
            ylabel="value",
            title="a few columns: one frequency per (sin, cos) pair",
        )
        right.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # off the curves

    return draw


def rope(results, token_table, token_ids, layout: str, base: float, num_positions: int):
    """Scores q(m) . k(n) of two tokens rotated to every pair of the first num_positions
    positions (at most MAX_SCORE_POSITIONS, to keep the scatter readable): constant along
    diagonals, because they depend only on m - n."""
    seq = token_ids if token_ids.ndim == 1 else token_ids[0]
    q_id, k_id = seq[0], seq[min(1, len(seq) - 1)]
    positions = np.arange(min(num_positions, MAX_SCORE_POSITIONS))

    def at_every_position(be, token_id):  # (P, dim): the token's row rotated to 0 .. P-1
        rows = np.repeat(token_table[[token_id]], len(positions), axis=0)
        rotated = be.apply_rope(rows, positions, base=base, layout=layout)
        return be.to_numpy(rotated).astype(np.float64)

    def draw(subfigure):
        left, right = subfigure.subplots(1, 2, width_ratios=[1, 1.4])
        m, n = np.meshgrid(positions, positions, indexing="ij")
        for i, r in enumerate(results):
            be = backends.get(r.backend)
            scores = at_every_position(be, q_id) @ at_every_position(be, k_id).T  # [m, n]
            size = 3 + 2 * (len(results) - i)  # later backends drawn smaller, on top
            right.plot((m - n).ravel(), scores.ravel(), "o", ms=size, alpha=0.5, label=r.backend)
            if i == 0:
                top = np.abs(scores).max()
                image = left.imshow(scores, cmap="RdBu_r", vmin=-top, vmax=top)
                subfigure.colorbar(image, ax=left)
                title = f"{r.backend}: q(m) . k(n), token #{q_id} vs #{k_id}"
                left.set(xlabel="key position n", ylabel="query position m", title=title)
        title = "every (m, n) pair: one score per distance m - n"
        right.set(xlabel="m - n", ylabel="score", title=title)
        right.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # off the points

    return draw
